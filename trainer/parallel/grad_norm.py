"""The gradient's global norm over every rank's shards (one all-reduce in all), and clipping by it."""

from __future__ import annotations

import math

import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor, Replicate


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
            if any(placement.is_partial() for placement in grad.placements):  # read mid-step (the noise scale)
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
