"""A crashed rank ends the run quickly with its cause recorded; resuming repeats the uninterrupted run exactly."""

from __future__ import annotations

import time

import pytest
from support import meshpilot, train, write_experiment

from trainer.rundir import RunDir

STEPS = 6
# Dropout makes every step depend on the RNG state, so a resume that forgot it would not match.
CHANGES = {
    "model": {"config": {"attention_dropout": 0.1}},
    "train": {"steps": STEPS, "checkpoint_every": 2, "keep_checkpoints": 3},
}


@pytest.fixture(scope="module")
def experiment(tmp_path_factory):
    return write_experiment(tmp_path_factory.mktemp("resume"), CHANGES)


@pytest.fixture(scope="module")
def uninterrupted(experiment):
    return train(experiment, experiment.parent / "uninterrupted", "--nproc", "2")


def test_crash_then_resume_gives_identical_losses(experiment, uninterrupted):
    out = experiment.parent / "crashed"
    started = time.monotonic()
    crashed = meshpilot(
        "train", str(experiment), "--nproc", "2", "--out", str(out), env={"MESHPILOT_FAULT": "rank=1,step=5"}
    )
    elapsed = time.monotonic() - started
    assert crashed.returncode == 1
    assert elapsed < 90  # the surviving rank does not hang in its collective
    run = RunDir(out)
    metrics = run.read_metrics()
    assert metrics["status"] == "failed"
    assert metrics["error"] == "rank 1: RuntimeError: injected fault on rank 1 at step 5"
    assert "injected fault" in crashed.stderr.strip().splitlines()[-1]
    assert [s["step"] for s in run.read_steps()] == [1, 2, 3, 4]

    # A checkpoint whose writing was cut short must never be picked up.
    (run.checkpoints / "step_00000099.partial").mkdir()
    train(experiment, out, "--nproc", "2", "--resume")
    assert "resumed from step_00000004" in run.log.read_text()
    assert run.read_metrics()["status"] == "ok"
    assert not list(run.path.glob("failure.rank*.json"))
    expected = [(s["step"], s["loss"], s["grad_norm"], s["lr"]) for s in uninterrupted.read_steps()]
    got = [(s["step"], s["loss"], s["grad_norm"], s["lr"]) for s in run.read_steps()]
    assert got == expected  # bit for bit


def test_rank_killed_without_traceback_is_reported(experiment):
    out = experiment.parent / "killed"
    done = meshpilot(
        "train", str(experiment), "--nproc", "2", "--out", str(out), env={"MESHPILOT_FAULT": "rank=0,step=2,kind=exit"}
    )
    assert done.returncode == 1
    metrics = RunDir(out).read_metrics()
    assert metrics["status"] == "failed"
    assert metrics["error"].startswith("rank 0 exited without a Python error")
