"""Checkpoints with torch.distributed.checkpoint, written atomically, restoring everything a step depends on.

Every rank writes into `step_NNNNNNNN.partial/` and sums the files it wrote; only when all ranks are done does rank
0 write its manifest (every file with its size and CRC-32) and rename it to `step_NNNNNNNN/`. A crash mid-write
leaves a `.partial` directory that `latest()` never picks up, and a checkpoint counts only once every file its
manifest lists is there with that size and checksum (`verify`): a shard lost, cut short or damaged later makes
resume and export fall back to the previous checkpoint, saying which they skipped and why. The manifest is also what
says meshpilot wrote the directory, but anyone can write one: so DCP's pickles are read as data only. `.metadata`
goes through an unpickler that knows DCP's metadata classes and nothing else (`verify` reads it so, and so does
every load), and the small non-tensor entries in the shards (optimizer settings) through
`torch.load(weights_only=True)`, where DCP would unpickle both without limits (`read_state`). Only `meshpilot export
--trust` reads a checkpoint as DCP does.
Besides model and optimizer (sharded by DCP), a checkpoint holds the scheduler, the data position and every
rank's RNG states (dropout, any sampling), so a resumed run repeats an uninterrupted one exactly.

Model and optimizer state are keyed by parameter name (the optimizer's flattened: `state.<fqn>.exp_avg`,
`param_groups.<fqn>.lr`), never by position: pipeline ranks hold different parameters, and entries keyed by
position would collide between them (DCP keeps one rank's copy of a key that several ranks write). Names also
let DCP reshard a checkpoint onto another layout or process count. What carries over exactly then: weights,
optimizer moments, scheduler, step and data position (rows are numbered globally, a step reads the same rows
whatever the split). What does not: the RNG streams, which belong to ranks; after a layout change every rank
reseeds from its own seed and the step, so dropout masks differ from the uninterrupted run's.
"""

from __future__ import annotations

import io
import json
import logging
import os
import pickle
import random
import re
import shutil
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from trainer.rank.noise_scale import NoiseScale

# torch.distributed.checkpoint is imported by the functions that save and load: it takes about a second, and the
# launcher only reads checkpoint names.

_STEP_DIR = re.compile(r"^step_(\d{8})$")
MANIFEST = "manifest.json"  # in a checkpoint: every other file with its size and CRC-32, written last
_MANIFEST_FORMAT = 1
_CHUNK = 1 << 24
log = logging.getLogger("meshpilot.trainer")
# Saving or loading moves the whole model and optimizer through the file system: far longer than a training
# collective may take (train.collective_timeout_s), so checkpoints wait on their own process group.
CHECKPOINT_TIMEOUT = timedelta(minutes=30)
# trainer_state.pt is read with weights_only=True, so a crafted checkpoint cannot run code: these are the only classes
# beyond tensors and plain data that it holds, also under the path that checkpoints written before trainer/ moved into
# subpackages pickled it by.
torch.serialization.add_safe_globals([NoiseScale, (NoiseScale, "trainer.noise_scale.NoiseScale")])  # pre-move path


def checkpoint_group(timeout: timedelta = CHECKPOINT_TIMEOUT) -> dist.ProcessGroup:
    """Every rank, over gloo, with `timeout`: what `save` and `load` synchronise on (DCP's planning collectives
    and the barriers around the rename). Their collectives carry pickled plans and nothing else, which gloo moves
    on the CPU: no NCCL communicator (and its GPU buffers) for them. Every rank must call this, in the same order
    as its other new groups."""
    return dist.new_group(backend="gloo", timeout=timeout)


@dataclass
class TrainerState:
    step: int  # optimizer steps completed
    next_row: int  # global index of the next data row to read
    noise_scale: NoiseScale = field(default_factory=NoiseScale)  # its averages continue across a resume


def checkpoint_step(path: Path) -> int:
    return int(_STEP_DIR.match(path.name).group(1))


def step_dirs(directory: Path) -> list[Path]:
    """Every finished save's directory in `directory` (`step_NNNNNNNN`, verified or not), oldest first."""
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if _STEP_DIR.match(p.name) and p.is_dir())


