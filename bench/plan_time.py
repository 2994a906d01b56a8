"""How long `meshpilot plan` takes to answer, from the shell prompt back to it, at growing scale.

Each point runs the whole command in a fresh process (Python start-up, imports, the preset's config, every
candidate, the table) as a user would type it, a few times; the median is kept, with the CPU seconds the process
used (a steadier figure than the wall time on a machine shared with other work, and about what the command takes on
an idle one: it runs on one thread) and the load average at the start. The planner's own share is timed in another
fresh process (its first plan: the parameters' shapes, the imports it makes on the way, every candidate; no
start-up). Issue 15 asks for 512 devices and the 405B preset within 5 s; the last point is that
command as written (`--devices 512`, one node), and for it where the time goes (`phases`: each step the command
takes, timed in another fresh process).

    python -m bench.plan_time                        # writes bench/results/plan_time.json
    python -m bench.plan_time --before /tmp/old      # and the same of a checkout of the code before a change

With --before, each run of a point alternates between that checkout and this one, so both see the same load,
and the result keeps both. The checkout must hold trainer/, agent/ and bench/ (this file, or the one it had).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from trainer.host.collector import collector_paused

REPO = Path(__file__).resolve().parent.parent
POINTS = [  # (model preset, devices per node, nodes)
    ("llama-3.1-8b", 8, 1),
    ("llama-3.1-70b", 8, 8),
    ("llama-3.1-405b", 8, 64),
    ("llama-3.1-405b", 512, 1),  # issue 15's command: meshpilot plan --model llama-3.1-405b --devices 512 --gpu h100
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--before", type=Path, help="a checkout of the code before a change, timed alongside")
    args = parser.parse_args()
    trees = {"after": REPO, "before": args.before.resolve()} if args.before else {"after": REPO}
    from bench.machine import write_result  # here: it imports torch, which phases() times

    rows = [measure(model, devices, nodes, args.repeats, trees) for model, devices, nodes in POINTS]
    path = write_result("plan_time", {"gpu": "h100", "repeats": args.repeats, "points": rows})
    print(f"wrote {path}")


def measure(model: str, devices: int, nodes: int, repeats: int, trees: dict[str, Path]) -> dict:
    command = [sys.executable, "-m", "agent.cli", "plan", "--model", model, "--gpu", "h100"]
    command += ["--devices", str(devices), "--nodes", str(nodes), "--top", "3"]
    runs: dict[str, list[tuple[float, float, float]]] = {name: [] for name in trees}
    outputs: dict[str, str] = {}
    for _ in range(repeats):
        for name, tree in trees.items():
            load = os.getloadavg()[0]
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            started = time.perf_counter()
            done = subprocess.run(command, cwd=tree, check=True, capture_output=True, text=True)
            wall = time.perf_counter() - started
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            runs[name].append((wall, cpu, load))
            outputs[name] = done.stdout
    row = {"model": model, "devices": devices * nodes, "devices_per_node": devices, "nodes": nodes}
    for name, tree in trees.items():
        walls, cpus, loads = zip(*runs[name], strict=True)
        figures = {
            "command_s": statistics.median(walls),
            "command_cpu_s": statistics.median(cpus),
            "runs_s": list(walls),
            "runs_cpu_s": list(cpus),
            "load_average": list(loads),
        }
        figures |= in_fresh_process(tree, "planner_only", model, devices, nodes)
        row |= figures if name == "after" else {name: figures}
    if (model, devices, nodes) == POINTS[-1]:  # issue 15's command
        row["phases"] = in_fresh_process(REPO, "phases", model, devices, nodes)
    if "before" in outputs:
        row["same_table"] = outputs["before"] == outputs["after"]
    print(json.dumps(row), flush=True)
    return row


def in_fresh_process(tree: Path, function: str, model: str, devices: int, nodes: int) -> dict:
    """`function` of this file as the code in `tree` has it, in a fresh process (its first plan pays what the
    command's does)."""
    call = f"{function}({model!r}, {devices}, {nodes})"
    code = f"import json; from bench.plan_time import {function}; print(json.dumps({call}))"
    done = subprocess.run([sys.executable, "-c", code], cwd=tree, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def planner_only(model: str, devices: int, nodes: int) -> dict:
    """The planner's share, in this process: the parameters' shapes and every candidate, no start-up."""
    # imported here: phases() times these imports in a fresh process that imports this module first
    from trainer.costs.planner import plan
    from trainer.hardware import Hardware, gpu_preset
    from trainer.model.presets import preset_config, preset_experiment

    experiment = preset_experiment(model, devices * nodes, None, [])
    config = preset_config(experiment.model)
    gpu = gpu_preset("h100")
    hardware = Hardware("cuda", gpu.name, devices, nodes, "nvlink")
    started = time.perf_counter()
    candidates = plan(experiment, config, hardware, gpu.memory_bytes, experiment.data.seq_len)
    return {"plan_s": time.perf_counter() - started, "candidates": len(candidates)}


if __name__ == "__main__":
    main()


def phases(model: str, devices: int, nodes: int) -> dict[str, dict[str, float]]:
    """Where the command's time goes: wall and CPU seconds of each of its steps, in its order, in this process (a
    fresh one), with the cyclic collector paused as `meshpilot plan` pauses it. Python's start-up is what the whole
    command takes beyond their sum (its teardown is skipped)."""
    steps: dict[str, dict[str, float]] = {}
    last = [time.perf_counter(), time.process_time()]

    def done(step: str) -> None:
        now = [time.perf_counter(), time.process_time()]
        steps[step] = {"s": now[0] - last[0], "cpu_s": now[1] - last[1]}
        last[:] = now

    with collector_paused():
        import torch  # noqa: F401

        done("import torch")
        import transformers  # noqa: F401

        done("import transformers")
        from trainer.cli import _make_plan  # noqa: F401
        from trainer.costs.planner import format_table, plan
        from trainer.hardware import planned_hardware
        from trainer.model.presets import preset_config, preset_experiment

        done("import meshpilot's planner")
        experiment = preset_experiment(model, devices * nodes)
        config = preset_config(experiment.model)
        hardware, memory = planned_hardware("cuda", devices, nodes, "h100")
        done("the preset's experiment, config and hardware")
        candidates = plan(experiment, config, hardware, memory, experiment.data.seq_len)
        done("plan: the parameters' shapes, every candidate")
        format_table(candidates, 3)
        done("the table")
    return steps
