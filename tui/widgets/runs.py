"""The runs table and the charts of one run, both redrawn from tui.runs.RunInfo snapshots."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.containers import Horizontal
from textual_plotext import PlotextPlot

from tui.runs import RunInfo, StepMemory
from tui.widgets.table import Table

FULL = ("run", "layout", "status", "step", "tokens/s", "peak mem", "loss")
COMPACT = ("run", "status", "step", "loss")
# Rich styles: DataTable measures rich Text, not Textual Content, when it sizes its columns.
STATUS_STYLES = {
    "running": "bold cyan",
    "queued": "cyan",
    "starting": "cyan",
    "ok": "bold green",
    "cancelled": "yellow",
    "pruned": "yellow",
}


class RunsTable(Table):
    """Runs and sweep trials, one row each, keyed by run directory; updates keep the cursor where it was."""

    def __init__(self, compact: bool = False, *, id: str | None = None):
        super().__init__(cursor_type="row", zebra_stripes=True, id=id)
        self.columns_shown = COMPACT if compact else FULL
        self.runs: dict[str, RunInfo] = {}

    def on_mount(self) -> None:
        for name in self.columns_shown:
            self.add_column(name, key=name)

    def show(self, runs: Sequence[RunInfo]) -> None:
        wanted = {run.key: run for run in runs}
        if list(wanted) != list(self.runs):  # runs came, went or changed places: rebuild, keeping the cursor
            chosen = self.selected()
            self.clear()
            for key, run in wanted.items():
                self.add_row(*self._cells(run), key=key)
            if chosen is not None and chosen.key in wanted:
                self.move_cursor(row=list(wanted).index(chosen.key))
        else:
            for key, run in wanted.items():
                if self.runs[key] != run:
                    for column, cell in zip(self.columns_shown, self._cells(run), strict=True):
                        self.update_cell(key, column, cell)
        self.runs = wanted

    def selected(self) -> RunInfo | None:
        if not self.runs or self.cursor_row < 0 or self.cursor_row >= self.row_count:
            return None
        key = self.coordinate_to_cell_key((self.cursor_row, 0)).row_key.value
        return self.runs.get(key)

    def _cells(self, run: RunInfo) -> list[Text]:
        values = {
            "run": run.name,
            "layout": run.layout,
            "status": Text(run.status, STATUS_STYLES.get(run.status, "bold red")),
            "step": f"{run.step}/{run.steps}" if run.steps else str(run.step or "—"),
            "tokens/s": f"{run.tokens_per_s:,.0f}" if run.tokens_per_s else "—",
            "peak mem": format_bytes(run.peak_mem_bytes),
            "loss": f"{run.loss:.4f}" if run.loss is not None else "—",
        }
        return [value if isinstance(value, Text) else Text(value) for value in (values[n] for n in self.columns_shown)]


def format_bytes(value: int | None) -> str:
    if value is None:
        return "—"
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if value >= size:
            return f"{value / size:.1f} {unit}"
    return f"{value} B"


class RunCharts(Horizontal):
    """Loss and tokens/s by step of one run, its memory through the step it measured, and for a mixture of experts
    its routers by step (shown only for such a run: a dense run's view keeps its three charts)."""

    run: RunInfo | None = None  # the run drawn

    def compose(self):
        yield PlotextPlot(id="loss-chart")
        yield PlotextPlot(id="throughput-chart")
        yield PlotextPlot(id="memory-chart")
        yield PlotextPlot(id="router-chart")

    def on_mount(self) -> None:
        self.show(None)

    def show(self, run: RunInfo | None) -> None:
        self.run = run
        loss, throughput = self.query_one("#loss-chart", PlotextPlot), self.query_one("#throughput-chart", PlotextPlot)
        name = run.name if run else "no run"
        _draw(loss, f"loss · {name}", run.losses if run else ())
        _draw(throughput, f"tokens/s · {name}", run.throughput if run else ())
        _draw_memory(self.query_one("#memory-chart", PlotextPlot), name, run.memory if run else None)
        router = self.query_one("#router-chart", PlotextPlot)
        router.display = bool(run and (run.aux_losses or run.expert_load))
        if router.display:
            _draw_router(router, name, run)


def _draw(plot: PlotextPlot, title: str, points: Sequence[tuple[int, float]]) -> None:
    plt = plot.plt
    plt.clear_data()
    plt.clear_figure()
    plt.title(title)
    plt.xlabel("step")
    if points:
        steps, values = zip(*points, strict=True)
        plt.plot(list(steps), list(values), marker="braille")
        if len(steps) <= 10:  # a few steps: label each one, not fractions of a step
            plt.xticks(sorted(set(steps)))
    plot.refresh()


def _draw_router(plot: PlotextPlot, name: str, run: RunInfo) -> None:
    """The load-balancing loss (before its coefficient) and the worst layer's most loaded expert against the mean,
    by step. Evenly spread tokens make the loss the router's top-k and the ratio 1, so one axis serves both."""
    plt = plot.plt
    plt.clear_data()
    plt.clear_figure()
    plt.title(f"router · {name}")
    plt.xlabel("step")
    steps = set()
    for label, points in (("aux loss", run.aux_losses), ("load max/mean", run.expert_load)):
        if points:
            x, y = zip(*points, strict=True)
            plt.plot(list(x), list(y), marker="braille", label=label)
            steps.update(x)
    if len(steps) <= 10:  # a few steps: label each one, as the loss chart does
        plt.xticks(sorted(steps))
    plot.refresh()


MEMORY_LABELS = ("params", "grads", "optim", "activ", "temp")  # trainer.results.schemas.TIMELINE_CATEGORIES, shortened


def _draw_memory(plot: PlotextPlot, name: str, memory: StepMemory | None) -> None:
    """A stacked bar per phase boundary of the measured step (MiB), then the predicted categories ("P") with a
    line at their sum: what the memory model expected at the peak."""
    plt = plot.plt
    plt.clear_data()
    plt.clear_figure()
    if memory is None:
        plt.title(f"memory · {name}")  # memory.json comes when the run ends
        plot.refresh()
        return
    plt.title(f"memory, step {memory.step} · {name}")
    plt.ylabel("MiB")
    shown = [i for i, values in enumerate(memory.measured) if any(values) or memory.predicted[i]]
    bars = [[b / 2**20 for b in (*memory.measured[i], memory.predicted[i])] for i in shown]
    names = [*map(phase_label, memory.phases), "P"]
    plt.stacked_bar(names, bars, labels=[MEMORY_LABELS[i] for i in shown])
    plt.xticks(*tick_labels(names))
    plt.hline(sum(memory.predicted) / 2**20)
    plot.refresh()


def tick_labels(names: Sequence[str], most: int = 8) -> tuple[list[int], list[str]]:
    """Bar positions (from 1) and names, thinned to every k-th bar plus the prediction so no two overlap: plotext
    drops overlapping labels in an order set by string hashing, which would change the screen from run to run."""
    every = -(-len(names) // most)
    kept = [i for i in range(len(names)) if i % every == 0 or i == len(names) - 1]
    return [i + 1 for i in kept], [names[i] for i in kept]


def phase_label(phase: str) -> str:
    """A phase in two or three characters: s(tart), F1 and B1 (a micro-batch's forward and backward; F2.1 for
    stage 2's), o(ptimizer), z(ero_grad)."""
    kind, _, rest = phase.partition(" ")
    if kind in ("forward", "backward"):
        stage, _, micro_batch = rest.rpartition("mb")
        stage = stage.removeprefix("stage ").strip()
        return kind[0].upper() + (f"{stage}.{micro_batch}" if stage else micro_batch)
    return phase[:1]
