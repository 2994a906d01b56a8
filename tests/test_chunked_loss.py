"""The chunked output head + cross-entropy (trainer.model.loss) gives the plain loss and gradients: alone, through the
trainer's own loss (tied and untied embeddings, fp32 and bf16 autocast), chunk sizes from one token to more than
the micro-batch. Multi-process layouts (FSDP2, tensor parallel, DDP) run the same loss and are held against the
one-process run in tests/test_layouts.py."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from support import TINY_MODEL
from transformers import AutoConfig, AutoModelForCausalLM

import trainer.model.loss
from trainer.data.packing import IGNORE_INDEX, model_inputs
from trainer.model.loss import chunk_tokens, chunked_cross_entropy_sum
from trainer.rank.step import token_loss_sum


def plain_loss(hidden, weight, labels):
    logits = (hidden @ weight.T).float()
    return F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE_INDEX, reduction="sum")


def labels_with_holes(shape, vocab, generator):
    labels = torch.randint(0, vocab, shape, generator=generator)
    labels[torch.rand(shape, generator=generator) < 0.3] = IGNORE_INDEX
    return labels


@pytest.mark.parametrize("chunk", [1, 7, 40, 1000])
def test_equals_the_plain_loss_and_gradients(chunk):
    generator = torch.Generator().manual_seed(0)
    hidden = torch.randn(2, 20, 16, generator=generator, dtype=torch.float64).float().requires_grad_()
    weight = torch.randn(50, 16, generator=generator).requires_grad_()
    labels = labels_with_holes((2, 20), 50, generator)
    expected = plain_loss(hidden, weight, labels)
    expected_grads = torch.autograd.grad(expected * 0.37, (hidden, weight))
    got = chunked_cross_entropy_sum(hidden, weight, labels, chunk)
    grads = torch.autograd.grad(got * 0.37, (hidden, weight))
    torch.testing.assert_close(got, expected, rtol=1e-6, atol=1e-5)
    for a, b in zip(grads, expected_grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("chunk", [7, 1000])
def test_a_head_with_a_bias_takes_it_into_the_loss_and_its_gradient(chunk):
    """Phi's output head has a bias: the chunked loss adds it to each chunk's logits and gives it its gradient, as
    the plain head does."""
    generator = torch.Generator().manual_seed(3)
    hidden = torch.randn(2, 20, 16, generator=generator).requires_grad_()
    weight = torch.randn(50, 16, generator=generator).requires_grad_()
    bias = torch.randn(50, generator=generator).requires_grad_()
    labels = labels_with_holes((2, 20), 50, generator)
    logits = (hidden @ weight.T + bias).float()
    expected = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE_INDEX, reduction="sum")
    expected_grads = torch.autograd.grad(expected * 0.37, (hidden, weight, bias))
    got = chunked_cross_entropy_sum(hidden, weight, labels, chunk, bias)
    grads = torch.autograd.grad(got * 0.37, (hidden, weight, bias))
    torch.testing.assert_close(got, expected, rtol=1e-6, atol=1e-5)
    for a, b in zip(grads, expected_grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_a_phi_model_trains_on_its_head_bias():
    """Through the trainer's loss, a Phi model (whose lm_head has a bias) gets the plain loss and gradients, the
    head's bias included."""
    config = AutoConfig.for_model(
        "phi", vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        max_position_embeddings=64,
    )  # fmt: skip
    generator = torch.Generator().manual_seed(4)
    ids = torch.randint(0, config.vocab_size, (2, 24), generator=generator)
    batch = {"input_ids": ids, "labels": labels_with_holes((2, 24), config.vocab_size, generator)}
    batch |= {"position_ids": torch.arange(24).expand_as(ids), "segment_ids": torch.zeros_like(ids)}
    expected_loss, expected = model_step(config, batch, chunked=False)
    loss, grads = model_step(config, batch, chunked=True)
    assert "lm_head.bias" in expected and float(expected["lm_head.bias"].abs().max()) > 0
    torch.testing.assert_close(loss, expected_loss, rtol=1e-6, atol=0)
    for name, grad in expected.items():
        torch.testing.assert_close(grads[name], grad, rtol=1e-5, atol=1e-6, msg=name)


