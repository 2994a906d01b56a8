"""Predicted memory per rank, by category, from a model config and a layout: no weights, no devices.

Parameters, gradients and optimizer state are exact: each parameter's local shape follows from the tensor-parallel
plan (columns or rows split over tp) and FSDP2's dim-0 chunking over dp_shard, exactly as torch splits them.

Activations follow Korthikanti et al. (2022, "Reducing Activation Recomputation in Large Transformer Models"): a
per-layer count of what autograd keeps per token, with the attention and MLP terms divided by the tensor-parallel
degree, the sequence divided by the context-parallel degree, and only each layer's input kept under activation
checkpointing. The counts are those of transformers' Llama-family decoder layer with SDPA's fused attention
(no s x s scores are stored), measured tensor by tensor:

    per layer and token: 6h (two RMSNorms: input, normalised, scaled) + 5q/tp (q, k and v after rotary and
    GQA repeat, attention output and its projection input) + 4i/tp (SwiGLU: gate, up, activation, product)
    + heads/tp (log-sum-exp) + 2 (the norms' rsqrt), all in the compute dtype;
    per token once: the final norm (3h + 1), the log-softmax over the vocabulary (fp32), input ids (int64),
    rotary cos/sin, and the float attention mask row of s entries (shared by all layers).

Temporaries are the peaks that live only briefly: the logits and their gradient, a recomputed layer under
activation checkpointing, and FSDP's two gathered layers (the current one and the prefetched next).
"""

from __future__ import annotations

import fnmatch
import math
import re
from dataclasses import dataclass

import torch
from transformers import AutoModelForCausalLM, PretrainedConfig

from trainer.config import TrainSpec
from trainer.layout import MESH_DIMS, Layout

FP32 = 4


@dataclass(frozen=True)
class MemoryPlan:
    """What the prediction depends on besides the model config and the layout."""

    micro_batch: int
    seq_len: int
    precision: str  # fp32 | bf16 (autocast over fp32 master weights)
    activation_checkpointing: bool
    train: TrainSpec
    grad_accum: int = 1  # bounds the micro-batches a pipeline stage holds at once


def parameter_shapes(config: PretrainedConfig) -> list[tuple[str, tuple[int, ...]]]:
    """Names and shapes of the model's parameters (tied ones once), from a meta-device model."""
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    return [(name, tuple(p.shape)) for name, p in model.named_parameters()]


def rank_coordinates(rank: int, layout: Layout) -> dict[str, int]:
    """A global rank's index along each mesh dimension (row-major over MESH_DIMS, as init_device_mesh does)."""
    coordinates = {}
    for name in reversed(MESH_DIMS):
        rank, coordinates[name] = divmod(rank, getattr(layout, name))
    return coordinates


def local_shapes(
    config: PretrainedConfig, layout: Layout, rank: int, shapes: list[tuple[str, tuple[int, ...]]] | None = None
) -> list[tuple[str, tuple[int, ...]]]:
    """Each parameter's shape on `rank`: split by the tensor-parallel plan, then chunked on dim 0 by FSDP2."""
    from trainer.parallelize import tensor_parallel_plan

    plan = tensor_parallel_plan(config) if layout.tp > 1 else {}
    at = rank_coordinates(rank, layout)
    sharded = layout.dp_shard > 1 or (layout.tp > 1 and layout.dp_replicate > 1)
    result = []
    for name, shape in shapes or parameter_shapes(config):
        if layout.pp > 1 and not _on_stage(name, config, layout.pp, at["pp"]):
            continue
        local = list(shape)
        style = _tp_style(name, plan)
        split_dim = {"colwise": 0, "rowwise": 1 if len(shape) == 2 else None}.get(style)
        if split_dim is not None:
            local[split_dim] = _chunk_size(local[split_dim], layout.tp, at["tp"])
        if sharded and local:
            local[0] = _chunk_size(local[0], layout.dp_shard, at["dp_shard"])
        result.append((name, tuple(local)))
    return result


def predict_rank(
    config: PretrainedConfig, layout: Layout, plan: MemoryPlan, rank: int, shapes=None, local=None
) -> dict[str, int]:
    """Predicted bytes by category for one rank (`local`: its parameter shapes, when already known)."""
    local = local if local is not None else local_shapes(config, layout, rank, shapes)
    parameter_bytes = sum(math.prod(shape) for _, shape in local) * FP32
    prediction = {
        "parameters": parameter_bytes,
        "gradients": parameter_bytes,  # fp32 gradients of fp32 master weights, sharded like them
        "optimizer": optimizer_state_bytes(local, plan.train),
        "activations_saved": activation_bytes(config, layout, plan),
        "temporaries": temporary_bytes(config, layout, plan, shapes),
    }
    prediction["peak"] = sum(prediction.values())
    return prediction


