"""One plan request, one path: what `meshpilot plan` and the agent's plan tool ask, resolved into the experiment,
the hardware and the planner's candidates the same way for both (each only shows them its own way)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from trainer.config import ConfigError, Experiment, load_experiment
from trainer.costs.planner import Candidate, pinned_by, plan
from trainer.costs.probe import ensure_probe, plans_this_machine
from trainer.hardware import Hardware, peak_fp8_flops, planned_hardware
from trainer.model.presets import model_override, planning_config, preset_experiment


@dataclass(frozen=True)
class PlanRequest:
    devices: int  # per node
    experiment: Path | None = None  # the experiment file; None: the `model` preset with the usual defaults
    model: str | None = None  # a model preset, in place of the experiment's model (or of the experiment)
    nodes: int = 1
    device_type: str = "cuda"
    gpu: str | None = None  # a GPU preset: its device name and memory
    device_name: str | None = None
    device_mem: str | None = None
    network: str | None = None  # between nodes: one of trainer.hardware.NETWORKS
    seq_len: int | None = None  # default: the experiment's data.seq_len
    overrides: tuple[str, ...] = ()  # `--set` overrides of the experiment (or of the preset's)
    # Measure this machine first where the plan is for its own devices (trainer.costs.probe), so predictions start
    # from its figures: the command line does; the agent's tool answers mid-conversation and keeps the figures it has.
    probe: bool = True


@dataclass
class Planned:
    experiment: Experiment
    hardware: Hardware
    device_mem: int  # bytes per device
    seq_len: int
    overrides: list[str]  # what was applied to the experiment file (an export repeats them); none for a preset's
    candidates: list[Candidate] = field(default_factory=list)


def plan_request(request: PlanRequest) -> Planned:
    """Every candidate layout for the request, ranked (trainer.costs.planner.plan); ConfigError for bad input."""
    if request.devices < 1 or request.nodes < 1:
        raise ConfigError("--devices and --nodes must be at least 1")
    if request.experiment is not None:
        overrides = [*(model_override(request.model) if request.model else []), *request.overrides]
        experiment = load_experiment(request.experiment, overrides)
        pinned = pinned_by(experiment, request.experiment, overrides)
    elif request.model:  # no experiment file: the preset with the usual pre-training defaults
        world = request.devices * request.nodes
        experiment = preset_experiment(request.model, world, request.seq_len, request.overrides)
        overrides = []  # applied to the preset's experiment already
        pinned = pinned_by(experiment, overrides=request.overrides)
    else:
        raise ConfigError("plan needs an experiment file or --model (a preset such as llama-3.1-8b)")
    seq_len = request.seq_len or experiment.data.seq_len
    if seq_len < 1 or experiment.train.global_batch_tokens % seq_len:
        raise ConfigError(
            f"train.global_batch_tokens {experiment.train.global_batch_tokens} is not a multiple of "
            f"the sequence length {seq_len}"
        )
    hardware, device_mem = planned_hardware(
        request.device_type, request.devices, request.nodes, request.gpu, request.device_name, request.device_mem,
        experiment.hardware.device_mem, request.network,
    )  # fmt: skip
    _check_float8_hardware(experiment, hardware)
    config = planning_config(experiment.model, Path(experiment.base_dir))
    if request.probe and plans_this_machine(hardware):  # predictions for this machine's devices start from its probe
        ensure_probe(hardware)
    candidates = plan(experiment, config, hardware, device_mem, seq_len, pinned)
    return Planned(experiment, hardware, device_mem, seq_len, overrides, candidates)


def _check_float8_hardware(experiment: Experiment, hardware: Hardware) -> None:
    """train.precision fp8 is planned only for GPUs with a float8 peak (trainer.hardware.DEVICES): the ones the
    launcher runs it on (compute capability 8.9+)."""
    if experiment.train.precision != "fp8":
        return
    if hardware.device_type != "cuda" or peak_fp8_flops(hardware.device_name) is None:
        raise ConfigError(
            f"train.precision fp8: the {hardware.device_name} has no float8 tensor cores that meshpilot knows of "
            "(L4, L40S, RTX 4090, H100, H200, B200: --gpu); plan it in bf16"
        )
