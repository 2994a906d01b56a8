"""The benchmark scripts against what users would otherwise do: each runs end to end in its --quick
configuration and writes well-formed results; the pieces that make the comparison fair do what they claim.

No timing is asserted (the machine is shared); counts, losses and gradient differences are.
"""

from __future__ import annotations

import json
import math
import os
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from support import REPO, TINY_MODEL
from transformers import AutoConfig

from trainer.data.packing import block_causal_mask
from trainer.data.rows import TokenizedCorpus
from trainer.model.build import build_model

if str(REPO) not in sys.path:  # bench/ is a directory of scripts, not an installed package
    sys.path.insert(0, str(REPO))

from bench import grad_accum
from bench.trainer_vs_hf import QUICK, RowFlattening, main, packed_examples, padded_examples


def synthetic_corpus(lengths: list[int], seed: int = 0) -> TokenizedCorpus:
    """Documents of the given lengths with random token ids (1..99), each ending in token 0."""
    rng = np.random.default_rng(seed)
    docs = [np.append(rng.integers(1, 100, n - 1), 0) for n in lengths]
    return TokenizedCorpus(np.concatenate(docs), np.concatenate([[0], np.cumsum(lengths)]))


COMPILED_VARIANTS = ("meshpilot_compiled", "hf_flattened_compiled")


def test_trainer_vs_hf_quick_writes_a_comparable_result(tmp_path):
    """Two processes: meshpilot's DDP against the Trainer under torchrun, with the same global batch, both in bf16
    mixed precision (`--precision bf16`: meshpilot's train.precision, the Trainer's bf16 flag; the compiled test
    below runs one process in fp32, the default, and the Trainer on padded rows)."""
    out = tmp_path / "trainer_vs_hf_bf16.json"
    args = ("--quick", "--repeats", "1", "--threads", "1", "--processes", "2", "--precision", "bf16")
    args += ("--variants", "meshpilot", "hf_flattened", "--out", str(out))
    assert main(list(args)) == 0  # in this process, as `python -m bench.trainer_vs_hf`: one torch import fewer
    result = json.loads(out.read_text())
    assert result["benchmark"] == "trainer_vs_hf_bf16" and result["machine"]["cores"] >= 1
    assert "noisy" in result["note"]
    setup = result["setup"]
    assert setup["processes"] == [2] and set(result["by_processes"]) == {"2"}
    assert setup["precision"] == "bf16"
    timed_steps = QUICK.steps - QUICK.timing_warmup_steps
    full_rows_tokens = timed_steps * QUICK.rows_per_step * QUICK.seq_len  # the global batch, over all ranks
    for processes, found in result["by_processes"].items():
        variants = found["variants"]
        assert set(variants) == {"meshpilot", "hf_flattened"}
        for name, entry in variants.items():
            assert entry["precision"] == "bf16", (processes, name)  # as each run recorded it
            assert entry["timed_steps"] == timed_steps, (processes, name)
            assert len(entry["train_losses"]) == QUICK.steps, (processes, name)
            assert entry["tokens_per_s"] == pytest.approx(entry["timed_tokens"] / entry["timed_seconds"]), name
            assert entry["tokens_per_s_median_step"] > 0 and len(entry["step_seconds"]) == QUICK.steps, name
            # Every model is judged on the same held-out tokens; untrained-ish tiny models sit near ln(vocab).
            assert 0 < entry["heldout_loss"] < 1.5 * math.log(setup["model"]["vocab_size"]), name
        # Packed rows are all real tokens, counted the same way by both trainers (over all ranks).
        assert variants["meshpilot"]["timed_tokens"] == full_rows_tokens
        assert variants["hf_flattened"]["timed_tokens"] == full_rows_tokens
        assert variants["meshpilot"]["speed_vs_meshpilot"] == 1.0
        assert set(found["targets"]) == {"meshpilot / hf_flattened"}
        assert_verdicts(found)
    assert setup["tokenizer_size"] <= setup["model"]["vocab_size"] and setup["heldout_documents"] > 0


def assert_verdicts(found: dict) -> None:
    """Each target is met when meshpilot is fast enough by both measures and its held-out loss no worse."""
    variants = found["variants"]
    for pair, target in found["targets"].items():
        mine, other = pair.split(" / ")
        assert target["meshpilot_speedup"] == variants[mine]["tokens_per_s"] / variants[other]["tokens_per_s"]
        no_worse = variants[mine]["heldout_loss"] <= variants[other]["heldout_loss"]
        fast_enough = min(target["meshpilot_speedup"], target["median_step_speedup"]) >= target["target"]
        assert target["met"] == (fast_enough and no_worse), pair


