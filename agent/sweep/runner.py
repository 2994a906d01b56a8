"""The sweep's loop: ask optuna for trials, start them on free devices, watch them, tell optuna how they ended.

The trial directories are the truth; the study is the sampler's memory. A sweep killed at any moment leaves
optuna trials in state RUNNING. Resuming, each is finished from its directory if its job ended meanwhile
(jobs outlive the sweep), watched again if its job still runs, and otherwise started again from an empty
directory under the same trial number, so it gets the same parameters. A trial with a result is never run
twice. A preempted trial (its run stopped by SIGTERM or SIGUSR1, trainer.host.preemption) has no result yet: it is
neither failed nor told to optuna, and runs on from the checkpoint its preemption saved (the trainer's --resume),
whether the sweep saw it preempted or finds it so when resumed. The sweep itself preempted (SIGTERM or SIGUSR1, as a
scheduler sends it) preempts its running trials, waits for them to save, and raises SweepPreempted: `--resume`
continues it, and them.

Each trial's directory holds the sweep's record of it, trial.json (TrialRecord, through TRIAL): its point, its
parameters as the summary shows them, and exactly what its job was started with, `--set` overrides included, so
nothing downstream rebuilds them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import shutil
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from optuna.trial import Trial, TrialState
from pydantic import Field

from agent import jobs
from agent.records import TRIAL, TRIAL_FILE, Params, TrialRequest
from agent.sweep.study import suggest, trial_id
from trainer.host import preemption
from trainer.rank.trackers import RUN_GROUP_ENV, RUN_NAME_ENV
from trainer.results.rundir import RunDir, StepsTail, tokens_per_s, untimed_steps
from trainer.results.schemas import PREEMPTED, StepRecord

if TYPE_CHECKING:  # the space imports torch (the planner's data): readers of trial.json need neither
    import optuna
    from optuna.trial import FrozenTrial

    from agent.sweep.executors import Executor
    from agent.sweep.space import Space

# Between two looks at the running trials (their job files, new steps): a poll costs well under a millisecond, and
# a trial that ended is told and its devices handed on at the next one, so a sweep waits for each trial's end
# half of this on average.
POLL_S = 0.1
# How long a preempted sweep waits for its trials beyond their runs' grace period (their saves): their exits.
PREEMPT_MARGIN_S = 60.0
# How many times one sweep starts a preempted trial again: past it, the trial fails rather than loop for ever on a
# node that preempts it every time (each start costs its warm-up and a checkpoint load).
MAX_TRIAL_RESTARTS = 3


class SweepPreempted(Exception):
    """The sweep stopped on a preemption signal; its running trials were preempted (`trials`, by id); `unsaved`:
    those that did not end preempted with a checkpoint, and how they ended instead."""

    def __init__(self, signum: int, trials: list[str], unsaved: dict[str, str] | None = None):
        self.signum, self.trials, self.unsaved = signum, trials, unsaved or {}
        name = preemption.name(signum)
        if not self.unsaved:
            listed = ", ".join(trials) or "none was running"
            super().__init__(
                f"sweep preempted by {name}; its trials preempted with it ({listed}) saved checkpoints: --resume "
                "continues the sweep and them"
            )
            return
        saved = ", ".join(t for t in trials if t not in self.unsaved) or "none"
        others = "; ".join(f"{trial} {how}" for trial, how in self.unsaved.items())
        super().__init__(
            f"sweep preempted by {name}; of its trials preempted with it, saved checkpoints: {saved}; did not: "
            f"{others}. --resume continues the sweep"
        )


AtLeastOne = Annotated[int, Field(ge=1)]


@dataclass
class Settings:
    """What every trial shares (from sweep.json)."""

    experiment: Path
    objective: str  # tokens_per_s | final_loss
    trial_steps: int
    timing_warmup_steps: int
    budget: int  # distinct trials to run
    max_parallel: int
    device_type: str
    device_ids: list[int]
    timeout_s: float | None
    hang_s: float | None
    env: dict[str, str] = field(default_factory=dict)
    trackers: list[str] | None = None  # what every trial logs to instead of the experiment's train.trackers

    @property
    def timed_after(self) -> int:
        """The warm-up steps tokens/s leaves out, as the trainer times it: none when a trial is no longer."""
        return untimed_steps(self.trial_steps, self.timing_warmup_steps)


def tokens_per_s_so_far(steps: list[StepRecord], warmup: int) -> float | None:
    """Tokens/s of the steps.jsonl records after the first `warmup` steps, as metrics.json will have it; None
    while there are none."""
    return tokens_per_s([s for s in steps if s["step"] > warmup])


@dataclass(frozen=True)
class TrialProgress:
    """One trial as the sweep's progress shows it."""

    id: str
    layout: dict[str, int]
    state: str  # "running", or how it ended (trainer.results.rundir.RUN_STATUSES)
    step: int  # the last step in its steps.jsonl; 0 before the first
    steps: int  # the steps every trial runs
    tokens_per_s: float | None  # the trainer's figure once it ended, else measured so far (None in the warm-up)
    cause: str | None = None


