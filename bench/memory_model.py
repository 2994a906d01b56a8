"""Predicted against measured memory per rank for every layout the trainer runs on CPU.

On CPU the measurement is exact for parameters, gradients and optimizer state (the bytes of each rank's local
shards) and for activations (the peak of bytes saved for backward, through saved-tensor hooks). The process's
peak resident set is recorded too, but it includes the interpreter and libraries, so it is not compared.

    python -m bench.memory_model            # writes bench/results/memory_model.json
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

from bench.machine import write_result
from bench.runs import train, write_experiment

CATEGORIES = ("parameters", "gradients", "optimizer", "activations_saved")
LAYOUTS = [  # (name, processes, layout, overrides)
    ("single", 1, "dp_replicate=1", []),
    ("DDP", 2, "dp_replicate=2", []),
    ("FSDP2", 2, "dp_shard=2", []),
    ("FSDP2 + AC", 2, "dp_shard=2", ["train.activation_checkpointing=true"]),
    ("TP", 2, "tp=2", []),
    ("PP 1F1B", 2, "pp=2", []),
    ("PP GPipe", 2, "pp=2", ["train.pp_schedule=gpipe"]),
    ("PP interleaved", 2, "pp=2", ["train.pp_schedule=interleaved_1f1b", "train.pp_stages_per_rank=2"]),
    ("FSDP2 x TP", 4, "dp_shard=2,tp=2", []),
    ("HSDP", 4, "dp_replicate=2,dp_shard=2", []),
    ("PP x FSDP2", 4, "pp=2,dp_shard=2", []),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--rows", type=int, default=16, help="rows per optimizer step")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "MESHPILOT_CACHE": os.environ.get("MESHPILOT_CACHE", str(Path(tmp) / "cache"))}
        experiment = write_experiment(Path(tmp), args.seq_len, args.rows, steps=3)
        rows = []
        for name, nproc, layout, overrides in LAYOUTS:
            run = train(experiment, Path(tmp) / name.replace(" ", "_"), nproc, layout, overrides, env)
            rows.append({"name": name, "layout": layout, "overrides": overrides, **compare(run.memory)})
            print(table_row(rows[-1]), flush=True)
    write_result(
        "memory_model",
        {"seq_len": args.seq_len, "rows_per_step": args.rows, "micro_batch": 1, "layouts": rows},
    )


def compare(memory_file: Path) -> dict:
    memory = json.loads(memory_file.read_text())
    ranks = []
    for predicted, measured in zip(memory["predicted"], memory["measured"], strict=True):
        ranks.append(
            {
                "rank": measured["rank"],
                "predicted": {c: predicted[c] for c in CATEGORIES},
                "measured": {c: measured[c] for c in CATEGORIES},
                "measured_rss_peak": measured["peak"],
            }
        )
    worst = max(ranks, key=lambda r: abs(_error(r, "activations_saved")))
    return {
        "ranks": ranks,
        "state_exact": all(r["predicted"][c] == r["measured"][c] for r in ranks for c in CATEGORIES[:3]),
        "worst_activation_error": _error(worst, "activations_saved"),
        "worst_total_error": max((_total_error(r) for r in ranks), key=abs),
    }


def _error(rank: dict, category: str) -> float:
    return rank["predicted"][category] / rank["measured"][category] - 1


def _total_error(rank: dict) -> float:
    return sum(rank["predicted"].values()) / sum(rank["measured"].values()) - 1


def table_row(row: dict) -> str:
    exact = "exact" if row["state_exact"] else "MISMATCH"
    measured = max(sum(r["measured"].values()) for r in row["ranks"])
    return (
        f"| {row['name']} | `{row['layout']}` | {exact} | {row['worst_activation_error']:+.1%} | "
        f"{row['worst_total_error']:+.1%} | {measured / 2**20:.2f} |"
    )


if __name__ == "__main__":
    main()
