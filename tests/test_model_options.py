"""Model sources and options: local config.json and checkpoints, activation checkpointing, compile, FLOPs."""

from __future__ import annotations

import json

import pytest
import torch
from support import TINY_MODEL, write_experiment
from transformers import AutoConfig, AutoModelForCausalLM

from trainer.config import ModelSpec
from trainer.costs.flops import causal_attention_pairs, step_flops
from trainer.launch.launcher import TrainRequest, prepare
from trainer.model.build import build_model, checkpoint_dir, model_config
from trainer.model.parameters import count_parameters
from trainer.parallel.activation_checkpointing import enable_activation_checkpointing
from trainer.rank.step import forward_backward


def tiny_batch(seed: int = 0) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, TINY_MODEL["vocab_size"], (2, 16), generator=generator)
    segments = torch.tensor([[0] * 10 + [1] * 6, [2] * 16])
    labels = ids.roll(-1, dims=1)
    labels[:, -1] = -100
    labels[0, 9] = -100
    positions = torch.tensor([list(range(10)) + list(range(6)), list(range(16))])
    return {"input_ids": ids, "labels": labels, "position_ids": positions, "segment_ids": segments}


def test_local_config_file_and_checkpoint_directory(tmp_path):
    config = AutoConfig.for_model(**TINY_MODEL)
    torch.manual_seed(3)
    saved = AutoModelForCausalLM.from_config(config)
    saved.save_pretrained(tmp_path / "ckpt")
    (tmp_path / "only-config").mkdir()
    config.to_json_file(tmp_path / "only-config" / "config.json")

    from_file = model_config(ModelSpec(path="only-config/config.json"), tmp_path)
    assert from_file.hidden_size == TINY_MODEL["hidden_size"]
    assert checkpoint_dir(ModelSpec(path="only-config"), tmp_path) is None  # random init from the config

    weights = checkpoint_dir(ModelSpec(path="ckpt"), tmp_path)
    assert weights == tmp_path / "ckpt"
    loaded = build_model(model_config(ModelSpec(path="ckpt"), tmp_path), weights, seed=0)
    for (name, expected), actual in zip(saved.state_dict().items(), loaded.state_dict().values(), strict=True):
        torch.testing.assert_close(actual, expected, rtol=0, atol=0, msg=name)


def test_training_starts_from_local_checkpoint(tmp_path):
    config = AutoConfig.for_model(**TINY_MODEL)
    AutoModelForCausalLM.from_config(config).save_pretrained(tmp_path / "ckpt")
    experiment = write_experiment(tmp_path, {"model": {"config": None, "path": "ckpt"}})
    prepared = prepare(TrainRequest(experiment, out=tmp_path / "run"))
    launch = json.loads(prepared.run.launch.read_text())
    assert launch["weights_dir"] == str(tmp_path / "ckpt")


def test_activation_checkpointing_gives_the_same_gradients():
    results = []
    for checkpointing in (False, True):
        model = build_model(AutoConfig.for_model(**TINY_MODEL), None, seed=0)
        model.train()
        if checkpointing:
            enable_activation_checkpointing(model)
        loss = forward_backward(model, [tiny_batch()], dp_group=None).loss
        results.append((loss, {n: p.grad.clone() for n, p in model.named_parameters()}))
    (loss_a, grads_a), (loss_b, grads_b) = results
    assert loss_a == pytest.approx(loss_b, rel=1e-6)
    for name, grad in grads_a.items():
        torch.testing.assert_close(grads_b[name], grad, rtol=1e-5, atol=1e-7, msg=name)


def test_attention_pairs_count_each_document_causally():
    segments = torch.tensor([[0, 0, 0, 1, 1, -1], [2, 2, 2, 2, 2, 2]])
    # documents of 3, 2 and 6 tokens; padding does no useful work
    assert causal_attention_pairs(segments) == 6 + 3 + 21
    # a document that continues into the next row is a new causal segment there
    assert causal_attention_pairs(torch.tensor([[5, 5], [5, 5]])) == 3 + 3


def test_step_flops_formula():
    for tied in (False, True):
        params = count_parameters(AutoConfig.for_model(**{**TINY_MODEL, "tie_word_embeddings": tied}))
        assert params["embedding"] == TINY_MODEL["vocab_size"] * TINY_MODEL["hidden_size"]
        # the output projection is a matmul either way; only the input lookup is free
        assert params["matmul"] == params["total"] - (0 if tied else params["embedding"])
    assert step_flops(100, 8, 2, tokens=10, attention_pairs=30) == 6 * 100 * 10 + 12 * 8 * 2 * 30


def test_mfu_uses_the_device_peak_and_is_null_for_unknown_devices():
    from trainer.costs.flops import mfu

    config = AutoConfig.for_model(**TINY_MODEL)
    width = TINY_MODEL["hidden_size"]  # 4 heads of 8
    flops = step_flops(count_parameters(config)["matmul"], width, TINY_MODEL["num_hidden_layers"], 1000, 5000)
    assert mfu(config, 1000, 5000, 2.0, "NVIDIA H100 80GB HBM3", 4) == pytest.approx(flops / 2.0 / (989e12 * 4))
    assert mfu(config, 1000, 5000, 2.0, "NVIDIA A100-SXM4-80GB", 1) == pytest.approx(flops / 2.0 / 312e12)
    assert mfu(config, 1000, 5000, 2.0, "Some Accelerator", 1) is None


def test_autocast_weight_copies_are_not_counted_as_activations():
    from trainer.rank.memory import saved_for_backward
    from trainer.rank.step import token_loss_sum

    model = build_model(AutoConfig.for_model(**TINY_MODEL), None, seed=0)
    batch = tiny_batch()
    _, plain = saved_for_backward(model, lambda: token_loss_sum(model, batch))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        _, mixed = saved_for_backward(model, lambda: token_loss_sum(model, batch))
    assert plain["weight_copies_saved"] == 0 and plain["activations_saved"] > 0
    # every linear weight of the decoder layers gets a bf16 copy saved for backward
    linear_bytes = sum(
        p.numel() * 2 for n, p in model.named_parameters() if p.ndim == 2 and "embed" not in n and "lm_head" not in n
    )
    assert mixed["weight_copies_saved"] >= linear_bytes
