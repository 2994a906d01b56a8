"""What the terminal UI's tests (tests/test_tui*.py) work on, and how they wait on the app.

The screens show a recorded sweep, tests/fixtures/tui-sweep: the result files of one real single-process trial of
the tiny experiment, with the figures that depend on the machine or its load (step times, tokens/s, peak memory)
replaced by fixed ones. Nothing is trained to show them, so every snapshot shows the same figures on every
machine, however busy. After a change of what the trainer or the sweep writes, record it again:
`python tests/test_tui_fixtures.py` (test_tui's full flow fails when the recorded files fall behind).

The demo repository (`demo_repo`) is what the snapshot tests show: that sweep with its report on a branch, a
finished run, a run still going on, two conversations and a leaderboard.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import git
import yaml
from support import write_experiment
from textual.app import App
from textual.pilot import Pilot

from agent.approvals import Policy
from agent.jobs import start_time
from agent.session import Agent
from trainer.host.cache import cache_root
from trainer.results.rundir import RunDir

FIXTURE = Path(__file__).parent / "fixtures" / "tui-sweep"  # meshpilot.yaml and the sweep run with it, sweep/
EXPERIMENT = {
    "train": {"steps": 3, "timing_warmup_steps": 1},
    "search": {"trials": 1, "trial_steps": 3},
}
# The same, on a tiny Mixtral: its steps carry the router's figures (aux loss, expert load) that the run view and
# the report show; not part of the demo repository, so every other screen stays as it was.
MOE_FIXTURE = FIXTURE.with_name("tui-moe-sweep")
TINY_MIXTRAL = {
    "model_type": "mixtral",
    "vocab_size": 512,
    "hidden_size": 32,
    "intermediate_size": 16,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 128,
    "num_local_experts": 4,
    "num_experts_per_tok": 2,
}
MOE_EXPERIMENT = {**EXPERIMENT, "model": {"config": TINY_MIXTRAL}}
RECORDED = ("sweep.json", "trials/*/trial.json", "trials/*/job.json", "trials/*/launch.json", "trials/*/config.yaml")
RECORDED += ("trials/*/metrics.json", "trials/*/memory.json", "trials/*/steps.jsonl")
FROZEN_STEP_S = 0.5
FROZEN_PEAK_BYTES = 300 * 2**20
REPORT_DATE = "2025-01-01"
GIT_ENV = {"GIT_AUTHOR_NAME": "test", "GIT_AUTHOR_EMAIL": "test@example.com"}
GIT_ENV |= {"GIT_COMMITTER_NAME": "test", "GIT_COMMITTER_EMAIL": "test@example.com"}


def git_repo(path: Path) -> Path:
    """An experiment repository: the recorded sweep's experiment, committed."""
    path.mkdir(parents=True)
    shutil.copy(FIXTURE / "meshpilot.yaml", path / "meshpilot.yaml")
    (path / ".gitignore").write_text("runs/\nsweeps/\n.meshpilot/\n")
    repository = git.Repo.init(path, initial_branch="main")
    repository.index.add(["meshpilot.yaml", ".gitignore"])
    with repository.git.custom_environment(**GIT_ENV):
        repository.git.commit("-m", "experiment")
    return path


def copy_sweep(repo: Path, name: str = "tiny", fixture: Path = FIXTURE) -> Path:
    """The recorded sweep in repo/sweeps/NAME, its experiment the repository's own; its summary is rebuilt."""
    from agent.sweep.summary import summarize

    out = repo / "sweeps" / name
    _copy_recorded(fixture / "sweep", out, {"@SWEEP@": str(out), "@REPO@": str(repo), "@CACHE@": str(cache_root())})
    summarize(out)
    return out


def _copy_recorded(source: Path, target: Path, places: dict[str, str]) -> None:
    """The RECORDED files of the sweep in `source` into `target`, with the texts in `places` replaced."""
    for pattern in RECORDED:
        for path in sorted(source.glob(pattern)):
            text = path.read_text()
            for old, new in places.items():
                text = text.replace(old, new)
            copy = target / path.relative_to(source)
            copy.parent.mkdir(parents=True, exist_ok=True)
            copy.write_text(text)


