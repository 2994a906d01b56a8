"""The model: a transformers causal LM from an inline config, a local config.json or a local checkpoint.

Nothing is fetched from a hub: configs are built in memory or read from local files only. The modeling code
(transformers' model classes, DTensor) is imported by the functions that build models: it takes over a second,
and the launcher and the planner only read configs.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import copy
import dataclasses
import difflib
import hashlib
import json
import math
import os
from collections.abc import Iterator
from pathlib import Path

import torch
from safetensors import safe_open
from transformers import AutoConfig, PretrainedConfig
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


def build_model(config: PretrainedConfig, weights: Path | None, seed: int, device: str = "cpu") -> torch.nn.Module:
    """The whole model on `device`, initialised from `seed` or loaded from the local weights (fp32)."""
    model = meta_model(config)
    materialize(model, torch.device(device), config, weights, seed)
    return model


def meta_model(config: PretrainedConfig) -> torch.nn.Module:
    """The model's structure on the meta device: shapes and modules, no memory. Parallelise it, then `materialize`."""
    # from_config writes the attention implementation into the config it is given: a copy keeps the caller's (and
    # every other model built from it, such as materialize's template) from switching back to SDPA.
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(copy.deepcopy(config), attn_implementation="sdpa", dtype=torch.float32)


@torch.no_grad()
def materialize(
    model: torch.nn.Module,
    device: torch.device,
    config: PretrainedConfig,
    weights: Path | None,
    seed: int,
    shard_local: bool = True,
) -> None:
    """Give a meta-device model (whole, or this rank's parallelised part) its memory on `device` and its values.

    Initialised (no `weights`), each tensor's values are a function of (seed, its name) alone, whatever the
    layout and the device: the tensor is cut into fixed tiles of its global shape (`_tile_shape`), each drawn by
    the model's own init rule from a CPU generator seeded by (seed, name, tile) and copied into the shard's memory
    on `device`. A rank draws only the tiles its shard overlaps, about its share of the random values, with its
    share of the cores (`_fill_tiles`), and every layout starts from exactly the single-process weights.
    Tensors whose rule is not elementwise (rotary frequencies, an embedding's zeroed padding row, shape-dependent
    rules), and all under `shard_local=False` (the way before: bench/setup_time.py's baseline), are made whole
    per module on the CPU from a generator seeded by (seed, module name), then this rank's shard copied into place.
    Read from a checkpoint, each tensor is read whole and only this rank's shard kept. No rank ever holds more than
    its share plus one module.
    """
    tied = _tied_names(model)
    with setup_threads():
        model.to_empty(device=device)
        _tie(model, tied)
        _fill(model, device, config, weights, seed, shard_local)


@contextlib.contextmanager
def setup_threads() -> Iterator[int]:
    """Run with this rank's share of the cores it may use (`setup_thread_count`) as torch's intra-op threads,
    then back to what it had: torchrun starts every rank with OMP_NUM_THREADS=1, right for training side by side
    but leaving all but one core idle while the ranks fill their weights."""
    before = torch.get_num_threads()
    share = setup_thread_count()
    torch.set_num_threads(max(before, share))
    try:
        yield share
    finally:
        torch.set_num_threads(before)


