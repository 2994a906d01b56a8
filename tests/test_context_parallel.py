"""Context parallelism: every cp layout gives the single-process run's per-step losses and gradient norms (tiny
Llama, 3 steps) on packed and unpacked rows, with grouped-query and full multi-head attention; the attention
function matches the model without cp on each of those four kinds of data while broken ones do not; and the memory
and throughput models count what cp keeps and moves."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
from helpers import forked_ranks
from support import LLAMA_8B, REPO, TINY_MODEL, train, write_experiment
from test_layouts import assert_memory_model_matches
from transformers import AutoConfig

from trainer.config import TrainSpec
from trainer.costs.memory_model import MemoryPlan, activation_bytes, local_shapes
from trainer.costs.throughput import communication_bytes, context_parallel_bytes
from trainer.data.packing import block_causal_mask
from trainer.layout import Layout
from trainer.parallel.context_parallel import document_causal_mask_mod, gathered_positions, local_mask, local_positions

VARIANTS = {  # data variant: (packed rows, key-value heads); TINY_MODEL has 4 query heads
    "packed_gqa": (True, 2),
    "packed_mha": (True, 4),
    "unpacked_gqa": (False, 2),
    "unpacked_mha": (False, 4),
}
# Each layout runs two variants that between them cover packed and unpacked rows, grouped-query and full
# multi-head attention (a training run costs tens of seconds; the attention test below covers all four).
PAIRS = (("packed_gqa", "unpacked_mha"), ("packed_mha", "unpacked_gqa"))
LAYOUTS = {  # layout: (processes, variants, --set overrides)
    "cp=2": (2, PAIRS[0], []),
    "cp=4": (4, PAIRS[1], []),
    "dp_shard=2,cp=2": (4, PAIRS[0], ["train.activation_checkpointing=true"]),  # recomputation re-gathers
    "cp=2,tp=2": (4, PAIRS[1], []),  # grouped-query: one key-value head per tp rank
    "dp_replicate=2,cp=2": (4, PAIRS[0], []),  # DDP's reduction spans cp ranks too
    "pp=2,cp=2": (4, PAIRS[1], []),  # stages rebuild the mask from the rows' segment ids
}
CASES = [
    pytest.param(layout, variant, id=f"{layout}-{variant}") for layout in LAYOUTS for variant in LAYOUTS[layout][1]
]
HELPER = REPO / "tests" / "helpers" / "cp_attention.py"


@pytest.fixture(scope="module")
def experiments(tmp_path_factory):
    def changes(packed: bool, kv_heads: int) -> dict:
        return {"data": {"packing": packed}, "model": {"config": {"num_key_value_heads": kv_heads}}}

    return {name: write_experiment(tmp_path_factory.mktemp(name), changes(*v)) for name, v in VARIANTS.items()}


@pytest.fixture(scope="module")
def references(experiments):
    """Single-process runs, trained on first use and shared by the layouts that compare with them."""
    runs = {}

    def reference(name: str):
        if name not in runs:
            runs[name] = train(experiments[name], experiments[name].parent / "single", "--nproc", "1")
        return runs[name]

    return reference


def test_each_layout_covers_packing_and_attention_kinds():
    for _, variants, _ in LAYOUTS.values():
        assert {VARIANTS[v][0] for v in variants} == {True, False}  # packed and unpacked
        assert {VARIANTS[v][1] for v in variants} == {2, 4}  # grouped-query and full multi-head


@pytest.mark.slow
@pytest.mark.parametrize(("layout", "variant"), CASES)
def test_layout_matches_single_process(experiments, references, layout, variant):
    nproc, _, overrides = LAYOUTS[layout]
    expected = references(variant).read_steps()
    out = experiments[variant].parent / layout.replace(",", "_").replace("=", "")
    sets = [arg for override in overrides for arg in ("--set", override)]
    run = train(experiments[variant], out, "--nproc", str(nproc), "--layout", layout, *sets)
    got = run.read_steps()
    assert len(got) == len(expected) == 3  # beyond step 1: the optimizer step's parameters are compared too
    for a, b in zip(expected, got, strict=True):
        assert b["loss"] == pytest.approx(a["loss"], rel=1e-5), (layout, variant)
        assert b["grad_norm"] == pytest.approx(a["grad_norm"], rel=1e-5), (layout, variant)
        assert (b["tokens"], b["target_tokens"]) == (a["tokens"], a["target_tokens"])  # every cp rank's tokens count
    assert_memory_model_matches(run)
    metrics = run.read_metrics()
    assert metrics["layout"]["cp"] == int(layout.split("cp=")[1].split(",")[0])


def run_attention_helper(tmp_path, processes: int, device: str) -> dict:
    out = tmp_path / "attention.json"
    args = [str(out), device, json.dumps(VARIANTS)]
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    if device == "cpu":  # as torchrun runs it, the ranks forked from one interpreter (tests/helpers/forked_ranks.py)
        forked_ranks.run_script(HELPER, processes, *args, env=env)
    else:  # CUDA: fresh ranks
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={processes}"]
        done = subprocess.run([*command, str(HELPER), *args], env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(out.read_text())
    assert set(results) == set(VARIANTS)
    return results


@pytest.mark.slow
def test_attention_matches_and_negative_controls_fail(tmp_path):
    """On each data variant, the gathered attention equals the unsplit model's loss and gradients; leaving the
    keys local, a mask with the keys in sequence order rather than gather order, or (packed rows) a mask that
    ignores documents, is caught by the same comparison."""
    for variant, results in run_attention_helper(tmp_path, 2, "cpu").items():
        assert results["gathered"]["loss_rel"] < 1e-5 and results["gathered"]["grad_rel"] < 1e-5, variant
        packed, kv_heads = VARIANTS[variant]
        broken = ["keys_not_gathered", "keys_in_sequence_order"] + (["documents_ignored"] if packed else [])
        for control in broken:
            assert results[control]["loss_rel"] > 1e-5 and results[control]["grad_rel"] > 1e-2, (variant, control)
        # The bytes the real collectives moved: an all-gather and a reduce-scatter per layer.
        config = AutoConfig.for_model(**{**TINY_MODEL, "num_key_value_heads": kv_heads})
        per_collective = context_parallel_bytes(config, Layout(dp_replicate=1, cp=2), micro_batch=2, seq_len=64)
        assert results["collectives"] == 2 * TINY_MODEL["num_hidden_layers"]
        assert results["collective_bytes"] == results["collectives"] * per_collective


def test_zigzag_chunks_cover_the_sequence_and_balance_causal_work():
    for cp in (1, 2, 4):
        assert sorted(gathered_positions(64, cp).tolist()) == list(range(64))
        # Causal pairs per rank (each query attends to the keys at or before it) are equal under zigzag.
        pairs = {int((local_positions(64, cp, r) + 1).sum()) for r in range(cp)}
        assert len(pairs) == 1
    assert local_positions(16, 2, 0).tolist() == [0, 1, 2, 3, 12, 13, 14, 15]
    assert local_positions(16, 2, 1).tolist() == [4, 5, 6, 7, 8, 9, 10, 11]


def test_local_masks_are_rows_and_columns_of_the_full_mask():
    segments = torch.tensor([[0] * 5 + [1] * 7 + [2] * 2 + [-1] * 2, [0] * 16])
    full = block_causal_mask(segments)
    keys = gathered_positions(16, 4)
    for rank in range(4):
        queries = local_positions(16, 4, rank)
        expected = full[:, :, queries][:, :, :, keys]
        assert torch.equal(local_mask(segments, 4, rank, 16), expected)
        causal = block_causal_mask(torch.zeros(1, 16, dtype=torch.long))[:, :, queries][:, :, :, keys]
        assert torch.equal(local_mask(None, 4, rank, 16), causal)


@pytest.mark.parametrize("cp", [2, 4])
def test_mask_function_over_global_positions_gives_the_dense_masks_pairs(cp):
    """The mask_mod flex reads on CUDA (no [local queries x all keys] tensor) allows exactly the dense mask's
    pairs, on packed rows with padding and on one-document rows; so does its BlockMask, built here uncompiled."""
    from torch.nn.attention.flex_attention import create_block_mask

    segments = torch.tensor([[0] * 5 + [1] * 7 + [2] * 2 + [-1] * 2, [0] * 16, [3] * 9 + [4] * 7])
    batch, queries, keys = torch.arange(3)[:, None, None], torch.arange(16 // cp)[None, :, None], torch.arange(16)
    for rank in range(cp):
        mask_mod = document_causal_mask_mod(segments, cp, rank)
        expected = local_mask(segments, cp, rank, 16)[:, 0]
        assert torch.equal(mask_mod(batch, 0, queries, keys[None, None, :]), expected)
        block_mask = create_block_mask(mask_mod, 3, None, 16 // cp, 16, device="cpu", BLOCK_SIZE=4, _compile=False)
        assert torch.equal(block_mask.to_dense()[:, 0].bool(), _blocks_with_any(expected, 4))


def _blocks_with_any(mask: torch.Tensor, block: int) -> torch.Tensor:
    """[batch, q / block, k / block]: whether any pair of each block is allowed."""
    b, q, k = mask.shape
    return mask.reshape(b, q // block, block, k // block, block).any(dim=4).any(dim=2)


def test_context_parallel_takes_no_dense_mask_on_cuda():
    """On CUDA the planner and the memory model price context parallelism without the dense mask (flex with the
    mask function): keys and values gathered unrepeated, no bias per token; on CPU the dense mask stays."""
    config = AutoConfig.for_model(**{**TINY_MODEL, "hidden_size": 128, "num_attention_heads": 4})  # heads of 32
    layout = Layout(dp_replicate=1, cp=2)
    plans = {device: MemoryPlan(1, 1024, "fp32", False, TrainSpec(), device_type=device) for device in ("cpu", "cuda")}
    saved = {device: activation_bytes(config, layout, plan) for device, plan in plans.items()}
    tokens, layers = 1024 // 2, TINY_MODEL["num_hidden_layers"]
    q, kv = 128, 128 * 2 // 4
    repeated = tokens * layers * 2 * (q - kv) * 2 * 4  # SDPA's keys and values repeated to every head, over cp
    assert saved["cpu"] - saved["cuda"] == repeated + tokens * 1024 * 4  # and the fp32 bias, once


def test_memory_model_divides_by_cp_except_gathered_keys_and_values():
    config = AutoConfig.for_model(**{**TINY_MODEL, "num_key_value_heads": 4})
    plan = MemoryPlan(1, 1024, "fp32", False, TrainSpec())
    single = activation_bytes(config, Layout(dp_replicate=1), plan)
    split = activation_bytes(config, Layout(dp_replicate=1, cp=4), plan)
    q = TINY_MODEL["hidden_size"]
    # Per local token and layer: k and v of the 3 other ranks' tokens, fp32. A local query's mask row spans every
    # key, as each query's row does without cp: it divides by cp like the rest. 4: the loss's fp32 scalar.
    gathered = 2 * q * 4 * (1024 // 4) * TINY_MODEL["num_hidden_layers"] * (4 - 1)
    assert split - 4 - (single - 4) // 4 == gathered
    # Parameters, gradients and optimizer state shard over dp_shard x cp (FSDP2), cp innermost.
    layout = Layout(dp_replicate=1, dp_shard=2, cp=2)
    rows = [dict(local_shapes(config, layout, rank))["model.embed_tokens.weight"][0] for rank in range(4)]
    assert rows == [TINY_MODEL["vocab_size"] // 4] * 4


def test_throughput_model_counts_the_gathers_and_reduce_scatters():
    config = AutoConfig.for_model(**{**TINY_MODEL, "hidden_size": 64, "num_attention_heads": 8})
    layout = Layout(dp_replicate=1, cp=4, tp=2)
    per = context_parallel_bytes(config, layout, micro_batch=2, seq_len=128)
    # (cp - 1) x the local keys and values: 2 x 64 local tokens x 64 x 2/8 kv share x 4 bytes, over tp.
    assert per == 3 * 2 * 64 * 64 * (2 / 8) * 4 / 2
    sent = communication_bytes(config, layout, 10**6, 2, 128, grad_accum=3)["cp"]
    assert sent == (3 * 2 * 2 * per, 3 * 2 * 2)  # micro-batches x layers x (gather, reduce-scatter)
    recomputed = communication_bytes(config, layout, 10**6, 2, 128, 3, checkpointing="full")["cp"]
    assert recomputed == (3 * 2 * 3 * per, 3 * 2 * 3)


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="NCCL needs a GPU per cp rank: 2 or more")
def test_attention_on_cuda_matches_across_two_gpus(tmp_path):
    for variant, results in run_attention_helper(tmp_path, 2, "cuda").items():
        assert results["gathered"]["loss_rel"] < 1e-4 and results["gathered"]["grad_rel"] < 1e-4, variant
        assert results["keys_not_gathered"]["grad_rel"] > 1e-2, variant


NO_CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
CUDA = pytest.param("cuda", marks=[pytest.mark.gpu, NO_CUDA])


@pytest.mark.parametrize("device", ["cpu", CUDA])
def test_attention_function_equals_sdpa_with_a_group_of_one(device):
    """In one process: the registered attention function, through a cp group of one (a real all-gather and
    reduce-scatter: gloo on CPU, NCCL on CUDA), gives SDPA's output and gradients for a packed-document mask."""
    import torch.distributed as dist
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    from trainer.parallel.context_parallel import context_parallel_attention

    backend, device_id = ("nccl", torch.device("cuda", 0)) if device == "cuda" else ("gloo", None)
    dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1, device_id=device_id)
    try:
        module = torch.nn.Module()
        module.num_key_value_groups, module.is_causal = 2, True
        generator = torch.Generator(device).manual_seed(0)
        shapes = [(2, 4, 64, 16), (2, 2, 64, 16), (2, 2, 64, 16)]
        inputs = [torch.randn(s, device=device, generator=generator, requires_grad=True) for s in shapes]
        segments = torch.tensor([[0] * 20 + [1] * 44, [0] * 50 + [-1] * 14], device=device)
        mask = local_mask(segments, 1, 0, 64)
        assert torch.equal(mask, block_causal_mask(segments))
        got, _ = context_parallel_attention(module, *inputs, mask, group=dist.group.WORLD, scaling=0.25)
        got_grads = torch.autograd.grad(got.square().sum(), inputs)
        want, _ = sdpa_attention_forward(module, *inputs, mask, scaling=0.25, is_causal=False)
        want_grads = torch.autograd.grad(want.square().sum(), inputs)
        torch.testing.assert_close(got, want)
        for a, b in zip(got_grads, want_grads, strict=True):
            torch.testing.assert_close(a, b)
    finally:
        dist.destroy_process_group()


