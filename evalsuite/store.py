"""The sealed store: private test items, the secret seed, the leaderboard and resume caches, outside any repository.

Private test labels must never reach training data, a language model, a report or a commit. So everything private
lives in one directory of the user's data directory (`$MESHPILOT_DATA`, default `~/.local/share/meshpilot`), never
inside a repository (git's, or one the agent works in), readable by its owner only (directories 0700, files 0600).
Sealed items are stored gzip-compressed: not for secrecy (the permissions and the location do that) but so that no
text crawler, grep or corpus builder pointed at the disk picks the labels up as plain text. The agent refuses to
read any store, wherever it lies (agent.private).

    STORE/
      secret.json                    the secret seed of the private synthetic test splits, made once per store
      settings.json                  daily submission limit
      sealed/TASK/SPLIT.jsonl.gz     private items imported with `meshpilot bench seal`
      leaderboard.sqlite             submissions and their aggregate scores
      cache/KEY.jsonl                per-example results of an evaluation in progress (deleted when it completes)
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import secrets
import tempfile
from pathlib import Path
from typing import Any

from platformdirs import user_data_dir

from evalsuite.errors import BenchError

DEFAULT_SETTINGS = {"daily_submissions": 10}
_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")


def default_root() -> Path:
    """$MESHPILOT_DATA, else the platform's data directory (on Linux ~/.local/share/meshpilot, or under
    $XDG_DATA_HOME)."""
    return Path(os.environ.get("MESHPILOT_DATA") or user_data_dir("meshpilot")).expanduser()


# What marks a directory as a version-controlled repository: the store refuses to lie in one, where its labels
# could be committed. The agent reading it wherever it lies is refused by agent/private.py (by inode, not by place):
# refusing any directory the agent has worked in as well would break `meshpilot bench` for everyone who once ran
# `meshpilot ask --repo ~`, since the default store lies under the home directory.
REPOSITORY_MARKERS = {".git": "git work tree", ".hg": "Mercurial repository", ".svn": "Subversion working copy"}
# The files that make a directory a sealed store (see the layout above): how a store is known wherever it lies.
STORE_MARKERS = ("secret.json", "sealed")


def git_work_tree(path: Path) -> Path | None:
    """The root of the git work tree holding `path` (which need not exist yet), or None."""
    for candidate in (path, *path.parents):
        if (candidate / ".git").exists():
            return candidate
    return None


def enclosing_repository(path: Path) -> tuple[Path, str] | None:
    """The innermost repository holding `path` (which need not exist yet) and what kind it is, or None."""
    for candidate in (path, *path.parents):
        for marker, kind in REPOSITORY_MARKERS.items():
            if (candidate / marker).exists():
                return candidate, kind
    return None


def is_store(directory: Path) -> bool:
    """Whether `directory` is a sealed store (this machine's configured one or any other)."""
    return all((directory / name).exists() for name in STORE_MARKERS)


class Store:
    def __init__(self, root: Path):
        self.root = root

    @classmethod
    def open(cls, root: Path | None = None) -> Store:
        """Open (creating on first use) the store at `root` or the default location; refuses one inside a repository
        (REPOSITORY_MARKERS)."""
        root = (root or default_root()).resolve()
        found = enclosing_repository(root)
        if found is not None:
            repo, kind = found
            raise BenchError(
                f"the sealed store {root} lies inside the {kind} {repo}: private labels could be committed or read "
                "by an agent; set MESHPILOT_DATA to a directory outside every repository"
            )
        for directory in (root, root / "sealed", root / "cache"):
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            directory.chmod(0o700)  # an existing directory may have been created with looser permissions
        store = cls(root)
        store._create_once(root / "secret.json", {"secret": secrets.token_hex(32)})
        store._create_once(root / "settings.json", DEFAULT_SETTINGS)
        return store

    @property
    def leaderboard_path(self) -> Path:
        return self.root / "leaderboard.sqlite"

    @property
    def cache_dir(self) -> Path:
        return self.root / "cache"

    def secret(self) -> str:
        return json.loads((self.root / "secret.json").read_text())["secret"]

    def settings(self) -> dict[str, Any]:
        return {**DEFAULT_SETTINGS, **json.loads((self.root / "settings.json").read_text())}

    def update_settings(self, **changes: Any) -> None:
        unknown = set(changes) - set(DEFAULT_SETTINGS)
        if unknown:
            raise BenchError(f"unknown store setting {sorted(unknown)[0]!r} (known: {', '.join(DEFAULT_SETTINGS)})")
        write_private(self.root / "settings.json", json.dumps({**self.settings(), **changes}).encode())

    def seal(self, task: str, split: str, items: list[dict[str, Any]]) -> Path:
        """Keep `items` as the sealed `split` of `task`, replacing any sealed before."""
        directory = self._sealed_dir(task)
        directory.mkdir(mode=0o700, exist_ok=True)
        lines = "".join(json.dumps(item, sort_keys=True) + "\n" for item in items)
        path = directory / f"{_checked(split)}.jsonl.gz"
        write_private(path, gzip.compress(lines.encode(), mtime=0))
        return path

    def sealed(self, task: str, split: str) -> list[dict[str, Any]] | None:
        """The sealed items of a split, or None when none were sealed. Only the scorer may call this."""
        path = self._sealed_dir(task) / f"{_checked(split)}.jsonl.gz"
        if not path.is_file():
            return None
        return [json.loads(line) for line in gzip.decompress(path.read_bytes()).decode().splitlines() if line]

    def sealed_digest(self, task: str, split: str) -> str | None:
        """Identifies the sealed items without revealing them (for version hashes)."""
        path = self._sealed_dir(task) / f"{_checked(split)}.jsonl.gz"
        return hashlib.sha256(gzip.decompress(path.read_bytes())).hexdigest() if path.is_file() else None

    def _sealed_dir(self, task: str) -> Path:
        return self.root / "sealed" / _checked(task)

    def _create_once(self, path: Path, content: dict[str, Any]) -> None:
        """Write `path` unless it exists; of two processes creating it at once, exactly one wins."""
        if path.exists():
            return
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)  # mkstemp files are 0600
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(content, f)
            os.link(tmp, path)  # fails if another process linked its file first
        except FileExistsError:
            pass
        finally:
            os.unlink(tmp)


def write_private(path: Path, data: bytes) -> None:
    """Write an owner-only file atomically: readers see the old content or the new, never half."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _checked(name: str) -> str:
    if not _NAME.match(name):
        raise BenchError(f"{name!r} is not a valid task or split name (lower-case letters, digits, _ . -)")
    return name