def setup_thread_count() -> int:
    """The cores this process may run on, over the ranks on this node (torchrun's LOCAL_WORLD_SIZE): at least 1."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, cores // int(os.environ.get("LOCAL_WORLD_SIZE", "1")))


def _fill(
    model: torch.nn.Module, device: torch.device, config: PretrainedConfig, weights: Path | None, seed: int,
    shard_local: bool,
) -> None:  # fmt: skip
    """`materialize`'s values, once the memory exists."""
    whole = meta_model(config)  # names every module, and owns the init rule (a pipeline's RankModel has none)
    reference = dict(whole.named_modules())
    stored = _CheckpointTensors(weights) if weights is not None else None
    done: set[int] = set()  # tied parameters are filled once, from their first module
    for name, module in model.named_modules():
        own = [(n, t) for n, t in (*module.named_parameters(recurse=False), *module.named_buffers(recurse=False))]
        own = [(n, t) for n, t in own if id(t) not in done]
        if not own:
            continue
        rules = _init_rules(reference[name], whole) if stored is None and shard_local else {}
        full = None  # the module's full tensors, made only where a tensor needs them
        for local_name, target in own:
            qualified = f"{name}.{local_name}" if name else local_name
            done.add(id(target))
            source = stored.get(qualified) if stored is not None else None
            if source is None and stored is not None and isinstance(target, torch.nn.Parameter):
                raise ConfigError(f"model.path: the checkpoint has no tensor {qualified!r}")
            rule = rules.get(local_name) if source is None else None
            if rule is not None and _fill_local(target, rule, f"{seed}:{qualified}"):
                continue
            if source is None:
                full = full if full is not None else _initialised(reference[name], whole, seed, name)
                source = full[local_name]
            _copy_shard(target, source)


# Tiles of a tensor's global shape (viewed as rows x the rest) that shard-local initialisation fills one generator
# each: at most 512 columns and 2^18 values, so that a shard's edges waste little and a 70B model needs a few
# hundred thousand tiles over all ranks.
_TILE_VALUES, _TILE_COLUMNS = 2**18, 512
# The init functions a rule may consist of to be replayed tile by tile: each sets every value of its tensor alone,
# from scalars that do not depend on the tensor's shape. The random ones take the tile's generator.
_RANDOM_INITS = {torch.nn.init.normal_, torch.nn.init.uniform_, torch.nn.init.trunc_normal_, torch.Tensor.normal_,
                 torch.Tensor.uniform_}  # fmt: skip
_FIXED_INITS = {torch.nn.init.zeros_, torch.nn.init.ones_, torch.nn.init.constant_, torch.Tensor.fill_,
                torch.Tensor.zero_}  # fmt: skip


class _RecordingInits(torch.overrides.TorchFunctionMode):
    """Records the init calls made on `tensors` (by id) without running them; a tensor touched by anything else
    (an indexed row, a copy, a shape-dependent rule) gets no rule (None)."""

    def __init__(self, tensors: dict[int, str]):
        super().__init__()
        self.tensors, self.rules = tensors, {name: [] for name in tensors.values()}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        first = kwargs.get("tensor", args[0] if args else None)
        name = self.tensors.get(id(first)) if isinstance(first, torch.Tensor) else None
        if name is None or getattr(func, "__name__", "") == "__get__":  # not ours, or reading an attribute
            return func(*args, **kwargs)
        scalars = all(isinstance(a, int | float | bool) for a in args[1:])
        if self.rules[name] is not None and func in _RANDOM_INITS | _FIXED_INITS and scalars:
            kept = {k: v for k, v in kwargs.items() if k not in ("tensor", "generator")}
            self.rules[name].append((func, tuple(args[1:]), kept))
        else:
            self.rules[name] = None
        return first


def _init_rules(template: torch.nn.Module, whole: torch.nn.Module) -> dict[str, list | None]:
    """Each of a module's own tensors' init rule (the model's `_init_weights` for it, recorded on the meta device):
    the init calls to replay on a tile, or None where it cannot be replayed tile by tile."""
    module = copy.copy(template)
    module._modules = {}
    module._parameters = {
        n: None if p is None else torch.nn.Parameter(torch.empty_like(p, device="meta"), p.requires_grad)
        for n, p in template._parameters.items()
    }
    module._buffers = {
        n: None if b is None else torch.empty_like(b, device="meta") for n, b in template._buffers.items()
    }
    tensors = {**dict(module.named_parameters()), **dict(module.named_buffers())}
    recording = _RecordingInits({id(t): n for n, t in tensors.items()})
    with recording:
        whole._init_weights(module)
    # A tensor the rule never touched keeps whatever empty memory holds: leave it to the whole-module path.
    return {name: rule or None for name, rule in recording.rules.items()}


