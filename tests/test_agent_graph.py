"""The graph with scripted chat models (the LLM path) and with the offline planner, without training runs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

from agent.approvals import Policy, launch_cost
from agent.figures import FLAG
from agent.session import Agent, AgentError, Approval, Reply, ToolCall, ToolResult
from tests.support import write_experiment
from trainer.config import ConfigError


class ScriptedModel(BaseChatModel):
    """Replays AIMessages (with tool calls) in order and records what each call was shown."""

    script: list[AIMessage]
    seen: list[list[BaseMessage]] = Field(default_factory=list)
    tools: list[str] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools, **kwargs):
        from langchain_core.utils.function_calling import convert_to_openai_tool

        self.tools.extend(convert_to_openai_tool(t)["function"]["name"] for t in tools)
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        self.seen.append(list(messages))
        return ChatResult(generations=[ChatGeneration(message=self.script[len(self.seen) - 1])])


def call(name: str, call_id: str, **args: Any) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": call_id}])


@pytest.fixture
def repo(tmp_path) -> Path:
    write_experiment(tmp_path)
    return tmp_path


def run(events) -> list:
    return list(events)


def test_llm_path_tool_results_reach_the_model_and_invented_numbers_are_flagged(repo):
    model = ScriptedModel(
        script=[
            call("plan_layouts", "c1", devices=8),
            AIMessage("PLACEHOLDER"),  # replaced below once the plan's figures are known
        ]
    )
    agent = Agent(repo, model)
    # The reply is written after the tool ran: build it from the real result, plus one invented figure.
    events: list = []
    stream = agent.send("t", "find the fastest layout on 8 GPUs")
    for event in stream:
        events.append(event)
        if isinstance(event, ToolResult):
            best = event.result["top"][0]
            model.script[1] = AIMessage(
                f"{best['layout']} is fastest at {best['predicted_tokens_per_s']:,.0f} tokens/s, 3.7x faster than TP."
            )
    assert "plan_layouts" in model.tools and "launch_run" in model.tools
    result = next(e for e in events if isinstance(e, ToolResult))
    assert result.result["source"] == ".meshpilot/plans/meshpilot-8x1-cuda-81079MiB.json"
    assert (repo / result.result["source"]).is_file()
    shown = model.seen[1]  # the second model call sees the tool's result
    assert isinstance(shown[-1], ToolMessage) and json.loads(shown[-1].content) == result.result
    reply = events[-1]
    assert isinstance(reply, Reply)
    assert reply.unverified == ["3.7x"] and f"3.7x {FLAG}" in reply.text
    assert reply.sources == [result.result["source"]] and reply.text.count("Sources:") == 1
    # The checked reply is what the conversation keeps.
    assert agent.messages("t")[-1].text == reply.text


def test_offline_planner_plans_and_explains_from_the_plan_file(tmp_path):
    # 16 rows per step: the experiment's fixed micro-batch of 2 runs on 8 data-parallel ranks.
    repo = tmp_path
    write_experiment(repo, {"train": {"global_batch_tokens": 1024}})
    agent = Agent(repo)
    run(agent.send("t", "find the fastest layout for this model on 8 GPUs"))
    events = run(agent.send("t", "why did FSDP win?"))
    assert not any(isinstance(e, ToolCall) for e in events)  # explained from the plan already in the conversation
    reply = events[-1]
    plan = json.loads((repo / ".meshpilot/plans/meshpilot-8x1-cuda-81079MiB.json").read_text())
    winner = plan["candidates"][0]
    assert reply.unverified == [] and reply.sources == [".meshpilot/plans/meshpilot-8x1-cuda-81079MiB.json"]
    assert f"{winner['predicted_tokens_per_s']:,.0f} tokens/s" in reply.text
    best_fsdp = next(c for c in plan["candidates"] if c["dropped"] is None and c["layout"]["dp_shard"] == 8)
    assert f"Best FSDP (dp_shard=8): predicts {best_fsdp['predicted_tokens_per_s']:,.0f} tokens/s" in reply.text


def test_launch_above_the_threshold_waits_and_a_rejection_starts_nothing(repo):
    agent = Agent(repo, policy=Policy(approve_below=0.0))
    events = run(agent.send("t", "/run nproc=2 layout=dp_shard=2 steps=3"))
    approval = events[-1]
    assert isinstance(approval, Approval) and agent.state("t") == "waiting"
    expected = launch_cost(repo / "meshpilot.yaml", nproc=2, layout="dp_shard=2", steps=3)
    assert approval.request["cost"]["device_hours"] == pytest.approx(expected.device_hours)
    assert approval.request["cost"]["devices"] == 2 and approval.request["tool"] == "launch_run"
    with pytest.raises(AgentError, match="waits for an approval"):
        agent.send("t", "/help")
    events = run(agent.resume("t", {"action": "reject", "reason": "too expensive today"}))
    rejected = next(e for e in events if isinstance(e, ToolResult))
    assert rejected.result["rejected"] and rejected.result["reason"] == "too expensive today"
    assert "too expensive today" in events[-1].text
    assert not (repo / "runs").exists()
    assert agent.state("t") == "idle"
    with pytest.raises(AgentError, match="no approval waiting"):
        agent.resume("t", {"action": "approve"})


def test_unattended_policy_rejects_beyond_its_budget_without_asking(repo):
    agent = Agent(repo, policy=Policy.parse("device_hours=0,trials=5"))
    events = run(agent.send("t", "/run nproc=1 steps=2"))
    assert not any(isinstance(e, Approval) for e in events)
    assert "over the policy's budget" in events[-1].text
    assert not (repo / "runs").exists()
    events = run(Agent(repo, policy=Policy.parse("trials=0")).send("t2", "/run nproc=1 steps=2"))
    assert "0 trials" in events[-1].text or "trials" in events[-1].text


def test_pull_requests_always_wait_interactively_and_follow_the_policy_unattended(repo):
    script = [call("open_pull_request", "p1", sweep="sweeps/x"), AIMessage("Not opened.")]
    agent = Agent(repo, ScriptedModel(script=list(script)), policy=Policy(approve_below=1e9))
    approval = run(agent.send("t", "open a PR"))[-1]
    assert isinstance(approval, Approval) and approval.request["kind"] == "pull_request"
    agent = Agent(repo, ScriptedModel(script=list(script)), policy=Policy.parse("pr=no"))
    events = run(agent.send("t2", "open a PR"))
    rejected = next(e for e in events if isinstance(e, ToolResult))
    assert "does not allow" in rejected.result["reason"]


def test_a_launch_that_cannot_run_is_refused_before_anything_starts(repo):
    agent = Agent(repo, policy=Policy(approve_below=0.0))
    events = run(agent.send("t", "/run nproc=2 layout=tp=4"))
    assert not any(isinstance(e, Approval) for e in events)  # nothing to approve: it cannot run at all
    error = next(e for e in events if isinstance(e, ToolResult))
    assert error.error and "multiplies to 4" in error.result["error"]
    assert "launch_run failed" in events[-1].text
    assert not (repo / "runs").exists()


def test_edit_with_bad_arguments_is_refused(repo):
    agent = Agent(repo, policy=Policy(approve_below=0.0))
    run(agent.send("t", "/run nproc=1 steps=2"))
    events = run(agent.resume("t", {"action": "edit", "args": {"overrides": ["train.nosuchkey=1"]}}))
    error = next(e for e in events if isinstance(e, ToolResult))
    assert error.error and "nosuchkey" in error.result["error"]
    assert not (repo / "runs").exists()
    # The model sees the arguments as edited, so its story matches what happened.
    launch = next(m for m in agent.messages("t") if isinstance(m, AIMessage) and m.tool_calls)
    assert launch.tool_calls[0]["args"]["overrides"] == ["train.nosuchkey=1"]


def test_tools_stay_inside_the_repository(repo):
    agent = Agent(repo)
    events = run(agent.send("t", "/read ../../etc/passwd"))
    error = next(e for e in events if isinstance(e, ToolResult))
    assert error.error and "outside the repository" in error.result
    events = run(agent.send("t", "/read meshpilot.yaml"))
    assert "hidden_size: 32" in events[-1].text and events[-1].unverified == []


def test_conversations_persist_in_sqlite_across_agents(repo):
    run(Agent(repo).send("kept", "/plan devices=2"))
    again = Agent(repo)
    assert "kept" in again.threads()
    assert len([m for m in again.messages("kept") if isinstance(m, ToolMessage)]) == 1
    events = run(again.send("kept", "why did DDP win?"))
    assert not any(isinstance(e, ToolCall) for e in events) and "DDP" in events[-1].text


def test_bad_requests_fail_with_one_line(repo, tmp_path):
    agent = Agent(repo)
    with pytest.raises(AgentError, match="empty"):
        agent.send("t", "  ")
    with pytest.raises(AgentError, match="nothing left"):
        agent.recover("t")
    with pytest.raises(ConfigError, match="decision"):
        agent.resume("t", {"action": "sure"})
    with pytest.raises(ConfigError, match="not a directory"):
        Agent(tmp_path / "missing")


# --- realistic multi-turn transcripts with a scripted OpenAI-style model (issue 16) ------------------------------


@pytest.fixture
def results_repo(tmp_path) -> Path:
    """The fixture repository of tests/data/agent_repo: two finished runs and a sweep of them."""
    from tests.test_agent_requests import DATA

    shutil.copytree(DATA / "agent_repo", tmp_path / "repo")
    (tmp_path / "repo" / "run-files").rename(tmp_path / "repo" / "runs")
    return tmp_path / "repo"


def test_transcript_a_question_is_read_from_results_and_answered_with_sources(results_repo):
    """Turn 1 reads the run's files; turn 2, a follow-up about "that run", is answered from what turn 1 read."""
    model = ScriptedModel(
        script=[
            call("read_results", "r1", run="runs/ddp-2"),
            AIMessage("The optimizer state took 0.392 MiB, exactly the 0.392 MiB predicted."),
            AIMessage("That run reached 1,843.2 tokens/s."),
        ]
    )
    agent = Agent(results_repo, model)
    first = run(agent.send("t", "how much memory did the optimizer state take in runs/ddp-2, against the prediction?"))
    assert [e.name for e in first if isinstance(e, ToolCall)] == ["read_results"]
    read = next(e for e in first if isinstance(e, ToolResult)).result
    assert read["memory"]["rank0_measured"]["optimizer"] == 410880  # from the fixture's memory.json
    reply = first[-1]
    assert isinstance(reply, Reply) and reply.unverified == []
    assert reply.sources == ["runs/ddp-2/memory.json"]
    second = run(agent.send("t", "and how fast was that run?"))
    assert not any(isinstance(e, ToolCall) for e in second)  # nothing launched, nothing read again
    assert second[-1].unverified == [] and second[-1].sources == ["runs/ddp-2/metrics.json"]
    assert isinstance(model.seen[2][-1], HumanMessage) and len(model.seen) == 3
    assert sorted(p.name for p in (results_repo / "runs").iterdir()) == ["ddp-2", "fsdp-2"]  # no new run


