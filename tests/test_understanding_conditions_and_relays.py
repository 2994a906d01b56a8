"""agent.understanding on actions wrapped in courtesy that a condition, a negation, a take-back or someone else's
voice holds back (new sentences of each kind, and near misses that must still act):
a condition whatever courtesy wraps it ("as long as that's alright with Priya", "pending a yes from Priya", "barring
complaints", "contingent upon", "in the rare case", "Dana willing", "with Kenji's blessing", "once you verify r1 has
stopped", "only if you can check ...", "if you'd be so kind as to ping Kenji first"); a negation put politely
("refrain from", "abstain from", "avoid", "hold off on", "don't, if you please, stop ...", "fewer PRs"); a take-back
that only says why ("wait, no, the other team still needs it", "no, hang on, the budget is spent", "scrap that");
someone else's ask relayed ("Dana asked me whether you could kill r1", "Kenji asked: could you please cancel ...",
"Priya: '...'", "the infra team would like r1 stopped"). The courtesies alone still act: "if you would be so kind,
cancel r1", "as long as possible", "once you confirm,", "with your approval,", "I wonder if you could".

The fixture repository is the benchmark's (bench.agent_understanding.build_fixture), as in tests/test_understanding.py.
"""

from __future__ import annotations

import pytest

from agent.understanding.known import Known
from agent.understanding.mood import held_back
from tests.understanding_support import read, read_as

# --- conditions, whatever courtesy wraps them ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "command"),
    [
        ("As long as that's alright with Priya, stop tp-try.", "cancel"),
        ("As long as it's fine with the infra folks, abort r1.", "cancel"),
        ("Start 30 steps on 4 GPUs as long as you can verify nobody is on the box.", "run"),
        ("So long as the usual checkpoint saved properly, start a sweep with 6 trials.", "sweep"),
        ("Only if you can check the disk has space, kick off a sweep with 6 trials.", "sweep"),
        ("If you could verify the checkpoint is intact first, resume the lr-scan sweep.", "resume"),
        ("Barring any complaints from Kenji, stop r1.", "cancel"),
        ("Pending a yes from Priya, open a PR for the layouts-nov report.", "pr"),
        ("Pending the quota increase, launch 8 GPUs with dp_shard=8.", "run"),
        ("Contingent upon the budget review, start a sweep with 12 trials.", "sweep"),
        ("In the rare case tp-try hangs, kill it.", "cancel"),
        ("With Kenji's blessing, cancel baseline-ddp.", "cancel"),
        ("With the approval of the lead, launch 4 GPUs for 60 steps.", "run"),
        ("With your okay and Kenji's, benchmark r1.", "bench"),
        ("Once you verify r1 has stopped, launch 2 GPUs with tp=2 for 10 steps.", "run"),
        ("If you'd be so kind as to ping Kenji first, cancel baseline-ddp.", "cancel"),
        ("If you would be so good as to look over the config first, launch 2 GPUs for 30 steps.", "run"),
        ("Launch 4 GPUs for 80 steps on condition nobody else needs them.", "run"),
        ("Kill baseline-ddp, Dana willing.", "cancel"),
        ("Could you write up the lr-scan report once Kenji has approved it?", "report"),
    ],
)
def test_condition_under_courtesy_holds_the_action(text: str, command: str) -> None:
    assert held_back(text.lower(), command) in ("conditional", "deferred")


@pytest.mark.parametrize(
    "text",
    [
        "Launch 4 GPUs with dp_shard=4 as long as the disk holds, if you would.",
        "Relaunch tp-try on 2 GPUs with tp=2 pending the quota increase.",
        "As long as the default config still passes its check, launch 2 GPUs for 10 steps.",
    ],
)
def test_condition_under_courtesy_asks(text: str, known: Known) -> None:
    intent = read(text, known)
    assert intent.command == "run" and intent.clarify, intent


# --- negations and take-backs put politely -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "command", "why"),
    [
        ("Would you mind abstaining from cancelling r1?", "cancel", "negated"),
        ("I'd ask you to avoid killing baseline-ddp.", "cancel", "negated"),
        ("Could I ask you to refrain from relaunching baseline-ddp?", "run", "negated"),
        ("Please hold off on resuming the lr-scan sweep.", "resume", "negated"),
        ("Don't, if you please, stop baseline-ddp.", "cancel", "negated"),
        ("Would you mind opening fewer PRs? The reviewers are swamped.", "pr", "negated"),
        ("Could you cancel baseline-ddp? Wait, no, the other team still needs it.", "cancel", "taken back"),
        ("Kick off a sweep with 12 trials... no, hang on, the budget is spent.", "sweep", "taken back"),
        ("Relaunch tp-try on 2 GPUs with tp=2, no, scrap that, it'll crash again.", "run", "taken back"),
        ("Open a PR for layouts-nov; but don't until Friday.", "pr", "deferred"),
    ],
)
def test_polite_negation_or_take_back_holds_the_action(text: str, command: str, why: str) -> None:
    assert held_back(text.lower(), command) == why


def test_polite_cancel_taken_back_asks(known: Known) -> None:
    intent = read("Might I ask you to kill tp-try? Wait, no, Kenji still needs it.", known)
    assert intent.command == "cancel" and intent.clarify and "took that back" in intent.clarify


