"""Where a training step's time goes: meshpilot's step against transformers.Trainer + DataCollatorWithFlattening.

Both train bench.trainer_vs_hf's model on the same packed rows, with the same optimizer, schedule and batch, in
this one process and with the same torch threads, so that only the training machinery differs:

- meshpilot: its worker's own code (trainer.rank.loop's set-up, `_run_steps` and `_optimizer_step`) on a process group
  of one, without the launcher and torchrun's agent around it;
- hf_flattened: bench.trainer_vs_hf's Trainer on DataCollatorWithFlattening, as that benchmark runs it.

Each step is split into phases by wrapping the functions that do them (the wrappers time themselves exclusively:
a phase inside another counts once): data, mask, forward (with the loss), backward, token counts, noise scale,
clip, optimizer, zero_grad, scheduler, logging (the Trainer's per-step log; meshpilot's steps.jsonl line, which
`_run_steps` writes between steps), and what is left ("other"). A step is the wall time from one optimizer
step's end to the next, for both. Every run is repeated, alternating the two trainers, and the fastest repeat of
each is reported; each is also run as bench.trainer_vs_hf runs it (a process of its own), to check that the
difference seen here is the benchmark's. Then PROFILED_RUNS more runs of each, alternating, under torch.profiler
give the per-operator table (each operator at its fastest run). The load average before every run is recorded:
the machine may be shared.

    python -m bench.profile_trainers [--quick] [--steps N] [--repeats R] [--threads T] [--precision fp32|bf16]
                                     [--out FILE]

`--precision bf16`: both trainers in bf16 mixed precision, as bench.trainer_vs_hf runs them under that flag. Run
from the repository root. Writes bench/results/profile_trainers.json, or profile_trainers_bf16.json under bf16 (or
--out).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import socket
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from unittest import mock

import numpy as np
import torch
import torch.distributed as dist
import transformers
import yaml
from transformers import TrainerCallback
from transformers.models.llama import modeling_llama

import trainer.data.packing as packing
import trainer.rank.loop as loop
import trainer.rank.step as step
from bench.trainer_vs_hf import (
    FULL,
    PRECISIONS,
    QUICK,
    Prepared,
    RowFlattening,
    build_hf_trainer,
    check_setup,
    experiment_dict,
    packed_examples,
    prepare,
    results_path,
    run_hf_processes,
    run_meshpilot,
    write_json,
)
from trainer.config import ConfigError
from trainer.launch.launcher import TrainRequest
from trainer.launch.launcher import prepare as prepare_run

PHASES = (
    "data",
    "mask",
    "forward",
    "backward",
    "token_counts",
    "noise_scale",
    "clip",
    "optimizer",
    "zero_grad",
    "scheduler",
    "logging",
    "other",
)
TOP_OPERATORS = 25
PROFILED_RUNS = 2  # per trainer; the profiler slows every operator, so these are not timed


CLOCKS = ("wall", "cpu")  # cpu: this process's CPU time, all threads (steadier than wall time on a busy machine)


def _now() -> np.ndarray:
    return np.array([time.perf_counter(), time.process_time()])


class Phases:
    """Exclusive wall and CPU time per phase in each step, and each step's.

    `wrap` times a function as a phase (minus the phases called inside it) and labels it for torch.profiler;
    `step_end` marks the end of an optimizer step and drives the profiler's schedule, when there is one."""

    def __init__(self, warmup_steps: int, profiler: torch.profiler.profile | None = None):
        self.warmup_steps, self.profiler = warmup_steps, profiler
        self.steps: list[dict[str, np.ndarray]] = []  # per finished step: (wall, cpu) seconds per phase, and "step"
        self._current: dict[str, np.ndarray] = defaultdict(lambda: np.zeros(2))
        self._children: list[np.ndarray] = []  # per open phase: time spent in phases nested inside it
        self._last_end = _now()

    def wrap(self, name: str, function: Callable) -> Callable:
        @functools.wraps(function)
        def timed(*args, **kwargs):
            with torch.profiler.record_function(f"phase::{name}"):
                start = _now()
                self._children.append(np.zeros(2))
                try:
                    return function(*args, **kwargs)
                finally:
                    elapsed = _now() - start
                    nested = self._children.pop()
                    if self._children:
                        self._children[-1] += elapsed
                    self._current[name] += elapsed - nested

        return timed

    def start(self) -> None:
        self._last_end = _now()
        self._current.clear()

    def step_end(self) -> None:
        now = _now()
        step = now - self._last_end
        phases = {name: self._current.get(name, np.zeros(2)) for name in PHASES if name != "other"}
        phases["other"] = step - sum(phases.values())  # what no wrapper covers
        self.steps.append({**phases, "step": step})
        self._last_end = now
        self._current.clear()
        if self.profiler is not None:
            self.profiler.step()

    def summary(self) -> dict:
        """Mean and median step, and each phase's median over the timed steps (medians: less swayed by bursts of
        other jobs' load on a shared machine), by wall and by CPU time."""
        timed = self.steps[self.warmup_steps :]
        step_s = [float(s["step"][0]) for s in timed]
        found = {"steps": len(timed), "step_s_mean": statistics.fmean(step_s)}
        for i, clock in enumerate(CLOCKS):
            found[f"step_s_median_{clock}"] = statistics.median(float(s["step"][i]) for s in timed)
            found[f"phase_ms_median_{clock}"] = {
                name: 1e3 * statistics.median(float(s[name][i]) for s in timed) for name in PHASES
            }
        return {**found, "step_s": step_s}


