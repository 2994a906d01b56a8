"""The DataTable every screen uses: Textual's, repainted whole once new rows have been measured."""

from __future__ import annotations

from collections.abc import Iterable

from textual.widgets import DataTable
from textual.widgets.data_table import RowKey


class Table(DataTable):
    """Textual's DataTable caches each drawn line under a count that adding a row bumps, but measuring the new rows
    (column and row-label widths, done later, when the table is idle) does not. A line drawn in between keeps the
    old widths for good: seen on a loaded machine as one row shifted against the others. So the caches go, and the
    table is repainted, every time new rows have been measured."""

    def _update_dimensions(self, new_rows: Iterable[RowKey]) -> None:
        super()._update_dimensions(new_rows)
        self._clear_caches()
        self.refresh()
