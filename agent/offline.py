"""The offline planner: a chat model that needs no network and no weights.

It implements langchain's chat-model interface (BaseChatModel with bind_tools), so the graph cannot tell it from
a real model. It reads the conversation since the user's last message, maps the request to tool calls by fixed
rules, and once the results are in writes the reply from them, naming the file of every figure it quotes.

Requests are slash commands with key=value arguments, or plain sentences matched by keywords:

    /plan [devices=N] [nodes=M] [device_mem=80GiB] [device_type=cuda|cpu]   rank layouts (default: this machine)
    /run [nproc=N] [layout=dp_shard=2] [steps=N] [set=train.lr=1e-3]... [experiment=FILE] [wait=no]
    /status [RUN]   /results [RUN]   /cancel [RUN]   /runs   /hardware   /read PATH
    /sweep [trials=N] [experiment=FILE]   /bench model=DIR [suite=NAME]   /report [sweep=DIR]   /pr [sweep=DIR]
    /help
    "find the fastest layout for this model on 8 GPUs", "why did FSDP win?", "train it on 2 processes for 3 steps"
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool

from agent.tools import layout_family

HELP = """I am meshpilot's offline planner: no network, no model weights. I understand:

- `/plan [devices=N] [nodes=M] [device_mem=80GiB] [device_type=cuda|cpu]`: rank parallelism layouts
- `/run [nproc=N] [layout=dp_shard=2,tp=2] [steps=N] [set=KEY=VALUE]... [experiment=FILE] [wait=no]`: train
- `/status [RUN]`, `/results [RUN]`, `/cancel [RUN]`: a run (default: the latest of this conversation)
- `/sweep [trials=N]`, `/bench model=DIR [suite=NAME]`, `/report [sweep=DIR]`, `/pr [sweep=DIR]`
- `/runs`, `/hardware`, `/read PATH`, `/help`

