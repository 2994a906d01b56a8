"""bf16 under FSDP2 is its MixedPrecisionPolicy, on CPU processes over gloo: bf16 all-gathers, fp32 gradient
reduce-scatters, no autocast and so no bf16 weight copies kept for backward; the losses stay close to the single
process's autocast bf16, and the memory model predicts every rank's parameters, gradients and optimizer state."""

from __future__ import annotations

import json

import pytest
from support import train, write_experiment
from test_layouts import assert_memory_model_matches

STEPS = 4


@pytest.mark.slow
def test_fsdp_bf16_matches_single_process_bf16(tmp_path):
    experiment = write_experiment(tmp_path, {"train": {"steps": STEPS, "precision": "bf16"}})
    single = train(experiment, tmp_path / "single", "--nproc", "1")
    sharded = train(experiment, tmp_path / "fsdp", "--nproc", "2", "--layout", "dp_shard=2")
    for a, b in zip(single.read_steps(), sharded.read_steps(), strict=True):
        assert b["loss"] == pytest.approx(a["loss"], rel=2e-2)
    memory = json.loads(sharded.memory.read_text())
    assert all(rank["weight_copies_saved"] == 0 for rank in memory["measured"])
    assert all(rank["weight_copies_saved"] == 0 for rank in memory["predicted"])
    single_memory = json.loads(single.memory.read_text())["measured"][0]
    assert single_memory["weight_copies_saved"] > 0  # autocast's copies, which FSDP2's policy does without
    assert_memory_model_matches(sharded)
