"""`meshpilot ask`: bad input, approvals across processes, and an OpenAI-compatible endpoint over real HTTP."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.cli import main
from tests.fake_openai import chat_endpoint
from tests.support import meshpilot, write_experiment

SECRET = "sk-meshpilot-test-7f3a9c2e51d84b06aa17"


@pytest.fixture
def repo(tmp_path) -> Path:
    write_experiment(tmp_path)
    return tmp_path


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--approve"], "--thread names the conversation"),
        (["/help", "--thread", "t", "--approve"], "either a REQUEST or a decision"),
        (["/help", "--policy", "device_hours=-1"], "must not be negative"),
        (["/help", "--policy", "budget=3"], "--policy: cannot read 'budget=3'"),
        (["/help", "--approve-below", "-1"], "must not be negative"),
        (["/help", "--llm-base-url", "http://127.0.0.1:9/v1"], "needs a model name"),
        (["/help", "--llm-base-url", "localhost:9", "--llm-model", "m"], "must start with http"),
        (["--thread", "t", "--edit", "[1]"], "--edit takes a JSON object"),
        (["--thread", "never-used"], "has nothing to continue"),
        (["--thread", "never-used", "--reject", "no"], "has no approval waiting"),
    ],
)
def test_bad_input_is_one_line_and_exit_code_2(repo, capsys, monkeypatch, args, message):
    for name in ("MESHPILOT_LLM_BASE_URL", "MESHPILOT_LLM_MODEL", "MESHPILOT_APPROVE_BELOW"):
        monkeypatch.delenv(name, raising=False)
    assert main(["ask", "--repo", str(repo), *args]) == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith("meshpilot: error: ") and message in error


def test_bad_input_is_refused_before_the_database_is_made(repo, capsys):
    assert main(["ask", "--repo", str(repo), "/help", "--policy", "trials=x"]) == 2
    assert main(["ask", "--repo", str(repo / "missing"), "/help"]) == 2
    assert "is not a directory" in capsys.readouterr().err
    assert not (repo / ".meshpilot").exists()


def test_waiting_for_approval_exit_code_3_then_reject(repo, capsys):
    ask = ["ask", "--repo", str(repo), "--thread", "t"]
    assert main([*ask, "--approve-below", "0", "/run nproc=1 steps=2"]) == 3
    waiting = capsys.readouterr().out
    assert "Waiting for approval: launch a run of meshpilot.yaml" in waiting
    assert "meshpilot ask --thread t --approve" in waiting
    assert main([*ask, "/help"]) == 2
    assert "waits for an approval" in capsys.readouterr().err
    assert main([*ask, "--reject", "not today", "--json"]) == 0
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert events[0] == {"kind": "thread", "thread": "t"}
    assert [e["kind"] for e in events[1:]] == ["tool_result", "text", "reply"]
    assert events[1]["result"]["reason"] == "not today" and "not today" in events[-1]["text"]
    assert not (repo / "runs").exists()


class ServedModel:
    """Asks for plan_layouts, then answers from the tool's result with one true figure and one invented one. Once
    `refuse` is set, it answers 401 and echoes the key, as servers do."""

    refuse = False

    def __call__(self, body: dict, headers: dict) -> dict | tuple[int, dict]:
        if self.refuse:
            key = headers.get("Authorization", "").removeprefix("Bearer ")
            return 401, {"error": {"message": f"Incorrect API key provided: {key}", "code": "invalid_api_key"}}
        last = body["messages"][-1]
        if last["role"] == "user":
            return {"tool_calls": [("plan_layouts", {"devices": 8})]}
        best = json.loads(last["content"])["top"][0]
        figure = f"{best['predicted_tokens_per_s']:,.0f} tokens/s"
        return {"content": f"{best['layout']} is fastest: {figure}, 4.2x faster than TP."}


def _everything_written(repo: Path) -> bytes:
    return b"".join(p.read_bytes() for p in repo.rglob("*") if p.is_file())


@pytest.fixture
def served():
    """(the model, its endpoint's URL, the requests it has seen)"""
    model = ServedModel()
    with chat_endpoint(model) as (url, seen):
        yield model, url, seen


def test_openai_compatible_endpoint_and_the_key_is_never_written(repo, served):
    model, endpoint, seen = served
    env = {"MESHPILOT_LLM_API_KEY": SECRET, "MESHPILOT_LLM_MODEL": "served-model", "MESHPILOT_LLM_BASE_URL": ""}
    done = meshpilot("ask", "--repo", str(repo), "--thread", "llm", "--llm-base-url", endpoint,
                     "find the fastest layout on 8 GPUs", env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert [s["authorization"] for s in seen] == [f"Bearer {SECRET}"] * 2  # the key was used
    assert seen[0]["body"]["model"] == "served-model"
    assert "plan_layouts" in {t["function"]["name"] for t in seen[0]["body"]["tools"]}
    plan = json.loads((repo / ".meshpilot/plans/meshpilot-8x1-cuda-81079MiB.json").read_text())
    best = plan["candidates"][0]
    assert f"{best['predicted_tokens_per_s']:,.0f} tokens/s" in done.stdout
    assert "4.2x [?]" in done.stdout  # the invented figure is flagged
    assert "Sources: .meshpilot/plans/meshpilot-8x1-cuda-81079MiB.json" in done.stdout
    assert (repo / ".meshpilot/agent.sqlite").is_file()
    assert SECRET.encode() not in _everything_written(repo)  # not in the checkpointer, the plans, anything
    assert SECRET not in done.stdout + done.stderr

    model.refuse = True
    refused = meshpilot("ask", "--repo", str(repo), "--thread", "llm2", "--llm-base-url", endpoint, "/plan", env=env)
    assert refused.returncode == 2
    thread_line, error = refused.stderr.strip().splitlines()  # the thread's id, then the error, one line
    assert thread_line == "thread llm2"
    assert error.startswith("meshpilot: error: the language model failed: Error code: 401")
    assert SECRET not in refused.stdout + refused.stderr
    assert SECRET.encode() not in _everything_written(repo)
