"""The run directory: the files every other part of meshpilot reads (see the README's result-file contract)."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any


class RunDir:
    def __init__(self, path: str | Path):
        self.path = Path(path)

    config = property(lambda self: self.path / "config.yaml")  # the resolved experiment that ran
    launch = property(lambda self: self.path / "launch.json")  # what the launcher prepared for the workers
    steps = property(lambda self: self.path / "steps.jsonl")
    metrics = property(lambda self: self.path / "metrics.json")
    memory = property(lambda self: self.path / "memory.json")
    snapshot = property(lambda self: self.path / "snapshot.pickle")
    checkpoints = property(lambda self: self.path / "checkpoint")
    log = property(lambda self: self.path / "log.txt")
    torchrun_log = property(lambda self: self.path / "torchrun.log")  # everything the ranks and torchrun printed

    def rank_log(self, rank: int) -> Path:
        return self.log if rank == 0 else self.path / f"log.rank{rank}.txt"

    def failure(self, rank: int) -> Path:
        return self.path / f"failure.rank{rank}.json"

    def failures(self) -> list[dict[str, Any]]:
        """Failures the ranks recorded, earliest first: the first is usually the cause, the rest its echo."""
        found = [json.loads(p.read_text()) for p in self.path.glob("failure.rank*.json")]
        return sorted(found, key=lambda f: f["time"])

    def read_steps(self) -> list[dict[str, Any]]:
        if not self.steps.is_file():
            return []
        return [json.loads(line) for line in self.steps.read_text().splitlines() if line.strip()]

    def read_metrics(self) -> dict[str, Any] | None:
        return json.loads(self.metrics.read_text()) if self.metrics.is_file() else None


class StepsTail:
    """The complete lines appended to a steps.jsonl since the last call, for readers that follow a live run.

    A resumed run rewrites the file from its checkpoint's step (os.replace: a new inode), so a file that was
    replaced or shrank is read again from the start; `read` says so, for callers that keep earlier records.
    A line still being written waits for the next call.
    """

    def __init__(self, path: Path):
        self.path = path
        self.inode: int | None = None
        self.offset = 0

    def read(self) -> tuple[list[dict[str, Any]], bool]:
        """(new records, whether records read before must be dropped)."""
        try:
            with self.path.open("rb") as f:
                stat = os.fstat(f.fileno())
                reset = stat.st_ino != self.inode or stat.st_size < self.offset
                if reset:
                    self.inode, self.offset = stat.st_ino, 0
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return [], False
        complete = data[: data.rfind(b"\n") + 1]
        self.offset += len(complete)
        records = []
        for line in complete.splitlines():
            with contextlib.suppress(ValueError):
                records.append(json.loads(line))
        return records, reset


def write_json(path: Path, data: Any) -> None:
    """Write JSON so that a reader sees the old file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=2, default=str)
        f.write("\n")
    os.replace(tmp, path)


def write_text(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)
