"""Every layout that runs on CPU gives the single-process reference's per-step losses (tiny GQA Llama, 5 steps)."""

from __future__ import annotations

import json

import pytest
from support import TINY_MODEL, train, write_experiment
from transformers import AutoConfig, AutoModelForCausalLM

from trainer.config import ConfigError
from trainer.launch import TrainRequest, prepare
from trainer.rundir import RunDir

STEPS = 5
LAYOUTS = {
    "dp_shard=2": 2,  # FSDP2
    "tp=2": 2,
    "dp_shard=2,tp=2": 4,  # FSDP2 x TP
    "dp_replicate=2,dp_shard=2": 4,  # HSDP
    "dp_replicate=2,tp=2": 4,
}


@pytest.fixture(scope="module")
def experiment(tmp_path_factory):
    return write_experiment(tmp_path_factory.mktemp("layouts"), {"train": {"steps": STEPS}})


@pytest.fixture(scope="module")
def reference(experiment):
    return train(experiment, experiment.parent / "single", "--nproc", "1")


def train_layout(experiment, layout: str, nproc: int) -> RunDir:
    out = experiment.parent / layout.replace(",", "_").replace("=", "")
    return train(experiment, out, "--nproc", str(nproc), "--layout", layout)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_layout_matches_single_process(experiment, reference, layout):
    run = train_layout(experiment, layout, LAYOUTS[layout])
    expected = reference.read_steps()
    got = run.read_steps()
    assert len(got) == len(expected) == STEPS
    for a, b in zip(expected, got, strict=True):
        assert b["loss"] == pytest.approx(a["loss"], rel=1e-5), layout
        assert b["grad_norm"] == pytest.approx(a["grad_norm"], rel=1e-4), layout
    assert_memory_model_matches(run)
    metrics = run.read_metrics()
    assert metrics["world_size"] == LAYOUTS[layout]
    assert {k: v for k, v in metrics["layout"].items() if v != 1} == {
        name: int(degree) for name, degree in (part.split("=") for part in layout.split(","))
    }


def assert_memory_model_matches(run: RunDir) -> None:
    """Predicted parameter, gradient and optimizer bytes equal the measured ones on every rank; activations
    are within 15%."""
    memory = json.loads(run.memory.read_text())
    assert len(memory["predicted"]) == len(memory["measured"])
    for predicted, measured in zip(memory["predicted"], memory["measured"], strict=True):
        assert predicted["rank"] == measured["rank"]
        for category in ("parameters", "gradients", "optimizer"):
            assert predicted[category] == measured[category], (category, predicted["rank"])
        assert predicted["activations_saved"] == pytest.approx(measured["activations_saved"], rel=0.15)


def test_single_process_memory_model(reference):
    assert_memory_model_matches(reference)


def test_fsdp_ranks_hold_disjoint_shards(experiment):
    run = RunDir(experiment.parent / "dp_shard2")
    if not run.memory.is_file():
        pytest.skip("runs after test_layout_matches_single_process[dp_shard=2]")
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(**TINY_MODEL))
    total = sum(p.numel() * 4 for p in model.parameters())
    measured = json.loads(run.memory.read_text())["measured"]
    assert sum(rank["parameters"] for rank in measured) == total
    assert sum(rank["optimizer"] for rank in measured) == 2 * total + 2 * 4 * len(list(model.parameters()))
    assert all(rank["parameters"] < total for rank in measured)


@pytest.mark.parametrize(
    ("changes", "layout", "message"),
    [
        ({"num_key_value_heads": 2}, "tp=4", "layout tp=4 must divide the model's num_key_value_heads (2)"),
        ({"num_attention_heads": 4}, "tp=3", "layout tp=3 must divide the model's num_attention_heads (4)"),
    ],
)
def test_tensor_parallel_degree_must_divide_heads(tmp_path, changes, layout, message):
    experiment = write_experiment(tmp_path, {"model": {"config": changes}})
    nproc = int(layout.split("=")[1])
    with pytest.raises(ConfigError, match=f"^{message}$".replace("(", r"\(").replace(")", r"\)")):
        prepare(TrainRequest(experiment, nproc=nproc, layout=layout, out=tmp_path / "run"))
    assert not (tmp_path / "run").exists()
