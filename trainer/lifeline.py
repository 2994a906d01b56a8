"""Every process of a run dies with the process that started it (Linux: PR_SET_PDEATHSIG).

torchrun starts each rank in a session of its own, so SIGKILL of the launcher's process group (a scheduler's
`kill -9 -- -PGID`, the OOM killer) misses the ranks, and they would train on without anyone to stop them,
writing checkpoints into a directory that a `--resume` may already be training in. So every link of the
chain is tied to the one before it:

    job supervisor (agent.jobs, detached on purpose) -> launcher (`meshpilot train`)
        -> torchrun's agent (`python -m trainer.lifeline ...`) -> ranks (`python -m trainer.worker`)

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
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


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


if __name__ == "__main__":  # torchrun, tied to the launcher: `python -m trainer.lifeline TORCHRUN_ARGS...`
    tie_to_parent()
    os.environ.update(tied_env({}))  # the ranks torchrun starts inherit its environment: tied to it in turn
    from torch.distributed.run import main

    main(sys.argv[1:])  # a failed rank raises here: torchrun's failure report and exit code stay its own
    # Every rank ended well: skip the interpreter's teardown (torch's modules and destructors), which the launcher
    # would wait for.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
