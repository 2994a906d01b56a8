"""The output head and the cross-entropy as one loss over chunks of tokens: the fp32 logits of a whole
micro-batch never exist at once.

Plainly computed, the logits of a micro-batch are [tokens x vocab] in the compute dtype, again in fp32 for the
loss, and their gradient as large: about 8 GiB for 8k tokens at a 128k vocabulary, more than the whole model's
activations for a small model. Here the forward computes each chunk's logits, keeps only each token's
log-sum-exp (4 bytes) and frees them; the backward recomputes each chunk's logits and turns them into that chunk's
gradient at once (softmax minus the one-hot target), adding the head weight's gradient chunk by chunk. One
chunk's logits live at a time (`CHUNK_LOGIT_BYTES` of fp32), at the cost of the head's forward matmul a second
time (a few percent of a step's FLOPs at a 128k vocabulary).

The arithmetic is the plain loss's: the logits in the compute dtype (autocast's, else the weight's), the
log-softmax in fp32, the gradient cast back to the compute dtype before the matmuls, so loss and gradients equal
`F.cross_entropy(lm_head(h).float(), ...)` to fp32 rounding. The head weight's gradient is summed over the
chunks in the weight's own dtype (an fp32 sum would be a second vocab x hidden buffer): under bf16 (FSDP2's
mixed precision) it is rounded once per chunk rather than once in all.

The head runs inside the model's own forward (`head_computes_loss`): the output embeddings compute the loss in
place of the logits, so DDP, FSDP2 (whose root holds the head's gathered weight during its forward) and tensor
parallelism (the head is replicated) see an ordinary forward whose output is the loss. Tied embeddings need
nothing apart: the gradient goes to the one weight.
"""

from __future__ import annotations

import contextlib
import functools
import types
from collections.abc import Callable, Iterator

import torch

# The label of positions that predict nothing (padding, the last token of a document): the loss skips them.
IGNORE_INDEX = -100


# The fp32 logits one chunk may hold: 128 MiB is 256 tokens at a 128k vocabulary, a matmul of
# [256 x hidden] x [hidden x 128k] that still fills a GPU (tens of GFLOP); a small vocabulary takes a micro-batch in
# one chunk.
CHUNK_LOGIT_BYTES = 128 * 2**20
FP32 = 4
# Chunks of more tokens than this are a whole number of them: a GPU matmul computes its rows in tiles of 64 to 256,
# and a chunk of 261 rows would pay a third 128-row tile for 5 of them in each of the head's four matmuls.
CHUNK_ROWS = 128


