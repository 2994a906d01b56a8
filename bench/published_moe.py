"""Published mixture-of-experts training measurements against meshpilot's predictions, and which MoE presets
transformers builds on the meta device.

Each H100 row with a preset, a batch and a layout meshpilot can state is predicted (`predict`): the row's layout as
meshpilot's nearest (`AS_MESHPILOT`: Megatron's data parallelism with its distributed optimizer becomes FSDP2 over
dp_shard, its expert parallelism borrows dp_shard as meshpilot's does, so an ep that Megatron also draws from tp is
capped at dp_shard; "recompute norm, act" becomes selective checkpointing), its micro-batch and global batch, bf16, a
force-balanced router (expert_imbalance 1.0, as every source measured), meshpilot's stated H100 figures (no probe or
calibration of those machines): tokens/s per GPU from trainer.costs.throughput, the largest rank's memory from
trainer.costs.memory_model. Every mismatch of configuration is said beside the row (`mismatches`); nothing here
tunes a constant to a row. No H100 row publishes memory; the B200 rows that do (torchtitan) give neither sequence
length nor batch, so they are not predicted.

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
import functools
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
import transformers

from bench.machine import RESULTS, describe_machine
from trainer.config import ModelSpec, TrainSpec, checkpointing_mode
from trainer.costs.calibration import Calibration
from trainer.costs.memory_model import MemoryPlan, predict_rank
from trainer.costs.throughput import StepShape, estimate_step, hardware_figures, parameter_figures
from trainer.hardware import planned_hardware
from trainer.layout import Layout
from trainer.model.build import model_config
from trainer.model.parameters import count_parameters
from trainer.model.presets import MODELS, MOE_PRESETS
from trainer.parallel.expert_parallel import ExpertParallelError, expert_modules
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
    "megatron_bridge_configs": {
        "url": "https://github.com/NVIDIA-NeMo/Megatron-Bridge/blob/00b7660be0254ac6f95f44164ddd0c3e9cc798ed/"
        "scripts/performance/configs/gpt_oss/gpt_oss_workload_base_configs.py",
        "what": "the H100 gpt-oss-120b performance config at the summary's commit: pp 4, ep 8, micro_batch_size 1, "
        "recompute_modules layernorm and moe_act",
    },
    "nemo_automodel_configs": {
        "url": "https://github.com/NVIDIA-NeMo/Automodel/tree/01926a5c443b7979463c73341bf64adf79de638e/"
        "examples/benchmark/configs",
        "what": "the benchmark configs of the NeMo AutoModel rows at the summary's commit (qwen3_moe_30b_te_deepep, "
        "gptoss_20b_te_deepep, gptoss_120b_te_deepep, deepseek_v3_te_deepep[_1024].yaml): ep_size, "
        "parallelizer.activation_checkpointing, torch.optim.Adam; the models are cast to bf16 "
        "(nemo_automodel/components/models/*/model.py, initialize_weights)",
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


GiB = 1024**3
NODE = 8  # GPUs per node in every source (DGX/HGX H100)


@dataclass(frozen=True)
class AsMeshpilot:
    """A published row as meshpilot's nearest run: its layout, activation checkpointing, and what differs."""

    layout: str
    checkpointing: str  # none | selective | full
    mismatches: tuple[str, ...] = ()


