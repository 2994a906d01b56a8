"""The agent as a program uses it (`meshpilot ask`, the terminal UI): conversations kept in SQLite, events out.

    agent = Agent(repo, llm, policy=Policy())
    for event in agent.send(thread_id, "/plan devices=8"): ...   # Text, ToolCall, ToolResult, Approval, Reply
    for event in agent.resume(thread_id, {"action": "approve"}): ...   # after an Approval
    for event in agent.recover(thread_id): ...   # finish a step whose process was killed

Every step is saved before the next one starts (LangGraph durability "sync"), so a conversation survives its
process being killed at any point: `recover` re-runs only the step that was under way, and launches are
idempotent (see agent.tools), so a run that started is never started again.

The conversation database holds every message (redacted: agent.graph.redacted) and is its owner's alone: the
state directory is made 0700 and the database and its -wal, -shm and -journal files 0600, also when they were
made before with wider modes.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command

from agent.approvals import Policy, check_decision
from agent.graph import build_graph, redacted
from agent.offline import OfflinePlanner
from agent.repo.secrets import redact
from agent.tools import STATE_DIR
from trainer.config import ConfigError

RECURSION_LIMIT = 60  # graph steps per request: room for a long chain of tool calls, a stop for a looping model


class AgentError(ConfigError):
    """A request the conversation cannot take in its present state (e.g. one awaiting approval)."""


@dataclass(frozen=True)
class Event:
    kind: ClassVar[str] = "event"

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, **asdict(self)}


@dataclass(frozen=True)
class Text(Event):
    """Text of the model's message as it arrives (the final, checked reply follows as a Reply)."""

    kind: ClassVar[str] = "text"
    text: str


@dataclass(frozen=True)
class ToolCall(Event):
    kind: ClassVar[str] = "tool_call"
    id: str
    name: str
    args: dict[str, Any]


@dataclass(frozen=True)
class ToolResult(Event):
    kind: ClassVar[str] = "tool_result"
    id: str
    name: str
    result: Any  # parsed JSON, or text
    error: bool = False


@dataclass(frozen=True)
class Approval(Event):
    """The graph stopped for a decision on one tool call: answer with Agent.resume."""

    kind: ClassVar[str] = "approval"
    request: dict[str, Any]  # agent.approvals.Request.as_dict()


@dataclass(frozen=True)
class Reply(Event):
    kind: ClassVar[str] = "reply"
    text: str
    sources: list[str] = field(default_factory=list)
    unverified: list[str] = field(default_factory=list)


