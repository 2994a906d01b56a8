"""What the conversation so far gives a new sentence: the repository (named in the system prompt), the previous
turn's action, the plan and launch before, and the run, sweep and file it last talked about ("it", "that run",
"the same but ...").
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from agent.prompt import SYSTEM_PROMPT
from agent.understanding import regex as re  # `re` with a cache the parser's patterns fit in
from agent.understanding.known import Known

# The command a tool call answers: what a follow-up ("and baseline-ddp?") asks again.
COMMAND_OF_TOOL = {"plan_layouts": "plan", "launch_run": "run", "run_status": "status", "wait_run": "wait",
                   "read_results": "results", "cancel_run": "cancel", "list_runs": "runs", "read_sweep": "trials",
                   "run_sweep": "sweep", "run_benchmark": "bench", "write_report": "report",
                   "open_pull_request": "pr", "update_docs": "docs", "read_file": "read",
                   "inspect_hardware": "hardware", "wait_for_job": "status"}  # fmt: skip
LOOKUPS = {"list_results"}  # look-ups on the way to an answer, not what a turn asked for


@dataclass
class Call:
    name: str
    args: dict[str, Any]
    result: Any = None


@dataclass
class Context:
    known: Known = field(default_factory=Known)
    calls: list[Call] = field(default_factory=list)  # every earlier tool call, in order
    previous: str | None = None  # the command of the previous turn's action
    previous_text: str | None = None

    def last(self, *names: str) -> Call | None:
        return next((c for c in reversed(self.calls) if c.name in names), None)

    @property
    def run(self) -> str | None:
        """The run this conversation last launched, read or benchmarked; when the previous turn called no tool (it
        asked back), the run that turn named: "is r2 still going?" then "wait for it" means r2, known or not."""
        if self.previous is None and self.previous_text and (named := self.named_before()):
            return named
        for call in reversed(self.calls):
            result = call.result if isinstance(call.result, dict) else {}
            if call.name == "launch_run" and isinstance(result.get("run"), str) and not result.get("not_run"):
                return result["run"]
            if isinstance(call.args.get("run"), str):
                return call.args["run"]
            if call.name == "run_benchmark" and str(call.args.get("model", "")).startswith("runs/"):
                return "/".join(call.args["model"].split("/")[:2])
        return None

    def named_before(self) -> str | None:
        """The run the previous sentence named: a runs/ path, a run of the repository, or a name shaped like one
        ("r2"), which the planner then asks about when the repository lacks it."""
        text = self.previous_text.lower()
        if found := re.search(r"(?<![\w/.-])(runs/[\w.-]*\w)", text):
            return found.group(1)
        for word in re.findall(r"(?<![\w/.-])[a-z][\w.-]*\w", text):
            if path := self.known.resolve(word, "runs", prefix=False, close=False):
                return path
        found = re.search(r"(?<![\w/.=-])(r\d+)(?![\w/=-])", text)
        return f"runs/{found.group(1)}" if found else None

    @property
    def sweep(self) -> str | None:
        for call in reversed(self.calls):
            for found in (call.args, call.result if isinstance(call.result, dict) else {}):
                if isinstance(found.get("sweep"), str) and found["sweep"].startswith("sweeps/"):
                    return found["sweep"]
        return None

    @property
    def file(self) -> str | None:
        call = self.last("read_file")
        return call.args.get("path") if call else None

    @property
    def plan(self) -> dict[str, Any] | None:
        call = self.last("plan_layouts")
        return dict(call.args) if call else None

    @property
    def launch(self) -> dict[str, Any] | None:
        call = self.last("launch_run")
        return dict(call.args) if call else None


def context_of(messages: list[BaseMessage], repo: str | None = None) -> Context:
    """The context of the last human message of `messages` (everything before it counts)."""
    last_human = max((i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=len(messages))
    earlier = messages[:last_human]
    calls: dict[str, Call] = {}
    turns: list[list[Call]] = []
    texts: list[str] = []
    for message in earlier:
        if isinstance(message, HumanMessage):
            turns.append([])
            texts.append(message.text)
        elif isinstance(message, AIMessage):
            for call in message.tool_calls:
                calls[call["id"]] = Call(call["name"], dict(call["args"]))
                if turns:
                    turns[-1].append(calls[call["id"]])
        elif isinstance(message, ToolMessage) and message.tool_call_id in calls:
            calls[message.tool_call_id].result = _parse(message.content)
    previous = None
    if turns:
        actions = [c for c in turns[-1] if c.name not in LOOKUPS]
        previous = COMMAND_OF_TOOL.get(actions[0].name) if actions else None
    known = Known.read(repo or repo_of(messages))
    return Context(known, list(calls.values()), previous, texts[-1] if texts else None)


def repo_of(messages: list[BaseMessage]) -> str | None:
    """The repository the graph's system prompt names (agent.prompt.SYSTEM_PROMPT): the planner's only view of it."""
    before, _, after = SYSTEM_PROMPT.partition("{repo}")
    pattern = re.escape(before[-40:]) + r"(.+?)" + re.escape(after[:12])
    for message in messages:
        if isinstance(message, SystemMessage) and (found := re.search(pattern, message.text)):
            return found.group(1)
    return None


def _parse(content: Any) -> Any:
    try:
        return json.loads(content)
    except (TypeError, ValueError):
        return content
