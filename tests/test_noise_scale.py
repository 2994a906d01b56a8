"""Gradient noise scale: the two-batch estimator on a synthetic problem with known gradient variance, and the
trainer's measurement (logged per step, the same whether data parallelism replicates or shards)."""

from __future__ import annotations

import numpy as np
import pytest
from support import train, write_experiment

from trainer.config import GNS_EVERY, TrainSpec
from trainer.layout import Layout
from trainer.rank.noise_scale import NoiseScale, measured_on, recommended_batch_tokens, two_batch_estimates

DIM = 40


def synthetic_problem(seed: int = 0):
    """Per-token gradients G + noise with a diagonal covariance: B_simple = tr(Sigma) / |G|^2 is known."""
    rng = np.random.default_rng(seed)
    true_gradient = rng.normal(size=DIM)
    noise_std = rng.uniform(0.5, 3.0, size=DIM)
    b_simple = float((noise_std**2).sum() / (true_gradient**2).sum())

    def mean_gradient(tokens: int) -> np.ndarray:
        # The mean of `tokens` independent per-token gradients, drawn directly from its distribution.
        return true_gradient + rng.normal(size=DIM) * noise_std / np.sqrt(tokens)

    return mean_gradient, b_simple, float((true_gradient**2).sum()), float((noise_std**2).sum())


def test_two_batch_estimates_are_unbiased():
    mean_gradient, _, grad_sq, trace = synthetic_problem()
    estimates = []
    for _ in range(20_000):
        small, big = mean_gradient(16), mean_gradient(128)
        estimates.append(two_batch_estimates(float(small @ small), 16, float(big @ big), 128))
    got_grad_sq, got_trace = np.mean(estimates, axis=0)
    assert got_grad_sq == pytest.approx(grad_sq, rel=0.05)
    assert got_trace == pytest.approx(trace, rel=0.05)


def test_smoothed_noise_scale_converges_to_the_true_value():
    mean_gradient, b_simple, _, _ = synthetic_problem(seed=1)
    noise = NoiseScale(beta=0.995)
    for _ in range(3000):
        small, big = mean_gradient(32), mean_gradient(256)
        value = noise.update(float(small @ small), 32, float(big @ big), 256)
    assert value == pytest.approx(b_simple, rel=0.1)


def test_bias_correction_makes_the_first_update_the_single_step_estimate():
    noise = NoiseScale(beta=0.9)
    noise.update(5.0, 10, 2.0, 100)
    grad_sq, trace = two_batch_estimates(5.0, 10, 2.0, 100)
    assert noise.grad_sq == pytest.approx(grad_sq) and noise.trace == pytest.approx(trace)


def test_recommended_batch_is_whole_rows():
    assert recommended_batch_tokens(1000.0, 64) == 1024
    assert recommended_batch_tokens(10.0, 64) == 64
    assert recommended_batch_tokens(None, 64) is None
    with pytest.raises(ValueError, match="small batch < big batch"):
        two_batch_estimates(1.0, 100, 1.0, 100)


@pytest.mark.slow
def test_trainer_logs_the_noise_scale_the_same_for_replicated_and_sharded_data_parallel(tmp_path):
    # 4 micro-batches per rank; every step measured, as a user asks with gns_every: 1
    experiment = write_experiment(tmp_path, {"train": {"steps": 4, "micro_batch": 1, "gns_every": 1}})
    runs = {
        layout: train(experiment, tmp_path / layout, "--nproc", "2", "--layout", layout)
        for layout in ("dp_replicate=2", "dp_shard=2")
    }
    steps = {layout: run.read_steps() for layout, run in runs.items()}
    for a, b in zip(steps["dp_replicate=2"], steps["dp_shard=2"], strict=True):
        assert b["gns_small_grad_sq"] == pytest.approx(a["gns_small_grad_sq"], rel=1e-4)
        assert b["gns"] == pytest.approx(a["gns"], rel=1e-3)
    # The logged value follows from the logged norms: small batch = one row on each of 2 ranks.
    noise = NoiseScale()
    for step in steps["dp_shard=2"]:
        assert step["gns_small_tokens"] < step["target_tokens"]
        expected = noise.update(
            step["gns_small_grad_sq"], step["gns_small_tokens"], step["grad_norm"] ** 2, step["target_tokens"]
        )
        assert step["gns"] == pytest.approx(expected, rel=1e-9)
    metrics = runs["dp_shard=2"].read_metrics()
    assert metrics["gns"] == pytest.approx(steps["dp_shard=2"][-1]["gns"])
    if metrics["gns"] is not None and metrics["gns"] > 0:
        assert metrics["recommended_global_batch_tokens"] % 64 == 0
    else:
        assert metrics["gns_note"]


