"""agent.understanding on a request whose object is only pointed at, never stated (new sentences of the kind, not the
sets'): a launch, cancel, write or read that depends on something neither the conversation nor the repository holds
("the tweak we agreed on last week", "the last working config", "one of our runs", "the new cluster") asks one
question naming its best reading instead of acting on the defaults or the latest run. A request that points at
something the conversation or the repository does hold (the launch before, a run or sweep named) keeps acting.

The fixture repository is the benchmark's (bench.agent_understanding.build_fixture), as in tests/test_understanding.py.
"""

from __future__ import annotations

import pytest

from agent.understanding.known import Known
from tests.understanding_support import earlier_turn, read, read_as

LAUNCH_BEFORE = earlier_turn(
    "launch_run",
    {"experiment": "meshpilot.yaml", "nproc": 2, "layout": "dp_shard=2", "steps": 20},
    "train 20 steps with dp_shard=2 on 2 gpus",
)


# --- what only a talk, a judgement or a description holds is asked about ---------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "Relaunch with the tweak we agreed on last week.",
        "Go ahead and train the fix you mentioned this morning.",
        "Write the report on one of our runs, whichever looks best.",
        "Launch the optimised version of that on 4 gpus.",
        "Put it on the new cluster and train 20 steps.",
        "Go back to the last working config and retrain.",
        "Start it with the previous settings, 40 steps.",
        "show me the results of the pair I mentioned to Sam",
    ],
)
def test_an_object_only_pointed_at_is_asked_about(text: str, known: Known) -> None:
    intent = read(text, known)
    assert intent.clarify and "Which do you mean by" in intent.clarify


def test_a_talk_is_asked_about_even_after_a_launch(known: Known) -> None:
    intent = read("Relaunch with the tweak we agreed on last week.", known, LAUNCH_BEFORE)
    assert intent.clarify and "the tweak we agreed on" in intent.clarify


def test_the_earlier_settings_not_taken_from_the_launch_before_are_asked_about(known: Known) -> None:
    # the launch before is there, but the call would keep only the 40 steps said: its settings dropped
    intent = read("Start it with the previous settings, 40 steps.", known, LAUNCH_BEFORE)
    assert intent.clarify and "the previous settings" in intent.clarify


# --- near misses: what the conversation or the repository holds keeps acting ------------------------------------------


@pytest.mark.parametrize(
    "text, command, args",
    [
        ("open a PR for lr-scan, the sweep we discussed", "pr", {"sweep": "sweeps/lr-scan"}),
        ("update the docs from lr-scan, one of our sweeps", "docs", {"sweep": "sweeps/lr-scan"}),
        ("launch the settings we agreed on: lr 3e-4, 20 steps on 2 gpus", "run", {"steps": 20, "nproc": 2}),
        ("train the long version on 2 gpus for 15 steps", "run", {"experiment": "configs/long.yaml", "steps": 15}),
        ("cancel the latest run", "cancel", {"run": "runs/r1"}),
    ],
)
def test_a_named_object_keeps_acting(text: str, command: str, args: dict, known: Known) -> None:
    read_as(text, command, args, known)


@pytest.mark.parametrize(
    "text, args",
    [
        ("relaunch with the previous layout", {"layout": "dp_shard=2", "nproc": 2, "steps": 20}),
        ("train again with the configuration from before, 40 steps", {"layout": "dp_shard=2", "steps": 40}),
        ("relaunch the one of before with packing off", {"layout": "dp_shard=2", "set": ["data.packing=false"]}),
        ("same again but 40 steps", {"layout": "dp_shard=2", "steps": 40}),
    ],
)
def test_the_launch_before_pointed_at_keeps_acting(text: str, args: dict, known: Known) -> None:
    intent = read(text, known, LAUNCH_BEFORE)
    assert (intent.command, intent.clarify) == ("run", None)
    assert {key: intent.args.get(key) for key in args} == args
