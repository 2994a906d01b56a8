"""Whether the trials' loss curves agree: computed here once from their steps files and saved as a result file of
its own (results/loss_agreement.json) that the report's loss plot and its caption are then read from.

Layouts split the same computation differently, so on the same data they train to the same loss up to rounding;
then N curves draw one line, and the plot says more by drawing that line once, as far as it was trained (the
winner's longer run, when there is one).
"""

from __future__ import annotations

import math
from typing import Any

from agent.report.inputs import LongerRun, Trial

# Relative to the reference curve's loss. Rounding between layouts moves the loss far less (about 1e-7 in fp32 on
# CPU); a tenth of a percent is about a pixel at the scale of the report's loss plot, so curves within it draw as
# one line there, while a change of data or learning rate moves the loss by more.
TOLERANCE = 1e-3
RESULT = "loss_agreement.json"  # under results/
# What the loss plot draws, each with its title (the plot's and the report's alt text).
EVERY_TRIAL, LONGER_RUN, REFERENCE = "every trial", "the winner's longer run", "the reference trial"
TITLES = {
    EVERY_TRIAL: "Training loss per trial",
    LONGER_RUN: "Training loss of the winner's longer run (the trials' curves agree)",
    REFERENCE: "Training loss (the trials' curves agree: one is drawn)",
}
NOTE = (
    "Each trial's training loss compared with the reference trial's at every step both logged; they agree when "
    "every difference is within `tolerance` of the reference's loss (relative)."
)


def agreement(trials: list[Trial], reference: Trial | None) -> dict[str, Any]:
    """{"note", "tolerance", "reference", "trials", "compared", "largest_difference", "largest_relative_difference",
    "agree"}: `agree` needs two curves or more, each within TOLERANCE of the reference's (the winner's, else the
    first trial's that logged a loss)."""
    curves = {t.id: curve for t in trials if (curve := losses(t))}
    ref = reference.id if reference is not None and reference.id in curves else next(iter(curves), None)
    differences = [_difference(curve, curves[ref]) for curve in curves.values()]
    largest = max((absolute for absolute, _ in differences), default=0.0)
    relative = max((relative for _, relative in differences), default=0.0)
    finite = math.isfinite(relative)  # a NaN or infinite loss agrees with nothing, and JSON cannot hold it
    return {
        "note": NOTE,
        "tolerance": TOLERANCE,
        "reference": ref,
        "trials": list(curves),
        "compared": len(curves),
        "largest_difference": largest if finite else None,
        "largest_relative_difference": relative if finite else None,
        "agree": len(curves) > 1 and finite and relative <= TOLERANCE,
    }


def plotted(agreement: dict[str, Any], longer_run: LongerRun | None) -> str:
    """What the loss plot draws: agreeing curves once, as far as the winner was trained; otherwise every trial."""
    if not agreement["agree"]:
        return EVERY_TRIAL
    return LONGER_RUN if longer_run is not None else REFERENCE


def losses(run: Trial | LongerRun) -> dict[int, float]:
    """Loss by optimizer step, from the run's steps.jsonl."""
    return {s["step"]: s["loss"] for s in run.steps() if s.get("loss") is not None}


def _difference(curve: dict[int, float], reference: dict[int, float]) -> tuple[float, float]:
    """The largest absolute and relative difference at the steps both logged; inf when a loss is not finite (or
    the reference's is zero: no relative difference)."""
    shared = [(curve[step], reference[step]) for step in curve.keys() & reference.keys()]
    if not all(math.isfinite(a) and math.isfinite(b) and b for a, b in shared):
        return math.inf, math.inf
    return max((abs(a - b) for a, b in shared), default=0.0), max((abs(a - b) / abs(b) for a, b in shared), default=0.0)
