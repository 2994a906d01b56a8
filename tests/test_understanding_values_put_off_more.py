"""agent.understanding on more values a launch must not take as said (beside
tests/test_understanding_values_corrected_and_put_off.py): a setting put off to a later run in more wordings ("for
another day", "down the line", "on the follow-up"), someone else's choice not given yet, two values offered with a
slash or a choice left to the agent, a rate's exponent never a number restated, a rate corrected by a share of itself,
a value moved to another setting, and the launch before the last one. New sentences of each kind, and near misses
that must keep acting.

The fixture repository is the benchmark's (bench.agent_understanding.build_fixture), as in tests/test_understanding.py.
"""

from __future__ import annotations

import pytest

from tests.understanding_support import earlier_turn, read

# --- a setting put off to a later run: held back and asked -------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "train 30 steps, and packing off the time after",
        "train 30 steps on 2 gpus; compile off in a follow-up",
        "launch 10 steps, save fp8 for another day",
        "train 30 steps; for the run after, enable activation checkpointing",
        "train 10 steps; once we relaunch, turn compile off",
        "train 30 steps, and in a second launch warmup 50",
        "train 10 steps, packing off somewhere down the road",
        "train 30 steps and fp8 for the rerun",
    ],
)
def test_a_setting_put_off_in_more_wordings_is_not_applied_now(text, known):
    intent = read(text, known)
    assert intent.command == "run" and intent.clarify
    set_now = " ".join(intent.args.get("set", []))
    assert not any(word in set_now for word in ("compile", "activation", "packing", "fp8", "warmup"))


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("train 30 steps, packing off for this run", {"steps": 30, "set": ["data.packing=false"]}),
        ("train 30 steps, lr 2e-4, no packing", {"steps": 30, "set": ["train.lr=2e-4", "data.packing=false"]}),
        (
            "train 30 steps, lr 2e-4 and weight decay 2e-4",
            {"steps": 30, "set": ["train.lr=2e-4", "train.weight_decay=2e-4"]},
        ),
        ("train 30 steps, lr 2e-4, no, 1e-4", {"steps": 30, "set": ["train.lr=1e-4"]}),
        ("train 30 steps, lr 1e-3/2", {"steps": 30}),
    ],
)
def test_a_setting_for_this_run_still_acts(text, args, known):
    intent = read(text, known)
    assert intent.command == "run" and intent.clarify is None
    assert intent.args.get("steps") == args["steps"]
    for override in args.get("set", []):
        assert override in intent.args.get("set", [])


# --- someone else's choice not given yet: asked ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["train 10 steps with whatever Priya thinks best", "launch 30 steps with Ana's settings when she has them"],
)
def test_someone_elses_choice_still_to_come_is_asked(text, known):
    intent = read(text, known)
    assert intent.command == "run" and intent.clarify and "Which settings" in intent.clarify


# --- two values offered, or the choice left to the agent: asked -----------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "train 30 steps, lr 1e-4/2e-4",
        "train 10 steps, weight decay 0.05/0.1",
        "train 30 steps with lr 2e-4 or warmup 50, your call",
    ],
)
def test_two_values_or_a_choice_left_are_asked(text, known):
    intent = read(text, known)
    assert intent.command == "run" and intent.clarify


# --- a rate's exponent, a share of a rate, a value moved to another setting -----------------------------------------


def test_a_rate_exponent_is_no_number_restated(known):
    intent = read("train 10 steps, lr 5e-4, actually 50", known)
    assert intent.clarify and "train.lr=5e-50" not in intent.args.get("set", [])


@pytest.mark.parametrize(
    "text", ["train 30 steps, lr 4e-4, no, half that", "train 10 steps, weight decay 0.1, actually a tenth of that"]
)
def test_a_rate_corrected_by_a_share_is_asked(text, known):
    intent = read(text, known)
    assert intent.command == "run" and intent.clarify
    assert not intent.args.get("set")


@pytest.mark.parametrize(
    "text",
    [
        "train 30 steps, lr 1e-4, oops, I meant weight decay 1e-4",
        "train 10 steps, lr 0.05, no, that was the weight decay",
        "train 30 steps, lr 2e-4, no, weight decay 2e-4",
    ],
)
def test_a_value_moved_to_another_setting_is_asked(text, known):
    intent = read(text, known)
    assert intent.command == "run" and intent.clarify
    assert not any(o.startswith("train.lr=") for o in intent.args.get("set", []))


def test_a_value_moved_in_a_follow_up_is_asked(known):
    earlier = earlier_turn("launch_run", {"steps": 30, "overrides": ["train.lr=2e-4"]}, "train 30 steps, lr 2e-4")
    intent = read("oops, I meant weight decay 2e-4", known, earlier)
    assert intent.command == "run" and intent.clarify


# --- the launch before the last one: asked --------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["train what we did before the last one", "redo what I did before last time"])
def test_the_launch_before_last_is_asked(text, known):
    earlier = earlier_turn("launch_run", {"nproc": 2, "steps": 10}, "train 10 steps on 2 gpus")
    intent = read(text, known, earlier)
    assert intent.clarify


def test_what_we_did_last_time_still_repeats(known):
    earlier = earlier_turn("launch_run", {"nproc": 2, "steps": 10}, "train 10 steps on 2 gpus")
    intent = read("launch what we did last time", known, earlier)
    assert intent.command == "run" and intent.clarify is None and intent.args.get("steps") == 10


# --- two values set against each other, and a value put back to its default ----------------------------------------


def test_two_values_set_against_each_other_are_asked(known):
    intent = read("train 10 steps, weight decay 0.05 vs 0.1, up to you", known)
    assert intent.command == "run" and intent.clarify


@pytest.mark.parametrize(
    "text",
    [
        "train 30 steps, lr 1e-4, actually, keep the lr at its default",
        "train 10 steps, lr 2e-4; no, reset lr to default",
    ],
)
def test_a_value_put_back_to_its_default_is_not_launched(text, known):
    intent = read(text, known)
    assert intent.command == "run"
    assert not any(o.startswith("train.lr=") for o in intent.args.get("set", []))
