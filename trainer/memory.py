"""Measured memory per rank, by category.

Parameters, gradients and optimizer state are counted exactly from the tensors each rank holds (its local
shards once layouts shard them). Activations are the bytes autograd saves for backward, seen through
saved-tensor hooks (their peak while micro-batches are in flight), counting each storage once, leaving
out parameters and counting autocast's low-precision weight copies apart.
Peak on CUDA is what the device had to hold: the caching allocator's reserved peak (allocated tensors plus the
blocks it keeps) plus the memory outside the allocator (the CUDA context, NCCL's buffers), measured as this
process's used memory on the device (NVML's per-process figure, where nvidia-ml-py is installed; else the whole
device's, which counts other processes too) minus what the allocator reserves. On CPU it is the process's peak
resident set (which includes the Python interpreter and libraries, so it is an upper bound of what training needs).
"""

from __future__ import annotations

import os
import resource
import sys
from collections.abc import Callable
from pathlib import Path

import torch


def tensor_bytes(tensors) -> int:
    total = 0
    for t in tensors:
        local = t.to_local() if hasattr(t, "to_local") else t  # DTensor: this rank's shard
        total += local.numel() * local.element_size()
    return total


def state_bytes(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, int]:
    params = list(model.parameters())
    from trainer.optim import optimizer_state_tensors  # GaLore keeps projections inside projector objects

    optimizer_tensors = list(optimizer_state_tensors(optimizer))
    return {
        "parameters": tensor_bytes(params),
        "gradients": tensor_bytes(p.grad for p in params if p.grad is not None),
        "optimizer": tensor_bytes(optimizer_tensors),
    }


def saved_for_backward(model: torch.nn.Module, run: Callable[[], torch.Tensor]) -> tuple[torch.Tensor, dict[str, int]]:
    """Run `run()` (forward passes, and with pipelining their backward passes too); return its result and the
    most bytes that autograd held saved for backward at any moment, by kind.

    A saved storage counts from when the forward saves it until the backward has unpacked it as often as it
    was saved (one storage saved by several operations counts once). Under a pipeline schedule several
    micro-batches are in flight at once; without one, the peak is one micro-batch's forward.
    `activations_saved` are the activations proper. `weight_copies_saved` are lower-precision copies of the
    weights that autocast makes and saves (a cast whose input is a parameter): memory that scales with the
    model, not with the batch. Parameters themselves (and FSDP's gathered ones) are counted as parameters.
    """
    parameter_storages = {ptr for p in model.parameters() if (ptr := _storage_ptr(p)) is not None}
    live = _LiveSaved()

    def pack(tensor: torch.Tensor):
        local = tensor._local_tensor if _is_dtensor(tensor) else tensor
        ptr = _storage_ptr(local)
        origin = _weight_origin(tensor)
        if ptr is None or ptr in parameter_storages or origin == "parameter":
            return tensor
        kind = "weight_copies_saved" if origin == "copy" else "activations_saved"
        live.add(ptr, local.untyped_storage().nbytes(), kind)
        return ptr, tensor

    def unpack(packed):
        if isinstance(packed, torch.Tensor):
            return packed
        ptr, tensor = packed
        live.release(ptr)
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        result = run()
    return result, live.peak


class _LiveSaved:
    """Bytes of saved storages still waiting for the backward pass, by kind, and the peak of their sum."""

    def __init__(self) -> None:
        self.storages: dict[int, list] = {}  # ptr -> [bytes, kind, times saved and not yet unpacked]
        self.live = {"activations_saved": 0, "weight_copies_saved": 0}
        self.peak = dict(self.live)

    def add(self, ptr: int, nbytes: int, kind: str) -> None:
        if ptr in self.storages:
            self.storages[ptr][2] += 1
            return
        self.storages[ptr] = [nbytes, kind, 1]
        self.live[kind] += nbytes
        if sum(self.live.values()) > sum(self.peak.values()):
            self.peak = dict(self.live)

    def release(self, ptr: int) -> None:
        entry = self.storages.get(ptr)
        if entry is None:
            return
        entry[2] -= 1
        if entry[2] == 0:
            del self.storages[ptr]
            self.live[entry[1]] -= entry[0]


