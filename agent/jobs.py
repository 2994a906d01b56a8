"""A training run or a sweep as a background job: `start_run` and `start_sweep` return at once, the logs and results
land on disk.

Each job has a tiny supervisor process (`python -m agent.jobs OUT TOKEN`, in a session of its own so it outlives
the caller) that runs `python -m agent.cli train ... --out OUT` (or `sweep`) and watches it:

- a time limit (`timeout_s`) for the whole run, and a hang limit (`hang_s`): no new steps.jsonl line for that
  long after the first step (before it, data and tokenizer preparation may legitimately take minutes).
  A non-finite loss or an allocation failure needs no watching: the trainer stops and says so ("nan", "oom").

The supervisor stays detached on purpose (a resumed conversation or sweep adopts it), but its run dies with it:
the launcher is tied to the supervisor, torchrun to the launcher and the ranks to torchrun (trainer.host.lifeline),
so SIGKILL of the supervisor leaves nothing of its run behind. A process of a job may leave the job's process
group (a session of its own, a reparented orphan), so killing the group alone could miss it: every process of a
job also inherits an environment variable naming the job (MESHPILOT_JOB), and stopping a job kills every process
that carries it, whatever its session or parent (found through psutil).

A sweep job starts its trials as jobs of their own, and a job started from inside another job belongs to it: its
supervisor is tied to the process that started it (SIGKILL of the sweep's supervisor takes the sweep, every trial
supervisor and every trial's run with it), and its processes also carry the outer job's token (MESHPILOT_OWNERS), so
stopping the sweep finds them. A sweep started by hand (`meshpilot sweep`) is in no job: its trials outlive it, and
the sweep resumed adopts them.

OUT/job.json is the job's record: the command, the supervisor's pid, pgid and host, and once the run ended its
state ("ok", "failed", "oom", "timeout", "nan", "cancelled", "pruned" for a sweep trial stopped early,
"preempted" for a run that SIGTERM stopped after saving a checkpoint, which `--resume` continues, or "killed"
when the supervisor died before the run ended) and cause. Several processes update it (the supervisor,
`cancel_run`, the first reader to find the supervisor dead), always under a file lock. A sweep's record says
"kind": "sweep" and its result is summary.json, a run's metrics.json (a run's record has no kind, so that those
written before sweeps were jobs read the same). Its schema is JobRecord: every write and read goes through JOB.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Annotated, Any, Literal, NotRequired

import psutil
from filelock import FileLock
from pydantic import Field
from typing_extensions import TypedDict

from agent.records import SUMMARY, JobState, Summary
from trainer.config import ConfigError, load_experiment, printed_error
from trainer.host import preemption
from trainer.host.lifeline import PARENT_ENV, tie_to_parent, tied_env
from trainer.layout import Layout, LayoutError
from trainer.results.contracts import STRICT, Contract
from trainer.results.rundir import RunDir, StepsTail
from trainer.results.schemas import PREEMPTED, RUN_STATUSES, STEPS, Metrics

REPO = Path(__file__).resolve().parents[1]
MARKER = "MESHPILOT_JOB"  # inherited by every process of a job: how a job's processes are found
OWNERS = "MESHPILOT_OWNERS"  # the tokens of the jobs a job was started from, comma-separated (a trial's sweep)
JOB_FILE = "job.json"
LOG_FILE = "job.log"  # what the launcher (and the supervisor) printed
LOCK_FILE = ".job.lock"
SWEEP = "sweep"  # job.json's "kind" of a sweep job
RESULTS = {"run": "metrics.json", SWEEP: "summary.json"}  # what a job of each kind writes when it ended
KILLED = "killed"  # the supervisor died (SIGKILL, a lost machine) before the run ended: no verdict, no results
TERMINAL = RUN_STATUSES
POLL_S = 0.5

Seconds = Annotated[float, Field(gt=0)]
# A process's start time (start_time): seconds since boot; an int is clock ticks, as records held before psutil.
StartTime = int | float | None


class Identity(TypedDict):
    """A process that wrote a job record: how a reader tells whether it still lives (process_alive)."""

    __pydantic_config__ = STRICT
    pid: Annotated[int, Field(ge=1)]
    pgid: int
    host: str
    pid_start: StartTime


class SubmititJob(TypedDict):
    """Where an executor other than this machine's placed the job (agent.sweep.executors)."""

    __pydantic_config__ = STRICT
    kind: Literal["submitit"]
    cluster: Literal["slurm", "local"]
    job_id: str  # SLURM's job id, or submitit's local controller's pid


