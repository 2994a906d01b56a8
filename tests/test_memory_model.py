"""The memory model against what autograd really saves, and its exact per-rank parameter shards."""

from __future__ import annotations

import pytest
import torch
from support import TINY_MODEL
from transformers import AutoConfig

from trainer.config import TrainSpec
from trainer.costs.memory_model import (
    MemoryPlan,
    activation_bytes,
    local_shapes,
    loss_temporary_bytes,
    predict_memory,
    rank_coordinates,
)
from trainer.layout import Layout
from trainer.model.build import build_model
from trainer.parallel.activation_checkpointing import enable_activation_checkpointing
from trainer.rank.memory import saved_for_backward
from trainer.rank.step import token_loss_sum


def measured_activations(config, micro_batch: int, seq_len: int, checkpointing: bool, packed: bool = True) -> int:
    return measured_saved(config, micro_batch, seq_len, checkpointing, packed)["activations_saved"]


def measured_saved(
    config, micro_batch: int, seq_len: int, checkpointing: bool, packed: bool, bf16: bool = False, whole: bool = False
):
    model = build_model(config, None, seed=0)
    model.train()
    enable_activation_checkpointing(model, checkpointing)  # as the trainer does (none: the norms, gated products)
    ids = torch.randint(0, config.vocab_size, (micro_batch, seq_len))
    segments = torch.arange(seq_len).div(seq_len // 3, rounding_mode="floor").expand(micro_batch, seq_len)
    batch = {"input_ids": ids, "labels": ids, "position_ids": torch.arange(seq_len).expand_as(ids)}
    batch["segment_ids"] = segments.contiguous()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        _, saved = saved_for_backward(model, lambda: token_loss_sum(model, batch, packed, whole=whole))
    return saved


@pytest.mark.parametrize("packed", [True, False])
@pytest.mark.parametrize("checkpointing", [False, True])
@pytest.mark.parametrize(
    ("changes", "micro_batch", "seq_len"),
    [
        ({}, 2, 64),
        ({"hidden_size": 64, "intermediate_size": 176, "num_hidden_layers": 3}, 4, 32),
        ({"num_attention_heads": 8, "num_key_value_heads": 8, "vocab_size": 1024}, 1, 128),
    ],
)
def test_predicted_activations_within_15_percent(changes, micro_batch, seq_len, checkpointing, packed):
    config = AutoConfig.for_model(**{**TINY_MODEL, **changes})
    plan = MemoryPlan(micro_batch, seq_len, "fp32", checkpointing, TrainSpec(), packing=packed)
    predicted = activation_bytes(config, Layout(dp_replicate=1), plan)
    measured = measured_activations(config, micro_batch, seq_len, checkpointing, packed)
    assert predicted == pytest.approx(measured, rel=0.15)


def test_the_whole_loss_saves_its_log_softmax():
    """train.loss whole keeps the fp32 log-softmax over the vocabulary for its backward, which the chunked loss never
    saves (only a log-sum-exp per token): the prediction adds what autograd adds, within 15%, and prices its
    temporaries (the whole fp32 logits and their gradient) above the chunked loss's one chunk."""
    config = AutoConfig.for_model(**TINY_MODEL)
    single = Layout(dp_replicate=1)
    predicted, measured = {}, {}
    for loss in ("chunked", "whole"):
        plan = MemoryPlan(2, 64, "fp32", False, TrainSpec(loss=loss))
        predicted[loss] = predict_memory(config, single, plan)[0]
        measured[loss] = measured_saved(config, 2, 64, False, True, whole=loss == "whole")["activations_saved"]
    added = predicted["whole"]["activations_saved"] - predicted["chunked"]["activations_saved"]
    assert added == pytest.approx(measured["whole"] - measured["chunked"], rel=0.15)
    assert added >= 2 * 64 * config.vocab_size * 4 * 0.9  # the log-softmax of 128 tokens
    # Its temporaries: the whole fp32 logits and their gradient, against one chunk's (here the chunk holds them all).
    assert predicted["whole"]["temporaries"] == predicted["chunked"]["temporaries"]
    large = AutoConfig.for_model(**{**TINY_MODEL, "vocab_size": 128256})
    chunked, whole = (loss_temporary_bytes(large, single, 8192, "bf16", whole=w) for w in (False, True))
    assert whole == 2 * 8192 * 128256 * 4 > 20 * chunked


def test_dense_mask_is_saved_once_per_micro_batch():
    """Packing's dense mask is one bias that every layer shares (trainer.data.packing.mask_bias): what it costs (with
    SDPA's repeated keys and values, per layer) is predicted, and the mask's own share does not grow with the
    layers. Handed the boolean mask, SDPA would make and save a bias in every layer: the 2 layers' cost would
    about double at 4."""
    costs = {}
    for layers in (2, 4):
        config = AutoConfig.for_model(**{**TINY_MODEL, "num_hidden_layers": layers})
        mask_cost = [measured_activations(config, 2, 64, False, packed) for packed in (True, False)]
        predicted = [
            activation_bytes(config, Layout(dp_replicate=1), MemoryPlan(2, 64, "fp32", False, TrainSpec(), packing=p))
            for p in (True, False)
        ]
        costs[layers] = mask_cost[0] - mask_cost[1]
        assert predicted[0] - predicted[1] == pytest.approx(costs[layers], rel=0.1)
    # Two more layers add their repeated keys and values (2 x 16 KiB here), not two more masks (2 x 32 KiB).
    mask = 2 * 64 * 64 * 4  # one fp32 bias: 2 rows of 64 queries x 64 keys
    assert costs[4] - costs[2] == 2 * 128 * (2 * 32 - 2 * 16) * 4 < 2 * mask


def test_autocast_weight_copies_are_predicted_exactly():
    config = AutoConfig.for_model(**TINY_MODEL)
    plan = MemoryPlan(2, 64, "bf16", False, TrainSpec())
    single = Layout(dp_replicate=1)
    predicted = predict_memory(config, single, plan)[0]["weight_copies_saved"]
    assert predicted == measured_saved(config, 2, 64, False, True, bf16=True)["weight_copies_saved"] > 0
    # FSDP2's mixed precision computes with the bf16 weights it gathers: no copies kept.
    assert predict_memory(config, Layout(dp_replicate=1, dp_shard=2), plan)[0]["weight_copies_saved"] == 0


def test_rank_coordinates_follow_the_mesh_order():
    layout = Layout(dp_replicate=2, dp_shard=2, tp=2)  # mesh [pp, dp_replicate, dp_shard, cp, tp]
    assert rank_coordinates(0, layout) == {"pp": 0, "dp_replicate": 0, "dp_shard": 0, "cp": 0, "tp": 0}
    assert rank_coordinates(1, layout)["tp"] == 1
    assert rank_coordinates(2, layout)["dp_shard"] == 1
    assert rank_coordinates(5, layout) == {"pp": 0, "dp_replicate": 1, "dp_shard": 0, "cp": 0, "tp": 1}


def test_shards_add_up_to_the_whole_model():
    config = AutoConfig.for_model(**{**TINY_MODEL, "vocab_size": 509})  # uneven FSDP chunks
    whole = {name: shape for name, shape in local_shapes(config, Layout(dp_replicate=1), 0)}
    layout = Layout(dp_replicate=1, dp_shard=3, tp=2)
    numel = {name: 0 for name in whole}
    for rank in range(layout.world_size):
        for name, shape in local_shapes(config, layout, rank):
            numel[name] += torch.Size(shape).numel()
    for name, shape in whole.items():
        # Split over tp: the layers' projections and the embedding and head (by vocabulary); replicated: the norms.
        copies = 1 if ("self_attn" in name or "mlp" in name or "embed" in name or "lm_head" in name) else layout.tp
        assert numel[name] == torch.Size(shape).numel() * copies, name


def test_predictions_shrink_with_sharding():
    config = AutoConfig.for_model(**TINY_MODEL)
    plan = MemoryPlan(2, 64, "fp32", False, TrainSpec())
    single = predict_memory(config, Layout(dp_replicate=1), plan)[0]
    fsdp = predict_memory(config, Layout(dp_replicate=1, dp_shard=2), plan)[0]
    tp = predict_memory(config, Layout(dp_replicate=1, tp=2), plan)[0]
    assert fsdp["parameters"] < single["parameters"] and fsdp["optimizer"] < single["optimizer"]
    assert fsdp["activations_saved"] == single["activations_saved"]
    assert tp["activations_saved"] < single["activations_saved"]
    assert single["peak"] == sum(v for k, v in single.items() if k not in ("peak", "rank"))
