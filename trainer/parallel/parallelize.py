"""Apply a layout to a model, in torchtitan's order: tensor parallel, activation checkpointing, compile, then
data parallel (FSDP2 when anything is sharded, DDP for pure replication).

Tensor parallelism follows the model's own `base_model_tp_plan` from transformers (which layers split by columns,
which by rows), so every architecture that declares one works. Embeddings, norms and the output head stay
replicated across tensor-parallel ranks: the row-parallel all-reduce hands every rank the full activations, so
their gradients agree without further communication.
"""

from __future__ import annotations

import contextlib
import fnmatch
import math
from collections.abc import Callable, Iterator

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import DTensor, Replicate
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
from torch.nn.parallel import DistributedDataParallel

from trainer.config import FSDP_REDUCE_DTYPES, TrainSpec
from trainer.layout import TP_STYLES, Layout, fsdp_mesh, tensor_parallel_plan
from trainer.parallel.activation_checkpointing import enable_activation_checkpointing
from trainer.parallel.context_parallel import ContextParallel
from trainer.parallel.pipeline import Pipeline, build_pipeline, split_model

_TP_STYLES = dict(zip(TP_STYLES, (ColwiseParallel, RowwiseParallel), strict=True))


# train.fsdp_reduce_dtype: the dtype FSDP2 reduce-scatters gradients in under bf16 (fp32 as torchtitan: exact sums).
REDUCE_DTYPES = dict(zip(FSDP_REDUCE_DTYPES, (torch.float32, torch.bfloat16), strict=True))


def fsdp_mixed_precision(layout: Layout, spec: TrainSpec) -> bool:
    """bf16 under FSDP2 is its MixedPrecisionPolicy (bf16 gathers, no autocast): autocast elsewhere."""
    return spec.precision == "bf16" and layout.fsdp


def parallelize(
    model: torch.nn.Module,
    layout: Layout,
    mesh: DeviceMesh,
    spec: TrainSpec,
    device_type: str,
    materialize: Callable[[torch.nn.Module], None],
) -> torch.nn.Module:
    """Split a meta-device model for the layout, `materialize` this rank's part, then wrap it for replication."""
    if layout.tp > 1:
        apply_tensor_parallel(model, mesh["tp"])
    enable_activation_checkpointing(model, spec.activation_checkpointing)  # none, selective or full
    if spec.compile and not compiles_whole_step(layout):
        compile_layers(model.get_decoder().layers)
    if layout.fsdp:
        # HSDP when dp_replicate > 1: shard within dp_shard x cp, replicate across dp_replicate.
        _apply_fsdp(model, fsdp_mesh(layout, mesh), spec)
    materialize(model)  # DDP broadcasts rank 0's values: they must exist first
    if layout.dp_replicate > 1 and not layout.fsdp:
        device_ids = [torch.cuda.current_device()] if device_type == "cuda" else None
        model = DistributedDataParallel(
            model, device_ids=device_ids, process_group=mesh["dp_replicate"].get_group(), gradient_as_bucket_view=True
        )
    return model


def parallelize_pipeline(
    model: torch.nn.Module,
    layout: Layout,
    mesh: DeviceMesh,
    spec: TrainSpec,
    grad_accum: int,
    device: torch.device,
    materialize: Callable[[torch.nn.Module], None],
    packed: bool = True,
    context: ContextParallel | None = None,
) -> tuple[torch.nn.Module, Pipeline]:
    """Cut the meta-device model into this rank's pipeline stages, then tensor parallel and FSDP2 within each
    stage, then `materialize` only what this rank holds.

    Data parallelism inside a pipeline is always FSDP2 (HSDP with a shard group of one for pure replication):
    it changes no parameter names, and torch's pipeline stages know to reduce its gradients on the last
    micro-batch only.
    """
    enable_activation_checkpointing(model, spec.activation_checkpointing)  # set on the layers, which stages keep
    pp_rank = mesh.get_local_rank("pp")
    rank_model, stages, stage_ids = split_model(model, pp_rank, layout.pp, spec.pp_stages_per_rank, packed, context)
    if layout.tp > 1:
        apply_tensor_parallel(rank_model, mesh["tp"])
    if spec.compile:
        for stage in stages:
            compile_layers(stage.layers)
    if layout.fsdp:
        dp_mesh = fsdp_mesh(layout, mesh)
        for stage in stages:
            for layer in stage.layers:
                fully_shard(layer, mesh=dp_mesh, **_fsdp_options(spec))
            fully_shard(stage, mesh=dp_mesh, **_fsdp_options(spec))
    materialize(rank_model)
    pp_group = mesh["pp"].get_group()
    pipeline = build_pipeline(
        stages, stage_ids, layout.pp, spec.pp_stages_per_rank, spec.pp_schedule, grad_accum, pp_group, device
    )
    return rank_model, pipeline