@dataclass(frozen=True)
class SweepProgress:
    """What the runner hands its progress callback at every poll: plain data, for a terminal or anything else."""

    total: int  # distinct trials the sweep runs
    done: int  # of them, ended in any state (this run of the sweep or an earlier one)
    failed: int
    running: tuple[TrialProgress, ...]
    ended: tuple[TrialProgress, ...]  # since the previous call, in the order they ended
    over: bool  # the last call: the sweep has nothing left to run


class DevicePool:
    """The devices trials share: each running trial holds a disjoint set, so together they never ask for more
    devices than there are. Lowest ids first; a trial that does not fit waits."""

    def __init__(self, device_ids: list[int]):
        self.free = sorted(device_ids)

    def take(self, count: int) -> list[int] | None:
        if count > len(self.free):
            return None
        taken, self.free = self.free[:count], self.free[count:]
        return taken

    def claim(self, devices: list[int]) -> None:
        """Mark devices a trial started by an earlier run of the sweep still holds."""
        self.free = [d for d in self.free if d not in devices]

    def give(self, devices: list[int]) -> None:
        self.free = sorted({*self.free, *devices})


@dataclass
class Active:
    trial: Trial
    id: str
    directory: Path
    nproc: int
    request: dict[str, Any]  # start_run's arguments
    settings: list[str]  # the overrides that make this trial (TrialRecord.settings)
    devices: list[int] | None = None  # None: waiting for devices
    reported: set[int] = field(default_factory=set)
    steps: list[StepRecord] = field(default_factory=list)  # its steps.jsonl so far, read by `tail`
    resume: bool = False  # its next start continues its run from the run's checkpoint (a preempted trial)
    restarts: int = 0  # times this sweep started it again after a preemption
    tail: StepsTail = field(init=False)

    def __post_init__(self) -> None:
        self.tail = StepsTail(RunDir(self.directory).steps)

    def follow(self) -> None:
        records, reset = self.tail.read()
        if reset:  # a trial run again from an empty directory
            self.steps.clear()
        self.steps.extend(records)


ProgressCallback = Callable[[SweepProgress], None]


