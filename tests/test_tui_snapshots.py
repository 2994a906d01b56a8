"""SVG snapshots of every screen of `meshpilot chat`, on the frozen demo repository (see test_tui_fixtures).

Each test waits on the app's state (`until`) for what its screen shows, then until the app has settled
(`settled`: nothing left to do, the screen no longer changing), never on time: on a loaded machine Textual's own
idle guess fires too early. The app reads the runs once (no polling timer), so nothing redraws mid-capture.

After an intended change: `pytest tests/test_tui_snapshots.py --snapshot-update`, then look at the SVGs in
tests/__snapshots__/test_tui_snapshots/ before keeping them.
"""

from __future__ import annotations

import difflib
import html
import pickle
import re
import shutil

import pytest
from pytest_textual_snapshot import node_to_report_path
from test_tui_fixtures import MOE_FIXTURE, copy_sweep, data_dir, demo_repo, git_repo, on_top, settled, until
from textual.pilot import Pilot
from textual.widgets import DataTable, Markdown, OptionList, Static

from agent.session import Agent
from trainer.results.rundir import RunDir
from tui.app import MeshpilotApp
from tui.screens.approval import ApprovalScreen
from tui.screens.quit import QuitScreen
from tui.widgets.chat import ReplyEntry
from tui.widgets.prompt import PromptArea
from tui.widgets.runs import RunCharts, RunsTable

SIZE = (120, 36)


@pytest.fixture
def snap_compare(snap_compare, request):
    """The plugin's comparison, which on a mismatch fails with the screen's text, expected against actual: a CI
    log keeps no HTML report."""

    def compare(app: MeshpilotApp, **kwargs) -> bool:
        __tracebackhide__ = True
        if snap_compare(app, **kwargs):
            return True
        _, expected, actual, *_ = pickle.loads(node_to_report_path(request.node).read_bytes())
        diff = difflib.unified_diff(screen_lines(expected), screen_lines(actual), "snapshot", "now", lineterm="")
        pytest.fail("the screen differs from its snapshot:\n" + "\n".join(diff))

    return compare


def screen_lines(svg: str) -> list[str]:
    """The text of each line of a terminal screenshot (SVG)."""
    lines: dict[int, str] = {}
    for line, text in re.findall(r'<text [^>]*clip-path="url\(#terminal(?:-\d+)?-line-(\d+)\)">([^<]*)</text>', svg):
        lines[int(line)] = lines.get(int(line), "") + html.unescape(text)
    return [lines.get(i, "") for i in range(max(lines, default=-1) + 1)]


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """This module's own demo repository and store: test_tui.py's apps change theirs (runs, approvals)."""
    return tmp_path_factory.mktemp("snapshots")


@pytest.fixture(scope="module")
def demo(base):
    return demo_repo(base)


@pytest.fixture
def make_app(demo, base, monkeypatch):
    """An app on the demo repository; the leaderboard's store and an empty cache (no calibration) around it."""
    monkeypatch.setenv("MESHPILOT_DATA", str(data_dir(base)))
    monkeypatch.setenv("MESHPILOT_CACHE", str(base / "tui-empty-cache"))
    agents = []

    def make(thread: str = "demo") -> MeshpilotApp:
        agents.append(Agent(demo))
        return MeshpilotApp(agents[-1], thread, poll_s=None)

    yield make
    for agent in agents:
        agent.close()


def chat_ready(app: MeshpilotApp, replies: int) -> bool:
    chat = app.chat
    return chat.shown == chat.thread_id and len(chat.query(ReplyEntry)) >= replies and len(app.runs) == 3


def hints(app: MeshpilotApp) -> list[str]:
    """The commands the completion list offers, if it is shown."""
    listing = app.chat.query_one("#hints", OptionList)
    return [listing.get_option_at_index(i).id for i in range(listing.option_count)] if listing.display else []


def test_chat(snap_compare, make_app):
    async def run_before(pilot: Pilot) -> None:
        await until(pilot, lambda: chat_ready(pilot.app, 2), "the conversation and the runs")
        await settled(pilot)

    assert snap_compare(make_app("demo"), terminal_size=SIZE, run_before=run_before)


def test_chat_command_completion(snap_compare, make_app):
    async def run_before(pilot: Pilot) -> None:
        await until(pilot, lambda: chat_ready(pilot.app, 2), "the conversation")
        await pilot.press("/", "r")
        prompt = pilot.app.chat.query_one(PromptArea)
        offered = ["read", "report", "results", "resume", "run", "runs"]
        await until(pilot, lambda: prompt.text == "/r" and hints(pilot.app) == offered, "the hints for /r")
        await settled(pilot)

    assert snap_compare(make_app("demo"), terminal_size=SIZE, run_before=run_before)


def test_approval(snap_compare, make_app):
    async def run_before(pilot: Pilot) -> None:
        dialog = lambda: on_top(pilot.app, ApprovalScreen)  # noqa: E731
        await until(pilot, lambda: dialog() and len(pilot.app.runs) == 3, "the approval dialog over the runs")
        await settled(pilot)

    assert snap_compare(make_app("approve"), terminal_size=SIZE, run_before=run_before)


