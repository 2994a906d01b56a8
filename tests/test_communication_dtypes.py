"""What the throughput model's communication moves, checked on transformers' Llama: tensor parallelism's
all-gathers and reduce-scatters (sequence parallelism) counted with their dtypes on 2 gloo processes
(trainer.costs.throughput.TP_COLLECTIVES_PER_LAYER); the
dtype of context parallelism's gathered keys and values and of a pipeline stage's output; and the bytes the model
prices from them."""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from helpers import forked_ranks
from support import TINY_MODEL
from torch.utils._python_dispatch import TorchDispatchMode
from transformers import AutoConfig

from trainer.config import Checkpointing
from trainer.costs.throughput import (
    FP32,
    TP_COLLECTIVES_OUTSIDE_LAYERS,
    TP_COLLECTIVES_PER_LAYER,
    communication_bytes,
)
from trainer.layout import Layout

LAYER = {"model_type": "llama", "vocab_size": 64, "hidden_size": 32, "intermediate_size": 64,
         "num_attention_heads": 4, "num_key_value_heads": 2}  # fmt: skip
# (precision, parameters in bf16, checkpointing): fp32, autocast over fp32 parameters, bf16 parameters (as FSDP2's
# mixed precision computes), and both recomputing modes.
CASES = [("fp32", False, "none"), ("autocast", False, "none"), ("bf16", True, "none"),
         ("fp32", False, "full"), ("fp32", False, "selective")]  # fmt: skip


KINDS = {"all_gather_into_tensor": "all_gather", "reduce_scatter_tensor": "reduce_scatter", "all_reduce": "all_reduce"}


class Collectives(TorchDispatchMode):
    """The kind and dtype of the collectives dispatched (DTensor's redistributions call the functional ones)."""

    def __init__(self):
        super().__init__()
        self.seen: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kind = KINDS.get(func.overloadpacket.__name__) if func.namespace == "_c10d_functional" else None
        if kind is not None:
            self.seen.append(f"{kind} {str(args[0].dtype).removeprefix('torch.')}")
        return func(*args, **(kwargs or {}))


def _collectives(layers: int, autocast: bool, bf16: bool, checkpointing: str) -> tuple[list[str], list[str]]:
    """The kinds and dtypes of one tensor-parallel forward's collectives and of its backward's."""
    from torch.distributed.device_mesh import init_device_mesh

    from trainer.model.build import build_model
    from trainer.model.loss import head_computes_loss
    from trainer.parallel.activation_checkpointing import enable_activation_checkpointing
    from trainer.parallel.tensor_parallel import apply_tensor_parallel, saves_split_inputs

    model = build_model(AutoConfig.for_model(**LAYER, num_hidden_layers=layers), None, seed=0)
    model = model.to(torch.bfloat16) if bf16 else model
    apply_tensor_parallel(model, init_device_mesh("cpu", (2,)), saves_split_inputs(checkpointing))
    enable_activation_checkpointing(model, checkpointing)
    forward, backward = Collectives(), Collectives()
    ids = torch.arange(16).view(2, 8)
    with forward, torch.autocast("cpu", torch.bfloat16, enabled=autocast), head_computes_loss(model, ids):
        loss = model(input_ids=ids, use_cache=False).logits  # the trainer's chunked loss over the head's rows
    with backward:
        loss.backward()
    return forward.seen, backward.seen


