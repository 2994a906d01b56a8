"""bench.published_llmfoundry: MosaicML's published MPT runs on 80 GB H100s (llm-foundry's "H100 80GB BF16" table,
760m-7b at sequence 2048-32768, FSDP FULL_SHARD, micro-batches 1-24) parse verbatim, map to Llama-shaped models of
MPT's width, depth, heads and parameter count on FSDP2 layouts of the published GPU count, and come out beside the
planner's own predictions. What the comparison found is asserted here: all 26 rows are predicted to fit. 5 of them did
not while an eager Llama layer kept 22.7 d_model bf16 values per token (its RMSNorms' fp32 copies, SwiGLU's SiLU
output): with its norms and SiLU recomputed in backward (trainer.model.recompute) it keeps 16.0, MPT's
GELU/LayerNorm block's count. The median error of tokens/s per GPU is what bench/results/published_llmfoundry.json
records."""

from __future__ import annotations

import json

import pytest

from bench.published_llmfoundry import (
    MPT_BLOCK_SAVED,
    RESULTS,
    TABLE,
    compare,
    config_of,
    experiment_of,
    hardware_of,
    layout_of,
    markdown_table,
    model_parameters,
    mpt_parameters,
    parse_table,
    readme_mfu,
    summary,
    swiglu_width,
)
from trainer.layout import Layout

ROWS = parse_table()
# The rows predicted not to fit on 2026-11-26, before the eager layer recomputed its norms and SiLU in backward
ONCE_NOT_FITTING = {
    "7b s2048 8 GPUs mb6",
    "3b s8192 8 GPUs mb3",
    "1b s2048 64 GPUs mb20",
    "1b s2048 32 GPUs mb20",
    "1b s2048 16 GPUs mb20",
}


@pytest.fixture(scope="module")
def results() -> dict[str, dict]:
    """Every row compared once (planner only, no training): a few seconds."""
    return {row.label: compare(row) for row in ROWS}


def _row(model: str, seq_len: int, gpus: int):
    return next(r for r in ROWS if (r.model, r.seq_len, r.gpus) == (model, seq_len, gpus))


def test_every_row_in_scope_parses_with_the_published_figures():
    assert len(ROWS) == 26
    assert {r.model for r in ROWS} == {"760m", "1b", "3b", "7b"}
    assert all(2048 <= r.seq_len <= 32768 for r in ROWS)
    first = _row("7b", 32768, 8)  # | 7b | 32768 | 8 | ... | 2 | 2 | 32 | 0 | 26550 | 3318 | 1048576 | ... | True |
    assert (first.micro_batch, first.grad_accum, first.global_batch, first.global_batch_tokens) == (2, 2, 32, 1048576)
    assert (first.tokens_per_s, first.tokens_per_s_per_gpu, first.num_params) == (26550, 3318, 6784688128)
    assert first.activation_checkpointing and (first.mfu, first.hfu) == (pytest.approx(0.3094), pytest.approx(0.4125))
    largest_batch = _row("760m", 2048, 16)  # | 760m | 2048 | 16 | ... | 24 | 1 | 384 | 535 | 1096819 | 68551 | ...
    assert (largest_batch.micro_batch, largest_batch.grad_accum, largest_batch.global_batch) == (24, 1, 384)
    assert (largest_batch.tokens_per_s, largest_batch.tokens_per_s_per_gpu) == (1096819, 68551)
    assert not largest_batch.activation_checkpointing and largest_batch.num_params == 760470528
    for row in ROWS:
        assert (row.precision, row.mp_mode, row.sharding, row.cpu_offload) == ("amp_bf16", "DEFAULT", "FULL_SHARD",
                                                                               False), row.label  # fmt: skip
        assert row.global_batch == row.gpus * row.micro_batch * row.grad_accum, row.label
        assert row.global_batch_tokens == row.global_batch * row.seq_len, row.label
        assert row.tokens_per_s_per_gpu == pytest.approx(row.tokens_per_s / row.gpus, abs=1), row.label
        # the README's MFU formula at the H100's 989 TFLOP/s gives the published MFU (to its rounding)
        assert readme_mfu(row) == pytest.approx(row.mfu, abs=0.0006), row.label
        # MPT's own count (learned position embedding and biases included) is NumParams exactly: the shapes are right
        assert mpt_parameters(row) == row.num_params, row.label


