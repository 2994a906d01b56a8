"""A sweep's trials started from a process that imported torch and transformers once (trainer.host.preload).

A job's supervisor spawned as a fresh interpreter (`python -m agent.jobs`) runs its launcher as another one: each
trial of a sweep paid some 4.5 s of CPU in imports before its first step, most of a small trial's time. A process
about to start many jobs (a sweep's local executor) starts a forkserver instead (`start`): a process that imports
them once, beside the caller's work, and forks each job's supervisor (`spawn`), which forks its launcher in turn
(agent.jobs.supervisor). The sweep ends it with itself (`stop`), its trials ended: it holds a model's worth of
imports in memory.

The lifetimes are those of spawned supervisors: the forkserver dies with its caller; a supervisor leads a session
of its own and, where the caller's would be (a job started from inside another: a sweep job's trial), is tied to the
forkserver, so that it dies with the caller too; its launcher dies with it (trainer.host.lifeline). A supervisor
that is not tied outlives the forkserver, as a spawned one outlives its caller.
Each forked supervisor shows its job's variables in /proc/PID/environ (trainer.host.preload.show_environ), so
stopping a job finds its forked processes as it finds spawned ones.

Where a child would not behave as a fresh interpreter (a CUDA build of torch, a job environment that changes what
the imports read), `spawn` says so (None) and the caller spawns the supervisor as before.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from functools import partial
from multiprocessing.connection import Connection
from pathlib import Path

from agent.jobs.processes import MARKER, OWNERS
from agent.jobs.record import LOG_FILE
from agent.jobs.supervisor import REPO, process_env, supervise
from trainer.host.lifeline import tie_to_parent, tied_env
from trainer.host.preload import preload, run_and_exit, same_imports, show_environ, take_over, with_room
from trainer.launch.torchrun import can_fork

OFF_ENV = "MESHPILOT_FORKSERVER"
# Set by the forked children's threads count (OMP_NUM_THREADS, per job): torchrun's agent, forked by the launcher,
# applies it to torch before the ranks start (trainer.launch.torchrun), so it need not match the preloaded import's.
_APPLIED_AFTER_FORK = ("OMP_NUM_THREADS",)


def start() -> None:
    """Start this process's forkserver, where none is running: its imports begin at once, beside the caller's work.
    A caller about to start many jobs (a sweep's local executor) calls this; `spawn` is used where it did.
    MESHPILOT_FORKSERVER=0 turns it off (every job spawned, as bench/sweep_start.py compares)."""
    global _server
    if _server is None and sys.platform == "linux" and os.environ.get(OFF_ENV) != "0":
        _server = _Forkserver()


def stop() -> None:
    """End this process's forkserver, where one runs: the supervisors tied to it end with it, the others go on."""
    global _server
    if _server is not None:
        _server.stop()
        _server = None


def spawn(out: Path, token: str, env: dict[str, str], tied: bool) -> int | None:
    """Fork the supervisor of the job written in `out` (its token, its environment `env`; `tied`: it dies with this
    process, else it outlives it) from this process's forkserver; its pid, or None where it must be spawned instead:
    no forkserver was started, or a child would not behave as a fresh interpreter (see the module docstring)."""
    return None if _server is None else _server.spawn(out, token, env, tied)


class _Forkserver:
    """The client side: the forkserver, tied to this process, asked for one supervisor at a time."""

    def __init__(self) -> None:
        self.env = {"OPENBLAS_NUM_THREADS": "1", **process_env({})}  # the variable as preload() sets it
        ours, theirs = socket.socketpair()
        self._process = subprocess.Popen(
            [sys.executable, "-c", f"import agent.jobs.forkserver as f; f.main({theirs.fileno()})"],
            cwd=REPO,
            env=with_room(tied_env(self.env)),  # dies with this process; room for its children's environments
            stdin=subprocess.DEVNULL,
            pass_fds=[theirs.fileno()],
        )
        theirs.close()
        self._connection = Connection(ours.detach())
        self._lock = threading.Lock()
        self._forkable: bool | None = None  # the forkserver's first message, once its imports are done

    def spawn(self, out: Path, token: str, env: dict[str, str], tied: bool) -> int | None:
        unapplied = {key: value for key, value in env.items() if key not in _APPLIED_AFTER_FORK}
        if not same_imports({"OPENBLAS_NUM_THREADS": "1", **unapplied}, self.env):
            return None
        with self._lock:
            if not self._ready():
                return None
            try:
                self._connection.send((str(out), token, env, tied))
                return int(self._connection.recv())
            except (EOFError, OSError):  # the forkserver is gone (killed): spawn from now on
                self._forkable = False
                return None

    def ready(self) -> bool:
        """Whether the forkserver forks supervisors, once its imports are done (waits for them)."""
        with self._lock:
            return self._ready()

    def _ready(self) -> bool:
        if self._forkable is None:
            try:
                self._forkable = bool(self._connection.recv())
            except (EOFError, OSError):  # it died before answering
                self._forkable = False
        return self._forkable

    @property
    def pid(self) -> int:
        return self._process.pid

    def stop(self) -> None:
        self._connection.close()
        self._process.kill()  # nothing of its own to finish; it may still be importing
        self._process.wait()


_server: _Forkserver | None = None


def _serve(connection: Connection) -> None:
    """The forkserver: say whether its children can be used, then fork a supervisor per request and answer its pid."""
    preload()
    forkable = can_fork()  # the children use what they inherit only where torchrun's agent would be forked too
    connection.send(forkable)
    if not forkable:
        return
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the supervisors are reaped by the kernel: nobody here waits
    while True:
        try:
            out, token, env, tied = connection.recv()
        except EOFError:  # the caller has gone
            return
        if tied:  # to this forkserver, which is tied to the caller (its pid, so named before the fork)
            env = tied_env(env)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            connection.close()
            run_and_exit(partial(_supervisor, Path(out), token, env))
        connection.send(pid)


def _supervisor(out: Path, token: str, env: dict[str, str]) -> None:
    """In the forked child (run_and_exit's body): `python -m agent.jobs OUT TOKEN` run in `env`."""
    os.setsid()  # survives a terminal's Ctrl-C, as a spawned supervisor does
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # its launcher is waited for
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as a fresh interpreter's (main ignores it)
    devnull = os.open(os.devnull, os.O_RDONLY)
    log = os.open(out / LOG_FILE, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    for fd, target in ((0, devnull), (1, log), (2, log)):
        os.dup2(target, fd)
    os.close(devnull)
    os.close(log)
    take_over(env, REPO)
    show_environ(env, first=tuple(key for key in (MARKER, OWNERS) if key in env))
    tie_to_parent()
    supervise(out, token=token, fork_launcher=True)


def main(fd: int) -> None:
    """The forkserver's process (`_Forkserver` starts it), serving on the connection `fd`."""
    # A Ctrl-C typed at a hand sweep reaches its whole process group, this process too: the sweep ends it (its
    # connection closes, or the tie to its caller), not the key, which would only print a KeyboardInterrupt here.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    tie_to_parent()
    _serve(Connection(fd))
