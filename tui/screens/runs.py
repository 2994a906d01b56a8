"""The runs dashboard: every run and sweep trial, and live charts of the one under the cursor."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Static

from tui.runs import RunInfo
from tui.widgets.runs import RunCharts, RunsTable

if TYPE_CHECKING:
    from tui.host import Host


class RunsScreen(Screen):
    app: Host
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "app.pop_screen", "Back")]

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(id="runs-caption")
        yield RunsTable(id="runs")
        yield RunCharts(id="charts")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(RunsTable).focus()
        self.watch(self.app, "runs", self._show)

    def _show(self, runs: tuple[RunInfo, ...]) -> None:
        active = sum(run.active for run in runs)
        caption = f"{len(runs)} runs, {active} going on" if runs else "No runs yet: ask the agent, e.g. /run steps=20"
        self.query_one("#runs-caption", Static).update(caption)
        self.query_one(RunsTable).show(runs)
        self._chart()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._chart()

    def _chart(self) -> None:
        run, charts = self.query_one(RunsTable).selected(), self.query_one(RunCharts)
        if run != charts.run:  # new steps, or another row
            charts.show(run)
