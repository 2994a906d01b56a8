"""Background runs (agent.jobs): they return at once, are never started twice, and every way a run can go wrong
ends in a recorded state with its cause and no process left behind."""

from __future__ import annotations

import os
import shutil
import signal
import time
from pathlib import Path

import pytest
from support import write_experiment

from agent.jobs import cancel_run, job_processes, read_job, run_status, start_run, wait_run
from trainer.config import ConfigError
from trainer.launch.launcher import IGNORE_MEMORY_ENV
from trainer.results.rundir import RunDir

CHANGES = {"train": {"steps": 3, "timing_warmup_steps": 1}}
# One intermediate matrix of 2^43 x 32 floats: a petabyte, refused by the allocator at once on any machine
# (no memory is touched). hardware.device_mem claims room for it, as a user who got their memory wrong would.
HUGE_MLP = {"model": {"config": {"intermediate_size": 2**43}}, "hardware": {"device_mem": "100000TiB"}}


pytestmark = pytest.mark.slow  # real background runs


@pytest.fixture(scope="module")
def experiment(tmp_path_factory):
    return write_experiment(tmp_path_factory.mktemp("jobs"), CHANGES)


@pytest.fixture(scope="module")
def runs(experiment):
    """A run that ends ok, and runs that fail in every way the watchdog tells apart, all started at once as an agent
    would start them; each test waits for its own. The first status of each is taken right after its start."""
    from trainer.launch.launcher import TrainRequest, prepare

    prepare(TrainRequest(experiment, out=experiment.parent / "warm-up"))  # tokenizer and data: built once, cached
    huge = write_experiment(experiment.parent, {**CHANGES, **HUGE_MLP}, name="huge.yaml")
    fault = "MESHPILOT_FAULT"
    requests = {
        "ok": dict(steps=2),
        "crash": dict(nproc=2, env={fault: "rank=1,step=2,kind=crash"}),
        "exit": dict(env={fault: "rank=0,step=2,kind=exit"}),
        "hang": dict(env={fault: "rank=0,step=2,kind=hang"}, hang_s=10),
        "time_limit": dict(env={fault: "rank=0,step=1,kind=hang"}, timeout_s=2),
        "nan": dict(overrides=["train.lr=1e30"], steps=40),
        "cancel": dict(env={fault: "rank=0,step=1,kind=hang"}),
        "supervisor_killed": dict(nproc=2, env={fault: "rank=0,step=2,kind=hang"}),
        "refused": dict(nproc=3, layout="tp=3"),  # passes the quick checks, not the launcher's
    }
    outs, first = {}, {}
    for name, request in requests.items():
        outs[name] = experiment.parent / name
        assert start_run(experiment, outs[name], **request) == name
        first[name] = run_status(outs[name])
    outs["oom"] = experiment.parent / "oom"
    start_run(huge, outs["oom"], env={IGNORE_MEMORY_ENV: "1"})  # the launcher's memory check would refuse it
    yield outs, first
    for out in outs.values():  # a test that failed early may have left a hanging run
        cancel_run(out)


def processes_gone(token: str, limit_s: float = 120) -> bool:
    """Whether every process of the job has exited: a run's status is written before its supervisor and launcher
    have finished exiting, so wait for the processes (bounded) rather than expect them gone at that instant."""
    deadline = time.monotonic() + limit_s
    while job_processes(token) and time.monotonic() < deadline:
        time.sleep(0.2)
    return job_processes(token) == []


def test_start_returns_at_once_and_the_run_ends_ok(runs):
    outs, first = runs
    assert all(status["state"] in ("queued", "running") and status["step"] == 0 for status in first.values())
    job = read_job(outs["ok"])
    assert job["pid"] > 0 and job["pgid"] > 0 and job["started"] > 0
    assert job["command"][1:4] == ["-m", "agent.cli", "train"] and "--set=train.steps=2" in job["command"]
    done = wait_run(outs["ok"])
    assert done["state"] == "ok" and done["cause"] is None
    assert (done["step"], done["steps"]) == (2, 2)
    assert done["metrics"]["status"] == "ok" and done["metrics"]["final_loss"] > 0
    assert processes_gone(job["token"])


def test_a_started_or_finished_run_is_never_started_again(experiment, runs):
    outs, _ = runs
    running = read_job(outs["cancel"])  # hangs at its first step until cancelled
    assert start_run(experiment, outs["cancel"]) == "cancel"
    assert read_job(outs["cancel"])["token"] == running["token"]  # the same job, not a second one
    wait_run(outs["ok"])
    finished = read_job(outs["ok"])
    assert start_run(experiment, outs["ok"], steps=2) == "ok"
    assert read_job(outs["ok"]) == finished
    assert cancel_run(outs["ok"]) is False  # nothing left to stop
    assert run_status(outs["ok"])["state"] == "ok"


def test_crashed_rank_is_failed_with_its_cause(runs):
    outs, _ = runs
    status = wait_run(outs["crash"])
    assert status["state"] == "failed"
    assert status["cause"] == "rank 1: RuntimeError: injected fault on rank 1 at step 2"
    assert status["step"] == 1


