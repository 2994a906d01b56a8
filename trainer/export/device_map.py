"""Device-mapped loading: evaluate and run a model larger than one device, layer by layer across devices.

Training shards every layer over all ranks (FSDP) because every rank must also hold gradients and optimizer
state and work on its own batch. Evaluation and inference need none of that: a forward pass touches one layer at
a time, so the whole model only has to fit on all devices together. A device map places whole decoder layers on
GPUs first, then CPU memory, then files on disk, and moves each offloaded layer to the compute device just before
it runs. That serves one process without a process group, on any number of GPUs (including none), with models
whose weights exceed the GPUs' memory, at the cost of speed that the offloaded layers lose to copying.

Mixtures of experts map the same way: a decoder layer, its router and all of its experts (transformers 5 keeps them
as one module of 3-D tensors) stay whole on one device, and the budget counts every expert, not only the ones a token
uses, since any token may need any of them. Their checkpoints keep the original one-tensor-per-expert names, which
transformers fuses while it loads, so those load through transformers (with the same device map) instead. An
architecture whose layers cannot compute this way is refused in one line while its empty skeleton is built, before
any weight is read (gpt-oss: its attention has no sdpa implementation).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import torch
from accelerate import infer_auto_device_map, init_empty_weights, load_checkpoint_and_dispatch
from accelerate.utils import find_tied_parameters
from safetensors import safe_open
from transformers import AutoConfig, AutoModelForCausalLM
from transformers.conversion_mapping import get_model_conversion_mapping
from transformers.core_model_loading import WeightConverter, rename_source_key

from trainer.config import ConfigError, parse_bytes
from trainer.model.parameters import is_routed_expert

Device = int | str
_SINGLE_FILE = "model.safetensors"
_INDEX_FILE = "model.safetensors.index.json"


def load_device_mapped(
    model_dir: Path,
    max_memory: dict[Device, int | str],
    offload_dir: Path | None = None,
    dtype: torch.dtype = torch.float32,
) -> torch.nn.Module:
    """The causal LM in `model_dir`, spread over GPUs, CPU and disk within `max_memory`, in eval mode.

    `max_memory` keys are GPU indices, "cpu" and "disk"; layers that fit nowhere else go to `offload_dir`.
    Layers compute on the first GPU in `max_memory` (the CPU when there is none): put the inputs there.
    """
    model_dir = Path(model_dir)
    checkpoint = _checkpoint_file(model_dir)
    budget = _parse_max_memory(max_memory, offload_dir)
    model = _empty_model(model_dir, dtype)
    converted = _check_checkpoint_keys(model, model_dir, checkpoint)
    device_map = _device_map(model, budget, dtype)
    _check_offload(model, device_map, budget, offload_dir)
    if converted:
        return _load_converting(model_dir, device_map, offload_dir, dtype)
    model = load_checkpoint_and_dispatch(
        model,
        str(checkpoint),
        device_map=device_map,
        offload_folder=None if offload_dir is None else str(offload_dir),
        dtype=dtype,
        # Caches built during generation stay where the model put them, as transformers' own dispatch does.
        skip_keys=sorted(model._skip_keys_device_placement or []),
    )
    return model.eval()


def device_map_summary(model: torch.nn.Module) -> dict[Device, int]:
    """Parameter bytes per device ("cpu", "disk", 0, ...) of a model loaded with a device map."""
    device_map = getattr(model, "hf_device_map", None)
    if not device_map:
        raise ValueError("the model has no hf_device_map: load it with load_device_mapped")
    summary: dict[Device, int] = {}
    # Offloaded parameters sit on the meta device, so the map, not the tensors, says where each one lives.
    for name, parameter in model.named_parameters():
        device = _mapped_device(device_map, name)
        summary[device] = summary.get(device, 0) + parameter.numel() * parameter.element_size()
    return summary


def offloaded_weight(model: torch.nn.Module, name: str) -> torch.Tensor | None:
    """The value of a parameter that a device map offloaded (it sits on the meta device), read the way the model reads
    it before computing: from the weights its module's accelerate hook loads. None for one that is not offloaded."""
    module_name, _, local = name.rpartition(".")
    weights = getattr(getattr(model.get_submodule(module_name), "_hf_hook", None), "weights_map", None)
    try:
        return None if weights is None else weights[local]
    except KeyError:
        return None