class JobRecord(TypedDict):
    """job.json: a run's or a sweep's background job, from the request to its verdict."""

    __pydantic_config__ = STRICT
    run_id: str  # the directory's name
    token: str  # MESHPILOT_JOB of every process of the job
    command: list[str]  # what the supervisor runs
    started: float  # time.time() when it was prepared
    steps: Annotated[int, Field(ge=0)] | None  # a run's optimizer steps
    timeout_s: Seconds | None
    hang_s: Seconds | None
    cpus: list[Annotated[int, Field(ge=0)]] | None
    visible_devices: list[int | str] | None  # CUDA_VISIBLE_DEVICES entries
    threads: Annotated[int, Field(ge=1)] | None  # OMP_NUM_THREADS of a pinned job
    env_keys: list[str]  # the names of the variables added to its environment: values may be secrets
    kind: NotRequired[Literal["run", "sweep"]]  # absent: a run (records from before sweeps were jobs)
    experiment: NotRequired[str]  # a sweep's
    trials: NotRequired[Annotated[int, Field(ge=1)]]  # a sweep's
    state: JobState
    cause: str | None  # why it ended so, in one line
    creator: Identity  # the process that prepared it and starts its supervisor
    executor: SubmititJob | None  # None: a supervisor on this machine
    pid: int | None  # the supervisor, once started
    pgid: int | None
    host: str | None
    pid_start: NotRequired[StartTime]
    launcher_pid: NotRequired[int]  # the `meshpilot train` (or `sweep`) the supervisor started
    ended: NotRequired[float]  # time.time() when its verdict was recorded


JOB = Contract(JOB_FILE, JobRecord)


def start_run(experiment: Path, out: Path, **options: Any) -> str:
    """Start `meshpilot train` in the background and return the run id (the name of `out`) at once.

    `options` are prepare_job's (nproc, layout, steps, overrides, timeout_s, env, hang_s, cpus, visible_devices).
    A run that finished ok or is still going is not started again: its id is returned. A directory holding a run
    that failed is refused (choose another `out`). `cpus` pins the job to those CPU cores; `visible_devices` sets
    CUDA_VISIBLE_DEVICES: how a sweep gives parallel trials disjoint devices.
    """
    out = Path(out).absolute()
    resuming = options.get("resume", False)
    return _start(out, "run", partial(prepare_job, experiment, out, **options), options.get("env"), resuming)


def start_sweep(
    experiment: Path, out: Path, *, trials: int | None = None, timeout_s: float | None = None, env: dict | None = None
) -> str:
    """Start `meshpilot sweep EXPERIMENT --out OUT` in the background and return its id (the name of `out`) at once.

    The sweep is a job like a run (job.json beside its files in `out`, the same status, wait and cancel), started
    and adopted the same way; its trials are jobs it owns (see the module docstring). `trials` defaults to
    search.trials. A mistake only the sweep finds (a space nothing fits in) ends the job "failed" with its line.
    """
    out = Path(out).absolute()
    return _start(out, SWEEP, partial(_prepare_sweep, experiment, out, trials, timeout_s, env), env)


