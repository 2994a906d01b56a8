"""agent.understanding on typos: a setting's name typed with a letter left out, and a typo that ends its sentence (new
sentences of each kind, not the set's, and near misses that must read as before): "compil off" turns torch.compile
off, "did it compile ok on r1" reads r1; "20 stpes." is 20 steps, "memory.json." stays that file.

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


# --- a typo that ends its sentence is corrected like any other; a file's stem before its extension is not --------


def test_a_typo_before_a_full_stop_is_corrected(known: Known) -> None:
    read_as("launch on 2 gpus, dp_shard=2, 20 stpes. Thanks", "run", {"nproc": 2, "steps": 20}, known)


def test_a_files_name_before_its_extension_is_kept(known: Known) -> None:
    read_as("what's in tp-try's memory.json.", "read", {"path": "runs/tp-try/memory.json"}, known)
