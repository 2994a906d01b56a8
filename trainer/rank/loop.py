"""The training loop each worker process runs: build, train, measure, write the run's result files.

Read it top to bottom: `train` calls `_setup` (model, parallelism, optimizer, data, resume), `_run_steps` (the
loop; `_optimizer_step` is one step) and `_finish` (metrics.json and memory.json). Where a record is written, rank 0
also hands it to the run's experiment trackers (trainer.rank.trackers).
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from functools import partial
from pathlib import Path

import torch
import torch.distributed as dist
from transformers import PretrainedConfig

from trainer.config import (
    Experiment,
    TrainSpec,
    experiment_from_dict,
    half_precision,
    reduces_once_per_step,
    resolve_zero_stage,
)
from trainer.costs.calibration import Calibration
from trainer.costs.flops import causal_attention_pairs, mfu
from trainer.costs.memory_model import MemoryPlan, predict_memory
from trainer.costs.throughput import predict_run
from trainer.data.rows import BatchPlan, BatchPrefetcher, RowSource, TokenizedCorpus, plan_batches
from trainer.hardware import this_machine
from trainer.host import preemption
from trainer.host.environment import device_name, versions
from trainer.layout import data_parallel_group, loss_group
from trainer.model.attention import document_block_mask, use_attention
from trainer.model.build import materialize as materialize_model
from trainer.model.build import meta_model, model_config
from trainer.model.moe import RouterLogits, is_moe
from trainer.parallel.compile import compile_seconds, compiles_whole_step
from trainer.parallel.context_parallel import ContextParallel, install_context_parallel
from trainer.parallel.data_parallel import fsdp_mixed_precision
from trainer.parallel.expert_parallel import ExpertParallelPlan, expert_load, expert_shards
from trainer.parallel.float8 import convert_to_float8
from trainer.parallel.grad_norm import clip_grad_norm
from trainer.parallel.parallelize import parallelize, parallelize_pipeline
from trainer.parallel.pipeline import Pipeline
from trainer.parallel.tensor_parallel import sum_partial_gradients
from trainer.rank import checkpoint
from trainer.rank.failures import NonFiniteLoss, failure_status
from trainer.rank.faults import maybe_inject
from trainer.rank.memory import MemoryTimeline, current_bytes, measured_peak, peak_bytes, state_bytes
from trainer.rank.noise_scale import measured_on, recommended_batch_tokens
from trainer.rank.optim import build_optimizer, build_scheduler
from trainer.rank.profiling import StepProfiler, profiled_steps
from trainer.rank.step import StepResult, forward_backward, pipeline_forward_backward
from trainer.rank.trackers import Trackers, start_trackers
from trainer.results.contracts import write_text
from trainer.results.rundir import RunDir, untimed_steps
from trainer.results.schemas import MEMORY, METRICS, PREEMPTED, PROFILE, STEPS, LaunchInfo

log = logging.getLogger("meshpilot.trainer")


# A rank stuck longer than train.collective_timeout_s in a collective fails instead of hanging the run; through
# set-up and the first steps, train.first_steps_timeout_s (`collective_timeouts`). Checkpoints wait on a group of
# their own, with a longer timeout (trainer.rank.checkpoint.CHECKPOINT_TIMEOUT): writing a model takes longer than a
# step's collectives.
# Allocations the CUDA memory history keeps (a ring buffer): bounds the snapshot (roughly 1 KiB per entry with
# Python stacks) whatever the length of the warm-up.
SNAPSHOT_MAX_ENTRIES = 100_000


@dataclass
class Worker:
    """This process's place in the job."""

    rank: int
    world_size: int
    local_rank: int
    device: torch.device


@dataclass
class Measurements:
    """What the loop accumulates for metrics.json, over the steps after the timing warm-up."""

    timed_steps: int = 0
    timed_seconds: float = 0.0
    timed_tokens: int = 0
    timed_attention_pairs: int = 0  # this rank's; summed over data-parallel ranks at the end
    timed_step_s: list[float] = field(default_factory=list)
    saved: dict[str, int] | None = None  # bytes saved for backward by one micro-batch, by kind
    state_bytes: dict[str, int] = field(default_factory=dict)
    memory_step: int = 0  # the step measured, and this rank's memory over it (trainer.rank.memory.MemoryTimeline)
    memory_timeline: list[dict] = field(default_factory=list)
    last_loss: float | None = None
    preempted: tuple[int, bool] | None = None  # (the signal, whether a checkpoint may still be saved), if one came


