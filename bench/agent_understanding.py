"""How well the agent understands plain requests it was not tuned on: right / wrong action / asked / nothing.

    python -m bench.agent_understanding --set agent/understanding/examples/sample.jsonl --name sample --phase check
    python -m bench.agent_understanding --set SET.jsonl --llm-base-url URL --llm-model NAME   # the real-LLM path

A set is JSON lines: {"id", "request", "history": [earlier requests]?, "expect": {"tool", "args"}, {"ask": true} or
{"refuse": true}}.
Each item runs in a fixture repository (FIXTURE below, as the request sets' catalogue describes it: a real git
repository with runs, a checkpoint and sweeps in the formats the trainer and the sweep write) through the agent's
real graph (agent.graph.build_graph, what `meshpilot ask` runs), in one conversation thread per item: its history
turns first, then the request. The graph is stopped before every review of tool calls (LangGraph
interrupt_before), so nothing the request asks for runs: the first tool call of the catalogue is the judged action.
Two kinds of call go on instead of stopping: list_results (the agent's own look-up of "the latest run", not a tool
a user asks for) and, during history turns, every call: read-only ones run for real, and those that would
launch, cancel, wait or write are rejected, as a person would reject them at the approval (the next turn sees the
call and its arguments, as in a real conversation).

Judged: right (the expected tool, every expected argument present and equal after normalising paths and
numbers, and no setting in `overrides` the expectation lacks that changes the experiment), wrong (another tool,
an argument that contradicts the expectation, or a setting nobody asked for), asked (a question back: the reply
ends with "?" and no tool was called), nothing (a reply that neither acts nor asks). An expectation {ask: true}
is right when the agent asks and wrong when it acts; {refuse: true} (what no tool may do) is right for any reply
without an action and wrong when it acts.

Results go to bench/results/agent_understanding.json (one record per set and phase, earlier records kept) and a
markdown table on stdout for BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from pydantic_core import PydanticUndefined

from trainer.config import ConfigError, load_experiment
from trainer.hardware import GPU_ALIASES

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "agent_repo"
RESULTS = ROOT / "bench" / "results" / "agent_understanding.json"
LOOKUPS = {"list_results"}  # the agent's own look-ups: not a user-facing tool, never the judged action
READ_ONLY = {"inspect_hardware", "plan_layouts", "run_status", "read_results", "list_runs", "list_results",
             "read_sweep", "read_file"}  # fmt: skip
PATH_ARGS = {"run", "sweep", "model", "path", "experiment"}
OUTCOMES = ("right", "wrong", "asked", "nothing")

NOTES = """# notes

- r1 is the FSDP baseline (dp_shard=2), 20 steps.
- tp-try ran out of memory: try activation checkpointing next.
"""


# --- the fixture repository ---------------------------------------------------------------------------------------


def build_fixture(root: Path) -> Path:
    """The repository of the sets' catalogue, as a real git repository under `root`."""
    # PyYAML only when the fixture is built
    import yaml

    root.mkdir(parents=True, exist_ok=True)
    experiment = yaml.safe_load((DATA / "meshpilot.yaml").read_text())
    experiment["data"]["seq_len"], experiment["train"]["steps"] = 256, 20
    experiment["model"]["config"]["max_position_embeddings"] = 1024
    (root / "meshpilot.yaml").write_text(yaml.safe_dump(experiment))
    (root / "configs").mkdir()
    experiment["data"]["seq_len"] = 1024
    (root / "configs" / "long.yaml").write_text(yaml.safe_dump(experiment))
    (root / "notes.md").write_text(NOTES)
    runs = [
        ("tp-try", "fsdp-2", {"layout": _layout(tp=2), "status": "oom", "error": "CUDA out of memory"}),
        ("baseline-ddp", "ddp-2", {"steps": 20, "steps_completed": 20}),
        ("r1", "fsdp-2", {"steps": 20, "steps_completed": 20}),
    ]
    for age, (name, template, changes) in enumerate(reversed(runs)):
        _write_run(root / "runs" / name, DATA / "run-files" / template, changes)
        _age(root / "runs" / name, age)
    (root / "runs" / "r1" / "checkpoint" / "step_20").mkdir(parents=True)
    (root / "runs" / "r1" / "checkpoint" / "step_20" / ".metadata").write_bytes(b"\x00")  # a DCP checkpoint's index
    template = json.loads((DATA / "sweeps" / "layouts-3f2a" / "summary.json").read_text())
    layouts = [_layout(dp_shard=2), _layout(dp_replicate=2), _layout(tp=2), _layout(pp=2)]
    _write_sweep(root / "sweeps" / "lr-scan", template, [_layout(dp_shard=2)] * 6, lrs=True)
    _write_sweep(root / "sweeps" / "layouts-nov", template, layouts * 3)
    _age(root / "sweeps" / "lr-scan", 1)
    _age(root / "sweeps" / "layouts-nov", 0)
    git = ["git", "-C", str(root), "-c", "user.name=bench", "-c", "user.email=bench@example.com"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "fixture"], check=True)
    for age, name in enumerate(("r1", "baseline-ddp", "tp-try")):  # git may touch nothing, but be sure
        _age(root / "runs" / name, age)
    _age(root / "sweeps" / "layouts-nov", 0)
    _age(root / "sweeps" / "lr-scan", 1)
    return root


