"""What each training process runs: `main(RUN_DIR)`, started by torchrun's agent (trainer.launch.torchrun).

A rank that fails records why in failure.rankN.json before it exits; torchrun then stops the other ranks
and the launcher turns the earliest failure into metrics.json. A rank dies with torchrun (trainer.host.lifeline).
SIGTERM and SIGUSR1 preempt the run instead (trainer.host.preemption).
"""

from __future__ import annotations

import logging
import os
import time
import traceback
from pathlib import Path

import psutil
import torch.distributed as dist

from trainer.config import Experiment
from trainer.host import preemption
from trainer.host.lifeline import name_process, tie_to_parent
from trainer.model.build import meta_model, model_config
from trainer.rank.failures import failure_status
from trainer.rank.loop import init_worker, load_run, train
from trainer.results.rundir import RunDir
from trainer.results.schemas import FAILURE

_forked = False  # set by `preload` in the agent, so True in the ranks it forks afterwards


def preload(experiment: Experiment) -> None:
    """Import what a rank of this run would import on its way (the model's code, checkpointing, DTensor), so that
    ranks forked afterwards start with it: once per run instead of once per rank."""
    global _forked
    # preload's purpose: these imports, before the ranks fork
    import torch.distributed.checkpoint.state_dict
    import torch.distributed.tensor

    if experiment.layout.pp > 1:
        import torch.distributed.pipelining  # noqa: F401
    meta_model(model_config(experiment.model, Path(experiment.base_dir)))
    _forked = True


def wait_for_local_ranks(timeout_s: float = 120.0) -> None:
    """In a forked rank: return once the agent has forked every rank of this node (LOCAL_WORLD_SIZE children),
    so that nothing connects to the agent's store while it forks (trainer.launch.torchrun says why). The bound only
    keeps a rank whose sibling failed to start from waiting forever; torchrun stops the run then anyway."""
    expected = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    agent = psutil.Process(os.getppid())
    deadline = time.monotonic() + timeout_s
    while len(agent.children()) < expected and time.monotonic() < deadline:
        time.sleep(0.005)


def main(run_path: str) -> None:
    # First: SIGTERM and SIGUSR1 preempt the run at the next step boundary (trainer.host.preemption). This also replaces
    # the handler a forked rank inherits from torchrun's agent, which turned the SIGTERM torchrun sends the other
    # ranks, once one died, into an exception recorded as if it were the cause.
    preemption.listen()
    tie_to_parent()
    if _forked:
        wait_for_local_ranks()
    rank = int(os.environ.get("RANK", 0))
    name_process(f"meshpilot:r{rank}")
    run = RunDir(run_path)
    _setup_logging(run, rank)
    try:
        experiment, launch = load_run(run)
        worker = init_worker(experiment.hardware.device_type, experiment.train)
        train(run, worker, experiment, launch)
    except BaseException as error:
        logging.getLogger("meshpilot").exception("rank %d failed", rank)
        _record_failure(run, rank, error)
        raise
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    if rank != 0:
        run.rank_log(rank).unlink(missing_ok=True)  # rank logs are kept only when something went wrong


def _record_failure(run: RunDir, rank: int, error: BaseException) -> None:
    status = failure_status(error)
    FAILURE.write(
        run.failure(rank),
        {
            "rank": rank,
            "status": status,
            "time": time.time(),
            "error": f"{type(error).__name__}: {str(error).strip().splitlines()[0] if str(error).strip() else ''}",
            "traceback": traceback.format_exc(),
        },
    )


def _setup_logging(run: RunDir, rank: int) -> None:
    handler = logging.FileHandler(run.rank_log(rank))
    handler.setFormatter(logging.Formatter(f"%(asctime)s rank{rank} %(levelname)s %(message)s"))
    root = logging.getLogger("meshpilot")
    root.addHandler(handler)
    root.setLevel(logging.INFO)
