"""Starting a job: `start_run` and `start_sweep` check the request cheaply, write job.json (state "queued") and spawn
its supervisor, then return at once; a job that is going or ended ok is adopted instead (its id returned).

A job started from inside another job (a sweep's trial) belongs to it: its supervisor is tied to the process that
started it (SIGKILL of the sweep's supervisor takes the sweep, every trial supervisor and every trial's run with
it), and its processes also carry the outer job's token (MESHPILOT_OWNERS), so stopping the sweep finds them. A
sweep started by hand (`meshpilot sweep`) is in no job: its trials outlive it, and the sweep resumed adopts them."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from agent.jobs import forkserver
from agent.jobs.processes import OWNERS, enclosing_jobs, identity, start_time
from agent.jobs.record import JOB, JOB_FILE, LOG_FILE, SWEEP, JobRecord, locked, read_job, update_job
from agent.jobs.status import run_status
from agent.jobs.supervisor import REPO, job_env
from trainer.config import ConfigError, load_experiment
from trainer.host.lifeline import PARENT_ENV, tied_env
from trainer.layout import Layout, LayoutError
from trainer.results.rundir import RunDir
from trainer.results.schemas import PREEMPTED


def start_run(experiment: Path, out: Path, **options: Any) -> str:
    """Start `meshpilot train` in the background and return the run id (the name of `out`) at once.

    `options` are prepare_job's (nproc, layout, steps, overrides, timeout_s, env, hang_s, cpus, visible_devices).
    A run that finished ok or is still going is not started again: its id is returned. A directory holding a run
    that failed is refused (choose another `out`). `cpus` pins the job to those CPU cores; `visible_devices` sets
    CUDA_VISIBLE_DEVICES: how a sweep gives parallel trials disjoint devices.
    """
    out = Path(out).absolute()
    resuming = options.get("resume", False)
    return _start(out, "run", partial(prepare_job, experiment, out, **options), options.get("env"), resuming)


def start_sweep(
    experiment: Path, out: Path, *, trials: int | None = None, timeout_s: float | None = None, env: dict | None = None
) -> str:
    """Start `meshpilot sweep EXPERIMENT --out OUT` in the background and return its id (the name of `out`) at once.

    The sweep is a job like a run (job.json beside its files in `out`, the same status, wait and cancel), started
    and adopted the same way; its trials are jobs it owns (see the module docstring). `trials` defaults to
    search.trials. A mistake only the sweep finds (a space nothing fits in) ends the job "failed" with its line.
    """
    out = Path(out).absolute()
    return _start(out, SWEEP, partial(_prepare_sweep, experiment, out, trials, timeout_s, env), env)


# What a resumed job keeps of its record besides the command: its limits, pinning and kind.
# Not env_keys: the values of the variables a job was started with are not kept (they may be secrets).
_KEPT_ON_RESUME = ("steps", "timeout_s", "hang_s", "cpus", "visible_devices", "threads", "kind", "experiment", "trials")


def resume_job(out: Path) -> str:
    """Continue the preempted run or sweep in `out` in its own directory, in the background; returns its id.

    The job's recorded command runs again with `--resume` (`meshpilot train --resume` from the run's newest verified
    checkpoint, `meshpilot sweep --resume` continuing the sweep's trials): what it trains is what it was started to
    train. Refused in one line: a job that is going, ended ok or ended otherwise (only a preemption is resumable),
    and a preempted run with no complete checkpoint to continue from."""
    out = Path(out).absolute()
    job = resumable_job(out)
    command = job["command"] if "--resume" in job["command"] else [*job["command"], "--resume"]
    _write_job(out, command, **{key: job[key] for key in _KEPT_ON_RESUME if key in job})
    _spawn_supervisor(out, {})
    return out.name


def resumable_job(out: Path) -> JobRecord:
    """The record of the preempted job in `out`; ConfigError in one line when there is nothing to resume."""
    job = read_job(out)
    if job is None:
        raise ConfigError(f"{out} holds no job that meshpilot started (no {JOB_FILE}): nothing to resume")
    kind, state = job.get("kind", "run"), run_status(out)["state"]
    if state in ("queued", "running"):
        raise ConfigError(f"{out.name}: the {kind} is still {state}; only a preempted {kind} can be resumed")
    if state != PREEMPTED:
        raise ConfigError(f"{out.name}: the {kind} ended {state}, not preempted; only a preempted {kind} resumes")
    if kind == "run" and resume_checkpoint(out) is None:
        raise ConfigError(f"{out.name}: the run was preempted before it saved a complete checkpoint: nothing to resume")
    return job


def resume_checkpoint(out: Path) -> Path | None:
    """The checkpoint `meshpilot train --resume` continues a run from: its newest verified one."""
    from trainer.rank.checkpoint import newest_verified  # imported here: it loads torch

    return newest_verified(RunDir(out).checkpoints)[0]


def recorded_launch(job: JobRecord) -> dict[str, Any]:
    """The experiment and options of a job's recorded command (as prepare_job and _prepare_sweep write it)."""
    command = job["command"]
    found: dict[str, Any] = {"experiment": Path(command[4]), "nproc": None, "layout": None, "overrides": []}
    for argument in command[5:]:
        name, _, value = argument.partition("=")
        if name == "--nproc":
            found["nproc"] = int(value)
        elif name == "--layout":
            found["layout"] = value
        elif name == "--set":
            found["overrides"].append(value)
    return found