@dataclass
class Training:
    """Everything one worker trains with, built once by `_setup`."""

    run: RunDir
    worker: Worker
    experiment: Experiment
    config: PretrainedConfig
    model: torch.nn.Module  # parallelized for its layout (DDP, FSDP2, tensor parallel); this rank's stages under pp
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    rows: RowSource
    plan: BatchPlan
    batches: BatchPrefetcher  # reads each step's rows while the previous step computes
    state: checkpoint.TrainerState
    dp_group: dist.ProcessGroup | None  # the ranks that read different data; None for one
    dp_rank: int
    loss_group: dist.ProcessGroup | None  # the ranks whose tokens make the batch: dp_group's, times cp
    context: ContextParallel | None  # this rank's share of each row, when layout.cp > 1
    pipeline: Pipeline | None  # this rank's pipeline stages and schedule, when layout.pp > 1
    router: RouterLogits | None  # a mixture-of-experts model's router logits, for its auxiliary loss
    experts: ExpertParallelPlan | None  # its experts as trainer.parallel.expert_parallel dispatches them
    autocast: contextlib.AbstractContextManager | None
    setup_memory: dict[str, int]  # bytes in use when set-up began, and the peak by its end (model built, split)
    checkpoint_group: dist.ProcessGroup  # what checkpoint saves and loads wait on, with their longer timeout
    trackers: Trackers = field(default_factory=Trackers)  # rank 0's experiment trackers; none on the other ranks
    last_checkpoint: Path | None = None  # the newest checkpoint of this run: loaded by the resume, or saved since
    recording_memory: bool = False  # CUDA, rank 0: the allocator's history is being recorded for snapshot.pickle
    last_save_s: float = 0.0  # how long the last save took: whether a preempted run still has time for one

    def save_checkpoint(self) -> None:
        spec = self.experiment.train
        started = time.monotonic()
        self.last_checkpoint = checkpoint.save(
            self.run.checkpoints,
            self.state,
            self.model,
            self.optimizer,
            self.scheduler,
            spec.keep_checkpoints,
            self.experiment.layout.degrees(),
            self.checkpoint_group,
        )
        self.last_save_s = time.monotonic() - started


def init_worker(device_type: str, spec: TrainSpec | None = None) -> Worker:
    """This rank's process group, whose collectives wait up to train.first_steps_timeout_s until the first steps
    are done (`collective_timeouts`); the groups of the layout's mesh inherit it."""
    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    timeout = collective_timeouts(spec or TrainSpec())[0]
    if device_type == "cuda":
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
        dist.init_process_group("nccl", device_id=device, timeout=timeout)
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo", timeout=timeout)
    return Worker(rank, world_size, local_rank, device)


def collective_timeouts(spec: TrainSpec) -> tuple[timedelta, timedelta]:
    """(through set-up and the first steps, afterwards): how long a rank waits in one collective before failing.
    The first compiled step of a deep pipeline, or set-up of a large model, can keep ranks apart for longer than
    the 5 minutes a step's collectives are given."""
    return timedelta(seconds=spec.first_steps_timeout_s), timedelta(seconds=spec.collective_timeout_s)


def set_collective_timeout(timeout: timedelta, keep: tuple[dist.ProcessGroup, ...] = ()) -> None:
    """Give every process group of this rank but `keep` (the checkpoint group, with its own) `timeout`."""
    # c10d's private names only where a collective timeout is set
    from torch.distributed.distributed_c10d import _set_pg_timeout, _world

    for group in list(_world.pg_map):
        if group not in keep:
            _set_pg_timeout(timeout, group)


