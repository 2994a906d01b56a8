"""bench.published_multinode: NVIDIA's published Llama 3.1 8B and 70B runs on 8 to 2048 DGX H100s parse verbatim,
the bf16 ones and the FP8 ones at TP=1 map to meshpilot layouts of the published GPU count and come out beside the
planner's own predictions; the FP8 rows at TP=4 stay out of scope (meshpilot's fp8 does not run with tp). What the
comparison found is asserted here: mapped to ZeRO stage 1 with bf16 gradients (what the recipe's distributed
optimizer holds), every row is predicted to fit (the 70B one on 64 GPUs since the embedding and head are split by
vocabulary under tensor parallelism), and the median error is what bench/results/published_multinode.json records,
within issue 36's 15%, with the terms that cause what is left."""

from __future__ import annotations

import json

import pytest

from bench.published_multinode import (
    GOAL,
    NOTES,
    RESULTS,
    TABLES,
    compare,
    experiment_of,
    hardware_of,
    layout_of,
    markdown_table,
    parse_tables,
    summary,
)
from trainer.layout import Layout

ROWS = parse_tables()
IN_SCOPE = [row for row in ROWS if row.out_of_scope is None]


@pytest.fixture(scope="module")
def results() -> dict[str, dict]:
    """Every row compared once (planner only, no training): a few seconds."""
    return {row.label: compare(row) for row in ROWS}


def _row(model: str, precision: str, gpus: int):
    return next(r for r in ROWS if (r.model, r.precision, r.gpus) == (f"llama-3.1-{model}", precision, gpus))


def test_every_published_column_parses_with_its_caption_settings():
    assert len(ROWS) == 22 and len(IN_SCOPE) == 16
    first = _row("8b", "bf16", 8)
    assert (first.tp, first.pp, first.cp, first.vp, first.micro_batch, first.grad_accum) == (1, 1, 2, 1, 1, 32)
    assert (first.global_batch, first.seq_len, first.step_s, first.tokens_per_s) == (128, 8192, 12.91, 81222)
    assert first.dp == 4 and first.mfu == pytest.approx(0.5937)
    largest = _row("70b", "bf16", 2048)
    assert (largest.tp, largest.pp, largest.cp, largest.vp, largest.dp, largest.global_batch) == (4, 4, 2, 5, 64, 4096)
    assert largest.tokens_per_s_per_gpu == pytest.approx(2248957 / 2048)
    for row in ROWS:
        # the caption's GA is the global batch over the data-parallel ranks' micro-batches, at every GPU count
        assert row.global_batch == row.dp * row.micro_batch * row.grad_accum, row.label
        # the published tokens/s is seq x GBS / step time; 70B bf16 at 2048 GPUs is 0.4% off it as published
        assert row.tokens_per_s == pytest.approx(row.seq_len * row.global_batch / row.step_s, rel=0.005), row.label


def test_a_caption_without_a_degree_or_the_sequence_length_is_refused_not_guessed():
    with pytest.raises(ValueError, match="lacks a degree"):
        parse_tables(TABLES.replace("CP=2, MBS=1, GA=32", "MBS=1, GA=32"))
    with pytest.raises(ValueError, match="sequence length"):
        parse_tables(notes=NOTES.replace("sequence length", "seq"))


def test_fp8_rows_are_meshpilots_fp8_where_it_runs_and_out_of_scope_with_tp(results):
    fp8 = [row for row in ROWS if row.precision == "fp8"]
    with_tp = [row for row in fp8 if row.tp > 1]
    assert len(fp8) == 11 and len(with_tp) == 6 and all("TP=4" in row.out_of_scope for row in with_tp)
    assert all("predicted" not in results[row.label] for row in with_tp)
    for row in (row for row in fp8 if row.tp == 1):
        train = experiment_of(row).train
        assert (train.precision, train.float8_recipe, train.zero_stage) == ("fp8", "tensorwise", 1), row.label
        assert any(m.startswith("FP8: ") and "fp8_params" in m for m in results[row.label]["mismatches"])
        bf16 = results[row.label.replace("fp8", "bf16")]["predicted"]["tokens_per_s_per_gpu"]
        assert results[row.label]["predicted"]["tokens_per_s_per_gpu"] > bf16  # float8 matmuls priced faster


