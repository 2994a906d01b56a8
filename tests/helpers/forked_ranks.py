"""`run(fn, nprocs, *args)`: a test's rank function in `nprocs` processes, as `torch.multiprocessing.spawn(fn,
args, nprocs)` runs it (fn(rank, *args) in each), but forked from one fresh interpreter.

spawn starts every rank as a fresh interpreter that imports torch, transformers and the test's module again: about
4 s of CPU per rank, most of such a test's cost. Forking the ranks from the test process instead is not safe: it has
threads of its own (xdist's, pytest-timeout's) and may have run OpenMP work already. So one fresh interpreter
(`python -m helpers.forked_ranks`) imports the function's module once, and forks the ranks before it has run any
torch operation or started a thread, which is what makes trainer.launch.torchrun's forked ranks safe (its docstring
says why). The ranks reach each other through the FileStore the tests give them, not through a server of the
parent's. A rank's exception ends the run with its traceback (torch's ProcessRaisedException), the others are
stopped, and the test fails with what the interpreter printed; a run that hangs is killed with its stacks reported
(tests/hung.py).
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run(fn: Callable[..., None], nprocs: int, *args: object, timeout: float = 900) -> None:
    """fn(rank, *args) in ranks 0..nprocs-1 forked from a fresh interpreter; args must be JSON values."""
    command = [sys.executable, "-m", "helpers.forked_ranks", fn.__module__, fn.__name__, str(nprocs), json.dumps(args)]
    path = [str(REPO), str(REPO / "tests"), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, path))}
    with subprocess.Popen(
        command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    ) as process:
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            import hung

            where = hung.stacks(process.pid)
            os.killpg(process.pid, signal.SIGKILL)  # the ranks too: they are in its session
            raise hung.Hung(command, timeout, *process.communicate(), where) from None
    said = f"{stdout[-2000:]}{stderr[-6000:]}"
    assert process.returncode == 0, f"{fn.__name__} x{nprocs} exited {process.returncode}:\n{said}"


def _main(module: str, name: str, nprocs: int, args: list) -> None:
    import torch.multiprocessing as mp

    fn = getattr(importlib.import_module(module), name)
    mp.start_processes(fn, args=tuple(args), nprocs=nprocs, join=True, start_method="fork")


if __name__ == "__main__":
    _main(sys.argv[1], sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4]))
