"""Where trials run: background jobs on this machine, or SLURM jobs through submitit.

Either way a trial is an agent.jobs job: job.json in the trial's directory says its state, and the job's own
supervisor enforces its time limits and stops it on a NaN loss. Executors differ in how the supervisor starts
and how a job that has not started (or runs on another node) is stopped.

A SLURM job's state comes from the controller (squeue), never from accounting (sacct, submitit's way, which
fails on clusters without slurmdbd), and a job SLURM stops (scancel, preemption, its time limit) records what
SLURM did (run_trial_job). tests/test_slurm.py runs both on a real one-node cluster (scripts/slurm/up.sh).

Cancelled or preempted, under SLURM: a trial whose job the user ends with `scancel` is "cancelled", a decision the
sweep respects (optuna hears a failure, the trial is not run again). A trial whose job receives SIGTERM while SLURM
keeps it RUNNING (preemption's GraceTime, `scancel --signal=TERM`) or that SLURM says it PREEMPTED is preempted: its
run saves a checkpoint and ends "preempted", and the sweep continues it from there (agent.sweep.runner). A job SLURM
is already killing reads COMPLETING whether scancel or a preemption without grace time did it: it counts as
cancelled.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Protocol

import psutil

from agent import jobs
from agent.records import EXECUTORS
from trainer.config import ConfigError
from trainer.host.lifeline import tied_env

# SLURM states in which a job will never run the supervisor (or stopped it from outside).
_SLURM_ENDED = ("FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL", "DEADLINE")
SLURM_GONE = "GONE"  # slurm_state: the controller no longer knows the job (it ended over MinJobAge ago)
SLURM_POLL_S = 5.0  # a queued (or remote) trial's SLURM state is asked for at most this often


class Executor(Protocol):
    shares_devices: bool  # trials run on this machine's devices: the sweep must hand out disjoint sets

    def start(self, trial_dir: Path, request: dict[str, Any], devices: list[int], device_type: str) -> None: ...

    def status(self, trial_dir: Path) -> dict: ...

    def cancel(self, trial_dir: Path, state: str, cause: str) -> None: ...

    def preempt(self, trial_dir: Path) -> None: ...


class LocalExecutor:
    """Each trial a background job (agent.jobs.start_run) pinned to its own devices."""

    shares_devices = True

    def start(self, trial_dir: Path, request: dict[str, Any], devices: list[int], device_type: str) -> None:
        jobs.start_forkserver()  # trials forked with the launcher's imports done once (agent.jobs.forkserver)
        jobs.start_run(out=trial_dir, **request, **_device_args(devices, device_type))

    def status(self, trial_dir: Path) -> dict:
        return jobs.run_status(trial_dir)

    def cancel(self, trial_dir: Path, state: str, cause: str) -> None:
        jobs.cancel_run(trial_dir, state=state, cause=cause)

    def preempt(self, trial_dir: Path) -> None:
        _preempt_here(jobs.read_job(trial_dir))


class SubmititExecutor:
    """Each trial a submitit job that runs the job's supervisor (agent.jobs.supervise) where it is scheduled.

    cluster "slurm" submits with sbatch: every trial its own allocation of `nproc` GPUs (or CPUs) on one node,
    running run_trial_job; the sweep does not hand out devices, SLURM does. Until the supervisor has started (and
    while it runs on another node) the job's state is SLURM's, read with squeue. cluster "local" is submitit's
    local executor: the same code path on this machine, with the sweep's device sets.
    """

    def __init__(self, folder: Path, cluster: str, parameters: dict[str, Any] | None = None):
        import submitit  # submitit only for a cluster executor

        if cluster == "slurm" and shutil.which("sbatch") is None:
            raise ConfigError("executor slurm needs sbatch, which is not on PATH (no SLURM here)")
        self.folder, self.cluster, self.parameters = folder, cluster, dict(parameters or {})
        self.shares_devices = cluster == "local"
        self._submitit = submitit
        self._asked: dict[str, float] = {}  # SLURM job id -> when squeue was last asked about it (monotonic)

    def start(self, trial_dir: Path, request: dict[str, Any], devices: list[int], device_type: str) -> None:
        env = request.get("env") or {}
        placement = _device_args(devices, device_type) if self.shares_devices else {}
        prepared = jobs.prepare_job(out=trial_dir, **request, **placement)
        executor = self._submitit.AutoExecutor(folder=self.folder, cluster=self.cluster)
        nproc = request.get("nproc") or 1
        if self.cluster == "slurm":
            executor.update_parameters(
                **slurm_parameters(nproc, device_type, request.get("timeout_s"), self.parameters)
            )
        else:
            executor.update_parameters(timeout_min=_minutes(request.get("timeout_s")), **self.parameters)
        task = run_trial_job if self.cluster == "slurm" else jobs.supervise
        job = executor.submit(task, trial_dir, env, prepared["token"])
        jobs.update_job(trial_dir, executor={"kind": "submitit", "cluster": self.cluster, "job_id": job.job_id})

    def status(self, trial_dir: Path) -> dict:
        status = jobs.run_status(trial_dir)
        job = jobs.read_job(trial_dir)
        if status["state"] in jobs.TERMINAL or _here(job) or job["executor"] is None:
            return status  # the job's own record says it all (executor None: a local job, before a resume)
        ended = self._scheduler_ended(trial_dir, job)
        if ended:
            jobs.record_state(trial_dir, *ended)  # unless the supervisor recorded its own meanwhile
            return jobs.run_status(trial_dir)
        return status

    def cancel(self, trial_dir: Path, state: str, cause: str) -> None:
        job = jobs.read_job(trial_dir)
        elsewhere = not _here(job) and job["executor"] is not None  # not started, or on another node
        if elsewhere and self.cluster == "local":
            jobs.kill_process(int(job["executor"]["job_id"]))
        jobs.cancel_run(trial_dir, state=state, cause=cause)
        if elsewhere and self.cluster == "slurm":  # after the verdict, which the job's SIGTERM handler then keeps
            scancel(job["executor"]["job_id"])

    def preempt(self, trial_dir: Path) -> None:
        """SIGTERM to the trial's supervisor, here or, through SLURM, on its node (which SLURM then keeps running:
        a preemption, see the module's docstring); a job still queued is left to the sweep's --resume."""
        job = jobs.read_job(trial_dir)
        if _here(job) or job["executor"] is None:
            _preempt_here(job)
        elif self.cluster == "slurm" and job["pid"] is not None:
            scancel(job["executor"]["job_id"], "--signal=TERM", "--full")

    def _scheduler_ended(self, trial_dir: Path, job: jobs.JobRecord) -> tuple[str, str] | None:
        """(state, cause) of a job the scheduler ended before its supervisor recorded a verdict, or None if it did
        not (or, for SLURM, was asked about too recently)."""
        if self.cluster == "local":
            controller = int(job["executor"]["job_id"])  # submitit's local job id is its controller's pid
            if jobs.process_alive(controller, None):
                return None
            return "failed", "submitit's local job ended before the supervisor recorded a result"
        job_id = job["executor"]["job_id"]
        now = time.monotonic()
        if now - self._asked.get(job_id, -math.inf) < SLURM_POLL_S:
            return None
        self._asked[job_id] = now
        state = slurm_state(job_id)
        return None if state is None else _slurm_ended(job_id, state, started=job["pid"] is not None)


def slurm_state(job_id: str) -> str | None:
    """SLURM's state of a job as its controller has it (squeue: PENDING, RUNNING, COMPLETED, CANCELLED, ...), which
    needs no accounting; SLURM_GONE for a job it no longer knows (ended over MinJobAge ago, 300 s by default);
    None when squeue gives no answer (the controller unreachable)."""
    return _squeue(job_id, "%T")


def _squeue(job_id: str, fields: str, timeout_s: float = 30.0) -> str | None:
    """squeue's line for the job in `fields` (its --format), SLURM_GONE, or None (see slurm_state)."""
    command = ["squeue", "--noheader", "--states=all", f"--jobs={job_id}", f"--format={fields}"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return SLURM_GONE if "Invalid job id" in done.stderr else None
    lines = done.stdout.split()
    return lines[0] if lines else None


def scancel(job_id: str, *options: str) -> None:
    """Cancel a SLURM job (SIGTERM to its processes, SIGKILL after KillWait), or with `options` (--signal=...)
    signal it; one that ended is left alone."""
    with contextlib.suppress(OSError, subprocess.TimeoutExpired):
        subprocess.run(["scancel", *options, job_id], capture_output=True, timeout=30, stdin=subprocess.DEVNULL)


def _preempt_here(job: jobs.JobRecord | None) -> None:
    """SIGTERM to a job's supervisor on this machine, as a scheduler sends it: its run saves and ends "preempted"."""
    if job is None or job["state"] in jobs.TERMINAL or not _here(job):
        return
    if not jobs.process_alive(job["pid"], job.get("pid_start")):  # ended meanwhile: the pid may be another's now
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(job["pid"], signal.SIGTERM)


def _slurm_ended(job_id: str, state: str, started: bool) -> tuple[str, str] | None:
    """(state, cause) of a trial whose SLURM job ended in `state` without a verdict from its supervisor, or None
    while the job may still run it."""
    word = state.split()[0]
    if word not in (*_SLURM_ENDED, "COMPLETED", SLURM_GONE):
        return None
    what = {
        "CANCELLED": ("cancelled", "was cancelled (scancel)"),
        "TIMEOUT": ("timeout", "reached its time limit"),
        "OUT_OF_MEMORY": ("oom", "ran out of memory"),
        "PREEMPTED": ("preempted", "was preempted"),  # the sweep runs it again (from a checkpoint, if one was saved)
        SLURM_GONE: ("failed", "ended unseen (SLURM forgets a job MinJobAge after it ended)"),
    }.get(word, ("failed", f"ended {word}"))
    after = "and the trial's supervisor recorded no end" if started else "before the trial's supervisor started"
    return what[0], f"SLURM job {job_id} {what[1]} {after}"


def run_trial_job(trial_dir: Path, env: dict[str, str], token: str) -> str:
    """The task of a trial's SLURM job (submitit runs it where SLURM placed the job): the trial's supervisor
    (`python -m agent.jobs`, which runs `meshpilot train`) as a child, and SLURM's verdict when SLURM stops the job.

    SLURM stops a job (scancel, preemption, its time limit) with SIGTERM to every process of it at once: the run's
    launcher ends as the supervisor is told to stop, and the supervisor, which looks at its launcher between sleeps,
    may find it ended first and record what the run says. This process, idle until then, records SLURM's verdict
    first: it holds the supervisor (SIGSTOP) while it asks SLURM what happened and records it, then lets it go on to
    stop what is left of the run. A preemption it leaves to the run: the supervisor records "preempted" once the run
    saved its checkpoint. Returns the trial's state.
    """
    out = Path(trial_dir)
    job_id = os.environ.get("SLURM_JOB_ID", "?")
    supervisor: subprocess.Popen | None = None

    def stopped(signum, frame) -> None:
        _record_slurm_stop(out, job_id, supervisor)

    signal.signal(signal.SIGTERM, stopped)  # before the supervisor starts: no SIGTERM may go unrecorded
    with (out / jobs.LOG_FILE).open("a") as log:
        supervisor = subprocess.Popen(  # tied: it dies with this process, and its run with it
            [sys.executable, "-m", "agent.jobs", str(out), token],
            cwd=jobs.REPO,
            env=tied_env({**os.environ, **env}),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    supervisor.wait()
    job = jobs.read_job(out)
    return job["state"] if job else "failed"


def _record_slurm_stop(out: Path, job_id: str, supervisor: subprocess.Popen | None) -> None:
    """SIGTERM reached the trial's SLURM job: record why (squeue's state of the job), ahead of the supervisor,
    unless SLURM preempts it (then the run records it)."""
    held = supervisor is not None and supervisor.returncode is None and _hold(supervisor.pid)
    writer = None
    try:
        line = _squeue(job_id, "%T|%M|%l", timeout_s=5.0)  # briefly: SIGKILL follows after KillWait, 30 s by default
        verdict = _slurm_stop_verdict(job_id, line or "")
        if verdict is not None:
            writer = threading.Thread(target=jobs.record_state, args=(out, *verdict), daemon=True)
            writer.start()
            writer.join(1.0)  # the supervisor may be held inside the job's lock: it must run again to let go of it
    finally:
        if held:
            os.kill(supervisor.pid, signal.SIGCONT)
    if writer is not None:
        writer.join(30.0)  # once the supervisor let go of the lock
    if supervisor is not None and supervisor.poll() is None:
        supervisor.send_signal(signal.SIGTERM)  # a SIGTERM that reached this process alone stops the run too


def _slurm_stop_verdict(job_id: str, line: str) -> tuple[str, str] | None:
    """(state, cause) of a trial whose SLURM job received SIGTERM, from squeue's `line` (%T|%M|%l) about it; None
    for a preemption, which the run itself ends as "preempted" (see the module's docstring). While SLURM kills a job
    it says COMPLETING, not CANCELLED or TIMEOUT, so the time the job ran is held against its limit to tell a time
    limit from scancel."""
    state, used, limit = (*line.split("|"), "", "")[:3]
    ran, allowed = _slurm_seconds(used), _slurm_seconds(limit)
    if state == "TIMEOUT" or (ran is not None and allowed is not None and ran >= allowed):
        return "timeout", f"SLURM job {job_id} reached its time limit ({limit})"
    if state in ("PREEMPTED", "RUNNING"):  # preempted, or signalled while SLURM keeps it running: a preemption
        return None
    if state in ("CANCELLED", "COMPLETING"):
        return "cancelled", f"SLURM job {job_id} was cancelled (scancel, or preemption) while the trial ran"
    return "cancelled", f"the trial's SLURM job {job_id} received SIGTERM (SLURM says {state or 'nothing'})"


def _slurm_seconds(duration: str) -> int | None:
    """A SLURM duration ([days-][hours:]minutes:seconds) in seconds; None for anything else (UNLIMITED)."""
    days, _, clock = duration.rpartition("-")
    parts = clock.split(":")
    if not 2 <= len(parts) <= 3 or not all(p.isdigit() for p in parts) or not (days.isdigit() or days == ""):
        return None
    seconds = 0
    for part in parts:
        seconds = seconds * 60 + int(part)
    return seconds + int(days or 0) * 86400


def _hold(pid: int) -> bool:
    """Stop a process (SIGSTOP) and wait until it is stopped; False when it is gone."""
    try:
        os.kill(pid, signal.SIGSTOP)
        process = psutil.Process(pid)
        deadline = time.monotonic() + 1.0
        while process.status() not in (psutil.STATUS_STOPPED, psutil.STATUS_ZOMBIE) and time.monotonic() < deadline:
            time.sleep(0.001)
    except (ProcessLookupError, psutil.NoSuchProcess):
        return False
    return True


def slurm_parameters(nproc: int, device_type: str, timeout_s: float | None, extra: dict[str, Any]) -> dict[str, Any]:
    """submitit's parameters for one trial: one task on one node holding the trial's GPUs, or on CPU a core per
    rank (torchrun inside it starts the ranks), its time limit, and what `--slurm KEY=VALUE` added (e.g.
    slurm_partition=gpu).

    A preemption must reach the run as a signal it survives (see the module's docstring): SLURM sends SIGTERM to
    every process of the job, and both the batch script's shell and srun would end the job at once on it (srun
    "forcing job termination"). So the batch script ignores SIGTERM and runs the task without srun, as the one
    task of its one node; run_trial_job sets its own handler."""
    gpus = nproc if device_type == "cuda" else 0
    cores = {} if device_type == "cuda" else {"cpus_per_task": nproc}
    limit = _minutes(timeout_s)
    graceful = {"slurm_use_srun": False, "slurm_setup": ["trap '' TERM"]}
    return {"nodes": 1, "tasks_per_node": 1, "gpus_per_node": gpus, **cores, "timeout_min": limit, **graceful, **extra}


def make_executor(kind: str, folder: Path, slurm: dict[str, Any] | None = None) -> Executor:
    if kind == "local":
        return LocalExecutor()
    if kind in ("slurm", "submitit-local"):
        return SubmititExecutor(folder, "slurm" if kind == "slurm" else "local", slurm)
    raise ConfigError(f"--executor {kind!r} is not one of {', '.join(EXECUTORS)}")


def _here(job: jobs.JobRecord) -> bool:
    """Whether the job's supervisor runs on this machine, where agent.jobs can see and stop its processes."""
    return bool(job["pid"]) and job["host"] == socket.gethostname()


def _device_args(devices: list[int], device_type: str) -> dict[str, list]:
    if device_type == "cuda":
        return {"visible_devices": visible_devices(devices, os.environ.get("CUDA_VISIBLE_DEVICES"))}
    cores = sorted(os.sched_getaffinity(0))  # more slots than cores share them (see agent.sweep._device_pool)
    return {"cpus": sorted({cores[d % len(cores)] for d in devices})}


def visible_devices(devices: list[int], parent: str | None) -> list[int | str]:
    """CUDA_VISIBLE_DEVICES entries for a trial given the sweep's device indices: indices count the devices this
    process sees, so under a parent CUDA_VISIBLE_DEVICES (a subset, or UUIDs) index i is the parent's i-th entry."""
    if parent is None or not parent.strip():
        return list(devices)
    entries = [entry.strip() for entry in parent.split(",") if entry.strip()]
    if max(devices, default=-1) >= len(entries):
        raise ConfigError(f"trial devices {devices} exceed the {len(entries)} of CUDA_VISIBLE_DEVICES={parent}")
    return [int(entries[d]) if entries[d].isdigit() else entries[d] for d in devices]


def _minutes(timeout_s: float | None) -> int:
    """The scheduler's limit: the trial's own, plus time to start; a week when the trial has none."""
    return int((timeout_s or 7 * 24 * 3600) / 60) + 10