@contextlib.contextmanager
def patched(patches: list[tuple[object, str, Callable]]) -> Iterator[None]:
    """Replace attributes for the duration (the originals are put back even on error)."""
    with contextlib.ExitStack() as stack:
        for owner, name, value in patches:
            stack.enter_context(mock.patch.object(owner, name, value))
        yield


def common_patches(phases: Phases, optimizer: torch.optim.Optimizer, scheduler) -> list[tuple]:
    """Phases both trainers reach through the same objects: backward, the optimizer, the schedule."""
    return [
        (torch.Tensor, "backward", phases.wrap("backward", torch.Tensor.backward)),
        (optimizer, "step", phases.wrap("optimizer", optimizer.step)),
        (optimizer, "zero_grad", phases.wrap("zero_grad", optimizer.zero_grad)),
        (scheduler, "step", phases.wrap("scheduler", scheduler.step)),
    ]


# --- meshpilot, in this process --------------------------------------------------------------------------------


@contextlib.contextmanager
def process_group_of_one() -> Iterator[None]:
    """RANK/WORLD_SIZE/MASTER_* for a one-rank gloo group, removed again afterwards: the Trainer, built later in
    this process, must not take itself for a distributed run."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
    with mock.patch.dict(os.environ, env):
        try:
            yield
        finally:
            if dist.is_initialized():
                dist.destroy_process_group()


def meshpilot_run(prepared: Prepared, out: Path, phases: Phases) -> dict:
    """meshpilot's worker code for the experiment's steps, its phases timed."""
    request = TrainRequest(prepared.experiment_file, nproc=1, out=out)
    run_prepared = prepare_run(request)  # validates and writes config.yaml and launch.json, as `meshpilot train`
    run_prepared.lock.release()
    with process_group_of_one():
        worker = loop.init_worker("cpu")
        experiment, launch = loop.load_run(run_prepared.run)
        training = loop._setup(run_prepared.run, worker, experiment, launch)
        original_step = loop._optimizer_step

        def optimizer_step(*args, **kwargs):
            result = original_step(*args, **kwargs)
            phases.step_end()
            return result

        patches = [
            *common_patches(phases, training.optimizer, training.scheduler),
            (loop, "_optimizer_step", optimizer_step),
            (training.batches, "step_batches", phases.wrap("data", training.batches.step_batches)),
            (packing, "block_causal_mask", phases.wrap("mask", packing.block_causal_mask)),
            (step, "token_loss_sum", phases.wrap("forward", step.token_loss_sum)),
            (step, "_token_counts", phases.wrap("token_counts", step._token_counts)),
            (step, "_small_batch_gradient", phases.wrap("noise_scale", step._small_batch_gradient)),
            (loop, "clip_grad_norm", phases.wrap("clip", loop.clip_grad_norm)),
            (loop.STEPS, "line", phases.wrap("logging", loop.STEPS.line)),
            (loop.log, "info", phases.wrap("logging", loop.log.info)),
        ]
        with patched(patches):
            phases.start()
            try:
                loop._run_steps(training)
            finally:
                training.batches.close()
    return phases.summary()


# --- transformers.Trainer ----------------------------------------------------------------------------------------


class StepEnd(TrainerCallback):
    def __init__(self, phases: Phases):
        self.phases = phases

    def on_train_begin(self, args, state, control, **kwargs):
        self.phases.start()

    def on_step_end(self, args, state, control, **kwargs):
        self.phases.step_end()


def hf_run(prepared: Prepared, out: Path, phases: Phases) -> dict:
    """bench.trainer_vs_hf's Trainer + DataCollatorWithFlattening, its phases timed."""
    setup = prepared.experiment
    examples = packed_examples(prepared.corpus, setup.data.seq_len, setup.train.seed)
    trainer, _ = build_hf_trainer(prepared, examples, RowFlattening(), out)
    trainer.add_callback(StepEnd(phases))
    if trainer.args.parallel_mode.name != "NOT_PARALLEL":  # a leftover of meshpilot's process group
        raise RuntimeError(f"the Trainer runs as {trainer.args.parallel_mode}, not as one plain process")
    patches = [
        *common_patches(phases, trainer.optimizer, trainer.lr_scheduler),
        (trainer, "get_batch_samples", phases.wrap("data", trainer.get_batch_samples)),
        (modeling_llama, "create_causal_mask", phases.wrap("mask", modeling_llama.create_causal_mask)),
        (trainer, "compute_loss", phases.wrap("forward", trainer.compute_loss)),
        (trainer, "_track_num_input_tokens", phases.wrap("token_counts", trainer._track_num_input_tokens)),
        (trainer, "_clip_grad_norm", phases.wrap("clip", trainer._clip_grad_norm)),
        (trainer, "_maybe_log_save_evaluate", phases.wrap("logging", trainer._maybe_log_save_evaluate)),
    ]
    with patched(patches):
        trainer.train()
    return phases.summary()


