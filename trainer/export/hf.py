"""A trainer run's checkpoint as a plain transformers model: load it in one process, or save it as an HF directory.

Checkpoints are torch.distributed.checkpoint directories written by every rank of whatever layout trained them
(DDP, FSDP2, TP, ...). DCP reshards on load and needs no process group, so one process reads any of them into an
ordinary model. Only the model's entries are read; optimizer state, RNG states and data position are not needed.

`meshpilot export RUN [--step N]` and `train.save_hf: true` both go through `export_run`: safetensors weights,
config.json, the run's tokenizer and meshpilot.json (provenance), loadable with `from_pretrained`.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sys
import tempfile
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch
from accelerate import init_empty_weights
from torch.distributed.checkpoint.api import CheckpointException
from transformers import AutoModelForCausalLM, PreTrainedModel, PreTrainedTokenizerBase
from transformers.utils import logging as hf_logging
from typing_extensions import TypedDict

from trainer.config import ConfigError, Experiment
from trainer.data.prepare import prepare_data
from trainer.model.build import model_config
from trainer.rank.checkpoint import checkpoint_step, load_failure, newest_verified, read_state, step_dirs, verify
from trainer.rank.loop import load_run
from trainer.results.contracts import STRICT, Contract
from trainer.results.rundir import RunDir
from trainer.results.schemas import METRICS, LaunchInfo

PROVENANCE_FILE = "meshpilot.json"  # in an exported directory: where the weights came from
HF_EXPORT_DIR = "hf"  # RUN/hf: the default export of the latest checkpoint; RUN/hf-step-N: of a chosen step
_STEP_DIR = re.compile(r"^step_\d{8}$")


@dataclass
class RunCheckpoint:
    run: RunDir
    step_dir: Path
    experiment: Experiment
    launch: LaunchInfo
    trust: bool = False  # --trust: its pickles are read as DCP reads them, which can run code


# What a checkpoint without meshpilot's manifest needs: its DCP .metadata is a pickle, and unpickling runs code.
_TRUST_HINT = "; pass --trust to load a checkpoint meshpilot did not write (its .metadata is a pickle: it can run code)"


def _refused(problem: str) -> str:
    return problem + (_TRUST_HINT if "no manifest.json" in problem else "")


def _newest_checkpoint(run: RunDir, trust: bool) -> Path:
    """The newest verified checkpoint (trainer.rank.checkpoint.verify); each newer one skipped is said on stderr."""
    found, skipped = newest_verified(run.checkpoints, trust_unlisted=trust)
    for line in skipped:
        print(f"meshpilot: {line}", file=sys.stderr)
    if found is None:
        why = f" ({_refused(skipped[0])})" if skipped else ""
        raise ConfigError(f"{run.path}: no complete checkpoint in {run.checkpoints}{why}")
    return found


def find_checkpoint(path: Path, trust: bool = False) -> RunCheckpoint:
    """A run directory (its latest complete checkpoint) or one of its checkpoint/step_NNNNNNNN directories.
    `trust`: accept a checkpoint meshpilot did not write (no manifest), whose pickled .metadata is then read."""
    path = Path(path).resolve()
    if _STEP_DIR.match(path.name) and path.parent.name == "checkpoint":
        run, step_dir = RunDir(path.parent.parent), path
        problem = verify(step_dir, trust_unlisted=trust)
        if problem is not None:
            raise ConfigError(f"{step_dir}: not a complete checkpoint: {_refused(problem)}")
    else:
        run = RunDir(path)
        step_dir = _newest_checkpoint(run, trust)
    if not run.config.is_file() or not run.launch.is_file():
        raise ConfigError(f"{run.path}: not a meshpilot run directory (no config.yaml and launch.json)")
    experiment, launch = load_run(run)
    return RunCheckpoint(run, step_dir, experiment, launch, trust)


def load_model(found: RunCheckpoint) -> PreTrainedModel:
    """The checkpoint's weights in an ordinary single-process model, fp32, in eval mode."""
    config = model_config(found.experiment.model, Path(found.experiment.base_dir))
    # Empty parameters (no random init to throw away); real buffers, such as rotary inv_freq, which no checkpoint holds.
    with init_empty_weights():
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32, attn_implementation="sdpa")
    state = {name: torch.empty(t.shape, dtype=t.dtype) for name, t in model.state_dict().items()}
    try:
        with warnings.catch_warnings():  # DCP warns that it loads in one process, which is the point here
            warnings.filterwarnings("ignore", message="torch.distributed is disabled")
            read_state({"model": state}, found.step_dir, no_dist=True, trust=found.trust)
    except (Exception, CheckpointException) as e:  # missing keys, shape mismatches, a shard changed since verified
        raise ConfigError(f"{found.step_dir}: cannot load the model: {load_failure(e)}") from None
    model.load_state_dict(state, assign=True, strict=True)
    model.tie_weights()  # the state holds tied weights twice; assign=True replaced the shared tensor by two copies
    return model.eval()


def load_run_tokenizer(found: RunCheckpoint) -> tuple[PreTrainedTokenizerBase, Path]:
    """The tokenizer the run trained with, rebuilt as the launcher built it and checked to be the same one, and the
    tokenized training data (rebuilt too if the cache lost it)."""
    experiment, launch = found.experiment, found.launch
    data = prepare_data(experiment, model_config(experiment.model, Path(experiment.base_dir)))
    tokenizer, data_dir = data.tokenizer, data.data_dir
    # The launcher named the tokenized data by the data and tokenizer fingerprints: the same name, the same tokenizer.
    if data_dir.name != Path(launch["data_dir"]).name:
        raise ConfigError(
            f"{found.run.path}: its tokenizer cannot be rebuilt (the training data or tokenizer changed since the "
            "run); export the model while they are unchanged"
        )
    return tokenizer, data_dir


