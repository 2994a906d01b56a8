"""A sweep's trials started from a forkserver (agent.jobs.forkserver) against spawned as fresh interpreters.

The same small sweep (the built-in example model, a few steps per trial on this machine's CPU processes) is run by
`meshpilot sweep --no-prune` (every trial runs all its steps, either way) with the forkserver on and off
(MESHPILOT_FORKSERVER=0) in turn, after one unmeasured sweep that prepares the data; the figure is each sweep's wall
time, from the command's start to its exit, and its median per way. Both ways train the same trials (the sweep's
tests check the forked ones' losses); only where each trial's supervisor and launcher start from differs.

    python -m bench.sweep_start [--trials 4] [--trial-steps 3] [--repeats 3] [--out FILE]

Run from the repository root. Writes bench/results/sweep_start.json (or --out).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from bench.machine import RESULTS, describe_machine
from trainer.config import load_experiment

EXAMPLE = Path(__file__).resolve().parents[1] / "trainer" / "examples" / "tiny_llama.yaml"
WAYS = {"forked": "1", "spawned": "0"}  # MESHPILOT_FORKSERVER


def _experiment(directory: Path, trials: int, trial_steps: int) -> Path:
    experiment = yaml.safe_load(EXAMPLE.read_text())
    experiment["search"] = {"trials": trials, "trial_steps": trial_steps, "layouts": ["dp_shard=2", "dp_replicate=2"]}
    path = directory / "meshpilot.yaml"
    path.write_text(yaml.safe_dump(experiment))
    load_experiment(path)  # a mistake here, not in every sweep
    return path


def _sweep(experiment: Path, out: Path, forkserver: str) -> float:
    """One `meshpilot sweep`, its wall seconds; raises where it failed or a trial did not end ok."""
    started = time.monotonic()
    subprocess.run(
        [sys.executable, "-m", "agent.cli", "sweep", str(experiment), "--out", str(out), "--no-prune"],
        env={**os.environ, "MESHPILOT_FORKSERVER": forkserver},
        check=True,
        capture_output=True,
    )
    seconds = time.monotonic() - started
    summary = json.loads((out / "summary.json").read_text())
    failed = [t["id"] for t in summary["trials"] if t["status"] != "ok"]
    if failed:
        raise RuntimeError(f"trials {failed} of {out} did not end ok")
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=4)
    parser.add_argument("--trial-steps", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3, help="sweeps per way, taken in turn")
    parser.add_argument("--out", type=Path, default=RESULTS / "sweep_start.json")
    args = parser.parse_args(argv)
    seconds: dict[str, list[float]] = {way: [] for way in WAYS}
    with tempfile.TemporaryDirectory(prefix="meshpilot-sweep-start-") as scratch:
        directory = Path(scratch)
        experiment = _experiment(directory, args.trials, args.trial_steps)
        _sweep(experiment, directory / "warm-up", "0")  # prepares the tokenizer and data for every later sweep
        for repeat in range(args.repeats):
            for way, forkserver in WAYS.items():
                seconds[way].append(_sweep(experiment, directory / f"{way}-{repeat}", forkserver))
                print(f"{way} {repeat}: {seconds[way][-1]:.1f} s", flush=True)
    median = {way: statistics.median(values) for way, values in seconds.items()}
    result = {
        "benchmark": "sweep_start",
        "machine": describe_machine(),
        "trials": args.trials,
        "trial_steps": args.trial_steps,
        "layouts": ["dp_shard=2", "dp_replicate=2"],
        "sweep_wall_s": seconds,
        "median_s": median,
        "per_trial_saved_s": (median["spawned"] - median["forked"]) / args.trials,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({"median_s": median, "per_trial_saved_s": result["per_trial_saved_s"]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
