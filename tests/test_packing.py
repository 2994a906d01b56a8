"""Packed documents never see each other: logits and loss equal those of each document run alone.

The checks go through the trainer's own input path (`trainer.rank.step.token_loss_sum`, which builds the model's
inputs with `model_inputs`), and negative controls break that path to show the checks can fail. Transformers
infers document boundaries by itself from restarting position_ids when no mask is given and the KV cache is off
(as in training), so a dropped mask would go unnoticed there: the controls also run with position ids that keep
counting across documents, where only the explicit mask can keep the documents apart.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from transformers import AutoModelForCausalLM, LlamaConfig

import trainer.rank.step
from trainer.data.packing import IGNORE_INDEX, block_causal_mask, model_inputs, row_from_segments
from trainer.rank.step import token_loss_sum

DOC_LENGTHS = (7, 12, 4, 9)


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=97,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    return AutoModelForCausalLM.from_config(config, attn_implementation="sdpa", dtype=torch.float32)


@pytest.fixture(scope="module")
def documents():
    rng = np.random.default_rng(0)
    return [rng.integers(0, 97, size=n) for n in DOC_LENGTHS]


def packed_batch(documents, pad_to: int) -> dict[str, torch.Tensor]:
    """One row holding every document, padded to pad_to positions (plus the look-ahead slot)."""
    tokens = np.zeros(pad_to + 1, dtype=np.int64)
    segments = np.full(pad_to + 1, -1, dtype=np.int64)
    at = 0
    for i, doc in enumerate(documents):
        tokens[at : at + len(doc)], segments[at : at + len(doc)] = doc, i
        at += len(doc)
    row = row_from_segments(tokens, segments)
    return {k: torch.from_numpy(v)[None] for k, v in row.items()}


def separate_logits(model, documents) -> list[torch.Tensor]:
    return [model(torch.from_numpy(doc)[None], use_cache=False).logits[0] for doc in documents]


@pytest.mark.parametrize("mode", ["train", "eval"])
def test_packed_logits_equal_separate_documents(model, documents, mode):
    getattr(model, mode)()
    batch = packed_batch(documents, pad_to=sum(DOC_LENGTHS) + 3)
    with torch.no_grad():
        packed = model(**model_inputs(batch)).logits[0]
        expected = separate_logits(model, documents)
    at = 0
    for doc, logits in zip(documents, expected, strict=True):
        torch.testing.assert_close(packed[at : at + len(doc)], logits, atol=1e-5, rtol=0)
        at += len(doc)


def trainer_path_deviation(model, documents, positions: str) -> tuple[float, float]:
    """Largest logit and relative loss difference between the packed row run through the trainer's loss
    (`token_loss_sum`) and each document run alone at the same position ids."""
    batch = packed_batch(documents, pad_to=sum(DOC_LENGTHS) + 3)
    if positions == "running":  # no restart at document starts: transformers cannot infer the boundaries
        batch["position_ids"] = torch.arange(batch["input_ids"].shape[1])[None]
    captured = []
    # The trainer's head computes the loss in place of the logits (trainer.model.loss): its input gives them.
    head = model.get_output_embeddings()
    hook = head.register_forward_hook(lambda module, args, _loss: captured.append(F.linear(args[0], module.weight)[0]))
    with torch.no_grad():
        try:
            packed_loss = float(token_loss_sum(model, batch))
        finally:
            hook.remove()
        logit_deviation, expected_loss, at = 0.0, 0.0, 0
        for doc in documents:
            ids = torch.from_numpy(doc)[None]
            alone = model(ids, position_ids=batch["position_ids"][:, at : at + len(doc)], use_cache=False).logits[0]
            logit_deviation = max(logit_deviation, float((captured[0][at : at + len(doc)] - alone).abs().max()))
            expected_loss += float(F.cross_entropy(alone[:-1], ids[0, 1:], reduction="sum"))
            at += len(doc)
    return logit_deviation, abs(packed_loss - expected_loss) / expected_loss


@pytest.mark.parametrize("mode", ["train", "eval"])
@pytest.mark.parametrize("positions", ["restarting", "running"])
def test_trainer_path_isolates_documents(model, documents, mode, positions):
    getattr(model, mode)()
    logit_deviation, loss_deviation = trainer_path_deviation(model, documents, positions)
    assert logit_deviation < 1e-5
    assert loss_deviation < 1e-6


def _without_mask(batch, packed=True):
    return {k: v for k, v in model_inputs(batch, packed).items() if k != "attention_mask"}


def _causal_only_mask(batch, packed=True):
    causal = block_causal_mask(torch.zeros_like(batch["segment_ids"]))
    return {**model_inputs(batch, packed), "attention_mask": causal}


@pytest.mark.parametrize("broken", [_without_mask, _causal_only_mask], ids=["mask dropped", "mask ignores documents"])
def test_broken_mask_path_is_detected(model, documents, monkeypatch, broken):
    """Negative control: the same check fails when the trainer's input path drops the mask or builds a wrong one."""
    model.train()
    monkeypatch.setattr(trainer.rank.step, "model_inputs", broken)
    logit_deviation, loss_deviation = trainer_path_deviation(model, documents, "running")
    assert logit_deviation > 1e-3
    assert loss_deviation > 1e-4


