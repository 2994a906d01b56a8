"""The offline planner: a chat model that needs no network and no weights.

It implements langchain's chat-model interface (BaseChatModel with bind_tools), so the graph cannot tell it from
a real model. It reads the conversation since the user's last message, asks agent.understanding what the request
means (in the context of the conversation and the repository), calls the tools it needs one at a time, and once
the results are in writes the reply from them with agent.replies, naming the file of every figure it quotes.
Questions are answered from result files and never launch anything; a request that is ambiguous gets one
clarifying question.

    /plan [devices=N] [nodes=M] [device_mem=80GiB] [device_type=cuda|cpu] [model=PRESET] [gpu=h100] [seq_len=N]
    /run [nproc=N] [layout=dp_shard=2] [steps=N] [set=train.lr=1e-3]... [experiment=FILE] [wait=no]
    /status [RUN]   /results [RUN]   /cancel [RUN]   /compare RUN RUN   /runs   /hardware   /read PATH
    /trials [sweep=DIR]   /where   /docs   /resume [RUN|sweep=DIR] [wait=no]
    /sweep [trials=N] [experiment=FILE] [wait=no]   /bench model=DIR [suite=NAME]   /report [sweep=DIR]
    /pr [sweep=DIR]   /help
    "would FSDP be faster than DDP for a 7B llama on 8 H100s?", "how much memory did the optimizer state take in
    that run?", "train it with FSDP on 2 processes for 5 steps", "why did FSDP win?"
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool

from agent.replies import (
    answer_results,
    compare_plan,
    compare_plans,
    compare_runs,
    compare_trials,
    describe_bench,
    describe_docs,
    describe_fields,
    describe_file,
    describe_hardware,
    describe_job,
    describe_plan,
    describe_report,
    describe_resumed,
    describe_run,
    describe_runs,
    describe_where,
    explain_plan,
    explain_sweep,
)
from agent.understanding import Intent, context_of, parse_request

__all__ = ["HANDLERS", "HELP", "OfflinePlanner", "parse_request", "respond"]

HELP = """I am meshpilot's offline planner: no network, no model weights. I understand:

- `/plan [devices=N] [nodes=M] [device_mem=80GiB] [model=PRESET] [gpu=h100] [seq_len=N]`: rank parallelism layouts
- `/run [nproc=N] [layout=dp_shard=2,tp=2] [steps=N] [set=KEY=VALUE]... [experiment=FILE] [wait=no]`: train
- `/status [RUN]`, `/results [RUN]`, `/cancel [RUN]`, `/compare RUN RUN`: runs (default: the latest)
- `/trials [sweep=DIR]`, `/where`: the latest sweep's trials; where the reports and pull requests are
- `/sweep [trials=N]`, `/bench model=DIR [suite=NAME]`, `/report [sweep=DIR]`, `/pr [sweep=DIR]`, `/docs`
- `/resume [RUN|sweep=DIR] [wait=no]`: continue a preempted run or sweep (default: the newest preempted one)
- `/runs`, `/hardware`, `/read PATH`, `/help`

