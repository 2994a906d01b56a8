"""Parameter counts: every parameter's name and shape, and the total, embedding and matmul counts that memory,
FLOPs and throughput predictions start from. From a meta-device model of any transformers config
(`describe_parameters`), or from a preset's numbers alone (trainer.model.presets.PresetConfig, by the same rule:
`parameter_counts`)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from transformers import PretrainedConfig


def parameter_counts(shapes: list[tuple[str, tuple[int, ...]]], embedding: int, tied: bool) -> dict[str, int]:
    """Total, input-embedding and matmul parameters, from every parameter's shape (tied ones once)."""
    total = sum(math.prod(shape) for _, shape in shapes)
    # The output projection is a real matmul even when tied to the input embedding, whose lookup costs nothing.
    return {"total": total, "embedding": embedding, "matmul": total - embedding + (embedding if tied else 0)}


def count_parameters(config: PretrainedConfig) -> dict[str, int]:
    """Parameter counts from a meta-device model: no memory, no weights."""
    return describe_parameters(config)[1]


def describe_parameters(config: PretrainedConfig) -> tuple[list[tuple[str, tuple[int, ...]]], dict[str, int]]:
    """Each parameter's name and shape (tied ones once), and the counts, from one meta-device model: building
    one takes about half a second for a 405B model, and the planner needs both. (A preset's plan counts without
    a model: trainer.model.presets.PresetConfig, which tests check against this.)"""
    # Imported here: a preset's plan counts by `parameter_counts` alone, without torch's and transformers' modeling
    # code (seconds of import).
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    shapes = [(name, tuple(p.shape)) for name, p in model.named_parameters()]
    embedding = model.get_input_embeddings().weight
    tied = model.get_output_embeddings().weight is embedding
    return shapes, parameter_counts(shapes, embedding.numel(), tied)


def head_dim(config: PretrainedConfig) -> int:
    """Each attention head's width: the config's head_dim where it sets one, else hidden_size over the heads (as
    transformers' models read it). The one rule for every prediction and check."""
    return getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
