"""An action named but not asked for now is never taken (agent.understanding.mood): negated, taken back, put off,
conditional, supposed or asked about, the parser asks one question naming the call instead. The sentences here are
new ones of the kinds the review probe found (agent/understanding/examples/held_back.jsonl holds the probe's own); the
second half are their near misses, orders for now that must still act."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage

from agent.understanding import context_of, understand
from agent.understanding.mood import held_back
from bench.agent_understanding import build_fixture


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    return build_fixture(tmp_path_factory.mktemp("held_back") / "repo")


def read(text: str, repo: Path):
    """The Intent of `text`, the conversation's first message, in the fixture repository."""
    return understand(text, context_of([HumanMessage(text)], str(repo)))


@pytest.mark.parametrize(
    ("text", "command", "why"),
    [
        # negated: every mention of the action under a negation
        ("please don't stop baseline-ddp", "cancel", "negated"),
        ("we really shouldn't benchmark tp-try", "bench", "negated"),
        ("I never told you to resume tp-try", "resume", "negated"),
        ("do not under any circumstances open a pull request for lr-scan", "pr", "negated"),
        ("please don't launch or cancel any runs, just check whether tp-try finished", "cancel", "negated"),
        # taken back, with nothing asked in its place
        ("kill tp-try... never mind", "cancel", "taken back"),
        ("benchmark baseline-ddp. jk", "bench", "taken back"),
        # supposed
        ("in theory, abort baseline-ddp: does it keep its last checkpoint?", "cancel", "supposed"),
        # conditional
        ("unless lr-scan is still going, write up layouts-nov", "report", "conditional"),
        ("if baseline-ddp beat r1, sweep the long config", "sweep", "conditional"),
        # put off: a time in the action's clause, a time alone before it, a time clause it waits on, an intent
        ("evaluate baseline-ddp this evening", "bench", "deferred"),
        ("kill tp-try in 30 minutes", "cancel", "deferred"),
        ("tonight: sweep configs/long.yaml with 4 trials", "sweep", "deferred"),
        ("train 30 steps on 2 gpus as soon as r1 is done", "run", "deferred"),
        ("we're planning to refresh the docs from lr-scan", "docs", "deferred"),
        ("I'll probably stop tp-try", "cancel", "deferred"),
        ("write up layouts-nov next week", "report", "deferred"),
        # asked whether the user may act, or a suggestion weighed
        ("should I benchmark baseline-ddp?", "bench", "asked"),
        ("maybe we should stop baseline-ddp", "cancel", "asked"),
    ],
)
def test_an_action_not_asked_for_now_is_asked_about_never_taken(repo, text, command, why):
    assert held_back(text.lower(), command) == why
    intent = read(text, repo)
    assert intent.command not in ("run", "sweep", "bench", "cancel", "pr", "report", "docs", "resume") or intent.clarify


@pytest.mark.parametrize(
    ("text", "command"),
    [
        ("don't wait for it, stop tp-try", "cancel"),  # the negation is the wait's
        ("I don't want a full sweep, just a quick 4-trial one", "sweep"),  # the kind corrected
        ("don't benchmark r1, the ddp baseline is the one I want scored", "bench"),  # another named
        ("stop tp-try if it's still running", "cancel"),  # the state now: the tool meets it as it is
        ("evaluate baseline-ddp, if that's ok", "bench"),  # a courtesy
        ("train 20 steps on 2 gpus and see if it goes faster", "run"),  # a purpose
        ("write up layouts-nov for the meeting tomorrow", "report"),  # the meeting's time, not the report's
        ("stop tp-try, we need the gpus in five minutes", "cancel"),  # another clause's time
        ("could you benchmark r1 whenever you get a moment?", "bench"),  # no time at all
        ("write the report for layouts-nov. no PR. not yet.", "report"),  # the PR put off
        ("before I forget, kill tp-try", "cancel"),
    ],
)
def test_an_order_for_now_near_those_still_acts(repo, text, command):
    assert held_back(text.lower(), command) is None
    intent = read(text, repo)
    assert (intent.command, intent.clarify) == (command, None)


def test_the_question_names_the_call_it_would_make(repo):
    intent = read("sweep the long config tomorrow", repo)
    assert "/sweep experiment=configs/long.yaml" in str(intent.clarify)
    assert "only act now" in str(intent.clarify)


@pytest.mark.parametrize(
    ("text", "layout"),
    [
        ("train 20 steps on 2 gpus using tp=2 rather than pp=2", "tp=2"),
        ("rather than ddp, use fsdp on 2 gpus for 20 steps", "dp_shard=2"),
        ("instead of pp=2, launch 5 steps with dp_replicate=2", "dp_replicate=2"),
        ("run 8 steps with fsdp on 2 gpus instead of tensor parallel", "dp_shard=2"),
    ],
)
def test_the_layout_replaced_is_never_the_one_launched(repo, text, layout):
    """'X rather than Y', 'instead of Y, X': Y is what the user moves away from ("rather" alone corrects: "fsdp,
    rather ddp" is DDP)."""
    intent = read(text, repo)
    assert (intent.command, intent.args.get("layout"), intent.clarify) == ("run", layout, None)


@pytest.mark.parametrize("text", ["train 12 steps on 2 gpus avoiding pp=2", "launch 6 steps skipping tp=2 on 2 gpus"])
def test_a_layout_avoided_is_never_launched(repo, text):
    intent = read(text, repo)
    assert intent.command == "run" and "=2" not in intent.args.get("layout", "")


@pytest.mark.parametrize(
    ("text", "override"),
    [
        ("train 10 steps without compile, actually no, turn it back on", "train.compile=true"),
        (
            "launch 8 steps with activation checkpointing... actually switch it off",
            "train.activation_checkpointing=false",
        ),
    ],
)
def test_a_setting_corrected_by_a_pronoun_takes_the_last_state(repo, text, override):
    intent = read(text, repo)
    assert intent.command == "run" and intent.clarify is None
    assert override in intent.args.get("set", [])


@pytest.mark.parametrize("text", ["I don't want to stop baseline-ddp", "stop baseline-ddp. never mind"])
def test_a_bare_yes_after_an_action_refused_does_not_take_it(repo, text):
    """The question after a negation or a take-back offers no reading a bare 'ok' would run (agent.offline.OFFER)."""
    intent = read(text, repo)
    assert intent.clarify is not None and not intent.clarify.endswith("yes / edit")
    assert "`/cancel run=runs/baseline-ddp`" in intent.clarify
