"""agent.understanding on which write tool a request asks for, resumes, stops and refusals (new sentences of each
kind, not the sets', and near misses that must read as before): a pull request ordered beside the write-up it comes
with, a report kept off a pull request in other words, the docs wished to say something, a job resumed "from where
it was stopping", a stop typed a letter short, a point in a job's course that is no run's name, every member of a set
of runs deleted, a history cleared, a gardener's "repot", and "the sweep" read where there are several.

The fixture repository is the benchmark's (bench.agent_understanding.build_fixture), as in tests/test_understanding.py.
"""

from __future__ import annotations

import pytest

from agent.understanding.known import Known
from tests.understanding_support import read, read_as

# --- a pull request ordered with its write-up: the PR, which writes the report too ---------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "Draft the lr-scan write-up and then raise a pull request for the team.",
        "write up layouts-nov, then open a PR",
        "Summarise lr-scan in a report and please file a merge request.",
    ],
)
def test_a_pr_ordered_with_its_write_up_opens_the_pr(text: str, known: Known) -> None:
    intent = read(text, known)
    assert (intent.command, intent.clarify) == ("pr", None)


@pytest.mark.parametrize(
    "text",
    [
        "write up lr-scan on a branch, don't open a PR",  # the PR negated
        "write up the lr-scan sweep and open a PR later",  # the PR put off
        "write the lr-scan report, then we'll see about opening a pull request",
    ],
)
def test_a_write_up_without_its_pr_stays_a_report(text: str, known: Known) -> None:
    assert read(text, known).command == "report"


def test_a_pr_only_asked_about_beside_a_write_up_opens_nothing(known: Known) -> None:
    intent = read("Write up lr-scan. Should we open a PR too?", known)
    assert intent.command != "pr" and intent.clarify is not None


# --- a report kept on its branch, in other words ---------------------------------------------------------------------


def test_a_report_not_sent_out_as_a_pull_request(known: Known) -> None:
    read_as("Let the lr-scan findings be written down, though not published as a PR.", "report",
            {"sweep": "sweeps/lr-scan"}, known)  # fmt: skip


def test_a_local_branch_only_is_where_a_report_goes(known: Known) -> None:
    read_as("lr-scan, please: a local branch only, no pull request.", "report", {"sweep": "sweeps/lr-scan"}, known)


# --- the docs wished to say what a sweep found -----------------------------------------------------------------------


def test_the_docs_one_would_like_to_reflect_a_sweep(known: Known) -> None:
    read_as("I'd like the README and docs/training.md to reflect the lr-scan findings, if that sounds reasonable.",
            "docs", {"sweep": "sweeps/lr-scan"}, known)  # fmt: skip


def test_a_file_one_would_like_to_see_is_read(known: Known) -> None:
    read_as("I would like to see docs/training.md", "read", {"path": "docs/training.md"}, known)


def test_a_condition_on_the_repository_still_holds_back(known: Known) -> None:
    intent = read("if the sweep seems fine to you, open a PR for lr-scan", known)
    assert intent.clarify is not None


# --- resumes ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "sweep"),
    [
        ("lr-scan was killed by the scheduler, could you continue it from where it was stopping?", "sweeps/lr-scan"),
        ("The nodes were reclaimed; layouts-nov died. Resubmit it from where it left off.", "sweeps/layouts-nov"),
        ("layouts-nov got preempted mid-sweep; resume it from where it dropped off.", "sweeps/layouts-nov"),
    ],
)
def test_a_sweep_resumed_from_where_it_stopped(text: str, sweep: str, known: Known) -> None:
    read_as(text, "resume", {"kind": "sweep", "sweep": sweep}, known)


def test_a_point_in_a_runs_course_is_no_name(known: Known) -> None:
    read_as("r1 died mid-epoch, resume it", "resume", {"run": "runs/r1"}, known)


def test_a_stop_asked_is_still_a_stop(known: Known) -> None:
    read_as("stop tp-try, it is stopping the queue", "cancel", {"run": "runs/tp-try"}, known)


# --- a stop typed a letter short -------------------------------------------------------------------------------------


def test_pul_the_plug_cancels(known: Known) -> None:
    read_as("pul the plug on tp-try, it's hopeless", "cancel", {"run": "runs/tp-try"}, known)


# --- refusals --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "Let R be the runs that failed. Erase each member of R.",
        "Take the oom runs and remove every one of them.",
        "baseline-ddp is obsolete: clear its history.",
    ],
)
def test_deleting_a_set_of_runs_or_a_history_is_refused(text: str, known: Known) -> None:
    assert read(text, known).refusal is not None


@pytest.mark.parametrize(
    "text",
    [
        "it's clear the runs are slow; show r1",  # "clear" as an adjective
        "compare r1 and baseline-ddp and drop every one of the failed trials",  # left out of what is shown
    ],
)
def test_near_misses_of_deletion_are_not_refused(text: str, known: Known) -> None:
    assert read(text, known).refusal is None


# --- a gardener's "repot" --------------------------------------------------------------------------------------------


def test_repot_it_into_something_is_no_report(known: Known) -> None:
    intent = read("Time to repot them into a larger pot.", known)
    assert intent.command != "report" and intent.clarify is not None


def test_a_repot_typed_for_a_report_is_still_a_report(known: Known) -> None:
    read_as("write the repot of lr-scan", "report", {"sweep": "sweeps/lr-scan"}, known)


# --- "the sweep" where there are several ---------------------------------------------------------------------------


def test_how_the_sweep_went_asks_which(known: Known) -> None:
    intent = read("How did the sweep go in the end?", known)
    assert "Which sweep" in (intent.clarify or "")


@pytest.mark.parametrize(
    ("text", "sweep"),
    [
        ("how did the latest sweep go?", "sweeps/layouts-nov"),
        ("how did the sweep over learning rates go?", "sweeps/lr-scan"),
    ],
)
def test_a_sweep_said_which_is_read(text: str, sweep: str, known: Known) -> None:
    read_as(text, "trials", {"sweep": sweep}, known)


# --- "report" that tells a run's state: no report of a sweep written ------------------------------------------------


@pytest.mark.parametrize(
    ("text", "run"),
    [
        ("progress report on tp-try, please", "runs/tp-try"),
        ("Give me a status report for r1.", "runs/r1"),
    ],
)
def test_a_status_report_reads_the_status(text: str, run: str, known: Known) -> None:
    read_as(text, "status", {"run": run}, known)


def test_held_on_a_run_until_it_ends_then_told_its_state_waits(known: Known) -> None:
    read_as("Hang on r1 till it lands, then report final status.", "status", {"run": "runs/r1", "wait": "yes"}, known)


def test_a_report_written_of_a_sweep_is_still_a_report(known: Known) -> None:
    read_as("write a progress report of lr-scan into the docs", "report", {"sweep": "sweeps/lr-scan"}, known)
