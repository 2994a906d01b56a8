"""A sweep as a background job (agent.jobs.start_sweep), as the agent's run_sweep and the terminal UI start it: a
resumed conversation adopts it, and SIGKILL of its supervisor takes the sweep and every trial with it (the trial's
supervisor and launcher forked from the sweep's forkserver, agent.jobs.forkserver).

(The agent's run_sweep returning before the sweep ends, and wait_for_job reporting its summary, are checked on
the sweep of test_agent_runs, which runs one anyway.)
"""

from __future__ import annotations

import os
import signal
import time

import psutil
import pytest
from support import write_experiment

from agent.approvals import Policy
from agent.jobs import job_processes, read_job, run_status, start_sweep
from agent.session import Agent, ToolCall, ToolResult
from agent.tools import TOOLS
from trainer.config import ConfigError
from trainer.results.rundir import RunDir

pytestmark = pytest.mark.slow  # a real sweep job
LIMIT_S = 300  # a bound on waiting for state, not a timing


def wait_for(condition, what: str) -> None:
    deadline = time.monotonic() + LIMIT_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def ranks(token: str) -> list[str]:
    """The training processes (named meshpilot:rN) among a job's processes."""
    names = []
    for pid in job_processes(token):
        try:
            names.append(psutil.Process(pid).name())
        except psutil.NoSuchProcess:
            continue
    return [name for name in names if name.startswith("meshpilot:r")]


def test_a_sweep_job_is_adopted_by_a_resumed_conversation_and_dies_with_its_supervisor(tmp_path, monkeypatch):
    experiment = write_experiment(tmp_path, {"search": {"trials": 1, "trial_steps": 3, "layouts": ["dp_replicate=1"]}})
    with pytest.raises(ConfigError, match="a sweep needs at least one trial, got 0"):
        start_sweep(experiment, tmp_path / "sweeps" / "none", trials=0)
    assert not (tmp_path / "sweeps").exists()  # refused at once, nothing written
    # Inherited by the sweep job and its trial: the trial hangs after its first step, so the sweep stays running.
    monkeypatch.setenv("MESHPILOT_FAULT", "rank=0,step=2,kind=hang")
    first = Agent(tmp_path, policy=Policy.yes())
    events = list(first.send("t", "/sweep wait=no"))
    first.close()  # as the process that started the sweep would end
    started = next(e for e in events if isinstance(e, ToolResult) and e.name == "run_sweep")
    out = tmp_path / started.result["job_id"]
    assert started.result["sweep"] == started.result["job_id"] and events[-1].text.startswith("Started sweep")
    job = read_job(out)
    assert job["kind"] == "sweep" and run_status(out)["state"] in ("queued", "running")

    trials = lambda: list((out / "trials").glob("*/"))  # noqa: E731
    wait_for(lambda: trials() and RunDir(trials()[0]).read_steps() and ranks(job["token"]), "the trial's first step")
    (trial,) = trials()
    assert "forked from its supervisor" in (trial / "job.log").read_text()  # from the sweep's forkserver
    trial_token = read_job(trial)["token"]
    assert ranks(trial_token) == ranks(job["token"]) == ["meshpilot:r0"]  # the trial's rank, owned by the sweep

    # A new process resumes the conversation: "the sweep" is the job it started, still going, asked about...
    resumed = Agent(tmp_path)
    events = list(resumed.send("t", "is the sweep done?"))
    assert [(e.name, e.args) for e in events if isinstance(e, ToolCall)] == [
        ("wait_for_job", {"job_id": started.result["job_id"], "timeout_s": 0})
    ]
    assert events[-1].text.startswith(f"Sweep {started.result['job_id']} is running: 0 trial(s) ended so far.")
    # ... and a graph resumed after a crash that runs the launch again (same call id) adopts the same job.
    run_sweep = next(t for t in TOOLS if t.name == "run_sweep")
    run_sweep.func(repo=str(tmp_path), tool_call_id=started.id)
    assert read_job(out)["token"] == job["token"] and read_job(out)["pid"] == job["pid"]
    assert [p.name for p in (tmp_path / "sweeps").iterdir()] == [out.name]

    os.kill(job["pid"], signal.SIGKILL)  # the supervisor alone: the sweep and its trials are tied to it
    wait_for(lambda: not job_processes(job["token"]) and not job_processes(trial_token), "every process to end")
    status = run_status(out)
    assert status["state"] == "killed" and status["cause"].startswith(f"the job's supervisor (pid {job['pid']})")
    assert status["summary"] is None and run_status(trial)["state"] == "killed"
    events = list(resumed.send("t", "wait for the sweep"))
    waited = next(e for e in events if isinstance(e, ToolResult)).result
    assert (waited["state"], waited["source"]) == ("killed", f"{started.result['job_id']}/job.json")
    assert events[-1].text.startswith(f"Sweep {started.result['job_id']} is killed: the job's supervisor")
    resumed.close()
