"""torchrun's agent for one run, whose ranks are forked from it:
`python -m trainer.launch.torchrun TORCHRUN_ARGS RUN_DIR`, or forked from the launcher itself (`start`).

A rank started the usual way (`torchrun -m trainer.rank.worker`) is a fresh interpreter that spends about five seconds
of CPU importing torch, transformers and the model's code before its first step, once per rank. Here the agent
imports all of that once, then starts each rank with fork (torchrun's own function entrypoint, start method
"fork"): the ranks begin with everything imported. The rendezvous, the restart policy, the failure report and the
exit code are torchrun's, from its own parser and launcher.

The agent itself is forked from the launcher where that is safe, for the same reason: a fresh agent would import
again what the launcher already has (about 4.5 s of CPU per run, most of a small run's set-up). Safe means a torch
without CUDA and a launcher with a single thread: no lock held by another thread, no OpenMP or BLAS thread pool
half-inherited. Anywhere else (a CUDA machine, a launcher called inside a threaded program) the agent is a fresh
interpreter.

Forking the ranks needs care, because the agent is not single-threaded when it forks them: its TCPStore servers
(the rendezvous's and the one the ranks use) run threads of their own. When a client connects, such a thread looks
up the peer's name (getnameinfo), holding glibc's resolver lock meanwhile; a rank forked at that instant inherits
the lock held by a thread it does not have, and its first getaddrinfo waits forever (seen: three ranks waiting in
gloo's rendezvous for the fourth, stuck in __resolv_context_get). So a forked rank waits until the agent has forked
every rank of its node before it connects anywhere (`trainer.rank.worker.wait_for_local_ranks`): while the agent forks,
no client connects and its server threads sit idle in epoll. On several nodes another node's ranks connect to this
agent's store whenever they like, so there the ranks are spawned. The agent has run no OpenMP threads when it
forks either. Where a GPU is visible the ranks are spawned too, without the preload: importing transformers asks
torch about the devices, after which CUDA cannot be used in a forked child, and torch's optimizers touch CUDA even
for CPU tensors when a GPU is present (both seen on an H100: "Cannot re-initialize CUDA in forked subprocess",
"CUDA error: initialization error"). Beside GPU work the ranks' own imports cost little; CPU runs hide the GPUs
(trainer.host.environment.process_env), so they fork.
The chain of lifelines (trainer.host.lifeline) is the same either way: the agent is tied to the launcher, each rank to
the agent, and the ranks stay in the launcher's process group.
"""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import uuid
from typing import IO

from trainer.host import preemption
from trainer.host.lifeline import name_process, tie_to_parent, tied_env

AGENT_NAME = "meshpilot:agent"  # the agent's process name (ps, psutil), however it was started


def start(argv: list[str], env: dict[str, str], log: IO, closed: tuple[int, ...] = ()) -> Agent:
    """Start the agent with `argv` (its command line, the run directory last) in `env`, its output into `log`.

    Forked when `can_fork` says so; `closed` are file descriptors the forked agent must not keep (the run lock, which
    must die with the launcher alone)."""
    if not can_fork():
        command = [sys.executable, "-m", "trainer.launch.torchrun", *argv]
        return subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    sys.stdout.flush()
    sys.stderr.flush()
    process = multiprocessing.get_context("fork").Process(target=_forked, args=(argv, env, log.fileno(), closed))
    process.start()
    return Forked(process)


def can_fork() -> bool:
    """A torch built without CUDA (after cuInit a forked child cannot use CUDA, and a CUDA build's launcher may have
    asked about the devices), on Linux (where threads can be counted), from a process with one thread."""
    # torch: the launcher imports it only to ask this
    import torch

    return not torch.backends.cuda.is_built() and sys.platform == "linux" and len(os.listdir("/proc/self/task")) == 1


class Forked:
    """A forked agent, with the part of subprocess.Popen's interface the launcher uses (`Agent`)."""

    def __init__(self, process: multiprocessing.Process):
        self._process = process
        self.pid = process.pid

    @property
    def returncode(self) -> int | None:
        return self._process.exitcode  # as Popen's: minus the signal's number when one ended it

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        self._process.join(timeout)
        if self.returncode is None:
            raise subprocess.TimeoutExpired(AGENT_NAME, timeout or 0)
        return self.returncode

    def terminate(self) -> None:
        self._process.terminate()

    def kill(self) -> None:
        self._process.kill()


Agent = subprocess.Popen | Forked  # a started agent, either way


def _forked(argv: list[str], env: dict[str, str], log_fd: int, closed: tuple[int, ...]) -> None:
    """The forked agent: the launcher's output and environment swapped for the run's, then `run`."""
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in closed:  # still open, but on /dev/null: whatever holds the number stays valid
        os.dup2(devnull, fd)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.environ.clear()
    os.environ.update(env)
    if "OMP_NUM_THREADS" in env:  # read by torch when the launcher imported it: the ranks' share is set here
        import torch

        torch.set_num_threads(int(env["OMP_NUM_THREADS"]))
    run(argv, forked=True)


def run(argv: list[str], forked: bool = False) -> None:
    """Be the agent: tied to its parent, run torchrun, and exit without the interpreter's teardown (torch's modules
    and destructors, which the launcher would wait for). A failed rank raises here, after torchrun's failure
    report: the exit code is then 1, as torchrun's."""
    tie_to_parent()
    preemption.ignore_in_agent()  # the launcher passes SIGTERM and SIGUSR1 on to the ranks, which preempt the run
    name_process(AGENT_NAME)
    print(f"{AGENT_NAME} pid {os.getpid()}: {'forked from the launcher' if forked else 'a fresh interpreter'}")
    os.environ.update(tied_env({}))  # the ranks inherit this environment: each is tied to this agent in turn
    main(argv)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def main(argv: list[str]) -> None:
    """Run torchrun's agent with `argv` (its command line, the run directory last); raise if a rank failed."""
    # Imported here: the launcher imports this module to start the agent; only the agent needs torch and the ranks'
    # code (seconds of imports, which the launcher then does without).
    import torch
    from torch.distributed.elastic.multiprocessing.errors import record
    from torch.distributed.launcher.api import elastic_launch
    from torch.distributed.run import config_from_args, parse_args

    from trainer.rank import worker  # (the same reason)
    from trainer.rank.loop import load_run
    from trainer.results.rundir import RunDir

    experiment, _ = load_run(RunDir(argv[-1]))
    args = parse_args([*argv[:-1], "-m", "trainer.rank.worker", argv[-1]])
    if args.standalone:  # as torchrun's own `run` does
        args.rdzv_backend, args.rdzv_endpoint, args.rdzv_id = "c10d", "localhost:0", str(uuid.uuid4())
    config, _, _ = config_from_args(args)
    config.signals_to_handle = preemption.AGENT_HANDLED  # not SIGTERM or SIGUSR1: trainer.host.preemption
    # Forked only on one node: another node's ranks connect to this agent's store whenever they like (see above).
    config.start_method = "spawn" if torch.cuda.is_available() or config.max_nodes > 1 else "fork"
    if config.start_method == "fork":
        worker.preload(experiment)
    record(elastic_launch(config, worker.main))(argv[-1])


if __name__ == "__main__":
    run(sys.argv[1:])
