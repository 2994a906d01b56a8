"""The planner and the throughput model: valid layouts only, memory limits respected, calibration learns."""

from __future__ import annotations

import copy
import dataclasses
import gc
import itertools
import json

import pytest
import yaml
from support import TINY_MODEL, meshpilot, write_experiment
from transformers import AutoConfig

from trainer.costs.calibration import Calibration, fit
from trainer.costs.throughput import StepShape, dimension_links, estimate_step
from trainer.hardware import Hardware, intra_node_link_from_topology
from trainer.layout import Layout, LayoutError

BIG_MODEL = {
    "model_type": "llama",
    "vocab_size": 32000,
    "hidden_size": 4096,
    "intermediate_size": 11008,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "max_position_embeddings": 4096,
}


def plan_json(tmp_path, model: dict, *args: str) -> list[dict]:
    experiment = write_experiment(
        tmp_path,
        {"model": {"config": model}, "data": {"seq_len": 2048}, "train": {"global_batch_tokens": 2048 * 64}},
    )
    done = meshpilot("plan", str(experiment), "--json", *args)
    assert done.returncode in (0, 1), done.stderr[-2000:]
    return json.loads(done.stdout)


def test_plan_respects_memory_and_validity(tmp_path):
    candidates = plan_json(tmp_path, BIG_MODEL, "--devices", "8", "--device-mem", "40GiB")
    feasible = [c for c in candidates if c["dropped"] is None]
    dropped = [c for c in candidates if c["dropped"] is not None]
    assert feasible and dropped
    for c in candidates:
        degrees = c["layout"]
        assert degrees["pp"] * degrees["dp_replicate"] * degrees["dp_shard"] * degrees["cp"] * degrees["tp"] == 8
        assert BIG_MODEL["num_key_value_heads"] % degrees["tp"] == 0
        rows_per_rank = 64 // (degrees["dp_replicate"] * degrees["dp_shard"])
        assert c["micro_batch"] * c["grad_accum"] == rows_per_rank
    assert all(c["predicted_peak_bytes"] <= 40 * 1024**3 for c in feasible)
    for c in dropped:
        if "GiB" in c["dropped"]:
            assert c["predicted_peak_bytes"] > 40 * 1024**3
            assert c["dropped"].startswith("needs ") and c["dropped"].endswith("more than 40.00 GiB")
    speeds = [c["predicted_tokens_per_s"] for c in feasible]
    assert all(a >= b * 0.99 for a, b in itertools.pairwise(speeds))  # sorted, ties within 1%
    # 7B in fp32 master weights with AdamW cannot be replicated on 40 GiB devices: 16 bytes per parameter.
    replicated = [c for c in candidates if c["layout"]["dp_replicate"] == 8]
    assert replicated and all(c["dropped"] for c in replicated)


def test_plan_table_and_exit_code(tmp_path):
    experiment = write_experiment(
        tmp_path, {"model": {"config": BIG_MODEL}, "data": {"seq_len": 2048}, "train": {"global_batch_tokens": 8192}}
    )
    # A plan skips the interpreter's teardown (agent.cli.QUICK_EXIT): with stdout buffered, as in a pipe, the table
    # must still arrive whole, and the exit code with it.
    done = meshpilot("plan", str(experiment), "--devices", "4", "--device-mem", "1GiB", env={"PYTHONUNBUFFERED": ""})
    assert done.returncode == 1  # nothing fits
    assert "0 feasible" in done.stdout and "does not fit in device memory" in done.stdout
    done = meshpilot("plan", str(experiment), "--devices", "4", "--device-mem", "lots")
    assert done.returncode == 2 and done.stderr.startswith("meshpilot: error: memory size 'lots'")


def test_topology_parsing():
    nvlink = "\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV18\t0-63\nGPU1\tNV18\t X \t0-63\n"
    pcie = "\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tPHB\t0-63\nGPU1\tPHB\t X \t0-63\n"
    assert intra_node_link_from_topology(nvlink) == "nvlink"
    assert intra_node_link_from_topology(pcie) == "pcie"