# --- the comparison ----------------------------------------------------------------------------------------------

RUNNERS = {"meshpilot": meshpilot_run, "hf_flattened": hf_run}


def operator_times(profiler: torch.profiler.profile, steps: int) -> dict[str, dict]:
    """Self and total CPU time of every operator (and phase label), per step."""
    return {
        e.key: {
            "self_ms_per_step": e.self_cpu_time_total / 1e3 / steps,
            "total_ms_per_step": e.cpu_time_total / 1e3 / steps,
            "calls_per_step": e.count / steps,
        }
        for e in profiler.key_averages()
        if not e.key.startswith("ProfilerStep")
    }


def fastest_operators(repeats: list[dict[str, dict]]) -> list[dict]:
    """Each operator at its fastest repeat (the one least disturbed by other jobs), the most expensive first."""
    best = {}
    for operators in repeats:
        for name, times in operators.items():
            if name not in best or times["self_ms_per_step"] < best[name]["self_ms_per_step"]:
                best[name] = times
    ranked = sorted(best.items(), key=lambda item: item[1]["self_ms_per_step"], reverse=True)
    return [{"name": name, **times} for name, times in ranked]


def profiled_run(prepared: Prepared, name: str, out: Path, warmup_steps: int) -> dict:
    """One run under torch.profiler, which records the steps after the warm-up: the operators' times."""
    active = prepared.experiment.train.steps - warmup_steps
    schedule = torch.profiler.schedule(wait=0, warmup=warmup_steps, active=active, repeat=1)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], schedule=schedule) as profiler:
        RUNNERS[name](prepared, out, Phases(warmup_steps, profiler))
    return operator_times(profiler, active)


def process_run(prepared: Prepared, name: str, out: Path, threads: int) -> dict:
    """The same trainer in processes of its own, as bench.trainer_vs_hf runs it: the median timed step."""
    if name == "meshpilot":
        measured = run_meshpilot(prepared, out, threads, 1, None)
    else:
        measured = run_hf_processes(prepared, name, out, threads, 1)
    timed = measured["step_seconds"][-measured["timed_steps"] :]
    return {"step_s_median_wall": statistics.median(timed), "step_s_mean": statistics.fmean(timed)}


