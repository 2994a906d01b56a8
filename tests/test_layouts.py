"""Every layout that runs on CPU gives the single-process reference's per-step losses (tiny GQA Llama): on packed
rows (5 steps), and on unpacked, padded rows whose token counts differ several-fold (3 steps), where each layout
accumulates micro-batches of one row through the trainer's own wrapping and must equal one full batch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import TINY_EXPERIMENT, TINY_MODEL, train, write_experiment
from transformers import AutoConfig, AutoModelForCausalLM

from trainer.config import ConfigError
from trainer.data.packing import IGNORE_INDEX
from trainer.data.rows import RowSource, TokenizedCorpus, plan_batches
from trainer.launch.launcher import TrainRequest, prepare
from trainer.rank.loop import load_run
from trainer.results.rundir import RunDir

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
    if layout == "tp=2":  # no recomputation: each layer keeps its split inputs, priced within 1% (test_sp_saves_split)
        memory = json.loads(run.memory.read_text())
        for predicted, measured in zip(memory["predicted"], memory["measured"], strict=True):
            assert predicted["activations_saved"] == pytest.approx(measured["activations_saved"], rel=0.01)
    metrics = run.read_metrics()
    assert metrics["world_size"] == LAYOUTS[layout]
    assert {k: v for k, v in metrics["layout"].items() if v != 1} == {
        name: int(degree) for name, degree in (part.split("=") for part in layout.split(","))
    }


UNPACKED_STEPS = 3
UNPACKED_LAYOUTS = {  # layout: processes
    "dp_replicate=2": 2,  # DDP
    "dp_shard=2": 2,  # FSDP2
    "dp_replicate=2,dp_shard=2": 4,  # HSDP
    "tp=2": 2,
    "dp_shard=2,tp=2": 4,  # FSDP2 x TP
    "pp=2": 2,  # 1F1B, one layer per stage
}


@pytest.fixture(scope="module")
def unpacked_experiment(tmp_path_factory):
    # One row per micro-batch: every layout accumulates (2 to 8 micro-batches per rank) rows of unequal length.
    changes = {"data": {"packing": False}, "train": {"steps": UNPACKED_STEPS, "micro_batch": 1}}
    return write_experiment(tmp_path_factory.mktemp("unpacked"), changes)


@pytest.fixture(scope="module")
def unpacked_reference(unpacked_experiment):
    """One process, the whole global batch in one forward pass: no accumulation at all."""
    rows = TINY_EXPERIMENT["train"]["global_batch_tokens"] // TINY_EXPERIMENT["data"]["seq_len"]
    out = unpacked_experiment.parent / "single"
    return train(unpacked_experiment, out, "--nproc", "1", "--set", f"train.micro_batch={rows}")


def test_unpacked_rows_differ_several_fold_in_token_count(unpacked_reference):
    """Otherwise the unpacked equivalence could not tell a token-weighted loss from a mean of per-row means."""
    experiment, launch = load_run(unpacked_reference)
    data, spec = experiment.data, experiment.train
    rows = RowSource(TokenizedCorpus.load(Path(launch["data_dir"])), data.seq_len, data.packing, spec.seed)
    plan = plan_batches(spec.global_batch_tokens, data.seq_len, spec.micro_batch, 1)
    for step in range(UNPACKED_STEPS):
        [indices] = plan.micro_batches(step * plan.rows_per_step, 0)
        counts = [int((rows.row(i)["labels"] != IGNORE_INDEX).sum()) for i in indices]
        assert max(counts) >= 3 * min(counts), (step, counts)
    assert all(s["tokens"] < spec.global_batch_tokens for s in unpacked_reference.read_steps())  # padded


@pytest.mark.parametrize("layout", UNPACKED_LAYOUTS)
def test_unpacked_layout_matches_single_process(unpacked_experiment, unpacked_reference, layout):
    out = unpacked_experiment.parent / layout.replace(",", "_").replace("=", "")
    run = train(unpacked_experiment, out, "--nproc", str(UNPACKED_LAYOUTS[layout]), "--layout", layout)
    expected, got = unpacked_reference.read_steps(), run.read_steps()
    assert len(got) == len(expected) == UNPACKED_STEPS
    for a, b in zip(expected, got, strict=True):
        assert (b["tokens"], b["target_tokens"]) == (a["tokens"], a["target_tokens"]), layout
        assert b["loss"] == pytest.approx(a["loss"], rel=1e-5), layout
        assert b["grad_norm"] == pytest.approx(a["grad_norm"], rel=1e-5), layout
    metrics = run.read_metrics()
    assert metrics["packing"] is False and metrics["micro_batch"] == 1 and metrics["grad_accum"] > 1


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