def test_inner_dimensions_stay_inside_a_node():
    hardware = Hardware("cuda", "NVIDIA H100 80GB HBM3", devices_per_node=8, nodes=4)
    links = dimension_links(Layout(dp_replicate=4, dp_shard=2, tp=4), hardware)
    assert links["tp"] == "nvlink4" and links["dp_shard"] == "nvlink4" and links["dp_replicate"] == "ib400"


@pytest.mark.parametrize(
    ("gpu", "within"),
    [("h100", "nvlink4"), ("h200", "nvlink4"), ("a100 40gb", "nvlink3"), ("a100", "nvlink3"),
     ("h100-pcie", "pcie5"), ("l40s", "pcie4"), ("a10", "pcie4"), ("4090", "pcie4")],
)  # fmt: skip
def test_each_gpu_preset_talks_over_its_own_generation_of_link(gpu, within, tmp_path, monkeypatch):
    """A GPU without NVLink is planned over PCIe, each at its data sheet's bandwidth (trainer.hardware.DEVICES)."""
    from trainer.costs.throughput import hardware_figures
    from trainer.hardware import INTERCONNECTS, planned_hardware

    monkeypatch.setenv("MESHPILOT_CACHE", str(tmp_path))  # no probe here: the data sheets
    hardware, _ = planned_hardware("cuda", 8, 1, gpu)
    assert dimension_links(Layout(dp_shard=8), hardware)["dp_shard"] == within
    seconds = hardware_figures(hardware).transfer_s(within, "all_gather", 1e9, 0)
    assert seconds == pytest.approx(1e9 / INTERCONNECTS[within].bandwidth)


def test_nodes_joined_by_hdr_infiniband_train_slower_than_by_ndr(tmp_path, monkeypatch):
    from trainer.hardware import planned_hardware

    monkeypatch.setenv("MESHPILOT_CACHE", str(tmp_path))  # no probe here: the data sheets
    config = AutoConfig.for_model(**BIG_MODEL)
    layout = Layout(dp_replicate=2, dp_shard=8)  # HSDP: replicas in different nodes
    steps = {}
    for network in ("ib400", "ib200"):
        hardware, _ = planned_hardware("cuda", 8, 2, "h100", network=network)
        # Short rows: too little compute to hide the gradients' all-reduce between the replicas.
        sizes = {"matmul_params": 6_000_000_000, "parameter_bytes": 24_000_000_000}
        steps[network] = estimate_step(config, layout, hardware, StepShape(1, 256, 1), **sizes)
    sent = steps["ib400"].comm_bytes["dp_replicate"]
    assert sent > 0 and steps["ib200"].comm_bytes["dp_replicate"] == sent
    assert steps["ib200"].comm_s - steps["ib400"].comm_s == pytest.approx(sent / 25e9 - sent / 50e9)


def test_an_unknown_network_is_refused_in_one_line():
    done = meshpilot("plan", "--model", "llama-3.1-8b", "--devices", "8", "--nodes", "2", "--network", "ib100")
    assert done.returncode == 2 and done.stderr.strip() == (
        "meshpilot: error: --network must be one of ib200, ib400, not 'ib100'"
    )


def test_activation_checkpointing_costs_a_forward_pass():
    config = AutoConfig.for_model(**TINY_MODEL)
    hardware = Hardware("cuda", "NVIDIA H100 80GB HBM3", devices_per_node=1)
    args, sizes = (config, Layout(dp_replicate=1), hardware), {"matmul_params": 10_000, "parameter_bytes": 40_000}
    plain = estimate_step(*args, StepShape(2, 64, 4), **sizes)
    recomputing = estimate_step(*args, StepShape(2, 64, 4, checkpointing=True), **sizes)
    assert recomputing.matmul_s == pytest.approx(plain.matmul_s * 4 / 3)
    assert recomputing.memory_s > plain.memory_s and recomputing.launch_s > plain.launch_s


