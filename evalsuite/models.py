"""The model under evaluation: a trainer run, one of its checkpoints, or a local HF directory, optionally device-mapped.

`--model PATH` is resolved cheaply first (so bad input fails before anything loads); loading then gives the model,
its tokenizer and its provenance: checkpoint hash, config hash, experiment commit, seed and, where known, the
tokenized training data for the contamination check.

On a CUDA device that computes in bf16 the model is evaluated in bf16, with TF32 allowed for what stays in fp32;
on the CPU in fp32. The checkpoint hash is of the weights as stored, before any cast; the runner's cache key
records the dtype scored in.
"""

from __future__ import annotations

import contextlib
import hashlib
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from safetensors import safe_open
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerBase

from evalsuite.errors import BenchError
from trainer.config import ConfigError
from trainer.export.device_map import load_device_mapped, offloaded_weight
from trainer.export.hf import (
    RunCheckpoint,
    find_checkpoint,
    load_model,
    load_run_tokenizer,
    quiet_progress,
    read_provenance,
)
from trainer.export.hf import provenance as run_provenance
from trainer.model.build import max_positions

DEFAULT_MAX_LENGTH = 2048  # for models whose config names no position limit


@dataclass
class ModelSource:
    """Where the weights are: a trainer checkpoint (`run` set) or an HF directory (`hf_dir` set)."""

    path: Path
    run: RunCheckpoint | None = None
    hf_dir: Path | None = None


@dataclass
class LoadedModel:
    model: torch.nn.Module
    tokenizer: PreTrainedTokenizerBase
    device: torch.device
    max_length: int
    device_mapped: bool
    checkpoint_hash: str
    config_hash: str | None
    git_commit: str | None
    seed: int | None
    train_tokens: Path | None  # tokens.npy of the tokenized training data, when known


def resolve(path: Path) -> ModelSource:
    """Say what `path` is, reading only small files."""
    path = Path(path).expanduser().resolve()
    if not path.exists():
        raise BenchError(f"model not found: {path}")
    if (path / "config.json").is_file():
        return ModelSource(path, hf_dir=path)
    if (path / "config.yaml").is_file() or (path / ".metadata").is_file():
        return ModelSource(path, run=find_checkpoint(path))
    raise BenchError(f"{path}: not a meshpilot run, a checkpoint directory or an HF model directory (config.json)")


@contextlib.contextmanager
def open_model(
    source: ModelSource, max_memory: dict | None = None, offload_dir: Path | None = None
) -> Iterator[LoadedModel]:
    """Load the model (device-mapped when `max_memory` is given) for the duration of the `with` block."""
    with tempfile.TemporaryDirectory(prefix="meshpilot-eval-") as scratch, quiet_progress():
        if source.run is not None:
            yield _open_run(source.run, max_memory, offload_dir, Path(scratch))
        else:
            yield _open_hf(source.hf_dir, max_memory, offload_dir)


def _open_run(found: RunCheckpoint, max_memory: dict | None, offload_dir: Path | None, scratch: Path) -> LoadedModel:
    tokenizer, data_dir = load_run_tokenizer(found)
    model = load_model(found)
    _check_vocabulary(model.config.vocab_size, tokenizer, str(found.run.path))
    checkpoint_hash = weights_hash(model)
    if max_memory is not None:
        # accelerate offloads from safetensors files: write the checkpoint as one, then map that.
        model.save_pretrained(str(scratch / "model"), safe_serialization=True)
        del model
        model = _device_mapped(scratch / "model", max_memory, offload_dir)
    info = {**run_provenance(found), "data_dir": str(data_dir)}
    return _loaded(model, tokenizer, max_memory is not None, checkpoint_hash, info)


def _open_hf(directory: Path, max_memory: dict | None, offload_dir: Path | None) -> LoadedModel:
    try:
        config = AutoConfig.from_pretrained(str(directory), local_files_only=True)
        tokenizer = AutoTokenizer.from_pretrained(str(directory), local_files_only=True)
    except (OSError, ValueError) as e:
        raise BenchError(f"{directory}: {str(e).strip().splitlines()[0]}") from None
    if tokenizer.eos_token_id is None:
        raise BenchError(f"{directory}: the tokenizer has no end-of-sequence token")
    _check_vocabulary(config.vocab_size, tokenizer, str(directory))
    if max_memory is not None:
        model = _device_mapped(directory, max_memory, offload_dir)
        checkpoint_hash = weights_hash(model, directory)
    else:
        try:
            model = AutoModelForCausalLM.from_pretrained(
                str(directory), dtype=torch.float32, attn_implementation="sdpa", local_files_only=True
            ).eval()
        except (OSError, ValueError) as e:
            raise BenchError(f"{directory}: {str(e).strip().splitlines()[0]}") from None
        checkpoint_hash = weights_hash(model)
    info = read_provenance(directory) or {}
    return _loaded(model, tokenizer, max_memory is not None, checkpoint_hash, info)