def test_planner_shows_which_layouts_fit_only_because_of_cp(tmp_path):
    """One 128k-token row of an 8B model on 8 GPUs of 80 GB: without cp only tp=8 fits (its sequence parallelism
    splits the saved activations by 8 too); the layouts with less tp fit only because of cp."""
    from trainer.config import load_experiment
    from trainer.costs.planner import format_table, plan
    from trainer.hardware import Hardware
    from trainer.model.build import model_config

    seq_len = 131072
    changes = {"model": {"config": LLAMA_8B}, "data": {"seq_len": seq_len}}
    changes["train"] = {"global_batch_tokens": seq_len, "micro_batch": 1, "precision": "bf16"}
    experiment = load_experiment(write_experiment(tmp_path, changes))
    config = model_config(experiment.model, tmp_path)
    hardware = Hardware("cuda", "NVIDIA H100 80GB HBM3", devices_per_node=8)
    candidates = plan(experiment, config, hardware, 80 * 1024**3, seq_len)
    feasible = [c for c in candidates if c.dropped is None]
    assert {c.layout.tp for c in feasible if c.layout.cp == 1} == {8}
    # tp=4 x cp=2 fits only because of cp under selective checkpointing (76.3 GiB: it fits at all since the embedding
    # and head are split by vocabulary), while under full checkpointing tp=4 alone fits too.
    only_with_cp = [c.layout.tp * c.layout.cp == 8 and (c.layout.tp < 4 or c.activation_checkpointing == "selective")
                    for c in feasible]  # fmt: skip
    assert [c.fits_only_with_cp for c in feasible] == only_with_cp
    assert any(c.fits_only_with_cp for c in feasible)
    assert all("GiB" in c.dropped for c in candidates if c.layout.cp == 1 and c.layout.tp < 8)  # dropped for memory
    assert "fits only because of cp (cp=1 needs" in format_table(candidates)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_flex_with_the_mask_function_equals_sdpa_with_the_dense_mask_on_cuda():
    """One cp rank's attention, its local queries against the whole sequence's keys in gather order: flex with
    the BlockMask (what CUDA runs) against SDPA with the dense mask (what CPU runs), output and gradients."""
    import torch.nn.functional as F
    from torch.nn.attention.flex_attention import flex_attention

    from trainer.parallel.context_parallel import local_block_mask

    torch.manual_seed(0)
    seq_len, cp, rank = 512, 2, 1
    segments = torch.tensor([[0] * 200 + [1] * 250 + [-1] * 62], device="cuda")
    query = torch.randn(1, 4, seq_len // cp, 32, device="cuda", requires_grad=True)
    key, value = (torch.randn(1, 2, seq_len, 32, device="cuda", requires_grad=True) for _ in range(2))
    dense = local_mask(segments, cp, rank, seq_len)
    expected = F.scaled_dot_product_attention(query, key, value, attn_mask=dense, enable_gqa=True)
    expected_grads = torch.autograd.grad(expected.square().sum(), (query, key, value))
    got = torch.compile(flex_attention)(
        query, key, value, block_mask=local_block_mask(segments, cp, rank), enable_gqa=True
    )
    grads = torch.autograd.grad(got.square().sum(), (query, key, value))
    torch.testing.assert_close(got, expected, rtol=1e-3, atol=1e-3)
    for a, b in zip(grads, expected_grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-3, atol=1e-3)
