"""The devices meshpilot plans for and runs on, in one place: each GPU's name, memory, dense bf16 peak, memory
bandwidth and links (the data sheets' figures), each link's bandwidth, and the machine a plan or a run is for
(`Hardware`: this one, `this_machine`, or one named by presets).

A GPU is matched by substring of torch.cuda.get_device_name() in the tables below (more specific names first); a
GPU preset (`gpu_preset`: `--gpu h100`) names one of them with the memory torch reports for it.
"""

from __future__ import annotations

import functools
import platform
import re
import shutil
import subprocess
from dataclasses import dataclass

from trainer.config import ConfigError, closest_presets, parse_bytes

MiB = 1024**2


@dataclass(frozen=True)
class Device:
    """What the data sheets say of one GPU (a field left None is a shorter matching name's: a name more specific for
    one figure than for another, like "A100-PCIE-40GB", gives only the figures that differ)."""

    bf16_flops: float | None = None  # dense bf16 tensor-core peak (no sparsity)
    memory_bandwidth: float | None = None  # HBM or GDDR, bytes per second
    # Its NVLink generation to the other GPUs of its node (None where it has none, or only an optional bridge
    # between two or four cards: the PCIe and NVL parts), and its host PCIe generation: INTERCONNECTS keys.
    links: tuple[str | None, str] | None = None
    # Dense float8 tensor-core peak (e4m3/e5m2 with fp32 accumulation, as torch._scaled_mm computes; no sparsity);
    # None on GPUs without float8 tensor cores (compute capability below 8.9: A100, A10, V100) and on CPUs.
    fp8_flops: float | None = None
    capability: tuple[int, int] | None = None  # CUDA compute capability (torch.cuda.get_device_capability)


# Every GPU by name, from the vendors' data sheets (dense figures: half the "with sparsity" ones they print). The fp8
# peaks: NVIDIA H100 datasheet (SXM 1,979, PCIe 1,513, NVL 1,671 TFLOPS dense of 3,958 / 3,026 / 3,341 sparse), H200
# datasheet (SXM 1,979, NVL 1,671), GH200 datasheet (1,979), HGX B200 datasheet (4.5 PFLOPS dense per GPU of 72 for
# eight with sparsity), L40S datasheet (733 of 1,466), L40 datasheet (362 of 724), L4 datasheet (242 of 485), and the
# Ada Lovelace architecture whitepaper's RTX 4090 (FP8 with FP32 accumulate 330.3 dense; 660.6 with FP16
# accumulate, which torch._scaled_mm does not use). Compute capabilities: CUDA's table (developer.nvidia.com/cuda-gpus).
# Matched against torch.cuda.get_device_name() by `_by_name`: for
# each figure, the longest name that gives it found in the device's name, never inside a longer word or number, so
# "NVIDIA H100 80GB HBM3" (SXM) takes "H100 80GB HBM3" over "H100", "NVIDIA GH200 480GB" is no "H200", and
# "NVIDIA L40" no "L4" (nor "NVIDIA A100" an "A10").
DEVICES: dict[str, Device] = {
    "GH200": Device(989e12, 4.0e12, ("nvlink4", "pcie5"), fp8_flops=1979e12, capability=(9, 0)),
    "H200 NVL": Device(835e12, None, (None, "pcie5"), fp8_flops=1671e12),
    "H200": Device(989e12, 4.8e12, ("nvlink4", "pcie5"), fp8_flops=1979e12, capability=(9, 0)),
    "H100 NVL": Device(835e12, 3.9e12, (None, "pcie5"), fp8_flops=1671e12),
    # torchtitan's: "between SXM and NVL", their midpoint (GPUS["h100-hbm2e"]), for fp8 as for bf16
    "H100 96GB HBM2e": Device(912e12, 2.4e12, fp8_flops=1825e12),
    "H100 PCIe": Device(756e12, 2.0e12, (None, "pcie5"), fp8_flops=1513e12),
    "H100 SXM": Device(989e12, fp8_flops=1979e12),
    "H100 80GB HBM3": Device(989e12, fp8_flops=1979e12),
    "H100": Device(989e12, 3.35e12, ("nvlink4", "pcie5"), fp8_flops=1979e12, capability=(9, 0)),
    "B200": Device(
        2250e12, 8.0e12, ("nvlink5", "pcie5"), fp8_flops=4500e12, capability=(10, 0)
    ),  # its host PCIe is Gen6 by some accounts; planned over NVLink
    "A100-SXM4-40GB": Device(None, 1.555e12),
    "A100-PCIE-40GB": Device(None, 1.555e12),
    "A100-PCIE": Device(None, None, (None, "pcie4")),
    "A100": Device(312e12, 2.039e12, ("nvlink3", "pcie4"), capability=(8, 0)),
    "A10G": Device(70e12, 600e9, (None, "pcie4"), capability=(8, 6)),
    "A10": Device(125e12, 600e9, (None, "pcie4"), capability=(8, 6)),
    "L40S": Device(362e12, 864e9, (None, "pcie4"), fp8_flops=733e12, capability=(8, 9)),
    "L40": Device(181e12, 864e9, (None, "pcie4"), fp8_flops=362e12, capability=(8, 9)),
    "L4": Device(121e12, 300e9, (None, "pcie4"), fp8_flops=242e12, capability=(8, 9)),
    # GeForce: fp32 accumulation at half the fp16-accumulate rate, for bf16 and fp8 alike (Ada whitepaper)
    "RTX 4090": Device(165e12, 1008e9, (None, "pcie4"), fp8_flops=330e12, capability=(8, 9)),
}


