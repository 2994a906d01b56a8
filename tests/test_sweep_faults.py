"""A sweep survives every kind of trial fault: one trial crashes, one hangs, one runs out of memory and one hits a
NaN loss; each cause is recorded in summary.json and the healthy trial still runs to the end and wins.

The crash, hang and out-of-memory faults are injected per trial (MESHPILOT_FAULT with run=<trial id>); the
out-of-memory one is a real allocation failure, and the NaN is real too (a learning rate of 1e30).
"""

from __future__ import annotations

import json

import optuna
import pytest
from support import write_experiment

from agent.sweep import run_sweep
from trainer.results.rundir import RunDir

pytestmark = pytest.mark.slow  # real trial runs

STEPS = 4
FAULT_STEP = 2
# Trials are numbered in the order of the grid: t000 .. t004 take these learning rates.
LEARNING_RATES = [1e-3, 1.1e-3, 1.2e-3, 1e30, 1.3e-3]
FAULTS = {"t000": "crash", "t001": "hang", "t002": "oom"}
HANG_S = 15.0  # a healthy tiny step takes well under a second; only the injected hang comes near this
EXPECTED = {  # trial id: (status, a part of the recorded cause)
    "t000": ("failed", f"RuntimeError: injected fault on rank 0 at step {FAULT_STEP}"),
    "t001": ("timeout", f"hang: no new step for {HANG_S:g}s after step {FAULT_STEP - 1}"),
    "t002": ("oom", "can't allocate memory"),
    "t003": ("nan", "loss nan at step"),
    "t004": ("ok", None),
}


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    changes = {
        "search": {"layouts": ["dp_replicate=1"], "objective": "final_loss", "trial_steps": STEPS},
        "train": {"timing_warmup_steps": 1},
    }
    experiment = write_experiment(tmp_path_factory.mktemp("sweep-faults"), changes)
    space = {"train.micro_batch": [2], "train.activation_checkpointing": [False], "train.lr": LEARNING_RATES}
    faults = ";".join(f"run={trial},rank=0,step={FAULT_STEP},kind={kind}" for trial, kind in FAULTS.items())
    out = experiment.parent / "sweep"
    summary = run_sweep(
        experiment, out, max_parallel=2, space=space, hang_s=HANG_S, prune=False, env={"MESHPILOT_FAULT": faults}
    )
    return out, summary


def test_each_fault_is_recorded_with_its_cause(swept):
    out, summary = swept
    trials = {t["id"]: t for t in summary["trials"]}
    assert list(trials) == list(EXPECTED)
    for trial_id, (status, cause) in EXPECTED.items():
        trial = trials[trial_id]
        assert trial["params"]["lr"] == LEARNING_RATES[int(trial_id[1:])]
        assert trial["status"] == status, (trial_id, trial["cause"])
        if cause is not None:
            assert cause in trial["cause"], (trial_id, trial["cause"])
            assert trial["final_loss"] is None
    assert json.loads((out / "summary.json").read_text()) == summary


def test_faulty_trials_stop_where_the_fault_struck(swept):
    out, summary = swept
    for trial in summary["trials"]:
        steps = [s["step"] for s in RunDir(out / trial["run_dir"]).read_steps()]
        if trial["id"] in FAULTS:
            assert steps == list(range(1, FAULT_STEP)), trial["id"]  # the fault strikes before its step runs


def test_the_healthy_trial_finishes_and_wins(swept):
    out, summary = swept
    healthy = next(t for t in summary["trials"] if t["id"] == "t004")
    metrics = RunDir(out / healthy["run_dir"]).read_metrics()
    assert metrics["steps"] == STEPS and healthy["final_loss"] == metrics["final_loss"]
    assert summary["winner"] == "t004"
    study = optuna.load_study(study_name="meshpilot-sweep", storage=f"sqlite:///{out / 'study.db'}")
    states = {t.user_attrs["trial_id"]: t.state.name for t in study.trials}
    assert states == {"t000": "FAIL", "t001": "FAIL", "t002": "FAIL", "t003": "FAIL", "t004": "COMPLETE"}
