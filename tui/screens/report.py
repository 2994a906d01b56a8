"""Report preview: the reports of the repository's sweeps, rendered."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Header, Markdown, OptionList
from textual.widgets.option_list import Option

from tui.reports import Report, find_reports, read_report

if TYPE_CHECKING:
    from tui.host import Host

NONE_YET = """# No report yet

A report is written from a sweep. Start one with ctrl+s (or ask: `/sweep trials=4`), then ask for its report:
`/report sweep=sweeps/NAME`. It is committed on a branch `meshpilot/...` and shown here."""


class ReportScreen(Screen):
    app: Host
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "app.pop_screen", "Back")]

    def __init__(self) -> None:
        super().__init__()
        self.reports: list[Report] = []
        self.chosen: Report | None = None  # the report last selected

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal():
            yield OptionList(id="reports")
            with VerticalScroll(id="report-scroll"):
                yield Markdown("Loading…", id="report")
        yield Footer()

    def on_mount(self) -> None:
        self.load()

    @work(thread=True, exclusive=True, group="reports")
    def load(self) -> None:
        reports = find_reports(self.app.repo)
        first = read_report(self.app.repo, reports[0]) if reports else NONE_YET
        self.app.call_from_thread(self._loaded, reports, first)

    def _loaded(self, reports: list[Report], first: str) -> None:
        self.reports = reports
        listing = self.query_one("#reports", OptionList)
        listing.add_options(Option(f"{r.name}\n{r.branch or 'work tree'}", id=str(i)) for i, r in enumerate(reports))
        listing.display = bool(reports)
        self.query_one("#report", Markdown).update(first)
        if reports:
            listing.highlighted = 0
            listing.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.chosen = self.reports[int(event.option.id)]
        self.show(self.chosen)

    @work(thread=True, exclusive=True, group="report")
    def show(self, report: Report) -> None:
        text = read_report(self.app.repo, report)
        self.app.call_from_thread(self._shown, report, text)

    def _shown(self, report: Report, text: str) -> None:
        if report == self.chosen:  # not one chosen before it that took longer to read (its thread ran on)
            self.query_one("#report", Markdown).update(text)
