"""A running sweep on the terminal, for `meshpilot sweep` and `meshpilot demo`, fed by the runner's polling loop.

On a terminal: one tqdm line redrawn at every poll, like a training run's bar (trainer.launch.progress): trials done of
the total, the failed count, and each running trial's layout, step and tokens/s. Anywhere else (CI, a log file,
the TUI's sweep log): one plain line per trial as it ends, since a redrawn line would fill a log with copies.
"""

from __future__ import annotations

import sys
from typing import TextIO

from tqdm import tqdm

from agent.sweep.runner import SweepProgress, TrialProgress
from trainer.layout import layout_name


class SweepReporter:
    """Pass `update` to run_sweep as its `progress`; close it (or use it as a context manager) when done.

    `live` draws the bar; by default when `stream` is a terminal.
    """

    def __init__(self, stream: TextIO | None = None, live: bool | None = None):
        self.stream = stream if stream is not None else sys.stderr
        self.live = self.stream.isatty() if live is None else live
        self.bar: tqdm | None = None

    def __enter__(self) -> SweepReporter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def update(self, progress: SweepProgress) -> None:
        if self.live:
            self._draw(progress)
        else:
            for line in ended_lines(progress):
                print(line, file=self.stream, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def _draw(self, progress: SweepProgress) -> None:
        if self.bar is None:
            # Trials ended before a resumed sweep started are not counted in its rate of trials per second.
            self.bar = tqdm(
                total=progress.total,
                initial=progress.done,
                desc="sweep",
                unit="trial",
                dynamic_ncols=True,
                file=self.stream,
            )
        self.bar.total = progress.total  # lowered when the sampler has nothing new left to propose
        self.bar.update(progress.done - self.bar.n)
        self.bar.set_postfix_str(status_text(progress))
        if progress.over:
            self.close()  # ends the line, before whatever the caller prints next


def status_text(progress: SweepProgress) -> str:
    """What the bar shows after its counts: the failed trials, then each running trial."""
    parts = [f"{progress.failed} failed"] if progress.failed else []
    parts += [running_text(trial) for trial in progress.running]
    return "; ".join(parts)


def running_text(trial: TrialProgress) -> str:
    """t003 dp_shard=2,tp=2 step 4/6 1,234 tokens/s (no tokens/s until a step after the warm-up)."""
    text = f"{trial.id} {layout_name(trial.layout)} step {trial.step}/{trial.steps}"
    return text if trial.tokens_per_s is None else f"{text} {trial.tokens_per_s:,.0f} tokens/s"


def ended_lines(progress: SweepProgress) -> list[str]:
    """One line per trial that ended since the last update, numbered in the order they ended."""
    first = progress.done - len(progress.ended) + 1
    return [ended_text(trial, first + i, progress.total) for i, trial in enumerate(progress.ended)]


def ended_text(trial: TrialProgress, number: int, total: int) -> str:
    """trial 4/10 t003 dp_shard=2,tp=2: ok, 1,234 tokens/s (or its state, and its cause when there is one)."""
    if trial.state == "ok" and trial.tokens_per_s is not None:
        outcome = f"ok, {trial.tokens_per_s:,.0f} tokens/s"
    else:
        outcome = f"{trial.state}: {trial.cause}" if trial.cause else f"{trial.state} at step {trial.step}"
    return f"trial {number}/{total} {trial.id} {layout_name(trial.layout)}: {outcome}"
