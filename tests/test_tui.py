"""`meshpilot chat` driven with Textual's Pilot: real agent (the offline planner), real runs and sweeps on CPU.

The flows: a request, its approval, the run appearing in the table and finishing, the report; a sweep started in
the background, left running on quitting, found and cancelled by the next session; rejections and edits;
history and completion; conversations resumed. Then the pieces the screens read (run directories, reports,
saved conversations, sweep requests) and the command line's refusals.
"""

from __future__ import annotations

import asyncio
import json
import os
import pty
import select
import subprocess
import sys
import threading
import time

import pytest
from support import REPO, write_experiment
from test_tui_fixtures import (
    POLL_S,
    copy_sweep,
    demo_repo,
    drive,
    format_drift,
    git_repo,
    handled,
    live_copy,
    on_top,
    settled,
    until,
)
from textual import work
from textual.app import App
from textual.widgets import Input, Markdown, OptionList, Static

from agent import jobs
from agent.approvals import Policy
from agent.cli import main
from agent.session import Agent, Reply, Text, ToolCall, ToolResult
from trainer.config import ConfigError
from trainer.results.rundir import RunDir, StepsTail
from tui.app import MeshpilotApp
from tui.commands import complete, slash_commands
from tui.conversation import Request, saved_events
from tui.reports import find_reports, read_report
from tui.runs import RunMonitor
from tui.screens.approval import ApprovalScreen
from tui.screens.quit import QuitScreen
from tui.screens.report import ReportScreen
from tui.screens.sweep import SweepScreen
from tui.screens.threads import ThreadsScreen
from tui.sweeps import BackgroundSweep, RunningJobs, background_sweeps, cancel_jobs, check_request, sweep_outcome
from tui.widgets.chat import Notice, ReplyEntry, UserEntry
from tui.widgets.prompt import PromptArea
from tui.widgets.runs import RunCharts


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return tmp_path_factory.getbasetemp()


def answered(app: MeshpilotApp, replies: int = 0) -> bool:
    """The agent's call ended and the chat shows more than `replies` replies."""
    return not app.agent_runs and not app.chat.busy and len(app.chat.query(ReplyEntry)) > replies


def last_reply(app: MeshpilotApp) -> str:
    replies = app.chat.query(ReplyEntry)
    return replies.last().markdown.source if replies else ""


async def shown(pilot) -> None:
    """Wait until the chat shows its conversation (read from the checkpointer when the app starts)."""
    await until(pilot, lambda: pilot.app.chat.shown == pilot.app.chat.thread_id, "the conversation")


async def send(pilot, text: str) -> None:
    await shown(pilot)
    prompt = pilot.app.chat.query_one(PromptArea)
    prompt.text = text
    await pilot.press("enter")


