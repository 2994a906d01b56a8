"""The processes of a job, through psutil: every process of a job inherits an environment variable naming the job
(MESHPILOT_JOB), and those of a job started from inside another also the outer job's token (MESHPILOT_OWNERS), so
stopping a job finds and kills every process that carries it, whatever its session or parent (a process may leave
the job's process group: a session of its own, a reparented orphan). A pid is told from a reused one by its start
time."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import time
from typing import Any

import psutil

MARKER = "MESHPILOT_JOB"  # inherited by every process of a job: how a job's processes are found
OWNERS = "MESHPILOT_OWNERS"  # the tokens of the jobs a job was started from, comma-separated (a trial's sweep)


def job_processes(token: str) -> list[int]:
    """Pids of the live processes that carry this job's marker, or name it among their owners (a sweep's trials; a
    process whose environment cannot be read, another user's or a zombie, is not one of them)."""
    processes = psutil.process_iter(["environ"])  # environ None where psutil may not read it
    return [p.pid for p in processes if _of_job(p.info["environ"] or {}, token)]


def _of_job(environ: dict[str, str], token: str) -> bool:
    return environ.get(MARKER) == token or token in environ.get(OWNERS, "").split(",")


def kill_job_processes(token: str) -> None:
    """SIGKILL every process of the job but the caller (the supervisor carries the marker too); repeat until none
    is left, as a dying parent may have just spawned one."""
    for _ in range(100):
        pids = [p for p in job_processes(token) if p != os.getpid()]
        if not pids:
            return
        for pid in pids:
            send_signal(pid, signal.SIGKILL)
        time.sleep(0.05)


def kill_process(pid: int) -> None:
    send_signal(pid, signal.SIGKILL)


def send_signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def enclosing_jobs() -> list[str]:
    """The tokens of the jobs this process belongs to, outermost first; none outside every job."""
    if MARKER not in os.environ:
        return []
    return [*filter(None, os.environ.get(OWNERS, "").split(",")), os.environ[MARKER]]


def identity() -> dict[str, Any]:
    pid = os.getpid()
    return {"pid": pid, "pgid": os.getpgid(pid), "host": socket.gethostname(), "pid_start": start_time(pid)}


def start_time(pid: int) -> float | None:
    """When the process started, in seconds since boot: tells a live pid from a reused one. Creation time minus
    boot time rather than psutil's create_time() alone, which moves when the system clock is set (NTP, a resumed
    VM): a supervisor that looked dead because of it would get its running job recorded as killed."""
    try:
        return _since_boot(pid)
    except psutil.Error:
        return None


def process_alive(pid: int, start: float | None) -> bool:
    """Whether `pid` is running (not a zombie) and, when `start` (start_time's value) is given, is the process that
    started then, not a later one that reuses its pid."""
    try:
        if psutil.Process(pid).status() in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD):
            return False
        return start is None or _since_boot(pid) == _seconds(start)
    except psutil.NoSuchProcess:  # ZombieProcess included
        return False
    except psutil.AccessDenied:  # it exists but cannot be inspected (another user's, outside Linux)
        return True


def _since_boot(pid: int) -> float:
    boot = psutil.boot_time()  # read first: older psutil computes create_time() from the boot time last read
    # Rounded to the 10 ms that /proc counts in, so that every reader gets the same value for the same process.
    return round(psutil.Process(pid).create_time() - boot, 2)


def _seconds(start: float) -> float:
    """An int is a start time in clock ticks since boot, as job.json and sweep records held before psutil: the same
    instant, so a job started by an older meshpilot is still told from a reused pid."""
    return round(start / os.sysconf("SC_CLK_TCK"), 2) if isinstance(start, int) else start
