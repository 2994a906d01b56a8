"""Metrics as small functions from per-example records to one number, as in lm-evaluation-harness.

The runner turns each example into a record of plain numbers (its negative log-likelihood and token count, whether
the greedy continuation matched, ...); a metric aggregates the records of a split. Aggregates are sums in item
order over float64 values, so the same records always give the same score.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from evalsuite.errors import BenchError

Record = dict[str, float]


@dataclass(frozen=True)
class Metric:
    aggregate: Callable[[list[Record]], float]
    higher_is_better: bool


def _mean(field: str) -> Callable[[list[Record]], float]:
    return lambda records: math.fsum(float(r[field]) for r in records) / len(records)


def _perplexity(records: list[Record]) -> float:
    """exp of the mean negative log-likelihood per token: depends on the tokenizer."""
    return math.exp(math.fsum(r["nll"] for r in records) / sum(r["tokens"] for r in records))


def _bits_per_byte(records: list[Record]) -> float:
    """Negative log-likelihood in bits per UTF-8 byte of text: comparable across tokenizers."""
    return math.fsum(r["nll"] for r in records) / math.log(2) / sum(r["bytes"] for r in records)


_LIKELIHOOD = {"perplexity": Metric(_perplexity, False), "bits_per_byte": Metric(_bits_per_byte, False)}

# output type -> metric name -> metric
METRICS: dict[str, dict[str, Metric]] = {
    "perplexity": _LIKELIHOOD,
    # acc: the target is the model's greedy continuation, token for token
    "loglikelihood": {**_LIKELIHOOD, "acc": Metric(_mean("greedy"), True)},
    # acc: the most likely choice is the gold one; acc_norm: the same with log-likelihood per byte of each choice
    "multiple_choice": {"acc": Metric(_mean("correct"), True), "acc_norm": Metric(_mean("correct_norm"), True)},
    "generate_until": {"exact_match": Metric(_mean("exact_match"), True)},
}
OUTPUT_TYPES = tuple(METRICS)


def compute(output_type: str, names: list[str], records: list[Record]) -> dict[str, float]:
    """The named metrics of a split's records."""
    return {name: METRICS[output_type][name].aggregate(records) for name in names}


def higher_is_better(name: str) -> bool:
    for known in METRICS.values():
        if name in known:
            return known[name].higher_is_better
    raise BenchError(f"unknown metric {name!r}: known are {sorted({n for known in METRICS.values() for n in known})}")
