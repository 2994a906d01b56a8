"""agent.understanding on plain orders wrapped in politeness, formal hedges or framing (new sentences of each kind,
not the sets', and near misses that must keep asking): the old courtesies "if you would be so kind", "if you please",
"if I may"; thanks said ahead of an "if you would ..."; the assistant's own confirmation asked for ("subject to your
approval", "once you confirm"), which every launch waits on anyway; a review the pull request itself is; a run wanted
launched or requested in the passive; "would you mind ...ing"; a launch likened to someone else's way; and a setting
"set to nothing". Real conditions (on the world, on someone else's say, on the assistant's judgment) still hold the
action back.

The fixture repository is the benchmark's (bench.agent_understanding.build_fixture), as in tests/test_understanding.py.
"""

from __future__ import annotations

import pytest

from agent.understanding.known import Known
from tests.understanding_support import read, read_as

# --- courtesies that only soften the order --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "command", "args"),
    [
        ("Kindly start 30 steps on 2 GPUs with FSDP, if you'd be so good.", "run",
         {"nproc": 2, "steps": 30, "layout": "dp_shard=2"}),
        ("If you please, benchmark the tp-try checkpoint.", "bench", {"model": "runs/tp-try"}),
        ("Train 40 steps on 4 GPUs, if you would.", "run", {"nproc": 4, "steps": 40}),
        ("If I may, write up the layouts-nov sweep.", "report", {"sweep": "sweeps/layouts-nov"}),
        ("Benchmark r1, if at all possible.", "bench", {"model": "runs/r1"}),
        ("If it's all the same to you, open a PR for layouts-nov.", "pr", {"sweep": "sweeps/layouts-nov"}),
        ("I'd be grateful if you would benchmark baseline-ddp.", "bench", {"model": "runs/baseline-ddp"}),
        ("If you'd kindly write up lr-scan, that would be lovely.", "report", {"sweep": "sweeps/lr-scan"}),
    ],
)  # fmt: skip
def test_a_courtesy_is_no_condition(text: str, command: str, args: dict, known: Known) -> None:
    read_as(text, command, args, known)


# --- the assistant's own confirmation: the approval every launch already waits on --------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "Subject to your approval, launch 30 steps on 2 GPUs.",
        "With your confirmation, I'd like a run started on 2 GPUs for 30 steps.",
        "Launch 30 steps on 2 GPUs once you confirm.",
        "If you approve, train 30 steps on 2 GPUs.",
    ],
)
def test_your_own_confirmation_is_no_condition(text: str, known: Known) -> None:
    read_as(text, "run", {"nproc": 2, "steps": 30}, known)


# --- a pull request under a review: the PR is that review ---------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "As long as it goes through the usual code review, open a PR for the layouts-nov report.",
        "Open a pull request for layouts-nov, provided this gets reviewed.",
    ],
)
def test_a_review_the_pr_itself_is_is_no_condition(text: str, known: Known) -> None:
    read_as(text, "pr", {"sweep": "sweeps/layouts-nov"}, known)


# --- a run wanted launched, asked for in the passive, or as "would you mind" ------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "I'd like a training run started on 2 GPUs for 30 steps.",
        "We formally request that a run be launched on 2 GPUs for 30 steps.",
        "Would you mind launching 30 steps on 2 GPUs?",
        "Might I ask you to train 30 steps on 2 GPUs?",
    ],
)
def test_a_run_asked_for_formally_is_launched(text: str, known: Known) -> None:
    read_as(text, "run", {"nproc": 2, "steps": 30}, known)


def test_would_you_mind_benchmarking_benchmarks(known: Known) -> None:
    read_as("Would you mind benchmarking baseline-ddp?", "bench", {"model": "runs/baseline-ddp"}, known)


# --- a launch likened to someone else's way, and a setting set to nothing -------------------------------------


def test_a_launch_likened_to_someones_way_is_an_order(known: Known) -> None:
    read_as("Set this up the way Faraday would have: 2 processes, 30 steps, dp_shard=2.", "run",
            {"nproc": 2, "steps": 30, "layout": "dp_shard=2"}, known)  # fmt: skip


@pytest.mark.parametrize(
    ("text", "setting"),
    [
        ("Train 30 steps with the warmup set to zero.", "train.warmup_steps=0"),
        ("Train 30 steps, weight decay cut down to nothing at all.", "train.weight_decay=0"),
    ],
)
def test_a_setting_set_to_nothing_is_zero(text: str, setting: str, known: Known) -> None:
    read_as(text, "run", {"steps": 30, "set": [setting]}, known)


# --- near misses: real conditions, someone else's say, the user's own regret: still asked -------------------------


@pytest.mark.parametrize(
    "text",
    [
        "Train 30 steps on 2 GPUs if the loss on r1 is still falling, if you would be so kind.",
        "If you would be so kind as to check that r1 finished, train 30 steps on 2 GPUs.",
        "Subject to your confirmation that the node is back, I'd like a run launched on 2 GPUs for 30 steps.",
        "Subject to Dana's approval, launch 30 steps on 2 GPUs.",
        "If you confirm r1 finished, launch 30 steps on 2 GPUs.",
        "Pending sign-off from Ana, I'd like a run started on 2 GPUs for 30 steps.",
        "If you think it's worth it, train 30 steps on 2 GPUs.",
        "Provided the lr-scan report is reviewed, open a pull request for it.",
        "Open a PR for lr-scan provided it gets reviewed by Dana first.",
        "Provided it goes through review, train 30 steps on 2 GPUs.",
        "2 GPUs, FSDP, 30 steps, the way I would have done it.",
        "Dana requested that a run be launched on 2 GPUs for 30 steps.",
        "I'd be grateful if you would check r1 finished and then benchmark it.",
        "So long as baseline-ddp finished, benchmark it.",
        "Train 30 steps on 2 GPUs as long as the second node is back.",
        "Open a PR for layouts-nov as long as the report is written.",
    ],
)
def test_a_real_condition_still_asks(text: str, known: Known) -> None:
    intent = read(text, known)
    assert intent.clarify is not None, intent


@pytest.mark.parametrize(
    "text",
    [
        "Subject to your approval, cancel r1.",
        "If you please, cancel r1 if it's done.",
        "Kill tp-try as long as r1 is safe.",
    ],
)
def test_a_cancel_under_any_condition_still_asks(text: str, known: Known) -> None:
    intent = read(text, known)
    assert (intent.command, intent.clarify is not None) == ("cancel", True)


@pytest.mark.parametrize("text", ["Train 30 steps on 2 GPUs, as long as it's no trouble.",
                                  "Train for as long as possible on 2 GPUs, 30 steps."])  # fmt: skip
def test_as_long_as_without_a_condition_is_an_order(text: str, known: Known) -> None:
    read_as(text, "run", {"nproc": 2, "steps": 30}, known)


def test_would_you_mind_not_launching_launches_nothing(known: Known) -> None:
    intent = read("Would you mind not launching anything today?", known)
    assert intent.command != "run" or intent.clarify is not None


def test_the_warmup_that_is_nothing_special_sets_nothing(known: Known) -> None:
    intent = read("Train 30 steps; the warmup is nothing special.", known)
    assert not any("warmup" in value for value in intent.args.get("set", []))
