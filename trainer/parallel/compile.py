"""torch.compile, as torchtitan applies it: each decoder layer on its own, or where nothing splits the model from
outside, a micro-batch's whole forward and loss as one graph."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch

from trainer.config import TrainSpec
from trainer.layout import Layout


def compiles_whole_step(layout: Layout) -> bool:
    """Whether `train.compile` compiles each micro-batch's whole forward and loss as one graph
    (trainer.rank.step.compiled_token_loss_sum) rather than each decoder layer alone.

    One graph where nothing splits the model from outside: one process, or DDP, whose gradient buckets dynamo's
    DDPOptimizer cuts the graph at so that their all-reduces still overlap the backward. It fuses what per-layer
    compilation leaves eager (mask, embedding, final norm, output head, loss) and across layer boundaries:
    measured on this benchmark's model (bench/trainer_vs_hf.py), micro-batch forward and backward 12% shorter than
    eager against 7% for per-layer compilation. FSDP2 (all-gathers at layer boundaries), tensor parallelism
    (DTensor layers), pipeline stages and context parallelism's attention keep torchtitan's per-layer compilation.
    """
    return not (layout.fsdp or layout.tp > 1 or layout.pp > 1 or layout.cp > 1)


def resolve_loss(train: TrainSpec, layout: Layout, device_type: str, fits: Callable[[TrainSpec], bool]) -> str:
    """The loss train.loss runs (trainer.config.LOSSES): auto is whole where train.compile puts the loss inside the
    whole-step graph on a GPU (where inductor fuses it: measured 1.28x the chunked loss's tokens/s on an H200) and
    `fits` says the run's memory holds the whole logits with it, else chunked: outside a compiled graph, or on a CPU,
    the whole loss only costs memory."""
    if train.loss != "auto":
        return train.loss
    compiled_on_gpu = train.compile and compiles_whole_step(layout) and device_type == "cuda"
    return "whole" if compiled_on_gpu and fits(dataclasses.replace(train, loss="whole")) else "chunked"


def compile_layers(layers: torch.nn.ModuleList, backend: str | Callable = "inductor") -> None:
    """torch.compile each decoder layer on its own, in place, as torchtitan does: after tensor parallel and
    activation checkpointing (whose wrapper is the layer's forward, so compiled with it: trainer.model.build), before
    FSDP2 wraps the layer. Every layer has the same code and shapes, so one compilation serves them all;
    parameter names stay as they were (checkpoints and exports are unchanged)."""
    for layer in layers:
        layer.compile(backend=backend)


def compile_seconds() -> float:
    """Seconds this process spent compiling, by torch's own account: dynamo's frames (with their forward graphs)
    and the backward graphs inductor compiles when they first run."""
    # torch._dynamo only in a compiled run (importing it loads the compiler)
    from torch._dynamo.utils import compilation_time_metrics

    return sum(
        sum(compilation_time_metrics.get(key, ())) for key in ("_compile.compile_inner", "backward._backward_impl")
    )
