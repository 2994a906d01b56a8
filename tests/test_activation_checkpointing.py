"""Activation checkpointing none, selective and full: what each keeps for backward (measured against the memory
model), that the trainer's losses do not change with the mode, and how train.activation_checkpointing is read."""

from __future__ import annotations

import gc

import pytest
import torch
import yaml
from support import TINY_MODEL, train, write_experiment
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from transformers import AutoConfig

from trainer.config import ConfigError, TrainSpec, checkpointing_mode, load_experiment
from trainer.costs.memory_model import MemoryPlan, activation_bytes, layer_bytes_per_token
from trainer.layout import Layout
from trainer.model.build import build_model
from trainer.parallel.activation_checkpointing import enable_activation_checkpointing
from trainer.rank.memory import MemoryTimeline, saved_for_backward
from trainer.rank.step import token_loss_sum

MODES = ("none", "selective", "full")


class _CreatedStorages(TorchDispatchMode):
    """Every storage an operation creates while active (a view of an operand's storage is no new memory)."""

    def __init__(self):
        super().__init__()
        self.storages: dict[int, torch.UntypedStorage] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        operands = {t.untyped_storage().data_ptr() for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)}
        for tensor in tree_leaves(out):
            if isinstance(tensor, torch.Tensor) and tensor.untyped_storage().data_ptr() not in operands:
                storage = tensor.untyped_storage()
                self.storages.setdefault(storage.data_ptr(), storage)
        return out

    def alive_bytes(self) -> int:
        """Bytes of those storages that something besides this record still holds."""
        gc.collect()
        return sum(s.nbytes() for s in self.storages.values() if torch._C._storage_Use_Count(s._cdata) > 1)


