"""Packed attention: the flex_attention BlockMask keeps documents apart exactly as the dense mask does, the
automatic choice, refusals before launch, and (on CUDA) training with flex equal to training with the dense mask."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F
from support import TINY_MODEL, meshpilot, train, write_experiment
from torch.nn.attention.flex_attention import create_block_mask, flex_attention
from transformers import AutoConfig

from trainer.config import TrainSpec
from trainer.costs.memory_model import MemoryPlan, activation_bytes
from trainer.data.packing import block_causal_mask
from trainer.layout import Layout
from trainer.model.attention import FLEX_IMPLEMENTATION, AttentionError, choose_attention, document_block_mask

# Two rows: three documents; one document then padding (segment -1).
SEGMENTS = torch.tensor([[0] * 40 + [1] * 60 + [2] * 28, [0] * 90 + [-1] * 38])


def attention_inputs(heads: int = 4, kv_heads: int = 2, head_dim: int = 16):
    g = torch.Generator().manual_seed(0)
    batch, seq_len = SEGMENTS.shape
    q = torch.randn(batch, heads, seq_len, head_dim, generator=g)
    k, v = (torch.randn(batch, kv_heads, seq_len, head_dim, generator=g) for _ in range(2))
    return q, k, v


def dense_reference(q, k, v, segments):
    mask = block_causal_mask(segments)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)


def eager_flex(q, k, v, block_mask):
    with warnings.catch_warnings():  # uncompiled flex_attention warns that it is the unfused reference
        warnings.simplefilter("ignore")
        return flex_attention(q, k, v, block_mask=block_mask, enable_gqa=True)


def test_block_mask_isolates_documents_like_the_dense_mask():
    q, k, v = attention_inputs()
    got = eager_flex(q, k, v, document_block_mask(SEGMENTS))
    torch.testing.assert_close(got, dense_reference(q, k, v, SEGMENTS), rtol=1e-5, atol=1e-5)


def test_a_causal_block_mask_that_ignores_documents_is_caught():
    """Negative control: causal attention across document boundaries must not pass for document masking."""
    q, k, v = attention_inputs()
    batch, seq_len = SEGMENTS.shape
    causal_only = create_block_mask(lambda b, h, q_idx, kv_idx: q_idx >= kv_idx, batch, None, seq_len, seq_len, "cpu")
    leaked = eager_flex(q, k, v, causal_only)
    assert (leaked - dense_reference(q, k, v, SEGMENTS)).abs().max() > 1e-2


@pytest.mark.parametrize(
    ("requested", "device", "pp", "packing", "chosen"),
    [
        ("auto", "cuda", 1, True, "flex"),  # measured on an H100: faster and smaller than the dense mask
        ("auto", "cuda", 1, False, "dense"),  # unpacked rows need no mask: SDPA's flash kernel
        ("auto", "cuda", 2, True, "flex"),  # each pipeline stage builds the BlockMask from the segment ids
        ("flex", "cuda", 2, True, "flex"),
        ("auto", "cpu", 1, True, "dense"),  # no flex backward on CPU
        ("dense", "cuda", 1, True, "dense"),
        ("flex", "cuda", 1, True, "flex"),
    ],
)
def test_the_choice(requested, device, pp, packing, chosen):
    assert choose_attention(requested, device, Layout(pp=pp), head_dim=64, packing=packing) == chosen


def test_the_memory_model_follows_the_kernel_packed_rows_get():
    """Under flex, packed rows keep no [seq, seq] mask bias (the dense kernel's one bias, shared by the layers) and
    keys and values stay unrepeated: the memory model predicts what the launcher's choice runs (measured on an H100
    at 32k: a third less peak)."""
    config = AutoConfig.for_model(**{**TINY_MODEL, "hidden_size": 128, "max_position_embeddings": 256})  # 32-wide heads

    def activations(attention: str, device: str) -> int:
        spec = TrainSpec(micro_batch=1, attention=attention)
        plan = MemoryPlan(1, 256, "bf16", False, spec, packing=True, device_type=device)
        return activation_bytes(config, Layout(dp_replicate=1), plan)

    seq_len, bf16 = 256, 2
    assert activations("auto", "cuda") == activations("flex", "cuda") < activations("dense", "cuda")
    assert activations("auto", "cpu") == activations("dense", "cpu") == activations("dense", "cuda")
    saved_mask = seq_len * seq_len * bf16  # one bias row per token, shared by the layers
    assert activations("dense", "cuda") - activations("flex", "cuda") > saved_mask


def test_context_parallelism_keeps_its_own_attention():
    assert choose_attention("auto", "cuda", Layout(cp=2), head_dim=64) == "dense"
    with pytest.raises(AttentionError, match="context parallelism brings its own attention function"):
        choose_attention("flex", "cuda", Layout(cp=2), head_dim=64)


def test_narrow_heads_keep_the_dense_mask():
    """flex_attention's kernels have no heads narrower than 16 (found on an H100): flex is refused."""
    assert choose_attention("auto", "cuda", Layout(), head_dim=8) == "dense"
    with pytest.raises(AttentionError, match="at least 16 dimensions, this model's have 8"):
        choose_attention("flex", "cuda", Layout(), head_dim=8)


