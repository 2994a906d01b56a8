"""train.compile (inductor's C++ backend on CPU: the whole micro-batch step as one graph for one process or DDP,
each decoder layer on its own elsewhere, with its selective checkpoint inside; the loss inside the graph under
train.loss whole) gives the eager single-process run's per-step losses and gradient norms within 1e-4, for every kind
of layout, and its compilation time is reported apart from the timed steps."""

from __future__ import annotations

import json
from functools import partial

import pytest
import torch
from support import train, write_experiment
from transformers import LlamaConfig

from trainer.model.build import build_model
from trainer.parallel.activation_checkpointing import enable_activation_checkpointing
from trainer.parallel.compile import compile_layers
from trainer.rank.memory import saved_for_backward
from trainer.rank.step import compiled_token_loss_sum, token_loss_sum

# layout: processes. One of each wrapping: DDP (the whole step as one graph; one process's whole-step graph, with
# the chunked loss, is tests/test_bench_scripts.py's compiled meshpilot run), FSDP2, tensor parallel, a pipeline,
# context parallel (each layer a graph of its own). Combinations of them compile the same layer graphs (2 processes
# each: a compiled run is mostly its ranks' compilation, paid once per rank).
LAYOUTS = {
    "dp_replicate=2": 2,
    "dp_shard=2": 2,
    "tp=2": 2,
    "pp=2": 2,
    "cp=2": 2,
}
# DDP also takes the loss over the whole logits inside its graph (train.loss whole), against the eager chunked
# loss; FSDP2 and the pipeline compile each layer with its selective checkpoint inside.
SELECTIVE = ("--set", "train.activation_checkpointing=selective")
SETTINGS = {"dp_replicate=2": ("--set", "train.loss=whole"), "dp_shard=2": SELECTIVE, "pp=2": SELECTIVE}
STEPS = 4  # two untimed steps (when the layers compile), two timed


@pytest.fixture(scope="module")
def experiment(tmp_path_factory):
    return write_experiment(tmp_path_factory.mktemp("compile"), {"train": {"steps": STEPS}})


@pytest.fixture(scope="module")
def eager(experiment):
    return train(experiment, experiment.parent / "eager", "--nproc", "1").read_steps()


@pytest.mark.slow
@pytest.mark.parametrize("layout", LAYOUTS)
def test_compiled_layout_matches_eager(experiment, eager, layout):
    out = experiment.parent / f"compiled-{layout.replace(',', '_').replace('=', '')}"
    run = train(experiment, out, "--nproc", str(LAYOUTS[layout]), "--layout", layout, "--set", "train.compile=true",
                *SETTINGS.get(layout, ()))  # fmt: skip
    steps = run.read_steps()
    assert len(steps) == len(eager) == STEPS
    for a, b in zip(eager, steps, strict=True):
        assert b["loss"] == pytest.approx(a["loss"], rel=1e-4, abs=1e-6), layout
        assert b["grad_norm"] == pytest.approx(a["grad_norm"], rel=1e-4, abs=1e-6), layout
    if "tp=" in layout:
        # Sequence parallelism's split inputs, saved and gathered again in backward under compile too
        # (tests/test_sp_saves_split.py): the trainer's own measurement of what its ranks saved for backward stays
        # under what the memory model prices (compiled layers save less than eager's, which it prices within 1%).
        memory = json.loads(run.memory.read_text())
        for predicted, measured in zip(memory["predicted"], memory["measured"], strict=True):
            assert measured["activations_saved"] < predicted["activations_saved"], layout
    metrics = run.read_metrics()
    # Compilation happens in the untimed warm-up steps: tokens/s is measured after it.
    warmup = steps[: STEPS - metrics["timed_steps"]]
    assert 0 < metrics["compile_s"] <= sum(s["step_s"] for s in warmup)


@pytest.mark.parametrize("whole_step", [False, True], ids=["layers", "whole-step"])
def test_selective_checkpointing_compiles_while_memory_is_measured(whole_step):
    """The step whose memory is measured wraps selective checkpointing's modes in counting ones
    (trainer.parallel.activation_checkpointing._Reporting); compiled, the region's graph id must still reach the
    mode that tags its operations (inductor refused the graph before). Gradients as eager's."""
    config = LlamaConfig(
        vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2,
    )  # fmt: skip
    ids = torch.randint(0, 128, (2, 16), generator=torch.Generator().manual_seed(0))
    batch = {"input_ids": ids, "labels": ids, "position_ids": torch.arange(16).expand(2, 16)}
    batch["segment_ids"] = torch.zeros_like(ids)
    gradients = []
    for compiled in (False, True):
        model = build_model(config, None, seed=0)
        model.train()
        enable_activation_checkpointing(model, "selective")
        loss_sum = token_loss_sum
        if compiled and whole_step:
            loss_sum = compiled_token_loss_sum()
        elif compiled:
            compile_layers(model.get_decoder().layers)
        loss, saved = saved_for_backward(model, partial(loss_sum, model, batch))
        loss.backward()
        assert saved["activations_saved"] > 0
        gradients.append([p.grad for p in model.parameters()])
    for eager, compiled in zip(*gradients, strict=True):
        torch.testing.assert_close(compiled, eager, rtol=1e-4, atol=1e-6)


