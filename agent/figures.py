"""Numbers in replies come from result files: find each number of a reply among the figures of the tool results.

Every tool result is JSON with a "source" (the file its figures were read from; nested results may name their
own). A number in a reply is verified when it equals, to the precision it is written with, a figure of some
tool result or a number the user wrote. Verified numbers name their file: the reply gets a "Sources:" line for
the files it does not already name. Text in backticks is quoted (a command to type, a file's lines), not stated,
and is left alone. Unverified numbers are kept and flagged with [?] rather than removed:
deleting them would silently change the sentence ("about 2x faster" becomes "about x faster"), while a flag
shows the reader exactly which figure to distrust.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from agent.understanding.grammar import SLASH_COMMANDS

FLAG = "[?]"
FOOTNOTE = f"{FLAG}: not found in any result file; a guess of the language model, not a measurement."
# A number standing on its own: not part of a name, path or identifier (FSDP2, step_00000003, runs/a-1).
_NUMBER = re.compile(
    r"(?<![\w./\-])(?P<number>-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?)"
    r"(?P<unit>\s?(?:%|[KMGT]i?B\b|[kKMx]\b|×))?(?![\w/])"
)
# Quoted code, and one of the offline planner's commands quoted in a question ("Do you want me to run (/run
# nproc=2, layout=tp=2)?", "Do it now: /cancel run=runs/r1?"): its numbers are the call's arguments, not figures
# a result could back.
_COMMANDS = "|".join(SLASH_COMMANDS)
_CODE = re.compile(rf"```.*?```|`[^`\n]*`|(?<![\w./])/(?:{_COMMANDS})\b[^()?\n]*", re.DOTALL)
_UNITS = {"%": 0.01, "x": 1.0, "×": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}
_UNITS |= {"KiB": 2.0**10, "MiB": 2.0**20, "GiB": 2.0**30, "TiB": 2.0**40}


@dataclass(frozen=True)
class Figure:
    value: float
    source: str | None  # None: a number the user wrote, or one of a result that names no file (an error)


@dataclass(frozen=True)
class Checked:
    text: str  # the reply, flagged and with its sources named
    sources: list[str]  # files the reply's numbers came from
    unverified: list[str]  # numbers found nowhere, as written


def check_reply(text: str, results: list[Any], user_texts: list[str]) -> Checked:
    """Flag the numbers of `text` found in no tool result and name the files of the others."""
    figures = [f for result in reversed(results) for f in figures_of(result)]  # the latest result wins a tie
    figures += [Figure(n, None) for t in user_texts for n, _ in _numbers(t)]
    sources: list[str] = []
    unverified: list[str] = []
    pieces, last = [], 0
    quoted = [m.span() for m in _CODE.finditer(text)]
    for match in _NUMBER.finditer(text):
        if _is_list_marker(text, match) or any(start <= match.start() < end for start, end in quoted):
            continue
        written = _decimal(match.group("number"))
        if written is None:  # an identifier that reads as a number (a commit id)
            continue
        found = _find(written, match.group("unit"), figures)
        if found is None:
            unverified.append(match.group(0).strip())
            pieces += [text[last : match.end()], f" {FLAG}"]
            last = match.end()
        elif found.source and found.source not in sources:
            sources.append(found.source)
    checked = "".join([*pieces, text[last:]])
    unnamed = [s for s in sources if s not in checked]
    if unnamed:
        checked += f"\n\nSources: {', '.join(unnamed)}"
    if unverified:
        checked += f"\n\n{FOOTNOTE}"
    return Checked(checked, sources, unverified)


def figures_of(result: Any, source: str | None = None) -> Iterator[Figure]:
    """Every number in a tool result (JSON text or already parsed), with the file it came from. Numbers inside
    text count too (a layout "dp_shard=2,tp=2", a file's lines): they were read, not made up."""
    if isinstance(result, str):
        try:
            result = json.loads(result)
        except ValueError:
            yield from (Figure(n, source) for n, _ in _numbers(result))
            return
        if isinstance(result, str):  # JSON of a bare string
            yield from (Figure(n, source) for n, _ in _numbers(result))
            return
    if isinstance(result, dict):
        source = result.get("source") if isinstance(result.get("source"), str) else source
        for key, value in result.items():
            if key != "source":
                yield from figures_of(value, source)
    elif isinstance(result, list):
        for value in result:
            yield from figures_of(value, source)
    elif isinstance(result, int | float) and not isinstance(result, bool):
        yield Figure(float(result), source)


def _numbers(text: str) -> Iterator[tuple[float, Decimal]]:
    for match in _NUMBER.finditer(text):
        written = _decimal(match.group("number"))
        if written is not None:
            yield float(written), written


# Written exponents beyond this are no figures but identifiers: a commit id such as 70e9123 reads as 70 x 10^9123,
# which no float holds (and 10.0 ** 9123, the precision it is written with, overflows).
_MAX_EXPONENT = 300


def _decimal(number: str) -> Decimal | None:
    try:
        written = Decimal(number.replace(",", ""))
    except InvalidOperation:
        return None
    if abs(written.adjusted()) > _MAX_EXPONENT or abs(written.as_tuple().exponent) > _MAX_EXPONENT:
        return None
    return written


def _is_list_marker(text: str, match: re.Match) -> bool:
    """`1.` or `2)` opening a line numbers a list item; it is no figure."""
    line_start = text.rfind("\n", 0, match.start()) + 1
    opens_line = not text[line_start : match.start()].strip()
    return opens_line and text[match.end() : match.end() + 2] in (". ", ") ")


def _find(written: Decimal, unit: str | None, figures: list[Figure]) -> Figure | None:
    """The figure a number shows, rounded to the digits it is written with (and scaled by its unit)."""
    value = float(written)
    half_ulp = 0.5 * 10.0 ** written.as_tuple().exponent
    unit = (unit or "").strip()
    # The figure in the unit written first (peak_gib 0.5 for "0.5 GiB", 45 for "45%"), then converted to it
    # (bytes to GiB, 0.45 to 45%): a conversion must not beat a figure that matches as it is.
    scales = [1.0, 100.0 if unit == "%" else 1.0 / _UNITS.get(unit, 1.0)]
    for scale in scales:
        for figure in figures:
            shown = figure.value * scale
            if abs(shown - value) <= half_ulp + 1e-9 * abs(shown):
                return figure
    return None
