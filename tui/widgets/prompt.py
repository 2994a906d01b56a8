"""The prompt: multi-line input with history and slash-command completion.

Enter sends; shift+enter (where the terminal reports it), alt+enter or ctrl+j start a new line. Up on the first
line and down on the last walk through earlier requests. Typing a slash shows the matching commands above the
prompt: up and down choose, tab completes.
"""

from __future__ import annotations

from typing import ClassVar

from textual import events
from textual.binding import Binding, BindingType
from textual.content import Content
from textual.message import Message
from textual.widgets import OptionList, TextArea
from textual.widgets.option_list import Option

from tui.commands import SlashCommand, complete


class CommandHints(OptionList):
    """The slash commands the prompt's text may become."""

    can_focus = False  # the prompt keeps the focus; it moves the highlight

    def show(self, commands: list[SlashCommand]) -> None:
        self.clear_options()
        self.add_options(
            Option(Content.assemble((c.usage, "bold"), "  ", (c.help, "dim")), id=c.name) for c in commands
        )
        self.display = bool(commands)
        if commands:
            self.highlighted = 0

    def chosen(self) -> str | None:
        if not self.display or self.highlighted is None:
            return None
        return self.get_option_at_index(self.highlighted).id


class PromptArea(TextArea):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("shift+enter,alt+enter,ctrl+j", "newline", "New line", show=False),
        Binding("tab", "complete", "Complete", show=False),
        Binding("escape", "hide_hints", "Hide hints", show=False),
    ]

    class Submitted(Message):
        def __init__(self, text: str):
            super().__init__()
            self.text = text

    def __init__(self, hints: CommandHints, *, id: str | None = None):
        super().__init__(
            soft_wrap=True, tab_behavior="focus", show_line_numbers=False, compact=True, id=id,
            placeholder="Ask meshpilot, or type / for commands",
        )  # fmt: skip
        self.hints = hints
        self.sent: list[str] = []
        self._position: int | None = None  # index into history while walking it
        self._draft = ""  # what was typed before walking the history

    def remember(self, text: str) -> None:
        if text and (not self.sent or self.sent[-1] != text):
            self.sent.append(text)
        self._position = None

    async def _on_key(self, event: events.Key) -> None:
        if event.key == "enter":  # TextArea would insert a newline
            event.stop()
            event.prevent_default()
            self.action_submit()
            return
        await super()._on_key(event)

    def action_submit(self) -> None:
        text = self.text.strip()
        if not text:
            return
        self.remember(text)
        self.clear()
        self.post_message(self.Submitted(text))

    def action_newline(self) -> None:
        self.insert("\n")

    def action_complete(self) -> None:
        name = self.hints.chosen()
        if name is None:
            self.screen.focus_next()
            return
        self.text = f"/{name} "
        self.move_cursor(self.document.end)

    def action_hide_hints(self) -> None:
        self.hints.display = False

    def action_cursor_up(self, select: bool = False) -> None:
        if self.hints.display and not select:
            self.hints.action_cursor_up()
        elif self.cursor_location[0] == 0 and not select and self.sent:
            self._walk(-1)
        else:
            super().action_cursor_up(select)

    def action_cursor_down(self, select: bool = False) -> None:
        if self.hints.display and not select:
            self.hints.action_cursor_down()
        elif self.cursor_location[0] == self.document.line_count - 1 and not select and self._position is not None:
            self._walk(+1)
        else:
            super().action_cursor_down(select)

    def _walk(self, direction: int) -> None:
        if self._position is None:
            self._draft, self._position = self.text, len(self.sent)
        self._position = max(0, min(len(self.sent), self._position + direction))
        self.text = self.sent[self._position] if self._position < len(self.sent) else self._draft
        if self._position == len(self.sent):
            self._position = None
        self.move_cursor(self.document.end)
        self.hints.display = False

    def _on_text_area_changed(self, event: TextArea.Changed) -> None:
        if self._position is None:
            self.hints.show(complete(self.text))
