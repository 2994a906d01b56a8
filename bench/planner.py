"""The planner's choice against exhaustive measurement of every feasible layout on this machine.

Plans for 2 CPU processes, then runs every feasible candidate the trainer runs (layout x micro-batch x
activation checkpointing) for a few steps and compares: the measured tokens/s of the planner's top pick over
the measured best (quality ratio), how well predicted and measured orders agree (Spearman), and the planner's
time against the time of measuring everything (search-time ratio). It plans three times: from the stated
assumptions (a fresh cache), from this machine's probe (`meshpilot probe`, measured first) with no run yet, and
after the measured runs have calibrated the throughput model; and it predicts each run from a calibration fitted
on the others (leave-one-out), the fair test of calibration.

`--rescore` trains nothing: it keeps the stored runs' measured tokens/s and predicts them again, the same four
ways, from the throughput model as it is now (after a change to the model), with the probe stored in the result
(measured first where the result has none, as a full run does).

    python -m bench.planner                # writes bench/results/planner.json
    python -m bench.planner --rescore      # predicts bench/results/planner.json's runs again
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

from bench.machine import RESULTS, write_result
from bench.runs import train, write_experiment
from trainer.config import load_experiment, parse_bytes
from trainer.costs.calibration import FEATURES, Calibration, calibration_records, fit
from trainer.costs.planner import plan
from trainer.costs.probe import probe_path, probe_settings, read_probe, run_probe
from trainer.hardware import Hardware
from trainer.host.environment import device_name
from trainer.model.build import model_config
from trainer.results.contracts import write_json

DEVICES = 2
HARDWARE = Hardware("cpu", device_name("cpu"), DEVICES, 1, "cpu")
# The ZeRO stage of every plan and run here: 3, what every stored run ran. Under the default (auto) the planner
# would price each FSDP2 candidate at the stage it chooses while a run without that choice trains at 3; the stage
# choice is measured apart (tests/test_zero_stages.py, the published tables).
ZERO_STAGE = 3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--rows", type=int, default=16, help="rows per optimizer step")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--rescore", action="store_true", help="predict the stored runs again; train nothing")
    parser.add_argument("--result", type=Path, default=RESULTS / "planner.json", help="what --rescore rewrites")
    args = parser.parse_args()
    if args.rescore:
        rescore(args.result)
        return
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["MESHPILOT_CACHE"] = str(Path(tmp) / "cache")  # uncalibrated: no earlier runs on record
        experiment = write_experiment(Path(tmp), args.seq_len, args.rows, args.steps)
        stated, _ = timed_plan(experiment)
        run_probe(probe_settings("cpu", DEVICES))  # what a user's first plan on this machine does (ensure_probe)
        before, plan_s = timed_plan(experiment)
        runnable = [c for c in before if c.dropped is None and c.runnable]
        measured, measure_s = [], 0.0
        for i, candidate in enumerate(runnable):
            started = time.perf_counter()
            tokens_per_s = measure(experiment, Path(tmp) / f"run{i}", candidate)
            measure_s += time.perf_counter() - started
            measured.append({**candidate_key(candidate), "measured_tokens_per_s": tokens_per_s})
            print(measured[-1], flush=True)
        after, _ = timed_plan(experiment)  # the runs above calibrated the model for this machine
        records = calibration_records(HARDWARE)  # one per measured run, in the same order
        probe = read_probe(HARDWARE)
    result = {"seq_len": args.seq_len, "rows_per_step": args.rows, "steps": args.steps, "devices": DEVICES}
    result |= {"measured_at": time.strftime("%Y-%m-%d"), "measured_as": MEASURED_AS}
    result |= {"plan_s": plan_s, "measure_all_s": measure_s}
    result |= {"search_time_ratio": plan_s / measure_s, **scores(stated, before, after, records, measured)}
    write_result("planner", {**result, "probe": probe})
    print(result["stated"], result["uncalibrated"], result["calibrated"])


def scores(stated, before, after, records: list[dict], measured: list[dict]) -> dict:
    """Each candidate's prediction beside its measurement, and how each of the four ways of predicting did."""
    result = {"candidates": predicted_and_measured(before, measured)}
    for name, ranking in (("stated", stated), ("uncalibrated", before), ("calibrated", after)):
        result[name] = judge(ranking, measured)
    result["calibrated_leave_one_out"] = leave_one_out(records, measured)
    result["calibration"] = asdict(fit(records))
    return result


