"""Shared set-up: one cache of built-in tokenizers and tokenized data for the whole session (and its ranks)."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session", autouse=True)
def meshpilot_cache(tmp_path_factory):
    """Tokenizers and tokenized corpora are built once per test session, shared by every test and rank."""
    path = os.environ.get("MESHPILOT_TEST_CACHE") or str(tmp_path_factory.mktemp("meshpilot-cache"))
    previous = os.environ.get("MESHPILOT_CACHE")
    os.environ["MESHPILOT_CACHE"] = path
    yield path
    if previous is None:
        os.environ.pop("MESHPILOT_CACHE", None)
    else:
        os.environ["MESHPILOT_CACHE"] = previous
