"""Optimizers (AdamW, GaLore AdamW), the size of the state they keep, and the learning-rate schedule."""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator

import torch
from torch.distributed.tensor import DTensor
from torch.nn.parallel import DistributedDataParallel

from trainer.config import GALORE_PROJ_TYPES, OPTIMIZERS, TrainSpec
from trainer.costs.optimizer_state import param_kind


def build_optimizer(model: torch.nn.Module, spec: TrainSpec, device_type: str) -> torch.optim.Optimizer:
    """AdamW with weight decay on matrices only (decaying norms and biases only hurts), or GaLore AdamW."""
    # Names as on the bare model (no DDP "module." prefix), as the memory model sees them: targets match alike.
    bare = model.module if isinstance(model, DistributedDataParallel) else model
    named = [(name, p) for name, p in bare.named_parameters() if p.requires_grad]
    if spec.optimizer == "galore_adamw":
        return _galore_adamw(named, spec)
    if spec.optimizer != "adamw":
        raise ValueError(f"unknown optimizer {spec.optimizer!r} (one of {', '.join(OPTIMIZERS)})")
    # Fused (one kernel for all of a group's tensors, on CPU as on CUDA). The kernel takes a group's tensors as
    # one list, which must agree in kind: all plain tensors, or DTensors on one mesh with one placement.
    return torch.optim.AdamW(
        _by_placement(_param_groups(named, spec)),
        lr=spec.lr,
        betas=tuple(spec.betas),
        eps=spec.eps,
        fused=True,
    )


def _by_placement(groups: list[dict]) -> list[dict]:
    """Split each group into runs of parameters that share a mesh and placements (plain tensors together), in
    first-seen order, so every rank of a layout forms the same groups."""
    split = []
    for group in groups:
        runs: dict[tuple, list[torch.Tensor]] = {}
        for p in group["params"]:
            key = (p.device_mesh, tuple(p.placements)) if isinstance(p, DTensor) else (None, ())
            runs.setdefault(key, []).append(p)
        split += [{**group, "params": params} for params in runs.values()]
    return split


def _param_groups(named: list[tuple[str, torch.Tensor]], spec: TrainSpec) -> list[dict]:
    by_kind: dict[str, list[torch.Tensor]] = {"galore": [], "decay": [], "no_decay": []}
    for name, p in named:
        by_kind[param_kind(name, tuple(p.shape), spec)].append(p)
    g = spec.galore
    # galore_torch projects every parameter of a group that has a "rank" key, and only those.
    projection = {"rank": g.rank, "update_proj_gap": g.update_proj_gap, "scale": g.scale, "proj_type": g.proj_type}
    groups = [
        {"params": by_kind["galore"], "weight_decay": spec.weight_decay, **projection},
        {"params": by_kind["decay"], "weight_decay": spec.weight_decay},
        {"params": by_kind["no_decay"], "weight_decay": 0.0},
    ]
    return [group for group in groups if group["params"]]


def _galore_adamw(named: list[tuple[str, torch.Tensor]], spec: TrainSpec) -> torch.optim.Optimizer:
    sharded = [name for name, p in named if isinstance(p, DTensor)]
    if sharded:
        # galore_torch takes an SVD of each whole gradient: a shard's SVD is not the matrix's.
        raise ValueError(
            f"galore_adamw runs with data-parallel replicate layouts only (DDP, dp_replicate=N); parameter "
            f"{sharded[0]!r} is a DTensor (FSDP2/HSDP/TP layout)"
        )
    if spec.galore.proj_type not in GALORE_PROJ_TYPES:
        raise ValueError(f"train.galore.proj_type {spec.galore.proj_type!r} is not one of {GALORE_PROJ_TYPES}")
    optimizer = _import_galore_adamw()(
        _param_groups(named, spec),
        lr=spec.lr,
        betas=tuple(spec.betas),
        eps=spec.eps,
        no_deprecation_warning=True,  # its warning is about transformers' AdamW, which it copied
    )
    optimizer.register_step_pre_hook(_install_projectors)
    # A checkpoint's optimizer state is flattened into tensors and numbers (trainer.rank.checkpoint: DCP refuses any
    # other object): each projector leaves state_dict() as its matrices and comes back as a projector.
    optimizer.register_state_dict_post_hook(_projectors_as_matrices)
    optimizer.register_load_state_dict_post_hook(_projectors_from_matrices)
    return optimizer


def _import_galore_adamw() -> type[torch.optim.Optimizer]:
    """Imported on first use: galore_torch imports bitsandbytes (seconds), which AdamW runs need not pay."""
    bnb_logger = logging.getLogger("bitsandbytes")
    level = bnb_logger.level
    # bitsandbytes warns on import about its optional 4-bit CPU kernels, which GaLoreAdamW never uses.
    bnb_logger.setLevel(logging.ERROR)
    try:
        # galore_torch only for the GaLore optimizer
        from galore_torch import GaLoreAdamW
    finally:
        bnb_logger.setLevel(level)
    return GaLoreAdamW


def _install_projectors(optimizer: torch.optim.Optimizer, args: tuple, kwargs: dict) -> None:
    """Give each projected parameter a CompactGaLoreProjector before galore_torch would create its own."""
    for group in optimizer.param_groups:
        if "rank" not in group:
            continue
        for p in group["params"]:
            state = optimizer.state[p]
            if p.grad is not None and "projector" not in state:
                state["projector"] = CompactGaLoreProjector(
                    group["rank"], group["update_proj_gap"], group["scale"], group["proj_type"]
                )