def a_batch(config, micro_batch: int, seq_len: int) -> dict[str, torch.Tensor]:
    """The same packed-looking batch every call: three segments per row."""
    ids = torch.randint(0, config.vocab_size, (micro_batch, seq_len), generator=torch.Generator().manual_seed(0))
    segments = torch.arange(seq_len).div(seq_len // 3, rounding_mode="floor").expand(micro_batch, seq_len)
    batch = {"input_ids": ids, "labels": ids, "position_ids": torch.arange(seq_len).expand_as(ids)}
    batch["segment_ids"] = segments.contiguous()
    return batch


def kept_by_one_layer(config, mode: str, micro_batch: int, seq_len: int, packed: bool):
    """Bytes the first decoder layer's forward leaves alive once the model's forward is done: what it keeps for
    backward, by whatever means (autograd's saved tensors, selective checkpointing's cache), its output included
    (the next layer's input, which every mode keeps). With the loss and the gradients, for the same batch."""
    model = build_model(config, None, seed=0)
    model.train()
    enable_activation_checkpointing(model, mode)
    batch = a_batch(config, micro_batch, seq_len)
    record = _CreatedStorages()

    def start(*_) -> None:
        record.__enter__()

    def stop(*_) -> None:
        record.__exit__(None, None, None)

    layer = model.model.layers[0]
    hooks = [layer.register_forward_pre_hook(start), layer.register_forward_hook(stop)]
    loss = token_loss_sum(model, batch, packed)
    for hook in hooks:
        hook.remove()
    kept = record.alive_bytes()
    loss.backward()
    return kept, loss.item(), {name: p.grad for name, p in model.named_parameters()}


@pytest.mark.parametrize(
    ("changes", "micro_batch", "seq_len", "packed"),
    [({}, 2, 64, True), ({"hidden_size": 64, "intermediate_size": 176, "num_hidden_layers": 3}, 4, 32, False)],
)
def test_selective_keeps_less_than_none_and_more_than_full_as_predicted(changes, micro_batch, seq_len, packed):
    """The negative control: selective falling back to full or to none would keep as much as they do. The
    memory model's per-layer bytes for selective and full are within 10% of what the layer really keeps (they
    measure exact on this model); none's within 15%, as tests/test_memory_model.py holds the whole model to."""
    config = AutoConfig.for_model(**{**TINY_MODEL, **changes})
    runs = {mode: kept_by_one_layer(config, mode, micro_batch, seq_len, packed) for mode in MODES}
    kept = {mode: runs[mode][0] for mode in MODES}
    assert kept["none"] > kept["selective"] > kept["full"] > 0
    for mode, tolerance in zip(MODES, (0.15, 0.10, 0.10), strict=True):
        plan = MemoryPlan(micro_batch, seq_len, "fp32", mode, TrainSpec(), packing=packed)
        predicted = micro_batch * seq_len * layer_bytes_per_token(config, Layout(dp_replicate=1), plan)
        assert predicted == pytest.approx(kept[mode], rel=tolerance), mode
    # Recomputing gives the very same numbers: the loss and every gradient bit for bit.
    _, loss, grads = runs["none"]
    for mode in ("selective", "full"):
        assert runs[mode][1] == loss
        for name, grad in grads.items():
            assert torch.equal(runs[mode][2][name], grad), (mode, name)


def measured_through_a_step(config, mode: str, micro_batch: int, seq_len: int, packed: bool):
    """The activations saved_for_backward measures for one forward, and the activations a MemoryTimeline recording
    that forward and its backward holds at each phase's end."""
    model = build_model(config, None, seed=0)
    model.train()
    enable_activation_checkpointing(model, mode)
    batch = a_batch(config, micro_batch, seq_len)
    timeline = MemoryTimeline(model, torch.optim.SGD(model.parameters()), torch.device("cpu"), {"": model})
    with timeline.recording():
        loss, saved = saved_for_backward(model, lambda: token_loss_sum(model, batch, packed))
        loss.backward()
    return saved["activations_saved"], {point["phase"]: point["activations"] for point in timeline.points}


@pytest.mark.parametrize(
    ("changes", "micro_batch", "seq_len", "packed"),
    [({}, 2, 64, True), ({"hidden_size": 64, "intermediate_size": 176, "num_hidden_layers": 3}, 4, 32, False)],
)
def test_saved_for_backward_counts_what_selective_checkpointing_keeps(changes, micro_batch, seq_len, packed):
    """What selective checkpointing's cache keeps (outside autograd's saved tensors) is measured as activations,
    from the forward until the recomputation uses it: selective measures between full and none, its excess over
    full is the model's per-layer difference (exact on these models: held to 1%) and the whole is the model's
    prediction within 15%, as tests/test_memory_model.py holds none and full to. The negative control: measuring
    the cache as nothing (selective equal to full) fails here. A MemoryTimeline sees the same bytes, and all of
    them are released by the end of the backward."""
    config = AutoConfig.for_model(**{**TINY_MODEL, **changes})
    measured = {mode: measured_through_a_step(config, mode, micro_batch, seq_len, packed) for mode in MODES}
    saved = {mode: measured[mode][0] for mode in MODES}
    assert saved["none"] > saved["selective"] > saved["full"] > 0
    plans = {mode: MemoryPlan(micro_batch, seq_len, "fp32", mode, TrainSpec(), packing=packed) for mode in MODES}
    per_layer = {mode: layer_bytes_per_token(config, Layout(dp_replicate=1), plans[mode]) for mode in MODES}
    kept_over_full = config.num_hidden_layers * micro_batch * seq_len * (per_layer["selective"] - per_layer["full"])
    assert saved["selective"] - saved["full"] == pytest.approx(kept_over_full, rel=0.01)
    predicted = activation_bytes(config, Layout(dp_replicate=1), plans["selective"])
    assert predicted == pytest.approx(saved["selective"], rel=0.15)
    for mode in MODES:
        assert measured[mode][1] == {"start": 0, "forward mb1": saved[mode], "backward mb1": 0}, mode


def test_modes_are_ordered_by_memory_in_the_model():
    """Per layer none > selective > full under every precision, tp and cp the model covers."""
    config = AutoConfig.for_model(**{**TINY_MODEL, "hidden_size": 256, "intermediate_size": 688})
    for precision in ("fp32", "bf16"):
        for layout in (Layout(dp_replicate=1), Layout(tp=2), Layout(cp=2)):
            per_layer = [
                layer_bytes_per_token(config, layout, MemoryPlan(2, 256, precision, mode, TrainSpec()))
                for mode in MODES
            ]
            assert per_layer == sorted(per_layer, reverse=True) and len(set(per_layer)) == 3, (precision, layout)


@pytest.mark.slow
def test_the_trainer_gives_the_same_losses_under_every_mode(tmp_path):
    """Through the trainer's own path (2 processes, FSDP2, 3 steps): selective and full give the no-checkpointing
    run's losses exactly."""
    experiment = write_experiment(tmp_path)
    losses = {}
    for mode in MODES:
        run = train(experiment, tmp_path / mode, "--nproc", "2", "--layout", "dp_shard=2",
                    "--set", f"train.activation_checkpointing={mode}")  # fmt: skip
        recorded = yaml.safe_load(run.config.read_text())["train"]["activation_checkpointing"]
        assert recorded == {"none": False, "full": True}.get(mode, mode)
        losses[mode] = [step["loss"] for step in run.read_steps()]
    assert len(losses["none"]) == 3
    assert losses["selective"] == losses["none"] and losses["full"] == losses["none"]


@pytest.mark.parametrize(
    ("written", "stored", "mode"),
    [(True, True, "full"), (False, False, "none"), ("full", True, "full"), ("none", False, "none"),
     ("selective", "selective", "selective"), ("Selective", "selective", "selective")],
)  # fmt: skip
def test_the_old_bools_and_the_mode_names_load(tmp_path, written, stored, mode):
    """true/false still load (and are stored as before, so earlier runs' files and hashes stay as they were)."""
    path = write_experiment(tmp_path, {"train": {"activation_checkpointing": written}})
    train_spec = load_experiment(path).train
    assert train_spec.activation_checkpointing == stored and checkpointing_mode(stored) == mode
    assert load_experiment(path).config_hash() == load_experiment(path).config_hash()
    if isinstance(written, bool):
        same = write_experiment(tmp_path, {"train": {"activation_checkpointing": mode}}, name="named.yaml")
        assert load_experiment(same).config_hash() == load_experiment(path).config_hash()


@pytest.mark.parametrize("value", ["partial", 1, "yes"])
def test_a_bad_mode_is_a_one_line_config_error(tmp_path, value):
    path = write_experiment(tmp_path, {"train": {"activation_checkpointing": value}})
    with pytest.raises(ConfigError) as error:
        load_experiment(path)
    assert "train.activation_checkpointing" in str(error.value) and "\n" not in str(error.value)


def test_a_bad_mode_given_on_the_command_line_stops_before_launch(tmp_path):
    from support import meshpilot

    done = meshpilot("train", str(write_experiment(tmp_path)), "--out", str(tmp_path / "run"),
                     "--set", "train.activation_checkpointing=partial")  # fmt: skip
    assert done.returncode != 0 and not (tmp_path / "run" / "steps.jsonl").exists()
    assert "train.activation_checkpointing: expected one of none, selective, full" in done.stderr


def test_selective_checkpointing_saves_every_attention_kernel_flex_included():
    """Attention is never recomputed: the SDPA kernels' and flex_attention's outputs are saved (torchtitan's list)."""
    from trainer.parallel.activation_checkpointing import _saved_ops, flex_attention_op

    _, others = _saved_ops()
    assert flex_attention_op() is torch.ops.higher_order.flex_attention and flex_attention_op() in others
    assert torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default in others
    assert torch.ops.aten._scaled_dot_product_efficient_attention.default in others