class Provenance(TypedDict):
    """meshpilot.json beside exported weights: what produced them (the benchmark suite records it)."""

    __pydantic_config__ = STRICT
    run: str
    checkpoint: str  # step_NNNNNNNN
    config_hash: str
    git_commit: str | None
    seed: int
    data_dir: str | None


PROVENANCE = Contract(PROVENANCE_FILE, Provenance)


def provenance(found: RunCheckpoint) -> Provenance:
    """What produced the weights: the run, its checkpoint, config hash, experiment commit, seed and training data."""
    metrics = found.run.read_metrics() or {}
    return {
        "run": str(found.run.path),
        "checkpoint": found.step_dir.name,
        "config_hash": metrics.get("config_hash") or found.experiment.config_hash(),
        "git_commit": found.launch.get("git_commit"),
        "seed": found.experiment.train.seed,
        "data_dir": found.launch.get("data_dir"),
    }


@contextlib.contextmanager
def quiet_progress() -> Iterator[None]:
    """No transformers progress bars (loading, writing shards): command output stays one line per result."""
    enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if enabled:
            hf_logging.enable_progress_bar()


def export_hf(path: Path, out: Path) -> Path:
    """Save a run's (or checkpoint's) model and tokenizer as an HF directory, with the run's provenance beside them."""
    found = find_checkpoint(path)
    out = Path(out)
    check_out_dir(out)
    return _write_hf(found, out)


def export_run(run_dir: Path, step: int | None = None, out: Path | None = None, trust: bool = False) -> Path:
    """Save the run's checkpoint of `step` (default: its latest complete one) as an HF directory and return it.

    `out` defaults to RUN/hf, or RUN/hf-step-N for a chosen step; it must not exist, or be empty. Every check on the
    arguments runs before the tokenizer and the weights are read, and raises ConfigError in one line. `trust`: as
    find_checkpoint's.
    """
    run = RunDir(Path(run_dir).resolve())
    if not run.config.is_file() or not run.launch.is_file():
        raise ConfigError(f"{run.path}: not a meshpilot run directory (no config.yaml and launch.json)")
    step_dir = _chosen_checkpoint(run, step, trust)
    out = Path(out) if out is not None else run.path / (HF_EXPORT_DIR if step is None else f"hf-step-{step}")
    check_out_dir(out)
    experiment, launch = load_run(run)
    return _write_hf(RunCheckpoint(run, step_dir, experiment, launch, trust), out)


def save_hf_after_run(run: RunDir) -> dict:
    """`train.save_hf`: export a finished run's final checkpoint to RUN/hf and name it in metrics.json as
    `hf_export`; the updated metrics are returned. An export that fails leaves `hf_export` null and its reason in
    `hf_export_error`: the training itself succeeded and its checkpoint is intact, so `meshpilot export` can retry."""
    metrics = run.read_metrics()
    try:
        # The final step explicitly: with save_final_checkpoint off, the latest checkpoint may be an earlier one.
        out = export_run(run.path, step=metrics["steps"], out=run.path / HF_EXPORT_DIR)
        metrics |= {"hf_export": str(out), "hf_export_error": None}
    except (ConfigError, OSError) as e:
        metrics |= {"hf_export": None, "hf_export_error": str(e).strip().splitlines()[0]}
    METRICS.write(run.metrics, metrics)
    return metrics


def _chosen_checkpoint(run: RunDir, step: int | None, trust: bool) -> Path:
    if step is None:
        return _newest_checkpoint(run, trust)
    steps = [checkpoint_step(p) for p in step_dirs(run.checkpoints)]
    if step not in steps:
        if not steps:
            raise ConfigError(f"{run.path}: no complete checkpoint in {run.checkpoints}")
        have = ", ".join(map(str, steps))
        raise ConfigError(f"{run.path} has no complete checkpoint of step {step}; it has step(s) {have}")
    chosen = run.checkpoints / f"step_{step:08d}"
    problem = verify(chosen, trust_unlisted=trust)
    if problem is not None:
        raise ConfigError(f"{chosen}: not a complete checkpoint: {_refused(problem)}")
    return chosen


def check_out_dir(out: Path) -> None:
    """An export goes into a new or an empty directory: it never mixes its files with others or replaces a model."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(f"{out} exists and is not an empty directory; export into a new or empty one")


def _write_hf(found: RunCheckpoint, out: Path) -> Path:
    """Model, tokenizer and provenance, written aside and renamed into place when complete: a failed export leaves
    no directory that looks like a model."""
    tokenizer, data_dir = load_run_tokenizer(found)
    model = load_model(found)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent))
    try:
        os.chmod(staging, 0o755)  # mkdtemp's 0700 would make the model readable by its owner only
        with quiet_progress():
            model.save_pretrained(str(staging), safe_serialization=True)
        tokenizer.save_pretrained(str(staging))
        PROVENANCE.write(staging / PROVENANCE_FILE, {**provenance(found), "data_dir": str(data_dir)})
        try:
            staging.rename(out)  # replaces an empty directory; refused if something was written there meanwhile
        except OSError as e:
            raise ConfigError(f"{out}: cannot move the export into place: {e.strerror}") from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return out


def read_provenance(model_dir: Path) -> Provenance | None:
    return PROVENANCE.read(Path(model_dir) / PROVENANCE_FILE)
