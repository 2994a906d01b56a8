"""Entry point of each training process under torchrun: `python -m trainer.worker RUN_DIR`.

A rank that fails records why in failure.rankN.json before it exits; torchrun then stops the other ranks
and the launcher turns the earliest failure into metrics.json. A rank dies with torchrun (trainer.lifeline).
"""

from __future__ import annotations

import logging
import os
import re
import sys
import time
import traceback

import torch
import torch.distributed as dist

from trainer.lifeline import tie_to_parent
from trainer.loop import NonFiniteLoss, init_worker, load_run, train
from trainer.rundir import RunDir, write_json


def main(run_path: str) -> None:
    tie_to_parent()
    run = RunDir(run_path)
    rank = int(os.environ.get("RANK", 0))
    _setup_logging(run, rank)
    try:
        experiment, launch = load_run(run)
        worker = init_worker(experiment.hardware.device_type)
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


# Allocation failures that arrive as plain RuntimeErrors: the CPU allocator's words, and those of CUDA libraries
# that allocate outside torch's caching allocator (cuBLAS/cuDNN handles and workspaces, NCCL buffers), whose
# failures are not torch.OutOfMemoryError.
_CPU_OOM = re.compile(
    r"can't allocate memory|Cannot allocate memory|CUBLAS_STATUS_ALLOC_FAILED|CUDNN_STATUS_ALLOC_FAILED"
    r"|CUDA error: out of memory|NCCL.*(out of memory|Failed to CUDA calloc|cudaMalloc)",
    re.IGNORECASE | re.DOTALL,
)


def failure_status(error: BaseException) -> str:
    """metrics.json's status for a rank's error: "oom", "nan" or "failed"."""
    if isinstance(error, torch.OutOfMemoryError | MemoryError) or _CPU_OOM.search(str(error)):
        return "oom"
    return "nan" if isinstance(error, NonFiniteLoss) else "failed"


def _record_failure(run: RunDir, rank: int, error: BaseException) -> None:
    status = failure_status(error)
    write_json(
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


def exit_now() -> None:
    """End a rank that finished: every result file is written and closed, so skip the interpreter's teardown
    (freeing every module, then C++ destructors of torch, gloo and the store), which takes seconds under load and
    which the launcher would wait for."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1])
    exit_now()
