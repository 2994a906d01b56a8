"""The optuna study behind a sweep: stored in DIR/study.db, a grid or TPE sampler, and a pruner for trials that are
clearly worse than the finished ones.

Every trial chooses one categorical parameter, "point" (an id from the space's fixed numbering), plus one float per
range. The grid sampler gives trial number n the n-th point of its (seeded) shuffled grid, so a resumed sweep,
which finishes the trials the killed one left running under their own numbers, runs exactly the points an
uninterrupted sweep runs. TPE samples from what has finished when it is asked; that differs between any two runs
with trials in parallel, resumed or not.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING

import optuna
from optuna.pruners import BasePruner
from optuna.trial import FrozenTrial, Trial, TrialState

from trainer.config import ConfigError

if TYPE_CHECKING:  # the space imports torch (through the planner's data): the sweep's records do not need it
    from agent.sweep.space import Space

STUDY_NAME = "meshpilot-sweep"
SAMPLERS = ("auto", "grid", "tpe")
SEED = 0

optuna.logging.set_verbosity(logging.WARNING)


class ClearlyWorsePruner(BasePruner):
    """Stops a trial whose value at some step is worse than the best finished trial's at that step by more than
    `margin` of it: half the tokens/s, or 1.5 times the loss, with the default 0.5. Noise between runs of the
    same setting stays well inside that; a setting that bad is not going to win."""

    def __init__(self, margin: float = 0.5):
        self.margin = margin

    def prune(self, study: optuna.Study, trial: FrozenTrial) -> bool:
        step = trial.last_step
        if step is None:
            return False
        value = trial.intermediate_values[step]
        finished = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        at_step = [t.intermediate_values[step] for t in finished if step in t.intermediate_values]
        if not at_step:
            return False
        if study.direction == optuna.study.StudyDirection.MAXIMIZE:
            return value < max(at_step) * (1 - self.margin)
        return value > min(at_step) * (1 + self.margin)


def open_study(directory: Path, space: Space, sampler: str, direction: str, prune: bool) -> optuna.Study:
    """Create the study, or load the one a previous run of this sweep stored."""
    return optuna.create_study(
        storage=f"sqlite:///{directory / 'study.db'}",
        study_name=STUDY_NAME,
        sampler=_sampler(space, sampler),
        pruner=ClearlyWorsePruner() if prune else optuna.pruners.NopPruner(),
        direction=direction,
        load_if_exists=True,
    )


def resolve_sampler(space: Space, sampler: str, budget: int) -> str:
    """auto: the grid when it runs every point within the budget, TPE when there are more points than trials or
    a range to sample."""
    if sampler not in SAMPLERS:
        raise ConfigError(f"sampler {sampler!r} is not one of {', '.join(SAMPLERS)}")
    if sampler == "grid" and space.ranges:
        raise ConfigError(f"the grid sampler needs lists of choices; {', '.join(space.ranges)} is a range (use tpe)")
    if sampler == "auto":
        return "tpe" if space.ranges or len(space.points) > budget else "grid"
    return sampler


def start_with_planner_pick(study: optuna.Study, space: Space) -> None:
    """TPE's first trial measures the point the planner ranks fastest, so the summary can always compare the
    planner's pick with what the search found."""
    top = max(space.points, key=lambda p: (p.predicted_tokens_per_s or 0.0, -int(p.id[1:])))
    study.enqueue_trial({"point": top.id})


class _Grid(optuna.samplers.GridSampler):
    """The grid sampler, minus its study.stop() once the grid is exhausted: that works only inside
    study.optimize, not with ask and tell; the sweep stops by its own budget."""

    def after_trial(self, study, trial, state, values) -> None:
        pass


def _sampler(space: Space, sampler: str) -> optuna.samplers.BaseSampler:
    if sampler == "grid":
        return _Grid({"point": [p.id for p in space.points]}, seed=SEED)
    return optuna.samplers.TPESampler(seed=SEED, constant_liar=True)


def suggest(trial: Trial, space: Space) -> tuple[str, dict[str, float]]:
    """The trial's point and range values; asked again of a trial that has them, optuna returns the same."""
    point = trial.suggest_categorical("point", [p.id for p in space.points])
    continuous = {key: trial.suggest_float(key, r.low, r.high, log=r.log) for key, r in space.ranges.items()}
    return point, continuous


def trial_id(point_id: str, continuous: dict[str, float]) -> str:
    """The point's id, and a short hash of the range values when there are any: the same parameters, the same id."""
    if not continuous:
        return point_id
    digest = hashlib.sha256(json.dumps(continuous, sort_keys=True).encode()).hexdigest()[:6]
    return f"{point_id}-{digest}"
