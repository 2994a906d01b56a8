"""What the throughput model's communication moves, checked on transformers' Llama: tensor parallelism's
all-reduces counted with their dtypes on 2 gloo processes (trainer.costs.throughput.TP_ALL_REDUCES_PER_LAYER); the
dtype of context parallelism's gathered keys and values and of a pipeline stage's output; and the bytes the model
prices from them."""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from support import TINY_MODEL
from torch.utils._python_dispatch import TorchDispatchMode
from transformers import AutoConfig

from trainer.config import Checkpointing
from trainer.costs.throughput import FP32, TP_ALL_REDUCES_PER_LAYER, communication_bytes
from trainer.layout import Layout

LAYER = {"model_type": "llama", "vocab_size": 64, "hidden_size": 32, "intermediate_size": 64,
         "num_attention_heads": 4, "num_key_value_heads": 2}  # fmt: skip
# (precision, parameters in bf16, checkpointing): fp32, autocast over fp32 parameters, bf16 parameters (as FSDP2's
# mixed precision computes), and both recomputing modes.
CASES = [("fp32", False, "none"), ("autocast", False, "none"), ("bf16", True, "none"),
         ("fp32", False, "full"), ("fp32", False, "selective")]  # fmt: skip


class AllReduces(TorchDispatchMode):
    """The dtypes of the all-reduces dispatched (DTensor's redistributions call the functional collectives)."""

    def __init__(self):
        super().__init__()
        self.dtypes: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.overloadpacket is torch.ops._c10d_functional.all_reduce:
            self.dtypes.append(str(args[0].dtype).removeprefix("torch."))
        return func(*args, **(kwargs or {}))


def _all_reduces(layers: int, autocast: bool, bf16: bool, checkpointing: str) -> tuple[list[str], list[str]]:
    """The dtypes of one tensor-parallel forward's all-reduces and of its backward's."""
    from torch.distributed.device_mesh import init_device_mesh

    from trainer.model.build import build_model
    from trainer.parallel.activation_checkpointing import enable_activation_checkpointing
    from trainer.parallel.tensor_parallel import apply_tensor_parallel

    model = build_model(AutoConfig.for_model(**LAYER, num_hidden_layers=layers), None, seed=0)
    model = model.to(torch.bfloat16) if bf16 else model
    apply_tensor_parallel(model, init_device_mesh("cpu", (2,)))
    enable_activation_checkpointing(model, checkpointing)
    forward, backward = AllReduces(), AllReduces()
    with forward, torch.autocast("cpu", torch.bfloat16, enabled=autocast):
        loss = model(input_ids=torch.arange(16).view(2, 8), use_cache=False).logits.float().sum()
    with backward:
        loss.backward()
    return forward.dtypes, backward.dtypes


def _worker(rank: int, store: str, out: str) -> None:
    dist.init_process_group("gloo", store=dist.FileStore(store, 2), rank=rank, world_size=2)
    try:
        found = {}
        for precision, bf16, checkpointing in CASES:
            one, two = (_all_reduces(n, precision == "autocast", bf16, checkpointing) for n in (1, 2))
            per_layer = [collections.Counter(b) - collections.Counter(a) for a, b in zip(one, two, strict=True)]
            found[f"{precision} {checkpointing}"] = [dict(c) for c in per_layer]
            outside = [len(a) - c.total() for a, c in zip(one, per_layer, strict=True)]
            found[f"{precision} {checkpointing} outside the layers"] = outside
        if rank == 0:
            Path(out).write_text(json.dumps(found))
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_a_tensor_parallel_layer_all_reduces_as_the_model_counts(tmp_path):
    out = tmp_path / "found.json"
    mp.spawn(_worker, args=(str(tmp_path / "store"), str(out)), nprocs=2, join=True)
    found = json.loads(out.read_text())
    forward, backward = TP_ALL_REDUCES_PER_LAYER
    assert found["fp32 none"] == [{"float32": forward}, {"float32": backward}]
    # Autocast: the row-parallel matmuls' bf16 outputs, then the fp32 gradients of the fp32 inputs.
    assert found["autocast none"] == [{"bfloat16": forward}, {"float32": backward}]
    assert found["bf16 none"] == [{"bfloat16": forward}, {"bfloat16": backward}]
    for recomputing in ("full", "selective"):  # the recomputation reruns all but the layer's last all-reduce
        assert found[f"fp32 {recomputing}"] == [{"float32": forward}, {"float32": forward - 1 + backward}]
    assert all(outside == [0, 0] for key, outside in found.items() if key.endswith("outside the layers"))


def test_the_model_prices_each_collective_in_the_dtype_it_moves():
    config = AutoConfig.for_model(**TINY_MODEL)
    layout, tokens, layers = Layout(tp=2), 2 * 64, config.num_hidden_layers
    forward, backward = TP_ALL_REDUCES_PER_LAYER
    per_element = 2 * (2 - 1) / 2 * tokens * config.hidden_size * layers * 3  # ring all-reduce, 3 micro-batches

    def tp(precision: str, checkpointing: Checkpointing = "none", shard: bool = False) -> tuple[float, int]:
        sharded = Layout(dp_shard=2, tp=2) if shard else layout
        return communication_bytes(config, sharded, 10**6, 2, 64, 3, checkpointing, precision)["tp"]

    assert tp("fp32") == (pytest.approx(per_element * FP32 * (forward + backward)), 3 * layers * (forward + backward))
    assert tp("bf16")[0] == pytest.approx(per_element * (2 * forward + FP32 * backward))  # autocast
    assert tp("bf16", shard=True)[0] == pytest.approx(per_element * 2 * (forward + backward))  # FSDP2's bf16
    all_reduces = 2 * forward - 1 + backward  # the recomputation reruns all but the layer's last
    for recomputing in ("selective", "full"):
        assert tp("fp32", recomputing) == (pytest.approx(per_element * FP32 * all_reduces), 3 * layers * all_reduces)

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
