"""Data parallelism: FSDP2 (each decoder layer sharded as its own unit, torchtitan's mixed-precision policy under
bf16) or DDP's replication, and the gradient synchronisation that accumulation skips until its last micro-batch."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import Shard
from torch.nn.parallel import DistributedDataParallel

from trainer.config import FSDP_REDUCE_DTYPES, TrainSpec, half_precision, resolve_zero_stage
from trainer.layout import Layout

# train.fsdp_reduce_dtype: the dtype FSDP2 reduce-scatters gradients in under bf16 (fp32 as torchtitan: exact sums).
REDUCE_DTYPES = dict(zip(FSDP_REDUCE_DTYPES, (torch.float32, torch.bfloat16), strict=True))


def fsdp_mixed_precision(layout: Layout, spec: TrainSpec) -> bool:
    """bf16 under FSDP2 is its MixedPrecisionPolicy (bf16 gathers, no autocast): autocast elsewhere."""
    return half_precision(spec.precision) and layout.fsdp


def apply_fsdp(
    model: torch.nn.Module,
    dp_mesh: DeviceMesh,
    spec: TrainSpec,
    experts_mesh: DeviceMesh | None = None,
    loss_ranks: int = 1,
) -> None:
    """Shard each decoder layer as its own unit (all-gathered just before use), then the rest at the root.

    Expert-parallel experts (`experts_mesh`: the ranks holding the same experts) are a unit of their own inside
    their layer, sharded over those ranks only. Their gradient already sums the tokens of the whole ep group (the
    all-to-all's backward brought them), so it must be divided by all `loss_ranks` (data parallel x cp), as the
    dense parameters' are by their FSDP2 mesh, not by the experts' smaller mesh: the experts' forward scales it by
    mesh / loss_ranks (= 1/ep). (FSDP2's set_gradient_divide_factor would reduce with PREMUL_SUM, which gloo lacks.)
    """
    for layer in model.get_decoder().layers:
        shard_layer(layer, dp_mesh, spec, experts_mesh, loss_ranks)
    fully_shard(model, mesh=dp_mesh, **fsdp_options(spec))


def shard_layer(
    layer: torch.nn.Module, dp_mesh: DeviceMesh, spec: TrainSpec, experts_mesh: DeviceMesh | None, loss_ranks: int
) -> None:
    """One decoder layer as an FSDP2 unit, its expert-parallel experts a unit of their own (see apply_fsdp)."""
    if experts_mesh is not None and (experts := _expert_module(layer)) is not None:
        dim = expert_shard_dim(experts.expert_shard.local_experts, experts_mesh.size())
        fully_shard(experts, mesh=experts_mesh, shard_placement_fn=lambda _, d=dim: Shard(d), **fsdp_options(spec))
        experts.expert_shard.grad_scale = experts_mesh.size() / loss_ranks
    fully_shard(layer, mesh=dp_mesh, **fsdp_options(spec))


def expert_shard_dim(local_experts: int, shards: int) -> int:
    """The dimension FSDP2 chunks a rank's experts on: the expert dimension where each of the `shards` ranks gets
    one, else the next (torchtitan's choice): chunks of fewer experts than ranks would leave some ranks none and
    the others whole experts, so the largest rank would hold `shards` / `local_experts` times its share."""
    return 0 if local_experts >= shards else 1


def _expert_module(layer: torch.nn.Module) -> torch.nn.Module | None:
    """The layer's expert-parallel experts module (trainer.parallel.expert_parallel), if it has one."""
    return next((m for m in layer.modules() if hasattr(m, "expert_shard")), None)


def fsdp_options(spec: TrainSpec) -> dict:
    """Under bf16, torchtitan's policy: parameters all-gathered and computed in bf16 (half the bytes of an fp32
    gather, and the gathered copy is the only one: nothing like autocast's per-layer weight cache), gradients
    reduced in train.fsdp_reduce_dtype, fp32 master weights and optimizer state kept sharded.

    Below ZeRO stage 3 (train.zero_stage) a unit's gathered parameters stay from its forward to its backward. Stage
    3 passes nothing: FSDP2's own default, which also keeps the root's (it would gather them again at once)."""
    options = {} if resolve_zero_stage(spec.zero_stage) == 3 else {"reshard_after_forward": False}
    if not half_precision(spec.precision):
        return options
    reduce_dtype = REDUCE_DTYPES[spec.fsdp_reduce_dtype]
    return options | {"mp_policy": MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=reduce_dtype)}


@contextlib.contextmanager
def gradient_sync(
    model: torch.nn.Module, reduce_all: bool, reduce_scatter: bool = True, keep_gathered: bool = False
) -> Iterator[None]:
    """What a micro-batch's backward reduces: everything where `reduce_all` (the last of an accumulation, or one
    whose reduced gradient is read at once); before that, as little as the setting allows.

    DDP skips its all-reduce: its gradient is whole on every rank anyway. FSDP2 with `reduce_scatter`
    (train.fsdp_grad_sync: micro_batch, torchtitan's choice) still reduce-scatters, so a rank never holds more
    than its gradient shard, and under HSDP skips only the all-reduce across replicas, which the last micro-batch
    does once for the whole step's sum. Without it (step) FSDP2 skips both and each rank accumulates an unsharded
    gradient of its whole share of the model until the last backward: fewer collectives, more memory.

    `keep_gathered` (ZeRO stage 1, which reduces once per step): FSDP2 also keeps the parameters it gathered
    through the backward, so the step's later micro-batches gather nothing; the last backward reshards them, before
    the optimizer updates the shards.
    """
    if reduce_all:
        yield
    elif isinstance(model, DistributedDataParallel):
        with model.no_sync():
            yield
    elif isinstance(model, FSDPModule):
        skip = model.set_requires_all_reduce if reduce_scatter else model.set_requires_gradient_sync
        skip(False)
        if keep_gathered:
            model.set_reshard_after_backward(False)
        try:
            yield
        finally:
            skip(True)
            if keep_gathered:
                model.set_reshard_after_backward(True)
    else:
        yield