def test_chunk_holds_a_bounded_number_of_logits():
    assert chunk_tokens(128256) == 256  # 128 MiB of fp32 logits (261 tokens), in whole 128-row tiles
    assert chunk_tokens(512) > 50_000  # a small vocabulary: a micro-batch in one chunk
    assert chunk_tokens(10**12) == 1


def model_step(config, batch, chunked: bool, bf16: bool = False):
    torch.manual_seed(0)
    # transformers' own build: it ties the embeddings (trainer.model.build.build_model's materialisation unties them)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="sdpa")
    model.train()
    tied = model.get_output_embeddings().weight is model.get_input_embeddings().weight
    assert tied == config.tie_word_embeddings
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        if chunked:
            loss = token_loss_sum(model, batch)
        else:
            logits = model(**model_inputs(batch)).logits
            loss = F.cross_entropy(
                logits.float().flatten(0, 1), batch["labels"].flatten(), ignore_index=IGNORE_INDEX, reduction="sum"
            )
    loss.backward()
    return loss.detach(), {name: p.grad for name, p in model.named_parameters()}


@pytest.mark.parametrize("tied", [False, True])
@pytest.mark.parametrize("bf16", [False, True])
def test_trainer_loss_equals_the_plain_one(monkeypatch, tied, bf16):
    config = AutoConfig.for_model(**{**TINY_MODEL, "tie_word_embeddings": tied})
    generator = torch.Generator().manual_seed(1)
    seq_len = 48
    ids = torch.randint(0, config.vocab_size, (2, seq_len), generator=generator)
    segments = torch.arange(seq_len).div(20, rounding_mode="floor").expand(2, seq_len).contiguous()
    batch = {"input_ids": ids, "labels": labels_with_holes((2, seq_len), config.vocab_size, generator)}
    batch |= {"position_ids": torch.arange(seq_len).expand_as(ids), "segment_ids": segments}
    # 13 tokens per chunk: the 96 tokens of the micro-batch in 8 chunks, the last one short.
    monkeypatch.setattr(trainer.model.loss, "CHUNK_LOGIT_BYTES", 13 * config.vocab_size * 4)
    expected_loss, expected = model_step(config, batch, chunked=False, bf16=bf16)
    loss, grads = model_step(config, batch, chunked=True, bf16=bf16)
    if not bf16:
        torch.testing.assert_close(loss, expected_loss, rtol=1e-6, atol=0)
        for name, grad in expected.items():
            torch.testing.assert_close(grads[name], grad, rtol=1e-5, atol=1e-6, msg=name)
        return
    # bf16: the same matmuls but for the head weight's gradient, summed over chunks in bf16 (as the weight is
    # under FSDP2's mixed precision) where the plain matmul rounds once: bf16 rounding, well under 1% of its scale.
    torch.testing.assert_close(loss, expected_loss, rtol=1e-6, atol=0)
    for name, grad in expected.items():
        assert float((grads[name] - grad).abs().max()) <= 0.01 * float(grad.abs().max()), name


def test_whole_loss_is_the_plain_one():
    """train.loss whole: the trainer's loss over the whole logits at once is the plain cross-entropy of the model's
    logits, loss and gradients, untouched by the chunked head (which needs no undoing afterwards)."""
    config = AutoConfig.for_model(**TINY_MODEL)
    generator = torch.Generator().manual_seed(2)
    ids = torch.randint(0, config.vocab_size, (2, 32), generator=generator)
    batch = {"input_ids": ids, "labels": labels_with_holes((2, 32), config.vocab_size, generator)}
    batch |= {"position_ids": torch.arange(32).expand_as(ids), "segment_ids": torch.zeros_like(ids)}
    expected_loss, expected = model_step(config, batch, chunked=False)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="sdpa")
    loss = token_loss_sum(model, batch, whole=True)
    loss.backward()
    torch.testing.assert_close(loss.detach(), expected_loss, rtol=0, atol=0)
    for name, p in model.named_parameters():
        torch.testing.assert_close(p.grad, expected[name], rtol=0, atol=0, msg=name)
