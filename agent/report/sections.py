"""Managed sections: the part of a user's file between meshpilot's marker comments, replaced on every run.

Text outside the markers is kept byte for byte. A file without the markers gets the section appended; markers
that do not pair up are refused rather than guessed at.
"""

from __future__ import annotations

from agent.report.inputs import ReportError


def markers(name: str) -> tuple[str, str]:
    return f"<!-- meshpilot:begin {name} -->", f"<!-- meshpilot:end {name} -->"


def replace_section(text: str | None, name: str, body: str, where: str) -> str:
    """`text` with the section `name` holding `body`; `where` names the file in errors."""
    begin, end = markers(name)
    block = f"{begin}\n{body.strip()}\n{end}"
    if not text:
        return block + "\n"
    starts, ends = text.count(begin), text.count(end)
    if starts == 0 and ends == 0:
        separator = "" if text.endswith("\n\n") else ("\n" if text.endswith("\n") else "\n\n")
        return f"{text}{separator}{block}\n"
    first, last = text.find(begin), text.find(end)
    if starts != 1 or ends != 1 or last < first:
        raise ReportError(f"{where}: the meshpilot markers for {name!r} do not pair up; fix them by hand")
    return text[:first] + block + text[last + len(end) :]
