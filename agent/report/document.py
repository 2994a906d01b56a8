"""The report itself: docs/experiments/<date>-<slug>/README.md.

Goal, winner with its memory, compute and communication beside the runner-up's, every trial with its status and
cause, plots, benchmark aggregates, the commands that reproduce each trial, the environment, and the raw files.
Every number goes through the page's ledger (see figures.py); fixed text holds no digits.
"""

from __future__ import annotations

from collections.abc import Callable

from agent.report import loss, router
from agent.report.context import Context
from agent.report.figures import Figure, Page
from agent.report.inputs import Trial
from agent.report.markdown import split_cell, table, train_command, yes_no
from agent.report.prose import Slot, compose, render
from trainer.layout import MESH_DIMS, ONE_PROCESS

PLOT_TITLES = {
    "throughput.png": "Throughput per layout",
    "memory.png": "Memory per rank of the winner, predicted and measured",
    "memory_timeline.png": "Memory of the winner through one training step, measured, beside the predicted peak",
    "gns.png": "Gradient noise scale per trial",
}  # and loss.png's, which says what it draws (loss.TITLES)


def report_markdown(ctx: Context, plots: list[str], results: list[str]) -> str:
    page = ctx.ledger.page(f"{ctx.report_dir}/README.md")
    sections = [
        f"# {_capitalized(ctx.sweep_name())}, {ctx.date}",
        _goal(ctx, page),
        _winner(ctx, page),
        _trials(ctx, page),
        _plots(ctx, page, plots),
        _benchmarks(ctx, page),
        _reproduce(ctx, page),
        _environment(ctx, page),
        _raw_files(results),
    ]
    return "\n\n".join(s for s in sections if s) + "\n"


def _capitalized(text: str) -> str:
    return text[:1].upper() + text[1:]  # str.capitalize would lower the rest: an experiment's name keeps its case


def _goal(ctx: Context, page: Page) -> str:
    summary = ctx.summary
    slot = Slot(
        "goal",
        "Find the parallelism layout and batch split with the highest {objective} for {experiment} on {devices} "
        "{device_type} devices.",
        {
            "objective": ctx.sources.figure(summary, "objective", unit="text"),
            "experiment": f"`{ctx.experiment}`",
            "devices": ctx.sources.figure(summary, "devices", unit="count"),
            "device_type": ctx.sources.figure(summary, "device_type", unit="text"),
        },
    )
    text, ctx.prose_origins["goal"] = compose(slot, page, ctx.prose)
    note = "Every number here is read from the result files in `results/`; `figures.json` names the file of each."
    return f"## Goal\n\n{text}\n\n{note}"


def _winner(ctx: Context, page: Page) -> str:
    winner = ctx.sweep.winner
    if winner is None:
        return "## Winner\n\nNo trial finished, so there is no recommendation; the table below gives each cause."
    others = [t for t in ctx.sweep.ranked() if t is not winner]
    runner = others[0] if others else None
    text, ctx.prose_origins["winner"] = compose(_winner_slot(ctx, winner, runner), page, ctx.prose)
    shown = [winner] + ([runner] if runner else [])
    return "\n\n".join(
        [f"## Winner: {render(ctx.label(winner), page)}", text, _side_by_side(ctx, page, shown), _planner(ctx, page)]
    )


# Why the winner won, per objective; the measured figures follow in either case.
_WON = {
    "tokens_per_s": "{winner} measured the highest throughput of the trials that finished: {tokens_per_s} tokens/s",
    "final_loss": "{winner} reached the lowest final loss of the trials that finished, {final_loss}, at "
    "{tokens_per_s} tokens/s",
}


def _winner_slot(ctx: Context, winner: Trial, runner: Trial | None) -> Slot:
    template = _WON[ctx.sweep.objective] + (
        " over {world_size} processes ({tokens_per_s_per_device} per process), with micro-batch {micro_batch} and "
        "{grad_accum} accumulation steps per rank."
    )
    values = {
        "winner": ctx.label(winner),
        "tokens_per_s": ctx.metric(winner, "tokens_per_s", unit="rounded"),
        "final_loss": ctx.metric(winner, "final_loss", unit="loss"),
        "world_size": ctx.metric(winner, "world_size", unit="count"),
        "tokens_per_s_per_device": ctx.metric(winner, "tokens_per_s_per_device", unit="rounded"),
        "micro_batch": ctx.metric(winner, "micro_batch", unit="count"),
        "grad_accum": ctx.metric(winner, "grad_accum", unit="count"),
    }
    if runner is not None:
        template += (
            " The runner-up, {runner_up}, measured {runner_up_tokens_per_s} tokens/s and a final loss of "
            "{runner_up_final_loss}; the table puts their memory, compute and communication side by side."
        )
        values["runner_up"] = ctx.label(runner)
        values["runner_up_tokens_per_s"] = ctx.metric(runner, "tokens_per_s", unit="rounded")
        values["runner_up_final_loss"] = ctx.metric(runner, "final_loss", unit="loss")
    return Slot("winner", template, values)


