"""What the CUDA paths decide from names alone: the MFU peak of each H100/H200 variant by the name torch reports,
and allocation failures of CUDA libraries (cuBLAS, cuDNN, NCCL) recorded as "oom"."""

from __future__ import annotations

import pytest

from trainer.hardware import gpu_links, peak_bf16_flops, peak_memory_bandwidth
from trainer.rank.failures import failure_status


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
        ("NVIDIA L4", 121e12),
        ("NVIDIA L40", 181e12),  # contains "L4": the longest name that matches as a whole wins
        ("NVIDIA L40S", 362e12),
        ("NVIDIA A10", 125e12),
        ("NVIDIA A10G", 70e12),
        ("Tesla T4", None),
    ],
)
def test_mfu_peak_by_the_name_torch_reports(name, peak):
    assert peak_bf16_flops(name) == peak


def test_a_name_inside_a_longer_number_is_not_matched():
    """Whatever order the tables list names in: an L40 has an L40's bandwidth and links, not an L4's."""
    assert peak_memory_bandwidth("NVIDIA L40") == 864e9 and peak_memory_bandwidth("NVIDIA L4") == 300e9
    assert gpu_links("NVIDIA L40") == (None, "pcie4")
    assert peak_memory_bandwidth("NVIDIA A100-SXM4-40GB") == 1.555e12  # the longer key over "A100"
    assert peak_bf16_flops("NVIDIA H100 SXM5 80GB") == 989e12
    assert peak_bf16_flops("NVIDIA H1000") is None


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
