"""The experiment file: typed sections, strict parsing, overrides and a stable hash.

Every key is checked against the dataclasses below, so a typo fails before any process starts, with the
closest valid key suggested. `model.config` is a transformers config and is checked by trainer.model.build.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import math
import re
import sys
import types
import typing
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

import yaml

from trainer.layout import Layout


class ConfigError(ValueError):
    """A problem with the experiment file or the command line, phrased for the user in one line."""


# How a one-line error reaches the user (`meshpilot` exits with code 2 after it), and how a job's supervisor finds
# it again in the launcher's log.
ERROR_PREFIX = "meshpilot: error: "


def print_error(error: BaseException | str) -> None:
    print(f"{ERROR_PREFIX}{error}", file=sys.stderr)


def printed_error(line: str) -> str | None:
    """The error a line of meshpilot's output reports, or None for any other line."""
    return line.removeprefix(ERROR_PREFIX) if line.startswith(ERROR_PREFIX) else None


@dataclass
class ModelSpec:
    config: dict[str, Any] | None = None  # inline transformers config: model_type plus its fields
    path: str | None = None  # a local config.json, or a directory with config.json (weights loaded if present)


@dataclass
class DataSpec:
    train: str | list[str] = "builtin:stdlib-docs"  # builtin:NAME, or local .txt/.jsonl/.json/.parquet files
    seq_len: int = 256
    packing: bool = True
    text_field: str = "text"  # the column holding the text in jsonl/parquet files
    text_unit: str = "paragraph"  # how .txt files split into documents: paragraph | line | file
    shuffle: bool = True
    # Fine-tuning (trainer.data.chat): text | instruction | chat. Instruction and chat read .jsonl files and count
    # the loss on response (assistant) tokens only.
    format: str = "text"
    prompt_field: str = "prompt"  # instruction: the field holding the prompt
    response_field: str = "response"  # instruction: the field holding the response
    messages_field: str = "messages"  # chat: the field holding the list of {role, content} turns
    chat_template: str | None = None  # a named template (simple) or a Jinja file; default: the tokenizer's own


# Data keys added after runs were recorded: left out of config.yaml and the hash while at their defaults, so the
# files and hashes of earlier runs stay as they were.
_LATER_DATA_KEYS = ("format", "prompt_field", "response_field", "messages_field", "chat_template")
# The same for the other sections (mixture-of-experts training: the experts' kernel, expert parallelism).
_LATER_KEYS = {
    "data": _LATER_DATA_KEYS,
    "train": ("experts", "zero_stage", "float8_recipe", "profile_steps", "loss"),
    "layout": ("ep",),
}
# Values of a later key also written as nothing: train.zero_stage 3 is what auto runs where no plan chose and what
# every run recorded before auto ran, so their config.yaml and hash stay as they were (a resume compares alike);
# train.loss chunked likewise.
_UNWRITTEN = {("train", "zero_stage"): (3,), ("train", "loss"): ("chunked",)}


