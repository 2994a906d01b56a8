"""Two launchers as two nodes on 127.0.0.1 (torchrun c10d rendezvous) train exactly like one node."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

import pytest
from support import REPO, train, write_experiment

from trainer.results.rundir import RunDir


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_nodes_equal_one_node(tmp_path):
    experiment = write_experiment(tmp_path, {"train": {"steps": 3}})
    endpoint = f"127.0.0.1:{free_port()}"
    node_args = ["--nproc", "1", "--nnodes", "2", "--rdzv-endpoint", endpoint, "--out", str(tmp_path / "two-nodes")]
    nodes = [
        subprocess.Popen(
            [sys.executable, "-m", "agent.cli", "train", str(experiment), *node_args, "--node-rank", str(rank)],
            cwd=REPO,
            env=dict(os.environ),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # so a failed test can stop each launcher with its torchrun and ranks
        )
        for rank in (0, 1)
    ]
    try:
        outputs = [node.communicate(timeout=300) for node in nodes]
    finally:
        for node in nodes:
            if node.poll() is None:
                os.killpg(node.pid, signal.SIGKILL)
    for node, (_, stderr) in zip(nodes, outputs, strict=True):
        assert node.returncode == 0, stderr[-3000:]
    one = train(experiment, tmp_path / "one-node", "--nproc", "2")
    two = RunDir(tmp_path / "two-nodes")
    assert two.read_metrics()["world_size"] == 2
    assert two.read_metrics()["layout"]["dp_replicate"] == 2
    for a, b in zip(one.read_steps(), two.read_steps(), strict=True):
        assert b["loss"] == pytest.approx(a["loss"], rel=1e-5)
