"""The search space: the planner's feasible layouts x micro-batch x activation checkpointing, times packing and any
other experiment keys the user asks to vary.

The space is a mapping of experiment keys to values, read as YAML like `--set`: a list of choices, or a range
{low, high, log} (sampled by TPE, never by the grid). For a mixture-of-experts model the planner's layouts include
every expert-parallel degree (ep) its dp_shard x cp ranks and experts allow, so `auto` searches ep too. Three keys
filter what the planner enumerates instead of
adding to it: `layout` (layout strings; default `search.layouts`), `train.micro_batch` and
`train.activation_checkpointing` (default: every value the planner finds feasible). `data.packing` defaults to
the experiment's value; every other key (`train.lr`, `train.weight_decay`, ...) is varied only when asked.

FSDP2's sharding is the planner's, not a dimension: where train.zero_stage is auto, each point of a layout that
shards carries the stage (and train.fsdp_grad_sync) the planner chose for its candidate, and its trial runs with it.

Gradient accumulation is not a free dimension: the global batch (train.global_batch_tokens) stays fixed so that
every trial solves the same optimization problem, and accumulation follows from the micro-batch and the
data-parallel degree, accumulation = rows / (micro_batch x dp). Vary train.global_batch_tokens explicitly to
change it.

Points (one per combination of choices) are numbered in a fixed order, never the planner's ranking (which
moves as measured runs calibrate it): layouts as listed, micro-batch ascending, checkpointing off first, then
the other keys in the order given. A point's id is `t` and its number, so a resumed sweep names trials as the
first run did.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from trainer.config import ConfigError, Experiment, checkpointing_rank, load_experiment, parse_bytes
from trainer.costs.planner import Candidate, Pinned, pinned_by, plan, valid_layouts
from trainer.data.rows import plan_batches
from trainer.hardware import this_machine
from trainer.layout import Layout, LayoutError
from trainer.model.build import model_config

PLANNER_KEYS = ("layout", "train.micro_batch", "train.activation_checkpointing")
# A trial trains for its measurements only: no checkpoints to write and delete.
TRIAL_OVERRIDES = ("train.save_final_checkpoint=false", "train.checkpoint_every=0", "train.save_hf=false")


@dataclass(frozen=True)
class Range:
    """A continuous dimension, for TPE: uniform in [low, high], or log-uniform when log is true."""

    low: float
    high: float
    log: bool = False


@dataclass
class Point:
    """One combination of the discrete choices, with the planner's prediction for it."""

    id: str
    layout: dict[str, int]
    micro_batch: int
    grad_accum: int
    activation_checkpointing: bool | str  # train.activation_checkpointing as stored: False, "selective", True
    packing: bool
    extra: dict[str, Any] = field(default_factory=dict)  # other experiment keys -> value
    predicted_peak_bytes: int | None = None
    predicted_tokens_per_s: float | None = None
    # The sharding the planner chose under train.zero_stage auto (None: the experiment's own, nothing to set).
    zero_stage: int | None = None
    fsdp_grad_sync: str | None = None

    @property
    def nproc(self) -> int:
        return Layout(**self.layout).world_size  # ep borrows dp_shard x cp's ranks: it multiplies no processes

    @property
    def layout_arg(self) -> str:
        """The --layout argument; every degree spelled out, so no default fills a dimension."""
        return ",".join(f"{name}={degree}" for name, degree in self.layout.items())

    def params(self, continuous: dict[str, float] | None = None) -> dict[str, Any]:
        """What the summary shows: the layout, batch split and checkpointing, then every varied key."""
        varied = {**self.extra, **(continuous or {})}
        return {
            "layout": self.layout,
            "micro_batch": self.micro_batch,
            "grad_accum": self.grad_accum,
            "activation_checkpointing": self.activation_checkpointing,
            "packing": self.packing,
            **{key.removeprefix("train."): value for key, value in self.sharding().items()},
            **{key.removeprefix("train."): value for key, value in varied.items()},
        }

    def sharding(self) -> dict[str, Any]:
        """The planner's choice of FSDP2's sharding, as the experiment keys that set it."""
        chosen = {"train.zero_stage": self.zero_stage, "train.fsdp_grad_sync": self.fsdp_grad_sync}
        return {key: value for key, value in chosen.items() if value is not None}

    def settings(self, continuous: dict[str, float] | None = None) -> list[str]:
        """The `--set` overrides that make this point (with these range values): `section.key=JSON` each, the key
        as the experiment file names it. Training with them reproduces the trial (the layout aside)."""
        values = {
            "train.micro_batch": self.micro_batch,
            "train.activation_checkpointing": self.activation_checkpointing,
            "data.packing": self.packing,
            **self.sharding(),
            **self.extra,
            **(continuous or {}),
        }
        return [f"{key}={json.dumps(value)}" for key, value in values.items()]

    def overrides(self, continuous: dict[str, float] | None = None) -> list[str]:
        """What a trial of this point runs with: its settings, then what no trial keeps (TRIAL_OVERRIDES)."""
        return self.settings(continuous) + list(TRIAL_OVERRIDES)


