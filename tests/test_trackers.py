"""Experiment trackers (`train.trackers`): a real run's TensorBoard events hold exactly its files' numbers; bad
tracker names are refused before launch; a failing tracker never stops training; each adapter in its offline or
local mode (skipped where its package, not a meshpilot dependency, is not installed); a sweep's trials are runs
of their own."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import yaml
from support import train, write_experiment

import trainer.data.prepare as prepare_module
from trainer.config import ConfigError
from trainer.launch.launcher import TrainRequest, prepare
from trainer.rank.trackers import PROJECT, RUN_GROUP_ENV, RUN_NAME_ENV, STATE_FILE, Trackers, start_trackers
from trainer.results.rundir import RunDir


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> RunDir:
    """One short single-process CPU run logging to TensorBoard."""
    base = tmp_path_factory.mktemp("trackers")
    experiment = write_experiment(base, {"train": {"trackers": ["tensorboard"], "timing_warmup_steps": 1}})
    return train(experiment, base / "run", "--nproc", "1")


def tensorboard_scalars(directory: Path) -> dict[str, dict[int, float]]:
    """Every scalar in the event files under `directory`: tag -> step -> value."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.util.tensor_util import make_ndarray

    events = EventAccumulator(str(directory), size_guidance={"tensors": 0})  # 0: keep every point
    events.Reload()
    return {
        tag: {event.step: make_ndarray(event.tensor_proto).item() for event in events.Tensors(tag)}
        for tag in events.Tags()["tensors"]
    }


def test_tensorboard_events_hold_the_run_files_numbers(trained):
    scalars = tensorboard_scalars(trained.path / "tensorboard")
    steps = trained.read_steps()
    for key in ("loss", "lr", "grad_norm", "tokens", "step_s"):
        assert scalars[f"train/{key}"] == {s["step"]: s[key] for s in steps}, key
    metrics, last = trained.read_metrics(), steps[-1]["step"]
    for key in ("final_loss", "tokens_per_s", "tokens_per_s_per_device", "steps_completed", "timed_steps"):
        assert scalars[f"final/{key}"] == {last: metrics[key]}, key
    assert scalars["final/peak_mem_bytes/rank0"] == {last: metrics["peak_mem_bytes"][0]}
    memory = json.loads(trained.memory.read_text())
    assert scalars["memory/measured/rank0/peak"] == {last: memory["measured"][0]["peak"]}
    assert scalars["memory/predicted/rank0/parameters"] == {last: memory["predicted"][0]["parameters"]}
    assert "tracker" not in trained.log.read_text()  # no tracker warning


# --- refused before launch --------------------------------------------------------------------------------------------


@pytest.fixture
def no_training(monkeypatch):
    """prepare fails where it would start preparing data: a refusal must come before."""

    def reached(*args, **kwargs):
        raise AssertionError("every check passed: data preparation began")

    monkeypatch.setattr(prepare_module, "prepare_corpus", reached)


@pytest.mark.parametrize(
    ("trackers", "message"),
    [
        (["tensorbord"], "train.trackers: unknown tracker 'tensorbord' (did you mean 'tensorboard'?)"),
        (["comet"], "train.trackers: unknown tracker 'comet' (valid: tensorboard, wandb, mlflow, trackio)"),
        (["tensorboard", "tensorboard"], "train.trackers: tensorboard is listed twice"),
        (["tensorboard", "wandb"], "train.trackers: wandb is not installed (pip install wandb)"),
    ],
)
def test_bad_trackers_are_refused_before_launch(tmp_path, monkeypatch, no_training, trackers, message):
    import trainer.rank.trackers

    installed = trainer.rank.trackers.find_spec
    monkeypatch.setattr(trainer.rank.trackers, "find_spec", lambda name: None if name == "wandb" else installed(name))
    experiment = write_experiment(tmp_path, {"train": {"trackers": trackers}})
    with pytest.raises(ConfigError) as refused:
        prepare(TrainRequest(experiment=experiment, nproc=1, out=tmp_path / "run"))
    assert str(refused.value) == message
    assert not (tmp_path / "run").exists()


# --- a failing tracker ------------------------------------------------------------------------------------------------