def _fill_local(target: torch.Tensor, rule: list, key: str) -> bool:
    """Fill this rank's part of `target` tile by tile (see `materialize`); False where its shard is not a block of
    the tensor's rows x columns view that this can cut (then the caller makes the whole tensor)."""
    # DTensor only for a sharded build
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor._utils import compute_local_shape_and_global_offset

    shape = tuple(target.shape)
    local = target.to_local() if isinstance(target, DTensor) else target
    if isinstance(target, DTensor):
        local_shape, offset = compute_local_shape_and_global_offset(shape, target.device_mesh, target.placements)
    else:
        local_shape, offset = shape, (0,) * len(shape)
    if tuple(local.shape) != tuple(local_shape):
        return False
    if len(shape) > 2 and (tuple(local_shape[2:]) != shape[2:]):  # cut along a dim the 2-D view merges
        return False
    # A cut along dim 1 (FSDP2's split of experts fewer than its ranks) is a block of columns of the 2-D view too.
    inner = math.prod(shape[2:])
    rows, columns = (shape[0] if shape else 1), math.prod(shape[1:])
    top, left = (offset[0] if shape else 0), (offset[1] * inner if len(shape) >= 2 else 0)
    height, width = (local_shape[0] if shape else 1), (local_shape[1] * inner if len(shape) >= 2 else columns)
    if local.numel() == 0:
        return True
    if not local.is_contiguous():
        return False
    _fill_tiles(rule, key, (rows, columns), (top, left), local.view(height, width))
    return True


