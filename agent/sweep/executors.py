"""Where trials run: background jobs on this machine, or SLURM jobs through submitit.

Either way a trial is an agent.jobs job: job.json in the trial's directory says its state, and the job's own
supervisor enforces its time limits and stops it on a NaN loss. Executors differ in how the supervisor starts
and how a job that has not started (or runs on another node) is stopped.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any, Protocol

from agent import jobs
from trainer.config import ConfigError

EXECUTORS = ("local", "slurm", "submitit-local")
# SLURM states in which a job will never run the supervisor (or stopped it from outside).
_SLURM_ENDED = ("FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL", "DEADLINE")


class Executor(Protocol):
    shares_devices: bool  # trials run on this machine's devices: the sweep must hand out disjoint sets

    def start(self, trial_dir: Path, request: dict[str, Any], devices: list[int], device_type: str) -> None: ...

    def status(self, trial_dir: Path) -> dict: ...

    def cancel(self, trial_dir: Path, state: str, cause: str) -> None: ...


class LocalExecutor:
    """Each trial a background job (agent.jobs.start_run) pinned to its own devices."""

    shares_devices = True

    def start(self, trial_dir: Path, request: dict[str, Any], devices: list[int], device_type: str) -> None:
        jobs.start_run(out=trial_dir, **request, **_device_args(devices, device_type))

    def status(self, trial_dir: Path) -> dict:
        return jobs.run_status(trial_dir)

    def cancel(self, trial_dir: Path, state: str, cause: str) -> None:
        jobs.cancel_run(trial_dir, state=state, cause=cause)


class SubmititExecutor:
    """Each trial a submitit job that runs the job's supervisor (agent.jobs.supervise) where it is scheduled.

    cluster "slurm" submits with sbatch: every trial its own allocation of `nproc` GPUs on one node; the
    sweep does not hand out devices, SLURM does. cluster "local" is submitit's local executor: the same code
    path on this machine (how the tests run it), with the sweep's device sets.
    """

    def __init__(self, folder: Path, cluster: str, parameters: dict[str, Any] | None = None):
        import shutil

        import submitit

        if cluster == "slurm" and shutil.which("sbatch") is None:
            raise ConfigError("--executor slurm: sbatch is not on PATH (no SLURM here); use --executor local")
        self.folder, self.cluster, self.parameters = folder, cluster, dict(parameters or {})
        self.shares_devices = cluster == "local"
        self._submitit = submitit

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
        job = executor.submit(jobs.supervise, trial_dir, env, prepared["token"])
        jobs.update_job(trial_dir, executor={"kind": "submitit", "cluster": self.cluster, "job_id": job.job_id})

    def status(self, trial_dir: Path) -> dict:
        status = jobs.run_status(trial_dir)
        job = jobs.read_job(trial_dir)
        if status["state"] in jobs.TERMINAL or _here(job) or job["executor"] is None:
            return status  # the job's own record says it all (executor None: a local job, before a resume)
        ended = self._scheduler_ended(trial_dir, job)
        if ended:
            jobs.record_state(trial_dir, "failed", ended)
            return jobs.run_status(trial_dir)
        return status

    def cancel(self, trial_dir: Path, state: str, cause: str) -> None:
        job = jobs.read_job(trial_dir)
        if not _here(job) and job["executor"] is not None:  # not started, or on another node
            if self.cluster == "local":
                jobs.kill_process(int(job["executor"]["job_id"]))
            else:
                self._slurm_job(job).cancel(check=False)
        jobs.cancel_run(trial_dir, state=state, cause=cause)

    def _scheduler_ended(self, trial_dir: Path, job: dict) -> str | None:
        """Why the scheduler ended a job whose supervisor never recorded a verdict, or None if it did not."""
        if self.cluster == "local":
            controller = int(job["executor"]["job_id"])  # submitit's local job id is its controller's pid
            if jobs.process_alive(controller, None):
                return None
            return "submitit's local job ended before the supervisor recorded a result"
        state = self._slurm_job(job).state
        if state.split()[0] in _SLURM_ENDED:
            return f"SLURM job {job['executor']['job_id']} ended {state} before the run did"
        return None

    def _slurm_job(self, job: dict):
        return self._submitit.SlurmJob(self.folder, job["executor"]["job_id"])


def slurm_parameters(nproc: int, device_type: str, timeout_s: float | None, extra: dict[str, Any]) -> dict[str, Any]:
    """submitit's parameters for one trial: one task on one node holding the trial's GPUs (torchrun inside it
    starts the ranks), its time limit, and what `--slurm KEY=VALUE` added (e.g. slurm_partition=gpu)."""
    gpus = nproc if device_type == "cuda" else 0
    return {"nodes": 1, "tasks_per_node": 1, "gpus_per_node": gpus, "timeout_min": _minutes(timeout_s), **extra}


def make_executor(kind: str, folder: Path, slurm: dict[str, Any] | None = None) -> Executor:
    if kind == "local":
        return LocalExecutor()
    if kind in ("slurm", "submitit-local"):
        return SubmititExecutor(folder, "slurm" if kind == "slurm" else "local", slurm)
    raise ConfigError(f"--executor {kind!r} is not one of {', '.join(EXECUTORS)}")


def _here(job: dict) -> bool:
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
