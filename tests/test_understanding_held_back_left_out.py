"""agent.understanding on actions that must be held back, said in ways the rules had missed (new sentences of each
kind, not the probe's), each with near misses that must still act: a cancel negated by the words that leave a setting
out ("negative on", "hold the", "omit the ... of", "forgo"), waved off after a colon ("stop r1: nah") or dismissed
after it ("resuming r1 is pointless"); a duty relayed ("Jin says I'm supposed to ...") or under a condition; a
condition after the verb in other words ("in the event", "provided", "assuming", "should X still be ..., ..."); a
closing "Don't." or "so no."; a question whether the action is safe or to be decided; a requeue put off; a PR left out
beside a report asked for.

The fixture repository is the benchmark's (bench.agent_understanding.build_fixture), as in tests/test_understanding.py.
"""

from __future__ import annotations

import pytest

from tests.understanding_support import read

ACTIONS = ("run", "sweep", "bench", "cancel", "pr", "report", "docs", "resume")


@pytest.mark.parametrize(
    "text",
    [
        # negated in the words that leave a setting out
        "negative on stopping baseline-ddp",
        "hold the kill on baseline-ddp",
        "omit the abort of r1 today",
        "forgo cancelling baseline-ddp",
        "nobody should have the assistant kill baseline-ddp",
        # waved off or dismissed after it
        "stop baseline-ddp: nah",
        "resuming r1 is pointless",
        # taken back in a sentence of its own
        "Someone asked the assistant to abort baseline-ddp. Don't.",
        "Resume baseline-ddp? It diverged, so no.",
        # a duty relayed, or under a condition
        "Jin says I'm supposed to kill baseline-ddp.",
        "We're supposed to stop r1 if the loss spikes.",
        # a condition after the verb, in other words
        "Kill baseline-ddp in the event the loss diverges.",
        "Stop r1 provided Jin signs off.",
        "Abort baseline-ddp, assuming it has not saved a checkpoint.",
        "Should baseline-ddp still be hogging the node, kill it.",
        "Assuming lr-scan converged, open a PR for it.",
        # asked whether it is safe, or to be decided
        "Could you tell me whether stopping baseline-ddp is wise?",
        "We have to decide whether to kill r1.",
        # a requeue put off
        "requeue r1 on friday",
    ],
)
def test_an_action_held_back_in_other_words_is_asked_never_taken(text, known):
    intent = read(text, known)
    assert intent.command not in ACTIONS or intent.clarify, (intent.command, intent.args)


@pytest.mark.parametrize(
    ("text", "command"),
    [
        ("stop baseline-ddp, it's diverging", "cancel"),
        ("Could somebody get the bot to kill baseline-ddp?", "cancel"),
        ("hold on, stop baseline-ddp now", "cancel"),
        ("kill baseline-ddp if it's still running", "cancel"),  # the state now: the tool meets it as it is
        ("abort baseline-ddp and tell me whether it saved a checkpoint", "cancel"),  # a question of what follows
        ("requeue baseline-ddp from where it stopped", "resume"),
    ],
)
def test_an_order_for_now_near_those_still_acts(text, command, known):
    intent = read(text, known)
    assert (intent.command, intent.clarify) == (command, None)


@pytest.mark.parametrize(
    "text",
    [
        "omit the PR, write up layouts-nov as a report",
        "excluding any PR, draft the lr-scan report",
        "write a report on layouts-nov, pull request: nope",
    ],
)
def test_a_pr_left_out_beside_a_report_is_the_report(text, known):
    intent = read(text, known)
    assert (intent.command, intent.clarify) == ("report", None)


@pytest.mark.parametrize(
    ("text", "command"),
    [
        ("negative on killing baseline-ddp", "cancel"),
        ("ditch the evaluation of baseline-ddp", "bench"),
        ("negative on the docs refresh for layouts-nov", "docs"),
    ],
)
def test_an_action_refused_alone_is_asked_about_not_read_instead(text, command, known):
    intent = read(text, known)
    assert intent.command == command and intent.clarify


def test_an_action_refused_beside_a_read_asked_for_is_the_read(known):
    intent = read("no need to cancel baseline-ddp, show me its loss", known)
    assert (intent.command, intent.clarify) == ("results", None)


def test_a_setting_answered_no_is_no_take_back(known):
    intent = read("train 12 steps. compile? no.", known)
    assert (intent.command, intent.clarify) == ("run", None)


@pytest.mark.parametrize(
    "text",
    [
        # the docs said not to say it
        "the readme mustn't mention layouts-nov before Jin signs off",
        "we want the documentation to never cover layouts-nov",
        # a launch's facts as the past not taken
        "2 GPUs, DDP, 30 steps would've done it, like last time.",
        # a launch of what was said where the parser cannot read
        "Start the experiment from the sync on 8 GPUs",
        "Train what we agreed on in the retro, with 2 GPUs",
        # a resume refused alone
        "no need to rerun baseline-ddp from where it died",
    ],
)
def test_an_output_or_launch_not_asked_as_said_is_asked(text, known):
    intent = read(text, known)
    assert intent.command not in ACTIONS or intent.clarify, (intent.command, intent.args)


def test_a_resume_refused_beside_a_fresh_launch_never_resumes(known):
    intent = read("r1 was preempted; don't relaunch it from where it died, start over on 2 GPUs, 12 steps", known)
    assert intent.command == "run" and intent.args.get("nproc") == 2


@pytest.mark.parametrize(
    ("text", "command"),
    [
        ("restart baseline-ddp from the point it got to", "resume"),
        ("update the docs from layouts-nov", "docs"),
        ("launch 10 steps on 2 GPUs with the config from configs/long.yaml", "run"),
    ],
)
def test_the_near_misses_of_those_still_act(text, command, known):
    intent = read(text, known)
    assert (intent.command, intent.clarify) == (command, None)


def test_a_resume_with_a_setting_changed_is_asked_never_resumed_without_it(known):
    intent = read("requeue baseline-ddp with packing off", known)
    assert intent.command == "resume" and intent.clarify and "settings" in intent.clarify
    assert (read("requeue baseline-ddp", known).clarify) is None  # the near miss: a resume as it was