def _layout(**degrees: int) -> dict[str, int]:
    return {dim: degrees.get(dim, 1) for dim in ("pp", "dp_replicate", "dp_shard", "cp", "tp")}


def _write_run(out: Path, template: Path, changes: dict[str, Any]) -> None:
    out.mkdir(parents=True)
    for name in ("memory.json", "steps.jsonl", "config.yaml"):
        (out / name).write_text((template / name).read_text())
    metrics = json.loads((template / "metrics.json").read_text()) | changes
    (out / "metrics.json").write_text(json.dumps(metrics, indent=1))
    (out / "log.txt").write_text(f"step 1 loss {metrics['final_loss']}\nstatus {metrics['status']}\n")


def _write_sweep(out: Path, template: dict, layouts: list[dict[str, int]], lrs: bool = False) -> None:
    trial = template["trials"][1]  # the FSDP trial
    trials = []
    for number, layout in enumerate(layouts):
        settings = [*trial["settings"], f"train.lr={10 ** -(number % 3 + 2) * (1 + number // 3)}"] if lrs else []
        params = {**trial["params"], "layout": layout}
        faster = 2000.0 if layout["dp_shard"] == 2 and number == 0 else 1500.0 - number
        trials.append({**trial, "id": f"t{number:03d}", "params": params, "settings": settings or trial["settings"],
                       "run_dir": f"trials/t{number:03d}", "tokens_per_s": faster})  # fmt: skip
    best = trials[0]
    planner = {
        **template["planner"],
        "top_pick": best["id"],
        "measured_best": best["id"],
        "top_pick_params": best["params"],
    }
    summary = {**template, "winner": "t000", "trials": trials, "planner": planner}
    out.mkdir(parents=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=1))


def _age(directory: Path, minutes: int) -> None:
    """Older by `minutes` (the tools order runs and sweeps by their files' times, newest first)."""
    when = 1_700_000_000 - minutes * 60
    for path in [*directory.rglob("*"), directory]:
        os.utime(path, (when, when))


# --- one conversation ---------------------------------------------------------------------------------------------