def _device_mapped(directory: Path, max_memory: dict, offload_dir: Path | None) -> torch.nn.Module:
    try:
        return load_device_mapped(directory, max_memory, offload_dir)
    except ConfigError as e:
        raise BenchError(str(e)) from None


def _loaded(model, tokenizer, device_mapped: bool, checkpoint_hash: str, info: dict) -> LoadedModel:
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token  # padding is masked out; any id will do
    if device_mapped:
        first = next((d for d in model.hf_device_map.values() if isinstance(d, int)), "cpu")
        device = torch.device("cuda", first) if isinstance(first, int) else torch.device("cpu")
    else:
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        bf16 = device.type == "cuda" and torch.cuda.is_bf16_supported(including_emulation=False)
        if device.type == "cuda":
            torch.set_float32_matmul_precision("high")  # TF32 for the fp32 matmuls left (an fp32 model)
        model.to(device=device, dtype=eval_dtype(device, bf16))
    data_dir = info.get("data_dir")
    tokens = Path(data_dir) / "tokens.npy" if data_dir else None
    return LoadedModel(
        model=model,
        tokenizer=tokenizer,
        device=device,
        max_length=max_positions(model.config) or DEFAULT_MAX_LENGTH,
        device_mapped=device_mapped,
        checkpoint_hash=checkpoint_hash,
        config_hash=info.get("config_hash"),
        git_commit=info.get("git_commit"),
        seed=info.get("seed"),
        train_tokens=tokens if tokens is not None and tokens.is_file() else None,
    )


def eval_dtype(device: torch.device, bf16_supported: bool) -> torch.dtype:
    """bf16 on a CUDA device with native bf16 (half the memory and bandwidth of fp32; scores move by bf16
    rounding only), fp32 elsewhere: the CPU's bf16 matmuls are slower than its fp32 ones, and older GPUs have none."""
    return torch.bfloat16 if device.type == "cuda" and bf16_supported else torch.float32


def _check_vocabulary(vocab_size: int, tokenizer: PreTrainedTokenizerBase, where: str) -> None:
    if len(tokenizer) > vocab_size:
        raise BenchError(
            f"{where}: vocabulary mismatch: the tokenizer has {len(tokenizer)} tokens but the model's vocab_size is "
            f"{vocab_size}"
        )


def weights_hash(model: torch.nn.Module, directory: Path | None = None) -> str:
    """SHA-256 of every parameter's name, dtype, shape and bytes, in name order; tied parameters count once.

    A device-mapped model keeps offloaded parameters on the meta device, so their bytes are read from the
    safetensors files in `directory`; the hash is the same as that of the same weights loaded in memory.
    """
    digest = hashlib.sha256()
    stored = _safetensors_index(directory) if directory is not None else {}
    for name, parameter in sorted(model.named_parameters()):
        tensor = parameter if parameter.device.type != "meta" else _read_tensor(model, stored, name)
        tensor = tensor.detach().to("cpu").contiguous()
        digest.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)}:".encode())
        digest.update(np.ascontiguousarray(tensor.view(torch.uint8).numpy()).data)
    return digest.hexdigest()[:16]


def _safetensors_index(directory: Path) -> dict[str, Path]:
    index = {}
    for file in sorted(directory.glob("*.safetensors")):
        with safe_open(str(file), "pt") as f:
            index.update(dict.fromkeys(f.keys(), file))
    return index


def _read_tensor(model: torch.nn.Module, stored: dict[str, Path], name: str) -> torch.Tensor:
    if name not in stored:
        # A tensor transformers builds while loading (an MoE's experts fused from per-expert ones) is in no file
        # under its name; the device map's offloaded copy is what the model computes with.
        offloaded = offloaded_weight(model, name)
        if offloaded is None:
            raise BenchError(f"cannot hash {name}: it is offloaded and not in the model's safetensors files")
        return offloaded
    with safe_open(str(stored[name]), "pt") as f:
        return f.get_tensor(name)