def compiles_whole_step(layout: Layout) -> bool:
    """Whether `train.compile` compiles each micro-batch's whole forward and loss as one graph
    (trainer.rank.step.compiled_token_loss_sum) rather than each decoder layer alone.

    One graph where nothing splits the model from outside: one process, or DDP, whose gradient buckets dynamo's
    DDPOptimizer cuts the graph at so that their all-reduces still overlap the backward. It fuses what per-layer
    compilation leaves eager (mask, embedding, final norm, output head, loss) and across layer boundaries:
    measured on this benchmark's model (bench/trainer_vs_hf.py), micro-batch forward and backward 12% shorter than
    eager against 7% for per-layer compilation. FSDP2 (all-gathers at layer boundaries), tensor parallelism
    (DTensor layers), pipeline stages and context parallelism's attention keep torchtitan's per-layer compilation.
    """
    return not (layout.fsdp or layout.tp > 1 or layout.pp > 1 or layout.cp > 1)


def compile_layers(layers: torch.nn.ModuleList, backend: str | Callable = "inductor") -> None:
    """torch.compile each decoder layer on its own, in place, as torchtitan does: after tensor parallel and
    activation checkpointing (whose wrapper is the layer's forward, so compiled with it: trainer.model.build), before
    FSDP2 wraps the layer. Every layer has the same code and shapes, so one compilation serves them all;
    parameter names stay as they were (checkpoints and exports are unchanged)."""
    for layer in layers:
        layer.compile(backend=backend)


def compile_seconds() -> float:
    """Seconds this process spent compiling, by torch's own account: dynamo's frames (with their forward graphs)
    and the backward graphs inductor compiles when they first run."""
    from torch._dynamo.utils import compilation_time_metrics

    return sum(
        sum(compilation_time_metrics.get(key, ())) for key in ("_compile.compile_inner", "backward._backward_impl")
    )


def apply_tensor_parallel(model: torch.nn.Module, tp_mesh: DeviceMesh) -> None:
    """Split the decoder's layers over `tp_mesh` as the model's own tensor-parallel plan says (see the module
    docstring); the embedding, final norm and head stay whole."""
    plan = tensor_parallel_plan(model.config)
    base = model.get_decoder() if hasattr(model, "get_decoder") else model.model
    styles = {}
    for name, _ in base.named_modules():
        style = next((s for pattern, s in plan.items() if fnmatch.fnmatchcase(name, pattern)), None)
        if style is not None:
            styles[name] = _TP_STYLES[style]()
    if not styles:
        raise ValueError(f"{model.config.model_type} declares no tensor-parallel plan")
    parallelize_module(base, tp_mesh, styles)


def _apply_fsdp(model: torch.nn.Module, dp_mesh: DeviceMesh, spec: TrainSpec) -> None:
    """Shard each decoder layer as its own unit (all-gathered just before use), then the rest at the root."""
    for layer in model.get_decoder().layers:
        fully_shard(layer, mesh=dp_mesh, **_fsdp_options(spec))
    fully_shard(model, mesh=dp_mesh, **_fsdp_options(spec))


