"""The launcher's progress bar, fed by rank 0's steps.jsonl while the ranks run.

The ranks write nothing to the terminal (their output goes to torchrun.log in the run directory), so the
user sees one bar with loss and tokens/s, not interleaved per-rank logs and tracebacks.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time

from tqdm import tqdm

from trainer.rundir import RunDir


def follow(process: subprocess.Popen, run: RunDir, total_steps: int, poll_s: float = 0.5) -> int:
    """Show progress until `process` exits; return its exit code."""
    reader = _StepsReader(run)
    with tqdm(total=total_steps, unit="step", dynamic_ncols=True, disable=None) as bar:
        while True:
            finished = process.poll() is not None
            records = reader.new_records()
            for record in records:
                bar.n = record["step"]
                bar.set_postfix(loss=f"{record['loss']:.3f}", tok_s=f"{record['tokens'] / record['step_s']:,.0f}")
            if records:
                bar.refresh()
            if finished:
                return process.returncode
            time.sleep(poll_s)


class _StepsReader:
    """Reads the complete lines appended to steps.jsonl since the last call.

    Rank 0 rewrites the file when it resumes (os.replace, so a new inode): then reading starts over.
    """

    def __init__(self, run: RunDir):
        self.path, self.inode, self.offset = run.steps, None, 0

    def new_records(self) -> list[dict]:
        try:
            with self.path.open("rb") as f:
                inode = os.fstat(f.fileno()).st_ino
                if inode != self.inode:
                    self.inode, self.offset = inode, 0
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return []
        complete = data[: data.rfind(b"\n") + 1]  # a line still being written waits for the next poll
        self.offset += len(complete)
        records = []
        for line in complete.splitlines():
            with contextlib.suppress(ValueError):
                records.append(json.loads(line))
        return records