# What a GPU not in DEVICES is taken to have: an H100's NVLink, the older PCIe.
UNLISTED_GPU_LINKS = ("nvlink4", "pcie4")


def gpu_links(device_name: str) -> tuple[str | None, str]:
    """(NVLink generation or None, PCIe generation) of a GPU by name (UNLISTED_GPU_LINKS for one not listed)."""
    return _by_name("links", device_name) or UNLISTED_GPU_LINKS


def peak_bf16_flops(device_name: str) -> float | None:
    return _by_name("bf16_flops", device_name)


def peak_fp8_flops(device_name: str) -> float | None:
    """The dense float8 tensor-core peak of a GPU by name, None where it has none (or is not listed)."""
    return _by_name("fp8_flops", device_name)


def float8_speedup(device_name: str) -> float:
    """The ratio of a GPU's data-sheet dense float8 and bf16 peaks; 1.0 where it has no float8 peak. How much of it
    float8 matmuls gain in training is trainer.costs.throughput.FLOAT8_GAIN's (measured on an H200: 1.46x where
    the data sheets say 2x)."""
    fp8, bf16 = peak_fp8_flops(device_name), peak_bf16_flops(device_name)
    return fp8 / bf16 if fp8 and bf16 else 1.0


def compute_capability(device_name: str) -> tuple[int, int] | None:
    return _by_name("capability", device_name)


def peak_memory_bandwidth(device_name: str) -> float | None:
    return _by_name("memory_bandwidth", device_name)


@functools.cache  # DEVICES is constant, and a plan asks the same few names thousands of times (each a regex scan)
def _by_name(figure: str, device_name: str):
    """`figure` of the longest name in DEVICES that gives it and is found in `device_name` starting a word and, where
    it ends in a digit, not running on into a longer number ("L4" is not in "NVIDIA L40", "A10" not in "NVIDIA
    A100", "H200" not in "NVIDIA GH200"; "H100 SXM" is in "H100 SXM5"); None where no name is."""
    found = [
        name
        for name, device in DEVICES.items()
        if getattr(device, figure) is not None and re.search(_whole(name), device_name)
    ]
    return getattr(DEVICES[max(found, key=len)], figure) if found else None