def _start(out: Path, kind: str, prepare: Callable[[], dict], env: dict | None, resuming: bool = False) -> str:
    """Prepare and spawn the job in `out`, unless one is there: a job that is going or ended ok is adopted (its id
    returned), one that ended otherwise is refused, except a preempted run that `resuming` continues."""
    existing = _existing_state(out)
    if existing in ("ok", "queued", "running"):
        return out.name
    if existing is not None and not (resuming and existing == PREEMPTED):
        raise ConfigError(f"{out} holds a {kind} that ended {existing}; choose another {kind} directory")
    prepare()
    _spawn_supervisor(out, env or {})
    return out.name


def prepare_job(
    experiment: Path,
    out: Path,
    *,
    nproc: int | None = None,
    layout: str | None = None,
    steps: int | None = None,
    overrides: list[str] = (),
    timeout_s: float | None = None,
    env: dict | None = None,
    hang_s: float | None = None,
    cpus: list[int] | None = None,
    visible_devices: list[int | str] | None = None,
    resume: bool = False,
) -> JobRecord:
    """Check the request cheaply and write job.json (state "queued"); `supervise` then runs it. `resume`: continue
    the run in `out` from its newest checkpoint (`meshpilot train --resume`), as a preempted sweep trial is.

    Used by `start_run`, and by executors that run the supervisor elsewhere (a SLURM job through submitit).
    """
    experiment, out = Path(experiment).absolute(), Path(out).absolute()
    overrides = [*overrides, *([f"train.steps={steps}"] if steps is not None else [])]
    loaded = load_experiment(experiment, overrides)  # unknown keys, bad values: one line, before anything starts
    _check_request(nproc, layout, timeout_s, hang_s, cpus, env)
    if not resume and (RunDir(out).steps.exists() or RunDir(out).metrics.exists()):
        raise ConfigError(f"run directory {out} holds results of another run; choose another run directory")
    command = [sys.executable, "-m", "agent.cli", "train", str(experiment), "--out", str(out)]
    if resume:
        command.append("--resume")
    if nproc is not None:
        command.append(f"--nproc={nproc}")
    if layout is not None:
        command.append(f"--layout={layout}")
    command += [f"--set={o}" for o in overrides]
    return _write_job(
        out,
        command,
        steps=loaded.train.steps,
        timeout_s=timeout_s,
        hang_s=hang_s,
        cpus=cpus,
        visible_devices=visible_devices,
        threads=_threads_per_process(cpus, nproc),
        env_keys=sorted(env or {}),  # names only: values may be secrets
    )


def _prepare_sweep(
    experiment: Path, out: Path, trials: int | None, timeout_s: float | None, env: dict | None
) -> JobRecord:
    """The sweep's quick checks (the experiment loads, the trial count) and its job.json; the sweep checks the rest."""
    experiment = Path(experiment).absolute()
    trials = load_experiment(experiment).search.trials if trials is None else trials
    if trials < 1:
        raise ConfigError(f"a sweep needs at least one trial, got {trials}")
    _check_request(None, None, timeout_s, None, None, env)
    if (out / "sweep.json").exists():
        raise ConfigError(f"{out} holds another sweep; choose another sweep directory")
    command = [sys.executable, "-m", "agent.cli", "sweep", str(experiment), "--out", str(out), f"--trials={trials}"]
    fields = {"kind": SWEEP, "experiment": str(experiment), "trials": trials, "timeout_s": timeout_s}
    return _write_job(out, command, **fields, env_keys=sorted(env or {}))


def _write_job(out: Path, command: list[str], **fields: Any) -> JobRecord:
    """Write job.json for `command` (state "queued"); `fields` fill in or add to the record's defaults."""
    job = {
        "run_id": out.name,
        "token": uuid.uuid4().hex,
        "command": command,
        "started": time.time(),  # informational: the watchdog measures time with a monotonic clock
        "steps": None,
        "timeout_s": None,
        "hang_s": None,
        "cpus": None,
        "visible_devices": None,
        "threads": None,
        "env_keys": [],
        **fields,
        "state": "queued",
        "cause": None,
        "creator": _identity(),  # the process that wrote this record and is about to start its supervisor
        "executor": None,
        "pid": None,
        "pgid": None,
        "host": None,
    }
    out.mkdir(parents=True, exist_ok=True)
    with _locked(out):
        return JOB.write(out / JOB_FILE, job)


