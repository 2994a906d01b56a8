"""agent.understanding on which acting or writing tool a request asks for, and its object (new sentences of each kind,
not the sets', and near misses that must read as before): a read verb whose object is a sweep named after its figures
(never a new sweep), a write whose sweep is said only as "sweep results", a complaint that the user never writes
anything up (a reason, no refusal), a new report made with "do a report", the docs brought "into accord" with a sweep,
a job picked up "where it left off", a file "chucked up" to be seen (no deletion), a supposition followed by a request
for the supposed launch, and a launch of "the thing" (a word for something only the speaker knows).

The fixture repository is the benchmark's (bench.agent_understanding.build_fixture), as in tests/test_understanding.py.
"""

from __future__ import annotations

import pytest

from agent.understanding.known import Known
from tests.understanding_support import read, read_as

# --- a read verb's sweep, named after its figures: that sweep read, never another started -------------------------


@pytest.mark.parametrize(
    "text",
    ["display sweep layouts-nov", "Pull up the findings from sweep layouts-nov please", "show trials of sweep lr-scan"],
)
def test_a_sweep_named_after_a_read_verb_is_read(text: str, known: Known) -> None:
    intent = read(text, known)
    assert (intent.command, intent.clarify) == ("trials", None)


@pytest.mark.parametrize(
    "text", ["show the numbers of sweep layouts-dec", "display sweep lr-scan-old", "open summary of sweep batch-42"]
)
def test_a_read_of_a_sweep_the_repository_lacks_is_asked_never_a_new_sweep(text: str, known: Known) -> None:
    intent = read(text, known)
    assert intent.command != "sweep" and intent.clarify is not None


def test_a_sweep_ordered_by_its_verb_is_still_a_sweep(known: Known) -> None:
    assert read("sweep configs/long.yaml with 8 trials", known).command == "sweep"  # near miss


# --- "sweep results" with no article: which sweep, where there are several ------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "TODO: refresh the README from sweep findings.",
        "docs need updating based on sweep results",
        "write a report on sweep results",
    ],
)
def test_a_write_from_sweep_results_unnamed_asks_which_sweep(text: str, known: Known) -> None:
    intent = read(text, known)
    assert intent.command in ("docs", "report") and intent.clarify is not None and "sweep" not in intent.args


@pytest.mark.parametrize(
    ("text", "sweep"),
    [
        ("refresh the README from the lr-scan sweep results", "sweeps/lr-scan"),
        ("update docs per layouts-nov sweep results", "sweeps/layouts-nov"),
    ],
)
def test_a_write_from_a_named_sweeps_results_acts(text: str, sweep: str, known: Known) -> None:
    read_as(text, "docs", {"sweep": sweep}, known)


def test_sweep_results_only_read_are_still_the_latest_sweeps(known: Known) -> None:
    read_as("sweep findings please", "trials", {"sweep": "sweeps/layouts-nov"}, known)  # near miss: a read


def test_the_docs_refreshed_with_no_sweep_word_still_take_the_newest(known: Known) -> None:
    read_as("refresh the docs", "docs", {}, known)  # near miss: update_docs defaults to the newest finished sweep


# --- a complaint that the user never does it: the reason for the request, no refusal -------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "my PI keeps complaining that we never write anything up, so could you do a report on lr-scan?",
        "the boss is always on at me that I don't write things up - put together a write-up of layouts-nov please",
    ],
)
def test_a_complaint_that_nothing_is_written_up_asks_for_the_report(text: str, known: Known) -> None:
    intent = read(text, known)
    assert (intent.command, intent.clarify) == ("report", None)


def test_a_complaint_is_no_request_for_the_report_by_itself(known: Known) -> None:
    read_as("my PI complains that we never write anything up; what's the loss of r1?", "results", {}, known)


def test_a_report_refused_outright_stays_refused(known: Known) -> None:
    intent = read("never write anything up about lr-scan", known)
    assert intent.command != "report"  # near miss: the user's own refusal


