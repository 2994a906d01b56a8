"""Under tensor parallelism without recomputation, attention and the MLP keep their rank's split input for the
weight gradients and all-gather it again in backward, as Megatron-LM does (trainer.parallel.tensor_parallel:
saved-tensor hooks eager, a checkpoint around the gather compiled): the trainer's per-step losses and gradient norms
still equal one process's (tp=2 eager, whose saved bytes the memory model prices within 1%, and FSDP2 x tp in
tests/test_layouts.py, where checkpointing is none by default; compiled, HSDP x tp in tests/test_compile.py, whose
measured saved bytes stay under the model's); the bytes saved for backward, measured per layer on 2 gloo processes,
drop by what the memory model says (compiled: at least that), with bitwise equal gradients; the throughput model
counts the extra all-gathers."""

from __future__ import annotations

import json
import os
import sys
from functools import partial
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from helpers import forked_ranks
from support import TINY_MODEL
from transformers import AutoConfig

from trainer.config import TrainSpec
from trainer.costs.memory_model import MemoryPlan, layer_bytes_per_token
from trainer.costs.throughput import FP32, tensor_parallel_sent
from trainer.layout import Layout

TP, ROWS, SEQ = 2, 2, 64


def _measured(tp_mesh, save_split: bool, compiled: bool) -> tuple[float, float, dict[str, torch.Tensor]]:
    """(bytes a layer saves for backward per token, measured by trainer.rank.memory as 2 layers' minus 1 layer's
    on a packed micro-batch; the 2-layer model's loss; its whole gradients), with the split children keeping their
    split input (`save_split`) or the gathered one, the layers compiled or eager."""
    from torch.distributed.tensor import DTensor

    from trainer.model.build import build_model
    from trainer.parallel.activation_checkpointing import enable_activation_checkpointing
    from trainer.parallel.compile import compile_layers
    from trainer.parallel.tensor_parallel import apply_tensor_parallel
    from trainer.rank.memory import saved_for_backward
    from trainer.rank.step import token_loss_sum

    saved = []
    for layers in (1, 2):
        model = build_model(AutoConfig.for_model(**{**TINY_MODEL, "num_hidden_layers": layers}), None, seed=0)
        apply_tensor_parallel(model, tp_mesh, save_split_inputs=save_split)
        enable_activation_checkpointing(model, "none", compiled)  # as trainer.parallel.parallelize does
        if compiled:
            compile_layers(model.get_decoder().layers)
        ids = torch.randint(0, TINY_MODEL["vocab_size"], (ROWS, SEQ), generator=torch.Generator().manual_seed(2))
        batch = {"input_ids": ids, "labels": ids, "position_ids": torch.arange(SEQ).expand(ROWS, SEQ)}
        batch["segment_ids"] = torch.arange(SEQ).div(21, rounding_mode="floor").expand(ROWS, SEQ).contiguous()
        loss, counted = saved_for_backward(model, partial(token_loss_sum, model, batch))
        loss.backward()
        saved.append(counted["activations_saved"])
    grads = {n: p.grad.full_tensor() if isinstance(p.grad, DTensor) else p.grad for n, p in model.named_parameters()}
    return (saved[1] - saved[0]) / (ROWS * SEQ), float(loss.detach()), grads


def _worker(rank: int, store: str, out: str) -> None:
    from torch.distributed.device_mesh import init_device_mesh

    dist.init_process_group("gloo", store=dist.FileStore(store, TP), rank=rank, world_size=TP)
    try:
        mesh = init_device_mesh("cpu", (TP,))
        found = {}
        for kind, compiled in (("eager", False), ("compiled", True)):
            (gathered, gathered_loss, gathered_grads), (split, split_loss, split_grads) = (
                _measured(mesh, save, compiled) for save in (False, True)
            )
            found[kind] = {
                "per_layer_token": {"gathered": gathered, "split": split},
                "loss": [gathered_loss, split_loss],
                "gradients_equal": all(torch.equal(g, split_grads[n]) for n, g in gathered_grads.items()),
            }
        if rank == 1:
            Path(out).write_text(json.dumps(found))
    finally:
        dist.destroy_process_group()
    sys.stdout.flush()
    os._exit(0)  # as tests/test_sequence_parallel.py's ranks end (torch's threads at teardown)