def test_a_table_without_a_column_or_with_an_unknown_model_is_refused_not_guessed():
    with pytest.raises(ValueError, match="lacks the column 'NumParams'"):
        parse_table(TABLE.replace("| NumParams |", "| Params |"))
    with pytest.raises(ValueError, match="no MPT shape for the published model '13b'"):
        parse_table(TABLE.replace("|  760m | 2048 | 8 |", "|  13b | 2048 | 8 |"))
    with pytest.raises(ValueError, match="not True or False"):
        parse_table(TABLE.replace("| FULL_SHARD | True |", "| FULL_SHARD | yes |", 1))


@pytest.mark.parametrize("row", ROWS, ids=lambda row: row.label)
def test_each_row_maps_to_a_model_of_mpts_size_on_its_gpus(row):
    d = row.shape["d_model"]
    # the parameters both models have (all but MPT's learned position embedding, seq_len x d_model, and its biases)
    # within 0.1%; against NumParams within 7% (760m at 32k: its position embedding is 6% of it)
    assert model_parameters(row) == pytest.approx(row.num_params - row.seq_len * d, rel=0.001)
    assert model_parameters(row) == pytest.approx(row.num_params, rel=0.07)
    assert abs(3 * swiglu_width(d) - 8 * d) <= 1  # the SwiGLU MLP's 3 x d x i weights are the GELU MLP's 2 x 4d^2
    experiment = experiment_of(row)
    assert experiment.layout.resolve(row.gpus) == Layout(dp_replicate=1, dp_shard=row.gpus) == layout_of(row)
    hardware, device_mem = hardware_of(row)
    assert (hardware.devices_per_node, hardware.nodes) == (8, row.gpus // 8)
    assert hardware.device_name == "NVIDIA H100 80GB HBM3" and device_mem == 81079 * 2**20
    train = experiment.train
    assert (train.micro_batch, experiment.data.seq_len) == (row.micro_batch, row.seq_len)
    assert train.global_batch_tokens == row.global_batch_tokens
    assert train.global_batch_tokens // row.seq_len // row.gpus // row.micro_batch == row.grad_accum
    assert train.activation_checkpointing is row.activation_checkpointing  # full where the row says True
    assert (train.precision, train.fsdp_reduce_dtype, train.zero_stage, train.fsdp_grad_sync) == (
        "bf16", "fp32", 3, "micro_batch")  # fmt: skip
    assert (train.compile, train.loss, train.gns_every, experiment.data.packing) == (False, "chunked", 0, False)


def test_the_recorded_json_is_a_fresh_comparison(results):
    recorded = json.loads((RESULTS / "published_llmfoundry.json").read_text())
    fresh = json.loads(json.dumps(list(results.values())))
    assert recorded["rows"] == fresh
    assert recorded["summary"] == json.loads(json.dumps(summary(list(results.values()))))
    assert recorded["source"]["commit_read"] == "061f2c7ce64e655100286584a7629e2a09f827ba"


def test_what_the_comparison_found(results):
    """As found, 2026-11-27, with the cost models as they are (nothing tuned to this table): 26 of 26 fit, and the
    median |error| of tokens/s per GPU is 13.9%, the rows at sequence 2048-4096 within 15% (most predicted slow), the
    long-sequence ones predicted fast (below)."""
    found = summary(list(results.values()))
    assert (found["rows"], found["predicted_to_fit"]) == (26, 26)
    assert found["not_fitting"] == [] and found["not_fitting_by_largest_term"] == {}
    assert found["throughput"]["median_abs_error"] == pytest.approx(0.139, abs=0.005)


@pytest.mark.parametrize("row", ROWS, ids=lambda row: row.label)
def test_every_row_that_ran_is_predicted_to_fit(row, results):
    predicted = results[row.label]["predicted"]
    assert predicted["fits"], f"{row.label}: predicted {predicted['peak_gib']:.1f} GiB"


def test_the_rows_that_did_not_fit_keep_what_mpts_block_keeps(results):
    """The 5 rows that were predicted at 82.6-90.4 GiB run without checkpointing at 12k-41k tokens a rank: their
    eager Llama layer now keeps 16.0 d_model bf16 values per token and layer (two RMSNorms' inputs, q, k, v,
    attention's output, the projections' inputs, gate, up and their product), MPT's block's 16 within the log-sum-exp,
    so their predicted peak is what it is with MPT's count in its place, at 67.0-72.0 GiB."""
    for label in ONCE_NOT_FITTING:
        result = results[label]
        predicted, d = result["predicted"], result["predicted"]["layer_bytes_per_token"]
        width = {"760m": 1536, "1b": 2048, "3b": 2560, "7b": 4096}[result["model"]]
        assert predicted["largest_term"] == "activations_saved" and not result["activation_checkpointing"]
        assert 16.0 <= d / (2 * width) < 16.02 and MPT_BLOCK_SAVED == 16
        assert predicted["peak_gib"] == pytest.approx(result["with_mpt_block"]["peak_gib"], abs=0.1)
        assert 66.5 < predicted["peak_gib"] < 72.5
        # nothing else is large: the model's state is sharded over the GPUs, gradients reduced every micro-batch
        assert predicted["memory_gib"]["unreduced_gradients"] == 0
        assert predicted["memory_gib"]["parameters"] + predicted["memory_gib"]["optimizer"] < 10
    assert summary(list(results.values()))["fit_with_mpt_block"] == 0  # none left to fit


def test_the_long_sequences_are_predicted_fast_where_mpts_attention_ran_slow(results):
    """By meshpilot's own FLOP count (causal attention), MPT's runs fall from 32-45% MFU at sequence 2048 to 19-22% at
    32768, where the planner prices attention at the matmul rate (35-45% predicted at 32768): the 32k rows are
    predicted 68-122% fast. The runs' triton flash attention (attn_impl triton, 2023) against the planner's rate
    for meshpilot's SDPA kernel: a mismatch of the kernel, not fitted."""
    for model in ("760m", "1b", "3b", "7b"):
        fewest = min(r.gpus for r in ROWS if (r.model, r.seq_len) == (model, 2048))
        short, long = results[_row(model, 2048, fewest).label], results[_row(model, 32768, 8).label]
        assert short["published"]["mfu_meshpilot_count"] > 0.3 and long["published"]["mfu_meshpilot_count"] < 0.23
        assert long["predicted"]["mfu"] > 0.35 and long["error"]["tokens_per_s_per_gpu"] > 0.6
        assert abs(short["error"]["tokens_per_s_per_gpu"]) < 0.15
    short_rows = [r for r in results.values() if r["seq_len"] <= 4096]
    assert all(abs(r["error"]["tokens_per_s_per_gpu"]) < 0.15 for r in short_rows)


def test_the_table_puts_published_and_predicted_figures_side_by_side(results):
    result = results[_row("1b", 2048, 8).label]
    predicted = result["predicted"]
    assert result["error"]["tokens_per_s_per_gpu"] == pytest.approx(predicted["tokens_per_s_per_gpu"] / 45455 - 1)
    assert any(m.startswith("loss: MPT's fused_crossentropy") for m in result["mismatches"])
    assert any("2048 x 2048 = 4.2M parameters" in m for m in result["mismatches"])
    table = markdown_table([result, results["7b s2048 8 GPUs mb6"]])
    line = next(line for line in table.splitlines() if line.startswith("| 1b s2048 8 GPUs |"))
    assert "| 45,455 |" in line and f"| {predicted['tokens_per_s_per_gpu']:,.0f} |" in line and "| yes |" in line
    assert "| yes | activations_saved" in next(line for line in table.splitlines() if line.startswith("| 7b s2048"))


@pytest.mark.parametrize("model", ["1b", "7b"])
def test_the_prediction_is_the_planners_own_for_that_candidate(model, results):
    """The figures are those `meshpilot plan` gives the same layout, micro-batch and checkpointing: it keeps the 1b
    row (mb14) and the 7b row (mb6, no checkpointing) with the same peak."""
    from trainer.costs.planner import Pinned, plan

    row = _row(model, 2048, 8)
    predicted = results[row.label]["predicted"]
    hardware, device_mem = hardware_of(row)
    pinned = Pinned(row.micro_batch, row.activation_checkpointing)
    candidates = plan(experiment_of(row), config_of(row), hardware, device_mem, row.seq_len, pinned)
    same = next(c for c in candidates if c.layout == layout_of(row))
    assert same.memory["peak"] / 2**30 == pytest.approx(predicted["peak_gib"])
    assert predicted["fits"] and same.dropped is None
    assert same.estimate.tokens_per_s / row.gpus == pytest.approx(predicted["tokens_per_s_per_gpu"])