class Agent:
    """One experiment repository's conversations; `llm` defaults to the offline planner."""

    def __init__(
        self,
        repo: str | Path,
        llm: BaseChatModel | None = None,
        *,
        policy: Policy | None = None,
        db: str | Path | None = None,
    ):
        self.repo = Path(repo).resolve()
        if not self.repo.is_dir():
            raise ConfigError(f"repository {repo} is not a directory")
        _owner_only_directory(self.repo / STATE_DIR)
        db = Path(db) if db else self.repo / STATE_DIR / "agent.sqlite"
        db.parent.mkdir(parents=True, exist_ok=True)
        _owner_only_database(db)
        # The saver serialises access with its own lock, so one connection may serve a UI's worker threads.
        self._connection = sqlite3.connect(db, check_same_thread=False)
        self.checkpointer = SqliteSaver(self._connection)
        self.policy = policy or Policy()  # for the requests this agent sends; a conversation keeps its own
        self.graph = build_graph(llm or OfflinePlanner(), self.checkpointer)

    def send(self, thread_id: str, text: str) -> Iterator[Event]:
        """Add the user's message to the conversation and run until a reply or an approval request.

        The conversation takes this agent's policy from here on: a later resume or recover (maybe by another
        process, with other settings) is judged by it."""
        if not text.strip():
            raise AgentError("the request is empty")
        self._check_idle(thread_id)
        message = redacted(HumanMessage(text))  # a token pasted into a request is not kept either
        update = {"messages": [message], "repo": str(self.repo), "policy": asdict(self.policy)}
        return self._stream(update, thread_id)

    def resume(self, thread_id: str, decision: dict[str, Any]) -> Iterator[Event]:
        """Answer the pending approval: {"action": "approve"}, {"action": "reject", "reason": "..."} or
        {"action": "edit", "args": {...}}."""
        check_decision(decision)
        if self.pending(thread_id) is None:
            raise AgentError(f"thread {thread_id} has no approval waiting")
        return self._stream(Command(resume=decision), thread_id)

    def recover(self, thread_id: str) -> Iterator[Event]:
        """Finish the step a killed process left under way."""
        if self.pending(thread_id) is not None:
            raise AgentError(f"thread {thread_id} waits for an approval: approve, reject or edit it")
        if self.state(thread_id) != "stopped":
            raise AgentError(f"thread {thread_id} has nothing left to finish")
        return self._stream(None, thread_id)

    def state(self, thread_id: str) -> str:
        """new (no messages), waiting (for an approval), stopped (mid-step: its process ended), or idle."""
        snapshot = self.graph.get_state(_config(thread_id))
        if not snapshot.values:
            return "new"
        if any(task.interrupts for task in snapshot.tasks):
            return "waiting"
        return "stopped" if snapshot.next else "idle"

    def pending(self, thread_id: str) -> dict[str, Any] | None:
        """The approval request the conversation waits for, if any."""
        snapshot = self.graph.get_state(_config(thread_id))
        for task in snapshot.tasks:
            for found in task.interrupts:
                return found.value
        return None

    def messages(self, thread_id: str) -> list[BaseMessage]:
        return self.graph.get_state(_config(thread_id)).values.get("messages", [])

    def threads(self) -> list[str]:
        """Every conversation this repository's database holds, most recently active first."""
        seen: dict[str, None] = {}
        for saved in self.checkpointer.list(None):
            seen.setdefault(saved.config["configurable"]["thread_id"], None)
        return list(seen)

    def close(self) -> None:
        self._connection.close()

    def _check_idle(self, thread_id: str) -> None:
        state = self.state(thread_id)
        if state == "waiting":
            raise AgentError(f"thread {thread_id} waits for an approval: approve, reject or edit it first")
        if state == "stopped":
            raise AgentError(f"thread {thread_id} stopped mid-step when its process ended: recover it first")

    def _stream(self, payload: Any, thread_id: str) -> Iterator[Event]:
        # Saved before the next step starts: a process killed at any point loses at most the step under way.
        stream = self.graph.stream(payload, _config(thread_id), stream_mode=["updates", "messages"], durability="sync")
        for mode, chunk in stream:
            yield from _events(mode, chunk)


def _owner_only_directory(directory: Path) -> None:
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    directory.chmod(0o700)  # it may have been made earlier, or by a tool, with the umask's wider mode


def _owner_only_database(db: Path) -> None:
    """Create `db` owner-only before SQLite writes a byte, and narrow it and its companions if they exist; SQLite
    gives the -wal and -shm files it makes later the database file's mode."""
    os.close(os.open(db, os.O_WRONLY | os.O_CREAT, 0o600))
    for path in (db, *(db.with_name(db.name + suffix) for suffix in ("-wal", "-shm", "-journal"))):
        if path.exists():
            path.chmod(0o600)


def _config(thread_id: str) -> dict[str, Any]:
    if not thread_id:
        raise AgentError("a conversation needs a thread id")
    return {"configurable": {"thread_id": thread_id}, "recursion_limit": RECURSION_LIMIT}


def _events(mode: str, chunk: Any) -> Iterator[Event]:
    if mode == "messages":
        message, metadata = chunk
        from_model = metadata.get("langgraph_node") == "agent" and isinstance(message, AIMessage | AIMessageChunk)
        if from_model and message.text:
            yield Text(redact(message.text))  # as the model wrote it, before the graph redacts its message
        return
    for node, update in chunk.items():
        if node == "__interrupt__":
            yield from (Approval(found.value) for found in update)
            continue
        for message in (update or {}).get("messages", []):
            yield from _message_events(node, message)


def _message_events(node: str, message: BaseMessage) -> Iterator[Event]:
    if isinstance(message, ToolMessage):
        yield ToolResult(message.tool_call_id, message.name or "", _parse(message.content), message.status == "error")
    elif node == "reply":
        metadata = message.response_metadata
        yield Reply(message.text, metadata.get("sources", []), metadata.get("unverified", []))
    elif node == "agent" and isinstance(message, AIMessage):
        yield from (ToolCall(c["id"], c["name"], c["args"]) for c in message.tool_calls)


def _parse(content: Any) -> Any:
    try:
        return json.loads(content)
    except (TypeError, ValueError):
        return content