def _checkpoint_file(model_dir: Path) -> Path:
    if not model_dir.is_dir():
        raise ConfigError(f"model directory not found: {model_dir}")
    if not (model_dir / "config.json").is_file():
        raise ConfigError(f"{model_dir}: no config.json (save the model with save_pretrained)")
    for name in (_SINGLE_FILE, _INDEX_FILE):
        if (model_dir / name).is_file():
            return model_dir / name
    if (model_dir / "pytorch_model.bin").is_file():
        raise ConfigError(f"{model_dir}: only safetensors weights load device-mapped; re-save with safe_serialization")
    raise ConfigError(f"{model_dir}: no weights ({_SINGLE_FILE} or {_INDEX_FILE})")


def _parse_max_memory(max_memory: dict[Device, int | str], offload_dir: Path | None) -> dict[Device, int]:
    if not max_memory:
        raise ConfigError('max_memory is empty: give at least one of a GPU index, "cpu" or "disk"')
    gpus = torch.cuda.device_count()
    budget = {}
    for device, size in max_memory.items():
        if device not in ("cpu", "disk") and not (isinstance(device, int) and not isinstance(device, bool)):
            raise ConfigError(f'max_memory: unknown device {device!r}: use GPU indices (0, 1, ...), "cpu" or "disk"')
        if isinstance(device, int) and not 0 <= device < gpus:
            raise ConfigError(f"max_memory: GPU {device} does not exist (this machine has {gpus} CUDA devices)")
        try:
            budget[device] = parse_bytes(size)
        except ConfigError as e:
            raise ConfigError(f"max_memory[{device!r}]: {e}") from None
    if "disk" in budget and offload_dir is None:
        raise ConfigError('max_memory has "disk" but no offload_dir was given to hold the offloaded weights')
    return budget


def _empty_model(model_dir: Path, dtype: torch.dtype) -> torch.nn.Module:
    try:
        config = AutoConfig.from_pretrained(str(model_dir), local_files_only=True)
    except (OSError, ValueError) as e:
        raise ConfigError(f"{model_dir}: {str(e).strip().splitlines()[0]}") from None
    # Meta parameters take no memory, so a skeleton of any size says which weights exist and how big. Buffers stay
    # real: non-persistent ones such as rotary inv_freq are computed at construction and are not in the checkpoint.
    try:
        with init_empty_weights():
            model = AutoModelForCausalLM.from_config(config, dtype=dtype, attn_implementation="sdpa")
    except ValueError as e:  # not a causal LM, or an attention implementation the model lacks
        raise ConfigError(f"{model_dir}: {str(e).strip().splitlines()[0]}") from None
    # init_empty_weights re-creates every parameter assigned under it, which unties tied embeddings.
    model.tie_weights()
    return model


def _check_checkpoint_keys(model: torch.nn.Module, model_dir: Path, checkpoint: Path) -> bool:
    """Refuse a checkpoint that lacks weights; True when its names are transformers' original ones (MoE experts
    stored one tensor per expert), which only transformers' loader converts."""
    # accelerate leaves a weight the checkpoint lacks on the meta device without a word; refuse before loading.
    stored_as_saved = _stored_keys(checkpoint)
    stored, incomplete = _model_keys(model, stored_as_saved)
    needed = set(model.state_dict())
    for group in find_tied_parameters(model):
        if stored & set(group):
            needed -= set(group)  # one stored copy serves every weight tied to it
    missing = sorted((needed - stored) | incomplete)
    if missing:
        raise ConfigError(
            f"{model_dir}: the checkpoint lacks {len(missing)} weights of {type(model).__name__} "
            f"(first: {missing[0]}); was it saved with a different model class or transformers version?"
        )
    return stored != stored_as_saved


