"""Fault injection for tests of failure handling and resume: MESHPILOT_FAULT="rank=1,step=3,kind=crash".

kind is `crash` (an exception), `exit` (the process dies without a Python traceback), `hang` (sleeps), `oom`
(a real allocation failure: asks the allocator for more memory than any machine has) or `kill` (SIGKILL of the
launcher's whole process group, as `kill -9 -- -PGID` from a scheduler would, at the start of the step; the rank
itself, in a session of its own, is not in that group and waits for its lifeline) or `preempt` (waits until the
rank has received a preemption signal, trainer.host.preemption: a test sends it once the rank's log says it waits,
and the step then ends as usual). `run=NAME` limits a fault
to the run directory called NAME, and several faults are separated by `;`, so one sweep can give each of its
trials another fault: "run=t000,step=2,kind=crash;run=t001,step=2,kind=oom".
Read only from the environment, so no experiment file can turn it on by accident.
"""

from __future__ import annotations

import logging
import os
import signal
import time

import psutil

from trainer.host import preemption

ENV = "MESHPILOT_FAULT"
_TOO_MANY_BYTES = 2**62  # beyond any address space: fails at once, whatever the machine's overcommit policy


def maybe_inject(rank: int, step: int, run: str = "") -> None:
    for spec in filter(None, os.environ.get(ENV, "").split(";")):
        fields = dict(part.split("=", 1) for part in spec.split(","))
        if int(fields.get("rank", 0)) != rank or int(fields.get("step", 1)) != step:
            continue
        if fields.get("run", run) != run:
            continue
        kind = fields.get("kind", "crash")
        if kind == "crash":
            raise RuntimeError(f"injected fault on rank {rank} at step {step}")
        if kind == "exit":
            os._exit(13)
        if kind == "hang":
            time.sleep(3600)
        if kind == "oom":
            # torch only for the oom fault (the launcher reads faults without it)
            import torch

            torch.empty(_TOO_MANY_BYTES, dtype=torch.uint8)
        if kind == "kill":
            _kill_launcher_group()
        if kind == "preempt":
            _wait_for_preemption(rank, step)


def _wait_for_preemption(rank: int, step: int) -> None:
    """Log that the rank waits (rank 0's log.txt: what a test waits for before it sends the signal), then wait."""
    logging.getLogger("meshpilot.faults").info("rank %d waits for a preemption signal at step %d", rank, step)
    while not preemption.requested():
        time.sleep(0.01)


def _kill_launcher_group() -> None:
    """SIGKILL the process group of the launcher (this rank's grandparent: launcher -> torchrun -> rank).

    Only when the launcher leads its group, as a command started from a shell or a scheduler does: a launcher in
    its caller's group (a test runner's) would take the caller down with it.
    """
    launcher = psutil.Process(os.getppid()).ppid()
    group = os.getpgid(launcher)
    if group != launcher:
        raise RuntimeError(f"fault kind=kill: the launcher (pid {launcher}) does not lead its process group")
    os.killpg(group, signal.SIGKILL)
    time.sleep(3600)  # killed by the lifeline when torchrun dies; if it never comes, the test sees a survivor