@pytest.mark.slow
def test_request_approved_run_appears_finishes_and_report_opens(tmp_path, base):
    repo = git_repo(tmp_path / "repo")
    copy_sweep(repo)  # the sweep the report is written from
    agent = Agent(repo, policy=Policy(approve_below=0.0))  # every launch asks
    app = MeshpilotApp(agent, "flow", poll_s=0.2)
    seen: set[str] = set()

    async def scenario(pilot) -> None:
        await send(pilot, "/run nproc=1 steps=2")
        await until(pilot, lambda: on_top(app, ApprovalScreen), "the approval dialog")
        summary = str(app.screen.query_one("#summary", Static).render())
        assert summary.startswith("launch a run of meshpilot.yaml:") and "device-hours" in summary
        await pilot.press("a")

        runs = lambda: [r for r in app.runs if r.key.startswith("runs/")]  # noqa: E731
        await until(pilot, lambda: runs(), "the run in the table")
        await pilot.press(*"still typing")  # the UI answers while the agent waits for the run
        prompt = app.chat.query_one(PromptArea)
        await until(pilot, lambda: prompt.text == "still typing", "the typed text")
        await pilot.press("ctrl+r")  # and the dashboard follows the run while it trains

        def replied() -> bool:
            seen.update(r.status for r in runs())
            return answered(app)

        await until(pilot, replied, "the run to finish and the reply", 400)
        # The table polls the run's record apart from the agent's reply: on a busy machine the reply can come first.
        await until(pilot, lambda: runs()[0].status != "running", "the run's end in the table")
        run = runs()[0]
        metrics = RunDir(repo / run.key).read_metrics()
        assert (run.status, run.step, run.steps) == ("ok", 2, 2)
        assert run.loss == pytest.approx(metrics["final_loss"]) and run.tokens_per_s == metrics["tokens_per_s"]
        charts = app.screen.query_one(RunCharts)
        await until(pilot, lambda: charts.run == run, "the charts of the finished run")
        assert [loss for _, loss in charts.run.losses] == [s["loss"] for s in RunDir(repo / run.key).read_steps()]
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is app.chat, "the chat again")
        assert f"Run {run.key} finished ok" in last_reply(app)
        assert app.chat.query(Notice).first().render().plain == "✓ approved launch_run"

        replies = len(app.chat.query(ReplyEntry))
        await send(pilot, "/report sweep=sweeps/tiny")
        await until(pilot, lambda: answered(app, replies), "the report", 300)
        assert "meshpilot/tiny-" in last_reply(app)  # the branch it was committed on
        await pilot.press("ctrl+o")
        await until(pilot, lambda: on_top(app, ReportScreen), "the report screen")
        preview = app.screen.query_one("#report", Markdown)
        await until(pilot, lambda: preview.source.startswith("# Layout sweep `tiny`"), "the report preview")
        listed = app.screen.query_one("#reports", OptionList).get_option_at_index(0).prompt
        assert "meshpilot/tiny-" in str(listed)  # read from the report's branch: the work tree has no report

    drive(app, scenario)
    agent.close()
    assert seen & {"queued", "starting", "running"}, seen  # the table showed it going on before it ended
    assert not (repo / "docs").exists()
    # The snapshots show recorded result files: they must still be what the trainer writes.
    (run,) = (repo / "runs").iterdir()
    assert not format_drift(run), f"{format_drift(run)}: record again with python tests/test_tui_fixtures.py"


def test_rejected_or_badly_edited_launches_start_nothing_and_the_agent_reads_why(tmp_path):
    write_experiment(tmp_path)
    agent = Agent(tmp_path, policy=Policy(approve_below=0.0))
    app = MeshpilotApp(agent, "no")

    async def scenario(pilot) -> None:
        await send(pilot, "/run steps=5")
        await until(pilot, lambda: on_top(app, ApprovalScreen), "the approval dialog")
        await pilot.press("r")
        reason = app.screen.query_one("#reason", Input)
        await until(pilot, lambda: reason.has_focus, "the reason field")
        await pilot.press(*"too long")
        await until(pilot, lambda: reason.value == "too long", "the typed reason")
        await pilot.press("enter")
        await until(pilot, lambda: answered(app), "the reply")
        assert last_reply(app) == "Not done: launch_run was rejected (too long)."
        assert "✗ rejected launch_run: too long" in [n.render().plain for n in app.chat.query(Notice)]

        await send(pilot, "/run steps=5")
        await until(pilot, lambda: on_top(app, ApprovalScreen), "the second approval dialog")
        await pilot.press("e")
        await until(pilot, lambda: app.screen.mode == "edit", "the arguments to edit")
        app.screen.query_one("#args").text = '{"steps": 5, "layout": "tp=3"}'
        await pilot.press("ctrl+s")
        await until(pilot, lambda: answered(app, 1), "the reply to the edit")
        assert '✎ approved launch_run with {"layout": "tp=3"}' in [n.render().plain for n in app.chat.query(Notice)]
        assert last_reply(app).startswith("launch_run failed: ") and "tp=3" in last_reply(app)

    drive(app, scenario)
    agent.close()
    assert not (tmp_path / "runs").exists()