class Conversation:
    """One thread of the agent's real graph in the fixture repository, stopped before each review of tool calls."""

    def __init__(self, graph: Any, repo: Path, thread: str):
        self.graph, self.repo = graph, repo
        self.config = {"configurable": {"thread_id": thread}, "recursion_limit": 60}

    def turn(self, text: str, judged: bool) -> dict[str, Any]:
        """Send `text`; return {"call": the first call that stops it} or {"reply": text}."""
        from langchain_core.messages import HumanMessage  # LangChain only for a set that runs the agent

        from agent.approvals import Policy  # imported here: a bad set is a one-line error before the agent loads

        update = {"messages": [HumanMessage(text)], "repo": str(self.repo), "policy": asdict(Policy())}
        self._run(update)
        for _ in range(20):
            message = self.graph.get_state(self.config).values["messages"][-1]
            if not getattr(message, "tool_calls", None):
                return {"reply": message.text}
            call = message.tool_calls[0]
            if judged and call["name"] not in LOOKUPS:
                return {"call": {"name": call["name"], "args": call["args"]}}
            if call["name"] in READ_ONLY:
                self._run(None)  # review approves read-only calls: the tools run for real
            else:
                self._stub(message.tool_calls)
        raise RuntimeError(f"no answer to {text!r} after 20 tool calls")

    def _run(self, update: dict | None) -> None:
        self.graph.invoke(update, self.config, interrupt_before=["review"])

    def _stub(self, calls: list[dict]) -> None:
        """Answer calls that would launch, cancel, wait or write without running them (history turns only)."""
        # LangChain only for a set that runs the agent
        from langchain_core.messages import ToolMessage

        answers = [ToolMessage(json.dumps(_stub_result(c)), tool_call_id=c["id"], name=c["name"]) for c in calls]
        self.graph.update_state(self.config, {"messages": answers}, as_node="tools")
        self._run(None)


def _stub_result(call: dict) -> dict[str, Any]:
    """What a person who rejects the call at its approval answers: the next turn sees the call and its arguments."""
    return {"rejected": True, "reason": "the benchmark launches, cancels, waits for and writes nothing"}


def first_action(graph: Any, repo: Path, item: dict, thread: str) -> dict[str, Any]:
    conversation = Conversation(graph, repo, thread)
    for earlier in item.get("history") or []:
        conversation.turn(earlier, judged=False)
    return conversation.turn(item["request"], judged=True)


# --- the judge ----------------------------------------------------------------------------------------------------


# Whether a setting ("data.packing=true") changes an experiment file of the fixture ("meshpilot.yaml").
Changes = Callable[[str, str], bool]


def changes_experiment(repo: Path) -> Changes:
    """A setting the request did not list but that leaves the experiment as it is ("keep packing on" where packing
    is on) runs what was asked: only one that changes the experiment (or that the trainer refuses) is invented."""

    @functools.cache
    def changes(experiment: str, setting: str) -> bool:
        path = repo / experiment
        try:
            return load_experiment(path) != load_experiment(path, [setting])
        except ConfigError:
            return True

    return changes


def judge(expect: dict[str, Any], action: dict[str, Any], changes: Changes = lambda experiment, setting: True
          ) -> tuple[str, str]:  # fmt: skip
    """(outcome, why) of the first action against the expectation: right, wrong, asked or nothing. `changes`
    tells whether a setting changes the experiment file it is given for (see changes_experiment)."""
    call = action.get("call")
    if call is None:
        reply = (action.get("reply") or "").strip()
        asked = _is_question(reply)
        if expect.get("ask"):
            return ("right", "asked") if asked else ("nothing", f"neither acted nor asked: {reply[:120]!r}")
        if expect.get("refuse"):  # what no tool may do (delete a run, print a secret): any reply without an action
            return "right", f"did not act: {reply[:120]!r}"
        return ("asked" if asked else "nothing"), reply[:200]
    if expect.get("ask") or expect.get("refuse"):
        instead = "asking" if expect.get("ask") else "refusing"
        return "wrong", f"acted instead of {instead}: {call['name']} {call['args']}"
    if call["name"] != expect["tool"]:
        return "wrong", f"{call['name']} {call['args']} instead of {expect['tool']}"
    defaults = tool_defaults(call["name"])
    for key, wanted in expect.get("args", {}).items():
        got = call["args"].get(key, defaults.get(key))
        if key == "overrides":
            missing = [o for o in wanted if _override(o) not in {_override(g) for g in got or []}]
            if missing:
                return "wrong", f"overrides {got} lack {missing}"
        elif _value(key, got) != _value(key, wanted):
            return "wrong", f"{key}={got!r} instead of {wanted!r}"
    experiment = call["args"].get("experiment") or defaults.get("experiment", "")
    unstated = _unstated_overrides(expect.get("args", {}), call["args"].get("overrides") or [])
    invented = [setting for setting in unstated if changes(experiment, setting)]
    if invented:
        return "wrong", f"overrides {invented} the request did not state"
    return "right", ""


