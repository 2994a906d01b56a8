"""Tensor parallelism: the decoder's layers split over the tp ranks as the model's own `base_model_tp_plan` from
transformers says (which layers split by columns, which by rows), so every architecture that declares one works.
Embeddings, norms and the output head stay replicated across tensor-parallel ranks: the row-parallel all-reduce
hands every rank the full activations, so their gradients agree without further communication."""

from __future__ import annotations

import fnmatch

import torch
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

from trainer.layout import TP_STYLES, tensor_parallel_plan

_TP_STYLES = dict(zip(TP_STYLES, (ColwiseParallel, RowwiseParallel), strict=True))
# Modules the plan keeps whole on every rank although they see only that rank's heads (Qwen3's q_norm and k_norm):
# each rank's gradient is then its heads' share, and the shares must be summed over the tensor-parallel ranks.
GRAD_ALLREDUCE = "replicated_with_grad_allreduce"


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
    summed = [
        p for p, style in (getattr(model.config, "base_model_tp_plan", None) or {}).items() if style == GRAD_ALLREDUCE
    ]
    for name, module in base.named_modules():
        if any(fnmatch.fnmatchcase(name, pattern) for pattern in summed):
            module.tp_grad_sum_group = tp_mesh.get_group()


def sum_partial_gradients(model: torch.nn.Module) -> None:
    """Sum over the tensor-parallel ranks the gradients of the modules the plan marks GRAD_ALLREDUCE (after the
    step's last backward, before they are read; FSDP2's shards of them sit at the same offsets on every
    tensor-parallel rank, so their local parts add up)."""
    for module in model.modules():
        group = getattr(module, "tp_grad_sum_group", None)
        for parameter in module.parameters(recurse=False) if group is not None else ():
            if parameter.grad is not None:
                grad = parameter.grad
                torch.distributed.all_reduce(grad.to_local() if hasattr(grad, "to_local") else grad, group=group)
