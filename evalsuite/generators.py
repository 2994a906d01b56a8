"""Synthetic task items, generated deterministically from a seed string.

A public dev split is generated from a seed anyone can compute; a private test split from the sealed store's secret
seed, so that nobody, the model's trainer included, can know the test items in advance. Python's `random.Random`
seeded with a string is stable across platforms and Python versions (seed version 2 hashes the string with
SHA-512), so the same seed gives the same items everywhere.
"""

from __future__ import annotations

import json
import random
import string
from collections.abc import Callable
from typing import Any

from evalsuite.errors import BenchError

GENERATORS_VERSION = 1  # bump when any generator below changes what it produces
Item = dict[str, Any]


def _addition(rng: random.Random) -> Item:
    a, b = rng.randint(10, 99), rng.randint(10, 99)
    return {"a": a, "b": b, "answer": str(a + b)}


def _reversal(rng: random.Random) -> Item:
    word = "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(4, 6)))
    return {"text": word, "answer": word[::-1]}


def _kv_recall(rng: random.Random) -> Item:
    keys = rng.sample(["".join(t) for t in _three_letter_keys(rng)], 4)
    values = [str(v) for v in rng.sample(range(100, 1000), 4)]
    gold = rng.randrange(4)
    pairs = ", ".join(f"{k}={v}" for k, v in zip(keys, values, strict=True))
    return {"pairs": pairs, "key": keys[gold], "choices": values, "gold": gold}


def _three_letter_keys(rng: random.Random) -> list[tuple[str, ...]]:
    return [tuple(rng.choice(string.ascii_lowercase) for _ in range(3)) for _ in range(8)]


# name -> (fields every item has, maker)
GENERATORS: dict[str, tuple[tuple[str, ...], Callable[[random.Random], Item]]] = {
    "addition": (("a", "b", "answer"), _addition),
    "reversal": (("text", "answer"), _reversal),
    "kv_recall": (("pairs", "key", "choices", "gold"), _kv_recall),
}


def generate(name: str, seed: str, count: int, exclude: list[Item] = ()) -> list[Item]:
    """`count` distinct items of generator `name` from `seed`, none equal to an item of `exclude`.

    `exclude` keeps the public dev items out of the private test split: a model trained on dev must not have seen
    a test item.
    """
    _, make = GENERATORS[name]
    rng = random.Random(f"{name}:{seed}")
    seen = {_key(item) for item in exclude}
    items: list[Item] = []
    for _ in range(count * 100):  # distinct items run out only for absurd counts
        if len(items) == count:
            return items
        item = make(rng)
        if _key(item) not in seen:
            seen.add(_key(item))
            items.append(item)
    raise BenchError(f"generator {name} cannot make {count} distinct items; ask for fewer")


def _key(item: Item) -> str:
    return json.dumps(item, sort_keys=True)