# The values some train keys take (checked before launch by trainer.launch.launcher).
# train.gns_every's default: the gradient noise scale is measured on every 10th step. A measured step reduces the
# gradient of its first micro-batch round once more (one more all-reduce or reduce-scatter of the whole gradient) and
# takes its norm, blocking on the result: at most one more gradient reduction, which on a GPU cluster is rarely more
# than a third of a step (the step's own reduction mostly overlaps its backward; this one waits). Every 10th step
# that is at most ~3% of the run's time, and 1-2% for the layouts the planner usually picks (trainer.costs.throughput
# prices it, amortised over the N steps: `noise_scale_bytes`). The estimate is a moving average over many steps
# (trainer.rank.noise_scale, beta 0.95: about 20 measurements), so measuring every 10th step still follows a run of a
# few hundred steps; `gns_every: 1` measures every step, 0 never.
GNS_EVERY = 10
OPTIMIZERS = ("adamw", "galore_adamw")
SCHEDULES = ("cosine", "linear", "constant")
GALORE_PROJ_TYPES = ("std", "reverse_std", "right", "left", "full")
FSDP_REDUCE_DTYPES = ("fp32", "bf16")  # train.fsdp_reduce_dtype
# train.fsdp_grad_sync: when FSDP2 reduce-scatters the gradients of an accumulated step. micro_batch (torchtitan's
# choice) after every micro-batch's backward, so a rank only ever holds its gradient shard; step after the last
# only, one reduce-scatter per step instead of one per micro-batch, but until then every rank holds an unsharded
# gradient of its whole model share (trainer.costs.memory_model prices both, trainer.costs.throughput their
# collectives).
FSDP_GRAD_SYNCS = ("micro_batch", "step")
# train.zero_stage: what FSDP2 (dp_shard > 1) keeps sharded between uses, as DeepSpeed's ZeRO stages name it. 3
# (FSDP2's default): parameters, gradients and optimizer state, each layer's parameters all-gathered in forward and
# again in backward for every micro-batch. 2 (FSDP1's SHARD_GRAD_OP): a layer's parameters gathered once per
# micro-batch and kept from its forward to its backward. 1 (Megatron's distributed optimizer): parameters gathered
# once per optimizer step and kept across its micro-batches, the gradient accumulated whole and reduce-scattered once
# per step (whatever train.fsdp_grad_sync says); only the fp32 master weights and the optimizer state stay sharded.
# auto (the default): `meshpilot plan` chooses, for each layout that shards, the fastest stage (and
# train.fsdp_grad_sync, where that is not set) that its memory fits (trainer.costs.planner), and its exports and a
# sweep's trials run with the choice written out; a run started with auto, where no plan chose, is stage 3
# (resolve_zero_stage, the one place auto becomes a stage: nothing past it sees auto).
ZERO_STAGES = (3, 2, 1)
ZERO_STAGE_SETTINGS = ("auto", *ZERO_STAGES)
# train.precision (auto: resolve_precision, which never picks fp8). fp8 is bf16 mixed precision (everything bf16
# does: FSDP2's bf16 parameters, autocast) plus float8 matmuls in the decoder layers' linear layers through
# torchao.float8 (trainer.parallel.float8), in train.float8_recipe's scaling; CUDA GPUs of compute capability 8.9+.
PRECISIONS = ("auto", "fp32", "bf16", "fp8")
# train.float8_recipe: torchao's scaling recipes. tensorwise: one scale per tensor (the fastest); rowwise: one per
# row, more accurate for outliers, a little slower (torchao's float8 README).
FLOAT8_RECIPES = ("tensorwise", "rowwise")
# train.loss: how the output head and cross-entropy run outside pipelines (whose last stage always takes the whole
# logits). chunked: a few hundred tokens' logits at a time (trainer.model.loss), never the whole micro-batch's, kept
# out of train.compile's graph. whole: the micro-batch's logits at once, one fp32 cross-entropy over them, inside
# train.compile's whole-step graph, where inductor fuses it: faster on a GPU (the head's forward runs once, in
# full-size matmuls, and nothing breaks the graph; the compiled 1B model on an H200: 48.3% MFU against 37.6%) for
# about tokens x vocab x 10 bytes more at its peak (trainer.costs.memory_model prices both, trainer.costs.throughput
# the chunked loss's second head forward). auto (the default): whole where it is inside a compiled graph on a GPU
# and its memory fits, else chunked (trainer.parallel.compile.resolve_loss, the one place auto becomes a loss, for
# the launcher and the planner alike).
LOSSES = ("auto", "chunked", "whole")
# train.activation_checkpointing, from most memory to least: none keeps every activation; selective keeps the
# matmul and attention outputs of each decoder layer and recomputes the cheap ops between them; full keeps only each
# layer's input and recomputes the whole layer
# (trainer.parallel.activation_checkpointing.enable_activation_checkpointing).
CHECKPOINTING_MODES = ("none", "selective", "full")
# One of CHECKPOINTING_MODES: train.activation_checkpointing resolved once at the door (checkpointing_mode), the value
# the cost models take.
Checkpointing = Literal["none", "selective", "full"]
# The modes the key took when it was a bool, stored as those bools: the files and config hashes of runs recorded
# then stay as they were, and code that only asks "is anything recomputed?" may test the value's truth.
_CHECKPOINTING_STORED = {"none": False, "full": True, "selective": "selective"}


