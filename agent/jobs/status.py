"""A job's state as every reader sees it (run_status), and waiting for or stopping a job: the record's verdict, or
the results a job wrote, or "killed" when its supervisor died first (recorded by the first reader to find it so)."""

from __future__ import annotations

import os
import signal
import socket
import time
from pathlib import Path
from typing import Any

from agent.jobs.processes import kill_job_processes, process_alive, send_signal
from agent.jobs.record import JOB_FILE, KILLED, RESULTS, SWEEP, TERMINAL, JobRecord, read_job, record_state
from agent.records import SUMMARY, Summary
from trainer.config import ConfigError
from trainer.results.rundir import RunDir
from trainer.results.schemas import STEPS, Metrics

POLL_S = 0.5  # the supervisor's look at its run (hang, steps); its pause ends at once when the launcher exits
# wait_run's look at a job's state: reading job.json takes a tenth of a millisecond, so a job that ended is seen
# within 0.1 s rather than up to POLL_S later, which every run an agent or a test waits for would pay.
WAIT_POLL_S = 0.1


def run_status(out: Path) -> dict:
    """{"run_id", "kind", "state", "cause", "step", "steps", "metrics"}: state is queued, running, ok, failed, oom,
    timeout, nan, cancelled (or pruned, for a sweep trial stopped early). A sweep's (kind "sweep") adds "summary"
    (None until it ended) and "trials_ended"."""
    out = Path(out)
    job = read_job(out)
    kind = job_kind(job)
    results = job_results(out, kind)
    if job is None and results is None:
        raise ConfigError(f"no run in {out} (neither {JOB_FILE} nor metrics.json)")
    state, cause = _state(job, kind, results)
    if state == KILLED and job["state"] != KILLED:  # the first reader to find the supervisor dead records it
        record_state(out, state, cause)
    status = {
        "run_id": out.name,
        "kind": kind,
        "state": state,
        "cause": cause,
        "step": last_step(RunDir(out)),
        "steps": job["steps"] if job else results.get("steps"),
        "metrics": results if kind == "run" else None,
    }
    if kind == SWEEP:
        ended = [d for d in _owned_dirs(out, job) if (read_job(d) or {}).get("state") in TERMINAL]
        status |= {"summary": results, "trials_ended": len(ended)}
    return status


def cancel_run(out: Path, *, state: str = "cancelled", cause: str | None = None) -> bool:
    """Stop the run (its supervisor, the launcher, torchrun and every rank) and record `state`.

    Returns False when there was nothing to stop: no job, or one that had already ended.
    """
    out = Path(out)
    job = read_job(out)
    if job is None or run_status(out)["state"] in TERMINAL:
        return False
    # The verdict first: a reader that finds the supervisor dead a moment later must not record it as killed.
    record_state(out, state, cause or "cancelled by the user")
    if read_job(out)["state"] != state:  # the run recorded its own end just before
        return False
    if job["host"] in (None, socket.gethostname()):
        if job["pid"] and process_alive(job["pid"], job.get("pid_start")):
            send_signal(job["pid"], signal.SIGKILL)  # first: its run dies with it, and it starts nothing more
        kill_job_processes(job["token"])
        end_owned(out, job, state)
    return True


def wait_run(out: Path, timeout_s: float | None = None) -> dict:
    """Wait until the job (a run or a sweep) ends, or `timeout_s` passes: then the status says it is still going."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        status = run_status(out)
        if status["state"] in TERMINAL or (deadline is not None and time.monotonic() >= deadline):
            return status
        time.sleep(WAIT_POLL_S)


def job_kind(job: JobRecord | None) -> str:
    return (job or {}).get("kind", "run")


def job_results(out: Path, kind: str) -> Metrics | Summary | None:
    """What the job wrote when it ended (a run's metrics.json, a sweep's summary.json), or None."""
    if kind == SWEEP:
        return SUMMARY.read(Path(out) / RESULTS[SWEEP])
    return RunDir(out).read_metrics()


def verdict_of(kind: str, results: dict) -> tuple[str, str | None]:
    """A sweep that wrote its summary ran to its end, whether a trial won or not (the summary says); a run's
    metrics say how it ended."""
    return ("ok", None) if kind == SWEEP else _classify(results)


def _classify(metrics: dict) -> tuple[str, str | None]:
    """The trainer itself tells "oom" and "nan" (it stops at a non-finite loss) from other failures."""
    status = metrics.get("status")
    return (status if status in TERMINAL else "failed"), metrics.get("error")


def _state(job: JobRecord | None, kind: str, results: dict | None) -> tuple[str, str | None]:
    if job is None:
        return verdict_of(kind, results)
    if job["state"] in TERMINAL:
        return job["state"], job["cause"]
    if job["pid"] is None and job["executor"] is None and not process_alive(**_creator(job)):
        return "failed", "the job never started: the process starting it died first"
    if job["pid"] is None or job["host"] not in (None, socket.gethostname()):
        return job["state"], None  # not started yet (a SLURM queue), or running on another node
    if process_alive(job["pid"], job.get("pid_start")):
        return job["state"], None
    if results is not None:  # the supervisor died after the job ended
        return verdict_of(kind, results)
    return KILLED, f"the job's supervisor (pid {job['pid']}) died before the {kind} ended, and the {kind} with it"


def _owned_dirs(out: Path, job: JobRecord | None) -> list[Path]:
    """The directories of the jobs this job started: a sweep's trials (agent.sweep keeps them in trials/)."""
    return sorted((Path(out) / "trials").glob("*/")) if job_kind(job) == SWEEP else []


def end_owned(out: Path, job: JobRecord, state: str) -> None:
    """Record the end of the jobs stopped with this one (a sweep's trials), which would otherwise read as killed."""
    for owned in _owned_dirs(out, job):
        if read_job(owned) is not None:
            record_state(owned, "cancelled", f"stopped with its {job_kind(job)} ({state})")


def _creator(job: JobRecord) -> dict[str, Any]:
    creator = job["creator"]
    if creator["host"] != socket.gethostname():
        return {"pid": os.getpid(), "start": None}  # cannot be checked from here: count it as alive
    return {"pid": creator["pid"], "start": creator["pid_start"]}


_TAIL_BYTES = 1 << 16  # far more than one steps.jsonl line


def last_step(run: RunDir) -> int:
    """The step of the last complete line of steps.jsonl (0 before the first): its end alone is read, a line still
    being written is not."""
    try:
        with run.steps.open("rb") as f:
            start = max(0, f.seek(0, os.SEEK_END) - _TAIL_BYTES)
            f.seek(start)
            tail = f.read()
    except FileNotFoundError:
        return 0
    complete = tail[: tail.rfind(b"\n") + 1]
    if start > 0:  # the window may begin inside a line
        complete = complete[complete.find(b"\n") + 1 :]
    lines = [line for line in complete.decode().splitlines() if line.strip()]
    return STEPS.parse(lines[-1], run.steps)["step"] if lines else 0
