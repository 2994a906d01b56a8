"""Published mixture-of-experts training measurements, and which MoE presets transformers builds on the meta device.

Data only, for issue 37: nothing here predicts (meshpilot's planner does not count MoE yet, trainer/model/presets.py
REFUSED) and nothing is wired into the planner. When it is, each H100 row below is what a prediction is held
against, as bench/published.py does for torchtitan's Llama rows.

ROWS are the tables' figures as published, each with its SOURCE (URL at the commit read). A figure the source does
not give is None; `derived` says which figures were computed here from the row's own figures (tokens/s per GPU from
step time, global batch and sequence length; MFU against the H100's dense bf16 peak of 989 TFLOPS, the peak the
NeMo AutoModel page itself uses). Every MoE row of these sources was measured with a force-balanced router (each
expert equally loaded) unless a row says dropless: an upper bound for real, uneven routing.

PRESETS are the models' published config.json values (the Hugging Face model cards' configs, as remembered by the
author of this file: check them against the hub before a planner relies on them). `meta_builds` builds each with
the installed transformers on the meta device (no memory) and counts total and active parameters: active counts
the routed experts' parameters at top_k/E, every other parameter in full, embeddings included (so gpt-oss comes
out 0.6B above OpenAI's 3.6B and 5.1B active, which leave the embedding out). All seven build with transformers
5.2x; DeepSeek-V3's multi-token-prediction layer is not part of transformers' model and is not built.

    python -m bench.published_moe [--out bench/results/published_moe.json]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
import transformers

from bench.machine import RESULTS, describe_machine
from trainer.model.presets import MODELS, MOE_PRESETS
from trainer.results.contracts import write_json

H100_BF16_PEAK_TFLOPS = 989  # dense; the figure NeMo AutoModel's MFU is computed against
SOURCES = {
    "megatron_bridge": {
        "url": "https://github.com/NVIDIA-NeMo/Megatron-Bridge/blob/00b7660be0254ac6f95f44164ddd0c3e9cc798ed/"
        "docs/performance-summary.md",
        "what": "Megatron-Bridge performance summary, 25.11 NeMo container, pre-training; 'In MoE training "
        "benchmarks, we force-balance the token distribution among experts and all benchmarks are token-dropless'",
    },
    "nemo_automodel": {
        "url": "https://github.com/NVIDIA-NeMo/Automodel/blob/01926a5c443b7979463c73341bf64adf79de638e/"
        "docs/performance-summary.md",
        "what": "NeMo AutoModel (PyTorch backend) pre-training on DGX-H100, BF16, mock data, 'fake balanced gate', "
        "last updated 2025-10-02; MFU against 989 TFLOPS",
    },
    "megatron_moe_model_zoo": {
        "url": "https://github.com/yanring/Megatron-MoE-ModelZoo/blob/c1ad0b5c89f425d60febddc38e7f741a16f08bd1/"
        "best_practice/Qwen3/readme.md",
        "what": "Megatron-Core MoE model zoo, Qwen3 best practice: 256 H100s, NVLink 4, InfiniBand 8x50 GB/s",
    },
    "torchtitan_deepep": {
        "url": "https://github.com/pytorch/torchtitan/blob/022f885f34ea643b7a1e15a69f34fc944fdaa7ef/"
        "torchtitan/distributed/deepep/README.md",
        "what": "torchtitan DeepEP expert parallelism README: Qwen3-30B-A3B on B200s (not H100), torch 2.9.0, "
        "force-balanced router; memory is per GPU",
    },
    "megatron_core_moe_readme": {
        "url": "https://github.com/NVIDIA/Megatron-LM/blob/main/megatron/core/transformer/moe/README.md",
        "what": "Megatron-Core MoE README headline (MCore v0.9): 468 TFLOPS for Mixtral 8x7B bf16 training; no "
        "layout, GPU count or batch given (the README's text as read, not at a pinned commit)",
    },
}


@dataclass(frozen=True)
class PublishedRow:
    """One published measurement. layout: the source's degrees (ep, tp, pp, cp, vp as given; dp or fsdp where
    given; etp/edp: expert tensor/data parallel, Megatron's MoE parallel folding)."""

    model: str
    preset: str | None  # the name in PRESETS, where the model is one of them
    source: str
    hardware: str
    gpus: int | None
    precision: str
    seq_len: int | None
    global_batch: int | None  # sequences
    micro_batch: int | None
    layout: dict[str, int | str]
    tokens_per_s_per_gpu: float | None
    tflops_per_gpu: float | None
    mfu: float | None = None
    memory_gib: float | None = None
    notes: str = ""
    derived: tuple[str, ...] = field(default=())


