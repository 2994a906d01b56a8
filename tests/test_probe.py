"""`meshpilot probe`: it really measures this machine (2 gloo processes on CPU), stores the result per machine, and
predictions for an uncalibrated machine start from it. No assertion depends on how fast this machine is."""

from __future__ import annotations

import json

import pytest
import torch
from support import TINY_MODEL, meshpilot, write_experiment
from transformers import AutoConfig

import trainer.costs.probe as probe_module
from agent.cli import main
from trainer.costs.calibration import Calibration
from trainer.costs.probe import (
    COLLECTIVES,
    STATED,
    ProbeError,
    ensure_probe,
    plans_this_machine,
    probe_path,
    read_probe,
)
from trainer.costs.throughput import StepShape, estimate_step, hardware_figures
from trainer.hardware import Hardware, this_machine
from trainer.host.environment import device_name
from trainer.layout import Layout
from trainer.results.contracts import write_json

CPU = Hardware("cpu", device_name("cpu"), devices_per_node=2, intra_node_link="cpu")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A cache of its own: a probe written here never reaches another test's predictions."""
    monkeypatch.setenv("MESHPILOT_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def written_probe(
    hardware: Hardware, latency_s: float = 4e-3, fp32_flops: float = 20e9, bandwidth: float = 10e9,
    op_overhead_s: float = 5e-6,
) -> dict:  # fmt: skip
    """A stored probe with the given figures, as `meshpilot probe` writes it (its measurements left out)."""
    link = {c: {"latency_s": latency_s, "bandwidth": 1e9} for c in COLLECTIVES}
    figures = {"flops": {"fp32": fp32_flops, "bf16": fp32_flops / 10}, "links": {"intra_node": link},
               "memory_bandwidth": bandwidth, "op_overhead_s": op_overhead_s}  # fmt: skip
    probe = {
        "machine": {"key": hardware.key, "device_type": hardware.device_type},
        "measured_at": f"test {latency_s} {fp32_flops} {bandwidth} {op_overhead_s}",
        "figures": figures,
    }
    write_json(probe_path(hardware), probe)
    return probe


@pytest.mark.slow
def test_the_probe_measures_this_machine_with_two_gloo_processes(cache):
    done = meshpilot("probe", "--quick", "--nproc", "2", "--device-type", "cpu", env={"MESHPILOT_CACHE": str(cache)})
    assert done.returncode == 0, done.stderr[-3000:]
    shown_rows = (
        "matmul",
        "fp32",
        "bf16",
        "memory bandwidth",
        "per-op overhead",
        "DTensor dispatch",
        "selective ckpt.",
        "all_reduce",
        "send_recv",
        "all_to_all",
    )
    for shown in shown_rows:
        assert shown in done.stdout
    assert f"saved to {probe_path(CPU)}" in done.stdout

    probe = json.loads(probe_path(CPU).read_text())
    assert probe["machine"]["key"] == this_machine("cpu", 2).key and probe["machine"]["backend"] == "gloo"
    assert probe["settings"]["nproc"] == 2 and probe["versions"]["torch"] and probe["measured_at"]
    compute = probe["compute"]
    assert set(compute["matmul"]) == {"fp32", "bf16"}
    assert all(r["flops_per_s"] > 0 for rows in compute["matmul"].values() for r in rows)
    assert compute["memory_bandwidth"] > 0 and compute["op_overhead_s"] > 0
    # What Python dispatch adds to an operation: measured, never negative (a difference of two noisy timings).
    assert compute["dtensor_op_s"] >= 0 and compute["selective_op_s"] >= 0
    assert {k: probe["figures"][k] for k in ("dtensor_op_s", "selective_op_s")} == {
        k: compute[k] for k in ("dtensor_op_s", "selective_op_s")
    }
    assert set(probe["links"]) == {"intra_node"}  # one node: the link between its processes
    for collective in COLLECTIVES:
        small, large = probe["links"]["intra_node"][collective]  # 1 KiB and 1 MiB
        assert 0 < small["fastest_s"] <= small["seconds"] and 0 < large["fastest_s"] <= large["seconds"]
        assert large["bus_bandwidth"] > small["bus_bandwidth"]  # 1024 times the bytes, not 1024 times the time
        used = probe["figures"]["links"]["intra_node"][collective]
        assert used["latency_s"] == small["fastest_s"] and used["bandwidth"] > 0
    assert hardware_figures(CPU).source == f"probe {probe['measured_at']}"

    shown = meshpilot("probe", "--show", "--device-type", "cpu", env={"MESHPILOT_CACHE": str(cache)})
    assert shown.returncode == 0 and "all_gather" in shown.stdout and f"stored in {probe_path(CPU)}" in shown.stdout


SIZES = {"matmul_params": 10_000, "parameter_bytes": 40_000}  # a small model's


