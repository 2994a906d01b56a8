"""Tensor parallelism splits the input embedding and the output head by vocabulary (trainer.parallel.tensor_parallel):
each tp rank holds 1/tp of their rows, a tied pair stays one weight, and both train.loss settings (the chunked loss
with its log-sum-exp over the tp ranks, the whole loss through loss_parallel) give the one-process losses and
gradients; on 2 gloo processes, directly and through the trainer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from helpers import forked_ranks
from support import TINY_MODEL, train, write_experiment
from transformers import AutoConfig

from trainer.data.packing import IGNORE_INDEX

TP = 2
VOCAB = TINY_MODEL["vocab_size"]
UNEVEN = VOCAB - 3  # torch.chunk's split: 255 rows on one rank, 254 on the other
# Labels: a few ignored positions, and the targets on both ranks' rows (the vocabulary's two halves).
LABELS = [[5, 300, IGNORE_INDEX, 511, 0, 256, 255, 17], [IGNORE_INDEX, 1, 2, 400, 260, 3, 510, 128]]


def _loss_and_gradients(model: torch.nn.Module, whole: bool, ids: torch.Tensor, labels: torch.Tensor) -> dict:
    """The trainer's loss sum of one micro-batch (trainer.rank.step.token_loss_sum) and, after its backward, the
    embedding's and head's gradients, whole (gathered from the tp ranks where split), with each rank's local rows."""
    from torch.distributed.tensor import DTensor

    from trainer.rank.step import _loss_context, token_loss_sum

    batch = {"input_ids": ids, "labels": labels, "segment_ids": torch.zeros_like(ids)}
    loss = token_loss_sum(model, batch, packed=False, whole=whole)
    with _loss_context(whole):
        loss.backward()
    found = {"loss": float(loss)}
    for name in ("model.embed_tokens.weight", "lm_head.weight"):
        weight = model.get_parameter(name)
        local = weight.to_local() if isinstance(weight, DTensor) else weight
        grad = weight.grad.full_tensor() if isinstance(weight.grad, DTensor) else weight.grad
        found[name] = {"rows": local.shape[0], "grad": grad.tolist()}
    found["tied"] = model.lm_head.weight is model.model.embed_tokens.weight
    return found