Plain requests work too, e.g. `would FSDP be faster than DDP for a 7B llama on 8 H100s?`,
`how much memory did the optimizer state take in that run?`, `train it with FSDP on 2 processes for 5 steps`,
`why did FSDP win?`."""

# Report inputs a request may leave out: the conversation's latest sweep and every benchmark it ran.
REPORT_INPUTS: dict[str, Callable[[list[BaseMessage]], Any]] = {
    "sweep": lambda messages: _latest_field(messages, "sweep"),
    "bench": lambda messages: _benches(messages),
}
RUN_TOOLS = ("launch_run", "wait_run", "run_status", "read_results", "cancel_run")  # tools about one run
# A what-if measured against the plan before it ("how much faster with 16 GPUs?").
COMPARING = r"\bhow much (?:faster|slower|better|quicker)\b|\b(?:than|compared? (?:to|with)) (?:before|the plan|that)\b"
PLAN_KEYS = ("devices", "nodes", "device_mem", "device_type", "experiment", "model", "gpu", "seq_len")
# A question that names one reading ("Do you want me to run (/run nproc=2, layout=tp=2)? yes / edit") keeps that
# reading on its message, under this key: a yes to it runs the reading, as if the user had typed the command.
OFFER = "meshpilot_offer"
NO = re.compile(r"(?:no|nope|nah|no thanks|never ?mind|not now|don'?t)[\s.!]*", re.IGNORECASE)
YES = re.compile(
    r"(?:y|yes|yep|yeah|yup|sure|ok|okay|confirm(?:ed)?|go ahead|do it|please do)"
    r"(?:[\s,.!]+(?:please|do it|go ahead|go|thanks|thank you|yes|sure|ok))*[\s.!]*",
    re.IGNORECASE,
)


@dataclass
class Step:
    """A tool call of this turn and what it returned (parsed JSON, or the error text)."""

    name: str
    args: dict[str, Any]
    result: Any = None
    error: str | None = None

    @property
    def rejected(self) -> str | None:
        if isinstance(self.result, dict) and self.result.get("rejected"):
            return self.result.get("reason") or "rejected"
        return None


class OfflinePlanner(BaseChatModel):
    """Deterministic tool-calling chat model for meshpilot (see the module docstring)."""

    @property
    def _llm_type(self) -> str:
        return "meshpilot-offline-planner"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any):
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _generate(self, messages: list[BaseMessage], stop=None, run_manager=None, **kwargs: Any) -> ChatResult:
        available = {t["function"]["name"] for t in kwargs.get("tools", [])}
        return ChatResult(generations=[ChatGeneration(message=respond(messages, available))])


def respond(messages: list[BaseMessage], available: set[str]) -> AIMessage:
    """The next message: tool calls still needed for the user's last request, or the reply."""
    last_human = max((i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=None)
    if last_human is None:
        return AIMessage(HELP)
    earlier, turn = messages[:last_human], _steps(messages[last_human + 1 :])
    text = messages[last_human].text
    if NO.fullmatch(text.strip()) and _offered(earlier):
        return AIMessage("Nothing done. Say what to change, or give the command yourself (`/help` lists them).")
    offered = _offered(earlier) if YES.fullmatch(text.strip()) else None
    intent = Intent(offered["command"], dict(offered["args"]), text=text) if offered else None
    intent = intent or parse_request(text, context_of(messages))
    if intent.refusal:  # what no tool may do (delete a run, push to main, print a secret): said, never attempted
        return AIMessage(intent.refusal)
    if intent.clarify and not turn:
        return _question(intent)
    message = HANDLERS[intent.command](intent, turn, earlier)
    missing = [c["name"] for c in message.tool_calls if c["name"] not in available]
    if missing:
        return AIMessage(f"I cannot do that here: the tool {missing[0]} is not available.")
    return message


def _question(intent: Intent) -> AIMessage:
    """The clarifying question, with the reading it names kept where it asks for a yes."""
    if not intent.clarify.rstrip().endswith("yes / edit"):
        return AIMessage(intent.clarify)
    return AIMessage(intent.clarify, additional_kwargs={OFFER: {"command": intent.command, "args": intent.args}})


def _offered(earlier: list[BaseMessage]) -> dict | None:
    """The reading the assistant's last message offered, where it was such a question."""
    if not earlier or not isinstance(earlier[-1], AIMessage):
        return None
    return earlier[-1].additional_kwargs.get(OFFER)


# --- handlers: (intent, this turn's steps, earlier messages) -> the next message ---------------------------------


def _help(intent: Intent, turn: list[Step], earlier: list[BaseMessage]) -> AIMessage:
    prefix = f"I do not know {intent.args['unknown']}.\n\n" if "unknown" in intent.args else ""
    return AIMessage(prefix + HELP)


def _plan(intent: Intent, turn: list[Step], earlier: list[BaseMessage]) -> AIMessage:
    """Plan (a what-if too): the stated hardware and model, or this machine; layouts named are compared."""
    done = {s.name: s for s in turn}
    if "plan_layouts" in done:
        before = _latest(earlier, "plan_layouts") if re.search(COMPARING, intent.text.lower()) else None
        return _finish(done["plan_layouts"], lambda result: _plan_reply(result, intent, before))
    args = {k: intent.args[k] for k in PLAN_KEYS if k in intent.args}
    if "devices" not in args and ("model" in args or "gpu" in args):
        gpus = f"{args['gpu']} GPUs" if "gpu" in args else "GPUs, and which"
        return AIMessage(f"How many {gpus} should I plan for? e.g. `on 8 H100s` or `on 2 nodes of 8 A100 40GB`.")
    if "devices" not in args:
        if "inspect_hardware" not in done:
            return _call("inspect_hardware")
        if done["inspect_hardware"].error:
            return _failed(done["inspect_hardware"])
        hardware = done["inspect_hardware"].result
        args |= {
            "devices": hardware["devices"],
            "device_type": hardware["device_type"],
            "device_name": hardware["device_name"],
        }
        if hardware.get("device_mem_bytes"):
            args["device_mem"] = str(hardware["device_mem_bytes"])
    return _call("plan_layouts", **_typed(args))


def _plan_reply(result: dict, intent: Intent, before: Step | None = None) -> str:
    """The plan; layouts named side by side; against the plan before when asked how it compares; how a loosely
    named model was read."""
    parts = [f"(I read {note}.)" for note in intent.notes]
    if before is not None:
        parts.append(compare_plans(before.result, result))
    if len(intent.families) >= 2:
        parts.append(compare_plan(result, intent.families))
    return "\n\n".join([*parts, describe_plan(result)])


def _why(intent: Intent, turn: list[Step], earlier: list[BaseMessage]) -> AIMessage:
    """Explain the latest sweep or plan of the conversation, else the repository's latest sweep."""
    if turn and (turn[-1].error or turn[-1].rejected):
        return _failed(turn[-1])
    asked = intent.families[0] if intent.families else None
    if named := intent.args.get("sweep"):  # "why did lr-scan's winner win?": that sweep, not the conversation's
        read = _done(turn, "read_sweep")
        return _call("read_sweep", sweep=named) if read is None else AIMessage(explain_sweep(read.result, asked))
    found = [s for s in _steps([*earlier]) + turn if s.name in ("plan_layouts", "read_sweep") or _swept(s)]
    found = [s for s in found if s.result and not s.rejected]
    if found:
        latest = found[-1]
        explain = explain_plan if latest.name == "plan_layouts" else explain_sweep
        return AIMessage(explain(latest.result, asked))
    if any(k in intent.args for k in ("devices", "model", "gpu")):
        return _plan(intent, turn, earlier)
    return _latest_sweep(turn, lambda sweep: _call("read_sweep", sweep=sweep))


def _run(intent: Intent, turn: list[Step], earlier: list[BaseMessage]) -> AIMessage:
    if not turn:
        keys = ("experiment", "nproc", "layout", "steps")
        args = _typed({k: intent.args[k] for k in keys if k in intent.args})
        if intent.args.get("set"):
            args["overrides"] = intent.args["set"]
        return _call("launch_run", **args)
    last = turn[-1]
    if last.error or last.rejected:
        return _failed(last)
    if last.name == "launch_run":
        if intent.args.get("wait", "yes") == "no":
            return AIMessage(f"Started run {last.result['run']} (run id {last.result['run_id']}); ask /status.")
        return _call("wait_run", run=last.result["run"])
    return AIMessage(describe_run(last.result))


def _sweep(intent: Intent, turn: list[Step], earlier: list[BaseMessage]) -> AIMessage:
    """Start a sweep (a background job), then wait for it unless told not to, and describe its summary."""
    if not turn:
        return _call("run_sweep", **_typed({k: intent.args[k] for k in ("experiment", "trials") if k in intent.args}))
    last = turn[-1]
    if last.error or last.rejected:
        return _failed(last)
    if last.name == "run_sweep":
        if intent.args.get("wait", "yes") == "no":
            started = last.result
            return AIMessage(f"Started sweep {started['sweep']} (job id {started['job_id']}); ask whether it is done.")
        return _call("wait_for_job", job_id=last.result["job_id"])
    return AIMessage(describe_job(last.result))


def _resume(intent: Intent, turn: list[Step], earlier: list[BaseMessage]) -> AIMessage:
    """Continue a preempted run or sweep (resume_job): the one named, else the repository's newest preempted one;
    then wait for it unless told not to, and describe how it ended."""
    if turn and turn[-1].name == "resume_job":
        last = turn[-1]
        if last.error or last.rejected or intent.args.get("wait", "yes") == "no":
            return _finish(last, describe_resumed)
        return _call("wait_for_job", job_id=last.result["job_id"])
    if turn and turn[-1].name == "wait_for_job":
        return _finish(turn[-1], describe_job)
    named = intent.args.get("run") or intent.args.get("sweep") or (intent.words[0] if intent.words else None)
    if named:
        return _call("resume_job", job_id=named)
    kind = "sweeps" if intent.args.get("kind") == "sweep" else "runs"
    return _from_listing(turn, lambda listing: _newest_preempted(listing, kind))


def _newest_preempted(listing: dict, kind: str) -> AIMessage:
    """resume_job of the newest preempted run (or sweep) that list_results found; a reply when there is none."""
    key, state = ("sweep", "state") if kind == "sweeps" else ("run", "status")
    preempted = [entry[key] for entry in listing[kind] if entry.get(state) == "preempted"]
    if not preempted:  # asked back: the user may mean a job this repository does not list as preempted
        return AIMessage(f"There is no preempted {key} to resume here (only a preempted {key} can be resumed). "
                         f"Which {key} did you mean?")  # fmt: skip
    return _call("resume_job", job_id=preempted[0])


def _status(intent: Intent, turn: list[Step], earlier: list[BaseMessage]) -> AIMessage:
    """A job's state, waited for when asked to ("wait for it"): a sweep's through wait_for_job, a run's through
    run_status or wait_run. A sweep this conversation did not start is read from its summary instead."""
    if turn and turn[-1].name == "wait_for_job":
        return _finish(turn[-1], describe_job)
    waiting = intent.args.get("wait") == "yes"
    sweep = _sweep_job(intent, earlier)
    if sweep is not None:
        return _call("wait_for_job", job_id=sweep, **({} if waiting else {"timeout_s": 0}))
    if re.search(r"\bsweep\b", intent.text.lower()):
        return _trials(intent, turn, earlier)
    tool = "wait_run" if waiting else "run_status"
    return _run_tool(tool, lambda intent, result: describe_run(result))(intent, turn, earlier)


def _sweep_job(intent: Intent, earlier: list[BaseMessage]) -> str | None:
    """The sweep job a status request is about: the one named, else this conversation's when the request says
    "sweep" or names no run and the sweep was the conversation's latest launch."""
    named = [word for word in intent.words if word.startswith("sweeps/")]
    if named:
        return named[0]
    launches = [s for s in _steps(earlier) if s.name in ("launch_run", "run_sweep") and s.result and not s.rejected]
    sweeps = [s for s in launches if s.name == "run_sweep"]
    if not sweeps:
        return None
    lowered = intent.text.lower()
    about_sweep = re.search(r"\bsweep\b", lowered)
    if about_sweep or (launches[-1] is sweeps[-1] and not re.search(r"\bruns?\b", lowered) and not intent.words):
        return sweeps[-1].result["job_id"]
    return None


def _swept(step: Step) -> bool:
    """A finished sweep's summary, as wait_for_job returned it."""
    return step.name == "wait_for_job" and isinstance(step.result, dict) and "trials" in step.result


def _run_tool(
    tool: str, describe: Callable[[Intent, Any], str]
) -> Callable[[Intent, list[Step], list[BaseMessage]], AIMessage]:
    """A handler that calls one tool on a run (named, this conversation's, or the repository's latest) and
    describes the result."""

    def handler(intent: Intent, turn: list[Step], earlier: list[BaseMessage]) -> AIMessage:
        if turn and turn[-1].name == tool:
            return _finish(turn[-1], lambda result: describe(intent, result))
        run = intent.args.get("run") or (intent.words[0] if intent.words else None) or _latest_run(earlier)
        if run is not None:
            return _call(tool, run=run)
        return _from_listing(turn, lambda listing: _latest_of(listing, "runs", lambda run: _call(tool, run=run)))

    return handler


def _compare(intent: Intent, turn: list[Step], earlier: list[BaseMessage]) -> AIMessage:
    """Runs side by side: those named, else the repository's latest two."""
    runs = intent.words or None
    if runs is None:
        listing = _done(turn, "list_results")
        if listing is None:
            return _call("list_results")
        if listing.error:
            return _failed(listing)
        runs = [r["run"] for r in listing.result["runs"][:2]]
        if len(runs) < 2:
            return AIMessage("There are fewer than two runs under runs/ to compare.")
    read = [s for s in turn if s.name == "read_results"]
    if read and (read[-1].error or read[-1].rejected):
        return _failed(read[-1])
    if len(read) < len(runs):
        return _call("read_results", run=runs[len(read)])
    return AIMessage(compare_runs([s.result for s in read]))


def _trials(intent: Intent, turn: list[Step], earlier: list[BaseMessage]) -> AIMessage:
    """The trials and winner of the conversation's latest sweep, else the repository's."""
    if turn and turn[-1].name == "read_sweep":
        return _finish(turn[-1], compare_trials)
    sweep = intent.args.get("sweep") or _latest_field(earlier, "sweep")
    if sweep:
        return _call("read_sweep", sweep=sweep)
    return _latest_sweep(turn, lambda found: _call("read_sweep", sweep=found))


def _where(intent: Intent, turn: list[Step], earlier: list[BaseMessage]) -> AIMessage:
    """Where the report and pull request are: this conversation's, else what the repository holds."""
    written = [s for s in _steps(earlier) if s.name in ("write_report", "open_pull_request") and s.result]
    written = [s for s in written if not s.rejected]
    if written:
        return AIMessage(describe_report(written[-1].result))
    return _from_listing(turn, lambda listing: AIMessage(describe_where(listing)))


def _docs(intent: Intent, turn: list[Step], earlier: list[BaseMessage]) -> AIMessage:
    """Update docs/training.md and README from a sweep: the one named or this conversation's, else the newest."""
    if turn:
        return _finish(turn[-1], describe_docs)
    sweep = intent.args.get("sweep") or _latest_field(earlier, "sweep")
    return _call("update_docs", **({"sweep": sweep} if sweep else {}))


def _read(intent: Intent, turn: list[Step], earlier: list[BaseMessage]) -> AIMessage:
    if turn:
        return _finish(turn[-1], describe_file)
    path = intent.args.get("path") or (intent.words[0] if intent.words else None)
    return _call("read_file", path=path) if path else AIMessage("Which file? e.g. /read meshpilot.yaml")


def _one_call(
    tool: str,
    keys: tuple[str, ...],
    describe: Callable[[Any], str],
    defaults: dict[str, Callable[[list[BaseMessage]], Any]] | None = None,
):
    """A handler that calls `tool` with the request's `keys` and describes the result. `defaults` find the
    arguments the request left out among the conversation's earlier results (e.g. the latest run)."""

    def handler(intent: Intent, turn: list[Step], earlier: list[BaseMessage]) -> AIMessage:
        if turn:
            return _finish(turn[-1], describe)
        args = _typed({key: intent.args[key] for key in keys if key in intent.args})
        for name, find in (defaults or {}).items():
            if name not in args:
                args[name] = find(earlier)
                if args[name] is None:
                    return AIMessage(f"Which {name}? This conversation has none to use; give `{name}=...`.")
        return _call(tool, **args)

    return handler


def _from_listing(turn: list[Step], then: Callable[[dict], AIMessage]) -> AIMessage:
    """What the repository holds (list_results), then `then` of it."""
    listing = _done(turn, "list_results")
    if listing is None:
        return _call("list_results")
    return _failed(listing) if listing.error else then(listing.result)


def _latest_of(listing: dict, kind: str, then: Callable[[str], AIMessage]) -> AIMessage:
    """`then` of the repository's latest run or sweep (listed newest first)."""
    if not listing[kind]:
        return AIMessage(f"There are no {kind} in this repository yet.")
    return then(listing[kind][0]["run" if kind == "runs" else "sweep"])


def _latest_sweep(turn: list[Step], then: Callable[[str], AIMessage]) -> AIMessage:
    if (done := _done(turn, "read_sweep")) is not None:
        return _failed(done)
    return _from_listing(turn, lambda listing: _latest_of(listing, "sweeps", then))


def _done(turn: list[Step], tool: str) -> Step | None:
    found = [s for s in turn if s.name == tool]
    return found[-1] if found else None


# --- plumbing ---------------------------------------------------------------------------------------------------


def _call(name: str, **args: Any) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": f"call_{uuid.uuid4().hex[:16]}"}])


def _finish(step: Step, describe: Callable[[Any], str]) -> AIMessage:
    return _failed(step) if step.error or step.rejected else AIMessage(describe(step.result))


def _failed(step: Step) -> AIMessage:
    if step.rejected:
        return AIMessage(f"Not done: {step.name} was rejected ({step.rejected}).")
    return AIMessage(f"{step.name} failed: {step.error}")


def _steps(messages: list[BaseMessage]) -> list[Step]:
    """The tool calls of this turn, in order, with their results."""
    steps: dict[str, Step] = {}
    for message in messages:
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                steps[call["id"]] = Step(call["name"], call["args"])
        elif isinstance(message, ToolMessage) and message.tool_call_id in steps:
            step = steps[message.tool_call_id]
            content = _parse(message.content)
            if message.status == "error":
                step.error = content.get("error", str(content)) if isinstance(content, dict) else str(content)
                step.error = step.error.removeprefix("error: ")
            else:
                step.result = content
    return [s for s in steps.values() if s.result is not None or s.error is not None]


def _parse(content: Any) -> Any:
    try:
        return json.loads(content)
    except (TypeError, ValueError):
        return content


def _latest(messages: list[BaseMessage], tool: str) -> Step | None:
    found = [s for s in _steps(messages) if s.name == tool and s.result is not None and not s.rejected]
    return found[-1] if found else None


def _latest_run(messages: list[BaseMessage]) -> str | None:
    """The run this conversation last launched, waited for or read: what "that run" and "it" mean."""
    for step in reversed(_steps(messages)):
        if step.name in RUN_TOOLS and not step.error and not step.rejected:
            return step.result.get("run") if isinstance(step.result, dict) else step.args.get("run")
    return None


def _benches(messages: list[BaseMessage]) -> list[str]:
    return [s.result["bench"] for s in _steps(messages) if s.name == "run_benchmark" and s.result and not s.rejected]


def _latest_field(messages: list[BaseMessage], name: str) -> str | None:
    """The latest value of `name` (e.g. sweep) in this conversation's tool results."""
    for step in reversed(_steps(messages)):
        if isinstance(step.result, dict) and isinstance(step.result.get(name), str):
            return step.result[name]
    return None


def _typed(args: dict[str, Any]) -> dict[str, Any]:
    """Whole numbers as ints: the tools' schemas type them."""
    return {k: int(v) if isinstance(v, str) and v.isdigit() else v for k, v in args.items()}


HANDLERS: dict[str, Callable[[Intent, list[Step], list[BaseMessage]], AIMessage]] = {
    "help": _help,
    "plan": _plan,
    "why": _why,
    "run": _run,
    "status": _status,
    "results": _run_tool("read_results", lambda intent, result: answer_results(result, intent.topics)),
    "cancel": _run_tool("cancel_run", lambda intent, result: describe_fields(result)),
    "resume": _resume,
    "compare": _compare,
    "trials": _trials,
    "where": _where,
    "hardware": _one_call("inspect_hardware", (), describe_hardware),
    "runs": _one_call("list_runs", (), describe_runs),
    "read": _read,
    "sweep": _sweep,
    "bench": _one_call("run_benchmark", ("model", "suite"), describe_bench, {"model": _latest_run}),
    "report": _one_call("write_report", ("sweep", "slug"), describe_report, REPORT_INPUTS),
    "pr": _one_call("open_pull_request", ("sweep", "slug"), describe_report, REPORT_INPUTS),
    "docs": _docs,
}
