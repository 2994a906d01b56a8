"""`meshpilot plan --export`: a planned candidate as accelerate's config, a torchtitan job config or the
`meshpilot train` line, each read back by the target's own parser. No training, no network."""

from __future__ import annotations

import argparse
import shlex
import tomllib

import pytest
import yaml
from support import TINY_MODEL, meshpilot, write_experiment

from trainer.config import load_experiment
from trainer.costs.plan_export import ExportRefused, PlanContext, export, toml
from trainer.costs.planner import Candidate
from trainer.hardware import Hardware
from trainer.layout import Layout

MODEL = {**TINY_MODEL, "num_hidden_layers": 4}


def context(tmp_path, nodes: int = 1, seq_len: int = 64, train: dict | None = None) -> PlanContext:
    path = write_experiment(tmp_path, {"model": {"config": MODEL}, "train": train or {}})
    hardware = Hardware("cuda", "NVIDIA H100 80GB HBM3", devices_per_node=8 // nodes, nodes=nodes)
    return PlanContext(load_experiment(path), hardware, seq_len, path, ["train.lr=0.002"])


def candidate(layout: str, micro_batch: int = 2, grad_accum: int = 4, checkpointing: bool | str = False) -> Candidate:
    return Candidate(Layout.parse(layout), micro_batch, grad_accum, checkpointing, memory={"peak": 0})


def accelerate_launch_env(launch: str) -> dict[str, str]:
    """What `accelerate launch` would hand the processes: accelerate's own parser and checks, nothing started."""
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils.launch import prepare_multi_gpu_env

    argv = shlex.split(launch)
    assert argv[:2] == ["accelerate", "launch"] and argv[-1] == "train.py"
    args, _, _ = _validate_launch_command(launch_command_parser().parse_args(argv[2:]))
    return prepare_multi_gpu_env(args)


def test_accelerate_config_loads_with_accelerates_own_classes(tmp_path):
    from accelerate.commands.config.config_args import ClusterConfig
    from accelerate.utils import DistributedType

    done = export("accelerate", candidate("dp_replicate=2,dp_shard=2,tp=2", checkpointing=True), context(tmp_path),
                  tmp_path / "out")  # fmt: skip
    config = ClusterConfig.from_yaml_file(str(done.files[0]))
    assert config.distributed_type == DistributedType.FSDP and config.mixed_precision == "bf16"
    assert (config.num_processes, config.num_machines) == (8, 1)
    assert config.fsdp_config["fsdp_version"] == 2 and config.fsdp_config["fsdp_activation_checkpointing"] is True
    sizes = {k.removeprefix("parallelism_config_"): v for k, v in config.parallelism_config.items()}
    assert sizes == {"dp_replicate_size": 2, "dp_shard_size": 2, "tp_size": 2, "cp_size": 1}
    env = accelerate_launch_env(done.launch)  # HSDP x tp reaches the processes as accelerate's parallelism config
    assert env["ACCELERATE_USE_FSDP"] == "true" and env["FSDP_VERSION"] == "2"
    assert [env[f"PARALLELISM_CONFIG_{d}_SIZE"] for d in ("DP_REPLICATE", "DP_SHARD", "TP", "CP")] == list("2221")
    assert any("gradient_accumulation_steps=4" in note for note in done.notes)  # what the file has no field for


@pytest.mark.parametrize(
    ("layout", "distributed_type", "nodes"),
    [("dp_replicate=8", "MULTI_GPU", 1), ("dp_shard=4,cp=2", "FSDP", 2), ("tp=8", "MULTI_GPU", 1)],
)
def test_accelerate_runs_ddp_cp_and_tp_alone(tmp_path, layout, distributed_type, nodes):
    from accelerate.commands.config.config_args import ClusterConfig

    done = export("accelerate", candidate(layout), context(tmp_path, nodes), tmp_path / "out")
    config = ClusterConfig.from_yaml_file(str(done.files[0]))
    assert config.distributed_type.value == distributed_type
    assert (config.num_processes, config.num_machines) == (8, nodes)
    degrees = Layout.parse(layout).degrees()
    env = accelerate_launch_env(done.launch)
    if layout == "dp_replicate=8":  # plain DDP: accelerate's parallelism config has no pure-replicate form
        assert config.parallelism_config == {} and "ACCELERATE_USE_PARALLELISM_CONFIG" not in env
    else:
        assert {d: int(env[f"PARALLELISM_CONFIG_{d.upper()}_SIZE"]) for d in ("dp_shard", "cp", "tp")} == {
            d: degrees[d] for d in ("dp_shard", "cp", "tp")
        }
    if nodes > 1:
        assert "--machine_rank" in shlex.split(done.launch)


@pytest.mark.parametrize(
    ("layout", "why"),
    [
        ("pp=2,dp_shard=4", "pp=2, and accelerate has no pipeline parallelism"),
        ("dp_replicate=4,cp=2", "cannot be used with pure data parallelism"),  # accelerate's own check says so
        ("dp_shard=8,ep=4", "ep=4, and accelerate has no expert parallelism"),
    ],
)
def test_accelerate_refuses_what_it_cannot_run_in_one_line_and_writes_nothing(tmp_path, layout, why):
    out = tmp_path / "out"
    with pytest.raises(ExportRefused) as refused:
        export("accelerate", candidate(layout), context(tmp_path), out)
    message = str(refused.value)
    assert message.startswith("accelerate cannot run this layout: ") and why in message and "\n" not in message
    assert not out.exists()


def test_torchtitan_job_config(tmp_path):
    ctx = context(tmp_path)
    done = export("torchtitan", candidate("dp_replicate=2,dp_shard=2,tp=2", 2, 4, True), ctx, tmp_path / "out")
    job = tomllib.loads(done.files[0].read_text())
    assert job["parallelism"] == {
        "data_parallel_replicate_degree": 2,
        "data_parallel_shard_degree": 2,
        "tensor_parallel_degree": 2,
        "context_parallel_degree": 1,
        "pipeline_parallel_degree": 1,
    }
    assert job["activation_checkpoint"] == {"mode": "full"}
    # torchtitan accumulates global / (local x dp) = 4 batches per step, as the plan does.
    assert job["training"] == {
        "local_batch_size": 2,
        "global_batch_size": 2 * 4 * 4,
        "seq_len": 64,
        "mixed_precision_param": "bfloat16",
    }
    assert shlex.split(done.launch)[-2:] == ["--job.config_file", str(done.files[0])]


def test_torchtitan_names_expert_parallelism(tmp_path):
    """ep as torchtitan's expert_parallel_degree (borrowed from dp_shard x cp there too); with tp its experts are
    split over tp (etp = tp), which meshpilot does not do: said in a note. An ep that is no multiple of cp, which
    torchtitan cannot run, is refused in one line."""
    done = export("torchtitan", candidate("dp_shard=4,ep=4,tp=2"), context(tmp_path), tmp_path / "out")
    parallelism = tomllib.loads(done.files[0].read_text())["parallelism"]
    assert (parallelism["expert_parallel_degree"], parallelism["expert_tensor_parallel_degree"]) == (4, 2)
    assert any("expert_tensor_parallel_degree=2" in note for note in done.notes)
    plain = export("torchtitan", candidate("dp_shard=8"), context(tmp_path), tmp_path / "dense")
    assert "expert_parallel_degree" not in tomllib.loads(plain.files[0].read_text())["parallelism"]
    with pytest.raises(ExportRefused, match=r"^torchtitan cannot run this layout: ep=2 with cp=4: .*multiple of cp$"):
        export("torchtitan", candidate("dp_shard=2,cp=4,ep=2"), context(tmp_path), tmp_path / "cp")


def test_torchtitan_pipeline_splits_the_local_batch_into_micro_batches(tmp_path):
    done = export("torchtitan", candidate("pp=2,dp_shard=4", 1, 8), context(tmp_path), tmp_path / "out")
    job = tomllib.loads(done.files[0].read_text())
    assert job["parallelism"]["pipeline_parallel_degree"] == 2
    assert job["parallelism"]["pipeline_parallel_schedule"] == "1F1B"  # the experiment's 1f1b, by torch's name
    assert job["parallelism"]["pipeline_parallel_microbatch_size"] == 1
    assert (job["training"]["local_batch_size"], job["training"]["global_batch_size"]) == (8, 32)
    assert job["activation_checkpoint"]["mode"] == "none"


def test_selective_checkpointing_is_torchtitans_per_op_mode_and_full_where_a_target_has_none(tmp_path):
    ctx, chosen = context(tmp_path), candidate("dp_shard=8", 2, 4, "selective")
    job = tomllib.loads(export("torchtitan", chosen, ctx, tmp_path / "tt").files[0].read_text())
    assert job["activation_checkpoint"] == {"mode": "selective", "selective_ac_option": "op"}
    done = export("accelerate", chosen, ctx, tmp_path / "acc")
    assert "activation checkpointing selective" in done.summary
    assert done.notes.count("accelerate has no selective activation checkpointing: this exports full (whole layers)")
    assert yaml.safe_load(done.files[0].read_text())["fsdp_config"]["fsdp_activation_checkpointing"] is True
    line = export("torchrun", chosen, ctx, tmp_path / "run").launch
    assert "train.activation_checkpointing=selective" in shlex.split(line)


def test_toml_writer_round_trips_through_tomllib():
    tables = {"a": {"text": 'quote " back \\ slash\nline', "n": 3, "x": 0.5, "yes": True, "no": False, "l": ["x", 1]}}
    assert tomllib.loads(toml(tables, ["a comment"])) == tables
    assert tomllib.loads(toml({"a.b": {"n": 1}})) == {"a": {"b": {"n": 1}}}


@pytest.mark.parametrize("recipe", ["tensorwise", "rowwise"])
def test_fp8_exports_as_each_targets_float8_with_the_same_recipe(tmp_path, recipe):
    """train.precision fp8 is torchtitan's float8 converter (v0.2.0's keys) and accelerate's AO backend (torchao,
    as meshpilot), never a bf16 run in their place; what a target's file cannot say is a note."""
    ctx = context(tmp_path, train={"precision": "fp8", "float8_recipe": recipe})
    chosen = candidate("dp_shard=8")
    job = tomllib.loads(export("torchtitan", chosen, ctx, tmp_path / "tt").files[0].read_text())
    assert job["model"]["converters"] == ["quantize.linear.float8"]
    assert job["quantize"]["linear"]["float8"] == {"recipe_name": recipe, "filter_fqns": ["output", "router.gate"]}
    assert job["training"]["mixed_precision_param"] == "bfloat16"  # float8 matmuls over bf16 parameters
    done = export("accelerate", chosen, ctx, tmp_path / "acc")
    from accelerate.commands.config.config_args import ClusterConfig

    config = ClusterConfig.from_yaml_file(str(done.files[0]))
    assert (config.mixed_precision, config.fp8_config) == ("fp8", {"backend": "AO"})
    assert accelerate_launch_env(done.launch)["ACCELERATE_MIXED_PRECISION"] == "fp8"
    assert any(f"from_recipe_name('{recipe}')" in note for note in done.notes)
    (tmp_path / "bf16").mkdir()
    bf16 = tomllib.loads(export("torchtitan", chosen, context(tmp_path / "bf16"), tmp_path / "b").files[0].read_text())
    assert "quantize" not in bf16 and "converters" not in bf16.get("model", {})


@pytest.mark.parametrize("nodes", [1, 2])
def test_torchrun_line_parses_back_with_meshpilot_train(tmp_path, nodes):
    from trainer.cli import register

    ctx = context(tmp_path, nodes, seq_len=32)  # planned at --seq-len 32, the file says 64
    chosen = candidate("dp_shard=4,tp=2,ep=2", 2, 4, True)  # ep borrows dp_shard's ranks: still 8 processes
    done = export("torchrun", chosen, ctx, tmp_path / "out")
    assert done.files == []  # the experiment file exists: nothing to write
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    argv = shlex.split(done.launch)
    assert argv[0] == "meshpilot"
    args = parser.parse_args(argv[1:])
    assert args.command == "train" and args.experiment == ctx.experiment_path and args.nproc == 8 // nodes
    assert Layout.parse(args.layout) == chosen.layout
    experiment = load_experiment(args.experiment, args.overrides)
    assert (experiment.train.micro_batch, experiment.train.activation_checkpointing) == (2, True)
    assert (experiment.data.seq_len, experiment.train.lr) == (32, 0.002)
    if nodes > 1:
        assert (args.nnodes, args.node_rank, args.rdzv_endpoint) == (2, 0, "HOST:29500")


def test_plan_exports_a_preset_for_torchtitan_from_the_command_line(tmp_path):
    done = meshpilot(
        "plan", "--model", "llama-3.1-8b", "--devices", "8", "--gpu", "h100", "--top", "1",
        "--export", "torchtitan", "--export-dir", str(tmp_path),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    first_row = done.stdout.splitlines()[2].split()  # "1  LAYOUT  MB ACCUM AC ..."
    job = tomllib.loads((tmp_path / "torchtitan_job.toml").read_text())
    parallelism = job["parallelism"]
    degrees = Layout(
        dp_replicate=parallelism["data_parallel_replicate_degree"],
        dp_shard=parallelism["data_parallel_shard_degree"],
        tp=parallelism["tensor_parallel_degree"],
        cp=parallelism["context_parallel_degree"],
        pp=parallelism["pipeline_parallel_degree"],
    )
    assert first_row[0] == "1" and degrees.describe() == first_row[1] and degrees.world_size == 8
    assert job["model"] == {"name": "llama3", "flavor": "8B"} and job["training"]["seq_len"] == 4096
    assert job["activation_checkpoint"]["mode"] == {"on": "full", "sel": "selective", "off": "none"}[first_row[4]]
    assert f"launch: torchrun --nproc_per_node=8 -m torchtitan.train --job.config_file {tmp_path}" in done.stdout


def test_bad_export_requests_are_refused(tmp_path):
    experiment = write_experiment(tmp_path, {"model": {"config": MODEL}})
    done = meshpilot("plan", str(experiment), "--devices", "2", "--export", "deepspeed")
    assert done.returncode == 2 and "invalid choice: 'deepspeed'" in done.stderr
    done = meshpilot("plan", str(experiment), "--devices", "2", "--export", "torchrun", "--pick", "999")
    assert done.returncode == 2
    assert done.stderr.startswith("meshpilot: error: --pick 999: the plan has rows 1 to ")
    assert len(done.stderr.strip().splitlines()) == 1


def test_torchrun_for_a_preset_writes_the_planned_experiment(tmp_path):
    import dataclasses

    ctx = dataclasses.replace(context(tmp_path), experiment_path=None, overrides=[], preset="llama-3.1-8b")
    done = export("torchrun", candidate("dp_shard=8"), ctx, tmp_path / "out")
    assert done.files == [tmp_path / "out" / "llama-3.1-8b.yaml"]
    assert shlex.split(done.launch)[2] == str(done.files[0])
    assert load_experiment(done.files[0]).to_dict() == ctx.experiment.to_dict()