def _row(**fields) -> PublishedRow:
    """A row with what the source leaves out derived from what it gives (and said so in `derived`)."""
    derived = list(fields.pop("derived", ()))
    step_s = fields.pop("step_s", None)
    if fields.get("tokens_per_s_per_gpu") is None and step_s and fields.get("global_batch") and fields.get("gpus"):
        fields["tokens_per_s_per_gpu"] = round(fields["global_batch"] * fields["seq_len"] / step_s / fields["gpus"])
        derived.append(f"tokens_per_s_per_gpu (from the step time, {step_s} s)")
    if (
        fields.get("mfu") is None
        and fields.get("tflops_per_gpu")
        and fields["hardware"] == "H100"
        and (fields["precision"] == "bf16")
    ):
        fields["mfu"] = round(fields["tflops_per_gpu"] / H100_BF16_PEAK_TFLOPS, 3)
        derived.append("mfu (TFLOPS / 989)")
    return PublishedRow(**fields, derived=tuple(derived))


ROWS = [
    # Megatron-Bridge, DGX-H100 (the 25.11 table's H100 section).
    _row(
        model="gpt-oss-120b",
        preset="gpt-oss-120b",
        source="megatron_bridge",
        hardware="H100",
        gpus=64,
        precision="bf16",
        seq_len=4096,
        global_batch=512,
        micro_batch=4,
        layout={"tp": 1, "pp": 4, "cp": 1, "vp": 1, "ep": 8, "fsdp": 0, "ga": 2},
        tokens_per_s_per_gpu=5630,
        tflops_per_gpu=153,
    ),
    _row(
        model="qwen3-30b-a3b",
        preset="qwen3-30b-a3b",
        source="megatron_bridge",
        hardware="H100",
        gpus=16,
        precision="fp8-cs",
        seq_len=4096,
        global_batch=512,
        micro_batch=2,
        layout={"tp": 1, "pp": 2, "cp": 1, "vp": 24, "ep": 8, "fsdp": 0, "ga": 32},
        tokens_per_s_per_gpu=5275,
        tflops_per_gpu=121,
        notes="FP8 current scaling: outside what meshpilot predicts (bf16, fp32)",
    ),
    _row(
        model="qwen3-235b-a22b",
        preset="qwen3-235b-a22b",
        source="megatron_bridge",
        hardware="H100",
        gpus=256,
        precision="fp8-cs",
        seq_len=4096,
        global_batch=None,
        micro_batch=1,
        layout={"tp": 2, "pp": 8, "cp": 1, "vp": 4, "ep": 32},
        tokens_per_s_per_gpu=None,
        tflops_per_gpu=233,
        notes="the published row has a column missing (its GBS cell is absent, so 1575 stands in both the GA "
        "and tokens/s columns): only the layout, which matches the recipe name 'TP=2 PP=8 VP=4 EP=32', and the "
        "last column's 233 TFLOPS are read here",
    ),
    # NeMo AutoModel (PyTorch backend), DGX-H100, BF16.
    _row(
        model="deepseek-v3",
        preset="deepseek-v3",
        source="nemo_automodel",
        hardware="H100",
        gpus=1024,
        precision="bf16",
        seq_len=4096,
        global_batch=8192,
        micro_batch=1,
        layout={"tp": 1, "pp": 4, "cp": 1, "ep": 64, "vp": 8, "fsdp": 256, "lbs": 8, "ga": 4},
        tokens_per_s_per_gpu=865,
        tflops_per_gpu=216,
        notes="TE + DeepEP; step 37.87 s",
    ),
    _row(
        model="deepseek-v3",
        preset="deepseek-v3",
        source="nemo_automodel",
        hardware="H100",
        gpus=256,
        precision="bf16",
        seq_len=4096,
        global_batch=512,
        micro_batch=1,
        layout={"tp": 1, "pp": 4, "cp": 1, "ep": 64, "vp": 8, "fsdp": 64, "lbs": 8, "ga": 1},
        tokens_per_s_per_gpu=1002,
        tflops_per_gpu=250,
        notes="TE + DeepEP; step 8.18 s",
    ),
    _row(
        model="qwen3-30b-a3b",
        preset="qwen3-30b-a3b",
        source="nemo_automodel",
        hardware="H100",
        gpus=8,
        precision="bf16",
        seq_len=4096,
        global_batch=512,
        micro_batch=4,
        layout={"tp": 1, "pp": 1, "cp": 1, "ep": 8, "fsdp": 8, "lbs": 4, "ga": 16},
        tokens_per_s_per_gpu=12040,
        tflops_per_gpu=277,
        notes="TE + DeepEP; step 21.773 s",
    ),
    _row(
        model="gpt-oss-20b",
        preset="gpt-oss-20b",
        source="nemo_automodel",
        hardware="H100",
        gpus=8,
        precision="bf16",
        seq_len=4096,
        global_batch=256,
        micro_batch=2,
        layout={"tp": 1, "pp": 1, "cp": 1, "ep": "-", "fsdp": 8, "lbs": 2, "ga": 16},
        tokens_per_s_per_gpu=13058,
        tflops_per_gpu=279,
        notes="TE + DeepEP + FlexAttention; EP published as '-'; step 10.04 s",
    ),
    _row(
        model="gpt-oss-120b",
        preset="gpt-oss-120b",
        source="nemo_automodel",
        hardware="H100",
        gpus=64,
        precision="bf16",
        seq_len=4096,
        global_batch=512,
        micro_batch=2,
        layout={"tp": 1, "pp": 1, "cp": 1, "ep": "-", "fsdp": 64, "lbs": 2, "ga": 4},
        tokens_per_s_per_gpu=7626,
        tflops_per_gpu=231,
        notes="TE + DeepEP + FlexAttention; EP published as '-'; step 4.30 s",
    ),
    # Megatron-Core MoE model zoo, Qwen3-235B-A22B on 256 H100s, bf16, sequence 4096, global batch 2048.
    *[
        _row(
            model="qwen3-235b-a22b",
            preset="qwen3-235b-a22b",
            source="megatron_moe_model_zoo",
            hardware="H100",
            gpus=256,
            precision="bf16",
            seq_len=4096,
            global_batch=2048,
            micro_batch=mbs,
            layout=layout,
            tokens_per_s_per_gpu=None,
            tflops_per_gpu=tflops,
            step_s=step_s,
            notes=notes,
        )
        for layout, mbs, step_s, tflops, notes in (
            (
                {"tp": 2, "cp": 1, "ep": 32, "pp": 8, "edp": 1, "etp": 1, "vp": 4, "dp": 16, "ga": 128},
                1,
                19.7,
                245,
                "cross-node EP, DeepEP; recompute norm, act",
            ),
            (
                {"tp": 2, "cp": 1, "ep": 32, "pp": 8, "edp": 1, "etp": 1, "vp": 4, "dp": 16, "ga": 128},
                1,
                17.6,
                276,
                "cross-node EP, DeepEP, 1F1B overlap of the all-to-all; recompute norm, act",
            ),
            (
                {"tp": 2, "cp": 1, "ep": 8, "pp": 1, "edp": 32, "etp": 1, "vp": 1, "dp": 128, "fsdp": "on", "ga": 4},
                4,
                17.6,
                276,
                "intra-node EP, DeepEP, FSDP; full recompute",
            ),
            (
                {"tp": 2, "cp": 1, "ep": 8, "pp": 32, "edp": 1, "etp": 1, "vp": 3, "dp": 4, "ga": 512},
                1,
                24.2,
                200,
                "intra-node EP, plain all-to-all dispatcher; recompute norm, act",
            ),
            (
                {"tp": 4, "cp": 1, "ep": 8, "pp": 8, "edp": 4, "etp": 1, "vp": 4, "dp": 8, "ga": 256},
                1,
                29.0,
                167,
                "intra-node EP, DeepEP; no recompute",
            ),
        )
    ],
    # Megatron-Core's Mixtral headline: no layout given.
    _row(
        model="mixtral-8x7b",
        preset="mixtral-8x7b",
        source="megatron_core_moe_readme",
        hardware="H100",
        gpus=None,
        precision="bf16",
        seq_len=None,
        global_batch=None,
        micro_batch=None,
        layout={},
        tokens_per_s_per_gpu=None,
        tflops_per_gpu=468,
        notes="a headline figure (MCore v0.9); the GPU is not named in the sentence (H100 assumed from the "
        "surrounding material), nor the layout or batch: not a row a prediction can be held against",
    ),
    # torchtitan's DeepEP expert parallelism, Qwen3-30B-A3B on B200 (strong scaling, fixed batch).
    *[
        _row(
            model="qwen3-30b-a3b",
            preset="qwen3-30b-a3b",
            source="torchtitan_deepep",
            hardware="B200",
            gpus=gpus,
            precision="bf16",
            seq_len=None,
            global_batch=None,
            micro_batch=None,
            layout={"ep": 8},
            tokens_per_s_per_gpu=tokens,
            tflops_per_gpu=tflops,
            memory_gib=memory,
            notes="DeepEP; EP kept inside a node; sequence length and batch not given in the table",
        )
        for gpus, tokens, tflops, memory in (
            (8, 14796, 341, 167.93),
            (16, 14380, 331, 138.75),
            (32, 14276, 329, 124.58),
            (64, 14107, 325, 117.50),
            (128, 13856, 319, 114.78),
        )
    ],
    _row(
        model="qwen3-30b-a3b",
        preset="qwen3-30b-a3b",
        source="torchtitan_deepep",
        hardware="B200",
        gpus=8,
        precision="bf16",
        seq_len=None,
        global_batch=None,
        micro_batch=None,
        layout={"ep": 8},
        tokens_per_s_per_gpu=9930,
        tflops_per_gpu=None,
        notes="torchtitan's default (all-to-all) expert parallelism, the README's comparison figure",
    ),
]


