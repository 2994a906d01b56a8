"""The main screen: the conversation, the prompt, and the runs beside them.

Every agent call runs as a tui.agent_run.AgentRun, followed here by a Textual worker of the "agent" group;
opening another conversation stops following (the call goes on) and a conversation opened again is read from
the checkpointer, then followed for what is still to come.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, ClassVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.reactive import reactive
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Footer, Header, Static
from textual.worker import WorkerCancelled, WorkerFailed

from agent.session import Approval, Event, Reply, Text, ToolCall, ToolResult
from trainer.config import ConfigError
from tui.agent_run import AgentRun
from tui.conversation import Request, requests, saved_events
from tui.runs import RunInfo
from tui.screens.approval import ApprovalScreen, describe_decision
from tui.widgets.chat import Notice, ReplyEntry, ToolEntry, UserEntry
from tui.widgets.prompt import CommandHints, PromptArea
from tui.widgets.runs import RunsTable

if TYPE_CHECKING:
    from tui.host import Host

IDLE = "Enter sends · ctrl+j new line · / for commands"


class ChatScreen(Screen):
    app: Host
    BINDINGS: ClassVar[list[BindingType]] = [Binding("ctrl+g", "decide", "Decide", priority=True)]

    busy: reactive[bool] = reactive(False)
    activity: reactive[str] = reactive(IDLE)

    def __init__(self, thread_id: str):
        super().__init__()
        self.thread_id = thread_id
        self.pending: dict[str, Any] | None = None  # the approval this conversation waits for
        self.shown: str | None = None  # the conversation on screen, once read from the checkpointer
        self._reply: ReplyEntry | None = None  # the reply being streamed

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal():
            with Vertical(id="conversation"):
                yield VerticalScroll(id="log", can_focus=False)  # clicks select text; typing stays in the prompt
                yield Static(id="activity")
                hints = CommandHints(id="hints")
                yield hints
                yield PromptArea(hints, id="prompt")
            with Vertical(id="side"):
                yield Static("Runs", classes="title")
                yield RunsTable(compact=True, id="side-runs")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#hints").display = False
        self.query_one("#log", VerticalScroll).anchor()
        self.query_one(PromptArea).focus()
        self.watch(self.app, "runs", self._show_runs)
        self.open_thread(self.thread_id)

    def _show_runs(self, runs: tuple[RunInfo, ...]) -> None:
        self.query_one("#side-runs", RunsTable).show(runs)

    def watch_activity(self, text: str) -> None:
        self.query_one("#activity", Static).update(text)

    # --- conversations ------------------------------------------------------------------------------------------

    @work(group="load", exclusive=True)
    async def open_thread(self, thread_id: str) -> None:
        """Show a conversation from the checkpointer; finish a step its process left, or ask what it waits for."""
        for follower in self.workers.cancel_group(self, "agent"):  # the call goes on; only the following stops
            with contextlib.suppress(WorkerCancelled, WorkerFailed):
                await follower.wait()
        self.thread_id, self.pending, self._reply, self.busy, self.shown = thread_id, None, None, False, None
        self.app.sub_title = self.app.describe_session(thread_id)
        agent = self.app.agent
        messages, state, pending = await asyncio.to_thread(
            lambda: (agent.messages(thread_id), agent.state(thread_id), agent.pending(thread_id))
        )
        log = self.query_one("#log", VerticalScroll)
        await log.remove_children()
        for event in saved_events(messages):
            await self._show(event)
        await self._close_reply()
        prompt = self.query_one(PromptArea)
        prompt.sent = requests(messages)
        self.activity = IDLE
        self.shown = thread_id
        running = self.app.agent_runs.get(thread_id)
        if running is not None and not running.finished:
            running.skip_backlog()  # what it did so far was just read from the checkpointer
            self.follow(running)
        elif state == "waiting" and pending is not None:
            self.ask(pending)
        elif state == "stopped":
            self.notice("This conversation stopped mid-step when its process ended: finishing that step.")
            self.start(lambda: agent.recover(thread_id))
        self.refresh_bindings()

    def on_prompt_area_submitted(self, message: PromptArea.Submitted) -> None:
        why = self._not_now()
        if why is not None:
            self.query_one(PromptArea).text = message.text  # kept for when the conversation can take it
            self.notify(f"Not sent: {why}.", severity="warning")
            return
        self.query_one("#log", VerticalScroll).mount(UserEntry(message.text))
        thread_id, agent = self.thread_id, self.app.agent
        self.start(lambda: agent.send(thread_id, message.text))

    def _not_now(self) -> str | None:
        """Why the conversation cannot take a new request now, if it cannot."""
        if self.shown != self.thread_id:
            return "the conversation is still loading"
        if self.busy:
            return "the agent is still working on your last request"
        if self.pending is not None:
            return "decide the waiting approval first (ctrl+g)"
        return None

    def start(self, produce: Callable[[], Iterable[Event]], thread_id: str | None = None) -> None:
        """Run an agent call for this conversation (or another: it goes on unfollowed)."""
        thread_id = thread_id or self.thread_id
        run = AgentRun(thread_id, produce, on_finish=self.app.agent_run_finished).start()
        self.app.agent_runs[thread_id] = run
        if thread_id == self.thread_id:
            self.follow(run)

    @work(group="agent", exclusive=True)
    async def follow(self, run: AgentRun) -> None:
        self.busy, self.activity = True, "Thinking…"
        approval = None
        try:
            async for batch in run.batches():
                for event in _merge_text(batch):
                    if isinstance(event, Approval):
                        approval = event.request
                    await self._show(event)
        except ConfigError as error:  # bad input, an approval in the way, an unreachable model: one line
            self.notice(str(error), "error")
        except Exception as error:  # a bug below must not take the UI down; the conversation is saved
            self.notice(f"the agent failed: {type(error).__name__}: {error}", "error")
        finally:
            await self._close_reply()
            self.busy, self.activity = False, IDLE
        if approval is not None:
            self.ask(approval)

    async def _show(self, event: Event) -> None:
        log = self.query_one("#log", VerticalScroll)
        if isinstance(event, Text):
            if self._reply is None:
                self._reply = ReplyEntry()
                await log.mount(self._reply)
            await self._reply.write(event.text)
            return
        if isinstance(event, Reply):
            if self._reply is None:
                self._reply = ReplyEntry()
                await log.mount(self._reply)
            await self._reply.finish(event.text, event.sources, event.unverified)
            self._reply = None
            return
        await self._close_reply()
        if isinstance(event, Request):
            await log.mount(UserEntry(event.text))
        elif isinstance(event, ToolCall):
            self.activity = f"Running {event.name}…"
            await log.mount(ToolEntry.call(event.name, event.args))
        elif isinstance(event, ToolResult):
            self.activity = "Thinking…"
            await log.mount(ToolEntry.result(event.name, event.result, event.error))
        elif isinstance(event, Approval):
            self.activity = "Waiting for your decision"

    async def _close_reply(self) -> None:
        if self._reply is not None:
            await self._reply.close()
            self._reply = None

    def notice(self, text: str, kind: str = "info") -> Widget:
        entry = Notice(text, kind)
        self.query_one("#log", VerticalScroll).mount(entry)
        return entry

    # --- approvals ----------------------------------------------------------------------------------------------

    def ask(self, request: dict[str, Any]) -> None:
        self.pending = request
        self.activity = "Waiting for your decision: ctrl+g"
        self.refresh_bindings()
        thread_id = self.thread_id
        self.app.push_screen(ApprovalScreen(request), lambda decision: self._decided(thread_id, decision))

    def _decided(self, thread_id: str, decision: dict[str, Any] | None) -> None:
        if decision is None:
            self.notice("Decision put off: press ctrl+g to decide.")
            return
        if thread_id == self.thread_id:
            self.notice(describe_decision(self.pending, decision), "decision")
            self.pending = None
            self.refresh_bindings()
        agent = self.app.agent
        self.start(lambda: agent.resume(thread_id, decision), thread_id)

    def action_decide(self) -> None:
        if self.pending is not None and not isinstance(self.app.screen, ApprovalScreen):
            self.ask(self.pending)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "decide":
            return self.pending is not None
        return True


def _merge_text(batch: list[Event]) -> list[Event]:
    """Consecutive text chunks as one: a batch costs one Markdown update however finely the model streams."""
    merged: list[Event] = []
    for event in batch:
        if isinstance(event, Text) and merged and isinstance(merged[-1], Text):
            merged[-1] = Text(merged[-1].text + event.text)
        else:
            merged.append(event)
    return merged
