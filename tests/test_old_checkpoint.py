"""A checkpoint written before trainer/ moved into subpackages still resumes: tests/data/checkpoint_pre_move is a run
of tests/data/checkpoint_pre_move.yaml by the commit that checkpoint_pre_move.json names (two processes,
dp_replicate=2, a crash injected at step 3 after its step-2 checkpoint), beside that commit's step 3 of the same run
uninterrupted. Its trainer_state.pt pickles the noise scale's class by its old module path, which an alias module
keeps importable; resumed, the run's step 3 is the one the old code trained."""

from __future__ import annotations

import json
import pickletools
import shutil
import zipfile
from pathlib import Path

import pytest
import torch
from support import train

from trainer.rank.checkpoint import checkpoint_step, latest
from trainer.rank.noise_scale import NoiseScale

DATA = Path(__file__).parent / "data"
OLD = DATA / "checkpoint_pre_move"
OLD_STEP_3 = json.loads((DATA / "checkpoint_pre_move.json").read_text())["step_3"]


def test_its_trainer_state_unpickles_through_the_old_class_path():
    path = latest(OLD / "checkpoint")
    assert checkpoint_step(path) == 2
    with zipfile.ZipFile(path / "trainer_state.pt") as saved:  # torch.save's zip: the pickle is its data.pkl
        pickled = saved.read(next(name for name in saved.namelist() if name.endswith("/data.pkl")))
    names = [arg for op, arg, _ in pickletools.genops(pickled) if op.name == "GLOBAL"]
    assert "trainer.noise_scale NoiseScale" in names  # pre-move path: what the alias module keeps loadable
    state = torch.load(path / "trainer_state.pt", weights_only=False)
    assert isinstance(state["trainer"]["noise_scale"], NoiseScale)


@pytest.mark.slow  # a real two-process run
def test_it_resumes_and_trains_step_3_as_the_old_code_did(tmp_path):
    shutil.copytree(OLD, tmp_path / "run")
    experiment = shutil.copy(DATA / "checkpoint_pre_move.yaml", tmp_path / "experiment.yaml")
    run = train(Path(experiment), tmp_path / "run", "--nproc", "2", "--layout", "dp_replicate=2", "--resume")
    assert "resumed from step_00000002" in run.log.read_text()
    steps = run.read_steps()
    assert [s["step"] for s in steps] == [1, 2, 3]
    assert {key: steps[2][key] for key in OLD_STEP_3} == OLD_STEP_3
