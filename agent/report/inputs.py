"""The report's inputs: a sweep directory and benchmark results, checked before anything is drawn or written.

A sweep directory (written by `meshpilot sweep`) holds sweep.json (its inputs), summary.json (every trial with
its status, cause and figures, and the winner) and trials/<id>/, one run directory per trial that ran.
The winner's longer run (`meshpilot demo` trains the winner for longer, then evaluates it) is found through the
benchmark result that names it as its model: see find_longer_run.
A benchmark result (written by evalsuite) is read through `sanitize_bench`: of a private task only its name,
its aggregate metrics and its contamination flag are kept, so nothing else of it can reach a report or a commit.

The sweep's and the runs' files are read through their contracts (agent.sweep.SWEEP, agent.sweep.summary.SUMMARY,
trainer.results.schemas), so a file that does not match its schema is refused in one line naming the file and the field.
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

from agent.records import SUMMARY, SUMMARY_FILE, SWEEP, SWEEP_FILE, Summary, SweepInputs, TrialSummary
from trainer.config import OBJECTIVES, ConfigError
from trainer.results.contracts import Contract, ContractError
from trainer.results.rundir import RunDir, parse_config
from trainer.results.schemas import MEMORY, METRICS, RUN_STATUSES, STEPS, LaunchInfo, MemoryReport, Metrics, StepRecord

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
    """Reading a run's result files, held as bytes by name (RUN_FILES), each through its contract."""

    files: dict[str, bytes]

    @property
    def where(self) -> Path:
        """The run directory the files were read from, as errors name them."""
        raise NotImplementedError

    def metrics(self) -> Metrics | None:
        return self._parsed(METRICS, "metrics.json")

    def memory(self) -> MemoryReport | None:
        return self._parsed(MEMORY, "memory.json")

    def _parsed(self, contract: Contract, name: str) -> Any:
        return contract.parse(self.files[name].decode(), self.where / name) if name in self.files else None

    def steps(self) -> list[StepRecord]:
        """steps.jsonl's records; a last line being written (no newline yet) is not one."""
        return STEPS.parse_lines(self.files.get("steps.jsonl", b"").decode(), self.where / "steps.jsonl")

    def config(self) -> dict[str, Any] | None:
        return parse_config(self.files["config.yaml"]) if "config.yaml" in self.files else None

    def check(self) -> None:
        """Every result file read once through its contract: a bad one fails here, in one line, before any use."""
        try:
            self.metrics(), self.memory(), self.steps()
        except ContractError as e:
            raise ReportError(str(e)) from None
        except UnicodeDecodeError:
            raise ReportError(f"{self.where}: a result file is not text (UTF-8)") from None


@dataclass
class Trial(_RunFiles):
    index: int  # position in summary.json's trials: figures name it
    id: str
    record: TrialSummary  # its entry in summary.json
    run: RunDir | None  # its run directory, when it ran
    files: dict[str, bytes] = field(default_factory=dict)  # the run's result files, by name
    launch: LaunchInfo | None = None  # launch.json: where relative model and data paths resolve; not copied

    @property
    def status(self) -> str:
        return self.record["status"]

    @property
    def where(self) -> Path:
        return self.run.path if self.run is not None else Path(self.id)


@dataclass
class LongerRun(_RunFiles):
    """The winner trained again for more steps, outside the sweep."""

    path: Path
    files: dict[str, bytes]

    @property
    def where(self) -> Path:
        return self.path


@dataclass
class Sweep:
    path: Path
    summary: Summary
    inputs: SweepInputs | None  # sweep.json
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
    summary_file = path / SUMMARY_FILE
    summary = _checked_summary(_read_json(summary_file, "the sweep summary"), summary_file)
    try:
        inputs = SWEEP.read(path / SWEEP_FILE)
    except ContractError as e:
        raise ReportError(str(e)) from None
    trials = [_load_trial(path, i, record) for i, record in enumerate(summary["trials"])]
    ids = [t.id for t in trials]
    if len(set(ids)) != len(ids):
        raise ReportError(f"{summary_file}: trial ids repeat")
    winner = summary["winner"]
    if winner is not None and winner not in ids:
        raise ReportError(f"{summary_file}: the winner {winner!r} is not among the trials")
    if winner is not None and next(t for t in trials if t.id == winner).status != "ok":
        raise ReportError(f"{summary_file}: the winner {winner!r} did not finish (status is not ok)")
    return Sweep(path, summary, inputs, trials)


def _checked_summary(data: Any, path: Path) -> Summary:
    """summary.json through its contract; first, in the report's own words, what makes a sweep unfit to report (an
    unfinished trial, a status or objective the report does not know)."""
    if not isinstance(data, dict) or not isinstance(data.get("trials"), list):
        raise ReportError(f"{path}: expected an object with a list of trials")
    if data.get("objective", "tokens_per_s") not in OBJECTIVES:
        raise ReportError(f"{path}: unknown objective {data['objective']!r}")
    for index, record in enumerate(data["trials"]):
        where = f"{path}: trial {index}"
        if isinstance(record, dict) and record.get("status") in UNFINISHED:
            raise ReportError(f"{where} ({record.get('id')}) is {record['status']}: report when the sweep has finished")
        if not isinstance(record, dict) or "id" not in record or record.get("status") not in STATUSES:
            raise ReportError(f"{where}: needs an id and a status, one of {', '.join(STATUSES)}")
    try:
        return SUMMARY.check(data, path)
    except ContractError as e:
        raise ReportError(str(e)) from None


def _load_trial(sweep: Path, index: int, record: TrialSummary) -> Trial:
    where = f"{sweep / SUMMARY_FILE}: trial {index}"
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
            trial.check()
            try:
                trial.launch = run.read_launch()
            except ContractError as e:
                raise ReportError(str(e)) from None
    if trial.status == "ok":
        metrics = trial.metrics()
        if metrics is None or metrics["status"] != "ok":
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
        run.check()
        metrics, config = run.metrics(), run.config()
    except (ReportError, yaml.YAMLError):  # a run still being written, or another's: not the finished longer run
        return False
    won, won_config = winner.metrics(), winner.config() or {}
    if metrics is None or not isinstance(config, dict) or metrics["status"] != "ok":
        return False
    same = all(metrics.get(k) == won.get(k) for k in _SAME_RUN_METRICS) and all(
        config.get(k) == won_config.get(k) for k in _SAME_RUN_CONFIG
    )
    return same and metrics["steps"] > won["steps"]


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
