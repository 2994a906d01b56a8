"""Plain requests to the offline planner (tests/data/requests.yaml): what each must call, read or ask.

Read-only tools run for real on the fixture repository tests/data/agent_repo; the first action (a plan, a launch,
a write) is where a request stops, and its arguments are checked. Also: the model and GPU presets, and
`meshpilot plan --model ... --gpu ...` without an experiment file.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from agent.offline import respond
from agent.tools import TOOLS
from trainer.config import ConfigError
from trainer.hardware import GPUS, gpu_preset
from trainer.model.presets import MODELS, model_override, model_preset, preset_experiment

DATA = Path(__file__).parent / "data"
CASES = yaml.safe_load((DATA / "requests.yaml").read_text())
TOOLS_BY_NAME = {t.name: t for t in TOOLS}
# Tools that plan, launch, write or wait: a request stops at the first (its arguments are what is checked).
ACTIONS = {"plan_layouts", "launch_run", "wait_run", "wait_for_job", "cancel_run", "run_sweep", "run_benchmark",
           "write_report", "open_pull_request", "update_docs"}  # fmt: skip
LAUNCHES = {"launch_run", "run_sweep", "run_benchmark"}
ACCURACY_GOAL = 0.95


@dataclass
class Outcome:
    calls: list[dict] = field(default_factory=list)  # every tool call, in order
    reply: str | None = None  # the final answer, when no action stopped the request

    @property
    def action(self) -> dict | None:
        return next((c for c in self.calls if c["name"] in ACTIONS), None)


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    """The fixture repository with fsdp-2 the newest run (list_results orders by time)."""
    root = tmp_path_factory.mktemp("agent-repo")
    shutil.copytree(DATA / "agent_repo", root, dirs_exist_ok=True)
    (root / "run-files").rename(root / "runs")
    for age, run in enumerate(("fsdp-2", "ddp-2")):  # seconds in the past: fsdp-2 is newest
        for path in [root / "runs" / run, *(root / "runs" / run).iterdir()]:
            os.utime(path, (1_700_000_000 - age * 60, 1_700_000_000 - age * 60))
    return root


def execute(repo: Path, call: dict) -> ToolMessage:
    """Run a tool for real, as the graph's ToolNode would (the repository injected)."""
    try:
        content = TOOLS_BY_NAME[call["name"]].func(repo=str(repo), **call["args"])
        status = "success"
    except ConfigError as error:
        content, status = f"error: {error}", "error"
    return ToolMessage(content, tool_call_id=call["id"], name=call["name"], status=status)


def history(repo: Path, after: dict | None) -> list[BaseMessage]:
    """An earlier turn of the conversation: a launch, a plan or a sweep it already made."""
    if not after:
        return []
    if "launched" in after:
        call = {"name": "launch_run", "args": {}, "id": "earlier"}
        result = {"source": after["launched"], "run": after["launched"], "run_id": "r1"}
        answer = ToolMessage(json.dumps(result), tool_call_id="earlier")
        return [HumanMessage("train it"), AIMessage("", tool_calls=[call]), answer]
    if "started" in after:  # a sweep job, still going: run_sweep returns at once
        call = {"name": "run_sweep", "args": {}, "id": "earlier"}
        result = {"source": f"{after['started']}/job.json", "job_id": after["started"], "sweep": after["started"]}
        answer = ToolMessage(json.dumps(result), tool_call_id="earlier")
        return [HumanMessage("run a sweep"), AIMessage("", tool_calls=[call]), answer]
    if "swept" in after:
        call = {"name": "read_sweep", "args": {"sweep": after["swept"]}, "id": "earlier"}
        return [HumanMessage("what was the winner?"), AIMessage("", tool_calls=[call]), execute(repo, call)]
    call = {"name": "plan_layouts", "args": after["planned"], "id": "earlier"}
    return [HumanMessage("plan"), AIMessage("", tool_calls=[call]), execute(repo, call)]


def drive(repo: Path, text: str, after: dict | None = None) -> Outcome:
    """The planner's turn: read-only tools run, the first action stops it."""
    messages = [*history(repo, after), HumanMessage(text)]
    outcome = Outcome()
    for _ in range(10):
        message = respond(messages, set(TOOLS_BY_NAME))
        if not message.tool_calls:
            outcome.reply = message.text
            return outcome
        call = message.tool_calls[0]
        outcome.calls.append(call)
        if call["name"] in ACTIONS:
            return outcome
        messages += [message, execute(repo, call)]
    raise AssertionError(f"no answer after 10 tool calls: {outcome.calls}")


