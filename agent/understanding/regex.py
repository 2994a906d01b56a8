"""`re`'s functions with a cache large enough for the parser: each pattern is compiled once per process.

The parser calls `re` with about 750 distinct patterns, many built by f-strings from its word lists. `re` keeps
only 512 compiled ones, and past that its cache evicts the oldest, so every request recompiled most of them: a
request took 40 ms, 4 with this cache. The modules of this package import this one as `re`; the functions,
flags and types are `re`'s own.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from re import IGNORECASE, VERBOSE, I, Match, Pattern, X, escape  # noqa: F401 - `re`'s, for the modules that use them
from typing import Any

# Bounded, because a few patterns carry names from the user's repository or request.
_CACHE_SIZE = 8192


@functools.lru_cache(maxsize=_CACHE_SIZE)
def compile(pattern: str | Pattern[str], flags: int = 0) -> Pattern[str]:
    return re.compile(pattern, flags)


def search(pattern: str | Pattern[str], string: str, flags: int = 0) -> Match[str] | None:
    return compile(pattern, flags).search(string)


def match(pattern: str | Pattern[str], string: str, flags: int = 0) -> Match[str] | None:
    return compile(pattern, flags).match(string)


def fullmatch(pattern: str | Pattern[str], string: str, flags: int = 0) -> Match[str] | None:
    return compile(pattern, flags).fullmatch(string)


def sub(pattern: str | Pattern[str], repl: str | Callable[[Match[str]], str], string: str, count: int = 0,
        flags: int = 0) -> str:  # fmt: skip
    return compile(pattern, flags).sub(repl, string, count)


def subn(pattern: str | Pattern[str], repl: str | Callable[[Match[str]], str], string: str, count: int = 0,
         flags: int = 0) -> tuple[str, int]:  # fmt: skip
    return compile(pattern, flags).subn(repl, string, count)


def split(pattern: str | Pattern[str], string: str, maxsplit: int = 0, flags: int = 0) -> list[str | Any]:
    return compile(pattern, flags).split(string, maxsplit)


def findall(pattern: str | Pattern[str], string: str, flags: int = 0) -> list[Any]:
    return compile(pattern, flags).findall(string)


def finditer(pattern: str | Pattern[str], string: str, flags: int = 0) -> Iterator[Match[str]]:
    return compile(pattern, flags).finditer(string)
