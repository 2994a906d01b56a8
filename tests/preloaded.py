"""A `meshpilot train` (or `export`, or `plan`) for the tests that starts with torch and transformers already imported.

Most of a tiny test run's cost is its launcher importing torch, transformers and Llama's modelling code: about
3.5 s of CPU, paid by some 150 launches a session on two cores. Each xdist worker therefore keeps one process that
has imported them (`python -m tests.preloaded`), and `support.meshpilot("train", ...)` asks it to fork a launcher
that runs `meshpilot train` exactly as the command line does (`agent.cli.main`), with the request's arguments,
environment and working directory, its output into files read back as a CompletedProcess's.

Only the third-party modules are preloaded (and meshpilot's two light modules this one imports, which read nothing at
import): meshpilot's own are imported by each launcher, so whatever they read from the environment at import time
comes from the request. A request goes to a fresh interpreter instead where
preloading could change what it does:
- another command than `train`, `export` or `plan` (a sweep, a demo or the chat start processes of their own anyway;
  an export, which loads a checkpoint into a transformers model in its own process, and a plan, which prices layouts
  in its own, are mostly those imports);
- an environment that differs from the preloaded process's in a variable read when those modules are imported
  (trainer.host.preload.IMPORT_TIME_PREFIXES: Hugging Face, torch, thread pools, Python itself);
- a launcher tied to a parent (trainer.host.lifeline): its parent would be this process, not the test;
- any request, where the preloaded imports initialised CUDA (torchao, which transformers imports where it is
  installed, asks the GPU's compute capability at import): a forked child cannot use CUDA then ("Cannot
  re-initialize CUDA in forked subprocess"), so every launch runs in a fresh interpreter instead.
Tests of the command line's processes (signals, process groups, lifelines) start it with subprocess themselves.
MESHPILOT_TEST_PRELOAD=0 turns preloading off.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from functools import partial
from multiprocessing.connection import Connection
from pathlib import Path

# Light (the standard library alone). What the product's forkserver (agent.jobs.forkserver) preloads is what this
# process preloads.
from trainer.host.lifeline import PARENT_ENV
from trainer.host.preload import preload, run_and_exit, same_imports, take_over

REPO = Path(__file__).resolve().parents[1]
COMMANDS = ("train", "export", "plan")  # the commands served (see the module docstring)
# numpy's BLAS thread count (OPENBLAS_NUM_THREADS, read when numpy is imported) changes only numpy's linear algebra.
# These commands set the preloaded process's count themselves (`meshpilot train`, in trainer.cli, before importing
# numpy) or do none (an export); a plan fits its calibration by least squares, so it is forked only where its request
# names the preloaded count (support.meshpilot's plans do, forked or fresh).
BLAS_FREE = ("train", "export")


def serves(args: tuple[str, ...], env: dict[str, str]) -> bool:
    """Whether a preloaded launcher runs `meshpilot ARGS` in `env` exactly as a fresh interpreter would."""
    if os.environ.get("MESHPILOT_TEST_PRELOAD") == "0" or args[:1] not in [(c,) for c in COMMANDS] or PARENT_ENV in env:
        return False
    if not _launcher().children_can_use_cuda:
        return False
    if args[0] in BLAS_FREE:
        env = {"OPENBLAS_NUM_THREADS": "1", **env}
    return same_imports(env, _launcher().env)


def run(args: tuple[str, ...], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    """`meshpilot ARGS` forked from this worker's preloaded process, as `subprocess.run(..., capture_output=True,
    text=True, timeout=timeout)` would give it."""
    return _launcher().run(args, env, timeout)


class _Preloaded:
    """The client side: one preloaded process per test process, started on first use, asked one run at a time."""

    def __init__(self) -> None:
        self.env = {"OPENBLAS_NUM_THREADS": "1", **os.environ}
        ours, theirs = socket.socketpair()
        self._process = subprocess.Popen(
            [sys.executable, "-m", "tests.preloaded", str(theirs.fileno())],
            cwd=REPO,
            env={**self.env, PARENT_ENV: str(os.getpid())},  # dies with this test process
            pass_fds=[theirs.fileno()],
        )
        theirs.close()
        self._connection = Connection(ours.detach())
        self._lock = threading.Lock()
        self._children_can_use_cuda: bool | None = None

    @property
    def children_can_use_cuda(self) -> bool:
        """Whether a child forked from the preloaded process can still use CUDA: its first message, once its
        imports are done (`_serve`)."""
        if self._children_can_use_cuda is None:
            with self._lock:
                self._children_can_use_cuda = bool(self._connection.recv())
        return self._children_can_use_cuda

    def run(self, args: tuple[str, ...], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
        _ = self.children_can_use_cuda  # the preloaded process's first message, before any request's answers
        with self._lock, tempfile.TemporaryDirectory(prefix="meshpilot-preloaded-") as scratch:
            out, err = Path(scratch, "stdout"), Path(scratch, "stderr")
            self._connection.send((list(args), env, str(REPO), str(out), str(err)))
            pid = self._connection.recv()
            timed_out = not self._connection.poll(timeout)
            if timed_out:
                import hung  # here: the preloaded process itself does not have tests/ on its path

                where = hung.stacks(pid)
                os.kill(pid, signal.SIGKILL)
            code = self._connection.recv()
            result = subprocess.CompletedProcess(["meshpilot", *args], code, out.read_text(), err.read_text())
        if timed_out:
            raise hung.Hung(result.args, timeout, result.stdout, result.stderr, where)
        return result


_instance: _Preloaded | None = None


def _launcher() -> _Preloaded:
    global _instance
    if _instance is None:
        _instance = _Preloaded()
    return _instance


def _serve(fd: int) -> None:
    """The preloaded process: say whether its children can use CUDA, then fork a launcher per request, answer its
    pid, then its exit code."""
    import torch  # preloaded already

    connection = Connection(fd)
    connection.send(not torch.cuda.is_initialized())
    while True:
        try:
            args, env, cwd, out, err = connection.recv()
        except EOFError:  # the test process has gone
            return
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            connection.close()
            run_and_exit(partial(_launch, args, env, cwd, out, err))
        connection.send(pid)
        _, status = os.waitpid(pid, 0)
        connection.send(os.waitstatus_to_exitcode(status))


def _launch(args: list[str], env: dict[str, str], cwd: str, out: str, err: str) -> int:
    """In the forked launcher (run_and_exit's body): `python -m agent.cli ARGS` run from `cwd` in `env`."""
    for fd, path in ((1, out), (2, err)):
        file = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(file, fd)
        os.close(file)
    take_over(env, cwd)
    sys.argv = [str(REPO / "agent" / "cli.py"), *args]
    sys.path[0] = cwd  # as `python -m` from `cwd` has it
    from agent.cli import main

    return main(args)


if __name__ == "__main__":
    from trainer.host.lifeline import tie_to_parent

    tie_to_parent()  # before the imports, which take seconds
    preload()
    _serve(int(sys.argv[1]))