def load_run(run: RunDir) -> tuple[Experiment, LaunchInfo]:
    launch = run.read_launch()
    experiment = experiment_from_dict(run.read_config())
    experiment.base_dir = launch["base_dir"]
    # config.yaml writes stage 3 as nothing (trainer.config._UNWRITTEN), which reads back as auto
    experiment.train.zero_stage = resolve_zero_stage(experiment.train.zero_stage)
    return experiment, launch


def train(run: RunDir, worker: Worker, experiment: Experiment, launch: LaunchInfo) -> None:
    training = _setup(run, worker, experiment, launch)
    if worker.rank == 0:
        training.trackers = start_trackers(run.path, experiment.to_dict(), training.state.step)
    with training.trackers.ended_on_failure(failure_status):
        try:
            measured = _run_steps(training)
        finally:
            training.batches.close()
        if measured.preempted is not None:
            _end_preempted(training, launch, measured, *measured.preempted)
            return
        spec = experiment.train
        if spec.save_final_checkpoint and (not spec.checkpoint_every or training.state.step % spec.checkpoint_every):
            training.save_checkpoint()
        _finish(training, launch, measured)


def _agreed_preemption(training: Training) -> tuple[int, bool]:
    """At a step boundary, every rank's view of a preemption signal (trainer.host.preemption), the same on all: (the
    signal, or 0; whether a checkpoint can be saved in the time left). One rank's signal stops them all."""
    signum = preemption.requested()
    too_late = int(bool(signum) and not preemption.save_allowed(training.last_save_s))
    if training.worker.world_size > 1:  # over gloo, on the CPU: no device synchronisation for two numbers
        flags = torch.tensor([signum, too_late], dtype=torch.int64)
        dist.all_reduce(flags, op=dist.ReduceOp.MAX, group=training.checkpoint_group)
        signum, too_late = (int(v) for v in flags.tolist())
    return signum, not too_late


def _end_preempted(training: Training, launch: LaunchInfo, measured: Measurements, signum: int, save: bool) -> None:
    """Save what `--resume` continues from (unless this step's checkpoint is there, or time is short), then rank 0
    writes metrics.json with status "preempted"; every rank returns normally."""
    state, run = training.state, training.run
    saved = training.last_checkpoint is not None and checkpoint.checkpoint_step(training.last_checkpoint) == state.step
    if save and state.step > 0 and not saved:
        training.save_checkpoint()
    if training.worker.rank != 0:
        return
    signal_name = preemption.name(signum)
    resume_from = training.last_checkpoint.name if training.last_checkpoint is not None else None
    then = f"--resume continues from {resume_from}" if resume_from else "no checkpoint yet: train it again"
    metrics = {
        **base_metrics(training.experiment, launch, training.worker.world_size, training.worker.device.type),
        "status": PREEMPTED,
        "error": f"preempted by {signal_name} after step {state.step}; {then}",
        "tokens_per_s": None,
        "mfu": None,
        "final_loss": measured.last_loss,
        "steps_completed": state.step,
        "signal": signal_name,
        "resume_from": resume_from,
    }
    METRICS.write(run.metrics, metrics)
    log.info("preempted by %s after step %d; checkpoint: %s", signal_name, state.step, resume_from)
    training.trackers.finish(metrics)


