"""Cheap element-wise parts of a decoder layer recomputed in backward instead of kept: the RMSNorms and the gated
MLP's activation product.

Eager autograd keeps every intermediate an element-wise op needs. transformers' Llama-family layer so keeps, per
token, each RMSNorm's input upcast to fp32 and its bf16 normalised value (3h bf16 values for h of input), and the
MLP's gate, its SiLU and its up projection (3i) besides the product that the down projection keeps. Megatron's fused
SwiGLU and MPT's layers keep far less; at 80 GB that is the difference between a published micro-batch fitting or
not (bench/published_llmfoundry.py). Here each such part saves only its inputs (the norm's input, the MLP's gate and
up projections) and is rerun in backward: a few element-wise passes over tensors of the layer's width, against the
matmuls that dominate the step. The rerun is the same ops on the same values, so losses and gradients are bitwise
those of the plain layer (tests/test_recompute.py).

Only for eager layers: inductor's partitioner makes its own choice of what a compiled layer saves and recomputes
element-wise ops anyway, and under activation checkpointing the whole layer is recomputed already.
"""

from __future__ import annotations

import functools
import inspect
import textwrap
import types
from collections.abc import Callable

import torch
from torch.utils.checkpoint import checkpoint


def recompute_elementwise(model: torch.nn.Module) -> int:
    """Make every RMSNorm and every gated MLP of `model` keep only its inputs for backward (see the module
    docstring); the number of modules changed. Parameter names, values and outputs do not change."""
    changed = 0
    for module in model.modules():
        if _is_rms_norm(module):
            module.forward = types.MethodType(_recomputed_norm, module)
            changed += 1
        elif _is_gated_mlp(module):
            module.forward = types.MethodType(_recomputed_gated_mlp, module)
            changed += 1
    return changed


def _recomputed_norm(norm: torch.nn.Module, hidden: torch.Tensor) -> torch.Tensor:
    """The norm's own class forward, keeping only its input (its weight is its module's)."""
    return _recomputed(functools.partial(type(norm).forward, norm), hidden)


def _recomputed_gated_mlp(mlp: torch.nn.Module, hidden: torch.Tensor) -> torch.Tensor:
    """down(act(gate(x)) * up(x)), the product kept only by the down projection."""
    product = functools.partial(_gated_product, mlp.act_fn)
    return mlp.down_proj(_recomputed(product, mlp.gate_proj(hidden), mlp.up_proj(hidden)))


def _recomputed(fn: Callable, *inputs: torch.Tensor) -> torch.Tensor:
    """`fn(*inputs)` under non-reentrant torch.utils.checkpoint: its inputs are saved (through autograd, so
    trainer.rank.memory counts them), its intermediates recomputed when backward first needs one. The backward
    graph stays the plain one, so gradients are summed in the same order: bitwise the plain layer's in every
    dtype. Nothing here draws random numbers: no RNG state to keep."""
    if not torch.is_grad_enabled():
        return fn(*inputs)
    return checkpoint(fn, *inputs, use_reentrant=False, preserve_rng_state=False)


def _gated_product(act_fn: Callable, gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    return act_fn(gate) * up


# The forward of transformers' gated MLPs (Llama, Mistral, Qwen2/3, Gemma 2...): only a class whose forward is this
# one is changed, so that a model whose MLP does anything else keeps its own.
_GATED_MLP_FORWARD = (
    "def forward(self, x):\n"
    "    down_proj = self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))\n"
    "    return down_proj\n"
)


@functools.cache
def _forward_source(cls: type) -> str:
    try:
        return textwrap.dedent(inspect.getsource(cls.forward))
    except (OSError, TypeError):
        return ""


def _is_rms_norm(module: torch.nn.Module) -> bool:
    """An RMSNorm whose forward takes the hidden states alone (not a gated norm that takes two inputs)."""
    if not type(module).__name__.endswith("RMSNorm"):
        return False
    return len(inspect.signature(type(module).forward).parameters) == 2


def _is_gated_mlp(module: torch.nn.Module) -> bool:
    return _forward_source(type(module)) == _GATED_MLP_FORWARD
