"""What the repository holds, read from disk: its runs and sweeps (newest first, as the tools order them), their
checkpoints, and its files. Names a user types ("r1", "baseline ddp", "the layouts sweep", "layots-nov", "the
long config") are resolved against it, never guessed.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

FILE_SUFFIXES = (".yaml", ".yml", ".md", ".json", ".jsonl", ".txt", ".toml", ".py", ".csv", ".log")


@dataclass
class Known:
    root: Path | None = None
    runs: list[str] = field(default_factory=list)  # "runs/r1", newest first
    sweeps: list[str] = field(default_factory=list)  # "sweeps/lr-scan", newest first
    files: list[str] = field(default_factory=list)  # repository-relative paths of files a user may name

    @classmethod
    def read(cls, root: str | Path | None) -> Known:
        if root is None or not Path(root).is_dir():
            return cls()
        root = Path(root)
        return cls(root, _newest(root, "runs"), _newest(root, "sweeps"), _files(root))

    @property
    def names(self) -> set[str]:
        """Every run's and sweep's own name and every file's stem (kept as typed by the normaliser: "notes" is
        no typo of "nodes" where notes.md exists)."""
        return {p.split("/", 1)[1] for p in [*self.runs, *self.sweeps]} | {Path(f).stem for f in self.files}

    def stem(self, word: str) -> str | None:
        """The one top-level file whose stem is `word` ("my notes" are notes.md)."""
        found = [f for f in self.files if "/" not in f and Path(f).stem.lower() == word.lower()]
        return found[0] if len(found) == 1 else None

    def checkpoints(self, run: str) -> list[str]:
        """The checkpoints of a run, newest (highest step) first."""
        if self.root is None or not (self.root / run / "checkpoint").is_dir():
            return []
        found = [p for p in (self.root / run / "checkpoint").iterdir() if p.is_dir() and p.name.startswith("step_")]
        steps = sorted(found, key=lambda p: int(re.sub(r"\D", "", p.name) or 0), reverse=True)
        return [f"{run}/checkpoint/{p.name}" for p in steps]

    def resolve(self, words: str, kind: str, prefix: bool = True, close: bool = True) -> str | None:
        """The run or sweep (`kind`: "runs" or "sweeps") `words` names: exactly, with spaces for dashes, with one
        typo, or by the first part of its name ("the baseline" is baseline-ddp when it is the only one)."""
        candidates = self.runs if kind == "runs" else self.sweeps
        names = {p.split("/", 1)[1].lower(): p for p in candidates}
        word = re.sub(r"\s+", "-", words.strip().lower())
        if word in names:
            return names[word]
        near = difflib.get_close_matches(word, names, n=2, cutoff=0.85) if close else []
        if len(near) == 1 and len(word) >= 5:
            return names[near[0]]
        if not prefix:
            return None
        prefixed = [n for n in names if n.split("-")[0] == word or n.startswith(word + "-")]
        return names[prefixed[0]] if len(prefixed) == 1 and len(word) >= 2 else None

    def launch_of(self, run: str) -> dict[str, object]:
        """The layout and processes a run ran with, from its metrics.json: what "the same as r1" repeats."""
        if self.root is None:
            return {}
        try:
            metrics = json.loads((self.root / run / "metrics.json").read_text())
        except (OSError, ValueError):
            return {}
        layout = ",".join(f"{k}={v}" for k, v in (metrics.get("layout") or {}).items() if int(v) > 1)
        found: dict[str, object] = {}
        if isinstance(metrics.get("world_size"), int):
            found["nproc"] = metrics["world_size"]
        if layout:
            found["layout"] = layout
        return found

    def file(self, path: str) -> str | None:
        """A file of the repository by its path, or by its name when only one file has it."""
        path = path.strip().removeprefix("./")
        if path in self.files:
            return path
        named = [f for f in self.files if f.rsplit("/", 1)[-1] == path]
        return named[0] if len(named) == 1 else None

    def config(self, stem: str) -> str | None:
        """An experiment file by its stem ("the long config" is configs/long.yaml)."""
        found = [f for f in self.files if f.endswith((".yaml", ".yml")) and Path(f).stem == stem.lower()]
        found = [f for f in found if not f.startswith(("runs/", "sweeps/"))]
        return found[0] if len(found) == 1 else None


def _newest(root: Path, kind: str) -> list[str]:
    """The directories under root/kind, newest first: the order of the tools' list_results (agent.tools)."""
    from agent.tools import _newest as newest_first  # imported here: agent.tools loads langgraph (a second)

    return [f"{kind}/{d.name}" for d in newest_first(root / kind)]


def _files(root: Path) -> list[str]:
    """Files at the top, one level down (configs/, docs/) and in each run directory; not the state or git dirs."""
    found = [p for p in root.glob("*") if p.is_file()]
    found += [p for p in root.glob("*/*") if p.is_file() and not p.parts[-2].startswith(".")]
    found += [p for p in root.glob("runs/*/*") if p.is_file()]
    return sorted(str(p.relative_to(root)) for p in found if p.suffix in FILE_SUFFIXES)
