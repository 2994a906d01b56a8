"""Pipeline parallelism: every schedule, alone and with FSDP2 or TP inside the stages, gives the single-process
reference's per-step losses, and the memory model predicts each stage's memory (tiny GQA Llama, 4 layers)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from support import TINY_MODEL, train, write_experiment
from test_layouts import assert_memory_model_matches
from transformers import AutoConfig, AutoModelForCausalLM

from trainer.config import ConfigError
from trainer.data.packing import row_from_segments
from trainer.launch.launcher import TrainRequest, prepare
from trainer.parallel.pipeline import position_ids_from_segments, split_model

STEPS = 5
RUNS = {  # name: (processes, layout, extra --set overrides)
    "1f1b": (2, "pp=2", []),
    "gpipe": (2, "pp=2", ["train.pp_schedule=gpipe"]),
    "interleaved": (2, "pp=2", ["train.pp_schedule=interleaved_1f1b", "train.pp_stages_per_rank=2"]),
    "1f1b_fsdp": (4, "pp=2,dp_shard=2", ["train.micro_batch=1"]),
    "1f1b_tp": (4, "pp=2,tp=2", []),
}


@pytest.fixture(scope="module")
def experiment(tmp_path_factory):
    changes = {"train": {"steps": STEPS}, "model": {"config": {"num_hidden_layers": 4}}}
    return write_experiment(tmp_path_factory.mktemp("pipeline"), changes)


@pytest.fixture(scope="module")
def reference(experiment):
    return train(experiment, experiment.parent / "single", "--nproc", "1")


@pytest.mark.slow
@pytest.mark.parametrize("name", RUNS)
def test_pipeline_matches_single_process(experiment, reference, name):
    nproc, layout, overrides = RUNS[name]
    sets = [arg for override in overrides for arg in ("--set", override)]
    run = train(experiment, experiment.parent / name, "--nproc", str(nproc), "--layout", layout, *sets)
    expected, got = reference.read_steps(), run.read_steps()
    assert len(got) == len(expected) == STEPS
    for a, b in zip(expected, got, strict=True):
        assert b["loss"] == pytest.approx(a["loss"], rel=1e-5), name
        assert b["grad_norm"] == pytest.approx(a["grad_norm"], rel=1e-4), name
    assert_memory_model_matches(run)
    assert run.read_metrics()["layout"]["pp"] == 2


def test_stages_keep_the_models_parameter_names():
    """Checkpoints of a pipelined run read like the unsplit model's: each rank holds a disjoint part of it."""
    config = AutoConfig.for_model(**{**TINY_MODEL, "num_hidden_layers": 4})
    names = {name for name, _ in AutoModelForCausalLM.from_config(config).named_parameters()}
    held = []
    for pp_rank in range(2):
        rank_model, _, stage_ids = split_model(AutoModelForCausalLM.from_config(config), pp_rank, 2, 2)
        assert stage_ids == [pp_rank, pp_rank + 2]
        held.append({name for name, _ in rank_model.named_parameters()})
    assert held[0] | held[1] == names
    assert not held[0] & held[1]
    assert "model.embed_tokens.weight" in held[0] and "lm_head.weight" in held[1]
    assert {n for n in held[0] if ".layers." in n} == {n for n in names if ".layers.0." in n or ".layers.2." in n}


@pytest.mark.parametrize(("layers", "pp", "stages_per_rank"), [(20, 4, 5), (10, 4, 2), (7, 2, 3), (5, 2, 1)])
def test_each_rank_holds_the_parameters_the_memory_model_counts(layers, pp, stages_per_rank):
    """The memory model's split of layers over (virtual) stages, the embedding on the first stage's rank and the
    final norm and head on the last's, is the trainer's own: every pipeline rank's parameter names and shapes, for
    70B's 4 x 5 interleaved split scaled down and uneven ones."""
    from trainer.costs.memory_model import local_shapes
    from trainer.layout import Layout

    config = AutoConfig.for_model(**{**TINY_MODEL, "num_hidden_layers": layers})
    layout = Layout(dp_replicate=1, pp=pp)
    for pp_rank in range(pp):
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config)
        rank_model, _, _ = split_model(model, pp_rank, pp, stages_per_rank)
        held = {name: tuple(p.shape) for name, p in rank_model.named_parameters()}
        assert held == dict(local_shapes(config, layout, pp_rank, stages_per_rank=stages_per_rank)), pp_rank


