"""Runs under faults and adversaries (issue 35): preemption by SIGTERM or SIGUSR1 ends a run as "preempted" and
`--resume` continues it exactly; a damaged newest checkpoint is skipped for the one before; a rank killed by a
signal is named as the cause whichever rank it is; a crafted checkpoint runs no code.

Every run is real: two processes (DDP) on the tiny model, with dropout on, so that an exact continuation also needs
every rank's RNG state back.
"""

from __future__ import annotations

import io
import os
import pickle
import shutil
import signal
from pathlib import Path

import psutil
import pytest
import torch
from killed_runs import start_train, survivors, wait_for
from support import meshpilot, train, write_experiment
from torch.distributed.checkpoint.api import CheckpointException

from agent.jobs import job_processes
from trainer.host import preemption
from trainer.rank.checkpoint import (
    MANIFEST,
    checkpoint_step,
    latest,
    read_metadata,
    read_state,
    verify,
    write_manifest,
)
from trainer.results.rundir import RunDir

pytestmark = pytest.mark.slow  # real multi-process runs

STEPS, CHECKPOINT_EVERY = 6, 2
CHANGES = {
    "train": {"steps": STEPS, "checkpoint_every": CHECKPOINT_EVERY, "keep_checkpoints": 3},
    "model": {"config": {"attention_dropout": 0.1}},
}
DDP = ("--nproc", "2", "--layout", "dp_replicate=2")


def numbers(steps: list[dict]) -> list[tuple]:
    return [(s["step"], s["loss"], s["grad_norm"], s["lr"]) for s in steps]


@pytest.fixture(scope="module")
def experiment(tmp_path_factory) -> Path:
    return write_experiment(tmp_path_factory.mktemp("faults"), CHANGES)


@pytest.fixture(scope="module")
def reference(experiment) -> list[dict]:
    """The uninterrupted run's steps."""
    return train(experiment, experiment.parent / "reference", *DDP).read_steps()


def wait_for_the_fault(run: RunDir, rank: int, step: int) -> None:
    """Until the rank waits in its `kind=preempt` fault (trainer.rank.faults): the steps before are done, checkpoints
    and step boundaries included."""
    said = f"rank {rank} waits for a preemption signal at step {step}"
    log = run.rank_log(rank)
    wait_for(lambda: log.is_file() and said in log.read_text(), said)


def rank_pid(token: str, rank: int) -> int:
    for pid in job_processes(token):
        try:
            if psutil.Process(pid).name() == f"meshpilot:r{rank}":
                return pid
        except psutil.Error:
            continue
    raise AssertionError(f"no process meshpilot:r{rank}")


# --- preemption ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "target, signum",
    [("launcher", signal.SIGTERM), ("process group", signal.SIGTERM), ("launcher", signal.SIGUSR1)],
    ids=["sigterm-launcher", "sigterm-group", "sigusr1-launcher"],
)
def test_preemption_saves_records_and_resumes_exactly(experiment, reference, tmp_path, target, signum):
    out = tmp_path / "run"
    # Rank 0 waits at the start of step 3 until the signal reaches it, so the signal comes after step 2, always.
    process, token = start_train(experiment, out, *DDP, fault="rank=0,step=3,kind=preempt")
    run = RunDir(out)
    wait_for_the_fault(run, 0, 3)
    if target == "launcher":
        process.send_signal(signum)
    else:
        os.killpg(process.pid, signum)  # the launcher leads its group, as a command started from a shell
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == 128 + signum, stderr[-3000:]
    assert survivors(token) == []
    metrics = run.read_metrics()
    assert metrics["status"] == "preempted"
    assert metrics["signal"] == signum.name
    assert metrics["resume_from"] == "step_00000003"  # saved at the step boundary after the signal
    assert metrics["steps_completed"] == 3
    assert (
        stderr.strip()
        .splitlines()[-1]
        .startswith(f"run preempted: preempted by {signum.name} after step 3; --resume continues from step_00000003")
    )
    assert checkpoint_step(latest(run.checkpoints)) == 3
    assert numbers(run.read_steps()) == numbers(reference[:3])

    train(experiment, out, *DDP, "--resume")
    assert "resumed from step_00000003" in run.log.read_text()
    assert numbers(run.read_steps()) == numbers(reference)  # steps 4 to 6 as the uninterrupted run's
    assert run.read_metrics()["status"] == "ok"


