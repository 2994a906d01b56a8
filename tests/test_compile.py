"""train.compile: each decoder layer compiled on its own (inductor's C++ backend on CPU) gives the eager
single-process run's per-step losses and gradient norms within 1e-4, for every kind of layout, and its compilation
time is reported apart from the timed steps."""

from __future__ import annotations

import pytest
from support import train, write_experiment

# layout: processes. One of each wrapping: DDP, FSDP2, HSDP with tensor parallel, a pipeline, context parallel.
LAYOUTS = {
    "dp_replicate=1": 1,
    "dp_replicate=2": 2,
    "dp_shard=2": 2,
    "dp_replicate=2,tp=2": 4,
    "pp=2": 2,
    "cp=2": 2,
}
STEPS = 4  # two untimed steps (when the layers compile), two timed


@pytest.fixture(scope="module")
def experiment(tmp_path_factory):
    return write_experiment(tmp_path_factory.mktemp("compile"), {"train": {"steps": STEPS}})


@pytest.fixture(scope="module")
def eager(experiment):
    return train(experiment, experiment.parent / "eager", "--nproc", "1").read_steps()


@pytest.mark.slow
@pytest.mark.parametrize("layout", LAYOUTS)
def test_compiled_layout_matches_eager(experiment, eager, layout):
    out = experiment.parent / f"compiled-{layout.replace(',', '_').replace('=', '')}"
    run = train(experiment, out, "--nproc", str(LAYOUTS[layout]), "--layout", layout, "--set", "train.compile=true")
    steps = run.read_steps()
    assert len(steps) == len(eager) == STEPS
    for a, b in zip(eager, steps, strict=True):
        assert b["loss"] == pytest.approx(a["loss"], rel=1e-4, abs=1e-6), layout
        assert b["grad_norm"] == pytest.approx(a["grad_norm"], rel=1e-4, abs=1e-6), layout
    metrics = run.read_metrics()
    # Compilation happens in the untimed warm-up steps: tokens/s is measured after it.
    warmup = steps[: STEPS - metrics["timed_steps"]]
    assert 0 < metrics["compile_s"] <= sum(s["step_s"] for s in warmup)
