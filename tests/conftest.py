"""Shared set-up: one cache of built-in tokenizers and tokenized data for the whole session (and its ranks)."""

from __future__ import annotations

import json
import os
import resource
import time
from pathlib import Path

import pytest


@pytest.fixture(scope="session", autouse=True)
def meshpilot_cache(tmp_path_factory):
    """Tokenizers and tokenized corpora are built once per test session, shared by every test and rank."""
    path = os.environ.get("MESHPILOT_TEST_CACHE")
    if not path:
        path = str(tmp_path_factory.mktemp("meshpilot-cache"))
        if _XDIST_WORKER:
            _share_prepared_data_between_workers(Path(path), tmp_path_factory.getbasetemp().parent)
    previous = os.environ.get("MESHPILOT_CACHE")
    os.environ["MESHPILOT_CACHE"] = path
    yield path
    if previous is None:
        os.environ.pop("MESHPILOT_CACHE", None)
    else:
        os.environ["MESHPILOT_CACHE"] = previous


@pytest.fixture(scope="session")
def known(tmp_path_factory):
    """The benchmark's fixture repository (bench.agent_understanding.build_fixture) as agent.understanding knows it:
    the tests of the parser read their sentences in it. Imported here, not at the top: most test files never need
    the agent."""
    from tests.understanding_support import fixture_known

    return fixture_known(tmp_path_factory)


def _share_prepared_data_between_workers(cache: Path, session_root: Path) -> None:
    """A worker's cache whose tokenizers and tokenized data are in the session's base directory (xdist's workers'
    own are in it), so that each is prepared once per session rather than once per worker: seconds of CPU each, the
    first run of a file on a fresh cache (cached_dir's rename into place makes two workers building one at once
    safe). Calibration stays the worker's own: some tests count its records."""
    from support import PREPARED_DATA  # here: support imports the preloaded launcher's client

    for kind in PREPARED_DATA:
        shared = session_root / "meshpilot-prepared-data" / kind
        shared.mkdir(parents=True, exist_ok=True)
        (cache / kind).symlink_to(shared, target_is_directory=True)


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


# The test files that take longest, longest first (seconds of their tests' wall time in a fresh clone's `make
# test` on a 2-core machine, by MESHPILOT_TEST_COSTS below: 2026-11-27 at 7df9cdc, less what the later changes
# measured for the files they shortened). `make test` hands whole files to its workers in collection order (--dist
# loadfile --no-loadscope-reorder), so these start first and what is left at the end is short files: the workers
# end together instead of one waiting while the other runs a long file (xdist's own order, files with the most
# tests first, leaves the few-test long ones last). Only the order: a file missing here runs after them.
LONGEST_FIRST = (
    "test_compile.py",  # 160
    "test_demo.py",  # 115
    "test_bench_scripts.py",  # 110
    "test_moe_layouts.py",  # 95
    "test_sweep_preemption.py",  # 75
    "test_sharded_build.py",  # 65
    "test_resume.py",  # 65
    "test_layouts.py",  # 60
    "test_float8.py",  # 55
    "test_context_parallel.py",  # 50
    "test_faults.py",  # 50
    "test_agent_resume.py",  # 50
    "test_private_leak.py",  # 50
    "test_sweep.py",  # 45
    "test_sp_saves_split.py",  # 45
    "test_jobs.py",  # 40
    "test_tui.py",  # 40
    "test_zero_stages.py",  # 30
    "test_sweep_faults.py",  # 30
    "test_dtensor_optim.py",  # 30
    "test_agent_runs.py",  # 30
    "test_evalsuite.py",  # 25
    "test_preloaded.py",  # 20
    "test_forkserver.py",  # 20 (new: not measured in that clone)
    "test_vocab_parallel.py",  # 20
    "test_lifeline.py",  # 20
    "test_multinode.py",  # 20
    "test_compile_cost.py",  # 20
    "test_moe_costs.py",  # 20
    "test_expert_parallel.py",  # 15
    "test_moe_checkpoint.py",  # 15
    "test_probe.py",  # 15
    "test_pipeline.py",  # 15
    "test_dataset_formats.py",  # 15
    "test_planner_sharding.py",  # 10
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest files first (LONGEST_FIRST), every file's tests together and in their own order."""
    rank = {name: position for position, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the other files keep their order


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


_XDIST_WORKER = False  # whether this process is one of xdist's workers (pytest_configure)


def pytest_configure(config: pytest.Config) -> None:
    global _XDIST_WORKER
    _XDIST_WORKER = hasattr(config, "workerinput")  # xdist's own mark of a worker (its environment may be inherited)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """With MESHPILOT_TEST_FAILURES=file, each failure's report appended to it as it comes, by the one process that
    sees every report (xdist's controller, or the only one): bench/gpu.py's CUDA tests keep the failures' text when
    the GPU time runs out before pytest prints its summary."""
    path = os.environ.get("MESHPILOT_TEST_FAILURES")
    if path and report.failed and not _XDIST_WORKER:
        with open(path, "a") as failures:
            failures.write(f"=== {report.nodeid} ({report.when})\n{report.longreprtext}\n")