def _fsdp_options(spec: TrainSpec) -> dict:
    """Under bf16, torchtitan's policy: parameters all-gathered and computed in bf16 (half the bytes of an fp32
    gather, and the gathered copy is the only one: nothing like autocast's per-layer weight cache), gradients
    reduced in train.fsdp_reduce_dtype, fp32 master weights and optimizer state kept sharded."""
    if spec.precision != "bf16":
        return {}
    reduce_dtype = REDUCE_DTYPES[spec.fsdp_reduce_dtype]
    return {"mp_policy": MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=reduce_dtype)}


@contextlib.contextmanager
def gradient_sync(model: torch.nn.Module, reduce_all: bool, reduce_scatter: bool = True) -> Iterator[None]:
    """What a micro-batch's backward reduces: everything where `reduce_all` (the last of an accumulation, or one
    whose reduced gradient is read at once); before that, as little as the setting allows.

    DDP skips its all-reduce: its gradient is whole on every rank anyway. FSDP2 with `reduce_scatter`
    (train.fsdp_grad_sync: micro_batch, torchtitan's choice) still reduce-scatters, so a rank never holds more
    than its gradient shard, and under HSDP skips only the all-reduce across replicas, which the last micro-batch
    does once for the whole step's sum. Without it (step) FSDP2 skips both and each rank accumulates an unsharded
    gradient of its whole share of the model until the last backward: fewer collectives, more memory.
    """
    if reduce_all:
        yield
    elif isinstance(model, DistributedDataParallel):
        with model.no_sync():
            yield
    elif isinstance(model, FSDPModule):
        skip = model.set_requires_all_reduce if reduce_scatter else model.set_requires_gradient_sync
        skip(False)
        try:
            yield
        finally:
            skip(True)
    else:
        yield


def grad_norm_squared(parameters: list[torch.nn.Parameter], device: torch.device, pp: int = 1) -> torch.Tensor:
    """Squared norm of the whole model's gradient over every rank's shards, with one all-reduce in all.

    Each rank adds up the squares of its local gradients, each weighted by how many distinct shards its
    parameter is cut into; the sum over all ranks then counts every piece once per rank of its pipeline stage
    (world / pp ranks hold each stage: a piece held by k of them appears k times, and its weight is
    (world / pp) / k), so dividing by world / pp gives the norm. Not one collective per parameter.
    """
    by_weight: dict[int, list[torch.Tensor]] = {}
    for grad in (p.grad for p in parameters if p.grad is not None):
        weight = 1
        if isinstance(grad, DTensor):
            if any(placement.is_partial() for placement in grad.placements):  # not produced by these layouts
                grad = grad.redistribute(placements=[Replicate() if p.is_partial() else p for p in grad.placements])
            mesh = grad.device_mesh
            # Sharded dims are those not replicated (FSDP2 x TP's _StridedShard is no Shard subclass).
            weight = math.prod(mesh.size(i) for i, p in enumerate(grad.placements) if not p.is_replicate())
            grad = grad.to_local()
        by_weight.setdefault(weight, []).append(grad)
    squares = torch.zeros((), dtype=torch.float64, device=device)
    for weight, grads in by_weight.items():
        norms = torch._foreach_norm([g.float() for g in grads])
        squares += torch.stack(norms).double().square().sum() * weight
    world = dist.get_world_size() if dist.is_initialized() else 1
    if world > 1:
        dist.all_reduce(squares)
        squares /= world // pp
    return squares


def clip_grad_norm(parameters: list[torch.nn.Parameter], max_norm: float, device: torch.device, pp: int = 1) -> float:
    """The global gradient norm before clipping; gradients are scaled down to max_norm when above it."""
    total = float(grad_norm_squared(parameters, device, pp).sqrt())
    if max_norm > 0 and total > max_norm:
        scale = max_norm / (total + 1e-6)
        for grad in (p.grad for p in parameters if p.grad is not None):
            grad.mul_(scale)  # local: a DTensor scales its shard
    return total