def _setup(run: RunDir, worker: Worker, experiment: Experiment, launch: LaunchInfo) -> Training:
    spec, layout, device_type = experiment.train, experiment.layout, worker.device.type
    mesh = layout.build_mesh(device_type)
    set_collective_timeout(collective_timeouts(spec)[0])  # the mesh's new groups too, until the first steps are done
    log.info("collectives time out after %d s through set-up and the first steps", spec.first_steps_timeout_s)
    dp_group, dp_rank = data_parallel_group(layout, mesh)

    config = model_config(experiment.model, Path(experiment.base_dir))
    weights = Path(launch["weights_dir"]) if launch["weights_dir"] else None
    setup_start = current_bytes(worker.device)
    # Built on the meta device and split first: each rank then makes and fills only its own share.
    model = meta_model(config)
    use_attention(model, spec.attention)
    if spec.precision == "fp8":  # before anything wraps the model, as torchtitan converts (trainer.parallel.float8)
        converted = convert_to_float8(model, spec.float8_recipe, spec.compile)
        log.info("fp8: %d linear layers compute in float8 (%s scaling)", len(converted), spec.float8_recipe)
    model.train()  # dropout on, and activation checkpointing takes effect
    context = install_context_parallel(model, layout, mesh)
    materialize = partial(materialize_model, device=worker.device, config=config, weights=weights, seed=spec.seed)
    data = experiment.data
    plan = plan_batches(spec.global_batch_tokens, data.seq_len, spec.micro_batch, layout.dp_degree)
    pipeline = None
    if layout.pp > 1:
        model, pipeline = parallelize_pipeline(
            model, layout, mesh, spec, plan.grad_accum, worker.device, materialize, data.packing, context
        )
    else:
        model = parallelize(model, layout, mesh, spec, device_type, materialize)
    # Dropout differs between data-parallel ranks, like their data, and agrees between tensor-parallel peers.
    torch.manual_seed(spec.seed + 1 + dp_rank)
    optimizer = build_optimizer(model, spec, device_type)
    setup = {"setup_start": setup_start, "setup_peak": peak_bytes(worker.device)}

    corpus = TokenizedCorpus.load(Path(launch["data_dir"]))
    rows = RowSource(corpus, data.seq_len, data.packing, spec.seed, data.shuffle)
    training = Training(
        run=run,
        worker=worker,
        experiment=experiment,
        config=config,
        model=model,
        optimizer=optimizer,
        scheduler=build_scheduler(optimizer, spec),
        rows=rows,
        plan=plan,
        batches=BatchPrefetcher(rows, plan, dp_rank, pin=device_type == "cuda"),
        state=checkpoint.TrainerState(step=0, next_row=0),
        dp_group=dp_group,
        dp_rank=dp_rank,
        loss_group=loss_group(layout, mesh),
        context=context,
        pipeline=pipeline,
        # A pipeline's stages collect their own routers' logits (trainer.parallel.pipeline).
        router=RouterLogits(model) if is_moe(config) and pipeline is None else None,
        experts=expert_shards(model),
        autocast=_autocast(experiment, device_type),
        setup_memory=setup,
        checkpoint_group=checkpoint.checkpoint_group(),
    )
    _resume_or_start(training, launch)
    if device_type == "cuda":
        torch.cuda.reset_peak_memory_stats()
        # Recorded for the untimed warm-up steps only, as it slows every allocation; a run with none has no snapshot.
        if worker.rank == 0 and untimed_steps(spec.steps, spec.timing_warmup_steps, training.state.step) > 0:
            # Python stacks only: C++ stacks cost far more per allocation and to symbolise when dumped.
            torch.cuda.memory._record_memory_history(max_entries=SNAPSHOT_MAX_ENTRIES, stacks="python")
            training.recording_memory = True
    return training


def _autocast(experiment: Experiment, device_type: str) -> contextlib.AbstractContextManager | None:
    """bf16 autocast, except where FSDP2's mixed-precision policy already computes in bf16."""
    if not half_precision(experiment.train.precision) or fsdp_mixed_precision(experiment.layout, experiment.train):
        return None
    return torch.autocast(device_type, dtype=torch.bfloat16)


def _resume_or_start(training: Training, launch: LaunchInfo) -> None:
    run, rank = training.run, training.worker.rank
    # The launcher chose (and verified) the checkpoint once, for every rank: trainer.launch.launcher._check_run_dir.
    chosen = launch.get("resume_from") if launch["resume"] else None
    found = run.checkpoints / chosen if chosen else None
    kept = []
    if found is not None:
        training.last_checkpoint = found
        layout = training.experiment.layout.degrees()
        training.state = checkpoint.load(
            found, training.model, training.optimizer, training.scheduler, layout, training.checkpoint_group
        )
        log.info("resumed from %s at step %d", found.name, training.state.step)
        kept = [s for s in run.read_steps() if s["step"] <= training.state.step]
    if rank == 0:  # steps after the checkpoint are about to be repeated
        write_text(run.steps, "".join(STEPS.line(s) for s in kept))


