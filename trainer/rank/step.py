"""One optimizer step's forward and backward passes, with the loss normalised the way a full batch would be.

The loss of a step is the sum of every target token's cross-entropy over all micro-batches and all
data-parallel ranks, divided by the number of those target tokens. Averaging per micro-batch (or letting DDP
average per rank) weights a short sequence's tokens more than a long one's, so gradients would depend on how
the batch happens to be split. Here each rank first all-reduces its target count, every micro-batch
backpropagates sum / global_count, and the result is multiplied by the data-parallel degree to undo the
mean that DDP's all-reduce and FSDP's reduce-scatter take.

A mixture-of-experts model adds its routers' auxiliary losses (trainer.model.moe, trainer.parallel.expert_parallel
.router_losses) as the model defines them for one forward pass, over the tokens of that micro-batch on every
data-parallel (and cp) rank together, with the config's coefficient, averaged over the accumulation window: one
process taking the whole batch in one forward gets the same loss as any layout that takes it in one micro-batch
round. (Accumulated micro-batches cannot share one loss: its expert fractions multiply, which needs every
micro-batch's routing before any backward.)
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, partial

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.tensor import DTensor
from torch.distributed.tensor.parallel import loss_parallel

from trainer.data.packing import IGNORE_INDEX, model_inputs
from trainer.model.loss import causal_lm, head_computes_loss
from trainer.model.moe import RouterLogits, routed_token_mask
from trainer.parallel.data_parallel import gradient_sync
from trainer.parallel.expert_parallel import router_losses
from trainer.parallel.grad_norm import grad_norm_squared
from trainer.parallel.pipeline import Pipeline
from trainer.parallel.tensor_parallel import reduce_partial_gradients
from trainer.rank.memory import saved_for_backward


@dataclass
class StepResult:
    loss: float  # mean cross-entropy per target token over the whole global batch
    target_tokens: int  # tokens with a label, over all data-parallel ranks
    input_tokens: int  # non-padding tokens fed to the model, over all data-parallel ranks
    saved_bytes: dict[str, int] | None = None  # saved for backward by this rank's first micro-batch, when measured
    small_batch: tuple[float, int] | None = None  # (|mean gradient|^2, target tokens) of the first micro-batch round
    router: dict[str, float] | None = None  # an MoE model's aux_loss (and z_loss), means over the micro-batches


def token_loss_sum(
    model: torch.nn.Module,
    batch: dict[str, torch.Tensor],
    packed: bool = True,
    forward: Callable[..., torch.Tensor] | None = None,
    whole: bool = False,
) -> torch.Tensor:
    """Sum of cross-entropy over the batch's target tokens (fp32, whatever the compute dtype). The output head and
    the loss run chunk by chunk (trainer.model.loss), the whole micro-batch's logits never made, or with `whole`
    (train.loss: whole) over the whole logits at once (`whole_model_loss`). `forward`: what runs the model
    (`model_loss` or `whole_model_loss`, or its compiled graph)."""
    if whole:
        return (forward or whole_model_loss)(model, batch, packed)
    with head_computes_loss(model, batch["labels"]):
        return (forward or model_loss)(model, batch, packed)


def model_loss(model: torch.nn.Module, batch: dict[str, torch.Tensor], packed: bool) -> torch.Tensor:
    """The model's forward, whose output head computes the loss (inside trainer.model.loss.head_computes_loss)."""
    return model(**model_inputs(batch, packed)).logits


def whole_model_loss(model: torch.nn.Module, batch: dict[str, torch.Tensor], packed: bool) -> torch.Tensor:
    """The model's forward to its logits, then one fp32 cross-entropy sum over them (train.loss: whole), as a
    pipeline's last stage computes it (trainer.parallel.pipeline.StepLoss)."""
    logits = model(**model_inputs(batch, packed)).logits
    split = isinstance(logits, DTensor)  # split by vocabulary under tp: torch's loss_parallel (see `_loss_context`)
    with _loss_context(split):
        loss = F.cross_entropy(
            logits.float().flatten(0, -2), batch["labels"].flatten(), ignore_index=IGNORE_INDEX, reduction="sum"
        )
    return loss.to_local() if split else loss


