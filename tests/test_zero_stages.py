"""train.zero_stage: what FSDP2 keeps sharded between uses. Every stage trains as the one-process reference does
(tiny Llama, 4 micro-batches of one row per rank and step, so the once-per-step path runs), under dp_shard, HSDP,
dp_shard x tp and a pipeline; stage 1 holds the whole gradient that the memory model predicts; and the trainer's own
step really gathers the parameters and reduce-scatters the gradients as often as each stage says (and as
trainer.costs.throughput prices it), counted on the collectives it dispatches."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from support import REPO, meshpilot, train, write_experiment
from test_fsdp_grad_sync import accumulation_peak

from trainer.config import ConfigError
from trainer.costs.throughput import fsdp_collectives
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


@pytest.fixture(scope="module")
def collectives(runs, tmp_path_factory):
    """{stage: [collectives by name, per step]} of the trainer's own set-up and step on 2 ranks (dp_shard=2, 4
    micro-batches), from tests/helpers/fsdp_collectives.py on a copy of the stage-1 run."""
    copy = tmp_path_factory.mktemp("collectives") / "run"
    shutil.copytree(runs["zero1"].path, copy)
    out = copy.parent / "counts.json"
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2"]
    command += [str(REPO / "tests" / "helpers" / "fsdp_collectives.py"), str(copy), str(out), "3", "2", "1"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": f"{REPO}:{REPO / 'tests'}"}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return {int(stage): steps for stage, steps in json.loads(out.read_text()).items()}


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


@pytest.mark.parametrize("stage", [2, 1])
def test_collectives_are_priced(collectives, stage):
    """trainer.costs.throughput counts the same FSDP2 collectives per step (the root priced like a layer)."""
    step = collectives[stage][0]
    layout = Layout(dp_replicate=1, dp_shard=2)
    assert fsdp_collectives(layout, 4, stage, "micro_batch", layers=2) == (
        step["_allgather_base_"],
        step["_reduce_scatter_base_"],
    )


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
