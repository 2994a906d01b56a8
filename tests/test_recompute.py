"""Eager layers recompute their RMSNorms and their gated MLP's activation product in backward
(trainer.model.recompute): losses and every gradient stay bitwise the plain layer's, in fp32, in bf16 (FSDP2's bf16
parameters) and under autocast; what a layer saves for backward, measured by trainer.rank.memory, is exactly what
the memory model counts, with it (trainer.costs.memory_model's eager count) and without it (the count of a layer
that checkpointing's recomputation runs: recomputing=True)."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from support import TINY_MODEL
from transformers import AutoConfig

from trainer.config import TrainSpec
from trainer.costs.memory_model import MemoryPlan, layer_bytes_per_token
from trainer.layout import Layout
from trainer.model.build import build_model
from trainer.model.recompute import _is_gated_mlp, recompute_elementwise
from trainer.rank.memory import saved_for_backward
from trainer.rank.step import token_loss_sum

ROWS, SEQ = 2, 48
# name: (the model's dtype, autocast to bf16, precision and layout the memory model is asked about); bf16
# parameters are what FSDP2's mixed precision computes with, so the model is asked about an FSDP2 layout.
PRECISIONS = {
    "fp32": (torch.float32, False, "fp32", Layout(dp_replicate=1)),
    "bf16": (torch.bfloat16, False, "bf16", Layout(dp_shard=2)),
    "autocast": (torch.float32, True, "bf16", Layout(dp_replicate=1)),
}
MODELS = {
    "llama": TINY_MODEL,
    "qwen3": {**TINY_MODEL, "model_type": "qwen3", "head_dim": 8},  # per-head query and key norms
}


def _batch() -> dict[str, torch.Tensor]:
    ids = torch.randint(0, TINY_MODEL["vocab_size"], (ROWS, SEQ), generator=torch.Generator().manual_seed(1))
    batch = {"input_ids": ids, "labels": ids, "position_ids": torch.arange(SEQ).expand(ROWS, SEQ)}
    batch["segment_ids"] = torch.arange(SEQ).div(SEQ // 3, rounding_mode="floor").expand(ROWS, SEQ).contiguous()
    return batch


def _run(values: dict, precision: str, recompute: bool, layers: int = 2) -> tuple[float, dict, int, int]:
    """(the loss, every gradient, the bytes saved for backward, the modules changed) of one forward and
    backward."""
    dtype, autocast, _, _ = PRECISIONS[precision]
    config = AutoConfig.for_model(**{**values, "num_hidden_layers": layers})
    model = build_model(config, None, seed=0).to(dtype)
    model.train()
    changed = recompute_elementwise(model) if recompute else 0
    with torch.autocast("cpu", torch.bfloat16, enabled=autocast):
        loss, saved = saved_for_backward(model, lambda: token_loss_sum(model, _batch()))
    loss.backward()
    return loss.item(), {n: p.grad for n, p in model.named_parameters()}, saved["activations_saved"], changed


@pytest.mark.parametrize("precision", sorted(PRECISIONS))
def test_losses_and_gradients_are_bitwise_the_plain_layers(precision):
    plain_loss, plain_grads, plain_saved, _ = _run(TINY_MODEL, precision, recompute=False)
    loss, grads, saved, changed = _run(TINY_MODEL, precision, recompute=True)
    assert changed == 3 * TINY_MODEL["num_hidden_layers"] + 1  # two norms and an MLP per layer, the final norm
    assert loss == plain_loss
    assert grads.keys() == plain_grads.keys()
    for name, grad in grads.items():
        assert torch.equal(grad, plain_grads[name]), name
    assert saved < plain_saved


@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize("precision", sorted(PRECISIONS))
def test_a_layer_saves_what_the_memory_model_counts(model, precision):
    """Per layer and token (two layers' saved bytes less one layer's): the eager count with the element-wise parts
    recomputed, the recomputing count without."""
    _, _, _, layout = PRECISIONS[precision]
    config = AutoConfig.for_model(**MODELS[model])
    plan = MemoryPlan(ROWS, SEQ, PRECISIONS[precision][2], "none", TrainSpec(), packing=True)
    for recompute, counted in ((True, plan), (False, dataclasses.replace(plan, recomputing=True))):
        one, two = (_run(MODELS[model], precision, recompute, layers)[2] for layers in (1, 2))
        assert (two - one) / (ROWS * SEQ) == layer_bytes_per_token(config, layout, counted), recompute


def test_only_the_standard_gated_mlp_is_changed():
    """A subclass whose forward does anything else keeps its own forward."""
    from transformers.models.gemma2.modeling_gemma2 import Gemma2MLP
    from transformers.models.llama.modeling_llama import LlamaMLP

    class ScaledMLP(LlamaMLP):
        def forward(self, x):
            return 2 * super().forward(x)

    config = AutoConfig.for_model(**TINY_MODEL)
    gemma = AutoConfig.for_model(model_type="gemma2", hidden_size=32, intermediate_size=64)
    assert _is_gated_mlp(LlamaMLP(config)) and _is_gated_mlp(Gemma2MLP(gemma))
    assert not _is_gated_mlp(ScaledMLP(config))
    model = torch.nn.Sequential(ScaledMLP(config))
    assert recompute_elementwise(model) == 0