def chunk_tokens(vocab_size: int) -> int:
    """Tokens per chunk: as many as `CHUNK_LOGIT_BYTES` of fp32 logits hold, in whole `CHUNK_ROWS` where that is
    more than one."""
    tokens = max(1, CHUNK_LOGIT_BYTES // (vocab_size * FP32))
    return tokens - tokens % CHUNK_ROWS if tokens >= CHUNK_ROWS else tokens


class _ChunkedLinearCrossEntropy(torch.autograd.Function):
    """sum over target tokens of cross_entropy(hidden @ weight.T), chunk by chunk (see the module docstring)."""

    @staticmethod
    def forward(ctx, hidden: torch.Tensor, weight: torch.Tensor, labels: torch.Tensor, chunk: int) -> torch.Tensor:
        total = torch.zeros((), dtype=torch.float32, device=hidden.device)
        log_sum_exp = torch.empty(hidden.shape[0], dtype=torch.float32, device=hidden.device)
        for start in range(0, hidden.shape[0], chunk):
            stop = min(start + chunk, hidden.shape[0])
            logits = (hidden[start:stop] @ weight.T).float()
            target = labels[start:stop]
            kept = target != IGNORE_INDEX
            lse = torch.logsumexp(logits, dim=-1)
            picked = logits.gather(1, target.clamp(min=0).unsqueeze(1)).squeeze(1)
            total += torch.where(kept, lse - picked, 0.0).sum()
            log_sum_exp[start:stop] = lse
        ctx.save_for_backward(hidden, weight, labels, log_sum_exp)
        ctx.chunk = chunk
        return total

    @staticmethod
    def backward(ctx, grad_total: torch.Tensor):
        hidden, weight, labels, log_sum_exp = ctx.saved_tensors
        grad_hidden = torch.empty_like(hidden) if ctx.needs_input_grad[0] else None
        # In the weight's dtype, as the plain head's gradient is: an fp32 sum would be a second vocab x hidden copy.
        grad_weight = torch.zeros_like(weight)
        for start in range(0, hidden.shape[0], ctx.chunk):
            stop = min(start + ctx.chunk, hidden.shape[0])
            logits = (hidden[start:stop] @ weight.T).float()
            target = labels[start:stop]
            # d(lse - logit[target]) / d logits = softmax - one_hot(target), for the tokens with a target; in
            # place, so that one chunk-sized fp32 tensor lives at a time.
            grad = logits.sub_(log_sum_exp[start:stop].unsqueeze(1)).exp_()
            grad.scatter_add_(1, target.clamp(min=0).unsqueeze(1), torch.full_like(log_sum_exp[start:stop, None], -1))
            grad = grad.mul_(((target != IGNORE_INDEX) * grad_total).unsqueeze(1)).to(hidden.dtype)
            if grad_hidden is not None:
                grad_hidden[start:stop] = grad @ weight
            grad_weight.addmm_(grad.T, hidden[start:stop])
        return grad_hidden, grad_weight, None, None


def chunked_cross_entropy_sum(
    hidden: torch.Tensor, weight: torch.Tensor, labels: torch.Tensor, chunk: int | None = None
) -> torch.Tensor:
    """Sum of cross-entropy over the target tokens of `labels` [..., tokens] for the logits hidden @ weight.T,
    chunk by chunk (fp32, whatever the compute dtype). Under autocast the matmuls run in its dtype, as the plain
    head's would; its weight copy is made once and kept for the backward, as autocast's is."""
    device_type = hidden.device.type
    dtype = torch.get_autocast_dtype(device_type) if torch.is_autocast_enabled(device_type) else weight.dtype
    flat_hidden = hidden.reshape(-1, hidden.shape[-1]).to(dtype)
    with torch.autocast(device_type, enabled=False):
        chunk = chunk or chunk_tokens(weight.shape[0])
        return _ChunkedLinearCrossEntropy.apply(flat_hidden, weight.to(dtype), labels.reshape(-1), chunk)


@contextlib.contextmanager
def head_computes_loss(model: torch.nn.Module, labels: torch.Tensor, chunk: int | None = None) -> Iterator[None]:
    """Within, a forward of `model` (a causal LM, or DDP around one) returns as its logits the chunked loss sum over
    `labels` (chunked_cross_entropy_sum), computed where the output head runs; no logits are made.

    The head's forward is replaced on the instance for the while (its class's is untouched), always by the same
    function reading the labels from the head: a compiled model then sees the same code every micro-batch. A hook
    could only run the head's own matmul on no tokens, and under autocast even that would cast and keep a second
    copy of the weight."""
    head = causal_lm(model).get_output_embeddings()
    head.loss_labels, head.loss_chunk = labels, chunk
    head.forward = types.MethodType(_eager_loss_forward(), head)
    try:
        yield
    finally:
        del head.forward, head.loss_labels, head.loss_chunk


def _loss_forward(head: torch.nn.Module, hidden: torch.Tensor) -> torch.Tensor:
    return chunked_cross_entropy_sum(hidden, head.weight, head.loss_labels, head.loss_chunk)


@functools.cache
def _eager_loss_forward() -> Callable[[torch.nn.Module, torch.Tensor], torch.Tensor]:
    """_loss_forward kept out of a compiled graph (train.compile's whole-step graph calls the head): traced into it
    on an H200 with torch 2.11, its backward gave every parameter a zero gradient from the first compiled step on
    (grad_norm 0.000, the loss drifting up), while eager steps and torch 2.13 on CPU were right. Run eagerly, it
    costs one graph break. Made on first use: torch.compiler.disable imports the compiler, which planning needs not."""
    return torch.compiler.disable(_loss_forward)


def causal_lm(model: torch.nn.Module) -> torch.nn.Module:
    """The model itself, out of its DistributedDataParallel wrapper where it has one."""
    return model.module if isinstance(model, torch.nn.parallel.DistributedDataParallel) else model
