"""A training run as a background job: `start_run` returns at once, the run's logs and results land on disk.

Each job has a tiny supervisor process (`python -m agent.jobs OUT TOKEN`, in a session of its own so it outlives
the caller) that runs `python -m agent.cli train ... --out OUT` and watches it:

- a time limit (`timeout_s`) for the whole run, and a hang limit (`hang_s`): no new steps.jsonl line for that
  long after the first step (before it, data and tokenizer preparation may legitimately take minutes).
  A non-finite loss or an allocation failure needs no watching: the trainer stops and says so ("nan", "oom").

The supervisor stays detached on purpose (a resumed conversation or sweep adopts it), but its run dies with it:
the launcher is tied to the supervisor, torchrun to the launcher and the ranks to torchrun (trainer.lifeline),
so SIGKILL of the supervisor leaves nothing of its run behind. A process of a job may leave the job's process
group (a session of its own, a reparented orphan), so killing the group alone could miss it: every process of a
job also inherits an environment variable naming the job (MESHPILOT_JOB), and stopping a job kills every process
that carries it, whatever its session or parent (found through psutil).

OUT/job.json is the job's record: the command, the supervisor's pid, pgid and host, and once the run ended its
state ("ok", "failed", "oom", "timeout", "nan", "cancelled", "pruned" for a sweep trial stopped early, or "killed"
when the supervisor died before the run ended) and cause. Several processes update it (the supervisor,
`cancel_run`, the first reader to find the supervisor dead), always under a file lock.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import psutil
from filelock import FileLock

from trainer.config import ConfigError, load_experiment
from trainer.layout import Layout, LayoutError
from trainer.lifeline import tied_env
from trainer.rundir import RUN_STATUSES, RunDir, StepsTail, write_json

REPO = Path(__file__).resolve().parents[1]
MARKER = "MESHPILOT_JOB"  # inherited by every process of a job: how a job's processes are found
JOB_FILE = "job.json"
LOG_FILE = "job.log"  # what the launcher (and the supervisor) printed
KILLED = "killed"  # the supervisor died (SIGKILL, a lost machine) before the run ended: no verdict, no results
TERMINAL = RUN_STATUSES
POLL_S = 0.5


def start_run(experiment: Path, out: Path, **options: Any) -> str:
    """Start `meshpilot train` in the background and return the run id (the name of `out`) at once.

    `options` are prepare_job's (nproc, layout, steps, overrides, timeout_s, env, hang_s, cpus, visible_devices).
    A run that finished ok or is still going is not started again: its id is returned. A directory holding a run
    that failed is refused (choose another `out`). `cpus` pins the job to those CPU cores; `visible_devices` sets
    CUDA_VISIBLE_DEVICES: how a sweep gives parallel trials disjoint devices.
    """
    out = Path(out).absolute()
    existing = _existing_state(out)
    if existing in ("ok", "queued", "running"):
        return out.name
    if existing is not None:
        raise ConfigError(f"{out} holds a run that ended {existing}; choose another run directory")
    prepare_job(experiment, out, **options)
    _spawn_supervisor(out, options.get("env") or {})
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
) -> dict:
    """Check the request cheaply and write job.json (state "queued"); `supervise` then runs it.

    Used by `start_run`, and by executors that run the supervisor elsewhere (a SLURM job through submitit).
    """
    experiment, out = Path(experiment).absolute(), Path(out).absolute()
    overrides = [*overrides, *([f"train.steps={steps}"] if steps is not None else [])]
    loaded = load_experiment(experiment, overrides)  # unknown keys, bad values: one line, before anything starts
    _check_request(nproc, layout, timeout_s, hang_s, cpus, env)
    if RunDir(out).steps.exists() or RunDir(out).metrics.exists():
        raise ConfigError(f"run directory {out} holds results of another run; choose another run directory")
    command = [sys.executable, "-m", "agent.cli", "train", str(experiment), "--out", str(out)]
    if nproc is not None:
        command.append(f"--nproc={nproc}")
    if layout is not None:
        command.append(f"--layout={layout}")
    command += [f"--set={o}" for o in overrides]
    job = {
        "run_id": out.name,
        "token": uuid.uuid4().hex,
        "command": command,
        "started": time.time(),  # informational: the watchdog measures time with a monotonic clock
        "steps": loaded.train.steps,
        "timeout_s": timeout_s,
        "hang_s": hang_s,
        "cpus": cpus,
        "visible_devices": visible_devices,
        "threads": _threads_per_process(cpus, nproc),
        "env_keys": sorted(env or {}),  # names only: values may be secrets
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
        write_json(out / JOB_FILE, job)
    return job


def run_status(out: Path) -> dict:
    """{"run_id", "state", "cause", "step", "steps", "metrics"}: state is queued, running, ok, failed, oom,
    timeout, nan, cancelled (or pruned, for a sweep trial stopped early)."""
    out = Path(out)
    run, job = RunDir(out), read_job(out)
    metrics = run.read_metrics()
    if job is None and metrics is None:
        raise ConfigError(f"no run in {out} (neither {JOB_FILE} nor metrics.json)")
    state, cause = _state(job, metrics)
    if state == KILLED and job["state"] != KILLED:  # the first reader to find the supervisor dead records it
        record_state(out, state, cause)
    steps = job["steps"] if job else metrics.get("steps")
    return {
        "run_id": out.name,
        "state": state,
        "cause": cause,
        "step": _last_step(run),
        "steps": steps,
        "metrics": metrics,
    }


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
    return True


def wait_run(out: Path, timeout_s: float | None = None) -> dict:
    """Wait until the run ends (or `timeout_s` passes: then the status says it is still going)."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        status = run_status(out)
        if status["state"] in TERMINAL or (deadline is not None and time.monotonic() >= deadline):
            return status
        time.sleep(POLL_S)