_DISTRIBUTED_OPTIMIZER = (
    "Megatron's data parallelism (distributed optimizer: optimizer state sharded, bf16 parameters and gradients "
    "replicated) predicted as FSDP2 over dp_shard (everything sharded, gathered per layer)"
)
_VIRTUAL_STAGES = "virtual pipeline stages (interleaved 1F1B) predicted as plain 1F1B, one stage per rank"
_SELECTIVE = "Megatron's recompute of norms and activations predicted as meshpilot's selective checkpointing (per op)"
_EP_FROM_TP = (
    "Megatron draws ep={ep} from dp x tp (etp 1); meshpilot draws ep from dp_shard only: predicted at ep={mine}"
)
_DEEPEP = "DeepEP's fused dispatch priced as plain all-to-alls"
_EP_DASH = (
    'ep published as "-": predicted with the experts sharded over the whole FSDP group (ep = fsdp), the ep_size '
    "of the benchmark config the row ran"
)
_TE = "Transformer Engine's fused kernels priced as meshpilot's eager PyTorch layers"
# NeMo AutoModel's benchmark configs at the performance summary's commit (SOURCES["nemo_automodel_configs"]).
_NEMO_FULL_AC = "activation_checkpointing: true in the benchmark config (each decoder block checkpointed whole)"
_NEMO_NO_AC = "activation_checkpointing: false in the benchmark config"
_BF16_STATES = (
    "the published run keeps bf16 parameters, gradients and Adam moments (its model is cast to the config's "
    "torch_dtype, bf16, and torch.optim.Adam keeps its state in the parameters' dtype): 8 bytes per parameter; "
    "meshpilot keeps fp32 master weights, gradients and moments (16 bytes) and has no bf16-states setting"
)
# Keyed by (source, model, gpus, TFLOPS/GPU as published): unique among the rows.
AS_MESHPILOT = {
    ("megatron_bridge", "gpt-oss-120b", 64, 153): AsMeshpilot(
        "pp=4,dp_shard=16,ep=8",
        "selective",
        (
            _DISTRIBUTED_OPTIMIZER,
            _TE,
            "recompute_modules layernorm, moe_act (the performance script's H100 config at the table's commit) "
            "predicted as meshpilot's selective checkpointing",
            "that config sets micro_batch_size 1 where the table says MBS 4 (and GA 2, which fits neither: "
            "512 / dp 16 / 4 = 8): predicted at the table's 4",
        ),
    ),
    ("nemo_automodel", "deepseek-v3", 1024, 216): AsMeshpilot(
        "pp=4,dp_shard=256,ep=64", "full", (_NEMO_FULL_AC, _BF16_STATES, _VIRTUAL_STAGES, _DEEPEP, _TE)
    ),
    ("nemo_automodel", "deepseek-v3", 256, 250): AsMeshpilot(
        "pp=4,dp_shard=64,ep=64", "full", (_NEMO_FULL_AC, _BF16_STATES, _VIRTUAL_STAGES, _DEEPEP, _TE)
    ),
    ("nemo_automodel", "qwen3-30b-a3b", 8, 277): AsMeshpilot(
        "dp_shard=8,ep=8", "full", (_NEMO_FULL_AC, _BF16_STATES, _DEEPEP, _TE)
    ),
    ("nemo_automodel", "gpt-oss-20b", 8, 279): AsMeshpilot(
        "dp_shard=8,ep=8",
        "none",
        (_EP_DASH, _NEMO_NO_AC, _BF16_STATES, _DEEPEP, _TE, "FlexAttention (sinks, sliding window) priced as SDPA"),
    ),
    ("nemo_automodel", "gpt-oss-120b", 64, 231): AsMeshpilot(
        "dp_shard=64,ep=64",
        "none",
        (_EP_DASH, _NEMO_NO_AC, _BF16_STATES, _DEEPEP, _TE, "FlexAttention (sinks, sliding window) priced as SDPA"),
    ),
    ("megatron_moe_model_zoo", "qwen3-235b-a22b", 256, 245): AsMeshpilot(
        "pp=8,dp_shard=16,tp=2,ep=16",
        "selective",
        (_EP_FROM_TP.format(ep=32, mine=16), _VIRTUAL_STAGES, _DISTRIBUTED_OPTIMIZER, _SELECTIVE, _DEEPEP, _TE),
    ),
    ("megatron_moe_model_zoo", "qwen3-235b-a22b", 256, 276): AsMeshpilot(  # the first of the two 276 rows
        "pp=8,dp_shard=16,tp=2,ep=16",
        "selective",
        (
            _EP_FROM_TP.format(ep=32, mine=16),
            _VIRTUAL_STAGES,
            _DISTRIBUTED_OPTIMIZER,
            _SELECTIVE,
            _DEEPEP,
            _TE,
            "the all-to-all overlapped with 1F1B's compute: meshpilot prices it on the critical path",
        ),
    ),
    ("megatron_moe_model_zoo", "qwen3-235b-a22b", 256, 200): AsMeshpilot(
        "pp=32,dp_shard=4,tp=2,ep=4",
        "selective",
        (_EP_FROM_TP.format(ep=8, mine=4), _VIRTUAL_STAGES, _DISTRIBUTED_OPTIMIZER, _SELECTIVE, _TE),
    ),
    ("megatron_moe_model_zoo", "qwen3-235b-a22b", 256, 167): AsMeshpilot(
        "pp=8,dp_shard=8,tp=4,ep=8",
        "none",
        (
            "Megatron's ep=8 with edp=4 (expert data parallel 4 of dp 8) predicted as meshpilot's ep=8 over dp_shard=8 "
            "(experts FSDP-sharded by 1)",
            _VIRTUAL_STAGES,
            _DISTRIBUTED_OPTIMIZER,
            _DEEPEP,
            _TE,
        ),
    ),
}
# The intra-node-ep, full-recompute 276 TFLOPS row (tp2 ep8 edp32, FSDP): FSDP over dp=128 with ep=8.
AS_MESHPILOT_FSDP_ROW = AsMeshpilot(
    "dp_shard=128,tp=2,ep=8", "full", ("Megatron-FSDP predicted as FSDP2", _DEEPEP, _TE)
)