def _worker(rank: int, store: str, out: str) -> None:
    dist.init_process_group("gloo", store=dist.FileStore(store, 2), rank=rank, world_size=2)
    try:
        found = {}
        for precision, bf16, checkpointing in CASES:
            one, two = (_collectives(n, precision == "autocast", bf16, checkpointing) for n in (1, 2))
            per_layer = [collections.Counter(b) - collections.Counter(a) for a, b in zip(one, two, strict=True)]
            found[f"{precision} {checkpointing}"] = [dict(c) for c in per_layer]
            outside = [dict(collections.Counter(a) - c) for a, c in zip(one, per_layer, strict=True)]
            found[f"{precision} {checkpointing} outside the layers"] = outside
        if rank == 0:
            Path(out).write_text(json.dumps(found))
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_a_sequence_parallel_layer_gathers_and_scatters_as_the_model_counts(tmp_path):
    out = tmp_path / "found.json"
    forked_ranks.run(_worker, 2, str(tmp_path / "store"), str(out))
    found = json.loads(out.read_text())
    (gather, gather_back, *gather_again), (scatter, scatter_back, *scatter_again) = TP_COLLECTIVES_PER_LAYER.values()
    # Without recomputation backward gathers attention's and the MLP's split inputs again (in the width the forward
    # gathered them), beside their outputs' gradients, where these are fp32 or bf16 alike.
    assert found["fp32 none"] == [
        {"all_gather float32": gather, "reduce_scatter float32": scatter},
        {"all_gather float32": gather_back + gather_again[2], "reduce_scatter float32": scatter_back},
    ]
    # Autocast: the norms' fp32 outputs gathered, the row-parallel matmuls' bf16 outputs scattered; backward their
    # bf16 gradients gathered, the fp32 gradients of the fp32 inputs scattered; no input gathered again (the
    # projections saved bf16 copies of it).
    assert found["autocast none"] == [
        {"all_gather float32": gather, "reduce_scatter bfloat16": scatter},
        {"all_gather bfloat16": gather_back, "reduce_scatter float32": scatter_back},
    ]
    assert found["bf16 none"] == [
        {"all_gather bfloat16": gather, "reduce_scatter bfloat16": scatter},
        {"all_gather bfloat16": gather_back + gather_again[2], "reduce_scatter bfloat16": scatter_back},
    ]
    for recomputing, column in (("full", 0), ("selective", 1)):  # the recomputation reruns the forward's gathers
        backward = {"all_gather float32": gather_back + gather_again[column]}
        backward["reduce_scatter float32"] = scatter_back + scatter_again[column]
        assert found[f"fp32 {recomputing}"] == [found["fp32 none"][0], backward]
    assert scatter_again[2] == 0
    # Outside the layers (TP_COLLECTIVES_OUTSIDE_LAYERS): the vocabulary-parallel embedding's all-reduce and the
    # head's gathered input in forward; the first layer's split gathered back and the head input's partial gradient
    # reduce-scattered in backward, all in the residual stream's width.
    for key, outside in found.items():
        if key.endswith("outside the layers"):
            width = "float32" if key.startswith(("fp32", "autocast")) else "bfloat16"
            counted = [
                {f"{kind} {width}": counts[direction] for kind, counts in TP_COLLECTIVES_OUTSIDE_LAYERS.items()}
                for direction in (0, 1)
            ]
            assert outside == [{k: n for k, n in c.items() if n} for c in counted], key


