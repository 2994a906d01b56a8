"""What the runs dashboard shows: every run and sweep trial of the repository, read from the run directories.

Where runs live: the agent launches runs into runs/<name>/ and sweeps into sweeps/<name>/, one run directory per
trial under trials/<id>/ (see agent.tools); the sweep launcher uses sweeps/ too. Nothing registers a run with the
UI: whatever is on disk is shown, so runs started by `meshpilot ask`, by an earlier session or by a sweep that
outlived its terminal appear as well.

The monitor is polled from a worker thread. It reads each steps.jsonl incrementally, from where it stopped, and
a run that has ended is read once and then kept: its files no longer change.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from agent import jobs
from agent.records import TRIAL, TRIAL_FILE
from trainer.config import ConfigError
from trainer.layout import layout_name
from trainer.results.rundir import RunDir, StepsTail, tokens_per_s, untimed_steps
from trainer.results.schemas import TIMELINE_CATEGORIES, MemoryReport, StepRecord

RUNS_DIR = "runs"
SWEEPS_DIR = "sweeps"
ACTIVE = ("queued", "running")
THROUGHPUT_WINDOW = 10  # steps the live tokens/s averages over


@dataclass(frozen=True)
class StepMemory:
    """The first rank's memory through the step the run measured (memory.json "timeline"), by category
    (trainer.results.schemas.TIMELINE_CATEGORIES), beside the memory model's prediction for that rank."""

    step: int
    phases: tuple[str, ...]
    measured: tuple[tuple[int, ...], ...]  # per category: bytes at the end of each phase
    predicted: tuple[int, ...]  # per category


@dataclass(frozen=True)
class RunInfo:
    """One row of the runs table and the data of its charts."""

    key: str  # the run directory relative to the repository, e.g. runs/meshpilot-1a2b3c4d
    name: str  # what the table shows: the run's folder, or sweep/trial for a sweep's trial
    sweep: str | None
    layout: str
    status: str  # agent.jobs states, or "starting" for a directory with no job and no results yet
    cause: str | None
    step: int
    steps: int | None
    tokens_per_s: float | None  # metrics.json's once the run ended, else measured from the latest steps
    peak_mem_bytes: int | None  # largest rank's peak; known once the run ended
    loss: float | None
    losses: tuple[tuple[int, float], ...] = ()
    throughput: tuple[tuple[int, float], ...] = ()  # tokens/s of each step
    memory: StepMemory | None = None  # once the run ended, when it wrote memory.json
    # A mixture-of-experts model's routers by step (steps.jsonl's aux_loss, expert_load_max_over_mean); dense: none.
    aux_losses: tuple[tuple[int, float], ...] = ()
    expert_load: tuple[tuple[int, float], ...] = ()

    @property
    def active(self) -> bool:
        return self.status in ACTIVE


def run_directories(repo: Path) -> list[tuple[Path, str | None]]:
    """(run directory, sweep name or None) for every run and sweep trial of the repository."""
    found: list[tuple[Path, str | None]] = [(d, None) for d in sorted((repo / RUNS_DIR).glob("*/")) if d.is_dir()]
    for sweep in sorted((repo / SWEEPS_DIR).glob("*/")):
        found += [(d, sweep.name) for d in sorted((sweep / "trials").glob("*/")) if d.is_dir()]
    return found


@dataclass
class _Tracked:
    tail: StepsTail
    losses: list[tuple[int, float]] = field(default_factory=list)
    throughput: list[tuple[int, float]] = field(default_factory=list)
    timed: list[StepRecord] = field(default_factory=list)  # the steps.jsonl records with tokens and a time
    aux_losses: list[tuple[int, float]] = field(default_factory=list)
    expert_load: list[tuple[int, float]] = field(default_factory=list)
    layout: str | None = None
    untimed: int | None = None  # the steps tokens/s leaves out, once the run's config.yaml says (untimed_steps)
    ended: RunInfo | None = None  # a run that ended never changes again


class RunMonitor:
    """Reads the repository's runs; `scan` returns them, running and queued ones first, then by name."""

    def __init__(self, repo: Path):
        self.repo = Path(repo)
        self._tracked: dict[Path, _Tracked] = {}

    def scan(self) -> tuple[RunInfo, ...]:
        runs = []
        for directory, sweep in run_directories(self.repo):
            tracked = self._tracked.setdefault(directory, _Tracked(StepsTail(RunDir(directory).steps)))
            runs.append(tracked.ended or self._read(directory, sweep, tracked))
        self._tracked = {d: t for d, t in self._tracked.items() if d.is_dir()}
        return tuple(sorted(runs, key=lambda r: (not r.active, r.key)))

    def _read(self, directory: Path, sweep: str | None, tracked: _Tracked) -> RunInfo:
        status = _status(directory)
        metrics = status.get("metrics") or {}
        unreadable = None
        try:
            _follow_steps(tracked)
        except ValueError as e:  # a steps.jsonl line this version cannot read (its contract): no curves, and why
            unreadable = f"unreadable: {e}"
        if tracked.layout is None:
            tracked.layout = _layout(directory, metrics)
        if tracked.untimed is None:
            tracked.untimed = _untimed(directory)
        peaks = metrics.get("peak_mem_bytes") or []
        last_loss = tracked.losses[-1][1] if tracked.losses else None
        run = RunInfo(
            key=directory.relative_to(self.repo).as_posix(),
            name=f"{sweep}/{directory.name}" if sweep else directory.name,
            sweep=sweep,
            layout=tracked.layout or "?",
            status=status["state"],
            cause=status.get("cause") or unreadable,
            step=tracked.losses[-1][0] if tracked.losses else 0,
            steps=status.get("steps"),
            tokens_per_s=metrics.get("tokens_per_s") or _live_tokens_per_s(tracked.timed, tracked.untimed),
            peak_mem_bytes=max(peaks) if peaks else None,
            loss=final_loss if (final_loss := _finite(metrics.get("final_loss"))) is not None else last_loss,
            losses=tuple(tracked.losses),
            throughput=tuple(tracked.throughput),
            aux_losses=tuple(tracked.aux_losses),
            expert_load=tuple(tracked.expert_load),
            memory=None if status["state"] in (*ACTIVE, "starting") else _step_memory(directory),
        )
        if not run.active and status["state"] != "starting":
            tracked.ended = run
        return run