def _planner(ctx: Context, page: Page) -> str:
    if not isinstance(ctx.sources.value(ctx.summary, "planner"), dict):
        return ""

    def show(*key: str, unit: str = "text") -> str:
        return page.show(ctx.sources.figure(ctx.summary, "planner", *key, unit=unit))

    text = (
        f"The planner's top pick was `{show('top_pick')}` and the measured best `{show('measured_best')}` "
        f"(quality ratio, its pick's measured tokens/s over the best's: {show('quality_ratio', unit='ratio')})."
    )
    dropped = ctx.sources.value(ctx.summary, "planner", "dropped") or []
    if dropped:
        rows = [
            [render(ctx.degrees(ctx.summary, ("planner", "dropped", i, "layout")) or [ONE_PROCESS], page),
             show("dropped", i, "micro_batch", unit="count"),
             yes_no(entry.get("activation_checkpointing")),
             show("dropped", i, "reason")]
            for i, entry in enumerate(dropped)
        ]  # fmt: skip
        header = ["layout", "micro-batch", "act. checkpointing", "why the planner ruled it out"]
        text += "\n\nRuled out by the planner before any trial ran:\n\n" + table(header, rows)
    return text


Row = tuple[str, Callable[[Trial], Figure | None] | None]
# The winner's table's router rows: (name, results/router.json key, unit).
ROUTER_ROWS = (
    ("aux loss, last step", "aux_loss_last", "loss"),
    ("aux loss, mean over steps", "aux_loss_mean", "loss"),
    ("router z-loss, last step", "z_loss_last", "loss"),
    ("router z-loss, mean over steps", "z_loss_mean", "loss"),
    ("expert load max/mean, last step", "expert_load_max_over_mean_last", "ratio"),
    ("expert load max/mean, worst step", "expert_load_max_over_mean_worst", "ratio"),
)


def _side_by_side(ctx: Context, page: Page, trials: list[Trial]) -> str:
    rows: list[Row] = [
        ("**compute**", None),
        ("tokens/s", lambda t: ctx.metric(t, "tokens_per_s", unit="rounded")),
        ("tokens/s per device", lambda t: ctx.metric(t, "tokens_per_s_per_device", unit="rounded")),
        ("MFU (%)", lambda t: ctx.metric(t, "mfu", unit="percent")),
        ("final loss", lambda t: ctx.metric(t, "final_loss", unit="loss")),
        ("gradient noise scale, tokens", lambda t: ctx.metric(t, "gns", unit="rounded")),
        ("recommended global batch, tokens", lambda t: ctx.metric(t, "recommended_global_batch_tokens", unit="count")),
        ("**memory per rank, MiB (largest rank)**", None),
        ("predicted peak", lambda t: ctx.memory(t, "predicted", "peak")),
        ("measured peak", lambda t: ctx.memory(t, "measured", "peak")),
    ]
    for key, name in (("parameters", "parameters"), ("gradients", "gradients"), ("optimizer", "optimizer state"),
                      ("activations_saved", "activations saved")):  # fmt: skip
        rows.append((f"{name}, measured", lambda t, key=key: ctx.memory(t, "measured", key)))
        rows.append((f"{name}, predicted", lambda t, key=key: ctx.memory(t, "predicted", key)))
    rows += [
        ("**communication per rank per step, predicted**", None),
        ("sent, MiB", lambda t: ctx.communication(t, "total_bytes")),
        ("collectives", lambda t: ctx.communication(t, "total_collectives", unit="count")),
    ]
    for dim in MESH_DIMS:
        rows.append((f"sent over {dim}, MiB", lambda t, dim=dim: ctx.communication(t, "dimensions", dim, "bytes")))
    if ctx.sources.value(ctx.result(router.RESULT)) is not None:  # a mixture of experts: its routers
        rows += [("**router (mixture of experts)**", None)]
        rows += [(name, lambda t, key=key, unit=unit: ctx.router(t, key, unit)) for name, key, unit in ROUTER_ROWS]
    # A row no trial has a figure for (MFU on CPU, a mesh dimension neither uses) says nothing: left out.
    rows = [(name, get) for name, get in rows if get is None or any(get(t) is not None for t in trials)]
    header = ["", *(render(ctx.label(t), page) for t in trials)]
    body = [[name, *(page.show(get(t)) if get else "" for t in trials)] for name, get in rows]
    peak = ctx.sources.figure(ctx.run_file(trials[0], "memory.json"), "peak_source", unit="text")
    units = ctx.sources.figure(ctx.result("predicted_communication.json"), "units", unit="text")
    notes = f"Measured peak: {page.show(peak)}. Communication: {page.show(units)}."
    return table(header, body) + "\n\n" + notes


