"""Markdown pieces shared by the documents: tables, and the command that reproduces a trial."""

from __future__ import annotations

import shlex

from agent.report.context import Context
from agent.report.figures import Page
from agent.report.inputs import Trial
from agent.report.prose import Part, render


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def yes_no(value: object) -> str:
    return {True: "yes", False: "no"}.get(value, "—") if isinstance(value, bool) or value is None else str(value)


def split_cell(ctx: Context, page: Page, source: str, task: int) -> str:
    """Which split of a task a benchmark row scored (a task has a row per split: dev and test look alike without
    it). A private task's split name is withheld with the rest of it (see inputs.sanitize_bench)."""
    if ctx.sources.value(source, "tasks", task, "private"):
        return "withheld"
    return page.show(ctx.sources.figure(source, "tasks", task, "split", unit="text"))


def train_command(ctx: Context, trial: Trial, page: Page) -> str | None:
    """`meshpilot train` with the processes, layout and steps of the trial, as its config.yaml says, and the overrides
    that made it, as its sweep recorded them."""
    source = ctx.run_file(trial, "config.yaml")
    config = ctx.sources.value(source, "hardware")
    if config is None:
        return None
    figure = ctx.sources.figure
    parts: list[Part] = [
        f"meshpilot train {ctx.experiment} --nproc ",
        figure(source, "hardware", "devices", unit="count"),
    ]
    if (ctx.sources.value(source, "hardware", "nodes") or 1) > 1:
        parts += [
            " --nnodes ",
            figure(source, "hardware", "nodes", unit="count"),
            " --node-rank R --rdzv-endpoint HOST:PORT",
        ]
    layout = ctx.degrees(source, ("layout",))
    if layout:
        parts += [" --layout ", *layout]
    parts += [" --steps ", figure(source, "train", "steps", unit="count")]
    # The trial's own overrides, exactly as its sweep ran it (TrialRecord.settings, copied into summary.json).
    settings = ctx.sources.value(ctx.summary, "trials", trial.index, "settings") or []
    for index, setting in enumerate(settings):
        quote = "" if shlex.quote(setting) == setting else "'"  # a list or a string with spaces: one argument
        parts += [f" --set {quote}", ctx.record(trial, "settings", index, unit="text"), quote]
    return render(parts, page)