def _run_steps(training: Training) -> Measurements:
    spec, state, rank = training.experiment.train, training.state, training.worker.rank
    measured = Measurements()
    first_step = state.step
    # A pipeline's first step also runs a shape-inference forward whose saved tensors are never used: measure the
    # second step's, when there is one.
    measure_step = first_step + (1 if training.pipeline is not None and spec.steps - first_step > 1 else 0)
    untimed = untimed_steps(spec.steps, spec.timing_warmup_steps, first_step)
    # Neither the memory-measured step nor, compiled, the one after it (which compiles) is profiled.
    profiled = Profiled(training, profiled_steps(first_step, untimed, spec.profile_steps if rank == 0 else 0,
                                                 measure_step + 1 + int(spec.compile)))  # fmt: skip
    with training.run.steps.open("a") if rank == 0 else contextlib.nullcontext() as steps_file:
        while state.step < spec.steps:
            maybe_inject(rank, state.step + 1, training.run.path.name)
            profiled.before(state.step)
            result, micro_batches, record = _optimizer_step(training, measure_memory=state.step == measure_step)
            if state.step == measure_step:
                measured.saved = result.saved_bytes
                measured.state_bytes = record.pop("state_bytes")
                measured.memory_step, measured.memory_timeline = state.step + 1, record.pop("memory_timeline")
            state.step += 1
            state.next_row += training.plan.rows_per_step
            profiled.after(state.step, record["step_s"])
            measured.last_loss = result.loss
            if state.step - first_step > untimed:
                measured.timed_steps += 1
                measured.timed_seconds += record["step_s"]
                measured.timed_step_s.append(record["step_s"])
                measured.timed_tokens += result.input_tokens
                measured.timed_attention_pairs += sum(causal_attention_pairs(b["segment_ids"]) for b in micro_batches)
            record = {"step": state.step, **record}
            if steps_file is not None:
                steps_file.write(STEPS.line(record))
                steps_file.flush()
                training.trackers.log_step(record)
            log.info("step %(step)d loss %(loss).4f lr %(lr).3g grad_norm %(grad_norm).3f %(step_s).2fs", record)
            if not math.isfinite(result.loss):  # the same reduced value on every rank: all stop together
                raise NonFiniteLoss(f"loss {result.loss} at step {state.step}; the last checkpoint is kept")
            if spec.checkpoint_every and state.step % spec.checkpoint_every == 0:
                training.save_checkpoint()
            signum, save = _agreed_preemption(training)
            if signum and state.step < spec.steps:  # the last step done: the run ends ok all the same
                measured.preempted = (signum, save)
                break
            if state.step - first_step == untimed:  # the last untimed step: before any timed one
                _save_memory_snapshot(training)
            if state.step - first_step == max(untimed, 1):  # compiled and warmed up: steps' collectives are short
                set_collective_timeout(collective_timeouts(spec)[1], keep=(training.checkpoint_group,))
                log.info("collectives time out after %d s from step %d on", spec.collective_timeout_s, state.step + 1)
    return measured


class Profiled:
    """train.profile_steps on rank 0: the steps after step `window[0]` up to step `window[1]` profiled
    (trainer.rank.profiling.profiled_steps), their report written to profile.json once the last of them ends."""

    def __init__(self, training: Training, window: tuple[int, int] | None):
        if training.worker.rank == 0 and training.experiment.train.profile_steps and window is None:
            log.warning("train.profile_steps: no profile, the timing warm-up has no steps left after the memory-"
                        "measured and compiling ones (raise train.timing_warmup_steps)")  # fmt: skip
        self.training, self.on = training, window is not None
        self.start, self.end = window or (-1, -1)
        self.profiler: StepProfiler | None = None
        self.step_s: dict[int, float] = {}

    def before(self, done: int) -> None:
        if self.on and done == self.start:
            _save_memory_snapshot(self.training)  # the allocator's history slows every allocation: not in a profile
            self.profiler = StepProfiler(self.training.worker.device.type)
            self._guarded(self.profiler.__enter__)

    def after(self, done: int, step_s: float) -> None:
        if self.profiler is None:
            return
        self.step_s[done] = step_s
        if done == self.end:
            self._guarded(self._write)
            self.profiler = None

    def _write(self) -> None:
        self.profiler.__exit__(None, None, None)
        PROFILE.write(self.training.run.profile, self.profiler.report(sorted(self.step_s), sum(self.step_s.values())))
        log.info("profiled steps %d-%d: %s", self.start + 1, self.end, self.training.run.profile)

    def _guarded(self, action: Callable[[], object]) -> None:
        """A profiler that cannot start or report (no CUPTI, say) costs the run its profile, never the run."""
        try:
            action()
        except Exception as e:
            log.warning("train.profile_steps: no profile (%s: %s)", type(e).__name__, e)
            self.profiler = None


