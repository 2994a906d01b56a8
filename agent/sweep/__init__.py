"""Unattended tuning sweeps: `meshpilot sweep EXPERIMENT.yaml --out DIR`.

The planner enumerates what can run (space.py), optuna chooses trials and prunes bad ones (study.py), each trial
is a background job with a watchdog (agent.jobs) started by an executor (executors.py) on its own devices, the
loop keeps them going and survives being killed (runner.py) and hands its progress to a callback (progress.py
shows it on the terminal), and summary.py writes what the report reads:

    DIR/sweep.json          the sweep's inputs: experiment, config hash, space, sampler, executor, devices
    DIR/study.db            the optuna study (sqlite)
    DIR/trials/<id>/        each trial's run directory (metrics.json, memory.json, steps.jsonl, job.json, trial.json)
    DIR/summary.json        winner, every trial with its status and figures, the planner against the measurements
    DIR/job.json, job.log   when the sweep runs as a background job (agent.jobs.start_sweep): its record and output

Each file has one schema, defined beside its writer and read through it: sweep.json here (SWEEP), trial.json in
runner.py (TRIAL), summary.json in summary.py (SUMMARY), job.json in agent.jobs (JOB), a run's files in
trainer.results.schemas.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.jobs import is_job_file, stop_forkserver
from agent.records import EXECUTORS, SWEEP, SWEEP_FILE, SweepInputs
from agent.sweep.summary import summarize
from trainer.config import OBJECTIVES, ConfigError, load_experiment
from trainer.rank.trackers import check_trackers
from trainer.results.contracts import ContractError

if TYPE_CHECKING:  # the runner imports optuna: loaded when a sweep runs, not by every `meshpilot` command
    from agent.sweep.runner import ProgressCallback


def run_sweep(
    experiment: Path,
    out: Path,
    *,
    resume: bool = False,
    executor: str | None = None,
    max_parallel: int = 1,
    trials: int | None = None,
    env: dict | None = None,
    devices: int | None = None,
    space: dict[str, Any] | None = None,
    sampler: str = "auto",
    trial_timeout_s: float | None = None,
    hang_s: float | None = 600.0,
    prune: bool = True,
    slurm: dict[str, Any] | None = None,
    progress: ProgressCallback | None = None,
    trackers: list[str] | None = None,
) -> dict:
    """Run (or with `resume`, continue) a sweep in `out`; returns the summary, also written to out/summary.json.

    `space` maps experiment keys to choices or ranges (see agent.sweep.space; default: the planner's layouts x
    micro-batch x activation checkpointing). `devices` bounds the devices trials share (default: every GPU, or
    every core this process may use); trials run at most `max_parallel` at a time and never on more devices
    than that together. `resume` on a directory with no sweep in it starts one. `executor` is where trials run
    (default local); a resumed sweep keeps the one it started with, and refuses another. `env` is added to every
    trial's environment. `slurm` holds submitit parameters (e.g. {"slurm_partition": "gpu"}). `progress` is called
    with a runner.SweepProgress at every poll of the trials (agent.sweep.progress shows it on a terminal).
    `trackers` replaces the experiment's train.trackers in every trial (each trial is a tracker run of its own).
    """
    # imported here: runner, space and study load numpy, optuna, torch and transformers, which `meshpilot --help`
    # (it imports this package) must not wait for; make_executor is looked up per sweep (tests/test_trackers.py)
    from agent.sweep.executors import make_executor
    from agent.sweep.runner import Runner, settings_from
    from agent.sweep.space import Space
    from agent.sweep.study import open_study, start_with_planner_pick

    experiment, out = Path(experiment).absolute(), Path(out).absolute()
    _check_options(executor, EXECUTORS, max_parallel, trials, devices, trial_timeout_s, hang_s)
    loaded = load_experiment(experiment)
    sweep_file = out / SWEEP_FILE
    try:
        started = SWEEP.read(sweep_file)
    except ContractError as e:  # a sweep of another meshpilot version: one line, as every mistake here
        raise ConfigError(str(e)) from None
    _check_trial_trackers(trackers, started, loaded)
    if started is not None:
        if not resume:
            raise ConfigError(f"{out} holds a sweep; pass --resume to continue it or choose another --out")
        _check_same_sweep(started, loaded, experiment, trials, space, sampler, devices, trackers, executor)
    # A resumed sweep watches its trials, and starts new ones, where it started them: its recorded executor.
    kind = started["executor"] if started is not None else executor or "local"
    runs_on = make_executor(kind, out / "submitit", slurm)  # before a new sweep.json: a missing sbatch leaves none
    if started is not None:
        sweep = started
    else:
        if out.is_dir() and any(not is_job_file(p.name) for p in out.iterdir()):  # a sweep job's record is there
            raise ConfigError(f"{out} is not empty and holds no sweep; choose another --out")
        sweep = _new_sweep(
            experiment, loaded, space or {}, sampler, trials, devices, kind, prune, trial_timeout_s, hang_s
        )
        sweep["trackers"] = trackers  # None: the experiment's
        out.mkdir(parents=True, exist_ok=True)
        sweep = SWEEP.write(sweep_file, sweep)
    space_ = Space.from_dict(sweep["space"])
    study = open_study(out, space_, sweep["sampler"], sweep["direction"], sweep["prune"])
    if sweep["sampler"] == "tpe" and not study.trials:
        start_with_planner_pick(study, space_)
    try:
        Runner(out, space_, study, runs_on, settings_from(sweep, max_parallel, env), progress).run()
    finally:  # its trials have ended (or end with this process): the local executor's forkserver is not needed
        stop_forkserver()
    return summarize(out)


def _check_options(executor, executors, max_parallel, trials, devices, timeout_s, hang_s) -> None:
    if executor is not None and executor not in executors:
        raise ConfigError(f"--executor {executor!r} is not one of {', '.join(executors)}")
    for name, value in (("--max-parallel", max_parallel), ("--trials", trials), ("--devices", devices)):
        if value is not None and value < 1:
            raise ConfigError(f"{name} must be at least 1, got {value}")
    for name, value in (("--trial-timeout", timeout_s), ("--hang-timeout", hang_s)):
        if value is not None and value <= 0:
            raise ConfigError(f"{name} must be positive, got {value}")


def _check_trial_trackers(trackers: list[str] | None, started: SweepInputs | None, loaded) -> None:
    """Before anything runs: the trials' trackers, from --trackers, else the sweep's own as it started, else the
    experiment's."""
    if trackers is None and started is not None:
        trackers = started["trackers"]
    if trackers is None:
        check_trackers(loaded.train.trackers)
    else:
        check_trackers(trackers, "--trackers")


