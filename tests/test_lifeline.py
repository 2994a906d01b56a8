"""Nothing outlives its launcher, and one launcher at a time holds a run directory.

The run's processes are found by the token in their environment, wherever they went (reparented, other
sessions); SIGKILL of the launcher's whole process group is tested on every layout in test_resume.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

import psutil
import pytest
from killed_runs import start_train, survivors, wait_for
from support import REPO, meshpilot, train, write_experiment

from agent.jobs import job_processes
from trainer.config import ConfigError
from trainer.launch.torchrun import AGENT_NAME, can_fork
from trainer.rank.checkpoint import latest
from trainer.results.rundir import RunDir, RunInUse, RunLock


@pytest.mark.slow
def test_a_live_run_holds_its_directory_and_dies_with_its_launcher(tmp_path):
    from trainer.launch.launcher import TrainRequest, prepare

    experiment = write_experiment(tmp_path, {"train": {"steps": 4, "checkpoint_every": 1}})
    out, run = tmp_path / "run", RunDir(tmp_path / "run")
    launcher, token = start_train(experiment, out, "--nproc", "2", fault="rank=0,step=2,kind=hang")
    wait_for(lambda: len(run.read_steps()) == 1 and latest(run.checkpoints) is not None, "step 1 and its checkpoint")

    # launcher -> torchrun's agent -> two ranks forked by it, named after their rank.
    tree = psutil.Process(launcher.pid).children(recursive=True)
    ranks = [p for p in tree if p.name().startswith("meshpilot:r")]
    agents = [p for p in tree if p.name() == AGENT_NAME]
    assert (len(tree), len(ranks), len(agents)) == (3, 2, 1)  # nothing else of the run to tie
    assert sorted(rank.name() for rank in ranks) == ["meshpilot:r0", "meshpilot:r1"]
    assert all(rank.ppid() == agents[0].pid for rank in ranks)
    assert {launcher.pid, *(p.pid for p in tree)} <= set(job_processes(token))  # what the check below looks for

    in_use = f"run directory {out} is in use by a live run (pid {launcher.pid}); wait for it or choose another --out"
    second = meshpilot("train", str(experiment), "--nproc", "2", "--out", str(out))
    assert (second.returncode, second.stderr.splitlines()) == (2, [f"meshpilot: error: {in_use}"])
    with pytest.raises(ConfigError) as refused:
        prepare(TrainRequest(experiment, nproc=2, out=out, resume=True))
    assert str(refused.value) == in_use

    launcher.send_signal(signal.SIGKILL)  # the launcher alone, as `kill -9 PID` of a foreground command
    launcher.communicate()
    assert survivors(token) == []
    assert len(run.read_steps()) == 1 and run.read_metrics() is None  # nothing trained on
    prepare(TrainRequest(experiment, nproc=2, out=out, resume=True)).lock.release()  # the directory is free again


def test_the_run_lock_is_exclusive_and_dies_with_its_holder(tmp_path):
    run = RunDir(tmp_path / "run")
    hold = "import sys, time; from trainer.results.rundir import RunDir, RunLock; lock = RunLock(RunDir(sys.argv[1]))"
    holder = subprocess.Popen(
        [sys.executable, "-c", hold + "; print('held', flush=True); time.sleep(3600)", str(run.path)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline() == "held\n"
        with pytest.raises(RunInUse) as in_use:
            RunLock(run)
        assert in_use.value.pid == holder.pid
    finally:
        holder.kill()  # SIGKILL: no chance to unlock
        holder.wait()
    lock = RunLock(run)
    assert run.lock_file().read_text() == f"{os.getpid()}\n"
    with pytest.raises(RunInUse):  # exclusive within one process too
        RunLock(run)
    RunLock(run, node_rank=1).release()  # each node of a multi-node run holds a lock of its own
    lock.release()

    fresh = RunLock(RunDir(tmp_path / "fresh"))
    fresh.release(discard=True)  # a launcher that gave up before writing anything leaves no directory behind
    assert not (tmp_path / "fresh").exists()


def test_the_agent_is_forked_only_from_a_launcher_with_one_thread():
    one_thread = [sys.executable, "-c", "from trainer.launch.torchrun import can_fork; print(can_fork())"]
    done = subprocess.run(one_thread, cwd=REPO, env={**os.environ, "OPENBLAS_NUM_THREADS": "1"}, capture_output=True)
    assert done.stdout.decode().strip() == "True", done.stderr.decode()[-2000:]
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert not can_fork()  # another thread might hold a lock the child would wait on forever
    finally:
        stop.set()
        other.join()


# An agent that forks two ranks, the second only once the test has created `go`; each rank records how many ranks
# its agent had forked when `wait_for_local_ranks` let it go on.
FORKING_AGENT = """
import os, sys, time
import psutil
from trainer.rank.worker import wait_for_local_ranks

