"""agent.understanding on objects a request acts on but does not state or the repository lacks, and on the tool a
request names in its own or misspelt words (new sentences of each kind, not the sets', and near misses that must read
as before): "the same as yesterday", a colleague's run, a model "we discussed" planned, "the sweep" the docs should
take, a file of a run the repository lacks, a sweep's claim checked, a write tool's name typed as a command, a
"pul request", a rate or a check said as a hyphenated compound, and a run named "instead" of the one before.

The fixture repository is the benchmark's (bench.agent_understanding.build_fixture), as in tests/test_understanding.py.
"""

from __future__ import annotations

import pytest

from agent.understanding.known import Known
from tests.understanding_support import earlier_turn, read, read_as


def asks(text: str, known: Known, earlier: list | None = None) -> bool:
    return read(text, known, earlier).clarify is not None


# --- acting on what is only pointed at: one question, never the defaults or the latest in its place ----------------


@pytest.mark.parametrize(
    "text",
    [
        "rerun the same as yesterday with twice the steps",
        "launch the same one from last week but on 4 GPUs",
        "corre el mismo de ayer con 8 gpus",
        "start my teammate's run again",
        "please relaunch the config of my colleague",
        "resume the job from my supervisor",
    ],
)
def test_a_launch_of_what_only_a_day_or_a_colleague_knows_is_asked(text: str, known: Known) -> None:
    assert asks(text, known)


def test_a_plan_of_a_model_only_talked_about_is_asked(known: Known) -> None:
    intent = read("Plan the bigger model we agreed on for 16 H100s.", known)
    assert (intent.command, intent.clarify is not None) == ("plan", True)


@pytest.mark.parametrize(
    "text, command, args",
    [
        ("launch r1 again with 4 GPUs", "run", {}),  # a run named: no pointing
        ("plan llama-3.1-8b on 8 H100s", "plan", {"model": "llama-3.1-8b", "devices": 8}),
        ("show my colleague the results of r1", "results", {"run": "runs/r1"}),  # no run of theirs asked for
    ],
)
def test_near_misses_of_pointing_read_as_before(text: str, command: str, args: dict, known: Known) -> None:
    read_as(text, command, args, known)


def test_the_docs_from_the_sweep_among_several_is_asked(known: Known) -> None:
    intent = read("Refresh the documentation with the sweep's findings.", known)
    assert (intent.command, intent.clarify is not None) == ("docs", True)


@pytest.mark.parametrize(
    "text, sweep",
    [
        ("refresh the documentation with the lr-scan findings", "sweeps/lr-scan"),
        ("update the docs with the sweep over layouts", "sweeps/layouts-nov"),
    ],
)
def test_the_docs_from_a_sweep_said_read_as_before(text: str, sweep: str, known: Known) -> None:
    read_as(text, "docs", {"sweep": sweep}, known)


def test_a_file_of_a_run_the_repository_lacks_is_asked(known: Known) -> None:
    intent = read("cat runs/r7/log.txt for me", known)
    assert intent.command == "read" and "runs/r7" in (intent.clarify or "")


def test_a_file_of_a_run_the_repository_has_is_read(known: Known) -> None:
    read_as("cat runs/tp-try/log.txt for me", "read", {"path": "runs/tp-try/log.txt"}, known)


def test_a_sweep_only_told_of_checked_is_asked_and_never_launched(known: Known) -> None:
    intent = read("My manager heard that a sweep picked tp=4 as the winner. Can you fact-check that?", known)
    assert (intent.command, intent.clarify is not None) == ("trials", True)


def test_a_sweep_named_checked_reads_its_trials(known: Known) -> None:
    read_as("double-check the layouts-nov sweep winner for me", "trials", {"sweep": "sweeps/layouts-nov"}, known)


def test_the_sweep_talked_about_checked_again_reads_it(known: Known) -> None:
    earlier = earlier_turn("read_sweep", {"sweep": "sweeps/layouts-nov"}, "what did layouts-nov find?")
    intent = read("Was tp=2 truly the fastest? Cross-check it against that same sweep please.", known, earlier)
    assert (intent.command, intent.args.get("sweep"), intent.clarify) == ("trials", "sweeps/layouts-nov", None)


def test_a_sweep_to_start_beside_a_check_is_still_a_sweep(known: Known) -> None:
    assert read("start a sweep and verify the best lr afterwards", known).command == "sweep"


# --- the tool named in its own or misspelt words ------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, command",
    [
        ("write_report sweeps/lr-scan, keep it local", "report"),
        ("open_pull_request layouts-nov", "pr"),
        ("Please open a pul-request for the lr-scan sweep.", "pr"),
        ("file a pull requst for layouts-nov", "pr"),
    ],
)
def test_a_write_tool_named_or_misspelt_is_that_tool(text: str, command: str, known: Known) -> None:
    intent = read(text, known)
    assert (intent.command, intent.clarify) == (command, None)


def test_a_tool_name_asked_about_is_no_command(known: Known) -> None:
    assert read("does write_report open anything on github?", known).command != "report"


@pytest.mark.parametrize(
    "text, run",
    [
        ("the samples-per-second number for r1, please", "runs/r1"),
        ("please sanity-check the loss of baseline-ddp", "runs/baseline-ddp"),
    ],
)
def test_a_rate_or_a_check_said_as_a_compound_is_no_name(text: str, run: str, known: Known) -> None:
    read_as(text, "results", {"run": run}, known)


def test_an_unknown_name_beside_a_known_one_is_still_asked(known: Known) -> None:
    assert "old-base" in (read("loss of r1 and old-base", known).clarify or "")


# --- a run named in place of the one before ---------------------------------------------------------------------


def test_a_run_named_instead_of_the_one_before_is_the_one(known: Known) -> None:
    read_as("what's the status of r1? hmm no, tp-try, check that one instead", "status", {"run": "runs/tp-try"}, known)


@pytest.mark.parametrize(
    "text",
    ["wait for r1, then tp-try, that one too", "wait for r1 and tp-try instead of baseline-ddp"],
)
def test_two_runs_both_wanted_are_asked_one_at_a_time(text: str, known: Known) -> None:
    assert "One run at a time" in (read(text, known).clarify or "")
