"""The model: a transformers causal LM from an inline config, a local config.json or a local checkpoint.

Nothing is fetched from a hub: configs are built in memory or read from local files only.
"""

from __future__ import annotations

import dataclasses
import difflib
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForCausalLM, PretrainedConfig
from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

from trainer.config import ConfigError, ModelSpec

_WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")


def model_config(spec: ModelSpec, base_dir: Path) -> PretrainedConfig:
    """The transformers config the experiment describes, with every inline key checked."""
    if (spec.config is None) == (spec.path is None):
        raise ConfigError("model: give exactly one of model.config (inline) or model.path (local directory)")
    if spec.config is not None:
        return _inline_config(dict(spec.config))
    path = _local_path(spec.path, base_dir)
    try:
        config = AutoConfig.from_pretrained(str(path), local_files_only=True)
    except (OSError, ValueError) as e:
        raise ConfigError(f"model.path: {path}: {str(e).strip().splitlines()[0]}") from None
    _check_causal_lm(config.model_type, "model.path")
    return config


def checkpoint_dir(spec: ModelSpec, base_dir: Path) -> Path | None:
    """The local directory holding weights to start from, or None to initialise at random."""
    if spec.path is None:
        return None
    path = _local_path(spec.path, base_dir)
    directory = path if path.is_dir() else path.parent
    return directory if any((directory / f).exists() for f in _WEIGHT_FILES) else None


def build_model(config: PretrainedConfig, weights: Path | None, seed: int) -> torch.nn.Module:
    """Random init from `seed` (identical on every rank), or the local weights; fp32 master parameters."""
    torch.manual_seed(seed)
    kwargs = {"attn_implementation": "sdpa", "dtype": torch.float32}
    if weights is not None:
        return AutoModelForCausalLM.from_pretrained(str(weights), config=config, local_files_only=True, **kwargs)
    return AutoModelForCausalLM.from_config(config, **kwargs)


def enable_activation_checkpointing(model: torch.nn.Module) -> None:
    """Recompute each decoder layer in backward. transformers 5 renamed gradient_checkpointing_enable to
    activation_checkpointing_enable in a later release (the old name warns there): use whichever this one has."""
    enable = getattr(model, "activation_checkpointing_enable", None) or model.gradient_checkpointing_enable
    enable({"use_reentrant": False})


def count_parameters(config: PretrainedConfig) -> dict[str, int]:
    """Parameter counts from a meta-device model: no memory, no weights."""
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    total = sum(p.numel() for p in model.parameters())
    embedding = model.get_input_embeddings().weight.numel()
    tied = model.get_output_embeddings().weight is model.get_input_embeddings().weight
    # The output projection is a real matmul even when tied to the input embedding, whose lookup costs nothing.
    matmul = total - embedding + (embedding if tied else 0)
    return {"total": total, "embedding": embedding, "matmul": matmul}


def max_positions(config: PretrainedConfig) -> int | None:
    for name in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def check_vocabulary(config: PretrainedConfig, vocab_size: int) -> None:
    """Refuse a tokenizer with ids the embedding cannot hold."""
    if vocab_size > config.vocab_size:
        raise ConfigError(
            f"vocabulary mismatch: the tokenizer has {vocab_size} tokens but model vocab_size is {config.vocab_size}"
        )


def check_positions(config: PretrainedConfig, seq_len: int) -> None:
    """Refuse rows longer than the model's positions."""
    limit = max_positions(config)
    if limit is not None and seq_len > limit:
        raise ConfigError(f"data.seq_len {seq_len} exceeds the model's {limit} positions (max_position_embeddings)")


def _inline_config(values: dict) -> PretrainedConfig:
    model_type = values.pop("model_type", None)
    if not model_type:
        raise ConfigError("model.config: missing model_type (for example llama, qwen2, mistral, gpt2)")
    _check_causal_lm(model_type, "model.config.model_type")
    config_class = type(AutoConfig.for_model(model_type))
    known = {f.name for f in dataclasses.fields(config_class)} if dataclasses.is_dataclass(config_class) else set()
    known |= set(config_class().to_dict())
    for key in values:
        if key not in known:
            close = difflib.get_close_matches(key, known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"unknown config key 'model.config.{key}' for {model_type}{hint}")
    try:
        return AutoConfig.for_model(model_type, **values)
    except Exception as e:  # transformers validates fields with its own error types
        raise ConfigError(f"model.config: {str(e).strip().splitlines()[0]}") from None


def _check_causal_lm(model_type: str, where: str) -> None:
    if model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        close = difflib.get_close_matches(model_type, MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ConfigError(f"{where}: {model_type!r} is not a causal language model type{hint}")


def _local_path(path: str, base_dir: Path) -> Path:
    resolved = Path(path).expanduser()
    resolved = resolved if resolved.is_absolute() else base_dir / resolved
    if not resolved.exists():
        raise ConfigError(f"model.path: not found: {resolved}")
    if resolved.is_dir() and not (resolved / "config.json").is_file():
        raise ConfigError(f"model.path: {resolved} has no config.json")
    return resolved