def _save_memory_snapshot(training: Training) -> None:
    """CUDA only, rank 0: the allocator's history of the untimed first steps (up to the profiled ones, if any), for
    pytorch.org/memory_viz; once."""
    if training.recording_memory:
        torch.cuda.memory._dump_snapshot(str(training.run.snapshot))
        torch.cuda.memory._record_memory_history(enabled=None)
        training.recording_memory = False


def _optimizer_step(training: Training, measure_memory: bool) -> tuple[StepResult, list[dict], dict]:
    """Take the step's rows (read ahead while the previous step ran), accumulate gradients, clip, update. Timed
    from taking the rows (waiting for them, if the read-ahead has not finished: `data_wait_s`, part of `step_s`) to
    the update's end."""
    spec, device = training.experiment.train, training.worker.device
    started = time.perf_counter()
    last_step = training.state.step + 1 >= spec.steps
    batches = training.batches.step_batches(training.state.next_row, prefetch_next=not last_step)
    data_wait = time.perf_counter() - started  # what the read-ahead had not finished: the step waited on data
    micro_batches = [{k: _to_device(v, device) for k, v in batch.items()} for batch in batches]
    # Each cp rank trains on its share of every row; the full rows stay for counting attention pairs.
    model_batches = [training.context.shard(b) for b in micro_batches] if training.context else micro_batches
    if spec.attention == "flex":  # built once per micro-batch, outside the model's timed layers
        model_batches = [{**b, "attention_mask": document_block_mask(b["segment_ids"])} for b in model_batches]
    timeline = _memory_timeline(training) if measure_memory else None
    with timeline.recording() if timeline else contextlib.nullcontext():
        if training.pipeline is not None:
            result = pipeline_forward_backward(
                training.pipeline, training.model, model_batches, training.loss_group, training.autocast, measure_memory
            )
        else:
            measure_noise = measured_on(training.state.step + 1, spec.gns_every)
            result = forward_backward(
                training.model,
                model_batches,
                training.loss_group,
                training.autocast,
                measure_memory,
                measure_noise,
                training.experiment.data.packing,
                # The step whose memory is measured runs eagerly: its hooks must run, not be traced into a graph.
                spec.compile and compiles_whole_step(training.experiment.layout) and not measure_memory,
                not reduces_once_per_step(spec.fsdp_grad_sync, spec.zero_stage),
                training.router,
                spec.zero_stage == 1,
                spec.loss == "whole",
            )
    sum_partial_gradients(training.model)  # Qwen3's q_norm and k_norm under tensor parallelism
    grad_norm = clip_grad_norm(list(training.model.parameters()), spec.grad_clip, device, training.experiment.layout.pp)
    noise = {}
    if result.small_batch is not None:
        small_sq, small_tokens = result.small_batch
        gns = training.state.noise_scale.update(small_sq, small_tokens, grad_norm**2, result.target_tokens)
        noise = {"gns": gns, "gns_small_grad_sq": small_sq, "gns_small_tokens": small_tokens}
    lr = training.scheduler.get_last_lr()[0]
    training.optimizer.step()
    if timeline:
        timeline.mark("optimizer")
    training.scheduler.step()
    extra = {"state_bytes": state_bytes(training.model, training.optimizer)} if measure_memory else {}
    training.optimizer.zero_grad(set_to_none=True)
    if timeline:
        timeline.mark("zero_grad")
        extra["memory_timeline"] = timeline.points
    if device.type == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - started
    record = {
        "loss": result.loss,
        "lr": lr,
        "tokens": result.input_tokens,
        "target_tokens": result.target_tokens,
        "step_s": seconds,
        "data_wait_s": data_wait,
        "grad_norm": grad_norm,
        **noise,
        **_moe_figures(training, result),
        **extra,
    }
    return result, micro_batches, record


