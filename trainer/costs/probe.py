"""`meshpilot probe`: what this machine does, measured once, so that predictions start from its own figures.

In well under a minute, N processes started by torchrun with the real backend (gloo on CPU, NCCL on CUDA) measure
at once, as training would run them: the matmul rate per dtype at a few sizes, memory bandwidth (a large copy),
the fixed cost of one tiny operation and what Python dispatch adds to it (on a DTensor; under selective
checkpointing's policy), and for each link (between the processes of a node; across nodes when
started on several under torchrun's rendezvous) the time of all-reduce, all-gather, reduce-scatter and send/recv
at a few message sizes. The smallest message gives a collective's latency, the largest its bandwidth.

The result is stored per machine beside its calibration (`probe_path`, the machine key the calibration uses),
with the machine, the versions and the time; re-probing replaces it. The throughput model takes its compute rate,
per-collective latency and link bandwidths from it (`trainer.costs.throughput.hardware_figures`) instead of the stated
defaults, and the calibration by measured runs scales those. The processes: trainer.costs.probe_worker.
"""

from __future__ import annotations

import functools
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from filelock import FileLock
from tqdm import tqdm

from trainer.config import ConfigError
from trainer.hardware import Hardware, this_machine
from trainer.host.cache import calibration_dir
from trainer.host.environment import device_name, process_env, versions
from trainer.host.lifeline import tied_env

KiB, MiB, GiB = 1024, 1024**2, 1024**3
# all_to_all: expert parallelism's dispatch and combine (trainer.costs.throughput prices ep's traffic at it).
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "send_recv", "all_to_all")
STATED = "stated defaults"  # the figures' source without a probe (and of calibration records made before one)
PROGRESS = "probe-progress"  # how a rank's progress line on stdout starts
TIME_LIMIT_S = 180  # a probe that takes longer is stuck (a rendezvous that never completes): it is stopped
CPU_PROCESSES = 2  # on CPU: enough for a link; more would only share the same cores
# What is measured, per device kind: sizes where a CPU takes milliseconds and a GPU is past its launch overhead.
SIZES = {
    "cpu": {"matmul_sizes": (128, 256, 512), "message_bytes": (4 * KiB, MiB, 16 * MiB), "copy_bytes": 64 * MiB},
    "cuda": {"matmul_sizes": (1024, 4096, 8192), "message_bytes": (4 * KiB, 16 * MiB, 256 * MiB), "copy_bytes": GiB},
}
QUICK = {"matmul_sizes": (64, 128), "message_bytes": (KiB, MiB), "copy_bytes": 4 * MiB}  # rough, in seconds


class ProbeError(RuntimeError):
    """The probe's processes failed or hung; the message says why in one line."""


@dataclass(frozen=True)
class ProbeSettings:
    device_type: str  # cpu | cuda
    nproc: int  # processes per node
    nnodes: int
    dtypes: tuple[str, ...]
    matmul_sizes: tuple[int, ...]
    message_bytes: tuple[int, ...]
    copy_bytes: int
    repeats: int  # timed calls per measurement (fewer for compute once its time budget is spent)

    def links(self) -> list[str]:
        """The links the processes' collectives cross: within a node, and between nodes."""
        return (["intra_node"] if self.nproc > 1 else []) + (["network"] if self.nnodes > 1 else [])

    def steps(self) -> int:
        """Measurements, one progress line each: matmuls, the copy, the tiny operation plain, on a DTensor and under
        selective checkpointing, the collectives."""
        compute = len(self.dtypes) * len(self.matmul_sizes) + 4
        return compute + len(self.links()) * len(COLLECTIVES) * len(self.message_bytes)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> ProbeSettings:
        fields = json.loads(text)
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in fields.items()})


@dataclass(frozen=True)
class Rendezvous:
    """Where the probes of several nodes meet (torchrun's c10d rendezvous); one node needs none."""

    nnodes: int = 1
    node_rank: int = 0
    endpoint: str | None = None

    def torchrun_args(self) -> list[str]:
        if self.nnodes == 1 and self.endpoint is None:
            return ["--standalone"]
        return [f"--nnodes={self.nnodes}", f"--node-rank={self.node_rank}", "--rdzv-backend=c10d",
                f"--rdzv-endpoint={self.endpoint or '127.0.0.1:29500'}"]  # fmt: skip


