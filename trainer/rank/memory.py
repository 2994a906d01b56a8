"""Measured memory per rank, by category.

Parameters, gradients and optimizer state are counted exactly from the tensors each rank holds (its local
shards once layouts shard them). Activations are the bytes autograd saves for backward, seen through saved-tensor hooks,
and the outputs selective checkpointing's cache keeps for the recomputation (reported by
trainer.parallel.activation_checkpointing; their peak while micro-batches are in flight), counting each storage once,
leaving out parameters and counting autocast's low-precision weight copies apart. MemoryTimeline follows these
categories through one step, phase by phase.
Peak on CUDA is what the device had to hold: the caching allocator's reserved peak (allocated tensors plus the
blocks it keeps) plus the memory outside the allocator (the CUDA context, NCCL's buffers), measured as this
process's used memory on the device (NVML's per-process figure, where nvidia-ml-py is installed; else the whole
device's, which counts other processes too) minus what the allocator reserves. On CPU it is the process's peak
resident set (which includes the Python interpreter and libraries, so it is an upper bound of what training needs).
"""

from __future__ import annotations

import contextlib
import os
import resource
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path

import torch

from trainer.parallel.activation_checkpointing import countings

# The MemoryTimeline recording the current step, if one is: saved_for_backward's hooks tell it what they see.
_recording: MemoryTimeline | None = None


def tensor_bytes(tensors) -> int:
    total = 0
    for t in tensors:
        local = t.to_local() if hasattr(t, "to_local") else t  # DTensor: this rank's shard
        total += local.numel() * local.element_size()
    return total


def state_bytes(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, int]:
    return _state_bytes(list(model.parameters()), optimizer)


def _state_bytes(params: list[torch.nn.Parameter], optimizer: torch.optim.Optimizer) -> dict[str, int]:
    from trainer.rank.optim import optimizer_state_tensors  # GaLore keeps projections inside projector objects

    optimizer_tensors = list(optimizer_state_tensors(optimizer))
    return {
        "parameters": tensor_bytes(params),
        "gradients": tensor_bytes(p.grad for p in params if p.grad is not None),
        "optimizer": tensor_bytes(optimizer_tensors),
    }


def held_gradient_bytes(model: torch.nn.Module) -> int:
    """Bytes of gradient FSDP2 holds outside the parameters' .grad between the backward passes of one step: an
    unsharded gradient per parameter accumulated without reduce-scattering (in the parameter's dtype, or the
    reduce dtype once converted), and under HSDP the reduce-scattered sum that waits for the all-reduce across
    replicas. Read from FSDP2's parameter groups: torch offers no public view of them."""
    # FSDPModule only under FSDP2
    from torch.distributed.fsdp import FSDPModule

    held = []
    for module in model.modules():
        if not isinstance(module, FSDPModule):
            continue
        for group in module._get_fsdp_state()._fsdp_param_groups:
            held.append(group._partial_reduce_output)
            for fsdp_param in group.fsdp_params:
                held.append(fsdp_param.unsharded_accumulated_grad)
                unsharded = getattr(fsdp_param, "_unsharded_param", None)
                held.append(None if unsharded is None else unsharded.grad)
    return tensor_bytes(t for t in held if t is not None)


def saved_for_backward(model: torch.nn.Module, run: Callable[[], torch.Tensor]) -> tuple[torch.Tensor, dict[str, int]]:
    """Run `run()` (forward passes, and with pipelining their backward passes too); return its result and the
    most bytes that autograd held saved for backward at any moment, by kind.

    A saved storage counts from when the forward saves it until the backward has unpacked it as often as it
    was saved (one storage saved by several operations counts once); an output selective checkpointing keeps
    counts from the forward until the recomputation takes it. Under a pipeline schedule several
    micro-batches are in flight at once; without one, the peak is one micro-batch's forward.
    `activations_saved` are the activations proper. `weight_copies_saved` are lower-precision copies of the
    weights that autocast makes and saves (a cast whose input is a parameter): memory that scales with the
    model, not with the batch. Parameters themselves (and FSDP's gathered ones) are counted as parameters.
    A MemoryTimeline recording this step sees the same saved tensors: only the innermost saved-tensor hooks
    run, so these tell it too.
    """
    live = _LiveSaved()
    with _counting_saved_tensors(model, [live] if _recording is None else [live, _recording]):
        result = run()
    return result, live.peak