def test_approval_dialog_edits_arguments_as_json():
    request = {"tool": "launch_run", "kind": "launch", "summary": "launch a run", "args": {"nproc": 2, "steps": 9}}
    decisions = []

    class Host(App):
        def on_mount(self) -> None:
            self.push_screen(ApprovalScreen(request), decisions.append)

    async def scenario(pilot) -> None:
        await until(pilot, lambda: on_top(pilot.app, ApprovalScreen), "the dialog")
        await pilot.press("e")
        await until(pilot, lambda: pilot.app.screen.mode == "edit", "the arguments to edit")
        arguments = pilot.app.screen.query_one("#args")
        arguments.text = '{"nproc": 2, "steps": '
        await pilot.press("ctrl+s")
        problem = pilot.app.screen.query_one("#problem", Static)
        assert problem.display and str(problem.render()).startswith("not JSON")
        arguments.text = '{"nproc": 2, "steps": 9}'
        await pilot.press("ctrl+s")
        assert str(problem.render()) == "nothing changed: edit the arguments, or approve"
        arguments.text = '{"nproc": 1, "steps": 9}'
        await pilot.press("ctrl+s")
        await until(pilot, lambda: decisions, "the decision")

    drive(Host(), scenario)
    assert decisions == [{"action": "edit", "args": {"nproc": 1}}]


def test_history_completion_copy_and_multi_line_prompt(tmp_path):
    write_experiment(tmp_path)
    agent = Agent(tmp_path)
    app = MeshpilotApp(agent, "keys")

    async def scenario(pilot) -> None:
        await shown(pilot)
        prompt = app.chat.query_one(PromptArea)
        await pilot.press("/", "h", "e")
        hints = app.chat.query_one("#hints", OptionList)
        offered = lambda: [hints.get_option_at_index(i).id for i in range(hints.option_count)]  # noqa: E731
        await until(pilot, lambda: prompt.text == "/he" and hints.display and offered() == ["help"], "the hints")
        await pilot.press("tab")
        await until(pilot, lambda: prompt.text == "/help " and not hints.display, "the completed command")
        await pilot.press("enter")
        await until(pilot, lambda: answered(app), "the help reply")
        assert last_reply(app).startswith("I am meshpilot's offline planner")
        paragraph = app.chat.query(ReplyEntry).last().markdown.query("MarkdownParagraph").first()
        await pilot.double_click(paragraph)  # selects the paragraph; ctrl+c copies it, the prompt holding no text
        await until(pilot, lambda: app.chat.selections, "the selection")
        await pilot.press("ctrl+c")
        copied = "I am meshpilot's offline planner: no network"
        await until(pilot, lambda: app.clipboard.startswith(copied), "the copied paragraph")
        assert prompt.has_focus
        await pilot.press(*"why", "ctrl+j", *"not")
        await until(pilot, lambda: prompt.text == "why\nnot", "two lines")
        prompt.text = ""
        await pilot.press("up")
        await until(pilot, lambda: prompt.text == "/help", "the earlier request")
        await pilot.press("down")
        await until(pilot, lambda: prompt.text == "", "the empty draft")

    drive(app, scenario)
    agent.close()


def test_conversations_are_resumed_from_the_checkpointer(tmp_path):
    write_experiment(tmp_path)
    agent = Agent(tmp_path)
    app = MeshpilotApp(agent, "first")

    async def scenario(pilot) -> None:
        await send(pilot, "/runs")
        await until(pilot, lambda: answered(app), "the first reply")
        await pilot.press("ctrl+n")
        await until(pilot, lambda: app.chat.thread_id != "first" and not app.chat.query(UserEntry), "a new one")
        await send(pilot, "/help")
        await until(pilot, lambda: answered(app), "the second reply")
        await pilot.press("ctrl+t")
        await until(pilot, lambda: on_top(app, ThreadsScreen), "the conversation list")
        table = app.screen.query_one("#threads")
        await until(pilot, lambda: table.row_count == 2, "the conversation list")
        assert table.get_row_at(1)[0].plain == "first" and table.get_row_at(1)[2].plain == "1"
        table.move_cursor(row=1)
        await pilot.press("enter")
        await until(pilot, lambda: app.chat.shown == "first", "the old one")  # read whole from the checkpointer
        assert [e.render().plain for e in app.chat.query(UserEntry)] == ["/runs"]
        assert last_reply(app) == "No runs yet under runs/."
        assert "conversation first" in app.sub_title

    drive(app, scenario)
    agent.close()


