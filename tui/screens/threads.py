"""The conversations of this repository (the agent's checkpointer): resume one, or start a new one."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Static

from tui.conversation import requests
from tui.widgets.table import Table

if TYPE_CHECKING:
    from tui.host import Host

FIRST_REQUEST_WIDTH = 60


class ThreadsScreen(Screen[str | None]):
    """Dismisses with the conversation to open, "" for a new one, or None."""

    app: Host
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss(None)", "Back"),
        Binding("n", "dismiss('')", "New conversation"),
    ]

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("Loading conversations…", id="threads-caption")
        yield Table(id="threads", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("conversation", "state", "requests", "first request")
        table.focus()
        self.load()

    @work(thread=True, exclusive=True)
    def load(self) -> None:
        agent = self.app.agent
        rows = []
        for thread in agent.threads():
            asked = requests(agent.messages(thread))
            first = asked[0].splitlines()[0] if asked else ""
            if len(first) > FIRST_REQUEST_WIDTH:
                first = first[: FIRST_REQUEST_WIDTH - 1] + "…"
            rows.append((thread, agent.state(thread), str(len(asked)), first))
        self.app.call_from_thread(self._show, rows)

    def _show(self, rows: list[tuple[str, str, str, str]]) -> None:
        current = self.app.current_thread()
        count = f"{len(rows)} conversation{'s' if len(rows) != 1 else ''}"
        caption = f"{count}, most recent first; Enter opens one" if rows else "No conversations yet"
        self.query_one("#threads-caption", Static).update(caption)
        table = self.query_one(DataTable)
        for row in rows:
            table.add_row(*(Text(cell) for cell in row), key=row[0], label="▶" if row[0] == current else "")

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.dismiss(event.row_key.value)
