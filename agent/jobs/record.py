"""job.json, the job's record: the command, the supervisor's pid, pgid and host, and once the run ended its state
("ok", "failed", "oom", "timeout", "nan", "cancelled", "pruned" for a sweep trial stopped early, "preempted" for a run
that SIGTERM stopped after saving a checkpoint, which `--resume` continues (a sweep: its running trials preempted
so, which `meshpilot sweep --resume` continues), or "killed" when the supervisor died
before the run ended) and cause. Several processes update it (the supervisor, `cancel_run`, the first reader to find
the supervisor dead), always under a file lock. A sweep's record says "kind": "sweep" and its result is summary.json,
a run's metrics.json (a run's record has no kind, so that those written before sweeps were jobs read the same). Its
schema is JobRecord: every write and read goes through JOB."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any, Literal, NotRequired

from filelock import FileLock
from pydantic import Field
from typing_extensions import TypedDict

from agent.records import JobState
from trainer.results.contracts import STRICT, Contract
from trainer.results.schemas import RUN_STATUSES

JOB_FILE = "job.json"
LOG_FILE = "job.log"  # what the launcher (and the supervisor) printed
LOCK_FILE = ".job.lock"
SWEEP = "sweep"  # job.json's "kind" of a sweep job
RESULTS = {"run": "metrics.json", SWEEP: "summary.json"}  # what a job of each kind writes when it ended
KILLED = "killed"  # the supervisor died (SIGKILL, a lost machine) before the run ended: no verdict, no results
TERMINAL = RUN_STATUSES

Seconds = Annotated[float, Field(gt=0)]
# A process's start time (start_time): seconds since boot; an int is clock ticks, as records held before psutil.
StartTime = int | float | None


class Identity(TypedDict):
    """A process that wrote a job record: how a reader tells whether it still lives (process_alive)."""

    __pydantic_config__ = STRICT
    pid: Annotated[int, Field(ge=1)]
    pgid: int
    host: str
    pid_start: StartTime


class SubmititJob(TypedDict):
    """Where an executor other than this machine's placed the job (agent.sweep.executors)."""

    __pydantic_config__ = STRICT
    kind: Literal["submitit"]
    cluster: Literal["slurm", "local"]
    job_id: str  # SLURM's job id, or submitit's local controller's pid


class JobRecord(TypedDict):
    """job.json: a run's or a sweep's background job, from the request to its verdict."""

    __pydantic_config__ = STRICT
    run_id: str  # the directory's name
    token: str  # MESHPILOT_JOB of every process of the job
    command: list[str]  # what the supervisor runs
    started: float  # time.time() when it was prepared
    steps: Annotated[int, Field(ge=0)] | None  # a run's optimizer steps
    timeout_s: Seconds | None
    hang_s: Seconds | None
    cpus: list[Annotated[int, Field(ge=0)]] | None
    visible_devices: list[int | str] | None  # CUDA_VISIBLE_DEVICES entries
    threads: Annotated[int, Field(ge=1)] | None  # OMP_NUM_THREADS of a pinned job
    env_keys: list[str]  # the names of the variables added to its environment: values may be secrets
    kind: NotRequired[Literal["run", "sweep"]]  # absent: a run (records from before sweeps were jobs)
    experiment: NotRequired[str]  # a sweep's
    trials: NotRequired[Annotated[int, Field(ge=1)]]  # a sweep's
    state: JobState
    cause: str | None  # why it ended so, in one line
    creator: Identity  # the process that prepared it and starts its supervisor
    executor: SubmititJob | None  # None: a supervisor on this machine
    pid: int | None  # the supervisor, once started
    pgid: int | None
    host: str | None
    pid_start: NotRequired[StartTime]
    launcher_pid: NotRequired[int]  # the `meshpilot train` (or `sweep`) the supervisor started
    ended: NotRequired[float]  # time.time() when its verdict was recorded


JOB = Contract(JOB_FILE, JobRecord)


def read_job(out: Path) -> JobRecord | None:
    """The job's record, or None when the directory has none."""
    return JOB.read(Path(out) / JOB_FILE)


def record_state(out: Path, state: JobState, cause: str | None) -> None:
    """Write the final state, unless another process already wrote one (the first verdict stands)."""
    with locked(out):
        job = read_job(out)
        if job["state"] in TERMINAL:
            return
        JOB.write(out / JOB_FILE, {**job, "state": state, "cause": cause, "ended": time.time()})


def update_job(out: Path, **fields: Any) -> None:
    with locked(out):
        job = read_job(out)
        if job["state"] in TERMINAL:
            fields.pop("state", None)
        JOB.write(out / JOB_FILE, {**job, **fields})


def locked(out: Path) -> FileLock:
    return FileLock(Path(out) / LOCK_FILE)


def is_job_file(name: str) -> bool:
    """Whether a file of a directory is one the job machinery writes there (its record, log and lock)."""
    return name in (JOB_FILE, LOG_FILE) or name.startswith(".job.")  # .job.json.* while job.json is replaced