@pytest.mark.slow
def test_sweep_runs_in_the_background_is_left_running_then_cancelled_by_the_next_session(tmp_path):
    repo = git_repo(tmp_path / "repo")
    agent = Agent(repo)
    first = MeshpilotApp(agent, "sweeping", poll_s=0.2)
    trials = lambda app: [r for r in app.runs if r.key.startswith("sweeps/bg/trials/")]  # noqa: E731

    async def start(pilot) -> None:
        await pilot.press("ctrl+s")
        await until(pilot, lambda: on_top(first, SweepScreen), "the sweep launcher")
        form = first.screen
        form.query_one("#trials", Input).value = "0"
        form.query_one("#name", Input).value = "bg"
        assert await pilot.click("#start")
        problem = lambda: str(form.query_one("#problem", Static).render())  # noqa: E731
        await until(pilot, lambda: problem() == "a sweep needs at least one trial, got 0", "the refusal")
        form.query_one("#trials", Input).value = "1"
        start_button = form.query_one("#start")
        await until(pilot, lambda: not start_button.has_class("-active"), "the button to take clicks again")
        assert await pilot.click("#start")
        await until(pilot, lambda: not isinstance(first.screen, SweepScreen), "the sweep to start")
        await send(pilot, "/help")  # the chat stays free while the sweep runs
        await until(pilot, lambda: answered(first), "a reply during the sweep")
        await until(pilot, lambda: trials(first), "the sweep's first trial")
        await pilot.press("ctrl+q")
        await until(pilot, lambda: on_top(first, QuitScreen), "the quit dialog")
        assert "sweep sweeps/bg (1 trials" in str(first.screen.query_one("#jobs").render())
        await pilot.press("d")
        await until(pilot, lambda: first.return_value is not None, "the app to quit")

    try:
        drive(first, start)
        (sweep,) = background_sweeps(repo)
        assert sweep.alive()
        assert f"meshpilot: left running: sweep sweeps/bg (1 trials, pid {sweep.pid})" in first.return_value

        second = MeshpilotApp(agent, "sweeping", poll_s=0.2)

        async def cancel(pilot) -> None:
            await until(pilot, lambda: trials(second), "the trial, found again")
            await pilot.press("ctrl+q")
            await until(pilot, lambda: on_top(second, QuitScreen), "the quit dialog")
            await pilot.press("c")
            await until(pilot, lambda: second.return_value is not None, "the jobs to be cancelled")

        drive(second, cancel)
        assert "meshpilot: cancelled sweeps/bg" in second.return_value
        assert not sweep.alive()
        for trial in (repo / "sweeps" / "bg" / "trials").iterdir():
            job = jobs.read_job(trial)
            if job is not None:
                assert jobs.run_status(trial)["state"] in jobs.TERMINAL
                assert jobs.job_processes(job["token"]) == []
    finally:  # never leave a sweep training behind a failed test
        cancel_jobs(repo, RunningJobs(tuple(background_sweeps(repo)), ()))
        agent.close()