@pytest.mark.parametrize(
    ("requested", "device", "pp", "message"),
    [
        ("flex", "cpu", 1, "train.attention flex cannot run here: flex_attention has no backward on CPU"),
        ("flash", "cuda", 1, "train.attention must be one of auto, dense, flex, not 'flash'"),
    ],
)  # fmt: skip
def test_impossible_choices_are_refused(requested, device, pp, message):
    with pytest.raises(AttentionError) as refused:
        choose_attention(requested, device, Layout(pp=pp), head_dim=64)
    assert str(refused.value) == message


def test_flex_on_cpu_is_refused_before_launch(tmp_path):
    experiment = write_experiment(tmp_path, {"hardware": {"device_type": "cpu"}})
    done = meshpilot("train", str(experiment), "--out", str(tmp_path / "run"), "--set", "train.attention=flex")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "meshpilot: error: train.attention flex cannot run here: flex_attention has no backward on CPU"
    ]
    assert not (tmp_path / "run").exists()


def test_flex_survives_the_sharded_build(tmp_path):
    """The meta-device model's materialisation must not switch the attention back to SDPA (seen on an H100: the
    template model materialize builds rewrote the shared config)."""
    from transformers import AutoConfig

    from trainer.model.attention import use_attention
    from trainer.model.build import materialize, meta_model

    config = AutoConfig.for_model(**{**TINY_MODEL, "hidden_size": 64, "intermediate_size": 128})
    model = meta_model(config)
    use_attention(model, "flex")
    materialize(model, torch.device("cpu"), config, None, seed=0)
    assert model.config._attn_implementation == FLEX_IMPLEMENTATION
    assert config._attn_implementation != FLEX_IMPLEMENTATION  # the caller's config is not the model's


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_training_with_flex_equals_the_dense_mask(tmp_path):
    """fp32 on one GPU: the same losses and gradient norms with either document mask."""
    wide_heads = {"hidden_size": 64, "intermediate_size": 128}  # flex_attention needs heads of 16 or more
    changes = {"model": {"config": wide_heads}, "hardware": {"device_type": "cuda"}, "train": {"precision": "fp32"}}
    experiment = write_experiment(tmp_path, changes)
    runs = {
        kind: train(experiment, tmp_path / kind, "--nproc", "1", "--set", f"train.attention={kind}")
        for kind in ("dense", "flex")
    }
    assert runs["flex"].read_metrics()["status"] == "ok"
    steps = {kind: run.read_steps() for kind, run in runs.items()}
    for dense, flex in zip(steps["dense"], steps["flex"], strict=True):
        assert flex["loss"] == pytest.approx(dense["loss"], rel=1e-5)
        assert flex["grad_norm"] == pytest.approx(dense["grad_norm"], rel=1e-4)
