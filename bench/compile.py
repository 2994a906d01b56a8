"""train.compile on CPU processes (inductor's C++ backend): tokens/s compiled against eager, and the compilation
time reported apart, for one process and for two (DDP and FSDP2).

Every point is a real `meshpilot train` run of the small Llama (packed rows of the built-in corpus). Eager and
compiled runs alternate, `--repeats` times each, and the median tokens/s is kept, so that a drift of the machine's
speed touches both alike. Compilation happens in the untimed warm-up steps; tokens/s is measured after them.
Run it on a quiet machine.

    python -m bench.compile                  # writes bench/results/compile.json
    python -m bench.compile --quick          # a small setting, to check that it runs
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from pathlib import Path

from bench.machine import RESULTS, describe_machine
from bench.runs import train, write_experiment
from trainer.results.contracts import write_json

FULL = {"seq_len": 256, "global_rows": 16, "steps": 10, "repeats": 2}
QUICK = {"seq_len": 128, "global_rows": 4, "steps": 5, "repeats": 1}
LAYOUTS = {"dp_replicate=1": 1, "dp_replicate=2": 2, "dp_shard=2": 2}  # layout: processes
TIMING_WARMUP = 3  # the first steps compile (forward in step 1, backward when it first runs)


def measure(experiment: Path, out: Path, layout: str, compiled: bool, env: dict) -> dict:
    overrides = [f"train.compile={str(compiled).lower()}", f"train.timing_warmup_steps={TIMING_WARMUP}"]
    run = train(experiment, out, LAYOUTS[layout], layout, overrides, env)
    metrics, steps = run.read_metrics(), run.read_steps()
    return {
        "tokens_per_s": metrics["tokens_per_s"],
        "compile_s": metrics.get("compile_s"),
        "first_step_s": steps[0]["step_s"],
        "losses": [s["loss"] for s in steps],
    }


def compare(experiment: Path, directory: Path, layout: str, repeats: int, env: dict) -> dict:
    runs: dict[str, list[dict]] = {"eager": [], "compiled": []}
    for repeat in range(repeats):
        for mode in runs:
            out = directory / f"{layout.replace(',', '_').replace('=', '')}-{mode}-{repeat}"
            runs[mode].append(measure(experiment, out, layout, mode == "compiled", env))
    eager = statistics.median(r["tokens_per_s"] for r in runs["eager"])
    compiled = statistics.median(r["tokens_per_s"] for r in runs["compiled"])
    losses = zip(runs["eager"][0]["losses"], runs["compiled"][0]["losses"], strict=True)
    return {
        "layout": layout,
        "processes": LAYOUTS[layout],
        "eager_tokens_per_s": eager,
        "compiled_tokens_per_s": compiled,
        "speedup": compiled / eager,
        "compile_s": statistics.median(r["compile_s"] for r in runs["compiled"]),
        "max_loss_rel_diff": max(abs(c - e) / abs(e) for e, c in losses),
        "runs": runs,
    }


def table_row(point: dict) -> str:
    return (
        f"| {point['layout']} | {point['processes']} | {point['eager_tokens_per_s']:,.0f} | "
        f"{point['compiled_tokens_per_s']:,.0f} | {point['speedup']:.2f}x | {point['compile_s']:.1f} | "
        f"{point['max_loss_rel_diff']:.1e} |"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", type=Path, default=RESULTS / "compile.json")
    args = parser.parse_args(argv)
    setting = QUICK if args.quick else FULL
    points = []
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "MESHPILOT_CACHE": os.environ.get("MESHPILOT_CACHE", str(Path(tmp) / "cache"))}
        experiment = write_experiment(Path(tmp), setting["seq_len"], setting["global_rows"], setting["steps"])
        for layout in LAYOUTS:
            points.append(compare(experiment, Path(tmp), layout, setting["repeats"], env))
            print(table_row(points[-1]), flush=True)
    write_json(args.out, {"machine": describe_machine(), "setting": setting, "points": points})
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
