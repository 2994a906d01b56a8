"""Markdown pieces shared by the documents: tables, and the command that reproduces a trial."""

from __future__ import annotations

from agent.report.context import Context
from agent.report.figures import Page
from agent.report.inputs import Trial
from agent.report.prose import Part, render

_NOT_CONFIG_KEYS = ("layout", "grad_accum")  # sweep parameters that are not experiment keys


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
    """`meshpilot train` with the processes, layout, steps and swept keys of the trial, as its config.yaml says."""
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
    for section, key in _swept_keys(ctx, trial):
        value = ctx.sources.value(source, section, key)
        shown: Part = str(value).lower() if isinstance(value, bool) else figure(source, section, key, unit="text")
        parts += [f" --set {section}.{key}=", shown]
    return render(parts, page)


def _swept_keys(ctx: Context, trial: Trial) -> list[tuple[str, str]]:
    """(section, key) of each swept parameter that is a key of the experiment file."""
    params = ctx.sources.value(ctx.summary, "trials", trial.index, "params") or {}
    config = ctx.sources.value(ctx.run_file(trial, "config.yaml")) or {}
    found = []
    for name in params:
        if name in _NOT_CONFIG_KEYS:
            continue
        if "." in name:  # the sweep names keys outside train by their section: data.seq_len
            section, key = name.split(".", 1)
            sections = [section] if key in (config.get(section) or {}) else []
        else:  # train keys by their name alone
            key = name
            sections = [s for s, keys in config.items() if isinstance(keys, dict) and name in keys and s != "layout"]
        if len(sections) == 1:
            found.append((sections[0], key))
    return found
