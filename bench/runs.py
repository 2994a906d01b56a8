"""Run the real `meshpilot train` for benchmarks and read back what it measured."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from trainer.results.rundir import RunDir

REPO = Path(__file__).resolve().parents[1]

# A small Llama-style model with grouped-query attention: big enough that layers dominate, small enough for CPU.
SMALL_LLAMA = {
    "model_type": "llama",
    "vocab_size": 2048,
    "hidden_size": 128,
    "intermediate_size": 384,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 256,
}


def write_experiment(directory: Path, seq_len: int, global_rows: int, steps: int) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    experiment = {
        "model": {"config": SMALL_LLAMA},
        "tokenizer": "builtin",
        "data": {"train": "builtin:stdlib-docs", "seq_len": seq_len, "packing": True},
        "train": {
            "steps": steps,
            "global_batch_tokens": global_rows * seq_len,
            "micro_batch": 1,
            "lr": 1e-3,
            "warmup_steps": 1,
            "timing_warmup_steps": 2,
            "save_final_checkpoint": False,
        },
    }
    path = directory / "experiment.yaml"
    path.write_text(yaml.safe_dump(experiment))
    return path


def train(experiment: Path, out: Path, nproc: int, layout: str, overrides: list[str], env: dict) -> RunDir:
    """One run; raises with its error output when it fails."""
    sets = [arg for override in overrides for arg in ("--set", override)]
    command = [sys.executable, "-m", "agent.cli", "train", str(experiment), "--out", str(out)]
    command += ["--nproc", str(nproc), "--layout", layout, *sets]
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{layout} {overrides}: {done.stderr.strip()[-2000:]}")
    return RunDir(out)