def _loss_context(whole_loss: bool) -> contextlib.AbstractContextManager:
    """torch's loss_parallel around the whole loss, its forward (`whole_model_loss`, where the logits are split by
    vocabulary under tensor parallelism) and its backward (DTensors need it there too; plain tensors it leaves
    alone)."""
    return loss_parallel() if whole_loss else contextlib.nullcontext()


@cache
def compiled_token_loss_sum(whole: bool = False) -> Callable[..., torch.Tensor]:
    """token_loss_sum with the model compiled as one graph (train.compile where
    trainer.parallel.compile.compiles_whole_step): the whole loss inside it, the chunked one outside it (the head is
    switched to the loss, which trainer.model.loss keeps out of any graph). Made on first use, so eager runs never
    import the compiler."""
    return partial(token_loss_sum, forward=torch.compile(whole_model_loss if whole else model_loss), whole=whole)


def forward_backward(
    model: torch.nn.Module,
    micro_batches: list[dict[str, torch.Tensor]],
    dp_group: dist.ProcessGroup | None,
    autocast: contextlib.AbstractContextManager | None = None,
    measure_activations: bool = False,
    measure_small_batch: bool = False,
    packed: bool = True,
    compiled: bool = False,
    reduce_scatter_each: bool = True,
    router: RouterLogits | None = None,
    keep_gathered: bool = False,
    whole_loss: bool = False,
) -> StepResult:
    """Accumulate the gradients of one optimizer step into model parameters' .grad; `compiled`: each micro-batch's
    forward and loss as one compiled graph (compiled_token_loss_sum); `reduce_scatter_each`: FSDP2 reduce-scatters
    every micro-batch's gradients (train.fsdp_grad_sync: micro_batch) rather than the last one's only
    (trainer.parallel.data_parallel.gradient_sync); `keep_gathered`: FSDP2 keeps the parameters it gathered until
    the last micro-batch's backward (train.zero_stage 1); `whole_loss`: the loss over the whole logits at once
    (train.loss: whole), not chunked.

    With `measure_small_batch` (and two or more micro-batches) the first micro-batch's gradients are reduced
    over the data-parallel ranks too, and the norm of that smaller batch's mean gradient is kept for the
    gradient noise scale (trainer.rank.noise_scale).

    `router`: an MoE model's router logits, recorded during each forward: their auxiliary losses join that
    micro-batch's backward (see the module docstring).
    """
    device = micro_batches[0]["labels"].device
    loss_sum_of = compiled_token_loss_sum(whole_loss) if compiled else partial(token_loss_sum, whole=whole_loss)
    counts, dp_degree = _token_counts(micro_batches, dp_group)
    target_tokens = max(int(counts[0].item()), 1)
    scale = dp_degree / target_tokens
    measure_small_batch = measure_small_batch and len(micro_batches) > 1
    small_batch = None

    loss_sum = torch.zeros((), dtype=torch.float64, device=device)
    router_sums: dict[str, float] = {}
    saved_bytes = None
    for i, batch in enumerate(micro_batches):
        last = i == len(micro_batches) - 1
        small = measure_small_batch and i == 0
        # Only the last backward needs the whole reduction (and the first, where the noise scale reads it).
        with gradient_sync(model, last or small, reduce_scatter_each, keep_gathered):
            with autocast or contextlib.nullcontext():
                if measure_activations and i == 0:
                    batch_loss, saved_bytes = saved_for_backward(model, partial(loss_sum_of, model, batch, packed))
                else:
                    batch_loss = loss_sum_of(model, batch, packed)
            total = batch_loss * scale
            if router is not None:
                total = total + _router_loss(router, model, batch, dp_group, router_sums) / len(micro_batches)
            with _loss_context(whole_loss):
                total.backward()
        loss_sum += batch_loss.detach()
        if small:
            small_batch = _small_batch_gradient(model, micro_batches[0], dp_group, target_tokens)
    reduce_partial_gradients(list(model.parameters()))  # sequence parallelism's norm weights, without FSDP2
    if dp_group is not None:
        dist.all_reduce(loss_sum, group=dp_group)
    routed = {name: value / len(micro_batches) for name, value in router_sums.items()} if router else None
    return StepResult(
        float(loss_sum.item()) / target_tokens, target_tokens, int(counts[1].item()), saved_bytes, small_batch, routed
    )