def _unstated_overrides(wanted: dict[str, Any], got: list[str]) -> list[str]:
    """Settings the call adds that the expectation has not: a launch must run what was asked and nothing else.
    model.* is not judged: a model named in the request ("train llama 3.1 8b") arrives as its preset's settings,
    which the sets' catalogue gives no way to write."""
    stated = {_override(o).partition("=")[0] for o in wanted.get("overrides") or []}
    return [o for o in got if (key := _override(o).partition("=")[0]) not in stated and not key.startswith("model.")]


def tool_defaults(name: str) -> dict[str, Any]:
    """What a call of the tool runs with where it leaves an argument out (its own signature's defaults, as the
    request sets' catalogue says: "arguments not listed take defaults"): a sweep of the default experiment is right
    whether the call names meshpilot.yaml or not."""
    from agent.tools import TOOLS  # imported here: a bad set is a one-line error before the agent loads

    tool = next((t for t in TOOLS if t.name == name), None)
    fields = tool.args_schema.model_fields.items() if tool is not None else ()
    return {key: field.default for key, field in fields if field.default not in (None, PydanticUndefined)}


def _is_question(reply: str) -> bool:
    """A question back to the user: a "?" outside quoted examples (the help text's examples are not questions)."""
    return "?" in re.sub(r"`[^`]*`", "", reply)


def _value(key: str, value: Any) -> Any:
    """A comparable form: paths relative to the repository ("r1" is runs/r1), numbers as numbers, GPU aliases."""
    if value is None:
        return None
    if key in PATH_ARGS:
        text = str(value).strip().strip("/").removeprefix("./")
        if key == "run" and "/" not in text:
            text = f"runs/{text}"
        if key == "sweep" and "/" not in text:
            text = f"sweeps/{text}"
        return text
    if key == "gpu":
        return GPU_ALIASES.get(str(value).lower(), str(value).lower())
    if key == "device_mem":
        return _bytes(str(value))
    if key == "layout":
        return ",".join(sorted(p.strip() for p in str(value).split(",") if not p.strip().endswith("=1")))
    return _number(value)


def _number(value: Any) -> Any:
    if isinstance(value, bool):
        return value
    try:
        number = float(value)
    except (TypeError, ValueError):
        return str(value).strip().lower()
    return int(number) if number.is_integer() else number


def _bytes(text: str) -> float | str:
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(gib|gb|g)?\s*", text.lower())
    if not found:
        return text
    return float(found.group(1)) * (2**30 if found.group(2) in ("gib", "g") else 1e9 if found.group(2) else 1)


def _override(text: str) -> str:
    key, _, value = str(text).partition("=")
    value = {"on": "true", "yes": "true", "off": "false", "no": "false"}.get(value.strip().lower(), value.strip())
    return f"{key.strip()}={_number(value)}"


# --- a set, the record, the table ---------------------------------------------------------------------------------


def run_set(items: list[dict], llm: Any) -> list[dict]:
    # LangGraph only for a set that runs the agent
    from langgraph.checkpoint.memory import InMemorySaver

    from agent.graph import build_graph  # imported here: a bad set is a one-line error before the agent loads

    graph = build_graph(llm, InMemorySaver())
    judged = []
    with tempfile.TemporaryDirectory(prefix="meshpilot-understanding-") as tmp:
        repo = build_fixture(Path(tmp) / "repo")
        changes = changes_experiment(repo)
        for item in items:
            try:
                action = first_action(graph, repo, item, thread=item["id"])
            except Exception as error:  # a crash on one request is that request's outcome, not the benchmark's
                action = {"reply": f"crashed: {type(error).__name__}: {error}"}
            outcome, why = judge(item["expect"], action, changes)
            judged.append({"id": item["id"], "request": item["request"], "outcome": outcome, "why": why,
                           "action": action.get("call") or {"reply": (action.get("reply") or "")[:300]}})  # fmt: skip
    return judged


