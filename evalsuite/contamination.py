"""Contamination check: how many of a test set's token n-grams occur in the run's training data.

Both sides are token ids of the run's own tokenizer: the training side is the tokenized corpus the trainer read
(tokens.npy), so the check sees exactly what the model saw. Each n-gram is reduced to a 64-bit polynomial hash
(false matches have odds around 1e-9 at these sizes), and membership is a sorted-array search, so millions of
training n-grams cost a fraction of a second. An example shorter than n tokens counts as one n-gram of its own
length, found when the whole example occurs in training (as in GPT-3's decontamination).
"""

from __future__ import annotations

import numpy as np

NGRAM = 13
# Flag a test set when more than this fraction of its n-grams occur in training data. Unrelated texts share short
# phrases: the built-in held-out documents share about 5% of their 13-token n-grams with the training split at a
# 512-token vocabulary (fewer with larger ones); a leaked test set shares nearly all.
FLAG_OVERLAP = 0.10
_BASE = np.uint64(0x100000001B3)  # odd multiplier: distinct short sequences get distinct hashes


def ngram_hashes(tokens: np.ndarray, n: int) -> np.ndarray:
    """The hash of every window of n consecutive tokens (uint64 arithmetic wraps around, as intended)."""
    tokens = np.asarray(tokens, dtype=np.uint64)
    count = len(tokens) - n + 1
    if count < 1:
        return np.empty(0, dtype=np.uint64)
    hashes = np.zeros(count, dtype=np.uint64)
    for j in range(n):
        hashes = hashes * _BASE + tokens[j : j + count]
    return hashes


class TrainingNgrams:
    """The n-grams of one tokenized training corpus, built on first use for each length asked about."""

    def __init__(self, tokens: np.ndarray):
        self.tokens = tokens
        self._sets: dict[int, np.ndarray] = {}

    def contains(self, hashes: np.ndarray, n: int) -> np.ndarray:
        if n not in self._sets:
            self._sets[n] = np.unique(ngram_hashes(self.tokens, n))
        known = self._sets[n]
        positions = np.searchsorted(known, hashes).clip(max=max(len(known) - 1, 0))
        return known[positions] == hashes if len(known) else np.zeros(len(hashes), dtype=bool)


def overlap(training: TrainingNgrams, examples: list[list[int]], n: int = NGRAM) -> float:
    """The fraction of the examples' n-grams (short examples: whole) that occur in the training data."""
    found = total = 0
    for length, group in _by_gram_length(examples, n).items():
        hashes = np.concatenate([ngram_hashes(np.asarray(ids), length) for ids in group])
        found += int(training.contains(hashes, length).sum())
        total += len(hashes)
    return found / total if total else 0.0


def _by_gram_length(examples: list[list[int]], n: int) -> dict[int, list[list[int]]]:
    groups: dict[int, list[list[int]]] = {}
    for ids in examples:
        if ids:
            groups.setdefault(min(len(ids), n), []).append(ids)
    return groups


def result(training: TrainingNgrams | None, examples: list[list[int]], n: int = NGRAM) -> dict:
    """The contamination entry of a task result; overlap is None when the training data is unknown."""
    if training is None:
        return {"n": n, "overlap": None, "flagged": False}
    fraction = overlap(training, examples, n)
    return {"n": n, "overlap": fraction, "flagged": fraction > FLAG_OVERLAP}
