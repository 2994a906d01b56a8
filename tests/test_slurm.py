"""Sweeps on a real SLURM cluster: trials as SLURM jobs (a 2-process trial inside its allocation) that give the local
executor's losses, a trial cancelled with scancel recorded as cancelled with its cause, a trial preempted (SIGTERM
while SLURM keeps its job) continued from its checkpoint, a sweep killed with SIGKILL and resumed that runs no trial
twice, and job states read without accounting (no sacct).

The cluster is one that already answers `sinfo`, or, with MESHPILOT_SLURM=1 only, the one-node cluster that
scripts/slurm/up.sh starts on this machine (Debian's slurm-wlm and munge, installed with apt if missing; a few
seconds once installed), stopped again by scripts/slurm/down.sh at the end by the session that started it.
Without the variable an up.sh cluster left up by another session is not used: that session may stop it midway.
Otherwise these tests skip, saying why. The last tests need no cluster: the status of a queued SLURM trial through
a stand-in squeue.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import REPO, meshpilot, write_experiment

from agent import jobs
from agent.sweep import executors, run_sweep
from agent.sweep.executors import SubmititExecutor, slurm_state
from trainer.results.rundir import RunDir

UP, DOWN = REPO / "scripts" / "slurm" / "up.sh", REPO / "scripts" / "slurm" / "down.sh"
SLURM_DIR = Path(os.environ.get("MESHPILOT_SLURM_DIR", "/tmp/meshpilot-slurm"))
UP_TIMEOUT_S = 60  # CI starts SLURM only when it can within a minute (packages included)
CHANGES = {"search": {"objective": "final_loss", "trial_steps": 4}, "train": {"timing_warmup_steps": 1}}
SPACE = {"train.micro_batch": [2], "train.activation_checkpointing": [False]}
SPACE_ARGS = [f"--space={key}={json.dumps(values)}" for key, values in SPACE.items()]


def _sinfo(env: dict[str, str]) -> bool:
    """Whether a SLURM controller answers (and has a node)."""
    try:
        done = subprocess.run(["sinfo", "-h", "-o", "%T"], env=env, capture_output=True, text=True, timeout=15)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0 and bool(done.stdout.strip())


def _controller_runs() -> bool:
    """Whether up.sh's slurmctld runs (asking sinfo of a stopped controller takes seconds to fail)."""
    try:
        pid = int((SLURM_DIR / "run" / "slurmctld.pid").read_text())
    except (OSError, ValueError):
        return False
    return jobs.process_alive(pid, None)


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """The cluster's environment (SLURM_CONF where up.sh's cluster is used), set for the module; a stand-in sacct
    on PATH records any call (none may happen). Yields {"ours": whether it is up.sh's cluster, "sacct": its log,
    "path": PATH without it}."""
    conf = SLURM_DIR / "slurm.conf"
    ours_env = {**os.environ, "SLURM_CONF": str(conf)}
    started = False
    if _sinfo(dict(os.environ)):
        changes, ours = {}, "SLURM_CONF" in os.environ and Path(os.environ["SLURM_CONF"]) == conf
    elif os.environ.get("MESHPILOT_SLURM") != "1":  # up.sh's cluster, if up, is another session's: it may stop it
        pytest.skip(
            "SLURM tests: no SLURM cluster answers sinfo; MESHPILOT_SLURM=1 starts one on this machine "
            "(scripts/slurm/up.sh: apt's slurm-wlm and munge)"
        )
    elif _controller_runs() and _sinfo(ours_env):  # up.sh's cluster is up: used, and left to whoever started it
        changes, ours = {"SLURM_CONF": str(conf)}, True
    else:
        try:  # apt-get install, if SLURM is missing, then at most a minute for the node to turn idle
            done = subprocess.run([str(UP)], capture_output=True, text=True, timeout=UP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            pytest.skip(f"SLURM tests: scripts/slurm/up.sh did not finish within {UP_TIMEOUT_S} s")
        started = done.returncode == 0
        if not started:
            reason = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
            pytest.skip(f"SLURM tests: scripts/slurm/up.sh could not start SLURM: {reason}")
        changes, ours = {"SLURM_CONF": str(conf)}, True
    shims = tmp_path_factory.mktemp("slurm-shims")
    calls = shims / "sacct.calls"
    _script(shims / "sacct", f'echo "$*" >> {calls}\necho "sacct: the sweep must not need accounting" >&2\nexit 1')
    path = os.environ["PATH"]
    changes["PATH"] = f"{shims}{os.pathsep}{path}"
    previous = {key: os.environ.get(key) for key in changes}
    os.environ.update(changes)
    try:
        yield {"ours": ours, "sacct": calls, "path": path}
    finally:
        for key, value in previous.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        if started:
            subprocess.run([str(DOWN)], capture_output=True, timeout=120)


@pytest.fixture(scope="module")
def experiment(tmp_path_factory):
    """Two points: one process and two (dp_replicate=2), so one trial runs 2 ranks inside its allocation."""
    changes = {**CHANGES, "search": {**CHANGES["search"], "layouts": ["dp_replicate=1", "dp_replicate=2"]}}
    return write_experiment(tmp_path_factory.mktemp("slurm-sweep"), changes)


@pytest.mark.slow
def test_trials_run_as_slurm_jobs_and_match_the_local_executor(slurm, experiment):
    on_slurm = run_sweep(experiment, experiment.parent / "slurm", executor="slurm", max_parallel=2, space=SPACE)
    local = run_sweep(experiment, experiment.parent / "local", executor="local", max_parallel=2, space=SPACE)
    assert [t["status"] for t in on_slurm["trials"]] == ["ok", "ok"], [t["cause"] for t in on_slurm["trials"]]
    compared = ("id", "params", "settings", "status", "cause", "nproc", "final_loss")
    assert [{k: t[k] for k in compared} for t in on_slurm["trials"]] == [
        {k: t[k] for k in compared} for t in local["trials"]
    ]
    assert sorted(t["nproc"] for t in on_slurm["trials"]) == [1, 2]
    assert on_slurm["winner"] == local["winner"]
    job_ids = set()
    for trial in on_slurm["trials"]:
        out = experiment.parent / "slurm" / trial["run_dir"]
        job = jobs.read_job(out)
        assert job["executor"]["kind"] == "submitit" and job["executor"]["cluster"] == "slurm"
        job_id = job["executor"]["job_id"]
        job_ids.add(job_id)
        state, cpus, node = _squeue(job_id, "%T|%C|%N").split("|")
        assert state == "COMPLETED"
        assert int(cpus) == trial["nproc"]  # a core per rank, allocated by SLURM
        assert job["host"].split(".")[0] == node  # the supervisor ran on the node SLURM gave the job
        assert RunDir(out).read_metrics()["world_size"] == trial["nproc"]  # torchrun's ranks, inside the allocation
        assert [s["step"] for s in RunDir(out).read_steps()] == [1, 2, 3, 4]
    assert len(job_ids) == 2
    _no_sacct(slurm)


@pytest.mark.slow
def test_a_trial_cancelled_with_scancel_is_recorded_as_cancelled(slurm, tmp_path):
    """scancel sends SIGTERM to every process of the job at once; the trial reads as cancelled, saying SLURM did it,
    not as a run whose launcher died, and nothing of it is left running."""
    changes = {**CHANGES, "search": {**CHANGES["search"], "layouts": ["dp_replicate=2"], "trial_steps": 5000}}
    experiment = write_experiment(tmp_path, changes)
    out = tmp_path / "sweep"
    sweep = _start_sweep(experiment, out)
    trial = out / "trials" / "t000"
    _wait(lambda: RunDir(trial).steps.is_file() and RunDir(trial).steps.read_text().strip(), sweep, "a first step")
    job = jobs.read_job(trial)
    subprocess.run(["scancel", job["executor"]["job_id"]], check=True, timeout=30)
    assert sweep.wait(timeout=120) == 1, sweep.stderr.read()[-3000:]  # no trial ended ok: no winner
    [summary] = json.loads((out / "summary.json").read_text())["trials"]
    assert summary["status"] == "cancelled"
    cause = f"SLURM job {job['executor']['job_id']} was cancelled (scancel, or preemption) while the trial ran"
    assert summary["cause"] == cause
    assert len(RunDir(trial).read_steps()) < 5000
    _wait(lambda: not jobs.job_processes(job["token"]), None, "the trial's processes to end", timeout=60)
    _wait(lambda: _squeue(job["executor"]["job_id"], "%T") == "CANCELLED", None, "SLURM to end the job", timeout=60)
    _no_sacct(slurm)


@pytest.mark.slow
def test_a_run_preempted_with_scancel_signal_term_resumes_exactly(slurm, tmp_path):
    """`scancel --signal=TERM --full` (SIGTERM to every process of the batch job, as preemption sends it): the run
    saves a checkpoint at the next step boundary, records status "preempted", and `--resume` continues it exactly."""
    from support import train

    from trainer.rank.faults import ENV as FAULT

    experiment = write_experiment(tmp_path, {"train": {"steps": 6, "checkpoint_every": 2}})
    reference = train(experiment, tmp_path / "reference", "--nproc", "2").read_steps()
    out = tmp_path / "run"
    # exec: the launcher is the batch script itself, not a child of a shell that SIGTERM would end first
    command = f"exec {sys.executable} -m agent.cli train {experiment} --out {out} --nproc 2"
    env = {**os.environ, FAULT: "rank=0,step=3,kind=preempt", "PYTHONPATH": os.environ.get("PYTHONPATH", str(REPO))}
    submitted = subprocess.run(
        ["sbatch", "--parsable", "--ntasks=1", "--cpus-per-task=2", f"--output={tmp_path / 'job.out'}",
         f"--chdir={REPO}", f"--wrap={command}"],
        env=env, capture_output=True, text=True, timeout=30, check=True,
    )  # fmt: skip
    job_id = submitted.stdout.strip().split(";")[0]
    run = RunDir(out)
    said = "rank 0 waits for a preemption signal at step 3"
    _wait(lambda: run.log.is_file() and said in run.log.read_text(), None, "rank 0 at its fault")
    subprocess.run(["scancel", "--signal=TERM", "--full", job_id], check=True, timeout=30)
    _wait(lambda: _squeue(job_id, "%T") in ("", "COMPLETED", "FAILED"), None, "the job to end", timeout=120)
    metrics = run.read_metrics()
    assert metrics is not None, (tmp_path / "job.out").read_text()[-3000:]
    assert (metrics["status"], metrics["signal"], metrics["resume_from"]) == ("preempted", "SIGTERM", "step_00000003")
    train(experiment, out, "--nproc", "2", "--resume")
    steps = [(s["step"], s["loss"], s["grad_norm"]) for s in run.read_steps()]
    assert steps == [(s["step"], s["loss"], s["grad_norm"]) for s in reference]


@pytest.mark.slow
def test_a_trial_preempted_under_slurm_is_continued_from_its_checkpoint(slurm, tmp_path):
    """`scancel --signal=TERM --full` of a trial's job (SIGTERM while SLURM keeps the job running, as preemption's
    grace time sends it): the trial reads preempted, not cancelled, and the sweep continues it in a new SLURM job with
    the trainer's --resume; its steps equal the uninterrupted trial's."""
    from trainer.rank.faults import ENV as FAULT

    changes = {
        **CHANGES,
        "search": {**CHANGES["search"], "layouts": ["dp_replicate=1"], "trial_steps": 6},
        "model": {"config": {"attention_dropout": 0.1}},
    }
    experiment = write_experiment(tmp_path, changes)
    reference = run_sweep(experiment, tmp_path / "local", executor="local", space=SPACE)
    assert [t["status"] for t in reference["trials"]] == ["ok"]
    out, trial = tmp_path / "sweep", tmp_path / "sweep" / "trials" / "t000"
    # Rank 0 waits at the start of step 3 for the signal (sbatch passes the sweep's environment to the job); the
    # resumed run starts at step 4 and runs through.
    os.environ[FAULT] = "run=t000,rank=0,step=3,kind=preempt"
    try:
        sweep = _start_sweep(experiment, out)
    finally:
        del os.environ[FAULT]
    said = "rank 0 waits for a preemption signal at step 3"
    _wait(lambda: RunDir(trial).log.is_file() and said in RunDir(trial).log.read_text(), sweep, "rank 0 at its fault")
    first = jobs.read_job(trial)
    subprocess.run(["scancel", "--signal=TERM", "--full", first["executor"]["job_id"]], check=True, timeout=30)
    assert sweep.wait(timeout=300) == 0, sweep.stderr.read()[-3000:]
    [summary] = json.loads((out / "summary.json").read_text())["trials"]
    assert summary["status"] == "ok", summary["cause"]
    assert "resumed from step_00000003" in RunDir(trial).log.read_text()
    steps = [(s["step"], s["loss"], s["grad_norm"]) for s in RunDir(trial).read_steps()]
    local = RunDir(tmp_path / "local" / "trials" / "t000").read_steps()
    assert steps == [(s["step"], s["loss"], s["grad_norm"]) for s in local]
    again = jobs.read_job(trial)
    assert again["executor"]["job_id"] != first["executor"]["job_id"]  # continued in a job of its own
    _wait_completed(first["executor"]["job_id"])  # the preempted job ended cleanly
    _no_sacct(slurm)


@pytest.mark.parametrize(
    ("line", "verdict"),
    [
        ("RUNNING|1:05|10:00", None),  # SIGTERM while SLURM keeps the job: preemption's grace time, scancel --signal
        ("PREEMPTED|1:05|10:00", None),
        (
            "COMPLETING|1:05|10:00",
            ("cancelled", "SLURM job 42 was cancelled (scancel, or preemption) while the trial ran"),
        ),
        ("COMPLETING|10:00|10:00", ("timeout", "SLURM job 42 reached its time limit (10:00)")),
    ],
    ids=["running", "preempted", "scancel", "time-limit"],
)
def test_a_slurm_stop_is_preempted_cancelled_or_timed_out_by_squeue(line, verdict):
    """What a trial's SLURM job records when SIGTERM reaches it: nothing for a preemption (the run ends itself
    "preempted", resumable), "cancelled" for scancel, "timeout" at its time limit."""
    assert executors._slurm_stop_verdict("42", line) == verdict


@pytest.mark.slow
def test_a_sweep_killed_and_resumed_runs_no_trial_twice(slurm, tmp_path):
    """Three 1-core trials submitted at once (on a 2-core node one waits in the queue); the sweep is killed with
    SIGKILL while they run and wait, and resumed: it adopts the three jobs (running, queued or ended meanwhile)
    and submits nothing more."""
    changes = {**CHANGES, "search": {**CHANGES["search"], "layouts": ["dp_replicate=1"], "trial_steps": 12}}
    experiment = write_experiment(tmp_path, changes)
    out = tmp_path / "sweep"
    space = ["--space=train.lr=[0.001, 0.002, 0.003]", "--max-parallel=3"]
    sweep = _start_sweep(experiment, out, *space)
    steps = [RunDir(out / "trials" / t).steps for t in ("t000", "t001", "t002")]
    _wait(lambda: any(s.is_file() and s.read_text().strip() for s in steps), sweep, "a trial's first step")
    os.kill(sweep.pid, signal.SIGKILL)
    sweep.wait()
    before = {t.name: jobs.read_job(t) for t in (out / "trials").iterdir()}
    assert sorted(before) == ["t000", "t001", "t002"]  # every trial was submitted before the kill
    assert not all(RunDir(out / "trials" / t).metrics.is_file() for t in before), "all ended: nothing was adopted"

    resumed = meshpilot("sweep", str(experiment), "--out", str(out), "--executor=slurm", "--resume", space[1])
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert [(t["id"], t["status"]) for t in summary["trials"]] == [("t000", "ok"), ("t001", "ok"), ("t002", "ok")]
    for trial_id, job in before.items():
        after = jobs.read_job(out / "trials" / trial_id)
        assert (after["token"], after["executor"]) == (job["token"], job["executor"])  # the same job, adopted
        assert [s["step"] for s in RunDir(out / "trials" / trial_id).read_steps()] == list(range(1, 13))
    submitted = sorted(p.name.split("_")[0] for p in (out / "submitit").glob("*_submitted.pkl"))
    assert submitted == sorted(job["executor"]["job_id"] for job in before.values())  # 3 sbatch calls in all
    for job_id in submitted:
        _wait_completed(job_id)
    _no_sacct(slurm)


@pytest.mark.slow
def test_a_queued_trial_cancelled_by_slurm_is_read_without_accounting(slurm, tmp_path):
    """A trial's job that SLURM ends before it starts (held in the queue behind another job, then cancelled)
    writes nothing itself: the sweep reads its state from the controller (squeue), with accounting disabled,
    and goes on."""
    if slurm["ours"]:  # up.sh's slurm.conf has no accounting: the real sacct fails
        real = {**os.environ, "PATH": slurm["path"]}
        accounting = subprocess.run(["sacct", "-j", "1"], env=real, capture_output=True, text=True, timeout=30)
        assert accounting.returncode != 0 and "accounting storage is disabled" in accounting.stderr
    blocker = subprocess.run(
        ["sbatch", "--parsable", "--job-name=meshpilot-blocker", "--output=/dev/null", "--wrap=sleep 600"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout.strip()
    experiment = write_experiment(tmp_path, {**CHANGES, "search": {**CHANGES["search"], "layouts": ["dp_replicate=1"]}})
    try:
        out = tmp_path / "sweep"
        # The trial's job may only start once the blocker ended: it waits in the queue.
        sweep = _start_sweep(experiment, out, f"--slurm=dependency=afterany:{blocker}")
        trial = out / "trials" / "t000"
        _wait(lambda: (jobs.read_job(trial) or {}).get("executor"), sweep, "the trial's job to be submitted")
        job_id = jobs.read_job(trial)["executor"]["job_id"]
        assert _squeue(job_id, "%T|%r") == "PENDING|Dependency"
        time.sleep(2)
        assert jobs.read_job(trial)["state"] == "queued" and sweep.poll() is None  # the sweep waits for it
        subprocess.run(["scancel", job_id], check=True, timeout=30)
        assert sweep.wait(timeout=60) == 1, sweep.stderr.read()[-3000:]
    finally:
        subprocess.run(["scancel", blocker], timeout=30)
    [summary] = json.loads((out / "summary.json").read_text())["trials"]
    assert summary["status"] == "cancelled"
    assert summary["cause"] == f"SLURM job {job_id} was cancelled (scancel) before the trial's supervisor started"
    assert not RunDir(trial).steps.exists()
    _no_sacct(slurm)


# -- without a cluster: a queued SLURM trial's status through a stand-in squeue


@pytest.fixture
def queued_trial(tmp_path, monkeypatch):
    """A trial whose SLURM job (42) is queued, and stand-ins for sbatch, squeue (answering what squeue.says
    holds) and sacct (recording any call) on PATH."""
    shims = tmp_path / "bin"
    shims.mkdir()
    _script(shims / "sbatch", "exit 1")
    _script(shims / "sacct", f'echo "$*" >> {shims / "sacct.calls"}\nexit 1')
    _script(
        shims / "squeue",
        f'echo "$*" >> {shims / "squeue.calls"}\n'
        f"says=$(cat {shims / 'squeue.says'})\n"
        "case $says in\n"
        '  invalid) echo "slurm_load_jobs error: Invalid job id specified" >&2; exit 1 ;;\n'
        '  down) echo "slurm_load_jobs error: Unable to contact slurm controller (connect failure)" >&2; exit 1 ;;\n'
        '  *) echo "$says" ;;\n'
        "esac",
    )
    monkeypatch.setenv("PATH", f"{shims}{os.pathsep}{os.environ['PATH']}")
    out = tmp_path / "trials" / "t000"
    jobs.prepare_job(write_experiment(tmp_path), out, nproc=1, steps=2)
    jobs.update_job(out, executor={"kind": "submitit", "cluster": "slurm", "job_id": "42"})
    return out, shims


@pytest.mark.parametrize(
    ("says", "state", "cause"),
    [
        ("PENDING", "queued", None),
        ("down", "queued", None),  # no answer from the controller: nothing is concluded
        ("CANCELLED", "cancelled", "SLURM job 42 was cancelled (scancel) before the trial's supervisor started"),
        ("TIMEOUT", "timeout", "SLURM job 42 reached its time limit before the trial's supervisor started"),
        ("NODE_FAIL", "failed", "SLURM job 42 ended NODE_FAIL before the trial's supervisor started"),
        (
            "invalid",
            "failed",
            "SLURM job 42 ended unseen (SLURM forgets a job MinJobAge after it ended) before the trial's supervisor "
            "started",
        ),
    ],
)
def test_a_queued_slurm_trial_is_read_from_squeue(queued_trial, says, state, cause):
    out, shims = queued_trial
    (shims / "squeue.says").write_text(says)
    status = SubmititExecutor(out.parent / "submitit", "slurm").status(out)
    assert (status["state"], status["cause"]) == (state, cause)
    assert jobs.read_job(out)["state"] == state  # recorded: the summary reads the same
    assert "--jobs=42" in (shims / "squeue.calls").read_text()
    assert not (shims / "sacct.calls").exists()


def test_squeue_is_asked_about_a_queued_job_at_most_every_few_seconds(queued_trial, monkeypatch):
    out, shims = queued_trial
    (shims / "squeue.says").write_text("PENDING")
    executor = SubmititExecutor(out.parent / "submitit", "slurm")
    for _ in range(5):  # the sweep polls twice a second
        assert executor.status(out)["state"] == "queued"
    assert len((shims / "squeue.calls").read_text().splitlines()) == 1
    monkeypatch.setattr(executors, "SLURM_POLL_S", 0.0)
    (shims / "squeue.says").write_text("CANCELLED")
    assert executor.status(out)["state"] == "cancelled"
    assert slurm_state("42") == "CANCELLED"


# -- helpers


def _script(path: Path, body: str) -> None:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


def _squeue(job_id: str, fields: str) -> str:
    command = ["squeue", "--noheader", "--states=all", f"--jobs={job_id}", f"--format={fields}"]
    return subprocess.run(command, capture_output=True, text=True, timeout=30, check=True).stdout.strip()


def _wait_completed(job_id: str) -> None:
    """The job ended cleanly: SLURM shows it COMPLETING for a while after its batch script exits (its epilog),
    then COMPLETED, and squeue forgets it MinJobAge after (an empty answer). Any other state fails at once."""

    def ended() -> bool:
        state = _squeue(job_id, "%T")
        assert state in ("PENDING", "RUNNING", "COMPLETING", "COMPLETED", ""), f"job {job_id} ended {state}"
        return state in ("COMPLETED", "")

    _wait(ended, None, f"job {job_id} COMPLETED", timeout=60)


def _start_sweep(experiment: Path, out: Path, *args: str) -> subprocess.Popen:
    command = [sys.executable, "-m", "agent.cli", "sweep", str(experiment), "--out", str(out), "--executor=slurm"]
    return subprocess.Popen(
        [*command, *SPACE_ARGS, *args], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )


def _wait(condition, sweep: subprocess.Popen | None, what: str, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if sweep is not None and sweep.poll() is not None:
            pytest.fail(f"the sweep ended (code {sweep.returncode}) before {what}: {sweep.stderr.read()[-3000:]}")
        assert time.monotonic() < deadline, f"no {what} within {timeout:g} s"
        time.sleep(0.05)


def _no_sacct(slurm: dict) -> None:
    calls = slurm["sacct"].read_text() if slurm["sacct"].exists() else ""
    assert not calls, f"sacct was called: {calls}"
