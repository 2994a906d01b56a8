"""How a rank's failure is named: metrics.json's and failure.rankN.json's status for the error that stopped it."""

from __future__ import annotations

import re

import torch


class NonFiniteLoss(RuntimeError):
    """The step's loss is NaN or infinite: every later step would be wasted, so the run stops (status "nan")."""


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