# The seven MoE presets, from trainer.model.presets (their one source): what the rows are predicted for.
PRESETS = {name: MODELS[name] for name in MOE_PRESETS}


def meta_build(config: dict) -> dict:
    """Build the model on the meta device; its total and active parameters, expert layers and experts per layer,
    or the one-line reason it cannot be built or sharded by trainer.parallel.expert_parallel."""
    from trainer.parallel.expert_parallel import ExpertParallelError, expert_modules

    started = time.perf_counter()
    try:
        with torch.device("meta"):
            model = transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.for_model(**config))
        experts = expert_modules(model)
    except (ValueError, TypeError, KeyError, ExpertParallelError) as error:
        return {"builds": False, "error": f"{type(error).__name__}: {str(error).splitlines()[0]}"}
    total = sum(p.numel() for p in model.parameters())
    expert_total = sum(p.numel() for module in experts.values() for p in module.parameters())
    first = next(iter(experts.values()))
    num_experts = first.gate_up_proj.shape[0]
    top_k = config["num_experts_per_tok"]
    return {
        "builds": True,
        "class": type(model).__name__,
        "total_params": total,
        "active_params": total - expert_total + expert_total * top_k // num_experts,
        "expert_params": expert_total,
        "moe_layers": len(experts),
        "experts_per_layer": num_experts,
        "top_k": top_k,
        "ep_divisors": [ep for ep in (1, 2, 4, 8, 16, 32, 64, 128, 256) if num_experts % ep == 0],
        "build_s": round(time.perf_counter() - started, 2),
    }


def meta_builds() -> dict[str, dict]:
    return {name: {"repository": repo, **meta_build(config)} for name, (repo, config) in PRESETS.items()}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=RESULTS / "published_moe.json")
    args = parser.parse_args(argv)
    result = {
        "benchmark": "published_moe",
        "machine": describe_machine(),
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "sources": SOURCES,
        "rows": [asdict(row) for row in ROWS],
        "presets": {name: {"repository": repo, "config": config} for name, (repo, config) in PRESETS.items()},
        "meta_builds": meta_builds(),
    }
    write_json(args.out, result)
    for name, built in result["meta_builds"].items():
        if built["builds"]:
            print(f"{name}: {built['total_params'] / 1e9:.1f}B total, {built['active_params'] / 1e9:.1f}B active")
        else:
            print(f"{name}: cannot build: {built['error']}")
    return result


if __name__ == "__main__":
    main()
