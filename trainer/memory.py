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
from torch.distributed.tensor import DTensor


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
    parameter_storages = {ptr for p in model.parameters() if (ptr := _storage_ptr(p)) is not None}
    seen: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        local = tensor._local_tensor if isinstance(tensor, DTensor) else tensor
        ptr = _storage_ptr(local)
        # Weights saved for backward (including FSDP's gathered copies) are parameters, not activations.
        if ptr is not None and ptr not in parameter_storages and not isinstance(tensor, torch.nn.Parameter):
            seen[ptr] = local.untyped_storage().nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        result = run()
    return result, sum(seen.values())


def _storage_ptr(tensor: torch.Tensor) -> int | None:
    local = tensor._local_tensor if isinstance(tensor, DTensor) else tensor
    try:
        return local.untyped_storage().data_ptr()
    except RuntimeError:  # a storage FSDP has freed (resharded parameters)
        return None


def peak_bytes(device: torch.device) -> int:
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(rss if sys.platform == "darwin" else rss * 1024)  # Linux reports KiB
