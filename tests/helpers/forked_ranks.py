"""Ranks forked from one fresh interpreter, for the tests' own multi-process programs:
- `run(fn, nprocs, *args)`: fn(rank, *args) in each rank, as `torch.multiprocessing.spawn(fn, args, nprocs)` runs it;
- `run_script(script, nprocs, *args)`: SCRIPT as `torchrun --standalone --nproc-per-node NPROCS SCRIPT ARGS` runs it
  on CPU (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT set; the script's
  `init_process_group("gloo")` meets the others through rank 0's store). Its work must be under
  `if __name__ == "__main__":`, as the tests' rank programs have it: its top level is run once to import.

spawn and torchrun start every rank as a fresh interpreter that imports torch, transformers, the trainer and the test
code again: about 4 s of CPU per rank (and torchrun's agent another interpreter), most of such a test's cost.
Forking the ranks from the test process instead is not safe: it has threads of its own (xdist's, pytest-timeout's)
and may have run OpenMP work already. So one fresh interpreter (`python -m helpers.forked_ranks`) imports what the
ranks need once (the function's module; the script's top level, not its main block) and forks the ranks before it has
run any torch operation or started a thread, which is what makes trainer.launch.torchrun's forked ranks safe (its
docstring says why). A rank forked this way ends without the interpreter's teardown, as the trainer's do.

A rank's exception ends the run with its traceback and the other ranks are stopped; the test fails with what the
interpreter printed. A run that hangs is killed after `timeout` seconds with every process's stacks (tests/hung.py).
CPU only: where a GPU is used, importing transformers has already asked torch about the devices, after which CUDA
cannot be used in a forked child.
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
    _helper([fn.__module__, fn.__name__, str(nprocs), json.dumps(args)], None, timeout, f"{fn.__name__} x{nprocs}")


def run_script(script: Path, nprocs: int, *args: str, env: dict[str, str] | None = None, timeout: float = 300) -> None:
    """`torchrun --standalone --nproc-per-node NPROCS SCRIPT ARGS` on CPU, in `env`, its ranks forked."""
    _helper(["--script", str(script), str(nprocs), *args], env, timeout, f"{Path(script).name} x{nprocs}")


def _helper(argv: list[str], env: dict[str, str] | None, timeout: float, name: str) -> None:
    command = [sys.executable, "-m", "helpers.forked_ranks", *argv]
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), str(REPO / "tests"), env.get("PYTHONPATH", "")]))
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
    assert process.returncode == 0, f"{name} exited {process.returncode}:\n{said}"


def _run_function(module: str, name: str, nprocs: int, args: list) -> None:
    import torch.multiprocessing as mp

    fn = getattr(importlib.import_module(module), name)
    mp.start_processes(fn, args=tuple(args), nprocs=nprocs, join=True, start_method="fork")


def _run_script(script: str, nprocs: int, args: list[str]) -> int:
    import runpy
    import socket

    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))  # as `python SCRIPT` has it
    runpy.run_path(script, run_name="__preloaded__")  # its imports, once: the main block is not run
    with socket.socket() as probe:  # a free port for rank 0's store, as torchrun --standalone picks one
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    ranks = {}
    for rank in range(nprocs):
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), GROUP_RANK="0", WORLD_SIZE=str(nprocs))
            os.environ.update(LOCAL_WORLD_SIZE=str(nprocs), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
            os._exit(_rank_main(script, args))
        ranks[pid] = rank
    failed = []
    while ranks:
        pid, status = os.wait()
        code = os.waitstatus_to_exitcode(status)
        if code != 0 and not failed:
            failed.append(f"rank {ranks[pid]} exited with {code}")
            for other in set(ranks) - {pid}:
                os.kill(other, signal.SIGTERM)
        del ranks[pid]
    if failed:
        print(f"forked_ranks: {script}: {failed[0]}", file=sys.stderr)
        return 1
    return 0


def _rank_main(script: str, args: list[str]) -> int:
    import runpy
    import traceback

    sys.argv = [script, *args]
    code = 0
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exit:
        code = exit.code if isinstance(exit.code, int) else int(exit.code is not None)
    except BaseException:
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    return code


if __name__ == "__main__":
    if sys.argv[1] == "--script":
        sys.exit(_run_script(sys.argv[2], int(sys.argv[3]), sys.argv[4:]))
    _run_function(sys.argv[1], sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4]))
