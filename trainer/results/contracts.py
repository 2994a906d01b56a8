"""Result-file contracts: each file meshpilot writes has one schema, checked when it is written and when it is read.

A schema is a TypedDict with `extra="forbid"` (pydantic checks it), so readers keep plain dicts and type checkers
still know every key. A file from another version of meshpilot, or with a bad field, fails in one line that names
the file and the field, never as a KeyError somewhere downstream. Files are replaced whole (write_text), so a
reader sees the old file or the new one, never half of one.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Generic, TypeVar

from pydantic import ConfigDict, TypeAdapter, ValidationError

from trainer.config import ConfigError

T = TypeVar("T")

# Every schema's config: an unknown key is an error (a file from another version, or a typo in a writer).
STRICT = ConfigDict(extra="forbid")


class ContractError(ConfigError):
    """A result file that does not match its schema, said in one line naming the file and the field (a ConfigError,
    so every command shows it as one line, as it shows a bad experiment)."""


class Contract(Generic[T]):
    """The one reader and writer of one file format (`schema`: a TypedDict, or any type pydantic validates)."""

    def __init__(self, name: str, schema: type[T]):
        self.name = name  # how errors name the format when no path is known ("metrics.json")
        self.adapter = TypeAdapter(schema)

    def check(self, data: Any, source: str | Path | None = None) -> T:
        """`data` validated (numbers coerced where JSON is loose: 1 for 1.0), or ContractError."""
        try:
            return self.adapter.validate_python(data)
        except ValidationError as e:
            raise ContractError(_one_line(source or self.name, e)) from None

    def parse(self, text: str, source: str | Path | None = None) -> T:
        try:
            data = json.loads(text)
        except ValueError as e:
            raise ContractError(f"{source or self.name}: not valid JSON: {e}") from None
        return self.check(data, source)

    def read(self, path: Path) -> T | None:
        """The file's content, or None when there is no such file."""
        try:
            text = Path(path).read_text()
        except FileNotFoundError:
            return None
        return self.parse(text, path)

    def write(self, path: Path, data: T) -> T:
        """Check `data` and replace the file with it; returns what was written."""
        checked = self.check(data, path)
        write_json(path, checked)
        return checked

    # JSON lines: one record per line (steps.jsonl).

    def line(self, record: T) -> str:
        return json.dumps(self.check(record)) + "\n"

    def read_lines(self, path: Path) -> list[T]:
        """Every record of a JSON-lines file ([] when there is none); a line being appended is not read."""
        try:
            text = Path(path).read_text()
        except FileNotFoundError:
            return []
        return self.parse_lines(text, path)

    def parse_lines(self, text: str, source: str | Path) -> list[T]:
        """The records of JSON-lines text; a last line without its newline (still being written) is not one."""
        complete = text[: text.rfind("\n") + 1]
        lines = enumerate(complete.splitlines(), 1)
        return [self.parse(line, f"{source} line {i}") for i, line in lines if line.strip()]


def _one_line(source: str | Path, error: ValidationError) -> str:
    """The first problem, as `FILE: FIELD: MESSAGE` (and how many more there are)."""
    first = error.errors()[0]
    field = ".".join(str(part) for part in first["loc"]) or "(the whole file)"
    more = f" (and {error.error_count() - 1} more)" if error.error_count() > 1 else ""
    kind = "unknown field, from another meshpilot version?" if first["type"] == "extra_forbidden" else first["msg"]
    if first["type"] == "missing":
        kind = "missing, from another meshpilot version?"
    return f"{source}: {field}: {kind}{more}"


def _umask() -> int:
    mask = os.umask(0)  # the only way to read it: set and restore, once, before any thread starts
    os.umask(mask)
    return mask


_UMASK = _umask()


def write_json(path: Path, data: Any) -> None:
    """Write JSON so that a reader sees the old file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text(path, json.dumps(data, indent=2, default=str) + "\n")


def write_text(path: Path, text: str) -> None:
    """Replace `path` whole (see write_json), readable as any new file of this user's would be."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)  # mkstemp's 0600 would hide run results from the user's group
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:  # a full disk (ENOSPC), an interrupt: no half-written temporary file is left behind
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