def _trials(ctx: Context, page: Page) -> str:
    header = ["trial", "layout", "micro-batch", "accumulation", "act. checkpointing", "packing", "status", "cause",
              "tokens/s", "MFU (%)", "predicted peak, MiB", "measured peak, MiB"]  # fmt: skip
    rows = []
    for trial in ctx.sweep.trials:
        params = trial.record.get("params") or {}
        rows.append([
            f"`{trial.id}`",
            render(ctx.layout(trial), page),
            page.show(ctx.record(trial, "params", "micro_batch", unit="count")),
            page.show(ctx.record(trial, "params", "grad_accum", unit="count")),
            yes_no(params.get("activation_checkpointing")),
            yes_no(params.get("packing")),
            trial.status,
            page.show(ctx.record(trial, "cause", unit="text")),
            page.show(ctx.record(trial, "tokens_per_s", unit="rounded")),
            page.show(ctx.record(trial, "mfu", unit="percent")),
            page.show(ctx.record(trial, "predicted_peak_bytes", unit="mib", reduce="max")),
            page.show(ctx.record(trial, "peak_mem_bytes", unit="mib", reduce="max")),
        ])  # fmt: skip
    return "## Every layout tried\n\n" + table(header, rows) + "\n\nPeak memory is the largest rank's."


def _plots(ctx: Context, page: Page, plots: list[str]) -> str:
    images = []
    for name in plots:
        if name == "loss.png":
            shown = loss.plotted(ctx.loss_agreement, ctx.longer_run)
            images.append(f"![{loss.TITLES[shown]}](plots/{name})\n\n{_loss_caption(ctx, page, shown)}".rstrip())
        else:
            images.append(f"![{PLOT_TITLES[name]}](plots/{name})")
    return "## Plots\n\n" + "\n\n".join(images)


def _loss_caption(ctx: Context, page: Page, shown: str) -> str:
    """Whether the trials' loss curves agree, with the figures that say so, and what the loss plot draws."""
    agreement = ctx.result(loss.RESULT)

    def show(source: str, *key: str, unit: str) -> str:
        return page.show(ctx.sources.figure(source, *key, unit=unit))

    if ctx.loss_agreement["compared"] < 2:
        return ""
    reference, tolerance = show(agreement, "reference", unit="text"), show(agreement, "tolerance", unit="percent")
    if shown == loss.EVERY_TRIAL:
        if ctx.loss_agreement["largest_difference"] is None:
            return f"A trial's training loss is not a finite number, so no curve is compared with `{reference}`'s."
        return (
            f"The trials' training losses do not agree: at some step one differs from `{reference}`'s by "
            f"{show(agreement, 'largest_difference', unit='loss')}, more than the tolerance of {tolerance}% of "
            f"its loss, so every trial's curve is drawn."
        )
    text = (
        f"The training losses of the {show(agreement, 'compared', unit='count')} trials that logged one agree: at "
        f"every step each is within {tolerance}% of `{reference}`'s (the largest difference is "
        f"{show(agreement, 'largest_difference', unit='loss')}), so the trials train alike and their curves "
        "would draw one line."
    )
    if shown == loss.REFERENCE:
        return text + f" The plot draws `{reference}`'s alone."
    run = ctx.result("longer-run/metrics.json")
    return text + (
        f" The plot draws the winner's longer run instead ([`results/longer-run/`](results/longer-run/)): "
        f"{show(run, 'steps', unit='count')} steps in the winner's layout, to a final loss of "
        f"{show(run, 'final_loss', unit='loss')}."
    )