class Recording:
    """A tracker that records what it is given, and fails where told to."""

    def __init__(self, fails_at: str | None = None):
        self.fails_at, self.calls = fails_at, []

    def _call(self, name: str, *args) -> None:
        if name == self.fails_at:
            raise ConnectionError("the tracking server is down")
        self.calls.append((name, *args))

    def log_step(self, step, scalars):
        self._call("log_step", step, scalars)

    def log_memory(self, step, scalars):
        self._call("log_memory", step, scalars)

    def finish(self, step, scalars, status):
        self._call("finish", step, scalars, status)


def test_a_failing_tracker_is_dropped_with_a_warning_and_the_others_go_on(caplog):
    healthy, failing = Recording(), Recording(fails_at="log_step")
    trackers = Trackers({"healthy": healthy, "failing": failing})
    with caplog.at_level(logging.WARNING, logger="meshpilot.trackers"):
        trackers.log_step({"step": 1, "loss": 2.5, "gns": None})
        trackers.log_step({"step": 2, "loss": 2.0, "gns": None})
        trackers.finish({"status": "ok", "final_loss": 2.0, "peak_mem_bytes": [7], "layout": {"tp": 1}})
    assert list(trackers.active) == [] and failing.calls == []
    assert healthy.calls == [
        ("log_step", 1, {"train/loss": 2.5}),
        ("log_step", 2, {"train/loss": 2.0}),
        ("finish", 2, {"final/final_loss": 2.0, "final/peak_mem_bytes/rank0": 7, "final/layout/tp": 1}, "ok"),
    ]
    [warning] = caplog.messages
    assert warning.startswith("tracker failing failed to log a step; the run goes on without it: ConnectionError")


def test_a_failed_run_ends_its_tracker_runs_as_failed():
    tracker = Recording()
    trackers = Trackers({"recording": tracker}, step=3)
    with pytest.raises(MemoryError), trackers.ended_on_failure(lambda error: "oom"):
        raise MemoryError
    assert tracker.calls == [("finish", 3, {}, "oom")] and not trackers.active


# --- each adapter in its offline or local mode ------------------------------------------------------------------------


def replay(trained: RunDir, run_dir: Path, tracker: str) -> Trackers:
    """Send the trained run's records through `tracker` as its rank 0 did: the same calls, the same numbers."""
    run_dir.mkdir()
    experiment = yaml.safe_load(trained.config.read_text())
    experiment["train"]["trackers"] = [tracker]
    trackers = start_trackers(run_dir, experiment, first_step=0)
    assert list(trackers.active) == [tracker], "it failed to start: see the warning above"
    for record in trained.read_steps():
        trackers.log_step(record)
    trackers.log_memory(json.loads(trained.memory.read_text()))
    assert list(trackers.active) == [tracker], "it failed to log: see the warning above"
    trackers.finish(trained.read_metrics())
    return trackers


@pytest.fixture
def trial_names(monkeypatch):
    """The names a sweep gives its trial t000."""
    monkeypatch.setenv(RUN_NAME_ENV, "sweep/t000")
    monkeypatch.setenv(RUN_GROUP_ENV, "sweep")


def test_wandb_offline(request, tmp_path, monkeypatch, trial_names, caplog):
    wandb = pytest.importorskip("wandb", reason="wandb is not installed (optional: pip install wandb)")
    trained = request.getfixturevalue("trained")  # after the skip: no training for a skipped test
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    for where in ("CONFIG", "CACHE", "DATA"):  # nothing outside the test's directory
        monkeypatch.setenv(f"WANDB_{where}_DIR", str(tmp_path / where.lower()))
    logged, log = [], wandb.Run.log

    def recorded(run, data, step=None, **kwargs):  # no public API reads an offline run back: record what is sent
        logged.append((step, data))
        return log(run, data, step=step, **kwargs)

    monkeypatch.setattr(wandb.Run, "log", recorded)
    with caplog.at_level(logging.WARNING, logger="meshpilot.trackers"):
        replay(trained, tmp_path / "run", "wandb")
    assert not caplog.messages
    steps = trained.read_steps()
    assert [(step, data["train/loss"]) for step, data in logged] == [(s["step"], s["loss"]) for s in steps]
    run_id = json.loads((tmp_path / "run" / STATE_FILE).read_text())["wandb"]
    assert list((tmp_path / "run" / "wandb").glob(f"offline-run-*-{run_id}/run-{run_id}.wandb"))


