"""Models are built sharded: under FSDP2 each of 4 processes makes and fills only its quarter of the parameters,
so its set-up peak grows by about a quarter of what the single process's grows by (an 8-layer, 540 MB model)."""

from __future__ import annotations

import json

import pytest
from support import TINY_MODEL, train, write_experiment
from transformers import AutoConfig

from trainer.model import count_parameters

BIG = {"hidden_size": 1024, "intermediate_size": 4096, "num_attention_heads": 8, "num_key_value_heads": 8}
CHANGES = {
    "model": {"config": {**BIG, "num_hidden_layers": 8}},
    "data": {"seq_len": 32},
    "train": {"steps": 1, "global_batch_tokens": 128, "micro_batch": 1, "save_final_checkpoint": False},
}


def setup_growth(run) -> list[int]:
    """Bytes each rank's set-up added to what the process held before building the model."""
    measured = json.loads(run.memory.read_text())["measured"]
    return [rank["setup_peak"] - rank["setup_start"] for rank in measured]


@pytest.mark.slow
def test_fsdp_ranks_build_only_their_quarter(tmp_path):
    experiment = write_experiment(tmp_path, CHANGES)
    config = AutoConfig.for_model(**{**TINY_MODEL, **CHANGES["model"]["config"]})
    parameter_bytes = 4 * count_parameters(config)["total"]
    assert parameter_bytes > 500e6
    single = setup_growth(train(experiment, tmp_path / "single", "--nproc", "1"))
    sharded = setup_growth(train(experiment, tmp_path / "fsdp", "--nproc", "4", "--layout", "dp_shard=4"))
    assert single[0] > 0.9 * parameter_bytes, (single, parameter_bytes)
    # A quarter of the parameters, one module's full tensors while it is initialised, and the code set-up imports
    # (tens of MB of resident set, more on rank 0, and not the same on every machine): half the model is a bound
    # with room for that, and still half of what a rank that built the whole model, as every rank used to, holds.
    assert len(sharded) == 4
    assert all(growth < 0.5 * parameter_bytes for growth in sharded), (sharded, single, parameter_bytes)