def normalize_checkpointing(value: bool | str) -> bool | str:
    """train.activation_checkpointing as stored: False (none), True (full) or "selective"; true/false and the
    three names are accepted. A bad value is a ConfigError."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in _CHECKPOINTING_STORED:
        return _CHECKPOINTING_STORED[value.lower()]
    raise ConfigError(
        f"train.activation_checkpointing: expected one of {', '.join(CHECKPOINTING_MODES)} (or true/false), "
        f"got {value!r}"
    )


def checkpointing_mode(value: bool | str) -> Checkpointing:
    """The name of a train.activation_checkpointing value: none, selective or full."""
    value = normalize_checkpointing(value)
    return value if isinstance(value, str) else ("full" if value else "none")


def checkpointing_rank(value: bool | str) -> int:
    """0, 1, 2 for none, selective, full: how much a value recomputes, to sort by (False and "selective" do not
    compare with each other)."""
    return CHECKPOINTING_MODES.index(checkpointing_mode(value))


@dataclass
class GaLoreSpec:
    """GaLore (train.optimizer: galore_adamw): Adam moments kept in a rank-`rank` projection of the gradient."""

    rank: int = 128  # projection rank, capped at each matrix's smaller side
    update_proj_gap: int = 200  # steps between recomputing the projection (an SVD of the gradient)
    scale: float = 0.25  # multiplies the update projected back to full rank
    proj_type: str = "std"  # std | reverse_std | right | left | full
    target_modules: list[str] = field(default_factory=lambda: ["attn", "mlp"])  # name substrings of 2-D weights


@dataclass
class TrainSpec:
    steps: int = 200
    global_batch_tokens: int = 16384  # rows of seq_len per optimizer step, over all ranks, times seq_len
    micro_batch: int = 8  # rows per rank per forward pass; accumulation makes up the rest
    lr: float = 3.0e-4
    lr_schedule: str = "cosine"  # cosine | linear | constant, after linear warm-up
    warmup_steps: int = 10
    min_lr_ratio: float = 0.1
    optimizer: str = "adamw"  # adamw | galore_adamw
    weight_decay: float = 0.1
    betas: list[float] = field(default_factory=lambda: [0.9, 0.95])
    eps: float = 1.0e-8
    galore: GaLoreSpec = field(default_factory=GaLoreSpec)  # read only by optimizer galore_adamw
    grad_clip: float = 1.0  # max global grad norm; 0 turns clipping off
    seed: int = 0
    precision: str = "auto"  # auto (resolve_precision) | fp32 | bf16 | fp8 (bf16 plus float8 matmuls, sm89+ GPUs)
    float8_recipe: str = "tensorwise"  # under fp8: tensorwise | rowwise scaling of the float8 casts (torchao)
    fsdp_reduce_dtype: str = "fp32"  # under bf16 with FSDP2: the gradient reduce-scatter's dtype, fp32 | bf16
    fsdp_grad_sync: str = "micro_batch"  # micro_batch | step: when FSDP2 reduce-scatters accumulated gradients
    zero_stage: int | str = "auto"  # auto | 3 | 2 | 1: what FSDP2 keeps sharded between uses (ZERO_STAGES above)
    compile: bool = False
    loss: str = "auto"  # auto | chunked | whole: the head and cross-entropy a few hundred tokens at a time or at once
    attention: str = "auto"  # auto | dense | flex: how packed documents are kept apart (trainer.model.attention)
    # auto | loop | grouped_mm: how a mixture-of-experts model's experts compute (trainer.parallel.expert_parallel)
    experts: str = "auto"
    activation_checkpointing: bool | str = False  # none | selective | full (true/false: full/none); see above
    gns_every: int = GNS_EVERY  # steps between gradient noise scale measurements (0: off; 1: every step), see above
    pp_schedule: str = "1f1b"  # pipeline schedule when layout.pp > 1: gpipe | 1f1b | interleaved_1f1b
    pp_stages_per_rank: int = 1  # pipeline stages each rank holds; 2 or more with interleaved_1f1b
    checkpoint_every: int = 0  # steps between checkpoints; 0: none during the run
    save_final_checkpoint: bool = True
    keep_checkpoints: int = 2
    save_hf: bool = False  # after a successful run: its final checkpoint as an HF directory, RUN/hf
    timing_warmup_steps: int = 2  # steps left out of tokens/s (compilation, allocator warm-up)
    # The last this many warm-up steps profiled on rank 0 (torch.profiler) into profile.json: fewer than
    # timing_warmup_steps, so that the profiler's cost never reaches tokens/s (trainer.rank.profiling).
    profile_steps: int = 0
    # Seconds a rank may wait in one collective before the run fails (trainer.rank.loop.collective_timeouts): longer
    # through set-up and the untimed first steps (at least one), where compilation (each pipeline stage its own) and
    # building a large model keep ranks apart for longer than a step's collectives ever take.
    collective_timeout_s: int = 300
    first_steps_timeout_s: int = 1800
    # any of tensorboard, wandb, mlflow, trackio (trainer.rank.trackers)
    trackers: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.activation_checkpointing = normalize_checkpointing(self.activation_checkpointing)
        if self.fsdp_grad_sync not in FSDP_GRAD_SYNCS:
            raise ConfigError(
                f"train.fsdp_grad_sync: {self.fsdp_grad_sync!r} is not one of {', '.join(FSDP_GRAD_SYNCS)}"
            )
        if self.loss not in LOSSES:
            raise ConfigError(f"train.loss: {self.loss!r} is not one of {', '.join(LOSSES)}")
        if self.zero_stage not in ZERO_STAGE_SETTINGS or isinstance(self.zero_stage, bool):
            raise ConfigError(
                f"train.zero_stage: {self.zero_stage!r} is not one of {', '.join(map(str, ZERO_STAGE_SETTINGS))}"
            )


@dataclass
class HardwareSpec:
    device_type: str = "auto"  # auto | cpu | cuda
    devices: int | None = None  # processes per node; default: every GPU, or 1 on CPU
    device_mem: str | None = None
    nodes: int = 1


@dataclass
class SearchSpec:
    layouts: str | list[str] = "auto"
    objective: str = "tokens_per_s"  # one of OBJECTIVES
    trials: int = 12
    trial_steps: int = 20


@dataclass
class BenchSpec:
    suites: list[str] = field(default_factory=lambda: ["builtin"])


@dataclass
class PullRequestSpec:
    provider: str = "local"
    base: str = "main"
    draft: bool = True
    remote: str = "origin"


@dataclass
class ReportSpec:
    dir: str = "docs/experiments"
    pr: PullRequestSpec = field(default_factory=PullRequestSpec)


@dataclass
class Experiment:
    model: ModelSpec = field(default_factory=ModelSpec)
    tokenizer: str = "builtin"  # builtin (byte-level BPE trained on the data) or a local tokenizer directory
    data: DataSpec = field(default_factory=DataSpec)
    train: TrainSpec = field(default_factory=TrainSpec)
    layout: Layout = field(default_factory=Layout)
    hardware: HardwareSpec = field(default_factory=HardwareSpec)
    search: SearchSpec = field(default_factory=SearchSpec)
    bench: BenchSpec = field(default_factory=BenchSpec)
    report: ReportSpec = field(default_factory=ReportSpec)
    base_dir: str = field(default=".", metadata={"internal": True})  # relative paths resolve against it

    def resolve_path(self, path: str) -> Path:
        p = Path(path).expanduser()
        return p if p.is_absolute() else Path(self.base_dir) / p

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d.pop("base_dir")
        defaults = dataclasses.asdict(Experiment())
        for section, keys in _LATER_KEYS.items():
            for key in keys:
                if d[section][key] == defaults[section][key] or d[section][key] in _UNWRITTEN.get((section, key), ()):
                    del d[section][key]
        return d

    def config_hash(self) -> str:
        """Hash of everything that determines the numbers a run produces."""
        config = self.to_dict()
        # Where the numbers are also sent, how long a collective may wait and which warm-up steps are profiled
        # change none of them (and leave the hashes of earlier runs as they were).
        for key in ("trackers", "collective_timeout_s", "first_steps_timeout_s", "profile_steps"):
            config["train"].pop(key, None)
        blob = json.dumps(config, sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


# Sections that may be written as a bare string in the file ("hardware: auto", "layout: auto").
_SHORTHANDS = {"hardware": {"auto": {}}, "layout": {"auto": {}}}


def load_experiment(path: str | Path, overrides: list[str] = ()) -> Experiment:
    """Read an experiment file, apply `key=value` overrides, and check every key and type."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"experiment file not found: {path}")
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {str(e).splitlines()[0]}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the experiment file must be a mapping of sections")
    for override in overrides:
        apply_override(raw, override)
    experiment = experiment_from_dict(raw)
    experiment.base_dir = str(path.resolve().parent)
    return experiment