def run_status(out: Path) -> dict:
    """{"run_id", "kind", "state", "cause", "step", "steps", "metrics"}: state is queued, running, ok, failed, oom,
    timeout, nan, cancelled (or pruned, for a sweep trial stopped early). A sweep's (kind "sweep") adds "summary"
    (None until it ended) and "trials_ended"."""
    out = Path(out)
    job = read_job(out)
    kind = _kind(job)
    results = _results(out, kind)
    if job is None and results is None:
        raise ConfigError(f"no run in {out} (neither {JOB_FILE} nor metrics.json)")
    state, cause = _state(job, kind, results)
    if state == KILLED and job["state"] != KILLED:  # the first reader to find the supervisor dead records it
        record_state(out, state, cause)
    status = {
        "run_id": out.name,
        "kind": kind,
        "state": state,
        "cause": cause,
        "step": _last_step(RunDir(out)),
        "steps": job["steps"] if job else results.get("steps"),
        "metrics": results if kind == "run" else None,
    }
    if kind == SWEEP:
        ended = [d for d in _owned_dirs(out, job) if (read_job(d) or {}).get("state") in TERMINAL]
        status |= {"summary": results, "trials_ended": len(ended)}
    return status


def cancel_run(out: Path, *, state: str = "cancelled", cause: str | None = None) -> bool:
    """Stop the run (its supervisor, the launcher, torchrun and every rank) and record `state`.

    Returns False when there was nothing to stop: no job, or one that had already ended.
    """
    out = Path(out)
    job = read_job(out)
    if job is None or run_status(out)["state"] in TERMINAL:
        return False
    # The verdict first: a reader that finds the supervisor dead a moment later must not record it as killed.
    record_state(out, state, cause or "cancelled by the user")
    if read_job(out)["state"] != state:  # the run recorded its own end just before
        return False
    if job["host"] in (None, socket.gethostname()):
        if job["pid"] and process_alive(job["pid"], job.get("pid_start")):
            _signal(job["pid"], signal.SIGKILL)  # first: its run dies with it, and it starts nothing more
        kill_job_processes(job["token"])
        _end_owned(out, job, state)
    return True


def wait_run(out: Path, timeout_s: float | None = None) -> dict:
    """Wait until the job (a run or a sweep) ends, or `timeout_s` passes: then the status says it is still going."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        status = run_status(out)
        if status["state"] in TERMINAL or (deadline is not None and time.monotonic() >= deadline):
            return status
        time.sleep(POLL_S)


def read_job(out: Path) -> JobRecord | None:
    """The job's record, or None when the directory has none."""
    return JOB.read(Path(out) / JOB_FILE)


def supervise(out: Path, env: dict | None = None, token: str | None = None) -> str:
    """Run the job written by `prepare_job` to its end, as its watchdog; returns the final state.

    `token` names the job this supervisor was started for: if the directory was since given to another job
    (a sweep restarted a lost trial), or another supervisor already claimed it, this one leaves it alone.
    """
    out = Path(out)
    with _locked(out):
        job = read_job(out)
        if job is None or job["state"] != "queued" or (token is not None and job["token"] != token):
            return job["state"] if job else "failed"
        JOB.write(out / JOB_FILE, {**job, "state": "running", **_identity()})
    if job["cpus"]:
        os.sched_setaffinity(0, job["cpus"])
    child_env = _child_env(job, env or {})
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
            _end_owned(out, job, verdict[0])
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
            return "timeout", f"hang: no new step for {job['hang_s']:g}s after step {_last_step(RunDir(out))}"
        time.sleep(POLL_S)
    return None


