"""Predicted step time and tokens/s of a layout: compute from FLOPs, communication from the bytes each mesh
dimension moves and the bandwidth of the link it crosses, calibrated by measured runs on the same machine.

Communication per optimizer step (ring collectives move 2(n-1)/n of the data for all-reduce, (n-1)/n for
all-gather and reduce-scatter), with P the fp32 bytes of one rank's tensor-parallel share of the parameters:
- dp_replicate: gradients all-reduced once per step; under HSDP the sharded gradients, P / dp_shard.
- dp_shard (FSDP2): parameters all-gathered in forward and again in backward for every micro-batch, gradients
  reduce-scattered once.
- tp: two all-reduces of the activations per layer in forward and two in backward, every micro-batch; these
  sit on the critical path, while data-parallel traffic mostly overlaps the backward pass.
- pp: activations sent between stages; cp: keys and values passed around the ring; both per micro-batch.

Links: a mesh dimension stays inside a node when it and the dimensions inside it (the mesh is ordered
[pp, dp_replicate, dp_shard, cp, tp], tp innermost) fit in one node's devices; otherwise it crosses the network.
Bandwidths come from `nvidia-smi topo -m` where there is one (NVLink or PCIe between GPUs), and otherwise
from the stated assumptions in DEFAULT_BANDWIDTH. Calibration fits two factors by least squares on the runs
measured on this machine (stored per machine): seconds per predicted compute second and per predicted
communication second.
"""

from __future__ import annotations

import json
import platform
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from transformers import PretrainedConfig

from trainer.cache import cache_root
from trainer.flops import peak_bf16_flops, step_flops
from trainer.layout import MESH_DIMS, Layout

# Stated assumptions where nothing better is known: bandwidth in bytes per second in one direction, and the
# fixed cost of one collective (which dominates for small models).
DEFAULT_BANDWIDTH = {"nvlink": 450e9, "pcie": 25e9, "network": 50e9, "cpu": 5e9}
DEFAULT_LATENCY_S = {"nvlink": 10e-6, "pcie": 20e-6, "network": 30e-6, "cpu": 100e-6}
# Stated assumptions for achieved compute before calibration: half the dense bf16 peak on GPUs (a typical
# well-tuned MFU), 50 GFLOP/s for an fp32 CPU rank.
GPU_EFFICIENCY = 0.5
CPU_FLOPS = 50e9
DDP_BUCKET_BYTES = 25 * 1024**2
FP32 = 4


@dataclass(frozen=True)
class Hardware:
    device_type: str  # cuda | cpu
    device_name: str
    devices_per_node: int
    nodes: int = 1
    intra_node_link: str = "nvlink"  # nvlink | pcie | cpu

    @property
    def peak_flops(self) -> float:
        if self.device_type == "cpu":
            return CPU_FLOPS
        return GPU_EFFICIENCY * (peak_bf16_flops(self.device_name) or 100e12)

    @property
    def key(self) -> str:
        """Names this machine kind for calibration records."""
        return re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{platform.node()}-{self.device_type}-{self.device_name}")


@dataclass(frozen=True)
class StepEstimate:
    """Uncalibrated seconds (what the formulas say) and the calibrated step time they give on this machine."""

    compute_s: float
    comm_s: float  # communication left on the critical path (tp, cp, pp, and dp beyond what backward hides)
    comm_bytes: dict[str, float]  # per mesh dimension, per step, per rank
    step_s: float
    tokens_per_s: float


def intra_node_link_from_topology(text: str) -> str:
    """Read `nvidia-smi topo -m`: NVLink between GPUs (NV#) or PCIe paths (PIX, PXB, PHB, NODE, SYS)."""
    gpu_rows = [line.split() for line in text.splitlines() if re.match(r"^GPU\d+\s", line)]
    cells = [cell for row in gpu_rows for cell in row[1 : len(gpu_rows) + 1] if cell != "X"]
    if cells and all(re.fullmatch(r"NV\d+", cell) for cell in cells):
        return "nvlink"
    return "pcie"


def detect_intra_node_link(device_type: str) -> str:
    if device_type != "cuda" or shutil.which("nvidia-smi") is None:
        return "cpu" if device_type == "cpu" else "nvlink"
    try:
        text = subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "pcie"
    return intra_node_link_from_topology(text)


def dimension_links(layout: Layout, hardware: Hardware) -> dict[str, str]:
    """The link each mesh dimension's collectives cross."""
    links, inner = {}, 1
    for name in reversed(MESH_DIMS):
        inner *= getattr(layout, name)
        links[name] = hardware.intra_node_link if inner <= hardware.devices_per_node else "network"
    return links