def _new_sweep(experiment: Path, loaded, space, sampler, trials, devices, executor, prune, timeout_s, hang_s) -> dict:
    from agent.sweep.space import build_space, check_space  # imported here: see run_sweep
    from agent.sweep.study import resolve_sampler

    check_space(space, experiment)  # typos first, in a moment; the planner below builds models
    search = loaded.search
    if search.objective not in OBJECTIVES:
        raise ConfigError(f"search.objective: {search.objective!r} is not one of {', '.join(OBJECTIVES)}")
    if search.trial_steps < 1 or search.trials < 1:
        raise ConfigError("search.trials and search.trial_steps must be at least 1")
    if loaded.hardware.nodes != 1:
        raise ConfigError(f"a sweep runs single-node trials; hardware.nodes is {loaded.hardware.nodes}")
    device_type, device_ids = _device_pool(loaded.hardware.device_type, devices)
    built = build_space(experiment, loaded, space, len(device_ids), device_type)
    budget = trials or search.trials
    sampler = resolve_sampler(built, sampler, budget)
    if not built.ranges:
        budget = min(budget, len(built.points))  # every point once at most
    return {
        "experiment": str(experiment),
        "config_hash": loaded.config_hash(),
        "objective": search.objective,
        "direction": OBJECTIVES[search.objective],
        "sampler": sampler,
        "prune": prune,
        "executor": executor,
        "device_type": device_type,
        "device_ids": device_ids,
        "trials": trials or search.trials,  # as asked; the budget below is what runs
        "budget": budget,
        "trial_steps": search.trial_steps,
        "timing_warmup_steps": loaded.train.timing_warmup_steps,
        "timeout_s": timeout_s,
        "hang_s": hang_s,
        "requested_space": space,
        "space": built.to_dict(),
    }


def _device_pool(requested: str, devices: int | None) -> tuple[str, list[int]]:
    """The device kind and the ids trials are placed on: GPUs, or the CPU cores this process may run on."""
    # torch (seconds to import) only to find the sweep's devices
    import torch

    if requested not in ("auto", "cpu", "cuda"):
        raise ConfigError(f"hardware.device_type: {requested!r} is not one of auto, cpu, cuda")
    device_type = "cuda" if requested == "cuda" or (requested == "auto" and torch.cuda.is_available()) else "cpu"
    available = list(range(torch.cuda.device_count())) if device_type == "cuda" else sorted(os.sched_getaffinity(0))
    if not available:
        raise ConfigError("hardware.device_type is cuda, but no CUDA device is available")
    if devices is not None and devices > len(available):
        if device_type == "cuda":
            raise ConfigError(f"--devices {devices}: only {len(available)} cuda devices are available")
        # CPU processes may outnumber the cores (a 4-way layout on 2 cores): slots then share cores, round robin.
        return device_type, list(range(devices))
    return device_type, available[: devices or len(available)]


def _check_same_sweep(
    sweep: SweepInputs, loaded, experiment: Path, trials, space, sampler, devices, trackers, executor
) -> None:
    """A resumed sweep is the sweep that started: same experiment, and no option that changes what it runs or
    where (options not given, None, take the sweep's own)."""
    if loaded.config_hash() != sweep["config_hash"]:
        raise ConfigError(f"--resume: {experiment} changed since the sweep started (config hash differs)")
    given = {
        "--trials": (trials, sweep["trials"]),
        "--space": (space, sweep["requested_space"]),
        "--devices": (devices, len(sweep["device_ids"])),
        "--trackers": (trackers, sweep["trackers"]),
        "--executor": (executor, sweep["executor"]),
    }
    if sampler != "auto":
        given["--sampler"] = (sampler, sweep["sampler"])
    for name, (value, started) in given.items():
        if value is not None and value != started:
            raise ConfigError(f"--resume continues the sweep as it started: {name} was {started!r}, not {value!r}")