def _preempted(job: JobRecord, launcher: subprocess.Popen) -> bool:
    """SIGTERM reached the supervisor (from a scheduler, alone or with the rest of the job): a run's launcher gets it
    too and, given the time, saves a checkpoint and ends as "preempted" (trainer.host.preemption). Whether it ended
    so."""
    if _kind(job) != "run":
        return False
    _signal(launcher.pid, signal.SIGTERM)  # a second one, where the scheduler's reached it too, changes nothing
    try:
        launcher.wait(timeout=preemption.grace_s() + 10)  # its save, then the ranks' and the launcher's exits
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
    kind = _kind(job)
    results = _results(out, kind)
    if results is not None:
        return _verdict(kind, results)
    log = (out / LOG_FILE).read_text(errors="replace").splitlines() if (out / LOG_FILE).is_file() else []
    errors = [error for line in log if (error := printed_error(line)) is not None]
    if errors:
        return "failed", errors[-1]
    return "failed", f"the launcher exited with code {returncode} and wrote no results (see {LOG_FILE})"


def _kind(job: JobRecord | None) -> str:
    return (job or {}).get("kind", "run")


def _results(out: Path, kind: str) -> Metrics | Summary | None:
    """What the job wrote when it ended (a run's metrics.json, a sweep's summary.json), or None."""
    if kind == SWEEP:
        return SUMMARY.read(Path(out) / RESULTS[SWEEP])
    return RunDir(out).read_metrics()


def _verdict(kind: str, results: dict) -> tuple[str, str | None]:
    """A sweep that wrote its summary ran to its end, whether a trial won or not (the summary says); a run's
    metrics say how it ended."""
    return ("ok", None) if kind == SWEEP else _classify(results)


def _classify(metrics: dict) -> tuple[str, str | None]:
    """The trainer itself tells "oom" and "nan" (it stops at a non-finite loss) from other failures."""
    status = metrics.get("status")
    return (status if status in TERMINAL else "failed"), metrics.get("error")


def _state(job: JobRecord | None, kind: str, results: dict | None) -> tuple[str, str | None]:
    if job is None:
        return _verdict(kind, results)
    if job["state"] in TERMINAL:
        return job["state"], job["cause"]
    if job["pid"] is None and job["executor"] is None and not process_alive(**_creator(job)):
        return "failed", "the job never started: the process starting it died first"
    if job["pid"] is None or job["host"] not in (None, socket.gethostname()):
        return job["state"], None  # not started yet (a SLURM queue), or running on another node
    if process_alive(job["pid"], job.get("pid_start")):
        return job["state"], None
    if results is not None:  # the supervisor died after the job ended
        return _verdict(kind, results)
    return KILLED, f"the job's supervisor (pid {job['pid']}) died before the {kind} ended, and the {kind} with it"


def _owned_dirs(out: Path, job: JobRecord | None) -> list[Path]:
    """The directories of the jobs this job started: a sweep's trials (agent.sweep keeps them in trials/)."""
    return sorted((Path(out) / "trials").glob("*/")) if _kind(job) == SWEEP else []


def _end_owned(out: Path, job: JobRecord, state: str) -> None:
    """Record the end of the jobs stopped with this one (a sweep's trials), which would otherwise read as killed."""
    for owned in _owned_dirs(out, job):
        if read_job(owned) is not None:
            record_state(owned, "cancelled", f"stopped with its {_kind(job)} ({state})")


def _creator(job: JobRecord) -> dict[str, Any]:
    creator = job["creator"]
    if creator["host"] != socket.gethostname():
        return {"pid": os.getpid(), "start": None}  # cannot be checked from here: count it as alive
    return {"pid": creator["pid"], "start": creator["pid_start"]}


