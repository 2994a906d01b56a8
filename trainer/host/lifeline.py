"""Every process of a run dies with the process that started it (Linux: PR_SET_PDEATHSIG).

SIGKILL of the launcher alone (`kill -9 PID` of a foreground command, the OOM killer) reaches no other process:
torchrun's agent and the ranks would train on without anyone to stop them, writing checkpoints into a
directory that a `--resume` may already be training in. So every link of the chain is tied to the one before it:

    job supervisor (agent.jobs, detached on purpose) -> launcher (`meshpilot train`)
        -> torchrun's agent (`meshpilot:agent`: forked from the launcher, or `python -m trainer.launch.torchrun ...`)
        -> ranks (forked by it, named `meshpilot:rN`)

A parent that starts a tied child names itself in the child's environment (`PARENT_ENV`); the child asks the
kernel for SIGKILL when its parent dies, then checks that its parent is still the one named: a parent that
died before the request took effect would otherwise go unnoticed. A process started without the variable (a
`meshpilot train` typed into a shell) is tied to nothing.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PARENT_ENV = "MESHPILOT_PARENT_PID"
_PR_SET_NAME, _PR_SET_PDEATHSIG = 15, 1  # <linux/prctl.h>


def tie_to_parent() -> None:
    """Die (SIGKILL) when the parent named in the environment dies, or at once if it already has.

    The variable is consumed: this process's own children are tied only where it names itself (`tied_env`).
    """
    expected = os.environ.pop(PARENT_ENV, None)
    if expected is None:
        return
    if sys.platform == "linux":
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != int(expected):  # orphaned before the kernel was asked: nobody would stop this process
        os.kill(os.getpid(), signal.SIGKILL)


def tied_env(env: dict[str, str]) -> dict[str, str]:
    """`env` for a child that must die with this process (it calls `tie_to_parent` first thing)."""
    return {**env, PARENT_ENV: str(os.getpid())}


def name_process(name: str) -> None:
    """Show this process as `name` (15 bytes at most) in ps, top and psutil's name(): forked ranks share their
    agent's command line, so the name is what tells them apart."""
    if sys.platform == "linux":
        ctypes.CDLL(None).prctl(_PR_SET_NAME, name.encode()[:15], 0, 0, 0)