def test_trainer_vs_hf_quick_compiles_both_trainers(tmp_path):
    """`train.compile` and the Trainer's torch_compile: the same losses as eager, compile time reported apart; and
    the Trainer on padded rows (one document per row), which count fewer real tokens than packed ones."""
    out = tmp_path / "trainer_vs_hf.json"
    args = ("--quick", "--repeats", "1", "--threads", "1", "--processes", "1", "--out", str(out))
    assert main([*args, "--variants", "meshpilot", "hf_padded", *COMPILED_VARIANTS]) == 0  # in this process
    found = json.loads(out.read_text())["by_processes"]["1"]
    variants = found["variants"]
    full_rows_tokens = (QUICK.steps - QUICK.timing_warmup_steps) * QUICK.rows_per_step * QUICK.seq_len
    assert variants["meshpilot"]["timed_tokens"] == full_rows_tokens
    assert 0 < variants["hf_padded"]["timed_tokens"] < full_rows_tokens
    assert variants["hf_padded"]["compile_s_repeats"] == [None]
    assert {entry["precision"] for entry in variants.values()} == {"fp32"}
    eager = variants["meshpilot"]["train_losses"]
    assert variants["meshpilot_compiled"]["train_losses"] == pytest.approx(eager, rel=1e-4)
    assert variants["meshpilot"]["compile_s_repeats"] == [None]
    for name in COMPILED_VARIANTS:
        assert variants[name]["compile_s_repeats"][0] > 0, name
        assert variants[name]["timed_steps"] == QUICK.steps - QUICK.timing_warmup_steps, name
    assert set(found["targets"]) == {
        "meshpilot / hf_padded",
        "meshpilot_compiled / hf_padded",
        "meshpilot / hf_flattened_compiled",
        "meshpilot_compiled / hf_flattened_compiled",
    }
    assert_verdicts(found)


def test_profile_trainers_quick_times_both_trainers_phase_by_phase(tmp_path):
    """Both trainers are timed phase by phase and profiled on the same model: the same matrix products per step."""
    from bench import profile_trainers

    out = tmp_path / "profile_trainers.json"
    threads = torch.get_num_threads()
    try:  # in this process, as `python -m bench.profile_trainers` (its main and nothing else): one torch import fewer
        assert profile_trainers.main(["--quick", "--repeats", "1", "--threads", "1", "--out", str(out)]) == 0
    finally:
        torch.set_num_threads(threads)  # the script times both trainers on the threads it was given
    assert not torch.distributed.is_initialized()  # its process group of one is gone with the run
    result = json.loads(out.read_text())
    assert result["benchmark"] == "profile_trainers" and result["machine"]["cores"] >= 1
    variants = result["variants"]
    assert set(variants) == {"meshpilot", "hf_flattened"}
    for name, entry in variants.items():
        assert entry["steps"] == QUICK.steps - QUICK.timing_warmup_steps, name
        for clock in ("wall", "cpu"):
            phases = entry[f"phase_ms_median_{clock}"]
            assert phases["forward"] > 0 and phases["backward"] > 0 and phases["optimizer"] > 0, (name, clock)
        assert entry["own_process"]["step_s_median_wall"] > 0 and len(entry["load_average_before_repeats"]) == 1
    matmuls = [{o["name"]: o for o in entry["operators"]}["aten::mm"]["calls_per_step"] for entry in variants.values()]
    assert matmuls[0] == matmuls[1] > 0


def test_grad_accum_quick_shows_naive_accumulation_is_off(tmp_path):
    out = tmp_path / "grad_accum.json"
    assert grad_accum.main(["--quick", "--out", str(out)]) == 0  # in this process: one torch import fewer
    result = json.loads(out.read_text())
    assert result["benchmark"] == "grad_accum" and set(result["results"]) == {"packed", "padded"}
    for packing, found in result["results"].items():
        rows = found["by_micro_batch"]
        assert [r["micro_batch"] for r in rows] == list(result["setup"]["micro_batches"])
        for row in rows:
            assert row["meshpilot"]["grad_rel_l2_diff"] < 1e-5, (packing, row)  # exact up to fp32 rounding
            assert abs(row["meshpilot"]["loss_diff"]) < 1e-5, (packing, row)
        assert rows[-1]["naive"]["grad_rel_l2_diff"] == 0.0  # one micro-batch: the full batch itself
    # One document per row: rows hold very different numbers of targets, and the mean of means is far off.
    padded_rows = result["results"]["padded"]["by_micro_batch"]
    assert padded_rows[0]["naive"]["grad_rel_l2_diff"] > 1e-2
    assert abs(padded_rows[0]["naive"]["loss_diff"]) > 1e-3


