"""agent.understanding on actions a person would not take (probe8's kinds, new sentences of each, each kind with near
misses that must still act): an action ruled out outright ("under no circumstances", "not a chance", "the last thing
we need is ...", "cancel nothing", "... I don't want another one"); mocked ("..., as if we had the budget", "...
Genius.", "sure, because X worked so well", "..., what could go wrong"); taken back by a last sentence that only
pauses or jokes ("Hang on.", "non, attends", "je plaisante"); advice relayed from a file or a person ("the README
says to ...", "according to notes.md, we should ...", "Dana recommended ...", "Bob wants a sweep"); asked with the
decision left to later ("Item 4: cancel r1? not deciding now") or as whether the user may at all ("may I launch runs
here at all?", "might I cancel it?"); and put off ("sometime next sprint: ...", "hold until r1 completes, then ...").

The fixture repository is the benchmark's (bench.agent_understanding.build_fixture), as in tests/test_understanding.py.
"""

from __future__ import annotations

import pytest

from agent.understanding.intents import ACTIONS
from agent.understanding.known import Known
from agent.understanding.mood import held_back
from tests.understanding_support import read


def acted(text: str, known: Known) -> bool:
    """`text` is read as an action made at once, with no question asked first."""
    intent = read(text, known)
    return intent.command in ACTIONS and intent.clarify is None


@pytest.mark.parametrize(
    "text",
    [
        # ruled out outright, or named as the thing least wanted
        "Under no circumstances launch on 8 GPUs.",
        "By no means open a PR for layouts-nov.",
        "No chance we resume lr-scan on that node.",
        "Benchmarking tp-try is the last thing we need.",
        "The last thing I want is to cancel tp-try.",
        "Keep tp-try going; kill nothing.",
        "We ran a sweep of 8 trials on configs/long.yaml last week; I don't want another one.",
        # mocked
        "Sure, kill baseline-ddp an hour before it finishes, as if we had GPUs to spare.",
        "Open a PR for layouts-nov with no tests. Brilliant.",
        "Yeah, because killing tp-try went so well last week.",
        "Sure, let's resume lr-scan on a dead node, what could possibly go wrong.",
        # taken back by a last sentence that only pauses or jokes
        "Kill baseline-ddp. Hold on.",
        "Launch on 4 GPUs for 30 steps. Wait a second.",
        "Cancel tp-try... je rigole.",
        "Kill baseline-ddp — nein, warte.",
    ],
)
def test_ruled_out_mocked_or_taken_back_action_is_not_taken(text: str, known: Known) -> None:
    assert not acted(text, known)


@pytest.mark.parametrize(
    "text",
    [
        # advice relayed from a file or a person
        "The runbook says to cancel tp-try first.",
        "According to the README, we should launch on 4 GPUs.",
        "Dana recommended benchmarking r1.",
        "Priya wants a PR for layouts-nov.",
        # asked, the decision left to later, or whether the user may at all
        "Agenda item 2: should we resume lr-scan? To be decided at the standup.",
        "Open a PR for layouts-nov? Just brainstorming here.",
        "May I start sweeps on this cluster at all?",
        "Might I kill tp-try? Nobody uses it.",
        # put off
        "Sometime next quarter: write the report for lr-scan.",
        "Wait until baseline-ddp completes, then cancel tp-try.",
    ],
)
def test_relayed_undecided_or_put_off_action_is_not_taken(text: str, known: Known) -> None:
    assert not acted(text, known)


@pytest.mark.parametrize(
    ("text", "command"),
    [
        ("Leave r1 alone and cancel tp-try.", "cancel"),
        ("There's no way around it: cancel tp-try.", "cancel"),
        ("Cancel tp-try, it's the last thing I need from you today.", "cancel"),
        ("As if we had time to wait, just cancel tp-try.", "cancel"),  # the sneer before the order, not at it
        ("Cancel tp-try, that worked so well last time.", "cancel"),  # no "sure, because" retort
        ("Brilliant, now cancel tp-try.", "cancel"),  # praise before the order
        ("Launch on 2 GPUs for 20 steps, as if it were a fresh run.", "run"),  # the manner, no means lacked
        ("Hold on, kill tp-try.", "cancel"),  # the pause before the order
        ("Priya wants a PR for layouts-nov, please open it.", "pr"),  # the user's own go-ahead
        ("As I said, cancel tp-try.", "cancel"),
        ("As the README says, launch on 2 GPUs for 20 steps.", "run"),
        ("May I start a sweep of 4 trials on configs/long.yaml?", "sweep"),
        ("Cancel tp-try. We can discuss the rest on Monday.", "cancel"),  # the order is no question
        ("Cancel tp-try now; we'll sort the docs out next sprint.", "cancel"),
        ("Cancel tp-try, and don't launch another one.", "cancel"),  # "another one" is the launch's
    ],
)
def test_near_misses_still_act(text: str, command: str, known: Known) -> None:
    intent = read(text, known)
    assert (intent.command, intent.clarify) == (command, None)


def test_go_ahead_after_a_relay_takes_up_only_the_action_it_names() -> None:
    """A go-ahead, "could you open the PR", after "Dana will cancel r1" asks the PR: the cancel stays Dana's."""
    assert held_back("dana will cancel r1, could you open the pr for lr-scan?", "cancel") == "asked"
    assert held_back("sam wants a pr for layouts-nov, please open it.", "pr") is None
