"""Measured memory per rank, by category.

Parameters, gradients and optimizer state are counted exactly from the tensors each rank holds (its local
shards once layouts shard them). Activations are the bytes autograd saves for backward, seen through
saved-tensor hooks during one micro-batch, counting each storage once and leaving out parameters.
Peak is the CUDA allocator's peak, or on CPU the process's peak resident set (which includes the
Python interpreter and libraries, so it is an upper bound of what training needs).
"""

from __future__ import annotations

import resource
import sys
from collections.abc import Callable

import torch


def tensor_bytes(tensors) -> int:
    total = 0
    for t in tensors:
        local = t.to_local() if hasattr(t, "to_local") else t  # DTensor: this rank's shard
        total += local.numel() * local.element_size()
    return total


def state_bytes(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, int]:
    params = list(model.parameters())
    optimizer_tensors = [v for state in optimizer.state.values() for v in state.values() if torch.is_tensor(v)]
    return {
        "parameters": tensor_bytes(params),
        "gradients": tensor_bytes(p.grad for p in params if p.grad is not None),
        "optimizer": tensor_bytes(optimizer_tensors),
    }


def saved_activation_bytes(model: torch.nn.Module, run: Callable[[], torch.Tensor]) -> tuple[torch.Tensor, int]:
    """Run `run()` (a forward pass) and return its result and the bytes autograd saved for backward."""
    parameter_storages = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in parameter_storages:
            seen[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        result = run()
    return result, sum(seen.values())


def peak_bytes(device: torch.device) -> int:
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(rss if sys.platform == "darwin" else rss * 1024)  # Linux reports KiB
