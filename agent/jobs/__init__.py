"""A training run or a sweep as a background job: `start_run` and `start_sweep` return at once, the logs and results
land on disk, and a tiny supervisor process watches the run.

The modules, each importing only those above it in this list:

- processes: finding a job's processes by the variable they inherit, and telling a live pid from a reused one;
- record: job.json, the job's record (JobRecord, JOB), read and updated under a file lock;
- status: a job's state as every reader sees it (run_status), waiting for a job and cancelling it;
- supervisor: the process that runs a job's `meshpilot train` (or `sweep`) and watches it (`python -m agent.jobs`);
- forkserver: a process that imported the launcher's modules once and forks supervisors (a sweep's trials);
- start: checking a request, writing its record and spawning its supervisor (start_run, start_sweep).

This package gathers what the rest of meshpilot calls; the modules import one another, never this package.
"""

from agent.jobs.forkserver import start as start_forkserver
from agent.jobs.forkserver import stop as stop_forkserver
from agent.jobs.processes import MARKER, job_processes, kill_job_processes, kill_process, process_alive, start_time
from agent.jobs.record import (
    JOB,
    JOB_FILE,
    KILLED,
    LOG_FILE,
    SWEEP,
    TERMINAL,
    JobRecord,
    is_job_file,
    read_job,
    record_state,
    update_job,
)
from agent.jobs.start import (
    prepare_job,
    recorded_launch,
    resumable_job,
    resume_checkpoint,
    resume_job,
    start_run,
    start_sweep,
)
from agent.jobs.status import cancel_run, run_status, wait_run
from agent.jobs.supervisor import REPO, supervise

__all__ = [
    "JOB",
    "JOB_FILE",
    "KILLED",
    "LOG_FILE",
    "MARKER",
    "REPO",
    "SWEEP",
    "TERMINAL",
    "JobRecord",
    "cancel_run",
    "is_job_file",
    "job_processes",
    "kill_job_processes",
    "kill_process",
    "prepare_job",
    "process_alive",
    "read_job",
    "record_state",
    "recorded_launch",
    "resumable_job",
    "resume_checkpoint",
    "resume_job",
    "run_status",
    "start_forkserver",
    "start_run",
    "start_sweep",
    "start_time",
    "stop_forkserver",
    "supervise",
    "update_job",
    "wait_run",
]
