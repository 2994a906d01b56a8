"""Pipeline parallelism: cut a transformers decoder-only model into stages and run them with
torch.distributed.pipelining (GPipe, 1F1B, interleaved 1F1B).

Stage s of S holds the layers i with i * S // num_layers == s (equal runs, as the memory model assumes), the
embedding on stage 0 and the final norm and output head on stage S - 1. With interleaving, rank r of a pp-way
pipeline holds stages r, r + pp, r + 2 pp, ... (torch's loop-style placement).

Each rank keeps one pruned copy of the model, `RankModel`, holding every module of its stages under the model's
own names (model.layers.7.mlp..., lm_head): its state dict reads like the unsplit model's, so checkpoints are
ordinary model checkpoints and the optimizer sees one module. `DecoderStage` modules are views over its parts
that the schedule runs.

Between stages travel the hidden states and the segment ids of the packed rows; every stage rebuilds the
position ids and the document mask from the segment ids, so packed documents stay isolated on every stage without
sending a seq x seq mask: flex_attention's BlockMask where train.attention is flex (CUDA: no dense mask, as in
every other layout), else the dense block-diagonal causal bias. Under context parallelism the hidden states hold
this cp rank's tokens and the segment ids are the full rows' (cheap), from which each stage takes its local
position ids and its mask against the gathered keys (trainer.parallel.context_parallel).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from trainer.data.packing import IGNORE_INDEX, block_causal_mask, mask_bias
from trainer.layout import LayoutError
from trainer.model.attention import document_block_mask
from trainer.parallel.context_parallel import ContextParallel

# torch.distributed.pipelining's schedule classes by name; the module is imported where a pipeline is built: it
# pulls in torch._dynamo (half a second), which the launcher and the planner do not need.
SCHEDULES = {"gpipe": "ScheduleGPipe", "1f1b": "Schedule1F1B", "interleaved_1f1b": "ScheduleInterleaved1F1B"}


def check_pipeline(pp: int, config, schedule: str, stages_per_rank: int, grad_accum: int) -> None:
    """Refuse a pipeline layout the model or the schedule cannot run, naming the constraint."""
    if pp == 1:
        return
    if schedule not in SCHEDULES:
        raise LayoutError(f"train.pp_schedule: {schedule!r} is not one of {', '.join(SCHEDULES)}")
    interleaved = schedule == "interleaved_1f1b"
    if interleaved != (stages_per_rank > 1):
        raise LayoutError(
            f"train.pp_stages_per_rank={stages_per_rank} with pp_schedule {schedule}: "
            "interleaved_1f1b needs 2 or more stages per rank, gpipe and 1f1b exactly 1"
        )
    stages = pp * stages_per_rank
    if stages > config.num_hidden_layers:
        raise LayoutError(
            f"layout pp={pp} x {stages_per_rank} stages per rank exceeds the model's {config.num_hidden_layers} layers"
        )
    if getattr(config, "tie_word_embeddings", False):
        raise LayoutError(
            f"layout pp={pp}: the model ties its embedding to its output head, which sit on different stages"
        )
    if schedule == "1f1b" and grad_accum < pp:
        raise LayoutError(
            f"layout pp={pp} with 1f1b needs at least {pp} micro-batches per step, got {grad_accum} "
            "(lower train.micro_batch)"
        )
    rounds = max(1, grad_accum // pp)
    if interleaved and grad_accum % rounds:
        raise LayoutError(
            f"layout pp={pp} with interleaved_1f1b needs micro-batches per step ({grad_accum}) divisible by {rounds}"
        )


def stage_of_layer(layer: int, num_layers: int, num_stages: int) -> int:
    return layer * num_stages // num_layers


def local_stages(pp_rank: int, pp: int, stages_per_rank: int) -> list[int]:
    return [pp_rank + k * pp for k in range(stages_per_rank)]


def in_flight_micro_batches(schedule: str, pp: int, stages_per_rank: int, grad_accum: int, pp_rank: int) -> float:
    """How many micro-batches' activations a rank holds at most, in units of all its layers' worth.

    GPipe runs every forward before any backward. 1F1B lets stage r run pp - r forwards ahead. Interleaved 1F1B
    warms up (stages_per_rank - 1) * per_round + 2 * (pp - 1 - r) stage-forwards and runs one more before the
    first backward, each over 1/stages_per_rank of the rank's layers (torch's ScheduleInterleaved1F1B, whose
    rounds hold per_round = grad_accum // rounds micro-batches, rounds = max(1, grad_accum // pp)).
    """
    if schedule == "gpipe":
        return grad_accum
    if schedule == "1f1b":
        return min(pp - pp_rank, grad_accum)
    per_round = grad_accum // max(1, grad_accum // pp)
    warmup = (stages_per_rank - 1) * per_round + 2 * (pp - 1 - pp_rank)
    return min(warmup + 1, stages_per_rank * grad_accum) / stages_per_rank


def position_ids_from_segments(segment_ids: torch.Tensor) -> torch.Tensor:
    """Positions restarting at 0 where each segment starts (as trainer.data.packing.row_from_segments makes them)."""
    index = torch.arange(segment_ids.shape[-1], device=segment_ids.device).expand_as(segment_ids)
    is_start = torch.ones_like(segment_ids, dtype=torch.bool)
    is_start[:, 1:] = segment_ids[:, 1:] != segment_ids[:, :-1]
    starts = torch.where(is_start, index, torch.zeros_like(index)).cummax(dim=-1).values
    return index - starts


class RankModel(nn.Module):
    """The parts of a causal LM that this rank's stages hold, under the unsplit model's module names."""

    def __init__(self, model: nn.Module, layer_ids: list[int], has_embedding: bool, has_head: bool):
        super().__init__()
        decoder = model.get_decoder()
        decoder.layers = nn.ModuleDict({str(i): decoder.layers[i] for i in layer_ids})
        if not has_embedding:
            decoder.embed_tokens = None
        if not has_head:
            decoder.norm = None
        self.model = decoder
        self.lm_head = model.lm_head if has_head else None
        self.config = model.config

    def get_decoder(self) -> nn.Module:
        return self.model


class DecoderStage(nn.Module):
    """One pipeline stage: (input ids or hidden states, segment ids) -> (hidden states, segment ids), or logits
    on the last stage."""

    def __init__(
        self,
        rank_model: RankModel,
        layer_ids: list[int],
        is_first: bool,
        is_last: bool,
        packed: bool,
        context: ContextParallel | None = None,
        flex: bool = False,
    ):
        super().__init__()
        self.packed = packed  # unpacked rows need no mask: causal attention alone (trainer.data.packing.model_inputs)
        self.flex = flex  # packed rows' mask as flex_attention's BlockMask (train.attention: flex)
        self.context = context
        decoder = rank_model.model
        self.embed_tokens = decoder.embed_tokens if is_first else None
        self.layers = nn.ModuleList([decoder.layers[str(i)] for i in layer_ids])
        self.rotary_emb = decoder.rotary_emb
        self.norm = decoder.norm if is_last else None
        self.lm_head = rank_model.lm_head if is_last else None

    def document_mask(self, segment_ids: torch.Tensor):
        """The packed rows' mask for this stage's layers: a BlockMask under flex, else the dense boolean mask (made a
        bias below); None for unpacked rows."""
        if not self.packed:
            return None
        return document_block_mask(segment_ids) if self.flex else block_causal_mask(segment_ids)

    def forward(self, inputs: torch.Tensor, segment_ids: torch.Tensor):
        hidden = self.embed_tokens(inputs) if self.embed_tokens is not None else inputs
        position_ids = position_ids_from_segments(segment_ids)
        if self.context is not None:
            position_ids, mask = self.context.local(position_ids), self.context.mask(segment_ids)
        else:
            mask = self.document_mask(segment_ids)
        if isinstance(mask, torch.Tensor):  # one bias for the stage's layers, in the dtype they compute in
            autocast = torch.is_autocast_enabled(hidden.device.type)
            mask = mask_bias(mask, torch.get_autocast_dtype(hidden.device.type) if autocast else hidden.dtype)
        rotary = self.rotary_emb(hidden, position_ids)
        for layer in self.layers:
            hidden = layer(hidden, attention_mask=mask, position_ids=position_ids, position_embeddings=rotary)
        if self.lm_head is None:
            return hidden, segment_ids
        return self.lm_head(self.norm(hidden))


def split_model(
    model: nn.Module,
    pp_rank: int,
    pp: int,
    stages_per_rank: int,
    packed: bool = True,
    context: ContextParallel | None = None,
    flex: bool = False,
) -> tuple[RankModel, list[DecoderStage], list[int]]:
    """This rank's RankModel, its stage modules and their global stage indices (`flex`: packed rows' masks as
    flex_attention's BlockMask)."""
    num_stages = pp * stages_per_rank
    num_layers = model.config.num_hidden_layers
    stage_ids = local_stages(pp_rank, pp, stages_per_rank)
    layers = {s: [i for i in range(num_layers) if stage_of_layer(i, num_layers, num_stages) == s] for s in stage_ids}
    rank_model = RankModel(
        model,
        [i for s in stage_ids for i in layers[s]],
        has_embedding=0 in stage_ids,
        has_head=num_stages - 1 in stage_ids,
    )
    stages = [
        DecoderStage(rank_model, layers[s], s == 0, s == num_stages - 1, packed, context, flex) for s in stage_ids
    ]
    return rank_model, stages, stage_ids


