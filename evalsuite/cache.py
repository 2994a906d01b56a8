"""Per-example results of an evaluation in progress, so that a crashed or interrupted one continues where it stopped.

The cache lives in the sealed store (per-example results of a private split are private) under a key of everything
that determines the results: weights, task version, split, evaluation code, batching. Each completed batch is
appended as one line and synced, so a crash loses at most the batch in flight, and a torn last line is ignored.
When the run is recorded, its caches are deleted: results are kept only as aggregates.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any


def cache_key(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:32]


class ResumeCache:
    def __init__(self, directory: Path, key: str):
        self.path = directory / f"{key}.jsonl"
        self.results: dict[int, Any] = {}
        if self.path.is_file():
            for line in self.path.read_text().splitlines():
                try:
                    self.results.update({int(i): v for i, v in json.loads(line).items()})
                except json.JSONDecodeError:  # the line a crash cut short
                    continue

    def has_all(self, indices: list[int]) -> bool:
        return all(i in self.results for i in indices)

    def add(self, results: dict[int, Any]) -> None:
        """Record one batch's results durably (one line: a batch is cached whole or not at all)."""
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        with os.fdopen(fd, "a") as f:
            f.write("\n" + json.dumps({str(i): v for i, v in results.items()}) + "\n")
            f.flush()
            os.fsync(f.fileno())
        self.results.update(results)

    def discard(self) -> None:
        self.path.unlink(missing_ok=True)
