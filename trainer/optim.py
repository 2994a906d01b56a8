"""Optimizer and learning-rate schedule."""

from __future__ import annotations

import math

import torch

from trainer.config import TrainSpec

OPTIMIZERS = ("adamw",)
SCHEDULES = ("cosine", "linear", "constant")


def build_optimizer(model: torch.nn.Module, spec: TrainSpec, device_type: str) -> torch.optim.Optimizer:
    """AdamW with weight decay on matrices only: decaying norms and biases only hurts."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.ndim >= 2], "weight_decay": spec.weight_decay},
        {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(
        [g for g in groups if g["params"]],
        lr=spec.lr,
        betas=tuple(spec.betas),
        eps=spec.eps,
        fused=device_type == "cuda",
    )


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
