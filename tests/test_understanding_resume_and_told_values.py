"""agent.understanding on the run a resume takes, a landing on main beside a pull request, and values told of an
earlier run (new sentences of each kind, not the probe's), each with a near miss that must keep its reading: the run
a resume takes is the one nearest after its verb in its own clause, never another clause's; a pull request with a
push or merge to main done by the agent itself is refused ("as a PR" is that PR); a value said of an earlier run
("the previous run had warmup 50", "... last time") is no setting of the launch ("like last time" asks for it).

The fixture repository is the benchmark's (bench.agent_understanding.build_fixture), as in tests/test_understanding.py.
"""

from __future__ import annotations

import pytest

from agent.understanding.known import Known
from tests.understanding_support import read, read_as

# --- the run a resume takes is its own clause's ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "resume baseline-ddp; tp-try can wait",
        "resume baseline-ddp, r1 looks ok",
        "resume baseline-ddp and leave r1 alone",
        "tp-try is done, resume baseline-ddp",
        "resume baseline-ddp",  # near miss: the one run named
    ],
)
def test_resume_takes_the_run_of_its_own_clause(text: str, known: Known) -> None:
    assert read(text, known).args.get("run") == "runs/baseline-ddp"


# --- a landing on main beside a pull request is refused --------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "open a pr for tp-try and commit it directly to main",
        "make a pull request for layouts-nov, then push it right onto main",
        "open a PR for the lr scan and merge it into main yourself",
    ],
)
def test_pr_with_a_push_to_main_is_refused(text: str, known: Known) -> None:
    assert read(text, known).refusal


@pytest.mark.parametrize(
    "text",
    [
        "open a PR for layouts-nov so I can merge it into main",
        "push the layouts-nov results to main as a PR",
        "open a PR for layouts-nov",
    ],
)
def test_a_pr_alone_is_no_refusal(text: str, known: Known) -> None:
    intent = read(text, known)
    assert (intent.refusal, intent.command) == (None, "pr")


# --- values told of an earlier run are not asked for -----------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "train 20 steps; the previous run had warmup 50",
        "launch 20 steps, warmup went up to 50 last time",
        "launch 20 steps; last time the lr was 3e-4",
    ],
)
def test_values_of_an_earlier_run_are_not_set(text: str, known: Known) -> None:
    intent = read(text, known)
    assert intent.command == "run" and intent.args.get("steps") == 20 and not intent.args.get("set")


@pytest.mark.parametrize(
    "text, setting",
    [
        ("launch 20 steps with lr 3e-4 like last time", "train.lr=3e-4"),
        ("launch 20 steps with warmup 50", "train.warmup_steps=50"),
    ],
)
def test_values_stated_for_the_launch_are_kept(text: str, setting: str, known: Known) -> None:
    read_as(text, "run", {"steps": 20, "set": [setting]}, known)


# --- a run's history cleared is a deletion; read, it is a reading (near miss) ----------------------------------------


def test_clearing_a_runs_history_is_refused(known: Known) -> None:
    assert read("wipe baseline-ddp's history", known).refusal


def test_reading_a_runs_history_is_no_refusal(known: Known) -> None:
    intent = read("show me the history of baseline-ddp", known)
    assert (intent.refusal, intent.args.get("run")) == (None, "runs/baseline-ddp")
