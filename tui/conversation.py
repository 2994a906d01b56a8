"""A saved conversation as the events the chat shows, so that a conversation reopened from the checkpointer looks
the way it looked live."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from agent.session import Event, Reply, Text, ToolCall, ToolResult


@dataclass(frozen=True)
class Request(Event):
    """The user's message (live, the chat shows it as it is sent)."""

    kind: ClassVar[str] = "request"
    text: str


def saved_events(messages: list[BaseMessage]) -> Iterator[Event]:
    for message in messages:
        if isinstance(message, HumanMessage):
            yield Request(message.text)
        elif isinstance(message, ToolMessage):
            failed = message.status == "error"
            yield ToolResult(message.tool_call_id, message.name or "", _parse(message.content), failed)
        elif isinstance(message, AIMessage) and message.tool_calls:
            if message.text:  # what the model said before calling tools
                yield Text(message.text)
            yield from (ToolCall(c["id"], c["name"], c["args"]) for c in message.tool_calls)
        elif isinstance(message, AIMessage):
            metadata = message.response_metadata
            yield Reply(message.text, metadata.get("sources", []), metadata.get("unverified", []))


def requests(messages: list[BaseMessage]) -> list[str]:
    """The user's messages, oldest first: the prompt's history."""
    return [m.text for m in messages if isinstance(m, HumanMessage)]


def _parse(content: Any) -> Any:
    try:
        return json.loads(content)
    except (TypeError, ValueError):
        return content