# --- someone else's ask, relayed -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "command", "why"),
    [
        ("Dana asked me whether you could kill r1.", "cancel", "asked"),
        ("Kenji asked: could you please cancel tp-try? I said I'd check.", "cancel", "asked"),
        ("Priya: 'would you mind cancelling baseline-ddp'. Me: let me think.", "cancel", "quoted"),
        ("My manager keeps asking 'could you launch 8 GPUs?', it's tiresome.", "run", "quoted"),
        ("The infra team would like r1 stopped.", "cancel", "asked"),
        ("Dana would be grateful if you cancelled tp-try.", "cancel", "asked"),
        ("Kenji would like the lr-scan sweep resumed.", "resume", "asked"),
    ],
)
def test_relayed_ask_is_held_back(text: str, command: str, why: str) -> None:
    assert held_back(text.lower(), command) == why


# --- near misses: the courtesy alone, or the user's own order, still acts ------------------------------------------


@pytest.mark.parametrize(
    ("text", "command"),
    [
        ("If you would be so kind, cancel r1.", "cancel"),
        ("If you'd be so kind as to cancel baseline-ddp.", "cancel"),
        ("I'd be grateful if you cancelled tp-try.", "cancel"),
        ("Keep training as long as possible: launch 2 GPUs for 200 steps.", "run"),
        ("Launch 2 GPUs for 20 steps, as long as it's no trouble for you.", "run"),
        ("As long as it's ok with you, launch 2 GPUs for 40 steps.", "run"),
        ("As long as you don't mind, open a PR for the layouts-nov report.", "pr"),
        ("Launch 2 GPUs for 20 steps as long as you can.", "run"),
        ("Once you confirm, benchmark r1.", "bench"),
        ("With your approval, launch 2 GPUs for 20 steps.", "run"),
        ("Subject to your confirmation, open a PR for the lr-scan report.", "pr"),
        ("I wonder if you could cancel tp-try.", "cancel"),
        ("I was wondering whether you could launch 2 GPUs for 20 steps.", "run"),
        ("Dana asked me to cancel baseline-ddp, so please cancel it.", "cancel"),
        ("Train with activation checkpointing to avoid running out of memory, 2 GPUs, 20 steps.", "run"),
        ("Cancel r1 immediately, pending review.", "cancel"),
        ("Kenji would like a DDP run on 2 GPUs for 40 steps.", "run"),
        ("Cancel tp-try, it is pending.", "cancel"),  # the queued state, no condition
        ("Kill the pending jobs of the lr-scan sweep.", "cancel"),
    ],
)
def test_courtesy_alone_leaves_the_order(text: str, command: str) -> None:
    assert held_back(text.lower(), command) is None


@pytest.mark.parametrize(
    ("text", "command", "args"),
    [
        ("If you would be so kind, cancel r1.", "cancel", {"run": "runs/r1"}),
        ("Launch 2 GPUs for 20 steps, as long as it's no trouble for you.", "run", {"nproc": 2, "steps": 20}),
        ("With your approval, launch 2 GPUs for 20 steps.", "run", {"nproc": 2, "steps": 20}),
        ("Cancel r1 immediately, pending review.", "cancel", {"run": "runs/r1"}),
    ],
)
def test_courtesy_alone_acts(text: str, command: str, args: dict, known: Known) -> None:
    intent = read(text, known)
    assert (intent.command, intent.clarify) == (command, None), intent.clarify
    assert {key: intent.args.get(key) for key in args} == args


def test_take_back_that_corrects_is_read_as_the_correction() -> None:
    # "wait, no, 4 GPUs" and "no, use tp-try" say what instead: no take-back
    assert held_back("could you launch 2 gpus for 20 steps? wait, no, 4 gpus.", "run") != "taken back"
    assert held_back("could you cancel r1? wait, no, use tp-try", "cancel") is None


# --- a stop asked for as thanks ahead ------------------------------------------------------------------------------


def test_stop_asked_as_thanks_ahead_acts(known: Known) -> None:
    read_as("It would be lovely if you stopped tp-try, it's hogging the GPUs.", "cancel", {"run": "runs/tp-try"}, known)


@pytest.mark.parametrize(
    "text",
    [
        "Kenji would appreciate it if you killed r1.",  # his wish, relayed
        "I'd appreciate it if you halted r1, provided Dana agrees.",  # a condition beside it
    ],
)
def test_stop_asked_as_thanks_ahead_with_a_relay_or_condition_asks(text: str, known: Known) -> None:
    intent = read(text, known)
    assert intent.command == "cancel" and intent.clarify, intent


@pytest.mark.parametrize(
    "text", ["Priya wants the lr-scan numbers in the README", "the lead needs the layouts-nov findings in our docs"]
)
def test_what_another_wants_put_in_the_docs_is_asked(text, known):
    """Someone else's wish for what the docs should hold is no order to write them (a relay): asked."""
    intent = read(text, known)
    assert intent.command == "docs" and intent.clarify


@pytest.mark.parametrize(
    "text", ["we want the lr-scan numbers in the README", "Priya wants the lr-scan numbers in the README, please do it"]
)
def test_the_users_own_wish_for_the_docs_updates_them(text, known):
    read_as(text, "docs", {"sweep": "sweeps/lr-scan"}, known)
