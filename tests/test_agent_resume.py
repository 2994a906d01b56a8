"""The agent resumes a preempted run (issue 35, item 3): a tiny CPU run stopped by a real SIGTERM to its job's
supervisor ends "preempted" with a checkpoint; the agent says so and that it is resumable, and resume_job (asked in
words of the offline planner, or called by a scripted chat model on the LLM path) continues it in its own directory
to the uninterrupted run's steps and final loss. A job that is running, ended ok or has no checkpoint is refused in
one line before anything starts.

Every run is real and has one process, with dropout on, so an exact continuation also needs the RNG state back.
Rank 0 waits at the start of step 3 until the signal reaches it (MESHPILOT_FAULT kind=preempt): the preemption
always saves the checkpoint of step 3.
"""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

import pytest
from killed_runs import wait_for
from langchain_core.messages import AIMessage, HumanMessage
from support import train, write_experiment

from agent import jobs
from agent.approvals import Policy
from agent.session import Agent, Approval, Reply, ToolCall, ToolResult
from agent.understanding import context_of, understand
from tests.test_agent_graph import ScriptedModel, call
from trainer.rank.faults import ENV as FAULT
from trainer.results.rundir import RunDir

STEPS, PREEMPT_AT = 6, 3
CHANGES = {"train": {"steps": STEPS}, "model": {"config": {"attention_dropout": 0.1}}}


def numbers(steps: list[dict]) -> list[tuple]:
    return [(s["step"], s["loss"], s["grad_norm"], s["lr"]) for s in steps]


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> RunDir:
    """The uninterrupted run."""
    directory = tmp_path_factory.mktemp("resume-reference")
    return train(write_experiment(directory, CHANGES), directory / "reference", "--nproc", "1")


def start_preemptible(repo: Path, name: str) -> Path:
    """A job of the repository's experiment (as launch_run starts one) whose rank 0 waits at step 3 for a
    preemption signal; returned once it waits there."""
    out = repo / "runs" / name
    jobs.start_run(
        repo / "meshpilot.yaml", out, nproc=1, env={FAULT: f"run={name},rank=0,step={PREEMPT_AT},kind=preempt"}
    )
    said = f"rank 0 waits for a preemption signal at step {PREEMPT_AT}"
    log = RunDir(out).rank_log(0)
    wait_for(lambda: log.is_file() and said in log.read_text(), said)
    return out


def preempt(out: Path) -> None:
    """SIGTERM to the job's supervisor, as a scheduler sends it; returns once the job ended preempted."""
    os.kill(jobs.read_job(out)["pid"], signal.SIGTERM)
    assert jobs.wait_run(out)["state"] == "preempted"


def assert_resumed_exactly(out: Path, reference: RunDir) -> None:
    run = RunDir(out)
    assert f"resumed from step_{PREEMPT_AT:08d}" in run.log.read_text()  # not started again from step 0
    assert numbers(run.read_steps()) == numbers(reference.read_steps())
    assert run.read_metrics()["status"] == "ok"
    assert run.read_metrics()["final_loss"] == reference.read_metrics()["final_loss"]


def tool_results(events: list, name: str) -> list[ToolResult]:
    return [e for e in events if isinstance(e, ToolResult) and e.name == name]


# --- the offline planner's reading of a request to resume --------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "command", "args"),
    [
        ("resume r1", "resume", {"run": "runs/r1"}),
        ("please resume runs/r1", "resume", {"run": "runs/r1"}),
        ("/resume runs/r1", "resume", {}),  # a slash command's run is its word
        ("resume it", "resume", {}),  # no run in the conversation: agent.offline finds the preempted one
        ("pick the sweep back up", "resume", {"kind": "sweep"}),
        ("resume the lr-scan sweep", "resume", {"kind": "sweep", "sweep": "sweeps/lr-scan"}),
        ("stop r1", "cancel", {"run": "runs/r1"}),  # the other verbs keep their meaning
        ("start r1 again", "run", None),
    ],
)
def test_requests_to_resume_are_read_as_resume(tmp_path, text, command, args):
    from bench.agent_understanding import build_fixture

    repo = build_fixture(tmp_path / "repo")
    intent = understand(text, context_of([HumanMessage(text)], str(repo)))
    assert intent.command == command
    if args is not None:
        assert intent.args == args and intent.clarify is None
    if text.startswith("/"):
        assert intent.words == ["runs/r1"]


