"""FSDP2's all-gathers and reduce-scatters in each optimizer step of a prepared run, for each ZeRO stage.

Run under torchrun (`python -m torch.distributed.run --nproc-per-node N fsdp_collectives.py RUN_DIR OUT SPEC...`)
on a copy of a run directory the launcher prepared (set-up rewrites its steps.jsonl): each rank builds the run's
training with the trainer's own set-up (trainer.rank.loop: model split and wrapped for the layout, optimizer, data)
for each SPEC in turn (a ZeRO stage, then optionally train settings: "1,precision=bf16,fsdp_reduce_dtype=bf16"),
takes two optimizer steps with the trainer's own step function, and counts the collectives each step dispatches
(every c10d operation passes through a dispatch mode: `CountedCollectives`; torch's CommDebugMode does the same, but
its module tracker fails on FSDP2's hooks in torch 2.13), the bytes its reduce-scatters take in, and the bytes of
the parameters FSDP2 holds gathered at the end of each forward, or in a pipeline as each stage's forward begins
(it registers the gathered ones on the modules in place of the shards while they are gathered). Rank 0 writes
{spec: [{collective: count, ..., "reduced_bytes": n, "gathered_bytes": n} per step]} to OUT.
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from pathlib import Path

import torch.distributed as dist
from torch.utils._python_dispatch import TorchDispatchMode

from trainer.rank.loop import Worker, _optimizer_step, _setup, init_worker, load_run
from trainer.results.rundir import RunDir

STEPS = 2


class CountedCollectives(TorchDispatchMode):
    """Counts the c10d operations (collectives) dispatched while it is on, by name (e.g. _allgather_base_)."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: Counter[str] = Counter()
        self.reduced_bytes = 0  # what the reduce-scatters take in (their input: the unsharded gradient)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.namespace == "c10d":
            self.counts[func._opname] += 1
            if func._opname == "_reduce_scatter_base_":  # (output, input, group, op, ...)
                self.reduced_bytes += args[1].numel() * args[1].element_size()
        return func(*args, **(kwargs or {}))


def counted_steps(run: RunDir, worker: Worker, spec: str) -> list[dict[str, int]]:
    """Each step's collectives (c10d's names, e.g. _allgather_base_) under the train.zero_stage and train settings
    of `spec`."""
    stage, *settings = spec.split(",")
    experiment, launch = load_run(run)
    experiment.train.zero_stage = int(stage)
    for setting in settings:
        name, value = setting.split("=")
        setattr(experiment.train, name, value)
    experiment.train.steps = STEPS
    training = _setup(run, worker, experiment, launch)
    shards = {id(p) for p in training.model.parameters()}  # between steps every unit holds only its shards
    gathered = []
    hooks = [training.model.register_forward_hook(lambda model, *_: gathered.append(held_gathered(model, shards)))]
    # A pipeline's stages run their own forwards: what is gathered as each begins (held since the last backward)
    for stage in training.pipeline.stages.values() if training.pipeline is not None else ():
        hooks.append(stage.register_forward_pre_hook(lambda *_: gathered.append(held_gathered(training.model, shards))))
    steps = []
    for _ in range(STEPS):
        gathered.clear()
        with CountedCollectives() as comms:
            _optimizer_step(training, measure_memory=False)
        training.state.step += 1
        training.state.next_row += training.plan.rows_per_step
        steps.append({**comms.counts, "reduced_bytes": comms.reduced_bytes, "gathered_bytes": max(gathered, default=0)})
    for hook in hooks:
        hook.remove()
    return steps


def held_gathered(model, shards: set[int]) -> int:
    """Bytes of the parameters registered on the model now that are not its shards: those FSDP2 holds gathered."""
    return sum(p.numel() * p.element_size() for p in model.parameters() if id(p) not in shards)


if __name__ == "__main__":
    run_dir, out, specs = RunDir(Path(sys.argv[1])), Path(sys.argv[2]), sys.argv[3:]
    worker = init_worker(load_run(run_dir)[0].hardware.device_type)
    counted = {spec: counted_steps(run_dir, worker, spec) for spec in specs}
    if dist.get_rank() == 0:
        out.write_text(json.dumps(counted))
    dist.destroy_process_group()
    # Without the interpreter's teardown, as trainer.launch.torchrun ends (see tests/helpers/step_gradients.py).
    sys.stdout.flush()
    os._exit(0)