class CompactGaLoreProjector:
    """galore_torch's GaLoreProjector (its own methods, run on this object), keeping only the projection.

    The original returns a slice of the SVD's U or Vh, a view that keeps the whole factor alive: min(m, n)
    columns or rows instead of `rank`, for every projected matrix and for the whole run. Copying the slice
    frees the factor before the next parameter's SVD. A checkpoint holds its matrices, not the object
    (`_projectors_as_matrices`).
    """

    def __init__(self, rank: int, update_proj_gap: int, scale: float, proj_type: str):
        self.rank, self.update_proj_gap, self.scale, self.proj_type = rank, update_proj_gap, scale, proj_type
        self.verbose = False
        self.ortho_matrix: torch.Tensor | list[torch.Tensor] | None = None

    def project(self, full_rank_grad: torch.Tensor, iter: int) -> torch.Tensor:
        return _galore_projector().project(self, full_rank_grad, iter)

    def project_back(self, low_rank_grad: torch.Tensor) -> torch.Tensor:
        return _galore_projector().project_back(self, low_rank_grad)

    # `type` as galore_torch names it: project() passes it by keyword.
    def get_orthogonal_matrix(self, weights: torch.Tensor, rank: int, type: str) -> torch.Tensor | list[torch.Tensor]:
        matrix = _galore_projector().get_orthogonal_matrix(self, weights, rank, type)
        return [_compact(m) for m in matrix] if isinstance(matrix, list) else _compact(matrix)


def _projectors_as_matrices(optimizer: torch.optim.Optimizer, state_dict: dict) -> dict:
    """state_dict() with each projector as a dict of its matrices (`_saved_matrices`); its settings are its
    parameter group's."""
    state = {}
    for key, values in state_dict["state"].items():
        projector = values.get("projector")
        if isinstance(projector, CompactGaLoreProjector):
            # A new dict: the optimizer's own state keeps its projector.
            values = {**values, "projector": _saved_matrices(projector.ortho_matrix)}
        state[key] = values
    return {**state_dict, "state": state}


def _saved_matrices(matrix: torch.Tensor | list[torch.Tensor] | None) -> dict[str, torch.Tensor]:
    """{"matrix": M}, {"left": A, "right": B} for proj_type full, or {} before the projector's first step."""
    if matrix is None:
        return {}
    if isinstance(matrix, list):
        left, right = matrix
        return {"left": left, "right": right}
    return {"matrix": matrix}


def _projectors_from_matrices(optimizer: torch.optim.Optimizer) -> None:
    """After load_state_dict: each projector saved as its matrices (`_projectors_as_matrices`) a projector again."""
    for group in optimizer.param_groups:
        if "rank" not in group:
            continue
        for p in group["params"]:
            saved = optimizer.state.get(p, {}).get("projector")
            if isinstance(saved, dict):
                projector = CompactGaLoreProjector(
                    group["rank"], group["update_proj_gap"], group["scale"], group["proj_type"]
                )
                projector.ortho_matrix = [saved["left"], saved["right"]] if "left" in saved else saved.get("matrix")
                optimizer.state[p]["projector"] = projector


def _galore_projector() -> type:
    # galore_torch only for the GaLore optimizer
    from galore_torch.galore_projector import GaLoreProjector

    return GaLoreProjector


def _compact(t: torch.Tensor) -> torch.Tensor:
    if t.untyped_storage().nbytes() == t.numel() * t.element_size():
        return t  # already its own storage (a bf16 cast, say): nothing to free
    return t.clone(memory_format=torch.contiguous_format)


def optimizer_state_tensors(optimizer: torch.optim.Optimizer) -> Iterator[torch.Tensor]:
    """Every tensor the optimizer keeps, including GaLore's projection matrices, which sit inside the projector
    object in the state rather than in the state itself (so a scan for state tensors misses them)."""
    for state in optimizer.state.values():
        for value in state.values():
            if torch.is_tensor(value):
                yield value
            elif hasattr(value, "ortho_matrix") and value.ortho_matrix is not None:
                matrix = value.ortho_matrix
                yield from matrix if isinstance(matrix, list) else [matrix]


class WarmupThenDecay:
    """Multiplier of the peak learning rate at a given step: linear warm-up, then the chosen decay."""

    def __init__(self, spec: TrainSpec):
        self.warmup, self.total, self.kind, self.floor = (
            spec.warmup_steps,
            spec.steps,
            spec.lr_schedule,
            spec.min_lr_ratio,
        )

    def __call__(self, step: int) -> float:
        if step < self.warmup:
            return (step + 1) / self.warmup
        if self.kind == "constant":
            return 1.0
        progress = min(1.0, (step - self.warmup) / max(1, self.total - self.warmup))
        shape = 0.5 * (1 + math.cos(math.pi * progress)) if self.kind == "cosine" else 1 - progress
        return self.floor + (1 - self.floor) * shape


def build_scheduler(optimizer: torch.optim.Optimizer, spec: TrainSpec) -> torch.optim.lr_scheduler.LambdaLR:
    return torch.optim.lr_scheduler.LambdaLR(optimizer, WarmupThenDecay(spec))
