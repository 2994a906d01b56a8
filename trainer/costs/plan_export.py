"""`meshpilot plan --export`: one planned candidate as something another trainer runs.

- accelerate: an accelerate config file (written with accelerate's own ClusterConfig) and its `accelerate launch`
  line for the user's own script; refused, in one line, for a layout accelerate has no field for (pipelines, expert
  parallelism: its ParallelismConfig holds dp_replicate, dp_shard, tp and cp only).
- torchtitan: a job config TOML (parallel degrees, expert parallelism as expert_parallel_degree and
  expert_tensor_parallel_degree, activation checkpointing, batch sizes, mixed precision).
- torchrun: the `meshpilot train` line (it starts torchrun itself); nothing is written unless the plan was for a
  preset, which has no experiment file: then the experiment is written for the line to name.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from trainer.config import ConfigError, Experiment, checkpointing_mode, half_precision, resolve_precision
from trainer.layout import Layout

if TYPE_CHECKING:
    from accelerate.commands.config.config_args import ClusterConfig

    from trainer.costs.planner import Candidate
    from trainer.hardware import Hardware

TARGETS = ("accelerate", "torchtitan", "torchrun")
ACCELERATE_FILE = "accelerate_config.yaml"
TORCHTITAN_FILE = "torchtitan_job.toml"
RDZV_ENDPOINT = "HOST:29500"  # placeholder: the first node's address, which only the user knows

# meshpilot's pipeline schedules (trainer.parallel.pipeline.SCHEDULES) by the names torchtitan's
# parallelism.pipeline_parallel_schedule takes (torch.distributed.pipelining's schedule names).
TORCHTITAN_SCHEDULES = {"gpipe": "GPipe", "1f1b": "1F1B", "interleaved_1f1b": "Interleaved1F1B"}
# Presets torchtitan ships a model of: its [model] name and flavor.
TORCHTITAN_MODELS = {
    "llama-3.1-8b": ("llama3", "8B"),
    "llama-3.1-70b": ("llama3", "70B"),
    "llama-3.1-405b": ("llama3", "405B"),
}


class ExportRefused(Exception):
    """The target cannot run this layout; the message says why, in one line."""


@dataclass(frozen=True)
class PlanContext:
    """What the plan was made for, besides the candidate."""

    experiment: Experiment
    hardware: Hardware
    seq_len: int
    experiment_path: Path | None  # None: a preset planned without an experiment file
    overrides: list[str] = field(default_factory=list)  # --set (and --model) applied to experiment_path
    preset: str | None = None  # the --model preset (its key in trainer.model.presets.MODELS), if any

    @property
    def precision(self) -> str:
        return resolve_precision(self.experiment.train.precision, self.hardware.device_type)


@dataclass
class Export:
    summary: str  # what was exported, in one line
    launch: str  # the command that runs it
    files: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the target's file cannot hold: set it in the script

    def describe(self) -> str:
        lines = [self.summary, *(f"wrote {path}" for path in self.files), *(f"note: {n}" for n in self.notes)]
        return "\n".join([*lines, f"launch: {self.launch}"])


def pick(candidates: list[Candidate], number: int) -> Candidate:
    """The candidate in row `number` of the plan's table (feasible ones, fastest first)."""
    feasible = [c for c in candidates if c.dropped is None]
    if not feasible:
        raise ConfigError("--export: nothing fits, so there is no candidate to export")
    if not 1 <= number <= len(feasible):
        raise ConfigError(f"--pick {number}: the plan has rows 1 to {len(feasible)}")
    return feasible[number - 1]


def export(target: str, candidate: Candidate, context: PlanContext, directory: Path) -> Export:
    exporters = {"accelerate": export_accelerate, "torchtitan": export_torchtitan, "torchrun": export_torchrun}
    return exporters[target](candidate, context, directory)


# A candidate's checkpointing mode as the export's summary line says it.
_CHECKPOINTING_WORDS = {"none": "off", "full": "on", "selective": "selective"}