def experiment_from_dict(raw: dict[str, Any]) -> Experiment:
    raw = dict(raw)
    for section, shorthands in _SHORTHANDS.items():
        if isinstance(raw.get(section), str) and raw[section] in shorthands:
            raw[section] = shorthands[raw[section]]
    return _build(Experiment, raw, "")


def apply_override(raw: dict[str, Any], override: str) -> None:
    """`train.lr=1e-3` sets raw["train"]["lr"]; the value is read as YAML (numbers, bools, lists)."""
    key, sep, value = override.partition("=")
    if not sep or not key:
        raise ConfigError(f"--set expects key=value, got {override!r}")
    *parents, leaf = key.strip().split(".")
    node = raw
    for name in parents:
        child = node.get(name)
        if isinstance(child, str) and child in _SHORTHANDS.get(name, {}):
            child = dict(_SHORTHANDS[name][child])
        if child is None:
            child = {}
        if not isinstance(child, dict):
            raise ConfigError(f"--set {key}: {name} is not a section")
        node[name] = child
        node = child
    try:
        node[leaf] = yaml.safe_load(value)
    except yaml.YAMLError as e:  # a tag such as !!python/object is refused by safe_load: said in one line
        raise ConfigError(f"--set {key}: {value!r} is not a plain YAML value: {str(e).splitlines()[0]}") from None