def test_interleaving_divides_the_pipeline_bubble_by_the_stages_per_rank():
    """1F1B idles (pp - 1) micro-batch slots; interleaved 1F1B's slots are one of a rank's v stages each, so its bubble
    is (pp - 1) / (v x micro-batches) (Narayanan et al. 2021, section 2.2.2)."""
    config = AutoConfig.for_model(**{**TINY_MODEL, "num_hidden_layers": 8})
    hardware = Hardware("cuda", "NVIDIA H100 80GB HBM3", devices_per_node=4)
    args, sizes = (config, Layout(dp_replicate=1, pp=4), hardware), {"matmul_params": 10_000, "parameter_bytes": 40_000}
    one, two = (estimate_step(*args, StepShape(2, 64, 8, pp_stages_per_rank=v), **sizes) for v in (1, 2))
    assert one.compute_s / (1 + 3 / 8) == pytest.approx(two.compute_s / (1 + 3 / 16))  # the same work, 8 micro-batches


@pytest.mark.parametrize("device_type", ["cuda", "cpu"])
def test_selective_checkpointing_costs_less_than_a_forward_pass(device_type):
    """Selective recomputes every elementwise op (as much memory traffic as full) but only the k, o and up
    matmuls, and attention not at all: predicted work none < selective < full. (Its policy's Python dispatch,
    tests/test_dispatch_cost.py, can make a model this small slower than full, as it is on this machine.)"""
    from trainer.costs.flops import step_flops
    from trainer.costs.throughput import selective_recompute_flops
    from trainer.model.parameters import count_parameters

    config = AutoConfig.for_model(**{**TINY_MODEL, "hidden_size": 256, "intermediate_size": 688})
    name = "NVIDIA H100 80GB HBM3" if device_type == "cuda" else "x86_64"
    hardware = Hardware(device_type, name, devices_per_node=1)
    matmul = count_parameters(config)["matmul"]
    args, sizes = (config, Layout(dp_replicate=1), hardware), {"matmul_params": matmul}
    sizes["parameter_bytes"] = 4 * count_parameters(config)["total"]
    steps = {mode: estimate_step(*args, StepShape(2, 256, 4, mode), **sizes) for mode in ("none", "selective", "full")}
    assert steps["none"].matmul_s < steps["selective"].matmul_s < steps["full"].matmul_s
    none, selective = steps["none"], steps["selective"]
    assert selective.memory_s == steps["full"].memory_s > none.memory_s  # no dense mask: the same elementwise work
    assert none.launch_s < selective.launch_s < steps["full"].launch_s
    # The matmul time it adds is exactly the recomputed projections' FLOPs at the rate the rest runs at.
    tokens, pairs = 2 * 4 * 256, 2 * 4 * 256 * 257 // 2  # micro-batch 2 x accumulation 4 rows of 256
    flops = step_flops(matmul, config.hidden_size, config.num_hidden_layers, tokens, pairs)
    flops += 2 * tokens * config.hidden_size * config.vocab_size  # the chunked loss's second head forward
    recomputed = sum(selective_recompute_flops(config, tokens))
    assert (selective.matmul_s - none.matmul_s) / none.matmul_s == pytest.approx(recomputed / flops)
    assert 0 < recomputed < flops / 3  # less than the forward pass full recomputes


def test_calibration_learns_the_fixed_cost_of_collectives_and_micro_batches():
    """Gloo on CPU spends milliseconds per collective, more than the stated latency: the fit finds it."""
    runs = [(1.0, 0.1, 0, 1), (1.0, 0.2, 40, 8), (2.0, 0.1, 16, 2), (0.5, 0.4, 85, 4), (1.5, 0.0, 0, 16)]
    records = [
        {
            "compute_s": c,
            "comm_s": m,
            "collectives": n,
            "micro_batches": k,
            "measured_s": 1.2 * c + 3 * m + 4e-3 * n + 2e-3 * k,
        }
        for c, m, n, k in runs
    ]
    calibration = fit(records)
    assert (calibration.compute_scale, calibration.comm_scale) == (pytest.approx(1.2), pytest.approx(3.0))
    assert (calibration.collective_s, calibration.micro_batch_s) == (pytest.approx(4e-3), pytest.approx(2e-3))
    # A factor the runs say is negative (here: micro-batches cost nothing) is left out, not fitted below zero.
    for record in records:
        record["measured_s"] -= 2e-3 * record["micro_batches"] + 1e-4 * record["micro_batches"] ** 2
    assert fit(records).micro_batch_s == 0.0


