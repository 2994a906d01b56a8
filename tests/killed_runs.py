"""Helpers for tests that kill runs: start `meshpilot train` as a shell would, find every process of the run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from support import REPO

from agent.jobs import MARKER, job_processes
from trainer.rank.faults import ENV as FAULT


def start_train(experiment: Path, out: Path, *args: str, fault: str | None = None) -> tuple[subprocess.Popen, str]:
    """`meshpilot train` leading a process group of its own (as a shell starts a command), and the token that every
    process of the run inherits in its environment (agent.jobs.MARKER), which finds them wherever they went."""
    token = uuid.uuid4().hex
    env = {**os.environ, MARKER: token, **({FAULT: fault} if fault else {})}
    process = subprocess.Popen(
        [sys.executable, "-m", "agent.cli", "train", str(experiment), "--out", str(out), *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    return process, token


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float = 300) -> None:
    """Poll `condition` (state, not time) until it holds; the bound only turns a hang into a failure."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"still waiting for {what} after {timeout_s}s"
        time.sleep(0.1)


def survivors(token: str, timeout_s: float = 30) -> list[int]:
    """The processes of the run still alive once `timeout_s` passed, or [] as soon as none is left."""
    deadline = time.monotonic() + timeout_s
    while (left := job_processes(token)) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in left:  # leave nothing running for the next test, whatever this one asserts
        os.kill(pid, signal.SIGKILL)
    return left