def test_streamed_reply_arrives_whole_while_the_prompt_stays_usable(tmp_path):
    write_experiment(tmp_path)
    agent = Agent(tmp_path)
    app = MeshpilotApp(agent, "stream")
    words = [f"word{i} " for i in range(3000)]

    def model_stream():
        yield from (Text(w) for w in words)
        yield Reply("".join(words).strip(), ["runs/x/metrics.json"], ["12.5"])

    async def scenario(pilot) -> None:
        await shown(pilot)
        app.chat.start(model_stream)
        await pilot.press(*"typing")
        await until(pilot, lambda: answered(app), "the stream to end")
        entry = app.chat.query(ReplyEntry).last()
        assert entry.markdown.source == "".join(words).strip()
        assert entry.query_one(".unverified", Static).render().plain == "unverified, in no tool result: 12.5"
        prompt = app.chat.query_one(PromptArea)
        await until(pilot, lambda: prompt.text == "typing", "the typed text")

    drive(app, scenario)
    agent.close()


def test_quitting_while_the_agent_waits_does_not_hang(tmp_path):
    write_experiment(tmp_path)
    agent = Agent(tmp_path)
    app = MeshpilotApp(agent, "waiting")
    release = threading.Event()

    def blocked_call():  # like wait_run on a long training run: it ends only when released, after the app
        release.wait()
        yield Reply("done")

    async def scenario(pilot) -> None:
        await shown(pilot)
        app.chat.start(blocked_call)
        await until(pilot, lambda: app.chat.busy, "the call to start")
        await pilot.press("ctrl+q")
        await until(pilot, lambda: on_top(app, QuitScreen), "the quit dialog")
        await pilot.press("d")
        await until(pilot, lambda: app.return_value is not None, "the app to quit")

    drive(app, scenario)  # returns although the call still blocks (an app that waited for it would hang here)
    assert not app.agent_runs["waiting"].finished
    assert app.return_value == f"meshpilot: resume with: meshpilot chat --repo {agent.repo} --thread waiting"
    release.set()
    agent.close()


def test_settled_waits_for_a_worker_however_long_it_takes():
    """What the snapshots rely on: `settled` returns only once the app's work is done, not when it looks idle."""
    release = threading.Event()

    class Slow(App):
        def compose(self):
            yield Static("before", id="line")

        def on_mount(self) -> None:
            self.load()

        @work(thread=True)
        def load(self) -> None:
            release.wait()  # like a slow read on a loaded machine
            self.call_from_thread(self.query_one("#line", Static).update, "after")

    async def scenario(pilot) -> None:
        settling = asyncio.ensure_future(settled(pilot))
        try:
            for _ in range(5):  # rounds in which the screen does not change: an idle guess would stop here
                await handled(pilot.app)
                await asyncio.sleep(POLL_S)
            assert not settling.done()
        finally:
            release.set()  # else the worker's thread would keep the test from ending
        await settling
        assert str(pilot.app.query_one("#line", Static).render()) == "after"

    drive(Slow(), scenario)


# --- what the screens read ----------------------------------------------------------------------------------------


def test_steps_tail_reads_complete_lines_once_and_starts_over_on_a_rewrite(tmp_path):
    path = tmp_path / "steps.jsonl"
    tail = StepsTail(path)
    rest = {"lr": 1e-3, "tokens": 512, "target_tokens": 500, "step_s": 0.1, "data_wait_s": 0.0, "grad_norm": 1.0}

    def line(step: int, loss: float) -> str:  # a whole steps.jsonl record (trainer.results.schemas.StepRecord)
        return json.dumps({"step": step, "loss": loss, **rest}) + "\n"

    assert tail.read() == ([], False)
    path.write_text(line(1, 2.0) + line(2, 1.5)[:15])  # the second line being written: '{"step": 2, "lo'
    assert tail.read() == ([{"step": 1, "loss": 2.0, **rest}], True)
    with path.open("a") as f:
        f.write(line(2, 1.5)[15:])
    assert tail.read() == ([{"step": 2, "loss": 1.5, **rest}], False)
    assert tail.read() == ([], False)
    path.write_text(line(1, 9.0))  # a resumed run rewrote the file, shorter
    assert tail.read() == ([{"step": 1, "loss": 9.0, **rest}], True)


