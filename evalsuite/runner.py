"""Evaluate one split of one task: build the model's inputs, score them in cached batches, aggregate the metrics.

Only aggregates leave this module. Per-example results go to the resume cache in the sealed store and are deleted
once the whole run is recorded; prompts, labels and predictions are never logged or returned.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from transformers import GenerationConfig

from evalsuite.cache import ResumeCache, cache_key
from evalsuite.errors import BenchError
from evalsuite.metrics import Record, compute
from evalsuite.models import LoadedModel
from evalsuite.scoring import (
    CONTINUOUS,
    STATIC,
    Request,
    generate_continuous,
    generate_static,
    generation_config,
    loglikelihoods,
    plan_batches,
)
from evalsuite.store import Store
from evalsuite.task import Item, Task, render

Progress = Callable[[str, int, int], None]  # (task and split, results done, results in all)
_STATIC_ROWS, _CONTINUOUS_ROWS, _LIKELIHOOD_ROWS = 16, 256, 64


@dataclass
class Evaluation:
    """What every split of one `bench run` shares."""

    lm: LoadedModel
    store: Store
    batching: str  # continuous | static, for generation
    batching_note: str | None  # why static
    batch_tokens: int  # padded tokens per forward pass
    code_version: str
    progress: Progress | None = None
    caches: list[ResumeCache] = field(default_factory=list)

    def discard_caches(self) -> None:
        """Once the whole result is recorded: per-example results are not kept."""
        for cache in self.caches:
            cache.discard()


def evaluate(ev: Evaluation, task: Task, split: str, items: list[Item], dev: list[Item], version: str) -> dict:
    """The metrics of a split; resumes from the cache a previous, interrupted evaluation left."""
    # What the scores depend on: the weights, the task, the code, the batching (padded tokens per pass, and for
    # generation continuous or static: they may pick different tokens at a near tie), the device and the dtype
    # scored in (bf16 on CUDA, evalsuite.models.eval_dtype).
    key = cache_key(
        ev.lm.checkpoint_hash,
        version,
        split,
        ev.code_version,
        ev.batch_tokens,
        str(ev.lm.device),
        ev.batching,
        str(ev.lm.model.dtype),
    )
    cache = ResumeCache(ev.store.cache_dir, key)
    ev.caches.append(cache)
    contexts = [context_text(task, item, i, dev, split) for i, item in enumerate(items)]
    label = f"{task.name} {split}"
    if task.output_type == "generate_until":
        records = _generate(ev, task, items, contexts, cache, label)
    else:
        records = _likelihood(ev, task, items, contexts, cache, label)
    return compute(task.output_type, task.metrics, records)


def solved_text(task: Task, item: Item) -> str:
    """An example as it would appear written out, answer included: what a contaminated corpus would contain."""
    if task.output_type == "perplexity":
        return render(task.prompt, item)
    return render(task.prompt, item) + task.target_delimiter + answer(task, item)


def answer(task: Task, item: Item) -> str:
    target = render(task.target, item)
    return item[task.choices][int(target)] if task.output_type == "multiple_choice" else target


def context_text(task: Task, item: Item, index: int, dev: list[Item], split: str) -> str:
    """The prompt after `num_fewshot` solved dev examples (never the example itself)."""
    shots = [d for j, d in enumerate(dev) if not (split == "dev" and j == index)][: task.num_fewshot]
    return "".join(solved_text(task, d) + task.fewshot_delimiter for d in shots) + render(task.prompt, item)


def _likelihood(
    ev: Evaluation, task: Task, items: list[Item], contexts: list[str], cache: ResumeCache, label: str
) -> list[Record]:
    requests, owners = _requests(ev.lm, task, items, contexts, min(ev.lm.max_length, ev.batch_tokens))
    lengths = [len(r.context) + len(r.continuation) - 1 for r in requests]
    pad = ev.lm.tokenizer.pad_token_id

    def score(batch: list[int]) -> dict[int, Any]:
        found = loglikelihoods(ev.lm.model, ev.lm.device, [requests[i] for i in batch], pad, ev.lm.max_length)
        return {i: list(result) for i, result in zip(batch, found, strict=True)}

    batches = plan_batches(lengths, ev.batch_tokens, _LIKELIHOOD_ROWS)
    results = _run_cached(ev, cache, batches, score, label, len(requests))
    return _likelihood_records(task, items, requests, owners, results)


def _requests(
    lm: LoadedModel, task: Task, items: list[Item], contexts: list[str], window: int
) -> tuple[list[Request], list[int]]:
    """Scoring requests and the example each belongs to: a window of a document, a target, or one choice."""
    start = [lm.tokenizer.bos_token_id if lm.tokenizer.bos_token_id is not None else lm.tokenizer.eos_token_id]
    requests, owners = [], []
    for i, (item, context) in enumerate(zip(items, contexts, strict=True)):
        if task.output_type == "perplexity":
            tokens = start + _encode(lm, context)
            # Non-overlapping windows (of the model's length, at most a batch): every token is predicted once.
            for begin in range(0, len(tokens) - 1, window):
                piece = tokens[begin : begin + window + 1]
                requests.append(Request(piece[:1], piece[1:]))
                owners.append(i)
            continue
        options = item[task.choices] if task.output_type == "multiple_choice" else [render(task.target, item)]
        for option in options:
            continuation = _encode(lm, task.target_delimiter + option)
            if not continuation or len(continuation) > lm.max_length:
                raise BenchError(f"task {task.name}: a target is empty or longer than the model's {lm.max_length}")
            requests.append(Request(start + _encode(lm, context), continuation))
            owners.append(i)
    return requests, owners


def _likelihood_records(
    task: Task, items: list[Item], requests: list[Request], owners: list[int], results: list[list]
) -> list[Record]:
    per_example: list[list[int]] = [[] for _ in items]
    for r, owner in enumerate(owners):
        per_example[owner].append(r)
    records = []
    for item, mine in zip(items, per_example, strict=True):
        if task.output_type == "multiple_choice":
            scores = [results[r][0] for r in mine]
            sizes = [len((task.target_delimiter + option).encode()) for option in item[task.choices]]
            gold = int(render(task.target, item))
            normalised = [s / n for s, n in zip(scores, sizes, strict=True)]
            records.append(
                {
                    "correct": float(scores.index(max(scores)) == gold),
                    "correct_norm": float(normalised.index(max(normalised)) == gold),
                }
            )
            continue
        scored = render(task.prompt, item)
        if task.output_type != "perplexity":
            scored = task.target_delimiter + answer(task, item)
        records.append(
            {
                "nll": -sum(results[r][0] for r in mine),
                "tokens": sum(len(requests[r].continuation) for r in mine),
                "bytes": len(scored.encode()),
                "greedy": float(all(results[r][1] for r in mine)),
            }
        )
    return records


def _generate(
    ev: Evaluation, task: Task, items: list[Item], contexts: list[str], cache: ResumeCache, label: str
) -> list[Record]:
    """Greedy answers, cut at the first stop string, compared with the target."""
    lm = ev.lm
    start = [lm.tokenizer.bos_token_id if lm.tokenizer.bos_token_id is not None else lm.tokenizer.eos_token_id]
    room = lm.max_length - task.max_new_tokens
    if room < 2:
        raise BenchError(f"task {task.name}: max_new_tokens {task.max_new_tokens} leaves no room for a prompt")
    prompts = [(start + _encode(lm, c))[-room:] for c in contexts]  # keep the end: the question is there
    config = generation_config(task.max_new_tokens, lm.tokenizer.eos_token_id, lm.tokenizer.pad_token_id)

    def score(batch: list[int]) -> dict[int, Any]:
        chosen = [prompts[i] for i in batch]
        outputs = _generate_batch(ev, chosen, config)
        texts = [lm.tokenizer.decode(o, skip_special_tokens=True) for o in outputs]
        expected = [render(task.target, items[i]).strip() for i in batch]
        return {i: float(_cut(t, task.until) == e) for i, t, e in zip(batch, texts, expected, strict=True)}

    lengths = [len(p) + task.max_new_tokens for p in prompts]
    # Continuous batching schedules tokens itself: a chunk is only the unit of caching. Static batches pad to their
    # longest member, so they keep to the token budget.
    if ev.batching == CONTINUOUS:
        batches = plan_batches(lengths, sum(lengths), _CONTINUOUS_ROWS)
    else:
        batches = plan_batches(lengths, ev.batch_tokens, _STATIC_ROWS)
    results = _run_cached(ev, cache, batches, score, label, len(prompts))
    return [{"exact_match": r} for r in results]


def _generate_batch(ev: Evaluation, prompts: list[list[int]], config: GenerationConfig) -> list[list[int]]:
    if ev.batching == CONTINUOUS:
        try:
            return generate_continuous(ev.lm.model, prompts, config)
        except Exception as e:  # not on this device or model: say so, and batch statically from now on
            ev.batching = STATIC
            ev.batching_note = f"continuous batching failed here: {str(e).strip().splitlines()[0][:200]}"
    return generate_static(ev.lm.model, ev.lm.device, prompts, config)


def _cut(text: str, until: list[str]) -> str:
    """The answer: the generated text up to the first stop string, without surrounding spaces."""
    for stop in until:
        text = text.split(stop, 1)[0]
    return text.strip()


def _run_cached(
    ev: Evaluation,
    cache: ResumeCache,
    batches: list[list[int]],
    score: Callable[[list[int]], dict[int, Any]],
    label: str,
    total: int,
) -> list[Any]:
    """Score the batches the cache lacks, caching each as it completes; all results in index order."""
    done = sum(len(b) for b in batches if cache.has_all(b))
    for batch in batches:
        if cache.has_all(batch):
            continue
        cache.add(score(batch))
        done += len(batch)
        if ev.progress is not None:
            ev.progress(label, done, total)
    return [cache.results[i] for i in range(total)]


def _encode(lm: LoadedModel, text: str) -> list[int]:
    return lm.tokenizer(text, add_special_tokens=False)["input_ids"]
