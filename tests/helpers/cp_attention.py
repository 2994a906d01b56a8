"""Context-parallel attention against the single-process model, with negative controls: one forward and
backward of the tiny model per data variant (packed or one document per row, grouped-query or full multi-head).

Run under torchrun: `python -m torch.distributed.run --nproc-per-node CP cp_attention.py OUT DEVICE VARIANTS`,
VARIANTS a JSON object {name: [packed, key-value heads]}. For each variant, every rank computes the
single-process reference on the whole batch (packed rows with their block-causal mask, unpacked ones with plain
causal attention, as the trainer does), then its share under context parallelism with the real attention
function and with broken ones: keys and values left local (not gathered), a mask whose keys are in sequence order
rather than gather order, and, for packed rows, a mask that ignores document boundaries. Rank 0 writes, for each,
the relative difference of the summed loss and the largest relative gradient difference, and the bytes the real
run's cp collectives moved per rank, as JSON.
"""

from __future__ import annotations

import copy
import json
import os
import sys
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from transformers import AttentionInterface, AutoConfig
from transformers.integrations.sdpa_attention import sdpa_attention_forward

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for support
from support import TINY_MODEL

from trainer.data.packing import IGNORE_INDEX, block_causal_mask, model_inputs, row_from_segments
from trainer.layout import Layout
from trainer.model.build import build_model
from trainer.parallel.context_parallel import ATTENTION, install_context_parallel, local_mask, local_positions

SEQ_LEN = 64


def batch(rows: int, seed: int, packed: bool) -> dict[str, torch.Tensor]:
    """Rows of several documents of random lengths (packed) or of one document each; the last row ends in
    padding that spans more than one cp chunk."""
    rng = np.random.default_rng(seed)
    built = []
    for row in range(rows):
        segments = np.zeros(SEQ_LEN + 1, dtype=np.int64)
        if packed:
            cuts = np.sort(rng.choice(np.arange(1, SEQ_LEN), size=3, replace=False))
            segments = np.searchsorted(cuts, np.arange(SEQ_LEN + 1), side="right")
        if row == rows - 1:
            segments[-21:] = -1
        tokens = rng.integers(0, TINY_MODEL["vocab_size"], SEQ_LEN + 1)
        built.append(row_from_segments(tokens, segments))
    return {k: torch.from_numpy(np.stack([r[k] for r in built])) for k in built[0]}


def loss_and_gradients(model, batch, packed: bool, group=None) -> tuple[float, dict[str, torch.Tensor]]:
    """Summed cross-entropy over the batch (over the group's shares, when given) and the gradients of its mean."""
    model.zero_grad()
    logits = model(**model_inputs(batch, packed)).logits
    loss = F.cross_entropy(logits.flatten(0, 1), batch["labels"].flatten(), ignore_index=IGNORE_INDEX, reduction="sum")
    tokens = (batch["labels"] != IGNORE_INDEX).sum().double()
    total = loss.detach().double()
    if group is not None:
        dist.all_reduce(tokens, group=group)
        dist.all_reduce(total, group=group)
    (loss / tokens).backward()
    grads = {name: p.grad.detach().clone() for name, p in model.named_parameters()}
    if group is not None:
        for grad in grads.values():
            dist.all_reduce(grad, group=group)
    return float(total), grads


def compare(reference: tuple, got: tuple) -> dict[str, float]:
    (ref_loss, ref_grads), (loss, grads) = reference, got
    worst = max(float((grads[n] - g).abs().max() / g.abs().max().clamp_min(1e-12)) for n, g in ref_grads.items())
    return {"loss_rel": abs(loss - ref_loss) / abs(ref_loss), "grad_rel": worst}


def keys_not_gathered(module, query, key, value, attention_mask, **kwargs):
    """Negative control: attention over this rank's own keys only (the matching columns of the mask)."""
    local, rank = key.shape[2], dist.get_rank()
    mask = attention_mask[..., rank * local : (rank + 1) * local]
    kwargs.pop("is_causal", None)
    return sdpa_attention_forward(module, query, key, value, mask, is_causal=False, **kwargs)