def test_monitor_shows_finished_runs_trials_and_a_run_going_on(tmp_path):
    repo = git_repo(tmp_path / "repo")
    sweep = copy_sweep(repo, "s")
    trial = next((sweep / "trials").iterdir())
    sleeper = live_copy(trial, repo / "runs" / "live", steps=1)
    try:
        monitor = RunMonitor(repo)
        live, finished = monitor.scan()
        assert (live.key, live.status, live.step, live.steps, live.layout) == (
            "runs/live",
            "running",
            1,
            3,
            "one process",
        )
        assert live.tokens_per_s is None and live.peak_mem_bytes is None  # the first step is warm-up
        losses = [(s["step"], s["loss"]) for s in RunDir(trial).read_steps()]
        assert live.losses == tuple(losses[:1]) and live.loss == losses[0][1]
        metrics = RunDir(trial).read_metrics()
        assert (finished.key, finished.name, finished.status) == (
            f"sweeps/s/trials/{trial.name}",
            f"s/{trial.name}",
            "ok",
        )
        assert finished.losses == tuple(losses) and finished.loss == metrics["final_loss"]
        assert finished.tokens_per_s == metrics["tokens_per_s"] and finished.peak_mem_bytes == max(
            metrics["peak_mem_bytes"]
        )

        with (repo / "runs" / "live" / "steps.jsonl").open("a") as f:  # the run trains on
            f.write(RunDir(trial).steps.read_text().splitlines(keepends=True)[1])
        live, _ = monitor.scan()
        assert live.step == 2 and live.losses == tuple(losses[:2])
        step = RunDir(trial).read_steps()[1]
        assert live.tokens_per_s == pytest.approx(step["tokens"] / step["step_s"])
        assert live.throughput[-1] == (2, pytest.approx(step["tokens"] / step["step_s"]))
    finally:
        sleeper.kill()
        sleeper.wait()
    live, _ = RunMonitor(repo).scan()
    assert live.status == "killed" and "supervisor" in live.cause  # its supervisor died without a verdict


def test_saved_conversation_reads_as_it_was_shown_live(tmp_path):
    write_experiment(tmp_path)
    agent = Agent(tmp_path)
    live = [e for e in agent.send("t", "/runs") if not isinstance(e, Text)]
    saved = list(saved_events(agent.messages("t")))
    agent.close()
    assert saved[0] == Request("/runs")
    assert [type(e) for e in saved[1:]] == [ToolCall, ToolResult, Reply] == [type(e) for e in live]
    assert saved[1:] == live


def test_slash_commands_are_the_planners_and_complete_by_prefix():
    from agent.offline import HANDLERS

    assert {c.name for c in slash_commands()} == set(HANDLERS)
    assert all(c.usage.startswith(f"/{c.name}") and c.help for c in slash_commands())
    assert [c.name for c in complete("/re")] == ["read", "report", "results", "resume"]
    assert complete("/run steps=2") == [] and complete("run") == [] and len(complete("/")) == len(HANDLERS)


def test_sweep_requests_are_checked_before_anything_starts(tmp_path):
    write_experiment(tmp_path)
    (tmp_path / "sweeps" / "taken").mkdir(parents=True)
    (tmp_path / "broken.yaml").write_text("train: {stepz: 3}\n")
    cases = {
        ("", "a", "1"): "name the experiment file",
        ("missing.yaml", "a", "1"): "no experiment file missing.yaml",
        ("../meshpilot.yaml", "a", "1"): "lies outside the repository",
        ("broken.yaml", "a", "1"): "stepz",
        ("meshpilot.yaml", "a b", "1"): "sweep name 'a b'",
        ("meshpilot.yaml", "taken", "1"): "sweeps/taken exists already",
        ("meshpilot.yaml", "a", "two"): "trials must be a whole number",
        ("meshpilot.yaml", "a", "0"): "at least one trial",
    }
    for (experiment, name, trials), message in cases.items():
        with pytest.raises(ConfigError, match=message):
            check_request(tmp_path, experiment, name, trials)
    request = check_request(tmp_path, "meshpilot.yaml", " a ", " 3 ")
    assert (request.experiment, request.name, request.trials) == (tmp_path / "meshpilot.yaml", "a", 3)
    assert not (tmp_path / "sweeps" / "a").exists()


