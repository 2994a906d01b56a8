"""Sweeps started from the terminal UI, and the jobs that quitting must either cancel or leave running.

A sweep is a background job (agent.jobs.start_sweep), exactly as the agent's run_sweep starts one: sweeps/NAME
holds its record (job.json: the supervisor's pid and start time, its state), its output (job.log) and the sweep's
files, its trials are jobs of their own in sweeps/NAME/trials/. It goes on when the UI quits (detaching) or
crashes, and a later session finds it there, whoever started it, and can still stop it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from agent import jobs
from agent.approvals import resolve_in_repo
from agent.records import SUMMARY, SUMMARY_FILE
from trainer.config import ConfigError, load_experiment
from tui.runs import SWEEPS_DIR, RunInfo

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,79}$")


class SweepError(ConfigError):
    """A sweep that cannot start as asked, in one line."""


@dataclass(frozen=True)
class SweepRequest:
    experiment: Path  # absolute, inside the repository
    name: str  # the folder under sweeps/
    trials: int


@dataclass(frozen=True)
class BackgroundSweep:
    name: str
    out: str  # the sweep directory, relative to the repository
    experiment: str
    trials: int
    pid: int  # the job's supervisor: the sweep and its trials die with it
    pid_start: float | None  # jobs.start_time: tells the supervisor's pid from a later process that reuses it
    log: str

    def alive(self) -> bool:
        return bool(self.pid) and jobs.process_alive(self.pid, self.pid_start)


def check_request(repo: Path, experiment: str, name: str, trials: str) -> SweepRequest:
    """The launcher form's fields, checked before anything starts; raises SweepError (or ConfigError)."""
    path = check_experiment(repo, experiment)
    if not _NAME.match(name.strip()):
        raise SweepError(f"sweep name {name.strip()!r}: use letters, digits, dots, dashes and underscores")
    if (repo / SWEEPS_DIR / name.strip()).exists():
        raise SweepError(f"{SWEEPS_DIR}/{name.strip()} exists already; choose another name")
    return SweepRequest(path, name.strip(), parse_trials(trials))


def check_experiment(repo: Path, experiment: str) -> Path:
    """The experiment file, inside the repository and readable: a malformed one fails here, not in the background."""
    if not experiment.strip():
        raise SweepError("name the experiment file, e.g. meshpilot.yaml")
    path = resolve_in_repo(repo, experiment.strip())
    if not path.is_file():
        raise SweepError(f"no experiment file {experiment.strip()} in the repository")
    load_experiment(path)
    return path


def parse_trials(text: str) -> int:
    try:
        count = int(text.strip())
    except ValueError:
        raise SweepError(f"trials must be a whole number, got {text.strip()!r}") from None
    if count < 1:
        raise SweepError(f"a sweep needs at least one trial, got {count}")
    return count


def default_name(repo: Path, experiment: str = "meshpilot.yaml") -> str:
    """<experiment>-sweep-N with the first N not taken."""
    stem = Path(experiment).stem or "sweep"
    n = 1
    while (repo / SWEEPS_DIR / f"{stem}-sweep-{n}").exists():
        n += 1
    return f"{stem}-sweep-{n}"


def start_sweep(repo: Path, request: SweepRequest) -> BackgroundSweep:
    """Start the sweep as a background job; returns at once."""
    out = repo / SWEEPS_DIR / request.name
    jobs.start_sweep(request.experiment, out, trials=request.trials)
    return _sweep(repo, out, jobs.read_job(out))


def background_sweeps(repo: Path) -> list[BackgroundSweep]:
    """Every sweep job of the repository (the UI's and the agent's), running or not, by name."""
    found = []
    for out in sorted((repo / SWEEPS_DIR).glob("*/")):
        try:
            job = jobs.read_job(out)
        except (OSError, ValueError):
            continue  # unreadable: not ours to manage
        if job is not None and job.get("kind") == jobs.SWEEP:
            found.append(_sweep(repo, out, job))
    return found


def _sweep(repo: Path, out: Path, job: jobs.JobRecord) -> BackgroundSweep:
    experiment = Path(job["experiment"])
    if experiment.is_relative_to(repo.resolve()):
        experiment = experiment.relative_to(repo.resolve())
    return BackgroundSweep(
        name=out.name,
        out=f"{SWEEPS_DIR}/{out.name}",
        experiment=experiment.as_posix(),
        trials=job["trials"],
        pid=job["pid"] or 0,
        pid_start=job.get("pid_start"),
        log=f"{SWEEPS_DIR}/{out.name}/{jobs.LOG_FILE}",
    )


def sweep_outcome(repo: Path, sweep: BackgroundSweep) -> str:
    """One line on a sweep process that ended: its winner, or the error its log ends with."""
    try:
        summary = SUMMARY.read(repo / sweep.out / SUMMARY_FILE)
    except ValueError as e:  # its contract's one line: the file and the field
        return f"sweep {sweep.out} ended, but its summary cannot be read: {e}"
    if summary is not None:
        winner = summary["winner"]
        if winner:
            return f"sweep {sweep.out} finished: winner {winner}. Write its report with /report sweep={sweep.out}"
        return f"sweep {sweep.out} finished without a successful trial (see {sweep.out}/summary.json)"
    lines = (repo / sweep.log).read_text(errors="replace").strip().splitlines() if (repo / sweep.log).is_file() else []
    return f"sweep {sweep.out} stopped: {lines[-1] if lines else 'no output'} (log: {sweep.log})"


@dataclass(frozen=True)
class RunningJobs:
    """What would go on after the UI quits."""

    sweeps: tuple[BackgroundSweep, ...]
    runs: tuple[RunInfo, ...]

    def __bool__(self) -> bool:
        return bool(self.sweeps or self.runs)

    def describe(self) -> list[str]:
        lines = [f"sweep {s.out} ({s.trials} trials, pid {s.pid})" for s in self.sweeps]
        for run in self.runs:
            progress = f"step {run.step}/{run.steps}" if run.steps else f"step {run.step}"
            lines.append(f"{run.key}: {run.status}, {progress}")
        return lines


def running_jobs(repo: Path, runs: tuple[RunInfo, ...]) -> RunningJobs:
    return RunningJobs(tuple(s for s in background_sweeps(repo) if s.alive()), tuple(r for r in runs if r.active))


def cancel_jobs(repo: Path, running: RunningJobs) -> list[str]:
    """Stop the sweeps first (their trials with them), then every run; returns what was stopped."""
    stopped = [sweep.out for sweep in running.sweeps if jobs.cancel_run(repo / sweep.out)]
    for key in sorted({r.key for r in running.runs}):
        if (repo / key / jobs.JOB_FILE).is_file() and jobs.cancel_run(repo / key):
            stopped.append(key)
    return stopped
