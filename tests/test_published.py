"""bench.published: torchtitan's published Llama 3.1 rows parse, the in-scope ones map to meshpilot layouts and
come out beside meshpilot's own predictions (the planner's figures) under the published checkpointing mode, and
Float8 rows stay out of scope."""

from __future__ import annotations

import dataclasses

import pytest

from bench.published import (
    TABLES,
    compare,
    experiment_of,
    hardware_of,
    markdown_table,
    parse_tables,
    preset_config,
    summary,
)
from trainer.costs.planner import Pinned, plan
from trainer.hardware import gpu_preset, peak_bf16_flops, peak_memory_bandwidth
from trainer.layout import Layout

GiB = 1024**3
ROWS = parse_tables()
IN_SCOPE = [row for row in ROWS if row.out_of_scope is None]


def _row(table: int, name: str):
    return next(row for row in ROWS if row.table == table and row.name == name)


def test_every_published_row_parses_with_its_caption_settings():
    assert len(ROWS) == 18
    first = _row(1, "FSDP")
    assert (first.model, first.gpus, first.layout, first.seq_len, first.seq_len_stated) == (
        "llama-3.1-8b",
        8,
        Layout(1, 8),
        8192,
        False,
    )
    assert (first.local_batch, first.global_batch, first.checkpointing) == (2, 16, "selective")
    assert (first.tps_per_gpu, first.memory_gib, first.compile, first.float8) == (5762, 82.4, False, False)
    longest = _row(6, "FSDP 1, CP 8")
    assert longest.layout == Layout(1, 1, tp=8, cp=8, pp=8)
    assert (longest.seq_len, longest.tps_per_gpu, longest.memory_gib, longest.pp_schedule) == (262144, 16, 84.9, "1f1b")
    assert longest.async_tp and longest.float8 and longest.checkpointing == "full"
    assert _row(5, "Interleaved 1F1B").pp_schedule == "interleaved_1f1b"
    assert _row(4, "2D").layout == Layout(1, 32, tp=8)
    for row in ROWS:
        assert row.layout.world_size == row.gpus, row.label
        if row.global_batch is not None:  # the stated global batch is the local batch over the data-parallel ranks
            assert row.global_batch == row.local_batch * row.layout.dp_degree, row.label


def test_a_caption_without_a_setting_is_refused_not_guessed():
    with pytest.raises(ValueError, match="Local batch size"):
        parse_tables(TABLES.replace("Local batch size 2, global", "global"))


def test_in_scope_rows_map_to_valid_layouts_of_the_published_gpu_count():
    assert [(row.table, row.name) for row in IN_SCOPE] == [
        (1, "FSDP"), (1, "FSDP + torch.compile"), (3, "FSDP"), (3, "FSDP + torch.compile")
    ]  # fmt: skip
    for row in IN_SCOPE:
        experiment = experiment_of(row)
        layout = experiment.layout.resolve(row.gpus)  # raises where the degrees do not make the world
        hardware, _ = hardware_of(row)
        assert layout == row.layout and layout.world_size == row.gpus
        assert hardware.devices_per_node * hardware.nodes == row.gpus
        assert experiment.train.micro_batch == row.local_batch
        assert experiment.train.global_batch_tokens == row.global_batch * row.seq_len
        # torchtitan's per-op selective checkpointing is meshpilot's selective mode, stored as the string
        assert (experiment.train.precision, experiment.train.activation_checkpointing) == ("bf16", "selective")
    full = experiment_of(dataclasses.replace(IN_SCOPE[0], checkpointing="full"))
    assert full.train.activation_checkpointing is True


def test_the_hardware_is_the_sources_h100s_not_the_sxm():
    """96GB HBM2e at the stated 2.4 TB/s, with a bf16 peak inside the stated range (between the NVL's and the SXM's)."""
    hardware, device_mem = hardware_of(IN_SCOPE[0])
    assert hardware.device_name == gpu_preset("h100-96gb").name == "NVIDIA H100 96GB HBM2e"
    assert 0 <= 96 * 10**9 - device_mem < 2**20  # the nominal 96 GB, in whole MiB
    assert peak_memory_bandwidth(hardware.device_name) == 2.4e12
    nvl, sxm = peak_bf16_flops(gpu_preset("h100-nvl").name), peak_bf16_flops(gpu_preset("h100-sxm").name)
    assert peak_bf16_flops(hardware.device_name) == (nvl + sxm) / 2