def test_mask_isolates_in_eval_mode_with_cache_on(model, documents):
    """The default eval forward (use_cache on) is where transformers' own inference from position_ids leaks."""
    model.eval()
    batch = packed_batch(documents, pad_to=sum(DOC_LENGTHS))
    with torch.no_grad():
        masked = model(
            batch["input_ids"],
            position_ids=batch["position_ids"],
            attention_mask=block_causal_mask(batch["segment_ids"]),
        ).logits[0]
        unmasked = model(batch["input_ids"], position_ids=batch["position_ids"]).logits[0]
        expected = torch.cat(separate_logits(model, documents))
    torch.testing.assert_close(masked, expected, atol=1e-5, rtol=0)
    # Negative control: without the explicit mask later documents attend to earlier ones.
    assert (unmasked - expected).abs().max() > 1e-3


def test_labels_never_cross_a_document_boundary(documents):
    batch = packed_batch(documents, pad_to=sum(DOC_LENGTHS) + 3)
    labels, inputs = batch["labels"][0], batch["input_ids"][0]
    at = 0
    for doc in documents:
        n = len(doc)
        assert labels[at : at + n - 1].tolist() == doc[1:].tolist()
        assert labels[at + n - 1] == IGNORE_INDEX  # the last token predicts nothing of the next document
        assert batch["position_ids"][0, at : at + n].tolist() == list(range(n))
        assert inputs[at : at + n].tolist() == doc.tolist()
        at += n
    assert (labels[at:] == IGNORE_INDEX).all()  # padding


def test_packed_loss_equals_unpacked_loss(model, documents):
    model.train()
    batch = packed_batch(documents, pad_to=sum(DOC_LENGTHS) + 5)
    targets = int((batch["labels"] != IGNORE_INDEX).sum())
    packed = token_loss_sum(model, batch) / targets
    total, count = 0.0, 0
    for doc in documents:
        ids = torch.from_numpy(doc)[None]
        logits = model(ids, use_cache=False).logits[0, :-1]
        total = total + F.cross_entropy(logits, ids[0, 1:], reduction="sum")
        count += len(doc) - 1
    assert targets == count
    torch.testing.assert_close(packed, total / count, atol=1e-6, rtol=1e-6)


def test_block_causal_mask_shape_and_content():
    segments = torch.tensor([[0, 0, 1, 1, 1, -1]])
    mask = block_causal_mask(segments)
    assert mask.shape == (1, 1, 6, 6)
    expected = torch.tensor(
        [
            [1, 0, 0, 0, 0, 0],
            [1, 1, 0, 0, 0, 0],
            [0, 0, 1, 0, 0, 0],
            [0, 0, 1, 1, 0, 0],
            [0, 0, 1, 1, 1, 0],
            [0, 0, 0, 0, 0, 1],
        ],
        dtype=torch.bool,
    )
    assert torch.equal(mask[0, 0], expected)


def test_unpacked_rows_take_the_causal_path_with_no_mask(model):
    """One padded document per row: no mask and no position ids reach the model (so SDPA can run its causal
    kernel), and each document's loss equals that of the document run alone."""
    documents = [np.random.default_rng(i).integers(0, 97, n) for i, n in enumerate((9, 14))]
    rows = []
    for doc in documents:
        tokens = np.zeros(17, dtype=np.int64)
        segments = np.full(17, -1, dtype=np.int64)
        tokens[: len(doc)], segments[: len(doc)] = doc, 0
        rows.append(row_from_segments(tokens, segments))
    batch = {key: torch.from_numpy(np.stack([r[key] for r in rows])) for key in rows[0]}
    inputs = model_inputs(batch, packed=False)
    assert set(inputs) == {"input_ids", "use_cache"}
    expected = 0.0
    for doc in documents:
        ids = torch.from_numpy(doc)[None]
        expected = expected + F.cross_entropy(model(ids, use_cache=False).logits[0, :-1], ids[0, 1:], reduction="sum")
    torch.testing.assert_close(token_loss_sum(model, batch, packed=False), expected, atol=1e-5, rtol=1e-6)