def record(fixture: Path = FIXTURE, changes: dict = EXPERIMENT) -> None:
    """Record the fixture again from a real sweep of one single-process trial, frozen."""
    from agent.sweep import run_sweep

    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        experiment = write_experiment(root, changes)
        sweep = root / "sweep"
        space = {"train.micro_batch": [2], "train.activation_checkpointing": [False]}
        summary = run_sweep(experiment, sweep, trials=1, devices=1, space=space)
        assert summary["winner"], summary
        for trial in sorted((sweep / "trials").iterdir()):
            freeze(trial)
        shutil.rmtree(fixture, ignore_errors=True)
        fixture.mkdir(parents=True)
        shutil.copy(experiment, fixture / "meshpilot.yaml")
        # The sweep first: it lies inside the root.
        places = {str(sweep): "@SWEEP@", str(root): "@REPO@", str(cache_root()): "@CACHE@", sys.executable: "python"}
        _copy_recorded(sweep, fixture / "sweep", places)


def freeze(run: Path) -> None:
    """Fixed step times, tokens/s and peak memory in place of the measured ones."""
    directory = RunDir(run)
    steps = [{**step, "step_s": FROZEN_STEP_S} for step in directory.read_steps()]
    directory.steps.write_text("".join(json.dumps(step) + "\n" for step in steps))
    metrics = directory.read_metrics()
    if metrics is not None:
        timed = steps[-metrics["timed_steps"] :]
        tokens_per_s = sum(s["tokens"] for s in timed) / (len(timed) * FROZEN_STEP_S)
        world = metrics["world_size"]
        metrics |= {"tokens_per_s": tokens_per_s, "tokens_per_s_per_device": tokens_per_s / world}
        metrics |= {"peak_mem_bytes": [FROZEN_PEAK_BYTES] * world}
        directory.metrics.write_text(json.dumps(metrics, indent=1))
    if directory.memory.is_file():
        memory = json.loads(directory.memory.read_text())
        memory["measured"] = [{**rank, "peak": FROZEN_PEAK_BYTES} for rank in memory["measured"]]
        directory.memory.write_text(json.dumps(memory, indent=1))


def format_drift(run: Path) -> list[str]:
    """The keys in which the recorded trial's result files and those of `run`, trained now, differ."""
    recorded = next((FIXTURE / "sweep" / "trials").iterdir())
    drift = []
    for name in ("metrics.json", "memory.json", "job.json", "config.yaml", "steps.jsonl"):
        old, new = _keys(_read(recorded / name)), _keys(_read(Path(run) / name))
        drift += [f"{name}: {key} only {'recorded' if key in old else 'now'}" for key in sorted(old ^ new)]
    return drift


def _read(path: Path) -> dict:
    if path.suffix == ".jsonl":
        return json.loads(path.read_text().splitlines()[-1])
    return yaml.safe_load(path.read_text())  # JSON is YAML


def _keys(value, prefix: str = "") -> set[str]:
    if not isinstance(value, dict):
        return set()
    return {f"{prefix}{k}" for k in value} | {key for k, v in value.items() for key in _keys(v, f"{prefix}{k}.")}


def live_copy(trial: Path, out: Path, steps: int) -> subprocess.Popen:
    """A copy of a finished run as if it were still training after `steps` steps.

    Its job record names a live process (a sleeper, killed when the session ends) as its supervisor, so that
    agent.jobs reports it running.
    """
    shutil.copytree(trial, out, ignore=shutil.ignore_patterns("trial.json", "metrics.json", "memory.json"))
    lines = (out / "steps.jsonl").read_text().splitlines(keepends=True)
    (out / "steps.jsonl").write_text("".join(lines[:steps]))
    sleeper = subprocess.Popen(["sleep", "3600"])
    atexit.register(sleeper.kill)
    job = json.loads((out / "job.json").read_text())
    start = start_time(sleeper.pid)
    job |= {"state": "running", "cause": None, "pid": sleeper.pid, "pid_start": start, "pgid": sleeper.pid}
    job["host"] = socket.gethostname()
    (out / "job.json").write_text(json.dumps(job, indent=1))
    return sleeper