def _summary(candidate: Candidate) -> str:
    checkpointing = _CHECKPOINTING_WORDS[checkpointing_mode(candidate.activation_checkpointing)]
    return (
        f"{candidate.layout.describe()}, micro-batch {candidate.micro_batch}, "
        f"grad accum {candidate.grad_accum}, activation checkpointing {checkpointing}"
    )


# --- accelerate ------------------------------------------------------------------------------------------------


def export_accelerate(candidate: Candidate, context: PlanContext, directory: Path) -> Export:
    config = accelerate_config(candidate, context)  # refuses before anything is written
    path = directory / ACCELERATE_FILE
    directory.mkdir(parents=True, exist_ok=True)
    # ClusterConfig.to_yaml_file's own serialization, after a comment saying what the file is for.
    header = f"# accelerate config from `meshpilot plan`: {_summary(candidate)}\n"
    path.write_text(header + _yaml(config.to_dict()))
    return Export(
        f"accelerate: {_summary(candidate)}",
        shlex.join(["accelerate", "launch", "--config_file", str(path), *_accelerate_nodes(context), "train.py"]),
        [path],
        _accelerate_notes(candidate, context),
    )


def accelerate_config(candidate: Candidate, context: PlanContext) -> ClusterConfig:
    """The candidate as accelerate's ClusterConfig: DDP as MULTI_GPU; sharding, tp and cp as FSDP2 with
    accelerate's parallelism config (dp_replicate x dp_shard is HSDP there as here)."""
    # accelerate (a slow import) only for the accelerate config this export writes
    from accelerate.commands.config.config_args import ClusterConfig
    from accelerate.utils import ComputeEnvironment

    layout, cpu = candidate.layout, context.hardware.device_type == "cpu"
    parallelism = _accelerate_parallelism(layout, cpu)
    return ClusterConfig(
        compute_environment=ComputeEnvironment.LOCAL_MACHINE,
        distributed_type=_accelerate_distributed_type(layout, cpu),
        mixed_precision=_accelerate_precision(context.precision),
        # accelerate's AO backend is torchao's float8, the library meshpilot's fp8 runs
        fp8_config={"backend": "AO"} if context.precision == "fp8" else {},
        use_cpu=cpu,
        debug=False,
        num_processes=layout.world_size,  # accelerate's count is over every machine
        num_machines=context.hardware.nodes,
        fsdp_config=_accelerate_fsdp(candidate) if layout.fsdp else {},
        parallelism_config=parallelism,
    )


def _accelerate_precision(precision: str) -> str:
    return {"fp8": "fp8", "bf16": "bf16"}.get(precision, "no")


def _accelerate_parallelism(layout: Layout, cpu: bool) -> dict:
    """accelerate's parallelism_config keys, after accelerate's own ParallelismConfig has checked the degrees."""
    if layout.ep > 1:
        raise ExportRefused(
            f"accelerate cannot run this layout: ep={layout.ep}, and accelerate has no expert parallelism "
            "(its parallelism config holds dp_replicate, dp_shard, tp and cp)"
        )
    if layout.pp > 1:
        raise ExportRefused(
            f"accelerate cannot run this layout: pp={layout.pp}, and accelerate has no pipeline parallelism "
            "(its parallelism config holds dp_replicate, dp_shard, tp and cp)"
        )
    if not (layout.fsdp or layout.tp > 1):
        return {}  # plain DDP (or one process): accelerate's MULTI_GPU, no parallelism config
    if cpu:
        raise ExportRefused(
            f"accelerate cannot run this layout: {layout.describe()} needs FSDP2, which it runs on GPUs"
        )
    # accelerate (a slow import) only for the accelerate config this export writes
    from accelerate.parallelism_config import ParallelismConfig

    sizes = {"dp_replicate": layout.dp_replicate, "dp_shard": layout.dp_shard, "tp": layout.tp, "cp": layout.cp}
    try:
        ParallelismConfig(**{f"{name}_size": size for name, size in sizes.items()})
    except ValueError as error:  # e.g. tp or cp with dp_replicate but no dp_shard: accelerate composes neither
        reason = str(error).split(". ")[0]
        raise ExportRefused(f"accelerate cannot run this layout: {layout.describe()}: {reason}") from None
    config = {f"parallelism_config_{name}_size": size for name, size in sizes.items()}
    if layout.cp > 1:
        config["parallelism_config_cp_comm_strategy"] = "allgather"  # torch's default rotation, as meshpilot runs
    return config


