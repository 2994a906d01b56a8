"""The model-facing half of the runner: batched log-likelihoods and greedy generation.

Batches are planned from token lengths alone (longest first, packed up to a token budget), so the same requests
always form the same batches: scores do not depend on what ran before, and a resumed evaluation recomputes exactly
the batches it lacks. Generation uses transformers' continuous batching where it runs (a finished sequence frees
its slot for the next one, instead of padding to the longest in the batch); otherwise static batches with left
padding, and the result says which.
"""

from __future__ import annotations

import gc
import math
from dataclasses import dataclass

import torch
from transformers import GenerationConfig

CONTINUOUS, STATIC = "continuous", "static"
_PAGE_SIZE = 32  # tokens per KV-cache page of continuous batching; small pages waste little on short prompts


@dataclass(frozen=True)
class Request:
    """Score `continuation` after `context` (token ids)."""

    context: list[int]
    continuation: list[int]


def plan_batches(lengths: list[int], max_tokens: int, max_rows: int) -> list[list[int]]:
    """Indices grouped into batches of at most `max_rows` rows and `max_tokens` padded tokens, longest first."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    batches: list[list[int]] = []
    for i in order:
        if batches and len(batches[-1]) < max_rows and (len(batches[-1]) + 1) * lengths[batches[-1][0]] <= max_tokens:
            batches[-1].append(i)
        else:
            batches.append([i])
    return batches


@torch.no_grad()
def loglikelihoods(
    model: torch.nn.Module, device: torch.device, requests: list[Request], pad_id: int, max_length: int
) -> list[tuple[float, bool]]:
    """Per request: the continuation's summed log-probability, and whether greedy decoding would produce it."""
    rows = [(r.context + r.continuation)[-(max_length + 1) :] for r in requests]
    width = max(len(row) - 1 for row in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):  # right padding: real tokens keep positions 0..n-1
        ids[i, : len(row) - 1] = torch.tensor(row[:-1])
        mask[i, : len(row) - 1] = 1
    logits = model(input_ids=ids.to(device), attention_mask=mask.to(device), use_cache=False).logits
    # Every continuation token of every row at once, on the device: (row, position, target, request) flat.
    owner, position, target = [], [], []
    for i, (row, request) in enumerate(zip(rows, requests, strict=True)):
        n = len(request.continuation)
        owner += [i] * n
        position += range(len(row) - 1 - n, len(row) - 1)
        target += row[-n:]
    owner_t, target_t = torch.tensor(owner, device=device), torch.tensor(target, device=device)
    logprobs = logits[owner_t, torch.tensor(position, device=device)].float().log_softmax(-1)
    chosen = torch.zeros(len(rows), dtype=torch.float64, device=device)
    chosen.index_add_(0, owner_t, logprobs.gather(1, target_t[:, None])[:, 0].double())
    misses = torch.zeros(len(rows), dtype=torch.long, device=device)
    misses.index_add_(0, owner_t, (logprobs.argmax(-1) != target_t).long())
    # One copy to the host for the whole batch, not one per row.
    return [(c, m == 0) for c, m in zip(chosen.tolist(), misses.tolist(), strict=True)]


def generation_config(max_new_tokens: int, eos_id: int, pad_id: int) -> GenerationConfig:
    return GenerationConfig(
        max_new_tokens=max_new_tokens, do_sample=False, num_beams=1, eos_token_id=eos_id, pad_token_id=pad_id
    )


@torch.no_grad()
def generate_static(
    model: torch.nn.Module, device: torch.device, prompts: list[list[int]], config: GenerationConfig
) -> list[list[int]]:
    """Greedy continuations of one batch, left-padded so that every prompt ends where generation starts."""
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), config.pad_token_id, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for i, prompt in enumerate(prompts):
        ids[i, width - len(prompt) :] = torch.tensor(prompt)
        mask[i, width - len(prompt) :] = 1
    out = model.generate(input_ids=ids.to(device), attention_mask=mask.to(device), generation_config=config)
    return [_until_eos(row[width:].tolist(), config.eos_token_id) for row in out]


@torch.no_grad()
def generate_continuous(model: torch.nn.Module, prompts: list[list[int]], config: GenerationConfig) -> list[list[int]]:
    """Greedy continuations with transformers' continuous batching; raises if any request failed."""
    # continuous batching's config only for a batched evaluation
    from transformers.generation.configuration_utils import ContinuousBatchingConfig

    # Sized for these requests: the default sizes the KV cache from free device memory, which on CPU takes seconds.
    pages = sum(math.ceil((len(p) + config.max_new_tokens) / _PAGE_SIZE) for p in prompts) + 1
    batching = ContinuousBatchingConfig(
        page_size=_PAGE_SIZE, num_blocks=pages, max_batch_tokens=max(sum(len(p) for p in prompts), _PAGE_SIZE)
    )
    # Stopping the manager runs gc.collect() twice, which walks every object of torch and transformers (about a
    # second); frozen, they are skipped, and only what generation itself allocated is collected.
    gc.freeze()
    try:
        outputs = model.generate_batch(
            prompts, generation_config=config, continuous_batching_config=batching, warmup=False, progress_bar=False
        )
    finally:
        gc.unfreeze()
    results = list(outputs.values())
    failed = [r for r in results if r.error is not None]
    if len(results) != len(prompts) or failed:
        reason = failed[0].error if failed else f"{len(prompts) - len(results)} requests got no result"
        raise RuntimeError(f"continuous batching failed: {reason}")
    return [_until_eos(list(r.generated_tokens), config.eos_token_id) for r in results]


def supported_batching(model: torch.nn.Module, device_mapped: bool) -> tuple[str, str | None]:
    """Continuous batching where transformers provides it for this model, else static; with the reason for static.

    Whether it then runs on this device shows on first use: the runner falls back to static batching if it fails.
    """
    if device_mapped:
        return STATIC, "the model is device-mapped (accelerate's offload hooks)"
    if not hasattr(model, "generate_batch"):
        return STATIC, "this transformers version has no continuous batching"
    return CONTINUOUS, None


def _until_eos(tokens: list[int], eos_id: int) -> list[int]:
    return tokens[: tokens.index(eos_id)] if eos_id in tokens else tokens