def test_calibration_recovers_the_machine_factors(tmp_path, monkeypatch):
    records = [{"compute_s": c, "comm_s": m, "measured_s": 3.0 * c + 0.5 * m} for c, m in [(1, 0), (1, 2), (2, 1)]]
    calibration = fit(records)
    assert calibration.compute_scale == pytest.approx(3.0) and calibration.comm_scale == pytest.approx(0.5)

    monkeypatch.setenv("MESHPILOT_CACHE", str(tmp_path))
    config = AutoConfig.for_model(**TINY_MODEL)
    hardware = Hardware("cpu", "x86_64", devices_per_node=2, intra_node_link="cpu")
    args = (config, Layout(dp_replicate=2), hardware, StepShape(2, 64, 4))
    sizes = {"matmul_params": 10_000, "parameter_bytes": 40_000}
    before = estimate_step(*args, **sizes, calibration=Calibration.load(hardware))
    measured = before.step_s * 7  # this machine is 7x slower than the stated assumptions
    Calibration.record(hardware, before, measured)
    after = estimate_step(*args, **sizes, calibration=Calibration.load(hardware))
    assert after.step_s == pytest.approx(measured)


def test_fsdp_gathers_half_the_bytes_under_bf16():
    """FSDP2's mixed precision all-gathers bf16 parameters (forward and backward, each micro-batch; the root once) and
    still reduce-scatters fp32 gradients, after each of the 3 micro-batches or (train.fsdp_grad_sync: step) once."""
    from trainer.costs.throughput import communication_bytes

    config = AutoConfig.for_model(**TINY_MODEL)
    layout = Layout(dp_replicate=1, dp_shard=4)
    fp32 = communication_bytes(config, layout, 4_000_000, 2, 64, 3)["dp_shard"]
    bf16 = communication_bytes(config, layout, 4_000_000, 2, 64, 3, precision="bf16")["dp_shard"]
    per_step = communication_bytes(config, layout, 4_000_000, 2, 64, 3, fsdp_grad_sync="step")["dp_shard"]
    ring, layers = 3 / 4 * 4_000_000, config.num_hidden_layers
    root = 3 / 4 * 4 * (2 * 512 * 32 + 32)  # the root unit, gathered once per micro-batch (FSDP2 keeps it)
    assert fp32 == pytest.approx(((2 * 3 + 3) * ring - 3 * root, (2 * 3 + 3) * (layers + 1) - 3))
    assert bf16 == pytest.approx(((3 + 3) * ring - 3 * 0.5 * root, fp32[1]))
    assert per_step == pytest.approx(((2 * 3 + 1) * ring - 3 * root, (2 * 3 + 1) * (layers + 1) - 3))