def test_the_model_prices_each_collective_in_the_dtype_it_moves():
    config = AutoConfig.for_model(**TINY_MODEL)
    layout, tokens, layers = Layout(tp=2), 2 * 64, config.num_hidden_layers
    per_element = (2 - 1) / 2 * tokens * config.hidden_size * layers * 3  # ring gather or scatter, 3 micro-batches

    def tp(precision: str, checkpointing: Checkpointing = "none", shard: bool = False) -> tuple[float, int]:
        sharded = Layout(dp_shard=2, tp=2) if shard else layout
        return communication_bytes(config, sharded, 10**6, 2, 64, 3, checkpointing, precision)["tp"]

    gathers, scatters = (sum(counts[:2]) for counts in TP_COLLECTIVES_PER_LAYER.values())
    # Outside the layers, per micro-batch, in the residual stream's width: the embedding's all-reduce (twice a
    # gather's bytes), two gathers and a reduce-scatter.
    outside = {kind: sum(counts) for kind, counts in TP_COLLECTIVES_OUTSIDE_LAYERS.items()}
    outside_elements = (
        per_element / layers * (2 * outside["all_reduce"] + outside["all_gather"] + outside["reduce_scatter"])
    )
    outside_count = 3 * sum(outside.values())
    # Without recomputation, the split inputs gathered again in backward (2 per layer); not under autocast.
    regathers = TP_COLLECTIVES_PER_LAYER["all_gather"][4]
    collectives = gathers + scatters + regathers
    assert tp("fp32") == (
        pytest.approx((per_element * collectives + outside_elements) * FP32),
        3 * layers * collectives + outside_count,
    )
    # Autocast: forward gathers and backward scatters fp32, the others bf16 (2 + 2 of each per layer); fp32 outside.
    bf16 = per_element * (FP32 + 2) * (gathers + scatters) / 2 + outside_elements * FP32
    assert tp("bf16")[0] == pytest.approx(bf16)
    assert tp("bf16", shard=True)[0] == pytest.approx((per_element * collectives + outside_elements) * 2)  # FSDP2's
    for recomputing, again in (("selective", 2), ("full", 3)):  # full reruns a reduce-scatter too
        collectives = gathers + scatters + again
        assert tp("fp32", recomputing) == (
            pytest.approx((per_element * collectives + outside_elements) * FP32),
            3 * layers * collectives + outside_count,
        )

    def sent(dim: str, layout: Layout, precision: str) -> float:
        return communication_bytes(config, layout, 10**6, 2, 64, 3, "none", precision)[dim][0]

    # Autocast keeps the residual stream fp32; FSDP2's mixed precision (which cp always runs under: it shards over
    # dp_shard x cp) computes in bf16.
    assert sent("pp", Layout(pp=2), "bf16") == sent("pp", Layout(pp=2), "fp32") > 0
    for dim, sharded in (("pp", Layout(pp=2, dp_shard=2)), ("cp", Layout(cp=2))):
        assert sent(dim, sharded, "bf16") == sent(dim, sharded, "fp32") / 2 > 0


# Each precision regime (trainer.costs.throughput.layer_regime) as a layout and `train.precision` give it, and how the
# layer then runs: (layout, precision, autocast, bf16 parameters).
REGIMES = {
    "fp32": (Layout(), "fp32", False, False),
    "autocast": (Layout(), "bf16", True, False),
    "bf16": (Layout(dp_shard=2), "bf16", False, True),  # FSDP2's mixed precision
}


@pytest.mark.parametrize("regime", REGIMES)
def test_context_and_pipeline_parallelism_move_what_the_model_prices(regime, monkeypatch):
    """The keys and values context parallelism gathers (and whose gradients it reduce-scatters), through its real
    attention function on a group of one, and what a pipeline stage sends (a decoder layer's output): fp32 under
    autocast (rotary's fp32 cos and sin promote the keys; the residual stream stays fp32), bf16 only where the
    parameters are."""
    from functools import partial

    from transformers import AttentionInterface

    from trainer.costs.throughput import activation_width
    from trainer.model.build import build_model
    from trainer.parallel.context_parallel import context_parallel_attention

    layout, precision, autocast, bf16 = REGIMES[regime]
    moved = []

    def recorded(collective):
        return lambda out, tensor, *args, **kwargs: (
            moved.append(tensor.dtype) or collective(out, tensor, *args, **kwargs)
        )

    for name in ("all_gather_into_tensor", "reduce_scatter_tensor"):
        monkeypatch.setattr(dist, name, recorded(getattr(dist, name)))
    model = build_model(AutoConfig.for_model(**LAYER, num_hidden_layers=1), None, seed=0)
    model = model.to(torch.bfloat16) if bf16 else model
    sent = []
    model.model.layers[0].register_forward_hook(lambda module, args, output: sent.append(output.dtype))
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        AttentionInterface.register("test_cp", partial(context_parallel_attention, group=dist.group.WORLD))
        model.set_attn_implementation("test_cp")
        with torch.autocast("cpu", torch.bfloat16, enabled=autocast):
            logits = model(input_ids=torch.arange(16).view(2, 8), use_cache=False).logits
        logits.float().sum().backward()
    finally:
        dist.destroy_process_group()
    width = {torch.float32: FP32, torch.bfloat16: 2}
    expected = activation_width(precision, layout)
    assert [width[dtype] for dtype in moved] == [expected, expected]  # the gather, then its gradient's reduce-scatter
    assert [width[dtype] for dtype in sent] == [expected]
