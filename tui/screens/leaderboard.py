"""The benchmark leaderboard (evalsuite): public dev-split scores, or private test-split scores."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.content import Content
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Static

from tui.widgets.table import Table

CAPTIONS = {
    False: "Public leaderboard: dev-split scores (p: private test-split scores)",
    True: "Private leaderboard: test-split scores, aggregates only (p: public dev-split scores)",
}


class LeaderboardScreen(Screen):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("p", "toggle", "Public/private"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.private = False

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(id="leaderboard-caption")
        yield Table(id="leaderboard", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(DataTable).focus()
        self.load(self.private)

    def action_toggle(self) -> None:
        self.private = not self.private
        self.load(self.private)

    @work(thread=True, exclusive=True)
    def load(self, private: bool) -> None:
        # imported here, in the worker thread: evalsuite.api loads torch and transformers (seconds), which opening
        # the UI must not wait for
        from evalsuite.api import leaderboard
        from evalsuite.errors import BenchError

        try:
            rows, problem = leaderboard(None, private), None
        except BenchError as e:
            rows, problem = [], str(e)
        except Exception as e:  # a malformed submission must not take the whole UI down
            rows, problem = [], f"{type(e).__name__}: {e}"
        self.app.call_from_thread(self._show, private, rows, problem)

    def _show(self, private: bool, rows: list[dict[str, Any]], problem: str | None) -> None:
        if private != self.private:  # toggled again since: a newer load is on its way (a thread runs on when cancelled)
            return
        caption = CAPTIONS[private] if problem is None else f"The leaderboard cannot be read: {problem}"
        if problem is None and not rows:
            caption += "\nNo submissions yet: benchmark a checkpoint, e.g. /bench model=runs/NAME/checkpoint"
        self.query_one("#leaderboard-caption", Static).update(Content(caption))
        table = self.query_one(DataTable)
        table.clear(columns=True)
        tasks = sorted({name for row in rows for name in row["tasks"]})
        table.add_columns("#", "model", "suite", "score", *tasks, "contamination")
        for rank, row in enumerate(rows, 1):
            cells = [str(rank), row["model"], f"{row['suite']} {row['suite_version']}", _number(row["score"])]
            cells += [_main_metric(row["tasks"].get(task)) for task in tasks]
            cells.append(", ".join(f"{name} flagged" for name in row["flagged"]) or "clean")
            table.add_row(*(Text(cell) for cell in cells), key=str(row["id"]))


def _main_metric(task: dict[str, Any] | None) -> str:
    """A task's first metric, the one its score counts."""
    if task is None:
        return "—"
    name, value = next(iter(task["metrics"].items()))
    return f"{name} {_number(value)}"


def _number(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"