def _benchmarks(ctx: Context, page: Page) -> str:
    if not ctx.benches:
        return ""
    parts = ["## Benchmarks"]
    for name, _ in ctx.benches:
        parts.append(_bench(ctx, page, ctx.result(f"bench/{name}")))
    parts.append(
        "Private tasks show aggregate metrics and the contamination flag only: nothing else of them leaves the scorer. "
        "A flagged task's test data overlaps the training data: its score is not evidence of generalisation."
    )
    return "\n\n".join(parts)


def _bench(ctx: Context, page: Page, source: str) -> str:
    get = ctx.sources.figure

    def show(*key: str, unit: str = "text") -> str:
        return page.show(get(source, *key, unit=unit))

    head = f"### `{show('suite')}` {show('suite_version')}"
    model = (
        f"Model `{show('model', 'path')}`, checkpoint `{show('model', 'checkpoint_hash')}`; evaluation code "
        f"{show('eval_code_version')}, seed {show('seed', unit='count')}."
    )
    rows = []
    for i, task in enumerate(ctx.sources.value(source, "tasks")):
        for metric in task["metrics"]:
            overlap = (task.get("contamination") or {}).get("overlap")
            rows.append([
                page.show(get(source, "tasks", i, "task", unit="text")),
                yes_no(task["private"]),
                f"`{metric}`",  # a name, not a figure: the key its value is read under
                page.show(get(source, "tasks", i, "metrics", metric, unit="score")),
                split_cell(ctx, page, source, i),
                page.show(get(source, "tasks", i, "n_examples", unit="count")),
                page.show(get(source, "tasks", i, "contamination", "overlap", unit=_unit_of(overlap))),
                "**flagged**" if (task.get("contamination") or {}).get("flagged") else "no",
            ])  # fmt: skip
    # The split goes beside the number of examples it holds; the columns before it keep their order.
    header = ["task", "private", "metric", "value", "split", "examples", "overlap", "contamination"]
    return "\n\n".join([head, model, table(header, rows)])


def _unit_of(value: object) -> str:
    return "count" if isinstance(value, int) and not isinstance(value, bool) else "score"


def _reproduce(ctx: Context, page: Page) -> str:
    ran = [t for t in ctx.sweep.trials if "config.yaml" in t.files]
    if not ran:
        return ""
    first = ctx.sweep.winner or ran[0]
    command = train_command(ctx, first, page)
    who = "the winner" if ctx.sweep.winner else f"`{first.id}`"
    parts = ["## Reproduce", f"Train {who} again:", f"```bash\n{command}\n```"]
    others = [(t, train_command(ctx, t, page)) for t in ran if t is not first]
    if others:
        listing = "\n".join(f"# {t.id}: {t.status}\n{c}" for t, c in others if c)
        parts.append(f"<details><summary>Every other trial</summary>\n\n```bash\n{listing}\n```\n\n</details>")
    parts.append("Each trial's resolved experiment is its `config.yaml` under `results/trials/`.")
    return "\n\n".join(parts)


def _environment(ctx: Context, page: Page) -> str:
    trial = ctx.sweep.winner or next((t for t in ctx.sweep.trials if "metrics.json" in t.files), None)
    if trial is None:
        return ""
    metrics = ctx.run_file(trial, "metrics.json")

    def show(*key: str, unit: str = "text") -> str:
        return page.show(ctx.sources.figure(metrics, *key, unit=unit))

    versions = ctx.sources.value(metrics, "versions") or {}
    listed = ", ".join(f"{name} {show('versions', name)}" for name in versions)
    dirty = " (with uncommitted changes)" if ctx.sources.value(metrics, "git_dirty") else ""
    commit = f"`{show('git_commit')}`" if ctx.sources.value(metrics, "git_commit") else "not recorded"
    sweep_hash = page.show(ctx.sources.figure(ctx.summary, "config_hash", unit="text"))
    lines = [
        f"- Devices: {show('world_size', unit='count')} × {show('device_type')} (`{show('device_name')}`), "
        f"precision {show('precision')}",
        f"- Versions: {listed}",
        f"- Experiment repository commit: {commit}{dirty}",
        f"- Config hash of `{trial.id}`: `{show('config_hash')}`; of the sweep: `{sweep_hash}`",
    ]
    return f"## Environment (`{trial.id}`)\n\n" + "\n".join(lines)


def _raw_files(results: list[str]) -> str:
    listing = "\n".join(f"- [`results/{name}`](results/{name})" for name in results)
    return f"## Raw result files\n\nCopied beside this report:\n\n{listing}\n- [`figures.json`](figures.json)"
