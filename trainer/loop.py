"""The training loop each worker process runs: build, train, measure, write the run's result files.

Read it top to bottom: `train` sets up the parallel model and data, `_run_steps` is the loop, `_finish`
writes metrics.json and memory.json.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.distributed as dist
import yaml
from torch.nn.parallel import DistributedDataParallel

from trainer import checkpoint
from trainer.config import Experiment, experiment_from_dict
from trainer.data import BatchPlan, RowSource, TokenizedCorpus, plan_batches
from trainer.environment import device_name, versions
from trainer.faults import maybe_inject
from trainer.flops import causal_attention_pairs, peak_bf16_flops, step_flops
from trainer.memory import peak_bytes, state_bytes
from trainer.model import build_model, count_parameters, model_config
from trainer.optim import build_optimizer, build_scheduler
from trainer.rundir import RunDir, write_json, write_text
from trainer.step import forward_backward

log = logging.getLogger("meshpilot.trainer")


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
    activation_bytes: int | None = None
    state_bytes: dict[str, int] = field(default_factory=dict)
    last_loss: float | None = None


def init_worker(device_type: str) -> Worker:
    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if device_type == "cuda":
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
        dist.init_process_group("nccl", device_id=device)
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo")
    return Worker(rank, world_size, local_rank, device)


def load_run(run: RunDir) -> tuple[Experiment, dict]:
    launch = json.loads(run.launch.read_text())
    experiment = experiment_from_dict(yaml.safe_load(run.config.read_text()))
    experiment.base_dir = launch["base_dir"]
    return experiment, launch


def train(run: RunDir, worker: Worker, experiment: Experiment, launch: dict) -> None:
    spec, layout = experiment.train, experiment.layout
    device_type = worker.device.type
    mesh = layout.build_mesh(device_type)
    dp_group = mesh["dp_replicate"].get_group() if layout.dp_degree > 1 else None
    dp_rank = mesh["dp_replicate"].get_local_rank()

    config = model_config(experiment.model, Path(experiment.base_dir))
    model = build_model(config, Path(launch["weights_dir"]) if launch["weights_dir"] else None, spec.seed)
    model.to(worker.device)
    torch.manual_seed(spec.seed + 1 + worker.rank)  # dropout differs per rank, like the data does
    if spec.activation_checkpointing:
        model.activation_checkpointing_enable({"use_reentrant": False})
    if spec.compile:
        model.compile()
    if layout.dp_replicate > 1:
        device_ids = [worker.local_rank] if device_type == "cuda" else None
        model = DistributedDataParallel(model, device_ids=device_ids, gradient_as_bucket_view=True)
    optimizer = build_optimizer(model, spec, device_type)
    scheduler = build_scheduler(optimizer, spec)

    rows = RowSource(
        TokenizedCorpus.load(Path(launch["data_dir"])),
        experiment.data.seq_len,
        experiment.data.packing,
        spec.seed,
        experiment.data.shuffle,
    )
    plan = plan_batches(spec.global_batch_tokens, experiment.data.seq_len, spec.micro_batch, layout.dp_degree)

    state = checkpoint.TrainerState(step=0, next_row=0)
    found = checkpoint.latest(run.checkpoints) if launch["resume"] else None
    if found is not None:
        state = checkpoint.load(found, model, optimizer, scheduler)
        log.info("resumed from %s at step %d", found.name, state.step)
        if worker.rank == 0:
            kept = [s for s in run.read_steps() if s["step"] <= state.step]
            write_text(run.steps, "".join(json.dumps(s) + "\n" for s in kept))
    elif worker.rank == 0:
        write_text(run.steps, "")

    bf16 = experiment.train.precision == "bf16"
    autocast = torch.autocast(device_type, dtype=torch.bfloat16) if bf16 else None
    if device_type == "cuda":
        torch.cuda.reset_peak_memory_stats()
        torch.cuda.memory._record_memory_history(max_entries=100_000)

    measured = _run_steps(
        run, worker, experiment, model, optimizer, scheduler, rows, plan, state, dp_group, dp_rank, autocast
    )
    if spec.save_final_checkpoint and (not spec.checkpoint_every or state.step % spec.checkpoint_every):
        checkpoint.save(run.checkpoints, state, model, optimizer, scheduler, spec.keep_checkpoints)
    _finish(run, worker, experiment, launch, config, measured, state, dp_group)


def _run_steps(
    run,
    worker,
    experiment,
    model,
    optimizer,
    scheduler,
    rows: RowSource,
    plan: BatchPlan,
    state,
    dp_group,
    dp_rank,
    autocast,
) -> Measurements:
    spec = experiment.train
    measured = Measurements()
    first_step = state.step
    with run.steps.open("a") if worker.rank == 0 else contextlib.nullcontext() as steps_file:
        while state.step < spec.steps:
            maybe_inject(worker.rank, state.step + 1)
            started = time.perf_counter()
            micro_batches = [
                {k: v.to(worker.device, non_blocking=True) for k, v in rows.batch(indices).items()}
                for indices in plan.micro_batches(state.next_row, dp_rank)
            ]
            result = forward_backward(
                model, micro_batches, dp_group, autocast, measure_activations=state.step == first_step
            )
            if state.step == first_step:
                measured.activation_bytes = result.activation_bytes
            max_norm = spec.grad_clip if spec.grad_clip > 0 else float("inf")
            grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm))
            lr = scheduler.get_last_lr()[0]
            optimizer.step()
            scheduler.step()
            if state.step == first_step:
                measured.state_bytes = state_bytes(model, optimizer)
            optimizer.zero_grad(set_to_none=True)
            if worker.device.type == "cuda":
                torch.cuda.synchronize()
            seconds = time.perf_counter() - started

            state.step += 1
            state.next_row += plan.rows_per_step
            measured.last_loss = result.loss
            if (
                state.step - first_step > spec.timing_warmup_steps
                or spec.steps - first_step <= spec.timing_warmup_steps
            ):
                measured.timed_steps += 1
                measured.timed_seconds += seconds
                measured.timed_tokens += result.input_tokens
                measured.timed_attention_pairs += sum(causal_attention_pairs(b["segment_ids"]) for b in micro_batches)
            record = {
                "step": state.step,
                "loss": result.loss,
                "lr": lr,
                "tokens": result.input_tokens,
                "target_tokens": result.target_tokens,
                "step_s": seconds,
                "grad_norm": grad_norm,
            }
            if steps_file is not None:
                steps_file.write(json.dumps(record) + "\n")
                steps_file.flush()
            log.info("step %d loss %.4f lr %.3g grad_norm %.3f %.2fs", state.step, result.loss, lr, grad_norm, seconds)
            if spec.checkpoint_every and state.step % spec.checkpoint_every == 0:
                checkpoint.save(run.checkpoints, state, model, optimizer, scheduler, spec.keep_checkpoints)
    return measured


def _finish(run, worker, experiment, launch, config, measured: Measurements, state, dp_group) -> None:
    device_type = worker.device.type
    pairs = torch.tensor([measured.timed_attention_pairs], dtype=torch.float64, device=worker.device)
    if dp_group is not None:
        dist.all_reduce(pairs, group=dp_group)
    rank_memory = {
        "rank": worker.rank,
        "peak": peak_bytes(worker.device),
        "activations_saved": measured.activation_bytes,
        **measured.state_bytes,
    }
    memory = [None] * worker.world_size
    dist.all_gather_object(memory, rank_memory)
    if device_type == "cuda":
        if worker.rank == 0:
            torch.cuda.memory._dump_snapshot(str(run.snapshot))
        torch.cuda.memory._record_memory_history(enabled=None)
    if worker.rank != 0:
        return

    tokens_per_s = measured.timed_tokens / measured.timed_seconds if measured.timed_seconds else None
    mfu = None
    peak = peak_bf16_flops(device_name(device_type)) if device_type == "cuda" else None
    if peak and tokens_per_s and experiment.train.precision == "bf16":
        params = count_parameters(config)
        width = config.num_attention_heads * getattr(
            config, "head_dim", config.hidden_size // config.num_attention_heads
        )
        flops = step_flops(params["matmul"], width, config.num_hidden_layers, measured.timed_tokens, int(pairs.item()))
        mfu = flops / measured.timed_seconds / (peak * worker.world_size)
    layout = experiment.layout
    write_json(run.memory, {"measured": memory, "units": "bytes", "peak_source": _peak_source(device_type)})
    write_json(
        run.metrics,
        {
            **base_metrics(experiment, launch, worker.world_size, device_type),
            "status": "ok",
            "error": None,
            "device_name": device_name(device_type),
            "tokens_per_s": tokens_per_s,
            "tokens_per_s_per_device": tokens_per_s / worker.world_size if tokens_per_s else None,
            "timed_steps": measured.timed_steps,
            "mfu": mfu,
            "peak_mem_bytes": [m["peak"] for m in memory],
            "final_loss": measured.last_loss,
            "steps_completed": state.step,
            "grad_accum": plan_batches(
                experiment.train.global_batch_tokens,
                experiment.data.seq_len,
                experiment.train.micro_batch,
                layout.dp_degree,
            ).grad_accum,
        },
    )


def base_metrics(experiment: Experiment, launch: dict, world_size: int, device_type: str) -> dict:
    """The fields of metrics.json known before training starts, shared by success and failure records."""
    return {
        "layout": experiment.layout.degrees(),
        "world_size": world_size,
        "device_type": device_type,
        "steps": experiment.train.steps,
        "micro_batch": experiment.train.micro_batch,
        "seq_len": experiment.data.seq_len,
        "packing": experiment.data.packing,
        "precision": experiment.train.precision,
        "config_hash": experiment.config_hash(),
        "git_commit": launch.get("git_commit"),
        "git_dirty": launch.get("git_dirty"),
        "seed": experiment.train.seed,
        "versions": versions(),
    }


def _peak_source(device_type: str) -> str:
    if device_type == "cuda":
        return "torch.cuda.max_memory_allocated"
    return "process peak resident set size (includes interpreter and libraries)"