_VIEWS = {"TBackward0", "ViewBackward0", "TransposeBackward0", "PermuteBackward0", "ExpandBackward0", "AliasBackward0"}


def _weight_origin(tensor: torch.Tensor) -> str | None:
    """ "parameter" for a parameter or a view of one (FSDP's gathered weights too), "copy" for a cast of one
    (autocast's weight copies), None for an activation."""
    if isinstance(tensor, torch.nn.Parameter):
        return "parameter"
    fn = tensor.grad_fn
    while fn is not None and type(fn).__name__ in _VIEWS:
        fn = fn.next_functions[0][0] if fn.next_functions else None
    if _is_parameter_leaf(fn):
        return "parameter"
    is_cast = fn is not None and type(fn).__name__ == "ToCopyBackward0"
    if is_cast and any(_is_parameter_leaf(next_fn) for next_fn, _ in fn.next_functions):
        return "copy"
    return None


def _is_parameter_leaf(fn) -> bool:
    return isinstance(getattr(fn, "variable", None), torch.nn.Parameter)


def _storage_ptr(tensor: torch.Tensor) -> int | None:
    local = tensor._local_tensor if _is_dtensor(tensor) else tensor
    try:
        return local.untyped_storage().data_ptr()
    except RuntimeError:  # a storage FSDP has freed (resharded parameters)
        return None


def current_bytes(device: torch.device) -> int:
    """Bytes in use now: the CUDA allocator's, or on CPU the process's resident set (Linux; elsewhere its peak,
    the closest figure the standard library offers)."""
    if device.type == "cuda":
        return int(torch.cuda.memory_allocated(device))
    statm = Path("/proc/self/statm")
    if statm.is_file():
        return int(statm.read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    return peak_bytes(device)


def peak_bytes(device: torch.device) -> int:
    return measured_peak(device)["peak"]


def measured_peak(device: torch.device) -> dict[str, int]:
    """The peak (see the module docstring) and, on CUDA, what it is made of."""
    if device.type == "cuda":
        free, total = torch.cuda.mem_get_info(device)
        own = process_device_used(str(torch.cuda.get_device_properties(device).uuid), os.getpid())
        return cuda_peak(
            int(torch.cuda.max_memory_allocated(device)),
            int(torch.cuda.max_memory_reserved(device)),
            total - free if own is None else own,
            int(torch.cuda.memory_reserved(device)),
        )
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"peak": int(rss if sys.platform == "darwin" else rss * 1024)}  # Linux reports KiB


def process_device_used(uuid: str, pid: int) -> int | None:
    """Process `pid`'s memory on the GPU of `uuid` as the driver counts it (NVML), or None where NVML is not
    installed or does not report it (a GPU shared with other jobs, or tests run side by side, would otherwise
    count their memory as this process's)."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}")
        used = [p.usedGpuMemory for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle) if p.pid == pid]
    except pynvml.NVMLError:
        return None
    return int(used[0]) if used and used[0] is not None else None


def cuda_peak(allocated_peak: int, reserved_peak: int, device_used: int, reserved_now: int) -> dict[str, int]:
    """A CUDA rank's peak: the allocator's reserved peak plus what lives outside the allocator (context, NCCL,
    CUDA libraries' own allocations), which is the device's used memory less what the allocator holds right now.
    The device's used memory counts every process on it: one rank per device, as the launcher places them."""
    outside = max(0, device_used - reserved_now)
    return {
        "allocated_peak": allocated_peak,
        "reserved_peak": reserved_peak,
        "outside_allocator": outside,
        "peak": reserved_peak + outside,
    }


def _is_dtensor(tensor: torch.Tensor) -> bool:
    # Imported here: torch.distributed.tensor takes half a second, and the launcher imports this module.
    from torch.distributed.tensor import DTensor

    return isinstance(tensor, DTensor)
