"""Sweeps started from the terminal UI, and the jobs that quitting must either cancel or leave running.

A sweep runs as its own process, `meshpilot sweep EXPERIMENT --out sweeps/NAME --trials N`, in a session of its
own: it goes on when the UI quits (detaching) or crashes, exactly like `meshpilot sweep` started by hand, and a
later session can still stop it. Its record, .meshpilot/tui/sweeps/NAME.json (pid, the pid's start time, the
sweep directory), and its output, NAME.log, stay beside the agent's other files. The sweep's trials are ordinary
background jobs (agent.jobs) in sweeps/NAME/trials/.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from agent import jobs
from agent.approvals import resolve_in_repo
from agent.tools import STATE_DIR
from trainer.config import ConfigError, load_experiment
from trainer.rundir import write_json
from tui.runs import SWEEPS_DIR, RunInfo

MESHPILOT_ROOT = Path(__file__).resolve().parents[1]
RECORDS = Path(STATE_DIR) / "tui" / "sweeps"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,79}$")
STOP_WAIT_S = 10.0
# The sweep processes this process started, kept until they end: reaped here (no zombies), and Python does not
# warn about a process it would otherwise think was forgotten while it runs on by design.
_CHILDREN: dict[int, subprocess.Popen] = {}


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
    pid: int
    pid_start: float | None  # jobs.start_time: tells the sweep's pid from a later process that reuses it
    log: str

    def alive(self) -> bool:
        _reap(self.pid)  # a sweep this process started and that ended is a zombie until collected
        return jobs.process_alive(self.pid, self.pid_start)


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
    while (repo / SWEEPS_DIR / f"{stem}-sweep-{n}").exists() or (repo / RECORDS / f"{stem}-sweep-{n}.json").exists():
        n += 1
    return f"{stem}-sweep-{n}"


def start_sweep(repo: Path, request: SweepRequest) -> BackgroundSweep:
    """Start the sweep process and record it; returns at once."""
    records = repo / RECORDS
    records.mkdir(parents=True, exist_ok=True)
    out = repo / SWEEPS_DIR / request.name
    log = records / f"{request.name}.log"
    command = [sys.executable, "-m", "agent.cli", "sweep", str(request.experiment), "--out", str(out)]
    command += ["--trials", str(request.trials)]
    path = os.pathsep.join(filter(None, [str(MESHPILOT_ROOT), os.environ.get("PYTHONPATH")]))
    with log.open("w") as output:
        process = subprocess.Popen(
            command,
            cwd=repo,
            env={**os.environ, "PYTHONPATH": path},
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # outlives the UI, and the terminal's Ctrl-C does not reach it
        )
    _CHILDREN[process.pid] = process
    sweep = BackgroundSweep(
        name=request.name,
        out=f"{SWEEPS_DIR}/{request.name}",
        experiment=request.experiment.relative_to(repo.resolve()).as_posix(),
        trials=request.trials,
        pid=process.pid,
        pid_start=jobs.start_time(process.pid),
        log=log.relative_to(repo).as_posix(),
    )
    write_json(records / f"{request.name}.json", asdict(sweep))
    return sweep


def background_sweeps(repo: Path) -> list[BackgroundSweep]:
    """Every sweep the UI started in this repository, running or not, by name."""
    found = []
    for record in sorted((repo / RECORDS).glob("*.json")):
        try:
            found.append(BackgroundSweep(**json.loads(record.read_text())))
        except (OSError, ValueError, TypeError):
            continue  # a record from another version, or half-written by a crash: not ours to manage
    return found


def sweep_outcome(repo: Path, sweep: BackgroundSweep) -> str:
    """One line on a sweep process that ended: its winner, or the error its log ends with."""
    summary = repo / sweep.out / "summary.json"
    if summary.is_file():
        winner = json.loads(summary.read_text()).get("winner")
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
    """Stop the sweeps first (so that they start no new trial), then every run; returns what was stopped."""
    stopped = []
    for sweep in running.sweeps:
        _stop_process(sweep)
        stopped.append(sweep.out)
    # A stopped sweep may have started a trial since `running` was taken: look again.
    keys = {r.key for r in running.runs}
    for sweep in running.sweeps:
        keys |= {f"{sweep.out}/trials/{d.name}" for d in (repo / sweep.out / "trials").glob("*/")}
    for key in sorted(keys):
        if (repo / key / jobs.JOB_FILE).is_file() and jobs.cancel_run(repo / key):
            stopped.append(key)
    return stopped


def _stop_process(sweep: BackgroundSweep) -> None:
    """SIGTERM (the sweep is built to be killed at any moment and resumed), SIGKILL if it lingers."""
    if not sweep.alive():
        return
    _signal(sweep.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_WAIT_S
    while sweep.alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    if sweep.alive():
        _signal(sweep.pid, signal.SIGKILL)


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # it ended by itself in the meantime
        os.kill(pid, sig)


def _reap(pid: int) -> None:
    """Collect the exit status of a sweep this process started, so that it does not linger as a zombie."""
    child = _CHILDREN.get(pid)
    if child is not None and child.poll() is not None:
        del _CHILDREN[pid]