class Runner:
    """`progress`, when given, is called at every poll (the loop wakes up anyway): the runner prints nothing."""

    def __init__(
        self,
        directory: Path,
        space: Space,
        study: optuna.Study,
        executor: Executor,
        settings: Settings,
        progress: ProgressCallback | None = None,
    ):
        self.directory, self.space, self.study, self.executor, self.settings = (
            directory,
            space,
            study,
            executor,
            settings,
        )
        self.devices = DevicePool(settings.device_ids)
        self.active: list[Active] = []
        self.progress = progress
        self.ended: list[TrialProgress] = []  # since the last progress call
        self.preempted: list[int] = []  # the preemption signal, once one came

    def run(self) -> None:
        with _noting_preemption(self.preempted):
            self._reattach()
            while True:
                if self.preempted:
                    self._preempt_trials()
                self._poll()
                self._start_waiting()
                self._ask()
                self._show_progress()
                if not self.active:
                    return
                time.sleep(POLL_S)

    def _preempt_trials(self) -> None:
        """Preempt every trial that was started (each saves a checkpoint and ends "preempted", unless it ends
        otherwise first), wait for them, and raise SweepPreempted. Optuna hears nothing: they are not over."""
        started = [a for a in self.active if a.devices is not None]
        for active in started:
            self.executor.preempt(active.directory)
        wait_s = preemption.grace_s() + PREEMPT_MARGIN_S
        deadline = time.monotonic() + wait_s
        waiting = started
        while waiting and time.monotonic() < deadline:
            waiting = [a for a in waiting if self.executor.status(a.directory)["state"] not in jobs.TERMINAL]
            time.sleep(POLL_S)
        unsaved = {}
        for active in started:
            how = _unsaved(self.executor.status(active.directory), wait_s)
            if how is not None:
                unsaved[active.id] = how
        raise SweepPreempted(self.preempted[0], [a.id for a in started], unsaved)

    # -- trials from a previous run of this sweep

    def _reattach(self) -> None:
        for frozen in self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            # No public call takes up a running trial again; study.ask builds its Trial from the storage id too.
            trial = Trial(self.study, frozen._trial_id)
            active = self._prepare(trial)
            if active is None:
                continue
            active.reported = set(frozen.intermediate_values)
            outcome = self._outcome(active.directory)
            if outcome == "ended":
                status = self.executor.status(active.directory)
                jobs.record_state(active.directory, status["state"], status["cause"])  # if its supervisor died
                self._tell(active, status)
            elif outcome == "going":
                active.devices = self._take_recorded(active)
                self.active.append(active)
            else:  # never started, or its job died without a result: run it afresh
                job = jobs.read_job(active.directory)
                if job is not None:
                    jobs.kill_job_processes(job["token"])  # whatever its dead supervisor left behind
                shutil.rmtree(active.directory, ignore_errors=True)
                self.active.append(active)

    def _outcome(self, directory: Path) -> str:
        """ "ended" (a verdict its job recorded, or the trainer's results), "going", or "lost"."""
        job = jobs.read_job(directory)
        if job is None:
            return "lost"
        status = self.executor.status(directory)
        if status["state"] in ("queued", "running"):
            return "going"
        # A killed job left no verdict: like a lost one, its trial runs again.
        recorded = jobs.read_job(directory)["state"] in jobs.TERMINAL and status["state"] != jobs.KILLED
        return "ended" if recorded or status["metrics"] is not None else "lost"

    def _take_recorded(self, active: Active) -> list[int]:
        record = TRIAL.read(active.directory / TRIAL_FILE)
        devices = record["devices"] if record is not None else []
        self.devices.claim(devices)
        return devices

    # -- new trials

    def _ask(self) -> None:
        duplicates = 0
        while len(self.active) < self.settings.max_parallel and self._distinct() < self.settings.budget:
            trial = self.study.ask()
            active = self._prepare(trial)
            if active is not None:
                self.active.append(active)
            else:
                duplicates += 1
                if duplicates > 100:  # the sampler keeps proposing what ran: nothing new left to try
                    self.settings.budget = self._distinct()

    def _distinct(self) -> int:
        return len(self._distinct_trials())

    def _distinct_trials(self) -> list[FrozenTrial]:
        """The trials that run (or ran): not those told a duplicate's result, nor asked and not yet named."""
        trials = self.study.get_trials(deepcopy=False)
        return [t for t in trials if "trial_id" in t.user_attrs and "duplicate_of" not in t.user_attrs]

    def _prepare(self, trial: Trial) -> Active | None:
        """The trial's parameters, id and request; None for a duplicate of a trial that already has an id."""
        point_id, continuous = suggest(trial, self.space)
        tid = trial_id(point_id, continuous)
        owner = [t for t in self.study.get_trials(deepcopy=False) if t.user_attrs.get("trial_id") == tid]
        if any(t.number != trial.number and "duplicate_of" not in t.user_attrs for t in owner):
            self._tell_duplicate(trial, tid)
            return None
        trial.set_user_attr("trial_id", tid)
        point = self.space.point(point_id)
        directory = self.directory / "trials" / tid
        overrides = point.overrides(continuous)  # its settings, then what no trial keeps (checkpoints)
        if self.settings.trackers is not None:
            overrides.append(f"train.trackers={json.dumps(self.settings.trackers)}")
        # Each trial is a tracker run of its own, named by the sweep and the trial, grouped by the sweep.
        sweep = self.directory.name
        request = {
            "experiment": self.settings.experiment,
            "nproc": point.nproc,
            "layout": point.layout_arg,
            "steps": self.settings.trial_steps,
            "overrides": overrides,
            "timeout_s": self.settings.timeout_s,
            "hang_s": self.settings.hang_s,
            "env": {**self.settings.env, RUN_NAME_ENV: f"{sweep}/{tid}", RUN_GROUP_ENV: sweep},
        }
        return Active(trial, tid, directory, point.nproc, request, point.settings(continuous))

    def _tell_duplicate(self, trial: Trial, tid: str) -> None:
        """TPE may propose a point that ran: tell it that trial's result instead of running it again."""
        trial.set_user_attr("duplicate_of", tid)
        original = next(
            t
            for t in self.study.get_trials(deepcopy=False)
            if t.user_attrs.get("trial_id") == tid and "duplicate_of" not in t.user_attrs
        )
        if original.state == TrialState.COMPLETE:
            self.study.tell(trial, original.value)
        else:
            self.study.tell(trial, state=TrialState.FAIL)

    # -- running trials

    def _start_waiting(self) -> None:
        if self.preempted:  # a trial that ended preempted meanwhile waits for the sweep's --resume
            return
        for active in self.active:
            if active.devices is not None:
                continue
            devices = self._take(active.nproc)
            if devices is None:
                return  # first come, first served: a large trial is not starved by small ones
            active.devices = devices
            record = {
                "id": active.id,
                "number": active.trial.number,
                "point": active.trial.params["point"],
                "params": self._params(active),
                "settings": active.settings,
                "request": _recorded(active.request),
                "devices": devices,
            }
            active.directory.mkdir(parents=True, exist_ok=True)
            TRIAL.write(active.directory / TRIAL_FILE, record)
            request = {**active.request, "resume": True} if active.resume else active.request
            self.executor.start(active.directory, request, devices, self.settings.device_type)

    def _params(self, active: Active) -> Params:
        continuous = {k: v for k, v in active.trial.params.items() if k != "point"}
        return self.space.point(active.trial.params["point"]).params(continuous)

    def _take(self, count: int) -> list[int] | None:
        return self.devices.take(count) if self.executor.shares_devices else []

    def _poll(self) -> None:
        for active in [a for a in self.active if a.devices is not None]:
            status = self.executor.status(active.directory)
            if status["state"] not in jobs.TERMINAL:
                self._report(active)
                status = self.executor.status(active.directory)
            if status["state"] in jobs.TERMINAL:
                self._tell(active, status)

    def _report(self, active: Active) -> None:
        """Give optuna the objective so far at each new step; stop the trial when the pruner says so."""
        active.follow()
        steps = active.steps
        for index, record in enumerate(steps):
            step = record["step"]
            if step in active.reported:
                continue
            value = self._value_so_far(steps[: index + 1])
            if value is None:
                continue
            active.trial.report(value, step)
            active.reported.add(step)
            if active.trial.should_prune():
                objective = self.settings.objective
                cause = f"stopped at step {step}: {objective} {value:.4g} is clearly worse than a finished trial's"
                self.executor.cancel(active.directory, "pruned", cause)
                return

    def _value_so_far(self, steps: list[StepRecord]) -> float | None:
        last = steps[-1]
        if self.settings.objective == "final_loss":
            return last["loss"] if math.isfinite(last["loss"]) else None
        return tokens_per_s_so_far(steps, self.settings.timed_after)

    def _tell(self, active: Active, status: dict) -> None:
        state, metrics = status["state"], status["metrics"] or {}
        if state == PREEMPTED and active.restarts < MAX_TRIAL_RESTARTS:
            active.restarts += 1
            self._continue(active, metrics)
            return
        if state == PREEMPTED:
            cause = f"preempted again with its {active.restarts} restarts used (MAX_TRIAL_RESTARTS): not started again"
            status = {**status, "state": "failed", "cause": cause}
            jobs.update_job(active.directory, cause=status["cause"])
            state = "failed"
        value = metrics.get(self.settings.objective) if state == "ok" else None
        if state == "ok" and value is not None and math.isfinite(value):
            self.study.tell(active.trial, value)
        elif state == "pruned":
            self.study.tell(active.trial, state=TrialState.PRUNED)
        else:
            self.study.tell(active.trial, state=TrialState.FAIL)
        if active in self.active:
            self.active.remove(active)
        if active.devices:
            self.devices.give(active.devices)
        if self.progress is not None:
            active.follow()  # the steps written since the last poll
            self.ended.append(self._trial_progress(active, state, metrics.get("tokens_per_s"), status["cause"]))

    def _continue(self, active: Active, metrics: dict) -> None:
        """Start a preempted trial again: from the checkpoint its preemption saved, or afresh where it saved none
        (preempted in its first step, or with no time left to save). Optuna hears nothing until it ends."""
        if active.devices:
            self.devices.give(active.devices)
        active.devices = None  # waits for devices like a new trial, in its place in the queue
        active.resume = bool(metrics.get("resume_from"))
        if active.resume:
            # The resumed run writes its own metrics.json; one that fails before it does must not read as preempted
            # again (and be started again), but as the failure its job records.
            RunDir(active.directory).metrics.unlink(missing_ok=True)
        else:
            shutil.rmtree(active.directory, ignore_errors=True)
        if active not in self.active:
            self.active.append(active)

    # -- progress

    def _show_progress(self) -> None:
        if self.progress is None:
            return
        distinct = self._distinct_trials()
        running = [a for a in self.active if a.devices is not None]
        warmup = self.settings.timed_after
        progress = SweepProgress(
            total=self.settings.budget,
            done=sum(t.state.is_finished() for t in distinct),
            failed=sum(t.state == TrialState.FAIL for t in distinct),
            running=tuple(self._trial_progress(a, "running", tokens_per_s_so_far(a.steps, warmup)) for a in running),
            ended=tuple(self.ended),
            over=not self.active,
        )
        self.ended = []
        self.progress(progress)

    def _trial_progress(
        self, active: Active, state: str, speed: float | None, cause: str | None = None
    ) -> TrialProgress:
        return TrialProgress(
            id=active.id,
            layout=self.space.point(active.trial.params["point"]).layout,
            state=state,
            step=active.steps[-1]["step"] if active.steps else 0,
            steps=self.settings.trial_steps,
            tokens_per_s=speed,
            cause=cause,
        )


