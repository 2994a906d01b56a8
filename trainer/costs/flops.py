"""Model FLOPs for honest MFU: 6 per matmul parameter per token (of a mixture of experts, per active parameter: the
routed experts at top_k / experts), plus causal attention over real documents.

Attention is counted over each document's own causal context (a token at position c attends to c + 1 keys),
not the padded or packed row length, so packing does not inflate MFU with work that a mask throws away.
"""

from __future__ import annotations

import torch
from transformers import PretrainedConfig

from trainer.hardware import peak_bf16_flops
from trainer.model.parameters import count_parameters, head_dim


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

    peak = peak_bf16_flops(device_name)
    if peak is None:
        return None
    width = config.num_attention_heads * head_dim(config)
    counts = count_parameters(config)  # an MoE model's FLOPs are its active parameters' (top_k of the routed experts)
    flops = step_flops(counts["active_matmul"], width, config.num_hidden_layers, tokens, attention_pairs)
    return flops / seconds / (peak * devices)
