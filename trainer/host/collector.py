"""Pausing Python's cyclic garbage collector while long-lived objects pile up. Importing torch and transformers,
or planning every candidate, makes hundreds of thousands of objects that stay and none that form garbage cycles;
the collector would walk all of them again and again as they come (a tenth of a `meshpilot plan`). Paused, not
dropped: reference counting frees everything as before, and the collector runs again afterwards."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic collector off inside the block, and back as it was after it (nested blocks leave it off)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()