def test_by_default_every_tenth_step_is_measured_and_every_step_where_asked():
    assert TrainSpec().gns_every == GNS_EVERY == 10
    assert [step for step in range(1, 31) if measured_on(step, GNS_EVERY)] == [10, 20, 30]
    assert all(measured_on(step, 1) for step in range(1, 5))
    assert not any(measured_on(step, 0) for step in range(1, 5))


@pytest.mark.slow
def test_only_the_measured_steps_log_the_noise_scale(tmp_path):
    experiment = write_experiment(tmp_path, {"train": {"steps": 4, "micro_batch": 1, "gns_every": 2}})
    steps = train(experiment, tmp_path / "run", "--nproc", "1").read_steps()
    assert ["gns_small_grad_sq" in step for step in steps] == [False, True, False, True]
    noise = NoiseScale()
    for step in steps[1::2]:  # the estimate averages the measured steps only
        expected = noise.update(
            step["gns_small_grad_sq"], step["gns_small_tokens"], step["grad_norm"] ** 2, step["target_tokens"]
        )
        assert step["gns"] == pytest.approx(expected, rel=1e-9)


def _llama_8b_on_64_h100s(gns_every: int, fsdp_reduce_dtype: str = "fp32"):
    """The step of `meshpilot plan`'s first choice for Llama-3.1-8B on 8 nodes of 8 H100s: HSDP across the nodes."""
    from transformers import LlamaConfig

    from trainer.costs.throughput import StepShape, estimate_step, model_bytes
    from trainer.hardware import planned_hardware
    from trainer.model.parameters import count_parameters
    from trainer.model.presets import PRESET_SEQ_LEN, model_preset

    config = LlamaConfig(**{k: v for k, v in model_preset("llama-3.1-8b").items() if k != "model_type"})
    counts = count_parameters(config)
    hardware, _ = planned_hardware("cuda", 8, 8, "h100")
    layout = Layout(dp_replicate=8, dp_shard=8)
    shape = StepShape(1, PRESET_SEQ_LEN, 4, precision="bf16", gns_every=gns_every, fsdp_reduce_dtype=fsdp_reduce_dtype)
    return estimate_step(
        config, layout, hardware, shape, matmul_params=counts["matmul"], parameter_bytes=model_bytes(counts)
    )


def test_the_throughput_model_prices_the_extra_reduction_amortised_over_the_measured_steps():
    from trainer.costs.throughput import noise_scale_bytes

    off, every, default = (_llama_8b_on_64_h100s(n) for n in (0, 1, GNS_EVERY))
    # One more reduction of the gradient on a measured step: HSDP's reduce-scatter within the node and all-reduce
    # of the shards across nodes, a tenth of it per step by default.
    assert every.comm_bytes["dp_shard"] > off.comm_bytes["dp_shard"]
    for dim in ("dp_shard", "dp_replicate"):
        extra = every.comm_bytes[dim] - off.comm_bytes[dim]
        assert default.comm_bytes[dim] - off.comm_bytes[dim] == pytest.approx(extra / GNS_EVERY)
    assert off.step_s < default.step_s < every.step_s
    # Measured every step it would cost this run several percent; the default keeps it to about one.
    assert every.step_s / off.step_s - 1 > 0.05
    assert default.step_s / off.step_s - 1 < 0.02
    # The extra reduction is FSDP2's, in train.fsdp_reduce_dtype: half the bytes in bf16, at both levels of HSDP.
    off_bf16, every_bf16 = (_llama_8b_on_64_h100s(n, "bf16") for n in (0, 1))
    for dim in ("dp_shard", "dp_replicate"):
        extra = every.comm_bytes[dim] - off.comm_bytes[dim]
        assert every_bf16.comm_bytes[dim] - off_bf16.comm_bytes[dim] == pytest.approx(extra / 2)
    # Nothing is measured with one micro-batch per step, or under a pipeline.
    assert noise_scale_bytes(None, Layout(dp_shard=8), 4e9, 1, 1) == {}
    assert noise_scale_bytes(None, Layout(pp=2, dp_shard=4), 4e9, 4, 1) == {}
