"""What a test reports when a process it started hangs: the Python stack of every thread of that process and of
each of its descendants (py-spy, native frames included), taken before the process is killed.

A hang that shows on a loaded CI machine once in many sessions cannot be rerun on demand; its stacks are the only
evidence it leaves, since CI keeps no run directories.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import psutil

PY_SPY = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))


class Hung(subprocess.TimeoutExpired):
    """subprocess.TimeoutExpired, whose message carries the stacks the hung processes were in."""

    def __init__(self, cmd, timeout: float, output: str, stderr: str, stacks: str):
        super().__init__(cmd, timeout, output, stderr)
        self.stacks = stacks

    def __str__(self) -> str:
        return f"{super().__str__()}\n--- stderr (end) ---\n{(self.stderr or '')[-3000:]}\n{self.stacks}"


def stacks(pid: int) -> str:
    """Every thread's stack of `pid` and of its descendants, one block per process; what could not be read says so."""
    try:
        processes = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return f"--- process {pid} had already gone ---"
    return "\n".join(_stack(process) for process in processes)


def _stack(process: psutil.Process) -> str:
    try:
        title = f"--- process {process.pid} ({process.name()}): {' '.join(process.cmdline())[:200]} ---"
        dump = subprocess.run([PY_SPY, "dump", "--native", "--pid", str(process.pid)], capture_output=True, text=True,
                              timeout=60)  # fmt: skip
        return f"{title}\n{dump.stdout}{dump.stderr}"
    except (psutil.Error, OSError, subprocess.TimeoutExpired) as error:
        return f"--- process {process.pid}: no stack ({error}) ---"
