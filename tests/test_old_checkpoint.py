"""A checkpoint written before trainer/ moved into subpackages still resumes: tests/data/checkpoint_0ca2e76 is a run
of tests/data/checkpoint_0ca2e76.yaml by commit 0ca2e76 (two processes, dp_replicate=2, a crash injected at step 3
after its step-2 checkpoint). Its trainer_state.pt pickles the noise scale's class by its old module path, which
an alias module keeps importable; resumed, the run's step 3 is the one the old code trained uninterrupted."""

from __future__ import annotations

import pickletools
import shutil
import zipfile
from pathlib import Path

import pytest
import torch
from support import train

from trainer.rank.checkpoint import checkpoint_step, latest
from trainer.rank.noise_scale import NoiseScale

OLD = Path(__file__).parent / "data" / "checkpoint_0ca2e76"
# Step 3 of the same experiment, run by commit 0ca2e76 without the crash.
OLD_STEP_3 = {"loss": 6.226144421241972, "grad_norm": 0.4361612502494809, "gns": 2173.642996480009}


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
    experiment = shutil.copy(OLD.parent / "checkpoint_0ca2e76.yaml", tmp_path / "experiment.yaml")
    run = train(Path(experiment), tmp_path / "run", "--nproc", "2", "--layout", "dp_replicate=2", "--resume")
    assert "resumed from step_00000002" in run.log.read_text()
    steps = run.read_steps()
    assert [s["step"] for s in steps] == [1, 2, 3]
    assert {key: steps[2][key] for key in OLD_STEP_3} == OLD_STEP_3
