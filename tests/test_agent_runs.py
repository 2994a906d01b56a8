"""The offline planner end to end with real tiny training runs on CPU, and a conversation that survives SIGKILL."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from langchain_core.messages import ToolMessage

from agent.approvals import Policy
from agent.jobs import run_status
from agent.session import Agent, ToolCall, ToolResult
from tests.support import REPO, meshpilot, write_experiment
from trainer.results.rundir import RunDir

pytestmark = pytest.mark.slow
SMALL_TASK = """name: kv_small
version: 1
description: Key-value recall, four items per split.
output_type: multiple_choice
data: {generator: kv_recall}
splits:
  dev: {size: 4}
  test: {size: 4, private: true}
prompt: "{pairs}. So {key}="
choices: choices
target: "{gold}"
metrics: [acc]
"""


def _wait_for(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def _ask(repo: Path, *args: str, **kwargs) -> subprocess.Popen:
    command = [sys.executable, "-m", "agent.cli", "ask", "--repo", str(repo), *args]
    return subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)


def test_killed_at_the_approval_and_mid_run_the_thread_resumes_without_relaunching(tmp_path):
    write_experiment(tmp_path)
    thread = "killed"

    # 1. An interactive session (a terminal on stdin) asks for approval and waits for a person: kill it there.
    terminal, terminal_side = pty.openpty()
    try:
        asking = _ask(tmp_path, "--thread", thread, "--approve-below", "0", "/run nproc=1 steps=2", stdin=terminal_side)
        seen = ""
        deadline = time.monotonic() + 120
        while "Approval needed" not in seen:
            assert time.monotonic() < deadline and asking.poll() is None, seen
            if select.select([asking.stderr], [], [], 1.0)[0]:
                seen += os.read(asking.stderr.fileno(), 4096).decode()
        asking.send_signal(signal.SIGKILL)
        asking.wait()
    finally:
        os.close(terminal)
        os.close(terminal_side)
    assert not (tmp_path / "runs").exists()

    # 2. A new process decides (with an edit: 3 steps) and waits for the run: kill it while the run trains.
    deciding = _ask(tmp_path, "--thread", thread, "--edit", '{"steps": 3}')
    steps_files = lambda: list((tmp_path / "runs").glob("*/steps.jsonl"))  # noqa: E731
    _wait_for(lambda: steps_files() and steps_files()[0].read_text().strip(), 180, "the first training step")
    deciding.send_signal(signal.SIGKILL)
    deciding.wait()
    run_dir = steps_files()[0].parent
    job = json.loads((run_dir / "job.json").read_text())

    # 3. Rerun the thread: it finishes the step it was in (waiting for the run) and reports the same run.
    done = meshpilot("ask", "--repo", str(tmp_path), "--thread", thread)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"Run runs/{run_dir.name} finished ok" in done.stdout
    assert [p.name for p in (tmp_path / "runs").iterdir()] == [run_dir.name]
    assert json.loads((run_dir / "job.json").read_text())["token"] == job["token"]  # the same job, never relaunched
    assert [s["step"] for s in RunDir(run_dir).read_steps()] == [1, 2, 3]  # the edited step count ran, once
    launches = [m for m in Agent(tmp_path).messages(thread) if isinstance(m, ToolMessage) and m.name == "launch_run"]
    assert len(launches) == 1

    metrics = RunDir(run_dir).read_metrics()
    assert f"final loss {metrics['final_loss']:.4f}, {metrics['tokens_per_s']:,.0f} tokens/s" in done.stdout
    assert f"(source: runs/{run_dir.name}/metrics.json)" in done.stdout and "[?]" not in done.stdout

    # 4. Nothing is left to finish; the conversation goes on from the run it launched.
    again = meshpilot("ask", "--repo", str(tmp_path), "--thread", thread)
    assert again.returncode == 2 and "nothing to continue" in again.stderr
    agent = Agent(tmp_path)
    reply = list(agent.send(thread, "show me the results"))[-1]
    for step in RunDir(run_dir).read_steps():
        assert f"{step['step']}: {step['loss']:.4f}" in reply.text
    assert f"(source: runs/{run_dir.name}/steps.jsonl)" in reply.text and reply.unverified == []
    memory = json.loads((run_dir / "memory.json").read_text())
    assert f"measured {memory['measured'][0]['peak'] / 2**30:.3f} GiB" in reply.text
    assert "cancelled: False" in list(agent.send(thread, "/cancel"))[-1].text  # it ended: nothing to stop
    assert list(agent.send(thread, "what is the status?"))[-1].text.startswith(f"Run runs/{run_dir.name} finished ok")
    spent = agent.graph.get_state({"configurable": {"thread_id": thread}}).values["spent"]
    assert spent["launches"] == 1 and spent["device_hours"] > 0

    # 5. A benchmark (a small task file of the repository) evaluates the run's checkpoint; the reply quotes it.
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "kv.yaml").write_text(SMALL_TASK)
    events = list(agent.send(thread, "/bench suite=tasks/kv.yaml"))
    assert [e.args for e in events if isinstance(e, ToolCall)] == [
        {"suite": "tasks/kv.yaml", "model": f"runs/{run_dir.name}"}
    ]
    bench = next(e for e in events if isinstance(e, ToolResult)).result
    result = json.loads((tmp_path / bench["source"]).read_text())
    reply = events[-1]
    assert reply.unverified == [] and reply.sources == [bench["source"]]
    for task in result["tasks"]:
        assert f"- {task['task']} {task['split']}" in reply.text


def test_sweep_explained_then_report_and_pull_request_unattended(tmp_path):
    repo, remote = tmp_path / "repo", tmp_path / "remote.git"
    git = lambda *args, cwd=repo: subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)  # noqa: E731
    repo.mkdir()
    git("init", "-q", "--bare", str(remote), cwd=tmp_path)
    git("init", "-q", "-b", "main")
    write_experiment(repo, {"search": {"trials": 1, "trial_steps": 2}})
    git("add", "meshpilot.yaml")
    git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "experiment")
    git("remote", "add", "origin", str(remote))
    git("push", "-q", "origin", "main")
    agent = Agent(repo, policy=Policy.yes())

    events = []
    for event in agent.send("s", "/sweep"):  # the sweep starts as a background job, then the planner waits for it
        events.append(event)
        if isinstance(event, ToolResult) and event.name == "run_sweep":  # returned at once: the sweep goes on
            going = run_status(repo / event.result["job_id"])
            assert going["kind"] == "sweep" and going["state"] in ("queued", "running") and going["summary"] is None
    assert [e.name for e in events if isinstance(e, ToolCall)] == ["run_sweep", "wait_for_job"]
    summary = next(e for e in events if isinstance(e, ToolResult) and e.name == "wait_for_job").result
    assert summary["state"] == "ok" and summary["trials_ended"] == len(summary["trials"]) == 1
    winner = next(t for t in summary["trials"] if t["id"] == summary["winner"])
    assert summary["source"] == f"{summary['sweep']}/summary.json" and winner["status"] == "ok"
    assert f"measured {winner['tokens_per_s']:,.0f} tokens/s" in events[-1].text and events[-1].unverified == []

    reply = list(agent.send("s", "why did FSDP win?"))[-1]  # the measured winner is a DDP layout
    assert reply.text.startswith("No FSDP trial finished ok in the sweep") and reply.unverified == []
    assert f"DDP won with trial {winner['id']}" in reply.text

    events = list(agent.send("s", "/report"))
    assert [e.args for e in events if isinstance(e, ToolCall)] == [{"sweep": summary["sweep"], "bench": []}]
    written = next(e for e in events if isinstance(e, ToolResult)).result
    assert git("show", f"{written['branch']}:{written['report_path']}").stdout  # committed on its own branch
    assert f"commit {written['commit'][:12]}" in events[-1].text

    events = list(agent.send("s", "open a pull request"))
    opened = next(e for e in events if isinstance(e, ToolResult)).result
    assert opened["pr"]["provider"] == "local"
    assert git("rev-parse", written["branch"], cwd=remote).stdout.decode().strip() == opened["commit"]  # pushed
