"""Checkpoints with torch.distributed.checkpoint, written atomically, restoring everything a step depends on.

Every rank writes into `step_NNNNNNNN.partial/`; only when all ranks are done does rank 0 rename it to
`step_NNNNNNNN/`. A crash mid-write leaves a `.partial` directory that `latest()` never picks up.
Besides model and optimizer (sharded by DCP), a checkpoint holds the scheduler, the data position and every
rank's RNG states (dropout, any sampling), so a resumed run repeats an uninterrupted one exactly.
"""

from __future__ import annotations

import os
import random
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

from trainer.noise_scale import NoiseScale

_STEP_DIR = re.compile(r"^step_(\d{8})$")


@dataclass
class TrainerState:
    step: int  # optimizer steps completed
    next_row: int  # global index of the next data row to read
    noise_scale: NoiseScale = field(default_factory=NoiseScale)  # its averages continue across a resume


def checkpoint_step(path: Path) -> int:
    return int(_STEP_DIR.match(path.name).group(1))


def latest(directory: Path) -> Path | None:
    """The newest complete checkpoint in `directory`, or None."""
    if not directory.is_dir():
        return None
    complete = [p for p in directory.iterdir() if _STEP_DIR.match(p.name) and (p / ".metadata").is_file()]
    return max(complete, key=lambda p: p.name, default=None)


def save(
    directory: Path,
    state: TrainerState,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    keep: int,
) -> Path:
    rank = dist.get_rank()
    final = directory / f"step_{state.step:08d}"
    partial = final.with_name(final.name + ".partial")
    if rank == 0:
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
    dist.barrier()
    model_state, optimizer_state = get_state_dict(model, optimizer)
    dcp.save({"model": model_state, "optimizer": optimizer_state}, checkpoint_id=str(partial))
    torch.save(_rng_state(), partial / f"rng_rank{rank}.pt")
    if rank == 0:
        torch.save({"trainer": vars(state), "scheduler": scheduler.state_dict()}, partial / "trainer_state.pt")
    dist.barrier()
    if rank == 0:
        partial.rename(final)
        _fsync_dir(directory)
        _prune(directory, keep)
    dist.barrier()
    return final


def load(
    path: Path,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
) -> TrainerState:
    model_state, optimizer_state = get_state_dict(model, optimizer)
    state = {"model": model_state, "optimizer": optimizer_state}
    dcp.load(state, checkpoint_id=str(path))
    set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optimizer"])
    extra = torch.load(path / "trainer_state.pt", weights_only=False)
    scheduler.load_state_dict(extra["scheduler"])
    rng_file = path / f"rng_rank{dist.get_rank()}.pt"
    if not rng_file.is_file():
        raise RuntimeError(f"{path} was written by fewer ranks; resume with the same number of processes")
    _set_rng_state(torch.load(rng_file, weights_only=False))
    return TrainerState(**extra["trainer"])


def _rng_state() -> dict:
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state()
    return state


def _set_rng_state(state: dict) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda"])


def _prune(directory: Path, keep: int) -> None:
    """Keep the newest `keep` checkpoints; drop older ones and any .partial left by an interrupted save."""
    complete = sorted(p for p in directory.iterdir() if _STEP_DIR.match(p.name))
    stale = [p for p in directory.iterdir() if p.name.endswith(".partial")]
    for old in complete[: max(0, len(complete) - keep)] + stale:
        shutil.rmtree(old, ignore_errors=True)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
