"""The launcher's progress bar, fed by rank 0's steps.jsonl while the ranks run.

The ranks write nothing to the terminal (their output goes to torchrun.log in the run directory), so the
user sees one bar with loss and tokens/s, not interleaved per-rank logs and tracebacks.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Callable

from tqdm import tqdm

from trainer.launch.torchrun import Agent
from trainer.results.rundir import RunDir, StepsTail, tokens_per_s


def follow(
    process: Agent, run: RunDir, total_steps: int, poll_s: float = 0.5, on_poll: Callable[[], None] | None = None
) -> int:
    """Show progress until `process` exits; return its exit code. `on_poll` is called at every poll."""
    steps = StepsTail(run.steps)
    with tqdm(total=total_steps, unit="step", dynamic_ncols=True, disable=None) as bar:
        while True:
            finished = process.poll() is not None
            records, _ = steps.read()
            for record in records:
                bar.n = record["step"]
                bar.set_postfix(loss=f"{record['loss']:.3f}", tok_s=f"{tokens_per_s([record]) or 0:,.0f}")
            if records:
                bar.refresh()
            if finished:
                return process.returncode
            if on_poll is not None:
                on_poll()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=poll_s)  # a poll's pause that ends at once when the agent exits
