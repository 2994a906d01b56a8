"""A sweep's progress: what the runner's loop hands its callback, and how the terminal reporter shows it.

No trial runs here: a scripted executor stands in for the jobs, and each progress call moves its trials on by one
step, so every snapshot is known in advance whatever the machine's speed.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from agent.sweep import runner
from agent.sweep.progress import SweepReporter
from agent.sweep.runner import Runner, Settings, SweepProgress, TrialProgress
from agent.sweep.space import Point, Space
from agent.sweep.study import open_study
from trainer.results.rundir import RunDir

ONE = {"pp": 1, "dp_replicate": 1, "dp_shard": 1, "cp": 1, "tp": 1}  # every degree: the trial record holds them all
LAYOUTS = {"p0": {**ONE, "dp_shard": 2}, "p1": {**ONE, "tp": 2}, "p2": ONE}
TRIAL_STEPS = 4
FAILS_AT = {"p1": 2}  # p1's loss turns NaN at its second step
STEP = {"tokens": 1000, "step_s": 0.5, "loss": 1.0}  # 2,000 tokens/s once the warm-up step is left out
STEP |= {"lr": 1e-3, "target_tokens": 1000, "data_wait_s": 0.0, "grad_norm": 1.0}  # the rest of a step's record


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def trial(
    tid: str, state: str = "running", step: int = 0, tokens_per_s: float | None = None, cause: str | None = None
) -> TrialProgress:
    return TrialProgress(tid, LAYOUTS[tid], state, step, TRIAL_STEPS, tokens_per_s, cause)


def snapshot(done: int, failed: int = 0, running=(), ended=(), over: bool = False) -> SweepProgress:
    return SweepProgress(3, done, failed, tuple(running), tuple(ended), over)


# -- the reporter, from fabricated snapshots


def test_without_a_terminal_each_trial_gets_one_plain_line_as_it_ends():
    stream = io.StringIO()
    reporter = SweepReporter(stream)
    reporter.update(snapshot(0, running=[trial("p0", step=3, tokens_per_s=2000.0)]))
    assert stream.getvalue() == ""  # nothing ended yet: a log gets no running figures
    reporter.update(snapshot(1, ended=[trial("p0", "ok", TRIAL_STEPS, 2345.6)]))
    failed = trial("p1", "nan", 2, cause="loss nan at step 2")
    reporter.update(snapshot(3, 1, ended=[failed, trial("p2", "pruned", 3)], over=True))
    reporter.close()
    assert stream.getvalue().splitlines() == [
        "trial 1/3 p0 dp_shard=2: ok, 2,346 tokens/s",
        "trial 2/3 p1 tp=2: nan: loss nan at step 2",
        "trial 3/3 p2 one process: pruned at step 3",
    ]
    assert "\r" not in stream.getvalue()


def test_on_a_terminal_one_line_shows_the_counts_and_the_running_trial():
    stream = Terminal()
    with SweepReporter(stream) as reporter:
        reporter.update(snapshot(1, running=[trial("p1", step=1)]))
        assert _last_frame(stream).endswith("p1 tp=2 step 1/4]")  # still in the warm-up: no tokens/s yet
        reporter.update(snapshot(2, 1, running=[trial("p2", step=3, tokens_per_s=1234.4)]))
        line = _last_frame(stream)
        assert line.startswith("sweep:") and "2/3" in line
        assert line.endswith("1 failed; p2 one process step 3/4 1,234 tokens/s]")
        reporter.update(snapshot(3, 1, over=True))
        assert stream.getvalue().endswith("\n")  # the bar is finished: what the caller prints next has its own line
    assert "3/3" in _last_frame(stream)


def _last_frame(stream: io.StringIO) -> str:
    return stream.getvalue().rstrip("\n").split("\r")[-1].rstrip()


# -- the runner's loop, with scripted trials


class ScriptedTrials:
    """An executor whose running trials write one more step each time `advance` is called."""

    shares_devices = True

    def __init__(self):
        self.states: dict[Path, dict] = {}
        self.steps: dict[Path, int] = {}

    def start(self, trial_dir: Path, request: dict, devices: list[int], device_type: str) -> None:
        self.states[trial_dir] = {"state": "running", "cause": None, "metrics": None}
        self.steps[trial_dir] = 0

    def status(self, trial_dir: Path) -> dict:
        return self.states[trial_dir]

    def cancel(self, trial_dir: Path, state: str, cause: str) -> None:
        raise AssertionError("nothing is pruned here")

    def advance(self) -> None:
        for directory, status in self.states.items():
            if status["state"] != "running":
                continue
            step = self.steps[directory] = self.steps[directory] + 1
            with RunDir(directory).steps.open("a") as f:
                f.write(json.dumps({"step": step, **STEP}) + "\n")
            if FAILS_AT.get(directory.name) == step:
                self.states[directory] = {"state": "nan", "cause": f"loss nan at step {step}", "metrics": None}
            elif step == TRIAL_STEPS:
                self.states[directory] = {"state": "ok", "cause": None, "metrics": {"tokens_per_s": 2000.0}}


@pytest.fixture
def swept(tmp_path, monkeypatch):
    """Every snapshot a three-trial sweep handed its callback, and what a log-file reporter printed of them."""
    monkeypatch.setattr(runner, "POLL_S", 0)
    points = [Point(pid, layout, 2, 1, False, True) for pid, layout in LAYOUTS.items()]
    space = Space(points, {}, [])
    settings = Settings(
        experiment=tmp_path / "x.yaml",
        objective="tokens_per_s",
        trial_steps=TRIAL_STEPS,
        timing_warmup_steps=1,
        budget=3,
        max_parallel=1,
        device_type="cpu",
        device_ids=[0, 1],  # the two-process layouts take both
        timeout_s=None,
        hang_s=None,
    )
    executor, seen, log = ScriptedTrials(), [], io.StringIO()
    reporter = SweepReporter(log)

    def progress(state: SweepProgress) -> None:
        assert len(seen) < 100, "the sweep does not end"  # a few calls per trial step suffice
        seen.append(state)
        reporter.update(state)
        executor.advance()

    study = open_study(tmp_path, space, "grid", "maximize", prune=False)
    Runner(tmp_path, space, study, executor, settings, progress).run()
    return seen, log.getvalue().splitlines()


def test_the_runner_shows_the_running_trials_step_and_tokens_per_s(swept):
    seen, _ = swept
    running = [(s.running[0].id, s.running[0].step, s.running[0].tokens_per_s) for s in seen if s.running]
    assert ("p0", 1, None) in running  # the warm-up step is not timed, as in the trainer's figure
    assert ("p0", 3, 2000.0) in running and ("p2", 3, 2000.0) in running
    assert all(s.running[0].layout == LAYOUTS[s.running[0].id] for s in seen if s.running)
    assert [s.total for s in seen] == [3] * len(seen)
    assert [s.done for s in seen] == sorted(s.done for s in seen)


def test_the_runner_hands_each_ended_trial_over_once_and_ends_with_a_last_call(swept):
    seen, lines = swept
    ended = {t.id: t for s in seen for t in s.ended}
    assert sum(len(s.ended) for s in seen) == 3 and set(ended) == set(LAYOUTS)
    assert (ended["p0"].state, ended["p0"].step, ended["p0"].tokens_per_s) == ("ok", TRIAL_STEPS, 2000.0)
    assert (ended["p1"].state, ended["p1"].step, ended["p1"].cause) == ("nan", 2, "loss nan at step 2")
    last = seen[-1]
    assert (last.done, last.failed, last.running, last.over) == (3, 1, (), True)
    assert not any(s.over for s in seen[:-1])
    assert sorted(line.split()[2] for line in lines) == ["p0", "p1", "p2"]
    assert [line.split()[1] for line in lines] == ["1/3", "2/3", "3/3"]
