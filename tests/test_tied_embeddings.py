"""A model whose output head is tied to its input embedding (Llama-3.2-1B and -3B, SmolLM2, the example) trains
tied on every layout that keeps both on one rank, as one process does: found on an H200, where the 1B model's
measured parameters and optimizer state were the untied model's (materialising a meta model gives each module
tensors of its own), while FSDP2 kept them shared and the memory model and the export counted them once."""

from __future__ import annotations

import pytest
import torch
import torch.distributed.checkpoint as dcp
from support import TINY_MODEL, train, write_experiment
from transformers import AutoConfig

from trainer.model.build import build_model
from trainer.rank.checkpoint import latest

TIED = {"model": {"config": {**TINY_MODEL, "tie_word_embeddings": True}}, "train": {"steps": 3}}
LAYOUTS = {"dp_shard=2": 2, "tp=2": 2, "dp_shard=2,tp=2": 4}  # tp: both split by vocabulary, one weight


def test_a_built_model_keeps_its_head_tied_to_its_embedding():
    model = build_model(AutoConfig.for_model(**TIED["model"]["config"]), None, seed=0)
    assert model.lm_head.weight is model.model.embed_tokens.weight


@pytest.fixture(scope="module")
def experiment(tmp_path_factory):
    return write_experiment(tmp_path_factory.mktemp("tied"), TIED)


@pytest.fixture(scope="module")
def reference(experiment):
    return train(experiment, experiment.parent / "single", "--nproc", "1")


def test_one_process_trains_the_tied_weights_as_one_tensor(reference):
    """After training, the checkpoint's head and embedding are still the same values: trained apart, the steps'
    different gradients would have moved them apart."""
    state = {"model.embed_tokens.weight": torch.empty(512, 32), "lm_head.weight": torch.empty(512, 32)}
    dcp.load({"model": state}, checkpoint_id=str(latest(reference.checkpoints)), no_dist=True)
    assert torch.equal(state["model.embed_tokens.weight"], state["lm_head.weight"])


@pytest.mark.parametrize("layout", LAYOUTS)
def test_tied_layouts_match_one_process(experiment, reference, layout):
    out = experiment.parent / layout.replace("=", "")
    run = train(experiment, out, "--nproc", str(LAYOUTS[layout]), "--layout", layout)
    for a, b in zip(reference.read_steps(), run.read_steps(), strict=True):
        assert b["loss"] == pytest.approx(a["loss"], rel=1e-5), layout
        assert b["grad_norm"] == pytest.approx(a["grad_norm"], rel=1e-4), layout
