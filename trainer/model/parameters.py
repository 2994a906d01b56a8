"""Parameter counts: every parameter's name and shape, and the total, embedding and matmul counts that memory,
FLOPs and throughput predictions start from. From a meta-device model of any transformers config
(`describe_parameters`), or from a preset's numbers alone (trainer.model.presets.PresetConfig, by the same rule:
`parameter_counts`).

Mixture-of-experts models (transformers 5 keeps each MoE layer's routed experts as 3-D tensors under
`mlp.experts`, leading dimension the expert) count twice: `total` (what memory holds) and `active_matmul` (what a
token computes: the routed experts' parameters at top_k / experts, the router, shared experts and everything else
in full), from which FLOPs per token follow (`moe_dims`, `is_routed_expert`). `float8_linear`: the weights
train.precision fp8 computes in float8 (`float8_eligible`)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from trainer.layout import expert_count

if TYPE_CHECKING:
    from transformers import PretrainedConfig


def parameter_counts(
    shapes: list[tuple[str, tuple[int, ...]]], embedding: int, tied: bool, routed_fraction: float = 1.0
) -> dict[str, int]:
    """Total, input-embedding and matmul parameters, from every parameter's shape (tied ones once); the routed
    experts' parameters, and the matmul parameters one token runs through (`routed_fraction`: top_k / experts of
    an MoE model, whose routed experts each token sees only that share of)."""
    total = sum(math.prod(shape) for _, shape in shapes)
    routed = sum(math.prod(shape) for name, shape in shapes if is_routed_expert(name))
    # The output projection is a real matmul even when tied to the input embedding, whose lookup costs nothing.
    matmul = total - embedding + (embedding if tied else 0)
    active = matmul - routed + round(routed * routed_fraction)
    float8 = [shape for name, shape in shapes if name.endswith(".weight") and float8_eligible(name[:-7], shape)]
    counts = {"total": total, "embedding": embedding, "matmul": matmul, "routed_experts": routed}
    counts["active_matmul"] = active
    # Under fp8: the float8 weights' elements, how many there are, and the sums of their input and output widths (a
    # token's elements each casts to float8 on the way in, and its gradient on the way back).
    counts |= {"float8_linear": sum(n * k for n, k in float8), "float8_linears": len(float8),
               "float8_inputs": sum(k for _, k in float8), "float8_outputs": sum(n for n, _ in float8)}  # fmt: skip
    return counts


# train.precision fp8 (trainer.parallel.float8): torch._scaled_mm needs both dimensions of a float8 weight to be
# multiples of 16 (torchtitan's module_filter_fn); routers and gates choose the experts and stay bf16 (torchtitan's
# MoE configs filter "router.gate"; the name's last part must match exactly: gate_proj is an MLP projection).
FLOAT8_DIM_MULTIPLE = 16
_FLOAT8_KEPT = ("router", "gate")
_IN_DECODER_LAYER = re.compile(r"(^|\.)layers\.\d+\.")


def float8_eligible(module: str, weight_shape: tuple[int, ...]) -> bool:
    """Whether the linear layer at `module` (its path in the model) with this weight computes in float8 under
    train.precision fp8: inside a decoder layer (the output head and embedding stay bf16), not a routed expert
    (3-D, not an nn.Linear), router or gate, both dimensions multiples of FLOAT8_DIM_MULTIPLE. The one rule for
    the conversion (trainer.parallel.float8, which also checks the module is an nn.Linear) and the cost models
    (the "float8_linear" count)."""
    if len(weight_shape) != 2 or not _IN_DECODER_LAYER.search(module) or is_routed_expert(module):
        return False
    if module.rsplit(".", 1)[-1] in _FLOAT8_KEPT:
        return False
    return all(size % FLOAT8_DIM_MULTIPLE == 0 for size in weight_shape)


# Where transformers 5's MoE classes keep their routed experts (Mixtral, Qwen2/3-MoE, DeepSeek-V3, gpt-oss); shared
# experts (`shared_expert`, `shared_experts`) are dense MLPs that every token runs through.
_ROUTED_EXPERTS = ".mlp.experts."


def is_routed_expert(name: str) -> bool:
    """Whether a parameter (or a module path) belongs to a layer's routed experts (sharded over ep)."""
    return _ROUTED_EXPERTS in name or name.endswith(".mlp.experts")


@dataclass(frozen=True)
class MoeDims:
    """What the cost models need of a mixture-of-experts config: the routed experts per MoE layer and how many each
    token takes, their intermediate width, the shared experts' (0: none), and which decoder layers are MoE (the
    others have a dense MLP of config.intermediate_size)."""

    experts: int
    top_k: int
    expert_intermediate: int
    shared_intermediate: int
    moe_layers: int
    dense_intermediate: int  # the MLP width of the layers that are not MoE (DeepSeek-V3's first three)
    shared_first: bool = False  # the shared expert runs before the router (Qwen2-MoE's block), not after the experts

    @property
    def routed_fraction(self) -> float:
        return self.top_k / self.experts


def moe_dims(config: PretrainedConfig) -> MoeDims | None:
    """The config's mixture-of-experts dimensions as transformers builds its layers; None for a dense model."""
    top_k = getattr(config, "num_experts_per_tok", None)
    experts = expert_count(config) if top_k else None  # a dense config stops at the first read: plans ask often
    if not experts:
        return None
    expert_intermediate = getattr(config, "moe_intermediate_size", None) or config.intermediate_size
    shared = getattr(config, "shared_expert_intermediate_size", None) or 0
    shared = shared or (getattr(config, "n_shared_experts", None) or 0) * expert_intermediate
    moe_layers = _moe_layer_count(config)
    dense = getattr(config, "intermediate_size", None) or 0
    shared_first = bool(getattr(config, "shared_expert_intermediate_size", None))  # Qwen2-MoE's block order
    return MoeDims(experts, top_k, expert_intermediate, shared, moe_layers, dense, shared_first)


def _moe_layer_count(config: PretrainedConfig) -> int:
    """transformers' rule for which decoder layers get the sparse block: DeepSeek-V3 after first_k_dense_replace,
    Qwen2/3-MoE outside mlp_only_layers and on every decoder_sparse_step-th layer, every layer otherwise (each field
    read once: a plan asks for thousands of layouts)."""
    first = getattr(config, "first_k_dense_replace", None) or 0
    dense = set(getattr(config, "mlp_only_layers", None) or ())
    step = getattr(config, "decoder_sparse_step", None) or 1
    return sum(1 for i in range(first, config.num_hidden_layers) if i not in dense and (i + 1) % step == 0)


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
    moe = moe_dims(config)
    return shapes, parameter_counts(shapes, embedding.numel(), tied, moe.routed_fraction if moe else 1.0)


def head_dim(config: PretrainedConfig) -> int:
    """Each attention head's width: the config's head_dim where it sets one, else hidden_size over the heads (as
    transformers' models read it). The one rule for every prediction and check."""
    return getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