def _status(directory: Path) -> dict[str, Any]:
    """agent.jobs' view of the run, or what the files alone say for a directory it does not know."""
    try:
        return jobs.run_status(directory)
    except ConfigError:  # neither job.json nor metrics.json: a trial waiting for devices, or a run being prepared
        from agent.records import TRIAL_FILE

        state = "queued" if (directory / TRIAL_FILE).is_file() else "starting"
        return {"state": state, "cause": None, "steps": None, "metrics": None}
    except (OSError, ValueError) as e:  # a file being replaced right now: try again at the next poll
        return {"state": "starting", "cause": f"unreadable: {e}", "steps": None, "metrics": None}


def _follow_steps(tracked: _Tracked) -> None:
    records, reset = tracked.tail.read()
    if reset:
        tracked.losses.clear()
        tracked.throughput.clear()
        tracked.timed.clear()
        tracked.aux_losses.clear()
        tracked.expert_load.clear()
    for record in records:  # checked by steps.jsonl's contract (trainer.results.schemas.StepRecord)
        tracked.losses.append((record["step"], record["loss"]))
        if "aux_loss" in record:
            tracked.aux_losses.append((record["step"], record["aux_loss"]))
        if "expert_load_max_over_mean" in record:
            tracked.expert_load.append((record["step"], record["expert_load_max_over_mean"]))
        if record["tokens"] and record["step_s"]:
            tracked.throughput.append((record["step"], tokens_per_s([record])))
            tracked.timed.append(record)


def _step_memory(directory: Path) -> StepMemory | None:
    try:
        memory = RunDir(directory).read_memory()
    except (OSError, ValueError):  # a file from another version: the run's other figures still show
        return None
    return step_memory(memory) if memory is not None else None


def step_memory(memory: MemoryReport) -> StepMemory | None:
    """The first rank's timeline and prediction, or None when the file has no timeline."""
    if not memory["timeline"] or not memory["timeline"][0]["points"]:
        return None
    timeline = memory["timeline"][0]
    predicted = next((p for p in memory["predicted"] if p["rank"] == timeline["rank"]), {})
    points = timeline["points"]
    return StepMemory(
        step=timeline["step"],
        phases=tuple(point["phase"] for point in points),
        measured=tuple(tuple(point.get(key, 0) for point in points) for key in TIMELINE_CATEGORIES),
        predicted=tuple(sum(predicted.get(k, 0) for k in keys) for keys in TIMELINE_CATEGORIES.values()),
    )


def _live_tokens_per_s(timed: list[StepRecord], untimed: int | None) -> float | None:
    """Tokens/s over the latest steps, leaving out the warm-up steps as the trainer times them (None until the
    run's config.yaml says how many)."""
    if untimed is None:
        return None
    return tokens_per_s([s for s in timed if s["step"] > untimed][-THROUGHPUT_WINDOW:])


def _untimed(directory: Path) -> int | None:
    """The warm-up steps the trainer leaves out of the run's tokens/s (trainer.results.rundir.untimed_steps), from
    its config.yaml; None while there is none to read."""
    with contextlib.suppress(OSError, yaml.YAMLError, AttributeError, KeyError, TypeError):
        train = (RunDir(directory).read_config() or {})["train"]
        return untimed_steps(train["steps"], train["timing_warmup_steps"])
    return None


def _layout(directory: Path, metrics: dict[str, Any]) -> str | None:
    """The mesh degrees: metrics.json's, else the resolved config.yaml's, else the trial's parameters."""
    degrees = metrics.get("layout")
    if degrees is None:
        with contextlib.suppress(OSError, yaml.YAMLError, AttributeError):
            degrees = (RunDir(directory).read_config() or {}).get("layout")
    if degrees is None:
        with contextlib.suppress(OSError, ValueError):  # a record being written, or from another version
            record = TRIAL.read(directory / TRIAL_FILE)
            degrees = record["params"]["layout"] if record is not None else None
    return describe_layout(degrees) if isinstance(degrees, dict) else None


def describe_layout(degrees: dict) -> str:
    """dp_shard=2,tp=2 (the degrees above 1), or one process; what is not a degree is left out."""
    return layout_name({name: degree for name, degree in degrees.items() if isinstance(degree, int)})


def _finite(value: Any) -> float | None:
    return value if isinstance(value, int | float) and math.isfinite(value) else None
