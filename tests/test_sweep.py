"""`meshpilot sweep` end to end on CPU: real tiny trials in parallel, failures recorded while the sweep goes on,
and a sweep killed with SIGKILL and resumed that ends exactly like an uninterrupted one.

The objective is the final loss, which is deterministic on CPU, so the two sweeps must agree on every trial and
on the winner; only measured speed and memory differ between two runs of a trial.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time

import optuna
import pytest
import submitit
from support import REPO, meshpilot, write_experiment

from agent.jobs import job_processes, kill_job_processes, read_job
from agent.sweep import run_sweep
from agent.sweep.executors import slurm_parameters
from agent.sweep.summary import summarize
from trainer.config import ConfigError
from trainer.results.rundir import RunDir

CHANGES = {
    "search": {"layouts": ["dp_replicate=1"], "objective": "final_loss", "trial_steps": 4},
    "train": {"timing_warmup_steps": 1},
}
# Three single-process trials: two learning rates (different losses), and one that turns the loss into NaN.
SPACE = {"train.micro_batch": [2], "train.activation_checkpointing": [False], "train.lr": [1e-3, 3e-3, 1e30]}
IDS = ["t000", "t001", "t002"]
SPACE_ARGS = [f"--space={key}={json.dumps(values)}" for key, values in SPACE.items()]
# Not compared: measured speed and memory, and predicted tokens/s, which every successful run recalibrates (a
# sweep freezes its predictions in sweep.json when it starts, so within one sweep they never change).
COMPARED = ("id", "params", "status", "cause", "run_dir", "predicted_peak_bytes")


pytestmark = pytest.mark.slow  # real trial runs


@pytest.fixture(scope="module")
def experiment(tmp_path_factory):
    return write_experiment(tmp_path_factory.mktemp("sweep"), CHANGES)


@pytest.fixture(scope="module")
def uninterrupted(experiment):
    out = experiment.parent / "uninterrupted"
    return out, run_sweep(experiment, out, max_parallel=2, space=SPACE)


def test_every_trial_is_recorded_with_its_status_and_the_sweep_goes_on(uninterrupted):
    out, summary = uninterrupted
    trials = {t["id"]: t for t in summary["trials"]}
    assert list(trials) == IDS
    for trial_id, lr, status in zip(IDS, SPACE["train.lr"], ("ok", "ok", "nan"), strict=True):
        trial = trials[trial_id]
        assert (trial["params"]["lr"], trial["status"]) == (lr, status)
        assert trial["params"]["layout"] == {"pp": 1, "dp_replicate": 1, "dp_shard": 1, "cp": 1, "tp": 1}
        assert (trial["params"]["micro_batch"], trial["params"]["grad_accum"]) == (2, 4)  # 8 rows = 2 x 4
        assert trial["params"]["packing"] is True and trial["params"]["activation_checkpointing"] is False
        assert trial["run_dir"] == f"trials/{trial_id}" and trial["predicted_peak_bytes"] > 0
    assert "loss nan at step 3" in trials["t002"]["cause"] and trials["t002"]["final_loss"] is None
    for trial_id in ("t000", "t001"):
        metrics = RunDir(out / "trials" / trial_id).read_metrics()
        assert trials[trial_id]["final_loss"] == metrics["final_loss"]
        assert trials[trial_id]["tokens_per_s"] == metrics["tokens_per_s"] > 0
        assert trials[trial_id]["peak_mem_bytes"] == max(metrics["peak_mem_bytes"])
        assert metrics["steps"] == 4 and metrics["micro_batch"] == 2
    assert summary["winner"] == min(("t000", "t001"), key=lambda t: trials[t]["final_loss"])
    assert summary["objective"] == "final_loss" and summary["device_type"] == "cpu"


def test_planner_pick_is_compared_with_the_measured_best(uninterrupted):
    _, summary = uninterrupted
    trials = {t["id"]: t for t in summary["trials"]}
    planner = summary["planner"]
    # The learning rate does not change the prediction: the tie goes to the first id.
    assert planner["top_pick"] == "t000" and planner["top_pick_params"] == trials["t000"]["params"]
    best = max(("t000", "t001"), key=lambda t: trials[t]["tokens_per_s"])
    assert planner["measured_best"] == best
    assert planner["quality_ratio"] == trials["t000"]["tokens_per_s"] / trials[best]["tokens_per_s"]


def test_sweep_directory_holds_inputs_study_and_trials(uninterrupted, experiment):
    out, summary = uninterrupted
    sweep = json.loads((out / "sweep.json").read_text())
    assert sweep["experiment"] == str(experiment) and sweep["config_hash"] == summary["config_hash"]
    assert (sweep["sampler"], sweep["executor"], sweep["budget"]) == ("grid", "local", 3)
    assert len(sweep["device_ids"]) == summary["devices"] == len(os.sched_getaffinity(0))
    assert [p["id"] for p in sweep["space"]["points"]] == IDS
    study = optuna.load_study(study_name="meshpilot-sweep", storage=f"sqlite:///{out / 'study.db'}")
    states = {t.user_attrs["trial_id"]: t.state.name for t in study.trials}
    assert states == {"t000": "COMPLETE", "t001": "COMPLETE", "t002": "FAIL"}
    assert study.best_trial.user_attrs["trial_id"] == summary["winner"]
    for trial in summary["trials"]:
        job = read_job(out / trial["run_dir"])
        assert len(job["cpus"]) == 1 and job["threads"] == 1  # one core each: parallel trials never share one
    assert json.loads((out / "summary.json").read_text()) == summary


def test_summary_is_rebuilt_from_the_files_alone(uninterrupted):
    out, summary = uninterrupted
    assert summarize(out) == summary


def test_resume_after_sigkill_loses_nothing_and_runs_nothing_twice(experiment, uninterrupted):
    """Kill the sweep while a trial that would succeed is training, and that trial too, as if its machine went
    down: resumed, the sweep runs it again from scratch, keeps every job that was not killed (those go on without
    the sweep, and end while it is down), and starts what had not started."""
    out = experiment.parent / "killed"
    command = [sys.executable, "-m", "agent.cli", "sweep", str(experiment), "--out", str(out), "--max-parallel=2"]
    sweep = subprocess.Popen(command + SPACE_ARGS, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 240
    while (victim := _stopped_while_training(out)) is None:
        assert sweep.poll() is None, sweep.stderr.read().decode()[-2000:]
        assert time.monotonic() < deadline
        time.sleep(0.05)
    os.kill(sweep.pid, signal.SIGKILL)
    kill_job_processes(read_job(out / "trials" / victim)["token"])
    sweep.wait()
    before = _jobs(out)
    assert not RunDir(out / "trials" / victim).metrics.is_file()  # stopped before its results, then killed
    rerun = {victim}

    resumed = meshpilot("sweep", str(experiment), "--out", str(out), "--resume")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    _, reference = uninterrupted
    assert [{k: t[k] for k in COMPARED} for t in summary["trials"]] == [
        {k: t[k] for k in COMPARED} for t in reference["trials"]
    ]
    assert [t["final_loss"] for t in summary["trials"]] == [t["final_loss"] for t in reference["trials"]]
    assert summary["winner"] == reference["winner"]
    assert summary["planner"]["top_pick"] == reference["planner"]["top_pick"]
    points = json.loads((out / "sweep.json").read_text())["space"]["points"]
    assert [t["predicted_tokens_per_s"] for t in summary["trials"]] == [p["predicted_tokens_per_s"] for p in points]
    after = _jobs(out)
    for trial_id, job in before.items():
        assert (after[trial_id]["token"] != job["token"]) == (trial_id in rerun)
    for trial in summary["trials"]:
        steps = [s["step"] for s in RunDir(out / trial["run_dir"]).read_steps()]
        assert steps == list(range(1, len(steps) + 1))
        assert len(steps) == 4 if trial["status"] == "ok" else len(steps) in (3, 4)  # NaN at 3: stopped there
    study = optuna.load_study(study_name="meshpilot-sweep", storage=f"sqlite:///{out / 'study.db'}")
    assert sorted(t.user_attrs["trial_id"] for t in study.trials) == IDS


def test_bad_sweep_requests_fail_at_once_with_one_line(experiment, uninterrupted, tmp_path):
    out, _ = uninterrupted
    done = meshpilot("sweep", str(experiment), "--out", str(tmp_path / "typo"), "--space=train.lrr=[1e-3]")
    assert done.returncode == 2
    assert done.stderr.strip() == "meshpilot: error: unknown config key 'train.lrr' (did you mean 'lr'?)"
    assert not (tmp_path / "typo").exists()
    cases = {
        "holds a sweep; pass --resume": dict(out=out),
        "--trials was 12, not 7": dict(out=out, resume=True, trials=7),
        "layout dp_shard=2 needs 2 devices; the sweep has 1": dict(space={"layout": ["dp_shard=2"]}, devices=1),
        "a range needs numbers low < high": dict(space={"train.lr": {"low": 1e-2, "high": 1e-3}}),
        "give a list of choices, not a range": dict(space={"data.packing": {"low": 0, "high": 1}}),
        "the grid sampler needs lists of choices": dict(space={"train.lr": {"low": 1e-4, "high": 1}}, sampler="grid"),
        "--max-parallel must be at least 1": dict(max_parallel=0),
        "is not one of local, slurm, submitit-local": dict(executor="kubernetes"),
        "varies layouts and training settings, not hardware.devices": dict(space={"hardware.devices": [1]}),
    }
    for message, options in cases.items():
        options.setdefault("out", tmp_path / "new")
        with pytest.raises(ConfigError, match=re.escape(message)):
            run_sweep(experiment, **options)
    assert not (tmp_path / "new").exists()


def test_resume_refuses_a_changed_experiment(experiment, uninterrupted, tmp_path):
    out, _ = uninterrupted
    changed = write_experiment(tmp_path, {**CHANGES, "train": {"lr": 2e-3}}, name=experiment.name)
    with pytest.raises(ConfigError, match="changed since the sweep started"):
        run_sweep(changed, out, resume=True)


def test_tpe_samples_a_range_through_submitit(tmp_path):
    """A range needs TPE; the trial runs as a submitit job, the path SLURM trials take, on the local executor."""
    changes = {"search": {"layouts": ["dp_replicate=1"], "trial_steps": 2}, "train": {"timing_warmup_steps": 1}}
    experiment = write_experiment(tmp_path, changes)
    space = {"train.micro_batch": [2], "train.activation_checkpointing": [False]}
    space["train.lr"] = {"low": 1e-4, "high": 1e-2, "log": True}
    out = tmp_path / "tpe"
    summary = run_sweep(experiment, out, executor="submitit-local", trials=1, space=space)
    assert (summary["sampler"], summary["objective"]) == ("tpe", "tokens_per_s")
    [trial] = summary["trials"]
    assert re.fullmatch(r"t000-[0-9a-f]{6}", trial["id"])  # the point, and a hash of the sampled learning rate
    assert trial["status"] == "ok" and 1e-4 <= trial["params"]["lr"] <= 1e-2
    metrics = RunDir(out / trial["run_dir"]).read_metrics()
    assert trial["tokens_per_s"] == metrics["tokens_per_s"] > 0
    assert summary["winner"] == summary["planner"]["measured_best"] == trial["id"]
    assert summary["planner"]["quality_ratio"] == 1.0
    job = read_job(out / trial["run_dir"])
    assert job["executor"]["kind"] == "submitit" and job["executor"]["cluster"] == "local"
    assert (out / "submitit").is_dir()


def _training(out) -> str | None:
    """A trial that will end ok (its learning rate is sane) and is between its first step and its results."""
    for trial in sorted((out / "trials").glob("*/trial.json")) if (out / "trials").is_dir() else []:
        run = RunDir(trial.parent)
        sane = json.loads(trial.read_text())["params"]["lr"] < 1
        if sane and run.steps.is_file() and run.steps.read_text().strip() and not run.metrics.is_file():
            return trial.parent.name
    return None


def _stopped_while_training(out) -> str | None:
    """A trial caught `_training` and stopped there (SIGSTOP to every process of its job), so that it cannot end
    before it is killed however slowly this test runs; None while there is none. One that wrote its results
    before the signals landed is let go on."""
    victim = _training(out)
    if victim is None:
        return None
    pids = job_processes(read_job(out / "trials" / victim)["token"])
    _signal_all(pids, signal.SIGSTOP)
    if not RunDir(out / "trials" / victim).metrics.is_file():  # written atomically: absent means no result
        return victim
    _signal_all(pids, signal.SIGCONT)
    return None


def _signal_all(pids: list[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def _jobs(out) -> dict[str, dict]:
    trials = out / "trials"
    found = {d.name: read_job(d) for d in trials.iterdir()} if trials.is_dir() else {}
    return {trial_id: job for trial_id, job in found.items() if job is not None}


def test_the_slurm_job_script_of_a_trial(tmp_path, monkeypatch):
    """What `--executor slurm` submits (the README shows it): one task on one node holding the trial's GPUs, its
    time limit, and the `--slurm` extras. submitit writes the script; it looks for srun first, so one is put on
    PATH (nothing is submitted)."""
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "srun").write_text("#!/bin/sh\n")
    (tmp_path / "bin" / "srun").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    executor = submitit.AutoExecutor(folder=tmp_path / "submitit", cluster="slurm")
    executor.update_parameters(**slurm_parameters(4, "cuda", 3600, {"slurm_partition": "gpu"}))
    script = executor._executor._make_submission_file_text("python -u -m submitit.core._submit DIR", "UID")
    for line in ("--nodes=1", "--ntasks-per-node=1", "--gpus-per-node=4", "--partition=gpu", "--time=70"):
        assert f"#SBATCH {line}\n" in script
    # A preemption's SIGTERM reaches the run, which saves and ends "preempted": neither the shell nor srun ends it.
    assert "\ntrap '' TERM\n" in script and "srun" not in script
    assert slurm_parameters(2, "cpu", None, {})["gpus_per_node"] == 0