def bytes_sent(collective: str, message: int, size: int) -> float:
    """Bytes each of `size` ranks sends in one ring collective on `message` bytes (all-reduced, gathered output,
    reduce-scattered input, sent to the next rank, or split evenly over every rank by an all-to-all, which keeps
    its own share): what the throughput model counts per rank."""
    ring = (size - 1) / size
    shares = {"all_reduce": 2 * ring, "all_gather": ring, "reduce_scatter": ring, "send_recv": 1.0, "all_to_all": ring}
    return shares[collective] * message


def default_nproc(device_type: str) -> int:
    """What the machine's runs use: every GPU, or two processes on CPU."""
    # torch: planning runs without it; only probing this machine needs it
    import torch

    return torch.cuda.device_count() if device_type == "cuda" else CPU_PROCESSES


def probe_settings(
    device_type: str, nproc: int, rendezvous: Rendezvous = Rendezvous(), quick: bool = False
) -> ProbeSettings:
    """What a probe measures on this machine; raises ConfigError for process counts it cannot run."""
    # torch: planning runs without it; only probing this machine needs it
    import torch

    if nproc < 1 or rendezvous.nnodes < 1:
        raise ConfigError(f"the process and node counts must be at least 1 (got {nproc} and {rendezvous.nnodes})")
    if not 0 <= rendezvous.node_rank < rendezvous.nnodes:
        raise ConfigError(f"--node-rank {rendezvous.node_rank} is not one of the {rendezvous.nnodes} nodes' ranks")
    if rendezvous.nnodes > 1 and not rendezvous.endpoint:
        raise ConfigError(f"--nnodes {rendezvous.nnodes} needs --rdzv-endpoint HOST:PORT, the same on every node")
    if device_type == "cuda" and nproc > torch.cuda.device_count():
        raise ConfigError(f"--nproc {nproc} asks for more processes than the {torch.cuda.device_count()} CUDA devices")
    dtypes = ("fp32", "bf16")
    if device_type == "cuda":
        dtypes = ("fp32", "bf16", "fp16") if torch.cuda.is_bf16_supported() else ("fp32", "fp16")
    sizes = QUICK if quick else SIZES[device_type]
    return ProbeSettings(device_type, nproc, rendezvous.nnodes, dtypes, **sizes, repeats=2 if quick else 7)


def probe_path(hardware: Hardware) -> Path:
    """This machine's probe, beside its calibration: one per machine, named by the same key."""
    return calibration_dir() / f"{hardware.key}.probe.v1.json"


def figures_source(hardware: Hardware) -> str:
    """Which figures predictions for `hardware` start from: its probe (by when it was measured), else STATED.
    Calibration records keep it: a run predicted from other figures measured its step against other seconds."""
    probe = read_probe(hardware)
    return STATED if probe is None else f"probe {probe['measured_at']}"


def read_probe(hardware: Hardware) -> dict | None:
    """The stored probe of this machine, or None; read again only when the file changes (every prediction asks)."""
    path = probe_path(hardware)
    try:
        stat = path.stat()
    except OSError:
        return None
    return _read(str(path), stat.st_ino, stat.st_mtime_ns, stat.st_size)  # a new probe is a new file (write_json)


@functools.lru_cache(maxsize=8)
def _read(path: str, inode: int, mtime_ns: int, size: int) -> dict | None:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):  # unreadable or half-written by hand: as if there were none
        return None


def run_probe(settings: ProbeSettings, rendezvous: Rendezvous = Rendezvous()) -> tuple[Path, dict]:
    """Measure this machine and store the result (replacing any earlier one): its path and contents."""
    from trainer.results.contracts import write_json  # here: `meshpilot plan` only reads probes (pydantic takes 0.1 s)

    hardware = this_machine(settings.device_type, settings.nproc, settings.nnodes)
    started = time.perf_counter()
    measured = _measure(settings, rendezvous)
    probe = {
        "machine": {
            **asdict(hardware),
            "key": hardware.key,
            "host": platform.node(),
            "cpu_count": os.cpu_count(),
            "backend": "nccl" if settings.device_type == "cuda" else "gloo",
        },
        "versions": versions(),
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "seconds": time.perf_counter() - started,
        "settings": asdict(settings),
        **measured,
        "figures": figures(measured),
    }
    path = probe_path(hardware)
    write_json(path, probe)
    return path, probe


