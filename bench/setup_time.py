"""Set-up time per rank: building a Llama-3.2-1B-shaped model (random init) under FSDP2 on 1, 2 and 4 CPU processes,
the way before against shard-local initialisation (trainer.model.build.materialize).

- before: every rank makes each module's full tensors on the CPU, one thread (torchrun's OMP_NUM_THREADS=1), and
  keeps its shard (`materialize(..., shard_local=False)`);
- after: every rank fills only the tiles of its own shard, with its share of the cores (`shard_local=True`);
- after_one_thread: the same on one thread, which tells the two changes apart (left out where one thread is the
  rank's share anyway).

Each process times its own set-up (meta-device model, FSDP2 wrapping, memory and values) and the figure kept is
the slowest rank's. The processes share this machine's cores, so more processes are not free: on a machine with
fewer cores than processes they compete, as ranks on one node do. Both ways give every rank the same shapes, and
the after way the single-process values (tests/test_sharded_build.py); only the time is measured here.

    python -m bench.setup_time [--quick] [--processes 1 2 4] [--repeats 2] [--out FILE]

Run from the repository root. Writes bench/results/setup_time.json (or --out).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from bench.machine import RESULTS, describe_machine
from trainer.config import TrainSpec
from trainer.layout import Layout
from trainer.model.build import materialize, meta_model, setup_thread_count
from trainer.model.parameters import count_parameters
from trainer.model.presets import model_preset
from trainer.parallel.parallelize import parallelize

MODEL = "llama-3.2-1b"
QUICK = {"model_type": "llama", "vocab_size": 4096, "hidden_size": 512, "intermediate_size": 1024,
         "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 4}  # fmt: skip
# (materialize's shard_local, whether the rank takes its share of the cores): the way before, the way now, and the
# way now on one thread, which tells the two changes apart (on a machine shared with other work, more threads than
# free cores can cost more than they give).
WAYS = {"before": (False, False), "after": (True, True), "after_one_thread": (True, False)}
# Each rank is forked from a forkserver that imported these once (not this module itself: run as a script, each rank
# runs it again as __mp_main__), where a spawned rank spent seconds of CPU importing them, every row and repeat. Only
# the set-up after the barrier is timed, so where a rank starts from changes no figure; the server has run no torch
# operation (no OpenMP thread pool to inherit).
RANK_IMPORTS = ("torch.distributed", "transformers", "trainer.model.build", "trainer.parallel.parallelize")


def _config(quick: bool):
    # transformers only when a config is made
    from transformers import AutoConfig

    values = dict(QUICK if quick else model_preset(MODEL))
    return AutoConfig.for_model(values.pop("model_type"), **values)


def _rank(rank: int, world: int, store: str, quick: bool, way: str, results) -> None:
    # As torchrun starts a rank: one thread, LOCAL_WORLD_SIZE ranks on the node (so many that the share of the cores
    # is one thread where the way keeps one thread throughout, as the way before did).
    shard_local, share_of_cores = WAYS[way]
    torch.set_num_threads(1)
    os.environ["LOCAL_WORLD_SIZE"] = str(world if share_of_cores else 10**6)
    dist.init_process_group("gloo", store=dist.FileStore(store, world), rank=rank, world_size=world)
    try:
        config = _config(quick)
        cpu = torch.device("cpu")
        fill = partial(materialize, device=cpu, config=config, weights=None, seed=0, shard_local=shard_local)
        dist.barrier()
        started = time.perf_counter()
        layout = Layout.parse(f"dp_shard={world}").resolve(world)
        model = meta_model(config)
        if world > 1:
            parallelize(model, layout, layout.build_mesh("cpu"), TrainSpec(precision="fp32"), "cpu", fill)
        else:
            fill(model)
        seconds = time.perf_counter() - started
        gathered = [None] * world
        dist.all_gather_object(gathered, (seconds, setup_thread_count() if shard_local else 1))
        if rank == 0:
            results.put(gathered)
    finally:
        dist.destroy_process_group()
    # Without the interpreter's teardown, as trainer.launch.torchrun ends: torch's threads at teardown aborted a rank
    # now and then once its work was done ("terminate called without an active exception", SIGABRT).
    os._exit(0)


def measure(processes: int, way: str, quick: bool, repeats: int) -> dict:
    """Every rank's set-up seconds for one way on `processes` processes, in the repeat whose slowest rank was
    fastest (the machine is shared: the least disturbed run), with the threads each rank drew its tiles with."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(RANK_IMPORTS))
    runs = []
    for _ in range(repeats):
        results = context.SimpleQueue()
        with tempfile.TemporaryDirectory() as directory:
            args = (processes, str(Path(directory) / "store"), quick, way, results)
            mp.start_processes(_rank, args=args, nprocs=processes, start_method="forkserver")
        runs.append(results.get())
    slowest = [max(seconds for seconds, _ in run) for run in runs]
    best = runs[slowest.index(min(slowest))]
    return {"processes": processes, "way": way, "threads_per_rank": best[0][1],
            "rank_seconds": [seconds for seconds, _ in best], "slowest_rank_s": min(slowest),
            "repeats_slowest_rank_s": slowest}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a 2-layer model instead of Llama-3.2-1B's shape")
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--repeats", type=int, default=2, help="runs of each row; the least disturbed is kept")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.repeats < 1:
        print(f"setup_time: error: --repeats {args.repeats}: must be at least 1", file=sys.stderr)
        return 2
    if any(n < 1 for n in args.processes):
        print(f"setup_time: error: --processes {' '.join(map(str, args.processes))}: each must be at least 1",
              file=sys.stderr)  # fmt: skip
        return 2
    config = _config(args.quick)
    rows = []
    for processes in args.processes:
        for way in WAYS:
            if way == "after_one_thread" and rows[-1]["threads_per_rank"] == 1:
                continue  # one thread is already this rank's share of the cores: the row above
            rows.append(measure(processes, way, args.quick, args.repeats))
            print(f"{processes} process(es), {way}: slowest rank {rows[-1]['slowest_rank_s']:.2f} s", flush=True)
    result = {
        "model": "quick" if args.quick else MODEL,
        "parameters": count_parameters(config)["total"],
        "layout": "dp_shard=N (FSDP2), N CPU processes on this machine",
        "rows": rows,
    }
    path = args.out or RESULTS / "setup_time.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"benchmark": "setup_time", "machine": describe_machine(), **result}, indent=1) + "\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
