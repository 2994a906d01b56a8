"""Experiment trackers (`train.trackers`): a run's figures sent to TensorBoard, Weights & Biases, MLflow or Trackio.

Rank 0 alone logs, from the code that writes steps.jsonl, memory.json and metrics.json (trainer.rank.loop), so a
tracker holds exactly the numbers of those files: each step's record as `train/KEY` at its step, the memory
categories as `memory/{predicted,measured}/rankR/KEY` and the final metrics as `final/KEY`, both at the last step.
The launcher refuses an unknown or uninstalled tracker before any process starts (`check_trackers`). Each
package is imported only by the run that uses it.

Where each one writes, through its own public API and its own settings:

    tensorboard  RUN/tensorboard/ event files: `tensorboard --logdir RUN` (a sweep: --logdir DIR/trials)
    wandb        RUN/wandb/; WANDB_MODE (offline, online, disabled), WANDB_PROJECT (default meshpilot)
    mlflow       MLFLOW_TRACKING_URI (default sqlite:///RUN/mlflow.db, a local store in the run directory),
                 MLFLOW_EXPERIMENT_NAME (default meshpilot)
    trackio      its local store (TRACKIO_DIR, default ~/.cache/huggingface/trackio), project meshpilot

A tracker run is named after the run directory, or MESHPILOT_RUN_NAME; MESHPILOT_RUN_GROUP groups runs. A sweep
sets both for each trial (SWEEP/TRIAL_ID, grouped by SWEEP: agent.sweep.runner), so each trial is a run of its own.
A resumed run continues its tracker runs (their ids are kept in RUN/trackers.json); the steps after the
checkpoint, which it trains again, are the same numbers.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import logging
import os
import time
from collections.abc import Callable, Iterator
from importlib.util import find_spec
from pathlib import Path
from typing import Any, Protocol

import yaml

from trainer.config import ConfigError
from trainer.results.contracts import write_json

log = logging.getLogger("meshpilot.trackers")

RUN_NAME_ENV = "MESHPILOT_RUN_NAME"
RUN_GROUP_ENV = "MESHPILOT_RUN_GROUP"
STATE_FILE = "trackers.json"  # each tracker's id of this run, for a resume to continue it
PROJECT = "meshpilot"  # wandb's project, MLflow's experiment and Trackio's project unless the user sets their own


class Tracker(Protocol):
    """One tracker. `start` returns the tracker's id of the run, if it has one a resume can continue; the other
    calls take the scalars by name (trainer.rank.trackers's module docstring), at `step`."""

    def start(
        self, run_dir: Path, experiment: dict, name: str, *, group: str | None, first_step: int, run_id: str | None
    ) -> str | None: ...

    def log_step(self, step: int, scalars: dict[str, float]) -> None: ...

    def log_memory(self, step: int, scalars: dict[str, float]) -> None: ...

    def finish(self, step: int, scalars: dict[str, float], status: str) -> None: ...


class TensorBoard:
    def start(self, run_dir, experiment, name, *, group, first_step, run_id):
        # each tracker's library only where that tracker is chosen
        from torch.utils.tensorboard import SummaryWriter

        # A resumed run trains the steps after its checkpoint again: TensorBoard drops what an earlier session
        # logged from the first of them on.
        self.writer = SummaryWriter(str(run_dir / "tensorboard"), purge_step=first_step + 1 if first_step else None)
        config = yaml.safe_dump(experiment, sort_keys=False)
        self.writer.add_text("config", "    " + config.replace("\n", "\n    "))  # indented: markdown code
        return None

    def log_step(self, step, scalars):
        self._scalars(step, scalars)
        self.writer.flush()  # like steps.jsonl: a run that is killed keeps every step it finished

    def log_memory(self, step, scalars):
        self._scalars(step, scalars)

    def finish(self, step, scalars, status):
        self._scalars(step, scalars)
        self.writer.add_text("status", status, step)
        self.writer.close()

    def _scalars(self, step: int, scalars: dict[str, float]) -> None:
        for tag, value in scalars.items():
            # Doubles (new-style scalar summaries), not TensorBoard's default float32: the same numbers as the files.
            self.writer.add_scalar(tag, value, step, new_style=True, double_precision=True)


class WandB:
    def start(self, run_dir, experiment, name, *, group, first_step, run_id):
        # each tracker's library only where that tracker is chosen
        import wandb

        self.run = wandb.init(
            project=os.environ.get("WANDB_PROJECT") or PROJECT,  # mode, entity and the rest: WANDB_* as usual
            name=name,
            group=group,
            dir=str(run_dir),
            config=experiment,
            id=run_id,
            resume="allow" if run_id else None,
        )
        return self.run.id

    def log_step(self, step, scalars):
        self.run.log(scalars, step=step)

    def log_memory(self, step, scalars):
        self.run.summary.update(scalars)  # one figure per run: the summary, not a history

    def finish(self, step, scalars, status):
        self.run.summary.update({**scalars, "status": status})
        self.run.finish(exit_code=0 if status == "ok" else 1)


class MLflow:
    def start(self, run_dir, experiment, name, *, group, first_step, run_id):
        # each tracker's library only where that tracker is chosen
        from mlflow import MlflowClient
        from mlflow.entities import Param

        # MLflow 3 refuses its plain-file store unless told otherwise; SQLite is its local store of choice.
        uri = os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{run_dir.resolve() / 'mlflow.db'}"
        self.client = MlflowClient(uri)
        if run_id:
            self.run_id = run_id
            self.client.update_run(run_id, status="RUNNING")
            return run_id
        tags = {"meshpilot.run_dir": str(run_dir.resolve()), **({"meshpilot.group": group} if group else {})}
        self.run_id = self.client.create_run(self._experiment_id(run_dir), run_name=name, tags=tags).info.run_id
        params = [Param(key, str(value)) for key, value in _leaves(experiment, "", ".")]
        for start in range(0, len(params), 100):  # MLflow takes at most 100 parameters per batch
            self.client.log_batch(self.run_id, params=params[start : start + 100])
        return self.run_id

    def _experiment_id(self, run_dir: Path) -> str:
        # each tracker's library only where that tracker is chosen
        from mlflow.exceptions import MlflowException

        name = os.environ.get("MLFLOW_EXPERIMENT_NAME") or PROJECT
        found = self.client.get_experiment_by_name(name)
        if found is not None:
            return found.experiment_id
        location = None if os.environ.get("MLFLOW_TRACKING_URI") else (run_dir.resolve() / "mlruns").as_uri()
        try:
            return self.client.create_experiment(name, artifact_location=location)
        except MlflowException:  # a sweep's parallel trial, sharing the tracking server, created it first
            return self.client.get_experiment_by_name(name).experiment_id

    def log_step(self, step, scalars):
        self._metrics(step, scalars)

    def log_memory(self, step, scalars):
        self._metrics(step, scalars)

    def finish(self, step, scalars, status):
        self._metrics(step, scalars)
        self.client.set_tag(self.run_id, "meshpilot.status", status)
        self.client.set_terminated(self.run_id, "FINISHED" if status == "ok" else "FAILED")

    def _metrics(self, step: int, scalars: dict[str, float]) -> None:
        # each tracker's library only where that tracker is chosen
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        metrics = [Metric(key, float(value), now, step) for key, value in scalars.items()]
        for start in range(0, len(metrics), 1000):  # MLflow's limit per batch
            self.client.log_batch(self.run_id, metrics=metrics[start : start + 1000])


class Trackio:
    def start(self, run_dir, experiment, name, *, group, first_step, run_id):
        # each tracker's library only where that tracker is chosen
        import trackio

        resume = "allow" if first_step else "never"  # trackio continues a run by its name
        self.run = trackio.init(project=PROJECT, name=name, group=group, config=experiment, resume=resume, embed=False)
        return None

    def log_step(self, step, scalars):
        self.run.log(scalars, step=step)

    def log_memory(self, step, scalars):
        self.run.log(scalars, step=step)

    def finish(self, step, scalars, status):
        # each tracker's library only where that tracker is chosen
        from trackio import AlertLevel

        if scalars:  # none when the run failed
            self.run.log(scalars, step=step)
        if status != "ok":  # trackio's runs have no status: an alert shows it (and goes to a webhook, if one is set)
            self.run.alert(f"run {status}", level=AlertLevel.ERROR)
        self.run.finish()


# Each tracker: its adapter and the package that provides it (what `pip install` takes, and what is imported).
TRACKERS: dict[str, tuple[Callable[[], Tracker], str]] = {
    "tensorboard": (TensorBoard, "tensorboard"),
    "wandb": (WandB, "wandb"),
    "mlflow": (MLflow, "mlflow"),
    "trackio": (Trackio, "trackio"),
}


def check_trackers(names: list[str], key: str = "train.trackers") -> None:
    """Refuse, in one line, a tracker that is unknown, listed twice or whose package is not installed (looked up,
    not imported: wandb and mlflow take seconds to import)."""
    for index, name in enumerate(names):
        if name not in TRACKERS:
            close = difflib.get_close_matches(name, TRACKERS, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"valid: {', '.join(TRACKERS)}"
            raise ConfigError(f"{key}: unknown tracker {name!r} ({hint})")
        if name in names[:index]:
            raise ConfigError(f"{key}: {name} is listed twice")
        package = TRACKERS[name][1]
        if find_spec(package) is None:
            raise ConfigError(f"{key}: {name} is not installed (pip install {package})")


class Trackers:
    """The run's trackers: every call goes to each one still working. On ranks other than 0 there are none."""

    def __init__(self, trackers: dict[str, Tracker] | None = None, step: int = 0):
        self.active = dict(trackers or {})
        self.step = step  # the last step logged: where the memory categories and final metrics go

    def log_step(self, record: dict[str, Any]) -> None:
        """A steps.jsonl record, as written."""
        self.step = record["step"]
        scalars = {f"train/{key}": value for key, value in record.items() if key != "step" and _is_number(value)}
        self._each("log a step", lambda tracker: tracker.log_step(self.step, scalars))

    def log_memory(self, memory: dict[str, Any]) -> None:
        """memory.json, as written: each rank's predicted and measured categories."""
        scalars = {
            f"memory/{kind}/rank{rank['rank']}/{key}": value
            for kind in ("predicted", "measured")
            for rank in memory[kind]
            for key, value in rank.items()
            if key != "rank" and _is_number(value)
        }
        self._each("log memory", lambda tracker: tracker.log_memory(self.step, scalars))

    def finish(self, metrics: dict[str, Any]) -> None:
        """metrics.json, as written; the tracker runs end."""
        self._end(final_scalars(metrics), metrics["status"])

    @contextlib.contextmanager
    def ended_on_failure(self, status: Callable[[BaseException], str]) -> Iterator[None]:
        """When the block fails, end the tracker runs marked with `status(error)`; the error goes on."""
        try:
            yield
        except BaseException as error:
            self._end({}, status(error))
            raise

    def _end(self, scalars: dict[str, float], status: str) -> None:
        self._each("finish", lambda tracker: tracker.finish(self.step, scalars, status))
        self.active.clear()

    def _each(self, doing: str, call: Callable[[Tracker], None]) -> None:
        for name, tracker in list(self.active.items()):
            try:
                call(tracker)
            except Exception as error:
                _dropped(name, doing, error)
                del self.active[name]


def start_trackers(run_dir: Path, experiment: dict[str, Any], first_step: int) -> Trackers:
    """Start the trackers `experiment` (config.yaml's dict) names, on rank 0; `first_step` is the step a resumed
    run continues from (0 for a new run). A tracker that fails to start is left out with a warning."""
    state = run_dir / STATE_FILE
    ids = json.loads(state.read_text()) if first_step and state.is_file() else {}
    name = os.environ.get(RUN_NAME_ENV) or run_dir.resolve().name
    group = os.environ.get(RUN_GROUP_ENV) or None
    trackers = Trackers(step=first_step)
    for tracker_name in experiment["train"].get("trackers") or []:
        tracker = TRACKERS[tracker_name][0]()
        try:
            ids[tracker_name] = tracker.start(
                run_dir, experiment, name, group=group, first_step=first_step, run_id=ids.get(tracker_name)
            )
        except Exception as error:
            _dropped(tracker_name, "start", error)
            continue
        trackers.active[tracker_name] = tracker
    kept = {key: value for key, value in ids.items() if value and key in trackers.active}
    if kept:
        write_json(state, kept)
    return trackers


def _dropped(name: str, doing: str, error: Exception) -> None:
    # A tracker holds a copy of what the run directory holds anyway: its failure (a network or server outage, a
    # full disk, a bug in its package) must not cost a run that may have trained for days. It is dropped, with a
    # warning in the run's log (log.txt), and training goes on.
    log.warning("tracker %s failed to %s; the run goes on without it: %s: %s", name, doing, type(error).__name__, error)


def final_scalars(metrics: dict[str, Any]) -> dict[str, float]:
    """metrics.json's figures as `final/KEY` (nested: `final/layout/tp`; per rank: `final/peak_mem_bytes/rank0`)."""
    scalars = {}
    for key, value in _leaves(metrics, "final", "/"):
        if isinstance(value, list):  # peak_mem_bytes: one per rank
            scalars |= {f"{key}/rank{rank}": v for rank, v in enumerate(value) if _is_number(v)}
        elif _is_number(value):
            scalars[key] = value
    return scalars


def _leaves(value: Any, prefix: str, sep: str) -> Iterator[tuple[str, Any]]:
    """(path, value) of every leaf of nested dicts."""
    if not isinstance(value, dict):
        yield prefix, value
        return
    for key, item in value.items():
        yield from _leaves(item, f"{prefix}{sep}{key}" if prefix else str(key), sep)


def _is_number(value: Any) -> bool:
    """A figure to plot, not a flag, a text or a null. NaN and infinities are figures: a diverging loss shows."""
    return isinstance(value, int | float) and not isinstance(value, bool)
