"""End to end through the command line: a DDP run equals the single-process run, and writes the result files."""

from __future__ import annotations

import json

import pytest
import yaml
from support import TINY_MODEL, cache_sharing_prepared_data, train, write_experiment

from trainer.rank.profiling import category, profiled_steps

STEPS = 4
# Two warm-up steps, the second profiled (train.profile_steps): the profiler's cost never reaches the timed steps.
CHANGES = {"train": {"steps": STEPS, "global_batch_tokens": 512, "micro_batch": 2, "timing_warmup_steps": 2,
                     "profile_steps": 1}}  # fmt: skip


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The same experiment on 1 process (accumulation 4) and on 2 DDP processes (accumulation 2)."""
    directory = tmp_path_factory.mktemp("train-run")
    experiment = write_experiment(directory, CHANGES)
    results = {}
    # These runs' calibration records only; the session's tokenizer and tokenized data.
    cache = {"MESHPILOT_CACHE": str(cache_sharing_prepared_data(directory / "cache"))}
    for nproc in (1, 2):
        results[nproc] = train(experiment, directory / f"nproc{nproc}", "--nproc", str(nproc), env=cache)
    return results


def test_ddp_losses_equal_single_process(runs):
    single, ddp = runs[1].read_steps(), runs[2].read_steps()
    assert [s["step"] for s in single] == list(range(1, STEPS + 1))
    for a, b in zip(single, ddp, strict=True):
        assert b["loss"] == pytest.approx(a["loss"], rel=1e-5)
        assert b["grad_norm"] == pytest.approx(a["grad_norm"], rel=1e-4)
        assert (b["tokens"], b["target_tokens"], b["lr"]) == (a["tokens"], a["target_tokens"], a["lr"])
    assert single[-1]["loss"] < single[0]["loss"]


def test_metrics_follow_the_contract(runs):
    metrics = runs[2].read_metrics()
    assert metrics["status"] == "ok" and metrics["error"] is None
    assert metrics["layout"] == {"pp": 1, "dp_replicate": 2, "dp_shard": 1, "cp": 1, "tp": 1}
    assert (metrics["world_size"], metrics["device_type"], metrics["steps"]) == (2, "cpu", STEPS)
    assert (metrics["micro_batch"], metrics["grad_accum"], metrics["seq_len"], metrics["packing"]) == (2, 2, 64, True)
    assert metrics["mfu"] is None  # no peak rate is claimed for a CPU
    assert metrics["tokens_per_s"] > 0
    assert metrics["tokens_per_s_per_device"] == pytest.approx(metrics["tokens_per_s"] / 2)
    assert metrics["timed_steps"] == STEPS - 2
    steps = runs[2].read_steps()
    timed = steps[2:]
    assert metrics["tokens_per_s"] == pytest.approx(sum(s["tokens"] for s in timed) / sum(s["step_s"] for s in timed))
    assert len(metrics["peak_mem_bytes"]) == 2 and min(metrics["peak_mem_bytes"]) > 0
    assert metrics["final_loss"] == steps[-1]["loss"]
    assert all(0 <= s["data_wait_s"] <= s["step_s"] for s in steps)  # the wait for rows the read-ahead had not read
    assert len(metrics["config_hash"]) == 16 and metrics["seed"] == 0
    assert metrics["versions"]["torch"] and metrics["versions"]["transformers"]
    assert runs[1].read_metrics()["config_hash"] != metrics["config_hash"]  # the layout differs


def test_config_echo_is_the_resolved_experiment(runs):
    echoed = yaml.safe_load(runs[2].config.read_text())
    assert echoed["model"]["config"] == TINY_MODEL
    assert echoed["layout"]["dp_replicate"] == 2
    assert echoed["train"]["precision"] == "fp32"
    assert echoed["hardware"]["device_type"] == "cpu" and echoed["hardware"]["devices"] == 2


def test_measured_memory_counts_each_category_exactly(runs):
    memory = json.loads(runs[2].memory.read_text())
    from transformers import AutoConfig, AutoModelForCausalLM

    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(**TINY_MODEL))
    params = list(model.parameters())
    param_bytes = sum(p.numel() * 4 for p in params)
    for rank in memory["measured"]:
        assert rank["parameters"] == param_bytes  # DDP: every rank holds everything
        assert rank["gradients"] == param_bytes
        assert rank["optimizer"] == 2 * param_bytes + 4 * len(params)  # AdamW moments + a float32 step each
        assert rank["activations_saved"] > 0


def test_final_checkpoint_is_written(runs):
    names = sorted(p.name for p in runs[2].checkpoints.iterdir())
    assert names == [f"step_{STEPS:08d}"]
    assert not list(runs[2].path.glob("log.rank*.txt"))  # rank logs are removed after a clean run


def test_a_run_teaches_the_throughput_model_what_the_planner_predicted_for_it(runs, monkeypatch):
    """The calibration record of a run holds the prediction for its resolved config and its median timed step.
    Records are kept per machine, oldest first: the 2-process run was the second."""
    from trainer.config import experiment_from_dict
    from trainer.costs.calibration import FEATURES, calibration_records
    from trainer.costs.throughput import predict_run
    from trainer.hardware import this_machine
    from trainer.model.build import model_config

    monkeypatch.setenv("MESHPILOT_CACHE", str(runs[2].path.parent / "cache"))
    run, metrics = runs[2], runs[2].read_metrics()
    experiment = experiment_from_dict(yaml.safe_load(run.config.read_text()))
    hardware = this_machine("cpu", 2, 1, metrics["device_name"])
    records = calibration_records(hardware)
    assert len(records) == 2  # one per run
    record = records[-1]
    predicted = predict_run(experiment, model_config(experiment.model, run.path), hardware, metrics["grad_accum"])
    assert {f: record[f] for f in FEATURES} == {f: getattr(predicted, f) for f in FEATURES}
    timed = sorted(s["step_s"] for s in run.read_steps()[-metrics["timed_steps"] :])
    assert record["measured_s"] == timed[len(timed) // 2]


def test_a_calibration_that_cannot_be_written_leaves_the_run_ok(tmp_path):
    """The calibration cache is the run's last write: when it fails, the results stand and the log says why."""
    cache = cache_sharing_prepared_data(tmp_path / "cache")
    (cache / "calibration").write_text("not a directory")
    experiment = write_experiment(tmp_path, {"train": {"steps": 2, "timing_warmup_steps": 1}})
    run = train(experiment, tmp_path / "run", "--nproc", "1", env={"MESHPILOT_CACHE": str(cache)})
    assert run.read_metrics()["status"] == "ok"
    assert "calibration not recorded" in run.log.read_text()


