"""The report's inputs: a sweep directory and benchmark results, checked before anything is drawn or written.

A sweep directory (written by `meshpilot sweep`) holds sweep.json (its inputs), summary.json (every trial with
its status, cause and figures, and the winner) and trials/<id>/, one run directory per trial that ran.
The winner's longer run (`meshpilot demo` trains the winner for longer, then evaluates it) is found through the
benchmark result that names it as its model: see find_longer_run.
A benchmark result (written by evalsuite) is read through `sanitize_bench`: of a private task only its name,
its aggregate metrics and its contamination flag are kept, so nothing else of it can reach a report or a commit.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from trainer.config import OBJECTIVES, ConfigError
from trainer.rundir import RUN_STATUSES, RunDir

STATUSES = RUN_STATUSES
UNFINISHED = ("queued", "running")
RUN_FILES = ("metrics.json", "memory.json", "steps.jsonl", "config.yaml")  # what the report copies of a run
_BENCH_FIELDS = (
    "suite", "suite_version", "model", "config_hash", "git_commit", "seed", "eval_code_version", "batching",
    "leaderboard_id",
)  # fmt: skip
_SAFE_ID = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9._-]*$")
_PUBLIC_TASK_FIELDS = ("task", "version", "split", "private", "metrics", "n_examples", "contamination")


class ReportError(ConfigError):
    """Bad input to the report, phrased in one line."""


class _RunFiles:
    """Reading a run's result files, held as bytes by name (RUN_FILES)."""

    files: dict[str, bytes]

    def json(self, name: str) -> Any:
        return json.loads(self.files[name]) if name in self.files else None

    def steps(self) -> list[dict[str, Any]]:
        text = self.files.get("steps.jsonl", b"").decode()
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def config(self) -> dict[str, Any] | None:
        return yaml.safe_load(self.files["config.yaml"]) if "config.yaml" in self.files else None


@dataclass
class Trial(_RunFiles):
    index: int  # position in summary.json's trials: figures name it
    id: str
    record: dict[str, Any]  # its entry in summary.json
    run: RunDir | None  # its run directory, when it ran
    files: dict[str, bytes] = field(default_factory=dict)  # the run's result files, by name
    launch: dict[str, Any] | None = None  # launch.json: where relative model and data paths resolve; not copied

    @property
    def status(self) -> str:
        return self.record["status"]


@dataclass
class LongerRun(_RunFiles):
    """The winner trained again for more steps, outside the sweep."""

    path: Path
    files: dict[str, bytes]


@dataclass
class Sweep:
    path: Path
    summary: dict[str, Any]
    inputs: dict[str, Any] | None  # sweep.json
    trials: list[Trial]

    @property
    def winner(self) -> Trial | None:
        return next((t for t in self.trials if t.id == self.summary.get("winner")), None)

    @property
    def objective(self) -> str:
        return self.summary.get("objective") or "tokens_per_s"

    def ranked(self) -> list[Trial]:
        """Trials that finished with a value of the objective, best first."""
        scored = [t for t in self.trials if t.status == "ok" and _number(t.record.get(self.objective))]
        sign = -1 if OBJECTIVES[self.objective] == "maximize" else 1
        return sorted(scored, key=lambda t: sign * t.record[self.objective])


def load_sweep(path: Path) -> Sweep:
    path = Path(path)
    if not path.is_dir():
        raise ReportError(f"sweep directory not found: {path}")
    summary = _read_json(path / "summary.json", "the sweep summary")
    if not isinstance(summary, dict) or not isinstance(summary.get("trials"), list):
        raise ReportError(f"{path / 'summary.json'}: expected an object with a list of trials")
    if summary.get("objective", "tokens_per_s") not in OBJECTIVES:
        raise ReportError(f"{path / 'summary.json'}: unknown objective {summary['objective']!r}")
    inputs = _read_json(path / "sweep.json", "the sweep inputs") if (path / "sweep.json").is_file() else None
    trials = [_load_trial(path, i, record) for i, record in enumerate(summary["trials"])]
    ids = [t.id for t in trials]
    if len(set(ids)) != len(ids):
        raise ReportError(f"{path / 'summary.json'}: trial ids repeat")
    winner = summary.get("winner")
    if winner is not None and str(winner) not in ids:
        raise ReportError(f"{path / 'summary.json'}: the winner {winner!r} is not among the trials")
    if winner is not None:
        summary["winner"] = str(winner)
        if next(t for t in trials if t.id == str(winner)).status != "ok":
            raise ReportError(f"{path / 'summary.json'}: the winner {winner!r} did not finish (status is not ok)")
    return Sweep(path, summary, inputs, trials)