def run_profile(setup, repeats: int, threads: int, work: Path) -> dict:
    """`repeats` rounds of: each trainer in this process with its phases timed, then each in processes of its own
    (as the benchmark runs them); then two runs of each under torch.profiler. All interleaved."""
    check_setup(setup, repeats, threads)
    torch.set_num_threads(threads)
    experiment_file = work / "meshpilot.yaml"
    experiment_file.write_text(yaml.safe_dump(experiment_dict(setup), sort_keys=False))
    prepared = prepare(experiment_file)
    runs: dict[str, list[dict]] = {name: [] for name in RUNNERS}
    processes: dict[str, list[dict]] = {name: [] for name in RUNNERS}
    for repeat in range(repeats):
        for name, runner in RUNNERS.items():
            load = os.getloadavg()[0]
            found = runner(prepared, work / f"{name}-{repeat}", Phases(setup.timing_warmup_steps))
            runs[name].append({**found, "load_average_before": load})
            wall, cpu = (found[f"step_s_median_{clock}"] * 1e3 for clock in CLOCKS)
            print(f"  {name} repeat {repeat + 1}: median step {wall:.0f} ms wall, {cpu:.0f} ms CPU", file=sys.stderr)
        for name in RUNNERS:
            load = os.getloadavg()[0]
            found = process_run(prepared, name, work / f"{name}-process-{repeat}", threads)
            processes[name].append({**found, "load_average_before": load})
            wall = found["step_s_median_wall"] * 1e3
            print(f"  {name} own process, repeat {repeat + 1}: median step {wall:.0f} ms wall", file=sys.stderr)
    operators: dict[str, list[dict]] = {name: [] for name in RUNNERS}
    profiled_load: dict[str, list[float]] = {name: [] for name in RUNNERS}
    for repeat in range(PROFILED_RUNS):
        for name in RUNNERS:
            profiled_load[name].append(os.getloadavg()[0])
            operators[name].append(
                profiled_run(prepared, name, work / f"{name}-profiled-{repeat}", setup.timing_warmup_steps)
            )
    result = {"variants": {}}
    for name, repeated in runs.items():
        best = min(repeated, key=lambda r: r["step_s_median_wall"])
        own = processes[name]
        result["variants"][name] = {
            **best,
            "step_s_median_wall_repeats": [r["step_s_median_wall"] for r in repeated],
            "step_s_median_cpu_repeats": [r["step_s_median_cpu"] for r in repeated],
            "load_average_before_repeats": [r["load_average_before"] for r in repeated],
            "tokens_per_s_median_step": setup.rows_per_step * setup.seq_len / best["step_s_median_wall"],
            "own_process": {
                "step_s_median_wall": min(r["step_s_median_wall"] for r in own),
                "step_s_median_wall_repeats": [r["step_s_median_wall"] for r in own],
                "load_average_before_repeats": [r["load_average_before"] for r in own],
            },
            "operators": fastest_operators(operators[name])[: TOP_OPERATORS * 2],
            "profiled_load_average_before": profiled_load[name],
        }
    return {
        "what": "per-phase and per-operator time of one optimizer step: meshpilot vs Trainer + flattening",
        "timed": (
            "phases: each trainer in this process, wrapped functions timed, medians over the timed steps of the "
            "fastest repeat; own_process: the same trainer as bench.trainer_vs_hf runs it (meshpilot train; the "
            "Trainer in a process of its own), median timed step of the fastest repeat"
        ),
        "profiled": f"{PROFILED_RUNS} runs of each under torch.profiler; operators: self CPU time, fastest run",
        "setup": {
            "rows_per_step": setup.rows_per_step,
            "micro_batch": setup.micro_batch,
            "seq_len": setup.seq_len,
            "steps": setup.steps,
            "warmup_steps": setup.timing_warmup_steps,
            "precision": setup.precision,
            "model": setup.model,
            "torch_threads": threads,
            "repeats": repeats,
        },
        **result,
    }


def print_comparison(result: dict) -> None:
    a, b = (result["variants"][n] for n in RUNNERS)
    print(f"{'phase (median ms)':16s} {'mesh wall':>10s} {'hf wall':>10s} {'mesh cpu':>10s} {'hf cpu':>10s}")
    for phase in (*PHASES, "step"):
        key = "step_s_median_{}" if phase == "step" else "phase_ms_median_{}"
        values = []
        for clock in CLOCKS:
            for entry in (a, b):
                value = entry[key.format(clock)]
                values.append(value * 1e3 if phase == "step" else value[phase])
        print(f"{phase:16s} " + " ".join(f"{v:10.1f}" for v in values))
    own = [entry["own_process"]["step_s_median_wall"] * 1e3 for entry in (a, b)]
    print(f"{'own process':16s} {own[0]:10.1f} {own[1]:10.1f}")
    ops_b = {o["name"]: o for o in b["operators"]}
    print(f"\n{'operator (self ms/step)':44s} {'meshpilot':>10s} {'hf_flat':>10s} {'calls m/h':>12s}")
    for op in a["operators"][:TOP_OPERATORS]:
        other = ops_b.get(op["name"], {"self_ms_per_step": 0.0, "calls_per_step": 0})
        calls = f"{op['calls_per_step']:.0f}/{other['calls_per_step']:.0f}"
        print(f"{op['name'][:44]:44s} {op['self_ms_per_step']:10.2f} {other['self_ms_per_step']:10.2f} {calls:>12s}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tiny model for a few steps")
    parser.add_argument("--steps", type=int, help="optimizer steps per run")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each trainer, interleaved (best is kept)")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="torch threads, for both")
    parser.add_argument("--precision", choices=PRECISIONS, default="fp32", help="for both trainers")
    parser.add_argument("--out", type=Path, help="default: bench/results/profile_trainers.json (fp32) or _bf16.json")
    args = parser.parse_args(argv)
    setup = QUICK if args.quick else FULL
    setup = replace(setup, precision=args.precision, steps=setup.steps if args.steps is None else args.steps)
    out = args.out or results_path("profile_trainers", args.precision)
    transformers.logging.set_verbosity_error()
    try:
        with tempfile.TemporaryDirectory(prefix="profile-trainers-") as work:
            result = run_profile(setup, args.repeats, args.threads, Path(work))
    except ConfigError as error:
        print(f"profile_trainers: error: {error}", file=sys.stderr)
        return 2
    print_comparison(result)
    print(f"wrote {write_json(out, result)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