def test_transcript_a_what_if_plans_with_presets_and_compares_from_the_plan(results_repo):
    """A what-if for a preset on named GPUs: the plan runs for real, the reply's figures are the plan's."""
    model = ScriptedModel(
        script=[call("plan_layouts", "p1", devices=8, model="llama-3.1-8b", gpu="h100"), AIMessage("PLACEHOLDER")]
    )
    agent = Agent(results_repo, model)
    events: list = []
    for event in agent.send("t", "would FSDP be faster than DDP for llama-3.1-8b on 8 H100s?"):
        events.append(event)
        if isinstance(event, ToolResult):  # the model answers from the result it was shown
            fsdp = event.result["best_by_family"]["FSDP"]
            model.script[1] = AIMessage(
                f"FSDP ({fsdp['layout']}) is predicted at {fsdp['predicted_tokens_per_s']:,.0f} tokens/s; "
                f"DDP does not fit: {event.result['dropped_by_family']['DDP']}."
            )
    plan = next(e for e in events if isinstance(e, ToolResult)).result
    assert plan["model"] == "llama-3.1-8b" and plan["device_mem_gib"] == pytest.approx(79.18, abs=0.01)
    assert "DDP" not in plan["best_by_family"] and "more than 79.18 GiB" in plan["dropped_by_family"]["DDP"]
    assert not any(isinstance(e, Approval) for e in events)  # planning launches nothing, asks nothing
    assert events[-1].unverified == [] and events[-1].sources == [plan["source"]]
    assert plan["source"].startswith(".meshpilot/plans/llama-3.1-8b-seq4096-8x1-cuda-")