def _build(cls: type, data: Any, where: str) -> Any:
    if not isinstance(data, dict):
        raise ConfigError(f"{where or 'experiment'}: expected a mapping, got {type(data).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls) if not f.metadata.get("internal")}
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for key, value in data.items():
        name = f"{where}.{key}" if where else str(key)
        if key not in fields:
            close = difflib.get_close_matches(str(key), fields, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else f" (valid: {', '.join(fields)})"
            raise ConfigError(f"unknown config key {name!r}{hint}")
        kwargs[key] = _coerce(hints[key], value, name)
    return cls(**kwargs)


def _coerce(hint: Any, value: Any, name: str) -> Any:
    """Check `value` against a type hint, converting only where YAML is loose (1 for 1.0, 3e-4 as str)."""
    if dataclasses.is_dataclass(hint):
        return _build(hint, value, name)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in (a for a in args if a is not type(None)):
            try:
                return _coerce(arg, value, name)
            except ConfigError as e:
                errors.append(str(e))
        raise ConfigError(errors[-1])
    if origin is list:
        if not isinstance(value, list):
            raise ConfigError(f"{name}: expected a list, got {value!r}")
        return [_coerce(args[0], v, f"{name}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{name}: expected a mapping, got {value!r}")
        return dict(value)
    if hint is float and not isinstance(value, bool) and isinstance(value, (int, float, str)):
        try:  # PyYAML reads "3e-4" (no dot) as a string, and 1 as an int
            number = float(value)
        except ValueError:
            number = None
        if number is not None:
            if not math.isfinite(number):
                raise ConfigError(f"{name}: expected a finite number, got {value!r}")
            return number
    if hint is Any or (isinstance(value, hint) and not (hint is int and isinstance(value, bool))):
        return value
    raise ConfigError(f"{name}: expected {hint.__name__}, got {value!r}")


# What a sweep can optimise, and which way: every reader of an objective takes its direction from here.
OBJECTIVES = {"tokens_per_s": "maximize", "final_loss": "minimize"}


def half_precision(precision: str) -> bool:
    """Whether a resolved train.precision computes in bf16 mixed precision (bf16, and fp8, which is bf16 with
    float8 matmuls on top): the one test of it, for the trainer and the cost models alike."""
    return precision in ("bf16", "fp8")


def resolve_precision(precision: str, device_type: str) -> str:
    """`auto` is bf16 mixed precision on CUDA and fp32 on CPU; never fp8, which changes the numerics and is asked
    for by name (`meshpilot plan` shows what it would gain).

    fp32 on CPU whatever the CPU: a CPU run is mostly a check of a set-up, where every layout matches the
    one-process reference to fp32 rounding, and the same file trains alike on any CPU. bf16 is not slower on
    every CPU: one with bf16 matrix instructions (AVX512-BF16, AMX) multiplies bf16 matrices about 2.3x faster
    and trains 1.5-1.6x faster under `train.precision: bf16` (BENCHMARKS.md), as `meshpilot probe` shows.
    """
    if precision != "auto":
        return precision
    return "bf16" if device_type == "cuda" else "fp32"


_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-z]*)\s*$", re.IGNORECASE)


def parse_bytes(text: int | str) -> int:
    """A memory size in bytes from an int or text such as "80GiB", "80GB", "512MiB", "1.5TiB" or "4096"."""
    if isinstance(text, bool) or not isinstance(text, int | str):
        raise ConfigError(f"memory size {text!r}: give bytes or a number with a unit such as 80GiB, 80GB, 512MiB")
    if isinstance(text, int):
        if text < 0:
            raise ConfigError(f"memory size {text}: must not be negative")
        return text
    match = _SIZE.match(text)
    unit = match.group(2).lower() if match else None
    if unit not in _UNITS:
        raise ConfigError(f"memory size {text!r}: give bytes or a number with a unit such as 80GiB, 80GB, 512MiB")
    # Decimal, not float: "1.1TB" must be exactly 1_100_000_000_000 bytes.
    return int(Decimal(match.group(1)) * _UNITS[unit])


def closest_presets(key: str, names: list[str]) -> str:
    """The end of a "no preset" error: the closest of `names` to `key`, or all of them."""
    close = difflib.get_close_matches(key, names, n=3, cutoff=0.5)
    return f" (closest: {', '.join(close)})" if close else f" (presets: {', '.join(names)})"


def check_train_values(experiment: Experiment) -> None:
    """Every train and data value against what it may be (the allowed values declared above): a one-line error."""
    train, data = experiment.train, experiment.data
    positive = {"train.steps": train.steps, "train.micro_batch": train.micro_batch, "data.seq_len": data.seq_len}
    positive |= {"train.global_batch_tokens": train.global_batch_tokens, "train.lr": train.lr, "train.eps": train.eps}
    positive |= {"train.keep_checkpoints": train.keep_checkpoints}
    positive |= {"train.collective_timeout_s": train.collective_timeout_s,
                 "train.first_steps_timeout_s": train.first_steps_timeout_s}  # fmt: skip
    for name, value in positive.items():
        if value <= 0:
            raise ConfigError(f"{name} must be positive, got {value}")
    not_negative = {"train.warmup_steps": train.warmup_steps, "train.checkpoint_every": train.checkpoint_every}
    not_negative |= {"train.grad_clip": train.grad_clip, "train.weight_decay": train.weight_decay}
    not_negative |= {"train.timing_warmup_steps": train.timing_warmup_steps, "train.gns_every": train.gns_every}
    not_negative |= {"train.profile_steps": train.profile_steps}
    for name, value in not_negative.items():
        if value < 0:
            raise ConfigError(f"{name} must not be negative, got {value}")
    if train.profile_steps and train.profile_steps >= train.timing_warmup_steps:
        raise ConfigError(
            f"train.profile_steps ({train.profile_steps}) must be fewer than train.timing_warmup_steps "
            f"({train.timing_warmup_steps}): the profiled steps are the warm-up's last, never timed"
        )
    if not 0 <= train.min_lr_ratio <= 1:
        raise ConfigError(f"train.min_lr_ratio must lie in [0, 1], got {train.min_lr_ratio}")
    choices = {
        "train.optimizer": (train.optimizer, OPTIMIZERS),
        "train.lr_schedule": (train.lr_schedule, SCHEDULES),
        "train.precision": (train.precision, PRECISIONS),
        "train.fsdp_reduce_dtype": (train.fsdp_reduce_dtype, FSDP_REDUCE_DTYPES),
        "train.float8_recipe": (train.float8_recipe, FLOAT8_RECIPES),
    }
    for name, (value, allowed) in choices.items():
        if value not in allowed:
            raise ConfigError(f"{name}: {value!r} is not one of {', '.join(allowed)}")
    if len(train.betas) != 2 or not all(0 <= b < 1 for b in train.betas):
        raise ConfigError(f"train.betas: expected two numbers in [0, 1), got {train.betas}")
    final_saved = train.save_final_checkpoint or (train.checkpoint_every and train.steps % train.checkpoint_every == 0)
    if train.save_hf and not final_saved:
        raise ConfigError("train.save_hf exports the final step's checkpoint: set train.save_final_checkpoint: true")


def reduces_once_per_step(fsdp_grad_sync: str, zero_stage: int) -> bool:
    """Whether FSDP2 reduce-scatters an accumulated step's gradient once, after its last micro-batch, rather than
    after every micro-batch: train.fsdp_grad_sync: step, or ZeRO stage 1, which holds the whole gradient anyway."""
    return fsdp_grad_sync == "step" or zero_stage == 1


def resolve_zero_stage(setting: int | str) -> int:
    """The ZeRO stage a train.zero_stage setting runs: auto is 3 where no plan chose (FSDP2's default, and what
    every version before auto ran); 1, 2 and 3 as given."""
    return 3 if setting == "auto" else setting


def check_zero_stage(experiment: Experiment) -> None:
    """train.zero_stage resolved (auto: 3), and below 3 only where FSDP2 shards something (dp_shard x cp > 1). The
    experiment keeps the resolved stage: the ranks, the memory check and config.yaml see a stage, never auto."""
    train = experiment.train
    train.zero_stage = resolve_zero_stage(train.zero_stage)
    if refused := zero_stage_refusal(train.zero_stage, experiment.layout):
        raise ConfigError(refused)


def zero_stage_refusal(stage: int, layout: Layout) -> str | None:
    """Why the trainer refuses train.zero_stage `stage` under `layout`, or None: a stage below 3 needs something
    sharded (the planner marks such layouts as not runnable with the same words)."""
    if stage != 3 and layout.shard_degree == 1:
        return (
            f"train.zero_stage {stage} chooses what FSDP2 keeps sharded, and {layout.describe()} shards nothing "
            "(it needs dp_shard > 1, or cp > 1): leave it at 3"
        )
    return None


def check_galore(experiment: Experiment) -> None:
    """train.galore's values, and a layout GaLore runs with (data-parallel replication only)."""
    galore = experiment.train.galore
    for name in ("rank", "update_proj_gap", "scale"):
        if getattr(galore, name) <= 0:
            raise ConfigError(f"train.galore.{name} must be positive, got {getattr(galore, name)}")
    if galore.proj_type not in GALORE_PROJ_TYPES:
        raise ConfigError(f"train.galore.proj_type: {galore.proj_type!r} is not one of {', '.join(GALORE_PROJ_TYPES)}")
    if not galore.target_modules or not all(galore.target_modules):
        raise ConfigError("train.galore.target_modules: give one or more name substrings, e.g. [attn, mlp]")
    layout = experiment.layout
    if layout.fsdp or layout.tp > 1:  # FSDP2 (dp_shard, cp, or data parallel around stages) shards them
        raise ConfigError(
            f"train.optimizer galore_adamw runs with data-parallel replicate layouts only, not {layout.describe()}"
        )