def ensure_probe(hardware: Hardware) -> Path | None:
    """The probe of this machine, measured first where there is none: once per machine, before the first plan
    or sweep whose predictions are for its own devices. None where probing failed: predictions then keep the
    stated defaults, and the next plan tries again."""
    path = probe_path(hardware)
    if path.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(path.with_suffix(".lock")):  # plans started together: one probes, the others wait
        if path.is_file():
            return path
        print("meshpilot: measuring this machine once for the throughput model (meshpilot probe)", file=sys.stderr)
        try:
            settings = probe_settings(hardware.device_type, default_nproc(hardware.device_type))
            return run_probe(settings)[0]
        except (ProbeError, ConfigError) as error:
            print(f"meshpilot: probe failed, predicting from stated defaults: {error}", file=sys.stderr)
            return None


def plans_this_machine(hardware: Hardware) -> bool:
    """Whether `hardware` is this machine's own devices (its probe applies), not hardware named by flags or presets
    that this machine does not have."""
    # torch: planning runs without it; only probing this machine needs it
    import torch

    if hardware.device_type == "cuda" and not torch.cuda.is_available():
        return False
    return hardware.device_name == device_name(hardware.device_type)


def figures(measured: dict) -> dict:
    """What predictions take from a probe: the best matmul rate per dtype, the memory bandwidth, the fixed cost
    of one operation and what DTensor's and selective checkpointing's dispatch add to it, and per link and
    collective the latency (the smallest message's time) and the bandwidth (the largest message's extra bytes over
    its extra time; its plain rate where that time is lost in noise).

    Links are read from each size's fastest repeat: a collective's time on a shared machine swings by several times
    with whatever else the cores run (on this project's 2-core CPU the median small all-reduce ranged 0.5-4 ms from
    one probe to the next, its fastest far less), and the link itself is what is wanted here. What waiting and
    contention add to every collective of a step is what calibration's per-collective term learns."""
    flops = {
        dtype: max(r["flops_per_s"] for r in rows) for dtype, rows in measured["compute"]["matmul"].items() if rows
    }
    links = {}
    for link, collectives in measured["links"].items():
        links[link] = {}
        for collective, rows in collectives.items():
            small_s, large_s = rows[0]["fastest_s"], rows[-1]["fastest_s"]
            sent = rows[-1]["bus_bandwidth"] * rows[-1]["seconds"]  # bytes per rank of the largest message
            extra_s = large_s - small_s
            bandwidth = sent / extra_s if extra_s > 0 else sent / large_s
            links[link][collective] = {"latency_s": small_s, "bandwidth": bandwidth}
    compute = measured["compute"]
    taken = ("memory_bandwidth", "op_overhead_s", "dtensor_op_s", "selective_op_s")
    return {"flops": flops, **{name: compute[name] for name in taken}, "links": links}


def _measure(settings: ProbeSettings, rendezvous: Rendezvous) -> dict:
    """Start the measuring processes under torchrun (tied to this one), follow their progress, return their
    results: {"compute": ..., "links": ...} of this node."""
    with tempfile.TemporaryDirectory(prefix="meshpilot-probe-") as tmp:
        out, log = Path(tmp) / "result.json", Path(tmp) / "torchrun.log"
        command = [sys.executable, "-m", "trainer.costs.probe_worker", "agent", f"--nproc-per-node={settings.nproc}"]
        command += [*rendezvous.torchrun_args(), "--max-restarts=0", "--monitor-interval=0.1"]
        command += ["-m", "trainer.costs.probe_worker", "rank", str(out), settings.to_json()]
        with log.open("w") as errors, tqdm(total=settings.steps(), desc="probe", unit="step", disable=None) as bar:
            bar.set_postfix_str(f"starting {settings.nproc} processes")
            env = tied_env(process_env(settings.device_type, settings.nproc))
            process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=errors, text=True)
            _follow(process, bar)
        if process.returncode != 0 or not out.is_file():
            raise ProbeError(_failure(process.returncode, log))
        return json.loads(out.read_text())


