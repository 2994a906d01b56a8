"""FSDP2 with gradient accumulation (train.fsdp_grad_sync): reduce-scattering every micro-batch keeps only each
rank's gradient shard, reducing once per step keeps an unsharded gradient of the whole model on every rank until
the last micro-batch. Two processes accumulate four micro-batches each; the gradient bytes they hold at their peak
during the accumulation are what trainer.costs.memory_model predicts for each setting, and both settings train as the
one-process reference does."""

from __future__ import annotations

import json

import pytest
from support import train, write_experiment

from trainer.config import ConfigError, TrainSpec

SEQ_LEN = 64
ROWS = 8  # per step: 4 micro-batches of one row on each of 2 ranks


@pytest.fixture(scope="module")
def experiment(tmp_path_factory):
    changes = {
        "data": {"seq_len": SEQ_LEN},
        # The noise scale measured on every step, as its first micro-batch is then reduced whole in either setting.
        "train": {"steps": 2, "global_batch_tokens": ROWS * SEQ_LEN, "micro_batch": 1, "gns_every": 1},
    }
    return write_experiment(tmp_path_factory.mktemp("grad-sync"), changes)


@pytest.fixture(scope="module")
def reference(experiment):
    return train(experiment, experiment.parent / "single", "--nproc", "1")


@pytest.fixture(scope="module")
def runs(experiment):
    runs = {}
    for sync in ("micro_batch", "step"):
        options = ("--nproc", "2", "--layout", "dp_shard=2", "--set", f"train.fsdp_grad_sync={sync}")
        runs[sync] = train(experiment, experiment.parent / sync, *options)
    return runs


def accumulation_peak(points: list[dict]) -> int:
    """The most gradient bytes a rank held from its first forward to the end of its next-to-last backward."""
    backwards = [i for i, point in enumerate(points) if point["phase"].startswith("backward")]
    assert len(backwards) == 4, [p["phase"] for p in points]
    return max(point["gradients"] for point in points[: backwards[-1]])


@pytest.mark.parametrize("sync", ["micro_batch", "step"])
def test_held_gradients_are_predicted(runs, sync):
    memory = json.loads(runs[sync].memory.read_text())
    for predicted, timeline in zip(memory["predicted"], memory["timeline"], strict=True):
        assert predicted["rank"] == timeline["rank"]
        expected = predicted["gradients"] + predicted["unreduced_gradients"]
        assert accumulation_peak(timeline["points"]) == pytest.approx(expected, rel=0.01), sync
    assert (memory["predicted"][0]["unreduced_gradients"] > 0) == (sync == "step")
    # Every rank ends the step with its reduced shard, whatever the setting.
    assert [r["gradients"] for r in memory["measured"]] == [r["parameters"] for r in memory["predicted"]]


def test_per_step_sync_holds_the_whole_model_gradient(runs):
    """The negative control: reducing once per step holds both ranks' shards' worth on each rank (and the shard
    the noise scale's first micro-batch reduced), reducing every micro-batch only the shard."""
    peaks = {}
    for sync, run in runs.items():
        memory = json.loads(run.memory.read_text())
        peaks[sync] = max(accumulation_peak(t["points"]) for t in memory["timeline"])
        whole = sum(r["parameters"] for r in memory["predicted"])
    assert peaks["step"] == pytest.approx(1.5 * whole, rel=0.01)
    assert peaks["micro_batch"] < 0.6 * whole


@pytest.fixture(scope="module")
def bf16_step(experiment):
    """Once per step under bf16 with train.fsdp_reduce_dtype=bf16 (FSDP2's gradient in its compute dtype)."""
    sets = ("train.fsdp_grad_sync=step", "train.precision=bf16", "train.fsdp_reduce_dtype=bf16")
    options = ("--nproc", "2", "--layout", "dp_shard=2", *(arg for s in sets for arg in ("--set", s)))
    return train(experiment, experiment.parent / "step_bf16", *options)


def test_bf16_reduce_accumulates_a_bf16_gradient(bf16_step):
    """With a bf16 reduce dtype FSDP2 accumulates the unsharded gradient in bf16, as predicted: half the fp32
    reduce's whole-model gradient, beside the fp32 shard (the noise scale's first micro-batch reduced it)."""
    memory = json.loads(bf16_step.memory.read_text())
    for predicted, timeline in zip(memory["predicted"], memory["timeline"], strict=True):
        expected = predicted["gradients"] + predicted["unreduced_gradients"]
        assert accumulation_peak(timeline["points"]) == pytest.approx(expected, rel=0.01)
    whole = sum(r["parameters"] for r in memory["predicted"])
    peak = max(accumulation_peak(t["points"]) for t in memory["timeline"])
    assert peak == pytest.approx(whole / 2 + whole / 2, rel=0.01)  # bf16 whole (half of fp32's) + the fp32 half


@pytest.mark.parametrize("sync", ["micro_batch", "step"])
def test_both_settings_train_as_one_process(runs, reference, sync):
    expected, got = reference.read_steps(), runs[sync].read_steps()
    assert len(got) == len(expected) == 2
    for a, b in zip(expected, got, strict=True):
        assert b["loss"] == pytest.approx(a["loss"], rel=1e-5), sync
        assert b["grad_norm"] == pytest.approx(a["grad_norm"], rel=1e-4), sync
    assert json.loads(runs[sync].metrics.read_text())["grad_accum"] == 4


def test_unknown_setting_is_refused():
    with pytest.raises(ConfigError, match=r"^train\.fsdp_grad_sync: 'layer' is not one of micro_batch, step$"):
        TrainSpec(fsdp_grad_sync="layer")