marks = sys.argv[1]
os.environ["LOCAL_WORLD_SIZE"] = "2"

def fork_rank(n):
    if os.fork() == 0:
        wait_for_local_ranks()
        with open(os.path.join(marks, f"rank{n}.partial"), "w") as mark:
            mark.write(str(len(psutil.Process(os.getppid()).children())))
        os.rename(os.path.join(marks, f"rank{n}.partial"), os.path.join(marks, f"rank{n}"))
        # both alive until both have counted: a rank gone (and reaped) before the other counts would be missing
        while not all(os.path.exists(os.path.join(marks, f"rank{i}")) for i in (0, 1)):
            time.sleep(0.01)
        os._exit(0)

fork_rank(0)
while not os.path.exists(os.path.join(marks, "go")):
    time.sleep(0.01)
fork_rank(1)
os.wait()
os.wait()
"""


def test_a_forked_rank_connects_only_once_every_rank_of_its_node_is_forked(tmp_path):
    """The agent forks ranks while its store servers' threads run; a rank forked while one of them held glibc's
    resolver lock would wait on it forever (trainer.launch.torchrun). So no rank may connect, and so make those threads
    work, before the agent has forked them all: the first rank stays in `wait_for_local_ranks` until the second
    exists."""
    import hung

    with subprocess.Popen([sys.executable, "-c", FORKING_AGENT, str(tmp_path)], cwd=REPO) as agent:
        try:
            wait_for(lambda: len(psutil.Process(agent.pid).children()) == 1, "the first rank")
            first = psutil.Process(agent.pid).children()[0]
            waiting = lambda: "wait_for_local_ranks (" in hung.stacks(first.pid)  # noqa: E731
            wait_for(lambda: (tmp_path / "rank0").exists() or waiting(), "the first rank to wait or go on")
            assert not (tmp_path / "rank0").exists()  # it waits (its stack says so) and so cannot have gone on
            (tmp_path / "go").touch()
            assert agent.wait(timeout=120) == 0
        finally:
            agent.kill()
    assert (tmp_path / "rank0").read_text() == (tmp_path / "rank1").read_text() == "2"


@pytest.mark.slow
def test_a_forked_agent_and_a_fresh_one_train_the_same_run(tmp_path):
    """A launcher with one thread forks torchrun's agent; one with a BLAS thread pool (set by the environment)
    starts a fresh interpreter. Both ways train the same losses, bit for bit."""
    experiment = write_experiment(tmp_path, {"train": {"steps": 2}})
    forked = train(experiment, tmp_path / "forked", "--nproc", "2")
    fresh = train(experiment, tmp_path / "fresh", "--nproc", "2", env={"OPENBLAS_NUM_THREADS": "2"})
    assert "forked from the launcher" in forked.torchrun_log.read_text()
    assert "a fresh interpreter" in fresh.torchrun_log.read_text()
    assert [s["loss"] for s in forked.read_steps()] == [s["loss"] for s in fresh.read_steps()]