def _load_trial(sweep: Path, index: int, record: Any) -> Trial:
    where = f"{sweep / 'summary.json'}: trial {index}"
    if isinstance(record, dict) and record.get("status") in UNFINISHED:
        raise ReportError(f"{where} ({record.get('id')}) is {record['status']}: report when the sweep has finished")
    if not isinstance(record, dict) or "id" not in record or record.get("status") not in STATUSES:
        raise ReportError(f"{where}: needs an id and a status, one of {', '.join(STATUSES)}")
    if not _SAFE_ID.match(str(record["id"])):
        raise ReportError(f"{where}: id {record['id']!r} cannot name a folder (letters, digits, ._- only)")
    trial = Trial(index, str(record["id"]), record, None)
    if record.get("run_dir"):
        run = RunDir(sweep / record["run_dir"])
        # Judged on the names, not resolved: a sweep may keep its trials behind a symbolic link (scratch disk).
        if not Path(os.path.normpath(run.path)).is_relative_to(os.path.normpath(sweep)):
            raise ReportError(f"{where}: run_dir {record['run_dir']!r} is outside the sweep directory")
        if run.path.is_dir():
            trial.run = run
            trial.files = _read_run_files(run.path)
            trial.launch = json.loads(run.launch.read_text()) if run.launch.is_file() else None
    if trial.status == "ok":
        metrics = trial.json("metrics.json")
        if metrics is None or metrics.get("status") != "ok":
            raise ReportError(f"{where} ({trial.id}): status ok, but its run directory has no successful metrics.json")
        if "memory.json" not in trial.files:
            raise ReportError(f"{where} ({trial.id}): status ok, but its run directory has no memory.json")
    return trial


def _read_run_files(path: Path) -> dict[str, bytes]:
    return {name: (path / name).read_bytes() for name in RUN_FILES if (path / name).is_file()}


# What makes a run the winner's, read from both metrics.json files: its layout and batch split, on the same devices.
_SAME_RUN_METRICS = ("layout", "world_size", "device_type", "micro_batch", "grad_accum", "seq_len", "packing",
                     "precision")  # fmt: skip
_SAME_RUN_CONFIG = ("model", "tokenizer", "data")  # and the same model, trained on the same data


def find_longer_run(benches: list[tuple[str, dict[str, Any]]], winner: Trial | None) -> LongerRun | None:
    """The winner's longer run: the run a benchmark result evaluated (its model.path, a meshpilot run directory or
    a checkpoint inside one) when it trained the winner's model and data in the winner's layout for more steps.

    Nothing else records that run, and `meshpilot demo` evaluates exactly it; any other model is no such run.
    """
    if winner is None:
        return None
    for _, bench in benches:
        path = (bench.get("model") or {}).get("path")
        if not isinstance(path, str) or not path:
            continue
        for candidate in (Path(path), *Path(path).parents[:2]):  # the run, or its checkpoint/step_N directory
            if (candidate / "metrics.json").is_file():
                run = LongerRun(candidate, _read_run_files(candidate))
                if _longer_run_of(run, winner):
                    return run
                break
    return None


def _longer_run_of(run: LongerRun, winner: Trial) -> bool:
    try:
        metrics, config = run.json("metrics.json"), run.config()
    except (ValueError, yaml.YAMLError):  # a run still being written: not the finished longer run
        return False
    won, won_config = winner.json("metrics.json"), winner.config() or {}
    if not isinstance(metrics, dict) or not isinstance(config, dict) or metrics.get("status") != "ok":
        return False
    same = all(metrics.get(k) == won.get(k) for k in _SAME_RUN_METRICS) and all(
        config.get(k) == won_config.get(k) for k in _SAME_RUN_CONFIG
    )
    return same and _number(metrics.get("steps")) and metrics["steps"] > (won.get("steps") or 0)


def load_bench(path: Path) -> dict[str, Any]:
    """A benchmark result file, checked and sanitized."""
    return check_bench(_read_json(Path(path), "the benchmark result"), str(path))


def check_bench(data: Any, where: str) -> dict[str, Any]:
    """A benchmark result (as read from its file), checked and sanitized (see sanitize_bench)."""
    if not isinstance(data, dict) or not isinstance(data.get("suite"), str) or not isinstance(data.get("tasks"), list):
        raise ReportError(f"{where}: not a benchmark result (needs a suite name and a list of tasks)")
    for i, task in enumerate(data["tasks"]):
        if not isinstance(task, dict) or not isinstance(task.get("task"), str):
            raise ReportError(f"{where}: task {i} has no name")
        if not isinstance(task.get("private"), bool):
            raise ReportError(f"{where}: task {task['task']!r} does not say whether it is private")
        metrics = task.get("metrics")
        if not isinstance(metrics, dict) or not metrics or not all(_number(v) for v in metrics.values()):
            raise ReportError(f"{where}: task {task['task']!r} needs metrics, each a number")
    return sanitize_bench(data)


def sanitize_bench(data: dict[str, Any]) -> dict[str, Any]:
    """What of a benchmark result may be copied: aggregates and contamination flags only for private tasks."""
    clean = {key: data[key] for key in _BENCH_FIELDS if key in data}
    clean["tasks"] = [_sanitize_task(task) for task in data["tasks"]]
    return clean


def _sanitize_task(task: dict[str, Any]) -> dict[str, Any]:
    if not task["private"]:
        return {key: task[key] for key in _PUBLIC_TASK_FIELDS if key in task}
    contamination = task.get("contamination") or {}
    return {
        "task": task["task"],
        "private": True,
        "metrics": {name: float(value) for name, value in task["metrics"].items()},
        "contamination": {"flagged": bool(contamination.get("flagged", False))},
    }


def _read_json(path: Path, what: str) -> Any:
    if not path.is_file():
        raise ReportError(f"{what} not found: {path}")
    try:
        return json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ReportError(f"{path}: not valid JSON ({e})") from None


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
