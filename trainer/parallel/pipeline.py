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

A mixture-of-experts model's load-balancing loss multiplies the fraction of tokens each expert got by its mean
router probability, both over every layer at once, which no stage sees alone. Both are sums over layers and
tokens, so each stage adds its layers' to a running pair that travels with the hidden states
(trainer.parallel.expert_parallel.RouterSums: exact integer counts, differentiable probability sums), and the last
stage makes the model's loss of the whole sum: its gradient flows back through the sums to every stage's routers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from trainer.data.packing import IGNORE_INDEX, block_causal_mask, mask_bias
from trainer.layout import LayoutError
from trainer.model.attention import document_block_mask
from trainer.model.loss import vocab_parallel_cross_entropy_sum
from trainer.model.moe import RouterLogits, is_moe, routed_token_mask
from trainer.parallel.context_parallel import ContextParallel
from trainer.parallel.expert_parallel import RouterSums, losses_from_sums, router_sums

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
    on the last stage; an MoE model's stages also pass on (and the last returns) the router sums so far."""

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
        self.router = RouterLogits(self) if is_moe(rank_model.config) else None
        self.top_k = getattr(rank_model.config, "num_experts_per_tok", None)

    def document_mask(self, segment_ids: torch.Tensor):
        """The packed rows' mask for this stage's layers: a BlockMask under flex, else the dense boolean mask (made a
        bias below); None for unpacked rows."""
        if not self.packed:
            return None
        return document_block_mask(segment_ids) if self.flex else block_causal_mask(segment_ids)

    def forward(
        self,
        inputs: torch.Tensor,
        segment_ids: torch.Tensor,
        router_counts: torch.Tensor | None = None,
        router_sums: torch.Tensor | None = None,
    ):
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
        routed = () if self.router is None else self.routed(segment_ids, router_counts, router_sums)
        if self.lm_head is None:
            return hidden, segment_ids, *routed
        logits = self.lm_head(self.norm(hidden))
        return (logits, *routed) if routed else logits

    def routed(
        self, segment_ids: torch.Tensor, counts: torch.Tensor | None, sums: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The router sums of the stages before (none on the first) plus this stage's layers' (padding left out,
        as trainer.rank.step does)."""
        logits = self.router.take()
        real = segment_ids >= 0
        if self.context is not None:
            real = self.context.local(real)
        summed = router_sums(logits, self.top_k, routed_token_mask(real, logits))
        if counts is not None:
            summed = RouterSums(counts, sums) + summed
        return summed.counts, summed.sums


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
    loss: StepLoss  # what the loss function reads for the current step
    stages: dict[int, nn.Module]  # this rank's stage modules by global stage index (what the schedule calls)

    def run(
        self, micro_batches: list[dict[str, torch.Tensor]], scale: float, loss_group: dist.ProcessGroup | None = None
    ) -> tuple[torch.Tensor, dict[str, float] | None]:
        """Forward and backward of the step's micro-batches; the sum of target cross-entropy on the last stage
        (0 elsewhere), summed over the pipeline group so every stage knows it, and an MoE model's router losses
        (means over the micro-batches; over `loss_group`'s tokens, as trainer.rank.step takes them)."""
        self.loss.scale, self.loss.group = scale, loss_group
        self.loss.forget()
        # Under context parallelism the stages need the full rows' segment ids (see the module docstring).
        segments = "row_segment_ids" if "row_segment_ids" in micro_batches[0] else "segment_ids"
        joined = {k: torch.cat([b[k] for b in micro_batches]) for k in ("input_ids", segments, "labels")}
        args = (joined["input_ids"], joined[segments]) if self.has_first else ()
        kwargs = {"target": joined["labels"]} if self.has_last else {}
        self.schedule.step(*args, **kwargs)
        device = joined["labels"].device
        loss_sum = torch.zeros((), dtype=torch.float64, device=device)
        if self.has_last:
            loss_sum += self.loss.summed.get("token_loss", 0.0)
        dist.all_reduce(loss_sum, group=self.group)
        return loss_sum, self._router_means(len(micro_batches), device)

    def _router_means(self, micro_batches: int, device: torch.device) -> dict[str, float] | None:
        """The last stage's router loss values, known to every stage."""
        if self.loss.config is None:
            return None
        names = ("aux_loss", "z_loss")
        values = torch.tensor([self.loss.summed.get(n, 0.0) for n in names], dtype=torch.float64, device=device)
        dist.all_reduce(values, group=self.group)
        kept = names if getattr(self.loss.config, "router_z_loss_coef", None) is not None else names[:1]
        return {name: float(value) / micro_batches for name, value in zip(names, values, strict=True) if name in kept}


@dataclass
class StepLoss:
    """The last stage's loss of one micro-batch: target cross-entropy times the step's normalisation, plus an MoE
    model's router losses of the whole model's sums over `group`'s ranks, averaged over the micro-batches (as
    trainer.rank.step adds them). `summed`: the step's cross-entropy sum (token_loss) and router loss values."""

    micro_batches: int
    config: object | None  # an MoE model's config, else None
    scale: float = 1.0
    group: dist.ProcessGroup | None = None
    summed: dict[str, float] = field(default_factory=dict)
    # Under tp: (the rank's first vocabulary column, the tp group): the last stage's logits are split by vocabulary.
    vocab_split: tuple[int, dist.ProcessGroup] | None = None

    def __call__(self, output, labels: torch.Tensor) -> torch.Tensor:
        logits, *routed = output if isinstance(output, tuple) else (output,)
        if self.vocab_split is not None:  # this tp rank's vocabulary columns (trainer.parallel.tensor_parallel)
            token_loss = vocab_parallel_cross_entropy_sum(logits, labels, *self.vocab_split)
        else:
            flat_logits, flat_labels = logits.float().flatten(0, 1), labels.flatten()
            token_loss = F.cross_entropy(flat_logits, flat_labels, ignore_index=IGNORE_INDEX, reduction="sum")
        self._add("token_loss", token_loss)
        if not routed:
            return token_loss * self.scale
        losses = losses_from_sums(self.config, RouterSums(*routed), self.group)
        self._add("aux_loss", losses.aux_loss)
        if losses.z_loss is not None:
            self._add("z_loss", losses.z_loss)
        return token_loss * self.scale + losses.total / self.micro_batches

    def _add(self, name: str, value: torch.Tensor) -> None:
        self.summed[name] = self.summed.get(name, 0.0) + float(value.detach().double())

    def forget(self) -> None:
        self.summed = {}


def build_pipeline(
    stages: list[nn.Module],
    stage_ids: list[int],
    pp: int,
    stages_per_rank: int,
    schedule_name: str,
    grad_accum: int,
    group: dist.ProcessGroup,
    device: torch.device,
    moe_config=None,
    vocab_split: tuple[int, dist.ProcessGroup] | None = None,
) -> Pipeline:
    """`moe_config`: an MoE model's config, whose router losses the last stage adds (None: a dense model);
    `vocab_split`: see StepLoss."""
    num_stages = pp * stages_per_rank
    loss_fn = StepLoss(grad_accum, moe_config, vocab_split=vocab_split)

    # pipelining only under pp > 1 (the planner imports this module)
    from torch.distributed import pipelining

    stage_class = _stage_without_inference_counts(pipelining.PipelineStage, loss_fn)
    pipeline_stages = [
        stage_class(module, index, num_stages, device, group=group)
        for module, index in zip(stages, stage_ids, strict=True)
    ]
    schedule_class = getattr(pipelining, SCHEDULES[schedule_name])
    # The loss is already normalised by the step's real token count: no further division by micro-batches.
    if schedule_class is pipelining.ScheduleInterleaved1F1B:
        schedule = schedule_class(pipeline_stages, grad_accum, loss_fn=loss_fn, scale_grads=False)
    else:
        schedule = schedule_class(pipeline_stages[0], grad_accum, loss_fn=loss_fn, scale_grads=False)
    has_first, has_last = 0 in stage_ids, num_stages - 1 in stage_ids
    return Pipeline(schedule, has_first, has_last, group, loss_fn, dict(zip(stage_ids, stages, strict=True)))


def _stage_without_inference_counts(base: type, loss: StepLoss) -> type:
    """torch's PipelineStage, minus what the schedule's metadata inference left counted: on the first step it runs
    each stage once on a micro-batch (empty tensors beyond the first stage) and the loss on the last one's output,
    which the experts' token counts and the step's loss values must not keep (the stage took its routers' logits
    itself)."""

    class Stage(base):
        def _post_metadata_inference_cleanup(self) -> None:
            super()._post_metadata_inference_cleanup()
            for module in self.submod.modules():
                if hasattr(module, "expert_shard"):  # trainer.parallel.expert_parallel
                    module.expert_shard.routed.zero_()
            if self.is_last:
                loss.forget()

    return Stage
