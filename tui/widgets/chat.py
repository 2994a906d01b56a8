"""The entries of the conversation: the user's requests, tool calls and their results, replies, notices."""

from __future__ import annotations

from typing import Any

from markdown_it import MarkdownIt
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.content import Content
from textual.widgets import Markdown, Static
from textual.widgets.markdown import MarkdownStream

from trainer.results.schemas import FAILED_STATUSES

ARGUMENT_WIDTH = 60  # characters of a tool call's arguments shown in its line


class UserEntry(Static):
    def __init__(self, text: str):
        super().__init__(Content(text), classes="entry")
        self.border_title = "you"


class ToolEntry(Static):
    """One line per tool call and per result."""

    @classmethod
    def call(cls, name: str, args: dict[str, Any]) -> ToolEntry:
        arguments = ", ".join(f"{k}={v!r}" for k, v in args.items())
        if len(arguments) > ARGUMENT_WIDTH:
            arguments = arguments[: ARGUMENT_WIDTH - 1] + "…"
        return cls(Content.assemble(("→ ", "bold"), (name, "bold"), f"({arguments})"), classes="tool")

    @classmethod
    def result(cls, name: str, result: Any, error: bool) -> ToolEntry:
        outcome, bad = describe_result(result, error)
        line = Content.assemble(("← ", "bold"), (name, "bold"), ": ", outcome)
        return cls(line, classes="tool -error" if bad else "tool")


def describe_result(result: Any, error: bool) -> tuple[str, bool]:
    """(what a tool result says in a few words, whether it went wrong)."""
    found = result if isinstance(result, dict) else {}
    if found.get("rejected"):
        return f"rejected: {found.get('reason')}", True
    if error:
        return str(found.get("error") or result).removeprefix("error: ").splitlines()[0], True
    state = found.get("state") or found.get("status")
    parts = [f"{state}" if isinstance(state, str) else "done"]
    if found.get("source"):
        parts.append(f"(source: {found['source']})")
    return " ".join(parts), state in FAILED_STATUSES


class ReplyEntry(Vertical):
    """A reply of the agent: Markdown streamed as it arrives, then replaced by the checked reply."""

    def __init__(self, text: str = ""):
        super().__init__(classes="entry reply")
        self.border_title = "meshpilot"
        self._initial = text
        self._stream: MarkdownStream | None = None

    def compose(self) -> ComposeResult:
        yield Markdown(self._initial, parser_factory=_keep_line_breaks)
        yield Static(classes="unverified")
        yield Static(classes="sources")

    @property
    def markdown(self) -> Markdown:
        return self.query_one(Markdown)

    async def write(self, text: str) -> None:
        if self._stream is None:
            self._stream = Markdown.get_stream(self.markdown)
        await self._stream.write(text)

    async def finish(self, text: str, sources: list[str], unverified: list[str]) -> None:
        """Show the checked reply, with the files its figures come from and any figure no tool result holds."""
        if self._stream is not None:
            await self._stream.stop()
            self._stream = None
        await self.markdown.update(text)
        footnotes = {"unverified": ("unverified, in no tool result", unverified), "sources": ("sources", sources)}
        for name, (label, items) in footnotes.items():
            line = self.query_one(f".{name}", Static)
            line.update(Content(f"{label}: {', '.join(items)}"))
            line.display = bool(items)

    async def close(self) -> None:
        if self._stream is not None:
            await self._stream.stop()
            self._stream = None


def _keep_line_breaks() -> MarkdownIt:
    """Markdown that keeps single line breaks (replies put one figure or run per line) as hard breaks."""
    parser = MarkdownIt("gfm-like")

    def hard_breaks(state) -> None:
        for token in state.tokens:
            for child in token.children or ():
                if child.type == "softbreak":
                    child.type = "hardbreak"

    parser.core.ruler.push("hard_breaks", hard_breaks)
    return parser


class Notice(Static):
    """A line from the UI itself: an approval given, a sweep started, an error."""

    def __init__(self, text: str, kind: str = "info"):
        super().__init__(Content(text), classes=f"notice -{kind}")
