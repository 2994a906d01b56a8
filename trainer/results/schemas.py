"""The schemas of a run directory's result files (the README's result-file contract), one Contract each.

trainer.results.rundir reads them (RunDir.read_metrics, read_steps, read_memory, read_launch, failures);
trainer.rank.loop, trainer.launch.launcher, trainer.rank.worker and trainer.export.hf write them, each through the
file's Contract.
"""

from __future__ import annotations

from typing import Annotated, Literal, NotRequired

from pydantic import Field
from typing_extensions import TypedDict

from trainer.results.contracts import STRICT, Contract

# How a run ended, as metrics.json ("status"), a job (job.json "state") and a sweep trial record it: ok, stopped
# early by a sweep's pruner, stopped by a scheduler's SIGTERM or SIGUSR1 after saving what `--resume` continues
# ("preempted"), or one of the ways it went wrong. The one list: every reader takes it from here.
RunStatus = Literal["ok", "pruned", "preempted", "failed", "oom", "timeout", "nan", "cancelled", "killed"]
RUN_STATUSES: tuple[str, ...] = RunStatus.__args__
FAILED_STATUSES = RUN_STATUSES[3:]
PREEMPTED = "preempted"

Count = Annotated[int, Field(ge=0)]
Bytes = Annotated[int, Field(ge=0)]


class Degrees(TypedDict):
    """A layout's degree per mesh dimension (trainer.layout.MESH_DIMS), and ep where experts are sharded."""

    __pydantic_config__ = STRICT
    pp: Annotated[int, Field(ge=1)]
    dp_replicate: Annotated[int, Field(ge=1)]
    dp_shard: Annotated[int, Field(ge=1)]
    cp: Annotated[int, Field(ge=1)]
    tp: Annotated[int, Field(ge=1)]
    ep: NotRequired[Annotated[int, Field(ge=1)]]  # borrowed from dp_shard x cp; absent for dense layouts


class StepRecord(TypedDict):
    """One line of steps.jsonl: an optimizer step, written by rank 0 as it ends."""

    __pydantic_config__ = STRICT
    step: Annotated[int, Field(ge=1)]
    loss: float  # token-normalised over the whole global batch (NaN is recorded, then the run stops)
    lr: float
    tokens: Count  # input tokens over all data-parallel ranks
    target_tokens: Count  # tokens with a label
    step_s: float  # wall time, data wait included
    data_wait_s: float  # what the step waited for its rows
    grad_norm: float  # before clipping
    # The gradient noise scale's running estimate and the small-batch figures it came from (steps that measure it).
    gns: NotRequired[float | None]
    gns_small_grad_sq: NotRequired[float]
    gns_small_tokens: NotRequired[Count]
    # A mixture-of-experts model's routers (trainer.rank.loop._moe_figures): the load-balancing loss as the model
    # defines it, before its coefficient (mean over the step's micro-batches); the router z-loss where the config
    # has one; (token, expert) pairs per expert over all ranks and MoE layers; the worst layer's max/mean load.
    aux_loss: NotRequired[float]
    z_loss: NotRequired[float]
    expert_tokens: NotRequired[list[Count]]
    expert_load_max_over_mean: NotRequired[float]


class Metrics(TypedDict):
    """metrics.json: how the run ended and its figures. A failed run has the fields known before training."""

    __pydantic_config__ = STRICT
    layout: Degrees
    world_size: Annotated[int, Field(ge=1)]
    device_type: Literal["cpu", "cuda"]
    steps: Count  # steps the experiment asked for
    micro_batch: Annotated[int, Field(ge=1)]
    grad_accum: Annotated[int, Field(ge=1)]
    seq_len: Annotated[int, Field(ge=1)]
    packing: bool
    precision: str
    config_hash: str
    git_commit: str | None
    git_dirty: bool | None
    seed: int
    versions: dict[str, str | None]
    status: RunStatus
    error: str | None
    tokens_per_s: float | None  # over the timed steps (trainer.results.rundir.tokens_per_s)
    mfu: float | None  # CUDA under bf16 only
    final_loss: float | None
    # A run that finished ok:
    device_name: NotRequired[str]
    tokens_per_s_per_device: NotRequired[float | None]
    timed_steps: NotRequired[Count]
    peak_mem_bytes: NotRequired[list[Bytes]]  # per rank, as memory.json's measured "peak"
    gns: NotRequired[float | None]
    recommended_global_batch_tokens: NotRequired[int | None]
    gns_note: NotRequired[str | None]
    steps_completed: NotRequired[Count]
    compile_s: NotRequired[float | None]  # train.compile: rank 0's compilation time, inside the untimed first steps
    # A preempted run: the signal that stopped it, and the checkpoint `--resume` continues from (None: none yet).
    signal: NotRequired[str]
    resume_from: NotRequired[str | None]
    # train.save_hf: where the export went, or why it failed.
    hf_export: NotRequired[str | None]
    hf_export_error: NotRequired[str | None]