def test_the_profiled_warm_up_step_says_where_its_time_went(runs):
    """train.profile_steps=1: rank 0's second step (the warm-up's last, untimed) in profile.json, by category and by
    operator: the matmuls, and under DDP the gradients' all-reduce."""
    profile = runs[2].read_profile()
    steps = runs[2].read_steps()
    assert (profile["device_type"], profile["steps"]) == ("cpu", [2])
    assert profile["wall_s"] == pytest.approx(steps[1]["step_s"])
    assert profile["categories"]["matmul"] > 0 and profile["categories"]["communication"] > 0
    assert profile["busy_s"] == pytest.approx(sum(profile["categories"].values()))
    seconds = [k["seconds"] for k in profile["top"]]
    assert seconds == sorted(seconds, reverse=True) and len(seconds) == 20
    assert {"aten::mm", "c10d::allreduce_"} <= {k["name"] for k in profile["top"]}
    assert runs[1].read_profile()["categories"]["communication"] == 0  # one process: nothing to reduce


@pytest.mark.parametrize(
    "name, label",
    [
        ("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "communication"),
        ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1", "matmul"),
        ("nvjet_hsh_256x128_64x4_2x1_v_bz_coopA_NNT", "matmul"),
        ("triton_tem_fused_flex_attention_0", "attention"),
        ("triton_tem_fused_mm_7", "matmul"),
        ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4>>", "attention"),
        ("Memcpy DtoD (Device -> Device)", "memory"),
        ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<FusedAdamMathFunctor>", "optimizer"),
        ("triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_3", "other"),  # a fused RMSNorm
        ("aten::addmm_", "matmul"),
    ],
)
def test_kernels_and_operators_fall_in_their_category(name, label):
    assert category(name) == label


@pytest.mark.parametrize(
    "first_step, untimed, wanted, earliest, window",
    [
        (0, 2, 1, 1, (1, 2)),  # the warm-up's second step: after the memory-measured first
        (0, 2, 1, 2, None),  # compiled: the second step compiles, nothing is left to profile
        (0, 3, 1, 2, (2, 3)),  # compiled with three warm-up steps: the third
        (0, 3, 2, 2, None),  # two wanted, one left after the compiling step
        (0, 4, 1, 3, (3, 4)),  # a compiled pipeline: its memory is measured on the second step
        (5, 3, 1, 7, (7, 8)),  # resumed at step 5
        (0, 3, 0, 1, None),  # not asked
        (0, 0, 1, 1, None),  # a run no longer than its warm-up: nothing is untimed
    ],
)
def test_the_profiled_steps_are_the_warm_ups_last_after_the_measured_and_compiling_ones(
    first_step, untimed, wanted, earliest, window
):
    assert profiled_steps(first_step, untimed, wanted, earliest) == window