def _tiny_llama():
    return LlamaConfig(
        vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2,
    )  # fmt: skip


@pytest.mark.parametrize("mode", ["selective", "full"])
def test_each_checkpointed_layer_compiles_whole_with_its_checkpoint(mode):
    """The checkpoint wrapper is the layer's forward, so compiling the layer compiles the checkpoint (and the
    selective policy) with it: dynamo captures one graph for both layers holding the checkpointed region, skips
    no frame and breaks no graph, where a compiled layer run under the policy's dispatch modes would run eagerly.
    Loss and gradients as eager's."""
    from torch._dynamo.backends.registry import lookup_backend
    from torch._dynamo.utils import counters

    config = _tiny_llama()
    ids = torch.randint(0, 128, (2, 16), generator=torch.Generator().manual_seed(0))
    batch = {"input_ids": ids, "labels": ids, "position_ids": torch.arange(16).expand(2, 16)}
    batch["segment_ids"] = (torch.arange(16) >= 7).long().expand(2, 16).contiguous()  # two documents per row
    graphs = []

    def recording(graph, example_inputs):
        graphs.append(graph)
        return lookup_backend("inductor")(graph, example_inputs)

    results = []
    for compiled in (False, True):
        model = build_model(config, None, seed=0)
        model.train()
        enable_activation_checkpointing(model, mode)
        if compiled:
            torch._dynamo.reset()
            counters.clear()
            compile_layers(model.get_decoder().layers, backend=recording)
        loss = token_loss_sum(model, batch)
        loss.backward()
        results.append((loss.detach(), [p.grad for p in model.parameters()]))
    assert len(graphs) == 1 and counters["frames"]["ok"] == counters["frames"]["total"] == 1
    assert not counters["graph_break"]
    targets = {str(node.target) for node in graphs[0].graph.nodes if node.op == "call_function"}
    assert any("tag_activation_checkpoint" in target for target in targets), targets
    (eager_loss, eager_grads), (compiled_loss, compiled_grads) = results
    torch.testing.assert_close(compiled_loss, eager_loss, rtol=1e-5, atol=1e-6)
    for eager, compiled in zip(eager_grads, compiled_grads, strict=True):
        torch.testing.assert_close(compiled, eager, rtol=1e-4, atol=1e-6)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_flex_attention_compiles_inside_selective_checkpointing_on_cuda():
    """On CUDA, flex attention in a selectively checkpointed, compiled layer: one graph, no frame skipped, and its
    gradients as the eager run's (flex has no backward on CPU)."""
    from torch._dynamo.utils import counters

    from trainer.model.attention import document_block_mask, use_attention

    config = LlamaConfig(
        vocab_size=128, hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2,
    )  # fmt: skip
    ids = torch.randint(0, 128, (2, 256), generator=torch.Generator().manual_seed(0)).cuda()
    segments = (torch.arange(256, device="cuda") >= 100).long().expand(2, 256).contiguous()
    batch = {"input_ids": ids, "labels": ids, "position_ids": torch.arange(256, device="cuda").expand(2, 256)}
    batch["attention_mask"] = document_block_mask(segments)
    gradients = []
    for compiled in (False, True):
        model = build_model(config, None, seed=0, device="cuda")
        model.train()
        use_attention(model, "flex")
        enable_activation_checkpointing(model, "selective")
        if compiled:
            torch._dynamo.reset()
            counters.clear()
            compile_layers(model.get_decoder().layers)
        token_loss_sum(model, batch).backward()
        gradients.append([p.grad for p in model.parameters()])
    assert counters["frames"]["ok"] == counters["frames"]["total"] >= 1 and not counters["graph_break"]
    for eager, compiled in zip(*gradients, strict=True):
        torch.testing.assert_close(compiled, eager, rtol=1e-3, atol=1e-4)
