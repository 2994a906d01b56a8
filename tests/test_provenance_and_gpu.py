"""Provenance of a run (the experiment repository's commit) and, where a GPU exists, the CUDA path."""

from __future__ import annotations

import json

import git
import pytest
import torch
from support import train, write_experiment

from trainer.launch.launcher import TrainRequest, prepare


def test_run_records_the_experiment_repository_commit(tmp_path):
    repo = git.Repo.init(tmp_path / "exp")
    experiment = write_experiment(tmp_path / "exp")
    repo.index.add([str(experiment)])
    commit = repo.index.commit("experiment", author=git.Actor("t", "t@example.com"))
    launch = json.loads(prepare(TrainRequest(experiment, out=tmp_path / "run")).run.launch.read_text())
    assert (launch["git_commit"], launch["git_dirty"]) == (commit.hexsha, False)

    experiment.write_text(experiment.read_text() + "\n# edited\n")
    launch = json.loads(prepare(TrainRequest(experiment, out=tmp_path / "run2")).run.launch.read_text())
    assert (launch["git_commit"], launch["git_dirty"]) == (commit.hexsha, True)


def test_outside_a_repository_the_commit_is_null(tmp_path):
    launch = json.loads(prepare(TrainRequest(write_experiment(tmp_path), out=tmp_path / "run")).run.launch.read_text())
    assert launch["git_commit"] is None


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_run_uses_bf16_and_reports_mfu_and_snapshot(tmp_path):
    experiment = write_experiment(tmp_path, {"train": {"steps": 4}, "hardware": {"device_type": "cuda"}})
    run = train(experiment, tmp_path / "run", "--nproc", "1")
    metrics = run.read_metrics()
    assert (metrics["device_type"], metrics["precision"]) == ("cuda", "bf16")
    assert metrics["peak_mem_bytes"][0] > 0
    assert run.snapshot.is_file()
    if metrics["mfu"] is not None:  # null only on a device missing from the peak-FLOPs table
        assert 0 < metrics["mfu"] < 1
