"""Figures: every number a document shows, read from a result file and entered in a ledger where it is shown.

A Figure is a value at a key path in one of the result files copied beside the report, with the unit that says
how it is printed. Documents get their text only through `Page.show`, which records the figure, so the
ledger (figures.json beside the report) lists each number of each document with the file and key it came
from, and a reader (or a test) can check every one against the files.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import yaml

MISSING = "—"  # printed for a null value: no number, so nothing to trace

# How each unit is printed. Byte counts are shown in MiB, fractions (MFU) in percent.
FORMATS: dict[str, Callable[[Any], str]] = {
    "count": lambda v: f"{int(v):,}",
    "rounded": lambda v: f"{v:,.0f}",  # rates and scales: whole units are precise enough
    "mib": lambda v: f"{v / 2**20:,.1f}",
    "percent": lambda v: f"{100 * v:.1f}",
    "loss": lambda v: f"{v:.4f}",
    "score": lambda v: f"{v:.4f}",
    "ratio": lambda v: f"{v:.2f}",
    "text": lambda v: " ".join(str(v).split()).replace("|", "\\|"),  # one line, safe in a table cell
}
REDUCERS: dict[str, Callable[[list], Any]] = {"max": max}


@dataclass(frozen=True)
class Figure:
    source: str  # repository-relative path of the result file it was read from
    key: tuple[str | int, ...]  # path into that file; "*" maps over a list
    unit: str
    value: Any
    reduce: str | None = None  # applied when the key gives a list (per rank)

    @property
    def text(self) -> str:
        return FORMATS[self.unit](self.value)

    def entry(self) -> dict[str, Any]:
        return {"text": self.text, "source": self.source, "key": list(self.key), "reduce": self.reduce,
                "unit": self.unit}  # fmt: skip


class Sources:
    """The copied result files, parsed, that figures are read from."""

    def __init__(self, files: dict[str, bytes]):
        self._parsed = {path: _parse(path, data) for path, data in files.items() if path.endswith((".json", ".yaml"))}

    def figure(self, source: str, *key: str | int, unit: str, reduce: str | None = None) -> Figure | None:
        """The figure at `key` in `source`; None when the file or key is missing or the value is null."""
        if source not in self._parsed:
            return None
        value = lookup(self._parsed[source], key)
        if value is None:
            return None
        if not isinstance(value, list):
            reduce = None  # "max over ranks" of a single number is that number; the ledger says what was done
        elif reduce and value:
            value = REDUCERS[reduce](value)
        else:
            return None
        return Figure(source, tuple(key), unit, value, reduce)

    def value(self, source: str, *key: str | int) -> Any:
        """A value that is not shown as a figure (a flag, a status word); None when missing."""
        return lookup(self._parsed[source], key) if source in self._parsed else None


def lookup(data: Any, key: tuple) -> Any:
    for i, part in enumerate(key):
        if part == "*":
            return [lookup(item, key[i + 1 :]) for item in data] if isinstance(data, list) else None
        if isinstance(data, dict):
            data = data.get(part)
        elif isinstance(data, list) and isinstance(part, int) and -len(data) <= part < len(data):
            data = data[part]
        else:
            return None
    return data


class Ledger:
    """The figures each document shows, in the order it shows them."""

    def __init__(self):
        self.documents: dict[str, list[dict[str, Any]]] = {}

    def page(self, document: str) -> Page:
        return Page(self.documents.setdefault(document, []))

    def to_json(self) -> bytes:
        """figures.json: one line per figure, so a diff between two reports shows which figures changed."""
        note = "Every number in these documents, with the result file and key it was read from."
        documents = ",\n".join(
            f"  {json.dumps(name)}: [\n" + ",\n".join(f"   {json.dumps(e)}" for e in entries) + "\n  ]"
            for name, entries in self.documents.items()
        )
        return f'{{\n "note": {json.dumps(note)},\n "documents": {{\n{documents}\n }}\n}}\n'.encode()


class Page:
    """What one document shows: each figure shown is entered once per time it is shown."""

    def __init__(self, entries: list[dict[str, Any]]):
        self._entries = entries

    def show(self, figure: Figure | None) -> str:
        if figure is None:
            return MISSING
        self._entries.append(figure.entry())
        return figure.text


def _parse(path: str, data: bytes) -> Any:
    return json.loads(data) if path.endswith(".json") else yaml.safe_load(data)
