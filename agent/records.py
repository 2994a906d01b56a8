"""The schemas of the files the agent's jobs and sweeps write, one Contract each (job.json's states, sweep.json,
trial.json, summary.json): a leaf that agent.jobs, agent.sweep and every reader import, so that a reader of a
sweep's files imports neither the sweep's loop (optuna) nor the jobs' supervisor. job.json's record itself
(agent.jobs.JOB) stays with the jobs."""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired

from pydantic import ConfigDict, Field
from typing_extensions import TypedDict

from trainer.config import OBJECTIVES
from trainer.results.contracts import STRICT, Contract
from trainer.results.schemas import Degrees, RunStatus

# A job's state: waiting for its supervisor, running, or how it ended (trainer.results.schemas.RunStatus).
JobState = Literal["queued", "running", RunStatus]


JOB_STATES: tuple[str, ...] = JobState.__args__


ExecutorKind = Literal["local", "slurm", "submitit-local"]  # sweep.json's "executor"


EXECUTORS: tuple[str, ...] = ExecutorKind.__args__


Objective = Literal["tokens_per_s", "final_loss"]  # trainer.config.OBJECTIVES
assert set(Objective.__args__) == set(OBJECTIVES), "Objective must name trainer.config.OBJECTIVES"


Positive = Annotated[float, Field(gt=0)]


AtLeastOne = Annotated[int, Field(ge=1)]


Bytes = Annotated[int, Field(ge=0)]


class PointRecord(TypedDict):
    """A point of the space (agent.sweep.space.Point): one combination of the discrete choices, predicted."""

    __pydantic_config__ = STRICT
    id: str
    layout: Degrees
    micro_batch: AtLeastOne
    grad_accum: AtLeastOne
    activation_checkpointing: bool | Literal["selective"]  # train.activation_checkpointing as stored
    packing: bool
    extra: dict[str, Any]  # other experiment keys (section.key) -> value
    predicted_peak_bytes: Bytes | None
    predicted_tokens_per_s: float | None
    # The planner's sharding under train.zero_stage auto (None: the experiment's); absent from earlier sweeps' files.
    zero_stage: NotRequired[Literal[1, 2, 3] | None]
    fsdp_grad_sync: NotRequired[Literal["micro_batch", "step"] | None]


class RangeRecord(TypedDict):
    """A continuous dimension (agent.sweep.space.Range)."""

    __pydantic_config__ = STRICT
    low: float
    high: float
    log: bool


class Dropped(TypedDict):
    """A candidate the planner ruled out before any trial ran, and why."""

    __pydantic_config__ = STRICT
    layout: Degrees
    micro_batch: AtLeastOne
    activation_checkpointing: bool | Literal["selective"]  # train.activation_checkpointing as stored
    reason: str


class SpaceRecord(TypedDict):
    """agent.sweep.space.Space.to_dict."""

    __pydantic_config__ = STRICT
    points: Annotated[list[PointRecord], Field(min_length=1)]
    ranges: dict[str, RangeRecord]
    dropped: list[Dropped]


class SweepInputs(TypedDict):
    """sweep.json: what the sweep was asked and what it resolved, fixed when it starts (a resume checks them)."""

    __pydantic_config__ = STRICT
    experiment: str  # absolute
    config_hash: str
    objective: Objective
    direction: Literal["maximize", "minimize"]
    sampler: Literal["grid", "tpe"]
    prune: bool
    executor: ExecutorKind
    device_type: Literal["cpu", "cuda"]
    device_ids: Annotated[list[Annotated[int, Field(ge=0)]], Field(min_length=1)]
    trials: AtLeastOne  # as asked
    budget: AtLeastOne  # distinct trials that run
    trial_steps: AtLeastOne
    timing_warmup_steps: Annotated[int, Field(ge=0)]
    timeout_s: Positive | None
    hang_s: Positive | None
    requested_space: dict[str, Any]  # --space as given
    space: SpaceRecord
    trackers: list[str] | None  # every trial's, instead of the experiment's train.trackers; None: the experiment's