def _existing_state(out: Path) -> str | None:
    if read_job(out) is None and RunDir(out).read_metrics() is None:
        return None
    return run_status(out)["state"]


def _check_request(nproc, layout, timeout_s, hang_s, cpus, env) -> None:
    if nproc is not None and nproc < 1:
        raise ConfigError(f"nproc must be at least 1, got {nproc}")
    if layout is not None:
        try:
            Layout.parse(layout)
        except LayoutError as e:
            raise ConfigError(str(e)) from None
    for name, value in (("timeout_s", timeout_s), ("hang_s", hang_s)):
        if value is not None and value <= 0:
            raise ConfigError(f"{name} must be positive, got {value}")
    if cpus is not None and (not cpus or not set(cpus) <= os.sched_getaffinity(0)):
        raise ConfigError(f"cpus {cpus} are not among this process's cores {sorted(os.sched_getaffinity(0))}")
    if env is not None and not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        raise ConfigError("env: names and values must be strings")


def _threads_per_process(cpus: list[int] | None, nproc: int | None) -> int | None:
    """Ranks pinned to a few cores must not each start a thread per core of the machine."""
    return max(1, len(cpus) // (nproc or 1)) if cpus else None


def _child_env(job: JobRecord, env: dict) -> dict[str, str]:
    child = {**os.environ, **env, MARKER: job["token"]}
    child["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), child.get("PYTHONPATH")]))
    if job["threads"] is not None:
        child["OMP_NUM_THREADS"] = str(job["threads"])
    if job["visible_devices"] is not None:
        child["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, job["visible_devices"]))
    return child


# Supervisors outlive the call that spawns them; keeping their Popen objects lets this process reap the ones that
# ended (no zombies in a long chat session) instead of dropping running children.
_SUPERVISORS: list[subprocess.Popen] = []


def _spawn_supervisor(out: Path, env: dict) -> None:
    _SUPERVISORS[:] = [p for p in _SUPERVISORS if p.poll() is None]
    job = read_job(out)
    child_env = _child_env(job, env)
    owners = _enclosing_jobs()
    if owners:  # started by a job (a sweep its trial): the job owns this one, which dies with the caller
        child_env = tied_env({**child_env, OWNERS: ",".join(owners)})
    else:  # detached: a variable left over from elsewhere must not tie it to anything
        child_env.pop(PARENT_ENV, None)
    with (out / LOG_FILE).open("a") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "agent.jobs", str(out), job["token"]],
            cwd=REPO,
            env=child_env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # survives the caller; a terminal's Ctrl-C does not reach it
        )
    _SUPERVISORS.append(process)
    # The supervisor records the same itself; written here too so that a reader never sees a job with no pid.
    update_job(out, pid=process.pid, pgid=process.pid, host=socket.gethostname(), pid_start=start_time(process.pid))


def _enclosing_jobs() -> list[str]:
    """The tokens of the jobs this process belongs to, outermost first; none outside every job."""
    if MARKER not in os.environ:
        return []
    return [*filter(None, os.environ.get(OWNERS, "").split(",")), os.environ[MARKER]]


def is_job_file(name: str) -> bool:
    """Whether a file of a directory is one the job machinery writes there (its record, log and lock)."""
    return name in (JOB_FILE, LOG_FILE) or name.startswith(".job.")  # .job.json.* while job.json is replaced


def _identity() -> dict[str, Any]:
    pid = os.getpid()
    return {"pid": pid, "pgid": os.getpgid(pid), "host": socket.gethostname(), "pid_start": start_time(pid)}


def record_state(out: Path, state: JobState, cause: str | None) -> None:
    """Write the final state, unless another process already wrote one (the first verdict stands)."""
    with _locked(out):
        job = read_job(out)
        if job["state"] in TERMINAL:
            return
        JOB.write(out / JOB_FILE, {**job, "state": state, "cause": cause, "ended": time.time()})


def update_job(out: Path, **fields: Any) -> None:
    with _locked(out):
        job = read_job(out)
        if job["state"] in TERMINAL:
            fields.pop("state", None)
        JOB.write(out / JOB_FILE, {**job, **fields})


def _locked(out: Path) -> FileLock:
    return FileLock(Path(out) / LOCK_FILE)


_TAIL_BYTES = 1 << 16  # far more than one steps.jsonl line


def _last_step(run: RunDir) -> int:
    """The step of the last complete line of steps.jsonl (0 before the first): its end alone is read, a line still
    being written is not."""
    try:
        with run.steps.open("rb") as f:
            start = max(0, f.seek(0, os.SEEK_END) - _TAIL_BYTES)
            f.seek(start)
            tail = f.read()
    except FileNotFoundError:
        return 0
    complete = tail[: tail.rfind(b"\n") + 1]
    if start > 0:  # the window may begin inside a line
        complete = complete[complete.find(b"\n") + 1 :]
    lines = [line for line in complete.decode().splitlines() if line.strip()]
    return STEPS.parse(lines[-1], run.steps)["step"] if lines else 0


# Processes, through psutil.


def job_processes(token: str) -> list[int]:
    """Pids of the live processes that carry this job's marker, or name it among their owners (a sweep's trials; a
    process whose environment cannot be read, another user's or a zombie, is not one of them)."""
    processes = psutil.process_iter(["environ"])  # environ None where psutil may not read it
    return [p.pid for p in processes if _of_job(p.info["environ"] or {}, token)]


def _of_job(environ: dict[str, str], token: str) -> bool:
    return environ.get(MARKER) == token or token in environ.get(OWNERS, "").split(",")


def kill_job_processes(token: str) -> None:
    """SIGKILL every process of the job but the caller (the supervisor carries the marker too); repeat until none
    is left, as a dying parent may have just spawned one."""
    for _ in range(100):
        pids = [p for p in job_processes(token) if p != os.getpid()]
        if not pids:
            return
        for pid in pids:
            _signal(pid, signal.SIGKILL)
        time.sleep(0.05)


def kill_process(pid: int) -> None:
    _signal(pid, signal.SIGKILL)


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def start_time(pid: int) -> float | None:
    """When the process started, in seconds since boot: tells a live pid from a reused one. Creation time minus
    boot time rather than psutil's create_time() alone, which moves when the system clock is set (NTP, a resumed
    VM): a supervisor that looked dead because of it would get its running job recorded as killed."""
    try:
        return _since_boot(pid)
    except psutil.Error:
        return None


def process_alive(pid: int, start: float | None) -> bool:
    """Whether `pid` is running (not a zombie) and, when `start` (start_time's value) is given, is the process that
    started then, not a later one that reuses its pid."""
    try:
        if psutil.Process(pid).status() in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD):
            return False
        return start is None or _since_boot(pid) == _seconds(start)
    except psutil.NoSuchProcess:  # ZombieProcess included
        return False
    except psutil.AccessDenied:  # it exists but cannot be inspected (another user's, outside Linux)
        return True


def _since_boot(pid: int) -> float:
    boot = psutil.boot_time()  # read first: older psutil computes create_time() from the boot time last read
    # Rounded to the 10 ms that /proc counts in, so that every reader gets the same value for the same process.
    return round(psutil.Process(pid).create_time() - boot, 2)


def _seconds(start: float) -> float:
    """An int is a start time in clock ticks since boot, as job.json and sweep records held before psutil: the same
    instant, so a job started by an older meshpilot is still told from a reused pid."""
    return round(start / os.sysconf("SC_CLK_TCK"), 2) if isinstance(start, int) else start


if __name__ == "__main__":
    tie_to_parent()  # a job started from inside another (a sweep's trial) dies with it; see _spawn_supervisor
    supervise(Path(sys.argv[1]), token=sys.argv[2])