def _accelerate_distributed_type(layout: Layout, cpu: bool):
    # accelerate (a slow import) only for the accelerate config this export writes
    from accelerate.utils import DistributedType

    if layout.world_size == 1:
        return DistributedType.NO
    if layout.fsdp:
        return DistributedType.FSDP
    return DistributedType.MULTI_CPU if cpu else DistributedType.MULTI_GPU


def _accelerate_fsdp(candidate: Candidate) -> dict:
    """FSDP2 as meshpilot runs it: one unit per decoder layer (the model's _no_split_modules), resharded after
    the forward pass (fully_shard's default)."""
    return {
        "fsdp_version": 2,
        "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
        "fsdp_reshard_after_forward": True,
        "fsdp_offload_params": False,
        "fsdp_state_dict_type": "SHARDED_STATE_DICT",
        # accelerate checkpoints whole layers or nothing: selective becomes full (see _accelerate_notes)
        "fsdp_activation_checkpointing": checkpointing_mode(candidate.activation_checkpointing) != "none",
    }


def _accelerate_nodes(context: PlanContext) -> list[str]:
    if context.hardware.nodes == 1:
        return []
    host, port = RDZV_ENDPOINT.split(":")
    return ["--machine_rank", "0", "--main_process_ip", host, "--main_process_port", port]


def _accelerate_notes(candidate: Candidate, context: PlanContext) -> list[str]:
    """What the config file has no field for, so train.py must do it."""
    notes = [
        f"in train.py: a per-process batch of {candidate.micro_batch} x {context.seq_len} tokens, "
        f"Accelerator(gradient_accumulation_steps={candidate.grad_accum})"
    ]
    mode = checkpointing_mode(candidate.activation_checkpointing)
    if mode == "selective":
        notes.append("accelerate has no selective activation checkpointing: this exports full (whole layers)")
    if mode != "none" and not candidate.layout.fsdp:
        notes.append("in train.py: model.gradient_checkpointing_enable() (the config has it only under FSDP)")
    if candidate.layout.tp > 1:
        notes.append("in train.py: load the model with from_pretrained(..., tp_plan='auto') for tp")
    if context.precision == "fp8":
        recipe = context.experiment.train.float8_recipe
        notes.append(
            "in train.py: Accelerator(kwargs_handlers=[AORecipeKwargs(config=Float8LinearConfig.from_recipe_name("
            f"'{recipe}'), module_filter_func=...)]): accelerate's AO backend keeps the first and last linear layers "
            "in bf16 by default, where meshpilot converts every decoder layer's linear layers and keeps the head"
        )
    if context.hardware.nodes > 1:
        notes.append(f"every node runs the launch line with its own --machine_rank; {RDZV_ENDPOINT}: the first node")
    return notes


def _yaml(data: dict) -> str:
    return yaml.safe_dump(data)


# --- torchtitan ------------------------------------------------------------------------------------------------

# Keys of torchtitan's TOML JobConfig as of torchtitan v0.2.0 (torchtitan/config/job_config.py: [training]
# local_batch_size, global_batch_size, seq_len, mixed_precision_param; [parallelism] *_degree,
# pipeline_parallel_schedule, pipeline_parallel_microbatch_size; [activation_checkpoint] mode,
# selective_ac_option).