def _whole(name: str) -> str:
    return rf"(?<![A-Za-z0-9]){re.escape(name)}" + (r"(?![0-9])" if name[-1].isdigit() else "")


@dataclass(frozen=True)
class GPU:
    name: str  # what trainer.hardware.peak_bf16_flops looks the peak up by (torch.cuda.get_device_name())
    memory_mib: int  # total_memory as torch reports it, in whole MiB (see GPUS)
    source: str  # of the dense bf16 peak, which DEVICES holds (one table of devices)

    @property
    def memory_bytes(self) -> int:
        return self.memory_mib * MiB

    @property
    def peak_bf16_flops(self) -> float | None:
        return peak_bf16_flops(self.name)


# Sources of the dense bf16 peaks (half the "with sparsity" figure) that this module holds. Memory is what a
# process can use: torch.cuda.get_device_properties().total_memory (cudaDeviceProp.totalGlobalMem) in whole MiB,
# which is less than the total nvidia-smi prints. Measured on an H100 80GB HBM3 (driver 580, CUDA 13.0):
# total_memory 85,017,493,504 bytes = 81079 MiB where nvidia-smi shows 81559 MiB. Measured on an H200 (SXM, 141 GB;
# driver 580, torch 2.11, 2026-11-26): total_memory 150,109,880,320 bytes = 143155 whole MiB where nvidia-smi shows
# 143771 MiB (public reports had 150,110,011,392 bytes: drivers differ by a few hundred KiB). The other sizes are
# nvidia-smi's totals, not yet checked against torch on their cards (the H100 PCIe's assumed equal to the SXM's).
GPUS: dict[str, GPU] = {
    "h100-sxm": GPU("NVIDIA H100 80GB HBM3", 81079, "NVIDIA H100 Tensor Core GPU datasheet (SXM)"),
    "h100-pcie": GPU("NVIDIA H100 PCIe", 81079, "NVIDIA H100 Tensor Core GPU datasheet (PCIe)"),
    "h100-nvl": GPU("NVIDIA H100 NVL", 95830, "NVIDIA H100 NVL datasheet"),
    # The H100 of torchtitan's published Llama 3.1 runs (benchmarks/llama3_h100_202412_torchtitan.md): 96GB HBM2e at
    # 2.4 TB/s, SXM at a 500 W power limit; its dense bf16 peak "is between SXM and NVL, and we don't know its exact
    # value" (its footnote 2), taken as their midpoint. The memory is the source's nominal 96 GB (96e9 bytes). The
    # name is the preset's own: what torch calls this part was not seen here (a plain "H100" gets the SXM's figures).
    "h100-hbm2e": GPU("NVIDIA H100 96GB HBM2e", 91552, "torchtitan's Llama 3.1 H100 benchmark, its hardware section"),
    "h200": GPU("NVIDIA H200", 143155, "NVIDIA H200 Tensor Core GPU datasheet (SXM)"),
    "a100-40gb": GPU("NVIDIA A100-SXM4-40GB", 40960, "NVIDIA A100 Tensor Core GPU datasheet"),
    "a100-80gb": GPU("NVIDIA A100-SXM4-80GB", 81920, "NVIDIA A100 Tensor Core GPU datasheet"),
    "l40s": GPU("NVIDIA L40S", 46068, "NVIDIA L40S datasheet"),
    "a10": GPU("NVIDIA A10", 23028, "NVIDIA A10 Tensor Core GPU datasheet"),
    "rtx-4090": GPU(
        "NVIDIA GeForce RTX 4090", 24564, "NVIDIA Ada Lovelace architecture whitepaper (BF16, FP32 accumulate)"
    ),
}


# What `meshpilot plan` assumes without --gpu or hardware.device_mem: one H100 SXM.
DEFAULT_GPU = "h100-sxm"