@pytest.mark.parametrize(("pp", "stages_per_rank", "micro_batches"), [(4, 5, 64), (4, 5, 6), (2, 2, 4), (4, 2, 3)])
def test_interleaved_in_flight_micro_batches_are_torchs_schedule(pp, stages_per_rank, micro_batches):
    """The stage-forwards each rank holds at most under interleaved 1F1B (70B's pp=4 x 5 with 64 micro-batches,
    and uneven rounds) are what torch's ScheduleInterleaved1F1B's own order of actions for that rank holds: its
    forwards not yet matched by their backward. The order is torch's, computed without running any stage."""
    from torch.distributed.pipelining.schedules import ScheduleInterleaved1F1B, _ComputationType

    from trainer.parallel.pipeline import in_flight_micro_batches

    schedule = object.__new__(ScheduleInterleaved1F1B)  # its __init__ needs live stages; the order does not
    schedule.pp_group_size, schedule.n_local_stages, schedule._n_microbatches = pp, stages_per_rank, micro_batches
    schedule.number_of_rounds = max(1, micro_batches // pp)
    schedule.microbatches_per_round = micro_batches // schedule.number_of_rounds
    for rank in range(pp):
        held = most = 0
        for action in filter(None, schedule._calculate_single_rank_operations(rank)):
            held += {_ComputationType.FORWARD: 1, _ComputationType.FULL_BACKWARD: -1}.get(action.computation_type, 0)
            most = max(most, held)
        predicted = in_flight_micro_batches("interleaved_1f1b", pp, stages_per_rank, micro_batches, rank)
        assert predicted * stages_per_rank == most, rank


class _Stop(Exception):
    """Raised by a hook once the first layer's inputs are seen: the mask choice is what is tested."""


@pytest.mark.parametrize(("flex", "packed"), [(True, True), (False, True), (True, False)])
def test_each_stage_builds_the_mask_its_attention_takes(flex, packed):
    """Under train.attention flex (CUDA) every stage hands its layers flex_attention's BlockMask made from the segment
    ids it received, no dense mask; otherwise the dense block-diagonal bias; unpacked rows none. The BlockMask allows
    exactly the dense mask's pairs."""
    from torch.nn.attention.flex_attention import BlockMask

    from trainer.data.packing import block_causal_mask

    config = AutoConfig.for_model(**TINY_MODEL)
    _, stages, _ = split_model(AutoModelForCausalLM.from_config(config), 1, 2, 1, packed, flex=flex)
    seen = {}

    def first_layer(module, args, kwargs):
        seen["mask"] = kwargs["attention_mask"]
        raise _Stop

    stages[0].layers[0].register_forward_pre_hook(first_layer, with_kwargs=True)
    segments = torch.tensor([[0] * 20 + [1] * 30 + [2] * 14])
    with pytest.raises(_Stop):
        stages[0](torch.zeros(1, 64, config.hidden_size), segments)
    mask = seen["mask"]
    if not packed:
        assert mask is None
    elif flex:
        assert isinstance(mask, BlockMask)
        dense = mask.to_dense()  # [batch, heads, query blocks, key blocks]: no block mixes two documents here
        expected = block_causal_mask(segments)
        assert not isinstance(mask, torch.Tensor) and expected.any() and dense.shape[:2] == (1, 1)
        pairs = mask.mask_mod(torch.tensor(0), torch.tensor(0), torch.arange(64)[:, None], torch.arange(64)[None])
        assert torch.equal(pairs, expected[0, 0])
    else:
        assert isinstance(mask, torch.Tensor) and mask.dtype == torch.float32 and mask.shape == (1, 1, 64, 64)


def test_position_ids_restart_at_each_document():
    tokens = np.arange(9)
    segments = np.array([0, 0, 0, 1, 1, 2, 2, 2, -1])
    row = row_from_segments(tokens, segments)
    got = position_ids_from_segments(torch.from_numpy(row["segment_ids"])[None])
    assert got[0].tolist() == row["position_ids"].tolist()


@pytest.mark.parametrize(
    ("changes", "layout", "message"),
    [
        ({"model": {"config": {"tie_word_embeddings": True}}}, "pp=2", "ties its embedding to its output head"),
        ({"train": {"micro_batch": 8}}, "pp=2", "with 1f1b needs at least 2 micro-batches per step, got 1"),
        ({"train": {"pp_schedule": "zigzag"}}, "pp=2", "train.pp_schedule: 'zigzag' is not one of gpipe, 1f1b"),
        ({"train": {"pp_schedule": "interleaved_1f1b"}}, "pp=2", "interleaved_1f1b needs 2 or more stages per rank"),
        ({"train": {"pp_stages_per_rank": 2, "pp_schedule": "interleaved_1f1b"}}, "pp=2", "exceeds the model's 2"),
    ],
)
def test_invalid_pipelines_are_refused_before_anything_runs(tmp_path, changes, layout, message):
    experiment = write_experiment(tmp_path, changes)
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        prepare(TrainRequest(experiment, nproc=2, layout=layout, out=tmp_path / "run"))
    assert not (tmp_path / "run").exists()
