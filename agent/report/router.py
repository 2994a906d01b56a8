"""A mixture-of-experts model's routers in the report: computed once from the trials' steps files and saved as a
result file of its own (results/router.json) that the winner's table then reads, as loss_agreement.json is.

steps.jsonl holds, per optimizer step, the load-balancing loss as the model defines it (before its coefficient),
the router z-loss where the config has one, and the worst MoE layer's most loaded expert against the mean (see
trainer.results.schemas.StepRecord). The report shows each trial's last step and, over its steps, the mean loss
and the worst load: a router that stays unbalanced shows in the second even when the last step looks even. Dense
trials log none of these, and a sweep of dense trials gets no router.json.
"""

from __future__ import annotations

import math
from typing import Any

from agent.report.inputs import Trial

RESULT = "router.json"  # under results/
NOTE = (
    "Each mixture-of-experts trial's router figures from its steps.jsonl: the load-balancing (auxiliary) loss before "
    "its coefficient and the router z-loss at the last step and their mean over the steps, and the worst layer's "
    "most loaded expert over the mean load (1: even) at the last step and at its worst step."
)
_FIGURES = ("aux_loss", "z_loss", "expert_load_max_over_mean")


def figures(trials: list[Trial]) -> dict[str, Any] | None:
    """{"note", "trials": {id: {"steps", "last_step", "<figure>_last", "<figure>_mean" or "_worst"}}} for the trials
    whose steps carry router figures; None when none does."""
    routed = {}
    for trial in trials:
        steps = [s for s in trial.steps() if any(name in s for name in _FIGURES)]  # through steps.jsonl's contract
        if steps:
            routed[trial.id] = {"steps": len(steps), "last_step": steps[-1]["step"], **_summary(steps)}
    return {"note": NOTE, "trials": routed} if routed else None


def _summary(steps: list[dict[str, Any]]) -> dict[str, float | None]:
    summary: dict[str, float | None] = {}
    for name in _FIGURES:
        values = [s[name] for s in steps if name in s]
        if not values:
            continue
        summary[f"{name}_last"] = _finite(values[-1])
        if name == "expert_load_max_over_mean":  # its worst step: the slowest expert sets the step's time
            summary[f"{name}_worst"] = _finite(max(values))
        else:
            summary[f"{name}_mean"] = _finite(math.fsum(values) / len(values))
    return summary


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None  # a NaN step stops the run; JSON cannot hold it
