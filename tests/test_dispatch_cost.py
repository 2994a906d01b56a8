"""Python dispatch in the throughput model: the operations that pay DTensor's dispatch under tensor parallelism and
selective checkpointing's policy, counted again on the real layers (trainer.costs.throughput's DTENSOR_OPS_PER_LAYER and
SELECTIVE_OPS_PER_LAYER); the prediction charging them at the probe's figures; calibration scaling them apart."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.distributed as dist
from support import TINY_MODEL
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.checkpoint import checkpoint
from transformers import AutoConfig, LlamaConfig
from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding

from trainer.costs.calibration import FEATURES, fit
from trainer.costs.throughput import (
    DTENSOR_OPS_OUTSIDE_LAYERS,
    DTENSOR_OPS_PER_LAYER,
    RERUN_DTENSOR_OPS_OUTSIDE_LAYERS,
    RERUN_DTENSOR_OPS_PER_LAYER,
    SELECTIVE_OPS_PER_LAYER,
    StepShape,
    estimate_step,
    hardware_figures,
)
from trainer.hardware import Hardware
from trainer.layout import Layout
from trainer.model.build import build_model
from trainer.model.loss import head_computes_loss
from trainer.parallel.activation_checkpointing import enable_activation_checkpointing, selective_checkpoint_context
from trainer.parallel.tensor_parallel import apply_tensor_parallel

CPU = Hardware("cpu", "test CPU", devices_per_node=2, intra_node_link="cpu")
LAYER = {"hidden_size": 64, "intermediate_size": 160, "num_attention_heads": 4, "num_key_value_heads": 2,
         "vocab_size": 128, "attn_implementation": "sdpa"}  # fmt: skip


class Operations(TorchDispatchMode):
    """Every aten operation dispatched, and those of them with a DTensor argument."""

    def __init__(self):
        super().__init__()
        self.all = self.on_dtensors = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.all += 1
        if any(isinstance(t, DTensor) for t in torch.utils._pytree.tree_leaves((args, kwargs))):
            self.on_dtensors += 1
        return func(*args, **(kwargs or {}))


@pytest.fixture
def one_rank(tmp_path):
    """A gloo process group of this process alone: DTensors on a one-rank mesh dispatch as on any other."""
    dist.init_process_group("gloo", store=dist.FileStore(str(tmp_path / "store"), 1), rank=0, world_size=1)
    yield init_device_mesh("cpu", (1,))
    dist.destroy_process_group()


def _dtensor_operations(mesh, layers: int, rerun: bool) -> tuple[int, int]:
    """DTensor operations of a tensor-parallel Llama's forward and backward (trainer.parallel.parallelize's plan),
    with the trainer's chunked loss; with the eager layer's rerun of its norms and SiLU or without."""
    model = build_model(LlamaConfig(**LAYER, num_hidden_layers=layers), None, seed=0)
    apply_tensor_parallel(model, mesh)
    if rerun:
        enable_activation_checkpointing(model, "none", compiled=False)
    ids = torch.randint(0, LAYER["vocab_size"], (2, 16))
    forward, backward = Operations(), Operations()
    with forward, head_computes_loss(model, ids):  # the trainer's loss: the chunked one over the head's rows
        loss = model(input_ids=ids, use_cache=False).logits
    with backward:
        loss.backward()
    return forward.on_dtensors, backward.on_dtensors


@pytest.mark.parametrize(
    "rerun, counted",
    [
        (False, (DTENSOR_OPS_PER_LAYER, DTENSOR_OPS_OUTSIDE_LAYERS)),
        (True, (RERUN_DTENSOR_OPS_PER_LAYER, RERUN_DTENSOR_OPS_OUTSIDE_LAYERS)),
    ],
)
def test_a_tensor_parallel_layer_dispatches_the_counted_dtensor_operations(one_rank, rerun, counted):
    one, two = _dtensor_operations(one_rank, 1, rerun), _dtensor_operations(one_rank, 2, rerun)
    per_layer = tuple(b - a for a, b in zip(one, two, strict=True))
    # Outside the layers: the vocabulary-parallel embedding's sum, the first layer's split, the final norm (sequence
    # parallel), the head's gather and its weight's and input's handover to the chunked loss.
    assert (per_layer, tuple(a - b for a, b in zip(one, per_layer, strict=True))) == counted


def test_selective_checkpointing_passes_the_counted_operations_through_its_policy():
    """The operations of one layer that reach selective checkpointing's modes: its forward's, and the
    recomputation's, counted by a mode inside the checkpointed function (which both passes run)."""
    config = LlamaConfig(**LAYER, num_hidden_layers=1)
    layer = LlamaDecoderLayer(config, 0)
    x = torch.randn(2, 16, config.hidden_size, requires_grad=True)
    position_embeddings = LlamaRotaryEmbedding(config)(x, torch.arange(16).expand(2, -1))
    seen = Operations()

    def counted(hidden: torch.Tensor) -> torch.Tensor:
        with seen:
            return layer(hidden, position_embeddings=position_embeddings)

    checkpoint(counted, x, use_reentrant=False, context_fn=selective_checkpoint_context).sum().backward()
    assert seen.all == SELECTIVE_OPS_PER_LAYER