def export_torchtitan(candidate: Candidate, context: PlanContext, directory: Path) -> Export:
    path = directory / TORCHTITAN_FILE
    directory.mkdir(parents=True, exist_ok=True)
    header = [
        f"torchtitan job config from `meshpilot plan`: {_summary(candidate)}",
        "keys of torchtitan v0.2.0's JobConfig; merge into your model's train config",
    ]
    path.write_text(toml(torchtitan_tables(candidate, context), header))
    devices = context.hardware.devices_per_node
    command = ["torchrun", f"--nproc_per_node={devices}"]
    if context.hardware.nodes > 1:
        command += [f"--nnodes={context.hardware.nodes}", "--node_rank=0", "--rdzv_backend=c10d"]
        command += [f"--rdzv_endpoint={RDZV_ENDPOINT}"]
    command += ["-m", "torchtitan.train", "--job.config_file", str(path)]
    return Export(
        f"torchtitan: {_summary(candidate)}", shlex.join(command), [path], _torchtitan_notes(candidate, context)
    )


def torchtitan_tables(candidate: Candidate, context: PlanContext) -> dict[str, dict[str, object]]:
    layout, train = candidate.layout, context.experiment.train
    # torchtitan accumulates global_batch_size / (local_batch_size x dp) batches per step; under a pipeline the
    # local batch is instead split into pipeline micro-batches, which is what meshpilot's grad_accum counts then.
    in_pipeline = candidate.grad_accum if layout.pp > 1 else 1
    local_batch = candidate.micro_batch * in_pipeline
    tables: dict[str, dict[str, object]] = {}
    if context.preset in TORCHTITAN_MODELS:
        name, flavor = TORCHTITAN_MODELS[context.preset]
        tables["model"] = {"name": name, "flavor": flavor}
    tables["training"] = {
        "local_batch_size": local_batch,
        "global_batch_size": candidate.micro_batch * candidate.grad_accum * layout.dp_degree,
        "seq_len": context.seq_len,
        "mixed_precision_param": "bfloat16" if half_precision(context.precision) else "float32",
    }
    parallelism = {
        "data_parallel_replicate_degree": layout.dp_replicate,
        "data_parallel_shard_degree": layout.dp_shard,
        "tensor_parallel_degree": layout.tp,
        "context_parallel_degree": layout.cp,
        "pipeline_parallel_degree": layout.pp,
    }
    if layout.ep > 1:
        parallelism.update(_torchtitan_experts(layout))
    if layout.pp > 1:
        parallelism["pipeline_parallel_schedule"] = TORCHTITAN_SCHEDULES[train.pp_schedule]
        parallelism["pipeline_parallel_microbatch_size"] = candidate.micro_batch
    tables["parallelism"] = parallelism
    if context.precision == "fp8":
        tables.update(_torchtitan_float8(tables, train.float8_recipe))
    # meshpilot's full checkpoints whole decoder layers (their inputs kept), torchtitan's "full"; its selective is
    # torchtitan's per-op policy (every other matmul and attention kept), selective_ac_option "op".
    mode = checkpointing_mode(candidate.activation_checkpointing)
    tables["activation_checkpoint"] = {"mode": mode}
    if mode == "selective":
        tables["activation_checkpoint"]["selective_ac_option"] = "op"
    return tables


def _torchtitan_float8(tables: dict[str, dict[str, object]], recipe: str) -> dict[str, dict[str, object]]:
    """train.precision fp8 as torchtitan's float8 converter (v0.2.0's quantize.linear.float8): the same torchao
    recipe, without float8 all-gathers (meshpilot gathers bf16), the output head and MoE routers kept bf16 as
    meshpilot keeps them (trainer.parallel.float8)."""
    model = {**tables.get("model", {}), "converters": ["quantize.linear.float8"]}
    return {"model": model, "quantize.linear.float8": {"recipe_name": recipe, "filter_fqns": ["output", "router.gate"]}}