# --- real runs ---------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_offline_planner_resumes_a_preempted_run_to_the_uninterrupted_loss(reference, tmp_path):
    repo = tmp_path / "repo"
    write_experiment(repo.mkdir() or repo, CHANGES)
    agent = Agent(repo, policy=Policy(approve_below=0.0))  # every launch asks: the approval is shown
    out = start_preemptible(repo, "r1")

    # Running: refused in one line, nothing asked, nothing started.
    events = list(agent.send("t", "resume r1"))
    assert not any(isinstance(e, Approval) for e in events)
    assert "r1: the run is still running; only a preempted run can be resumed" in events[-1].text
    preempt(out)

    # The status says preempted, and that it is resumable.
    events = list(agent.send("t", "/status runs/r1"))
    assert f"Run runs/r1 is preempted at step {PREEMPT_AT} of {STEPS}" in events[-1].text
    assert 'It is resumable: say "resume runs/r1"' in events[-1].text
    spare = tmp_path / "spare"
    shutil.copytree(out, spare)  # the same preempted run, to take its checkpoint away below

    # "continue the preempted run": the approval says what will happen; approved, it runs to its end.
    events = list(agent.send("t", "continue the preempted run"))
    approval = events[-1]
    assert isinstance(approval, Approval) and approval.request["tool"] == "resume_job"
    assert approval.request["args"] == {"job_id": "runs/r1"}
    assert approval.request["summary"].startswith(
        f"resume the preempted run runs/r1 from its checkpoint step_{PREEMPT_AT:08d} "
        f"({STEPS - PREEMPT_AT} of {STEPS} steps left): "
    )
    assert approval.request["cost"]["steps"] == STEPS - PREEMPT_AT
    events = list(agent.resume("t", {"action": "approve"}))
    assert [e.name for e in events if isinstance(e, ToolResult)] == ["resume_job", "wait_for_job"]
    assert tool_results(events, "wait_for_job")[0].result["state"] == "ok"
    reply = events[-1]
    final = reference.read_metrics()["final_loss"]
    assert isinstance(reply, Reply) and f"Run runs/r1 finished ok, final loss {final:.4f}" in reply.text
    assert_resumed_exactly(out, reference)

    # Ended ok: nothing to resume. Preempted before a checkpoint: nothing to resume from.
    events = list(agent.send("t", "/resume runs/r1"))
    assert "r1: the run ended ok, not preempted; only a preempted run resumes" in events[-1].text
    shutil.rmtree(spare / "checkpoint")
    spare.rename(repo / "runs" / "r2")
    events = list(agent.send("t", "/resume runs/r2"))
    assert not any(isinstance(e, Approval) for e in events)
    assert "r2: the run was preempted before it saved a complete checkpoint: nothing to resume" in events[-1].text
    assert RunDir(repo / "runs" / "r2").read_metrics()["status"] == "preempted"  # left as it was


