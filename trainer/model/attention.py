"""Which attention kernel packed rows get, and the document mask in the form that kernel takes.

- dense: SDPA with a [batch, 1, seq, seq] boolean block-diagonal causal mask (trainer.data.packing). It runs on every
  device and in every mode, but costs O(seq^2) memory per row, and SDPA can use neither its flash nor its cuDNN
  kernel with an arbitrary mask.
- flex: flex_attention with a BlockMask made from the segment ids. Memory is linear in the sequence, and blocks in
  which no query may see any key (other documents, the future) are skipped, so packing costs no more than the
  documents' own attention. flex_attention has no backward on CPU, so it is for CUDA only.

`train.attention: auto` takes flex for packed rows wherever it can run, and dense elsewhere (unpacked rows need no
mask at all, so SDPA's flash kernel runs). Measured on an H100 (bench/results/gpu_h100_validation.json, a 1024-wide
Llama, packed rows): flex trained at 1.46x the dense mask's tokens/s at 8k tokens per row and 4.2x at 32k, with a
third less peak memory at 32k, and the same losses to the fourth decimal. Pipeline stages, whose inputs
torch.distributed.pipelining splits as tensors only, each build the BlockMask from the segment ids they receive
(trainer.parallel.pipeline). Context parallelism has its own attention function and masks
(trainer.parallel.context_parallel).
"""

from __future__ import annotations

import torch

from trainer.layout import Layout

ATTENTION_KINDS = ("auto", "dense", "flex")

# The name transformers' attention registry knows flex_attention by.
FLEX_IMPLEMENTATION = "flex_attention"


class AttentionError(ValueError):
    """An attention choice this run cannot use."""


# flex_attention's kernels need heads at least this wide (narrower ones raise NotImplementedError when compiled).
FLEX_MIN_HEAD_DIM = 16


def choose_attention(requested: str, device_type: str, layout: Layout, head_dim: int, packing: bool = True) -> str:
    """ "dense" or "flex" for this run; refuses a choice that cannot run, in one line."""
    if requested not in ATTENTION_KINDS:
        raise AttentionError(f"train.attention must be one of {', '.join(ATTENTION_KINDS)}, not {requested!r}")
    why_not_flex = _why_flex_cannot_run(device_type, layout, head_dim)
    if requested == "flex" and why_not_flex:
        raise AttentionError(f"train.attention flex cannot run here: {why_not_flex}")
    if requested == "auto":
        return "flex" if packing and not why_not_flex else "dense"
    return requested


def context_parallel_flex(device_type: str, head_dim: int) -> bool:
    """Whether context parallelism's attention runs flex_attention with a BlockMask over global positions and
    document ids (trainer.parallel.context_parallel) rather than SDPA with a dense [local queries x all keys] mask: on
    CUDA, for heads flex can take."""
    return device_type == "cuda" and head_dim >= FLEX_MIN_HEAD_DIM


def takes_dense_mask(requested: str, device_type: str, layout: Layout, head_dim: int, packing: bool) -> bool:
    """Whether each attention layer reads a dense [seq, seq] mask: packed rows on the dense kernel, or context
    parallelism's local queries against the gathered keys off CUDA. A choice the launcher would refuse never runs,
    and counts as the dense mask."""
    if layout.cp > 1:
        return not context_parallel_flex(device_type, head_dim)
    try:
        return packing and choose_attention(requested, device_type, layout, head_dim, packing) == "dense"
    except AttentionError:
        return packing


def _why_flex_cannot_run(device_type: str, layout: Layout, head_dim: int) -> str | None:
    if device_type != "cuda":
        return "flex_attention has no backward on CPU"
    if layout.cp > 1:
        return "context parallelism brings its own attention function (trainer.parallel.context_parallel)"
    if head_dim < FLEX_MIN_HEAD_DIM:
        return f"flex_attention needs heads of at least {FLEX_MIN_HEAD_DIM} dimensions, this model's have {head_dim}"
    return None


def use_attention(model: torch.nn.Module, kind: str) -> None:
    """Point the model's attention layers at the kernel `kind` needs (they read it from the config per call)."""
    if kind == "flex":
        model.set_attn_implementation(FLEX_IMPLEMENTATION)


def document_block_mask(segment_ids: torch.Tensor):
    """A flex_attention BlockMask: a query sees keys of its own segment at or before it (padding, segment -1,
    sees only padding, so no row is empty). The same pairs as trainer.data.packing.block_causal_mask."""
    # flex_attention only where a BlockMask is built (CUDA)
    from torch.nn.attention.flex_attention import create_block_mask

    def same_document_causal(batch, head, query, key):
        return (segment_ids[batch, query] == segment_ids[batch, key]) & (query >= key)

    batch, seq_len = segment_ids.shape
    # Compiled, the mask is built block by block; uncompiled it materialises [batch, seq, seq] once.
    compiled = segment_ids.device.type == "cuda"
    return create_block_mask(
        same_document_causal, batch, None, seq_len, seq_len, device=segment_ids.device, _compile=compiled
    )
