"""Where a step's time goes (train.profile_steps): torch.profiler over rank 0's last untimed steps, summed by
category and by operator into profile.json.

The profiled steps are the last ones of the timing warm-up (train.timing_warmup_steps), never the step whose memory
is measured (the first, a pipeline's second) nor, under train.compile, the one that compiles (`profiled_steps`): the
profiler's own cost then never reaches tokens/s, MFU or the calibration, which time only the steps after the
warm-up. On CUDA the allocator's history for the memory snapshot stops before them (it slows every allocation).

On CUDA the figures are the kernels' device time (what the GPU did, including NCCL's kernels); on CPU, the
operators' own time (self time: an operator's children are counted once, under themselves). The gap between the
steps' wall time and the busy time is time the device waited: on the host (Python, launches), on data or on other
ranks, and the profiler's own cost.
"""

from __future__ import annotations

import re
from collections import defaultdict

import torch
from torch.profiler import ProfilerActivity, profile

from trainer.results.schemas import ProfiledKernel, ProfileReport

# A kernel's or operator's category: the first whose pattern its lower-cased name matches (order matters: NCCL's
# kernels and flex attention's templates would otherwise read as copies and matmuls).
CATEGORIES: tuple[tuple[str, str], ...] = (
    ("communication", r"nccl|gloo|c10d|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|broadcast"),
    ("attention", r"flash|fmha|flex|attention|sdpa|attn"),
    ("matmul", r"gemm|cutlass|xmma|nvjet|cublas|_scaled_mm|grouped_mm|aten::(mm|addmm_?|bmm|baddbmm|linear|matmul)\b"
               r"|triton_tem_fused_.*mm"),
    ("optimizer", r"adam|foreach|multi_tensor|fused_sgd"),
    ("memory", r"memcpy|memset|aten::(copy_|_to_copy|cat|clone|contiguous|fill_|zero_)\b"),
)  # fmt: skip
OTHER = "other"  # elementwise, norms, reductions, the loss: fused Triton kernels under compile
TOP = 20


def profiled_steps(first_step: int, untimed: int, wanted: int, earliest: int) -> tuple[int, int] | None:
    """(start, end): the steps after step `start` up to step `end` are profiled, the last `wanted` of the `untimed`
    warm-up steps after `first_step`, none before step `earliest` ends; None where the warm-up has not that many
    steps left after `earliest`."""
    end = first_step + untimed
    start = end - wanted
    return (start, end) if wanted and untimed and start >= earliest else None


def category(name: str) -> str:
    lowered = name.lower()
    return next((label for label, pattern in CATEGORIES if re.search(pattern, lowered)), OTHER)


class StepProfiler:
    """torch.profiler started before the first profiled step and stopped after the last."""

    def __init__(self, device_type: str):
        self.device_type = device_type
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device_type == "cuda" else [])
        self._profiler = profile(activities=activities, record_shapes=False, with_stack=False)

    def __enter__(self) -> StepProfiler:
        self._profiler.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self.device_type == "cuda":
            torch.cuda.synchronize()  # the last step's kernels belong to it
        self._profiler.__exit__(*exc)

    def report(self, steps: list[int], wall_s: float) -> ProfileReport:
        """The profiled steps' time by category and by operator (see the module docstring)."""
        cuda = self.device_type == "cuda"
        seconds: dict[str, float] = defaultdict(float)
        calls: dict[str, int] = defaultdict(int)
        for event in self._profiler.key_averages():
            if cuda and event.device_type != torch.autograd.DeviceType.CUDA:
                continue  # on CUDA only the kernels: the host's operators only launch them
            own = (event.self_device_time_total if cuda else event.self_cpu_time_total) / 1e6
            if own > 0 and not event.key.startswith("ProfilerStep"):
                seconds[event.key] += own
                calls[event.key] += event.count
        return summarize(self.device_type, steps, wall_s, seconds, calls)


def summarize(device_type: str, steps: list[int], wall_s: float, seconds: dict[str, float],
              calls: dict[str, int]) -> ProfileReport:  # fmt: skip
    """profile.json's content from each operator's or kernel's seconds and calls."""
    categories = {label: 0.0 for label, _ in CATEGORIES} | {OTHER: 0.0}
    for name, spent in seconds.items():
        categories[category(name)] += spent
    longest = sorted(seconds, key=seconds.get, reverse=True)[:TOP]
    top = [ProfiledKernel(name=name[:200], category=category(name), seconds=seconds[name], calls=calls[name])
           for name in longest]  # fmt: skip
    return ProfileReport(device_type=device_type, steps=steps, wall_s=wall_s, busy_s=sum(seconds.values()),
                         categories=categories, top=top)  # fmt: skip