def demo_repo(base: Path) -> Path:
    """The repository the snapshot tests show: a sweep with its report on a branch, a finished run, a run that
    is still going, two conversations (one waiting for an approval) and a leaderboard."""
    repo = base / "demo-repo"
    if (repo / ".meshpilot" / "built").is_file():
        return repo
    shutil.rmtree(repo, ignore_errors=True)
    git_repo(repo)
    sweep = copy_sweep(repo)
    trial = next((sweep / "trials").iterdir())
    shutil.copytree(trial, repo / "runs" / "tiny-ok", ignore=shutil.ignore_patterns("trial.json"))
    live_copy(trial, repo / "runs" / "tiny-live", steps=2)

    from agent.report import write_report

    write_report(sweep, repo, slug="tiny", date=REPORT_DATE)
    _conversations(repo, base / "tui-empty-cache")
    _leaderboard(data_dir(base))
    (repo / ".meshpilot" / "built").write_text("")
    return repo


def data_dir(base: Path) -> Path:
    """MESHPILOT_DATA of the snapshot tests: the sealed store with the leaderboard (outside every repository)."""
    return base / "tui-data"


def _conversations(repo: Path, empty_cache: Path) -> None:
    """ "demo": two requests answered from the run files; "approve": a launch waiting for a decision.

    The launch's cost is predicted without this session's calibration (an empty cache), so the approval shows
    the same figures every time.
    """
    empty_cache.mkdir(exist_ok=True)
    previous = os.environ.get("MESHPILOT_CACHE")
    os.environ["MESHPILOT_CACHE"] = str(empty_cache)
    try:
        agent = Agent(repo, policy=Policy(approve_below=0.0))
        for request in ("/runs", "/results runs/tiny-ok"):
            list(agent.send("demo", request))
        list(agent.send("approve", "/run nproc=1 steps=2"))
        assert agent.state("approve") == "waiting"
        agent.close()
    finally:
        if previous is None:
            os.environ.pop("MESHPILOT_CACHE", None)
        else:
            os.environ["MESHPILOT_CACHE"] = previous


def _leaderboard(data: Path) -> None:
    """Two submissions, through evalsuite's own leaderboard."""
    from evalsuite.leaderboard import Leaderboard
    from evalsuite.store import Store

    board = Leaderboard(Store.open(data).leaderboard_path)
    submissions = (("runs/a/checkpoint", 0.4375, 0.25, False), ("runs/b/checkpoint", 0.5, 0.125, True))
    for key, dev, test, flagged in submissions:
        contamination = {"n": 13, "overlap": 0.5 if flagged else 0.0, "flagged": flagged}
        scores = (("addition", "dev", "exact_match", dev), ("addition", "test", "exact_match", test))
        scores += (("reversal", "dev", "acc", dev / 2), ("reversal", "test", "acc", test / 2))
        tasks = [
            {"task": task, "version": "1", "split": split, "private": split == "test", "metrics": {metric: value},
             "n_examples": 64, "contamination": contamination}
            for task, split, metric, value in scores
        ]  # fmt: skip
        model = {"path": key, "checkpoint_hash": "c0ffee"}
        result = {"suite": "builtin", "suite_version": "1", "model": model, "config_hash": "68c1", "git_commit": None}
        result |= {"batching": "none", "batching_note": None, "device_mapped": False, "versions": {}}  # BenchResult
        board.record(key, {**result, "seed": 0, "eval_code_version": "1+abc", "tasks": tasks}, limit=10)


def drive(app: App, scenario, size: tuple[int, int] = (120, 36)) -> None:
    """Run `app` headless and let `scenario(pilot)` use it."""

    async def main() -> None:
        async with app.run_test(size=size) as pilot:
            await scenario(pilot)

    asyncio.run(main())