def _start(out: Path, kind: str, prepare: Callable[[], dict], env: dict | None, resuming: bool = False) -> str:
    """Prepare and spawn the job in `out`, unless one is there: a job that is going or ended ok is adopted (its id
    returned), one that ended otherwise is refused, except a preempted run that `resuming` continues."""
    existing = _existing_state(out)
    if existing in ("ok", "queued", "running"):
        return out.name
    if existing is not None and not (resuming and existing == PREEMPTED):
        raise ConfigError(f"{out} holds a {kind} that ended {existing}; choose another {kind} directory")
    prepare()
    _spawn_supervisor(out, env or {})
    return out.name


def prepare_job(
    experiment: Path,
    out: Path,
    *,
    nproc: int | None = None,
    layout: str | None = None,
    steps: int | None = None,
    overrides: list[str] = (),
    timeout_s: float | None = None,
    env: dict | None = None,
    hang_s: float | None = None,
    cpus: list[int] | None = None,
    visible_devices: list[int | str] | None = None,
    resume: bool = False,
) -> JobRecord:
    """Check the request cheaply and write job.json (state "queued"); `supervise` then runs it. `resume`: continue
    the run in `out` from its newest checkpoint (`meshpilot train --resume`), as a preempted sweep trial is.

    Used by `start_run`, and by executors that run the supervisor elsewhere (a SLURM job through submitit).
    """
    experiment, out = Path(experiment).absolute(), Path(out).absolute()
    overrides = [*overrides, *([f"train.steps={steps}"] if steps is not None else [])]
    loaded = load_experiment(experiment, overrides)  # unknown keys, bad values: one line, before anything starts
    _check_request(nproc, layout, timeout_s, hang_s, cpus, env)
    if not resume and (RunDir(out).steps.exists() or RunDir(out).metrics.exists()):
        raise ConfigError(f"run directory {out} holds results of another run; choose another run directory")
    command = [sys.executable, "-m", "agent.cli", "train", str(experiment), "--out", str(out)]
    if resume:
        command.append("--resume")
    if nproc is not None:
        command.append(f"--nproc={nproc}")
    if layout is not None:
        command.append(f"--layout={layout}")
    command += [f"--set={o}" for o in overrides]
    return _write_job(
        out,
        command,
        steps=loaded.train.steps,
        timeout_s=timeout_s,
        hang_s=hang_s,
        cpus=cpus,
        visible_devices=visible_devices,
        threads=_threads_per_process(cpus, nproc),
        env_keys=sorted(env or {}),  # names only: values may be secrets
    )