GPU_ALIASES = {"h100": "h100-sxm", "h100-80gb": "h100-sxm", "a100": "a100-80gb", "a100-40g": "a100-40gb",
               "a100-80g": "a100-80gb", "4090": "rtx-4090", "rtx4090": "rtx-4090", "h200-141gb": "h200",
               "h100-96gb": "h100-hbm2e"}  # fmt: skip


def gpu_preset(name: str) -> GPU:
    """A GPU by name: `h100`, `H100 SXM`, `a100 40gb`, `4090`..."""
    key = re.sub(r"[\s_]+", "-", name.strip().lower()).removeprefix("nvidia-").removeprefix("geforce-")
    key = GPU_ALIASES.get(key, key)
    if key not in GPUS:
        raise ConfigError(f"no GPU preset {name!r}{closest_presets(key, [*GPUS, *GPU_ALIASES])}")
    return GPUS[key]


@dataclass(frozen=True)
class Interconnect:
    bandwidth: float  # bytes per second in one direction, per device
    latency_s: float  # the fixed cost of one collective (which dominates for small models): stated, no data sheet
    source: str  # of the bandwidth


# Each link's data-sheet bandwidth, for predictions where no probe measured it: NVLink per GPU (half the
# both-directions total the data sheets print), PCIe per x16 slot, InfiniBand per port (one per GPU).
INTERCONNECTS = {
    "nvlink3": Interconnect(300e9, 10e-6, "NVIDIA A100 datasheet: 3rd-generation NVLink, 600 GB/s per GPU"),
    "nvlink4": Interconnect(450e9, 10e-6, "NVIDIA H100 datasheet: 4th-generation NVLink, 900 GB/s per GPU"),
    "nvlink5": Interconnect(900e9, 10e-6, "NVIDIA HGX B200 datasheet: 5th-generation NVLink, 1.8 TB/s per GPU"),
    "pcie4": Interconnect(31.5e9, 20e-6, "PCI Express 4.0 x16: 16 GT/s on 16 lanes, 128b/130b encoding"),
    "pcie5": Interconnect(63e9, 20e-6, "PCI Express 5.0 x16: 32 GT/s on 16 lanes, 128b/130b encoding"),
    "ib200": Interconnect(25e9, 30e-6, "InfiniBand HDR: 200 Gb/s per port"),
    "ib400": Interconnect(50e9, 30e-6, "InfiniBand NDR: 400 Gb/s per port"),
    "cpu": Interconnect(5e9, 100e-6, "stated: gloo between the processes of one machine"),
}


NETWORKS = ("ib200", "ib400")  # links between nodes (the others are inside one)


DEFAULT_NETWORK = "ib400"


# Stated assumptions for achieved compute before calibration: the matmul rate on GPUs, 0.6 of the dense bf16 peak,
# and 50 GFLOP/s for an fp32 CPU rank. The GPU figure is the one that gives meshpilot's own compiled Llama-3.2-1B
# step on an H200 (whole loss, its best settings: 1.022 s, bench/results/gpu_h200_issue38_session5.json) with the
# memory traffic trainer.costs.throughput counts; the same figure predicts that GPU's chunked-loss step (1.313 s,
# ..._call1.json, whose profile put 0.78 s in matmul kernels and 0.38 s in the rest: predicted 0.92 and 0.33) within
# 5%, and its fp8 step within 2%, tests/test_h100_measurements.py. (It was half the peak, "a typical MFU", until the
# loss's traffic was counted: that over-predicted the best step by 21%.) Big matmuls alone reach more (the H100
# probe: 75% at 8192^3); the rest of a matmul-bound step falls between kernels.
GPU_EFFICIENCY = 0.6


CPU_FLOPS = 50e9


# Stated memory bandwidth and fixed cost per operation where no probe measured them: a large copy reaches about 85%
# of a GPU's data-sheet bandwidth (2.8 of 3.35 TB/s, probed on an H100 80GB HBM3); 20 GB/s for a CPU process.
# Eager PyTorch spends about 10 us launching a CUDA kernel (11.8 us probed on the H100) and a few on a CPU op.
BANDWIDTH_EFFICIENCY = 0.85


