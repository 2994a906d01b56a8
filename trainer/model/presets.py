"""Model and GPU presets: published configuration values, no weights.

A model preset is the transformers config of a published model (the fields of its config.json on the Hugging Face
hub that change its size or shape), so `meshpilot plan --model llama-3.1-8b` and the agent's tools can plan for it
without an experiment file. A GPU preset is what the planner needs of a device: the name trainer.costs.flops looks its
dense bf16 peak up by, and the memory torch reports for it (torch.cuda.get_device_properties().total_memory, which
is below the marketing figure: an "80GB" H100 reports 85,017,493,504 bytes, 79.18 GiB). What a run can use is less
again: the CUDA context, NCCL's buffers and the allocator's slack, which trainer.costs.memory_model predicts and the
planner keeps free.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, ClassVar

import yaml

from trainer.config import ConfigError, Experiment, ModelSpec, apply_override, closest_presets, experiment_from_dict
from trainer.model.parameters import head_dim, parameter_counts

if TYPE_CHECKING:
    from transformers import PretrainedConfig

GiB = 1024**3
MiB = 1024**2

_LLAMA3_ROPE = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                "original_max_position_embeddings": 8192, "rope_theta": 500000.0}  # fmt: skip
_LLAMA32_ROPE = {**_LLAMA3_ROPE, "factor": 32.0}


def _rope(theta: float) -> dict[str, Any]:
    return {"rope_type": "default", "rope_theta": theta}


def _llama(hidden: int, intermediate: int, layers: int, heads: int, kv_heads: int, vocab: int, positions: int,
           **extra: Any) -> dict[str, Any]:  # fmt: skip
    return {"model_type": "llama", "hidden_size": hidden, "intermediate_size": intermediate,
            "num_hidden_layers": layers, "num_attention_heads": heads, "num_key_value_heads": kv_heads,
            "vocab_size": vocab, "max_position_embeddings": positions, "rms_norm_eps": 1e-5,
            "tie_word_embeddings": False, **extra}  # fmt: skip


# config.json of each model on the Hugging Face hub (the repository is the key's source).
MODELS: dict[str, tuple[str, dict[str, Any]]] = {
    "llama-2-7b": ("meta-llama/Llama-2-7b-hf", _llama(4096, 11008, 32, 32, 32, 32000, 4096)),
    "llama-2-13b": ("meta-llama/Llama-2-13b-hf", _llama(5120, 13824, 40, 40, 40, 32000, 4096)),
    "llama-2-70b": ("meta-llama/Llama-2-70b-hf", _llama(8192, 28672, 80, 64, 8, 32000, 4096)),
    "llama-3.1-8b": (
        "meta-llama/Llama-3.1-8B",
        _llama(4096, 14336, 32, 32, 8, 128256, 131072, rope_parameters=_LLAMA3_ROPE),
    ),
    "llama-3.1-70b": (
        "meta-llama/Llama-3.1-70B",
        _llama(8192, 28672, 80, 64, 8, 128256, 131072, rope_parameters=_LLAMA3_ROPE),
    ),
    "llama-3.1-405b": (
        "meta-llama/Llama-3.1-405B",
        _llama(16384, 53248, 126, 128, 8, 128256, 131072, rope_parameters=_LLAMA3_ROPE),
    ),
    "llama-3.2-1b": (
        "meta-llama/Llama-3.2-1B",
        _llama(
            2048, 8192, 16, 32, 8, 128256, 131072, head_dim=64, tie_word_embeddings=True, rope_parameters=_LLAMA32_ROPE
        ),
    ),
    "llama-3.2-3b": (
        "meta-llama/Llama-3.2-3B",
        _llama(
            3072, 8192, 28, 24, 8, 128256, 131072, head_dim=128, tie_word_embeddings=True, rope_parameters=_LLAMA32_ROPE
        ),
    ),
    "mistral-7b": (
        "mistralai/Mistral-7B-v0.1",
        {**_llama(4096, 14336, 32, 32, 8, 32000, 32768), "model_type": "mistral", "sliding_window": 4096},
    ),
    "qwen2.5-7b": (
        "Qwen/Qwen2.5-7B",
        {
            **_llama(3584, 18944, 28, 28, 4, 152064, 131072),
            "model_type": "qwen2",
            "rms_norm_eps": 1e-6,
            "rope_parameters": _rope(1e6),
        },
    ),
    "qwen2.5-72b": (
        "Qwen/Qwen2.5-72B",
        {
            **_llama(8192, 29568, 80, 64, 8, 152064, 131072),
            "model_type": "qwen2",
            "rms_norm_eps": 1e-5,
            "rope_parameters": _rope(1e6),
        },
    ),
    "gemma-2-9b": (
        "google/gemma-2-9b",
        {
            **_llama(3584, 14336, 42, 16, 8, 256000, 8192),
            "model_type": "gemma2",
            "head_dim": 256,
            "rms_norm_eps": 1e-6,
            "tie_word_embeddings": True,
            "sliding_window": 4096,
            "query_pre_attn_scalar": 256,
        },
    ),
    "smollm2-1.7b": (
        "HuggingFaceTB/SmolLM2-1.7B",
        _llama(2048, 8192, 24, 32, 32, 49152, 8192, tie_word_embeddings=True, rope_parameters=_rope(130000.0)),
    ),
}


# Mixture-of-experts models: config.json of each on the Hugging Face hub, checked against the hub's configs (as
# mirrored on huggingface.co and in Megatron/slime model scripts: mistralai/Mixtral-8x7B-v0.1 and 8x22B, Qwen3-30B-A3B
# and 235B-A22B, openai/gpt-oss-20b and 120b, deepseek-ai/DeepSeek-V3). Planned from a meta-device model (no light
# PresetConfig: their layers are not Llama's).
def _rope_yarn(factor: float, original: int, theta: float, **extra: float) -> dict[str, Any]:
    return {
        "rope_type": "yarn",
        "factor": factor,
        "original_max_position_embeddings": original,
        "rope_theta": theta,
        **extra,
    }


def _qwen3_moe(hidden: int, intermediate: int, moe_intermediate: int, layers: int, heads: int) -> dict[str, Any]:
    return {
        "model_type": "qwen3_moe",
        "vocab_size": 151936,
        "hidden_size": hidden,
        "intermediate_size": intermediate,
        "moe_intermediate_size": moe_intermediate,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": 4,
        "head_dim": 128,
        "num_experts": 128,
        "num_experts_per_tok": 8,
        "norm_topk_prob": True,
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
        "max_position_embeddings": 40960,
        "rms_norm_eps": 1e-6,
        "rope_parameters": _rope(1000000.0),
        "router_aux_loss_coef": 0.001,
        "tie_word_embeddings": False,
    }


def _gpt_oss(layers: int, experts: int) -> dict[str, Any]:
    return {
        "model_type": "gpt_oss",
        "vocab_size": 201088,
        "hidden_size": 2880,
        "intermediate_size": 2880,
        "num_hidden_layers": layers,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
        "head_dim": 64,
        "num_local_experts": experts,
        "num_experts_per_tok": 4,
        "sliding_window": 128,
        "layer_types": ["sliding_attention", "full_attention"] * (layers // 2),
        "max_position_embeddings": 131072,
        "rms_norm_eps": 1e-5,
        "rope_parameters": _rope_yarn(32.0, 4096, 150000.0, beta_fast=32.0, beta_slow=1.0),
        "swiglu_limit": 7.0,
        "router_aux_loss_coef": 0.9,
        "tie_word_embeddings": False,
    }


def _mixtral(
    hidden: int, intermediate: int, layers: int, heads: int, vocab: int, positions: int, aux: float
) -> dict[str, Any]:
    return {
        "model_type": "mixtral",
        "vocab_size": vocab,
        "hidden_size": hidden,
        "intermediate_size": intermediate,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": 8,
        "num_local_experts": 8,
        "num_experts_per_tok": 2,
        "max_position_embeddings": positions,
        "rms_norm_eps": 1e-5,
        "rope_parameters": _rope(1000000.0),
        "router_aux_loss_coef": aux,
        "sliding_window": None,
        "tie_word_embeddings": False,
    }


_MOE_MODELS: dict[str, tuple[str, dict[str, Any]]] = {
    "mixtral-8x7b": ("mistralai/Mixtral-8x7B-v0.1", _mixtral(4096, 14336, 32, 32, 32000, 32768, 0.02)),
    "mixtral-8x22b": ("mistralai/Mixtral-8x22B-v0.1", _mixtral(6144, 16384, 56, 48, 32768, 65536, 0.001)),
    "qwen3-30b-a3b": ("Qwen/Qwen3-30B-A3B", _qwen3_moe(2048, 6144, 768, 48, 32)),
    "qwen3-235b-a22b": ("Qwen/Qwen3-235B-A22B", _qwen3_moe(4096, 12288, 1536, 94, 64)),
    "gpt-oss-20b": ("openai/gpt-oss-20b", _gpt_oss(24, 32)),
    "gpt-oss-120b": ("openai/gpt-oss-120b", _gpt_oss(36, 128)),
    "deepseek-v3": (
        "deepseek-ai/DeepSeek-V3",
        {
            # The hub's config also has an fp8 quantization_config (its weights' storage) and one multi-token
            # prediction layer (num_nextn_predict_layers: 1) that transformers' DeepseekV3 does not build; both
            # are left out: this is the bf16 model transformers trains.
            "model_type": "deepseek_v3",
            "vocab_size": 129280,
            "hidden_size": 7168,
            "intermediate_size": 18432,
            "moe_intermediate_size": 2048,
            "num_hidden_layers": 61,
            "first_k_dense_replace": 3,
            "num_attention_heads": 128,
            "num_key_value_heads": 128,
            "n_routed_experts": 256,
            "n_shared_experts": 1,
            "num_experts_per_tok": 8,
            "n_group": 8,
            "topk_group": 4,
            "routed_scaling_factor": 2.5,
            "norm_topk_prob": True,
            "q_lora_rank": 1536,
            "kv_lora_rank": 512,
            "qk_nope_head_dim": 128,
            "qk_rope_head_dim": 64,
            "v_head_dim": 128,
            "max_position_embeddings": 163840,
            "rms_norm_eps": 1e-6,
            "rope_parameters": _rope_yarn(
                40.0, 4096, 10000.0, beta_fast=32.0, beta_slow=1.0, mscale=1.0, mscale_all_dim=1.0
            ),
            "tie_word_embeddings": False,
        },
    ),
}

MODELS.update(_MOE_MODELS)
MOE_PRESETS = tuple(_MOE_MODELS)

# Presets meshpilot knows of but cannot plan for, with the reason (said in one line when asked for).
REFUSED: dict[str, str] = {}


@dataclass(frozen=True)
class _Architecture:
    """How a preset's decoder layer differs from Llama's in its parameters, as transformers builds it."""

    qkv_bias: bool = False  # the q, k and v projections have biases (Qwen2)
    extra_norms: tuple[str, ...] = ()  # RMSNorms after Llama's two, in the layer's order (Gemma 2)


_ARCHITECTURES = {
    "llama": _Architecture(),
    "mistral": _Architecture(),
    "qwen2": _Architecture(qkv_bias=True),
    "gemma2": _Architecture(extra_norms=("pre_feedforward_layernorm", "post_feedforward_layernorm")),
}
# The tensor-parallel plan (base_model_tp_plan) transformers declares for each of these architectures.
_TP_PLAN = {"layers.*.self_attn.q_proj": "colwise", "layers.*.self_attn.k_proj": "colwise",
            "layers.*.self_attn.v_proj": "colwise", "layers.*.self_attn.o_proj": "rowwise",
            "layers.*.mlp.gate_proj": "colwise", "layers.*.mlp.up_proj": "colwise",
            "layers.*.mlp.down_proj": "rowwise"}  # fmt: skip


@dataclass(frozen=True)
class PresetConfig:
    """A preset's model config as `meshpilot plan` reads it: the numbers of its transformers config, under the same
    names, without transformers. Its config class's module takes about two seconds to import (it brings in
    torch.distributed.tensor and torch._dynamo), and counting the parameters on a meta-device model (which
    imports the modeling code) more. Only for a config exactly equal to a preset's (`preset_config`): transformers
    has checked those; tests/test_preset_configs.py checks that every preset's parameters, tensor-parallel plan
    and plans are transformers' own. What it lacks raises AttributeError, as a transformers config does."""

    # Every preset architecture's attention layers call transformers' attention interface, which context
    # parallelism plugs into (trainer.parallel.context_parallel reads this; of a transformers config it asks the model
    # class, importing the modeling code).
    attention_interface: ClassVar[bool] = True

    model_type: str
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    vocab_size: int
    max_position_embeddings: int
    head_dim: int
    tie_word_embeddings: bool

    @property
    def base_model_tp_plan(self) -> dict[str, str]:
        return dict(_TP_PLAN)

    def describe_parameters(self) -> tuple[list[tuple[str, tuple[int, ...]]], dict[str, int]]:
        """What trainer.model.parameters.describe_parameters says of transformers' model: each parameter's name and
        shape (tied ones once, in the model's order) and the counts, from the config's numbers alone."""
        h, i, vocab = self.hidden_size, self.intermediate_size, self.vocab_size
        q, kv = self.num_attention_heads * self.head_dim, self.num_key_value_heads * self.head_dim
        architecture = _ARCHITECTURES[self.model_type]
        layer = []
        for projection, rows in (("q_proj", q), ("k_proj", kv), ("v_proj", kv)):
            layer.append((f"self_attn.{projection}.weight", (rows, h)))
            if architecture.qkv_bias:
                layer.append((f"self_attn.{projection}.bias", (rows,)))
        layer += [("self_attn.o_proj.weight", (h, q)), ("mlp.gate_proj.weight", (i, h)),
                  ("mlp.up_proj.weight", (i, h)), ("mlp.down_proj.weight", (h, i))]  # fmt: skip
        norms = ("input_layernorm", "post_attention_layernorm", *architecture.extra_norms)
        layer += [(f"{norm}.weight", (h,)) for norm in norms]
        shapes = [("model.embed_tokens.weight", (vocab, h))]
        shapes += [(f"model.layers.{n}.{name}", shape) for n in range(self.num_hidden_layers) for name, shape in layer]
        shapes.append(("model.norm.weight", (h,)))
        if not self.tie_word_embeddings:
            shapes.append(("lm_head.weight", (vocab, h)))
        return shapes, parameter_counts(shapes, vocab * h, self.tie_word_embeddings)


