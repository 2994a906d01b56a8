"""`meshpilot chat`: the Textual app.

The app holds what outlives a screen: the Agent, the agent calls under way (one per conversation, see
tui.agent_run), the runs read from disk by a polling worker (`runs`, which screens watch), and the sweeps this
session started. Screens live in tui/screens, widgets in tui/widgets, styles in tui/styles.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import ClassVar

from textual import work
from textual.app import App
from textual.binding import Binding, BindingType
from textual.reactive import reactive
from textual.screen import ModalScreen, Screen
from textual.worker import Worker, WorkerState

from agent.session import Agent
from tui.agent_run import AgentRun
from tui.runs import RunInfo, RunMonitor
from tui.screens.chat import ChatScreen
from tui.screens.help import HelpScreen
from tui.screens.leaderboard import LeaderboardScreen
from tui.screens.quit import QuitScreen
from tui.screens.report import ReportScreen
from tui.screens.runs import RunsScreen
from tui.screens.sweep import SweepScreen
from tui.screens.threads import ThreadsScreen
from tui.sweeps import BackgroundSweep, cancel_jobs, running_jobs, sweep_outcome

STYLES = Path(__file__).parent / "styles"
POLL_S = 1.0
SCREENS_BY_KEY = {
    "runs": RunsScreen,
    "report": ReportScreen,
    "leaderboard": LeaderboardScreen,
    "threads": ThreadsScreen,
    "help": HelpScreen,
}


def new_thread_id() -> str:
    return uuid.uuid4().hex[:12]


class MeshpilotApp(App[str | None]):
    """Exits with a line for the terminal (what was cancelled or left running), or None."""

    TITLE = "meshpilot"
    CSS_PATH: ClassVar[list[str | Path]] = [
        STYLES / "app.tcss",
        STYLES / "chat.tcss",
        STYLES / "screens.tcss",
        STYLES / "dialogs.tcss",
    ]
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+r", "open('runs')", "Runs", priority=True),
        Binding("ctrl+s", "sweep", "Sweep", priority=True),
        Binding("ctrl+o", "open('report')", "Report", priority=True),
        Binding("ctrl+l", "open('leaderboard')", "Leaderboard", priority=True),
        Binding("ctrl+t", "open('threads')", "Conversations", priority=True),
        Binding("ctrl+n", "new_thread", "New", priority=True),
        Binding("f1", "open('help')", "Help", priority=True),
        Binding("ctrl+q", "quit", "Quit", priority=True),
    ]

    runs: reactive[tuple[RunInfo, ...]] = reactive(tuple)

    def __init__(
        self,
        agent: Agent,
        thread_id: str | None = None,
        *,
        llm_description: str = "the offline planner",
        poll_s: float | None = POLL_S,
    ):
        """`poll_s`: how often the run directories are read again; None reads them once, at start, for a
        repository that nothing trains in (the snapshot tests': a timer redrawing mid-capture would race them)."""
        super().__init__()
        self.agent = agent
        self.repo: Path = agent.repo
        self.llm_description = llm_description
        self.poll_s = poll_s
        self.chat = ChatScreen(thread_id or new_thread_id())  # the screen at the bottom of the stack, always
        self.monitor = RunMonitor(self.repo)
        self.agent_runs: dict[str, AgentRun] = {}
        self.sweeps_started: list[BackgroundSweep] = []  # told about in the chat when they end
        self._scanning = False

    def get_default_screen(self) -> Screen:
        return self.chat

    def current_thread(self) -> str:
        return self.chat.thread_id

    def describe_session(self, thread_id: str) -> str:
        return f"{self.repo.name} · conversation {thread_id} · {self.llm_description}"

    def on_mount(self) -> None:
        self.poll()
        if self.poll_s is not None:
            self.set_interval(self.poll_s, self.poll)

    # --- runs -----------------------------------------------------------------------------------------------------

    def poll(self) -> None:
        """Read the run directories in a worker thread; one read at a time, however slow the disk."""
        if self._scanning:
            return
        self._scanning = True
        self.run_worker(self._scan(tuple(self.sweeps_started)), group="runs", exit_on_error=False)

    async def _scan(self, sweeps: tuple[BackgroundSweep, ...]) -> None:
        def read() -> tuple[tuple[RunInfo, ...], list[tuple[BackgroundSweep, str]]]:
            ended = [(s, sweep_outcome(self.repo, s)) for s in sweeps if not s.alive()]
            return self.monitor.scan(), ended

        try:
            runs, ended = await asyncio.to_thread(read)
        finally:
            self._scanning = False
        self.runs = runs
        for sweep, outcome in ended:
            self.sweeps_started.remove(sweep)
            self.chat.notice(outcome, "info")

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker.group == "runs" and event.state == WorkerState.ERROR:
            self.notify(f"Reading the runs failed: {event.worker.error}", severity="error")

    # --- screens --------------------------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # Over a dialog, the screen keys are not ours: answer the dialog first (and its own keys, such as ctrl+s in
        # the approval's editor, get through).
        return not (action in ("open", "sweep", "new_thread") and isinstance(self.screen, ModalScreen))

    async def action_open(self, name: str) -> None:
        """Show a screen over the chat; its own key closes it again."""
        kind = SCREENS_BY_KEY[name]
        if isinstance(self.screen, kind):
            await self.pop_screen()
            return
        while not isinstance(self.screen, ChatScreen):
            await self.pop_screen()
        if kind is ThreadsScreen:
            await self.push_screen(ThreadsScreen(), self._thread_chosen)
        else:
            await self.push_screen(kind())

    def _thread_chosen(self, thread_id: str | None) -> None:
        if thread_id is not None:
            self.chat.open_thread(thread_id or new_thread_id())

    async def action_new_thread(self) -> None:
        while not isinstance(self.screen, ChatScreen):
            await self.pop_screen()
        self.chat.open_thread(new_thread_id())

    async def action_sweep(self) -> None:
        await self.push_screen(SweepScreen(), self._sweep_started)

    def _sweep_started(self, sweep: BackgroundSweep | None) -> None:
        if sweep is None:
            return
        self.sweeps_started.append(sweep)
        self.chat.notice(
            f"Started sweep {sweep.out} ({sweep.trials} trials of {sweep.experiment}) in the background; its trials "
            f"appear under Runs (ctrl+r). Output: {sweep.log}"
        )
        self.poll()

    def agent_run_finished(self, run: AgentRun) -> None:
        if self.agent_runs.get(run.thread_id) is run:
            del self.agent_runs[run.thread_id]
        if run.thread_id != self.current_thread() and run.error is None:
            self.notify(f"Conversation {run.thread_id} has news: open it with ctrl+t.")

    # --- quitting -------------------------------------------------------------------------------------------------

    @work(exclusive=True, group="quit")
    async def action_quit(self) -> None:
        if isinstance(self.screen, QuitScreen):
            return
        # A fresh look, not the last poll's: a run started a moment ago must not be left behind unasked.
        running = await asyncio.to_thread(lambda: running_jobs(self.repo, RunMonitor(self.repo).scan()))
        busy = sorted(t for t, run in self.agent_runs.items() if not run.finished)
        if not running and not busy:
            self.exit()
            return
        choice = await self.push_screen_wait(QuitScreen(running.describe(), busy))
        if choice == "cancel":
            self.notify("Cancelling the jobs…")
            stopped = await asyncio.to_thread(cancel_jobs, self.repo, running)
            self.exit(f"meshpilot: cancelled {', '.join(stopped) or 'nothing (the jobs had ended)'}")
        elif choice == "detach":
            lines = [f"meshpilot: left running: {job}" for job in running.describe()]
            lines += [f"meshpilot: resume with: meshpilot chat --repo {self.repo} --thread {t}" for t in busy]
            self.exit("\n".join(lines) or None)