def test_rank_dying_without_python_error_is_failed(runs):
    outs, _ = runs
    status = wait_run(outs["exit"])
    assert status["state"] == "failed"
    assert status["cause"].startswith("rank 0 exited with code 13 without a Python error")  # the fault's os._exit(13)


def test_hang_is_stopped_and_recorded_as_timeout(runs):
    outs, _ = runs
    status = wait_run(outs["hang"])
    assert status["state"] == "timeout"
    assert status["cause"] == "hang: no new step for 10s after step 1"
    assert processes_gone(read_job(outs["hang"])["token"])  # the hung rank is gone too
    assert status["metrics"] is None


def test_time_limit_stops_the_run(runs):
    outs, _ = runs
    status = wait_run(outs["time_limit"])
    assert status["state"] == "timeout"
    assert status["cause"] == "ran past its time limit of 2s"
    assert processes_gone(read_job(outs["time_limit"])["token"])


def test_nan_loss_stops_the_run_early(runs):
    outs, _ = runs
    status = wait_run(outs["nan"])
    assert status["state"] == "nan"
    assert "NonFiniteLoss: loss nan at step 3" in status["cause"]  # the trainer stopped itself and said why
    assert status["step"] == 3 and status["metrics"]["status"] == "nan"
    assert processes_gone(read_job(outs["nan"])["token"])


def test_allocation_failure_on_cpu_is_oom(runs):
    outs, _ = runs
    status = wait_run(outs["oom"])
    assert status["state"] == "oom"
    assert "can't allocate memory" in status["cause"]


def test_launcher_refusal_is_failed_with_its_one_line_error(runs):
    outs, _ = runs
    status = wait_run(outs["refused"])
    assert status["state"] == "failed"
    assert status["cause"] == "layout tp=3 must divide the model's num_attention_heads (4)"
    assert status["metrics"] is None and status["step"] == 0


def test_cancel_kills_every_process_of_the_run(runs):
    outs, _ = runs
    out = outs["cancel"]
    token = read_job(out)["token"]
    deadline = time.monotonic() + 120
    while not any(_is_rank(pid) for pid in job_processes(token)):
        assert time.monotonic() < deadline and run_status(out)["state"] == "running"
        time.sleep(0.2)
    assert cancel_run(out) is True
    status = run_status(out)
    assert (status["state"], status["cause"]) == ("cancelled", "cancelled by the user")
    assert job_processes(token) == []
    assert cancel_run(out) is False


def test_a_killed_supervisor_takes_its_run_with_it_and_is_recorded_killed(runs):
    outs, _ = runs
    out = outs["supervisor_killed"]
    token = read_job(out)["token"]
    deadline = time.monotonic() + 300  # a bound on waiting for state, not a timing
    while not (RunDir(out).read_steps() and sum(_is_rank(pid) for pid in job_processes(token)) == 2):
        assert time.monotonic() < deadline and run_status(out)["state"] == "running"
        time.sleep(0.2)
    os.kill(read_job(out)["pid"], signal.SIGKILL)  # the supervisor alone: its run is tied to it
    while job_processes(token):
        assert time.monotonic() < deadline, "the run outlived its supervisor"
        time.sleep(0.1)
    assert read_job(out)["state"] == "running"  # nobody has looked yet
    status = run_status(out)
    assert status["state"] == "killed" and status["cause"].startswith("the job's supervisor (pid ")
    assert read_job(out)["state"] == "killed"  # the reader recorded it
    assert (status["step"], status["metrics"]) == (1, None)


def test_a_run_whose_directory_is_removed_is_stopped(experiment, tmp_path):
    out = tmp_path / "removed"
    start_run(experiment, out, env={"MESHPILOT_FAULT": "rank=0,step=1,kind=hang"})
    token = read_job(out)["token"]
    deadline = time.monotonic() + 60
    while "launcher_pid" not in read_job(out):  # the launcher has started
        assert time.monotonic() < deadline
        time.sleep(0.05)
    shutil.rmtree(out)
    while job_processes(token):
        assert time.monotonic() < deadline, "the run outlived its directory"
        time.sleep(0.1)


def test_bad_requests_fail_at_once_with_one_line(experiment, runs, tmp_path):
    outs, _ = runs
    with pytest.raises(ConfigError, match=r"unknown config key 'train\.lrr'"):
        start_run(experiment, tmp_path / "typo", overrides=["train.lrr=1e-3"])
    with pytest.raises(ConfigError, match="nproc must be at least 1"):
        start_run(experiment, tmp_path / "zero", nproc=0)
    with pytest.raises(ConfigError, match="timeout_s must be positive"):
        start_run(experiment, tmp_path / "limit", timeout_s=0)
    with pytest.raises(ConfigError, match="--layout expects"):
        start_run(experiment, tmp_path / "layout", layout="dp=2")
    assert not any(tmp_path.iterdir())  # nothing half-written
    wait_run(outs["crash"])
    with pytest.raises(ConfigError, match="holds a run that ended failed"):
        start_run(experiment, outs["crash"], nproc=2)
    with pytest.raises(ConfigError, match="no run in"):
        run_status(tmp_path)


def _is_rank(pid: int) -> bool:
    """A training process: forked by torchrun's agent, it shares the agent's command line but not its name."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().startswith("meshpilot:r")
    except OSError:
        return False