@pytest.mark.parametrize(("device_type", "link"), [("cuda", "nvlink"), ("cuda", "pcie"), ("cpu", "cpu")])
def test_a_run_is_recorded_with_the_figures_the_planner_ranked_it_by(tmp_path, monkeypatch, device_type, link):
    """One prediction: for every layout the planner offers (pipelines included), the features a finished run's
    calibration record keeps (trainer.costs.throughput.predict_run, which approvals price with too) are the planner's.
    On CPU every part of the step adds up, so a term one side leaves out (a dense mask's traffic) shows."""
    import dataclasses

    from trainer.config import load_experiment
    from trainer.costs.calibration import FEATURES
    from trainer.costs.planner import plan
    from trainer.costs.throughput import predict_run

    monkeypatch.setenv("MESHPILOT_CACHE", str(tmp_path))  # no calibration: both sides uncalibrated
    path = write_experiment(tmp_path, {"model": {"config": {**TINY_MODEL, "num_hidden_layers": 4}}})
    experiment = load_experiment(path)  # precision auto: bf16 on CUDA, resolved the same on both sides
    config = AutoConfig.for_model(**{**TINY_MODEL, "num_hidden_layers": 4})
    name = "NVIDIA H100 80GB HBM3" if device_type == "cuda" else "x86_64"
    hardware = Hardware(device_type, name, devices_per_node=8, intra_node_link=link)
    candidates = [c for c in plan(experiment, config, hardware, 80 * 1024**3, 64) if c.dropped is None]
    assert {c.layout.pp for c in candidates} >= {1, 2} and len({c.layout for c in candidates}) > 10
    for candidate in candidates:
        train = dataclasses.replace(
            experiment.train,
            micro_batch=candidate.micro_batch,
            activation_checkpointing=candidate.activation_checkpointing,
        )
        launched = dataclasses.replace(experiment, layout=candidate.layout, train=train)
        recorded = predict_run(launched, config, hardware, candidate.grad_accum)
        for feature in FEATURES:
            assert getattr(recorded, feature) == getattr(candidate.estimate, feature), (candidate.layout, feature)
        assert recorded.comm_bytes == candidate.estimate.comm_bytes


def tiny_plan(tmp_path, train: dict, devices: int, overrides: tuple[str, ...] = ()) -> list:
    """The planner's candidates for the tiny model (seq_len 64) on `devices` H100s, planned as `meshpilot plan`
    plans an experiment file: what the file or the overrides set is pinned."""
    from trainer.config import load_experiment
    from trainer.costs.planner import pinned_by, plan

    path = write_experiment(tmp_path, {"train": train})
    experiment = load_experiment(path, list(overrides))
    hardware = Hardware("cuda", "NVIDIA H100 80GB HBM3", devices_per_node=devices)
    config = AutoConfig.for_model(**TINY_MODEL)
    return plan(experiment, config, hardware, 80 * 1024**3, 64, pinned_by(experiment, path, overrides))


def test_every_micro_batch_that_divides_a_ranks_share_is_planned():
    """Not only powers of two: a rank holding 12 rows can run 3, 6 or 12 of them at a time too."""
    from trainer.config import experiment_from_dict
    from trainer.costs.planner import plan

    experiment = experiment_from_dict({"train": {"global_batch_tokens": 24 * 64}})  # 24 rows of 64 tokens
    hardware = Hardware("cuda", "NVIDIA H100 80GB HBM3", devices_per_node=2)
    candidates = plan(experiment, AutoConfig.for_model(**TINY_MODEL), hardware, 80 * 1024**3, 64)
    two_ranks = [c for c in candidates if c.layout.dp_degree == 2]  # 12 rows each
    assert two_ranks and sorted({c.micro_batch for c in two_ranks}) == [1, 2, 3, 4, 6, 12]
    assert all(c.micro_batch * c.grad_accum == 12 for c in two_ranks)
    one_rank = [c for c in candidates if c.layout.dp_degree == 1]  # tp=2 or pp=2: all 24 rows on each rank
    assert one_rank and sorted({c.micro_batch for c in one_rank}) == [1, 2, 3, 4, 6, 8, 12, 24]


def test_a_micro_batch_the_experiment_fixes_is_the_only_one_planned(tmp_path):
    """12 rows on 4 devices: 12 per rank (tp, pp, cp), 6 (dp 2) or 3 (dp 4); a micro-batch of 6 fits the first two."""
    from trainer.costs.planner import format_table

    candidates = tiny_plan(tmp_path, {"global_batch_tokens": 12 * 64, "micro_batch": 6}, devices=4)
    assert {c.micro_batch for c in candidates} == {6}
    assert {c.layout.dp_degree for c in candidates if c.dropped is None} == {1, 2}
    reason = "train.micro_batch 6 does not divide the 3 rows per data-parallel rank"
    four_ranks = [c for c in candidates if c.layout.dp_degree == 4]  # dp_replicate, dp_shard, both: x 3 AC modes
    assert len(four_ranks) == 9 and all(c.dropped == reason for c in four_ranks)
    assert all(c.as_dict()["predicted_peak_bytes"] is None for c in four_ranks)  # it cannot run: nothing predicted
    assert f"dropped 9: {reason} (e.g. dp_replicate=4, micro-batch 6)" in format_table(candidates)


