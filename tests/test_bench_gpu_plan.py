"""bench/gpu.py's plan, checked on the CPU before GPU time is spent on it: the tasks run in the budget's order,
each in a process of its own (this one never initialises CUDA), each result written as soon as its task ends, none
started that the time left cannot finish, and none given more time than is left. A stand-in answers for the GPU
processes (they cannot run here) with fixed fixture figures, in the formats the real ones write, and advances a
clock of its own by a fixed figure per process: no timing of this machine is involved."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from support import REPO

from trainer.rank.memory import outside_source
from trainer.results.schemas import MEMORY, METRICS, STEPS

if str(REPO) not in sys.path:  # bench/ is a directory of scripts, not an installed package
    sys.path.insert(0, str(REPO))

from bench import gpu

GiB = 1024**3
SECONDS_PER_PROCESS = 100.0  # the stand-in's clock: every process "takes" this long
FP8_LOSS_OFFSET = 0.25  # the stand-in's fp8 runs lose this much more than its bf16 runs, at every step


class StandIn:
    """Answers each process bench/gpu.py starts as the GPU machine would, from fixture figures, and records what
    was asked and what the result file held at that moment."""

    def __init__(self, out: Path):
        self.out, self.now, self.calls = out, 0.0, []

    def clock(self) -> float:
        return self.now

    def __call__(self, args: list[str], *, timeout: float, env: dict, **_) -> subprocess.CompletedProcess:
        written = json.loads(self.out.read_text()) if self.out.exists() else {"sections": {}}
        done_so_far = [name for section in written["sections"].values() for name in section]
        self.calls.append({"args": args, "timeout": timeout, "written_before": done_so_far})
        self.now += SECONDS_PER_PROCESS
        stdout = self.answer(args)
        return subprocess.CompletedProcess(args, 0, stdout=stdout, stderr="")

    def answer(self, args: list[str]) -> str:
        if "--worker" in args:
            out = Path(args[args.index("--out") + 1])
            worker = args[args.index("--worker") + 1]
            if worker == "environment":
                machine = {"cpu": "fixture", "cores": 16, "gpus": ["NVIDIA H100 80GB HBM3"], "versions": {}}
                out.write_text(json.dumps({"machine": machine, "device_name": "NVIDIA H100 80GB HBM3"}))
            elif worker == "rerun":
                out.write_text(json.dumps({"step_ratio": 1.05, "peak_bytes_less": GiB}))
            else:
                experiment = yaml.safe_load(Path(args[args.index("--experiment") + 1]).read_text())
                out.write_text(json.dumps({"precision": experiment["train"]["precision"], "tokens_per_s": 1000.0}))
        elif args[1:4] == ["-m", "agent.cli", "train"]:
            experiment = yaml.safe_load(Path(args[4]).read_text())
            write_run(
                Path(args[args.index("--out") + 1]),
                FP8_LOSS_OFFSET if experiment["train"].get("precision") == "fp8" else 0.0,
            )
        elif "pytest" in args:
            return "15 passed, 2 skipped\n"
        return ""


def write_run(directory: Path, loss_offset: float = 0.0) -> None:
    """A finished one-GPU run's result files, through their contracts (the real formats); `loss_offset` added to
    every step's loss."""
    directory.mkdir(parents=True)
    steps = [{"step": s, "loss": 10.0 - s + loss_offset, "lr": 3e-4, "tokens": 65536, "target_tokens": 65000,
              "step_s": 1.0, "data_wait_s": 0.0, "grad_norm": 1.0} for s in range(1, 5)]  # fmt: skip
    (directory / "steps.jsonl").write_text("".join(STEPS.line(s) for s in steps))
    METRICS.write(directory / "metrics.json", {
        "layout": {"dp_replicate": 1, "dp_shard": 1, "tp": 1, "cp": 1, "pp": 1}, "world_size": 1,
        "device_type": "cuda", "steps": 4, "micro_batch": 4, "grad_accum": 2, "seq_len": 2048, "packing": True,
        "precision": "bf16", "config_hash": "fixture", "git_commit": None, "git_dirty": None, "seed": 0,
        "versions": {}, "status": "ok", "error": None, "tokens_per_s": 65536.0, "mfu": 0.4, "final_loss": 6.0,
        "timed_steps": 2, "peak_mem_bytes": [40 * GiB],
    })  # fmt: skip
    measured = {"rank": 0, "peak": 40 * GiB, "outside_allocator": GiB, "outside_source": outside_source(GiB)}
    predicted = {"rank": 0, "parameters": GiB, "gradients": GiB, "optimizer": 2 * GiB, "activations_saved": 30 * GiB,
                 "weight_copies_saved": 0, "temporaries": 4 * GiB, "peak": 38 * GiB}  # fmt: skip
    MEMORY.write(directory / "memory.json", {"units": "bytes", "predicted": [predicted], "measured": [measured],
                                             "peak_source": "fixture", "timeline": []})  # fmt: skip


