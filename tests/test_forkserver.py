"""Jobs whose supervisor and launcher are forked from a forkserver (agent.jobs.forkserver), as a sweep's trials are:
they train as spawned ones do, every process of theirs carries the job's token where stopping a job looks for it,
and a job whose environment changes what the preloaded imports read is spawned instead.

(A forked trial of a sweep job, tied to the sweep, dying with the sweep's supervisor: tests/test_sweep_jobs.py.)
"""

from __future__ import annotations

import re
import signal
import time
from pathlib import Path

import psutil
import pytest
from support import write_experiment

from agent.jobs import (
    LOG_FILE,
    cancel_run,
    forkserver,
    job_processes,
    read_job,
    start_forkserver,
    start_run,
    stop_forkserver,
    wait_run,
)
from trainer.results.rundir import RunDir

pytestmark = pytest.mark.slow  # real jobs
LIMIT_S = 300  # a bound on waiting for state, not a timing
FORKED = "forked from its supervisor"  # what a forked launcher prints first (agent.jobs.supervisor)


def wait_for(condition, what: str) -> None:
    deadline = time.monotonic() + LIMIT_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def names(token: str) -> set[str]:
    found = set()
    for pid in job_processes(token):
        try:
            found.add(psutil.Process(pid).name())
        except psutil.NoSuchProcess:
            continue
    return found


def test_a_forked_job_trains_as_a_spawned_one_and_is_stopped_by_its_token(tmp_path):
    experiment = write_experiment(tmp_path)
    hang = {"MESHPILOT_FAULT": "rank=0,step=2,kind=hang"}  # step 1 written, then the run waits to be stopped
    start_forkserver()
    try:
        # A variable read when torch or transformers is imported (HF_*) differs from the forkserver's: spawned.
        spawned = start_run(experiment, tmp_path / "spawned", nproc=2, env={**hang, "HF_MESHPILOT_TEST": "1"})
        forked = start_run(experiment, tmp_path / "forked", nproc=2, env=hang)
        for run in (spawned, forked):
            wait_for(lambda run=run: RunDir(tmp_path / run).read_steps(), f"{run}'s first step")
        job = read_job(tmp_path / forked)
        # Every process of the forked job carries its token: the supervisor, the launcher, torchrun's agent, ranks.
        wait_for(lambda: {"meshpilot:agent", "meshpilot:r0", "meshpilot:r1"} <= names(job["token"]), "its ranks")
        assert {job["pid"], job["launcher_pid"]} <= set(job_processes(job["token"]))
        for run in (spawned, forked):
            cancel_run(tmp_path / run)
            assert wait_run(tmp_path / run)["state"] == "cancelled"
        wait_for(lambda: not job_processes(job["token"]), "every process of the forked job to end")
    finally:
        stop_forkserver()
    logs = {run: (tmp_path / run / LOG_FILE).read_text() for run in (spawned, forked)}
    assert FORKED in logs[forked] and FORKED not in logs[spawned]
    (spawned_step,), (forked_step,) = (RunDir(tmp_path / run).read_steps()[:1] for run in (spawned, forked))
    assert forked_step["loss"] == spawned_step["loss"]  # the same first step, bit for bit


def test_a_ctrl_c_typed_at_a_hand_sweep_leaves_its_forkserver_serving():
    """A terminal's Ctrl-C reaches the whole process group of a hand sweep, its forkserver too: the forkserver
    ignores it (the sweep ends it), so that it neither dies mid-sweep nor prints a KeyboardInterrupt."""
    server = forkserver._Forkserver()
    try:
        assert server.ready()  # its imports done: its signal dispositions are set
        ignored = re.search(r"^SigIgn:\s*([0-9a-f]+)$", Path(f"/proc/{server.pid}/status").read_text(), re.M)
        assert int(ignored.group(1), 16) & (1 << (signal.SIGINT - 1))
    finally:
        server.stop()
