"""Fault injection for tests of failure handling and resume: MESHPILOT_FAULT="rank=1,step=3,kind=crash".

kind is `crash` (an exception), `exit` (the process dies without a Python traceback) or `hang` (sleeps).
Read only from the environment, so no experiment file can turn it on by accident.
"""

from __future__ import annotations

import os
import time

ENV = "MESHPILOT_FAULT"


def maybe_inject(rank: int, step: int) -> None:
    spec = os.environ.get(ENV)
    if not spec:
        return
    fields = dict(part.split("=", 1) for part in spec.split(","))
    if int(fields.get("rank", 0)) != rank or int(fields.get("step", 1)) != step:
        return
    kind = fields.get("kind", "crash")
    if kind == "crash":
        raise RuntimeError(f"injected fault on rank {rank} at step {step}")
    if kind == "exit":
        os._exit(13)
    if kind == "hang":
        time.sleep(3600)