def judge(case: dict, outcome: Outcome) -> str | None:
    """Why the outcome is wrong, or None when it is what the case expects."""
    expect = case["expect"]
    names = [c["name"] for c in outcome.calls]
    if "call" not in expect and set(names) & LAUNCHES:
        return f"a question launched {names}"
    if "call" in expect:
        action = outcome.action
        if action is None or action["name"] != expect["call"]:
            return f"expected {expect['call']}, got calls {names} and reply {outcome.reply!r}"
        wrong = _wrong_arguments(expect.get("args", {}), action["args"])
        if wrong or any(key in action["args"] for key in expect.get("absent", [])):
            return f"{action['name']} arguments {action['args']}: {wrong or 'has ' + str(expect['absent'])}"
    reads = [n for n in names if n not in ACTIONS]
    if "reads" in expect and reads != expect["reads"]:
        return f"expected reads {expect['reads']}, got {reads}"
    if "reads" in expect and "call" not in expect and "args" in expect:
        last = outcome.calls[-1]["args"] if outcome.calls else {}
        if wrong := _wrong_arguments(expect["args"], last):
            return f"read with {last}: {wrong}"
    if "clarify" in expect and (outcome.calls or expect["clarify"] not in (outcome.reply or "")):
        return f"expected a question with {expect['clarify']!r}, got {names} and {outcome.reply!r}"
    for text in expect.get("reply", []):
        if text not in (outcome.reply or ""):
            return f"reply lacks {text!r}: {outcome.reply!r}"
    return None


def _wrong_arguments(expected: dict[str, Any], actual: dict[str, Any]) -> str | None:
    expected = dict(expected)
    if "model_preset" in expected:
        expected["overrides"] = model_override(expected.pop("model_preset")) + expected.get("overrides", [])
    wrong = {k: actual.get(k) for k, v in expected.items() if actual.get(k) != v}
    return f"{wrong} instead of { {k: expected[k] for k in wrong} }" if wrong else None


def test_the_requests_of_the_phrasing_set_do_what_they_ask(repo):
    """Accuracy over every phrasing of tests/data/requests.yaml (reported in BENCHMARKS.md)."""
    assert len(CASES) >= 80
    outcomes = [(case, drive(repo, case["text"], case.get("after"))) for case in CASES]
    failures = {case["text"]: why for case, outcome in outcomes if (why := judge(case, outcome))}
    accuracy = 1 - len(failures) / len(CASES)
    print(f"\nphrasing set: {len(CASES) - len(failures)}/{len(CASES)} = {accuracy:.1%}")
    for text, why in failures.items():
        print(f"  {text!r}: {why}")
    assert accuracy >= ACCURACY_GOAL, failures


def test_a_judge_that_can_fail(repo):
    """The judge rejects a dropped layout, a launching question and a guess instead of a clarifying question."""
    dropped = Outcome([{"name": "launch_run", "args": {"nproc": 2, "steps": 5}, "id": "x"}])
    assert "dp_shard=2" in judge(CASES[2], dropped)
    launched = Outcome([{"name": "launch_run", "args": {}, "id": "x"}])
    assert "launched" in judge(CASES[0], launched)
    clarify = next(c for c in CASES if "clarify" in c["expect"])
    guessed = Outcome([{"name": "plan_layouts", "args": {"devices": 8, "model": "llama-2-70b"}, "id": "x"}])
    assert "expected a question" in judge(clarify, guessed)


@pytest.mark.parametrize("index", [0, 1, 2], ids=["memory question", "what-if", "command"])
def test_the_three_requests_of_issue_16(repo, index):
    case = CASES[index]
    assert judge(case, drive(repo, case["text"], case.get("after"))) is None


def test_the_what_if_compares_fsdp_and_ddp_side_by_side_from_the_plan(repo, tmp_path):
    """The reply to "would FSDP be faster than DDP ..." is the planner's own figures, the layouts side by side."""
    repo = larger_batch(repo, tmp_path)  # the fixed micro-batch of 2 needs 2 rows on each of 8 data-parallel ranks
    text = "would FSDP be faster than DDP for this model on 8 GPUs?"
    messages: list[BaseMessage] = [HumanMessage(text)]
    while (message := respond(messages, set(TOOLS_BY_NAME))).tool_calls:
        messages += [message, execute(repo, message.tool_calls[0])]
    plan = json.loads(messages[-1].content)
    best = plan["best_by_family"]
    header, *rows = [line for line in message.text.splitlines() if line.startswith("|")]
    assert header == "|  | FSDP | DDP |"
    tokens = next(r for r in rows if r.startswith("| predicted tokens/s"))
    fsdp, ddp = best["FSDP"]["predicted_tokens_per_s"], best["DDP"]["predicted_tokens_per_s"]
    assert tokens == f"| predicted tokens/s | {fsdp:,.0f} | {ddp:,.0f} |"
    if f"{fsdp:,.0f}" == f"{ddp:,.0f}":  # a tiny model on GPUs: both wait on launching their operations
        assert "FSDP and DDP are predicted equally fast" in message.text
    else:
        assert f"{'FSDP' if fsdp > ddp else 'DDP'} is predicted faster" in message.text


def test_a_layout_that_fits_nowhere_says_why_in_the_planners_words(repo, tmp_path):
    repo = larger_batch(repo, tmp_path)
    result = json.loads(TOOLS_BY_NAME["plan_layouts"].func(repo=str(repo), devices=8, device_mem="100000"))
    assert result["top"] == [] and result["dropped_by_family"]
    assert all("more than" in reason for reason in result["dropped_by_family"].values())