def test_mlflow_local_store(request, tmp_path, monkeypatch, trial_names, caplog):
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")  # no network
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("MLFLOW_EXPERIMENT_NAME", raising=False)
    pytest.importorskip("mlflow", reason="mlflow is not installed (optional: pip install mlflow)")
    from mlflow import MlflowClient

    trained = request.getfixturevalue("trained")
    with caplog.at_level(logging.WARNING, logger="meshpilot.trackers"):
        replay(trained, tmp_path / "run", "mlflow")
    assert not caplog.messages
    client = MlflowClient(f"sqlite:///{tmp_path / 'run' / 'mlflow.db'}")  # the default: a store in the run directory
    run = client.get_run(json.loads((tmp_path / "run" / STATE_FILE).read_text())["mlflow"])
    assert (run.info.run_name, run.info.status, run.data.tags["meshpilot.group"]) == ("sweep/t000", "FINISHED", "sweep")
    assert run.data.params["train.steps"] == str(len(trained.read_steps()))
    losses = {m.step: m.value for m in client.get_metric_history(run.info.run_id, "train/loss")}
    assert losses == {s["step"]: s["loss"] for s in trained.read_steps()}
    assert run.data.metrics["final/final_loss"] == trained.read_metrics()["final_loss"]


def test_trackio_local(request, tmp_path, monkeypatch, trial_names, caplog):
    monkeypatch.setenv("TRACKIO_DIR", str(tmp_path / "trackio"))  # read when trackio is imported
    pytest.importorskip("trackio", reason="trackio is not installed (optional: pip install trackio)")
    from trackio.sqlite_storage import SQLiteStorage

    trained = request.getfixturevalue("trained")
    with caplog.at_level(logging.WARNING, logger="meshpilot.trackers"):
        replay(trained, tmp_path / "run", "trackio")
    assert not caplog.messages
    logs = SQLiteStorage.get_logs(PROJECT, "sweep/t000")
    losses = {entry["step"]: entry["train/loss"] for entry in logs if "train/loss" in entry}
    assert losses == {s["step"]: s["loss"] for s in trained.read_steps()}
    final = [entry["final/final_loss"] for entry in logs if "final/final_loss" in entry]
    assert final == [trained.read_metrics()["final_loss"]]
    assert SQLiteStorage.get_run_config(PROJECT, "sweep/t000")["_Group"] == "sweep"


# --- sweeps -----------------------------------------------------------------------------------------------------------


class StartsNothing:
    """An executor that records each trial's request and reports it finished at once."""

    shares_devices = True

    def __init__(self):
        self.requests = {}

    def start(self, trial_dir, request, devices, device_type):
        self.requests[trial_dir.name] = request

    def status(self, trial_dir):
        return {"state": "ok", "metrics": {"tokens_per_s": 1.0}, "cause": None}

    def cancel(self, trial_dir, state, cause):
        pass


def test_each_sweep_trial_is_a_tracker_run_of_its_own(tmp_path, monkeypatch):
    import agent.sweep.executors
    from agent.sweep import run_sweep

    executor = StartsNothing()
    monkeypatch.setattr(agent.sweep.executors, "make_executor", lambda *args: executor)
    changes = {"train": {"trackers": ["tensorboard"]}, "search": {"layouts": ["dp_replicate=1"]}}
    experiment = write_experiment(tmp_path, changes)
    space = {"train.micro_batch": [2], "train.activation_checkpointing": [False], "train.lr": [1e-3, 2e-3]}
    with pytest.raises(ConfigError, match=r"^--trackers: unknown tracker 'tb' \(valid: "):
        run_sweep(experiment, tmp_path / "refused", space=space, trackers=["tb"])
    run_sweep(experiment, tmp_path / "sweep", space=space, trackers=[])
    assert sorted(executor.requests) == ["t000", "t001"]
    for trial, request in executor.requests.items():
        assert request["env"][RUN_NAME_ENV] == f"sweep/{trial}" and request["env"][RUN_GROUP_ENV] == "sweep"
        assert "train.trackers=[]" in request["overrides"]  # --trackers none; without it, the experiment's
