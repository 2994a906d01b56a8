"""How long `meshpilot plan` takes to answer, from the shell prompt back to it, at growing scale.

Each point runs the whole command in a fresh process (Python start-up, imports, the meta-device model, every
candidate) as a user would type it, a few times; the median is kept, and the planner's own share is timed in
process. Issue 15 asks for 512 devices and the 405B preset within 5 s.

    python -m bench.plan_time              # writes bench/results/plan_time.json
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.machine import write_result

REPO = Path(__file__).resolve().parent.parent
POINTS = [  # (model preset, devices per node, nodes)
    ("llama-3.1-8b", 8, 1),
    ("llama-3.1-70b", 8, 8),
    ("llama-3.1-405b", 8, 64),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rows = [measure(model, devices, nodes, args.repeats) for model, devices, nodes in POINTS]
    path = write_result("plan_time", {"gpu": "h100", "repeats": args.repeats, "points": rows})
    print(f"wrote {path}")


def measure(model: str, devices: int, nodes: int, repeats: int) -> dict:
    command = [sys.executable, "-m", "agent.cli", "plan", "--model", model, "--gpu", "h100"]
    command += ["--devices", str(devices), "--nodes", str(nodes), "--top", "3"]
    walls = []
    for _ in range(repeats):
        started = time.perf_counter()
        subprocess.run(command, cwd=REPO, check=True, capture_output=True, text=True)
        walls.append(time.perf_counter() - started)
    row = {"model": model, "devices": devices * nodes, "command_s": statistics.median(walls), "runs_s": walls}
    row |= planner_only(model, devices, nodes)
    print(row, flush=True)
    return row


def planner_only(model: str, devices: int, nodes: int) -> dict:
    """The planner's share, in this process: the meta-device model and every candidate, no start-up."""
    from trainer.model import model_config
    from trainer.planner import plan
    from trainer.presets import gpu_preset, preset_experiment
    from trainer.throughput import Hardware

    experiment = preset_experiment(model, devices * nodes, None, [])
    config = model_config(experiment.model, Path(experiment.base_dir))
    gpu = gpu_preset("h100")
    hardware = Hardware("cuda", gpu.name, devices, nodes, "nvlink")
    started = time.perf_counter()
    candidates = plan(experiment, config, hardware, gpu.memory_bytes, experiment.data.seq_len)
    return {"plan_s": time.perf_counter() - started, "candidates": len(candidates)}


if __name__ == "__main__":
    main()