def _pipeline_loss(rank: int, mesh, labels: torch.Tensor) -> dict:
    """A pipeline's last stage's loss over this rank's logit columns (trainer.model.loss's
    vocab_parallel_cross_entropy_sum) against the plain cross-entropy over the whole logits, with the gradients."""
    import torch.nn.functional as F

    from trainer.model.loss import vocab_parallel_cross_entropy_sum

    logits = torch.randn(*labels.shape, UNEVEN, generator=torch.Generator().manual_seed(3), requires_grad=True)
    targets = torch.where(labels == IGNORE_INDEX, labels, labels % UNEVEN)
    plain = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORE_INDEX, reduction="sum")
    (plain_grad,) = torch.autograd.grad(plain, logits)
    rows = -(-UNEVEN // TP)
    columns = logits.detach()[..., rank * rows : (rank + 1) * rows].clone().requires_grad_()
    split = vocab_parallel_cross_entropy_sum(columns, targets, rank * rows, mesh.get_group())
    split.backward()
    grad_matches = torch.allclose(columns.grad, plain_grad[..., rank * rows : (rank + 1) * rows], atol=1e-6)
    return {"plain": float(plain), "split": float(split), "grad_matches": grad_matches}


def _worker(rank: int, store: str, out: str) -> None:
    from torch.distributed.device_mesh import init_device_mesh

    from trainer.model.build import build_model
    from trainer.parallel.tensor_parallel import apply_tensor_parallel

    dist.init_process_group("gloo", store=dist.FileStore(store, TP), rank=rank, world_size=TP)
    try:
        mesh = init_device_mesh("cpu", (TP,))
        ids = torch.tensor(LABELS).clamp(min=0).roll(1, dims=1)
        labels = torch.tensor(LABELS)
        found = {}
        for tied, vocab in ((False, VOCAB), (True, VOCAB), (False, UNEVEN)):
            config = AutoConfig.for_model(**{**TINY_MODEL, "tie_word_embeddings": tied, "vocab_size": vocab})
            targets = torch.where(labels == IGNORE_INDEX, labels, labels % vocab)
            for whole in (False, True):
                one = _loss_and_gradients(build_model(config, None, seed=0), whole, ids % vocab, targets)
                split = build_model(config, None, seed=0)
                apply_tensor_parallel(split, mesh)
                found[f"tied={tied} vocab={vocab} whole={whole}"] = {
                    "one": one,
                    "tp": _loss_and_gradients(split, whole, ids % vocab, targets),
                }
        found["pipeline"] = _pipeline_loss(rank, mesh, torch.tensor(LABELS))
        if rank == 0:
            Path(out).write_text(json.dumps(found))
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def found(tmp_path_factory) -> dict:
    directory = tmp_path_factory.mktemp("vocab_parallel")
    forked_ranks.run(_worker, TP, str(directory / "store"), str(directory / "found.json"))
    return json.loads((directory / "found.json").read_text())


@pytest.mark.parametrize(("tied", "vocab"), [(False, VOCAB), (True, VOCAB), (False, UNEVEN)])
@pytest.mark.parametrize("whole", [False, True])
def test_each_rank_holds_its_vocabulary_rows_and_computes_the_one_process_loss(found, tied, vocab, whole):
    case = found[f"tied={tied} vocab={vocab} whole={whole}"]
    one, split = case["one"], case["tp"]
    assert split["tied"] == one["tied"] == tied
    assert split["loss"] == pytest.approx(one["loss"], rel=1e-6)
    for name in ("model.embed_tokens.weight", "lm_head.weight"):
        assert one[name]["rows"] == vocab
        assert split[name]["rows"] == -(-vocab // TP), name  # rank 0's: the ceil piece
        # The tp ranks' gradient rows put together: the one process's gradient (the embedding's rows of the ids
        # looked up, the head's of every logit).
        assert torch.allclose(torch.tensor(split[name]["grad"]), torch.tensor(one[name]["grad"]), atol=1e-6), name


STEPS = 3


# Through the trainer, one of the four loss x tying cases (a one-process and a tp run): the direct test above holds
# all of them, tied, untied and uneven, against one process, and tests/test_layouts.py's tp runs the chunked loss of
# an untied head against one process, with the memory model's exact bytes per rank.
@pytest.mark.parametrize(("loss", "tied"), [("whole", True)])
def test_vocabulary_parallel_training_matches_one_process(tmp_path, tied, loss):
    """A tp=2 run's per-step losses and gradient norms are one process's; its memory record's parameter,
    gradient and optimizer bytes per rank are the memory model's exact ones, with the embedding and head split."""
    from test_layouts import assert_memory_model_matches

    from trainer.costs.memory_model import local_shapes
    from trainer.layout import Layout

    config = {**TINY_MODEL, "tie_word_embeddings": tied}
    experiment = write_experiment(tmp_path, {"model": {"config": config}, "train": {"steps": STEPS, "loss": loss}})
    reference = train(experiment, tmp_path / "single", "--nproc", "1")
    run = train(experiment, tmp_path / "tp2", "--nproc", str(TP), "--layout", f"tp={TP}")
    expected, got = reference.read_steps(), run.read_steps()
    assert len(got) == len(expected) == STEPS
    for a, b in zip(expected, got, strict=True):
        assert b["loss"] == pytest.approx(a["loss"], rel=1e-5)
        assert b["grad_norm"] == pytest.approx(a["grad_norm"], rel=1e-4)
    assert_memory_model_matches(run)
    shapes = dict(local_shapes(AutoConfig.for_model(**config), Layout(dp_replicate=1, tp=TP), 0))
    assert shapes["model.embed_tokens.weight"] == (TINY_MODEL["vocab_size"] // TP, TINY_MODEL["hidden_size"])
    assert ("lm_head.weight" in shapes) == (not tied)


def test_a_head_with_a_bias_is_refused_under_tp_before_anything_runs(tmp_path):
    """Phi's lm_head has a bias, which the vocabulary-split head does not take: refused in one line by the launcher."""
    from trainer.config import ConfigError
    from trainer.launch.launcher import TrainRequest, prepare

    phi = {"model_type": "phi", "vocab_size": 512, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
           "num_attention_heads": 4, "max_position_embeddings": 128}  # fmt: skip
    experiment = write_experiment(tmp_path, {"model": {"config": phi}})
    message = f"layout tp={TP}: phi's output head has a bias, which the vocabulary-split head (tensor parallelism) "
    with pytest.raises(ConfigError, match="^" + message.replace("(", r"\(").replace(")", r"\)") + "does not take$"):
        prepare(TrainRequest(experiment, nproc=TP, layout=f"tp={TP}", out=tmp_path / "run"))
    assert not (tmp_path / "run").exists()


def test_a_pipelines_last_stage_loss_over_its_logit_columns_is_the_plain_loss(found):
    """Rank 0's columns (the ceil piece of a vocabulary tp does not divide): the plain loss, and its columns of the
    plain gradient."""
    pipeline = found["pipeline"]
    assert pipeline["split"] == pytest.approx(pipeline["plain"], rel=1e-6)
    assert pipeline["grad_matches"]