@pytest.fixture(scope="module")
def found(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("split")
    forked_ranks.run(_worker, TP, str(tmp / "store"), str(tmp / "found.json"))
    return json.loads((tmp / "found.json").read_text())


@pytest.mark.slow
def test_saved_bytes_drop_by_what_the_memory_model_prices(found):
    """Each layer keeps attention's and the MLP's input split (h/tp each) rather than gathered (h each): the drop
    is measured, and the eager layer (its norms and gated product recomputed, as the trainer runs it) saves what the
    model says. Compiled layers save less than that, and drop by at least as much (twice as much on this layer:
    inductor's partitioner had kept the gathered input in two forms)."""
    config = AutoConfig.for_model(**TINY_MODEL)
    plan = MemoryPlan(ROWS, SEQ, "fp32", "none", TrainSpec(), packing=True)
    layout, h = Layout(dp_replicate=1, tp=TP), TINY_MODEL["hidden_size"]
    eager, compiled = found["eager"]["per_layer_token"], found["compiled"]["per_layer_token"]
    assert eager["split"] == layer_bytes_per_token(config, layout, plan)
    assert eager["gathered"] - eager["split"] == 2 * (h - h // TP) * FP32 > 0
    assert compiled["gathered"] - compiled["split"] >= eager["gathered"] - eager["split"]
    assert compiled["split"] < eager["split"]


@pytest.mark.slow
@pytest.mark.parametrize("kind", ("eager", "compiled"))
def test_gathering_again_in_backward_changes_no_number(found, kind):
    gathered, split = found[kind]["loss"]
    assert split == gathered
    assert found[kind]["gradients_equal"]


def test_the_throughput_model_counts_the_extra_backward_gathers():
    """Per layer and micro-batch, two more all-gathers of one activation each where nothing recomputes (as many as
    selective checkpointing's recomputation reruns); none more under autocast (whose projections keep bf16 copies
    of the gathered input), and one for an MoE model (whose MoE block keeps its input gathered: attention's only)."""
    config = AutoConfig.for_model(**TINY_MODEL)
    layout, tokens, accum, layers = Layout(dp_shard=2, tp=TP), ROWS * SEQ, 3, config.num_hidden_layers
    one = (TP - 1) / TP * tokens * config.hidden_size * 2  # bf16 under FSDP2's mixed precision
    forward_and_backward = 8  # 2 + 2 all-gathers and 2 + 2 reduce-scatters per layer
    sent = partial(tensor_parallel_sent, config, layout, tokens, accum)
    expected = forward_and_backward + 2
    # Outside the layers, per micro-batch: the embedding's all-reduce (two gathers' bytes) and three more
    # (TP_COLLECTIVES_OUTSIDE_LAYERS), the same whatever recomputes.
    outside, outside_bytes = 4, 5 * one
    assert sent("none", "bf16") == (
        pytest.approx(accum * (layers * expected * one + outside_bytes)),
        accum * (layers * expected + outside),
    )
    assert sent("none", "bf16") == sent("selective", "bf16")
    autocast = tensor_parallel_sent(config, Layout(tp=TP), tokens, accum, "none", "bf16")
    assert autocast[1] == accum * (layers * forward_and_backward + outside)
    moe = AutoConfig.for_model(**{**TINY_MODEL, "model_type": "mixtral", "num_local_experts": 4})
    moe_sent = tensor_parallel_sent(moe, layout, tokens, accum, "none", "bf16")[1]
    assert moe_sent == accum * (layers * (expected - 1) + outside)