def test_activation_checkpointing_the_experiment_fixes_is_the_only_mode_planned(tmp_path):
    # The old bools and the mode names alike; stored as train.activation_checkpointing stores them.
    for written, mode in ((True, True), (False, False), ("selective", "selective"), ("full", True), ("none", False)):
        candidates = tiny_plan(tmp_path, {"activation_checkpointing": written}, devices=2)
        assert candidates and {c.activation_checkpointing for c in candidates} == {mode}
    # Set by an override instead of the file: pinned just the same.
    candidates = tiny_plan(tmp_path, {}, devices=2, overrides=("train.activation_checkpointing=selective",))
    assert {c.activation_checkpointing for c in candidates} == {"selective"}
    # Nothing fixed: all three modes, each a row of its own, named in the table's AC column.
    from trainer.costs.planner import format_table

    candidates = tiny_plan(tmp_path, {}, devices=2)
    assert {c.activation_checkpointing for c in candidates} == {False, "selective", True}
    assert {line.split()[4] for line in format_table(candidates, limit=1000).splitlines()[2:-1]} == {"off", "sel", "on"}


def test_only_what_the_user_wrote_is_pinned(tmp_path):
    """The loaded experiment fills in defaults; the file's own keys and the overrides say what the user fixed,
    even a value equal to the default."""
    from trainer.config import TrainSpec, load_experiment
    from trainer.costs.planner import Pinned, pinned_by

    path = tmp_path / "meshpilot.yaml"
    path.write_text(yaml.safe_dump({"model": {"config": TINY_MODEL}, "train": {"steps": 3}}))
    assert pinned_by(load_experiment(path), path) == Pinned()
    overrides = [f"train.micro_batch={TrainSpec.micro_batch}"]
    assert pinned_by(load_experiment(path, overrides), path, overrides) == Pinned(micro_batch=TrainSpec.micro_batch)
    path.write_text(yaml.safe_dump({"train": {"micro_batch": 8, "activation_checkpointing": False}}))
    assert pinned_by(load_experiment(path), path) == Pinned(8, False)


def test_a_preset_replaces_the_experiments_model_as_it_is(tmp_path):
    """`meshpilot plan EXPERIMENT --model PRESET` (and the agent's requests): the override reads back as the preset's
    config, its floats included (JSON's 1e-05 read back as a string, and every Llama preset was refused)."""
    from trainer.config import load_experiment
    from trainer.model.presets import MODELS, model_override, model_preset

    path = write_experiment(tmp_path)
    for name in MODELS:
        assert load_experiment(path, model_override(name)).model.config == model_preset(name)


def test_meshpilot_plan_honours_what_the_experiment_fixes(tmp_path, capsys):
    from agent.cli import main

    path = write_experiment(tmp_path, {"train": {"global_batch_tokens": 12 * 64}})  # the tiny file: micro_batch 2
    args = ["plan", str(path), "--devices", "4", "--gpu", "h100", "--json"]
    assert main([*args, "--set", "train.activation_checkpointing=true"]) == 0
    assert gc.isenabled()  # the command pauses the cyclic collector while it plans, and only then
    candidates = json.loads(capsys.readouterr().out)
    assert {(c["micro_batch"], c["activation_checkpointing"]) for c in candidates} == {(2, True)}
    dropped = {c["dropped"] for c in candidates if c["layout"]["dp_replicate"] * c["layout"]["dp_shard"] == 4}
    assert dropped == {"train.micro_batch 2 does not divide the 3 rows per data-parallel rank"}