def _follow(process: subprocess.Popen, bar: tqdm) -> None:
    """Advance the bar on every measurement the ranks report until they exit; stop them past the time limit or
    when this process is interrupted."""
    watchdog = threading.Timer(TIME_LIMIT_S, process.kill)  # the ranks die with torchrun's agent
    watchdog.start()
    try:
        for line in process.stdout:
            if line.startswith(PROGRESS):
                bar.update(1)
                bar.set_postfix_str(line[len(PROGRESS) :].strip())
    except BaseException:
        process.kill()
        raise
    finally:
        watchdog.cancel()
        process.wait()


def _failure(returncode: int, log: Path) -> str:
    """One line: how the processes ended and the first error a rank raised (the others' are mostly its echo)."""
    lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()]
    raised = [line for line in lines if re.match(r"\[rank\d+\]: \w+(Error|Exception)\b", line)]
    cause = (raised or lines or ["(no output)"])[0 if raised else -1]
    how = f"were stopped after {TIME_LIMIT_S} s" if returncode == -9 else f"exited with code {returncode}"
    return f"the probe's processes {how}: {cause[:300]}"


def format_probe(probe: dict) -> str:
    """The stored probe as a table: compute per process, then each link's collectives by message size."""
    machine, settings = probe["machine"], probe["settings"]
    lines = [
        f"probe of {machine['host']} ({machine['device_type']}, {machine['device_name']}): "
        f"{settings['nproc']} processes x {settings['nnodes']} node(s), {machine['backend']}, "
        f"{probe['measured_at']}, took {probe['seconds']:.1f} s",
        "",
        _row("matmul / process", [str(s) for s in settings["matmul_sizes"]], "used"),
    ]
    for dtype, rows in probe["compute"]["matmul"].items():
        rates = {r["size"]: _rate(r["flops_per_s"], "FLOP/s") for r in rows}
        used = _rate(probe["figures"]["flops"][dtype], "FLOP/s") if rows else "-"
        lines.append(_row(f"  {dtype}", [rates.get(s, "skipped") for s in settings["matmul_sizes"]], used))
    lines.append(f"memory bandwidth  {_rate(probe['compute']['memory_bandwidth'], 'B/s')}")
    lines.append(f"per-op overhead   {_seconds(probe['compute']['op_overhead_s'])}")
    for name, label in (("dtensor_op_s", "DTensor dispatch"), ("selective_op_s", "selective ckpt.")):
        if name in probe["compute"]:  # probes older than these measurements lack them
            lines.append(f"{label:<17} +{_seconds(probe['compute'][name])} per op")
    for link, collectives in probe["links"].items():
        name = "network" if link == "network" else f"{link} ({machine['intra_node_link']})"
        lines += ["", _row(f"{name}", [_bytes(b) for b in settings["message_bytes"]], "latency   bandwidth")]
        for collective, rows in collectives.items():
            used = probe["figures"]["links"][link][collective]
            figure = f"{_seconds(used['latency_s']):<9} {_rate(used['bandwidth'], 'B/s')}"
            lines.append(_row(f"  {collective}", [_seconds(r["seconds"]) for r in rows], figure))
    if probe["links"]:
        lines += ["(median times per message size; latency and bandwidth from the fastest repeats)"]
    else:
        lines += ["", "no link measured: one process (--nproc 2 or more measures the link between them)"]
    return "\n".join(lines)


def _row(label: str, cells: list[str], last: str) -> str:
    return f"{label:<24}" + "".join(f"{c:>14}" for c in cells) + f"   {last}"


def _rate(value: float, unit: str) -> str:
    for prefix, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if value >= scale:
            return f"{value / scale:.1f} {prefix}{unit}"
    return f"{value:.1f} {unit}"


def _seconds(value: float) -> str:
    if value >= 1:
        return f"{value:.2f} s"
    return f"{value * 1e3:.2f} ms" if value >= 1e-3 else f"{value * 1e6:.1f} us"


def _bytes(value: int) -> str:
    for unit, scale in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if value >= scale:
            return f"{value / scale:g} {unit}"
    return f"{value} B"
