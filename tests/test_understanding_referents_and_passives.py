"""agent.understanding on what only points at a run, wishes for one, or follows a sweep with a config held back (new
sentences of each kind, not the probe's, each beside a near miss that must keep its reading):

- a referent only a time, a meeting or a text outside the repository identifies ("the sweep we ran two weeks ago",
  "the hyperparameters from the preprint", "Friday's sync", "Jo knows which") is asked about, never the defaults or
  the latest in its place; several runs that fit ("the one that finished") are asked about for a launch too;
- a run wished for that is dreaded, asked of oneself or answered no ("I'd hate to have a job started ...", "do we
  need a new run started ...?"), or put off until someone is back, is held back; a run wanted now is launched;
- "contingent on / dependent on / depending on" is a condition;
- right after a sweep, a config file named in a move negated, put off or made conditional asks; one put in place of
  the sweep's ("same on configs/long.yaml") is still that sweep on it;
- "would you mind waiting for r1?" is a wait; "do we have a run going on 4 GPUs?" lists the runs, never a launch.

The fixture repository is the benchmark's (bench.agent_understanding.build_fixture).
"""

from __future__ import annotations

import pytest

from agent.understanding.known import Known
from tests.understanding_support import earlier_turn, read

SWEPT = earlier_turn("run_sweep", {"trials": 6}, "start a sweep with 6 trials")


def asks(text: str, known: Known, earlier: list | None = None) -> bool:
    return read(text, known, earlier).clarify is not None


# --- referents only a time, a meeting or an outside text identifies --------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "Rerun the config that did best two weeks ago.",
        "Write a PR for the sweep we ran over the last weekend.",
        "Train with the hyperparameters from the preprint on 2 GPUs.",
        "Start the setup from Friday's sync.",
        "Relaunch the layout from last week's meeting.",
        "Open a PR for whichever report is latest, Priya knows which.",
    ],
)
def test_a_referent_outside_the_repository_is_asked_about(text: str, known: Known) -> None:
    assert asks(text, known)


def test_several_runs_that_fit_are_asked_about_for_a_launch(known: Known) -> None:
    intent = read("Start again the one that finished.", known)
    assert intent.command == "run" and "runs/r1" in str(intent.clarify)


@pytest.mark.parametrize(
    ("text", "command", "args"),
    [
        ("launch 2 gpus for 20 steps", "run", {"nproc": 2, "steps": 20}),  # near miss: nothing pointed at
        ("open a PR for the lr-scan report", "pr", {"sweep": "sweeps/lr-scan"}),  # named
    ],
)
def test_a_named_or_plain_request_acts(text: str, command: str, args: dict, known: Known) -> None:
    intent = read(text, known)
    assert (intent.command, intent.clarify) == (command, None)
    assert {key: intent.args.get(key) for key in args} == args


def test_a_run_named_beside_a_time_is_no_vague_referent(known: Known) -> None:  # near miss
    intent = read("relaunch r1, the one from last week", known)
    assert "runs/r1" in str(intent.clarify) and "Neither this conversation" not in str(intent.clarify)


# --- runs wished for, not asked for now ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "I'd hate to have a job started on 4 GPUs while Dana is away.",
        "We'd hate for you to launch 8 GPUs over the weekend.",
        "Do we need a new run started on 4 GPUs?",
        "I need a training run launched on 2 GPUs? Nah.",
        "I'd like a run started on 4 GPUs with dp_shard=4 once she's back from leave.",
    ],
)
def test_a_run_dreaded_asked_of_oneself_or_put_off_is_held(text: str, known: Known) -> None:
    intent = read(text, known)
    assert intent.clarify is not None and intent.command in ("run", "plan")


def test_a_run_wanted_now_is_launched(known: Known) -> None:  # near miss
    intent = read("I'd like a run launched on 2 GPUs for 20 steps", known)
    assert (intent.command, intent.args.get("nproc"), intent.args.get("steps"), intent.clarify) == ("run", 2, 20, None)


def test_a_run_asked_for_politely_is_launched(known: Known) -> None:  # near miss
    intent = read("Could we get a run started on 2 GPUs for 10 steps?", known)
    assert (intent.command, intent.args.get("nproc"), intent.clarify) == ("run", 2, None)


# --- contingent / dependent / depending on ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "Dependent on baseline-ddp converging, benchmark it.",
        "Open a PR for the lr-scan report, contingent on Dana's review.",
        "Depending on how r1 ends, launch 2 GPUs for 20 steps.",
    ],
)
def test_contingent_on_is_a_condition(text: str, known: Known) -> None:
    assert asks(text, known)


def test_a_benchmark_without_a_condition_acts(known: Known) -> None:  # near miss
    intent = read("benchmark baseline-ddp", known)
    assert (intent.command, intent.args.get("model"), intent.clarify) == ("bench", "runs/baseline-ddp", None)


# --- after a sweep: a config held back ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "don't move it to configs/long.yaml",
        "switch to configs/long.yaml next week",
        "use configs/long.yaml provided Dana agrees",
        "swapping to configs/long.yaml was a mistake",
        "try configs/long.yaml tomorrow, not today",
        "move it to configs/long.yaml? nah, it's too slow",
        "Priya suggested we should switch to configs/long.yaml",
    ],
)
def test_a_config_held_back_after_a_sweep_asks(text: str, known: Known) -> None:
    assert asks(text, known, SWEPT)


def test_the_sweep_again_on_a_config_is_that_sweep(known: Known) -> None:  # near miss
    intent = read("same on configs/long.yaml", known, SWEPT)
    assert (intent.command, intent.args.get("experiment"), intent.args.get("trials"), intent.clarify) == (
        "sweep",
        "configs/long.yaml",
        6,
        None,
    )


def test_a_config_shown_after_a_sweep_is_read(known: Known) -> None:  # near miss
    intent = read("just show me configs/long.yaml", known, SWEPT)
    assert (intent.command, intent.args.get("path"), intent.clarify) == ("read", "configs/long.yaml", None)


# --- waits asked politely; runs going asked about -------------------------------------------------------------------


def test_would_you_mind_waiting_is_a_wait(known: Known) -> None:
    intent = read("Would you mind waiting until baseline-ddp is done?", known)
    assert (intent.command, intent.args.get("wait"), intent.args.get("run"), intent.clarify) == (
        "status",
        "yes",
        "runs/baseline-ddp",
        None,
    )


@pytest.mark.parametrize(
    "text",
    [
        "Do you have a job running on 4 GPUs at the moment?",
        "Did we get a run started?",
        "Got a job running on the GPUs? If so, leave it.",
    ],
)
def test_a_run_going_asked_about_lists_the_runs(text: str, known: Known) -> None:
    intent = read(text, known)
    assert (intent.command, intent.clarify) == ("runs", None)


def test_relaunch_r1_still_names_r1(known: Known) -> None:  # near miss
    intent = read("relaunch r1", known)
    assert intent.command == "run" and "runs/r1" in str(intent.clarify)
