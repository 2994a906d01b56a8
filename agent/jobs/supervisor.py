"""The supervisor of one job (`python -m agent.jobs OUT TOKEN`, in a session of its own so that it outlives the
caller): it runs `python -m agent.cli train ... --out OUT` (or `sweep`) and watches it:

- a time limit (`timeout_s`) for the whole run, and a hang limit (`hang_s`): no new steps.jsonl line for that
  long after the first step (before it, data and tokenizer preparation may legitimately take minutes).
  A non-finite loss or an allocation failure needs no watching: the trainer stops and says so ("nan", "oom").

The supervisor stays detached on purpose (a resumed conversation or sweep adopts it), but its run dies with it:
the launcher is tied to the supervisor, torchrun to the launcher and the ranks to torchrun (trainer.host.lifeline),
so SIGKILL of the supervisor leaves nothing of its run behind."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

from agent.jobs.processes import MARKER, identity, kill_job_processes, send_signal
from agent.jobs.record import JOB, JOB_FILE, LOG_FILE, SWEEP, JobRecord, locked, read_job, record_state, update_job
from agent.jobs.status import POLL_S, end_owned, job_kind, job_results, last_step, verdict_of
from trainer.config import printed_error
from trainer.host import preemption
from trainer.host.lifeline import tied_env
from trainer.results.rundir import RunDir, StepsTail
from trainer.results.schemas import PREEMPTED

REPO = Path(__file__).resolve().parents[2]  # the checkout: the cwd and PYTHONPATH of what a job runs


def supervise(out: Path, env: dict | None = None, token: str | None = None) -> str:
    """Run the job written by `prepare_job` to its end, as its watchdog; returns the final state.

    `token` names the job this supervisor was started for: if the directory was since given to another job
    (a sweep restarted a lost trial), or another supervisor already claimed it, this one leaves it alone.
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
        launcher = subprocess.Popen(  # tied: the run dies with this supervisor
            job["command"],
            cwd=REPO,
            env=tied_env(child_env),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
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


def _watch(out: Path, job: JobRecord, launcher: subprocess.Popen, stopping: list[str]) -> tuple[str, str] | None:
    """Poll until the launcher exits (None) or the run must be stopped: (state, cause)."""
    steps = StepsTail(RunDir(out).steps)
    started = last_step_at = time.monotonic()
    seen_step = False
    while launcher.poll() is None:
        if stopping:
            return None if _preempted(job, launcher) else ("cancelled", stopping[0])
        if not out.is_dir():  # nobody can read or stop this run any more: do not leave it running
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


def _preempted(job: JobRecord, launcher: subprocess.Popen) -> bool:
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


def job_env(job: JobRecord, env: dict) -> dict[str, str]:
    child = {**os.environ, **env, MARKER: job["token"]}
    child["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), child.get("PYTHONPATH")]))
    if job["threads"] is not None:
        child["OMP_NUM_THREADS"] = str(job["threads"])
    if job["visible_devices"] is not None:
        child["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, job["visible_devices"]))
    return child