def predict_memory(config: PretrainedConfig, layout: Layout, plan: MemoryPlan) -> list[dict[str, int]]:
    shapes = parameter_shapes(config)
    return [{"rank": r, **predict_rank(config, layout, plan, r, shapes)} for r in range(layout.world_size)]


def optimizer_state_bytes(local: list[tuple[str, tuple[int, ...]]], train: TrainSpec) -> int:
    """AdamW: two fp32 moments per element and a float32 step per parameter; GaLore: low-rank moments and
    projections for its target matrices (trainer.optim holds the exact rule for each optimizer)."""
    from trainer.optim import optimizer_state_bytes as exact

    return exact(local, train, FP32)


def activation_bytes(config: PretrainedConfig, layout: Layout, plan: MemoryPlan) -> int:
    """Bytes saved for backward by one micro-batch on one rank (see the module docstring)."""
    h, i, heads, layers, vocab = _dims(config)
    q = heads * _head_dim(config)
    tp, tokens = layout.tp, plan.micro_batch * plan.seq_len // layout.cp
    width = 2 if plan.precision == "bf16" else FP32
    layers_here = -(-layers // layout.pp)
    full_layer = (6 * h + (5 * q + 4 * i + heads) // tp + 2) * width
    # Under checkpointing only the layer's input stays; the rest is recomputed in backward.
    per_layer = h * width if plan.activation_checkpointing else full_layer
    once = (3 * h + 1) * width + vocab * FP32 + 8 + 2 * _head_dim(config) * width + plan.seq_len // layout.cp * FP32
    # 1F1B: the first stage holds activations of up to pp micro-batches before their backward starts.
    in_flight = min(layout.pp, plan.grad_accum)
    return in_flight * tokens * (layers_here * per_layer + once) + FP32


def temporary_bytes(config: PretrainedConfig, layout: Layout, plan: MemoryPlan, shapes=None) -> int:
    layers, vocab = config.num_hidden_layers, config.vocab_size
    tokens = plan.micro_batch * plan.seq_len // layout.cp
    logits = 2 * tokens * vocab * FP32  # the logits and their gradient
    recompute = 0
    if plan.activation_checkpointing:
        full = MemoryPlan(plan.micro_batch, plan.seq_len, plan.precision, False, plan.train)
        recompute = (activation_bytes(config, Layout(dp_replicate=1, tp=layout.tp, cp=layout.cp), full)) // layers
    gathered = 0
    if layout.dp_shard > 1:
        layer_params = (
            sum(math.prod(s) for n, s in shapes or parameter_shapes(config) if ".layers.0." in n) // layout.tp
        )
        gathered = 2 * layer_params * FP32 * (layout.dp_shard - 1) // layout.dp_shard
    return logits + recompute + gathered


def _dims(config: PretrainedConfig) -> tuple[int, int, int, int, int]:
    intermediate = getattr(config, "intermediate_size", None) or 4 * config.hidden_size
    return config.hidden_size, intermediate, config.num_attention_heads, config.num_hidden_layers, config.vocab_size


def _head_dim(config: PretrainedConfig) -> int:
    return getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads


def _on_stage(name: str, config: PretrainedConfig, stages: int, stage: int) -> bool:
    """Pipeline stages take equal runs of layers; the first adds the embedding, the last the norm and head."""
    match = re.search(r"\.layers\.(\d+)\.", name)
    if match:
        return int(match.group(1)) * stages // config.num_hidden_layers == stage
    if "embed" in name:
        return stage == 0
    return stage == stages - 1


def _tp_style(name: str, plan: dict[str, str]) -> str | None:
    module = name.rsplit(".", 1)[0]
    for pattern, style in plan.items():
        if fnmatch.fnmatchcase(module, f"*{pattern}"):
            return style
    return None


def _chunk_size(size: int, parts: int, index: int) -> int:
    """torch.chunk's split: ceil-sized pieces, the last ones shorter or empty."""
    piece = -(-size // parts)
    return max(0, min(piece, size - piece * index))
