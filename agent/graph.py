"""The agent's graph, in one place:

    START -> agent --(tool calls)--> review --(approved calls, one task each)--> tools -> agent
               \\--(no tool calls)--> reply -> END            \\--(all rejected)--> agent

- agent: the chat model (the offline planner, or an OpenAI-compatible model) answers or asks for tools.
- review: launches above the cost threshold and pull requests wait for a person (LangGraph `interrupt`), or an
  unattended policy decides; rejected calls are answered with a rejection the model reads.
- tools: each approved call runs as its own task, so a call that finished before a crash is not run again when
  the graph resumes (its result is a saved write); a call that was running re-runs, and launches are idempotent.
- reply: the final answer's numbers are checked against the tool results (agent.figures).

Every message a node adds to the state (the model's, each tool result, each rejection, the reply) is redacted
first (`redacted`: agent.repo.secrets.redact on its text, tool arguments and metadata): what the checkpointer saves,
what the model reads next and what the user is shown never holds a token, a key or a password.
"""

# No `from __future__ import annotations` here: ToolNode reads the exception types `_tool_error` handles from its
# annotation at run time, which a string annotation would hide.

import functools
import json
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.prebuilt.tool_node import ToolCallRequest, ToolInvocationError
from langgraph.types import Command, Send, interrupt

from agent.approvals import Policy, Request, add_spent, automatic_decision, check_decision, request_for
from agent.figures import check_reply
from agent.llm import llm_failure
from agent.prompt import SYSTEM_PROMPT
from agent.repo.secrets import redact
from agent.state import NOTHING_SPENT, AgentState
from agent.tools import TOOLS
from trainer.config import ConfigError


def build_graph(llm: BaseChatModel, checkpointer: Any = None):
    """The compiled graph; `checkpointer` (e.g. SqliteSaver) makes interrupts and resuming after a crash work."""
    model = llm.bind_tools(TOOLS)

    def agent(state: AgentState) -> dict:
        system = SystemMessage(SYSTEM_PROMPT.format(repo=state["repo"]))
        try:
            return {"messages": [model.invoke([system, *state["messages"]])]}
        except Exception as error:
            failure = llm_failure(error)
            if failure is None:
                raise
            raise failure from None

    builder = StateGraph(AgentState)
    builder.add_node("agent", _redacting(agent))
    builder.add_node("review", _redacting(review_tool_calls), destinations=("tools", "agent"))
    builder.add_node("tools", ToolNode(TOOLS, handle_tool_errors=_tool_error, wrap_tool_call=_redacted_result))
    builder.add_node("reply", _redacting(reply))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", _after_model, ["review", "reply"])
    builder.add_edge("tools", "agent")
    builder.add_edge("reply", END)
    return builder.compile(checkpointer=checkpointer)


def redacted(message: BaseMessage) -> BaseMessage:
    """`message` with every secret removed from its text, its tool calls' arguments and its metadata."""
    fields = ("content", "tool_calls", "invalid_tool_calls", "additional_kwargs", "response_metadata")
    return message.model_copy(update={f: _redact_all(getattr(message, f)) for f in fields if hasattr(message, f)})


def _redact_all(value: Any) -> Any:
    if isinstance(value, str):
        return _redact_text(value)
    if isinstance(value, list | tuple):
        return [_redact_all(v) for v in value]
    if isinstance(value, dict):
        return {k: _redact_all(v) for k, v in value.items()}
    return value


def _redact_text(text: str) -> str:
    """A tool result is JSON whose strings escape what they quote (a file's `"` and newlines): its strings are
    redacted one by one as the text they hold, then the JSON as written (a key word and its value)."""
    try:
        parsed = json.loads(text) if text.lstrip()[:1] in ("{", "[") else None
    except ValueError:
        parsed = None
    if isinstance(parsed, dict | list):
        text = json.dumps(_redact_all(parsed))
    return redact(text)


def _redacting(node: Callable[[AgentState], Any]) -> Callable[[AgentState], Any]:
    """`node` with every message it adds to the state redacted."""

    @functools.wraps(node)
    def redacting(state: AgentState) -> Any:
        return _redacted_update(node(state))

    return redacting


