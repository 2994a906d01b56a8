"""Fused AdamW and the global gradient norm over DTensor layouts (tensor parallel, FSDP2 x TP, PP x TP), in real gloo
processes, against the whole model in the same process: the model is built sharded from the meta device, the
norm costs one all-reduce, and one fused AdamW step leaves every shard equal to the reference's."""

from __future__ import annotations

from functools import partial

import pytest
import torch
import torch.distributed as dist
from helpers import forked_ranks
from support import TINY_MODEL
from test_model_options import tiny_batch
from torch.distributed.tensor import DTensor
from torch.distributed.tensor.debug import CommDebugMode
from transformers import AutoConfig

from trainer.config import TrainSpec
from trainer.layout import Layout
from trainer.model.build import build_model, materialize, meta_model
from trainer.parallel.grad_norm import grad_norm_squared
from trainer.parallel.parallelize import parallelize, parallelize_pipeline
from trainer.parallel.tensor_parallel import reduce_partial_gradients
from trainer.rank.optim import build_optimizer
from trainer.rank.step import token_loss_sum


def _loss_and_grads(model: torch.nn.Module) -> None:
    token_loss_sum(model, tiny_batch()).backward()
    reduce_partial_gradients(list(model.parameters()))  # as the step ends (trainer.rank.step.forward_backward)


def _check_norm_and_step(model: torch.nn.Module, reference: torch.nn.Module, spec: TrainSpec, pp: int) -> None:
    """The global gradient norm costs one all-reduce and equals the reference's; then one fused AdamW step on each:
    the parallel model's groups hold one mesh and placement each (as the fused kernel needs of one list), and every
    shard ends equal to the reference's."""
    with CommDebugMode() as comm:
        squared = grad_norm_squared(list(model.parameters()), torch.device("cpu"), pp)
    expected = sum(p.grad.double().square().sum() for p in reference.parameters())
    assert float(squared) == pytest.approx(float(expected), rel=1e-6)
    assert comm.get_total_counts() == 1, comm.get_comm_counts()

    optimizer = build_optimizer(model, spec, "cpu")
    assert optimizer.defaults["fused"]
    for group in optimizer.param_groups:
        kinds = {(p.device_mesh, tuple(p.placements)) if isinstance(p, DTensor) else None for p in group["params"]}
        assert len(kinds) == 1, kinds
    optimizer.step()
    build_optimizer(reference, spec, "cpu").step()
    named = dict(reference.named_parameters())
    for name, p in model.named_parameters():
        full = p.full_tensor() if isinstance(p, DTensor) else p
        # Adam's first step is about lr x sign(gradient): an element whose gradient is near zero (1e-7 here) moves
        # by up to a few 1e-6 for fp32 rounding of that gradient; a wrong update would be off by the order of lr.
        torch.testing.assert_close(full, named[name], rtol=1e-5, atol=1e-5, msg=name)


def _worker(rank: int, world: int, store: str, layout_text: str) -> None:
    dist.init_process_group("gloo", store=dist.FileStore(store, world), rank=rank, world_size=world)
    try:
        layout = Layout.parse(layout_text).resolve(world)
        config = AutoConfig.for_model(**TINY_MODEL)
        spec = TrainSpec(precision="fp32", lr=1e-2, weight_decay=0.1)
        cpu = torch.device("cpu")
        fill = partial(materialize, device=cpu, config=config, weights=None, seed=0)
        model = parallelize(meta_model(config), layout, layout.build_mesh("cpu"), spec, "cpu", fill)
        reference = build_model(config, None, seed=0)
        named = dict(reference.named_parameters())
        for name, p in model.named_parameters():  # built sharded, yet the single-process weights exactly
            full = p.full_tensor() if isinstance(p, DTensor) else p
            assert torch.equal(full, named[name]), name

        # Every rank feeds the same rows: data-parallel averaging then leaves the reference's gradients.
        _loss_and_grads(model)
        _loss_and_grads(reference)
        _check_norm_and_step(model, reference, spec, layout.pp)
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
@pytest.mark.parametrize(("layout", "world"), [("tp=2", 2), ("dp_shard=2,tp=2", 4)])
def test_fused_adamw_and_one_reduction_norm_match_the_whole_model(tmp_path, layout, world):
    forked_ranks.run(_worker, world, world, str(tmp_path / "store"), layout)


def _pipeline_worker(rank: int, world: int, store: str) -> None:
    dist.init_process_group("gloo", store=dist.FileStore(store, world), rank=rank, world_size=world)
    try:
        layout = Layout.parse("pp=2,tp=2").resolve(world)
        config = AutoConfig.for_model(**TINY_MODEL)
        spec = TrainSpec(precision="fp32", lr=1e-2, weight_decay=0.1)
        cpu = torch.device("cpu")
        fill = partial(materialize, device=cpu, config=config, weights=None, seed=0)
        model, _ = parallelize_pipeline(meta_model(config), layout, layout.build_mesh("cpu"), spec, 2, cpu, fill)
        reference = build_model(config, None, seed=0)
        # Gradients proportional to the weights, on both: no schedule needed to compare norms and updates.
        for p in [*model.parameters(), *reference.parameters()]:
            p.grad = p.detach() * 0.01
        assert any(isinstance(p, DTensor) for p in model.parameters())
        _check_norm_and_step(model, reference, spec, layout.pp)
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_fused_adamw_and_one_reduction_norm_under_pipeline_and_tensor_parallel(tmp_path):
    forked_ranks.run(_pipeline_worker, 4, 4, str(tmp_path / "store"))
