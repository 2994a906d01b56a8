"""Fault injection for tests of failure handling and resume: MESHPILOT_FAULT="rank=1,step=3,kind=crash".

kind is `crash` (an exception), `exit` (the process dies without a Python traceback), `hang` (sleeps) or `oom`
(a real allocation failure: asks the allocator for more memory than any machine has). `run=NAME` limits a fault
to the run directory called NAME, and several faults are separated by `;`, so one sweep can give each of its
trials another fault: "run=t000,step=2,kind=crash;run=t001,step=2,kind=oom".
Read only from the environment, so no experiment file can turn it on by accident.
"""

from __future__ import annotations

import os
import time

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
            import torch

            torch.empty(_TOO_MANY_BYTES, dtype=torch.uint8)
