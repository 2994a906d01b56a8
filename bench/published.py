"""meshpilot's predictions against torchtitan's published Llama 3.1 measurements on H100s.

The source is torchtitan's benchmarks/llama3_h100_202412_torchtitan.md (SOURCE): its tables are kept verbatim
in TABLES and parsed into one `Published` row per line, so every figure here is the published text. A row is in
scope when meshpilot models what it ran; Float8 rows (torchao's float8 linears) are not here: their speed-up over
bf16 is checked in bench/published_float8.py (train.precision fp8), where the machine's error cancels. Each
in-scope row becomes the experiment `meshpilot plan --model` builds for the preset
(trainer.model.presets.preset_experiment) with the row's degrees, local batch, sequence length, precision and activation
checkpointing mode (torchtitan's full and per-op selective are meshpilot's full and selective) and torch.compile
(torchtitan compiles each transformer block, as `train.compile` does), on the hardware `planned_hardware` gives
the source's H100s (the h100-hbm2e preset, nodes of 8 over the network), and is predicted by the planner's own
functions: `predict_run` for the step (uncalibrated: this machine's calibration records are not of torchtitan's
machine) and `predict_memory` for every rank, the largest taken as torchtitan takes the maximum over GPUs.
Nothing is fitted to the published figures; the predictions move when the models do.

What torchtitan reports as memory is the caching allocator's reserved peak (torch.cuda.memory_stats()
"reserved_bytes.all.peak", torchtitan's metrics.py), which leaves out what lives outside the allocator: so the
CUDA context and NCCL's buffers that meshpilot's peak includes are taken off before comparing (`reserved_bytes`).

    python -m bench.published [--out bench/results/published_torchtitan.json]
"""

from __future__ import annotations

import argparse
import functools
import re
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from transformers import PretrainedConfig

from bench.machine import RESULTS, describe_machine
from trainer.config import Experiment, checkpointing_mode
from trainer.costs.calibration import Calibration
from trainer.costs.memory_model import CUDA_RUNTIME, MemoryPlan, nccl_communicators, predict_memory
from trainer.costs.throughput import StepEstimate, hardware_figures, predict_run
from trainer.hardware import Hardware, planned_hardware
from trainer.layout import Layout
from trainer.model.build import model_config
from trainer.model.presets import preset_experiment
from trainer.results.contracts import write_json