# --- waiting on the app's state -------------------------------------------------------------------------------------
# Textual's own waits (Pilot.press and Pilot.pause, and the snapshot plugin's before its capture) decide that the
# app is done from how much CPU time the process used lately: on a loaded machine the process gets little CPU
# time, so it looks idle while messages are still queued. These wait on the app's own state instead.

POLL_S = 0.05  # between two looks at something another thread or process does: how often, not how long
SETTLE_TIMEOUT_S = 300.0  # a hang guard only: generous, a loaded machine is slow


async def until(pilot: Pilot, condition, what: str, timeout: float = 300) -> None:
    """Let the app work until `condition()` holds; the timeout only turns a hang into a failure."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await handled(pilot.app)
        if not condition():  # waiting on a thread or another process: look again shortly
            await asyncio.sleep(POLL_S)


def on_top(app: App, kind: type) -> bool:
    """A screen of `kind` is on top and mounted: its widgets are there (pushing it only puts it on the stack)."""
    return isinstance(app.screen, kind) and app.screen.is_mounted


async def handled(app: App) -> None:
    """Every message pump of every screen (and the app) has handled what was queued when this was called, or the
    app is quitting (its pumps then drop what is queued)."""
    pumps = [app, *(node for screen in app.screen_stack for node in screen.walk_children(with_self=True))]
    done = []
    for pump in pumps:
        event = asyncio.Event()
        if pump.call_later(event.set):  # False for a pump that is closing: it handles nothing any more
            done.append(event.wait())
    everything = asyncio.ensure_future(asyncio.gather(*done))
    while not everything.done() and not app._exit:
        await asyncio.wait({everything}, timeout=POLL_S)  # looks at app._exit again after POLL_S
    everything.cancel()


def busy(app: App, waiting: tuple[str, ...] = ()) -> list[str]:
    """What the app still has to do: running workers (but those of the `waiting` groups, which wait for the
    user) and messages not yet handled."""
    work = [f"worker {w.name or w.group}" for w in app.workers if not w.is_finished and w.group not in waiting]
    pumps = [app, *(node for screen in app.screen_stack for node in screen.walk_children(with_self=True))]
    return work + [f"messages for {pump}" for pump in pumps if not pump._message_queue.empty()]


async def settled(pilot: Pilot, waiting: tuple[str, ...] = ()) -> None:
    """Wait until the app has nothing left to do and its screen no longer changes: what a snapshot shows.

    Cursors stop blinking (a timer). Then, round after round: every message handled, animations done, layout and
    paint applied; settled once no worker runs, no message waits and the screen looks as it did after the round
    before. (Screens' own refresh flags are no guide: a screen behind another one keeps asking for a repaint.)
    """
    app = pilot.app
    fields = [field for screen in app.screen_stack for field in screen.query("TextArea, Input")]
    for field in fields:
        field.cursor_blink = False
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    previous = None
    while True:
        await handled(app)
        await app.animator.wait_until_complete()
        for field in fields:  # a blink tick or focus change handled after blinking stopped may have hidden it
            field._cursor_visible = field.has_focus
        for screen in app.screen_stack:  # the screens shown, from the bottom: the top one and those behind a dialog
            if screen.is_current:
                screen._on_timer_update()  # lay out and paint now, not at the screen's next timer tick
        await handled(app)
        work = busy(app, waiting)
        shown = None if work else app.export_screenshot()
        if shown is not None and shown == previous:
            return
        assert time.monotonic() < deadline, f"the app never settled: {work or 'its screen kept changing'}"
        previous = shown
        if work:
            await asyncio.sleep(POLL_S)


if __name__ == "__main__":
    record()
    record(MOE_FIXTURE, MOE_EXPERIMENT)
    print(f"recorded {FIXTURE} and {MOE_FIXTURE}; now run tests/test_tui*.py")
    print("(and --snapshot-update if figures moved: look first)")