def preset_config(spec: ModelSpec) -> PresetConfig | None:
    """The light config of the experiment's model where it is exactly a preset's (`--model`, model_override);
    None for any other, which transformers must build and check (a preset changed by an override included)."""
    values = spec.config
    if spec.path is not None or values is None or not any(values == preset for _, preset in MODELS.values()):
        return None
    if values.get("model_type") not in _ARCHITECTURES:  # a mixture of experts: transformers counts its layers
        return None
    named = {field.name: values.get(field.name) for field in dataclasses.fields(PresetConfig)}
    named["head_dim"] = head_dim(SimpleNamespace(**values))
    return PresetConfig(**named)


def planning_config(spec: ModelSpec, base_dir: Path) -> PresetConfig | PretrainedConfig:
    """The config a plan reads: a preset's light one, else transformers' (its config classes imported only then:
    seconds a preset's plan does without)."""
    light = preset_config(spec)
    if light is not None:
        return light
    from trainer.model.build import model_config  # imported here: transformers' config classes, seconds

    return model_config(spec, base_dir)


def preset_key(name: str) -> str:
    """`Llama 3.1 8B`, `llama3.1-8b` and `meta-llama/Llama-3.1-8B` all name llama-3.1-8b."""
    key = name.strip().lower().split("/")[-1]
    key = re.sub(r"[\s_]+", "-", key)
    key = re.sub(r"^(llama|qwen|gemma|smollm)-?(\d)", r"\1-\2", key)  # llama3.1 -> llama-3.1
    key = re.sub(r"^qwen-3-", "qwen3-", key)  # the Qwen3 MoE presets keep the family's own spelling
    key = re.sub(r"(\d)-?(b|gb)$", r"\1\2", key).removesuffix("-hf").removesuffix("-v0.1")
    return {"qwen-2.5-7b": "qwen2.5-7b", "qwen-2.5-72b": "qwen2.5-72b", "smollm-2-1.7b": "smollm2-1.7b"}.get(key, key)


