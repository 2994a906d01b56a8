"""Context parallelism: each sequence split over the cp ranks, keys and values all-gathered in every attention layer.

This is Llama 3's all-gather context parallelism, built into meshpilot rather than taken from torch's experimental
`context_parallel`, which has no CPU attention kernel and handles packed documents poorly:

- Each row of seq_len tokens is cut into 2 x cp equal chunks; rank r keeps chunks r and 2 cp - 1 - r (zigzag), so
  that under a causal mask every rank has the same number of query-key pairs to compute.
- Every attention layer all-gathers the keys and values of the cp group (one collective for both); autograd's
  backward reduce-scatters their gradients. The queries stay local, so activations shrink by cp except the
  gathered keys and values.
- The mask is built for the local queries against the gathered keys, from their global positions and document
  (segment) ids, so causal and packed-document masks are both exact; position ids are the global ones, so rotary
  (or learned) position embeddings see each token's real position. On CUDA it is a function of those
  (`document_causal_mask_mod`) that flex_attention reads as a BlockMask: nothing of size [local queries x all
  keys] is ever made. On CPU, where flex has no backward, it is a dense mask, one for all layers.
- It plugs in through transformers' attention-function registry: any model whose attention layers call
  `ALL_ATTENTION_FUNCTIONS` works unchanged. Models that do not are refused before launch.

Gathered keys stay in gather order (rank 0's chunks, then rank 1's, ...) rather than being put back in sequence
order: the mask follows that order instead, which saves a copy of the gathered keys and values.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist

from trainer.layout import Layout, LayoutError
from trainer.model.attention import context_parallel_flex
from trainer.model.parameters import head_dim

if TYPE_CHECKING:
    from transformers import PretrainedConfig

# transformers' modeling modules are imported where used: they take over a second, and the launcher and the
# planner (which only check layouts) never need them.

ATTENTION = "meshpilot_context_parallel"  # the name registered with transformers' AttentionInterface


def local_positions(seq_len: int, cp: int, rank: int) -> torch.Tensor:
    """Global positions of the tokens cp rank `rank` holds: chunk `rank` and chunk 2 cp - 1 - rank of 2 cp."""
    chunk = seq_len // (2 * cp)
    first = torch.arange(rank * chunk, (rank + 1) * chunk)
    second = torch.arange((2 * cp - 1 - rank) * chunk, (2 * cp - rank) * chunk)
    return torch.cat([first, second])


def gathered_positions(seq_len: int, cp: int) -> torch.Tensor:
    """Global positions of the gathered keys, in gather order (rank 0's tokens first)."""
    return torch.cat([local_positions(seq_len, cp, r) for r in range(cp)])


def local_mask(segment_ids: torch.Tensor | None, cp: int, rank: int, seq_len: int) -> torch.Tensor:
    """[batch or 1, 1, seq_len / cp, seq_len] boolean: may a local query attend to a gathered key?

    Causal by global position, and within one segment when the whole row's segment ids are given.
    """
    queries = local_positions(seq_len, cp, rank)
    keys = gathered_positions(seq_len, cp)
    device = segment_ids.device if segment_ids is not None else None
    queries, keys = queries.to(device), keys.to(device)
    mask = (keys[None, :] <= queries[:, None])[None]
    if segment_ids is not None:
        mask = mask & (segment_ids[:, queries, None] == segment_ids[:, None, keys])
    return mask[:, None]


def document_causal_mask_mod(segment_ids: torch.Tensor, cp: int, rank: int):
    """flex_attention's mask_mod for cp rank `rank`'s local queries against the gathered keys (in gather order):
    a query sees a key at or before its global position in its own document, from the full rows' [batch, seq]
    segment ids. The same pairs as local_mask, without any tensor of [local queries x all keys]."""
    seq_len = segment_ids.shape[1]
    queries = local_positions(seq_len, cp, rank).to(segment_ids.device)
    keys = gathered_positions(seq_len, cp).to(segment_ids.device)
    query_documents, key_documents = segment_ids[:, queries], segment_ids[:, keys]

    def mask_mod(batch, head, query, key):
        causal = keys[key] <= queries[query]
        return causal & (query_documents[batch, query] == key_documents[batch, key])

    return mask_mod


def local_block_mask(segment_ids: torch.Tensor, cp: int, rank: int):
    """The BlockMask of `document_causal_mask_mod`, built compiled (block by block) on CUDA."""
    # transformers' and flex's attention pieces only in a cp run (the launcher checks cp without them)
    from torch.nn.attention.flex_attention import create_block_mask

    batch, seq_len = segment_ids.shape
    mask_mod = document_causal_mask_mod(segment_ids, cp, rank)
    compiled = segment_ids.device.type == "cuda"
    return create_block_mask(
        mask_mod, batch, None, seq_len // cp, seq_len, device=segment_ids.device, _compile=compiled
    )


class _GatherSequence(torch.autograd.Function):
    """All-gather along dim 0 in forward; reduce-scatter (sum) of the gradient in backward: every rank's keys
    serve every rank's queries, so a key's gradient is the sum of what each rank's queries send back."""

    @staticmethod
    def forward(ctx, local: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
        ctx.group = group
        size = dist.get_world_size(group)
        gathered = local.new_empty((size * local.shape[0], *local.shape[1:]))
        dist.all_gather_into_tensor(gathered, local.contiguous(), group=group)
        return gathered

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        size = dist.get_world_size(ctx.group)
        local = grad.new_empty((grad.shape[0] // size, *grad.shape[1:]))
        dist.reduce_scatter_tensor(local, grad.contiguous(), group=ctx.group)
        return local, None


def gather_keys_values(
    key: torch.Tensor, value: torch.Tensor, group: dist.ProcessGroup
) -> tuple[torch.Tensor, torch.Tensor]:
    """[batch, heads, local seq, dim] keys and values -> the cp group's, [batch, heads, cp x local seq, dim].

    Sequence goes first for the collective (which concatenates along dim 0), and keys and values travel
    together: one all-gather and one reduce-scatter per layer.
    """
    local = torch.stack([key, value]).permute(3, 0, 1, 2, 4)  # [seq, 2, batch, heads, dim]
    gathered = _GatherSequence.apply(local, group)
    return gathered[:, 0].permute(1, 2, 0, 3), gathered[:, 1].permute(1, 2, 0, 3)


def context_parallel_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    *,
    group: dist.ProcessGroup,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """transformers' attention-function signature: local queries against the cp group's keys and values.

    `attention_mask` is the [batch, 1, local seq, seq] mask of `ContextParallel.shard`, or on CUDA its BlockMask
    (flex_attention runs); without one (a model or caller that passes none), the causal mask of the zigzag layout.
    """
    key, value = gather_keys_values(key, value, group)
    if _is_block_mask(attention_mask):
        # transformers' and flex's attention pieces only in a cp run (the launcher checks cp without them)
        from transformers.integrations.flex_attention import flex_attention_forward

        kwargs.pop("is_causal", None)
        return flex_attention_forward(module, query, key, value, attention_mask, **kwargs)
    if attention_mask is None:
        size, rank = dist.get_world_size(group), dist.get_rank(group)
        attention_mask = local_mask(None, size, rank, key.shape[2]).to(query.device)
    # transformers' and flex's attention pieces only in a cp run (the launcher checks cp without them)
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    kwargs.pop("is_causal", None)  # the mask says it all: local queries are not the first keys
    return sdpa_attention_forward(module, query, key, value, attention_mask, is_causal=False, **kwargs)


def _is_block_mask(mask) -> bool:
    # transformers' and flex's attention pieces only in a cp run (the launcher checks cp without them)
    from torch.nn.attention.flex_attention import BlockMask

    return isinstance(mask, BlockMask)


@dataclass(frozen=True)
class ContextParallel:
    """This rank's place in its cp group, and how it cuts a batch of full rows down to its share."""

    group: dist.ProcessGroup
    size: int
    rank: int
    flex: bool = False  # the mask as a BlockMask for flex_attention (CUDA), not a dense one

    def local(self, tensor: torch.Tensor) -> torch.Tensor:
        """This rank's tokens of [batch, seq_len, ...] full rows."""
        index = local_positions(tensor.shape[1], self.size, self.rank).to(tensor.device)
        return tensor.index_select(1, index)

    def mask(self, segment_ids: torch.Tensor):
        """The local queries' mask against the gathered keys, from the full rows' segment ids: a BlockMask under
        flex, else dense (also for a pipeline's shape inference, which runs on the meta device)."""
        if self.flex and segment_ids.device.type == "cuda":
            return local_block_mask(segment_ids, self.size, self.rank)
        return local_mask(segment_ids, self.size, self.rank, segment_ids.shape[1])

    def shard(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """This rank's share of a micro-batch of full rows: its tokens, labels and global position ids, their
        mask against the gathered keys, and the full rows' segment ids (for pipeline stages, which rebuild the
        mask)."""
        local = {key: self.local(value) for key, value in batch.items()}
        local["attention_mask"] = self.mask(batch["segment_ids"])
        local["row_segment_ids"] = batch["segment_ids"]
        return local


def check_context_parallel(layout: Layout, config: PretrainedConfig, seq_len: int) -> None:
    """Refuse what context parallelism cannot split, in one line: before any process starts."""
    if layout.cp == 1:
        return
    if seq_len % (2 * layout.cp):
        raise LayoutError(
            f"layout cp={layout.cp}: data.seq_len {seq_len} must be divisible by 2 x cp = {2 * layout.cp} "
            "(each sequence is cut into 2 x cp chunks)"
        )
    if not _takes_attention_interface(config):
        raise LayoutError(
            f"layout cp={layout.cp}: {config.model_type}'s attention does not go through transformers' "
            "attention interface, which context parallelism plugs into"
        )


def _takes_attention_interface(config: PretrainedConfig) -> bool:
    """Whether the model's attention goes through transformers' attention interface: a preset's light config
    (trainer.model.presets.PresetConfig) says so itself; otherwise transformers' model class for the config is asked
    (which imports its modeling code)."""
    said = getattr(config, "attention_interface", None)
    if said is not None:
        return said
    # the model classes' mapping (heavy) only for a config that does not say it itself
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING

    model_class = MODEL_FOR_CAUSAL_LM_MAPPING.get(type(config), None)
    return model_class is not None and getattr(model_class, "_supports_attention_backend", False)


def install_context_parallel(model: torch.nn.Module, layout: Layout, mesh) -> ContextParallel | None:
    """Register the attention function for this rank's cp group and switch the model to it (None when cp = 1)."""
    if layout.cp == 1:
        return None
    # transformers' and flex's attention pieces only in a cp run (the launcher checks cp without them)
    from transformers import AttentionInterface

    cp_mesh = mesh["cp"]
    group = cp_mesh.get_group()
    AttentionInterface.register(ATTENTION, partial(context_parallel_attention, group=group))
    model.set_attn_implementation(ATTENTION)
    flex = context_parallel_flex(mesh.device_type, head_dim(model.config))
    return ContextParallel(group, layout.cp, cp_mesh.get_local_rank(), flex)