@contextlib.contextmanager
def _counting_saved_tensors(model: torch.nn.Module, counters: list):
    """Saved-tensor hooks that tell each counter (`add(ptr, nbytes, kind)` when the forward saves a storage,
    `release(ptr)` when the backward unpacks it) about every saved storage that is not a parameter. Inside, what
    keeps tensors for backward outside autograd's saved tensors reports to the same counters (`kept_counting`)."""
    counting = _Counting(model, counters)

    def pack(tensor: torch.Tensor):
        ptr = counting.add(tensor)
        return tensor if ptr is None else (ptr, tensor)

    def unpack(packed):
        if isinstance(packed, torch.Tensor):
            return packed
        ptr, tensor = packed
        counting.release(ptr)
        return tensor

    countings.append(counting)
    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
            yield
    finally:
        countings.pop()


class _Counting:
    """Tells its counters about storages kept for backward: a storage counts once per `add` until as many
    `release`s; parameters (and views of them) are left out, autocast's weight copies counted apart."""

    def __init__(self, model: torch.nn.Module, counters: list) -> None:
        self.counters = counters
        self.parameter_storages = {ptr for p in model.parameters() if (ptr := _storage_ptr(p)) is not None}

    def add(self, tensor: torch.Tensor) -> int | None:
        """Count `tensor`'s storage: its id (for `release`), or None where it is not counted."""
        local = tensor._local_tensor if _is_dtensor(tensor) else tensor
        ptr = _storage_ptr(local)
        origin = _weight_origin(tensor)
        if ptr is None or ptr in self.parameter_storages or origin == "parameter":
            return None
        kind = "weight_copies_saved" if origin == "copy" else "activations_saved"
        for counter in self.counters:
            counter.add(ptr, local.untyped_storage().nbytes(), kind)
        return ptr

    def release(self, ptr: int) -> None:
        for counter in self.counters:
            counter.release(ptr)


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


class MemoryTimeline:
    """One training step's memory on this rank over time, by category, as PyTorch's memory visualiser draws it:
    a point at each boundary of the step's phases, `points` in the order they happened.

    The phases: "start" (before the first forward), then "forward mb1" (that micro-batch's forward has ended, its
    loss included), "backward mb1" (its backward has ended, gradients written), ..., "optimizer" and "zero_grad"
    (marked by the loop). Under a pipeline schedule each of this rank's stages runs each micro-batch's forward and
    backward in turn, interleaved as the schedule orders them; with several stages per rank the phases name the
    stage ("forward stage 2 mb1").

    Parameters, gradients and optimizer state are `state_bytes` of the moment, of the parameters the rank held
    when the step began (under FSDP2 its shards), the gradients with those FSDP2 holds outside them between
    micro-batches (`held_gradient_bytes`: unsharded ones accumulated without a reduce-scatter, HSDP's sums waiting
    for the all-reduce across replicas).
    Activations are the bytes saved for backward and not yet used by it (autocast's weight copies included),
    counted by the saved-tensor hooks of `saved_for_backward` (and what selective checkpointing's cache keeps).
    Temporaries, on CUDA only, are what the allocator holds beyond those (FSDP's gathered parameters, logits,
    communication buffers, rounding to the allocator's blocks). A CPU has no such figure: the process's resident
    set counts the interpreter and libraries, and freed memory stays resident, so the points leave it out.

    How the boundaries are seen: a forward begins when one of `forward_modules` (the model, or this rank's
    pipeline stages) is called with autograd on; it ends when the next forward begins or the backward unpacks a
    saved tensor; a backward ends with the autograd pass that unpacked it, after the callbacks data parallelism
    queues there (they write the gradients).
    """

    def __init__(
        self,
        model: torch.nn.Module,
        optimizer: torch.optim.Optimizer,
        device: torch.device,
        forward_modules: dict[str, torch.nn.Module],
    ):
        self.model, self.optimizer, self.device = model, optimizer, device
        # Taken before the step: FSDP2 swaps gathered copies into the modules while they run (temporaries, on
        # CUDA); its sharded parameters, and the gradients reduced into them, stay these.
        self.parameters = list(model.parameters())
        self.forward_modules = forward_modules  # label prefix ("" or "stage 2 ") -> a module the step calls
        self.points: list[dict[str, int | str]] = []
        self._live = _LiveSaved()
        self._calls: dict[str, int] = {}  # forwards run per module
        self._forward: str | None = None  # the forward running ("mb2", "stage 2 mb2"), not yet marked as ended
        self._backward: str | None = None  # the backward running
        self._saved_by: dict[int, str] = {}  # saved storage -> the forward that saved it

    @contextlib.contextmanager
    def recording(self):
        """Record the forward and backward passes run inside (a whole step's, or a pipeline schedule's)."""
        global _recording
        hooks = [
            module.register_forward_pre_hook(partial(self._forward_starts, prefix))
            for prefix, module in self.forward_modules.items()
        ]
        _recording = self
        try:
            self.mark("start")
            with _counting_saved_tensors(self.model, [self]):
                yield self
            self._forward_ends()
        finally:
            _recording = None
            for hook in hooks:
                hook.remove()

    def mark(self, phase: str) -> None:
        """A point: the bytes of each category now."""
        state = _state_bytes(self.parameters, self.optimizer)
        state["gradients"] += held_gradient_bytes(self.model)
        activations = sum(self._live.live.values())
        point: dict[str, int | str] = {"phase": phase, **state, "activations": activations}
        if self.device.type == "cuda":
            tracked = sum(state.values()) + activations
            point["temporaries"] = max(0, int(torch.cuda.memory_allocated(self.device)) - tracked)
        self.points.append(point)

    def add(self, ptr: int, nbytes: int, kind: str) -> None:
        """A storage saved for backward (from `_counting_saved_tensors`)."""
        if ptr not in self._live.storages and self._forward is not None:
            self._saved_by[ptr] = self._forward
        self._live.add(ptr, nbytes, kind)

    def release(self, ptr: int) -> None:
        """The backward unpacked a saved storage: the first unpack of a backward ends the forward before it."""
        self._forward_ends()
        if self._backward is None:
            self._backward = self._saved_by.get(ptr, "")
            _after_backward(self._backward_ends)
        self._live.release(ptr)
        if ptr not in self._live.storages:
            self._saved_by.pop(ptr, None)

    def _forward_starts(self, prefix: str, module: torch.nn.Module, args) -> None:
        if not torch.is_grad_enabled():  # a pipeline's shape inference, an evaluation: no training forward
            return
        self._forward_ends()
        self._calls[prefix] = self._calls.get(prefix, 0) + 1
        self._forward = f"{prefix}mb{self._calls[prefix]}"

    def _forward_ends(self) -> None:
        if self._forward is not None:
            self.mark(f"forward {self._forward}")
            self._forward = None

    def _backward_ends(self) -> None:
        self.mark(f"backward {self._backward}".rstrip())
        self._backward = None