def rescore(path: Path) -> None:
    """Rewrite `path` with the stored runs' measurements predicted by the current throughput model: plans as a full
    run does (stated, probed, calibrated by the runs, leave-one-out), with no training."""
    stored = json.loads(path.read_text())
    measured = [
        {**_entry(c), "measured_tokens_per_s": c["measured_tokens_per_s"]}
        for c in stored["candidates"]
        if c["measured_tokens_per_s"] is not None
    ]
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["MESHPILOT_CACHE"] = str(Path(tmp) / "cache")
        experiment = write_experiment(Path(tmp), stored["seq_len"], stored["rows_per_step"], stored["steps"])
        stated, _ = timed_plan(experiment)
        probed_now = stored.get("probe") is None  # results written before the probe was kept: measure it, as a run does
        if probed_now:
            run_probe(probe_settings("cpu", DEVICES))
        else:
            write_json(probe_path(HARDWARE), stored["probe"])
        before, _ = timed_plan(experiment)
        record_runs(before, measured, stored["rows_per_step"] * stored["seq_len"])
        after, _ = timed_plan(experiment)
        records = calibration_records(HARDWARE)
        probe = read_probe(HARDWARE)
    result = {k: v for k, v in stored.items() if k not in ("benchmark", "machine")}
    result |= scores(stated, before, after, records, measured)
    result["probe"] = probe
    result["rescored"] = {
        "measurements": f"measured {stored.get('measured_at', 'on an unrecorded date')} by python -m bench.planner "
        f"on the machine above; kept as they were",
        "predictions": f"rescored {time.strftime('%Y-%m-%d')} with the current throughput model, nothing trained; each "
        "calibration record's measured step is tokens per step over the run's measured tokens/s"
        + ("" if stored.get("measured_as") == MEASURED_AS else ": its mean step, where a run records its median"),
        "probe": f"measured {probe['measured_at']}"
        + (f" for this rescoring, load average {os.getloadavg()[0]:.1f}" if probed_now else ", kept in the result"),
    }
    written = {"benchmark": stored["benchmark"], "machine": stored["machine"], **result}
    path.write_text(json.dumps(written, indent=1) + "\n")
    print({name: result[name] for name in ("stated", "uncalibrated", "calibrated", "calibrated_leave_one_out")})


def record_runs(candidates, measured: list[dict], tokens_per_step: int) -> None:
    """Calibrate this machine with the stored runs, in their order, as each run's trainer would have."""
    by_key = {_key(candidate_key(c)): c for c in candidates}
    for run in measured:
        estimate = by_key[_key(run)].estimate
        Calibration.record(HARDWARE, estimate, tokens_per_step / run["measured_tokens_per_s"])


def _entry(candidate: dict) -> dict:
    return {k: candidate[k] for k in ("layout", "micro_batch", "activation_checkpointing")}


def timed_plan(experiment: Path):
    started = time.perf_counter()
    spec = load_experiment(experiment, [])
    spec.train.precision, spec.train.zero_stage = "fp32", ZERO_STAGE
    config = model_config(spec.model, Path(spec.base_dir))
    candidates = plan(spec, config, HARDWARE, parse_bytes("8GiB"), spec.data.seq_len)
    return candidates, time.perf_counter() - started


# How a run's tokens/s is measured: over its median timed step, the step its calibration record keeps
# (trainer.rank.loop), which one stalled step on a shared machine does not move.
MEASURED_AS = "tokens per step over the median timed step"