@dataclass
class Space:
    points: list[Point]
    ranges: dict[str, Range]
    dropped: list[dict[str, Any]]  # what the planner ruled out, and why

    def point(self, point_id: str) -> Point:
        return next(p for p in self.points if p.id == point_id)

    def to_dict(self) -> dict[str, Any]:
        return {
            "points": [dataclasses.asdict(p) for p in self.points],
            "ranges": {k: dataclasses.asdict(r) for k, r in self.ranges.items()},
            "dropped": self.dropped,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Space:
        return cls(
            [Point(**p) for p in data["points"]], {k: Range(**r) for k, r in data["ranges"].items()}, data["dropped"]
        )


def parse_space_args(items: list[str]) -> dict[str, Any]:
    """`--space KEY=YAML` (repeatable) into a mapping: `train.lr=[1e-3, 3e-3]`, `layout=[dp_shard=2, tp=2]`."""
    space = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--space expects KEY=VALUES, e.g. 'train.lr=[1e-3, 3e-3]'; got {item!r}")
        try:
            space[key.strip()] = yaml.safe_load(value)
        except yaml.YAMLError:
            raise ConfigError(f"--space {key}: not valid YAML: {value!r}") from None
    return space


def check_space(space: dict[str, Any], experiment_path: Path) -> tuple[dict[str, list], dict[str, Range]]:
    """Split the user's space into choices and ranges, checking every key and value against the experiment file."""
    choices, ranges = {}, {}
    for key, values in space.items():
        if isinstance(values, dict):
            ranges[key] = _range(key, values)
            continue
        values = values if isinstance(values, list) else [values]
        if not values:
            raise ConfigError(f"space {key}: give at least one value")
        choices[key] = values
    for key in {*choices, *ranges}:
        if key != "layout" and key.split(".")[0] in ("layout", "hardware", "search"):
            raise ConfigError(f"space {key}: a sweep varies layouts and training settings, not {key}")
        if key == "train.steps":
            raise ConfigError("space train.steps: every trial runs search.trial_steps steps")
    for key in ranges:
        if key in PLANNER_KEYS or key == "data.packing":
            raise ConfigError(f"space {key}: give a list of choices, not a range")
    for key, values in choices.items():
        if key != "layout":
            choices[key] = [_resolved(experiment_path, key, value) for value in values]
    for key, bounds in ranges.items():
        _resolved(experiment_path, key, bounds.low)
    return choices, ranges


def _resolved(experiment_path: Path, key: str, value: Any) -> Any:
    """The value as the experiment file reads it (YAML gives "1e-3" as a string; the config makes it a float).

    Unknown keys and wrong types fail here, in one line, before anything runs."""
    node: Any = load_experiment(experiment_path, [f"{key}={json.dumps(value)}"]).to_dict()
    for part in key.split("."):
        node = node[part]
    return node


def _range(key: str, values: dict) -> Range:
    unknown = set(values) - {"low", "high", "log"}
    if unknown or not {"low", "high"} <= set(values):
        raise ConfigError(f"space {key}: a range is {{low: L, high: H, log: true|false}}, got {values}")
    low, high, log = _number(values["low"]), _number(values["high"]), values.get("log", False)
    if low is None or high is None or not low < high:
        given = f"{values['low']!r} and {values['high']!r}"
        raise ConfigError(f"space {key}: a range needs numbers low < high, got {given}")
    if log and low <= 0:
        raise ConfigError(f"space {key}: a log range needs low > 0, got {low}")
    return Range(float(low), float(high), bool(log))


def _number(value: Any) -> float | None:
    """YAML reads 1e-4 (no dot) as a string: take it as the number it means."""
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def build_space(
    experiment_path: Path, experiment: Experiment, space: dict[str, Any], devices: int, device_type: str
) -> Space:
    """Every point the planner finds feasible, in the fixed order; raises ConfigError when none is."""
    choices, ranges = check_space(space, experiment_path)
    layouts = _layouts(choices.pop("layout", experiment.search.layouts), experiment, devices)
    micro_batches = choices.pop("train.micro_batch", None)
    checkpointing = choices.pop("train.activation_checkpointing", None)
    packing = choices.pop("data.packing", [experiment.data.packing])
    # The sweep enumerates micro-batches and checkpointing whatever the file says (the space filters them), but a
    # train.fsdp_grad_sync the file sets is kept: under train.zero_stage auto the planner chooses the stage only.
    pinned = Pinned(fsdp_grad_sync=pinned_by(experiment, experiment_path).fsdp_grad_sync)
    candidates, dropped = _planned(experiment, layouts, device_type, devices, pinned)
    kept = [
        c
        for c in candidates
        if (micro_batches is None or c.micro_batch in micro_batches)
        and (checkpointing is None or c.activation_checkpointing in checkpointing)
    ]
    points = []
    for candidate, pack, *extra in itertools.product(kept, packing, *choices.values()):
        points.append(
            Point(
                id=f"t{len(points):03d}",
                layout=candidate.layout.degrees(),
                micro_batch=candidate.micro_batch,
                grad_accum=candidate.grad_accum,
                activation_checkpointing=candidate.activation_checkpointing,
                packing=bool(pack),
                extra=dict(zip(choices, extra, strict=True)),
                predicted_peak_bytes=candidate.memory["peak"],
                predicted_tokens_per_s=candidate.estimate.tokens_per_s,
                **_chosen_sharding(candidate, experiment),
            )
        )
    if not points:
        reasons = "; ".join(sorted({d["reason"] for d in dropped})[:3]) or "no candidate matches the space"
        raise ConfigError(f"nothing to search: the planner ruled out every candidate ({reasons})")
    return Space(points, ranges, dropped)


def _chosen_sharding(candidate: Candidate, experiment: Experiment) -> dict[str, Any]:
    """Point's zero_stage and fsdp_grad_sync: what the planner chose for the candidate where it differs from what a
    run of the experiment would resolve to (train.zero_stage auto is 3 where no plan chose)."""
    chosen = {}
    if experiment.train.zero_stage == "auto" and candidate.layout.shard_degree > 1:
        chosen["zero_stage"] = candidate.zero_stage
    if candidate.fsdp_grad_sync != experiment.train.fsdp_grad_sync:
        chosen["fsdp_grad_sync"] = candidate.fsdp_grad_sync
    return chosen


def _layouts(spec: str | list[str], experiment: Experiment, devices: int) -> list[Layout]:
    """The layouts to search, each resolved to its own process count."""
    if spec == "auto":
        world = experiment.hardware.devices or devices
        if world > devices:
            raise ConfigError(f"hardware.devices is {world}, but the sweep has {devices} devices")
        config = model_config(experiment.model, Path(experiment.base_dir))
        return valid_layouts(world, config, experiment.data.seq_len)
    if isinstance(spec, str) or not spec:
        raise ConfigError(f"search.layouts: give auto or a list of layouts such as [dp_shard=2, tp=2], got {spec!r}")
    layouts = []
    for text in spec:
        try:
            named = Layout.parse(str(text))
            layout = named.resolve(named.named_world_size)
        except LayoutError as e:
            raise ConfigError(f"search.layouts: {e}") from None
        if layout.world_size > devices:
            raise ConfigError(f"layout {text} needs {layout.world_size} devices; the sweep has {devices}")
        layouts.append(layout)
    return layouts


def _planned(experiment: Experiment, layouts: list[Layout], device_type: str, devices: int, pinned: Pinned):
    """The planner's candidates for these layouts in the fixed order, and the dropped ones with their reasons."""
    config = model_config(experiment.model, Path(experiment.base_dir))
    device_mem = _device_memory(experiment, device_type, devices)
    kept, dropped = [], []
    for world in sorted({layout.world_size for layout in layouts}):
        hardware = this_machine(device_type, world)
        for candidate in plan(experiment, config, hardware, device_mem, experiment.data.seq_len, pinned):
            if candidate.layout not in layouts:
                continue
            reason = candidate.dropped or (None if candidate.runnable else "; ".join(candidate.notes))
            if reason:
                dropped.append(
                    {
                        "layout": candidate.layout.degrees(),
                        "micro_batch": candidate.micro_batch,
                        "activation_checkpointing": candidate.activation_checkpointing,
                        "reason": reason,
                    }
                )
            else:
                plan_batches(
                    experiment.train.global_batch_tokens,
                    experiment.data.seq_len,
                    candidate.micro_batch,
                    candidate.layout.dp_degree,
                )
                kept.append(candidate)
    order = {layout: i for i, layout in enumerate(layouts)}
    kept.sort(key=lambda c: (order[c.layout], c.micro_batch, checkpointing_rank(c.activation_checkpointing)))
    return kept, dropped


def _device_memory(experiment: Experiment, device_type: str, devices: int) -> int:
    """Memory per device: the experiment's hardware.device_mem, the GPU's, or on CPU this machine's RAM shared
    by its cores (parallel trials share it)."""
    if experiment.hardware.device_mem:
        return parse_bytes(experiment.hardware.device_mem)
    if device_type == "cuda":
        # torch only to read a CUDA device's memory
        import torch

        return torch.cuda.get_device_properties(0).total_memory
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // devices
