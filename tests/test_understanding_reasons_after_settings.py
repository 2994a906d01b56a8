"""agent.understanding on what the team lacks, said as the reason of a setting turned off before it (new sentences of
the kind, not the sets', and near misses that must still ask): "warmup 0; we don't have patience for a long ramp" is
no second setting to ask about, "we don't have time for packing" alone still asks whether packing is on.

The fixture repository is the benchmark's (bench.agent_understanding.build_fixture), as in tests/test_understanding.py.
"""

from __future__ import annotations

import pytest

from agent.understanding.known import Known
from tests.understanding_support import read, read_as


@pytest.mark.parametrize(
    ("text", "args"),
    [
        (
            "train 4 gpus, warmup 0; we don't have patience for a long ramp",
            {"nproc": 4, "set": ["train.warmup_steps=0"]},
        ),
        ("2 gpus, no compile, we do not have the time for a slow start", {"nproc": 2, "set": ["train.compile=false"]}),
    ],
)
def test_a_lack_said_as_the_reason_of_a_setting_off_is_no_setting(text: str, args: dict, known: Known) -> None:
    read_as(text, "run", args, known)


@pytest.mark.parametrize(
    "text",
    [
        "train 2 gpus 10 steps, we don't have the budget for that",  # nothing turned off: what "that" is, asked
        "train 2 gpus dp_shard=2, no compile, we don't have time for packing",  # packing said: on or off, asked
    ],
)
def test_a_lack_with_nothing_turned_off_for_it_still_asks(text: str, known: Known) -> None:
    assert read(text, known).clarify
