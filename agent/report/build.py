"""Every file one report writes, as repository-relative path -> bytes, made in memory before git is touched.

The raw result files are copied first and the documents' figures are read from those copies, so what the
documents say is what the committed files hold.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from agent.repo.secrets import redact
from agent.report import communication, loss, plots, router
from agent.report.context import Context
from agent.report.docs import MODEL_CARD, TRAINING_GUIDE, model_card, training_guide, training_section
from agent.report.document import report_markdown
from agent.report.figures import Sources
from agent.report.inputs import LongerRun, Sweep
from agent.report.prose import render


def results(
    sweep: Sweep, benches: list[tuple[str, dict[str, Any]]], longer_run: LongerRun | None = None
) -> dict[str, bytes]:
    """The raw files copied beside the report, by name under results/ (text redacted, benchmarks sanitized), and
    the figures computed from them once: predicted communication, whether the loss curves agree and, for
    mixtures of experts, the routers' figures."""
    copied = {"summary.json": (sweep.path / "summary.json").read_bytes()}
    if sweep.inputs is not None:
        copied["sweep.json"] = (sweep.path / "sweep.json").read_bytes()
    for trial in sweep.trials:
        copied |= {f"trials/{trial.id}/{name}": data for name, data in trial.files.items()}
    copied |= {f"bench/{name}": _json(bench) for name, bench in benches}
    if longer_run is not None:
        copied |= {f"longer-run/{name}": data for name, data in longer_run.files.items()}
    copied["predicted_communication.json"] = _json(communication.predict(sweep.trials))
    copied[loss.RESULT] = _json(loss.agreement(sweep.trials, sweep.winner))
    if (routers := router.figures(sweep.trials)) is not None:  # mixture-of-experts trials only
        copied[router.RESULT] = _json(routers)
    return {name: redact(data.decode()).encode() for name, data in copied.items()}


def build(
    sweep: Sweep,
    benches: list[tuple[str, dict[str, Any]]],
    report_dir: str,
    *,
    slug: str,
    date: str,
    experiment: str,
    docs_file: str,
    committed: Callable[[str], bytes | None],
    prose: Any = None,
    longer_run: LongerRun | None = None,
) -> tuple[dict[str, bytes], Context]:
    """All files of the report, and the Context they were made with (its ledger, its prose origins).

    `committed` reads a file of the commit the report builds on: the docs are rewritten from it, not from the
    worktree, so nothing uncommitted slips into meshpilot's commit. `longer_run`: the winner trained for longer
    (see inputs.find_longer_run), copied and drawn when the trials' loss curves agree.
    """
    copied = results(sweep, benches, longer_run)
    files = {f"{report_dir}/results/{name}": data for name, data in copied.items()}
    ctx = Context(sweep, benches, report_dir, slug, date, experiment, Sources(files), prose=prose,
                  longer_run=longer_run)  # fmt: skip
    drawn = _plots(ctx)
    files |= {f"{report_dir}/plots/{name}": data for name, data in drawn.items()}
    files[f"{report_dir}/README.md"] = report_markdown(ctx, list(drawn), sorted(copied)).encode()
    if sweep.winner is not None:  # no recommendation without a winner: the docs keep the last one
        files[docs_file] = training_section(ctx, docs_file, _text(committed(docs_file))).encode()
        guide = files.get(TRAINING_GUIDE) or committed(TRAINING_GUIDE)  # the same file when there is no README
        files[TRAINING_GUIDE] = training_guide(ctx, _text(guide)).encode()
        files[MODEL_CARD] = model_card(ctx, _text(committed(MODEL_CARD))).encode()
    return files, ctx


def finish(files: dict[str, bytes], ctx: Context) -> None:
    """Add the ledger, once every document (the pull request's too) has been written."""
    files[f"{ctx.report_dir}/figures.json"] = ctx.ledger.to_json()


def pull_request_body(ctx: Context, files: dict[str, bytes]) -> str:
    page = ctx.ledger.page("(pull request description)")
    winner = ctx.sweep.winner
    if winner is None:
        outcome = "No trial finished, so the docs keep their last recommendation."
    else:
        tokens = page.show(ctx.metric(winner, "tokens_per_s", unit="rounded"))
        outcome = f"Winner: {render(ctx.label(winner), page)}, {tokens} tokens/s measured."
    documents = [path for path in sorted(files) if path.endswith(".md")]
    listing = "\n".join(f"- `{path}`" for path in documents)
    return (
        f"meshpilot's report of the {ctx.sweep_name()} ({ctx.date}).\n\n{outcome}\n\n"
        f"Documents:\n{listing}\n- raw result files under `{ctx.report_dir}/results/`\n\n"
        f"Every number is read from those files; `{ctx.report_dir}/figures.json` names the source of each."
    )


def _plots(ctx: Context) -> dict[str, bytes]:
    trials = ctx.sweep.trials
    labels = {t.id: ctx.plain_label(t) for t in trials}
    drawn = {"throughput.png": plots.throughput(trials, labels)}
    winner = ctx.sweep.winner
    if winner is not None:
        drawn["memory.png"] = plots.memory_per_rank(winner, labels[winner.id])
    timeline = plots.memory_timeline(winner, labels[winner.id]) if winner is not None else None
    for name, png in (("memory_timeline.png", timeline), ("loss.png", _loss_plot(ctx, labels)),
                      ("gns.png", plots.gradient_noise_scale(trials, labels))):  # fmt: skip
        if png is not None:
            drawn[name] = png
    return drawn


def _loss_plot(ctx: Context, labels: dict[str, str]) -> bytes | None:
    """Every trial's loss curve, or, when they agree, one: the winner's longer run, else the reference trial's."""
    shown = loss.plotted(ctx.loss_agreement, ctx.longer_run)
    if shown == loss.LONGER_RUN:
        runs = [(f"{labels[ctx.sweep.winner.id]}, trained longer", ctx.longer_run)]
    elif shown == loss.REFERENCE:
        reference = ctx.loss_agreement["reference"]
        runs = [(labels[reference], next(t for t in ctx.sweep.trials if t.id == reference))]
    else:
        runs = [(labels[t.id], t) for t in ctx.sweep.trials]
    return plots.loss_curves(runs, loss.TITLES[shown])


def _json(data: Any) -> bytes:
    return (json.dumps(data, indent=2) + "\n").encode()


def _text(data: bytes | None) -> str | None:
    return data.decode() if data is not None else None
