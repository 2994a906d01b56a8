"""What the CUDA paths decide from names alone: the MFU peak of each H100/H200 variant by the name torch reports,
and allocation failures of CUDA libraries (cuBLAS, cuDNN, NCCL) recorded as "oom"."""

from __future__ import annotations

import pytest

from trainer.flops import peak_bf16_flops
from trainer.worker import failure_status


@pytest.mark.parametrize(
    ("name", "peak"),
    [
        ("NVIDIA H100 80GB HBM3", 989e12),  # SXM
        ("NVIDIA H100 PCIe", 756e12),
        ("NVIDIA H100 NVL", 835e12),
        ("NVIDIA H200", 989e12),  # SXM
        ("NVIDIA H200 NVL", 835e12),
        ("NVIDIA GH200 480GB", 989e12),  # contains "H200": matched as GH200 first
        ("NVIDIA A100-SXM4-80GB", 312e12),
        ("Tesla T4", None),
    ],
)
def test_mfu_peak_by_the_name_torch_reports(name, peak):
    assert peak_bf16_flops(name) == peak


@pytest.mark.parametrize(
    "message",
    [
        "CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
        "cuDNN error: CUDNN_STATUS_ALLOC_FAILED",
        "NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled cuda error, NCCL version 2.21.5\n"
        "Last error:\nCuda failure 'out of memory'",
        "NCCL WARN Failed to CUDA calloc 6291456 bytes",
        "CUDA error: out of memory\nCUDA kernel errors might be asynchronously reported",
    ],
)
def test_cuda_library_allocation_failures_are_oom(message):
    assert failure_status(RuntimeError(message)) == "oom"


def test_other_nccl_errors_are_failures():
    assert failure_status(RuntimeError("NCCL error: remote process exited or there was a network error")) == "failed"
