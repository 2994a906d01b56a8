"""One optimizer step's forward and backward passes, with the loss normalised the way a full batch would be.

The loss of a step is the sum of every target token's cross-entropy over all micro-batches and all
data-parallel ranks, divided by the number of those target tokens. Averaging per micro-batch (or letting DDP
average per rank) weights a short sequence's tokens more than a long one's, so gradients would depend on how
the batch happens to be split. Here each rank first all-reduces its target count, every micro-batch
backpropagates sum / global_count, and the result is multiplied by the data-parallel degree to undo the
mean that DDP's all-reduce and FSDP's reduce-scatter take.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from functools import partial

import torch
import torch.distributed as dist
import torch.nn.functional as F

from trainer.memory import saved_for_backward
from trainer.packing import IGNORE_INDEX, model_inputs
from trainer.parallelize import gradient_sync


@dataclass
class StepResult:
    loss: float  # mean cross-entropy per target token over the whole global batch
    target_tokens: int  # tokens with a label, over all data-parallel ranks
    input_tokens: int  # non-padding tokens fed to the model, over all data-parallel ranks
    saved_bytes: dict[str, int] | None = None  # saved for backward by this rank's first micro-batch, when measured


def token_loss_sum(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Sum of cross-entropy over the batch's target tokens (fp32, whatever the compute dtype)."""
    logits = model(**model_inputs(batch)).logits
    return F.cross_entropy(
        logits.float().flatten(0, 1), batch["labels"].flatten(), ignore_index=IGNORE_INDEX, reduction="sum"
    )


def forward_backward(
    model: torch.nn.Module,
    micro_batches: list[dict[str, torch.Tensor]],
    dp_group: dist.ProcessGroup | None,
    autocast: contextlib.AbstractContextManager | None = None,
    measure_activations: bool = False,
) -> StepResult:
    """Accumulate the gradients of one optimizer step into model parameters' .grad."""
    device = micro_batches[0]["labels"].device
    counts = torch.zeros(2, dtype=torch.float64, device=device)
    for batch in micro_batches:
        counts[0] += (batch["labels"] != IGNORE_INDEX).sum()
        counts[1] += (batch["segment_ids"] >= 0).sum()
    dp_degree = 1
    if dp_group is not None:
        dist.all_reduce(counts, group=dp_group)
        dp_degree = dist.get_world_size(dp_group)
    target_tokens = max(int(counts[0].item()), 1)
    scale = dp_degree / target_tokens

    loss_sum = torch.zeros((), dtype=torch.float64, device=device)
    saved_bytes = None
    for i, batch in enumerate(micro_batches):
        last = i == len(micro_batches) - 1
        # Data parallelism reduces gradients on every backward unless told not to: only the last one needs it.
        with gradient_sync(model, enabled=last):
            with autocast or contextlib.nullcontext():
                if measure_activations and i == 0:
                    batch_loss, saved_bytes = saved_for_backward(model, partial(token_loss_sum, model, batch))
                else:
                    batch_loss = token_loss_sum(model, batch)
            (batch_loss * scale).backward()
        loss_sum += batch_loss.detach()
    if dp_group is not None:
        dist.all_reduce(loss_sum, group=dp_group)
    return StepResult(float(loss_sum.item()) / target_tokens, target_tokens, int(counts[1].item()), saved_bytes)