def test_ranks_still_running_when_the_grace_period_ends_are_stopped_and_the_run_preempted(
    experiment, reference, tmp_path, monkeypatch
):
    """A rank still busy when the grace period is over (it hangs here; a step longer than the grace alike): the
    launcher stops the ranks and records the preemption itself, resumable from the checkpoint before, where a
    scheduler's SIGKILL would have left no status at all."""
    monkeypatch.setenv(preemption.GRACE_ENV, "1")
    out = tmp_path / "run"
    process, token = start_train(experiment, out, *DDP, fault="rank=0,step=3,kind=preempt;rank=0,step=3,kind=hang")
    run = RunDir(out)
    wait_for_the_fault(run, 0, 3)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == 128 + signal.SIGTERM, stderr[-3000:]
    assert survivors(token) == []
    metrics = run.read_metrics()
    assert (metrics["status"], metrics["signal"]) == ("preempted", "SIGTERM")
    assert (metrics["resume_from"], metrics["steps_completed"]) == ("step_00000002", 2)
    said = stderr.strip().splitlines()[-1]
    assert said.startswith(
        "run preempted: preempted by SIGTERM; the ranks did not stop within the 1 s grace period and were stopped "
        "without saving; --resume continues from step_00000002 (logs: "
    )

    monkeypatch.delenv(preemption.GRACE_ENV)
    train(experiment, out, *DDP, "--resume")
    assert numbers(run.read_steps()) == numbers(reference)


def test_a_job_stopped_by_sigterm_is_preempted_and_resumable(experiment, tmp_path):
    """SIGTERM to a job's supervisor (as a scheduler sends it): the run preempts, and the job says so."""
    from agent.jobs import read_job, start_run, wait_run
    from trainer.rank.faults import ENV as FAULT

    out = tmp_path / "job"
    start_run(experiment, out, nproc=2, layout="dp_replicate=2", env={FAULT: "rank=0,step=3,kind=preempt"})
    wait_for_the_fault(RunDir(out), 0, 3)
    os.kill(read_job(out)["pid"], signal.SIGTERM)
    status = wait_run(out)
    assert status["state"] == "preempted"
    assert status["cause"] == "preempted by SIGTERM after step 3; --resume continues from step_00000003"


def test_preempted_is_one_status_every_reader_knows():
    from agent.jobs import TERMINAL
    from agent.jobs.status import _classify
    from trainer.results.schemas import FAILED_STATUSES, RUN_STATUSES

    assert "preempted" in RUN_STATUSES and "preempted" in TERMINAL
    assert "preempted" not in FAILED_STATUSES  # resumable: not a failure
    error = "preempted by SIGTERM after step 3; --resume continues from step_00000003"
    assert _classify({"status": "preempted", "error": error}) == ("preempted", error)


# --- the right cause ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("victim", [0, 1])
def test_a_rank_killed_by_a_signal_is_the_cause_whichever_rank(experiment, tmp_path, victim):
    out = tmp_path / "run"
    other = 1 - victim
    # The other rank waits at step 3 (for a signal: torchrun's SIGTERM once the victim died); the victim waits in
    # that step's first collective, where it is killed.
    process, token = start_train(experiment, out, *DDP, fault=f"rank={other},step=3,kind=preempt")
    run = RunDir(out)
    wait_for_the_fault(run, other, 3)
    os.kill(rank_pid(token, victim), signal.SIGKILL)
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == 1, stderr[-3000:]
    assert survivors(token) == []
    metrics = run.read_metrics()
    assert metrics["status"] == "failed"
    assert metrics["error"].startswith(f"rank {victim} was killed by SIGKILL"), metrics["error"]


# --- damaged checkpoints ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def killed(experiment, tmp_path_factory) -> RunDir:
    """A run killed hard (SIGKILL of its process group) at the start of step 5: checkpoints of steps 2 and 4."""
    out = tmp_path_factory.mktemp("killed") / "run"
    process, token = start_train(experiment, out, *DDP, fault="rank=0,step=5,kind=kill")
    process.communicate(timeout=300)
    assert process.returncode == -signal.SIGKILL
    assert survivors(token) == []
    run = RunDir(out)
    assert [checkpoint_step(p) for p in sorted(run.checkpoints.iterdir())] == [2, 4]
    return run