def as_meshpilot(row: PublishedRow) -> AsMeshpilot | None:
    """The row as meshpilot's nearest run, or None where it cannot be predicted (not an H100 row in bf16 with a
    preset, a batch and a layout)."""
    if row.layout.get("fsdp") == "on":
        return AS_MESHPILOT_FSDP_ROW
    return AS_MESHPILOT.get((row.source, row.model, row.gpus, row.tflops_per_gpu))


def not_predicted(row: PublishedRow) -> str | None:
    """Why a row is left unpredicted, in words (None: it is predicted)."""
    if row.hardware != "H100":
        return f"{row.hardware}, and the source gives no sequence length or batch"
    if row.precision != "bf16":
        return f"{row.precision}: meshpilot predicts bf16 and fp32 only"
    if not row.global_batch or not row.layout:
        return "no layout or global batch published"
    return None if as_meshpilot(row) else "no meshpilot layout mapped"


@functools.cache  # one meta-device build per preset, not per row
def preset_model(name: str):
    return model_config(ModelSpec(config=MODELS[name][1]), Path("."))


def predict(row: PublishedRow, mapped: AsMeshpilot) -> dict:
    """meshpilot's tokens/s per GPU and largest rank's memory for the row run as `mapped`."""
    config = preset_model(row.preset)
    layout = Layout.parse(mapped.layout).resolve(row.gpus)
    hardware, device_mem = planned_hardware("cuda", min(row.gpus, NODE), max(1, row.gpus // NODE), "h100")
    grad_accum = row.global_batch // layout.dp_degree // row.micro_batch
    shape = StepShape(row.micro_batch, row.seq_len, grad_accum, mapped.checkpointing, "bf16", expert_imbalance=1.0)
    estimate = estimate_step(
        config, layout, hardware, shape, **parameter_figures(count_parameters(config)), calibration=Calibration()
    )
    plan = MemoryPlan(row.micro_batch, row.seq_len, "bf16", mapped.checkpointing, TrainSpec(), grad_accum, True,
                      "cuda")  # fmt: skip
    ranks = [0] if layout.pp == 1 else [0, layout.world_size - layout.world_size // layout.pp]
    largest = max((predict_rank(config, layout, plan, rank) for rank in ranks), key=lambda m: m["peak"])
    tokens = estimate.tokens_per_s / layout.world_size
    return {
        "layout": layout.describe(),
        "activation_checkpointing": checkpointing_mode(mapped.checkpointing),
        "grad_accum": grad_accum,
        "tokens_per_s_per_gpu": round(tokens),
        "error": round(tokens / row.tokens_per_s_per_gpu - 1, 3) if row.tokens_per_s_per_gpu else None,
        "step_s": estimate.step_s,
        "compute_s": estimate.compute_s,
        "comm_s": estimate.comm_s,
        "comm_bytes": estimate.comm_bytes,
        "peak_gib": round(largest["peak"] / GiB, 2),
        "fits": largest["peak"] <= device_mem,
        "memory_gib": {k: round(v / GiB, 2) for k, v in largest.items()},
        "figures": hardware_figures(hardware).source,
        "mismatches": [*mapped.mismatches, *_layout_mismatches(layout, largest["peak"], device_mem)],
    }


def _layout_mismatches(layout: Layout, peak: int, device_mem: int) -> list[str]:
    """What meshpilot's own layout does differently from the source's, read off the layout and the prediction."""
    said = []
    if layout.ep * layout.tp > NODE:
        said.append(
            f"meshpilot's ep group spans ep x tp = {layout.ep * layout.tp} ranks, more than a node: its all-to-alls "
            "cross the network, where the source's ep stays inside a node"
        )
    if layout.pp > 1 and layout.shard_degree > 1:
        said.append("FSDP2 inside a pipeline gathers each stage's parameters again for every micro-batch")
    if peak > device_mem:
        said.append(
            "predicted memory exceeds 80 GB: meshpilot keeps fp32 master weights, gradients and moments, and its "
            "routed path keeps top_k x (3 hidden + 4 expert intermediate) per token (the rows sent, the experts' and "
            "weighted outputs, gate-up, activation, product), more than fused MoE kernels (TE, DeepEP) keep; the "
            "source publishes no memory to hold it to"
        )
    return said


def compare_rows() -> list[dict]:
    """Every row with meshpilot's prediction where one can be made, else the reason none is."""
    results = []
    for row in ROWS:
        reason = not_predicted(row)
        result = {"model": row.model, "source": row.source, "gpus": row.gpus, "layout": row.layout}
        result["published"] = {"tokens_per_s_per_gpu": row.tokens_per_s_per_gpu, "memory_gib": row.memory_gib}
        results.append(
            result | ({"not_predicted": reason} if reason else {"predicted": predict(row, as_meshpilot(row))})
        )
    return results


def markdown_table(results: list[dict]) -> str:
    lines = ["| model | source | H100s | published layout | meshpilot layout | published tok/s/GPU | predicted | "
             "error | predicted GiB/GPU (fits 80GB) |", "|---|---|---:|---|---|---:|---:|---:|---|"]  # fmt: skip
    for result in results:
        predicted = result.get("predicted")
        if not predicted:
            continue
        layout = " ".join(f"{k}{v}" for k, v in result["layout"].items() if v not in (0, 1, "-"))
        fits = "yes" if predicted["fits"] else "no"
        lines.append(
            f"| {result['model']} | {result['source']} | {result['gpus']} | {layout} | {predicted['layout']}, "
            f"AC {predicted['activation_checkpointing']} | {result['published']['tokens_per_s_per_gpu']:,} | "
            f"{predicted['tokens_per_s_per_gpu']:,} | {predicted['error']:+.0%} | {predicted['peak_gib']} ({fits}) |"
        )
    return "\n".join(lines)


def meta_build(config: dict) -> dict:
    """Build the model on the meta device; its total and active parameters, expert layers and experts per layer,
    or the one-line reason it cannot be built or sharded by trainer.parallel.expert_parallel."""
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
        "comparison": compare_rows(),
    }
    errors = [abs(r["predicted"]["error"]) for r in result["comparison"] if "predicted" in r]
    result["summary"] = {"predicted_rows": len(errors), "median_abs_error": sorted(errors)[len(errors) // 2]}
    write_json(args.out, result)
    print(markdown_table(result["comparison"]))
    print(f"median |error| over {len(errors)} rows: {result['summary']['median_abs_error']:.0%}")
    for name, built in result["meta_builds"].items():
        if built["builds"]:
            print(f"{name}: {built['total_params'] / 1e9:.1f}B total, {built['active_params'] / 1e9:.1f}B active")
        else:
            print(f"{name}: cannot build: {built['error']}")
    return result


if __name__ == "__main__":
    main()
