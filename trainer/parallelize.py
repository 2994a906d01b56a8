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
from collections.abc import Iterator

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import FSDPModule, fully_shard
from torch.distributed.tensor import DTensor
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
from torch.nn.parallel import DistributedDataParallel
from transformers import PretrainedConfig

from trainer.config import TrainSpec
from trainer.context_parallel import ContextParallel
from trainer.layout import Layout, LayoutError, fsdp_mesh
from trainer.model import enable_activation_checkpointing
from trainer.pipeline import Pipeline, build_pipeline, split_model

_TP_STYLES = {"colwise": ColwiseParallel, "rowwise": RowwiseParallel}


def tensor_parallel_plan(config: PretrainedConfig) -> dict[str, str]:
    """The model's declared plan, restricted to the column/row splits this trainer applies."""
    plan = getattr(config, "base_model_tp_plan", None) or {}
    return {pattern: style for pattern, style in plan.items() if style in _TP_STYLES}


def check_layout_for_model(layout: Layout, config: PretrainedConfig) -> None:
    """Refuse a tensor-parallel degree the model cannot be split by, naming the constraint."""
    if layout.tp == 1:
        return
    if not tensor_parallel_plan(config):
        raise LayoutError(f"layout tp={layout.tp}: {config.model_type} declares no tensor-parallel plan")
    sizes = {
        "num_attention_heads": config.num_attention_heads,
        "num_key_value_heads": getattr(config, "num_key_value_heads", None) or config.num_attention_heads,
        "intermediate_size": getattr(config, "intermediate_size", None),
    }
    for name, size in sizes.items():
        if size is not None and size % layout.tp:
            raise LayoutError(f"layout tp={layout.tp} must divide the model's {name} ({size})")


def parallelize(
    model: torch.nn.Module, layout: Layout, mesh: DeviceMesh, spec: TrainSpec, device_type: str
) -> torch.nn.Module:
    if layout.tp > 1:
        _apply_tensor_parallel(model, mesh["tp"])
    if spec.activation_checkpointing:
        enable_activation_checkpointing(model)
    if spec.compile:
        model.compile()
    if layout.fsdp:
        # HSDP when dp_replicate > 1: shard within dp_shard x cp, replicate across dp_replicate.
        _apply_fsdp(model, fsdp_mesh(layout, mesh))
    elif layout.dp_replicate > 1:
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
    context: ContextParallel | None = None,
) -> tuple[torch.nn.Module, Pipeline]:
    """Cut the model into this rank's pipeline stages, then tensor parallel and FSDP2 within each stage.

    Data parallelism inside a pipeline is always FSDP2 (HSDP with a shard group of one for pure replication):
    it changes no parameter names, and torch's pipeline stages know to reduce its gradients on the last
    micro-batch only.
    """
    if spec.activation_checkpointing:  # set on the layers, which the stages keep
        enable_activation_checkpointing(model)
    pp_rank = mesh.get_local_rank("pp")
    rank_model, stages, stage_ids = split_model(model, pp_rank, layout.pp, spec.pp_stages_per_rank, context)
    if layout.tp > 1:
        _apply_tensor_parallel(rank_model, mesh["tp"])
    if layout.fsdp:
        dp_mesh = fsdp_mesh(layout, mesh)
        for stage in stages:
            for layer in stage.layers:
                fully_shard(layer, mesh=dp_mesh)
            fully_shard(stage, mesh=dp_mesh)
    pp_group = mesh["pp"].get_group()
    pipeline = build_pipeline(
        stages, stage_ids, layout.pp, spec.pp_stages_per_rank, spec.pp_schedule, grad_accum, pp_group, device
    )
    return rank_model, pipeline


def _apply_tensor_parallel(model: torch.nn.Module, tp_mesh: DeviceMesh) -> None:
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


def _apply_fsdp(model: torch.nn.Module, dp_mesh: DeviceMesh) -> None:
    """Shard each decoder layer as its own unit (all-gathered just before use), then the rest at the root."""
    for layer in model.get_decoder().layers:
        fully_shard(layer, mesh=dp_mesh)
    fully_shard(model, mesh=dp_mesh)


@contextlib.contextmanager
def gradient_sync(model: torch.nn.Module, enabled: bool) -> Iterator[None]:
    """Skip the gradient all-reduce / reduce-scatter of micro-batches before the last of an accumulation."""
    if enabled:
        yield
    elif isinstance(model, DistributedDataParallel):
        with model.no_sync():
            yield
    elif isinstance(model, FSDPModule):
        model.set_requires_gradient_sync(False)
        try:
            yield
        finally:
            model.set_requires_gradient_sync(True)
    else:
        yield


def grad_norm_squared(
    parameters: list[torch.nn.Parameter], device: torch.device, pp_group: dist.ProcessGroup | None
) -> torch.Tensor:
    """Squared norm of the whole model's gradient over every rank's shards (DTensors reduce over their mesh;
    pipeline stages hold disjoint parameters, so their squares add up)."""
    squares = torch.zeros((), dtype=torch.float64, device=device)
    for grad in (p.grad for p in parameters if p.grad is not None):
        norm = torch.linalg.vector_norm(grad, dtype=torch.float32)
        if isinstance(norm, DTensor):
            norm = norm.full_tensor()
        squares += norm.double() ** 2
    if pp_group is not None:
        dist.all_reduce(squares, group=pp_group)
    return squares


def clip_grad_norm(
    parameters: list[torch.nn.Parameter], max_norm: float, device: torch.device, pp_group: dist.ProcessGroup | None
) -> float:
    """The global gradient norm before clipping; gradients are scaled down to max_norm when above it."""
    total = float(grad_norm_squared(parameters, device, pp_group).sqrt())
    if max_norm > 0 and total > max_norm:
        scale = max_norm / (total + 1e-6)
        for grad in (p.grad for p in parameters if p.grad is not None):
            grad.mul_(scale)
    return total
