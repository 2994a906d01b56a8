"""Where prepared artefacts (built-in tokenizers, tokenized data) are kept between runs."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from platformdirs import user_cache_dir


def cache_root() -> Path:
    """$MESHPILOT_CACHE, else the platform's cache directory (on Linux ~/.cache/meshpilot, or under $XDG_CACHE_HOME)."""
    return Path(os.environ.get("MESHPILOT_CACHE", user_cache_dir("meshpilot")))


def calibration_dir() -> Path:
    """What meshpilot learnt about each machine: its probe and the runs that calibrate the throughput model."""
    return cache_root() / "calibration"


def fingerprint(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def cached_dir(kind: str, key: str, build: Callable[[Path], None]) -> Path:
    """Return cache_root()/kind/key, building it first if missing.

    `build` fills a temporary directory that is renamed into place only when complete, so an interrupted
    build never leaves a half-written entry, and two processes building at once both end with a whole one.
    """
    final = cache_root() / kind / key
    if final.is_dir():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=final.parent))
    try:
        build(staging)
        staging.rename(final)
    except OSError:
        if not final.is_dir():
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return final