def model_preset(name: str) -> dict[str, Any]:
    """The transformers config of a preset (a copy: callers may change it)."""
    key = preset_key(name)
    if key in REFUSED:
        raise ConfigError(REFUSED[key])
    if key not in MODELS:
        raise ConfigError(f"no model preset {name!r}{closest_presets(key, [*MODELS, *REFUSED])}")
    return json.loads(json.dumps(MODELS[key][1]))


def model_override(name: str) -> list[str]:
    """Experiment overrides (`--set` form) that train or plan the preset in place of the experiment's model. Written
    as YAML, which apply_override reads: JSON's `1e-05` would read back as a string (YAML 1.1 floats have a dot)."""
    config = yaml.safe_dump(model_preset(name), default_flow_style=True, width=math.inf, sort_keys=False).strip()
    return [f"model.config={config}", "model.path=null"]


# What a plan for a preset assumes when there is no experiment file: a usual pre-training set-up.
PRESET_SEQ_LEN = 4096
PRESET_ROWS_PER_DEVICE = 4  # global batch: 4 rows of seq_len per device (16k tokens per device at 4096)


def preset_experiment(
    name: str, world_size: int, seq_len: int | None = None, overrides: Sequence[str] = ()
) -> Experiment:
    """The experiment `meshpilot plan --model NAME` plans: the preset's config with the defaults above, then the
    `--set` overrides (the batch follows seq_len unless an override sets it)."""
    seq_len = seq_len or PRESET_SEQ_LEN
    raw: dict[str, Any] = {
        "model": {"config": model_preset(name)},
        "data": {"seq_len": seq_len},
        "train": {"global_batch_tokens": seq_len * PRESET_ROWS_PER_DEVICE * world_size},
    }
    for override in overrides:
        apply_override(raw, override)
    return experiment_from_dict(raw)