def reference_peak(config, layout: Layout, memory_plan, shapes) -> dict:
    """The memory of a candidate the long way, as the planner predicted it before it shared work between
    candidates: each rank's shards from the parameter shapes afresh, the real config (no ConfigSnapshot), no memo."""
    from trainer.costs.memory_model import predict_rank

    ranks = [0] if layout.pp == 1 else [0, layout.world_size - layout.world_size // layout.pp]
    return max((predict_rank(config, layout, memory_plan, r, shapes=shapes) for r in ranks), key=lambda m: m["peak"])


@pytest.mark.parametrize(
    ("model", "train", "data", "device_type"),
    [
        # 6 layers: pipelines of 4 and 8 stages split them unevenly.
        ({"num_hidden_layers": 6}, {}, {}, "cuda"),
        ({"num_hidden_layers": 5}, {"pp_schedule": "interleaved_1f1b", "pp_stages_per_rank": 2}, {}, "cuda"),
        ({"num_hidden_layers": 4}, {"pp_schedule": "gpipe", "precision": "fp32"}, {"packing": False}, "cuda"),
        ({"num_hidden_layers": 4, "tie_word_embeddings": True}, {"optimizer": "galore_adamw"}, {}, "cpu"),
    ],
)
def test_the_planner_shares_work_without_changing_a_figure(tmp_path, monkeypatch, model, train, data, device_type):
    """The planner works each rank's shards out once for all alike layouts, keeps activations by what they depend
    on, reads the config's attributes once, reads the hardware's figures once and pauses the cyclic collector:
    every candidate, every memory prediction it made (those with cp = 1 behind the cp notes too), every reason to
    drop, every estimate and so the ranking are what the long way gives. The device memory is set to the middle of
    the predicted peaks, so that about half the candidates drop and some fit only because of cp (rows of 2048
    tokens: activations outweigh the CUDA runtime's memory)."""
    import trainer.costs.planner
    from trainer.config import checkpointing_mode, load_experiment, resolve_precision
    from trainer.costs.planner import GiB, _rank_key, micro_batch_choices, plan, valid_layouts
    from trainer.costs.throughput import model_bytes
    from trainer.model.attention import takes_dense_mask
    from trainer.model.parameters import describe_parameters, head_dim
    from trainer.parallel.pipeline import check_pipeline

    monkeypatch.setenv("MESHPILOT_CACHE", str(tmp_path))
    model = {**TINY_MODEL, "max_position_embeddings": 2048, **model}
    changes = {"model": {"config": model}, "train": {"global_batch_tokens": 2048 * 64, **train}}
    experiment = load_experiment(write_experiment(tmp_path, {**changes, "data": {"seq_len": 2048, **data}}))
    spec, packing = experiment.train, experiment.data.packing
    config = AutoConfig.for_model(**model)
    name = "NVIDIA H100 80GB HBM3" if device_type == "cuda" else "x86_64"
    link = "nvlink" if device_type == "cuda" else "cpu"
    hardware = Hardware(device_type, name, devices_per_node=8, nodes=2, intra_node_link=link)
    peaks = sorted(c.memory["peak"] for c in plan(experiment, config, hardware, 2**60, 2048))
    device_mem = peaks[len(peaks) // 2]

    predicted = []  # every (layout, memory plan, prediction) the planner made
    real_peak_memory = trainer.costs.planner._peak_memory

    def recording(config, layout, memory_plan, ranks, memo=None):
        prediction = real_peak_memory(config, layout, memory_plan, ranks, memo)
        predicted.append((layout, memory_plan, prediction))
        return prediction

    monkeypatch.setattr(trainer.costs.planner, "_peak_memory", recording)
    assert gc.isenabled()
    candidates = plan(experiment, config, hardware, device_mem, 2048)
    assert gc.isenabled()  # the collector runs again after a plan

    # Every layout x micro-batch x checkpointing mode, once.
    expected = {
        (layout, micro_batch, checkpointing)
        for layout in valid_layouts(16, config, 2048)
        if 64 % layout.dp_degree == 0
        for micro_batch in micro_batch_choices(64 // layout.dp_degree)
        for checkpointing in (False, "selective", True)
    }
    planned = [(c.layout, c.micro_batch, c.activation_checkpointing) for c in candidates]
    assert len(planned) == len(set(planned)) and set(planned) == expected
    feasible = [c for c in candidates if c.dropped is None]
    assert 0 < len(feasible) < len(candidates) and any(c.fits_only_with_cp for c in feasible)

    shapes, counts = describe_parameters(config)
    for layout, memory_plan, prediction in predicted:
        assert prediction == reference_peak(config, layout, memory_plan, shapes), (layout, memory_plan)
    by_candidate = {(layout, p.micro_batch, p.checkpointing): m for layout, p, m in predicted}
    precision = resolve_precision(spec.precision, hardware.device_type)
    for candidate in candidates:
        key = (candidate.layout, candidate.micro_batch, checkpointing_mode(candidate.activation_checkpointing))
        assert candidate.memory is by_candidate[key]
        fits = candidate.memory["peak"] <= device_mem
        try:
            check_pipeline(candidate.layout.pp, config, spec.pp_schedule, spec.pp_stages_per_rank,
                           candidate.grad_accum)  # fmt: skip
        except LayoutError:
            fits = False
        assert (candidate.dropped is None) == fits, candidate.layout
        if candidate.dropped is not None:
            assert candidate.estimate is None and not candidate.fits_only_with_cp
            continue
        dense = takes_dense_mask(spec.attention, hardware.device_type, candidate.layout, head_dim(config), packing)
        shape = StepShape(candidate.micro_batch, 2048, candidate.grad_accum, candidate.activation_checkpointing,
                          precision, dense, gns_every=spec.gns_every,
                          pp_stages_per_rank=spec.pp_stages_per_rank)  # fmt: skip
        assert candidate.estimate == estimate_step(
            config, candidate.layout, hardware, shape, matmul_params=counts["matmul"],
            parameter_bytes=model_bytes(counts), calibration=Calibration.load(hardware),
        )  # fmt: skip
        alone = by_candidate.get((dataclasses.replace(candidate.layout, cp=1), *key[1:]))
        if candidate.layout.cp > 1:  # the same candidate with cp = 1 (on fewer devices), predicted the long way too
            note = f"fits only because of cp (cp=1 needs {alone['peak'] / GiB:.1f} GiB)"
            assert candidate.fits_only_with_cp == (alone["peak"] > device_mem)
            assert candidate.notes == ([note] if candidate.fits_only_with_cp else [])
    assert feasible == sorted(feasible, key=_rank_key) and candidates[: len(feasible)] == feasible


def test_a_plan_leaves_a_paused_collector_paused():
    from trainer.config import experiment_from_dict
    from trainer.costs.planner import plan

    experiment = experiment_from_dict({"train": {"global_batch_tokens": 4 * 64}})
    hardware = Hardware("cuda", "NVIDIA H100 80GB HBM3", devices_per_node=2)
    gc.disable()
    try:
        assert plan(experiment, AutoConfig.for_model(**TINY_MODEL), hardware, 80 * 1024**3, 64)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_config_snapshot_reads_what_the_config_says():
    """The planner's ConfigSnapshot: the config's own values (aliases resolved by the config), read-only, and an
    attribute the config lacks is missing from the snapshot too."""
    from trainer.costs.memory_model import ConfigSnapshot

    config = AutoConfig.for_model("gpt2", n_embd=64, n_layer=3, n_head=4)
    snapshot = ConfigSnapshot(config)
    assert (snapshot.hidden_size, snapshot.num_hidden_layers, snapshot.num_attention_heads) == (64, 3, 4)
    assert snapshot.n_embd == config.n_embd and snapshot.vocab_size == config.vocab_size
    assert getattr(snapshot, "num_key_value_heads", None) is getattr(config, "num_key_value_heads", None)
    with pytest.raises(AttributeError):
        snapshot.no_such_attribute  # noqa: B018
    with pytest.raises(AttributeError):
        snapshot.hidden_size = 128
    assert config.hidden_size == 64
    assert copy.copy(snapshot).hidden_size == 64
