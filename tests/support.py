"""Helpers for tests: tiny experiments and running the CLI as a user would."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path
from subprocess import PIPE

import hung
import preloaded
import yaml

REPO = Path(__file__).resolve().parents[1]

TINY_MODEL = {
    "model_type": "llama",
    "vocab_size": 512,
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,  # grouped-query attention
    "max_position_embeddings": 128,
}

TINY_EXPERIMENT = {
    "model": {"config": TINY_MODEL},
    "tokenizer": "builtin",
    "data": {"train": "builtin:stdlib-docs", "seq_len": 64, "packing": True},
    "train": {"steps": 3, "global_batch_tokens": 512, "micro_batch": 2, "lr": 1.0e-3, "warmup_steps": 1},
    # Pinned: on a machine with a GPU, "auto" would turn every test run into a CUDA run (tests/test_cuda.py has those).
    "hardware": {"device_type": "cpu"},
}

# Llama 3.1 8B's shape, for the memory model and the planner (no weights are read; no preset ships with meshpilot).
LLAMA_8B = {
    "model_type": "llama",
    "vocab_size": 128256,
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "max_position_embeddings": 131072,
}


def write_experiment(directory: Path, changes: dict | None = None, name: str = "meshpilot.yaml") -> Path:
    """Write the tiny experiment with `changes` merged in (nested dicts merge, other values replace)."""
    experiment = copy.deepcopy(TINY_EXPERIMENT)
    _merge(experiment, changes or {})
    path = directory / name
    path.write_text(yaml.safe_dump(experiment))
    return path


def _merge(into: dict, changes: dict) -> None:
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


# What the session's cache (tests/conftest.py) holds that any run may share: built-in tokenizers and tokenized data,
# the same files whatever else the cache holds. Not calibration: records are per cache, and some tests count theirs.
PREPARED_DATA = ("tokenizers", "tokenized")


def cache_sharing_prepared_data(path: Path) -> Path:
    """A new cache directory `path` of its own (calibration and all), whose tokenizers and tokenized data are the
    session cache's: a run with it prepares no data the session already has (seconds of CPU each time)."""
    path.mkdir(parents=True, exist_ok=True)
    session = Path(os.environ["MESHPILOT_CACHE"])
    for kind in PREPARED_DATA:
        (session / kind).mkdir(parents=True, exist_ok=True)
        (path / kind).symlink_to(session / kind, target_is_directory=True)
    return path


def train(experiment: Path, out: Path, *args: str, env: dict | None = None):
    """`meshpilot train EXPERIMENT --out OUT ARGS`, which must succeed; its run directory."""
    from trainer.results.rundir import RunDir

    done = meshpilot("train", str(experiment), "--out", str(out), *args, env=env)
    run = RunDir(out)
    # What the ranks printed goes with a failure: CI keeps no run directories. A rank killed by a signal dumps its
    # stacks after "Fatal Python error" (faulthandler): its start says where, and the end is the launcher's.
    printed = run.torchrun_log.read_text(errors="replace") if run.torchrun_log.is_file() else ""
    fatal = printed.find("Fatal Python error")
    shown = (printed[max(0, fatal - 2000) : fatal + 3000] + "\n[...]\n") if fatal >= 0 else ""
    assert done.returncode == 0, f"{done.stderr[-3000:]}\n--- torchrun.log ---\n{shown}{printed[-4000:]}"
    assert "run ok" in done.stdout
    return run


def meshpilot(*args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run the `meshpilot` command line in a process of its own: forked from a preloaded one where that runs it
    exactly as a fresh interpreter would (tests/preloaded.py), else a fresh interpreter."""
    full_env = {**os.environ, **(env or {})}
    if args[:1] == ("plan",):  # numpy's BLAS on one thread, as the preloaded process has it: forked or fresh alike
        full_env.setdefault("OPENBLAS_NUM_THREADS", "1")
    if preloaded.serves(args, full_env):
        return preloaded.run(args, full_env, timeout)
    command = [sys.executable, "-m", "agent.cli", *args]
    with subprocess.Popen(command, cwd=REPO, env=full_env, stdout=PIPE, stderr=PIPE, text=True) as process:
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            where = hung.stacks(process.pid)
            process.kill()
            raise hung.Hung(command, timeout, *process.communicate(), where) from None
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def expert_groups(ep: int) -> tuple:
    """(the ep group, the group of ranks holding the same experts) of this process group's ranks, from the trainer's
    own expert mesh (trainer.layout.expert_mesh) with data parallelism over every rank: ep innermost."""
    import torch.distributed as dist  # most tests that import support never start torch

    from trainer.layout import Layout, expert_mesh

    world = dist.get_world_size()
    mesh = expert_mesh(Layout.parse(f"dp_shard={world},ep={ep}").resolve(world), "cpu")
    return mesh.get_group("ep"), mesh.get_group("dp_shard_mod_ep")