def measure(experiment: Path, out: Path, candidate) -> float:
    """Train the candidate; its tokens/s (MEASURED_AS)."""
    layout = ",".join(f"{k}={v}" for k, v in candidate.layout.degrees().items() if v != 1) or "dp_replicate=1"
    overrides = [
        f"train.micro_batch={candidate.micro_batch}",
        f"train.activation_checkpointing={str(candidate.activation_checkpointing).lower()}",
        f"train.zero_stage={ZERO_STAGE}",
    ]
    run = train(experiment, out, DEVICES, layout, overrides, dict(os.environ))
    return median_step_tokens_per_s(run.read_steps()[-run.read_metrics()["timed_steps"] :])


def median_step_tokens_per_s(timed_steps: list[dict]) -> float:
    """Tokens over the median of the timed steps' times (the upper median, as trainer.rank.loop's calibration)."""
    median = sorted(timed_steps, key=lambda step: step["step_s"])[len(timed_steps) // 2]
    return median["tokens"] / median["step_s"]


def candidate_key(candidate) -> dict:
    return {
        "layout": candidate.layout.describe(),
        "micro_batch": candidate.micro_batch,
        "activation_checkpointing": candidate.activation_checkpointing,
    }


def predicted_and_measured(candidates, measured: list[dict]) -> list[dict]:
    found = {_key(m): m["measured_tokens_per_s"] for m in measured}
    return [
        {
            **candidate_key(c),
            "predicted_tokens_per_s": c.estimate.tokens_per_s,
            "measured_tokens_per_s": found.get(_key(candidate_key(c))),
        }
        for c in candidates
        if c.dropped is None and c.runnable
    ]


def judge(ranking, measured: list[dict]) -> dict:
    found = {_key(m): m["measured_tokens_per_s"] for m in measured}
    ranked = [c for c in ranking if c.dropped is None and c.runnable and _key(candidate_key(c)) in found]
    pick = ranked[0]
    best = max(measured, key=lambda m: m["measured_tokens_per_s"])
    predicted = [c.estimate.tokens_per_s for c in ranked]
    actual = [found[_key(candidate_key(c))] for c in ranked]
    return {
        "top_pick": candidate_key(pick),
        "top_pick_measured_tokens_per_s": found[_key(candidate_key(pick))],
        "measured_best": best,
        "quality_ratio": found[_key(candidate_key(pick))] / best["measured_tokens_per_s"],
        "spearman": spearman(predicted, actual),
    }


def leave_one_out(records: list[dict], measured: list[dict]) -> dict:
    """Each run predicted by a calibration fitted on all the others: how well calibration carries over to a
    layout it has not seen (the calibrated ranking above is judged on the runs it was fitted to)."""
    if len(records) != len(measured):
        raise RuntimeError(f"{len(measured)} runs measured but {len(records)} calibrated: a run failed to record")
    predicted_s = []
    for i, record in enumerate(records):
        calibration = fit(records[:i] + records[i + 1 :])
        predicted_s.append(calibration.predict(*(record[f] for f in FEATURES)))
    actual = [m["measured_tokens_per_s"] for m in measured]
    pick = min(range(len(measured)), key=predicted_s.__getitem__)
    return {
        "top_pick": {k: v for k, v in measured[pick].items() if k != "measured_tokens_per_s"},
        "quality_ratio": actual[pick] / max(actual),
        "spearman": spearman([-s for s in predicted_s], actual),
    }


def _key(entry: dict) -> tuple:
    return entry["layout"], entry["micro_batch"], entry["activation_checkpointing"]


def spearman(a: list[float], b: list[float]) -> float:
    def ranks(values):
        order = sorted(range(len(values)), key=lambda i: values[i])
        out = [0.0] * len(values)
        for rank, i in enumerate(order):
            out[i] = float(rank)
        return out

    ra, rb = ranks(a), ranks(b)
    n = len(a)
    mean = (n - 1) / 2
    cov = sum((x - mean) * (y - mean) for x, y in zip(ra, rb, strict=True))
    var = sum((x - mean) ** 2 for x in ra)
    return cov / var if var else 1.0


if __name__ == "__main__":
    main()