GiB = 1024**3
SOURCE = {
    "repository": "pytorch/torchtitan",
    "path": "benchmarks/llama3_h100_202412_torchtitan.md",
    "commit_read": "31a17bfdb70bab6f62a13d21816a5339b911d6e3",
    "url": "https://github.com/pytorch/torchtitan/blob/31a17bfdb70bab6f62a13d21816a5339b911d6e3/benchmarks/"
    "llama3_h100_202412_torchtitan.md",
    "measured_with": "torchtitan 9dec370 (2024-12-26), torch 1963fc8, torchao eab345c (2024-12-23)",
    "hardware": "Grand Teton hosts of 8 H100s fully connected by NVLink; each H100 96GB HBM2e (2.4 TB/s) at the "
    "500 W default power limit; 400 Gb/s RDMA per GPU between hosts",
    "throughput": "TPS/GPU: tokens per second per GPU, read at iteration 90 over a 10-iteration window",
    "memory": "Memory(GiB): the allocator's reserved peak (reserved_bytes.all.peak), the maximum over GPUs",
}
# The Results section's tables as published (captions and rows verbatim).
TABLES = """
**Table 1** 1D Parallelism (FSDP). Llama 3.1 8B model. 8 GPUs. Local batch size 2, global batch size 16. Selective activation checkpointing.

| Techniques | TPS/GPU | Memory(GiB) |
| ----- | ----: | ----: |
| FSDP | 5,762 | 82.4 |
| FSDP + torch.compile | 6,667 | 77.0 |
| FSDP + torch.compile + Float8 | 8,532 | 76.8 |

**Table 2** FSDP + CP + torch.compile + Float8. Llama 3.1 8B model. 8 GPUs. Local batch size 1. Full activation checkpointing.

| Parallelism | Sequence Length | TPS/GPU | Memory(GiB) |
| ----- | ----: | ----: | ----: |
| FSDP 8, CP 1 | 32768 | 3,890 | 83.9 |
| FSDP 4, CP 2 | 65536 | 2,540 | 84.2 |
| FSDP 2, CP 4 | 131072 | 1,071 | 84.0 |
| FSDP 1, CP 8 | 262144 | 548 | 84.5 |

**Table 3** 1D Parallelism (FSDP). Llama 3.1 8B model. 128 GPUs. Local batch size 2, global batch size 256. Selective activation checkpointing.

| Techniques | TPS/GPU | Memory(GiB) |
| ----- | ----: | ----: |
| FSDP | 5,605 | 67.0 |
| FSDP + torch.compile | 6,514 | 62.0 |
| FSDP + torch.compile + Float8 | 8,380 | 61.8 |

**Table 4** 2D parallelism (FSDP + TP) + torch.compile + Float8. Llama 3.1 70B model. 256 GPUs (FSDP 32, TP 8). Local batch size 16, global batch size 512. Full activation checkpointing.

| Techniques | TPS/GPU | Memory(GiB) |
| ----- | ----: | ----: |
| 2D | 829 | 71.9 |
| 2D + AsyncTP | 876 | 67.6 |

**Table 5** 3D parallelism (FSDP + TP + PP) + torch.compile + Float8 + AsyncTP. Llama 3.1 405B model. 512 GPUs (FSDP 8, TP 8, PP8). Local batch size 32, global batch size 256. Full activation checkpointing.

| Schedule | TPS/GPU | Memory(GiB) |
| ----- | ----: | ----: |
| 1F1B | 100 | 82.5 |
| Interleaved 1F1B | 128 | 72.7 |

**Table 6** 4D parallelism (FSDP + TP + PP + CP) + torch.compile + Float8 + AsyncTP + 1F1B. Llama 3.1 405B model. 512 GPUs (TP 8, PP8). Local batch size 8. Full activation checkpointing.

| Parallelism | Sequence Length | TPS/GPU | Memory(GiB) |
| ----- | ----: | ----: | ----: |
| FSDP 8, CP 1 | 32768 | 76 | 75.3 |
| FSDP 4, CP 2 | 65536 | 47 | 75.9 |
| FSDP 2, CP 4 | 131072 | 31 | 77.1 |
| FSDP 1, CP 8 | 262144 | 16 | 84.9 |
"""  # noqa: E501 - verbatim
# Tables without a sequence-length column ran torchtitan's config default: seq_len = 8192 in its llama3 8B, 70B and
# 405B train configs before and after the benchmark (not read at 9dec370 itself). For 8B it also gives the MFU
# the source states: by torchtitan's FLOP count (6 N + 12 l h q t, 57.9 GFLOP a token) 5,762 and 6,667 TPS/GPU
# are 33.7% and 39.0% of the SXM's 989 TFLOP/s, "33% to 39%".
DEFAULT_SEQ_LEN = 8192
GPU = "h100-hbm2e"  # meshpilot's preset of the source's H100s: their bandwidth, memory and bf16 peak
NODE = 8  # GPUs per host
GOALS = {"throughput": 0.15, "memory": 0.10}  # median absolute relative error, issue 15


@dataclass(frozen=True)
class Published:
    """One row of the source's tables: what it ran and what it measured."""

    table: int
    name: str  # the row's first cell
    model: str  # meshpilot's preset of the same architecture
    gpus: int
    layout: Layout
    seq_len: int
    local_batch: int  # rows per data-parallel rank per step (torchtitan's training.batch_size)
    global_batch: int | None  # as stated; None where the caption does not say
    checkpointing: str  # full | selective (torchtitan's per-op policy; meshpilot's selective follows it)
    compile: bool
    float8: bool
    async_tp: bool
    pp_schedule: str | None
    tps_per_gpu: float
    memory_gib: float
    seq_len_stated: bool

    @property
    def label(self) -> str:
        suffix = f", seq {self.seq_len:,}" if self.seq_len_stated else ""
        return f"T{self.table} {self.model.removeprefix('llama-3.1-')} {self.gpus} GPUs: {self.name}{suffix}"

    @property
    def out_of_scope(self) -> str | None:
        """Why meshpilot cannot predict this row, or None."""
        if self.float8:
            return "Float8 (torchao float8 linears): its speed-up over bf16 is checked in bench/published_float8.py"
        return None


