"""Help: the keys, the slash commands, and how approvals work."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Header, Markdown

from agent.approvals import DEFAULT_APPROVE_BELOW
from tui.commands import slash_commands

if TYPE_CHECKING:
    from tui.host import Host

KEYS = [
    ("Enter", "send the request"),
    ("ctrl+j, alt+enter", "new line in the prompt"),
    ("↑ / ↓", "earlier requests (on the first or last line of the prompt)"),
    ("/ then tab", "complete a slash command"),
    ("ctrl+g", "decide the approval the conversation waits for"),
    ("ctrl+r", "runs and trials with live loss and throughput charts"),
    ("ctrl+s", "start a sweep in the background and keep chatting"),
    ("ctrl+o", "preview the sweep reports"),
    ("ctrl+l", "benchmark leaderboard"),
    ("ctrl+t", "conversations: resume an earlier one"),
    ("ctrl+n", "new conversation"),
    ("mouse drag, ctrl+c", "select text, copy it"),
    ("ctrl+p", "command palette"),
    ("esc", "back"),
    ("ctrl+q", "quit: running jobs are cancelled or left running, as you choose"),
]


class HelpScreen(Screen):
    app: Host
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "app.pop_screen", "Back")]

    def compose(self) -> ComposeResult:
        yield Header()
        with VerticalScroll():
            yield Markdown(help_text(self.app.llm_description))
        yield Footer()


def help_text(llm: str) -> str:
    keys = "\n".join(f"| {key} | {what} |" for key, what in KEYS)
    commands = "\n".join(f"| `{c.usage}` | {c.help} |" for c in slash_commands())
    return f"""# meshpilot chat

You are talking to {llm}. It plans layouts, launches runs, reads their results and writes reports; every
number it states names the file it comes from, and figures found in no tool result are flagged.

## Keys

| key | what it does |
|---|---|
{keys}

## Slash commands

| command | what it does |
|---|---|
{commands}

Plain requests work too: "find the fastest layout for this model on 8 GPUs", "why did FSDP win?".

## Approvals

Launches predicted to cost more device-hours than the threshold (`--approve-below`, default
{DEFAULT_APPROVE_BELOW:g}), pushes and pull requests wait for you: approve, edit the arguments (JSON), or reject
with a reason the agent reads.

Runs go on in the background; quitting asks whether to cancel them or leave them running. Reopen a conversation
with `meshpilot chat --thread ID` or ctrl+t.
"""
