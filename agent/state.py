"""The agent's state: what the checkpointer saves after every step of a conversation.

Nothing secret belongs here: the whole state is written to the SQLite checkpointer as it is.
"""

from __future__ import annotations

from typing import Annotated, Any, NotRequired, TypedDict

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages


class Spent(TypedDict):
    """What this conversation has approved so far, counted against an unattended policy's budget."""

    device_hours: float
    launches: int  # runs, and the trials of sweeps


class AgentState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    repo: str  # the experiment repository the tools work in (absolute path)
    # agent.approvals.Policy as a dict, set with each request: a conversation resumed after a crash, or a
    # decision given by a later process, is judged by the policy it was started with.
    policy: NotRequired[dict[str, Any]]
    spent: NotRequired[Spent]


NOTHING_SPENT: Spent = {"device_hours": 0.0, "launches": 0}
