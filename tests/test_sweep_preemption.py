"""A preempted sweep trial is resumable, not failed (issue 35): SIGTERM to a trial's job (as a scheduler sends it)
ends its run "preempted" with a checkpoint, and the sweep continues it from there with the trainer's --resume,
whether the sweep ran on meanwhile or was preempted too and resumed later. Either way the trial's steps equal an
uninterrupted trial's, and optuna is told its result once, never a failure.

Every run is real: a one-trial sweep of the tiny model on the CPU, with dropout on, so that an exact continuation
also needs the RNG state back. The trial's rank 0 waits at the start of step 3 until the signal reaches it
(MESHPILOT_FAULT kind=preempt), so the preemption saves the checkpoint of step 3, always.

The agent's way of stopping a sweep (SIGTERM to its job's supervisor, agent.jobs.start_sweep) preempts the sweep and
its trial the same way; tests/test_agent_resume.py (test_the_offline_planner_picks_a_preempted_sweep_back_up) starts
that job, checks both read preempted, and resumes it. What the trial does once preempted is the same however the
signal came, and its exact continuation is checked here.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading

import optuna
import pytest
from killed_runs import wait_for
from support import REPO, write_experiment

from agent import jobs
from agent.sweep import run_sweep, runner
from trainer.host import preemption
from trainer.rank.faults import ENV as FAULT
from trainer.results.rundir import RunDir

pytestmark = pytest.mark.slow  # real trial runs

STEPS, PREEMPT_AT = 6, 3
CHANGES = {
    "search": {"layouts": ["dp_replicate=1"], "objective": "final_loss", "trial_steps": STEPS},
    "train": {"timing_warmup_steps": 1},
    "model": {"config": {"attention_dropout": 0.1}},
}
SPACE = {"train.micro_batch": [2], "train.activation_checkpointing": [False]}
SPACE_ARGS = [f"--space={key}={json.dumps(values)}" for key, values in SPACE.items()]


def numbers(steps: list[dict]) -> list[tuple]:
    return [(s["step"], s["loss"], s["grad_norm"], s["lr"]) for s in steps]


@pytest.fixture(scope="module")
def experiment(tmp_path_factory):
    return write_experiment(tmp_path_factory.mktemp("sweep-preemption"), CHANGES)


@pytest.fixture(scope="module")
def reference(experiment) -> list[dict]:
    """The uninterrupted trial's steps."""
    out = experiment.parent / "reference"
    summary = run_sweep(experiment, out, space=SPACE, prune=False)
    assert [t["status"] for t in summary["trials"]] == ["ok"]
    return RunDir(out / "trials" / "t000").read_steps()


WAIT_FOR_PREEMPTION = f"run=t000,rank=0,step={PREEMPT_AT},kind=preempt"