def _tile_shape(rows: int, columns: int) -> tuple[int, int]:
    tile_columns = min(columns, _TILE_COLUMNS)
    return max(1, _TILE_VALUES // tile_columns), tile_columns


def _fill_tiles(rule: list, key: str, shape: tuple[int, int], corner: tuple[int, int], out: torch.Tensor) -> None:
    """Fill `out`, rows [top, top + height) x columns [left, left + width) of a (rows, columns) tensor whose tile
    (i, j) is `rule` replayed on an fp32 CPU tile from a generator seeded by (key, i, j). Each tile is drawn whole,
    whatever part of it `out` takes, so every shard that overlaps it gets the same values; on the CPU, so a CUDA
    run starts from a CPU run's weights. Tiles are drawn by this rank's share of the cores (`setup_thread_count`
    workers, each op on one thread: torch's CPU generator draws serially)."""
    rows, columns = shape
    (top, left), (height, width) = corner, out.shape
    if not any(func in _RANDOM_INITS for func, _, _ in rule):  # the same value everywhere: no tiles needed
        _replay(rule, out, None)
        return
    tile_rows, tile_columns = _tile_shape(rows, columns)

    @torch.no_grad()  # grad mode is per thread: the workers' too
    def fill(i: int, j: int) -> None:
        r0, r1 = i * tile_rows, min((i + 1) * tile_rows, rows)
        c0, c1 = j * tile_columns, min((j + 1) * tile_columns, columns)
        generator = torch.Generator().manual_seed(
            int.from_bytes(hashlib.sha256(f"{key}:{i}:{j}".encode()).digest()[:8], "little")
        )
        tile = torch.empty(r1 - r0, c1 - c0, dtype=torch.float32)
        _replay(rule, tile, generator)
        a, b = max(r0, top), min(r1, top + height)
        c, d = max(c0, left), min(c1, left + width)
        out[a - top : b - top, c - left : d - left].copy_(tile[a - r0 : b - r0, c - c0 : d - c0])

    tiles = [(i, j) for i in range(top // tile_rows, -(-(top + height) // tile_rows))
             for j in range(left // tile_columns, -(-(left + width) // tile_columns))]  # fmt: skip
    workers = min(setup_thread_count(), len(tiles))
    if workers <= 1:
        for i, j in tiles:
            fill(i, j)
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the workers are the parallelism
    try:
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            for done in [pool.submit(fill, i, j) for i, j in tiles]:
                done.result()
    finally:
        torch.set_num_threads(threads)


def _replay(rule: list, tensor: torch.Tensor, generator: torch.Generator | None) -> None:
    for func, args, kwargs in rule:
        func(tensor, *args, **kwargs, **({"generator": generator} if func in _RANDOM_INITS else {}))


def _tied_names(model: torch.nn.Module) -> list[list[str]]:
    """The names of each parameter shared by several modules (an output head tied to the input embedding)."""
    names: dict[int, list[str]] = {}
    for name, parameter in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(parameter), []).append(name)
    return [group for group in names.values() if len(group) > 1]


def _tie(model: torch.nn.Module, tied: list[list[str]]) -> None:
    """Share again what `to_empty` gave separate storage (it makes each module's tensors anew; FSDP2 keeps its
    own shared parameters shared): without this, one process, DDP and tensor parallelism trained the head and the
    embedding apart, while FSDP2, the memory model and the Hugging Face export took them as one."""
    for first, *others in tied:
        shared = model.get_parameter(first)
        for name in others:
            owner, _, attribute = name.rpartition(".")
            setattr(model.get_submodule(owner), attribute, shared)


def _initialised(template: torch.nn.Module, whole: torch.nn.Module, seed: int, name: str) -> dict[str, torch.Tensor]:
    """A CPU copy of one module (its own tensors only), initialised by the model's own rule from a seed that
    depends on the module's name alone, not on what else this rank holds."""
    module = copy.copy(template)  # shallow, with fresh tensors of its own and no children
    module._modules = {}
    module._parameters = {
        n: None if p is None else torch.nn.Parameter(torch.empty_like(p, device="cpu"), p.requires_grad)
        for n, p in template._parameters.items()
    }
    module._buffers = {
        n: None if b is None else torch.empty_like(b, device="cpu") for n, b in template._buffers.items()
    }
    digest = hashlib.sha256(f"{seed}:{name}".encode()).digest()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int.from_bytes(digest[:8], "little"))
        whole._init_weights(module)
    return {**dict(module.named_parameters()), **dict(module.named_buffers())}


def _copy_shard(target: torch.Tensor, full: torch.Tensor) -> None:
    """Copy this rank's part of `full` into `target` (a DTensor's local shard, or a whole tensor)."""
    # DTensor only for a sharded build
    from torch.distributed.tensor import DTensor, distribute_tensor

    full = full.to(target.dtype)
    if isinstance(target, DTensor):
        # src_data_rank=None: every rank already holds the full tensor, so each takes its own shard, no messages.
        shard = distribute_tensor(full, target.device_mesh, target.placements, src_data_rank=None)
        target.to_local().copy_(shard.to_local())
    else:
        target.copy_(full)


class _CheckpointTensors:
    """A local checkpoint's tensors by name, each read only when asked for (safetensors, or a memory-mapped
    pytorch_model.bin), so a rank reads whole one tensor at a time and keeps only its shard."""

    def __init__(self, directory: Path):
        self.files: dict[str, Path] = {}
        index = directory / "model.safetensors.index.json"
        if index.is_file():
            weight_map = json.loads(index.read_text())["weight_map"]
            self.files = {name: directory / file for name, file in weight_map.items()}
        elif (directory / "model.safetensors").is_file():
            with safe_open(str(directory / "model.safetensors"), "pt") as f:
                self.files = {name: directory / "model.safetensors" for name in f.keys()}  # noqa: SIM118
        self.bin = None
        if not self.files:
            self.bin = torch.load(directory / "pytorch_model.bin", mmap=True, weights_only=True, map_location="cpu")

    def get(self, name: str) -> torch.Tensor | None:
        if self.bin is not None:
            return self.bin.get(name)
        if name not in self.files:
            return None
        with safe_open(str(self.files[name]), "pt") as f:
            return f.get_tensor(name)


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
    # Read by modeling code whose config class does not declare it (Qwen3-MoE's attention: getattr(config,
    # "head_dim", hidden_size // heads); Qwen3-30B-A3B's config.json sets 128, not 2048 / 32).
    known.add("head_dim")
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
