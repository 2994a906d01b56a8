"""Models are built sharded: under FSDP2 each of 4 processes makes and fills only its quarter of the parameters,
so its set-up peak grows by about a quarter of the parameters' bytes, not by all of them (an 8-layer, 540 MB
model)."""

from __future__ import annotations

import json
import os
import threading

import pytest
from helpers import forked_ranks
from support import TINY_MODEL, train, write_experiment
from transformers import AutoConfig

from trainer.model.parameters import count_parameters

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
    sharded = setup_growth(train(experiment, tmp_path / "fsdp", "--nproc", "4", "--layout", "dp_shard=4"))
    # A quarter of the parameters, one module's full tensors while it is initialised, and the code set-up imports
    # (tens of MB of resident set, more on rank 0, and not the same on every machine): half the model is a bound
    # with room for that, and still half of what a rank that built the whole model, as every rank used to, holds.
    # The lower bound is the control: the measurement sees each rank's quarter being built, so staying under half
    # is not a measurement that sees nothing.
    assert len(sharded) == 4
    assert all(0.2 * parameter_bytes < growth < 0.5 * parameter_bytes for growth in sharded), (
        sharded,
        parameter_bytes,
    )


# Wide enough that each weight spans several of shard-local initialisation's tiles (trainer.model.build._tile_shape).
MEDIUM = {**TINY_MODEL, "hidden_size": 1024, "intermediate_size": 2048, "vocab_size": 4096, "num_attention_heads": 8,
          "num_key_value_heads": 4}  # fmt: skip


def _counting_draws(monkeypatch_target) -> list[int]:
    """Count the random values trainer.model.build draws (tile by tile) from here on."""
    import trainer.model.build

    drawn, lock = [0], threading.Lock()  # tiles are drawn by worker threads
    replay = trainer.model.build._replay

    def counted(rule, tensor, generator):
        if generator is not None:
            with lock:
                drawn[0] += tensor.numel()
        return replay(rule, tensor, generator)

    monkeypatch_target.setattr(trainer.model.build, "_replay", counted)
    return drawn


def _build_worker(rank: int, world: int, store: str, layout_text: str) -> None:
    from functools import partial

    import torch
    import torch.distributed as dist
    from torch.distributed.tensor import DTensor

    from trainer.config import TrainSpec
    from trainer.layout import Layout
    from trainer.model.build import build_model, materialize, meta_model
    from trainer.parallel.parallelize import parallelize, parallelize_pipeline

    os.environ["LOCAL_WORLD_SIZE"] = str(world)  # as torchrun sets it: each rank's share of the cores
    dist.init_process_group("gloo", store=dist.FileStore(store, world), rank=rank, world_size=world)
    try:
        layout = Layout.parse(layout_text).resolve(world)
        config = AutoConfig.for_model(**MEDIUM)
        spec, cpu = TrainSpec(precision="fp32"), torch.device("cpu")
        fill = partial(materialize, device=cpu, config=config, weights=None, seed=7)
        with pytest.MonkeyPatch.context() as patch:
            drawn = _counting_draws(patch)
            if layout.pp > 1:
                model, _ = parallelize_pipeline(
                    meta_model(config), layout, layout.build_mesh("cpu"), spec, 2, cpu, fill
                )
            else:
                model = parallelize(meta_model(config), layout, layout.build_mesh("cpu"), spec, "cpu", fill)
            rank_drawn = drawn[0]
            reference = build_model(config, None, seed=7)  # one process's build, in this process
            whole_drawn = drawn[0] - rank_drawn
        named = dict(reference.named_parameters())
        for name, p in model.named_parameters():  # gathered: exactly the one-process values
            full = p.full_tensor() if isinstance(p, DTensor) else p
            assert torch.equal(full, named[name]), (layout_text, name)
        # Each rank drew about its share of the random values (tiles at its shard's edges, and what its layout
        # keeps whole: norms), not the whole model's. Under dp_shard=2 x tp=2 a rank's k and v rows (128 of a
        # 512-row tile) draw their tiles' other rows too: 1.31 times what it holds, with the embedding and head split
        # by vocabulary like the rest.
        held = sum((p.to_local() if isinstance(p, DTensor) else p).numel() for p in model.parameters())
        whole = sum(p.numel() for p in reference.parameters())
        assert rank_drawn < 1.4 * held and held < 0.8 * whole and rank_drawn < 0.8 * whole_drawn, (
            layout_text, rank_drawn, held, whole_drawn)  # fmt: skip
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
@pytest.mark.parametrize(("layout", "world"), [("dp_shard=2", 2), ("tp=2", 2), ("pp=2", 2), ("dp_shard=2,tp=2", 4)])
def test_each_rank_draws_only_its_shard_and_the_layout_builds_the_one_process_weights(tmp_path, layout, world):
    forked_ranks.run(_build_worker, world, world, str(tmp_path / "store"), layout)


def test_set_up_uses_this_ranks_share_of_the_cores(monkeypatch):
    import torch

    from trainer.model.build import setup_thread_count, setup_threads

    cores = len(os.sched_getaffinity(0))
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "1")
    assert setup_thread_count() == cores
    monkeypatch.setenv("LOCAL_WORLD_SIZE", str(4 * cores))
    assert setup_thread_count() == 1  # never none
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "1")
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # as torchrun's OMP_NUM_THREADS=1 leaves a rank
    try:
        with setup_threads() as share:
            assert share == cores and torch.get_num_threads() == cores
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
