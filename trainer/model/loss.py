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
parallelism see an ordinary forward whose output is the loss. Tied embeddings need nothing apart: the gradient goes
to the one weight.

Under tensor parallelism the head's weight is split by vocabulary (trainer.parallel.tensor_parallel), and each
rank takes its chunks' logits over its own rows, [chunk x vocab/tp] (`_VocabParallelChunkedCrossEntropy`,
Megatron's vocab-parallel cross-entropy, chunked): the log-sum-exp over the tp group from an all-reduce of the
rows' maxima and one of the sums of exponentials (with the target's logit from the rank whose rows hold it); the
backward gives the rank's weight rows their gradient and the hidden states a partial sum over the tp ranks, which
the head's input redistribution reduce-scatters back to the sequence split.
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
    """sum over target tokens of cross_entropy(hidden @ weight.T + bias), chunk by chunk (see the module docstring);
    `bias` None for a head without one (most)."""

    @staticmethod
    def forward(ctx, hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, labels: torch.Tensor,
                chunk: int) -> torch.Tensor:  # fmt: skip
        total = torch.zeros((), dtype=torch.float32, device=hidden.device)
        log_sum_exp = torch.empty(hidden.shape[0], dtype=torch.float32, device=hidden.device)
        for start in range(0, hidden.shape[0], chunk):
            stop = min(start + chunk, hidden.shape[0])
            logits = _chunk_logits(hidden[start:stop], weight, bias)
            target = labels[start:stop]
            kept = target != IGNORE_INDEX
            lse = torch.logsumexp(logits, dim=-1)
            picked = logits.gather(1, target.clamp(min=0).unsqueeze(1)).squeeze(1)
            total += torch.where(kept, lse - picked, 0.0).sum()
            log_sum_exp[start:stop] = lse
        ctx.save_for_backward(hidden, weight, bias, labels, log_sum_exp)
        ctx.chunk = chunk
        return total

    @staticmethod
    def backward(ctx, grad_total: torch.Tensor):
        hidden, weight, bias, labels, log_sum_exp = ctx.saved_tensors
        grad_hidden = torch.empty_like(hidden) if ctx.needs_input_grad[0] else None
        # In the weight's dtype, as the plain head's gradient is: an fp32 sum would be a second vocab x hidden copy.
        grad_weight = torch.zeros_like(weight)
        grad_bias = torch.zeros_like(bias) if bias is not None and ctx.needs_input_grad[2] else None
        for start in range(0, hidden.shape[0], ctx.chunk):
            stop = min(start + ctx.chunk, hidden.shape[0])
            logits = _chunk_logits(hidden[start:stop], weight, bias)
            target = labels[start:stop]
            # d(lse - logit[target]) / d logits = softmax - one_hot(target), for the tokens with a target; in
            # place, so that one chunk-sized fp32 tensor lives at a time.
            grad = logits.sub_(log_sum_exp[start:stop].unsqueeze(1)).exp_()
            grad.scatter_add_(1, target.clamp(min=0).unsqueeze(1), torch.full_like(log_sum_exp[start:stop, None], -1))
            grad = grad.mul_(((target != IGNORE_INDEX) * grad_total).unsqueeze(1)).to(hidden.dtype)
            if grad_hidden is not None:
                grad_hidden[start:stop] = grad @ weight
            grad_weight.addmm_(grad.T, hidden[start:stop])
            if grad_bias is not None:
                grad_bias += grad.sum(dim=0)
        return grad_hidden, grad_weight, grad_bias, None, None