def keys_in_sequence_order(segment_ids: torch.Tensor, cp: int, rank: int) -> torch.Tensor:
    """Negative control: the local queries' rows of the full mask, whose key columns are in sequence order while
    the gathered keys are in gather order (zigzag)."""
    return block_causal_mask(segment_ids)[:, :, local_positions(SEQ_LEN, cp, rank).to(segment_ids.device)]


class CountedCollectives:
    """Bytes each rank sends in the cp all-gathers and reduce-scatters (ring: (n - 1) / n of the full tensor),
    counted by wrapping the real collectives while they run."""

    def __init__(self) -> None:
        self.bytes = 0
        self.calls = 0
        self.saved = (dist.all_gather_into_tensor, dist.reduce_scatter_tensor)

    def __enter__(self):
        gather, scatter = self.saved

        def counted(function, full_index):
            def run(*args, group=None, **kwargs):
                n = dist.get_world_size(group)
                self.bytes += args[full_index].nbytes * (n - 1) // n
                self.calls += 1
                return function(*args, group=group, **kwargs)

            return run

        dist.all_gather_into_tensor = counted(gather, 0)  # (output, input): the output is the full tensor
        dist.reduce_scatter_tensor = counted(scatter, 1)  # (output, input): the input is
        return self

    def __exit__(self, *exc) -> None:
        dist.all_gather_into_tensor, dist.reduce_scatter_tensor = self.saved


def variant_results(packed: bool, kv_heads: int, mesh, device: torch.device) -> dict:
    """Reference, the real cp attention and the negative controls for one data variant."""
    config = AutoConfig.for_model(**{**TINY_MODEL, "num_key_value_heads": kv_heads})
    model = build_model(config, None, seed=0).to(device)
    model.train()
    full = {k: v.to(device) for k, v in batch(rows=2, seed=1, packed=packed).items()}
    reference = loss_and_gradients(model, full, packed)

    cp = dist.get_world_size()
    cp_model = copy.deepcopy(model)
    context = install_context_parallel(cp_model, Layout(dp_replicate=1, cp=cp), mesh)
    local = context.shard(full)
    with CountedCollectives() as counted:
        gathered = loss_and_gradients(cp_model, local, packed, context.group)
    results = {
        "gathered": compare(reference, gathered),
        "collective_bytes": counted.bytes,
        "collectives": counted.calls,
    }

    def against_reference(shares: dict) -> dict[str, float]:
        return compare(reference, loss_and_gradients(cp_model, shares, packed, context.group))

    masks = {"keys_in_sequence_order": keys_in_sequence_order(full["segment_ids"], cp, context.rank)}
    if packed:  # with one document per row, the causal mask is the right one
        masks["documents_ignored"] = local_mask(None, cp, context.rank, SEQ_LEN).to(device)
    for control, mask in masks.items():
        results[control] = against_reference(dict(local, attention_mask=mask))
    AttentionInterface.register(ATTENTION, keys_not_gathered)  # the next variant's install registers the real one
    results["keys_not_gathered"] = against_reference(local)
    return results


def main(out: Path, device_type: str, variants: dict[str, list]) -> None:
    if device_type == "cuda":
        local_rank = int(os.environ["LOCAL_RANK"])
        torch.cuda.set_device(local_rank)
        dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
        device = torch.device("cuda", local_rank)
    else:
        dist.init_process_group("gloo")
        device = torch.device("cpu")
    mesh = Layout(dp_replicate=1, cp=dist.get_world_size()).build_mesh(device_type)
    results = {name: variant_results(packed, kv_heads, mesh, device) for name, (packed, kv_heads) in variants.items()}
    if dist.get_rank() == 0:
        out.write_text(json.dumps(results))
    dist.destroy_process_group()


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3]))