def _router_loss(
    router: RouterLogits,
    model: torch.nn.Module,
    batch: dict[str, torch.Tensor],
    dp_group: dist.ProcessGroup | None,
    sums: dict[str, float],
) -> torch.Tensor:
    """The micro-batch's router losses with their coefficients, over every rank's tokens (padding left out, as
    the model's attention_mask would); their values added to `sums`."""
    logits = router.take()
    config = causal_lm(model).config
    real = routed_token_mask(batch["segment_ids"] >= 0, logits)
    losses = router_losses(config, logits, real, dp_group)
    sums["aux_loss"] = sums.get("aux_loss", 0.0) + float(losses.aux_loss.detach())
    if losses.z_loss is not None:
        sums["z_loss"] = sums.get("z_loss", 0.0) + float(losses.z_loss.detach())
    return losses.total


def _small_batch_gradient(
    model: torch.nn.Module, batch: dict[str, torch.Tensor], dp_group: dist.ProcessGroup | None, target_tokens: int
) -> tuple[float, int]:
    """|mean gradient|^2 and target tokens of the first micro-batch round, read from the reduced gradients.

    Those gradients are sum(token gradients) / target_tokens (the whole step's count): rescaled here to the
    mean over the round's own tokens.

    An MoE model's router losses stay in on purpose: the step's gradient (the big batch) is of the mean
    cross-entropy plus the router losses at their coefficient, so the small batch must be of the same objective on
    its round alone, which is what the rescaling gives (the round backpropagates its router loss / micro-batches,
    times target_tokens / small_tokens, = the micro-batch count where the rounds hold equal target tokens). Leaving
    them out would compare an LM-only gradient with one that has them, biasing both estimates by the router
    gradient's norm. What remains: where the rounds' target tokens differ (padding, packing), the router term is
    scaled by (target_tokens / small_tokens) / micro-batches rather than 1, a relative error of that token share's
    deviation on a term the router's coefficient keeps small (tests/test_expert_parallel.py
    test_noise_scales_small_batch_gradient_is_the_whole_objectives_on_its_round).
    """
    small_tokens = (batch["labels"] != IGNORE_INDEX).sum().double()
    if dp_group is not None:
        dist.all_reduce(small_tokens, group=dp_group)
    small_tokens = max(int(small_tokens.item()), 1)
    squared = grad_norm_squared(list(model.parameters()), batch["labels"].device)
    return float(squared) * (target_tokens / small_tokens) ** 2, small_tokens


def pipeline_forward_backward(
    pipeline: Pipeline,
    model: torch.nn.Module,
    micro_batches: list[dict[str, torch.Tensor]],
    dp_group: dist.ProcessGroup | None,
    autocast: contextlib.AbstractContextManager | None = None,
    measure_activations: bool = False,
) -> StepResult:
    """The same step through a pipeline schedule: every stage reads the step's rows (cheap: they are a function
    of the row index) for the token counts, the first stage feeds the inputs, the last computes the loss (an MoE
    model's router losses too, from the sums every stage adds: trainer.parallel.pipeline)."""
    counts, dp_degree = _token_counts(micro_batches, dp_group)
    target_tokens = max(int(counts[0].item()), 1)
    run = partial(pipeline.run, micro_batches, dp_degree / target_tokens, dp_group)
    saved_bytes = None
    with autocast or contextlib.nullcontext():
        if measure_activations:
            (loss_sum, routed), saved_bytes = saved_for_backward(model, run)
        else:
            loss_sum, routed = run()
    if dp_group is not None:
        dist.all_reduce(loss_sum, group=dp_group)
    loss = float(loss_sum.item()) / target_tokens
    return StepResult(loss, target_tokens, int(counts[1].item()), saved_bytes, router=routed)


def _token_counts(
    micro_batches: list[dict[str, torch.Tensor]], dp_group: dist.ProcessGroup | None
) -> tuple[torch.Tensor, int]:
    """[target tokens, input tokens] of the step over all data-parallel ranks, and the data-parallel degree."""
    counts = torch.zeros(2, dtype=torch.float64, device=micro_batches[0]["labels"].device)
    for batch in micro_batches:
        counts[0] += (batch["labels"] != IGNORE_INDEX).sum()
        counts[1] += (batch["segment_ids"] >= 0).sum()
    if dp_group is None:
        return counts, 1
    dist.all_reduce(counts, group=dp_group)
    return counts, dist.get_world_size(dp_group)