def _chunk_logits(hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """One chunk's logits in fp32, from the head's matmul (and bias) in the compute dtype, as the plain head's."""
    logits = hidden @ weight.T if bias is None else torch.addmm(bias, hidden, weight.T)
    return logits.float()


class _VocabParallelChunkedCrossEntropy(torch.autograd.Function):
    """_ChunkedLinearCrossEntropy over one tp rank's vocabulary rows, `weight` [rows x hidden] the rows from
    `first` on of the whole head: the same sum on every rank of `group` (see the module docstring); the gradient of
    `hidden` is this rank's part of it, to be summed over the group."""

    @staticmethod
    def forward(ctx, hidden, weight, labels, chunk: int, first: int, group) -> torch.Tensor:
        total = torch.zeros((), dtype=torch.float32, device=hidden.device)
        log_sum_exp = torch.empty(hidden.shape[0], dtype=torch.float32, device=hidden.device)
        local = _local_targets(labels, first, weight.shape[0])
        for start in range(0, hidden.shape[0], chunk):
            stop = min(start + chunk, hidden.shape[0])
            logits = (hidden[start:stop] @ weight.T).float()
            lse, picked = _group_log_sum_exp(logits, local[start:stop], group)
            kept = labels[start:stop] != IGNORE_INDEX
            total += torch.where(kept, lse - picked, 0.0).sum()
            log_sum_exp[start:stop] = lse
        ctx.save_for_backward(hidden, weight, labels, log_sum_exp)
        ctx.chunk, ctx.first = chunk, first
        return total

    @staticmethod
    def backward(ctx, grad_total: torch.Tensor):
        hidden, weight, labels, log_sum_exp = ctx.saved_tensors
        grad_hidden = torch.empty_like(hidden) if ctx.needs_input_grad[0] else None
        grad_weight = torch.zeros_like(weight)
        local = _local_targets(labels, ctx.first, weight.shape[0])
        for start in range(0, hidden.shape[0], ctx.chunk):
            stop = min(start + ctx.chunk, hidden.shape[0])
            logits = (hidden[start:stop] @ weight.T).float()
            target = local[start:stop]
            grad = logits.sub_(log_sum_exp[start:stop].unsqueeze(1)).exp_()
            # The one-hot target only where this rank's rows hold it: `target` is -1 elsewhere.
            ones = torch.where(target >= 0, -1.0, 0.0).unsqueeze(1)
            grad.scatter_add_(1, target.clamp(min=0).unsqueeze(1), ones)
            grad = grad.mul_(((labels[start:stop] != IGNORE_INDEX) * grad_total).unsqueeze(1)).to(hidden.dtype)
            if grad_hidden is not None:
                grad_hidden[start:stop] = grad @ weight
            grad_weight.addmm_(grad.T, hidden[start:stop])
        return grad_hidden, grad_weight, None, None, None, None


class _VocabParallelCrossEntropy(torch.autograd.Function):
    """sum over target tokens of cross_entropy(logits) where `logits` [tokens x rows] are this tp rank's columns from
    `first` on of the whole vocabulary's (Megatron's vocab-parallel cross-entropy, unchunked: a pipeline's last stage
    hands its whole micro-batch's logits to the schedule's loss): the same sum on every rank of `group`. It keeps the
    rank's softmax (fp32) for backward, as the plain loss keeps its log-softmax; its gradient stays on the rank."""

    @staticmethod
    def forward(ctx, logits: torch.Tensor, labels: torch.Tensor, first: int, group) -> torch.Tensor:
        local = _local_targets(labels, first, logits.shape[1])
        lse, picked = _group_log_sum_exp(logits, local, group)
        kept = labels != IGNORE_INDEX
        ctx.save_for_backward(logits.sub(lse.unsqueeze(1)).exp_(), local, kept)
        return torch.where(kept, lse - picked, 0.0).sum()

    @staticmethod
    def backward(ctx, grad_total: torch.Tensor):
        softmax, local, kept = ctx.saved_tensors
        ones = torch.where(local >= 0, -1.0, 0.0).unsqueeze(1)
        grad = softmax.scatter_add(1, local.clamp(min=0).unsqueeze(1), ones)
        return grad.mul_((kept * grad_total).unsqueeze(1)), None, None, None


def vocab_parallel_cross_entropy_sum(logits: torch.Tensor, labels: torch.Tensor, first: int, group) -> torch.Tensor:
    """Sum of cross-entropy over the target tokens of `labels` for logits split by vocabulary over `group`: this
    rank's columns [..., rows] of them, from column `first` on (fp32)."""
    flat = logits.float().reshape(-1, logits.shape[-1])
    return _VocabParallelCrossEntropy.apply(flat, labels.reshape(-1), first, group)


def _local_targets(labels: torch.Tensor, first: int, rows: int) -> torch.Tensor:
    """Each label's row among this rank's `rows` from `first` on, -1 where another rank's rows (or none) hold it."""
    local = labels - first
    return torch.where((labels != IGNORE_INDEX) & (local >= 0) & (local < rows), local, -1)


def _group_log_sum_exp(logits: torch.Tensor, target: torch.Tensor, group) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row's log-sum-exp over the whole vocabulary, whose columns `logits` holds this rank's part of, and each
    row's target logit (`target`: its column here, -1 where another rank holds it), both from all-reduces over
    `group`: the rows' maxima first (so no exponential overflows), then the sums of exponentials and the picked
    logits together."""
    import torch.distributed as dist  # not needed where no tensor parallelism runs

    if logits.shape[1]:
        top = logits.max(dim=1).values
    else:  # a rank with no rows (torch.chunk's last pieces of a vocabulary smaller than tp's ceil pieces)
        top = torch.full(logits.shape[:1], float("-inf"), device=logits.device)
    dist.all_reduce(top, op=dist.ReduceOp.MAX, group=group)
    sums = torch.stack([(logits - top.unsqueeze(1)).exp().sum(dim=1), torch.zeros_like(top)])
    picked = logits.gather(1, target.clamp(min=0).unsqueeze(1)).squeeze(1) if logits.shape[1] else sums[1]
    sums[1] = torch.where(target >= 0, picked, 0.0)
    dist.all_reduce(sums, group=group)
    return top + sums[0].log(), sums[1]


def chunked_cross_entropy_sum(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    labels: torch.Tensor,
    chunk: int | None = None,
    bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """Sum of cross-entropy over the target tokens of `labels` [..., tokens] for the logits hidden @ weight.T (+ the
    head's `bias`, where it has one: Phi's), chunk by chunk (fp32, whatever the compute dtype). Under autocast the
    matmuls run in its dtype, as the plain head's would; its weight copy is made once and kept for the backward, as
    autocast's is. A `weight` split by vocabulary rows over a tp mesh (a DTensor; `hidden` then a replicated one)
    takes the vocab-parallel loss (tensor parallelism refuses a head with a bias before launch)."""
    device_type = hidden.device.type
    dtype = torch.get_autocast_dtype(device_type) if torch.is_autocast_enabled(device_type) else weight.dtype
    if _is_dtensor(weight):
        return _vocab_parallel_sum(hidden, weight, labels, chunk, dtype)
    flat_hidden = hidden.reshape(-1, hidden.shape[-1]).to(dtype)
    with torch.autocast(device_type, enabled=False):
        chunk = chunk or chunk_tokens(weight.shape[0])
        bias = None if bias is None else bias.to(dtype)
        return _ChunkedLinearCrossEntropy.apply(flat_hidden, weight.to(dtype), bias, labels.reshape(-1), chunk)


def _is_dtensor(tensor: torch.Tensor) -> bool:
    return type(tensor).__name__ == "DTensor"  # without importing torch.distributed where nothing is distributed


def _vocab_parallel_sum(hidden, weight, labels: torch.Tensor, chunk: int | None, dtype: torch.dtype) -> torch.Tensor:
    """chunked_cross_entropy_sum for a head whose weight's rows are split over a 1-D tp mesh (Shard(0)): each
    rank's chunks hold the logits of its rows alone; `hidden` the whole sequence's, replicated over the mesh, whose
    gradient each rank gives as its part of a sum (Partial), so the redistribution that gathered it reduce-scatters
    the parts."""
    from torch.distributed.tensor import Partial  # where a tp mesh exists only

    mesh = weight.device_mesh
    local_weight = weight.to_local()
    # torch.chunk's split (DTensor's Shard): ceil-sized pieces of the vocabulary, in the mesh's rank order.
    first = -(-weight.shape[0] // mesh.size()) * mesh.get_local_rank()
    local_hidden = hidden.to_local(grad_placements=[Partial()])  # the head's input, gathered: a DTensor
    flat_hidden = local_hidden.reshape(-1, local_hidden.shape[-1]).to(dtype)
    with torch.autocast(flat_hidden.device.type, enabled=False):
        chunk = chunk or chunk_tokens(-(-weight.shape[0] // mesh.size()))  # alike on every rank: the collectives
        return _VocabParallelChunkedCrossEntropy.apply(
            flat_hidden, local_weight.to(dtype), labels.reshape(-1), chunk, first, mesh.get_group()
        )


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
    bias = getattr(head, "bias", None)
    return chunked_cross_entropy_sum(hidden, head.weight, head.loss_labels, head.loss_chunk, bias)


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