@pytest.mark.parametrize("row", IN_SCOPE, ids=lambda row: row.label)
def test_in_scope_rows_map_to_the_published_degrees_on_dgx_h100s(row):
    experiment = experiment_of(row)
    layout = experiment.layout.resolve(row.gpus)
    hardware, device_mem = hardware_of(row)
    assert layout == Layout(dp_replicate=1, dp_shard=row.dp, tp=row.tp, cp=row.cp, pp=row.pp) == layout_of(row)
    assert (hardware.devices_per_node, hardware.nodes, hardware.network) == (8, row.gpus // 8, "ib400")
    assert hardware.device_name == "NVIDIA H100 80GB HBM3" and device_mem == 81079 * 2**20
    train = experiment.train
    assert (train.micro_batch, train.global_batch_tokens, experiment.data.seq_len) == (1, row.global_batch * 8192, 8192)
    assert (train.precision, train.activation_checkpointing, train.compile) == (row.precision, False, True)
    assert (train.fsdp_grad_sync, train.gns_every, experiment.data.packing) == ("step", 0, False)
    assert train.zero_stage == 1  # the distributed optimizer: weights gathered, gradient reduced once per step
    assert train.fsdp_reduce_dtype == "bf16"  # the recipe's grad_sync_dtype: the gradient accumulated and reduced so
    if row.pp > 1:  # Megatron's virtual pipeline stages are meshpilot's interleaved stages per rank
        assert (train.pp_schedule, train.pp_stages_per_rank) == ("interleaved_1f1b", 5)
    hsdp = layout_of(row, "hsdp").resolve(row.gpus)  # the sensitivity mapping: FSDP inside a node only
    assert hsdp.world_size == row.gpus and hsdp.dp_shard * hsdp.tp * hsdp.cp <= 8


@pytest.mark.parametrize("row", IN_SCOPE, ids=lambda row: row.label)
def test_every_row_that_ran_is_predicted_to_fit(row, results):
    """The 70B row on 64 GPUs was predicted 79.7 GiB (0.5 over the planner's 79.18) while meshpilot's tensor-parallel
    plan kept the embedding and the output head whole on every TP rank; split by vocabulary, as Megatron's, 69.6."""
    predicted = results[row.label]["predicted"]
    assert predicted["fits"], f"{row.label}: predicted {predicted['peak_gib']:.1f} GiB"


def test_the_70b_rows_keep_sequence_parallel_activations_their_largest_term(results):
    """Sequence parallelism splits the norms' and residuals' activations over TP=4, and the projections keep their
    split input as Megatron's do (gathered again in backward): 34.9 GiB saved where they were 58 GiB whole on every
    TP rank (40.7 GiB while the projections kept the gathered input; 32.0 while the bf16 norms' fp32 copies of
    their input were counted as bf16)."""
    for row in (r for r in IN_SCOPE if r.model == "llama-3.1-70b"):
        memory = results[row.label]["predicted"]["memory_gib"]
        terms = {k: v for k, v in memory.items() if k != "peak"}
        assert max(terms, key=terms.get) == "activations_saved" and 34.7 < memory["activations_saved"] < 35.1, row.label
        assert memory["parameters"] + memory["optimizer"] < 16, row.label
        # the rank's stages' bf16 weights gathered (8.46 GiB: 9.9 while the embedding and head were whole on every TP
        # rank), and their whole gradient in bf16 (the recipe's grad_sync_dtype) less the fp32 shard it replaces
        gathered = memory["gathered_parameters"]
        assert 8.4 < gathered < 8.5 and gathered / 2 <= memory["unreduced_gradients"] < gathered, row.label


def test_the_recorded_median_error_is_the_comparisons(results):
    recorded = json.loads((RESULTS / "published_multinode.json").read_text())
    computed = summary(list(results.values()))
    assert recorded["summary"]["in_scope_rows"] == computed["in_scope_rows"] == 11
    assert recorded["summary"]["predicted_to_fit"] == computed["predicted_to_fit"] == 11
    for key in ("throughput", "hsdp_mapping"):
        figure = computed[key]["median_abs_error"]
        assert recorded["summary"][key]["median_abs_error"] == pytest.approx(figure, abs=1e-6)
    # as found, 2026-11-26, mapped to ZeRO stage 1 with bf16 gradient reductions, after the stated matmul rate was
    # set from meshpilot's own compiled 1B step on an H200 (0.6 of the bf16 peak, trainer.hardware.GPU_EFFICIENCY)
    # and the loss's memory traffic counted by path (trainer.costs.throughput.LOSS_BYTES): 11.4%. Before that,
    # at half the peak: 22.6% (23.5% before the embedding, head and
    # loss were split by vocabulary: the 70B rows' head computes a quarter of the logits; 24.2% with fp32
    # reductions; 22.9% before the projections kept their split input and priced the all-gathers again in backward;
    # 49.8% mapped to FSDP2's stage 3 with one reduction per step; 50.5% before sequence parallelism and the
    # interleaved pipeline's bubble)
    assert computed["throughput"]["median_abs_error"] == pytest.approx(0.114, abs=0.005)
    # the 8B FP8 rows, as meshpilot's torchao float8 (tensorwise): all fit, predicted 28% slow (Transformer Engine's
    # FP8 gains +33% over its bf16 in the table, FLOAT8_GAIN prices +10% here: measured on a 1B model's matmuls;
    # 34% at half the peak)
    fp8 = computed["fp8"]
    assert recorded["summary"]["fp8"]["throughput"]["median_abs_error"] == pytest.approx(
        fp8["throughput"]["median_abs_error"], abs=1e-6
    )
    assert (fp8["in_scope_rows"], fp8["predicted_to_fit"]) == (5, 5)
    assert fp8["throughput"]["median_abs_error"] == pytest.approx(0.283, abs=0.005)


def test_the_median_throughput_error_is_within_the_goal(results):
    assert summary(list(results.values()))["throughput"]["median_abs_error"] <= GOAL


def test_where_the_throughput_error_comes_from(results):
    """Every bf16 row is predicted slow, by 10-12%. Memory-bound work: on one node (no traffic between nodes),
    meshpilot's matmuls fit inside the published step and its memory-bound work (transformers' layer fused by
    inductor, the chunked loss) does not (Transformer Engine fuses more). Communication: FSDP over nodes adds
    seconds the hsdp mapping does not."""
    assert all(-0.13 < r["error"]["tokens_per_s_per_gpu"] < -0.09 for r in results.values() if r.get("error")
               and r["precision"] == "bf16")  # fmt: skip
    one_node = results[_row("8b", "bf16", 8).label]
    parts, published_s = one_node["predicted"]["compute_parts_s"], one_node["published"]["step_s"]
    assert parts["matmul"] < published_s < parts["matmul"] + parts["memory"]
    assert one_node["predicted"]["comm_s"] < 0.05 * one_node["predicted"]["step_s"]
    two_nodes = results[_row("8b", "bf16", 16).label]
    assert two_nodes["predicted"]["comm_s"] > 3 * one_node["predicted"]["comm_s"]  # bf16 reductions: 3.8x
    hsdp = two_nodes["predicted_hsdp"]
    assert hsdp["tokens_per_s_per_gpu"] == pytest.approx(one_node["predicted"]["tokens_per_s_per_gpu"], rel=0.01)


def test_the_table_puts_published_and_predicted_figures_side_by_side(results):
    row = _row("8b", "bf16", 8)
    result = results[row.label]
    predicted = result["predicted"]
    assert result["error"]["tokens_per_s_per_gpu"] == pytest.approx(predicted["tokens_per_s_per_gpu"] / 10152.75 - 1)
    assert any(
        m.startswith("data parallelism: the recipe's optimizer") and "DP=4 x CP=2" in m for m in result["mismatches"]
    )
    seventy = results[_row("70b", "bf16", 64).label]
    assert any(m.startswith("sequence parallelism") for m in seventy["mismatches"])
    assert any(m.startswith("virtual pipeline: Megatron's VP=5") for m in seventy["mismatches"])
    table = markdown_table([result, seventy, results[_row("70b", "fp8", 64).label]])
    line = next(line for line in table.splitlines() if line.startswith("| 8b bf16 8 GPUs |"))
    assert "| 10,153 |" in line and f"| {predicted['tokens_per_s_per_gpu']:,.0f} |" in line
    assert ("| yes |" if predicted["fits"] else "| no |") in line
    assert "| yes |" in next(line for line in table.splitlines() if line.startswith("| 70b bf16 64 GPUs |"))
    assert "Out of scope:" in table and "70b fp8 64 GPUs: FP8 with TP=4" in table


@pytest.mark.parametrize("gpus,model", [(16, "8b"), (64, "70b")])
def test_the_prediction_is_the_planners_own_for_that_candidate(gpus, model, results):
    """The figures are those `meshpilot plan` gives the same layout, micro-batch and checkpointing: it ranks the
    8B row by them and drops the 70B row for the same peak."""
    from bench.published import preset_config
    from trainer.costs.planner import Pinned, plan

    row = _row(model, "bf16", gpus)
    predicted = results[row.label]["predicted"]
    hardware, device_mem = hardware_of(row)
    candidates = plan(experiment_of(row), preset_config(row.model), hardware, device_mem, row.seq_len, Pinned(1, False))
    same = next(c for c in candidates if c.layout == layout_of(row))
    assert same.memory["peak"] / 2**30 == pytest.approx(predicted["peak_gib"])
    if predicted["fits"]:
        assert same.dropped is None
        assert same.estimate.tokens_per_s / row.gpus == pytest.approx(predicted["tokens_per_s_per_gpu"])
    else:
        assert "more than 79.18 GiB" in same.dropped