SWEEP_FILE = "sweep.json"


SWEEP = Contract(SWEEP_FILE, SweepInputs)


TRIAL_FILE = "trial.json"  # the sweep's record of a trial: TrialRecord


class Params(TypedDict):
    """A trial's parameters as the summary shows them (agent.sweep.space.Point.params): the layout, batch split and
    checkpointing, then every other varied key, a train key by its name alone ("lr"), any other as section.key.
    For display: what the trial ran with, exactly, is its record's `settings`."""

    __pydantic_config__ = ConfigDict(extra="allow")  # the varied keys, whichever the space names
    layout: Degrees
    micro_batch: AtLeastOne
    grad_accum: AtLeastOne
    activation_checkpointing: bool | Literal["selective"]  # train.activation_checkpointing as stored
    packing: bool


class TrialRequest(TypedDict):
    """What the trial's job was started with (agent.jobs.start_run's arguments); the environment by names only."""

    __pydantic_config__ = STRICT
    experiment: str
    nproc: AtLeastOne
    layout: str  # the --layout argument, every degree spelled out
    steps: AtLeastOne
    overrides: list[str]  # every --set, in order: the trial's settings, then what the sweep sets for every trial
    timeout_s: Annotated[float, Field(gt=0)] | None
    hang_s: Annotated[float, Field(gt=0)] | None
    env_keys: list[str]  # values may be secrets


class TrialRecord(TypedDict):
    """trial.json: the sweep's record of one trial, written when it gets its devices, before its job starts."""

    __pydantic_config__ = STRICT
    id: str  # its point's id, and a hash of its range values when there are any (agent.sweep.study.trial_id)
    number: Annotated[int, Field(ge=0)]  # optuna's trial number
    point: str  # the id of its point in sweep.json's space
    params: Params
    # The `--set` overrides that make this trial (its choices and range values), `section.key=JSON` as the
    # experiment file names each key: `meshpilot train ... --set S` for each trains what it trained.
    settings: list[str]
    request: TrialRequest
    devices: list[Annotated[int, Field(ge=0)]]  # the sweep's device indices it ran on (none: the scheduler's)


TRIAL = Contract(TRIAL_FILE, TrialRecord)


SUMMARY_FILE = "summary.json"


class TrialSummary(TypedDict):
    """One trial: its parameters and settings (from its trial.json), how it ended and its figures."""

    __pydantic_config__ = STRICT
    id: str
    params: Params
    settings: list[str]  # exactly the `--set` overrides that make it (TrialRecord.settings)
    status: JobState  # how its job ended ("queued": it never started)
    cause: str | None
    run_dir: str | None  # relative to the sweep directory
    nproc: Annotated[int, Field(ge=1)]
    tokens_per_s: float | None
    mfu: float | None
    peak_mem_bytes: Bytes | None  # the largest rank's
    predicted_peak_bytes: Bytes | None
    predicted_tokens_per_s: float | None
    final_loss: float | None  # None when not finite


class PlannerVerdict(TypedDict):
    """The planner's pick among the trials that ran against the measured best."""

    __pydantic_config__ = STRICT
    top_pick: str | None
    top_pick_params: Params | None
    measured_best: str | None
    quality_ratio: Annotated[float, Field(ge=0)] | None  # the pick's measured tokens/s over the best's
    dropped: list[Dropped]  # candidates the planner ruled out before any trial ran, with the reason


class Summary(TypedDict):
    """summary.json: the winner, every trial with its status and figures, the planner against the measurements."""

    __pydantic_config__ = STRICT
    experiment: str
    config_hash: str
    objective: Objective
    device_type: Literal["cpu", "cuda"]
    devices: Annotated[int, Field(ge=1)]
    sampler: Literal["grid", "tpe"]
    winner: str | None  # the best ok trial by the objective
    trials: list[TrialSummary]  # by id
    planner: PlannerVerdict


SUMMARY = Contract(SUMMARY_FILE, Summary)
