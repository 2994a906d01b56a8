"""agent.understanding on requests in a contract's register (new sentences of each kind, not a request set's, and near
misses that must read as before): counts written in words with their numerals in brackets ("eight (8) GPUs"), nodes
"each comprising" or "each consisting of" their GPUs, a proviso that stipulates a setting ("provided that the seed
shall be 7": stated, not a condition), a count that "shall be" its value, and the request before amended ("The
foregoing instruction is hereby amended so that ...; all other terms remain in full force and effect").

The fixture repository is the benchmark's (bench.agent_understanding.build_fixture), as in tests/test_understanding.py.
"""

from __future__ import annotations

import pytest

from tests.understanding_support import earlier_turn, read, read_as

# --- counts, nodes and stipulated settings --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "command", "args"),
    [
        (
            "Please initiate a training run on eight (8) GPUs with layout dp_shard=8 for sixty (60) steps, provided "
            "that the seed shall be 7.",
            "run",
            {"nproc": 8, "layout": "dp_shard=8", "steps": 60, "set": ["train.seed=7"]},
        ),
        (
            "Kindly start a run (the 'Job') on two (2) GPUs under dp_shard=2 for thirty (30) steps, provided that the "
            "learning rate shall be 0.0001 and the warmup shall be 5.",
            "run",
            {"nproc": 2, "steps": 30, "set": ["train.lr=0.0001", "train.warmup_steps=5"]},
        ),
        (
            "Please rank the layouts for llama-3.1-70b across four (4) nodes, each consisting of eight (8) H100 GPUs.",
            "plan",
            {"model": "llama-3.1-70b", "devices": 8, "nodes": 4},
        ),
        (
            "Please plan qwen2.5-72b on three (3) servers, each comprising four (4) H200 GPUs.",
            "plan",
            {"model": "qwen2.5-72b", "devices": 4, "nodes": 3},
        ),
        (
            "Please train on two (2) GPUs with dp_shard=2, whereby the number of steps shall be twenty-five (25).",
            "run",
            {"nproc": 2, "steps": 25},
        ),
    ],
)
def test_a_contracts_words_state_the_request(text, command, args, known):
    read_as(text, command, args, known)


@pytest.mark.parametrize(
    "text",
    [
        # a state of the world, however worded, is still a condition
        "Please initiate a training run on two (2) GPUs with layout dp_shard=2 for thirty (30) steps, provided that "
        "runs/r1 shall have completed.",
        "Please start a run on two (2) GPUs with dp_shard=2 for thirty (30) steps, provided that the learning rate "
        "shall be 0.0001 and the node is back.",
        "Please start a run on two (2) GPUs with dp_shard=2 for thirty (30) steps, provided that the learning rate "
        "shall be lowered if the loss spikes.",
        "only if r1 finished ok, launch 2 GPUs with dp_shard=2 for 20 steps",
    ],
)
def test_a_real_condition_is_still_held_back(text, known):
    intent = read(text, known)
    assert intent.command == "run" and intent.clarify


def test_a_stipulated_setting_never_lets_a_cancel_through(known):
    intent = read("Please cancel r1, provided that the learning rate shall be 0.0002.", known)
    assert intent.command == "cancel" and intent.clarify


# --- the request before amended -------------------------------------------------------------------------------------

LAUNCH_BEFORE = earlier_turn(
    "launch_run", {"nproc": 4, "layout": "dp_shard=4", "steps": 30}, "launch 4 GPUs dp_shard=4 for 30 steps"
)


@pytest.mark.parametrize(
    ("text", "args"),
    [
        (
            "The said request is hereby modified so that the number of steps shall be seventy (70); all other "
            "provisions remain unchanged.",
            {"nproc": 4, "layout": "dp_shard=4", "steps": 70},
        ),
        (
            "The preceding instruction is hereby varied so that the learning rate shall be 0.0005.",
            {"nproc": 4, "layout": "dp_shard=4", "steps": 30, "set": ["train.lr=0.0005"]},
        ),
    ],
)
def test_the_launch_before_amended(text, args, known):
    intent = read(text, known, LAUNCH_BEFORE)
    assert (intent.command, intent.clarify) == ("run", None)
    assert {key: intent.args.get(key) for key in args} == args


def test_an_amendment_with_nothing_before_is_asked(known):
    intent = read("The foregoing instruction is hereby amended so that the number of steps shall be sixty (60).", known)
    assert intent.clarify and "Amend which request" in intent.clarify


def test_an_amendment_under_a_condition_is_held_back(known):
    text = (
        "The preceding instruction is hereby varied so that the number of steps shall be 50, provided that r1 is done."
    )
    intent = read(text, known, LAUNCH_BEFORE)
    assert intent.command == "run" and intent.clarify
