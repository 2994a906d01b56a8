"""The benchmark result's schema: OUT/result.json, and the submission each leaderboard row stores.

Aggregates only, safe to show anyone: no per-example result and no private input or label has a field here.
evalsuite.api writes it; the leaderboard and the agent read it through BENCH_RESULT.
"""

from __future__ import annotations

from typing import Annotated, NotRequired

from pydantic import Field
from typing_extensions import TypedDict

from trainer.results.contracts import STRICT, Contract

Count = Annotated[int, Field(ge=0)]


class ModelRef(TypedDict):
    __pydantic_config__ = STRICT
    path: str
    checkpoint_hash: str  # the weights' content hash: a re-exported copy is the same model


class Contamination(TypedDict):
    """How much of the split's solved text the training data holds as n-grams (evalsuite.contamination)."""

    __pydantic_config__ = STRICT
    n: Annotated[int, Field(ge=1)]
    overlap: float | None  # None: no training data to compare with
    flagged: bool


class TaskResult(TypedDict):
    """One task's split: its aggregate metrics (the first is the main one)."""

    __pydantic_config__ = STRICT
    task: str
    version: str
    split: str
    private: bool
    metrics: dict[str, float]
    n_examples: Count
    contamination: Contamination


class BenchResult(TypedDict):
    __pydantic_config__ = STRICT
    suite: str
    suite_version: str
    model: ModelRef
    config_hash: str | None  # of the run that trained the model, where it came from a meshpilot run
    git_commit: str | None
    seed: int | None
    eval_code_version: str
    batching: str
    batching_note: str | None
    device_mapped: bool
    versions: dict[str, str | None]
    tasks: list[TaskResult]
    # Added once the leaderboard recorded the submission (absent from the copy the leaderboard stores):
    leaderboard_id: NotRequired[int]
    submissions_today: NotRequired[Count]
    daily_limit: NotRequired[Count]


BENCH_RESULT = Contract("result.json", BenchResult)
