"""The supervisor of one job (`python -m agent.jobs OUT TOKEN`, in a session of its own so that it outlives the
caller): it runs `python -m agent.cli train ... --out OUT` (or `sweep`) and watches it. A supervisor forked from a
forkserver (a sweep's trial, agent.jobs.forkserver) forks its launcher too, which then starts with torch imported.

The watch:

- a time limit (`timeout_s`) for the whole run, and a hang limit (`hang_s`): no new steps.jsonl line for that
  long after the first step (before it, data and tokenizer preparation may legitimately take minutes).
  A non-finite loss or an allocation failure needs no watching: the trainer stops and says so ("nan", "oom").

The supervisor stays detached on purpose (a resumed conversation or sweep adopts it), but its run dies with it:
the launcher is tied to the supervisor, torchrun to the launcher and the ranks to torchrun (trainer.host.lifeline),
so SIGKILL of the supervisor leaves nothing of its run behind."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import runpy
import signal
import subprocess
import sys
import time
from functools import partial
from pathlib import Path
from typing import IO

from agent.jobs.processes import MARKER, identity, kill_job_processes, send_signal
from agent.jobs.record import JOB, JOB_FILE, LOG_FILE, SWEEP, JobRecord, locked, read_job, record_state, update_job
from agent.jobs.status import POLL_S, end_owned, job_kind, job_results, last_step, verdict_of
from trainer.config import printed_error
from trainer.host import preemption
from trainer.host.lifeline import tied_env
from trainer.host.preload import run_and_exit, take_over
from trainer.launch.torchrun import Forked
from trainer.results.rundir import RunDir, StepsTail
from trainer.results.schemas import PREEMPTED

REPO = Path(__file__).resolve().parents[2]  # the checkout: the cwd and PYTHONPATH of what a job runs
Launcher = subprocess.Popen | Forked  # a job's launcher, spawned or forked (`_start_launcher`)


def supervise(out: Path, env: dict | None = None, token: str | None = None, fork_launcher: bool = False) -> str:
    """Run the job written by `prepare_job` to its end, as its watchdog; returns the final state.

    `token` names the job this supervisor was started for: if the directory was since given to another job
    (a sweep restarted a lost trial), or another supervisor already claimed it, this one leaves it alone.
    `fork_launcher`: this process has the launcher's imports (agent.jobs.forkserver) and forks it from itself.
    """
    out = Path(out)
    with locked(out):
        job = read_job(out)
        if job is None or job["state"] != "queued" or (token is not None and job["token"] != token):
            return job["state"] if job else "failed"
        JOB.write(out / JOB_FILE, {**job, "state": "running", **identity()})
    if job["cpus"]:
        os.sched_setaffinity(0, job["cpus"])
    child_env = job_env(job, env or {})
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append("the supervisor received SIGTERM"))
    with (out / LOG_FILE).open("a") as log:
        launcher = _start_launcher(job["command"], tied_env(child_env), log, fork_launcher)  # tied: dies with this
        update_job(out, launcher_pid=launcher.pid)
        verdict = _watch(out, job, launcher, stopping)
    if verdict is not None:
        kill_job_processes(job["token"])
        launcher.wait()
        if out.is_dir():
            record_state(out, *verdict)
            end_owned(out, job, verdict[0])
    else:
        state, cause = _outcome(out, job, launcher.returncode)
        if stopping and state not in ("ok", PREEMPTED):  # stopped (SIGTERM) as its launcher exited: the stop is why
            state, cause = "cancelled", stopping[0]
        record_state(out, state, cause)
    return read_job(out)["state"]


def _start_launcher(command: list[str], env: dict[str, str], log: IO, fork: bool) -> Launcher:
    """The job's launcher, `command` run in `env` with its output into `log`: forked from this process where `fork`
    says it has the imports and `command` is meshpilot's own (a resumed job's may name another interpreter)."""
    if not (fork and command[:3] == [sys.executable, "-m", "agent.cli"]):
        return subprocess.Popen(
            command, cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
        )
    sys.stdout.flush()
    sys.stderr.flush()
    launcher = partial(_forked_launcher, command[3:], env, log.fileno())
    process = multiprocessing.get_context("fork").Process(target=run_and_exit, args=(launcher,))
    process.start()
    return Forked(process)


def _forked_launcher(args: list[str], env: dict[str, str], log_fd: int) -> int:
    """In the forked launcher (run_and_exit's body): `python -m agent.cli ARGS` run from the checkout in `env`."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # this supervisor's handler is not the launcher's
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    take_over(env, REPO)
    sys.argv = [str(REPO / "agent" / "cli.py"), *args]
    print(f"meshpilot: launcher pid {os.getpid()} forked from its supervisor, imports preloaded", flush=True)
    # The command line run as `python -m` runs it (its exit included), not imported: the CLI is above the jobs.
    runpy.run_module("agent.cli", run_name="__main__", alter_sys=True)
    return 0


def _watch(out: Path, job: JobRecord, launcher: Launcher, stopping: list[str]) -> tuple[str, str] | None:
    """Poll until the launcher exits (None) or the run must be stopped: (state, cause)."""
    steps = StepsTail(RunDir(out).steps)
    directory = _directory(out)
    started = last_step_at = time.monotonic()
    seen_step = False
    while launcher.poll() is None:
        if stopping:
            return None if _preempted(job, launcher) else ("cancelled", stopping[0])
        # Removed: nobody can read or stop this run any more, do not leave it running. Made again since (the launcher
        # makes the run's directory where it is missing) it is another directory, which holds nothing of the job.
        if _directory(out) != directory:
            return "cancelled", "its run directory was removed"
        if steps.read()[0]:
            seen_step, last_step_at = True, time.monotonic()
        now = time.monotonic()
        if job["timeout_s"] is not None and now - started > job["timeout_s"]:
            return "timeout", f"ran past its time limit of {job['timeout_s']:g}s"
        if job["hang_s"] is not None and seen_step and now - last_step_at > job["hang_s"] and not _ending(out):
            return "timeout", f"hang: no new step for {job['hang_s']:g}s after step {last_step(RunDir(out))}"
        with contextlib.suppress(subprocess.TimeoutExpired):
            launcher.wait(timeout=POLL_S)  # a poll's pause that ends at once when the launcher exits
    return None


def _directory(out: Path) -> tuple[int, int] | None:
    """Which directory `out` is (device and inode), None where there is none."""
    try:
        found = out.stat()
    except FileNotFoundError:
        return None
    return (found.st_dev, found.st_ino) if out.is_dir() else None


def _preempted(job: JobRecord, launcher: Launcher) -> bool:
    """SIGTERM reached the supervisor (from a scheduler, alone or with the rest of the job): a run's launcher gets it
    too and, given the time, saves a checkpoint and ends as "preempted" (trainer.host.preemption); a sweep preempts
    its running trials so and waits for them (agent.sweep.runner). Whether it ended so."""
    send_signal(launcher.pid, signal.SIGTERM)  # a second one, where the scheduler's reached it too, changes nothing
    # A run's save, then the ranks' and the launcher's exits; a sweep's trials', and the sweep's own margin for them.
    wait_s = preemption.grace_s() + (90 if job_kind(job) == SWEEP else 10)
    try:
        launcher.wait(timeout=wait_s)
    except subprocess.TimeoutExpired:
        return False
    return True


def _ending(out: Path) -> bool:
    """A run that wrote its results or whose rank recorded a failure is shutting down, not hung: on a loaded machine
    that can outlast hang_s, and its own verdict (e.g. "nan") must stand. The time limit still applies."""
    run = RunDir(out)
    return run.metrics.is_file() or any(run.path.glob("failure.rank*.json"))


def _outcome(out: Path, job: JobRecord, returncode: int) -> tuple[str, str | None]:
    """The state of a job whose launcher exited by itself."""
    kind = job_kind(job)
    results = job_results(out, kind)
    if results is not None:
        return verdict_of(kind, results)
    if kind == SWEEP and returncode in [128 + signum for signum in preemption.SIGNALS]:
        signal_name = preemption.name(returncode - 128)
        return PREEMPTED, f"preempted by {signal_name} with its running trials; its --resume continues them"
    log = (out / LOG_FILE).read_text(errors="replace").splitlines() if (out / LOG_FILE).is_file() else []
    errors = [error for line in log if (error := printed_error(line)) is not None]
    if errors:
        return "failed", errors[-1]
    return "failed", f"the launcher exited with code {returncode} and wrote no results (see {LOG_FILE})"


def process_env(env: dict) -> dict[str, str]:
    """This process's environment with `env` on top, for a process that runs meshpilot from the checkout."""
    child = {**os.environ, **env}
    child["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), child.get("PYTHONPATH")]))
    return child


def job_env(job: JobRecord, env: dict) -> dict[str, str]:
    child = {**process_env(env), MARKER: job["token"]}
    if job["threads"] is not None:
        child["OMP_NUM_THREADS"] = str(job["threads"])
    if job["visible_devices"] is not None:
        child["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, job["visible_devices"]))
    return child
