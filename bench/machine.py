"""What every benchmark result records about where it ran, and how results are written."""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path

import torch

from trainer.host.environment import versions

RESULTS = Path(__file__).resolve().parent / "results"


def describe_machine() -> dict:
    """CPU model, cores, memory and accelerators: enough to know whether two results are comparable."""
    cpu = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        names = [line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines() if "model name" in line]
        cpu = names[0] if names else cpu
    memory = None
    meminfo = Path("/proc/meminfo")
    if meminfo.is_file():
        total_kib = int(meminfo.read_text().split("MemTotal:")[1].split()[0])
        memory = f"{total_kib / 2**20:.1f} GiB"
    gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory": memory,
        "gpus": gpus,
        "platform": platform.platform(),
        "versions": versions(),
    }


def write_result(name: str, result: dict) -> Path:
    """bench/results/NAME.json with the machine description added."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps({"benchmark": name, "machine": describe_machine(), **result}, indent=1) + "\n")
    return path