def _model_keys(model: torch.nn.Module, stored: set[str]) -> tuple[set[str], set[str]]:
    """The model's names for the checkpoint's weights, by transformers' own conversion rules for this model, and the
    fused expert tensors that some of their per-expert tensors are missing from."""
    transforms = get_model_conversion_mapping(model)
    renamings = [t for t in transforms if not isinstance(t, WeightConverter)]
    converters = [t for t in transforms if isinstance(t, WeightConverter)]
    meta_state = model.state_dict()
    sources: Counter[str] = Counter()
    expected: dict[str, int] = {}
    for key in stored:
        target, pattern = rename_source_key(key, renamings, converters, model.base_model_prefix, meta_state)
        sources[target] += 1
        if pattern is not None and is_routed_expert(target) and target in meta_state:
            # transformers stacks one stored tensor per expert and source pattern (w1 and w3 into gate_up_proj)
            # without checking that every expert is there; a missing one would load as a silently wrong layer.
            patterns = next((len(c.source_patterns) for c in converters if pattern in c.source_patterns), 1)
            expected[target] = meta_state[target].shape[0] * patterns
    return set(sources), {target for target, count in expected.items() if sources[target] < count}


def _load_converting(
    model_dir: Path, device_map: dict[str, Device], offload_dir: Path | None, dtype: torch.dtype
) -> torch.nn.Module:
    # transformers fuses the per-expert tensors into the experts' 3-D ones as it reads them, then places each
    # module where the map says (disk ones as safetensors files in offload_dir), as load_checkpoint_and_dispatch does.
    model = AutoModelForCausalLM.from_pretrained(
        str(model_dir),
        device_map=device_map,
        offload_folder=None if offload_dir is None else str(offload_dir),
        dtype=dtype,
        attn_implementation="sdpa",
        local_files_only=True,
    )
    return model.eval()


def _stored_keys(checkpoint: Path) -> set[str]:
    if checkpoint.name == _INDEX_FILE:
        return set(json.loads(checkpoint.read_text())["weight_map"])
    with safe_open(str(checkpoint), framework="pt") as f:
        return set(f.keys())


def _device_map(model: torch.nn.Module, budget: dict[Device, int], dtype: torch.dtype) -> dict[str, Device]:
    # accelerate treats disk as unbounded and always appends it; the disk budget is checked in _check_offload.
    limits = {device: size for device, size in budget.items() if device != "disk"}
    return dict(
        infer_auto_device_map(
            model,
            max_memory=limits,
            # A layer adds its residual to its submodules' outputs itself; split over two devices, that add would mix
            # tensors from both, since accelerate moves inputs only at the boundaries of the modules it maps.
            no_split_module_classes=sorted(model._no_split_modules or []),
            dtype=dtype,
        )
    )


def _check_offload(
    model: torch.nn.Module, device_map: dict[str, Device], budget: dict[Device, int], offload_dir: Path | None
) -> None:
    on_disk = sum(
        p.numel() * p.element_size() for n, p in model.named_parameters() if _mapped_device(device_map, n) == "disk"
    )
    if on_disk and offload_dir is None:
        raise ConfigError(
            f"{on_disk} bytes of weights do not fit in max_memory; give offload_dir to offload them to disk "
            "or raise the limits"
        )
    if on_disk > budget.get("disk", on_disk):
        raise ConfigError(f'{on_disk} bytes must go to disk but max_memory["disk"] allows {budget["disk"]}')


def _mapped_device(device_map: dict[str, Device], name: str) -> Device:
    # The map names modules; a parameter belongs to the longest module name that prefixes it ("" is the root).
    prefix = name
    while prefix not in device_map:
        if not prefix:
            raise ValueError(f"{name} has no device in the device map")
        prefix = prefix.rpartition(".")[0]
    device = device_map[prefix]
    return str(device) if isinstance(device, torch.device) else device
