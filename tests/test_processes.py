"""agent.jobs's process inspection: how a job's processes are found, and a live pid told from a dead or reused one."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from agent.jobs import MARKER, job_processes, process_alive, start_time


@pytest.fixture
def sleepers() -> Iterator[list[subprocess.Popen]]:
    started: list[subprocess.Popen] = []
    yield started
    for process in started:
        process.kill()
        process.wait()


def test_a_live_process_is_alive_and_a_reused_pid_is_not():
    start = start_time(os.getpid())
    assert isinstance(start, float)
    assert process_alive(os.getpid(), start)
    assert process_alive(os.getpid(), None)
    assert not process_alive(os.getpid(), start + 1.0)  # a later process that got the same pid


@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="clock ticks in /proc: Linux")
def test_a_start_time_recorded_in_clock_ticks_still_counts():
    """job.json written before psutil held the start time in clock ticks since boot."""
    ticks = int(Path(f"/proc/{os.getpid()}/stat").read_text().rsplit(")", 1)[1].split()[19])
    assert process_alive(os.getpid(), ticks)
    assert not process_alive(os.getpid(), ticks + 100)


def test_a_zombie_and_a_reaped_process_are_not_alive():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        deadline = time.monotonic() + 30
        while psutil.Process(child.pid).status() != psutil.STATUS_ZOMBIE:  # exited, not reaped: no wait() yet
            assert time.monotonic() < deadline, "the child did not exit"
            time.sleep(0.02)
        assert not process_alive(child.pid, None)
    finally:
        child.wait()
    assert not process_alive(child.pid, None)
    assert start_time(child.pid) is None


def test_job_processes_finds_the_processes_that_carry_the_marker(sleepers):
    token = uuid.uuid4().hex
    command = [sys.executable, "-c", "import time; time.sleep(60)"]
    marked = subprocess.Popen(command, env={**os.environ, MARKER: token})
    other = subprocess.Popen(command, env={**os.environ, MARKER: uuid.uuid4().hex})
    unmarked = subprocess.Popen(command, env={k: v for k, v in os.environ.items() if k != MARKER})
    sleepers += [marked, other, unmarked]
    assert job_processes(token) == [marked.pid]
