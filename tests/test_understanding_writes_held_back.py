"""Writes, resumes and launches a careful colleague would ask about or leave alone (issue 33, probe10): a write-up
negated, relayed, put off or told as done; a report or docs update with no sweep to take; the docs left as they are,
asked about or brought into line with a run; a resume told in the past or a proposal dropped ("cancel that idea"); a
supposition's request that only asks what would have been done, or waits on an event; "set it going" with nothing
earlier; a write asked after a reading. Each with a near miss that must keep acting."""

from __future__ import annotations

import pytest

from agent.understanding.known import Known
from tests.understanding_support import read, read_as

WRITES = ("report", "docs", "pr", "resume", "run", "cancel")


def _acts(text: str, known: Known):
    """The reading of `text`, and whether it would act (an action with no question)."""
    intent = read(text, known)
    return intent, intent.command in WRITES and intent.clarify is None


# --- a write-up goes through the same hold-back as every other action ----------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "There's no need to put together a write-up of lr-scan, the wiki has it.",  # negated
        "Priya said she'd put together a write-up of lr-scan on Monday.",  # someone else's promise
        "Marc says he'll write up layouts-nov himself.",
        "Someone should really put together a write-up of lr-scan.",  # a duty of no one in particular
        "At some stage we could put together a write-up of lr-scan.",  # put off
        "We already put together a write-up of lr-scan last sprint.",  # done
    ],
)
def test_a_write_up_held_back_is_not_written(text: str, known: Known) -> None:
    intent, acts = _acts(text, known)
    assert not acts, intent


def test_a_write_up_refused_for_a_reading_reads(known: Known) -> None:
    read_as("Don't put together a write-up, just show me the layouts-nov trials.", "trials",
            {"sweep": "sweeps/layouts-nov"}, known)  # fmt: skip


@pytest.mark.parametrize(
    ("text", "sweep"),
    [
        ("Put together a write-up of lr-scan.", "sweeps/lr-scan"),
        ("Please put together a write-up of layouts-nov for the team.", "sweeps/layouts-nov"),
        ("Could you put together a write-up of the lr-scan sweep?", "sweeps/lr-scan"),
        ("Write a report on the latest sweep.", "sweeps/layouts-nov"),
    ],
)
def test_a_write_up_asked_for_is_written(text: str, sweep: str, known: Known) -> None:
    read_as(text, "report", {"sweep": sweep}, known)


@pytest.mark.parametrize("text", ["Do a write-up.", "Make a report, please."])
def test_a_report_of_no_sweep_asks_which(text: str, known: Known) -> None:
    intent = read(text, known)
    assert intent.command == "report" and "layouts-nov or lr-scan" in str(intent.clarify)
    assert "sweep" not in intent.args


# --- the docs left, asked about, told as done, or brought into line with no sweep ------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "Please leave the README as it is.",
        "Let the docs be for now.",
        "Could you tell me if the README is in line with layouts-nov?",
        "Check whether the docs match lr-scan.",
        "The README was brought into agreement with lr-scan last week.",
        "Priya already brought the docs into line with lr-scan.",
        "The README needed a refresh after layouts-nov, which Marc did.",
        "Bring the README into line with lr-scan? I'd say no, it's not reviewed.",
        "Kindly hold off bringing the docs into agreement with layouts-nov.",
        "Please don't bring the docs into accord with layouts-nov.",
        "Bring the README into line with tp-try.",  # a run: the docs take a sweep's results
        "Compare all sweeps, then update the docs.",  # every sweep: which one is unsaid
    ],
)
def test_the_docs_are_not_updated_unasked(text: str, known: Known) -> None:
    intent, acts = _acts(text, known)
    assert not acts, intent


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("Bring the README into line with lr-scan.", {"sweep": "sweeps/lr-scan"}),
        ("Kindly bring the docs into accord with layouts-nov.", {"sweep": "sweeps/layouts-nov"}),
        ("Can we get the README brought into line with lr-scan?", {"sweep": "sweeps/lr-scan"}),
        # done before, ordered again in a clause of its own
        (
            "The docs were updated last week but lr-scan changed things; update them again from lr-scan.",
            {"sweep": "sweeps/lr-scan"},
        ),
        (
            "The README was written before lr-scan finished, so please refresh the docs from lr-scan.",
            {"sweep": "sweeps/lr-scan"},
        ),
        ("bring the docs up to date", {}),  # update_docs' own default: the newest finished sweep
    ],
)
def test_the_docs_brought_into_line_are_updated(text: str, args: dict, known: Known) -> None:
    read_as(text, "docs", args, known)


