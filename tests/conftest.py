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


@pytest.fixture(scope="session", autouse=True)
def private_store(tmp_path_factory):
    """The benchmark suite's sealed store of the session (and its subprocesses), never the user's own: the daily
    submission limit counts identical weights as one model, and every session trains the same tiny weights."""
    previous = os.environ.get("MESHPILOT_DATA")
    os.environ["MESHPILOT_DATA"] = str(tmp_path_factory.mktemp("meshpilot-data"))
    yield os.environ["MESHPILOT_DATA"]
    if previous is None:
        os.environ.pop("MESHPILOT_DATA", None)
    else:
        os.environ["MESHPILOT_DATA"] = previous
