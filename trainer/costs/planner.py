"""`meshpilot plan`: every valid layout x micro-batch x activation checkpointing (none, selective, full), those
that do not fit dropped with the reason, the rest ranked by predicted tokens/s. No GPU, no weights: the parameters'
shapes come from a meta-device model, or for a preset from its config's numbers (trainer.model.presets.PresetConfig).

The micro-batches are every divisor of a rank's share of the global batch (micro_batch_choices), unless the
experiment fixes train.micro_batch; a fixed train.activation_checkpointing is likewise the only mode planned
(Pinned, pinned_by).

FSDP2's sharding (train.zero_stage) is the planner's to choose where the experiment leaves it at auto: for each
candidate whose layout shards (dp_shard x cp > 1) and whose stage 3 fits, it also prices stage 3 with one gradient
reduce-scatter per step (train.fsdp_grad_sync step, unless the experiment sets that key), stage 2 and stage 1
(`sharding_variants`), and keeps the fastest that fits; each holds more than stage 3, so where stage 3 does not fit
nothing else is priced. The candidate carries its choice (zero_stage, fsdp_grad_sync), which the table's note, the
exports and a sweep's trials run with. A stage set to 1, 2 or 3 is planned as given.

Context parallelism is what makes long sequences fit: it divides a rank's activations (and the logits) by cp.
A feasible candidate with cp > 1 whose layout would not fit with cp = 1 (the same micro-batch and degrees
otherwise, so each rank holds whole sequences) says so: it fits only because of cp.

On CUDA the predicted peak includes the CUDA runtime's memory (context, NCCL buffers, workspaces, allocator slack:
trainer.costs.memory_model.CUDA_RUNTIME), so a candidate keeps that headroom free: one whose tensors alone would fit but
not with it is dropped, and its reason says how much of its need is that reserve.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from trainer.config import (
    CHECKPOINTING_MODES,
    Experiment,
    TrainSpec,
    apply_override,
    checkpointing_mode,
    checkpointing_rank,
    normalize_checkpointing,
    resolve_precision,
    resolve_zero_stage,
    zero_stage_refusal,
)
from trainer.costs.calibration import Calibration
from trainer.costs.memory_model import (
    ConfigSnapshot,
    MemoryPlan,
    ShapeSums,
    parameter_groups,
    predict_rank,
    rank_coordinates,
)
from trainer.costs.throughput import StepEstimate, StepShape, estimate_step, hardware_figures, parameter_figures
from trainer.hardware import Hardware, float8_speedup
from trainer.host.collector import collector_paused
from trainer.layout import MESH_DIMS, SUPPORTED_DIMS, Layout, LayoutError, expert_count
from trainer.model.attention import takes_dense_mask
from trainer.model.moe import check_moe
from trainer.model.parameters import describe_parameters, head_dim, moe_dims
from trainer.model.presets import PresetConfig
from trainer.parallel.compile import resolve_loss
from trainer.parallel.context_parallel import check_context_parallel
from trainer.parallel.pipeline import check_pipeline

if TYPE_CHECKING:
    from transformers import PretrainedConfig

GiB = 1024**3
OUT_OF_MEMORY = "does not fit in device memory"  # the group of every candidate dropped for its predicted memory


@dataclass
class Candidate:
    layout: Layout
    micro_batch: int
    grad_accum: int
    activation_checkpointing: bool | str  # as train.activation_checkpointing stores it: False, "selective", True
    memory: dict[str, int]
    estimate: StepEstimate | None = None
    dropped: str | None = None  # why it cannot run, if it cannot
    # What it was dropped for, as a group of drops is named: OUT_OF_MEMORY, else the reason itself (drop_group).
    dropped_group: str | None = None
    runnable: bool = True  # whether the built-in trainer runs this layout today
    fits_only_with_cp: bool = False  # cp > 1, and the same candidate with cp = 1 would not fit
    # FSDP2's sharding it runs with, chosen by the planner under train.zero_stage auto (sharding_variants), else
    # the experiment's: what `memory` and `estimate` priced.
    zero_stage: int = 3
    fsdp_grad_sync: str = "micro_batch"
    # The loss it runs (train.loss resolved as the launcher will: resolve_loss), what `memory` and `estimate` priced.
    loss: str = "chunked"
    notes: list[str] = field(default_factory=list)
    # Where precision was left to auto on a GPU with float8 tensor cores: the same candidate's predicted tokens/s
    # under train.precision fp8, shown beside it rather than chosen (fp8 changes the numerics).
    fp8_tokens_per_s: float | None = None
    step_shape: StepShape | None = field(default=None, repr=False)  # what `estimate` priced

    def as_dict(self) -> dict:
        return {
            "layout": self.layout.degrees(),
            "micro_batch": self.micro_batch,
            "grad_accum": self.grad_accum,
            "activation_checkpointing": self.activation_checkpointing,
            "predicted_peak_bytes": self.memory.get("peak"),  # None: not predicted (cannot run at all)
            "memory": self.memory,
            "predicted_step_s": self.estimate.step_s if self.estimate else None,
            "predicted_tokens_per_s": self.estimate.tokens_per_s if self.estimate else None,
            "comm_bytes_per_step": self.estimate.comm_bytes if self.estimate else None,
            "dropped": self.dropped,
            "dropped_group": self.dropped_group,
            "runnable": self.runnable,
            "fits_only_with_cp": self.fits_only_with_cp,
            "zero_stage": self.zero_stage,
            "fsdp_grad_sync": self.fsdp_grad_sync,
            "loss": self.loss,
            "notes": self.notes,
            "fp8_tokens_per_s": self.fp8_tokens_per_s,
        }


@dataclass(frozen=True)
class Pinned:
    """Planner choices the user fixed: planned as given instead of enumerated (None: enumerate)."""

    micro_batch: int | None = None
    activation_checkpointing: bool | str | None = None
    fsdp_grad_sync: str | None = None  # set: train.zero_stage auto chooses the stage only, never this

    def checkpointing_modes(self) -> tuple[bool | str, ...]:
        """none, selective and full as train.activation_checkpointing stores them, or only the pinned one."""
        if self.activation_checkpointing is not None:
            return (self.activation_checkpointing,)
        return tuple(normalize_checkpointing(mode) for mode in CHECKPOINTING_MODES)


def pinned_by(experiment: Experiment, path: Path | None = None, overrides: Sequence[str] = ()) -> Pinned:
    """The planner choices set in the experiment file at `path` or by an override, with the loaded experiment's
    (checked) values. The loaded Experiment cannot tell: its defaults fill every field, so a file's
    `micro_batch: 8` and the default 8 look the same; only the file's own mapping says what the user wrote."""
    raw = yaml.safe_load(Path(path).read_text()) if path is not None else None
    raw = raw if isinstance(raw, dict) else {}
    for override in overrides:
        apply_override(raw, override)
    written = raw.get("train") if isinstance(raw.get("train"), dict) else {}
    fields = (f.name for f in dataclasses.fields(Pinned))
    return Pinned(**{name: getattr(experiment.train, name) for name in fields if name in written})