def _redacted_update(update: Any) -> Any:
    """A node's return value (an update, a Command or a tool's message) with every message in it redacted."""
    if isinstance(update, BaseMessage):
        return redacted(update)
    if isinstance(update, Command):
        return replace(update, update=_redacted_update(update.update))
    if isinstance(update, dict) and "messages" in update:
        return {**update, "messages": [redacted(m) for m in update["messages"]]}
    return update


def _redacted_result(request: ToolCallRequest, execute: Callable[[ToolCallRequest], Any]) -> Any:
    """A tool's result (or its one-line error) redacted before it enters the state."""
    return _redacted_update(execute(request))


def _after_model(state: AgentState) -> str:
    return "review" if state["messages"][-1].tool_calls else "reply"


def review_tool_calls(state: AgentState) -> Command:
    """Decide each tool call: run it, run it with edited arguments, or answer it with a rejection or an error.

    A person is asked with one `interrupt` per gated call, in order; on resume this node runs again from the
    top and LangGraph hands each interrupt its decision, so the calls before it are decided the same way.
    """
    message: AIMessage = state["messages"][-1]
    spent = state.get("spent", NOTHING_SPENT)
    policy = Policy(**state.get("policy", {}))
    approved, answers, calls = [], [], []
    for call in message.tool_calls:
        call, request, answer = _decide(call, Path(state["repo"]), policy, spent)
        calls.append(call)
        if answer is not None:
            answers.append(answer)
        else:
            approved.append(call)
            spent = add_spent(spent, request) if request else spent
    update: dict[str, Any] = {"messages": answers, "spent": spent}
    if calls != message.tool_calls:  # edited arguments: the model must see what actually ran
        update["messages"] = [message.model_copy(update={"tool_calls": calls}), *answers]
    if not approved:
        return Command(goto="agent", update=update)
    sends = [
        Send("tools", {"__type": "tool_call_with_context", "tool_call": {**c, "type": "tool_call"}, "state": state})
        for c in approved
    ]
    return Command(goto=sends, update=update)


def _decide(call: dict, repo: Path, policy: Policy, spent: dict) -> tuple[dict, Request | None, ToolMessage | None]:
    """The call as it will run (maybe edited), its approval request, and the answer given instead of running it
    (a rejection, or the one-line error of a launch that cannot run: nothing starts)."""
    try:
        request = request_for(call, repo)
        decision = automatic_decision(policy, request, spent) if request else {"action": "approve"}
        if decision is None:
            decision = check_decision(interrupt(request.as_dict()))
        if decision["action"] == "edit":
            call = {**call, "args": {**call["args"], **decision["args"]}}
            request = request_for(call, repo)
    except ConfigError as e:
        return call, None, _answer(call, {"error": str(e)}, error=True)
    if decision["action"] == "reject":
        reason = decision.get("reason") or "the user rejected it"
        cost = asdict(request.cost) if request.cost else None
        return call, request, _answer(call, {"rejected": True, "reason": reason, "cost": cost})
    return call, request, None


def reply(state: AgentState) -> dict:
    """Check the final answer's numbers against every tool result of the conversation."""
    message = state["messages"][-1]
    results = [m.content for m in state["messages"] if isinstance(m, ToolMessage)]
    users = [m.text for m in state["messages"] if isinstance(m, HumanMessage)]
    checked = check_reply(message.text, results, users)
    metadata = {**message.response_metadata, "sources": checked.sources, "unverified": checked.unverified}
    kept = message.additional_kwargs  # what the model keeps on its reply (the offline planner's offered reading)
    return {"messages": [AIMessage(checked.text, id=message.id, response_metadata=metadata, additional_kwargs=kept)]}


def _answer(call: dict, content: dict, error: bool = False) -> ToolMessage:
    return ToolMessage(
        json.dumps(content), tool_call_id=call["id"], name=call["name"], status="error" if error else "success"
    )


def _tool_error(error: ValueError | OSError | ToolInvocationError) -> str:
    """What the model reads when a tool fails on its input or on the files: the one-line error."""
    text = error.message if isinstance(error, ToolInvocationError) else str(error)
    return f"error: {text}"
