"""agent.understanding on a setting moved to a value ("learning rate down to 1e-4") and the launch after it kept
("same regimen, but 4 GPUs"), a model known only by when it was made, the log typed "logg", a bigger sweep suggested
with its count of trials, and a wish relayed into the docs that the user then hands over ("Sam wants X in the README,
please handle"). New sentences of each kind, not the sets', and near misses that must read as before.

The fixture repository is the benchmark's (bench.agent_understanding.build_fixture), as in tests/test_understanding.py.
"""

from __future__ import annotations

import pytest

from agent.understanding.known import Known
from tests.understanding_support import earlier_turn, read, read_as

# --- a setting moved to a value: set to it, and the launch after it keeps every value ---------------------------------


@pytest.mark.parametrize(
    ("text", "override"),
    [
        ("Bring the learning rate down to 2e-4, 30 steps on 2 GPUs.", "train.lr=2e-4"),
        ("seed up to 11, 25 steps, 2 GPUs please", "train.seed=11"),
    ],
)
def test_a_setting_moved_to_a_value_is_set_to_it(text: str, override: str, known: Known) -> None:
    intent = read(text, known)
    assert (intent.command, intent.clarify) == ("run", None)
    assert override in intent.args.get("set", [])


def test_a_setting_moved_in_an_earlier_story_sets_nothing(known: Known) -> None:
    intent = read("lr went down to 1e-4 last time; launch 20 steps on 2 GPUs", known)
    assert not any(value.startswith("train.lr=") for value in intent.args.get("set", []))


def test_a_negated_move_of_a_setting_is_never_set(known: Known) -> None:
    intent = read("don't take the learning rate down to 1e-4, launch 20 steps on 2 GPUs", known)
    assert not any(value.startswith("train.lr=") for value in intent.args.get("set", []))


def test_the_same_regimen_keeps_the_launch_befores_values(known: Known) -> None:
    first = "Think of it as a prescription: learning rate down to 2e-4, 40 steps, 2 GPUs with dp_shard=2."
    before = read(first, known)
    assert (before.command, before.clarify, before.args.get("steps")) == ("run", None, 40)
    args = {"nproc": 2, "layout": "dp_shard=2", "steps": 40, "overrides": before.args["set"]}
    intent = read("Same regimen, bigger ward: 4 GPUs and dp_shard=4.", known, earlier_turn("launch_run", args, first))
    assert (intent.command, intent.clarify) == ("run", None)
    assert (intent.args["nproc"], intent.args["layout"], intent.args["steps"]) == (4, "dp_shard=4", 40)


# --- a model known only by when it was made: asked -------------------------------------------------------------------


@pytest.mark.parametrize(
    "text", ["fine-tune the chatty model from two weeks ago again", "retrain the checkpoint we exported on Monday"]
)
def test_a_model_known_only_by_its_time_is_asked_about(text: str, known: Known) -> None:
    intent = read(text, known)
    assert intent.clarify is not None


def test_a_time_telling_when_something_else_was_done_is_no_model_pointed_at(known: Known) -> None:
    text = "we compared ways of splitting the model across GPUs last month; bring the README up to date with it"
    assert "model" not in (read(text, known).clarify or "")


# --- the log typed "logg" ---------------------------------------------------------------------------------------------


def test_the_log_typed_with_its_last_letter_doubled_is_read(known: Known) -> None:
    read_as("show me the logg for tp-try", "read", {"path": "runs/tp-try/log.txt"}, known)


# --- a bigger sweep suggested with its count of trials: the sweep, confirmed first ------------------------------------


def test_a_bigger_sweep_suggested_with_its_trials_is_confirmed(known: Known) -> None:
    intent = read("Maybe a bigger sweep would settle it, say 32 trials on configs/long.yaml?", known)
    assert intent.command == "sweep"
    assert (intent.args.get("experiment"), intent.args.get("trials")) == ("configs/long.yaml", 32)


@pytest.mark.parametrize(
    "text",
    [
        "the larger sweep had 24 trials on meshpilot.yaml, right?",
        "don't start a larger sweep with 24 trials on meshpilot.yaml",
    ],
)
def test_a_bigger_sweep_told_of_or_negated_is_no_sweep(text: str, known: Known) -> None:
    assert read(text, known).command != "sweep"


# --- a wish relayed into the docs, handed over by the user ------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "Priya needs the lr-scan numbers in the README. please handle",
        "heads up, Omar wants the layouts-nov results in the docs, pls hndle",
    ],
)
def test_a_relayed_docs_wish_handed_over_updates_the_docs(text: str, known: Known) -> None:
    intent = read(text, known)
    assert (intent.command, intent.clarify) == ("docs", None)


def test_a_relayed_docs_wish_not_handed_over_updates_nothing(known: Known) -> None:
    # (the sweep's results wished for, by someone else, with no hand-over: read as before, no docs written)
    assert read("Omar wants the layouts-nov results in the docs", known).command != "docs"


# --- a word the rules read with its "g" dropped ---------------------------------------------------------------------


def test_a_setting_said_with_its_g_dropped_is_set(known: Known) -> None:
    intent = read("go on, start 30 steps on 2 GPUs, learnin' rate 5e-4 and packin' off", known)
    assert (intent.command, intent.clarify) == ("run", None)
    assert sorted(intent.args["set"]) == ["data.packing=false", "train.lr=5e-4"]


def test_a_quoted_word_ending_in_in_is_left_alone(known: Known) -> None:
    from agent.understanding.normalise import normalise

    assert normalise("show the run 'berlin' please", ()) == "show the run 'berlin' please"


# --- all of "our" runs, as all of "my" runs: the listing --------------------------------------------------------------


def test_all_our_runs_asked_about_lists_them(known: Known) -> None:
    read_as("hey, how are all our runs looking?", "runs", {}, known)


# --- a trial's arms in a sweep: its trials ----------------------------------------------------------------------------


def test_a_sweeps_arms_are_its_trials(known: Known) -> None:
    text = "Picture a study with 6 arms, each a different setup, on meshpilot.yaml - please start the sweep."
    intent = read(text, known)
    assert (intent.command, intent.args.get("trials"), intent.args.get("experiment")) == ("sweep", 6, "meshpilot.yaml")


def test_arms_said_of_anything_else_count_nothing(known: Known) -> None:
    intent = read("the robot demo has 2 arms; launch 20 steps on 2 GPUs", known)
    assert (intent.command, intent.args.get("nproc"), intent.args.get("steps")) == ("run", 2, 20)
