"""The tests' preloaded launcher (tests/preloaded.py) runs `meshpilot train` exactly as a fresh interpreter does,
and hands a request to a fresh interpreter wherever preloading could change the run."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import preloaded
import pytest
from support import REPO, write_experiment


def _fresh(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "agent.cli", *args], cwd=REPO, capture_output=True, text=True, timeout=300
    )


def _losses(run_dir) -> list[tuple[float, float]]:
    steps = [json.loads(line) for line in (run_dir / "steps.jsonl").read_text().splitlines()]
    return [(step["loss"], step["grad_norm"]) for step in steps]


@pytest.mark.slow
def test_a_preloaded_launch_trains_what_a_fresh_one_does(tmp_path):
    experiment = write_experiment(tmp_path, {"model": {"config": {"attention_dropout": 0.1}}})
    args = ("train", str(experiment), "--nproc", "2", "--layout", "dp_shard=2")
    env = dict(os.environ)
    assert preloaded.serves(args, env)
    forked = preloaded.run((*args, "--out", str(tmp_path / "forked")), env, timeout=300)
    fresh = _fresh(*args, "--out", str(tmp_path / "fresh"))
    assert forked.returncode == fresh.returncode == 0, forked.stderr + fresh.stderr
    assert "run ok" in forked.stdout
    assert _losses(tmp_path / "forked") == _losses(tmp_path / "fresh")
    # Its export too (the other command served): the same files, byte for byte.
    export = ("export", str(tmp_path / "forked"), "--out")
    assert preloaded.serves(export, env)
    forked = preloaded.run((*export, str(tmp_path / "hf-forked")), env, timeout=300)
    fresh = _fresh(*export, str(tmp_path / "hf-fresh"))
    assert forked.returncode == fresh.returncode == 0, forked.stderr + fresh.stderr
    assert _files(tmp_path / "hf-forked") == _files(tmp_path / "hf-fresh")


def test_a_preloaded_plan_prints_what_a_fresh_one_does(tmp_path):
    """Every figure of the plan (priced from this session's calibration records, where it has any)."""
    args = ("plan", str(write_experiment(tmp_path)), "--devices", "4", "--json")
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}  # as support.meshpilot's plans have it
    assert preloaded.serves(args, env)
    forked = preloaded.run(args, env, timeout=300)
    fresh = subprocess.run(
        [sys.executable, "-m", "agent.cli", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )
    assert (forked.returncode, forked.stdout, forked.stderr) == (fresh.returncode, fresh.stdout, fresh.stderr)
    assert forked.returncode == 0 and json.loads(forked.stdout)


def _files(directory) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def test_errors_come_back_as_a_fresh_interpreter_gives_them(tmp_path):
    args = ("train", str(tmp_path / "missing.yaml"), "--out", str(tmp_path / "run"))
    forked, fresh = preloaded.run(args, dict(os.environ), timeout=300), _fresh(*args)
    assert (forked.returncode, forked.stdout, forked.stderr) == (fresh.returncode, fresh.stdout, fresh.stderr)
    assert forked.returncode == 2 and forked.stderr.startswith("meshpilot: error:")


def test_requests_that_preloading_could_change_go_to_a_fresh_interpreter():
    env = dict(os.environ)
    assert preloaded.serves(("train", "x.yaml"), env)
    assert preloaded.serves(("export", "run"), env)
    assert not preloaded.serves(("sweep", "x.yaml"), env)  # only train, export and plan
    assert preloaded.serves(("plan", "x.yaml"), {**env, "OPENBLAS_NUM_THREADS": "1"})
    assert not preloaded.serves(("plan", "x.yaml"), {**env, "OPENBLAS_NUM_THREADS": "2"})  # its least squares
    assert not preloaded.serves(("train", "x.yaml"), {**env, "HF_HOME": "/elsewhere"})  # read at import
    assert not preloaded.serves(("train", "x.yaml"), {**env, "OMP_NUM_THREADS": "7"})
    assert not preloaded.serves(("train", "x.yaml"), {**env, "MESHPILOT_PARENT_PID": "1"})  # a lifeline to the test


def test_no_launch_is_forked_where_the_preloaded_imports_initialised_cuda(monkeypatch):
    """On a GPU machine with torchao installed, transformers' import of it initialises CUDA in the preloaded process
    and a forked launcher could not use the GPU: every launch then goes to a fresh interpreter. Here its answer is
    faked, as no CPU machine can initialise CUDA."""
    args, env = ("train", "experiment.yaml"), dict(os.environ)
    monkeypatch.setattr(preloaded._launcher(), "_children_can_use_cuda", True)
    assert preloaded.serves(args, env)
    monkeypatch.setattr(preloaded._launcher(), "_children_can_use_cuda", False)
    assert not preloaded.serves(args, env)