def complete_checkpoints(directory: Path) -> list[Path]:
    """The checkpoints in `directory` whose manifest is there (not yet checked against their files), oldest
    first: what can be named; `verify` says whether one can be loaded."""
    return [p for p in step_dirs(directory) if (p / MANIFEST).is_file()]


def _crc32(path: Path) -> int:
    crc = 0
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            crc = zlib.crc32(chunk, crc)
    return crc


def _entries(paths: list[Path]) -> dict[str, dict[str, int]]:
    """Each file's size and CRC-32, several files at once (zlib lets go of the GIL while it sums)."""
    with ThreadPoolExecutor(max_workers=min(8, len(paths) or 1)) as pool:
        sums = list(pool.map(_crc32, paths))
    return {p.name: {"size": p.stat().st_size, "crc32": crc} for p, crc in zip(paths, sums, strict=True)}


def _own_files(checkpoint: Path, rank: int) -> list[Path]:
    """The files of a checkpoint that `rank` wrote: its DCP shards (`__<rank>_<n>.distcp`) and RNG states, and on
    rank 0 DCP's .metadata and trainer_state.pt."""
    own = [*checkpoint.glob(f"__{rank}_*.distcp"), checkpoint / f"rng_rank{rank}.pt"]
    if rank == 0:
        own += [checkpoint / ".metadata", checkpoint / "trainer_state.pt"]
    return sorted(p for p in own if p.is_file())


def write_manifest(checkpoint: Path, summed: dict[str, dict[str, int]] | None = None) -> None:
    """Every file of the finished `checkpoint` with its size and CRC-32: what `verify` holds it to. `summed`: the
    entries the ranks already made of the files they wrote; any other file is summed here."""
    summed = summed or {}
    files = sorted(p for p in checkpoint.iterdir() if p.is_file() and p.name != MANIFEST)
    listed = {**_entries([p for p in files if p.name not in summed]), **summed}
    listed = {p.name: listed[p.name] for p in files}
    text = json.dumps({"format": _MANIFEST_FORMAT, "files": listed}, indent=1)
    with (checkpoint / MANIFEST).open("w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


def verify(checkpoint: Path, trust_unlisted: bool = False) -> str | None:
    """None if `checkpoint` is complete: its manifest lists files that are all there with their recorded size and
    checksum, and its pickles are data and nothing else (.metadata DCP's metadata, `read_metadata`; the shards'
    non-tensor entries what torch.load(weights_only=True) reads). Otherwise why not, in a few words.
    `trust_unlisted`: a checkpoint without a manifest (another tool's, or an older meshpilot's) counts when DCP's
    .metadata is there; its pickles are then trusted."""
    manifest = checkpoint / MANIFEST
    if not manifest.is_file():
        if trust_unlisted and (checkpoint / ".metadata").is_file():
            return None
        return "no manifest.json (not written, or not finished, by meshpilot)"
    problem = _verify_files(checkpoint, manifest)
    if problem is None and not trust_unlisted:
        problem = _pickles_problem(checkpoint)
    return problem


def _verify_files(checkpoint: Path, manifest: Path) -> str | None:
    """Why the files the manifest lists do not match it, or None."""
    try:
        listed = json.loads(manifest.read_text())["files"]
        expected = {name: (int(entry["size"]), int(entry["crc32"])) for name, entry in listed.items()}
    except (ValueError, KeyError, TypeError, AttributeError):
        return "its manifest.json is unreadable"
    for name, (size, _) in expected.items():  # sizes first: a lost or cut-short file is found without reading
        path = checkpoint / name
        if "/" in name or not path.is_file():
            return f"{name} is missing"
        if path.stat().st_size != size:
            return f"{name} is {path.stat().st_size} bytes, the manifest says {size}"
    summed = _entries([checkpoint / name for name in expected])
    for name, (_, crc) in expected.items():
        if summed[name]["crc32"] != crc:
            return f"{name} is damaged (its checksum differs from the manifest's)"
    return None


# What DCP's .metadata pickles (torch.distributed.checkpoint.metadata and its file system storage's index), and the
# plain values inside it: a pickle asking for anything else is no metadata DCP wrote, and may run code.
_DCP = "torch.distributed.checkpoint."
_METADATA_GLOBALS = {
    *((_DCP + "metadata", name) for name in (
        "Metadata", "StorageMeta", "MetadataIndex", "ChunkStorageMetadata", "TensorStorageMetadata",
        "BytesStorageMetadata", "TensorProperties", "_MEM_FORMAT_ENCODING",
    )),
    (_DCP + "filesystem", "_StorageInfo"),
    ("torch", "Size"),
    ("torch.serialization", "_get_layout"),  # how a torch.layout pickles
    ("collections", "OrderedDict"),
    *((module, name) for module in ("pathlib", "pathlib._local") for name in ("PosixPath", "PurePosixPath")),
}  # fmt: skip


class _MetadataUnpickler(pickle.Unpickler):
    """Unpickles DCP's metadata and refuses every other global, before it is called."""

    def find_class(self, module: str, name: str):
        if (module, name) in _METADATA_GLOBALS or (
            module == "torch" and isinstance(getattr(torch, name, None), torch.dtype)
        ):
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"it asks for {module}.{name}, which DCP's metadata never holds")