def test_transcript_a_command_waits_for_approval_launches_waits_and_reports(repo):
    """Launch (approved by a person), wait, read the results, report: each step as the model asked for it."""
    from agent.tools import _short

    launch_id = "launch-1"
    out = f"runs/meshpilot-{_short(launch_id)}"  # launch_run's directory is derived from the call's id
    model = ScriptedModel(
        script=[
            call("launch_run", launch_id, nproc=1, steps=2, overrides=["train.lr=2e-3"]),
            call("wait_run", "w1", run=out),
            call("read_results", "r1", run=out),
            AIMessage("PLACEHOLDER"),
        ]
    )
    agent = Agent(repo, model, policy=Policy(approve_below=0.0))
    asked = run(agent.send("t", "train it for 2 steps with lr 2e-3"))
    approval = asked[-1]
    assert isinstance(approval, Approval) and approval.request["tool"] == "launch_run"
    assert approval.request["args"] == {"nproc": 1, "steps": 2, "overrides": ["train.lr=2e-3"]}
    assert not (repo / "runs").exists()  # nothing starts before the approval
    events: list = []
    for event in agent.resume("t", {"action": "approve"}):
        events.append(event)
        if isinstance(event, ToolResult) and event.name == "read_results":
            model.script[3] = AIMessage(
                f"The run finished {event.result['status']} with final loss {event.result['final_loss']:.4f}."
            )
    assert [e.name for e in asked if isinstance(e, ToolCall)] == ["launch_run"]
    assert [e.name for e in events if isinstance(e, ToolResult)] == ["launch_run", "wait_run", "read_results"]
    assert [e.name for e in events if isinstance(e, ToolCall)] == ["wait_run", "read_results"]
    waited = next(e for e in events if isinstance(e, ToolResult) and e.name == "wait_run").result
    assert waited["state"] == "ok"
    config = yaml.safe_load((repo / out / "config.yaml").read_text())
    assert config["train"]["lr"] == 2e-3 and config["train"]["steps"] == 2  # every stated parameter ran
    reply = events[-1]
    assert isinstance(reply, Reply) and reply.unverified == [] and reply.sources == [f"{out}/metrics.json"]


