"""meshpilot's predictions against MosaicML's published MPT training runs on 80 GB H100s (FSDP, bf16).

The source is llm-foundry's MPT training benchmarks (SOURCE): the "H100 80GB BF16" table of
scripts/train/benchmarking/README.md, Composer's FSDP (FULL_SHARD, mixed precision DEFAULT) over amp_bf16, 8 to 64
H100 80GB GPUs. Nothing here was used to tune any meshpilot constant. The rows of the 760m, 1b, 3b and 7b models at
sequence 2048 to 32768 are kept verbatim in TABLE and parsed into one `Published` row each, so every figure is the
published text; the rows outside that range (the 13b-70b models, sequences 512, 1024 and 65536) are left out of the
text as the scope the comparison was asked for.

Each row becomes meshpilot's nearest experiment (`experiment_of`): a Llama-shaped model with MPT's width, depth and
heads (`model_config_of`: kv heads = heads, the vocabulary 50368, tied embeddings, a SwiGLU MLP of the GELU MLP's
parameter count, no biases), FSDP2 dp_shard = the GPUs (FULL_SHARD is ZeRO stage 3), the row's micro-batch and global
batch, bf16, and full activation checkpointing where the row says True. It is predicted by the planner's own
functions exactly as bench/published_multinode.py does: `predict_run` uncalibrated and `predict_memory` over every
rank, the largest taken, on `planned_hardware`'s h100-sxm in nodes of 8, whose "fits" is the planner's own test
(the predicted peak, CUDA runtime included, within 79.18 GiB). Where MPT or Composer run something meshpilot does not
have, the nearest meshpilot setting is used and the difference is stated (`mismatches`); nothing is fitted to the
published figures.

    python -m bench.published_llmfoundry [--out bench/results/published_llmfoundry.json]
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.machine import RESULTS, describe_machine
from bench.published import PlannerPrediction
from trainer.config import Experiment, apply_override, experiment_from_dict
from trainer.costs.flops import mfu
from trainer.costs.memory_model import layer_bytes_per_token, parameter_shapes
from trainer.hardware import Hardware, planned_hardware
from trainer.layout import Layout
from trainer.model.build import model_config
from trainer.results.contracts import write_json

if TYPE_CHECKING:
    from transformers import PretrainedConfig

GiB = 1024**3
SOURCE = {
    "repository": "mosaicml/llm-foundry",
    "path": "scripts/train/benchmarking/README.md",
    "section": "## H100 80GB BF16",
    "commit_read": "061f2c7ce64e655100286584a7629e2a09f827ba",
    "url": "https://github.com/mosaicml/llm-foundry/blob/061f2c7ce64e655100286584a7629e2a09f827ba/"
    "scripts/train/benchmarking/README.md",
    # The commit is on the branch of pull request #543 ("Added TFLOP column", 2023-10-17); main's README (since
    # 5e85bd62d, #838, read at 8c8dd48) has the same 52 rows, every column but "Model TFLOP" (its unit) identical.
    "same_rows_on_main_at": "8c8dd48f72168c5d51e2f7b151595892a8fba43d",
    "measured_with": "llm-foundry's scripts/train/train.py under Composer (mosaicml>=0.16.3,<0.17 in setup.py at "
    "that commit), runs launched by submit_benchmarks.py / sweep.sh on the MosaicML platform, 30 batches each",
    "hardware": "h100_80gb, 8 GPUs per node; MFU against 989 TFLOP/s bf16 (the README's formula reproduces the "
    "published MFU at that peak)",
    "data": "C4 (convert_dataset_hf.py --concat_tokens seq_len: documents concatenated into full rows)",
    "throughput": "Throughput (T/s/GPU) as published: tokens/s over all GPUs / # GPUs",
    "memory": "not published",
    # What the runs configured, read for the mapping (never for a constant), at the same commit
    "recipe": [
        "scripts/train/yamls/pretrain/mpt-760m.yaml",
        "scripts/train/yamls/pretrain/mpt-1b.yaml",
        "scripts/train/yamls/pretrain/mpt-3b.yaml",
        "scripts/train/yamls/pretrain/mpt-7b.yaml",
        "scripts/train/benchmarking/submit_benchmarks.py",
        "llmfoundry/models/mpt/configuration_mpt.py",
        "llmfoundry/models/mpt/modeling_mpt.py",
    ],
}
# The settings the mapping follows, as the recipe (SOURCE["recipe"]) and Composer 0.16.4 set them.
RECIPE = (
    "model: mpt_causal_lm, expansion_ratio 4 (GELU MLP), vocab_size 50368, learned_pos_emb true (max_seq_len x "
    "d_model), no_bias false, norm_type low_precision_layernorm, attn_impl triton (flash attention, causal, no "
    "mask: attn_bias_shape None), tied embeddings, loss_fn fused_crossentropy (flash-attn's xentropy over the whole "
    "bf16 logits); precision amp_bf16; fsdp_config: FULL_SHARD, mixed_precision DEFAULT (Composer: param bf16, "
    "reduce fp32, buffer bf16), limit_all_gathers true, one FSDP unit per MPTBlock (fsdp_wrap_fn), activation "
    "checkpointing of each MPTBlock where the row says True; optimizer decoupled_adamw; no torch.compile "
    "(compile_config None); Composer reduces FSDP's gradients after every micro-batch (its no_sync strategy is "
    "for DDP only: _train_microbatch uses nullcontext for an FSDP model)"
)
# The "H100 80GB BF16" table as published (verbatim): its header, then every row of the 760m, 1b, 3b and 7b models
# at sequence 2048 to 32768, in the published order.
TABLE = """
|  Model | SeqLen (T) | # GPUs | GPU | MFU | HFU | Model TFLOP | MicroBatchSize | GradAccum | GlobalBatchSize | Throughput (S/s) | Throughput (T/s) | Throughput (T/s/GPU) | GlobalBatchSize (T) | Precision | MP Mode | Sharding Strategy | Activation Checkpointing | Activation CPUOffload | NumParams |
|  --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |
|  7b | 32768 | 8 | h100_80gb | 30.94 | 41.25 |  3.061503E+14 | 2 | 2 | 32 | 0 | 26550 | 3318 | 1048576 | amp_bf16 | DEFAULT | FULL_SHARD | True | False | 6784688128 |
|  7b | 8192 | 8 | h100_80gb | 37.14 | 49.52 |  3.674893E+14 | 8 | 2 | 128 | 6 | 55481 | 6935 | 1048576 | amp_bf16 | DEFAULT | FULL_SHARD | True | False | 6684024832 |
|  7b | 4096 | 8 | h100_80gb | 40.42 | 53.9 |  3.999793E+14 | 16 | 2 | 256 | 16 | 68893 | 8611 | 1048576 | amp_bf16 | DEFAULT | FULL_SHARD | True | False | 6667247616 |
|  7b | 2048 | 8 | h100_80gb | 46.44 | 46.44 |  4.595096E+14 | 6 | 1 | 48 | 41 | 85144 | 10643 | 98304 | amp_bf16 | DEFAULT | FULL_SHARD | False | False | 6658859008 |
|  3b | 32768 | 8 | h100_80gb | 28.84 | 38.46 |  2.854036E+14 | 3 | 6 | 144 | 1 | 46984 | 5873 | 4718592 | amp_bf16 | DEFAULT | FULL_SHARD | True | False | 2730480640 |
|  3b | 16384 | 8 | h100_80gb | 36.34 | 36.34 |  3.595418E+14 | 1 | 6 | 48 | 5 | 89223 | 11152 | 786432 | amp_bf16 | DEFAULT | FULL_SHARD | False | False | 2688537600 |
|  3b | 8192 | 8 | h100_80gb | 40.31 | 40.31 |  3.988482E+14 | 3 | 6 | 144 | 16 | 132626 | 16578 | 1179648 | amp_bf16 | DEFAULT | FULL_SHARD | False | False | 2667566080 |
|  3b | 4096 | 8 | h100_80gb | 42.31 | 42.31 |  4.186327E+14 | 5 | 6 | 240 | 40 | 167712 | 20964 | 983040 | amp_bf16 | DEFAULT | FULL_SHARD | False | False | 2657080320 |
|  3b | 2048 | 64 | h100_80gb | 40.8 | 40.8 |  4.037625E+14 | 6 | 3 | 1152 | 703 | 1441663 | 22525 | 2359296 | amp_bf16 | DEFAULT | FULL_SHARD | False | False | 2651837440 |
|  3b | 2048 | 32 | h100_80gb | 41.7 | 41.7 |  4.126519E+14 | 6 | 3 | 576 | 359 | 736701 | 23021 | 1179648 | amp_bf16 | DEFAULT | FULL_SHARD | False | False | 2651837440 |
|  3b | 2048 | 16 | h100_80gb | 43.73 | 43.73 |  4.327437E+14 | 10 | 3 | 480 | 188 | 386285 | 24142 | 983040 | amp_bf16 | DEFAULT | FULL_SHARD | False | False | 2651837440 |
|  1b | 32768 | 8 | h100_80gb | 33.54 | 33.54 |  3.319089E+14 | 1 | 4 | 32 | 2 | 96203 | 12025 | 1048576 | amp_bf16 | DEFAULT | FULL_SHARD | False | False | 1378865152 |
|  1b | 16384 | 8 | h100_80gb | 35.22 | 35.22 |  3.484904E+14 | 2 | 4 | 64 | 9 | 157194 | 19649 | 1048576 | amp_bf16 | DEFAULT | FULL_SHARD | False | False | 1345310720 |
|  1b | 8192 | 8 | h100_80gb | 37.73 | 37.73 |  3.732998E+14 | 3 | 4 | 96 | 28 | 233256 | 29157 | 786432 | amp_bf16 | DEFAULT | FULL_SHARD | False | False | 1328533504 |
|  1b | 4096 | 8 | h100_80gb | 40.26 | 40.26 |  3.983310E+14 | 7 | 4 | 224 | 75 | 308282 | 38535 | 917504 | amp_bf16 | DEFAULT | FULL_SHARD | False | False | 1320144896 |
|  1b | 2048 | 64 | h100_80gb | 40.85 | 40.85 |  4.042246E+14 | 20 | 1 | 1280 | 1387 | 2841754 | 44402 | 2621440 | amp_bf16 | DEFAULT | FULL_SHARD | False | False | 1315950592 |
|  1b | 2048 | 32 | h100_80gb | 41.52 | 41.52 |  4.108550E+14 | 20 | 1 | 640 | 705 | 1444183 | 45130 | 1310720 | amp_bf16 | DEFAULT | FULL_SHARD | False | False | 1315950592 |
|  1b | 2048 | 16 | h100_80gb | 42.36 | 42.36 |  4.191080E+14 | 20 | 1 | 320 | 359 | 736596 | 46037 | 655360 | amp_bf16 | DEFAULT | FULL_SHARD | False | False | 1315950592 |
|  1b | 2048 | 8 | h100_80gb | 41.82 | 41.82 |  4.138134E+14 | 14 | 1 | 112 | 177 | 363645 | 45455 | 229376 | amp_bf16 | DEFAULT | FULL_SHARD | False | False | 1315950592 |
|  760m | 32768 | 8 | h100_80gb | 31.84 | 31.84 |  3.151039E+14 | 1 | 2 | 16 | 3 | 130333 | 16291 | 524288 | amp_bf16 | DEFAULT | FULL_SHARD | False | False | 807656448 |
|  760m | 16384 | 8 | h100_80gb | 33.57 | 33.57 |  3.321888E+14 | 3 | 2 | 48 | 13 | 222521 | 27815 | 786432 | amp_bf16 | DEFAULT | FULL_SHARD | False | False | 782490624 |
|  760m | 8192 | 8 | h100_80gb | 34.84 | 34.84 |  3.447797E+14 | 6 | 2 | 96 | 40 | 334602 | 41825 | 786432 | amp_bf16 | DEFAULT | FULL_SHARD | False | False | 769907712 |
|  760m | 4096 | 8 | h100_80gb | 35.83 | 35.83 |  3.545866E+14 | 12 | 2 | 192 | 108 | 443674 | 55459 | 786432 | amp_bf16 | DEFAULT | FULL_SHARD | False | False | 763616256 |
|  760m | 2048 | 32 | h100_80gb | 37.57 | 37.57 |  3.717227E+14 | 24 | 1 | 768 | 1062 | 2175091 | 67971 | 1572864 | amp_bf16 | DEFAULT | FULL_SHARD | False | False | 760470528 |
|  760m | 2048 | 16 | h100_80gb | 37.89 | 37.89 |  3.748925E+14 | 24 | 1 | 384 | 535 | 1096819 | 68551 | 786432 | amp_bf16 | DEFAULT | FULL_SHARD | False | False | 760470528 |
|  760m | 2048 | 8 | h100_80gb | 34.9 | 34.9 |  3.453389E+14 | 24 | 2 | 384 | 246 | 505177 | 63147 | 786432 | amp_bf16 | DEFAULT | FULL_SHARD | False | False | 760470528 |
"""  # noqa: E501 - verbatim
# MPT's shapes (SOURCE["recipe"]: the pretrain yamls' model.d_model, n_heads, n_layers; vocab_size 50368 and
# expansion_ratio 4 in all four)
MPT_SHAPES: dict[str, dict[str, int]] = {
    "760m": {"d_model": 1536, "n_heads": 12, "n_layers": 24},
    "1b": {"d_model": 2048, "n_heads": 16, "n_layers": 24},
    "3b": {"d_model": 2560, "n_heads": 20, "n_layers": 32},
    "7b": {"d_model": 4096, "n_heads": 32, "n_layers": 32},
}
VOCAB = 50368
EXPANSION = 4  # MPT's expansion_ratio: the GELU MLP's up projection is d x 4d, its down 4d x d
# What an MPTBlock keeps for backward per token, in units of d_model, read from its modeling code at
# SOURCE["commit_read"] (llmfoundry/models/layers/blocks.py, attention.py, ffn.py, norm.py), not measured: norm_1's
# input and output (2), Wqkv's output that the flash kernel keeps as q, k and v (3), the attention output that
# out_proj keeps (1), norm_2's input and output (2), up_proj's output that GELU keeps (4) and GELU's output that
# down_proj keeps (4), all bf16; the LayerNorms' fp32 mean and rstd and the kernel's log-sum-exp are left out.
MPT_BLOCK_SAVED = 2 + 3 + 1 + 2 + EXPANSION + EXPANSION
SEQ_RANGE = (2048, 32768)  # inclusive: the scope asked for
PEAK_FLOPS = 989e12  # the H100 SXM's dense bf16 peak, the README's GPU_AVAILABLE_FLOPS (its MFU reproduces at it)
GPU = "h100-sxm"  # h100_80gb on the MosaicML platform: H100 SXM 80GB
NODE = 8


@dataclass(frozen=True)
class Published:
    """One published row: what ran and what it measured."""

    model: str  # 760m | 1b | 3b | 7b
    seq_len: int
    gpus: int
    mfu: float
    hfu: float
    micro_batch: int
    grad_accum: int
    global_batch: int  # rows of seq_len per step
    tokens_per_s: float  # all GPUs together
    tokens_per_s_per_gpu: float  # as published (its own column, rounded)
    global_batch_tokens: int
    precision: str
    mp_mode: str
    sharding: str
    activation_checkpointing: bool
    cpu_offload: bool
    num_params: int

    @property
    def label(self) -> str:
        return f"{self.model} s{self.seq_len} {self.gpus} GPUs mb{self.micro_batch}"

    @property
    def shape(self) -> dict[str, int]:
        return MPT_SHAPES[self.model]


def parse_table(text: str = TABLE) -> list[Published]:
    """Every row of the published table, by the header's column names."""
    header, _, *lines = [line for line in text.strip().splitlines() if line.strip()]
    names = _cells(header)
    rows = [_row(dict(zip(names, _cells(line), strict=True))) for line in lines]
    if not rows:
        raise ValueError("the published table has no rows")
    return rows


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def _row(cells: dict[str, str]) -> Published:
    def flag(name: str) -> bool:
        if cells[name] not in ("True", "False"):
            raise ValueError(f"the published {name!r} is not True or False: {cells[name]!r}")
        return cells[name] == "True"

    try:
        row = Published(
            model=cells["Model"],
            seq_len=int(cells["SeqLen (T)"]),
            gpus=int(cells["# GPUs"]),
            mfu=float(cells["MFU"]) / 100,
            hfu=float(cells["HFU"]) / 100,
            micro_batch=int(cells["MicroBatchSize"]),
            grad_accum=int(cells["GradAccum"]),
            global_batch=int(cells["GlobalBatchSize"]),
            tokens_per_s=float(cells["Throughput (T/s)"]),
            tokens_per_s_per_gpu=float(cells["Throughput (T/s/GPU)"]),
            global_batch_tokens=int(cells["GlobalBatchSize (T)"]),
            precision=cells["Precision"],
            mp_mode=cells["MP Mode"],
            sharding=cells["Sharding Strategy"],
            activation_checkpointing=flag("Activation Checkpointing"),
            cpu_offload=flag("Activation CPUOffload"),
            num_params=int(cells["NumParams"]),
        )
    except KeyError as missing:
        raise ValueError(f"the published table lacks the column {missing}") from None
    if row.model not in MPT_SHAPES:
        raise ValueError(f"no MPT shape for the published model {row.model!r} (known: {', '.join(MPT_SHAPES)})")
    return row