@dataclass
class Pipeline:
    """This rank's stages and the schedule that runs them; `run` is one optimizer step's forward and backward."""

    schedule: object
    has_first: bool
    has_last: bool
    group: dist.ProcessGroup
    loss_scale: list[float]  # [scale]: the loss function reads the current step's normalisation here
    stages: dict[int, nn.Module]  # this rank's stage modules by global stage index (what the schedule calls)

    def run(self, micro_batches: list[dict[str, torch.Tensor]], scale: float) -> torch.Tensor:
        """Forward and backward of the step's micro-batches; the sum of target cross-entropy on the last stage
        (0 elsewhere), summed over the pipeline group so every stage knows it."""
        self.loss_scale[0] = scale
        # Under context parallelism the stages need the full rows' segment ids (see the module docstring).
        segments = "row_segment_ids" if "row_segment_ids" in micro_batches[0] else "segment_ids"
        joined = {k: torch.cat([b[k] for b in micro_batches]) for k in ("input_ids", segments, "labels")}
        args = (joined["input_ids"], joined[segments]) if self.has_first else ()
        losses: list[torch.Tensor] = []
        kwargs = {"target": joined["labels"], "losses": losses} if self.has_last else {}
        self.schedule.step(*args, **kwargs)
        device = joined["labels"].device
        loss_sum = torch.zeros((), dtype=torch.float64, device=device)
        if self.has_last:
            loss_sum += sum(loss.detach().double() for loss in losses) / scale
        dist.all_reduce(loss_sum, group=self.group)
        return loss_sum