def test_a_finished_sweep_is_told_with_its_winner_and_a_failed_one_with_its_error(tmp_path):
    repo = git_repo(tmp_path / "repo")
    copy_sweep(repo, "done")
    winner = json.loads((repo / "sweeps" / "done" / "summary.json").read_text())["winner"]
    finished = BackgroundSweep("done", "sweeps/done", "meshpilot.yaml", 1, pid=0, pid_start=None, log="done.log")
    assert sweep_outcome(repo, finished) == (
        f"sweep sweeps/done finished: winner {winner}. Write its report with /report sweep=sweeps/done"
    )
    (repo / "failed.log").write_text("starting\nmeshpilot: error: search.objective: 'mfu' is not one of ...\n")
    failed = BackgroundSweep("failed", "sweeps/failed", "meshpilot.yaml", 1, pid=0, pid_start=None, log="failed.log")
    assert sweep_outcome(repo, failed) == (
        "sweep sweeps/failed stopped: meshpilot: error: search.objective: 'mfu' is not one of ... (log: failed.log)"
    )


def test_reports_are_found_on_report_branches_and_in_the_work_tree(base):
    repo = demo_repo(base)
    merged = repo / "docs" / "experiments" / "2024-12-01-old" / "README.md"
    merged.parent.mkdir(parents=True)
    merged.write_text("# An older report\n")
    try:
        found = find_reports(repo)
        assert [(r.name, r.branch) for r in found] == [
            ("2025-01-01-tiny", "meshpilot/tiny-2025-01-01"),
            ("2024-12-01-old", None),
        ]
        assert read_report(repo, found[0]).startswith("# Layout sweep `tiny`, 2025-01-01")
        assert read_report(repo, found[1]) == "# An older report\n"
    finally:
        merged.unlink()
        merged.parent.rmdir()


# --- the command line ---------------------------------------------------------------------------------------------


def test_chat_refuses_bad_input_in_one_line(tmp_path, capsys):
    for args, message in (
        (["--repo", str(tmp_path / "missing")], "is not a directory"),
        (["--repo", str(tmp_path), "--thread", "no spaces"], "--thread 'no spaces'"),
        (["--repo", str(tmp_path), "--llm-base-url", "ftp://x"], "must start with http"),
        (["--repo", str(tmp_path)], "needs a terminal"),  # pytest captures stdout: no terminal
    ):
        assert main(["chat", *args]) == 2
        error = capsys.readouterr().err
        assert error.startswith("meshpilot: error: ") and message in error and error.count("\n") == 1
    assert not (tmp_path / ".meshpilot").exists()  # nothing was written


def test_chat_starts_in_a_terminal_and_quits_on_ctrl_q(tmp_path):
    """`meshpilot chat` as a user starts it: a terminal (a pty), the screen drawn, ctrl+q, exit code 0."""
    write_experiment(tmp_path)
    terminal, side = pty.openpty()
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "100", "LINES": "30"}
    command = [sys.executable, "-m", "agent.cli", "chat", "--repo", str(tmp_path), "--thread", "tty"]
    chat = subprocess.Popen(command, cwd=REPO, env=env, stdin=side, stdout=side, stderr=side, start_new_session=True)
    os.close(side)
    screen = b""
    try:
        deadline = time.monotonic() + 300  # a hang guard: generous, a loaded machine is slow
        while b"conversation tty" not in screen:
            assert time.monotonic() < deadline and chat.poll() is None, screen[-2000:]
            if select.select([terminal], [], [], 0.5)[0]:
                screen += os.read(terminal, 65536)
        os.write(terminal, b"\x11")  # ctrl+q: nothing runs, so it quits without asking
        assert chat.wait(timeout=120) == 0
    finally:
        if chat.poll() is None:
            chat.kill()
        os.close(terminal)