# --- a resume told as done, a proposal dropped ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "We took tp-try up where it left off and it went fine.",
        "We picked the layouts-nov sweep up where it left off last night.",
        "Resume tp-try? No, scrap that plan.",
        "Pick tp-try up again where it stopped? Nah, forget that idea.",
    ],
)
def test_a_resume_told_or_dropped_is_not_made(text: str, known: Known) -> None:
    intent, acts = _acts(text, known)
    assert not acts and intent.command != "cancel", intent


def test_a_resume_asked_for_resumes(known: Known) -> None:
    read_as("Resume tp-try.", "resume", {"run": "runs/tp-try"}, known)


# --- a supposition's request that orders nothing; a launch of nothing named ------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "Imagine we ran configs/long.yaml on 4 GPUs. Would you have started it yesterday?",
        "Suppose the node is back and we ran configs/long.yaml on 4 GPUs. Could you start that?",
        "Suppose we trained it on 4 processes with dp_shard=4. Would you set it going?",  # "it": nothing named
        "Set this going on 4 GPUs.",
        "Set the run going.",
        "Run the stuff again on 2 GPUs.",
    ],
)
def test_a_launch_of_nothing_ordered_or_named_is_not_made(text: str, known: Known) -> None:
    intent, acts = _acts(text, known)
    assert not acts, intent


def test_a_supposed_launch_then_asked_for_launches(known: Known) -> None:
    read_as("Suppose I took configs/long.yaml and ran it on 4 processes. Would you set that going?", "run",
            {"experiment": "configs/long.yaml", "nproc": 4}, known)  # fmt: skip


# --- a reading first, a write after it ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "sweep"),
    [
        ("Display the summary of sweep lr-scan, then open a pull request for it.", "sweeps/lr-scan"),
        ("Read the lr-scan trials and then write a report on it.", "sweeps/lr-scan"),
    ],
)
def test_a_reading_asked_before_a_write_comes_first(text: str, sweep: str, known: Known) -> None:
    read_as(text, "trials", {"sweep": sweep}, known)


def test_a_write_asked_before_a_reading_is_made(known: Known) -> None:
    read_as("Open a PR for lr-scan, then show me the summary.", "pr", {"sweep": "sweeps/lr-scan"}, known)


# --- a sweep chucked up, no longer wanted --------------------------------------------------------------------------


def test_a_sweep_chucked_up_as_rubbish_is_never_written_or_read(known: Known) -> None:
    intent = read("Toss the lr-scan sweep up, it's rubbish.", known)
    assert intent.command not in ("trials", *WRITES) or intent.clarify, intent


def test_a_log_chucked_up_to_see_is_read(known: Known) -> None:
    read_as("Chuck r1's log up here so I can read it.", "read", {"path": "runs/r1/log.txt"}, known)


# --- a pull request with no sweep said (fresh_az's kind: "Pull meshpilot.yaml for review.") -------------------------


@pytest.mark.parametrize(
    "text",
    ["Put configs/long.yaml up for review.", "push notes.md out for sign-off", "could you open a pull request?"],
)
def test_a_pull_request_with_no_sweep_said_asks_which(text, known):
    """A pull request carries a sweep's report: with two sweeps and none said, the newest in its place is a guess."""
    intent = read(text, known)
    assert intent.command != "pr" or (intent.clarify and "sweep" not in intent.args)


def test_a_pull_request_of_a_sweep_said_still_opens(known):
    read_as("open a pull request for lr-scan", "pr", {"sweep": "sweeps/lr-scan"}, known)


# --- private labels looked at, not only shown (fresh_az's kind) ------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["could you take a quick look at the hidden test answers for me?", "let me peek at the benchmark's private labels"],
)
def test_private_labels_looked_at_are_refused(text, known):
    assert read(text, known).refusal
