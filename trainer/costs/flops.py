"""Model FLOPs for honest MFU: 6 per matmul parameter per token, plus causal attention over real documents.

Attention is counted over each document's own causal context (a token at position c attends to c + 1 keys),
not the padded or packed row length, so packing does not inflate MFU with work that a mask throws away.
"""

from __future__ import annotations

import re

import torch
from transformers import PretrainedConfig

# Dense bf16 tensor-core peak per device, from the vendors' data sheets (no sparsity).
# Matched against torch.cuda.get_device_name() by `_by_name`: the longest key found in the name, never inside a
# longer word or number, so "NVIDIA H100 80GB HBM3" (SXM) takes "H100 80GB HBM3" over "H100", "NVIDIA GH200 480GB"
# is no "H200", and "NVIDIA L40" no "L4" (nor "NVIDIA A100" an "A10").
PEAK_BF16_FLOPS = {
    "GH200": 989e12,
    "H200 NVL": 835e12,
    "H200": 989e12,
    "H100 NVL": 835e12,
    "H100 96GB HBM2e": 912e12,  # torchtitan's: "between SXM and NVL", their midpoint (trainer.model.presets.GPUS)
    "H100 PCIe": 756e12,
    "H100 SXM": 989e12,
    "H100 80GB HBM3": 989e12,
    "H100": 989e12,
    "B200": 2250e12,
    "A100": 312e12,
    "A10G": 70e12,
    "A10": 125e12,
    "L40S": 362e12,
    "L40": 181e12,
    "L4": 121e12,
    "RTX 4090": 165e12,
}


# Memory bandwidth per device from the same data sheets (HBM or GDDR, bytes per second), matched the same way.
PEAK_MEMORY_BANDWIDTH = {
    "GH200": 4.0e12,
    "H200": 4.8e12,
    "H100 NVL": 3.9e12,
    "H100 96GB HBM2e": 2.4e12,
    "H100 PCIe": 2.0e12,
    "H100": 3.35e12,
    "B200": 8.0e12,
    "A100-SXM4-40GB": 1.555e12,
    "A100-PCIE-40GB": 1.555e12,
    "A100": 2.039e12,
    "A10G": 600e9,
    "A10": 600e9,
    "L40S": 864e9,
    "L40": 864e9,
    "L4": 300e9,
    "RTX 4090": 1008e9,
}


# Each GPU's links from the same data sheets: its NVLink generation to the other GPUs of its node (None where it has
# none, or only an optional bridge between two or four cards: the PCIe and NVL parts), and its host PCIe generation.
# Matched the same way (trainer.costs.throughput.INTERCONNECTS holds each link's bandwidth).
GPU_LINKS = {
    "GH200": ("nvlink4", "pcie5"),
    "H200 NVL": (None, "pcie5"),
    "H200": ("nvlink4", "pcie5"),
    "H100 NVL": (None, "pcie5"),
    "H100 PCIe": (None, "pcie5"),
    "H100": ("nvlink4", "pcie5"),
    "B200": ("nvlink5", "pcie5"),  # its host PCIe is Gen6 by some accounts; planned over NVLink, which it has
    "A100-PCIE": (None, "pcie4"),
    "A100": ("nvlink3", "pcie4"),
    "A10G": (None, "pcie4"),
    "A10": (None, "pcie4"),
    "L40S": (None, "pcie4"),
    "L40": (None, "pcie4"),
    "L4": (None, "pcie4"),
    "RTX 4090": (None, "pcie4"),
}


# What a GPU not in GPU_LINKS is taken to have: an H100's NVLink, the older PCIe.
UNLISTED_GPU_LINKS = ("nvlink4", "pcie4")


def gpu_links(device_name: str) -> tuple[str | None, str]:
    """(NVLink generation or None, PCIe generation) of a GPU by name (UNLISTED_GPU_LINKS for one not listed)."""
    return _by_name(GPU_LINKS, device_name) or UNLISTED_GPU_LINKS


def peak_bf16_flops(device_name: str) -> float | None:
    return _by_name(PEAK_BF16_FLOPS, device_name)


def peak_memory_bandwidth(device_name: str) -> float | None:
    return _by_name(PEAK_MEMORY_BANDWIDTH, device_name)


def _by_name(table: dict, device_name: str):
    """The value of the longest key found in `device_name` starting a word and, where it ends in a digit, not
    running on into a longer number ("L4" is not in "NVIDIA L40", "A10" not in "NVIDIA A100", "H200" not in
    "NVIDIA GH200"; "H100 SXM" is in "H100 SXM5"); None where no key is."""
    found = [name for name in table if re.search(_whole(name), device_name)]
    return table[max(found, key=len)] if found else None


def _whole(name: str) -> str:
    return rf"(?<![A-Za-z0-9]){re.escape(name)}" + (r"(?![0-9])" if name[-1].isdigit() else "")


def causal_attention_pairs(segment_ids: torch.Tensor) -> int:
    """Sum over documents (padding excluded) of l(l+1)/2: the query-key pairs causal attention computes."""
    flat = segment_ids.flatten()
    row_breaks = torch.zeros_like(flat, dtype=torch.bool)
    row_breaks[:: segment_ids.shape[-1]] = True
    starts = row_breaks.clone()
    starts[1:] |= flat[1:] != flat[:-1]
    run_ids = torch.cumsum(starts.long(), 0) - 1
    lengths = torch.bincount(run_ids)
    real = flat[starts] >= 0
    lengths = lengths[real].long()
    return int((lengths * (lengths + 1) // 2).sum().item())


def step_flops(matmul_params: int, attention_width: int, num_layers: int, tokens: int, attention_pairs: int) -> float:
    """Forward plus backward FLOPs: 6 N per token, and 12 * width per attended pair per layer."""
    return 6.0 * matmul_params * tokens + 12.0 * attention_width * num_layers * attention_pairs


def mfu(
    config: PretrainedConfig, tokens: int, attention_pairs: int, seconds: float, device_name: str, devices: int
) -> float | None:
    """Model FLOPs utilisation over `devices` of `device_name`; None for a device with no known bf16 peak."""
    from trainer.model.build import count_parameters

    peak = peak_bf16_flops(device_name)
    if peak is None:
        return None
    heads = config.num_attention_heads
    width = heads * (getattr(config, "head_dim", None) or config.hidden_size // heads)
    flops = step_flops(count_parameters(config)["matmul"], width, config.num_hidden_layers, tokens, attention_pairs)
    return flops / seconds / (peak * devices)