def read_job(out: Path) -> dict | None:
    path = Path(out) / JOB_FILE
    return json.loads(path.read_text()) if path.is_file() else None


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
        write_json(out / JOB_FILE, {**job, "state": "running", **_identity()})
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
    else:
        state, cause = _outcome(out, launcher.returncode)
        record_state(out, state, cause)
    return read_job(out)["state"]


def _watch(out: Path, job: dict, launcher: subprocess.Popen, stopping: list[str]) -> tuple[str, str] | None:
    """Poll until the launcher exits (None) or the run must be stopped: (state, cause)."""
    steps = StepsTail(RunDir(out).steps)
    started = last_step_at = time.monotonic()
    seen_step = False
    while launcher.poll() is None:
        if stopping:
            return "cancelled", stopping[0]
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


def _ending(out: Path) -> bool:
    """A run that wrote its results or whose rank recorded a failure is shutting down, not hung: on a loaded machine
    that can outlast hang_s, and its own verdict (e.g. "nan") must stand. The time limit still applies."""
    run = RunDir(out)
    return run.metrics.is_file() or any(run.path.glob("failure.rank*.json"))


def _outcome(out: Path, returncode: int) -> tuple[str, str | None]:
    """The state of a run whose launcher exited by itself."""
    metrics = RunDir(out).read_metrics()
    if metrics is not None:
        return _classify(metrics)
    log = (out / LOG_FILE).read_text(errors="replace").splitlines() if (out / LOG_FILE).is_file() else []
    errors = [line.removeprefix("meshpilot: error: ") for line in log if line.startswith("meshpilot: error: ")]
    if errors:
        return "failed", errors[-1]
    return "failed", f"the launcher exited with code {returncode} and wrote no results (see {LOG_FILE})"


def _classify(metrics: dict) -> tuple[str, str | None]:
    """The trainer itself tells "oom" and "nan" (it stops at a non-finite loss) from other failures."""
    status = metrics.get("status")
    return (status if status in TERMINAL else "failed"), metrics.get("error")


def _state(job: dict | None, metrics: dict | None) -> tuple[str, str | None]:
    if job is None:
        return _classify(metrics)
    if job["state"] in TERMINAL:
        return job["state"], job["cause"]
    if job["pid"] is None and job["executor"] is None and not process_alive(**_creator(job)):
        return "failed", "the job never started: the process starting it died first"
    if job["pid"] is None or job["host"] not in (None, socket.gethostname()):
        return job["state"], None  # not started yet (a SLURM queue), or running on another node
    if process_alive(job["pid"], job.get("pid_start")):
        return job["state"], None
    if metrics is not None:  # the supervisor died after the run ended
        return _classify(metrics)
    return KILLED, f"the job's supervisor (pid {job['pid']}) died before the run ended, and the run with it"


def _creator(job: dict) -> dict[str, Any]:
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


def _child_env(job: dict, env: dict) -> dict[str, str]:
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
    with (out / LOG_FILE).open("a") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "agent.jobs", str(out), job["token"]],
            cwd=REPO,
            env=_child_env(job, env),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # survives the caller; a terminal's Ctrl-C does not reach it
        )
    _SUPERVISORS.append(process)
    # The supervisor records the same itself; written here too so that a reader never sees a job with no pid.
    update_job(out, pid=process.pid, pgid=process.pid, host=socket.gethostname(), pid_start=start_time(process.pid))


def _identity() -> dict[str, Any]:
    pid = os.getpid()
    return {"pid": pid, "pgid": os.getpgid(pid), "host": socket.gethostname(), "pid_start": start_time(pid)}


def record_state(out: Path, state: str, cause: str | None) -> None:
    """Write the final state, unless another process already wrote one (the first verdict stands)."""
    with _locked(out):
        job = read_job(out)
        if job["state"] in TERMINAL:
            return
        write_json(out / JOB_FILE, {**job, "state": state, "cause": cause, "ended": time.time()})


def update_job(out: Path, **fields: Any) -> None:
    with _locked(out):
        job = read_job(out)
        if job["state"] in TERMINAL:
            fields.pop("state", None)
        write_json(out / JOB_FILE, {**job, **fields})


def _locked(out: Path) -> FileLock:
    return FileLock(Path(out) / ".job.lock")


def _last_step(run: RunDir) -> int:
    if not run.steps.is_file():
        return 0
    lines = [line for line in run.steps.read_bytes().splitlines() if line.strip()]
    with contextlib.suppress(ValueError, IndexError, KeyError):
        return int(json.loads(lines[-1])["step"])
    return 0


# Processes, through psutil.


def job_processes(token: str) -> list[int]:
    """Pids of the live processes that carry this job's marker (a process whose environment cannot be read, another
    user's or a zombie, is not one of them)."""
    processes = psutil.process_iter(["environ"])  # environ None where psutil may not read it
    return [p.pid for p in processes if (p.info["environ"] or {}).get(MARKER) == token]


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
    supervise(Path(sys.argv[1]), token=sys.argv[2])
