"""The memory and throughput models against what an H100 measured (bench/results/gpu_h100_validation.json, from
`python -m bench.gpu`): predictions made here, on any machine, for the configurations that ran there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.gpu import LLAMA_1B, LLAMA_SMALL
from trainer.config import experiment_from_dict
from trainer.costs.memory_model import MemoryPlan, predict_memory
from trainer.costs.throughput import predict_run
from trainer.hardware import Hardware
from trainer.layout import Layout
from trainer.model.build import model_config

RESULTS = Path(__file__).resolve().parents[1] / "bench" / "results" / "gpu_h100_validation.json"
H100 = Hardware("cuda", "NVIDIA H100 80GB HBM3", devices_per_node=1)
# name: model, sequence length, micro-batch, rows per step, train keys (as bench/gpu.py ran them)
ONE_B = {
    "mem_s2048": (LLAMA_1B, 2048, 4, 4, {"attention": "dense"}),
    "mem_s2048_ac": (LLAMA_1B, 2048, 4, 4, {"attention": "dense", "activation_checkpointing": True}),
    "mem_s4096": (LLAMA_1B, 4096, 2, 2, {"attention": "dense"}),
    "mem_s4096_ac": (LLAMA_1B, 4096, 2, 2, {"attention": "dense", "activation_checkpointing": True}),
}
PACKED = {f"attn_s{seq}_packed_{kind}": (LLAMA_SMALL, seq, 1, 2, {"attention": kind})
          for seq in (8192, 32768) for kind in ("flex", "dense")}  # fmt: skip


@pytest.fixture(autouse=True)
def stated_figures(tmp_path, monkeypatch):
    monkeypatch.setenv("MESHPILOT_CACHE", str(tmp_path))  # no probe, no calibration: the stated figures


def measured(name: str) -> dict:
    return json.loads(RESULTS.read_text())["runs"][name]


def prediction(model: dict, seq_len: int, micro_batch: int, rows: int, train: dict):
    experiment = experiment_from_dict({
        "model": {"config": model}, "tokenizer": "builtin",
        "data": {"train": "builtin:stdlib-docs", "seq_len": seq_len, "packing": True},
        "train": {"global_batch_tokens": rows * seq_len, "micro_batch": micro_batch, "precision": "bf16", **train},
        "hardware": {"device_type": "cuda", "devices": 1},
    })  # fmt: skip
    config = model_config(experiment.model, Path("."))
    step = predict_run(experiment, config, H100, rows // micro_batch)
    plan = MemoryPlan(micro_batch, seq_len, "bf16", experiment.train.activation_checkpointing, experiment.train,
                      rows // micro_batch, True, "cuda")  # fmt: skip
    return step, predict_memory(config, Layout(dp_replicate=1), plan)[0]


@pytest.mark.parametrize("name", ONE_B)
def test_the_1b_model_s_step_is_predicted_within_the_goal(name):
    """Uncalibrated, from the stated figures: the step within 15%. Compute-bound alone, the step was predicted at
    0.51-0.60 of what ran."""
    step, _ = prediction(*ONE_B[name])
    assert step.step_s == pytest.approx(measured(name)["median_step_s"], rel=0.15)
    assert step.memory_s > 0.3 * step.matmul_s  # the memory-bound work is a real part of the step


@pytest.mark.xfail(
    strict=True,
    reason="measured on the trainer before issue 36's chunked loss and shared mask: it held the whole micro-batch's "
    "fp32 logits (and their log-softmax) and a mask bias per layer, which the trainer, and so the prediction, no "
    "longer hold; to be measured again on a GPU",
)
@pytest.mark.parametrize("name", ONE_B)
def test_the_1b_model_s_peak_is_predicted_within_10_percent(name):
    """The peak (reserved plus outside the allocator) within 10%."""
    _, memory = prediction(*ONE_B[name])
    assert memory["peak"] == pytest.approx(measured(name)["peak_mem_bytes"], rel=0.10)


@pytest.mark.parametrize("seq_len", [8192, 32768])
def test_flex_attention_is_predicted_faster_and_smaller_than_the_dense_mask_as_measured(seq_len):
    flex_step, flex_memory = prediction(*PACKED[f"attn_s{seq_len}_packed_flex"])
    dense_step, dense_memory = prediction(*PACKED[f"attn_s{seq_len}_packed_dense"])
    flex, dense = measured(f"attn_s{seq_len}_packed_flex"), measured(f"attn_s{seq_len}_packed_dense")
    assert dense["median_step_s"] > flex["median_step_s"] and dense_step.step_s > flex_step.step_s
    assert dense["peak_mem_bytes"] > flex["peak_mem_bytes"] and dense_memory["peak"] > flex_memory["peak"]


H200_RUNS = Path(__file__).resolve().parents[1] / "bench" / "results" / "gpu_h200_issue38_call1.json"
H200 = Hardware("cuda", "NVIDIA H200", devices_per_node=1)


H200_WHOLE_LOSS_RUNS = H200_RUNS.with_name("gpu_h200_issue38_session5.json")


def h200_step(name: str, precision: str, loss: str = "chunked", runs: Path = H200_RUNS) -> tuple[float, float]:
    """(predicted, measured) step seconds of bench/gpu.py's compiled 1B run `name` on one H200 (8 micro-batches of
    4 x 2048 packed tokens, flex attention), predicted uncalibrated, from the stated figures."""
    ran = json.loads(runs.read_text())["sections"]["mfu"][name]
    experiment = experiment_from_dict({
        "model": {"config": LLAMA_1B}, "tokenizer": "builtin",
        "data": {"train": "builtin:stdlib-docs", "seq_len": 2048, "packing": True},
        "train": {"global_batch_tokens": 65536, "micro_batch": 4, "precision": precision, "compile": True,
                  "loss": loss},
        "hardware": {"device_type": "cuda", "devices": 1},
    })  # fmt: skip
    return predict_run(experiment, model_config(experiment.model, Path(".")), H200, 8).step_s, ran["median_step_s"]


def test_the_stated_matmul_rate_reproduces_the_h200_whole_loss_step_it_was_set_from():
    """In sample, a guard of trainer.hardware.GPU_EFFICIENCY, which this run set (the compiled step with the loss
    fused into it, meshpilot's best settings: half the peak predicted it 16% slow)."""
    predicted, measured = h200_step("mfu_s2048_compiled_whole_loss", "bf16", "whole", H200_WHOLE_LOSS_RUNS)
    assert predicted == pytest.approx(measured, rel=0.02)


def test_the_compiled_1b_chunked_loss_step_on_an_h200_is_predicted_within_the_goal():
    """Not fitted: the chunked loss's extra time over the whole one (0.29 s measured) is its counted memory traffic
    and the head's second forward (predicted 1.247 s against 1.313 s)."""
    predicted, measured = h200_step("mfu_s2048_compiled", "bf16")
    assert predicted == pytest.approx(measured, rel=0.07)


def test_float8_gain_reproduces_the_h200_fp8_step_it_was_measured_on():
    """In sample, a guard of trainer.costs.throughput.FLOAT8_GAIN, which this very run set (the data sheets' full 2x
    predicted the step 12% too fast); bench/published_float8.py checks the constant against published runs. Set at
    half the peak with the loss's traffic uncounted; both changes together leave it within 2%."""
    predicted, measured = h200_step("mfu_s2048_compiled_fp8", "fp8")
    assert predicted == pytest.approx(measured, rel=0.02)
