"""`meshpilot export` and `train.save_hf`: a checkpoint of any layout becomes an HF directory that
`from_pretrained` loads into a model computing exactly what the checkpoint's model computes.

One tiny run per layout is trained for the module; every check reads those runs and writes elsewhere.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from support import TINY_MODEL, meshpilot, train, write_experiment
from transformers import AutoModelForCausalLM, AutoTokenizer

from agent.cli import main
from evalsuite.models import open_model, resolve
from trainer.config import ConfigError, load_experiment
from trainer.export.hf import find_checkpoint, load_model, read_provenance, save_hf_after_run
from trainer.results.rundir import RunDir

STEPS = 3
# name: (processes, layout, extra --set overrides); the DDP run keeps an earlier checkpoint for --step.
LAYOUTS = {
    "ddp": (2, "dp_replicate=2", ["train.checkpoint_every=1"]),
    "fsdp2": (2, "dp_shard=2", []),
    "tp": (2, "tp=2", []),
    "pp": (2, "pp=2", []),  # the tiny Llama unties its embedding and output head, as pipelines need
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Trains a layout's run the first time a test asks for it."""
    directory = tmp_path_factory.mktemp("hf-export")
    experiment = write_experiment(directory, {"train": {"steps": STEPS}})
    trained: dict[str, RunDir] = {}

    def run(name: str) -> RunDir:
        if name not in trained:
            nproc, layout, overrides = LAYOUTS[name]
            sets = [arg for override in overrides for arg in ("--set", override)]
            trained[name] = train(experiment, directory / name, "--nproc", str(nproc), "--layout", layout, *sets)
        return trained[name]

    return run


