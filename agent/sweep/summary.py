"""summary.json: a pure function of the sweep's files (sweep.json and each trial's directory), so a sweep resumed
after a crash summarizes exactly as an uninterrupted one. Only measured figures (tokens/s, memory) differ
between two runs of the same trial, never which trials ran, their parameters, their status or their order.

Its schema is Summary, written and read through SUMMARY (the report, the agent's tools, the terminal UI, and
agent.jobs for a sweep job's result).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from agent import jobs
from agent.records import (
    SUMMARY,
    SUMMARY_FILE,
    SWEEP,
    SWEEP_FILE,
    TRIAL,
    TRIAL_FILE,
    Dropped,
    PointRecord,
    Summary,
    TrialRecord,
)
from trainer.config import OBJECTIVES

Bytes = Annotated[int, Field(ge=0)]


def summarize(directory: Path) -> Summary:
    """Build summary.json from the sweep directory and write it; returns it."""
    directory = Path(directory)
    sweep = SWEEP.read(directory / SWEEP_FILE)
    if sweep is None:
        raise FileNotFoundError(f"{directory / SWEEP_FILE}: no sweep started here")
    points = {p["id"]: p for p in sweep["space"]["points"]}
    trials = [_trial(t, points) for t in sorted((directory / "trials").glob(f"*/{TRIAL_FILE}"))]
    trials.sort(key=lambda t: t["id"])
    summary = {
        "experiment": sweep["experiment"],
        "config_hash": sweep["config_hash"],
        "objective": sweep["objective"],
        "device_type": sweep["device_type"],
        "devices": len(sweep["device_ids"]),
        "sampler": sweep["sampler"],
        "winner": _best(trials, sweep["objective"]),
        "trials": trials,
        "planner": _planner(trials, sweep["space"]["dropped"]),
    }
    return SUMMARY.write(directory / SUMMARY_FILE, summary)


def _trial(record_file: Path, points: dict[str, PointRecord]) -> dict[str, Any]:
    trial_dir = record_file.parent
    record: TrialRecord = TRIAL.read(record_file)
    status = jobs.run_status(trial_dir) if jobs.read_job(trial_dir) else {"state": "queued", "cause": None}
    metrics = status.get("metrics") or {}
    peaks = metrics.get("peak_mem_bytes") or []
    point = points[record["point"]]
    return {
        "id": record["id"],
        "params": record["params"],
        "settings": record["settings"],
        "status": status["state"],
        "cause": status["cause"],
        "run_dir": f"trials/{record['id']}",
        "nproc": math.prod(point["layout"].values()),
        "tokens_per_s": metrics.get("tokens_per_s"),
        "mfu": metrics.get("mfu"),
        "peak_mem_bytes": max(peaks) if peaks else None,
        "predicted_peak_bytes": point["predicted_peak_bytes"],
        "predicted_tokens_per_s": point["predicted_tokens_per_s"],
        "final_loss": _finite(metrics.get("final_loss")),
    }


def _best(trials: list[dict], objective: str) -> str | None:
    """The best ok trial by the objective; the earlier id wins a tie."""
    scored = [t for t in trials if t["status"] == "ok" and t[objective] is not None]
    if not scored:
        return None
    sign = -1 if OBJECTIVES[objective] == "maximize" else 1
    return min(scored, key=lambda t: (sign * t[objective], t["id"]))["id"]


def _planner(trials: list[dict], dropped: list[Dropped]) -> dict[str, Any]:
    """The planner's pick among the trials that ran (highest predicted tokens/s) against the measured best."""
    predicted = [t for t in trials if t["predicted_tokens_per_s"] is not None]
    top = min(predicted, key=lambda t: (-t["predicted_tokens_per_s"], t["id"])) if predicted else None
    best = _best(trials, "tokens_per_s")
    measured = {t["id"]: t["tokens_per_s"] for t in trials if t["status"] == "ok"}
    ratio = None
    if top is not None and best is not None and measured.get(top["id"]) is not None:
        ratio = measured[top["id"]] / measured[best]
    return {
        "top_pick": top["id"] if top else None,
        "top_pick_params": top["params"] if top else None,
        "measured_best": best,
        "quality_ratio": ratio,
        "dropped": dropped,  # candidates the planner ruled out before any trial ran, with the reason
    }


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None