def read_metadata(path: Path):
    """A checkpoint's DCP .metadata, unpickled as data only (pickle.UnpicklingError for anything else)."""
    with path.open("rb") as f:
        return _MetadataUnpickler(f).load()


def _pickles_problem(checkpoint: Path) -> str | None:
    """Why the checkpoint's pickles are more than data, in a few words, or None: .metadata asking for more than DCP's
    metadata classes, or a non-tensor entry of a shard for more than torch.load(weights_only=True) reads. Nothing
    is called on the way: what they ask for is refused unread."""
    # torch.distributed.checkpoint takes about a second to import: only saving and loading need it
    from torch.distributed.checkpoint.metadata import Metadata

    try:
        metadata = read_metadata(checkpoint / ".metadata")
    except FileNotFoundError:
        return ".metadata is missing"
    except pickle.UnpicklingError as e:
        return f".metadata is not DCP's metadata: {str(e).splitlines()[0]} (refused unread: it could run code)"
    except Exception as e:  # a damaged pickle fails in many ways
        return f".metadata is unreadable ({type(e).__name__})"
    if not isinstance(metadata, Metadata):
        return ".metadata is not DCP's metadata"
    try:
        return _entries_problem(checkpoint, metadata)
    except Exception as e:  # metadata of DCP's classes, filled with what DCP never writes
        return f".metadata does not describe its shards ({type(e).__name__})"


def _entries_problem(checkpoint: Path, metadata) -> str | None:
    """Why one of the shards' non-tensor entries (pickled by torch.save: optimizer settings) is more than data."""
    # torch.distributed.checkpoint takes about a second to import: only saving and loading need it
    from torch.distributed.checkpoint.metadata import BytesStorageMetadata

    entries = {fqn for fqn, kind in metadata.state_dict_metadata.items() if isinstance(kind, BytesStorageMetadata)}
    for index, stored in metadata.storage_data.items():
        if index.fqn not in entries or stored.transform_descriptors:  # compressed: checked as DCP loads it
            continue
        if "/" in stored.relative_path or stored.relative_path.startswith("."):
            return f".metadata names a shard outside the checkpoint ({stored.relative_path})"
        with (checkpoint / stored.relative_path).open("rb") as f:
            f.seek(stored.offset)
            data = f.read(stored.length)
        try:
            torch.load(io.BytesIO(data), weights_only=True)
        except pickle.UnpicklingError:
            return f"{stored.relative_path}: {index.fqn} is not plain data (refused unread: it could run code)"
    return None


def read_state(
    state: dict, path: Path, group: dist.ProcessGroup | None = None, *, no_dist: bool = False, trust: bool = False
) -> None:
    """dcp.load of `state` from the checkpoint in `path`, its pickles read as data only (see the module's
    docstring); `trust`: as DCP reads them, running whatever they ask for. `group` and `no_dist`: dcp.load's
    process_group and no_dist (one process without torch.distributed, as an export loads)."""
    # torch.distributed.checkpoint takes about a second to import: only saving and loading need it
    import torch.distributed.checkpoint as dcp

    reader, planner = (None, None) if trust else _data_only_reader(path)
    where = {"no_dist": True} if no_dist else {"process_group": group}
    dcp.load(state, checkpoint_id=str(path), storage_reader=reader, planner=planner, **where)