def micro_batch_choices(rows: int) -> list[int]:
    """Every micro-batch that splits a rank's `rows` into whole passes, ascending: all its divisors, not only
    powers of two (people run 6, 10 or 14). Few enough to plan them all: at most 64 below 10,000 rows."""
    small = [d for d in range(1, math.isqrt(rows) + 1) if rows % d == 0]
    return small + [rows // d for d in reversed(small) if d * d != rows]


def valid_layouts(world_size: int, config: PretrainedConfig, seq_len: int) -> list[Layout]:
    """Every way to split the world over the mesh dimensions that this model and sequence allow; for a mixture of
    experts, each with every expert-parallel degree that divides both its dp_shard x cp ranks and the experts."""
    experts = expert_count(config) if moe_dims(config) is not None else None
    heads = config.num_attention_heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    divisors = [d for d in range(1, world_size + 1) if world_size % d == 0]
    layouts = []
    for degrees in itertools.product(divisors, repeat=len(MESH_DIMS) - 1):
        rest, remainder = divmod(world_size, math.prod(degrees))
        if remainder:
            continue
        layout = Layout(**dict(zip(MESH_DIMS, (degrees[0], rest, *degrees[1:]), strict=True)))
        if heads % layout.tp or kv_heads % layout.tp or layout.pp > config.num_hidden_layers:
            continue
        try:
            check_context_parallel(layout, config, seq_len)
        except LayoutError:
            continue
        layouts.append(layout)
        if experts and layout.fsdp:  # ep borrows dp_shard x cp's ranks (trainer.layout): no new world split
            borrowed = math.gcd(layout.dp_shard * layout.cp, experts)
            layouts += [dataclasses.replace(layout, ep=ep) for ep in range(2, borrowed + 1) if borrowed % ep == 0]
    return layouts


def _describe_parameters(config: PretrainedConfig | PresetConfig) -> tuple[list, dict[str, int]]:
    """The parameters' names, shapes and counts: a preset's from its numbers, any other model's from a meta-device
    model (trainer.model.parameters.describe_parameters, which imports torch's and transformers' modeling code)."""
    if isinstance(config, PresetConfig):
        return config.describe_parameters()

    return describe_parameters(config)


def plan(
    experiment: Experiment,
    config: PretrainedConfig,
    hardware: Hardware,
    device_mem: int,
    seq_len: int,
    pinned: Pinned = Pinned(),
) -> list[Candidate]:
    """All candidates, the feasible ones first by predicted tokens/s, then the dropped ones. Only the `pinned`
    micro-batch and checkpointing mode are planned where given; a layout whose rank share the pinned micro-batch
    does not divide is dropped."""
    # Tens of thousands of small objects, none in a cycle: the cyclic collector would only walk the million that
    # torch and transformers hold, again and again (a fifth of a 512-device plan's time).
    with collector_paused():
        return _plan(experiment, config, hardware, device_mem, seq_len, pinned)


def _plan(
    experiment: Experiment,
    config: PretrainedConfig,
    hardware: Hardware,
    device_mem: int,
    seq_len: int,
    pinned: Pinned,
) -> list[Candidate]:
    world_size = hardware.devices_per_node * hardware.nodes
    rows = experiment.train.global_batch_tokens // seq_len
    shapes, counts = _describe_parameters(config)
    groups = parameter_groups(shapes)
    parameters = parameter_figures(counts)  # active matmul parameters (FLOPs), all of them, the experts' apart
    precision = resolve_precision(experiment.train.precision, hardware.device_type)
    calibration = Calibration.load(hardware)
    modes = pinned.checkpointing_modes()
    packing, width = experiment.data.packing, head_dim(config)
    # The stage every candidate is first priced at (auto: 3); under auto, a sharding layout's others are priced too.
    chooses_sharding = experiment.train.zero_stage == "auto"
    train = dataclasses.replace(experiment.train, zero_stage=resolve_zero_stage(experiment.train.zero_stage))
    variants = {accumulates: sharding_variants(train, pinned, accumulates) for accumulates in (False, True)}

    def dense_mask(layout: Layout) -> bool:  # the attention the launcher will give packed rows
        return takes_dense_mask(train.attention, hardware.device_type, layout, width, packing)

    def memory_plan(micro_batch: int, checkpointing: bool | str, grad_accum: int, spec: TrainSpec) -> MemoryPlan:
        return MemoryPlan(micro_batch, seq_len, precision, checkpointing, spec, grad_accum, packing,
                          hardware.device_type)  # fmt: skip

    def priced(layout: Layout, plan: MemoryPlan) -> tuple[StepShape, StepEstimate]:
        """The step of a candidate whose memory `plan` describes, and its estimate."""
        shape = StepShape.of(plan.train, plan.micro_batch, seq_len, plan.grad_accum, plan.checkpointing, precision,
                             dense_mask(layout))  # fmt: skip
        estimate = estimate_step(reader, layout, hardware, shape, **parameters, calibration=calibration,
                                 figures=figures)  # fmt: skip
        return shape, estimate

    def choose_sharding(candidate: Candidate, planned: MemoryPlan, ranks: dict[int, ShapeSums]) -> None:
        """Under train.zero_stage auto, the candidate (priced at stage 3, which fits: `planned`) takes the fastest
        of the other shardings (sharding_variants, leanest first) that fits, with its memory and estimate, where
        that is predicted faster by more than SHARDING_MARGIN than the leaner one it replaces."""
        for spec in variants[candidate.grad_accum > 1]:
            plan = dataclasses.replace(planned, train=spec)
            memory = _peak_memory(reader, candidate.layout, plan, ranks, memo)
            if memory["peak"] > device_mem:  # the fit criterion of _judge
                continue
            shape, estimate = priced(candidate.layout, plan)
            if estimate.tokens_per_s > candidate.estimate.tokens_per_s * SHARDING_MARGIN:
                candidate.memory, candidate.step_shape, candidate.estimate = memory, shape, estimate
                candidate.zero_stage, candidate.fsdp_grad_sync = spec.zero_stage, spec.fsdp_grad_sync

    def choose_loss(candidate: Candidate, planned: MemoryPlan, ranks: dict[int, ShapeSums]) -> None:
        """Under train.loss auto, the loss the launcher will resolve for the candidate (resolve_loss: whole inside a
        compiled graph on a GPU where it fits), with its memory and estimate."""

        def plan_of(spec: TrainSpec) -> MemoryPlan:
            return dataclasses.replace(planned, train=spec)

        def fits(spec: TrainSpec) -> bool:
            return _peak_memory(reader, candidate.layout, plan_of(spec), ranks, memo)["peak"] <= device_mem

        candidate.loss = resolve_loss(planned.train, candidate.layout, hardware.device_type, fits)
        if candidate.loss == "whole":
            whole = plan_of(dataclasses.replace(planned.train, loss="whole"))
            candidate.memory = _peak_memory(reader, candidate.layout, whole, ranks, memo)
            candidate.step_shape, candidate.estimate = priced(candidate.layout, whole)

    candidates = []
    reader = ConfigSnapshot(config)  # the config's attributes, each read once: every candidate reads them
    figures = hardware_figures(hardware)  # the probe's or the stated rates, read once for every estimate
    shards: dict[tuple, ShapeSums] = {}  # a rank's shard sums, by what they depend on (_shard_key)
    memo: dict = {}  # activations by what they depend on (trainer.costs.memory_model.activation_bytes)
    for layout in valid_layouts(world_size, config, seq_len):
        if rows % layout.dp_degree:
            continue  # this global batch does not split over the data-parallel ranks
        per_rank_rows = rows // layout.dp_degree
        if pinned.micro_batch is not None and per_rank_rows % pinned.micro_batch:
            candidates += [_indivisible(layout, pinned.micro_batch, per_rank_rows, ac) for ac in modes]
            continue
        ranks = _largest_ranks(reader, layout, groups, train, shards)
        trainer_refuses = _moe_refusal(reader, layout, train)
        trainer_refuses = trainer_refuses or zero_stage_refusal(train.zero_stage, layout)
        # Without cp, ep can draw only on dp_shard's ranks (trainer.layout): the experts it cannot spread stay here.
        without_cp = dataclasses.replace(layout, cp=1, ep=math.gcd(layout.ep, layout.dp_shard))
        ranks_without_cp = _largest_ranks(reader, without_cp, groups, train, shards) if layout.cp > 1 else {}
        micro_batches = [pinned.micro_batch] if pinned.micro_batch is not None else micro_batch_choices(per_rank_rows)
        for micro_batch in micro_batches:
            for checkpointing in modes:
                grad_accum = per_rank_rows // micro_batch
                planned = memory_plan(micro_batch, checkpointing, grad_accum, train)
                memory = _peak_memory(reader, layout, planned, ranks, memo)
                candidate = Candidate(layout, micro_batch, grad_accum, checkpointing, memory,
                                      zero_stage=train.zero_stage, fsdp_grad_sync=train.fsdp_grad_sync)  # fmt: skip
                _judge(candidate, device_mem)
                _judge_pipeline(candidate, reader, train)
                if trainer_refuses:
                    candidate.runnable = False
                    candidate.notes.append(trainer_refuses)
                if precision == "fp8" and layout.tp > 1:  # trainer.parallel.float8.float8_refusal
                    candidate.runnable = False
                    candidate.notes.append("fp8 with tp not run by the built-in trainer yet")
                if layout.cp > 1 and candidate.dropped is None:
                    alone = _peak_memory(reader, without_cp, planned, ranks_without_cp, memo)["peak"]
                    if alone > device_mem:
                        candidate.fits_only_with_cp = True
                        candidate.notes.append(f"fits only because of cp (cp=1 needs {alone / GiB:.1f} GiB)")
                if candidate.dropped is None:
                    candidate.step_shape, candidate.estimate = priced(layout, planned)
                    if chooses_sharding and layout.shard_degree > 1:
                        choose_sharding(candidate, planned, ranks)
                    if train.loss == "auto":
                        choose_loss(candidate, planned, ranks)
                candidates.append(candidate)
    feasible = sorted((c for c in candidates if c.dropped is None), key=_rank_key)
    if train.precision == "auto" and precision == "bf16" and float8_speedup(hardware.device_name) > 1:
        for candidate in feasible[:FP8_ALTERNATIVES]:
            _price_fp8(candidate, reader, hardware, dataclasses.replace(candidate.step_shape, precision="fp8"),
                       parameters, calibration, figures)  # fmt: skip
    return feasible + [c for c in candidates if c.dropped is not None]


# How many of the fastest candidates an auto-precision plan on float8 hardware also prices under fp8.
FP8_ALTERNATIVES = 20
# How much faster another sharding must be predicted than the leaner one held so far to be chosen over it. A leaner
# stage's memory is headroom (against fragmentation and the predicted peak's own few percent of error), so a few
# percent of predicted speed does not buy it: 1% (_rank_key's tie) once chose stage 2 for 15 GiB more on an 8B.
SHARDING_MARGIN = 1.03


def sharding_variants(train: TrainSpec, pinned: Pinned, accumulates: bool) -> list[TrainSpec]:
    """The shardings train.zero_stage auto also prices for a layout that shards, beside stage 3 with the
    experiment's train.fsdp_grad_sync (`train`), leanest first: stage 3 with one reduce-scatter per step (unless
    the experiment sets train.fsdp_grad_sync, or a step of one micro-batch makes it the same), stage 2 and 1."""
    variants = []
    if train.fsdp_grad_sync != "step" and pinned.fsdp_grad_sync is None and accumulates:
        variants.append(dataclasses.replace(train, fsdp_grad_sync="step"))
    return variants + [dataclasses.replace(train, zero_stage=stage) for stage in (2, 1)]


def _price_fp8(
    candidate: Candidate, config, hardware: Hardware, shape: StepShape, parameters: dict, calibration, figures
) -> None:
    """The candidate's tokens/s under train.precision fp8 (`fp8_tokens_per_s`, and a line under the table), beside
    its bf16 figure: the planner never switches the numerics by itself (resolve_precision's auto is bf16). Not for
    tp > 1, which fp8 does not run."""
    if candidate.layout.tp > 1:
        return
    estimate = estimate_step(config, candidate.layout, hardware, shape, **parameters, calibration=calibration,
                             figures=figures)  # fmt: skip
    candidate.fp8_tokens_per_s = estimate.tokens_per_s


def _indivisible(layout: Layout, micro_batch: int, rows: int, checkpointing: bool | str) -> Candidate:
    """A layout the pinned micro-batch cannot run: no whole number of passes (grad_accum 0), nothing to predict."""
    reason = f"train.micro_batch {micro_batch} does not divide the {rows} rows per data-parallel rank"
    return Candidate(layout, micro_batch, 0, checkpointing, {}, dropped=reason, dropped_group=reason)


def _largest_ranks(
    config: PretrainedConfig, layout: Layout, groups, train: TrainSpec, memo: dict | None = None
) -> dict[int, ShapeSums]:
    """Rank 0 holds the largest shards; under pp the last stage (output head, logits) may need more. `memo` keeps
    the sums by _shard_key across layouts: many layouts cut the parameters alike."""
    ranks = [0] if layout.pp == 1 else [0, layout.world_size - layout.world_size // layout.pp]
    sums = {}
    for rank in ranks:
        key = _shard_key(layout, rank)
        found = memo.get(key) if memo is not None else None
        if found is None:
            found = ShapeSums.of_rank(config, layout, rank, groups, train)
            if memo is not None:
                memo[key] = found
        sums[rank] = found
    return sums


def _shard_key(layout: Layout, rank: int) -> tuple:
    """Everything trainer.costs.memory_model.local_groups reads of the layout and the rank: the tensor-parallel degree
    and index, FSDP2's chunks (how many, and which is this rank's), the pipeline degree and stage, ep. Within one plan
    (one config and train spec), two (layout, rank) pairs with the same key hold the same shards: dp_shard=4 and
    dp_shard=2,cp=2 cut alike, and dp_replicate changes nothing."""
    at = rank_coordinates(rank, layout)
    chunk = at["dp_shard"] * layout.cp + at["cp"]
    return layout.tp, at["tp"], layout.shard_degree, chunk, layout.pp, at["pp"], layout.ep


def _peak_memory(
    config: PretrainedConfig, layout: Layout, plan: MemoryPlan, ranks: dict, memo: dict | None = None
) -> dict[str, int]:
    """The prediction of the rank that needs the most."""
    predictions = (predict_rank(config, layout, plan, rank, sums=sums, memo=memo) for rank, sums in ranks.items())
    return max(predictions, key=lambda m: m["peak"])


def _rank_key(candidate: Candidate) -> tuple:
    """Fastest first; within 1% of each other (below what the model can tell apart) prefer what the trainer runs,
    less recomputation (none, then selective, then full), fewer parallel dimensions, and the leaner sharding."""
    speed_bucket = -math.floor(math.log(candidate.estimate.tokens_per_s) / math.log(1.01))
    dimensions = sum(d > 1 for d in candidate.layout.degrees().values())
    recomputation = checkpointing_rank(candidate.activation_checkpointing)
    return (speed_bucket, not candidate.runnable, recomputation, dimensions, -candidate.zero_stage)


def _judge(candidate: Candidate, device_mem: int) -> None:
    if candidate.memory["peak"] > device_mem:
        need, have = candidate.memory["peak"] / GiB, device_mem / GiB
        runtime = candidate.memory.get("cuda_runtime", 0) / GiB
        reserve = f" ({runtime:.2f} GiB of it the CUDA runtime's)" if runtime else ""
        candidate.dropped = f"needs {need:.2f} GiB per device{reserve}, more than {have:.2f} GiB"
        candidate.dropped_group = OUT_OF_MEMORY
    unsupported = [n for n, d in candidate.layout.degrees().items() if d > 1 and n not in SUPPORTED_DIMS]
    if unsupported:
        candidate.runnable = False
        candidate.notes.append(f"{', '.join(unsupported)} not yet run by the built-in trainer")


def _moe_refusal(config: PretrainedConfig, layout: Layout, train: TrainSpec) -> str | None:
    """Why the built-in trainer would refuse this mixture-of-experts model or layout (trainer.model.moe's check, the
    launcher's: an architecture it does not train yet, compile with ep), as a note: the plan still ranks the layout,
    for other trainers (--export)."""
    try:
        check_moe(config, layout, train)
    except LayoutError as error:
        return f"not run by the built-in trainer: {str(error).split(' (')[0]}"
    return None


def _judge_pipeline(candidate: Candidate, config: PretrainedConfig, train: TrainSpec) -> None:
    """Drop pipelines the schedule or the model cannot run (too few micro-batches, tied embeddings)."""
    spec = train.pp_schedule, train.pp_stages_per_rank, candidate.grad_accum
    try:
        check_pipeline(candidate.layout.pp, config, *spec)
    except LayoutError as error:
        if candidate.dropped is None:
            candidate.dropped = candidate.dropped_group = str(error)


_AC_COLUMN = {"none": "off", "selective": "sel", "full": "on"}  # the table's AC column, three characters wide


def format_table(candidates: list[Candidate], limit: int = 20) -> str:
    feasible = [c for c in candidates if c.dropped is None]
    dropped = [c for c in candidates if c.dropped is not None]
    header = f"{'#':>3}  {'layout':<34} {'mb':>3} {'accum':>5} {'AC':>3} {'GiB/dev':>8} {'tokens/s':>12}  note"
    lines = [header, "-" * len(header)]
    for i, c in enumerate(feasible[:limit], 1):
        checkpointing = _AC_COLUMN[checkpointing_mode(c.activation_checkpointing)]
        notes = [note] if (note := sharding_note(c)) else []
        notes += ["loss=whole"] if c.loss == "whole" else []
        lines.append(
            f"{i:>3}  {c.layout.describe():<34} {c.micro_batch:>3} {c.grad_accum:>5} {checkpointing:>3} "
            f"{c.memory['peak'] / GiB:>8.2f} {c.estimate.tokens_per_s:>12,.0f}  {'; '.join(notes + c.notes)}"
        )
    lines.append(f"{len(feasible)} feasible (showing {min(limit, len(feasible))}), {len(dropped)} dropped")
    for reason, group in _group_reasons(dropped).items():
        first = group[0]
        example = f"{first.layout.describe()}, micro-batch {first.micro_batch}"
        if first.dropped != reason:  # the memory group: say by how much the example missed
            example += f": {first.dropped}"
        lines.append(f"  dropped {len(group)}: {reason} (e.g. {example})")
        if reason == OUT_OF_MEMORY and not feasible:  # nothing fits: the closest miss says by how much
            closest = min(group, key=lambda c: c.memory["peak"])
            checkpointing = checkpointing_mode(closest.activation_checkpointing)
            lines.append(
                f"  closest: {closest.layout.describe()}, micro-batch {closest.micro_batch}, activation "
                f"checkpointing {checkpointing}: {closest.dropped}"
            )
    return "\n".join(lines)


def sharding_note(candidate: Candidate) -> str | None:
    """The table's word for a sharding other than FSDP2's default (stage 3, a reduce-scatter every micro-batch),
    as the keys that set it; None for the default. Stage 1 reduces once per step whatever fsdp_grad_sync says."""
    settings = [] if candidate.zero_stage == 3 else [f"zero_stage={candidate.zero_stage}"]
    if candidate.fsdp_grad_sync == "step" and candidate.zero_stage != 1:
        settings.append("fsdp_grad_sync=step")
    return " ".join(settings) or None


def _group_reasons(dropped: list[Candidate]) -> dict[str, list[Candidate]]:
    groups: dict[str, list[Candidate]] = {}
    for c in dropped:
        groups.setdefault(c.dropped_group, []).append(c)
    return groups


def format_fp8_alternative(candidates: list[Candidate], limit: int = 20) -> str | None:
    """The line under the table, where precision was left to auto on float8 hardware (`_price_fp8`): what the first
    row the trainer runs under fp8 would give; None where no candidate was priced so."""
    feasible = [c for c in candidates if c.dropped is None][:limit]
    found = next(((i, c) for i, c in enumerate(feasible, 1) if c.fp8_tokens_per_s), None)
    if found is None:
        return None
    row, candidate = found
    gain = candidate.fp8_tokens_per_s / candidate.estimate.tokens_per_s
    compiled = "" if candidate.step_shape.compiled else "; uncompiled, its float8 casts run unfused: set train.compile"
    return (
        f"fp8 (train.precision=fp8, torchao float8 matmuls; not chosen by auto, as it changes the numerics): "
        f"row {row} predicted {gain:.2f}x, {candidate.fp8_tokens_per_s:,.0f} tokens/s{compiled}"
    )
