"""Gradient noise scale: the two-batch estimator on a synthetic problem with known gradient variance, and the
trainer's measurement (logged per step, the same whether data parallelism replicates or shards)."""

from __future__ import annotations

import numpy as np
import pytest
from support import train, write_experiment

from trainer.noise_scale import NoiseScale, recommended_batch_tokens, two_batch_estimates

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
    experiment = write_experiment(tmp_path, {"train": {"steps": 4, "micro_batch": 1}})  # 4 micro-batches per rank
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
