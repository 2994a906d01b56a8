"""train.zero_stage: what FSDP2 keeps sharded between uses. Every stage trains as the one-process reference does
(tiny Llama, 4 micro-batches of one row per rank and step, so the once-per-step path runs), under dp_shard, HSDP,
dp_shard x tp and a pipeline; stage 1 holds the whole gradient that the memory model predicts; and the trainer's own
step really gathers the parameters and reduce-scatters the gradients as often as each stage says (and as
trainer.costs.throughput prices it), counted on the collectives it dispatches."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from helpers import forked_ranks
from support import REPO, TINY_MODEL, meshpilot, train, write_experiment
from test_fsdp_grad_sync import accumulation_peak
from transformers import AutoConfig

from trainer.config import ConfigError, TrainSpec
from trainer.costs.memory_model import MemoryPlan, predict_memory
from trainer.costs.throughput import (
    StepShape,
    communication_bytes,
    dimension_links,
    estimate_step,
    fsdp_collectives,
    hardware_figures,
)
from trainer.hardware import planned_hardware
from trainer.launch.launcher import TrainRequest, prepare
from trainer.layout import Layout

SEQ_LEN = 64
STEPS = 3
RUNS = {  # name: (layout, processes, zero stage)
    "zero1": ("dp_shard=2", 2, 1),
    "zero1_hsdp": ("dp_replicate=2,dp_shard=2", 4, 1),  # 2 micro-batches per rank
    "zero1_pp": ("pp=2,dp_shard=2", 4, 1),
    "zero2_tp": ("dp_shard=2,tp=2", 4, 2),
}


@pytest.fixture(scope="module")
def experiment(tmp_path_factory):
    changes = {
        "data": {"seq_len": SEQ_LEN},
        # No noise scale: its measured steps reduce the first micro-batch whole, one more reduction to count.
        "train": {"steps": STEPS, "global_batch_tokens": 8 * SEQ_LEN, "micro_batch": 1, "gns_every": 0},
    }
    return write_experiment(tmp_path_factory.mktemp("zero"), changes)


@pytest.fixture(scope="module")
def reference(experiment):
    return train(experiment, experiment.parent / "single", "--nproc", "1")


@pytest.fixture(scope="module")
def runs(experiment):
    runs = {}
    for name, (layout, processes, stage) in RUNS.items():
        options = ("--nproc", str(processes), "--layout", layout, "--set", f"train.zero_stage={stage}")
        runs[name] = train(experiment, experiment.parent / name, *options)
    return runs


@pytest.mark.parametrize("name", RUNS)
def test_stages_train_as_one_process(runs, reference, name):
    expected, got = reference.read_steps(), runs[name].read_steps()
    assert len(got) == len(expected) == STEPS
    for a, b in zip(expected, got, strict=True):
        assert b["loss"] == pytest.approx(a["loss"], rel=1e-5), name
        assert b["grad_norm"] == pytest.approx(a["grad_norm"], rel=1e-4), name
    assert runs[name].read_metrics()["grad_accum"] > 1


def test_stage_one_holds_the_whole_gradient_it_predicts(runs):
    """Between micro-batches each rank holds an unsharded gradient of the whole model (both ranks' shards), as
    predicted; after the step only its shard."""
    memory = json.loads(runs["zero1"].memory.read_text())
    whole = sum(r["parameters"] for r in memory["predicted"])
    for predicted, timeline in zip(memory["predicted"], memory["timeline"], strict=True):
        peak = accumulation_peak(timeline["points"])
        assert peak == pytest.approx(predicted["gradients"] + predicted["unreduced_gradients"], rel=0.01)
        assert peak == pytest.approx(whole, rel=0.01)
    assert [r["gradients"] for r in memory["measured"]] == [r["parameters"] for r in memory["predicted"]]


def counted_collectives(run, processes: int, specs: list[str], directory) -> dict:
    """{spec: [collectives by name, per step]} of the trainer's own set-up and step, from
    tests/helpers/fsdp_collectives.py on a copy of `run` (rank 0's)."""
    copy = directory / "run"
    shutil.copytree(run.path, copy)
    out = directory / "counts.json"
    # As `torchrun --standalone --nproc-per-node N fsdp_collectives.py ...` runs it, the ranks forked
    # (tests/helpers/forked_ranks.py: one interpreter's imports instead of torchrun's agent's and each rank's).
    helper, env = REPO / "tests" / "helpers" / "fsdp_collectives.py", {**os.environ, "OMP_NUM_THREADS": "1"}
    forked_ranks.run_script(helper, processes, str(copy), str(out), *specs, env=env)
    counted = json.loads(out.read_text())
    return {(int(spec) if spec.isdigit() else spec): steps for spec, steps in counted.items()}


@pytest.fixture(scope="module")
def collectives(runs, tmp_path_factory):
    """On 2 ranks (dp_shard=2, 4 micro-batches), a copy of the stage-1 run: each stage, and stage 1 in bf16 with
    either reduce dtype."""
    specs = ["3", "2", "1", *(f"1,precision=bf16,fsdp_reduce_dtype={dtype}" for dtype in ("fp32", "bf16"))]
    return counted_collectives(runs["zero1"], 2, specs, tmp_path_factory.mktemp("collectives"))


@pytest.fixture(scope="module")
def pipeline_collectives(runs, tmp_path_factory):
    """On 4 ranks (pp=2, dp_shard=2, 4 micro-batches under 1F1B; rank 0 holds the embedding and layer 0), a copy
    of the stage-1 pipeline run: each stage."""
    return counted_collectives(runs["zero1_pp"], 4, ["3", "2", "1"], tmp_path_factory.mktemp("pp-collectives"))


@pytest.mark.parametrize("stage", [3, 2, 1])
def test_a_pipeline_stage_gathers_and_holds_what_is_priced(pipeline_collectives, stage):
    """torch's pipeline stages never reshard after backward: at every ZeRO stage a stage's layers are held gathered
    from a backward to the next forward (the memory model's gathered_parameters: rank 0's whole share, in fp32), and
    at stage 3 a layer gathers 5 times in 4 micro-batches (every backward after a forward, and each forward not
    after a backward), the stage's root once; the throughput model counts the same. The step after the first (whose
    shape inference runs a forward and backward of its own)."""
    step = pipeline_collectives[stage][-1]
    layout = Layout(dp_replicate=1, dp_shard=2, pp=2)
    assert fsdp_collectives(layout, 4, stage, "micro_batch", layers=1) == (
        step["_allgather_base_"],
        step["_reduce_scatter_base_"],
    )
    held = predicted(stage, layout=layout)["gathered_parameters"]
    assert held == 4 * (512 * 32 + TINY_LAYER)
    assert step["gathered_bytes"] == held


def test_collectives_per_step(collectives):
    """Three FSDP2 units (2 layers and the root), 4 micro-batches: stage 3 gathers each layer in forward and again
    in backward of every micro-batch (the root once: FSDP2 keeps it), stage 2 once per micro-batch, stage 1 once per
    step; stage 1 reduce-scatters once per step, the others every micro-batch. The same on every step."""
    units, micro_batches = 3, 4
    expected = {
        3: (units * micro_batches + (units - 1) * micro_batches, units * micro_batches),
        2: (units * micro_batches, units * micro_batches),
        1: (units, units),
    }
    for stage, (gathers, reduce_scatters) in expected.items():
        for step in collectives[stage]:
            assert (step["_allgather_base_"], step["_reduce_scatter_base_"]) == (gathers, reduce_scatters), stage


def test_gathered_parameters_are_predicted(collectives, runs):
    """At the end of a forward, stages 2 and 1 hold every parameter gathered, the bytes the memory model predicts
    (the whole tiny model in fp32, on each rank); stage 3 only the root's (embedding, head and final norm), which
    FSDP2 does not reshard after forward, predicted too."""
    held = json.loads(runs["zero1"].memory.read_text())["predicted"][0]["gathered_parameters"]
    assert held == 4 * TINY_PARAMETERS
    for stage in (2, 1):
        assert [step["gathered_bytes"] for step in collectives[stage]] == [held] * 2, stage
    root = 4 * (2 * 512 * 32 + 32)
    assert [step["gathered_bytes"] for step in collectives[3]] == [root] * 2
    assert predicted(3)["gathered_parameters"] == root


@pytest.mark.parametrize("stage", [3, 2, 1])
def test_collectives_are_priced(collectives, stage):
    """trainer.costs.throughput counts the same FSDP2 collectives per step (at stage 3 the root gathered once per
    micro-batch)."""
    step = collectives[stage][0]
    layout = Layout(dp_replicate=1, dp_shard=2)
    assert fsdp_collectives(layout, 4, stage, "micro_batch", layers=2) == (
        step["_allgather_base_"],
        step["_reduce_scatter_base_"],
    )


def test_the_reduce_dtype_is_what_is_reduced_and_priced(collectives):
    """Under bf16 FSDP2 reduce-scatters the gradient in train.fsdp_reduce_dtype: at stage 1 each rank's one
    reduction per step takes in the whole tiny model's gradient, in fp32 or in bf16 (half the bytes), and the
    throughput model's data-parallel bytes differ by that half of the reductions' share."""
    reduced = {
        dtype: [step["reduced_bytes"] for step in collectives[f"1,precision=bf16,fsdp_reduce_dtype={dtype}"]]
        for dtype in ("fp32", "bf16")
    }
    assert reduced == {"fp32": [4 * TINY_PARAMETERS] * 2, "bf16": [2 * TINY_PARAMETERS] * 2}
    config, layout = AutoConfig.for_model(**TINY_MODEL), Layout(dp_replicate=1, dp_shard=2)
    sent = {
        dtype: communication_bytes(
            config, layout, 4 * TINY_PARAMETERS, 1, SEQ_LEN, 4, precision="bf16", zero_stage=1, fsdp_reduce_dtype=dtype
        )["dp_shard"]
        for dtype in ("fp32", "bf16")
    }
    ring = 1 / 2  # of the data, for 2 ranks
    assert sent["fp32"][0] - sent["bf16"][0] == pytest.approx(ring * 4 * TINY_PARAMETERS / 2)
    assert sent["fp32"][1] == sent["bf16"][1]


@pytest.mark.parametrize(
    ("layout", "stage", "message"),
    [
        ("dp_replicate=2", 1, "train.zero_stage 1 chooses what FSDP2 keeps sharded, and dp_replicate=2 shards nothing "
         "(it needs dp_shard > 1, or cp > 1): leave it at 3"),
        ("dp_shard=2", 0, "train.zero_stage: 0 is not one of 3, 2, 1"),
    ],
)  # fmt: skip
def test_refused_in_one_line(tmp_path, layout, stage, message):
    exp = write_experiment(tmp_path)
    request = TrainRequest(experiment=exp, out=tmp_path / "run", nproc=2, layout=layout,
                           overrides=[f"train.zero_stage={stage}"])  # fmt: skip
    with pytest.raises(ConfigError) as refused:
        prepare(request)
    assert str(refused.value) == message
    assert not (tmp_path / "run").exists()


def test_refused_by_the_command_line_with_exit_code_2(tmp_path):
    exp = write_experiment(tmp_path)
    done = meshpilot("train", str(exp), "--out", str(tmp_path / "run"), "--set", "train.zero_stage=2")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith("meshpilot: error: train.zero_stage 2 chooses")


# --- pricing, against figures worked out by hand for the tiny Llama ----------------------------------------------

# The tiny Llama's parameters: embedding and untied head 512 x 32 each, per layer q and o 32 x 32, k and v 32 x 16,
# gate, up and down 32 x 64, two norms of 32; the final norm 32.
TINY_LAYER = 2 * 32 * 32 + 2 * 32 * 16 + 3 * 32 * 64 + 2 * 32
TINY_PARAMETERS = 2 * 512 * 32 + 2 * TINY_LAYER + 32


def predicted(stage: int, precision: str = "fp32", grad_accum: int = 4, layout: Layout | None = None) -> dict:
    config = AutoConfig.for_model(**TINY_MODEL)
    train = TrainSpec(zero_stage=stage, gns_every=0)
    plan = MemoryPlan(1, SEQ_LEN, precision, "none", train, grad_accum)
    return predict_memory(config, layout or Layout(dp_replicate=1, dp_shard=2), plan)[0]


def test_memory_of_each_stage():
    """Stage 3 gathers two layers at a time (temporaries: the current and the prefetched one, less the rank's half
    of each); stages 2 and 1 hold every parameter gathered (fp32 here, bf16 under mixed precision) instead; stage 1
    also the whole fp32 gradient between micro-batches, beside nothing more (its shard is part of it)."""
    assert TINY_PARAMETERS == 51_360
    zero3, zero2, zero1 = predicted(3), predicted(2), predicted(1)
    root = 4 * (2 * 512 * 32 + 32)  # the root unit (embedding, head, final norm), which FSDP2 keeps gathered
    assert (zero3["gathered_parameters"], zero3["unreduced_gradients"]) == (root, 0)
    two_layers = 2 * TINY_LAYER * 4 // 2
    assert zero3["temporaries"] - zero2["temporaries"] == two_layers == zero3["temporaries"] - zero1["temporaries"]
    assert zero2["gathered_parameters"] == zero1["gathered_parameters"] == 4 * TINY_PARAMETERS
    assert predicted(1, "bf16")["gathered_parameters"] == 2 * TINY_PARAMETERS
    assert zero2["unreduced_gradients"] == 0
    assert zero1["gradients"] + zero1["unreduced_gradients"] == 4 * TINY_PARAMETERS
    assert (zero1["parameters"], zero1["optimizer"]) == (zero3["parameters"], zero3["optimizer"])  # still sharded
    assert zero1["peak"] - zero3["peak"] == 4 * TINY_PARAMETERS * 2 - zero1["gradients"] - two_layers - root


def test_communication_of_each_stage():
    """One rank of dp_shard=4 with 4 MB of fp32 parameters, 3 micro-batches, bf16 gathers (half the bytes) and fp32
    reduce-scatters, each moving 3/4 of the data: stage 3 gathers twice per micro-batch (the root once: FSDP2 keeps
    it from forward to backward) and reduces once per micro-batch, stage 2 gathers once per micro-batch, stage 1 once
    per step and reduces once per step; a collective per unit (2 layers and the root) each time. Inside a pipeline
    stage 2 gathers once per step too."""
    config, layout, ring = AutoConfig.for_model(**TINY_MODEL), Layout(dp_replicate=1, dp_shard=4), 3 / 4 * 4_000_000
    sent = {
        stage: communication_bytes(config, layout, 4_000_000, 2, 64, 3, precision="bf16", zero_stage=stage)["dp_shard"]
        for stage in (3, 2, 1)
    }
    root = 3 / 4 * 4 * (2 * 512 * 32 + 32)  # the root's fp32 bytes a gather moves, gathered in bf16
    assert sent[3] == pytest.approx(((2 * 3 * 0.5 + 3) * ring - 3 * 0.5 * root, (2 * 3 + 3) * 3 - 3))
    assert sent[2] == ((3 * 0.5 + 3) * ring, (3 + 3) * 3)
    assert sent[1] == ((0.5 + 1) * ring, (1 + 1) * 3)
    piped = Layout(dp_replicate=1, dp_shard=2, pp=2)
    assert fsdp_collectives(piped, 3, 2, "micro_batch", layers=1) == (2, 2)


def test_stage_one_hides_its_traffic_behind_one_micro_batch_only():
    """On a GPU FSDP2's traffic overlaps compute (two thirds of it): under stages 3 and 2 that of every micro-batch,
    under stage 1 (one gather in the first forward, one reduction in the last backward) only one micro-batch's.
    Without accumulation stages 1 and 2 are the same step. A 1B model over 2 nodes, its traffic crossing the
    network."""
    config = AutoConfig.for_model(**TINY_MODEL)
    hardware = planned_hardware("cuda", 8, 2, "h100-sxm", network="ib400")[0]
    layout = Layout(dp_replicate=1, dp_shard=16)
    sizes = {"matmul_params": 1_000_000_000, "parameter_bytes": 4_000_000_000}
    estimates = {
        (stage, accum): estimate_step(
            config, layout, hardware, StepShape(1, 4096, accum, precision="bf16", zero_stage=stage), **sizes
        )
        for stage in (3, 2, 1)
        for accum in (1, 8)
    }
    assert estimates[1, 1] == estimates[2, 1]
    one, alone = estimates[1, 8], estimates[1, 1]
    assert one.comm_bytes == alone.comm_bytes  # once per step, however many micro-batches
    assert one.comm_bytes["dp_shard"] < estimates[2, 8].comm_bytes["dp_shard"] < estimates[3, 8].comm_bytes["dp_shard"]
    traffic_s = alone.comm_s + 2 / 3 * alone.compute_s  # the step's data-parallel seconds, all of it on the network
    assert alone.comm_s > 0
    assert one.comm_s == pytest.approx(traffic_s - 2 / 3 * one.compute_s / 8)


def test_a_reduction_once_per_step_hides_behind_the_last_micro_batch_only():
    """Reducing once per step (train.fsdp_grad_sync: step) at stage 2: each micro-batch's gathers hide behind its
    own compute (two thirds of it), the one reduction only behind the last micro-batch's, as stage 1's traffic does:
    the step waits for more than if it could hide behind the whole step's compute. Worked out from the bytes: the
    1B model's 4 GB of fp32 parameters over 16 ranks on 2 nodes, bf16 gathers, an fp32 reduction, one collective per
    unit (2 layers and the root), 8 micro-batches of 2 rows: each hides its gathers, not the reduction too."""
    config = AutoConfig.for_model(**TINY_MODEL)
    hardware = planned_hardware("cuda", 8, 2, "h100-sxm", network="ib400")[0]
    layout, ring, units = Layout(dp_replicate=1, dp_shard=16), 15 / 16, 3
    shape = StepShape(2, 4096, 8, precision="bf16", zero_stage=2, fsdp_grad_sync="step")
    step = estimate_step(config, layout, hardware, shape, matmul_params=1_000_000_000, parameter_bytes=4_000_000_000)
    figures, link = hardware_figures(hardware), dimension_links(layout, hardware)["dp_shard"]
    gathers_s = figures.transfer_s(link, "all_gather", ring * 4e9 / 2, units)  # one micro-batch's
    reduction_s = figures.transfer_s(link, "all_gather", ring * 4e9, units)
    hidden = 2 / 3 * step.compute_s / 8  # per micro-batch
    expected = 7 * max(0.0, gathers_s - hidden) + max(0.0, gathers_s + reduction_s - hidden)
    assert step.comm_s == pytest.approx(expected)
    assert step.comm_s > max(0.0, 8 * gathers_s + reduction_s - 2 / 3 * step.compute_s) + 0.01  # the whole step's
