"""Apply a layout to a model, in torchtitan's order: tensor parallel, expert parallel, activation checkpointing,
compile, then data parallel (FSDP2 when anything is sharded, DDP for pure replication). Each technique is a module
of its own beside this one (tensor_parallel, expert_parallel, activation_checkpointing, compile, data_parallel,
pipeline, context_parallel)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import fully_shard
from torch.nn.parallel import DistributedDataParallel

from trainer.config import TrainSpec
from trainer.layout import Layout, expert_fsdp_dims, expert_mesh, fsdp_mesh
from trainer.model.moe import is_moe
from trainer.parallel.activation_checkpointing import enable_activation_checkpointing
from trainer.parallel.compile import compile_layers, compiles_whole_step
from trainer.parallel.context_parallel import ContextParallel
from trainer.parallel.data_parallel import apply_fsdp, fsdp_options, shard_layer
from trainer.parallel.expert_parallel import apply_expert_parallel
from trainer.parallel.pipeline import Pipeline, build_pipeline, split_model
from trainer.parallel.tensor_parallel import apply_tensor_parallel, saves_split_inputs


def parallelize(
    model: torch.nn.Module,
    layout: Layout,
    mesh: DeviceMesh,
    spec: TrainSpec,
    device_type: str,
    materialize: Callable[[torch.nn.Module], None],
) -> torch.nn.Module:
    """Split a meta-device model for the layout, `materialize` this rank's part, then wrap it for replication."""
    if layout.tp > 1:
        apply_tensor_parallel(model, mesh["tp"], saves_split_inputs(spec.activation_checkpointing))
    experts_fsdp = apply_experts(model, layout, device_type, spec.experts)
    enable_activation_checkpointing(model, spec.activation_checkpointing, spec.compile)  # none, selective or full
    if spec.compile and not compiles_whole_step(layout):
        compile_layers(model.get_decoder().layers)
    if layout.fsdp:
        # HSDP when dp_replicate > 1: shard within dp_shard x cp, replicate across dp_replicate.
        apply_fsdp(model, fsdp_mesh(layout, mesh), spec, experts_fsdp, layout.dp_degree * layout.cp)
    materialize(model)  # DDP broadcasts rank 0's values: they must exist first
    if layout.dp_replicate > 1 and not layout.fsdp:
        device_ids = [torch.cuda.current_device()] if device_type == "cuda" else None
        model = DistributedDataParallel(
            model, device_ids=device_ids, process_group=mesh["dp_replicate"].get_group(), gradient_as_bucket_view=True
        )
    return model


def apply_experts(model: torch.nn.Module, layout: Layout, device_type: str, kernel: str) -> DeviceMesh | None:
    """A mixture-of-experts model's experts run through trainer.parallel.expert_parallel's dispatch (under ep=1
    too: one code path, and it counts each expert's tokens); under ep > 1 each rank keeps 1/ep of them, a DTensor
    over the expert mesh's "ep" dimension. Experts stay whole across tensor-parallel ranks (the model's
    tensor-parallel plan splits attention and dense MLPs; its expert entries are styles this trainer does not
    apply), which then compute the same tokens. Returns the mesh FSDP2 shards the experts over (None: they are
    sharded with their layer, as any parameter). `kernel`: train.experts as the launcher resolved it."""
    if not is_moe(model.config):
        return None
    if layout.ep == 1:
        apply_expert_parallel(model, None, kernel)
        return None
    experts = expert_mesh(layout, device_type)
    apply_expert_parallel(model, None, kernel, ep_mesh=experts["ep"])
    return experts[expert_fsdp_dims(layout)]


def parallelize_pipeline(
    model: torch.nn.Module,
    layout: Layout,
    mesh: DeviceMesh,
    spec: TrainSpec,
    grad_accum: int,
    device: torch.device,
    materialize: Callable[[torch.nn.Module], None],
    packed: bool = True,
    context: ContextParallel | None = None,
) -> tuple[torch.nn.Module, Pipeline]:
    """Cut the meta-device model into this rank's pipeline stages, then tensor parallel and FSDP2 within each
    stage, then `materialize` only what this rank holds.

    Data parallelism inside a pipeline is always FSDP2 (HSDP with a shard group of one for pure replication):
    it changes no parameter names, and torch's pipeline stages know to reduce its gradients on the last
    micro-batch only.
    """
    # set on the layers, which stages keep
    enable_activation_checkpointing(model, spec.activation_checkpointing, spec.compile)
    pp_rank = mesh.get_local_rank("pp")
    flex = spec.attention == "flex"  # resolved by the launcher (trainer.model.attention.choose_attention)
    rank_model, stages, stage_ids = split_model(
        model, pp_rank, layout.pp, spec.pp_stages_per_rank, packed, context, flex
    )
    if layout.tp > 1:
        # The last stage hands its vocabulary-split logits to the schedule's loss as plain tensors (StepLoss).
        apply_tensor_parallel(
            rank_model, mesh["tp"], saves_split_inputs(spec.activation_checkpointing), local_logits=True
        )
    experts_fsdp = apply_experts(rank_model, layout, device.type, spec.experts)
    if spec.compile:
        for stage in stages:
            compile_layers(stage.layers)
    if layout.fsdp:
        dp_mesh = fsdp_mesh(layout, mesh)
        stage_options = fsdp_options(spec)
        if "mp_policy" in stage_options:  # an MoE model's router sums cross stages in fp32, not cast to bf16 (the
            # hidden states arrive in bf16 already, from the stage before; each layer casts its own inputs)
            policy = stage_options["mp_policy"]
            stage_options["mp_policy"] = dataclasses.replace(policy, cast_forward_inputs=False)
        for stage in stages:
            for layer in stage.layers:
                shard_layer(layer, dp_mesh, spec, experts_fsdp, layout.dp_degree * layout.cp)
            fully_shard(stage, mesh=dp_mesh, **stage_options)
    materialize(rank_model)
    pp_group = mesh["pp"].get_group()
    schedule = spec.pp_stages_per_rank, spec.pp_schedule, grad_accum
    moe_config = model.config if is_moe(model.config) else None  # its last stage adds the router losses
    vocab_split = None
    if layout.tp > 1:  # the last stage's logits are this tp rank's vocabulary columns, from its first on
        first = -(-model.config.vocab_size // layout.tp) * mesh.get_local_rank("tp")
        vocab_split = first, mesh["tp"].get_group()
    pipeline = build_pipeline(stages, stage_ids, layout.pp, *schedule, pp_group, device, moe_config, vocab_split)
    return rank_model, pipeline