def damage(checkpoint: Path, how: str) -> str:
    """Damage `checkpoint` as a lost node, a full disk or bit rot would; what the resume must say about it."""
    shard = checkpoint / "__1_0.distcp"
    if how == "shard removed":
        shard.unlink()
        return "__1_0.distcp is missing"
    if how == "shard truncated":
        size = shard.stat().st_size
        os.truncate(shard, size // 2)
        return f"__1_0.distcp is {size // 2} bytes, the manifest says {size}"
    if how == "shard corrupted":
        data = bytearray(shard.read_bytes())
        data[len(data) // 2] ^= 0xFF
        shard.write_bytes(bytes(data))
        return "__1_0.distcp is damaged (its checksum differs from the manifest's)"
    (checkpoint / ".metadata").unlink()
    return ".metadata is missing"


@pytest.mark.parametrize("how", ["shard removed", "shard truncated", "shard corrupted", "metadata removed"])
def test_a_damaged_newest_checkpoint_is_skipped_for_the_previous_one(experiment, reference, killed, tmp_path, how):
    run = RunDir(shutil.copytree(killed.path, tmp_path / "run"))
    said = damage(run.checkpoints / "step_00000004", how)
    done = meshpilot("train", str(experiment), "--out", str(run.path), *DDP, "--resume")
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"meshpilot: skipped checkpoint step_00000004: {said}" in done.stderr.splitlines()
    assert "resumed from step_00000002" in run.log.read_text()
    assert numbers(run.read_steps()) == numbers(reference)  # steps 3 to 6 as the uninterrupted run's
    # The damaged step_00000004 left there did not block the resumed run's own save of step 4, which replaced it.
    assert sorted(p.name for p in run.checkpoints.iterdir()) == ["step_00000002", "step_00000004", "step_00000006"]
    assert checkpoint_step(latest(run.checkpoints)) == STEPS
    assert verify(run.checkpoints / "step_00000004") is None


def test_export_skips_a_damaged_checkpoint_and_refuses_a_chosen_one_in_one_line(killed, tmp_path):
    run = RunDir(shutil.copytree(killed.path, tmp_path / "run"))
    said = damage(run.checkpoints / "step_00000004", "shard truncated")
    refused = meshpilot("export", str(run.path), "--step", "4", "--out", str(tmp_path / "hf4"))
    assert refused.returncode == 2
    assert refused.stderr.splitlines() == [
        f"meshpilot: error: {run.checkpoints / 'step_00000004'}: not a complete checkpoint: {said}"
    ]
    assert not (tmp_path / "hf4").exists()
    done = meshpilot("export", str(run.path), "--out", str(tmp_path / "hf"))
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"meshpilot: skipped checkpoint step_00000004: {said}" in done.stderr.splitlines()
    assert done.stdout.startswith("exported step_00000002 ")


# --- untrusted run directories ------------------------------------------------------------------------------------


class MakesADirectory:
    """A pickle that, if unpickled, creates a directory: what a crafted checkpoint would run instead."""

    def __init__(self, path: Path):
        self.path = str(path)

    def __reduce__(self):
        return os.mkdir, (self.path,)


def test_crafted_trainer_state_runs_no_code(experiment, killed, tmp_path):
    run = RunDir(shutil.copytree(killed.path, tmp_path / "run"))
    marker = tmp_path / "code-ran"
    newest = run.checkpoints / "step_00000004"
    torch.save({"trainer": MakesADirectory(marker)}, newest / "trainer_state.pt")
    (newest / MANIFEST).unlink(missing_ok=True)
    write_manifest(newest)  # even a checkpoint that verifies is read as data only
    done = meshpilot("train", str(experiment), "--out", str(run.path), *DDP, "--resume")
    assert done.returncode == 1
    assert not marker.exists()
    assert run.read_metrics()["status"] == "failed"


def test_a_foreign_checkpoint_is_not_unpickled_without_trust(killed, tmp_path):
    run = RunDir(shutil.copytree(killed.path, tmp_path / "run"))
    marker = tmp_path / "code-ran"
    for checkpoint in run.checkpoints.iterdir():  # as another tool (or an attacker) would leave them: no manifest
        (checkpoint / MANIFEST).unlink(missing_ok=True)
    (run.checkpoints / "step_00000004" / ".metadata").write_bytes(pickle.dumps(MakesADirectory(marker)))
    done = meshpilot("export", str(run.path), "--out", str(tmp_path / "hf"))
    assert done.returncode == 2
    last = done.stderr.splitlines()[-1]
    assert last.startswith(f"meshpilot: error: {run.path}: no complete checkpoint in {run.checkpoints} (skipped ")
    assert "pass --trust to load a checkpoint meshpilot did not write" in last
    assert not marker.exists() and not (tmp_path / "hf").exists()
    # Trusted on request: the step-2 checkpoint, intact but without a manifest, exports with --trust.
    trusted = meshpilot("export", str(run.path), "--step", "2", "--trust", "--out", str(tmp_path / "hf2"))
    assert trusted.returncode == 0, trusted.stderr[-3000:]
    assert trusted.stdout.startswith("exported step_00000002 ")
    assert not marker.exists()


def forge_metadata(checkpoint: Path, marker: Path) -> str:
    """A crafted .metadata whose pickle would make a directory, under a manifest that lists it as it is (anyone can
    write one): the checkpoint verifies by size and checksum. What the resume or export must say about it."""
    (checkpoint / ".metadata").write_bytes(pickle.dumps(MakesADirectory(marker)))
    (checkpoint / MANIFEST).unlink()
    write_manifest(checkpoint)
    return (
        ".metadata is not DCP's metadata: it asks for posix.mkdir, which DCP's metadata never holds "
        "(refused unread: it could run code)"
    )


def forge_entry(checkpoint: Path, marker: Path) -> tuple[str, str]:
    """A shard's non-tensor entry (an optimizer setting, which DCP unpickles with weights_only=False) replaced by a
    pickle that would make a directory; .metadata and the manifest rewritten to match. (what the resume must say,
    the entry's key)."""
    metadata = read_metadata(checkpoint / ".metadata")
    index, stored = next((i, s) for i, s in metadata.storage_data.items() if i.fqn.endswith(".lr"))
    crafted = io.BytesIO()
    torch.save(MakesADirectory(marker), crafted)
    shard = checkpoint / stored.relative_path
    stored.offset, stored.length = shard.stat().st_size, len(crafted.getvalue())
    with shard.open("ab") as f:
        f.write(crafted.getvalue())
    (checkpoint / ".metadata").write_bytes(pickle.dumps(metadata))
    (checkpoint / MANIFEST).unlink()
    write_manifest(checkpoint)
    return f"{stored.relative_path}: {index.fqn} is not plain data (refused unread: it could run code)", index.fqn


@pytest.mark.parametrize("forged", ["metadata", "shard entry"])
def test_a_forged_checkpoint_is_skipped_unread_on_resume(experiment, reference, killed, tmp_path, forged):
    run = RunDir(shutil.copytree(killed.path, tmp_path / "run"))
    marker = tmp_path / "code-ran"
    newest = run.checkpoints / "step_00000004"
    said = forge_metadata(newest, marker) if forged == "metadata" else forge_entry(newest, marker)[0]
    done = meshpilot("train", str(experiment), "--out", str(run.path), *DDP, "--resume")
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"meshpilot: skipped checkpoint step_00000004: {said}" in done.stderr.splitlines()
    assert not marker.exists()
    assert "resumed from step_00000002" in run.log.read_text()
    assert numbers(run.read_steps()) == numbers(reference)


def test_export_refuses_a_forged_checkpoint_in_one_line(killed, tmp_path):
    run = RunDir(shutil.copytree(killed.path, tmp_path / "run"))
    marker = tmp_path / "code-ran"
    newest = run.checkpoints / "step_00000004"
    said = forge_metadata(newest, marker)
    refused = meshpilot("export", str(run.path), "--step", "4", "--out", str(tmp_path / "hf4"))
    assert refused.returncode == 2
    assert refused.stderr.splitlines() == [f"meshpilot: error: {newest}: not a complete checkpoint: {said}"]
    done = meshpilot("export", str(run.path), "--out", str(tmp_path / "hf"))
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"meshpilot: skipped checkpoint step_00000004: {said}" in done.stderr.splitlines()
    assert done.stdout.startswith("exported step_00000002 ")
    assert not marker.exists() and not (tmp_path / "hf4").exists()


@pytest.mark.filterwarnings("ignore:torch.distributed is disabled")  # DCP, loading in one process on purpose
def test_every_load_reads_shard_entries_as_data_only(killed, tmp_path):
    """Past `verify` too (a checkpoint changed after it was checked): the ranks' load refuses the crafted entry
    unread; as DCP reads it (`trust`, what `export --trust` asks for) it would run."""
    checkpoint = shutil.copytree(killed.checkpoints / "step_00000004", tmp_path / "step_00000004")
    marker = tmp_path / "code-ran"
    _, key = forge_entry(checkpoint, marker)
    wanted = {"optimizer": {key.removeprefix("optimizer."): 0.0}}
    with pytest.raises(CheckpointException) as refused:  # DCP's error for a failed load: a BaseException
        read_state(wanted, checkpoint, no_dist=True)
    assert "unsupported GLOBAL posix.mkdir" in str(refused.value)
    assert not marker.exists()
    read_state(wanted, checkpoint, no_dist=True, trust=True)
    assert marker.is_dir()  # the crafted entry is real: unrestricted, it runs


def test_each_rank_sums_the_files_it_wrote(killed):
    """The manifest's checksums come from the ranks that wrote the files, each summing its own at once (rank 0 alone
    would read the whole checkpoint while every rank waits): together they cover every file DCP and the trainer
    wrote, so rank 0 sums none of another rank's."""
    from trainer.rank.checkpoint import _own_files

    for checkpoint in killed.checkpoints.iterdir():
        owned = [p.name for rank in (0, 1) for p in _own_files(checkpoint, rank)]
        assert sorted(owned) == sorted(p.name for p in checkpoint.iterdir() if p.name != MANIFEST)
        assert len(owned) == len(set(owned))
        assert verify(checkpoint) is None
