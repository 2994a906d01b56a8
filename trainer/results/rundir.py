"""The run directory: the files every other part of meshpilot reads (see the README's result-file contract), read
here through their schemas in trainer.results.schemas."""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from pathlib import Path
from typing import IO, Any

import yaml

from trainer.results.schemas import (
    FAILURE,
    LAUNCH,
    MEMORY,
    METRICS,
    PROFILE,
    STEPS,
    LaunchInfo,
    MemoryReport,
    Metrics,
    ProfileReport,
    RankFailure,
    StepRecord,
)


class RunDir:
    def __init__(self, path: str | Path):
        self.path = Path(path)

    config = property(lambda self: self.path / "config.yaml")  # the resolved experiment that ran
    launch = property(lambda self: self.path / "launch.json")  # what the launcher prepared for the workers
    steps = property(lambda self: self.path / "steps.jsonl")
    metrics = property(lambda self: self.path / "metrics.json")
    memory = property(lambda self: self.path / "memory.json")
    snapshot = property(lambda self: self.path / "snapshot.pickle")
    profile = property(lambda self: self.path / "profile.json")  # train.profile_steps > 0
    checkpoints = property(lambda self: self.path / "checkpoint")
    log = property(lambda self: self.path / "log.txt")
    torchrun_log = property(lambda self: self.path / "torchrun.log")  # everything the ranks and torchrun printed

    def rank_log(self, rank: int) -> Path:
        return self.log if rank == 0 else self.path / f"log.rank{rank}.txt"

    def failure(self, rank: int) -> Path:
        return self.path / f"failure.rank{rank}.json"

    def failures(self) -> list[RankFailure]:
        """Failures the ranks recorded, earliest first: the first is usually the cause, the rest its echo."""
        found = [FAILURE.read(p) for p in self.path.glob("failure.rank*.json")]
        return sorted((f for f in found if f is not None), key=lambda f: f["time"])

    def read_config(self) -> dict[str, Any] | None:
        """config.yaml: the resolved experiment that ran, as the mapping the launcher wrote (None before it did)."""
        return parse_config(self.config.read_text()) if self.config.is_file() else None

    def read_steps(self) -> list[StepRecord]:
        return STEPS.read_lines(self.steps)

    def read_metrics(self) -> Metrics | None:
        return METRICS.read(self.metrics)

    def read_memory(self) -> MemoryReport | None:
        return MEMORY.read(self.memory)

    def read_profile(self) -> ProfileReport | None:
        return PROFILE.read(self.profile)

    def read_launch(self) -> LaunchInfo | None:
        return LAUNCH.read(self.launch)

    def lock_file(self, node_rank: int = 0) -> Path:
        """One per node: the launchers of one multi-node run share a directory (a shared file system)."""
        return self.path / f".launcher.node{node_rank}.lock"


class RunInUse(RuntimeError):
    """Another live launcher holds the run directory."""

    def __init__(self, path: Path, pid: int | None):
        self.pid = pid
        holder = f"pid {pid}" if pid is not None else "a process whose pid it has not written yet"
        super().__init__(
            f"run directory {path} is in use by a live run ({holder}); wait for it or choose another --out"
        )


