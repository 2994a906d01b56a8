"""Gradients of the first optimizer step of a prepared run, for a given micro-batch size.

Runs in-process (world of one) or under torchrun (`python -m torch.distributed.run ... step_gradients.py
RUN_DIR MICRO_BATCH OUT LAYOUT`), where the model is wrapped for LAYOUT by the trainer's own `parallelize`
(DDP, FSDP2, tensor parallel) and rank 0 saves the loss and the full (unsharded) gradients to OUT.
"""

from __future__ import annotations

import os
import sys
from functools import partial
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.tensor import DTensor

from trainer.data.packing import IGNORE_INDEX, model_inputs
from trainer.data.rows import RowSource, TokenizedCorpus, plan_batches
from trainer.layout import Layout, data_parallel_group
from trainer.model.build import build_model, materialize, meta_model, model_config
from trainer.parallel.parallelize import parallelize
from trainer.rank.loop import load_run
from trainer.rank.step import forward_backward
from trainer.results.rundir import RunDir


def _setup(run_dir: Path, micro_batch: int, dp_degree: int):
    experiment, launch = load_run(RunDir(run_dir))
    model = build_model(model_config(experiment.model, Path(experiment.base_dir)), None, experiment.train.seed)
    rows = RowSource(
        TokenizedCorpus.load(Path(launch["data_dir"])),
        experiment.data.seq_len,
        experiment.data.packing,
        experiment.train.seed,
    )
    plan = plan_batches(experiment.train.global_batch_tokens, experiment.data.seq_len, micro_batch, dp_degree)
    return model, rows, plan


def step_gradients(run_dir: Path, micro_batch: int, layout: str | None = None) -> tuple[float, dict[str, torch.Tensor]]:
    """The first step's loss and gradients; with `layout`, on every rank of a distributed job, wrapped for it."""
    if layout is None:
        model, rows, plan = _setup(run_dir, micro_batch, 1)
        batches = [rows.batch(indices) for indices in plan.micro_batches(0, 0)]
        packed = load_run(RunDir(run_dir))[0].data.packing
        result = forward_backward(model, batches, None, packed=packed)
        return result.loss, {name: p.grad.detach().clone() for name, p in model.named_parameters()}
    resolved = Layout.parse(layout).resolve(dist.get_world_size())
    mesh = resolved.build_mesh("cpu")
    dp_group, dp_rank = data_parallel_group(resolved, mesh)
    _, rows, plan = _setup(run_dir, micro_batch, resolved.dp_degree)
    experiment, _ = load_run(RunDir(run_dir))
    # As the trainer builds it: on the meta device, split for the layout, then this rank's share filled.
    config = model_config(experiment.model, Path(experiment.base_dir))
    model = meta_model(config)
    fill = partial(materialize, device=torch.device("cpu"), config=config, weights=None, seed=experiment.train.seed)
    wrapped = parallelize(model, resolved, mesh, experiment.train, "cpu", fill)
    batches = [rows.batch(indices) for indices in plan.micro_batches(0, dp_rank)]
    result = forward_backward(wrapped, batches, dp_group, packed=experiment.data.packing)
    # FSDP2 and tensor parallelism leave DTensor gradients, each rank holding a part: gather the whole.
    grads = {
        name: (p.grad.full_tensor() if isinstance(p.grad, DTensor) else p.grad).detach().clone()
        for name, p in model.named_parameters()
    }
    return result.loss, grads


def naive_step_gradients(run_dir: Path, micro_batch: int) -> tuple[float, dict[str, torch.Tensor]]:
    """The common mistake: mean loss per micro-batch, averaged over accumulation steps."""
    model, rows, plan = _setup(run_dir, micro_batch, 1)
    losses = []
    for indices in plan.micro_batches(0, 0):
        batch = rows.batch(indices)
        logits = model(**model_inputs(batch)).logits
        loss = F.cross_entropy(logits.flatten(0, 1), batch["labels"].flatten(), ignore_index=IGNORE_INDEX)
        (loss / plan.grad_accum).backward()
        losses.append(loss.item())
    grads = {name: p.grad.detach().clone() for name, p in model.named_parameters()}
    return sum(losses) / len(losses), grads


if __name__ == "__main__":
    dist.init_process_group("gloo")
    loss, grads = step_gradients(Path(sys.argv[1]), int(sys.argv[2]), sys.argv[4])
    if dist.get_rank() == 0:
        torch.save({"loss": loss, "grads": grads}, sys.argv[3])
    dist.destroy_process_group()
    # Without the interpreter's teardown, as trainer.launch.torchrun ends: torch's threads at teardown aborted this
    # process now and then once its work was done ("terminate called without an active exception", SIGABRT).
    sys.stdout.flush()
    os._exit(0)
