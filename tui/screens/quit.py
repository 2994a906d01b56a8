"""Asked on quitting while jobs run: cancel them, or leave them running (they do not need the UI)."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Button, Footer, Label, Static


class QuitScreen(ModalScreen[str | None]):
    """Dismisses with "cancel", "detach" or None (stay)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("c", "choose('cancel')", "Cancel jobs and quit"),
        Binding("d", "choose('detach')", "Detach and quit"),
        Binding("escape", "choose(None)", "Stay"),
    ]

    def __init__(self, jobs: list[str], busy_threads: list[str]):
        super().__init__()
        self.jobs = jobs
        self.busy_threads = busy_threads

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label("Quit meshpilot?", classes="title")
            if self.jobs:
                yield Static("These go on in the background unless you cancel them:")
                yield Static(Content("\n".join(f"  • {job}" for job in self.jobs)), id="jobs")
            for thread in self.busy_threads:
                yield Static(
                    Content(
                        f"The agent is working on conversation {thread}; reopen it "
                        f"(meshpilot chat --thread {thread}) and it finishes the step."
                    ),
                    classes="dim",
                )
            with Horizontal(id="buttons"):
                if self.jobs:
                    yield Button("Cancel jobs and quit", id="cancel", variant="error")
                yield Button("Detach and quit" if self.jobs else "Quit", id="detach", variant="primary")
                yield Button("Stay", id="stay")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#detach", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.action_choose(None if event.button.id == "stay" else event.button.id)

    def action_choose(self, choice: str | None) -> None:
        if choice == "cancel" and not self.jobs:
            return
        self.dismiss(choice)