def start_sweep(experiment, out, fault: str = WAIT_FOR_PREEMPTION, **env: str) -> subprocess.Popen:
    """`meshpilot sweep` by hand, its one trial told to wait at the start of step 3 for a preemption signal."""
    env = {**os.environ, FAULT: fault, **env}
    command = [sys.executable, "-m", "agent.cli", "sweep", str(experiment), "--out", str(out), "--no-prune"]
    return subprocess.Popen(
        [*command, *SPACE_ARGS], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def wait_at_the_fault(sweep: subprocess.Popen | threading.Thread, trial) -> None:
    """Until the trial's rank 0 waits at its fault: steps 1 and 2 are done, the sweep still runs."""
    said = f"rank 0 waits for a preemption signal at step {PREEMPT_AT}"
    log = RunDir(trial).rank_log(0)

    def waiting() -> bool:
        if isinstance(sweep, threading.Thread):
            assert sweep.is_alive(), "the sweep ended"
        else:
            assert sweep.poll() is None, f"the sweep ended (code {sweep.returncode}): {sweep.stderr.read()[-3000:]}"
        return log.is_file() and said in log.read_text()

    wait_for(waiting, said)


def preempt(trial) -> None:
    """SIGTERM to the trial's job supervisor, as a scheduler sends it."""
    os.kill(jobs.read_job(trial)["pid"], signal.SIGTERM)


def assert_resumed_exactly(out, reference) -> None:
    trial = RunDir(out / "trials" / "t000")
    summary = json.loads((out / "summary.json").read_text())
    assert [(t["id"], t["status"]) for t in summary["trials"]] == [("t000", "ok")], summary["trials"][0]["cause"]
    assert summary["winner"] == "t000"
    assert f"resumed from step_{PREEMPT_AT:08d}" in trial.log.read_text()  # not started again from step 0
    assert numbers(trial.read_steps()) == numbers(reference)  # steps 4 to 6 as the uninterrupted trial's
    assert trial.read_metrics()["final_loss"] == reference[-1]["loss"]
    study = optuna.load_study(study_name="meshpilot-sweep", storage=f"sqlite:///{out / 'study.db'}")
    assert [t.state for t in study.trials] == [optuna.trial.TrialState.COMPLETE]  # never told it failed


def test_a_trial_preempted_while_the_sweep_runs_is_continued_from_its_checkpoint(experiment, reference, tmp_path):
    out = tmp_path / "sweep"
    sweep = start_sweep(experiment, out)
    wait_at_the_fault(sweep, out / "trials" / "t000")
    preempt(out / "trials" / "t000")
    _, stderr = sweep.communicate(timeout=600)
    assert sweep.returncode == 0, stderr[-3000:]
    assert_resumed_exactly(out, reference)


def test_a_preempted_sweep_preempts_its_trial_and_resumed_continues_it(experiment, reference, tmp_path):
    """SIGTERM to the sweep (as a scheduler sends it): it preempts its running trial, which saves a checkpoint,
    waits for it and exits as `meshpilot train` does (128 + the signal); `--resume` continues the trial from there."""
    out, trial = tmp_path / "sweep", tmp_path / "sweep" / "trials" / "t000"
    sweep = start_sweep(experiment, out)
    wait_at_the_fault(sweep, trial)
    sweep.send_signal(signal.SIGTERM)
    _, stderr = sweep.communicate(timeout=300)
    assert sweep.returncode == 128 + signal.SIGTERM, stderr[-3000:]
    assert stderr.strip().splitlines()[-1] == (
        "meshpilot: sweep preempted by SIGTERM; its trials preempted with it (t000) saved checkpoints: --resume "
        "continues the sweep and them"
    )
    status = jobs.run_status(trial)
    assert status["state"] == "preempted", status
    assert status["cause"] == f"preempted by SIGTERM after step {PREEMPT_AT}; --resume continues from step_00000003"
    assert not (out / "summary.json").exists()

    summary = run_sweep(experiment, out, resume=True)  # this process has no MESHPILOT_FAULT: the trial runs through
    assert summary["winner"] == "t000"
    assert_resumed_exactly(out, reference)


def test_a_preempted_sweep_names_a_trial_that_did_not_save(experiment, tmp_path):
    """The sweep preempted, its trial's rank hangs instead of saving (a second fault at step 3, once the signal
    came): its launcher stops the ranks once the grace period (1 s here) is over and records the trial preempted
    without a checkpoint, which the sweep's last line says rather than claim one."""
    out, trial = tmp_path / "sweep", tmp_path / "sweep" / "trials" / "t000"
    hang = f"{WAIT_FOR_PREEMPTION};run=t000,rank=0,step={PREEMPT_AT},kind=hang"
    sweep = start_sweep(experiment, out, hang, **{preemption.GRACE_ENV: "1"})
    wait_at_the_fault(sweep, trial)
    sweep.send_signal(signal.SIGTERM)
    _, stderr = sweep.communicate(timeout=300)
    assert sweep.returncode == 128 + signal.SIGTERM, stderr[-3000:]
    status = jobs.run_status(trial)
    assert (status["state"], status["metrics"]["resume_from"]) == ("preempted", None), status
    assert "did not stop within the 1 s grace period" in status["cause"]
    assert stderr.strip().splitlines()[-1] == (
        "meshpilot: sweep preempted by SIGTERM; of its trials preempted with it, saved checkpoints: none; did not: "
        "t000 (preempted before its first checkpoint: it starts again from step 0). --resume continues the sweep"
    )


def test_a_trial_preempted_more_than_the_restart_cap_fails(experiment, tmp_path, monkeypatch):
    """With no restart left (MAX_TRIAL_RESTARTS 0 here), a preempted trial is not started again: it fails, in
    optuna and in the summary, with the cap as its cause; the sweep ends."""
    monkeypatch.setattr(runner, "MAX_TRIAL_RESTARTS", 0)
    monkeypatch.setenv(FAULT, f"run=t000,rank=0,step={PREEMPT_AT},kind=preempt")
    out, trial = tmp_path / "sweep", tmp_path / "sweep" / "trials" / "t000"
    ended = {}
    sweep = threading.Thread(target=lambda: ended.update(run_sweep(experiment, out, space=SPACE, prune=False)))
    sweep.start()
    wait_at_the_fault(sweep, trial)
    preempt(trial)
    sweep.join(timeout=300)
    assert not sweep.is_alive()
    [summary] = ended["trials"]
    assert summary["cause"] == "preempted again with its 0 restarts used (MAX_TRIAL_RESTARTS): not started again"
    study = optuna.load_study(study_name="meshpilot-sweep", storage=f"sqlite:///{out / 'study.db'}")
    assert [t.state for t in study.trials] == [optuna.trial.TrialState.FAIL]
    assert "resumed from" not in RunDir(trial).log.read_text()
