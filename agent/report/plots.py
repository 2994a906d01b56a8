"""The report's plots as PNG bytes, drawn with matplotlib's object API (no pyplot state, no display).

PNGs carry no software version or date, so the same results draw the same bytes and a re-run with unchanged
results adds no commit.
"""

from __future__ import annotations

from io import BytesIO
from typing import TYPE_CHECKING

from agent.report.inputs import LongerRun, Trial
from trainer.results.schemas import TIMELINE_CATEGORIES

if TYPE_CHECKING:
    from matplotlib.figure import Figure

_CATEGORIES = (("parameters", "parameters"), ("gradients", "gradients"), ("optimizer", "optimizer state"),
               ("activations_saved", "activations saved"))  # fmt: skip
_MIB = 2**20


def throughput(trials: list[Trial], labels: dict[str, str]) -> bytes:
    """Measured tokens/s per trial; trials without a measurement are named with their status."""
    figure = _figure(figsize=(7, 0.5 + 0.45 * len(trials)), dpi=100)
    axes = figure.add_subplot()
    values = [t.record.get("tokens_per_s") or 0 for t in trials]
    names = [labels[t.id] for t in trials]
    bars = axes.barh(names, values, color=["tab:blue" if t.status == "ok" else "tab:gray" for t in trials])
    for bar, trial in zip(bars, trials, strict=True):
        if trial.status != "ok":
            axes.text(0, bar.get_y() + bar.get_height() / 2, f"  {trial.status}", va="center")
    axes.invert_yaxis()
    axes.set_xlabel("tokens/s (measured)")
    axes.set_title("Throughput per layout")
    return _png(figure)


def memory_per_rank(trial: Trial, label: str) -> bytes:
    """Predicted beside measured bytes per rank, by category (MiB)."""
    memory = trial.memory()
    measured = {m["rank"]: m for m in memory["measured"]}
    predicted = {p["rank"]: p for p in memory["predicted"]}
    ranks = sorted(measured)
    figure = _figure(figsize=(max(5, 1.6 * len(ranks) + 2), 4), dpi=100)
    axes = figure.add_subplot()
    width = 0.38
    for offset, side, hatch in ((-width / 2, predicted, "//"), (width / 2, measured, "")):
        bottom = [0.0] * len(ranks)
        for color, (key, name) in enumerate(_CATEGORIES):
            heights = [(side.get(r) or {}).get(key, 0) / _MIB for r in ranks]
            shown = name if offset > 0 else None
            axes.bar([r + offset for r in ranks], heights, width, bottom=bottom, color=f"C{color}", hatch=hatch,
                     label=shown, edgecolor="white")  # fmt: skip
            bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    axes.set_xticks(ranks, [f"rank {r}\npredicted | measured" for r in ranks], fontsize=8)
    axes.set_ylabel("MiB")
    axes.set_title(f"Memory per rank: {label}")
    axes.legend(fontsize=8)
    return _png(figure)


_TIMELINE_NAMES = {"optimizer": "optimizer state", "activations": "activations saved"}


def memory_timeline(trial: Trial, label: str) -> bytes | None:
    """The first rank's memory through the measured step, a stacked bar per phase boundary, beside the memory
    model's prediction for that rank as one more bar (and its top as a dashed line); None without a timeline."""
    memory = trial.memory()
    if not memory or not memory["timeline"] or not memory["timeline"][0]["points"]:
        return None
    timeline = memory["timeline"][0]
    predicted = next((p for p in memory["predicted"] if p["rank"] == timeline["rank"]), None)
    points = timeline["points"]
    figure = _figure(figsize=(max(6, 0.35 * len(points) + 3), 4.5), dpi=100)
    axes = figure.add_subplot()
    x = list(range(len(points)))
    bottom, predicted_bottom = [0.0] * len(points), 0.0
    for color, (key, predicted_keys) in enumerate(TIMELINE_CATEGORIES.items()):
        heights = [point.get(key, 0) / _MIB for point in points]
        name = _TIMELINE_NAMES.get(key, key)
        axes.bar(x, heights, 0.8, bottom=bottom, color=f"C{color}", label=name, edgecolor="white", linewidth=0.5)
        bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
        if predicted is not None:
            height = sum(predicted.get(k, 0) for k in predicted_keys) / _MIB
            axes.bar(len(points) + 0.5, height, 0.8, bottom=predicted_bottom, color=f"C{color}", hatch="//",
                     edgecolor="white", linewidth=0.5)  # fmt: skip
            predicted_bottom += height
    phases = [point["phase"] for point in points]
    if predicted is not None:
        axes.axhline(predicted_bottom, color="black", linestyle="--", linewidth=0.8, label="predicted peak")
        x, phases = [*x, len(points) + 0.5], [*phases, "predicted"]
    axes.set_xticks(x, phases, rotation=60, ha="right", fontsize=7)
    if not any("temporaries" in point for point in points):
        axes.set_xlabel("end of each phase (temporaries are measured on CUDA only)", fontsize=8)
    axes.set_ylabel("MiB")
    axes.set_title(f"Memory through step {timeline['step']}, rank {timeline['rank']}: {label}", fontsize=10)
    axes.legend(fontsize=7)
    return _png(figure)


def loss_curves(runs: list[tuple[str, Trial | LongerRun]], title: str) -> bytes | None:
    """One curve per (legend label, run) that logged a loss."""
    return _per_step(runs, "loss", "loss", title)


def gradient_noise_scale(trials: list[Trial], labels: dict[str, str]) -> bytes | None:
    """Only when some run measured it (steps.jsonl `gns`)."""
    runs = [(labels[t.id], t) for t in trials]
    return _per_step(runs, "gns", "gradient noise scale", "Gradient noise scale")


def _per_step(runs: list[tuple[str, Trial | LongerRun]], field: str, ylabel: str, title: str) -> bytes | None:
    series = []
    for label, run in runs:
        points = [(s["step"], s[field]) for s in run.steps() if s.get(field) is not None]
        if points:
            series.append((label, points))
    if not series:
        return None
    figure = _figure(figsize=(7, 4), dpi=100)
    axes = figure.add_subplot()
    for label, points in series:
        axes.plot(*zip(*points, strict=True), marker=".", label=label)
    axes.set_xlabel("optimizer step")
    axes.set_ylabel(ylabel)
    axes.set_title(title)
    axes.legend(fontsize=8)
    return _png(figure)


def _figure(**kwargs) -> Figure:
    # Imported on first use: every `meshpilot` command loads this package, and matplotlib takes half a second.
    from matplotlib.figure import Figure

    return Figure(**kwargs)


def _png(figure: Figure) -> bytes:
    figure.tight_layout()
    buffer = BytesIO()
    figure.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()