def mpt_parameters(row: Published) -> int:
    """MPT's own parameter count for the row (what NumParams counts): the tied embedding, the learned position
    embedding (max_seq_len x d_model), per block Wqkv and out_proj (4d^2) and the GELU MLP (2 x 4d^2) with their
    biases (3d + d + 4d + d), two LayerNorms with weight and bias (4d), and the final LayerNorm (2d)."""
    d, layers = row.shape["d_model"], row.shape["n_layers"]
    block = 4 * d * d + 2 * EXPANSION * d * d + (3 + 1 + EXPANSION + 1) * d + 4 * d
    return VOCAB * d + row.seq_len * d + layers * block + 2 * d


def swiglu_width(d_model: int) -> int:
    """The SwiGLU intermediate width whose 3 x d x i weights match MPT's GELU MLP's 2 x 4d x d: 8d/3, rounded to the
    nearest integer (the parameter count is what the mapping keeps; 1536 gives 4096 exactly)."""
    return round(2 * EXPANSION * d_model / 3)


def model_config_of(row: Published) -> dict[str, Any]:
    """The Llama-shaped transformers config nearest MPT's (see `mismatches`)."""
    shape = row.shape
    return {
        "model_type": "llama",
        "hidden_size": shape["d_model"],
        "intermediate_size": swiglu_width(shape["d_model"]),
        "num_hidden_layers": shape["n_layers"],
        "num_attention_heads": shape["n_heads"],
        "num_key_value_heads": shape["n_heads"],  # MPT's multihead_attention: as many kv heads as heads
        "vocab_size": VOCAB,
        "max_position_embeddings": row.seq_len,
        "rms_norm_eps": 1e-5,
        "tie_word_embeddings": True,  # MPT only supports tied embeddings (MPTForCausalLM)
        "attention_bias": False,
        "mlp_bias": False,
    }