def parse_tables(text: str = TABLES) -> list[Published]:
    """Every row of the published tables, the caption's settings applied to each."""
    rows = []
    for block in re.split(r"\n(?=\*\*Table)", text.strip()):
        caption, _, header, _, *lines = block.strip().splitlines()
        columns = _cells(header)
        rows += [_row(caption, dict(zip(columns, _cells(line), strict=True))) for line in lines]
    return rows


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def _row(caption: str, cells: dict[str, str]) -> Published:
    name = next(cells[c] for c in ("Techniques", "Schedule", "Parallelism") if c in cells)
    said = f"{caption} {name}"  # a setting may be in the caption (the whole table) or in the row
    gpus = int(_find(r"(\d+) GPUs", caption))
    degrees = {dim.lower(): int(n) for dim, n in re.findall(r"\b(FSDP|TP|PP|CP) ?(\d+)", said)}
    model_parallel = degrees.get("tp", 1) * degrees.get("pp", 1) * degrees.get("cp", 1)
    dp_shard = degrees.get("fsdp", gpus // model_parallel)  # 1D FSDP tables name no degree: every GPU
    layout = Layout(1, dp_shard, degrees.get("tp", 1), degrees.get("cp", 1), degrees.get("pp", 1))
    seq = cells.get("Sequence Length")
    schedule = "interleaved_1f1b" if "Interleaved 1F1B" in said else "1f1b" if "1F1B" in said else None
    stated_global = re.search(r"global batch size (\d+)", caption)
    return Published(
        table=int(_find(r"\*\*Table (\d+)\*\*", caption)),
        name=name,
        model="llama-3.1-" + _find(r"Llama 3\.1 (\d+B)", caption).lower(),
        gpus=gpus,
        layout=layout,
        seq_len=int(seq) if seq else DEFAULT_SEQ_LEN,
        local_batch=int(_find(r"Local batch size (\d+)", caption)),
        global_batch=int(stated_global[1]) if stated_global else None,
        checkpointing=_find(r"(\w+) activation checkpointing", caption).lower(),
        compile="torch.compile" in said,
        float8="Float8" in said,
        async_tp="AsyncTP" in said,
        pp_schedule=schedule,
        tps_per_gpu=float(cells["TPS/GPU"].replace(",", "")),
        memory_gib=float(cells["Memory(GiB)"]),
        seq_len_stated=seq is not None,
    )


def _find(pattern: str, text: str) -> str:
    match = re.search(pattern, text)
    if match is None:
        raise ValueError(f"the published caption lacks {pattern!r}: {text!r}")
    return match[1]


def experiment_of(row: Published) -> Experiment:
    """The preset's experiment with the row's settings."""
    rows = row.local_batch * row.layout.dp_degree
    overrides = [
        *(f"layout.{name}={degree}" for name, degree in row.layout.degrees().items()),
        f"train.micro_batch={row.local_batch}",
        f"train.global_batch_tokens={rows * row.seq_len}",
        f"train.activation_checkpointing={row.checkpointing}",  # torchtitan's mode names are meshpilot's
        "train.precision=bf16",  # torchtitan's FSDP2 mixed precision: bf16 parameters, fp32 reduce-scatter
        f"train.compile={str(row.compile).lower()}",
        # torchtitan (Dec 2024) packs c4 into rows and attends causally across documents: meshpilot's unpacked
        # rows (one causal mask, no per-document mask).
        "data.packing=false",
    ]
    if row.pp_schedule:
        overrides.append(f"train.pp_schedule={row.pp_schedule}")
    return preset_experiment(row.model, row.gpus, row.seq_len, overrides)


def hardware_of(row: Published) -> tuple[Hardware, int]:
    """The planner's hardware of the source's H100s, in nodes of 8 with the network between them."""
    return planned_hardware("cuda", min(row.gpus, NODE), max(1, row.gpus // NODE), GPU)


@functools.cache  # one meta-device build per model, not per row
def preset_config(model: str) -> PretrainedConfig:
    experiment = preset_experiment(model, 1)
    return model_config(experiment.model, Path(experiment.base_dir))


def reserved_bytes(prediction: dict[str, int], layout: Layout) -> int:
    """The predicted peak without what torch's allocator never sees (the CUDA context, NCCL's buffers): the
    quantity torchtitan reports. Workspaces and the allocator's slack are reserved by the allocator: they stay."""
    outside = CUDA_RUNTIME.context + CUDA_RUNTIME.nccl_per_communicator * nccl_communicators(layout)
    return prediction["peak"] - outside


@dataclass(frozen=True)
class PlannerPrediction:
    """What the planner's own functions predict for a published run mapped to an experiment: `predict_run`
    uncalibrated (no probe or measured run of the publisher's machine is here) and `predict_memory` for every rank,
    the largest taken. The one prediction path of every comparison with a published table."""

    grad_accum: int
    plan: MemoryPlan
    estimate: StepEstimate
    largest: dict  # the largest rank's predict_memory figures, in bytes

    @classmethod
    def of(cls, experiment: Experiment, config: PretrainedConfig, hardware: Hardware) -> PlannerPrediction:
        train, layout, seq_len = experiment.train, experiment.layout, experiment.data.seq_len
        grad_accum = train.global_batch_tokens // seq_len // layout.dp_degree // train.micro_batch
        estimate = predict_run(experiment, config, hardware, grad_accum, Calibration())
        plan = MemoryPlan(
            train.micro_batch, seq_len, train.precision, train.activation_checkpointing, train, grad_accum,
            experiment.data.packing, hardware.device_type,
        )  # fmt: skip
        largest = max(predict_memory(config, layout, plan), key=lambda rank: rank["peak"])
        return cls(grad_accum, plan, estimate, largest)

    def figures(self, experiment: Experiment, hardware: Hardware, device_mem: int) -> dict:
        """The figures every comparison records: tokens/s per GPU, the step by part, the largest rank's memory by
        term (GiB) and whether it fits `device_mem`."""
        estimate, largest, layout = self.estimate, self.largest, experiment.layout
        return {
            "activation_checkpointing": checkpointing_mode(experiment.train.activation_checkpointing),
            "tokens_per_s_per_gpu": estimate.tokens_per_s / layout.world_size,
            "step_s": estimate.step_s,
            "compute_s": estimate.compute_s,
            "comm_s": estimate.comm_s,
            "compute_parts_s": {"matmul": estimate.matmul_s, "memory": estimate.memory_s, "launch": estimate.launch_s},
            "peak_gib": largest["peak"] / GiB,
            "fits": largest["peak"] <= device_mem,
            "memory_gib": {k: v / GiB for k, v in largest.items() if k != "rank"},
            "figures": hardware_figures(hardware).source,
        }


def predict(row: Published) -> dict:
    """meshpilot's figures for the row: tokens/s per GPU and the largest rank's memory."""
    experiment = experiment_of(row)
    hardware, device_mem = hardware_of(row)
    predicted = PlannerPrediction.of(experiment, preset_config(row.model), hardware)
    reserved = reserved_bytes(predicted.largest, experiment.layout) / GiB
    return predicted.figures(experiment, hardware, device_mem) | {
        "compiled": experiment.train.compile,
        "reserved_gib": reserved,
    }


def mismatches(row: Published) -> list[str]:
    """What meshpilot cannot map exactly, in words."""
    said = [
        "GPU: torchtitan's H100s have 96GB HBM2e (2.4 TB/s) at a 500 W limit, with a bf16 peak between the SXM's "
        "and the NVL's that the source does not know exactly (its footnote); meshpilot's h100-hbm2e preset takes "
        "the stated bandwidth and memory and the midpoint of the two peaks (912 TFLOP/s), at the planner's stated "
        "efficiencies, uncalibrated (no probe or measured run of torchtitan's machine)",
        "memory: the prediction's peak less the CUDA context and NCCL buffers, which sit outside the allocator "
        "whose reserved peak torchtitan reports",
    ]
    if row.compile:
        said.append(
            "torch.compile: predicted as meshpilot's train.compile (each decoder layer compiled, as torchtitan "
            "does): the layers' elementwise work priced as inductor's fused kernels instead of eager's one kernel "
            "per operation; meshpilot counts transformers' Llama layer, torchtitan ran its own (the same operations)"
        )
    if not row.seq_len_stated:
        said.append(f"sequence length not stated: {DEFAULT_SEQ_LEN}, torchtitan's config default (see SOURCE)")
    return said


def compare(row: Published) -> dict:
    """The published row beside meshpilot's prediction, with the errors and the mismatches; out-of-scope rows
    carry only the reason."""
    published = {"tokens_per_s_per_gpu": row.tps_per_gpu, "reserved_gib": row.memory_gib}
    result = {"row": row.label, **_settings(row), "published": published, "out_of_scope": row.out_of_scope}
    if row.out_of_scope:
        return result
    predicted = predict(row)
    errors = {key: _error(predicted, result, key) for key in published}
    return result | {"predicted": predicted, "error": errors, "mismatches": mismatches(row)}


def _settings(row: Published) -> dict:
    fields = ("table", "model", "gpus", "seq_len", "seq_len_stated", "local_batch", "global_batch", "checkpointing")
    flags = ("compile", "float8", "async_tp", "pp_schedule")
    return {f: getattr(row, f) for f in (*fields, *flags)} | {"layout": row.layout.degrees()}


def summary(results: list[dict]) -> dict:
    """Median absolute error over the in-scope rows, and whether each goal is met."""
    scored = [r for r in results if not r["out_of_scope"]]
    out = {"in_scope_rows": len(scored), "out_of_scope_rows": len(results) - len(scored)}
    for goal, key in (("throughput", "tokens_per_s_per_gpu"), ("memory", "reserved_gib")):
        median = statistics.median(abs(r["error"][key]) for r in scored)
        out[goal] = {"median_abs_error": median, "goal": GOALS[goal], "met": median <= GOALS[goal]}
    return out


def _error(predicted: dict, result: dict, key: str) -> float:
    return predicted[key] / result["published"][key] - 1


def markdown_table(results: list[dict]) -> str:
    """The in-scope rows as a markdown table, then the out-of-scope rows with the reason."""
    lines = [
        "| row | layout | AC | TPS/GPU published | predicted | error "
        "| memory GiB published (reserved) | predicted reserved | error |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in (r for r in results if not r["out_of_scope"]):
        p, q, e = r["published"], r["predicted"], r["error"]
        lines.append(
            f"| {r['row']} | {Layout(**r['layout']).describe()} | {q['activation_checkpointing']} "
            f"| {p['tokens_per_s_per_gpu']:,.0f} | {q['tokens_per_s_per_gpu']:,.0f} | {e['tokens_per_s_per_gpu']:+.1%} "
            f"| {p['reserved_gib']:.1f} | {q['reserved_gib']:.1f} | {e['reserved_gib']:+.1%} |"
        )
    skipped = [f"- {r['row']}: {r['out_of_scope']}" for r in results if r["out_of_scope"]]
    return "\n".join(lines + (["", "Out of scope:", *skipped] if skipped else []))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=RESULTS / "published_torchtitan.json")
    args = parser.parse_args()
    started = time.perf_counter()
    results = [compare(row) for row in parse_tables()]
    result = {"source": SOURCE, "rows": results, "summary": summary(results)}
    result["seconds"] = time.perf_counter() - started
    write_json(args.out, {"benchmark": "published_torchtitan", "machine": describe_machine(), **result})
    print(markdown_table(results))
    for goal, s in ((g, result["summary"][g]) for g in GOALS):
        verdict = "met" if s["met"] else "not met"
        print(f"\n{goal}: median |error| {s['median_abs_error']:.1%} (goal {s['goal']:.0%}: {verdict})", end="")
    print(f"\n\nwrote {args.out} in {result['seconds']:.1f} s")


if __name__ == "__main__":
    main()
