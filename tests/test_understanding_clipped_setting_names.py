"""agent.understanding on a setting's name typed with a letter left out (a new sentence of the kind, not the set's,
and a near miss that must read as before): "compil off" turns torch.compile off; "did it compile ok on r1" reads r1.

The fixture repository is the benchmark's (bench.agent_understanding.build_fixture), as in tests/test_understanding.py.
"""

from __future__ import annotations

from agent.understanding.known import Known
from tests.understanding_support import read, read_as


def test_a_clipped_compile_is_turned_off(known: Known) -> None:
    read_as(
        "train 4 gpus 30 steps, compil off pls", "run", {"nproc": 4, "steps": 30, "set": ["train.compile=false"]}, known
    )


def test_compile_said_of_a_run_reads_it(known: Known) -> None:
    assert read("did it compile ok on r1", known).command == "results"