def test_a_prediction_for_an_uncalibrated_machine_starts_from_its_probe(cache):
    """Without a probe the stated defaults; with one, its collective latency and compute rate, exactly."""
    config = AutoConfig.for_model(**TINY_MODEL)
    args = (config, Layout(dp_replicate=1, tp=2), CPU, StepShape(2, 64, 4))  # tp: on the critical path
    stated = estimate_step(*args, **SIZES)
    assert hardware_figures(CPU).source == STATED

    written_probe(CPU, latency_s=4e-3)
    slow_link = estimate_step(*args, **SIZES)
    written_probe(CPU, latency_s=8e-3)
    slower_link = estimate_step(*args, **SIZES)
    assert slower_link.comm_s - slow_link.comm_s == pytest.approx(slow_link.collectives * 4e-3)
    assert slow_link.step_s != stated.step_s and slower_link.step_s > slow_link.step_s

    written_probe(CPU, latency_s=8e-3, fp32_flops=40e9)
    faster = estimate_step(*args, **SIZES)
    assert faster.matmul_s == pytest.approx(slower_link.matmul_s / 2)
    written_probe(CPU, latency_s=8e-3, fp32_flops=40e9, bandwidth=5e9, op_overhead_s=10e-6)
    slower_memory = estimate_step(*args, **SIZES)
    assert slower_memory.memory_s == pytest.approx(faster.memory_s * 2) and faster.memory_s > 0
    assert slower_memory.launch_s == pytest.approx(faster.launch_s * 2) and faster.launch_s > 0
    # A CPU runs its operations one after another: the three parts add up.
    parts = slower_memory.matmul_s + slower_memory.memory_s + slower_memory.launch_s
    assert slower_memory.compute_s == pytest.approx(parts)


def test_runs_calibrated_under_other_figures_do_not_calibrate_the_probed_machine(cache):
    """A calibration record measured a step against the seconds of the figures of its time: once a probe changes
    them, the old factors would scale the wrong seconds. Runs predicted from the probe calibrate it."""
    config = AutoConfig.for_model(**TINY_MODEL)
    args = (config, Layout(dp_replicate=2), CPU, StepShape(2, 64, 4))
    Calibration.record(CPU, estimate_step(*args, **SIZES), 1.0)
    assert Calibration.load(CPU).runs == 1
    written_probe(CPU)
    assert Calibration.load(CPU).runs == 0
    Calibration.record(CPU, estimate_step(*args, **SIZES), 1.0)
    assert Calibration.load(CPU).runs == 1


def test_ensure_probe_measures_only_a_machine_without_one(cache, monkeypatch, capsys):
    measured = []

    def fake_probe(settings, rendezvous=None):
        measured.append(settings)
        return probe_path(CPU), written_probe(CPU)

    monkeypatch.setattr(probe_module, "run_probe", fake_probe)
    assert ensure_probe(CPU) == probe_path(CPU) and len(measured) == 1
    assert "measuring this machine once" in capsys.readouterr().err
    assert ensure_probe(CPU) == probe_path(CPU) and len(measured) == 1  # stored: not measured again
    assert measured[0].nproc == 2 and measured[0].device_type == "cpu"


def test_a_failed_probe_leaves_the_stated_defaults(cache, monkeypatch, capsys):
    def failing(settings, rendezvous=None):
        raise ProbeError("the probe's processes exited with code 1: RuntimeError: no")

    monkeypatch.setattr(probe_module, "run_probe", failing)
    assert ensure_probe(CPU) is None and read_probe(CPU) is None
    assert "probe failed, predicting from stated defaults" in capsys.readouterr().err


def test_only_a_plan_for_this_machines_own_devices_probes_it():
    assert plans_this_machine(CPU)
    assert not plans_this_machine(Hardware("cpu", "some other CPU", 2))
    if not torch.cuda.is_available():  # planning for GPUs this machine does not have
        assert not plans_this_machine(Hardware("cuda", "NVIDIA H100 80GB HBM3", 8))


@pytest.mark.slow
def test_a_cpu_plan_uses_the_stored_probe_without_measuring_again(cache, tmp_path):
    """The plan ranks by the probe's figures; with a probe stored it measures nothing (seconds, not a probe)."""
    experiment = write_experiment(tmp_path)
    written_probe(CPU, latency_s=4e-3)
    env = {"MESHPILOT_CACHE": str(cache)}
    done = meshpilot("plan", str(experiment), "--devices", "2", "--device-type", "cpu", "--json", env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "measuring" not in done.stderr
    assert any(c["predicted_step_s"] for c in json.loads(done.stdout))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--nproc", "0"], "the process and node counts must be at least 1 (got 0 and 1)"),
        (["--nnodes", "2"], "--nnodes 2 needs --rdzv-endpoint HOST:PORT"),
        (["--nnodes", "2", "--node-rank", "2", "--rdzv-endpoint", "h:1"], "--node-rank 2 is not one of"),
    ],
)
def test_bad_input_gets_one_line(args, message, cache, capsys):
    assert main(["probe", "--device-type", "cpu", *args]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"meshpilot: error: {message}") and error.count("\n") == 1
    assert not probe_path(CPU).exists()


def test_show_without_a_probe_says_so(cache, capsys):
    assert main(["probe", "--show", "--device-type", "cpu"]) == 1
    assert "no probe of this machine yet" in capsys.readouterr().out


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_the_probe_measures_gpus_with_nccl(cache):
    nproc = min(2, torch.cuda.device_count())
    done = meshpilot("probe", "--quick", "--nproc", str(nproc), env={"MESHPILOT_CACHE": str(cache)})
    assert done.returncode == 0, done.stderr[-3000:]
    hardware = this_machine("cuda", nproc)
    probe = json.loads(probe_path(hardware).read_text())
    assert probe["machine"]["backend"] == "nccl" and probe["figures"]["flops"]["fp32"] > 0
    assert set(probe["links"]) == ({"intra_node"} if nproc > 1 else set())