def logits(model: torch.nn.Module) -> torch.Tensor:
    batch = torch.randint(0, TINY_MODEL["vocab_size"], (2, 24), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        return model(input_ids=batch).logits


def from_pretrained(directory: Path) -> torch.nn.Module:
    return AutoModelForCausalLM.from_pretrained(str(directory), local_files_only=True).eval()


def checkpoint_logits(step_dir: Path) -> torch.Tensor:
    return logits(load_model(find_checkpoint(step_dir)))


def snapshot(directory: Path) -> list[str]:
    return sorted(str(p.relative_to(directory)) for p in directory.rglob("*"))


@pytest.mark.slow
@pytest.mark.parametrize("layout", LAYOUTS)
def test_export_gives_the_checkpoints_logits(runs, layout):
    run = runs(layout)
    done = meshpilot("export", str(run.path))
    assert done.returncode == 0, done.stderr[-3000:]
    out = run.path / "hf"
    assert done.stdout == f"exported step_{STEPS:08d} of {run.path} to {out}\n"
    assert (out / "model.safetensors").is_file() and not list(run.path.glob(".hf.*")), "renamed into place"

    final = run.checkpoints / f"step_{STEPS:08d}"
    torch.testing.assert_close(logits(from_pretrained(out)), checkpoint_logits(final), atol=1e-6, rtol=0)
    tokenizer = AutoTokenizer.from_pretrained(str(out), local_files_only=True)
    assert len(tokenizer) <= TINY_MODEL["vocab_size"] and tokenizer.eos_token_id is not None
    provenance = read_provenance(out)
    assert provenance["checkpoint"] == final.name
    assert provenance["config_hash"] == run.read_metrics()["config_hash"]


@pytest.mark.slow
def test_step_exports_an_earlier_checkpoint(runs, tmp_path):
    run = runs("ddp")
    assert main(["export", str(run.path), "--step", "2"]) == 0
    out = run.path / "hf-step-2"
    assert read_provenance(out)["checkpoint"] == "step_00000002"
    earlier = logits(from_pretrained(out))
    torch.testing.assert_close(earlier, checkpoint_logits(run.checkpoints / "step_00000002"), atol=1e-6, rtol=0)
    assert not torch.allclose(earlier, checkpoint_logits(run.checkpoints / f"step_{STEPS:08d}")), "weights differ"

    # An empty directory is a fine destination: the export takes its place.
    (tmp_path / "empty").mkdir()
    assert main(["export", str(run.path), "--step", "2", "--out", str(tmp_path / "empty")]) == 0
    assert load_file(tmp_path / "empty" / "model.safetensors").keys() == load_file(out / "model.safetensors").keys()


@pytest.mark.slow
def test_bad_input_is_one_line_and_writes_nothing(runs, tmp_path, capsys):
    run = runs("ddp")
    bare = tmp_path / "bare"  # a run directory whose checkpoints are gone
    bare.mkdir()
    shutil.copy(run.config, bare / "config.yaml")
    shutil.copy(run.launch, bare / "launch.json")
    full = tmp_path / "full"
    full.mkdir()
    (full / "weights.txt").write_text("someone else's\n")
    cases = [
        ([str(tmp_path / "nowhere")], f"{tmp_path / 'nowhere'}: not a meshpilot run directory"),
        ([str(run.checkpoints)], f"{run.checkpoints}: not a meshpilot run directory"),
        ([str(bare)], f"{bare}: no complete checkpoint in {bare / 'checkpoint'}"),
        (
            [str(run.path), "--step", "1"],
            f"{run.path} has no complete checkpoint of step 1; it has step(s) 2, {STEPS}",
        ),
        ([str(run.path), "--out", str(full)], f"{full} exists and is not an empty directory"),
        ([str(run.path), "--out", str(full / "weights.txt")], f"{full / 'weights.txt'} exists and is not an empty"),
    ]
    before = {d: snapshot(d) for d in (run.path, tmp_path)}
    capsys.readouterr()
    for args, message in cases:
        assert main(["export", *args]) == 2, args
        printed = capsys.readouterr()
        assert printed.out == "" and printed.err.startswith(f"meshpilot: error: {message}"), printed.err
        assert printed.err.count("\n") == 1, printed.err
    assert {d: snapshot(d) for d in (run.path, tmp_path)} == before, "nothing was written"

    # The real command line: exit code 2 and the same single line on stderr.
    done = meshpilot("export", str(run.path), "--step", "1")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.splitlines() == [f"meshpilot: error: {cases[3][1]}"]


@pytest.mark.slow
def test_the_benchmark_loader_and_a_device_map_read_the_export(runs, tmp_path):
    run = runs("tp")
    out = tmp_path / "model"
    assert main(["export", str(run.path), "--out", str(out)]) == 0
    expected = checkpoint_logits(run.checkpoints / f"step_{STEPS:08d}")
    source = resolve(out)
    assert source.hf_dir == out.resolve()
    # A CPU budget below the model's size: the decoder layers go to disk and are read back layer by layer.
    with open_model(source, max_memory={"cpu": "150kB"}, offload_dir=tmp_path / "offload") as loaded:
        assert "disk" in loaded.model.hf_device_map.values()
        assert loaded.config_hash == run.read_metrics()["config_hash"]
        torch.testing.assert_close(logits(loaded.model), expected, atol=1e-6, rtol=0)


@pytest.mark.slow
def test_save_hf_exports_the_final_checkpoint_and_names_it_in_metrics(runs, tmp_path):
    experiment = write_experiment(tmp_path, {"train": {"steps": STEPS}})
    run = train(experiment, tmp_path / "saved", "--nproc", "1", "--set", "train.save_hf=true")
    metrics = run.read_metrics()
    assert metrics["hf_export"] == str(run.path / "hf") and metrics["hf_export_error"] is None
    expected = checkpoint_logits(run.checkpoints / f"step_{STEPS:08d}")
    torch.testing.assert_close(logits(from_pretrained(run.path / "hf")), expected, atol=1e-6, rtol=0)

    # Without a checkpoint of the final step (only an earlier one), the run keeps its result and says why nothing
    # was exported: the earlier weights are not passed off as the trained model.
    run = RunDir(shutil.copytree(runs("ddp").path, tmp_path / "run"))
    for earlier in run.path.glob("hf*"):  # what the export tests wrote into it
        shutil.rmtree(earlier)
    shutil.rmtree(run.checkpoints / f"step_{STEPS:08d}")
    metrics = save_hf_after_run(run)
    assert metrics["status"] == "ok" and metrics["hf_export"] is None
    assert metrics["hf_export_error"].endswith(f"has no complete checkpoint of step {STEPS}; it has step(s) 2")
    assert json.loads(run.metrics.read_text())["hf_export_error"] == metrics["hf_export_error"]
    assert not (run.path / "hf").exists()


def test_save_hf_is_a_train_key_off_by_default(tmp_path):
    experiment = write_experiment(tmp_path)
    assert load_experiment(experiment).train.save_hf is False
    assert load_experiment(experiment, ["train.save_hf=true"]).train.save_hf is True
    with pytest.raises(ConfigError, match=r"train\.save_hf: expected bool"):
        load_experiment(experiment, ["train.save_hf=yes please"])
    refused = meshpilot(
        "train",
        str(experiment),
        "--out",
        str(tmp_path / "r"),
        "--set",
        "train.save_hf=true",
        "--set",
        "train.save_final_checkpoint=false",
    )
    assert (refused.returncode, refused.stderr.splitlines()) == (
        2,
        ["meshpilot: error: train.save_hf exports the final step's checkpoint: set train.save_final_checkpoint: true"],
    )
    assert not (tmp_path / "r").exists()
