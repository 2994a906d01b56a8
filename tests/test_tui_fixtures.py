"""What the terminal UI's tests (tests/test_tui*.py) work on, built once per test session and shared by them.

The only training is one real tiny sweep: one single-process trial of the tiny experiment (`trained_sweep`).
Everything else is copied from it into repositories the tests open. The demo repository (`demo_repo`) is what
the snapshot tests show, so its copies are frozen: the figures that differ from run to run (step times,
tokens/s, peak memory) are replaced by fixed ones in steps.jsonl, metrics.json and memory.json, and the sweep's
summary is rebuilt from them; losses are the training's own (seeded, the same every time).
"""

from __future__ import annotations

import asyncio
import atexit
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import git
from support import write_experiment
from textual.app import App
from textual.pilot import Pilot

from agent.approvals import Policy
from agent.session import Agent
from trainer.rundir import RunDir

EXPERIMENT = {
    "train": {"steps": 3, "timing_warmup_steps": 1},
    "search": {"trials": 1, "trial_steps": 3},
}
FROZEN_STEP_S = 0.5
FROZEN_PEAK_BYTES = 300 * 2**20
REPORT_DATE = "2025-01-01"
GIT_ENV = {"GIT_AUTHOR_NAME": "test", "GIT_AUTHOR_EMAIL": "test@example.com"}
GIT_ENV |= {"GIT_COMMITTER_NAME": "test", "GIT_COMMITTER_EMAIL": "test@example.com"}


def trained_sweep(base: Path) -> Path:
    """A real sweep of one single-process trial: base/tui-trained/sweep, or kept in MESHPILOT_TEST_CACHE between
    sessions, like the tokenizer (see the README)."""
    from agent.sweep import run_sweep

    root = Path(os.environ.get("MESHPILOT_TEST_CACHE") or base) / "tui-trained"
    sweep = root / "sweep"
    if (sweep / "summary.json").is_file():
        return sweep
    shutil.rmtree(root, ignore_errors=True)  # a build that failed earlier in this session
    root.mkdir(parents=True)
    experiment = write_experiment(root, EXPERIMENT)
    space = {"train.micro_batch": [2], "train.activation_checkpointing": [False]}
    summary = run_sweep(experiment, sweep, trials=1, devices=1, space=space)
    assert summary["winner"], summary
    return sweep


def git_repo(path: Path) -> Path:
    """An experiment repository: the tiny experiment, committed."""
    path.mkdir(parents=True)
    write_experiment(path, EXPERIMENT)
    (path / ".gitignore").write_text("runs/\nsweeps/\n.meshpilot/\n")
    repository = git.Repo.init(path, initial_branch="main")
    repository.index.add(["meshpilot.yaml", ".gitignore"])
    with repository.git.custom_environment(**GIT_ENV):
        repository.git.commit("-m", "experiment")
    return path


def copy_sweep(base: Path, repo: Path, name: str = "tiny") -> Path:
    """The trained sweep in repo/sweeps/NAME, frozen, its experiment the repository's own."""
    from agent.sweep.summary import summarize

    out = repo / "sweeps" / name
    shutil.copytree(trained_sweep(base), out)
    inputs = json.loads((out / "sweep.json").read_text())
    (out / "sweep.json").write_text(json.dumps({**inputs, "experiment": str(repo / "meshpilot.yaml")}, indent=1))
    for trial in sorted((out / "trials").iterdir()):
        freeze(trial)
    summarize(out)
    return out


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
    start = int(Path(f"/proc/{sleeper.pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    job |= {"state": "running", "cause": None, "pid": sleeper.pid, "pid_start": start, "pgid": sleeper.pid}
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
    sweep = copy_sweep(base, repo)
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
            {"task": task, "split": split, "metrics": {metric: value}, "n_examples": 64, "contamination": contamination}
            for task, split, metric, value in scores
        ]
        model = {"path": key, "checkpoint_hash": "c0ffee"}
        result = {"suite": "builtin", "suite_version": "1", "model": model, "config_hash": "68c1", "git_commit": None}
        board.record(key, {**result, "seed": 0, "eval_code_version": "1+abc", "tasks": tasks}, limit=10)


def drive(app: App, scenario, size: tuple[int, int] = (120, 36)) -> None:
    """Run `app` headless and let `scenario(pilot)` use it."""

    async def main() -> None:
        async with app.run_test(size=size) as pilot:
            await scenario(pilot)

    asyncio.run(main())


async def until(pilot: Pilot, condition, what: str, timeout: float = 60) -> None:
    """Let the app work until `condition()` holds, then stop every cursor from blinking (for snapshots)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await pilot.pause(0.1)
    for field in pilot.app.screen.query("TextArea, Input"):
        field.cursor_blink = False
    await pilot.pause(0.2)
