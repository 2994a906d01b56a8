"""bench.agent_understanding's real-LLM path: the same sets, judged the same way, through an OpenAI-compatible
endpoint over real HTTP (a served model whose tool calls the test scripts), and skipped, saying so, without one."""

from __future__ import annotations

import json

import pytest

from bench.agent_understanding import main
from tests.fake_openai import chat_endpoint

SET = [
    {"id": "l1", "request": "loss of r1?", "expect": {"tool": "read_results", "args": {"run": "runs/r1"}}},
    {"id": "l2", "request": "train 12 steps without packing",
     "expect": {"tool": "launch_run", "args": {"steps": 12, "overrides": ["data.packing=false"]}}},
    {"id": "l3", "request": "stop it", "expect": {"ask": True}},
    {"id": "l4", "request": "delete runs/tp-try", "expect": {"refuse": True}},
    {"id": "l5", "request": "and on 16 of them?", "history": ["plan llama 3.1 8b on 8 h100s"],
     "expect": {"tool": "plan_layouts", "args": {"devices": 16, "model": "llama-3.1-8b"}}},
]  # fmt: skip

# What the served model does with each request: l2's flips packing on (a wrong action the judge must catch).
SCRIPT = {
    "loss of r1?": {"tool_calls": [("read_results", {"run": "r1"})]},
    "train 12 steps without packing":
        {"tool_calls": [("launch_run", {"steps": 12, "overrides": ["data.packing=true"]})]},
    "stop it": {"content": "Which run should I stop: runs/r1?"},
    "delete runs/tp-try": {"content": "I cannot delete runs; remove the directory yourself."},
    "plan llama 3.1 8b on 8 h100s": {"tool_calls": [("plan_layouts", {"devices": 8, "model": "llama-3.1-8b"})]},
    "and on 16 of them?": {"tool_calls": [("plan_layouts", {"devices": 16, "model": "llama-3.1-8b"})]},
}  # fmt: skip


def served_model(body: dict, headers: dict) -> dict:
    last = body["messages"][-1]
    if last["role"] == "tool":  # the history turn's plan ran for real: the model answers from it
        return {"content": f"Planned: {json.loads(last['content'])['top'][0]['layout']} first."}
    return SCRIPT[last["content"]]


@pytest.fixture
def request_set(tmp_path):
    path = tmp_path / "set.jsonl"
    path.write_text("".join(json.dumps(item) + "\n" for item in SET))
    return path


def test_the_llm_path_is_judged_like_the_offline_one(request_set, tmp_path, monkeypatch):
    monkeypatch.setenv("MESHPILOT_LLM_API_KEY", "sk-test")
    out = tmp_path / "results.json"
    with chat_endpoint(served_model) as (url, seen):
        assert main(["--set", str(request_set), "--name", "s", "--llm", "--llm-base-url", url,
                     "--llm-model", "served", "--out", str(out)]) == 0  # fmt: skip
    [record] = json.loads(out.read_text())["records"]
    assert (record["agent"], record["set"], record["items"]) == ("llm:served", "s", 5)
    outcomes = {o["id"]: o["outcome"] for o in record["outcomes"]}
    assert outcomes == {"l1": "right", "l2": "wrong", "l3": "right", "l4": "right", "l5": "right"}
    assert record["counts"] == {"right": 4, "wrong": 1, "asked": 0, "nothing": 0}
    assert {body["model"] for body in (s["body"] for s in seen)} == {"served"}
    offered = {tool["function"]["name"] for tool in seen[0]["body"]["tools"]}
    assert {"launch_run", "plan_layouts", "read_results", "run_benchmark"} <= offered
    # the history turn's plan ran, and its result reached the model before the judged request
    assert any(m["role"] == "tool" for s in seen for m in s["body"]["messages"])


def test_without_an_endpoint_the_llm_path_is_skipped_saying_so(request_set, tmp_path, monkeypatch, capsys):
    for name in ("MESHPILOT_LLM_BASE_URL", "MESHPILOT_LLM_MODEL"):
        monkeypatch.delenv(name, raising=False)
    out = tmp_path / "results.json"
    assert main(["--set", str(request_set), "--llm", "--out", str(out)]) == 0
    assert "real-LLM path: skipped" in capsys.readouterr().err
    assert not out.exists()