def test_runs(snap_compare, make_app):
    async def run_before(pilot: Pilot) -> None:
        await until(pilot, lambda: len(pilot.app.runs) == 3, "the runs")
        await pilot.press("ctrl+r")
        await until(pilot, lambda: pilot.app.screen.query_one(RunsTable).row_count == 3, "the runs table")
        await settled(pilot)

    assert snap_compare(make_app(), terminal_size=SIZE, run_before=run_before)


def test_runs_memory(snap_compare, make_app):
    """A finished run under the cursor: its memory through the step it measured, beside the prediction."""

    async def run_before(pilot: Pilot) -> None:
        await until(pilot, lambda: len(pilot.app.runs) == 3, "the runs")
        await pilot.press("ctrl+r")
        await until(pilot, lambda: pilot.app.screen.query_one(RunsTable).row_count == 3, "the runs table")
        await pilot.press("down")
        charts = pilot.app.screen.query_one(RunCharts)
        await until(pilot, lambda: charts.run is not None and charts.run.name == "tiny-ok", "the finished run's charts")
        assert not charts.query_one("#router-chart").display  # a dense run: no router figures
        await settled(pilot)

    assert snap_compare(make_app(), terminal_size=SIZE, run_before=run_before)


@pytest.fixture(scope="module")
def moe_repo(base):
    """A repository with one finished mixture-of-experts run: the recorded tiny Mixtral trial."""
    repo = git_repo(base / "moe-repo")
    trial = next((copy_sweep(repo, fixture=MOE_FIXTURE) / "trials").iterdir())
    shutil.copytree(trial, repo / "runs" / "tiny-moe", ignore=shutil.ignore_patterns("trial.json"))
    shutil.rmtree(repo / "sweeps")
    return repo


def test_runs_router(snap_compare, moe_repo, base, monkeypatch):
    """A mixture-of-experts run under the cursor: its routers' aux loss and expert load by step beside the charts."""
    monkeypatch.setenv("MESHPILOT_DATA", str(data_dir(base)))
    monkeypatch.setenv("MESHPILOT_CACHE", str(base / "tui-empty-cache"))

    async def run_before(pilot: Pilot) -> None:
        await until(pilot, lambda: len(pilot.app.runs) == 1, "the run")
        await pilot.press("ctrl+r")
        charts = pilot.app.screen.query_one(RunCharts)
        await until(pilot, lambda: charts.run is not None and charts.run.aux_losses, "the run's router figures")
        steps = RunDir(moe_repo / "runs" / "tiny-moe").read_steps()
        assert charts.run.aux_losses == tuple((s["step"], s["aux_loss"]) for s in steps)
        assert charts.run.expert_load == tuple((s["step"], s["expert_load_max_over_mean"]) for s in steps)
        assert charts.query_one("#router-chart").display
        await settled(pilot)

    agent = Agent(moe_repo)
    try:
        assert snap_compare(MeshpilotApp(agent, "demo", poll_s=None), terminal_size=SIZE, run_before=run_before)
    finally:
        agent.close()


def test_report(snap_compare, make_app):
    async def run_before(pilot: Pilot) -> None:
        await pilot.press("ctrl+o")
        await until(
            pilot,
            lambda: "Layout sweep" in pilot.app.screen.query_one("#report", Markdown).source,
            "the report",
        )
        await settled(pilot)

    assert snap_compare(make_app(), terminal_size=SIZE, run_before=run_before)


def test_leaderboard(snap_compare, make_app):
    async def run_before(pilot: Pilot) -> None:
        await pilot.press("ctrl+l")
        await until(pilot, lambda: pilot.app.screen.query_one(DataTable).row_count == 2, "the leaderboard")
        await settled(pilot)  # among others, the table sizes its columns to the rows once they are in

    assert snap_compare(make_app(), terminal_size=SIZE, run_before=run_before)


def test_sweep_launcher(snap_compare, make_app):
    async def run_before(pilot: Pilot) -> None:
        await until(pilot, lambda: chat_ready(pilot.app, 2), "the conversation")
        await pilot.press("ctrl+s")
        cost = lambda: str(pilot.app.screen.query_one("#cost", Static).render())  # noqa: E731
        await until(pilot, lambda: cost().startswith("Predicted cost"), "the predicted cost")
        await settled(pilot)

    assert snap_compare(make_app(), terminal_size=SIZE, run_before=run_before)


def test_conversations(snap_compare, make_app):
    async def run_before(pilot: Pilot) -> None:
        await pilot.press("ctrl+t")
        await until(pilot, lambda: pilot.app.screen.query_one(DataTable).row_count == 2, "the conversations")
        await settled(pilot)

    assert snap_compare(make_app(), terminal_size=SIZE, run_before=run_before)


def test_help(snap_compare, make_app):
    async def run_before(pilot: Pilot) -> None:
        await pilot.press("f1")
        await until(pilot, lambda: pilot.app.screen.query(Markdown), "the help")
        await settled(pilot)

    assert snap_compare(make_app(), terminal_size=SIZE, run_before=run_before)


def test_quit_with_a_run_going_on(snap_compare, make_app):
    async def run_before(pilot: Pilot) -> None:
        await until(pilot, lambda: chat_ready(pilot.app, 2), "the conversation and the runs")
        await pilot.press("ctrl+q")
        await until(pilot, lambda: on_top(pilot.app, QuitScreen), "the quit dialog")
        await settled(pilot, waiting=("quit",))  # the quit worker waits for the dialog's answer

    assert snap_compare(make_app(), terminal_size=SIZE, run_before=run_before)
