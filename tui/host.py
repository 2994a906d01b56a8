"""What the screens ask of the app they run in (tui.app.MeshpilotApp, which imports every screen): typed here, so
that no screen imports the app back."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from textual.screen import Screen

    from agent.session import Agent
    from tui.agent_run import AgentRun


class Host(Protocol):
    agent: Agent
    agent_runs: dict[str, AgentRun]  # the conversations whose agent is working, by thread
    repo: Path
    llm_description: str
    sub_title: str
    screen: Screen

    def current_thread(self) -> str: ...

    def describe_session(self, thread_id: str) -> str: ...

    def agent_run_finished(self, run: AgentRun) -> None: ...

    def call_from_thread(self, callback: Callable[..., Any], *args: Any, **kwargs: Any) -> Any: ...

    def push_screen(self, screen: Screen | str, *args: Any, **kwargs: Any) -> Any: ...