def record(name: str, phase: str, path: Path, judged: list[dict], agent: str) -> dict[str, Any]:
    counts = {o: sum(1 for j in judged if j["outcome"] == o) for o in OUTCOMES}
    return {
        "set": name,
        "phase": phase,
        "agent": agent,
        "source": _relative(path),
        "items": len(judged),
        "counts": counts,
        "right_pct": round(100 * counts["right"] / max(len(judged), 1), 1),
        "commit": _commit(),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "outcomes": judged,
    }


def save(new: list[dict], out: Path) -> list[dict]:
    """Earlier records kept; a record of the same set, phase and agent replaced."""
    records = json.loads(out.read_text())["records"] if out.is_file() else []
    keys = {(r["set"], r["phase"], r["agent"]) for r in new}
    records = [r for r in records if (r["set"], r["phase"], r["agent"]) not in keys] + new
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"benchmark": "agent_understanding", "records": records}, indent=1) + "\n")
    return records


def table(records: list[dict]) -> str:
    lines = ["| set | phase | agent | items | right | wrong action | asked | nothing | commit | date |",
             "|---|---|---|---:|---:|---:|---:|---:|---|---|"]  # fmt: skip
    for r in records:
        c = r["counts"]
        lines.append(f"| {r['set']} | {r['phase']} | {r['agent']} | {r['items']} | {c['right']} ({r['right_pct']}%) "
                     f"| {c['wrong']} | {c['asked']} | {c['nothing']} | {r['commit']} | {r['date']} |")  # fmt: skip
    return "\n".join(lines)


def _relative(path: Path) -> str:
    """The set's path as the repository names it (tests/data/...), else as given."""
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def _commit() -> str:
    found = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return found.stdout.strip() or "unknown"


class SetError(ValueError):
    """A request set that cannot be read: said in one line before anything runs."""


def load_set(path: Path) -> list[dict]:
    try:
        items = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except (OSError, ValueError) as error:
        raise SetError(f"--set {path}: {error}") from None
    for number, item in enumerate(items, 1):
        if not isinstance(item, dict) or "request" not in item or "expect" not in item:
            raise SetError(f"--set {path}: line {number} needs request and expect")
        item.setdefault("id", f"{path.stem}-{number}")
    return items


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--set", dest="sets", type=Path, action="append", required=True, help="a JSONL request set")
    parser.add_argument("--name", action="append", help="the set's name in the record (default: the file's stem)")
    parser.add_argument("--phase", default="current", help='e.g. "first-judged, before tuning"')
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--llm-base-url", help="OpenAI-compatible endpoint (default: MESHPILOT_LLM_BASE_URL)")
    parser.add_argument("--llm-model", help="model name at that endpoint (default: MESHPILOT_LLM_MODEL)")
    parser.add_argument("--llm", action="store_true", help="measure the real-LLM path only (skipped without one)")
    args = parser.parse_args(argv)
    names = args.name or []
    if len(names) > len(args.sets):
        parser.error("more --name than --set")
    try:
        sets = [load_set(path) for path in args.sets]
    except SetError as error:
        parser.error(str(error))
    # imported here, once the sets are read: a bad set is a one-line error before the agent loads (a second or two)
    from agent.llm import llm_settings, make_llm
    from agent.offline import OfflinePlanner

    try:
        settings = llm_settings(args.llm_base_url, args.llm_model)
    except ConfigError as error:
        parser.error(str(error))

    agents: list[tuple[str, Any]] = [] if args.llm else [("offline", OfflinePlanner())]
    if settings.offline:
        print("real-LLM path: skipped (no --llm-base-url/--llm-model or MESHPILOT_LLM_BASE_URL/MODEL)", file=sys.stderr)
    else:
        agents.append((f"llm:{settings.model}", make_llm(settings)))
    if not agents:
        return 0  # --llm without an endpoint: nothing measured, nothing written
    new = []
    for index, (path, items) in enumerate(zip(args.sets, sets, strict=True)):
        name = names[index] if index < len(names) else path.stem
        for agent_name, llm in agents:
            judged = run_set(items, llm)
            new.append(record(name, args.phase, path, judged, agent_name))
            for j in judged:
                if j["outcome"] != "right":
                    print(f"{name} {j['id']} {j['outcome']}: {j['request']!r} -> {j['why']}", file=sys.stderr)
    records = save(new, args.out)
    print(table(records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