def communication_bytes(
    config: PretrainedConfig, layout: Layout, parameter_bytes: int, micro_batch: int, seq_len: int, grad_accum: int
) -> dict[str, tuple[float, int]]:
    """(bytes each rank sends, number of collectives) per optimizer step, per mesh dimension."""
    ring = lambda n: (n - 1) / n  # noqa: E731 - the share of the data a ring collective moves per rank
    tokens = micro_batch * seq_len // layout.cp
    activation = tokens * config.hidden_size * FP32
    layers = -(-config.num_hidden_layers // layout.pp)
    shard_share = parameter_bytes / layout.tp  # this rank's tensor-parallel share, before FSDP
    sent = dict.fromkeys(MESH_DIMS, (0.0, 0))
    if layout.dp_shard > 1:
        gathers = (2 * grad_accum + 1) * (layers + 1)  # per layer and the root: gather, re-gather, reduce-scatter
        sent["dp_shard"] = ((2 * grad_accum + 1) * ring(layout.dp_shard) * shard_share, gathers)
    if layout.dp_replicate > 1:
        volume = shard_share / layout.dp_shard
        sent["dp_replicate"] = (2 * ring(layout.dp_replicate) * volume, max(1, -(-int(volume) // DDP_BUCKET_BYTES)))
    if layout.tp > 1:
        sent["tp"] = (grad_accum * 4 * layers * 2 * ring(layout.tp) * activation, grad_accum * 4 * layers)
    if layout.cp > 1:
        kv = 2 * tokens * config.hidden_size * _kv_ratio(config) * FP32 / layout.tp
        passes = grad_accum * 3 * layers * (layout.cp - 1)
        sent["cp"] = (passes * kv, passes)
    if layout.pp > 1:
        sent["pp"] = (grad_accum * 2 * activation / layout.tp, grad_accum * 2)
    return sent


def estimate_step(
    config: PretrainedConfig,
    layout: Layout,
    hardware: Hardware,
    matmul_params: int,
    parameter_bytes: int,
    micro_batch: int,
    seq_len: int,
    grad_accum: int,
    activation_checkpointing: bool = False,
    calibration: Calibration | None = None,
) -> StepEstimate:
    tokens_per_rank_step = micro_batch * grad_accum * seq_len  # before cp splits the sequence
    heads = config.num_attention_heads
    width = heads * (getattr(config, "head_dim", None) or config.hidden_size // heads)
    pairs = micro_batch * grad_accum * seq_len * (seq_len + 1) // 2  # full rows; packing only lowers this
    flops = step_flops(matmul_params, width, config.num_hidden_layers, tokens_per_rank_step, pairs)
    compute = flops / (layout.tp * layout.cp * layout.pp) / hardware.peak_flops
    if activation_checkpointing:  # the forward pass runs twice: 4 passes' worth instead of 3
        compute *= 4 / 3
    if layout.pp > 1:  # the pipeline bubble of 1F1B: (pp - 1) idle micro-batch slots
        compute *= 1 + (layout.pp - 1) / grad_accum
    sent = communication_bytes(config, layout, parameter_bytes, micro_batch, seq_len, grad_accum)
    links = dimension_links(layout, hardware)
    seconds = {
        d: sent[d][0] / DEFAULT_BANDWIDTH[links[d]] + sent[d][1] * DEFAULT_LATENCY_S[links[d]] for d in MESH_DIMS
    }
    # Data-parallel traffic overlaps the backward pass (about two thirds of compute); the rest shows.
    data_parallel = seconds["dp_shard"] + seconds["dp_replicate"]
    comm = seconds["tp"] + seconds["cp"] + seconds["pp"] + max(0.0, data_parallel - 2 / 3 * compute)
    calibration = calibration or Calibration()
    step = calibration.compute_scale * compute + calibration.comm_scale * comm
    global_tokens = tokens_per_rank_step * layout.dp_degree
    return StepEstimate(compute, comm, {d: v[0] for d, v in sent.items()}, step, global_tokens / step)


@dataclass
class Calibration:
    """Measured seconds per predicted second, for compute and for communication, on one machine kind."""

    compute_scale: float = 1.0
    comm_scale: float = 1.0
    runs: int = 0

    @classmethod
    def load(cls, hardware: Hardware) -> Calibration:
        path = _calibration_path(hardware)
        if not path.is_file():
            return cls()
        data = json.loads(path.read_text())
        return fit(data["records"])

    @staticmethod
    def record(hardware: Hardware, estimate: StepEstimate, measured_step_s: float) -> Calibration:
        """Store a measured run and refit; later predictions on this machine use the new factors."""
        path = _calibration_path(hardware)
        records = json.loads(path.read_text())["records"] if path.is_file() else []
        records.append({"compute_s": estimate.compute_s, "comm_s": estimate.comm_s, "measured_s": measured_step_s})
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"hardware": asdict(hardware), "records": records[-200:]}, indent=1))
        return fit(records)


def fit(records: list[dict]) -> Calibration:
    """Least squares for measured = a * compute + b * comm, with a, b > 0; one factor when comm never varied."""
    if not records:
        return Calibration()
    compute = np.array([r["compute_s"] for r in records])
    comm = np.array([r["comm_s"] for r in records])
    measured = np.array([r["measured_s"] for r in records])
    if np.all(comm == 0) or len(records) < 2:
        scale = float(measured.sum() / max(compute.sum() + comm.sum(), 1e-12))
        return Calibration(scale, scale, len(records))
    (a, b), *_ = np.linalg.lstsq(np.stack([compute, comm], axis=1), measured, rcond=None)
    if a <= 0 or b <= 0:  # not enough spread to tell them apart: one common factor
        scale = float(measured.sum() / (compute.sum() + comm.sum()))
        return Calibration(scale, scale, len(records))
    return Calibration(float(a), float(b), len(records))


def _calibration_path(hardware: Hardware) -> Path:
    return cache_root() / "calibration" / f"{hardware.key}.json"


def _kv_ratio(config: PretrainedConfig) -> float:
    kv = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
    return kv / config.num_attention_heads
