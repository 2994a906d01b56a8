"""Rows that hold several documents, and the attention mask that keeps them apart.

A row is seq_len input tokens plus one look-ahead token for the last label. Each position carries the id of
the segment (document piece) it belongs to; -1 marks padding. From that one array follow the labels (never
across a boundary), the position ids (restarting at each segment) and a block-diagonal causal mask.

The mask is passed explicitly rather than left to transformers to infer from position_ids: that inference
only happens without an attention mask and without a KV cache, so in eval mode (cache on by default) later
documents silently attend to earlier ones. An explicit 4-D boolean mask isolates them in every mode.
"""

from __future__ import annotations

import numpy as np
import torch

from trainer.model.loss import IGNORE_INDEX


def row_from_segments(
    tokens: np.ndarray, segments: np.ndarray, counted: np.ndarray | None = None
) -> dict[str, np.ndarray]:
    """Turn seq_len + 1 tokens and their segment ids into one training row of seq_len positions.

    `counted` (fine-tuning data) marks the tokens the loss may predict, the responses: position i's label is token
    i + 1 only where that token is counted and in the same document, so a prompt is never a target, and neither
    is the first token of the next document.
    """
    inputs, segment_ids = tokens[:-1], segments[:-1]
    is_target = (segments[:-1] == segments[1:]) & (segment_ids >= 0)  # the next token is of the same document
    if counted is not None:
        is_target &= counted[1:]
    labels = np.where(is_target, tokens[1:], IGNORE_INDEX)
    index = np.arange(len(inputs))
    is_start = np.ones(len(inputs), dtype=bool)
    is_start[1:] = segment_ids[1:] != segment_ids[:-1]
    position_ids = index - np.maximum.accumulate(np.where(is_start, index, 0))
    return {
        "input_ids": inputs.astype(np.int64),
        "labels": labels.astype(np.int64),
        "position_ids": position_ids.astype(np.int64),
        "segment_ids": segment_ids.astype(np.int64),
    }


def whole_example_rows(lengths: np.ndarray, width: int) -> np.ndarray:
    """The first example of each row when examples of `lengths` tokens are packed whole, in order, into rows of
    `width` tokens: a row takes examples while the next one fits, and an example longer than a row fills one
    alone (cut to it). Ends with len(lengths), so row r holds examples [starts[r], starts[r + 1])."""
    sizes = np.minimum(lengths, width)  # a cut example takes a whole row
    ends = np.cumsum(sizes)
    # For every example, where the next row would start if a row started there (one search for all of them);
    # the rows are then the chain from example 0.
    following = np.searchsorted(ends, ends - sizes + width, side="right").tolist()
    starts = [0]
    while starts[-1] < len(lengths):
        starts.append(following[starts[-1]])
    return np.array(starts, dtype=np.int64)


def block_causal_mask(segment_ids: torch.Tensor) -> torch.Tensor:
    """[batch, 1, seq, seq] boolean mask: True where a query may attend to a key (same segment, not later)."""
    seq_len = segment_ids.shape[-1]
    causal = torch.ones(seq_len, seq_len, dtype=torch.bool, device=segment_ids.device).tril()
    same_segment = segment_ids[:, :, None] == segment_ids[:, None, :]
    return (same_segment & causal)[:, None]


def mask_bias(mask: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
    """A boolean mask as the additive bias SDPA makes of it (0 where allowed, -inf elsewhere), in `dtype` (default:
    autocast's where it is on, else fp32), made once per micro-batch and shared by every layer. Handed the
    boolean mask, SDPA converts it in every layer, and each layer's backward keeps its own copy."""
    if dtype is None:
        device_type = mask.device.type
        dtype = torch.get_autocast_dtype(device_type) if torch.is_autocast_enabled(device_type) else torch.float32
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(~mask, float("-inf"))


def model_inputs(batch: dict, packed: bool = True) -> dict:
    """Keyword arguments for a transformers causal LM's forward, with documents isolated.

    A batch that brings its own mask keeps it, with its position ids: context parallelism's local queries against
    gathered keys (a boolean one as a bias, `mask_bias`), or flex_attention's BlockMask (trainer.model.attention).
    Otherwise packed rows need the block-diagonal mask, as one additive bias for all layers (`mask_bias`). Unpacked
    rows hold one document each, starting at position 0 with padding only after it, so plain causal attention
    already gives every real token exactly its document: no mask is built, and SDPA takes its causal path
    (FlashAttention on CUDA), saving nothing of size seq x seq. The position ids are then left to the model (0, 1,
    2, ...: the same for the real tokens), since ids that restart at the padding would make transformers infer
    packed sequences and build a mask after all.
    """
    if "attention_mask" in batch:
        mask = batch["attention_mask"]
        if isinstance(mask, torch.Tensor) and mask.dtype == torch.bool:  # context parallelism's, on CPU
            mask = mask_bias(mask)
    elif packed:
        mask = mask_bias(block_causal_mask(batch["segment_ids"]))
    else:
        return {"input_ids": batch["input_ids"], "use_cache": False}
    return {
        "input_ids": batch["input_ids"],
        "position_ids": batch["position_ids"],
        "attention_mask": mask,
        "use_cache": False,
    }