def _moe_figures(training: Training, result: StepResult) -> dict:
    """An MoE model's step figures for steps.jsonl: its router losses, the (token, expert) pairs each expert
    computed over all ranks and every MoE layer, and the worst layer's most loaded expert against the mean."""
    if training.experts is None:
        return {}
    load = expert_load(training.experts, training.loss_group)
    per_layer, worst = load.tokens_per_expert, load.max_over_mean
    if training.pipeline is not None:  # each stage counted its own layers
        stages: list = [None] * dist.get_world_size(training.pipeline.group)
        dist.all_gather_object(stages, (per_layer, worst), group=training.pipeline.group)
        per_layer, worst = {k: v for layers, _ in stages for k, v in layers.items()}, max(w for _, w in stages)
    per_expert = [sum(counts) for counts in zip(*per_layer.values(), strict=True)]
    return {**(result.router or {}), "expert_tokens": per_expert, "expert_load_max_over_mean": worst}


def _memory_timeline(training: Training) -> MemoryTimeline:
    """What records the measured step's memory: through the model's forwards, or each pipeline stage's (named
    when this rank runs more than one)."""
    modules = {"": training.model}
    if training.pipeline is not None:
        stages = training.pipeline.stages
        modules = {f"stage {index} " if len(stages) > 1 else "": stage for index, stage in stages.items()}
    return MemoryTimeline(training.model, training.optimizer, training.worker.device, modules)