def test_float8_rows_are_out_of_scope_and_not_predicted():
    float8 = [row for row in ROWS if row.float8]
    assert len(float8) == 14 and all("Float8" in row.out_of_scope for row in float8)
    assert all(not row.float8 for row in IN_SCOPE)
    result = compare(float8[0])
    assert result["out_of_scope"] and "predicted" not in result


def test_the_table_puts_published_and_predicted_figures_side_by_side():
    row = _row(1, "FSDP")
    result = compare(row)
    predicted = result["predicted"]
    assert predicted["tokens_per_s_per_gpu"] > 0 and 0 < predicted["reserved_gib"] < predicted["peak_gib"]
    assert result["error"]["tokens_per_s_per_gpu"] == pytest.approx(predicted["tokens_per_s_per_gpu"] / 5762 - 1)
    assert result["error"]["reserved_gib"] == pytest.approx(predicted["reserved_gib"] / 82.4 - 1)
    assert predicted["activation_checkpointing"] == "selective"
    assert not any("checkpointing" in m for m in result["mismatches"])  # the published mode is modelled as it ran
    assert any("sequence length not stated" in m for m in result["mismatches"])
    table = markdown_table([result, compare(_row(1, "FSDP + torch.compile + Float8"))])
    line = next(line for line in table.splitlines() if line.startswith("| T1 8b 8 GPUs: FSDP |"))
    assert "| selective |" in line and "| 5,762 |" in line and f"| {predicted['tokens_per_s_per_gpu']:,.0f} |" in line
    assert "| 82.4 |" in line and f"| {predicted['reserved_gib']:.1f} |" in line
    assert "Out of scope:" in table and "Float8" in table
    assert summary([result])["throughput"]["median_abs_error"] == pytest.approx(
        abs(result["error"]["tokens_per_s_per_gpu"])
    )


@pytest.mark.parametrize("name", ["FSDP", "FSDP + torch.compile"])
def test_the_prediction_is_the_planners_own_for_that_candidate(name):
    """The figures are what `meshpilot plan` ranks the same layout, micro-batch, checkpointing and compile
    setting by."""
    row = _row(1, name)
    predicted = compare(row)["predicted"]
    experiment = experiment_of(row)
    hardware, device_mem = hardware_of(row)
    candidates = plan(
        experiment, preset_config(row.model), hardware, device_mem, row.seq_len, Pinned(row.local_batch, "selective")
    )
    same = next(c for c in candidates if c.layout == row.layout and c.dropped is None)
    assert same.activation_checkpointing == "selective"
    assert same.estimate.tokens_per_s / row.gpus == pytest.approx(predicted["tokens_per_s_per_gpu"])
    assert same.memory["peak"] / GiB == pytest.approx(predicted["peak_gib"])


def test_the_published_checkpointing_mode_reaches_the_prediction():
    """The same row under full checkpointing recomputes more and keeps less: slower and smaller than selective."""
    row = _row(1, "FSDP")
    selective = compare(row)["predicted"]
    full = compare(dataclasses.replace(row, checkpointing="full"))["predicted"]
    assert full["activation_checkpointing"] == "full"
    assert full["tokens_per_s_per_gpu"] < selective["tokens_per_s_per_gpu"]
    assert full["memory_gib"]["activations_saved"] < selective["memory_gib"]["activations_saved"]
    assert full["reserved_gib"] < selective["reserved_gib"]


@pytest.mark.parametrize("table", [1, 3])
def test_compiled_rows_are_predicted_compiled(table):
    """torch.compile reaches the prediction: the same matmuls, less memory-bound time (the layers' fused kernels),
    so more tokens/s than the eager row of the same table, and no mismatch note saying it is left out."""
    eager, compiled = compare(_row(table, "FSDP")), compare(_row(table, "FSDP + torch.compile"))
    fast, slow = compiled["predicted"], eager["predicted"]
    assert fast["compiled"] and not slow["compiled"]
    assert fast["compute_parts_s"]["matmul"] == slow["compute_parts_s"]["matmul"]
    assert fast["compute_parts_s"]["memory"] < slow["compute_parts_s"]["memory"]
    assert fast["tokens_per_s_per_gpu"] > slow["tokens_per_s_per_gpu"]
    assert any(m.startswith("torch.compile: predicted as") for m in compiled["mismatches"])
    assert not any("torch.compile" in m for m in eager["mismatches"])
