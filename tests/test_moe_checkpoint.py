"""An expert-parallel checkpoint (Qwen3-MoE, dp_shard=2,ep=2: each rank's experts a DTensor slice) resumes exactly on
its own layout, resumes resharded onto FSDP2 without expert parallelism (whole experts, sharded with their layer)
and onto ep=4 drawn from dp_shard x cp, and
exports to a Hugging Face directory that transformers loads with the logits of the resharded run's export.

As in tests/test_resume.py, the reference is the killed run itself: the steps it recorded after its checkpoint
and before the kill must come again."""

from __future__ import annotations

import shutil
import signal

import pytest
import torch
from killed_runs import start_train
from support import meshpilot, train, write_experiment
from test_moe_layouts import MODELS, ROWS
from transformers import AutoModelForCausalLM

from trainer.results.rundir import RunDir

pytestmark = pytest.mark.slow  # real multi-process runs

STEPS, CHECKPOINT_EVERY, KILL_AT = 4, 2, 4
SOURCE = "dp_shard=2,ep=2"
# Every layout takes the step's 8 rows in one round of 4-row micro-batches (the auxiliary loss is per round).
TARGETS = {  # name: (processes, layout)
    "same": ("2", SOURCE),
    "fsdp2": ("2", "dp_shard=2"),  # experts whole, sharded by FSDP2 with their layer
    "cp-ep4": ("4", "dp_shard=2,cp=2,ep=4"),  # one expert per rank, ep drawn from dp_shard x cp
}


@pytest.fixture(scope="module")
def killed(tmp_path_factory):
    directory = tmp_path_factory.mktemp("moe-resume")
    changes = {
        "model": {"config": MODELS["qwen3_moe"]},
        "train": {"steps": STEPS, "checkpoint_every": CHECKPOINT_EVERY, "micro_batch": ROWS // 2},
    }
    experiment = write_experiment(directory, changes)
    out = directory / "source"
    process, _ = start_train(
        experiment, out, "--nproc", "2", "--layout", SOURCE, fault=f"rank=0,step={KILL_AT},kind=kill"
    )
    _, stderr = process.communicate(timeout=600)
    assert process.returncode == -signal.SIGKILL, stderr[-3000:]
    run = RunDir(out)
    before = run.read_steps()
    assert [s["step"] for s in before] == list(range(1, KILL_AT))
    return experiment, run, before


@pytest.fixture(scope="module")
def resumed(killed):
    experiment, source, _ = killed
    done = {}

    def resume(target: str) -> RunDir:
        if target not in done:
            out = source.path.with_name(f"resumed-{target}")
            shutil.copytree(source.path, out)
            nproc, layout = TARGETS[target]
            done[target] = train(experiment, out, "--nproc", nproc, "--layout", layout, "--resume")
        return done[target]

    return resume


@pytest.mark.parametrize("target", TARGETS)
def test_expert_parallel_checkpoint_resumes(killed, resumed, target):
    _, _, before = killed
    run = resumed(target)
    after = run.read_steps()
    assert [s["step"] for s in after] == list(range(1, STEPS + 1))
    for old, new in zip(before[CHECKPOINT_EVERY:], after[CHECKPOINT_EVERY : KILL_AT - 1], strict=True):
        assert new["lr"] == old["lr"]
        if target == "same":  # bit for bit
            assert (new["loss"], new["aux_loss"], new["grad_norm"]) == (old["loss"], old["aux_loss"], old["grad_norm"])
        else:
            assert new["loss"] == pytest.approx(old["loss"], abs=1e-5)
            assert new["aux_loss"] == pytest.approx(old["aux_loss"], abs=1e-5)
            assert new["grad_norm"] == pytest.approx(old["grad_norm"], abs=1e-5)
            assert new["expert_tokens"] == old["expert_tokens"]


def test_expert_parallel_export_loads_in_transformers(resumed):
    """The ep run's final checkpoint exported: the experts come back whole (every expert once, in order), and
    its logits equal those of the run resharded onto FSDP2 without expert parallelism, exported the same way."""
    exported = {}
    for target in ("same", "fsdp2"):
        run = resumed(target)
        done = meshpilot("export", str(run.path))
        assert done.returncode == 0, done.stderr[-3000:]
        exported[target] = AutoModelForCausalLM.from_pretrained(str(run.path / "hf"), local_files_only=True).eval()
    experts = exported["same"].model.layers[0].mlp.experts
    assert experts.gate_up_proj.shape[0] == MODELS["qwen3_moe"]["num_experts"]
    batch = torch.randint(0, MODELS["qwen3_moe"]["vocab_size"], (2, 24), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        got, expected = (exported[t](input_ids=batch).logits for t in ("same", "fsdp2"))
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)
    assert not torch.equal(experts.gate_up_proj[0], experts.gate_up_proj[2])  # not one rank's experts twice


def test_experts_split_on_their_next_dimension_export_whole(tmp_path):
    """Two experts at ep=2 over dp_shard=4 (FSDP2 splits each rank's one expert on its next dimension): the final
    checkpoint exports the experts whole, and transformers' model loaded from it gives the logits of the
    one-process run's export."""
    config = {**MODELS["qwen3_moe"], "num_experts": 2}
    changes = {"model": {"config": config}, "train": {"steps": 2, "checkpoint_every": 2, "micro_batch": ROWS // 4}}
    experiment = write_experiment(tmp_path, changes)
    runs = {
        "single": train(experiment, tmp_path / "single", "--nproc", "1", "--set", f"train.micro_batch={ROWS}"),
        "split": train(experiment, tmp_path / "split", "--nproc", "4", "--layout", "dp_shard=4,ep=2"),
    }
    logits = {}
    batch = torch.randint(0, config["vocab_size"], (2, 24), generator=torch.Generator().manual_seed(0))
    for name, run in runs.items():
        done = meshpilot("export", str(run.path))
        assert done.returncode == 0, done.stderr[-3000:]
        model = AutoModelForCausalLM.from_pretrained(str(run.path / "hf"), local_files_only=True).eval()
        assert model.model.layers[0].mlp.experts.gate_up_proj.shape[0] == 2
        with torch.no_grad():
            logits[name] = model(input_ids=batch).logits
    torch.testing.assert_close(logits["split"], logits["single"], atol=1e-5, rtol=0)