def _to_device(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A batch tensor on the device: asynchronously from pinned memory (the prefetcher pins batches bound for
    CUDA); from pageable memory the copy would wait."""
    if device.type != "cuda":
        return tensor
    return tensor.to(device, non_blocking=tensor.is_pinned())


def _finish(training: Training, launch: LaunchInfo, measured: Measurements) -> None:
    worker, experiment, run = training.worker, training.experiment, training.run
    device_type = worker.device.type
    pairs = torch.tensor([measured.timed_attention_pairs], dtype=torch.float64, device=worker.device)
    if training.dp_group is not None:
        dist.all_reduce(pairs, group=training.dp_group)
    rank_memory = {
        "rank": worker.rank,
        **measured_peak(worker.device),
        **training.setup_memory,
        **(measured.saved or {}),
        **measured.state_bytes,
    }
    gathered = [None] * worker.world_size
    dist.all_gather_object(gathered, (rank_memory, measured.memory_timeline))
    if worker.rank != 0:
        return
    memory = [rank for rank, _ in gathered]
    timeline = [{"rank": r, "step": measured.memory_step, "points": points} for r, (_, points) in enumerate(gathered)]

    tokens_per_s = measured.timed_tokens / measured.timed_seconds if measured.timed_seconds else None
    name = device_name(device_type)
    utilisation = None
    if device_type == "cuda" and half_precision(experiment.train.precision) and measured.timed_seconds:
        utilisation = mfu(
            training.config, measured.timed_tokens, int(pairs.item()), measured.timed_seconds, name, worker.world_size
        )
    spec = experiment.train
    memory_plan = MemoryPlan(
        spec.micro_batch,
        experiment.data.seq_len,
        spec.precision,
        spec.activation_checkpointing,
        spec,
        training.plan.grad_accum,
        experiment.data.packing,
        device_type,
    )
    predicted = predict_memory(training.config, experiment.layout, memory_plan)
    if device_type == "cpu":
        for rank_predicted, rank_measured in zip(predicted, memory, strict=True):
            rank_predicted["process_peak"] = predicted_process_peak(rank_measured["setup_start"], rank_predicted)
    memory_record = {
        "units": "bytes",
        "predicted": predicted,
        "measured": memory,
        "peak_source": _peak_source(device_type),
        "timeline": timeline,
    }
    MEMORY.write(run.memory, memory_record)
    training.trackers.log_memory(memory_record)
    metrics = {
        **base_metrics(experiment, launch, worker.world_size, device_type),
        "status": "ok",
        "error": None,
        "device_name": name,
        "tokens_per_s": tokens_per_s,
        "tokens_per_s_per_device": tokens_per_s / worker.world_size if tokens_per_s else None,
        "timed_steps": measured.timed_steps,
        "mfu": utilisation,
        "peak_mem_bytes": [m["peak"] for m in memory],
        "final_loss": measured.last_loss,
        **_noise_scale_summary(training),
        "steps_completed": training.state.step,
        "compile_s": compile_seconds() if spec.compile else None,
    }
    METRICS.write(run.metrics, metrics)
    training.trackers.finish(metrics)
    _calibrate(training, measured, name)


def _calibrate(training: Training, measured: Measurements, device_name: str) -> None:
    """Teach the throughput model this machine: the median timed step against the model's prediction.

    Rank 0 does it, holding the config, the step times and the device's name: the launcher would have to import
    the modeling code (seconds of every launch) and ask CUDA for the name.
    """

    if not measured.timed_step_s:
        return
    experiment = training.experiment
    hardware = this_machine(
        experiment.hardware.device_type, experiment.hardware.devices, experiment.hardware.nodes, device_name
    )
    estimate = predict_run(experiment, training.config, hardware, training.plan.grad_accum)
    steps = sorted(measured.timed_step_s)
    try:
        Calibration.record(hardware, estimate, steps[len(steps) // 2])
    except OSError as error:  # the run's results stand; only later predictions miss this one
        log.warning("calibration not recorded: %s", error)


def _noise_scale_summary(training: Training) -> dict:
    """The gradient noise scale at the end of the run and the global batch it suggests, or why there is none."""
    spec, noise = training.experiment.train, training.state.noise_scale
    note = None
    if training.pipeline is not None:
        note = "not measured under pipeline parallelism"
    elif spec.gns_every == 0:
        note = "train.gns_every is 0"
    elif training.plan.grad_accum < 2:
        note = "needs two or more micro-batches per step (gradient accumulation) to compare batch sizes"
    elif noise.updates == 0:
        note = f"no step was measured: train.gns_every is {spec.gns_every}, the run ended at step {training.state.step}"
    elif noise.value is None:
        note = "the averaged |G|^2 estimate is not positive yet: too few steps"
    return {
        "gns": noise.value,
        "recommended_global_batch_tokens": recommended_batch_tokens(noise.value, training.experiment.data.seq_len),
        "gns_note": note,
    }


def base_metrics(experiment: Experiment, launch: dict, world_size: int, device_type: str) -> dict:
    """The fields of metrics.json known before training starts, shared by success and failure records."""
    return {
        "layout": experiment.layout.degrees(),
        "world_size": world_size,
        "device_type": device_type,
        "steps": experiment.train.steps,
        "micro_batch": experiment.train.micro_batch,
        "grad_accum": plan_batches(
            experiment.train.global_batch_tokens,
            experiment.data.seq_len,
            experiment.train.micro_batch,
            experiment.layout.dp_degree,
        ).grad_accum,
        "seq_len": experiment.data.seq_len,
        "packing": experiment.data.packing,
        "precision": experiment.train.precision,
        "config_hash": experiment.config_hash(),
        "git_commit": launch.get("git_commit"),
        "git_dirty": launch.get("git_dirty"),
        "seed": experiment.train.seed,
        "versions": versions(),
    }


def predicted_process_peak(setup_start: int, predicted: dict[str, int]) -> int:
    """A CPU rank's resident peak, predicted like for like with the measured one: what the process held before
    set-up (interpreter, libraries: measured, as no model predicts them) plus the tensors the memory model
    predicts at the peak."""
    return setup_start + predicted["peak"]


def _peak_source(device_type: str) -> str:
    if device_type == "cuda":
        return (
            "torch.cuda.max_memory_reserved plus the memory outside torch's allocator (CUDA context, NCCL buffers: "
            "the device's used memory less torch.cuda.memory_reserved, at the end of the run)"
        )
    return "process peak resident set size (includes interpreter and libraries)"
