"""agent.understanding on English actions that must be held back (asked about) but were taken (new sentences of each
kind, not the probe's), each with near misses that must still act: an action negated in a noun phrase after it
("killing tp-try is off the table") or by a reply tag after its question ("resume r1? I'd rather not"); a passive
negation ("r1 should not be requeued"); someone else's duty or order relayed with no ask of the user's own ("Sam will
cancel tp-try", "the lead told us to resume r1"); a time clause after the verb ("resume r1 once the node is back");
a courtesy left to someone other than the assistant; a wish about the past ("would've been nice to ..."); whether it
is fine to open a PR or update the docs; a launch of what was said elsewhere; a take-back alone after an action.

The fixture repository is the benchmark's (bench.agent_understanding.build_fixture), as in tests/test_understanding.py.
"""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from tests.understanding_support import read, read_as


@pytest.mark.parametrize(
    ("text", "command"),
    [
        # negated in a noun phrase, or by a reply tag after the action asked
        ("killing tp-try is off the table, but stopping r1 is not an option either", "cancel"),
        ("stopping baseline-ddp is out of the question", "cancel"),
        ("requeueing r1 is not what we need", "resume"),
        ("making a pull request for lr-scan is not an option", "pr"),
        ("abort tp-try? I wouldn't", "cancel"),
        ("resume r1? We'd rather not.", "resume"),
        ("kill baseline-ddp? Please don't.", "cancel"),
        ("r1 should not be requeued", "resume"),
        ("aborting tp-try was a mistake", "cancel"),
        # someone else's duty or order, relayed with no ask of the user's own
        ("Sam will cancel tp-try", "cancel"),
        ("the lead told us to resume r1", "resume"),
        ("we were asked to kill baseline-ddp", "cancel"),
        ("the on-call wrote: abort tp-try now", "cancel"),
        ("Lee is going to make a pull request for lr-scan", "pr"),
        # a time clause after the verb
        ("resume r1 once the node is back", "resume"),
        ("make a pull request for lr-scan when the review is approved", "pr"),
        ("requeue tp-try as soon as the maintenance window opens", "resume"),
        ("make a pull request for lr-scan once Sam approves the write-up", "pr"),
        ("make a pull request for lr-scan after CI is fixed", "pr"),
        # a courtesy left to someone other than the assistant
        ("stop tp-try if that sounds reasonable to the reviewers", "cancel"),
        # a wish about the past
        ("it would have been good to kill tp-try yesterday", "cancel"),
        ("a pull request for lr-scan would've been helpful", "pr"),
        # whether it is fine to write to the repository
        ("is it ok to make a pull request for lr-scan?", "pr"),
        ("would it be acceptable to refresh the docs for layouts-nov?", "docs"),
        # what was said elsewhere
        ("launch what Sam proposed in the sync", "run"),
    ],
)
def test_an_action_not_ordered_now_is_asked(text, command, known):
    intent = read(text, known)
    assert intent.command == command and intent.clarify


def test_a_take_back_alone_after_an_order_does_nothing(known):
    intent = read("wait, no", known, earlier=[HumanMessage("cancel baseline-ddp"), AIMessage("ok")])
    assert intent.clarify and intent.command != "cancel"


@pytest.mark.parametrize(
    ("text", "command", "args"),
    [
        ("cancel tp-try, it's hung", "cancel", {"run": "runs/tp-try"}),
        ("kill tp-try, waiting is not an option", "cancel", {"run": "runs/tp-try"}),
        ("stop baseline-ddp because its lr was a mistake", "cancel", {"run": "runs/baseline-ddp"}),
        ("could someone get the bot to kill tp-try?", "cancel", {"run": "runs/tp-try"}),
        ("abort tp-try if it's still running", "cancel", {"run": "runs/tp-try"}),
        ("please kill baseline-ddp, Sam asked for that", "cancel", {"run": "runs/baseline-ddp"}),
        ("the lead told us to resume r1, so resume r1 please", "resume", {"run": "runs/r1"}),
        ("train 10 steps at lr 1e-4, if that sounds reasonable to you", "run", {"steps": 10}),
        ("open a PR for lr-scan", "pr", {"sweep": "sweeps/lr-scan"}),
        ("resume tp-try, the node is back", "resume", {"run": "runs/tp-try"}),
    ],
)
def test_an_order_for_now_still_acts(text, command, args, known):
    read_as(text, command, args, known)


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("train 12 steps on 2 gpus and ping me once it finishes", {"nproc": 2, "steps": 12}),
        ("launch 15 steps, let me know when it's done", {"steps": 15}),
    ],
)
def test_when_to_tell_the_user_holds_no_launch(text, args, known):
    read_as(text, "run", args, known)  # the time clause says when to tell, not when to act


def test_a_launch_waiting_on_another_run_is_still_held(known):
    intent = read("train 12 steps once r1 finishes", known)  # near miss: a launch put off until r1 ends
    assert intent.command != "run" or intent.clarify


@pytest.mark.parametrize(
    "text",
    [
        "The docs must not be updated with the lr-scan sweep.",
        "The documentation shall not be conformed to the layouts-nov sweep.",
        "the README should never get refreshed from lr-scan",
    ],
)
def test_the_docs_refused_in_the_passive_are_asked(text, known):
    """The action's noun before its negated verb ("the docs must not be updated"): never a write."""
    intent = read(text, known)
    assert intent.command == "docs" and intent.clarify


@pytest.mark.parametrize(
    "text", ["The docs must be updated with the lr-scan sweep.", "the README shall be conformed to lr-scan"]
)
def test_the_docs_ordered_in_the_passive_are_updated(text, known):
    read_as(text, "docs", {"sweep": "sweeps/lr-scan"}, known)