def test_a_status_report_is_no_report(known: Known) -> None:
    read_as("do a status report on r1", "status", {"run": "runs/r1"}, known)


# --- the docs brought into accord with a sweep: an update, their pages written to ----------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "please bring docs/training.md into accord with lr-scan",
        "Could you bring the README and docs/training.md into agreement with the layouts-nov sweep?",
        "What are docs for, if not to record results? Kindly bring the README into line with lr-scan.",
    ],
)
def test_docs_brought_into_accord_are_updated(text: str, known: Known) -> None:
    intent = read(text, known)
    assert (intent.command, intent.clarify) == ("docs", None)


def test_a_doc_page_asked_about_is_read(known: Known) -> None:
    assert read("does docs/training.md agree with lr-scan?", known).command == "read"  # near miss


def test_an_update_with_a_real_condition_is_held(known: Known) -> None:
    assert read("Update the docs from lr-scan, if not already done.", known).clarify is not None


# --- picked up where it left off: a resume ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "tp-try was preempted at midnight; can you take it up again where it stopped?",
        "the layouts-nov job got bumped off the queue, please pick the sweep up where it left off",
    ],
)
def test_a_job_picked_up_where_it_left_off_is_resumed(text: str, known: Known) -> None:
    intent = read(text, known)
    assert (intent.command, intent.clarify) == ("resume", None)


def test_a_resume_only_asked_about_is_held(known: Known) -> None:
    intent = read("the lr-scan sweep died overnight - should we pick it up where it left off?", known)
    assert intent.command == "resume" and intent.clarify is not None


def test_a_resume_refused_is_no_resume(known: Known) -> None:
    intent = read("don't pick tp-try up where it left off", known)
    assert intent.command != "resume" or intent.clarify is not None


# --- a file chucked up to be seen: shown, no deletion ----------------------------------------------------------------


def test_a_file_chucked_up_is_shown(known: Known) -> None:
    read_as("throw r1's log.txt up on the screen, I want to see it", "read", {"path": "runs/r1/log.txt"}, known)


@pytest.mark.parametrize("text", ["chuck runs/r1 away", "toss tp-try out", "clean the tp-try run up"])
def test_a_run_thrown_away_or_cleaned_up_is_still_refused(text: str, known: Known) -> None:
    assert read(text, known).refusal is not None


# --- a supposition, then the supposed launch asked for in a sentence of its own --------------------------------------


def test_a_supposed_launch_then_asked_for_is_launched(known: Known) -> None:
    text = "Imagine we took configs/long.yaml and ran it on 2 processes with dp_shard=2. Could you set it going?"
    read_as(text, "run", {"experiment": "configs/long.yaml", "nproc": 2, "layout": "dp_shard=2"}, known)


@pytest.mark.parametrize(
    "text",
    [
        "Suppose I ran configs/long.yaml on 2 processes with dp_shard=2.",  # no request: held
        "Suppose I ran configs/long.yaml on 2 processes with dp_shard=2. Could you then launch it?",  # waits on it
        "Suppose I ran configs/long.yaml on 2 processes. If it fits, would you launch that?",
        "Suppose tp-try hangs overnight. Could you cancel it?",  # an event supposed, not the action
        "Imagine we killed tp-try. Would you kill it?",  # a cancel, which loses work, stays held
    ],
)
def test_a_supposition_without_its_own_request_is_held(text: str, known: Known) -> None:
    assert read(text, known).clarify is not None


# --- a launch of "the thing": asked which experiment ----------------------------------------------------------------


@pytest.mark.parametrize("text", ["ok kick off that stuff on 2 gpus", "fire up the thingy on the cluster for 20 steps"])
def test_a_launch_of_a_placeholder_asks_which_experiment(text: str, known: Known) -> None:
    intent = read(text, known)
    assert intent.command == "run" and "Which experiment" in str(intent.clarify)


def test_a_launch_of_a_named_experiment_beside_the_word_thing_acts(known: Known) -> None:
    read_as("run the thing with configs/long.yaml on 2 gpus", "run", {"experiment": "configs/long.yaml"}, known)