class RunLock:
    """An exclusive lock on a run directory, held by its launcher for the launcher's whole life.

    flock: the kernel drops it when the process dies, however it dies (SIGKILL included), so a lock is never
    left behind, and a lock that is held always names a live launcher. The holder writes its pid into the file.
    Two locks: one on the directory itself, which every launcher takes (exclusively for a run of one node, shared
    by the nodes of a multi-node run), so that no launcher of another run can train there whatever node rank it
    claims; and one file per node rank, so that two launchers cannot both be one node of a run.
    """

    def __init__(self, run: RunDir, node_rank: int = 0, whole_run: bool = False):
        """Create the directory if needed and take the locks, or raise RunInUse naming the holder's pid.
        `whole_run`: the run has one node, and nothing else may share its directory."""
        self.path = run.lock_file(node_rank)
        while True:
            self.created_dir = not run.path.exists()
            run.path.mkdir(parents=True, exist_ok=True)
            directory = _lock_directory(run, whole_run)
            handle = self.path.open("a+")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.close()
                os.close(directory)
                raise RunInUse(run.path, _holder_pid(self.path)) from None
            if _same_file(handle, self.path):  # not a file that a launcher giving up unlinked meanwhile
                break
            handle.close()
            os.close(directory)
        handle.truncate(0)
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        self._handle: IO[str] | None = handle
        self._directory = directory

    def filenos(self) -> tuple[int, int]:
        """The locked descriptors (a forked child closes its copies: the locks are the launcher's alone)."""
        assert self._handle is not None, "released"
        return self._handle.fileno(), self._directory

    def release(self, discard: bool = False) -> None:
        """Unlock. `discard`: the launcher gives up before writing anything, so the directory is left as it was:
        the lock file goes, and so does a directory this lock created (when nothing else is in it)."""
        if self._handle is None:
            return
        if discard:
            self.path.unlink(missing_ok=True)  # while still locked: a racing locker notices and starts over
            if self.created_dir:
                with contextlib.suppress(OSError):
                    self.path.parent.rmdir()
        self._handle.close()
        self._handle = None
        os.close(self._directory)


def _lock_directory(run: RunDir, whole_run: bool) -> int:
    """flock the run directory itself (exclusive for `whole_run`, else shared); its descriptor, or RunInUse."""
    directory = os.open(run.path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(directory, (fcntl.LOCK_EX if whole_run else fcntl.LOCK_SH) | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(directory)
        holders = (_holder_pid(path) for path in sorted(run.path.glob(".launcher.node*.lock")))
        raise RunInUse(run.path, next((pid for pid in holders if pid is not None), None)) from None
    return directory


def _same_file(handle: IO[str], path: Path) -> bool:
    try:
        return os.path.samestat(os.fstat(handle.fileno()), path.stat())
    except FileNotFoundError:
        return False


def _holder_pid(path: Path) -> int | None:
    """The pid the holder writes just after locking. Wait a moment for it (bounded): it may not be written yet,
    and until it is, the file may still name an earlier holder that died."""
    for _ in range(50):
        with contextlib.suppress(OSError, ValueError):
            pid = int(path.read_text())
            if _alive(pid):
                return pid
        time.sleep(0.02)
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive all the same
        return True
    return True


def parse_config(text: str | bytes) -> dict[str, Any]:
    """A run's config.yaml as the mapping the launcher wrote (trainer.config.experiment_from_dict reads it back
    into an Experiment): the one reader of that file."""
    return yaml.safe_load(text)


def untimed_steps(steps: int, warmup: int, first_step: int = 0) -> int:
    """Steps after `first_step` that tokens/s leaves out (allocator, compilation): train.timing_warmup_steps, or
    none when the run has no more steps than that (there would be nothing else to time). The trainer's metrics.json
    times so, and so does every reader of a live run."""
    return warmup if steps - first_step > warmup else 0


def tokens_per_s(steps: list[StepRecord]) -> float | None:
    """Tokens per second over these steps.jsonl records (their tokens over their step times); None without time.
    metrics.json's figure is this over the steps after the timing warm-up."""
    seconds = sum(s["step_s"] for s in steps)
    return sum(s["tokens"] for s in steps) / seconds if seconds > 0 else None


class StepsTail:
    """The complete lines appended to a steps.jsonl since the last call, for readers that follow a live run.

    A resumed run rewrites the file from its checkpoint's step (os.replace: a new inode), so a file that was
    replaced or shrank is read again from the start; `read` says so, for callers that keep earlier records.
    A line still being written waits for the next call.
    """

    def __init__(self, path: Path):
        self.path = path
        self.inode: int | None = None
        self.offset = 0

    def read(self) -> tuple[list[StepRecord], bool]:
        """(new records, whether records read before must be dropped)."""
        try:
            with self.path.open("rb") as f:
                stat = os.fstat(f.fileno())
                reset = stat.st_ino != self.inode or stat.st_size < self.offset
                if reset:
                    self.inode, self.offset = stat.st_ino, 0
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return [], False
        complete = data[: data.rfind(b"\n") + 1]
        self.offset += len(complete)
        records = [STEPS.parse(line, self.path) for line in complete.decode().splitlines() if line.strip()]
        return records, reset
