"""Context parallelism on CPU processes: activation memory per rank and tokens/s against sequence length, for
cp = 1, 2, 4, with the memory model's prediction beside each measurement.

Every point is a real `meshpilot train` run (gloo, one process per cp rank, packed rows of the built-in corpus,
two rows per optimizer step, one row per micro-batch). Activations are the peak bytes saved for backward on the
rank that saves the most (saved-tensor hooks: exact, load-independent); tokens/s is measured over the steps after
the timing warm-up and depends on the machine and its load, so run it on a quiet machine.

    python -m bench.context_parallel                  # writes bench/results/context_parallel.json
    python -m bench.context_parallel --quick          # a small setting, to check that it runs
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

import yaml

from bench.machine import RESULTS, describe_machine
from bench.runs import SMALL_LLAMA, train
from trainer.results.rundir import RunDir

FULL = {"seq_lens": [512, 1024, 2048, 4096], "cps": [1, 2, 4], "steps": 5}
QUICK = {"seq_lens": [128, 256], "cps": [1, 2], "steps": 3}
ROWS_PER_STEP = 2


def write_experiment(directory: Path, seq_len: int, steps: int) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    experiment = {
        "model": {"config": {**SMALL_LLAMA, "max_position_embeddings": seq_len}},
        "tokenizer": "builtin",
        "data": {"train": "builtin:stdlib-docs", "seq_len": seq_len, "packing": True},
        "train": {
            "steps": steps,
            "global_batch_tokens": ROWS_PER_STEP * seq_len,
            "micro_batch": 1,
            "lr": 1e-3,
            "warmup_steps": 1,
            "timing_warmup_steps": 2,
            "gns_every": 0,
            "save_final_checkpoint": False,
        },
    }
    path = directory / "experiment.yaml"
    path.write_text(yaml.safe_dump(experiment))
    return path


def measure(run_dir: Path) -> dict:
    """Activations of the rank that saves the most, predicted and measured, and the run's tokens/s."""
    run = RunDir(run_dir)
    memory, metrics = run.read_memory(), run.read_metrics()
    pairs = list(zip(memory["predicted"], memory["measured"], strict=True))
    predicted, measured = max(pairs, key=lambda p: p[1]["activations_saved"])
    return {
        "activations_measured": measured["activations_saved"],
        "activations_predicted": predicted["activations_saved"],
        "activation_error": predicted["activations_saved"] / measured["activations_saved"] - 1,
        "peak_rss_bytes": max(metrics["peak_mem_bytes"]),
        "tokens_per_s": metrics["tokens_per_s"],
        "timed_steps": metrics["timed_steps"],
        "final_loss": metrics["final_loss"],
    }


def table_row(point: dict) -> str:
    return (
        f"| {point['seq_len']} | {point['cp']} | {point['activations_measured'] / 2**20:.2f} | "
        f"{point['activations_predicted'] / 2**20:.2f} | {point['activation_error']:+.1%} | "
        f"{point['tokens_per_s']:,.0f} |"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="two short sequences, cp 1 and 2, 3 steps")
    parser.add_argument("--out", type=Path, default=RESULTS / "context_parallel.json")
    args = parser.parse_args(argv)
    setting = QUICK if args.quick else FULL
    points = []
    print("| seq_len | cp | activations MiB/rank | predicted | error | tokens/s |", flush=True)
    print("|---:|---:|---:|---:|---:|---:|", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "MESHPILOT_CACHE": os.environ.get("MESHPILOT_CACHE", str(Path(tmp) / "cache"))}
        for seq_len in setting["seq_lens"]:
            experiment = write_experiment(Path(tmp) / f"s{seq_len}", seq_len, setting["steps"])
            for cp in setting["cps"]:
                out = Path(tmp) / f"s{seq_len}-cp{cp}"
                layout = f"cp={cp}" if cp > 1 else "dp_replicate=1"
                run = train(experiment, out, cp, layout, [], env)
                points.append({"seq_len": seq_len, "cp": cp, **measure(run.path)})
                print(table_row(points[-1]), flush=True)
    result = {
        "benchmark": "context_parallel",
        "machine": describe_machine(),
        "setup": {"model": SMALL_LLAMA, "rows_per_step": ROWS_PER_STEP, "micro_batch": 1, **setting},
        "note": "tokens/s depends on the machine's load; activations are exact saved-for-backward bytes",
        "points": points,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
