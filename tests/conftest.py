"""Shared set-up: one cache of built-in tokenizers and tokenized data for the whole session (and its ranks)."""

from __future__ import annotations

import json
import os
import resource
import time

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


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """With MESHPILOT_TEST_COSTS=file, one JSON line per test: wall seconds and the CPU seconds of this process and
    of the processes it reaped (ranks, launchers), fixtures' set-up included. The suite's time is CPU-bound on
    two cores, so this is what to read before making it faster."""
    path = os.environ.get("MESHPILOT_TEST_COSTS")
    if not path:
        return (yield)
    before = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        return (yield)
    finally:
        after = (
            time.perf_counter(),
            resource.getrusage(resource.RUSAGE_SELF),
            resource.getrusage(resource.RUSAGE_CHILDREN),
        )
        cpu = [a.ru_utime + a.ru_stime - b.ru_utime - b.ru_stime for a, b in zip(after[1:], before[1:], strict=True)]
        line = {"test": item.nodeid, "wall_s": after[0] - before[0], "cpu_s": cpu[0], "children_cpu_s": cpu[1]}
        line |= {"ended": time.time(), "worker": os.environ.get("PYTEST_XDIST_WORKER", "")}
        with open(path, "a") as costs:
            costs.write(json.dumps(line) + "\n")