def build_pipeline(
    stages: list[nn.Module],
    stage_ids: list[int],
    pp: int,
    stages_per_rank: int,
    schedule_name: str,
    grad_accum: int,
    group: dist.ProcessGroup,
    device: torch.device,
) -> Pipeline:
    num_stages = pp * stages_per_rank
    loss_scale = [1.0]

    def loss_fn(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        flat_logits, flat_labels = logits.float().flatten(0, 1), labels.flatten()
        return F.cross_entropy(flat_logits, flat_labels, ignore_index=IGNORE_INDEX, reduction="sum") * loss_scale[0]

    # pipelining only under pp > 1 (the planner imports this module)
    from torch.distributed import pipelining

    pipeline_stages = [
        pipelining.PipelineStage(module, index, num_stages, device, group=group)
        for module, index in zip(stages, stage_ids, strict=True)
    ]
    schedule_class = getattr(pipelining, SCHEDULES[schedule_name])
    # The loss is already normalised by the step's real token count: no further division by micro-batches.
    if schedule_class is pipelining.ScheduleInterleaved1F1B:
        schedule = schedule_class(pipeline_stages, grad_accum, loss_fn=loss_fn, scale_grads=False)
    else:
        schedule = schedule_class(pipeline_stages[0], grad_accum, loss_fn=loss_fn, scale_grads=False)
    has_first, has_last = 0 in stage_ids, num_stages - 1 in stage_ids
    return Pipeline(schedule, has_first, has_last, group, loss_scale, dict(zip(stage_ids, stages, strict=True)))
