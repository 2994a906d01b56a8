"""The optimizer state a rank keeps, predicted from parameter shapes alone: AdamW's two moments and step, or GaLore's
projections and low-rank moments. The rule of which parameters GaLore projects lives here too (`param_kind`), so
the optimizer that trainer.rank.optim builds and the state predicted for it cannot drift apart."""

from __future__ import annotations

import math

from trainer.config import GALORE_PROJ_TYPES, OPTIMIZERS, GaLoreSpec, TrainSpec

# torch.optim.AdamW keeps `step` as a float32 scalar tensor per parameter (on CPU, or on the device when fused).
ADAMW_STEP_BYTES = 4


def param_kind(name: str, shape: tuple[int, ...], spec: TrainSpec) -> str:
    """The group a parameter joins: galore (projected), decay (other matrices) or no_decay (norms, biases).

    One rule for the optimizer and for the prediction of its state, so the two cannot drift apart."""
    if len(shape) < 2:
        return "no_decay"
    targeted = any(target in name for target in spec.galore.target_modules)
    return "galore" if spec.optimizer == "galore_adamw" and len(shape) == 2 and targeted else "decay"


def optimizer_state_bytes(
    param_shapes: list[tuple[str, tuple[int, ...]]], spec: TrainSpec, bytes_per_element: int = 4
) -> int:
    """Optimizer-state bytes for these trainable parameters once each has had a gradient.

    AdamW: two moments per element plus a float32 `step` tensor per parameter. GaLore AdamW: its `step` is a
    Python int (no tensor); projected matrices keep a projection matrix and two low-rank moments, the others
    two full moments. `bytes_per_element` is the parameters' (and gradients') element size. Projections count
    at rank size, as CompactGaLoreProjector keeps them (galore_torch's own would pin the whole SVD factor).
    """
    if spec.optimizer not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {spec.optimizer!r} (one of {', '.join(OPTIMIZERS)})")
    total = 0
    for name, shape in param_shapes:
        if param_kind(name, tuple(shape), spec) == "galore":
            total += galore_state_elements(tuple(shape), spec.galore) * bytes_per_element
        else:
            total += 2 * math.prod(shape) * bytes_per_element
            total += ADAMW_STEP_BYTES if spec.optimizer == "adamw" else 0
    return total


def galore_state_elements(shape: tuple[int, int], galore: GaLoreSpec) -> int:
    """Elements GaLore keeps for an (m, n) matrix: projection matrices plus exp_avg and exp_avg_sq."""
    projections, moment = galore_state_shapes(shape, galore)
    return sum(a * b for a, b in projections) + 2 * math.prod(moment)


def galore_state_shapes(shape: tuple[int, int], galore: GaLoreSpec) -> tuple[list[tuple[int, int]], tuple[int, int]]:
    """The projection matrices' shapes and the moments' shape, as galore_torch's GaLoreProjector chooses them.

    The SVD of an (m, n) gradient has min(m, n) singular vectors, so the rank is capped there. "std" projects
    from the smaller side, so the moments are (larger side) x rank; "reverse_std" does the opposite.
    """
    m, n = shape
    r = min(galore.rank, m, n)
    right, left = ([(r, n)], (m, r)), ([(m, r)], (r, n))
    kinds = {
        "std": right if m >= n else left,
        "reverse_std": left if m >= n else right,
        "right": right,
        "left": left,
        "full": ([(m, r), (r, n)], (r, r)),
    }
    if galore.proj_type not in kinds:
        raise ValueError(f"train.galore.proj_type {galore.proj_type!r} is not one of {GALORE_PROJ_TYPES}")
    return kinds[galore.proj_type]