def test_the_plan_tool_keeps_the_micro_batch_the_experiment_fixes(repo):
    """The fixture's micro-batch of 2 cannot run with one row per rank on 8 data-parallel ranks: those layouts are
    dropped with the planner's reason, not re-planned with another micro-batch."""
    result = json.loads(TOOLS_BY_NAME["plan_layouts"].func(repo=str(repo), devices=8))
    assert result["top"] and {row["micro_batch"] for row in result["top"]} == {2}
    assert not {"dp_shard=8", "dp_replicate=8"} & {row["layout"] for row in result["top"]}


def larger_batch(repo: Path, tmp_path: Path) -> Path:
    """A copy of the fixture repository (shared by the module's tests) whose experiment has 16 rows per step."""
    copy = shutil.copytree(repo, tmp_path / "repo")
    path = copy / "meshpilot.yaml"
    experiment = yaml.safe_load(path.read_text())
    experiment["train"]["global_batch_tokens"] = 1024
    path.write_text(yaml.safe_dump(experiment))
    return copy


def test_presets_are_the_published_sizes():
    """Parameter counts of the presets against the published ones (billions, to the digits published)."""
    from trainer.model.build import model_config
    from trainer.model.parameters import count_parameters

    published = {"llama-3.1-8b": 8.03, "llama-2-7b": 6.74, "mistral-7b": 7.24, "qwen2.5-7b": 7.62,
                 "llama-3.2-1b": 1.24, "smollm2-1.7b": 1.71, "gemma-2-9b": 9.24}  # fmt: skip
    for name, billions in published.items():
        experiment = preset_experiment(name, 8)
        total = count_parameters(model_config(experiment.model, Path(".")))["total"]
        assert round(total / 1e9, 2) == billions, name
    assert len(MODELS) == 20  # 13 dense, 7 mixtures of experts (tests/test_moe_costs.py checks those)


def test_preset_names_and_errors():
    assert model_preset("Llama 3.1 8B") == model_preset("meta-llama/Llama-3.1-8B") == model_preset("llama3.1-8b")
    with pytest.raises(ConfigError, match=r"^no model preset 'llama-3-8b' \(closest: llama-3.1-8b"):
        model_preset("llama-3-8b")
    assert model_preset("mistralai/Mixtral-8x7B-v0.1") == model_preset("mixtral-8x7b")
    assert model_preset("Qwen/Qwen3-30B-A3B") == model_preset("qwen3-30b-a3b")
    assert gpu_preset("h100") is GPUS["h100-sxm"] and gpu_preset("A100 40GB") is GPUS["a100-40gb"]
    assert gpu_preset("4090") is GPUS["rtx-4090"]
    with pytest.raises(ConfigError, match=r"^no GPU preset 'h1000' \(closest: h100"):
        gpu_preset("h1000")


def test_every_gpu_preset_has_its_datasheet_peak():
    """Each preset's name finds its own peak in trainer.costs.flops (not a neighbour's: "A10" is not "A100")."""
    # h100-hbm2e: torchtitan's H100s, whose peak is between the NVL's and the SXM's (trainer.model.presets)
    datasheet_tflops = {"h100-sxm": 989, "h100-pcie": 756, "h100-nvl": 835, "h200": 989, "a100-40gb": 312,
                        "a100-80gb": 312, "l40s": 362, "a10": 125, "rtx-4090": 165, "h100-hbm2e": 912}  # fmt: skip
    assert {key: round(gpu.peak_bf16_flops / 1e12) for key, gpu in GPUS.items()} == datasheet_tflops


def test_plan_with_a_preset_needs_no_experiment_file(tmp_path, capsys):
    from agent.cli import main

    assert main(["plan", "--model", "llama-3.1-8b", "--devices", "8", "--gpu", "h100", "--top", "3", "--json"]) == 0
    candidates = json.loads(capsys.readouterr().out)
    fits = [c for c in candidates if c["dropped"] is None]
    assert fits and all(c["predicted_peak_bytes"] <= GPUS["h100-sxm"].memory_bytes for c in fits)
    # DDP keeps 16 bytes per parameter of 8B (weights, gradients, Adam): it cannot fit in 80 GB.
    assert all(c["layout"]["dp_replicate"] < 8 for c in fits)
    # A mixture of experts is planned (tests/test_moe_costs.py); on 8 H100s Mixtral-8x7B's fp32 weights, gradients
    # and Adam state alone (16 bytes per parameter, 747 GB) exceed the devices: nothing fits (exit 1), and the
    # closest miss is said.
    assert main(["plan", "--model", "mixtral-8x7b", "--gpu", "h100", "--devices", "8"]) == 1
    assert "closest: " in capsys.readouterr().out
    assert main(["plan", "--devices", "8"]) == 2
    assert "--model" in capsys.readouterr().err