def layout_of(row: Published) -> Layout:
    """FULL_SHARD over every GPU: FSDP2's dp_shard = # GPUs."""
    return Layout(dp_replicate=1, dp_shard=row.gpus)


def experiment_of(row: Published) -> Experiment:
    """meshpilot's nearest experiment to the row (see `mismatches` for what differs)."""
    raw: dict[str, Any] = {"model": {"config": model_config_of(row)}, "data": {"seq_len": row.seq_len}, "train": {}}
    overrides = [
        *(f"layout.{name}={degree}" for name, degree in layout_of(row).degrees().items()),
        f"train.micro_batch={row.micro_batch}",
        f"train.global_batch_tokens={row.global_batch * row.seq_len}",
        "train.precision=bf16",  # amp_bf16 with FSDP's DEFAULT mixed precision: bf16 compute, fp32 master weights
        "train.fsdp_reduce_dtype=fp32",  # DEFAULT's reduce_dtype: float32
        "train.zero_stage=3",  # FULL_SHARD: parameters, gradients and optimizer state sharded, gathered per unit
        # Composer syncs FSDP's gradients on every micro-batch (no_sync is used for DDP only: RECIPE)
        "train.fsdp_grad_sync=micro_batch",
        f"train.activation_checkpointing={'full' if row.activation_checkpointing else 'none'}",
        "train.compile=false",  # compile_config None: eager, with triton flash attention and the fused xentropy
        # Uncompiled, meshpilot's auto loss is the chunked one; MPT's fused xentropy holds the whole bf16 logits
        "train.loss=chunked",
        "train.gns_every=0",  # Composer measures no gradient noise scale
        # The rows are C4 documents concatenated to full rows, attended causally across documents (no sequence_id)
        "data.packing=false",
    ]
    for override in overrides:
        apply_override(raw, override)
    return experiment_from_dict(raw)