def test_the_three_requests_of_issue_16_with_the_offline_planner(results_repo):
    """A question about "that run" reads its files and launches nothing; the what-if plans and puts FSDP beside
    DDP; the command keeps the layout it names (stopped at the approval, so nothing trains)."""
    agent = Agent(results_repo, policy=Policy(approve_below=0.0))
    run(agent.send("t", "what were the results of runs/ddp-2?"))
    events = run(agent.send("t", "how much memory did the optimizer state take in that run, and how does it compare "
                                 "with the prediction?"))  # fmt: skip
    assert [(e.name, e.args) for e in events if isinstance(e, ToolCall)] == [("read_results", {"run": "runs/ddp-2"})]
    reply = events[-1]
    assert "optimizer state: measured 0.392 MiB, predicted 0.392 MiB (as predicted)" in reply.text
    assert reply.unverified == [] and "runs/ddp-2/memory.json" in reply.sources

    events = run(agent.send("t", "would FSDP be faster than DDP for a 7B llama on 8 H100s?"))
    plan = next(e for e in events if isinstance(e, ToolResult)).result
    assert plan["model"] == "llama-2-7b" and plan["device_name"] == "NVIDIA H100 80GB HBM3"
    reply = events[-1]
    assert (
        "|  | FSDP | DDP |" in reply.text and f"| layout | {plan['best_by_family']['FSDP']['layout']} |" in reply.text
    )
    assert f"No DDP layout fits: {plan['dropped_by_family']['DDP']}." in reply.text  # 16 bytes a parameter
    assert reply.unverified == []

    events = run(agent.send("t", "train it with FSDP on 2 processes for 5 steps"))
    approval = events[-1]
    assert isinstance(approval, Approval)
    assert approval.request["args"] == {"layout": "dp_shard=2", "nproc": 2, "steps": 5}
    run(agent.resume("t", {"action": "reject", "reason": "only checking"}))
    assert sorted(p.name for p in (results_repo / "runs").iterdir()) == ["ddp-2", "fsdp-2"]