def _prepare_sweep(
    experiment: Path, out: Path, trials: int | None, timeout_s: float | None, env: dict | None
) -> JobRecord:
    """The sweep's quick checks (the experiment loads, the trial count) and its job.json; the sweep checks the rest."""
    experiment = Path(experiment).absolute()
    trials = load_experiment(experiment).search.trials if trials is None else trials
    if trials < 1:
        raise ConfigError(f"a sweep needs at least one trial, got {trials}")
    _check_request(None, None, timeout_s, None, None, env)
    if (out / "sweep.json").exists():
        raise ConfigError(f"{out} holds another sweep; choose another sweep directory")
    command = [sys.executable, "-m", "agent.cli", "sweep", str(experiment), "--out", str(out), f"--trials={trials}"]
    fields = {"kind": SWEEP, "experiment": str(experiment), "trials": trials, "timeout_s": timeout_s}
    return _write_job(out, command, **fields, env_keys=sorted(env or {}))


def _write_job(out: Path, command: list[str], **fields: Any) -> JobRecord:
    """Write job.json for `command` (state "queued"); `fields` fill in or add to the record's defaults."""
    job = {
        "run_id": out.name,
        "token": uuid.uuid4().hex,
        "command": command,
        "started": time.time(),  # informational: the watchdog measures time with a monotonic clock
        "steps": None,
        "timeout_s": None,
        "hang_s": None,
        "cpus": None,
        "visible_devices": None,
        "threads": None,
        "env_keys": [],
        **fields,
        "state": "queued",
        "cause": None,
        "creator": identity(),  # the process that wrote this record and is about to start its supervisor
        "executor": None,
        "pid": None,
        "pgid": None,
        "host": None,
    }
    out.mkdir(parents=True, exist_ok=True)
    with locked(out):
        return JOB.write(out / JOB_FILE, job)


def _existing_state(out: Path) -> str | None:
    if read_job(out) is None and RunDir(out).read_metrics() is None:
        return None
    return run_status(out)["state"]


def _check_request(nproc, layout, timeout_s, hang_s, cpus, env) -> None:
    if nproc is not None and nproc < 1:
        raise ConfigError(f"nproc must be at least 1, got {nproc}")
    if layout is not None:
        try:
            Layout.parse(layout)
        except LayoutError as e:
            raise ConfigError(str(e)) from None
    for name, value in (("timeout_s", timeout_s), ("hang_s", hang_s)):
        if value is not None and value <= 0:
            raise ConfigError(f"{name} must be positive, got {value}")
    if cpus is not None and (not cpus or not set(cpus) <= os.sched_getaffinity(0)):
        raise ConfigError(f"cpus {cpus} are not among this process's cores {sorted(os.sched_getaffinity(0))}")
    if env is not None and not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        raise ConfigError("env: names and values must be strings")


def _threads_per_process(cpus: list[int] | None, nproc: int | None) -> int | None:
    """Ranks pinned to a few cores must not each start a thread per core of the machine."""
    return max(1, len(cpus) // (nproc or 1)) if cpus else None


# Supervisors outlive the call that spawns them; keeping their Popen objects lets this process reap the ones that
# ended (no zombies in a long chat session) instead of dropping running children.
_SUPERVISORS: list[subprocess.Popen] = []


def _spawn_supervisor(out: Path, env: dict) -> None:
    _SUPERVISORS[:] = [p for p in _SUPERVISORS if p.poll() is None]
    job = read_job(out)
    child_env = job_env(job, env)
    owners = enclosing_jobs()
    if owners:  # started by a job (a sweep its trial): the job owns this one, which dies with the caller
        child_env = {**child_env, OWNERS: ",".join(owners)}
    else:  # detached: a variable left over from elsewhere must not tie it to anything
        child_env.pop(PARENT_ENV, None)
    pid = forkserver.spawn(out, job["token"], child_env, tied=bool(owners))  # where this process started one
    if pid is None:
        pid = _popen_supervisor(out, job["token"], tied_env(child_env) if owners else child_env)
    # The supervisor records the same itself; written here too so that a reader never sees a job with no pid.
    update_job(out, pid=pid, pgid=pid, host=socket.gethostname(), pid_start=start_time(pid))


def _popen_supervisor(out: Path, token: str, env: dict[str, str]) -> int:
    with (out / LOG_FILE).open("a") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "agent.jobs", str(out), token],
            cwd=REPO,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # survives the caller; a terminal's Ctrl-C does not reach it
        )
    _SUPERVISORS.append(process)
    return process.pid