def load_failure(error: BaseException) -> str:
    """What went wrong in a load, in one line: DCP's CheckpointException (a BaseException) says only which ranks
    failed on its first line; the first rank's own error is what to show."""
    # torch.distributed.checkpoint takes about a second to import: only saving and loading need it
    from torch.distributed.checkpoint.api import CheckpointException

    if isinstance(error, CheckpointException) and error.failures:
        error = next(iter(error.failures.values()))[0]
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__


def _data_only_reader(path: Path):
    """DCP's file system reader and default planner, with their two unpickling steps restricted to data."""
    # torch.distributed.checkpoint takes about a second to import: only saving and loading need it
    from torch.distributed.checkpoint import FileSystemReader
    from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner
    from torch.distributed.checkpoint.metadata import StorageMeta

    class DataOnlyReader(FileSystemReader):
        def read_metadata(self, *args, **kwargs):  # FileSystemReader's, with the restricted unpickler
            metadata = read_metadata(Path(self._get_metadata_path(kwargs.get("rank"))))
            if getattr(metadata, "storage_meta", None) is None:
                metadata.storage_meta = StorageMeta()
            metadata.storage_meta.load_id = self.load_id
            return metadata

    class DataOnlyPlanner(DefaultLoadPlanner):
        def load_bytes(self, read_item, value: io.BytesIO) -> None:
            # Non-tensor entries (optimizer settings): DCP's torch.load(weights_only=False) only ever sees them
            # re-saved from what weights_only=True read.
            checked = io.BytesIO()
            torch.save(torch.load(value, weights_only=True), checked)
            checked.seek(0)
            super().load_bytes(read_item, checked)

    return DataOnlyReader(path), DataOnlyPlanner()


def newest_verified(directory: Path, trust_unlisted: bool = False) -> tuple[Path | None, list[str]]:
    """The newest complete checkpoint (`verify`), and one line for each newer one skipped, saying why."""
    skipped = []
    for path in reversed(step_dirs(directory)):
        problem = verify(path, trust_unlisted)
        if problem is None:
            return path, skipped
        skipped.append(f"skipped checkpoint {path.name}: {problem}")
    return None, skipped


def latest(directory: Path) -> Path | None:
    """The newest complete checkpoint in `directory` (`verify`), or None."""
    return newest_verified(directory)[0]


def save(
    directory: Path,
    state: TrainerState,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    keep: int,
    layout: dict[str, int],
    group: dist.ProcessGroup | None = None,
) -> Path:
    """Write the checkpoint of `state.step`; `layout` (the degrees) tells a resume whether the RNG states fit.
    `group`: what the ranks synchronise on (`checkpoint_group()`, with its longer timeout); None for the default."""
    rank = dist.get_rank()
    final = directory / f"step_{state.step:08d}"
    partial = final.with_name(final.name + ".partial")
    if rank == 0:
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
    dist.barrier(group=group)
    # torch.distributed.checkpoint takes about a second to import: only saving and loading need it
    import torch.distributed.checkpoint as dcp

    model_state, optimizer_state = _state_dicts(model, optimizer)
    dcp.save({"model": model_state, "optimizer": optimizer_state}, checkpoint_id=str(partial), process_group=group)
    torch.save(_rng_state(), partial / f"rng_rank{rank}.pt")
    if rank == 0:
        extra = {"trainer": vars(state), "scheduler": scheduler.state_dict(), "layout": layout}
        torch.save(extra, partial / "trainer_state.pt")
    # Each rank sums the files it wrote, all at once: rank 0 alone would read the whole checkpoint while every rank
    # waits (a 70B model's ~1 TB of weights and Adam states: minutes, near CHECKPOINT_TIMEOUT). The gather is also
    # the barrier after every rank's files.
    summed = [None] * dist.get_world_size(group)
    dist.all_gather_object(summed, _entries(_own_files(partial, rank)), group=group)
    if rank == 0:
        write_manifest(partial, {name: entry for entries in summed for name, entry in entries.items()})
        _replace_dir(partial, final)
        _fsync_dir(directory)
        _prune(directory, keep)
    dist.barrier(group=group)
    return final


def _replace_dir(partial: Path, final: Path) -> None:
    """Rename `partial` to `final`, whatever `final` holds: a directory left there (a damaged checkpoint of this
    step, skipped by the resume that is now saving it again) is moved aside first, then deleted."""
    if final.exists():
        stale = final.with_name(final.name + ".stale.partial")  # ends like a partial: _prune removes it if left
        shutil.rmtree(stale, ignore_errors=True)
        final.rename(stale)
        shutil.rmtree(stale, ignore_errors=True)
    partial.rename(final)


