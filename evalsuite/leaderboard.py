"""The SQLite leaderboard in the sealed store: one row per submission, aggregate scores only.

The public leaderboard shows each submission's dev-split scores, the private one its test-split scores (as on
Kaggle: optimise against the public numbers, and the private ones say whether that generalised). A model may submit a
limited number of times per (UTC) day, so that the private scores cannot be climbed by trial and error. A model is
its weights' content hash (evalsuite.models.weights_hash), so a re-exported or copied checkpoint counts as the same
model; the day rolls over at UTC midnight of the leaderboard's clock (injectable for tests).
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evalsuite.errors import BenchError
from evalsuite.metrics import higher_is_better
from evalsuite.result import BENCH_RESULT, BenchResult

_SCHEMA = """
CREATE TABLE IF NOT EXISTS submissions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    day TEXT NOT NULL,
    model_key TEXT NOT NULL,
    suite TEXT NOT NULL,
    result TEXT NOT NULL
)
"""


def utc_day(seconds: float) -> str:
    """The UTC calendar day of a Unix time, as YYYY-MM-DD."""
    return time.strftime("%Y-%m-%d", time.gmtime(seconds))


class Leaderboard:
    def __init__(self, path: Path, clock: Callable[[], float] = time.time):
        if not path.exists():
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))  # owner-only before SQLite writes a byte
        self.path, self.clock = path, clock
        self._query(_SCHEMA)

    def today(self) -> str:
        return utc_day(self.clock())

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=30, isolation_level=None)

    def _query(self, sql: str, parameters: tuple = ()) -> list[tuple]:
        with contextlib.closing(self._connect()) as db:
            return db.execute(sql, parameters).fetchall()

    def submissions_today(self, model_key: str) -> int:
        """Submissions of the model (its weights hash) on the clock's current UTC day."""
        query = "SELECT COUNT(*) FROM submissions WHERE model_key = ? AND day = ?"
        return self._query(query, (model_key, self.today()))[0][0]

    def check_limit(self, model_key: str, limit: int, name: str | None = None) -> None:
        """Refuse a submission beyond the daily limit, before the evaluation; `name` says which model it is."""
        count = self.submissions_today(model_key)
        if count >= limit:
            model = f"{name} (weights {model_key})" if name else model_key
            raise BenchError(
                f"submission limit reached: {model} has made {count} of {limit} submissions today (UTC); "
                "try again tomorrow"
            )

    def record(self, model_key: str, result: BenchResult, limit: int) -> int:
        """Add a submission, checking the limit again in the same transaction (another run may have finished)."""
        result = BENCH_RESULT.check(result, f"{self.path}: the submission")
        db = self._connect()
        try:
            db.execute("BEGIN IMMEDIATE")
            query = "SELECT COUNT(*) FROM submissions WHERE model_key = ? AND day = ?"
            day = self.today()
            if db.execute(query, (model_key, day)).fetchone()[0] >= limit:
                db.execute("ROLLBACK")
                raise BenchError(f"submission limit reached: weights {model_key} made {limit} submissions today (UTC)")
            cursor = db.execute(
                "INSERT INTO submissions (day, model_key, suite, result) VALUES (?, ?, ?, ?)",
                (day, model_key, result["suite"], json.dumps(result, sort_keys=True)),
            )
            db.execute("COMMIT")
            return cursor.lastrowid
        finally:
            db.close()

    def rows(self, suite: str | None = None, private: bool = False) -> list[dict[str, Any]]:
        """Submissions with their dev (public) or test (private) scores, best first."""
        found = self._query("SELECT id, day, result FROM submissions ORDER BY id")
        split = "test" if private else "dev"
        results = [(id_, day, BENCH_RESULT.parse(blob, f"{self.path} submission {id_}")) for id_, day, blob in found]
        rows = [_row(id_, day, result, split) for id_, day, result in results]
        rows = [r for r in rows if (suite is None or r["suite"] == suite) and r["tasks"]]
        return sorted(rows, key=lambda r: (r["score"] is None, -(r["score"] or 0.0), r["id"]))


def _row(id_: int, day: str, result: BenchResult, split: str) -> dict[str, Any]:
    tasks = {t["task"]: t for t in result["tasks"] if t["split"] == split}
    return {
        "id": id_,
        "day": day,
        "suite": result["suite"],
        "suite_version": result["suite_version"],
        "split": split,
        "model": result["model"]["path"],
        "checkpoint_hash": result["model"]["checkpoint_hash"],
        "config_hash": result["config_hash"],
        "git_commit": result["git_commit"],
        "seed": result["seed"],
        "eval_code_version": result["eval_code_version"],
        "score": _score(tasks.values()),
        "tasks": {
            name: {"metrics": t["metrics"], "n_examples": t["n_examples"], "contamination": t["contamination"]}
            for name, t in tasks.items()
        },
        "flagged": sorted(name for name, t in tasks.items() if t["contamination"]["flagged"]),
    }


def _score(tasks) -> float | None:
    """Mean main metric (the first listed) over the tasks where higher is better, such as accuracy.

    Perplexities are left out: they are on another scale, and shown per task.
    """
    values = []
    for t in tasks:
        name, value = next(iter(t["metrics"].items()))
        if higher_is_better(name):
            values.append(value)
    return sum(values) / len(values) if values else None