def _torchtitan_experts(layout: Layout) -> dict[str, int]:
    """ep as torchtitan's degrees: its expert parallelism borrows dp_shard x cp as meshpilot's does, but must hold
    whole cp groups (ep % cp == 0); with tp it either splits the experts over tp too (etp = tp) or borrows tp's
    ranks as well (etp = 1): meshpilot does neither (each tp rank runs its ep rank's whole experts), so tp exports
    as etp = tp, the nearer of the two, said in a note."""
    if layout.ep % layout.cp:
        raise ExportRefused(
            f"torchtitan cannot run this layout: ep={layout.ep} with cp={layout.cp}: its expert parallelism must "
            "be a multiple of cp"
        )
    return {"expert_parallel_degree": layout.ep, "expert_tensor_parallel_degree": layout.tp}


def _torchtitan_notes(candidate: Candidate, context: PlanContext) -> list[str]:
    notes = []
    if candidate.layout.ep > 1 and candidate.layout.tp > 1:
        notes.append(
            f"expert_tensor_parallel_degree={candidate.layout.tp}: torchtitan splits the experts over tp, where "
            "meshpilot keeps each ep rank's experts whole on every tp rank (less expert memory, more tp traffic)"
        )
    if context.preset not in TORCHTITAN_MODELS:
        notes.append("set [model] name and flavor to torchtitan's model of this architecture")
    if candidate.layout.pp > 1 and context.experiment.train.pp_schedule == "interleaved_1f1b":
        stages = context.experiment.train.pp_stages_per_rank
        notes.append(f"{stages} stages per rank: set parallelism.pipeline_parallel_layers_per_stage to match")
    return notes


def toml(tables: dict[str, dict[str, object]], header: Sequence[str] = ()) -> str:
    """Flat TOML tables of strings, numbers, booleans and lists of them (the standard library reads TOML but cannot
    write it); a dotted name ("quantize.linear.float8") is a nested table."""
    lines = [f"# {line}" for line in header]
    for name, table in tables.items():
        lines += ["", f"[{name}]", *(f"{key} = {_toml_value(value)}" for key, value in table.items())]
    return "\n".join(lines) + "\n"


def _toml_value(value: object) -> str:
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(item) for item in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    return json.dumps(str(value))  # a JSON string is a TOML basic string: the same quotes and escapes


# --- torchrun (meshpilot train) --------------------------------------------------------------------------------


def export_torchrun(candidate: Candidate, context: PlanContext, directory: Path) -> Export:
    files = []
    experiment_file = context.experiment_path
    if experiment_file is None:  # a preset: `meshpilot train` needs the planned experiment as a file
        experiment_file = directory / f"{context.preset}.yaml"
        directory.mkdir(parents=True, exist_ok=True)
        experiment_file.write_text(_yaml(context.experiment.to_dict()))
        files.append(experiment_file)
    notes = []
    if context.hardware.nodes > 1:
        notes.append(f"every node runs the line with its own --node-rank; {RDZV_ENDPOINT}: the first node")
    command = train_command(candidate, context, experiment_file)
    return Export(f"torchrun: {_summary(candidate)}", shlex.join(command), files, notes)


def train_command(candidate: Candidate, context: PlanContext, experiment_file: Path) -> list[str]:
    """`meshpilot train` with the candidate's degrees and settings; it runs torchrun on each node."""
    layout, hardware = candidate.layout, context.hardware
    command = ["meshpilot", "train", str(experiment_file), "--nproc", str(hardware.devices_per_node)]
    if layout.world_size > 1:
        command += ["--layout", layout.argument()]
    if hardware.nodes > 1:
        command += ["--nnodes", str(hardware.nodes), "--node-rank", "0", "--rdzv-endpoint", RDZV_ENDPOINT]
    settings = [
        *context.overrides,
        f"train.micro_batch={candidate.micro_batch}",
        f"train.activation_checkpointing={str(candidate.activation_checkpointing).lower()}",
    ]
    if context.seq_len != context.experiment.data.seq_len:  # planned at --seq-len
        settings.append(f"data.seq_len={context.seq_len}")
    for setting in settings:
        command += ["--set", setting]
    return command