def _step(tmp_path, monkeypatch, layout: Layout, checkpointing: bool | str = False, figures: dict | None = None):
    """The step predicted from the stated figures, with `figures` (dispatch costs) as a probe would give them."""
    monkeypatch.setenv("MESHPILOT_CACHE", str(tmp_path / "cache"))
    given = dataclasses.replace(hardware_figures(CPU), **(figures or {}))
    config = AutoConfig.for_model(**TINY_MODEL)
    shape = StepShape(2, 64, 4, checkpointing)
    return estimate_step(config, layout, CPU, shape, matmul_params=10_000, parameter_bytes=40_000, figures=given)


def test_dispatch_is_charged_where_it_happens_at_the_probed_cost(tmp_path, monkeypatch):
    layers = AutoConfig.for_model(**TINY_MODEL).num_hidden_layers
    plain = _step(tmp_path, monkeypatch, Layout(dp_replicate=2))
    assert plain.dispatch_s == 0.0  # DDP without selective checkpointing: plain tensors, no policy

    tp = _step(tmp_path, monkeypatch, Layout(tp=2), figures={"dtensor_op_s": 1e-5})
    # eager without checkpointing: the layers rerun their norms and SiLU, on DTensors
    per_micro_batch = layers * sum(RERUN_DTENSOR_OPS_PER_LAYER) + sum(RERUN_DTENSOR_OPS_OUTSIDE_LAYERS)
    assert tp.dispatch_s == pytest.approx(4 * per_micro_batch * 1e-5)  # 4 micro-batches
    slower = _step(tmp_path, monkeypatch, Layout(tp=2), figures={"dtensor_op_s": 2e-5})
    assert slower.dispatch_s == pytest.approx(2 * tp.dispatch_s) and slower.compute_s == tp.compute_s
    assert slower.step_s - tp.step_s == pytest.approx(tp.dispatch_s)  # uncalibrated: added as it is

    full = _step(tmp_path, monkeypatch, Layout(tp=2), "full", figures={"dtensor_op_s": 1e-5})
    forward, backward = DTENSOR_OPS_PER_LAYER  # the plain layer's, its forward dispatched again
    per_micro_batch = layers * (2 * forward + backward) + sum(DTENSOR_OPS_OUTSIDE_LAYERS)
    assert full.dispatch_s == pytest.approx(4 * per_micro_batch * 1e-5)

    selective = _step(tmp_path, monkeypatch, Layout(dp_replicate=2), "selective", figures={"selective_op_s": 3e-5})
    assert selective.dispatch_s == pytest.approx(4 * layers * SELECTIVE_OPS_PER_LAYER * 3e-5)
    free = _step(tmp_path, monkeypatch, Layout(tp=2), "selective", figures={"dtensor_op_s": 0.0, "selective_op_s": 0.0})
    assert free.dispatch_s == 0.0  # a probe that found nothing added is believed, not replaced by the stated cost


def test_a_gpu_hides_dispatch_behind_queued_work_like_launches(tmp_path, monkeypatch):
    monkeypatch.setenv("MESHPILOT_CACHE", str(tmp_path / "cache"))
    gpu = Hardware("cuda", "NVIDIA H100 80GB HBM3", devices_per_node=8)
    config = AutoConfig.for_model(**TINY_MODEL)
    estimate = estimate_step(
        config, Layout(tp=2), gpu, StepShape(2, 64, 4), matmul_params=10_000, parameter_bytes=40_000
    )
    assert estimate.dispatch_s == 0.0
    assert estimate.compute_s == pytest.approx(max(estimate.matmul_s + estimate.memory_s, estimate.compute_s))


def test_calibration_scales_dispatch_apart_from_compute():
    """Runs whose dispatch took three times its predicted seconds and compute 1.5 times: the fit finds both."""
    records = []
    for compute_s, dispatch_s in ((1.0, 0.0), (1.0, 0.5), (2.0, 0.2), (0.5, 1.0), (1.5, 0.1), (0.8, 0.7)):
        features = {"compute_s": compute_s, "comm_s": 0.1, "collectives": 0, "micro_batches": 2}
        measured = 1.5 * compute_s + 0.1 + 3.0 * dispatch_s
        records.append({**features, "dispatch_s": dispatch_s, "measured_s": measured})
    calibration = fit(records)
    assert calibration.compute_scale == pytest.approx(1.5) and calibration.dispatch_scale == pytest.approx(3.0)
    assert calibration.predict(*(records[3][f] for f in FEATURES)) == pytest.approx(records[3]["measured_s"])