CPU_BANDWIDTH = 20e9


@dataclass(frozen=True)
class Hardware:
    device_type: str  # cuda | cpu
    device_name: str
    devices_per_node: int
    nodes: int = 1
    intra_node_link: str = "nvlink"  # nvlink | pcie | cpu (the generation is the device's: interconnect_within)
    network: str = DEFAULT_NETWORK  # between nodes: one of NETWORKS

    @property
    def peak_flops(self) -> float:
        if self.device_type == "cpu":
            return CPU_FLOPS
        return GPU_EFFICIENCY * (peak_bf16_flops(self.device_name) or 100e12)

    @property
    def memory_bandwidth(self) -> float:
        if self.device_type == "cpu":
            return CPU_BANDWIDTH
        return BANDWIDTH_EFFICIENCY * (peak_memory_bandwidth(self.device_name) or 2e12)

    @property
    def key(self) -> str:
        """Names this machine kind for calibration records."""
        return re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{platform.node()}-{self.device_type}-{self.device_name}")


def this_machine(device_type: str, devices_per_node: int, nodes: int = 1, name: str | None = None) -> Hardware:
    """The machine this process runs on: its device's name (`name` where a rank already reported it: asking here
    would start CUDA in this process) and the link between its devices."""
    # Imported here: trainer.host.environment imports torch, which the GPU presets' readers (the agent's request
    # parser, `meshpilot plan --gpu`) do without.
    from trainer.host.environment import device_name

    name = name or device_name(device_type)
    return Hardware(device_type, name, devices_per_node, nodes, detect_intra_node_link(device_type))


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


def interconnect_within(hardware: Hardware) -> str:
    """The link between a node's devices: the device's own NVLink or PCIe generation (trainer.hardware.gpu_links),
    or gloo between CPU processes. NVLink found (nvidia-smi) on a GPU listed without it is a bridge, priced as
    NVLink 4."""
    if hardware.intra_node_link == "cpu":
        return "cpu"
    nvlink, pcie = gpu_links(hardware.device_name)
    return (nvlink or "nvlink4") if hardware.intra_node_link == "nvlink" else pcie


def planned_hardware(
    device_type: str,
    devices: int,
    nodes: int,
    gpu: str | None = None,
    device_name: str | None = None,
    device_mem: str | None = None,
    configured_mem: str | None = None,
    network: str | None = None,
) -> tuple[Hardware, int]:
    """The hardware a plan is for, and its bytes per device: the defaults of `meshpilot plan` and of the agent's
    plan tool, decided here only. Memory: `device_mem`, else the `gpu` preset's, else the experiment's
    hardware.device_mem (`configured_mem`), else the default GPU's as torch reports it (an H100 80GB has 79.18
    GiB, not 80). The device is the `gpu` preset's, else an H100; a CPU plan is for this machine's CPU. Nodes are
    joined by `network`, one of NETWORKS (default DEFAULT_NETWORK)."""
    # Imported here: trainer.host.environment imports torch (see this_machine).
    from trainer.host.environment import device_name as local_device_name

    network = network or DEFAULT_NETWORK
    if network not in NETWORKS:
        raise ConfigError(f"--network must be one of {', '.join(NETWORKS)}, not {network!r}")
    preset = gpu_preset(gpu) if gpu else None
    if device_type == "cpu":
        name, link = device_name or local_device_name("cpu"), detect_intra_node_link(device_type)
    else:  # the GPU's own link: NVLink where it has it (DEVICES), else PCIe
        name = device_name or (preset or gpu_preset(DEFAULT_GPU)).name
        link = "pcie" if gpu_links(name)[0] is None else "nvlink"
    given = device_mem or (str(preset.memory_bytes) if preset else configured_mem)
    memory = parse_bytes(given) if given else gpu_preset(DEFAULT_GPU).memory_bytes
    return Hardware(device_type, name, devices, nodes, link, network), memory