def load(
    path: Path,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    layout: dict[str, int],
    group: dist.ProcessGroup | None = None,
) -> TrainerState:
    """Restore everything `save` wrote, resharded onto this run's `layout` (its degrees) where that differs.
    `group`: as for `save`."""
    # torch.distributed.checkpoint takes about a second to import: only saving and loading need it
    from torch.distributed.checkpoint.state_dict import set_state_dict

    model_state, optimizer_state = _state_dicts(model, optimizer)
    state = {"model": model_state, "optimizer": optimizer_state}
    read_state(state, path, group)  # its pickles as data only: a crafted checkpoint runs no code
    set_state_dict(
        model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optimizer"], options=_by_name()
    )
    extra = torch.load(path / "trainer_state.pt", weights_only=True)  # tensors, plain data and NoiseScale only
    scheduler.load_state_dict(_per_group(extra["scheduler"], len(optimizer.param_groups)))
    # The scheduler saved one base rate per parameter group of the old layout; another layout groups parameters by
    # other meshes and placements (trainer.rank.optim). Every group starts from the same train.lr: take this layout's.
    scheduler.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
    trainer_state = TrainerState(**extra["trainer"])
    if extra["layout"] == layout:
        _set_rng_state(torch.load(path / f"rng_rank{dist.get_rank()}.pt", weights_only=True))
    else:
        log.info("%s was written under layout %s: resharded, RNG streams reseeded", path.name, extra["layout"])
        _reseed(trainer_state.step)
    return trainer_state


def _per_group(scheduler_state: dict, groups: int) -> dict:
    """The scheduler's per-group lists as long as this layout's parameter groups (an expert-parallel layout has
    more: its experts live on a mesh of their own). Every group follows the same schedule, so the first group's
    entries stand for all."""
    state = dict(scheduler_state)
    for key in ("lr_lambdas", "_last_lr"):
        if isinstance(state.get(key), list) and state[key]:
            state[key] = [state[key][0]] * groups
    return state


def _by_name():
    # torch.distributed.checkpoint takes about a second to import: only saving and loading need it
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    return StateDictOptions(flatten_optimizer_state_dict=True)


def _state_dicts(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> tuple[dict, dict]:
    """Model and optimizer state keyed by parameter name (see the module's docstring)."""
    # torch.distributed.checkpoint takes about a second to import: only saving and loading need it
    from torch.distributed.checkpoint.state_dict import get_state_dict

    return get_state_dict(model, optimizer, options=_by_name())


def _rng_state() -> dict:
    """Every generator's state as tensors and plain data, which torch.load reads with weights_only=True: numpy's
    key array as a tensor, not a pickled ndarray."""
    kind, keys, position, has_gauss, gauss = np.random.get_state()
    numpy_state = (kind, torch.from_numpy(keys.astype(np.int64)), position, has_gauss, gauss)
    state = {"python": random.getstate(), "numpy": numpy_state, "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state()
    return state


def _set_rng_state(state: dict) -> None:
    random.setstate(state["python"])
    kind, keys, position, has_gauss, gauss = state["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), position, has_gauss, gauss))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda"])


def _reseed(step: int) -> None:
    """Fresh streams after a layout change: from this rank's seed (set from the run's seed and its data-parallel
    rank before the resume) and the step, so that they repeat neither the run's first steps nor each other."""
    seed = hash((torch.initial_seed(), step)) % 2**32  # ints hash alike in every process
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def _prune(directory: Path, keep: int) -> None:
    """Keep the newest `keep` checkpoints (the one just saved among them); drop older ones and any .partial left by
    an interrupted save. Only manifests are read here: the files were checked by the resume that loaded them, and
    the newest was just written."""
    complete = complete_checkpoints(directory)
    broken = [p for p in step_dirs(directory) if p not in complete and complete and p < complete[-1]]
    stale = [p for p in directory.iterdir() if p.name.endswith(".partial")]
    for old in complete[: max(0, len(complete) - keep)] + broken + stale:
        shutil.rmtree(old, ignore_errors=True)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