@pytest.mark.slow
def test_a_chat_model_resumes_a_preempted_run_with_resume_job(reference, tmp_path):
    """The LLM path: a scripted model calls resume_job and wait_for_job, as a real model reading the tools would."""
    repo = tmp_path / "repo"
    write_experiment(repo.mkdir() or repo, CHANGES)
    out = start_preemptible(repo, "r1")
    preempt(out)
    model = ScriptedModel(
        script=[
            call("run_status", "s1", run="runs/r1"),
            call("resume_job", "c1", job_id="runs/r1"),
            call("wait_for_job", "w1", job_id="runs/r1"),
            AIMessage("Resumed runs/r1; it finished."),
        ]
    )
    events = list(Agent(repo, model).send("t", "my run was preempted, please continue it"))  # cheap: no approval
    assert "resume_job" in model.tools
    described = next(t for t in model.seen[0][0].content.split("\n") if "resume_job" in t)
    assert "preempted" in described  # the system prompt tells the model a preempted job is resumable
    status = tool_results(events, "run_status")[0].result
    assert status["state"] == "preempted"
    assert [e.name for e in events if isinstance(e, ToolCall)] == ["run_status", "resume_job", "wait_for_job"]
    assert tool_results(events, "resume_job")[0].result == {"source": "runs/r1/job.json", "job_id": "runs/r1",
                                                            "run": "runs/r1", "resumed": True}  # fmt: skip
    assert tool_results(events, "wait_for_job")[0].result["state"] == "ok"
    assert_resumed_exactly(out, reference)


SWEEP_CHANGES = {
    "search": {"layouts": ["dp_replicate=1"], "objective": "final_loss", "trial_steps": STEPS, "trials": 1},
    "train": {"timing_warmup_steps": 1},
    "model": {"config": {"attention_dropout": 0.1}},
}


@pytest.mark.slow
def test_the_offline_planner_picks_a_preempted_sweep_back_up(tmp_path):
    """A one-trial sweep job preempted by SIGTERM to its supervisor (its trial saves step 3): "pick the sweep back
    up" resumes it (`meshpilot sweep --resume` through its recorded command), and its trial goes on from step 3.
    The sweep job's SIGTERM is checked here for tests/test_sweep_preemption.py too (the sweep and its trial both
    read preempted, with the sweep's cause); that file checks the continued trial's steps exactly."""
    repo = tmp_path / "repo"
    experiment = write_experiment(repo.mkdir() or repo, SWEEP_CHANGES)
    out = repo / "sweeps" / "s1"
    # The one trial is the planner's pick, named by it: the fault names no run, and only the trial trains.
    jobs.start_sweep(experiment, out, trials=1, env={FAULT: f"rank=0,step={PREEMPT_AT},kind=preempt"})
    said = f"rank 0 waits for a preemption signal at step {PREEMPT_AT}"
    logs = lambda: list(out.glob("trials/*/log.txt"))  # noqa: E731
    wait_for(lambda: logs() and said in logs()[0].read_text(), said)
    trial = RunDir(logs()[0].parent)
    os.kill(jobs.read_job(out)["pid"], signal.SIGTERM)
    status = jobs.wait_run(out)
    assert (status["state"], status["cause"]) == (
        "preempted",
        "preempted by SIGTERM with its running trials; its --resume continues them",
    )
    assert jobs.run_status(trial.path)["state"] == "preempted"  # the trial with it, not killed

    agent = Agent(repo)
    events = list(agent.send("t", "/status sweeps/s1"))
    assert 'preempted by SIGTERM with its running trials; its --resume continues them. It is resumable: say "resume' \
        ' sweeps/s1"' in events[-1].text  # fmt: skip
    events = list(agent.send("t", "pick the sweep back up"))  # tiny: below the approval threshold
    assert [e.name for e in events if isinstance(e, ToolCall)] == ["list_results", "resume_job", "wait_for_job"]
    assert tool_results(events, "resume_job")[0].result["sweep"] == "sweeps/s1"
    waited = tool_results(events, "wait_for_job")[0].result
    assert waited["state"] == "ok" and [(t["id"], t["status"]) for t in waited["trials"]] == [(trial.path.name, "ok")]
    assert f"resumed from step_{PREEMPT_AT:08d}" in trial.log.read_text()  # not started again from step 0
    assert [s["step"] for s in trial.read_steps()] == list(range(1, STEPS + 1))
    assert "--resume" in jobs.read_job(out)["command"]