def config_of(row: Published) -> PretrainedConfig:
    experiment = experiment_of(row)
    return model_config(experiment.model, Path(experiment.base_dir))


def model_parameters(row: Published) -> int:
    """The mapped config's parameter count (tied embedding once)."""
    return sum(_prod(shape) for _, shape in parameter_shapes(config_of(row)))


def _prod(shape: tuple[int, ...]) -> int:
    total = 1
    for size in shape:
        total *= size
    return total


def readme_mfu(row: Published) -> float:
    """The README's MFU formula (with attention) for the row at PEAK_FLOPS: a check on the parse and the peak."""
    flops_per_seq = 2 * row.num_params * row.seq_len
    attn_flops_per_seq = row.shape["n_layers"] * 2 * 2 * row.shape["d_model"] * row.seq_len**2
    seq_per_s = row.tokens_per_s / row.seq_len
    return (3 * flops_per_seq + 3 * attn_flops_per_seq) * seq_per_s / (row.gpus * PEAK_FLOPS)


def hardware_of(row: Published) -> tuple[Hardware, int]:
    """The planner's H100 SXM nodes of 8 (the default network between nodes), and the bytes per GPU it plans with."""
    return planned_hardware("cuda", min(row.gpus, NODE), max(1, row.gpus // NODE), GPU)


def predict(row: Published) -> dict:
    """meshpilot's figures for the row: tokens/s per GPU and the largest rank's memory, by term."""
    experiment, config = experiment_of(row), config_of(row)
    hardware, device_mem = hardware_of(row)
    predicted = PlannerPrediction.of(experiment, config, hardware)
    figures = predicted.figures(experiment, hardware, device_mem)
    terms = {k: v for k, v in figures["memory_gib"].items() if k != "peak"}
    return figures | {
        "layout": experiment.layout.describe(),
        "grad_accum": predicted.grad_accum,
        "device_gib": device_mem / GiB,
        "largest_term": max(terms, key=terms.get),
        "layer_bytes_per_token": layer_bytes_per_token(config, experiment.layout, predicted.plan),
        "mfu": _mfu(row, config, hardware, predicted.estimate.tokens_per_s),
    }


def _mfu(row: Published, config: PretrainedConfig, hardware: Hardware, tokens_per_s: float) -> float | None:
    """MFU by meshpilot's own count (trainer.costs.flops: causal attention pairs, the tied head as a matmul) of a
    second at `tokens_per_s` over the row's GPUs."""
    rows = tokens_per_s / row.seq_len
    pairs = round(rows * row.seq_len * (row.seq_len + 1) / 2)
    return mfu(config, round(tokens_per_s), pairs, 1.0, hardware.device_name, row.gpus)


def with_mpt_block(row: Published, predicted: dict) -> dict | None:
    """The predicted peak with MPT's block's activations (MPT_BLOCK_SAVED per token, an estimate from its code) in
    place of the Llama layer's, the rest as predicted: where the memory the layer keeps makes the difference. None
    under full checkpointing, where both keep only the block's input."""
    if row.activation_checkpointing:
        return None
    per_token = MPT_BLOCK_SAVED * row.shape["d_model"] * 2  # bf16
    saved = (predicted["layer_bytes_per_token"] - per_token) * row.micro_batch * row.seq_len * row.shape["n_layers"]
    peak = predicted["peak_gib"] - saved / GiB
    return {"layer_bytes_per_token": per_token, "peak_gib": peak, "fits": peak <= predicted["device_gib"]}


def mismatches(row: Published) -> list[str]:
    """What meshpilot cannot map exactly, in words."""
    d = row.shape["d_model"]
    said = [
        f"model: MPT-{row.model} (d_model {d}, {row.shape['n_layers']} blocks, {row.shape['n_heads']} heads) as a "
        f"Llama-shaped model of the same width, depth and heads: RMSNorm without bias for MPT's LayerNorm with "
        f"bias, rotary positions for MPT's learned position embedding ({row.seq_len} x {d} = "
        f"{row.seq_len * d / 1e6:.1f}M parameters meshpilot's model lacks), a SwiGLU MLP of width "
        f"{swiglu_width(d)} (3 x d x i = {3 * d * swiglu_width(d) / 1e6:.1f}M weights a block) for MPT's GELU MLP "
        f"(2 x 4d^2 = {2 * EXPANSION * d * d / 1e6:.1f}M), no biases where MPT has them (no_bias false: "
        f"{(EXPANSION + 9) * d} a block). The SwiGLU layer keeps more activations per token than a GELU one "
        f"(gate, up, activation and product: 4 x {swiglu_width(d)} against MPT's 2 x {EXPANSION * d})",
        "attention: MPT's triton flash attention (attn_impl triton, causal, no mask or bias) as meshpilot's SDPA "
        "on unpacked rows (no mask; the fused kernel keeps no s x s scores in either)",
        "loss: MPT's fused_crossentropy (flash-attn's xentropy kernel) takes the whole micro-batch's bf16 logits "
        "and writes their gradient in place; meshpilot's chunked loss (what train.loss auto is uncompiled) never "
        "holds the whole logits and computes the head again in backward",
        "precision: amp_bf16 with Composer's FSDP mixed precision DEFAULT (bf16 parameters gathered, fp32 gradient "
        "reduction, fp32 master weights sharded) as train.precision bf16 with train.fsdp_reduce_dtype fp32",
        f"data parallelism: FSDP (FSDP1, use_orig_params) FULL_SHARD over {row.gpus} GPUs, one unit per MPTBlock "
        f"and the root, limit_all_gathers, BACKWARD_POST prefetch, gradients reduce-scattered after every "
        f"micro-batch (Composer's no_sync is for DDP only) as FSDP2 dp_shard={row.gpus} at train.zero_stage 3 "
        "with train.fsdp_grad_sync micro_batch",
        (
            "activation checkpointing: each MPTBlock (Composer's checkpoint wrapper) as train.activation_checkpointing "
            "full"
            if row.activation_checkpointing
            else "activation checkpointing: off, as train.activation_checkpointing none"
        ),
        "framework: eager PyTorch (compile_config None) under Composer, as meshpilot's uncompiled transformers "
        "Llama layer (train.compile false)",
        "optimizer: Composer's DecoupledAdamW (fp32 moments) as meshpilot's AdamW: the same state",
        "memory: not published, so only meshpilot's own criterion is checked (predicted peak, CUDA runtime "
        "included, within the planner's 79.18 GiB of an H100 80GB)",
        "uncalibrated: the planner's stated efficiencies, no probe or measured run of MosaicML's cluster",
    ]
    if row.global_batch != row.gpus * row.micro_batch * row.grad_accum:  # Composer's uneven last micro-batch
        said.append("batch: the global batch is not GPUs x micro-batch x GradAccum")
    return said


def compare(row: Published) -> dict:
    """The published row beside meshpilot's prediction, with the error and the mismatches."""
    predicted = predict(row)
    config, (hardware, _) = config_of(row), hardware_of(row)
    published = {
        "tokens_per_s_per_gpu": row.tokens_per_s_per_gpu,
        "mfu": row.mfu,
        "hfu": row.hfu,
        "mfu_meshpilot_count": _mfu(row, config, hardware, row.tokens_per_s_per_gpu * row.gpus),
    }
    error = predicted["tokens_per_s_per_gpu"] / row.tokens_per_s_per_gpu - 1
    return {
        "row": row.label,
        **_settings(row),
        "mpt_parameters": mpt_parameters(row),
        "meshpilot_parameters": model_parameters(row),
        "published": published,
        "predicted": predicted,
        "error": {"tokens_per_s_per_gpu": error},
        "with_mpt_block": with_mpt_block(row, predicted),
        "mismatches": mismatches(row),
    }


def _settings(row: Published) -> dict:
    fields = ("model", "seq_len", "gpus", "micro_batch", "grad_accum", "global_batch", "activation_checkpointing")
    return {f: getattr(row, f) for f in fields} | {"num_params": row.num_params}


def summary(results: list[dict]) -> dict:
    """Rows in scope, how many are predicted to fit (the goal: all), the median |error| of tokens/s per GPU (reported,
    not a goal of this table), and for the rows that do not fit, the memory term that dominates each."""
    not_fitting = [r for r in results if not r["predicted"]["fits"]]
    dominant: dict[str, int] = {}
    for r in not_fitting:
        dominant[r["predicted"]["largest_term"]] = dominant.get(r["predicted"]["largest_term"], 0) + 1
    errors = [r["error"]["tokens_per_s_per_gpu"] for r in results]
    return {
        "rows": len(results),
        "predicted_to_fit": len(results) - len(not_fitting),
        "not_fitting": [
            {"row": r["row"], "peak_gib": r["predicted"]["peak_gib"], "largest_term": r["predicted"]["largest_term"]}
            for r in not_fitting
        ],
        "not_fitting_by_largest_term": dominant,
        # the rows that do not fit that would with MPT's block's activations (`with_mpt_block`), the rest as predicted
        "fit_with_mpt_block": sum(bool(r["with_mpt_block"] and r["with_mpt_block"]["fits"]) for r in not_fitting),
        "throughput": {
            "median_abs_error": statistics.median(abs(e) for e in errors),
            "median_error": statistics.median(errors),
            "range": [min(errors), max(errors)],
        },
    }


def markdown_table(results: list[dict]) -> str:
    lines = [
        "| row | ckpt | mb x accum | tokens/s/GPU published | predicted | error | MFU published / predicted "
        "(meshpilot's count) | peak GiB | fits | largest term (GiB) | peak with MPT's block |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | ---: |",
    ]
    for r in results:
        p, q = r["published"], r["predicted"]
        term, mpt = q["largest_term"], r["with_mpt_block"]
        mpt_peak = f"{mpt['peak_gib']:.1f}" if mpt else "-"
        lines.append(
            f"| {r['model']} s{r['seq_len']} {r['gpus']} GPUs | {q['activation_checkpointing']} "
            f"| {r['micro_batch']} x {q['grad_accum']} | {p['tokens_per_s_per_gpu']:,.0f} "
            f"| {q['tokens_per_s_per_gpu']:,.0f} | {r['error']['tokens_per_s_per_gpu']:+.1%} "
            f"| {p['mfu_meshpilot_count']:.1%} / {q['mfu']:.1%} | {q['peak_gib']:.1f} "
            f"| {'yes' if q['fits'] else 'no'} | {term} {q['memory_gib'][term]:.1f} "
            f"| {mpt_peak} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=RESULTS / "published_llmfoundry.json")
    args = parser.parse_args()
    started = time.perf_counter()
    results = [compare(row) for row in parse_table()]
    result = {"source": SOURCE, "recipe": RECIPE, "rows": results, "summary": summary(results)}
    result["seconds"] = time.perf_counter() - started
    write_json(args.out, {"benchmark": "published_llmfoundry", "machine": describe_machine(), **result})
    print(markdown_table(results))
    s = result["summary"]
    print(
        f"\n{s['predicted_to_fit']} of {s['rows']} rows predicted to fit; tokens/s per GPU: median |error| "
        f"{s['throughput']['median_abs_error']:.1%} (median {s['throughput']['median_error']:+.1%})"
    )
    print(f"\nwrote {args.out} in {result['seconds']:.1f} s")


if __name__ == "__main__":
    main()
