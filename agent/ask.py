"""`meshpilot ask`: one request to the agent from the command line, without the terminal UI.

The reply goes to stdout, progress (tool calls and results) to stderr; --json prints every event as a JSON line
on stdout instead. Exit codes: 0 answered, 3 waiting for an approval (rerun with --thread and a decision),
2 bad input. --yes, --policy and --approve-below apply to the request given with them; a conversation keeps
that policy, so a later --approve, --edit or a rerun after a crash is judged by the policy it was started with.
Heavy imports (LangGraph, the models) happen only when the command runs, so they do not slow down
the other subcommands.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import uuid
from pathlib import Path
from typing import Any

from trainer.config import ConfigError

WAITING = 3
THREAD_ID = re.compile(r"^[\w.:-]{1,100}$")


def register(commands: argparse._SubParsersAction) -> None:
    ask = commands.add_parser(
        "ask",
        help="ask the agent once (the offline planner unless an LLM is configured)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ask.add_argument("request", nargs="?", help="e.g. '/plan devices=8' or 'why did FSDP win?'; /help lists more")
    add_agent_arguments(ask, thread_help="conversation to continue (default: a new one; its id is printed)")
    decide = ask.add_mutually_exclusive_group()
    decide.add_argument("--approve", action="store_true", help="approve what the thread waits for")
    decide.add_argument("--reject", metavar="REASON", help="reject what the thread waits for, saying why")
    decide.add_argument("--edit", metavar="JSON", help="approve with changed arguments, e.g. '{\"nproc\": 1}'")
    unattended = ask.add_mutually_exclusive_group()
    unattended.add_argument("--yes", action="store_true", help="unattended: approve every launch and pull request")
    unattended.add_argument(
        "--policy", metavar="SPEC", help="unattended within a budget: device_hours=H,trials=N,pr=yes|no"
    )
    ask.add_argument("--json", action="store_true", help="print every event as a JSON line")
    ask.set_defaults(handler=_ask)


def add_agent_arguments(parser: argparse.ArgumentParser, thread_help: str) -> None:
    """What `ask` and `chat` share: the repository, the conversation, the approval threshold and the LLM."""
    parser.add_argument("--repo", type=Path, default=Path("."), help="experiment repository (default: .)")
    parser.add_argument("--thread", help=thread_help)
    parser.add_argument(
        "--approve-below",
        type=float,
        metavar="DEVICE_HOURS",
        help="launches cheaper than this start without asking (default: MESHPILOT_APPROVE_BELOW, else 1)",
    )
    parser.add_argument("--llm-base-url", help="OpenAI-compatible endpoint (default: MESHPILOT_LLM_BASE_URL)")
    parser.add_argument("--llm-model", help="model name at that endpoint (default: MESHPILOT_LLM_MODEL)")


def check_agent_arguments(args: argparse.Namespace) -> float:
    """Refuse a bad shared argument in one line; return the approval threshold in device-hours."""
    # imported here: `meshpilot --help` registers this command; the agent (langgraph, langchain: a second) loads for it
    from agent.approvals import threshold_from_env

    if not args.repo.is_dir():
        raise ConfigError(f"--repo {args.repo} is not a directory")
    if args.thread is not None and not THREAD_ID.match(args.thread):
        raise ConfigError(f"--thread {args.thread!r}: use letters, digits, dots, colons, dashes and underscores")
    return args.approve_below if args.approve_below is not None else threshold_from_env()


def _ask(args: argparse.Namespace) -> int:
    # imported here: `meshpilot --help` registers this command; the agent (langgraph, langchain: a second) loads for it
    from agent.approvals import Policy
    from agent.llm import llm_settings, make_llm
    from agent.session import Agent

    # Everything that can be wrong with the command line is found before the database or a model is touched.
    threshold = check_agent_arguments(args)
    policy = Policy.yes() if args.yes else Policy.parse(args.policy) if args.policy is not None else Policy()
    policy = policy.with_threshold(threshold)
    decision = _decision(args)
    if decision and args.request:
        raise ConfigError("give either a REQUEST or a decision (--approve, --reject, --edit), not both")
    if (decision or not args.request) and not args.thread:
        raise ConfigError("without a REQUEST, --thread names the conversation to continue")
    llm = make_llm(llm_settings(args.llm_base_url, args.llm_model))

    thread = args.thread or uuid.uuid4().hex[:12]
    agent = Agent(args.repo, llm, policy=policy)
    try:
        _say(args, {"kind": "thread", "thread": thread}, f"thread {thread}")
        return _converse(agent, thread, args, decision)
    finally:
        agent.close()


def _converse(agent, thread: str, args: argparse.Namespace, decision: dict[str, Any] | None) -> int:
    from agent.session import AgentError  # imported here: see _ask

    state = agent.state(thread)
    if decision is not None:
        events = agent.resume(thread, decision)
    elif args.request:
        events = agent.send(thread, args.request)
    elif state == "stopped":
        events = agent.recover(thread)
    elif state == "waiting":
        events = iter([])  # show what it waits for, below
    else:
        raise AgentError(f"thread {thread} has nothing to continue: give a REQUEST")
    while True:
        for event in events:
            _show(args, event)
        request = agent.pending(thread)
        if request is None:
            return 0
        if args.json or not sys.stdin.isatty():
            _show_waiting(args, thread, request)
            return WAITING
        events = agent.resume(thread, _prompt(request))


def _decision(args: argparse.Namespace) -> dict[str, Any] | None:
    if args.approve:
        return {"action": "approve"}
    if args.reject is not None:
        return {"action": "reject", "reason": args.reject}
    if args.edit is not None:
        try:
            changes = json.loads(args.edit)
        except ValueError:
            changes = None
        if not isinstance(changes, dict):
            raise ConfigError(f'--edit takes a JSON object of arguments, e.g. {{"nproc": 1}}; got {args.edit!r}')
        return {"action": "edit", "args": changes}
    return None


def _prompt(request: dict[str, Any]) -> dict[str, Any]:
    """Ask at the terminal: approve, reject, or edit the arguments."""
    print(f"\nApproval needed: {request['summary']}", file=sys.stderr)
    while True:
        answer = input("approve [y], reject [n], or edit with a JSON object of arguments: ").strip()
        if answer.lower() in ("y", "yes"):
            return {"action": "approve"}
        if answer.lower() in ("n", "no"):
            return {"action": "reject", "reason": input("why? ").strip() or "the user rejected it"}
        try:
            changes = json.loads(answer)
        except ValueError:
            changes = None
        if isinstance(changes, dict):
            return {"action": "edit", "args": changes}


def _show(args: argparse.Namespace, event) -> None:
    if args.json:
        print(json.dumps(event.as_dict(), default=str), flush=True)
        return
    if event.kind == "tool_call":
        arguments = ", ".join(f"{k}={v!r}" for k, v in event.args.items())
        print(f"-> {event.name}({arguments})", file=sys.stderr, flush=True)
    elif event.kind == "tool_result":
        print(f"<- {event.name}: {_outcome(event)}", file=sys.stderr, flush=True)
    elif event.kind == "reply":
        print(event.text, flush=True)


def _outcome(event) -> str:
    result = event.result if isinstance(event.result, dict) else {}
    if result.get("rejected"):
        return f"rejected: {result.get('reason')}"
    if event.error:
        return str(result.get("error") or event.result)
    return f"done (source: {result.get('source')})" if result.get("source") else "done"


def _show_waiting(args: argparse.Namespace, thread: str, request: dict[str, Any]) -> None:
    text = (
        f"Waiting for approval: {request['summary']}\n"
        f"Decide with: meshpilot ask --thread {thread} --approve | --reject REASON | --edit JSON"
    )
    _say(args, {"kind": "waiting", "thread": thread, "request": request}, text, file=sys.stdout)


def _say(args: argparse.Namespace, data: dict[str, Any], text: str, file=None) -> None:
    if args.json:
        print(json.dumps(data, default=str), flush=True)
    else:
        print(text, file=file or sys.stderr, flush=True)
