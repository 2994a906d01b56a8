"""The CUDA paths, on a machine with a GPU (skipped cleanly elsewhere): fp32 losses equal the CPU's, bf16 stays
close to fp32, a checkpoint resumes bit for bit, evaluation scores like the CPU's (in bf16), SDPA runs a fused
kernel rather than the math fallback, activation checkpointing and compile leave the losses unchanged, the
measured peak includes reserved memory and the CUDA runtime, device sizes are torch's, batches come pinned, and a
run predicted not to fit its device is refused before launch."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
import torch
from support import REPO, TINY_MODEL, meshpilot, train, write_experiment
from test_float8 import FP8_LOSS_TOLERANCE
from transformers import AutoConfig

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

STEPS = 5
CUDA = {"hardware": {"device_type": "cuda"}}


def losses(run) -> list[float]:
    return [step["loss"] for step in run.read_steps()]


def run_on(tmp_path, name: str, device_type: str, precision: str, train_changes: dict | None = None):
    changes = {"hardware": {"device_type": device_type}, "train": {"steps": STEPS, "precision": precision}}
    changes["train"].update(train_changes or {})
    directory = tmp_path / name
    directory.mkdir()
    return train(write_experiment(directory, changes), directory / "run", "--nproc", "1")


@pytest.fixture(scope="module")
def cpu_fp32(tmp_path_factory):
    return run_on(tmp_path_factory.mktemp("cpu"), "fp32", "cpu", "fp32")


@pytest.fixture(scope="module")
def cuda_fp32(tmp_path_factory):
    return run_on(tmp_path_factory.mktemp("cuda"), "fp32", "cuda", "fp32")


def test_fp32_on_cuda_gives_the_cpu_losses(cpu_fp32, cuda_fp32):
    """Same initial weights (initialised on the CPU, copied to the device), same rows, fp32 throughout (no TF32)."""
    assert cuda_fp32.read_metrics()["device_type"] == "cuda"
    assert losses(cuda_fp32) == pytest.approx(losses(cpu_fp32), rel=1e-4)


def test_bf16_stays_close_to_fp32(tmp_path, cuda_fp32):
    run = run_on(tmp_path, "bf16", "cuda", "bf16")
    metrics = run.read_metrics()
    assert (metrics["device_type"], metrics["precision"]) == ("cuda", "bf16")
    assert losses(run) == pytest.approx(losses(cuda_fp32), rel=2e-2)
    memory = json.loads(run.memory.read_text())
    measured, predicted = memory["measured"][0], memory["predicted"][0]
    assert measured["weight_copies_saved"] == predicted["weight_copies_saved"] > 0  # autocast's bf16 weights


FLOAT8_CORES = torch.cuda.is_available() and torch.cuda.get_device_capability() >= (8, 9)


@pytest.mark.skipif(not FLOAT8_CORES, reason="needs float8 tensor cores (compute capability 8.9+)")
@pytest.mark.parametrize("recipe", ["tensorwise", "rowwise"])
def test_fp8_on_cuda_stays_close_to_bf16(tmp_path, recipe):
    """train.precision fp8 on real float8 tensor cores (torch._scaled_mm): the decoder's linear layers converted,
    losses within test_float8's tolerance of bf16's from the same seed and rows."""
    bf16 = run_on(tmp_path, "bf16", "cuda", "bf16")
    fp8 = run_on(tmp_path, "fp8", "cuda", "fp8", {"float8_recipe": recipe})
    assert "linear layers compute in float8" in fp8.log.read_text()
    assert fp8.read_metrics()["precision"] == "fp8"
    assert losses(fp8) != losses(bf16)  # the float8 casts ran
    assert losses(fp8) == pytest.approx(losses(bf16), rel=FP8_LOSS_TOLERANCE)


def test_measured_peak_includes_reserved_memory_and_the_cuda_runtime(cuda_fp32):
    memory = json.loads(cuda_fp32.memory.read_text())
    measured, predicted = memory["measured"][0], memory["predicted"][0]
    assert measured["reserved_peak"] >= measured["allocated_peak"] > 0
    assert measured["peak"] == measured["reserved_peak"] + measured["outside_allocator"]
    # The stated defaults (trainer.costs.memory_model.CUDA_RUNTIME) against this GPU: the context, within a factor of 2.
    assert predicted["cuda_runtime"] / 2 <= measured["outside_allocator"] <= 2 * predicted["cuda_runtime"]
    assert "max_memory_reserved" in memory["peak_source"]
    # Recorded over the untimed warm-up steps only, and bounded (trainer.rank.loop.SNAPSHOT_MAX_ENTRIES).
    assert 0 < cuda_fp32.snapshot.stat().st_size < 200 * 2**20


@pytest.mark.parametrize("loss", ["chunked", "auto"])
def test_compiled_bf16_steps_train_like_eager_ones(tmp_path, loss):
    """Found on an H200 (torch 2.11): with the chunked loss traced into train.compile's whole-step graph, every
    compiled step's gradients were zero (grad_norm 0.000) and the loss drifted up. A 128k vocabulary and 512 tokens
    per micro-batch make two chunks per micro-batch (trainer.model.loss.chunk_tokens), as real vocabularies do.
    train.loss auto takes the whole loss, traced into the graph, for the compiled run on this GPU (and the chunked
    one for the eager run), and records it."""
    runs = {}
    for compiled in (False, True):
        changes = {"model": {"config": {**TINY_MODEL, "vocab_size": 131072}}, "data": {"seq_len": 128}, **CUDA,
                   "train": {"steps": STEPS, "precision": "bf16", "global_batch_tokens": 1024, "micro_batch": 4,
                             "compile": compiled, "loss": loss}}  # fmt: skip
        directory = tmp_path / f"compiled_{compiled}"
        directory.mkdir()
        runs[compiled] = train(write_experiment(directory, changes), directory / "run", "--nproc", "1")
    if loss == "auto":
        recorded = {compiled: run.read_config()["train"].get("loss", "chunked") for compiled, run in runs.items()}
        assert recorded == {False: "chunked", True: "whole"}
    for eager, compiled in zip(runs[False].read_steps(), runs[True].read_steps(), strict=True):
        assert compiled["grad_norm"] > 0
        assert compiled["grad_norm"] == pytest.approx(eager["grad_norm"], rel=5e-2)
        assert compiled["loss"] == pytest.approx(eager["loss"], rel=2e-2)


def test_gpu_preset_memory_is_what_torch_reports():
    from trainer.hardware import GPUS

    properties = torch.cuda.get_device_properties(0)
    preset = next((gpu for gpu in GPUS.values() if gpu.name == properties.name), None)
    if preset is None:
        pytest.skip(f"no preset for {properties.name}")
    assert preset.memory_mib == properties.total_memory // 2**20


def test_batches_bound_for_cuda_come_pinned():
    import numpy as np

    from trainer.data.rows import BatchPlan, BatchPrefetcher, RowSource, TokenizedCorpus

    corpus = TokenizedCorpus(np.arange(400, dtype=np.uint32) % 50, np.array([0, 200, 400]))
    prefetcher = BatchPrefetcher(RowSource(corpus, 16, True, 0), BatchPlan(2, 1, 1), 0, pin=True)
    try:
        batches = prefetcher.step_batches(0)
    finally:
        prefetcher.close()
    assert all(t.is_pinned() for b in batches for t in b.values())


def test_evaluation_loads_the_model_in_bf16_on_cuda(cpu_fp32):
    from evalsuite.models import open_model, resolve

    with open_model(resolve(cpu_fp32.path)) as lm:
        assert lm.device.type == "cuda"
        expected = torch.bfloat16 if torch.cuda.is_bf16_supported(including_emulation=False) else torch.float32
        assert lm.model.dtype == expected
        assert torch.get_float32_matmul_precision() == "high"  # TF32 allowed


def test_activation_checkpointing_and_compile_keep_the_losses(tmp_path, cuda_fp32):
    checkpointed = run_on(tmp_path, "ac", "cuda", "fp32", {"activation_checkpointing": True})
    assert losses(checkpointed) == pytest.approx(losses(cuda_fp32), rel=1e-5)
    compiled = run_on(tmp_path, "compiled", "cuda", "fp32", {"compile": True})
    assert losses(compiled) == pytest.approx(losses(cuda_fp32), rel=1e-3)


def test_checkpoint_resume_on_cuda_repeats_the_run(tmp_path):
    changes = {
        **CUDA,
        "model": {"config": {"attention_dropout": 0.1}},  # the CUDA RNG state must come back too
        "train": {"steps": 4, "precision": "fp32", "checkpoint_every": 2},
    }
    experiment = write_experiment(tmp_path, changes)
    whole = train(experiment, tmp_path / "whole", "--nproc", "1")
    out = tmp_path / "resumed"
    crashed = meshpilot(
        "train", str(experiment), "--nproc", "1", "--out", str(out), env={"MESHPILOT_FAULT": "rank=0,step=3"}
    )
    assert crashed.returncode == 1
    resumed = train(experiment, out, "--nproc", "1", "--resume")
    assert "resumed from step_00000002" in resumed.log.read_text()
    expected = [(s["step"], s["loss"], s["grad_norm"]) for s in whole.read_steps()]
    assert [(s["step"], s["loss"], s["grad_norm"]) for s in resumed.read_steps()] == expected


@pytest.mark.parametrize("packed", [False, True])
def test_attention_runs_a_fused_kernel_not_math(packed):
    """Unpacked rows (no mask) must run FlashAttention itself; packed rows' mask the memory-efficient kernel.
    With the math fallback disallowed, SDPA raises instead of quietly falling back to it."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from trainer.model.build import build_model
    from trainer.rank.step import token_loss_sum

    config = AutoConfig.for_model(**{**TINY_MODEL, "hidden_size": 256, "num_attention_heads": 4})
    model = build_model(config, None, seed=0, device="cuda").train()
    rows, seq = 2, 128
    segments = torch.arange(seq, device="cuda").div(seq // 2, rounding_mode="floor").expand(rows, seq).contiguous()
    ids = torch.randint(0, config.vocab_size, (rows, seq), device="cuda")
    positions = torch.arange(seq, device="cuda").remainder(seq // 2).expand(rows, seq).contiguous()
    batch = {"input_ids": ids, "labels": ids, "position_ids": positions, "segment_ids": segments}
    allowed = [SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION] if packed else [SDPBackend.FLASH_ATTENTION]
    with sdpa_kernel(allowed), torch.autocast("cuda", dtype=torch.bfloat16):
        token_loss_sum(model, batch, packed).backward()
    assert all(p.grad is not None for p in model.parameters())


def test_evaluation_on_cuda_scores_like_the_cpu(tmp_path, cpu_fp32):
    """The benchmark suite on the GPU and, with the GPU hidden, on the CPU: the same scores up to bf16 rounding."""
    store = tmp_path / "store"
    results = {}
    for device, visible in (("cuda", None), ("cpu", "")):
        env = {**os.environ, "MESHPILOT_DATA": str(tmp_path / f"store-{device}")}
        if visible is not None:
            env["CUDA_VISIBLE_DEVICES"] = visible
        if store.exists():  # the same private items for both: one store, copied before either evaluates
            shutil.copytree(store, env["MESHPILOT_DATA"])
        code = (
            "import json, sys, torch; from evalsuite.api import run_bench; "
            "r = run_bench('builtin', sys.argv[1]); "
            "scores = [(t['task'], t['split'], t['metrics']) for t in r['tasks']]; "
            "print(json.dumps([torch.cuda.is_available(), scores]))"
        )
        done = subprocess.run(
            [sys.executable, "-c", code, str(cpu_fp32.path)], cwd=REPO, env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr[-3000:]
        results[device] = json.loads(done.stdout.strip().splitlines()[-1])
        if not store.exists():
            shutil.copytree(env["MESHPILOT_DATA"], store)
    assert results["cuda"][0] and not results["cpu"][0]
    for (task, split, on_gpu), (_, _, on_cpu) in zip(results["cuda"][1], results["cpu"][1], strict=True):
        for metric, value in on_cpu.items():
            if isinstance(value, float):
                assert on_gpu[metric] == pytest.approx(value, rel=5e-2, abs=5e-2), (task, split, metric)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_fsdp_mixed_precision_on_two_gpus_stays_close_to_one(tmp_path):
    """bf16 FSDP2 (bf16 gathers, fp32 gradient reduction) against one GPU's autocast bf16."""
    experiment = write_experiment(tmp_path, {**CUDA, "train": {"steps": STEPS, "precision": "bf16"}})
    single = train(experiment, tmp_path / "single", "--nproc", "1")
    sharded = train(experiment, tmp_path / "fsdp", "--nproc", "2", "--layout", "dp_shard=2")
    assert losses(sharded) == pytest.approx(losses(single), rel=2e-2)
    measured = json.loads(sharded.memory.read_text())["measured"]
    assert all(rank["weight_copies_saved"] == 0 for rank in measured)


def test_a_run_predicted_not_to_fit_its_device_is_refused_before_launch(tmp_path):
    """The launcher's memory check on CUDA (tests/test_bad_input.py decides it without a GPU): a process has its
    device's memory as torch reports it; a run predicted to need more is refused in one line, before anything runs."""
    huge = {**CUDA, "model": {"config": {"intermediate_size": 2**34}}}  # about 1.5 TiB of MLP weights alone
    experiment = write_experiment(tmp_path, huge)
    done = meshpilot("train", str(experiment), "--out", str(tmp_path / "run"), "--nproc", "1")
    assert done.returncode == 2, done.stderr[-3000:]
    device = torch.cuda.get_device_properties(0).total_memory
    [line] = done.stderr.splitlines()
    assert line.startswith("meshpilot: error: the memory model predicts a peak of "), line
    assert line.endswith(
        f" GiB per process, more than the {device / 2**30:.2f} GiB of device memory per process; lower "
        "train.micro_batch, use more processes or another layout, or pass --ignore-memory-check"
    ), line
    assert not (tmp_path / "run").exists()