def test_setup_time_quick_times_every_rank_both_ways(tmp_path, capsys):
    from bench import setup_time

    out = tmp_path / "setup_time.json"
    assert setup_time.main(["--quick", "--processes", "1", "2", "--repeats", "1", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["benchmark"] == "setup_time" and result["machine"]["cores"] >= 1
    cores = len(os.sched_getaffinity(0))
    # A one-thread row only where a rank's share of the cores is more than one thread.
    expected = [(n, way) for n in (1, 2) for way in ("before", "after", "after_one_thread")
                if way != "after_one_thread" or cores // n > 1]  # fmt: skip
    assert [(r["processes"], r["way"]) for r in result["rows"]] == expected
    for row in result["rows"]:
        assert row["threads_per_rank"] == (max(1, cores // row["processes"]) if row["way"] == "after" else 1)
        assert len(row["rank_seconds"]) == row["processes"] and row["slowest_rank_s"] == max(row["rank_seconds"]) > 0
    assert setup_time.main(["--quick", "--processes", "0", "--out", str(tmp_path / "never.json")]) == 2
    assert capsys.readouterr().err.strip().splitlines() == ["setup_time: error: --processes 0: each must be at least 1"]
    assert not (tmp_path / "never.json").exists()


def test_bad_arguments_fail_in_one_line_before_any_work(tmp_path, capsys):
    out = tmp_path / "never.json"
    assert main(["--quick", "--steps", "1", "--out", str(out)]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "trainer_vs_hf: error: --steps 1 leaves nothing to time after 2 warm-up steps"
    ]
    assert main(["--quick", "--variants", "hf_padded", "--out", str(out)]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "trainer_vs_hf: error: --variants must include meshpilot: every speed is given relative to it"
    ]
    assert not out.exists()


def test_packed_rows_cover_the_shuffled_stream_exactly():
    corpus = synthetic_corpus([5, 40, 3, 17, 9, 30])
    rows = packed_examples(corpus, seq_len=16, seed=0)
    assert all(sum(len(p) for p in row["pieces"]) == 16 for row in rows)
    stream = np.concatenate([p for row in rows for p in row["pieces"]])
    order = np.random.default_rng(0).permutation(6)
    expected = np.concatenate([corpus.tokens[corpus.offsets[d] : corpus.offsets[d + 1]] for d in order])
    assert len(rows) == len(expected) // 16
    np.testing.assert_array_equal(stream, expected[: len(stream)])


def test_padded_examples_are_documents_truncated_to_seq_len():
    corpus = synthetic_corpus([5, 40, 3])
    examples = padded_examples(corpus, seq_len=16)
    assert [len(e["input_ids"]) for e in examples] == [5, 16, 3]
    assert examples[1]["input_ids"] == corpus.tokens[5:21].tolist()


def test_flattened_rows_isolate_documents_like_meshpilots_mask():
    """The Trainer variant is only a fair comparison if transformers keeps packed documents apart, as it does
    from position ids alone in training (no attention mask, use_cache off as Trainer sets it)."""
    corpus = synthetic_corpus([5, 40, 3, 17, 9, 30, 12, 8])
    batch = RowFlattening()(packed_examples(corpus, seq_len=32, seed=1)[:3])
    assert batch["input_ids"].shape == (3, 32)
    segments = (batch["position_ids"] == 0).cumsum(dim=1) - 1
    assert segments.max() > 0  # some row holds two or more documents
    labelled = batch["labels"][:, 1:] != -100
    assert (segments[:, 1:] == segments[:, :-1])[labelled].all()  # no label crosses a document boundary

    config = AutoConfig.for_model(**{**TINY_MODEL, "vocab_size": 128})
    model = build_model(config, None, seed=0).train()
    model.config.use_cache = False  # what Trainer does to every model it trains
    hf = model(**batch)
    isolated = model(
        input_ids=batch["input_ids"],
        position_ids=batch["position_ids"],
        attention_mask=block_causal_mask(segments),
        use_cache=False,
    ).logits
    torch.testing.assert_close(hf.logits, isolated, rtol=1e-5, atol=1e-5)
    expected = F.cross_entropy(isolated[:, :-1].flatten(0, 1), batch["labels"][:, 1:].flatten(), ignore_index=-100)
    assert hf.loss.item() == pytest.approx(expected.item(), rel=1e-5)


def test_planner_measures_a_run_by_its_median_step_as_calibration_does():
    from bench.planner import median_step_tokens_per_s

    steps = [{"step_s": 0.5, "tokens": 2048}, {"step_s": 4.0, "tokens": 2048}, {"step_s": 0.4, "tokens": 2048}]
    assert median_step_tokens_per_s(steps) == 2048 / 0.5  # the stalled 4 s step does not move it
    steps.append({"step_s": 0.6, "tokens": 2048})
    assert median_step_tokens_per_s(steps) == 2048 / 0.6  # an even count takes the upper median


def test_planner_rescore_predicts_stored_runs_again_without_training(tmp_path, monkeypatch):
    """`bench.planner --rescore` on a few of the stored runs: their predictions come from the current model (not the
    stale ones in the file), the metrics from those predictions, and nothing is trained or probed."""
    from bench import planner
    from bench.runs import write_experiment
    from trainer.costs.probe import probe_path
    from trainer.results.contracts import write_json

    real = json.loads((REPO / "bench/results/planner.json").read_text())
    kept = [c for c in real["candidates"] if c["measured_tokens_per_s"] is not None][::7]  # 10 of the 66 runs
    stale = [{**c, "predicted_tokens_per_s": float(i + 1)} for i, c in enumerate(kept)]  # the file's order reversed
    fixture = {**real, "candidates": stale, "uncalibrated": {"spearman": -1.0, "quality_ratio": 0.0}}
    path = tmp_path / "planner.json"
    path.write_text(json.dumps(fixture))

    def forbidden(*args, **kwargs):
        raise AssertionError("rescoring must neither train nor probe")

    monkeypatch.setattr(planner, "train", forbidden)
    monkeypatch.setattr(planner, "run_probe", forbidden)  # the fixture keeps its probe
    monkeypatch.setenv("MESHPILOT_CACHE", str(tmp_path / "cache"))  # restored after the script replaces it
    monkeypatch.setattr(sys, "argv", ["planner", "--rescore", "--result", str(path)])
    planner.main()
    result = json.loads(path.read_text())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["planner.json"]  # no run directory, no cache left behind

    # What the current model predicts for these candidates, planned here from the same probe.
    monkeypatch.setenv("MESHPILOT_CACHE", str(tmp_path / "check"))
    write_json(probe_path(planner.HARDWARE), real["probe"])
    candidates, _ = planner.timed_plan(write_experiment(tmp_path / "check", 128, 16, 6))
    expected = {planner._key(planner.candidate_key(c)): c.estimate.tokens_per_s for c in candidates if c.estimate}
    runs = [c for c in result["candidates"] if c["measured_tokens_per_s"] is not None]
    # Sorted by repr: checkpointing modes mix False, True and "selective", which have no order together.
    assert sorted(map(planner._key, runs), key=repr) == sorted(map(planner._key, kept), key=repr)
    measured = np.array([c["measured_tokens_per_s"] for c in runs])
    predicted = np.array([c["predicted_tokens_per_s"] for c in runs])
    assert predicted.tolist() == [expected[planner._key(c)] for c in runs]
    assert sorted(measured.tolist()) == sorted(c["measured_tokens_per_s"] for c in kept)  # measurements kept as is

    def ranks(values: np.ndarray) -> np.ndarray:
        return np.argsort(np.argsort(values)).astype(float)

    uncalibrated = result["uncalibrated"]
    assert uncalibrated["spearman"] == pytest.approx(np.corrcoef(ranks(predicted), ranks(measured))[0, 1])
    assert uncalibrated["spearman"] > 0.5  # the stale predictions rank the measured best last
    assert uncalibrated["quality_ratio"] == pytest.approx(measured[predicted.argmax()] / measured.max())
    assert result["calibration"]["runs"] == len(kept) and "calibrated_leave_one_out" in result
    assert result["measured_at"] == real["measured_at"]
    assert "current throughput model" in result["rescored"]["predictions"]