def _after_backward(callback: Callable[[], None]) -> None:
    """Run `callback` when the autograd pass running now ends, after the callbacks queued there so far and those
    queued later in the pass (DDP's and FSDP's, which write the gradients): a callback queued by a callback runs
    after every one queued before it. torch has no public API for this; DDP and FSDP use the same one."""
    engine = torch.autograd.Variable._execution_engine
    engine.queue_callback(lambda: engine.queue_callback(callback))


# Operations whose output shares its input's storage: a weight reached through them is still the weight. Besides
# the plain views: one expert's weight selected (or sliced) from the fused experts tensor, a DTensor's local part
# (to_local), and expert parallelism's gradient scaling (an identity: trainer.parallel.expert_parallel._ScaleGradient).
# Under FSDP2 the gathered weights are parameters the model does not list, so only this walk tells them apart.
_VIEWS = {
    "TBackward0",
    "ViewBackward0",
    "TransposeBackward0",
    "PermuteBackward0",
    "ExpandBackward0",
    "AliasBackward0",
    "SelectBackward0",
    "SliceBackward0",
    "_ToTorchTensorBackward",
    "_ScaleGradientBackward",
}


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


def measured_peak(device: torch.device) -> dict[str, int | str]:
    """The peak (see the module docstring) and, on CUDA, what it is made of."""
    if device.type == "cuda":
        free, total = torch.cuda.mem_get_info(device)
        own = process_device_used(str(torch.cuda.get_device_properties(device).uuid), os.getpid())
        peak = cuda_peak(
            int(torch.cuda.max_memory_allocated(device)),
            int(torch.cuda.max_memory_reserved(device)),
            total - free if own is None else own,
            int(torch.cuda.memory_reserved(device)),
        )
        return {**peak, "outside_source": outside_source(own)}
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"peak": int(rss if sys.platform == "darwin" else rss * 1024)}  # Linux reports KiB


def process_device_used(uuid: str, pid: int) -> int | None:
    """Process `pid`'s memory on the GPU of `uuid` as the driver counts it (NVML), or None where NVML is not
    installed or does not report it (a GPU shared with other jobs, or tests run side by side, would otherwise
    count their memory as this process's)."""
    try:
        # pynvml only on CUDA
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


def outside_source(own: int | None) -> str:
    """Where a CUDA rank's memory outside the allocator was read: NVML's figure for this process, or (NVML absent
    or silent) the whole device's used memory, which counts any other process on the GPU too."""
    return "nvml: this process" if own is not None else "cuda mem_get_info: the whole device"


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