class PredictedMemory(TypedDict):
    """trainer.costs.memory_model's bytes by category for one rank; peak is their sum."""

    __pydantic_config__ = STRICT
    rank: Count
    parameters: Bytes
    gradients: Bytes
    unreduced_gradients: NotRequired[Bytes]  # FSDP2's unsharded ones while it accumulates (train.fsdp_grad_sync)
    gathered_parameters: NotRequired[Bytes]  # FSDP2's, held across a micro-batch or step (train.zero_stage < 3)
    optimizer: Bytes
    activations_saved: Bytes
    weight_copies_saved: Bytes
    temporaries: Bytes
    cuda_runtime: NotRequired[Bytes]
    peak: Bytes
    # CPU, where the measured peak is the process's resident set (interpreter and libraries included): that peak
    # predicted like for like, the rank's measured resident set when set-up began (setup_start) plus `peak`.
    process_peak: NotRequired[Bytes]


class MeasuredMemory(TypedDict):
    """One rank's measured bytes (trainer.rank.memory): the peak, and the categories the run could measure."""

    __pydantic_config__ = STRICT
    rank: Count
    peak: Bytes
    allocated_peak: NotRequired[Bytes]  # CUDA: the allocator's figures and what lives outside it
    reserved_peak: NotRequired[Bytes]
    outside_allocator: NotRequired[Bytes]
    outside_source: NotRequired[str]  # CUDA: where outside_allocator was read (trainer.rank.memory.outside_source)
    setup_start: NotRequired[Bytes]  # before and after the model was built and sharded
    setup_peak: NotRequired[Bytes]
    activations_saved: NotRequired[Bytes]  # saved for backward, counted by saved-tensor hooks
    weight_copies_saved: NotRequired[Bytes]
    parameters: NotRequired[Bytes]  # this rank's shards, after the first optimizer step
    gradients: NotRequired[Bytes]
    optimizer: NotRequired[Bytes]


class TimelinePoint(TypedDict):
    """A moment of the measured step (trainer.rank.memory.MemoryTimeline): the phase that just ended, bytes by
    category."""

    __pydantic_config__ = STRICT
    phase: str  # "start", "forward mb1", "backward mb1", ..., "optimizer", "zero_grad"
    parameters: Bytes
    gradients: Bytes
    optimizer: Bytes
    activations: Bytes  # saved for backward and not yet used by it
    temporaries: NotRequired[Bytes]  # CUDA only: the allocator's bytes beyond the categories above


# The timeline's categories, each with the predicted ones (PredictedMemory) it compares with: what the report's
# and the terminal UI's charts draw side by side.
TIMELINE_CATEGORIES: dict[str, tuple[str, ...]] = {
    "parameters": ("parameters",),
    "gradients": ("gradients", "unreduced_gradients"),
    "optimizer": ("optimizer",),
    "activations": ("activations_saved", "weight_copies_saved"),
    "temporaries": ("temporaries", "gathered_parameters"),  # CUDA's measured temporaries hold FSDP2's gathers
}


class RankTimeline(TypedDict):
    """One rank's memory through the measured step, in the order things happened."""

    __pydantic_config__ = STRICT
    rank: Count
    step: Annotated[int, Field(ge=1)]
    points: list[TimelinePoint]


class MemoryReport(TypedDict):
    """memory.json: predicted beside measured, per rank, and each rank's memory through the measured step."""

    __pydantic_config__ = STRICT
    units: Literal["bytes"]
    predicted: list[PredictedMemory]
    measured: list[MeasuredMemory]
    peak_source: str  # what "peak" measures on this device
    timeline: list[RankTimeline]


class RankFailure(TypedDict):
    """failure.rankN.json: the error a rank died of; the launcher turns the earliest cause into metrics.json."""

    __pydantic_config__ = STRICT
    rank: Count
    status: RunStatus
    time: float
    error: str  # one line: the exception's type and first line
    traceback: str


class LaunchInfo(TypedDict):
    """launch.json: what the launcher prepared for the ranks."""

    __pydantic_config__ = STRICT
    experiment_file: str
    base_dir: str
    data_dir: str
    weights_dir: str | None
    resume: bool
    # The verified checkpoint a resume loads, chosen once by the launcher (trainer.rank.checkpoint.newest_verified).
    resume_from: NotRequired[str | None]
    vocab_size: Annotated[int, Field(ge=1)]
    git_commit: str | None
    git_dirty: bool | None


class ProfiledKernel(TypedDict):
    """One operator (CPU) or kernel (CUDA) of a profile, its time summed over the profiled steps."""

    __pydantic_config__ = STRICT
    name: str
    category: str  # one of trainer.rank.profiling.CATEGORIES
    seconds: Annotated[float, Field(ge=0)]
    calls: Count


class ProfileReport(TypedDict):
    """profile.json: where rank 0's profiled steps spent their time (train.profile_steps, the last untimed steps),
    by category and by operator: on CUDA the kernels' device time, on CPU the operators' own time."""

    __pydantic_config__ = STRICT
    device_type: str
    steps: list[Annotated[int, Field(ge=1)]]  # the profiled steps, by number
    wall_s: Annotated[float, Field(ge=0)]  # their step times, summed
    busy_s: Annotated[float, Field(ge=0)]  # the device's (or the CPU operators') time in them, summed
    categories: dict[str, Annotated[float, Field(ge=0)]]  # seconds per category
    top: list[ProfiledKernel]  # the longest operators or kernels, longest first


STEPS = Contract("steps.jsonl", StepRecord)
METRICS = Contract("metrics.json", Metrics)
MEMORY = Contract("memory.json", MemoryReport)
PROFILE = Contract("profile.json", ProfileReport)
FAILURE = Contract("failure.rank*.json", RankFailure)
LAUNCH = Contract("launch.json", LaunchInfo)