def _unsaved(status: dict, waited_s: float) -> str | None:
    """How a trial the sweep preempted ended, where not preempted with a checkpoint (None where it did)."""
    if status["state"] not in jobs.TERMINAL:
        return f"(still {status['state']} after {waited_s:g} s)"
    if status["state"] != PREEMPTED:
        return f"(ended {status['state']}: {status['cause']})"
    if not (status["metrics"] or {}).get("resume_from"):
        return "(preempted before its first checkpoint: it starts again from step 0)"
    return None


@contextlib.contextmanager
def _noting_preemption(noted: list[int]):
    """While the sweep runs, SIGTERM and SIGUSR1 (trainer.host.preemption.SIGNALS) are noted in `noted` instead of
    ending it at once. Only in the main thread, where Python runs signal handlers (a sweep in another thread is
    stopped by whoever runs it)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.signal(signum, lambda number, _: noted.append(number)) for signum in preemption.SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _recorded(request: dict[str, Any]) -> TrialRequest:
    """A trial's request as its record holds it: the environment by its names (its values may be secrets)."""
    kept = {key: value for key, value in request.items() if key != "env"}
    return {**kept, "experiment": str(request["experiment"]), "env_keys": sorted(request.get("env") or {})}


def settings_from(sweep: dict[str, Any], max_parallel: int, env: dict | None) -> Settings:
    names = {f.name for f in dataclasses.fields(Settings)}
    values = {k: v for k, v in sweep.items() if k in names}
    values |= {"experiment": Path(sweep["experiment"]), "max_parallel": max_parallel, "env": dict(env or {})}
    return Settings(**values)