Plain requests work too, e.g. `find the fastest layout for this model on 8 GPUs`, `why did FSDP win?`,
`train it on 2 processes for 3 steps`."""

RUNNERS_UP = 3  # other families an explanation compares the winner with
# What each parallel dimension costs in trainer.throughput's model, said once per family part.
COSTS = {
    "FSDP": "FSDP gathers the parameters again for every micro-batch",
    "HSDP": "HSDP gathers parameters within a group and all-reduces gradients across groups",
    "DDP": "DDP all-reduces every gradient once per step",
    "TP": "tensor parallel all-reduces activations in every layer, on the critical path",
    "PP": "the pipeline idles for pp - 1 micro-batch slots per step (the 1F1B bubble)",
    "CP": "context parallel all-gathers keys and values in every layer and reduce-scatters their gradients",
}
# Report inputs a request may leave out: the conversation's latest sweep and every benchmark it ran.
REPORT_INPUTS: dict[str, Callable[[list[BaseMessage]], Any]] = {
    "sweep": lambda messages: _latest_field(messages, "sweep"),
    "bench": lambda messages: _benches(messages),
}
FAMILIES = {
    "hsdp": "HSDP",
    "fsdp": "FSDP",
    "ddp": "DDP",
    "data parallel": "DDP",
    "tensor": "TP",
    "tp": "TP",
    "pipeline": "PP",
    "pp": "PP",
    "context": "CP",
    "cp": "CP",
}


@dataclass
class Intent:
    command: str
    args: dict[str, Any] = field(default_factory=dict)
    words: list[str] = field(default_factory=list)
    text: str = ""


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
    intent = parse_request(messages[last_human].text)
    earlier, turn = messages[:last_human], _steps(messages[last_human + 1 :])
    message = HANDLERS[intent.command](intent, turn, earlier)
    missing = [c["name"] for c in message.tool_calls if c["name"] not in available]
    if missing:
        return AIMessage(f"I cannot do that here: the tool {missing[0]} is not available.")
    return message


def parse_request(text: str) -> Intent:
    """A slash command with key=value arguments, or a plain request matched by keywords."""
    text = text.strip()
    if text.startswith("/"):
        command, *rest = text[1:].split() or ["help"]
        args, words = _arguments(rest)
        command = command.lower()
        if command not in HANDLERS:
            return Intent("help", {"unknown": f"/{command}"}, [], text)
        return Intent(command, args, words, text)
    return _plain_request(text)


def _arguments(tokens: list[str]) -> tuple[dict[str, Any], list[str]]:
    args: dict[str, Any] = {}
    words = []
    for token in tokens:
        key, sep, value = token.partition("=")
        if not sep:
            words.append(token)
        elif key == "set":
            args.setdefault("set", []).append(value)
        else:
            args[key.replace("-", "_")] = value
    return args, words


_RULES: list[tuple[str, str]] = [
    ("why", r"\bwhy\b"),
    ("plan", r"\b(fastest|best|which|optimal)\b.*\blayouts?\b|\blayouts?\b.*\b(fastest|best)\b|\bplan\b"),
    ("hardware", r"\bhardware\b|\bwhat (gpus|devices)\b|\bhow many (gpus|devices)\b"),
    ("status", r"\bstatus\b|\bprogress\b|\bis (it|the run) (done|finished|running)\b"),
    ("cancel", r"\b(cancel|stop|abort)\b"),
    ("pr", r"\bpull request\b|\bPR\b"),
    ("report", r"\breport\b"),
    ("bench", r"\bbenchmark|\bevaluat"),
    ("sweep", r"\bsweep\b|\btun(e|ing)\b"),
    ("read", r"\b(show|read|open|cat)\b\s+\S+\.\w+"),
    ("runs", r"\b(list|which|what) runs\b"),
    ("results", r"\bresults?\b|\bmetrics\b|\bloss\b|\bthroughput\b"),
    ("run", r"\b(train|launch|run|start)\b"),
    ("help", r"\bhelp\b"),
]


def _plain_request(text: str) -> Intent:
    lowered = text.lower()
    command = next((c for c, rule in _RULES if re.search(rule, text if c == "pr" else lowered)), "help")
    args: dict[str, Any] = {}
    if found := re.search(r"(\d+)\s*(?:x\s*)?(?:gpus?|devices?|cards?|processes|procs|h100s?|a100s?)\b", lowered):
        args["devices" if command in ("plan", "why") else "nproc"] = found.group(1)
    if found := re.search(r"(\d+)\s*nodes?\b", lowered):
        args["nodes"] = found.group(1)
    if found := re.search(r"(\d+)\s*steps?\b", lowered):
        args["steps"] = found.group(1)
    if found := re.search(r"\b(\d+(?:\.\d+)?\s*gi?b)\b", lowered):
        args["device_mem"] = found.group(1).replace(" ", "").replace("gib", "GiB").replace("gb", "GB")
    if found := re.search(
        r"\b((?:pp|dp_replicate|dp_shard|cp|tp)=\d+(?:,(?:pp|dp_replicate|dp_shard|cp|tp)=\d+)*)", text
    ):
        args["layout"] = found.group(1)
    if command == "read" and (found := re.search(r"\b(?:show|read|open|cat)\b\s+(\S+\.\w+)", text, re.I)):
        return Intent("read", {}, [found.group(1)], text)
    return Intent(command, args, [], text)


# --- handlers: (intent, this turn's steps, earlier messages) -> the next message ---------------------------------


def _help(intent: Intent, turn: list[Step], earlier: list[BaseMessage]) -> AIMessage:
    prefix = f"I do not know {intent.args['unknown']}.\n\n" if "unknown" in intent.args else ""
    return AIMessage(prefix + HELP)


def _plan(intent: Intent, turn: list[Step], earlier: list[BaseMessage]) -> AIMessage:
    done = {s.name: s for s in turn}
    if "plan_layouts" in done:
        return _finish(done["plan_layouts"], describe_plan)
    args = {
        k: intent.args[k] for k in ("devices", "nodes", "device_mem", "device_type", "experiment") if k in intent.args
    }
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


def _why(intent: Intent, turn: list[Step], earlier: list[BaseMessage]) -> AIMessage:
    """Explain the latest sweep or plan of the conversation: measured figures when there are some."""
    if turn and (turn[-1].error or turn[-1].rejected):
        return _failed(turn[-1])
    found = [s for s in _steps([*earlier]) + turn if s.name in ("plan_layouts", "run_sweep") and s.result]
    found = [s for s in found if not s.rejected]
    if not found:
        if "devices" in intent.args:
            return _call("plan_layouts", **_typed({"devices": intent.args["devices"]}))
        return AIMessage("I have nothing to explain yet. Ask for a plan first, e.g. `/plan devices=8`, or a `/sweep`.")
    latest = found[-1]
    explain = explain_sweep if latest.name == "run_sweep" else explain_plan
    return AIMessage(explain(latest.result, _asked_family(intent.text)))


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


def _run_tool(
    tool: str, describe: Callable[[Any], str]
) -> Callable[[Intent, list[Step], list[BaseMessage]], AIMessage]:
    """A handler that calls one tool on a run (named, or this conversation's latest) and describes the result."""

    def handler(intent: Intent, turn: list[Step], earlier: list[BaseMessage]) -> AIMessage:
        if turn and turn[-1].name == "list_runs" and not turn[-1].error:
            question = "" if tool == "run_status" else "Which run? Name one of these:\n"
            return AIMessage(question + describe_runs(turn[-1].result))
        if turn:
            return _finish(turn[-1], describe)
        run = intent.args.get("run") or (intent.words[0] if intent.words else None) or _latest_run(earlier)
        if run is None:  # none named and none launched in this conversation: show what there is
            return _call("list_runs")
        return _call(tool, run=run)

    return handler


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


def _read(intent: Intent, turn: list[Step], earlier: list[BaseMessage]) -> AIMessage:
    if turn:
        return _finish(turn[-1], describe_file)
    path = intent.args.get("path") or (intent.words[0] if intent.words else None)
    return _call("read_file", path=path) if path else AIMessage("Which file? e.g. /read meshpilot.yaml")


# --- replies written from results -----------------------------------------------------------------------------


def describe_plan(result: dict) -> str:
    top = result["top"]
    if not top:
        reasons = "; ".join(f"{n} {r}" for r, n in result["dropped"].items())
        where = f"{result['devices']} x {result['nodes']} devices"
        return f"No layout fits on {where} ({reasons}). (source: {result['source']})"
    lines = [
        f"Fastest layouts for {result['devices']} device(s) x {result['nodes']} node(s), {result['device_type']}, "
        f"{result['device_mem_gib']:.3g} GiB each, as predicted by the memory and throughput models:",
        "",
    ]
    for i, c in enumerate(top, 1):
        name = c["layout"] if c["family"] == "single device" else f"{c['family']} {c['layout']}"
        lines.append(
            f"{i}. {name}, micro-batch {c['micro_batch']} x {c['grad_accum']} "
            f"accumulated{', checkpointing' if c['activation_checkpointing'] else ''}: "
            f"{c['predicted_tokens_per_s']:,.0f} tokens/s, {c['predicted_peak_gib']:.3g} GiB per device"
            + (f" ({'; '.join(c['notes'])})" if c["notes"] else "")
        )
    dropped = "".join(f"; {n} dropped: {reason}" for reason, n in result["dropped"].items())
    lines += ["", f"{result['feasible']} candidates fit{dropped}. (source: {result['source']})"]
    return "\n".join(lines)


def explain_plan(result: dict, asked: str | None) -> str:
    """Why the winner won: its figures beside the best candidate of every other family."""
    top = result["top"]
    if not top:
        return describe_plan(result)
    winner = top[0]
    families = result["best_by_family"]
    asked = _closest_family(asked or winner["family"], families)
    lines = []
    if asked != winner["family"] and asked not in families:
        lines.append(f"No {asked} layout fits or applies here, so it could not win. {winner['family']} won:")
    elif asked != winner["family"]:
        lines.append(f"{asked} did not win: {winner['family']} did.")
    lines.append(f"{winner['family']} ({winner['layout']}) {_figures(winner)}.")
    for family in _runners_up(families, winner["family"], asked):
        best = families[family]
        lines.append(f"Best {family} ({best['layout']}): {_figures(best)}; {_compare(best, winner)}.")
    lines.append(
        f"These are predictions; a run measures them (e.g. `/run layout={_layout_arg(winner)}`). "
        f"(source: {result['source']})"
    )
    return "\n".join(lines)


def _figures(c: dict) -> str:
    return (
        f"predicts {c['predicted_tokens_per_s']:,.0f} tokens/s ({c['predicted_step_s']:.4g} s per step), "
        f"peaks at {c['predicted_peak_gib']:.3g} GiB per device and moves {c['comm_gib_per_step']:.3g} GiB per step"
    )


def _compare(other: dict, winner: dict) -> str:
    """Why `other` ranks below `winner`: the costs (in trainer.throughput's model) it has that the winner has not."""
    mine, theirs = set(other["family"].split("+")), set(winner["family"].split("+"))
    reasons = [COSTS[part] for part in sorted(mine - theirs) if part in COSTS]
    if other.get("comm_gib_per_step", 0) > winner.get("comm_gib_per_step", 0):
        reasons.append("it moves more data between devices per step")
    if other["activation_checkpointing"] and not winner["activation_checkpointing"]:
        reasons.append("it recomputes activations in the backward pass")
    if other["grad_accum"] > winner["grad_accum"]:
        reasons.append("it runs more, smaller micro-batches per step")
    return "behind because " + ("; ".join(reasons) or "its collectives are on the critical path")


def _layout_arg(c: dict) -> str:
    return c["layout"] if c["layout"] != "single device" else "dp_replicate=1"


def describe_run(result: dict) -> str:
    state = result.get("state")
    metrics = result.get("metrics") or {}
    where = f"(source: {result['source']})"
    if state in ("queued", "running"):
        step = f": step {result['step']} of {result['steps']}" if result.get("step") is not None else ""
        return f"Run {result['run']} is {state}{step}. {where}"
    if state != "ok":
        cause = result.get("cause") or metrics.get("error") or "no cause recorded"
        step = f" at step {result['step']} of {result['steps']}" if result.get("step") is not None else ""
        return f"Run {result['run']} is {state}{step}: {cause} {where}"
    parts = [f"Run {result['run']} finished ok"]
    if metrics.get("final_loss") is not None:
        parts.append(f"final loss {metrics['final_loss']:.4f}")
    if metrics.get("tokens_per_s") is not None:
        parts.append(f"{metrics['tokens_per_s']:,.0f} tokens/s")
    if metrics.get("peak_mem_bytes"):
        parts.append(f"peak memory {max(metrics['peak_mem_bytes']) / 2**30:.3f} GiB per rank")
    if metrics.get("layout"):
        parts.append(f"layout {','.join(f'{k}={v}' for k, v in metrics['layout'].items() if v > 1) or 'one process'}")
    return ", ".join(parts) + f". {where}"


def describe_results(result: dict) -> str:
    fields = [f"status {result['status']}"]
    if result.get("final_loss") is not None:
        fields.append(f"final loss {result['final_loss']:.4f}")
    if result.get("tokens_per_s") is not None:
        fields.append(f"{result['tokens_per_s']:,.0f} tokens/s ({result['tokens_per_s_per_device']:,.0f} per device)")
    if result.get("error"):
        fields.append(f"error: {result['error']}")
    text = f"Results: {', '.join(fields)}. (source: {result['source']})"
    if result.get("memory"):
        memory = result["memory"]
        predicted, measured = memory["rank0_predicted"]["peak"], memory["rank0_measured"]["peak"]
        text += (f"\nRank 0 peak memory: predicted {predicted / 2**30:.3f} GiB, measured {measured / 2**30:.3f} GiB "
                 f"({memory['peak_source']}) (source: {memory['source']})")  # fmt: skip
    if result.get("steps_file"):
        losses = ", ".join(f"{s['step']}: {s['loss']:.4f}" for s in result["steps_file"]["losses"])
        text += f"\nLoss by step: {losses} (source: {result['steps_file']['source']})"
    return text


def describe_hardware(result: dict) -> str:
    memory = f", {result['device_mem_bytes'] / 2**30:.1f} GiB each" if result.get("device_mem_bytes") else ""
    return (
        f"This machine: {result['devices']} {result['device_type']} device(s) ({result['device_name']}{memory}), "
        f"link {result['intra_node_link']}, {result['cpu_cores']} CPU cores. (source: {result['source']})"
    )


def describe_file(result: dict) -> str:
    if "entries" in result:
        return f"{result['source']}:\n" + "\n".join(result["entries"])
    more = f"\n(more from offset {result['next_offset']})" if result.get("next_offset") else ""
    return f"{result['source']}:\n```\n{result['text']}\n```{more}"


def describe_sweep(result: dict) -> str:
    trials = result["trials"]
    ok = [t for t in trials if t["status"] == "ok"]
    lines = [f"Sweep {result['sweep']}: {len(trials)} trials, {len(ok)} ok, objective {result['objective']}."]
    winner = next((t for t in trials if t["id"] == result["winner"]), None)
    if winner is None:
        lines.append("No trial finished ok, so none won.")
    else:
        lines.append(f"Winner: trial {winner['id']}, {_trial_figures(winner)}.")
    planner = result.get("planner") or {}
    if planner.get("top_pick") and planner.get("quality_ratio") is not None:
        lines.append(f"The planner's top pick, trial {planner['top_pick']}, reached {planner['quality_ratio']:.1%} "
                     "of the best measured tokens/s.")  # fmt: skip
    return "\n".join(lines) + f" (source: {result['source']})"


def explain_sweep(result: dict, asked: str | None) -> str:
    """Why the sweep's winner won: measured figures beside the best trial of every other family."""
    objective = result["objective"]
    ok = [_as_candidate(t) for t in result["trials"] if t["status"] == "ok" and t.get(objective) is not None]
    if not ok:
        return f"No trial of the sweep finished ok, so nothing won. (source: {result['source']})"
    best_first = sorted(ok, key=lambda t: -t[objective] if objective == "tokens_per_s" else t[objective])
    winner = next((t for t in best_first if t["id"] == result["winner"]), best_first[0])
    families: dict[str, dict] = {}
    for trial in best_first:
        families.setdefault(trial["family"], trial)
    asked = _closest_family(asked or winner["family"], families)
    lines = [] if asked == winner["family"] else [f"{asked} did not win the sweep: {winner['family']} did."]
    if asked not in families:
        lines = [f"No {asked} trial finished ok in the sweep, so {asked} could not win."]
    lines.append(f"{winner['family']} won with trial {winner['id']}, {_trial_figures(winner)}.")
    for family in _runners_up(families, winner["family"], asked):
        best = families[family]
        lines.append(f"Best {family}, trial {best['id']}, {_trial_figures(best)}; {_compare(best, winner)}.")
    return "\n".join(lines) + f" (source: {result['source']})"


def _runners_up(families: dict[str, dict], winner: str, asked: str) -> list[str]:
    """The best-ranked other families (families is ordered best first), and the one asked about wherever it ranks."""
    others = [f for f in families if f != winner][:RUNNERS_UP]
    if asked in families and asked not in others and asked != winner:
        others.append(asked)
    return others


def _as_candidate(trial: dict) -> dict:
    """A sweep trial with the fields _compare reads."""
    params = trial["params"]
    return {**trial, "family": layout_family(params["layout"]), "grad_accum": params["grad_accum"],
            "activation_checkpointing": params["activation_checkpointing"]}  # fmt: skip


def _trial_figures(trial: dict) -> str:
    params = trial["params"]
    layout = ",".join(f"{k}={v}" for k, v in params["layout"].items() if v > 1) or "one process"
    parts = [f"{layout}, micro-batch {params['micro_batch']}"]
    if trial.get("tokens_per_s") is not None:
        parts.append(f"measured {trial['tokens_per_s']:,.0f} tokens/s")
    if trial.get("final_loss") is not None:
        parts.append(f"final loss {trial['final_loss']:.4f}")
    if trial.get("peak_mem_bytes") is not None:
        parts.append(f"peak {trial['peak_mem_bytes'] / 2**30:.3f} GiB")
    if trial.get("predicted_tokens_per_s") is not None:
        parts.append(f"predicted {trial['predicted_tokens_per_s']:,.0f} tokens/s")
    return ", ".join(parts)


def describe_bench(result: dict) -> str:
    lines = [f"Benchmark {result['suite']} on {result['model']}:"]
    for task in result["tasks"]:
        scores = ", ".join(f"{k} {v:.4g}" for k, v in task["metrics"].items() if isinstance(v, int | float))
        private = " (private split)" if task["private"] else ""
        lines.append(f"- {task['task']} {task['split']}{private}, {task['n_examples']} examples: {scores}")
    return "\n".join(lines) + f"\n(source: {result['source']})"


def describe_report(result: dict) -> str:
    text = f"Report written to {result['report_path']} on branch {result['branch']}"
    text += f", commit {result['commit'][:12]}." if result.get("commit") else " (nothing new to commit)."
    pull_request = result.get("pr") or {}
    if pull_request.get("url"):
        text += f" Pull request: {pull_request['url']}"
    return text


def describe_fields(result: dict) -> str:
    """Any other result: its plain fields, one per line."""
    lines = [f"{k}: {v}" for k, v in result.items() if k != "source" and isinstance(v, str | int | float | bool)]
    return "\n".join(lines) + f"\n(source: {result['source']})"


def describe_runs(result: dict) -> str:
    if not result["runs"]:
        return "No runs yet under runs/."
    return "\n".join(f"{r['run']}: {r['status'] or 'no results yet'}" for r in result["runs"])


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
    launched = _latest(messages, "launch_run")
    return launched.result["run"] if launched else None


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


def _closest_family(asked: str, families: dict[str, dict]) -> str:
    """The family asked about, or failing that the best one that includes it ("TP" finds "FSDP+TP")."""
    if asked in families:
        return asked
    return next((f for f in families if asked in f.split("+")), asked)


def _asked_family(text: str) -> str | None:
    lowered = text.lower()
    for word in sorted(FAMILIES, key=len, reverse=True):  # longest first: "data parallel" before "tp"
        if re.search(rf"\b{re.escape(word)}\b", lowered):
            return FAMILIES[word]
    return None


HANDLERS: dict[str, Callable[[Intent, list[Step], list[BaseMessage]], AIMessage]] = {
    "help": _help,
    "plan": _plan,
    "why": _why,
    "run": _run,
    "status": _run_tool("run_status", describe_run),
    "results": _run_tool("read_results", describe_results),
    "cancel": _run_tool("cancel_run", describe_fields),
    "hardware": _one_call("inspect_hardware", (), describe_hardware),
    "runs": _one_call("list_runs", (), describe_runs),
    "read": _read,
    "sweep": _one_call("run_sweep", ("experiment", "trials"), describe_sweep),
    "bench": _one_call("run_benchmark", ("model", "suite"), describe_bench, {"model": _latest_run}),
    "report": _one_call("write_report", ("sweep", "slug"), describe_report, REPORT_INPUTS),
    "pr": _one_call("open_pull_request", ("sweep", "slug"), describe_report, REPORT_INPUTS),
}