@pytest.fixture
def planned(tmp_path, monkeypatch):
    """The budgeted plan run against the stand-in: 800 s of budget, 100 s per process."""
    monkeypatch.setenv("MESHPILOT_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "gpu.json"
    stand_in = StandIn(out)
    monkeypatch.setattr(gpu.time, "monotonic", stand_in.clock)
    bench = gpu.Bench(out, tmp_path / "work", budget_s=800, runner=stand_in)
    gpu.run_plan(bench, gpu.ordered(gpu.tasks(quick=False), list(gpu.SECTIONS), budgeted=True))
    return stand_in, json.loads(out.read_text())


def test_a_budget_runs_what_is_most_worth_a_gpu_first_and_skips_what_cannot_finish(planned):
    stand_in, result = planned
    ran = result["budget"]["ran"]
    # Seven processes fit in 800 s; the eighth task (two processes, at least 200 s) is skipped with 100 s left, and a
    # later one that fits in them runs; the planner is CPU work in this process and still runs at the end.
    assert ran[:7] == list(gpu.BUDGET_ORDER[:7]) and ran[-1] == "planner"
    assert "fp8_losses_tensorwise" in result["budget"]["skipped"] and "demo" in result["budget"]["skipped"]
    assert "mem_s2048_selective_compiled" in ran
    assert "needs" in result["budget"]["skipped"]["demo"]
    assert all(call["timeout"] <= 800 - SECONDS_PER_PROCESS * i for i, call in enumerate(stand_in.calls))


def test_each_result_is_written_as_its_task_ends(planned):
    stand_in, result = planned
    assert [call["written_before"] for call in stand_in.calls[:3]] == [
        [],
        ["environment"],
        ["environment", "mfu_s2048_compiled"],
    ]
    assert result["machine"]["gpus"] == ["NVIDIA H100 80GB HBM3"]  # from the worker, not asked of CUDA here
    run = result["sections"]["mfu"]["mfu_s2048_compiled"]
    assert run["tokens_per_s"] == 65536.0 and run["memory_source"] == "nvml: this process"
    experts = result["sections"]["moe"]["moe_grouped_mm"]
    assert (experts["predicted_peak"], experts["measured_peak"]) == (38 * GiB, 40 * GiB)


def test_every_measurement_is_a_process_of_its_own_and_the_trainer_baseline_is_bf16(planned):
    stand_in, result = planned
    assert all(call["args"][0] == sys.executable for call in stand_in.calls)
    workers = [call["args"] for call in stand_in.calls if "--worker" in call["args"]]
    assert [w[w.index("--worker") + 1] for w in workers] == ["environment", "hf_trainer"]
    assert "--compiled" in workers[1]  # the Trainer compiled, against meshpilot compiled
    assert result["sections"]["mfu"]["hf_trainer_s2048_compiled"]["precision"] == "bf16"
    fp8 = next(c["args"] for c in stand_in.calls if "mfu_s2048_compiled_fp8" in " ".join(c["args"]))
    experiment = yaml.safe_load(Path(fp8[fp8.index("train") + 1]).read_text())
    assert (experiment["train"]["precision"], experiment["train"]["compile"]) == ("fp8", True)
    assert "torch" not in {name.split(".")[0] for name in vars(gpu) if not name.startswith("_")}
    rows = result["sections"]["planner"]["planner"]["runs"]
    assert set(rows) >= {"mfu_s2048_compiled", "moe_loop"} and rows["mfu_s2048_compiled"]["measured_step_s"] == 1.0


def test_fp8_losses_compare_the_two_runs_from_one_seed(tmp_path):
    """The fp8 numerics task trains bf16 and fp8 on the same model, seed and data and compares their losses."""
    out = tmp_path / "gpu.json"
    stand_in = StandIn(out)
    bench = gpu.Bench(out, tmp_path / "work", runner=stand_in)
    gpu.run_plan(bench, [t for t in gpu.tasks(quick=False) if t.name == "fp8_losses_tensorwise"])
    found = json.loads(out.read_text())["sections"]["fp8"]["fp8_losses_tensorwise"]
    experiments = [yaml.safe_load(Path(c["args"][c["args"].index("train") + 1]).read_text()) for c in stand_in.calls]
    assert [e["train"]["precision"] for e in experiments] == ["bf16", "fp8"]
    assert (
        experiments[0]["model"] == experiments[1]["model"] and experiments[1]["train"]["float8_recipe"] == "tensorwise"
    )
    assert {e["train"].get("seed") for e in experiments} == {None}  # both the default seed
    assert found["max_abs_difference"] == pytest.approx(FP8_LOSS_OFFSET)
    assert found["last100_mean_fp8"] - found["last100_mean_bf16"] == pytest.approx(FP8_LOSS_OFFSET)
    assert found["last100_relative_difference"] == pytest.approx(FP8_LOSS_OFFSET / found["last100_mean_bf16"])


def test_without_a_budget_the_chosen_sections_run_in_the_order_given(tmp_path, monkeypatch):
    out = tmp_path / "gpu.json"
    stand_in = StandIn(out)
    bench = gpu.Bench(out, tmp_path / "work", runner=stand_in)
    gpu.run_plan(bench, gpu.ordered(gpu.tasks(quick=True), ["environment", "packed_attention"], budgeted=False))
    result = json.loads(out.read_text())
    assert list(result["sections"]) == ["environment", "packed_attention"] and "budget" not in result
    assert list(result["sections"]["packed_attention"]) == [
        "attn_s8192_packed_flex", "attn_s8192_packed_dense", "attn_s32768_packed_flex", "attn_s32768_packed_dense"
    ]  # fmt: skip


def test_an_unknown_section_is_one_line_and_exit_2(capsys):
    assert gpu.main(["--only", "mfu,warp"]) == 2
    assert capsys.readouterr().err.strip() == (f"bench.gpu: unknown section(s) warp; known: {', '.join(gpu.SECTIONS)}")


def test_cuda_tests_keep_each_failures_text_as_it_comes(tmp_path):
    """The CUDA tests' failures are written as they come (tests/conftest.py, MESHPILOT_TEST_FAILURES), once each under
    pytest's workers, so that a GPU budget cut before pytest's summary still says why a test failed."""
    (tmp_path / "test_fixture.py").write_text(
        "def test_passes():\n    assert True\n\n\ndef test_fails():\n    assert 1 == 2, 'the reason'\n"
    )
    failures = tmp_path / "failures.txt"
    env = {**os.environ, "MESHPILOT_TEST_FAILURES": str(failures), "PYTHONPATH": str(REPO / "tests")}
    # xdist alone of the installed plugins: each of the three interpreters would take seconds loading the others.
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    args = ["-p", "xdist.plugin", "-p", "conftest", "-p", "no:cacheprovider", "-n", "2", "-q"]
    args.append(str(tmp_path / "test_fixture.py"))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *args], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 1, done.stdout[-2000:]
    written = failures.read_text()
    assert written.count("=== ") == 1 and "test_fixture.py::test_fails (call)" in written and "the reason" in written


def test_the_rerun_worker_measures_both_layers_on_the_device_it_is_given(tmp_path):
    """The eager layer's rerun against the plain layer, here on the CPU with the tiny model (on a GPU: the 1B)."""
    from support import TINY_MODEL

    out = tmp_path / "rerun.json"
    gpu.rerun_worker(out, device="cpu", shape=TINY_MODEL, seq_len=64, micro_batch=2, steps=1)
    found = json.loads(out.read_text())
    assert found["plain"]["median_step_s"] > 0 and found["rerun"]["median_step_s"] > 0
    assert found["plain"]["peak_allocated_bytes"] is None  # no allocator statistics on a CPU
    # the norms and SiLU keep their inputs only: 2 layers x 128 tokens x what each token keeps less in a layer
    assert found["predicted_saved_bytes_less"] > 0 and found["predicted_saved_bytes_less"] % (2 * 128) == 0
