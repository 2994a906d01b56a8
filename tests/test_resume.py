"""A run killed hard (SIGKILL of its whole process group, at a step chosen by fault injection) leaves nothing
running, and `--resume` repeats it exactly on every layout; onto another layout or process count it continues
within 1e-5; anything else that changed, or nothing left to train, is refused in one line.

The reference is the killed run itself: its steps after its latest checkpoint (4 and 5: checkpoints every 3
steps, killed at the start of step 6) were recorded uninterrupted before the kill, and the resumed run must
repeat them. That halves the launches a separate uninterrupted run per layout would cost.
"""

from __future__ import annotations

import shutil
import signal

import pytest
from killed_runs import start_train, survivors
from support import train, write_experiment

from trainer.config import ConfigError
from trainer.layout import Layout
from trainer.rank.checkpoint import checkpoint_step, latest
from trainer.results.rundir import RunDir

pytestmark = pytest.mark.slow  # real multi-process runs

STEPS, CHECKPOINT_EVERY, KILL_AT = 6, 3, 6
CHANGES = {"train": {"steps": STEPS, "checkpoint_every": CHECKPOINT_EVERY, "keep_checkpoints": 2}}
# Dropout makes every step depend on the RNG state, so a resume that forgot it would not match.
DROPOUT = {"model": {"config": {"attention_dropout": 0.1}}}
INTERLEAVED = ["--set=model.config.num_hidden_layers=4", "--set=train.pp_schedule=interleaved_1f1b"]
# One layout per kind of state a checkpoint holds: whole replicas (DDP), parameters and optimizer state sharded on
# one mesh dimension (FSDP2; HSDP adds a replicated one) and on two (FSDP2 x TP, whose tensor-parallel shards are
# what tp=2 alone would save), and pipeline stages (interleaved: two stages a rank, which 1F1B's one per rank is a
# case of). Each case is two launches, so the cases a wider one contains are left to it.
LAYOUTS = {  # name: (nproc, layout, more arguments)
    "ddp": ("2", "dp_replicate=2", []),
    "fsdp2": ("2", "dp_shard=2", []),
    "hsdp": ("4", "dp_replicate=2,dp_shard=2", []),
    "fsdp2xtp": ("4", "dp_shard=2,tp=2", []),
    "pp-interleaved": ("2", "pp=2", [*INTERLEAVED, "--set=train.pp_stages_per_rank=2"]),
}


def numbers(steps: list[dict]) -> list[tuple]:
    return [(s["step"], s["loss"], s["grad_norm"], s["lr"]) for s in steps]


@pytest.fixture(scope="module")
def experiments(tmp_path_factory):
    directory = tmp_path_factory.mktemp("resume")
    return {
        "dropout": write_experiment(directory, {**CHANGES, **DROPOUT}, name="dropout.yaml"),
        "no-dropout": write_experiment(directory, CHANGES, name="no-dropout.yaml"),
    }


@pytest.fixture(scope="module")
def killed(experiments):
    """killed(experiment, layout) -> (run directory, the steps it recorded before the kill); each run once."""
    done = {}

    def kill(experiment: str, layout: str) -> tuple[RunDir, list[dict]]:
        if (experiment, layout) not in done:
            path = experiments[experiment]
            nproc, degrees, more = LAYOUTS[layout]
            out = path.parent / f"{experiment}-{layout}"
            args = ["--nproc", nproc, "--layout", degrees, *more]
            process, token = start_train(path, out, *args, fault=f"rank=0,step={KILL_AT},kind=kill")
            _, stderr = process.communicate(timeout=600)
            assert process.returncode == -signal.SIGKILL, stderr[-3000:]
            assert survivors(token) == []  # torchrun's agent and its ranks died with it too
            run = RunDir(out)
            assert run.read_metrics() is None
            done[experiment, layout] = run, run.read_steps()
        return done[experiment, layout]

    return kill


@pytest.mark.parametrize("layout", LAYOUTS)
def test_hard_kill_then_resume_repeats_the_run_bit_for_bit(experiments, killed, layout):
    run, before = killed("dropout", layout)
    assert [s["step"] for s in before] == list(range(1, KILL_AT))  # nothing trained on after the kill
    assert checkpoint_step(latest(run.checkpoints)) == CHECKPOINT_EVERY
    (run.checkpoints / "step_00000099.partial").mkdir()  # a save cut short by the kill: never picked up

    nproc, degrees, more = LAYOUTS[layout]
    train(experiments["dropout"], run.path, "--nproc", nproc, "--layout", degrees, *more, "--resume")
    assert f"resumed from step_{CHECKPOINT_EVERY:08d}" in run.log.read_text()
    after = run.read_steps()
    assert [s["step"] for s in after] == list(range(1, STEPS + 1))
    assert numbers(after[: KILL_AT - 1]) == numbers(before)  # steps 4 and 5 repeated bit for bit
    assert run.read_metrics()["status"] == "ok"


def test_dropout_is_on_so_the_rng_state_matters(killed):
    """The control: with dropout the same layout gives other losses at every step a resume repeats, so an exact
    resume of the dropout runs above needs every rank's RNG state back."""
    _, with_dropout = killed("dropout", "fsdp2")
    _, without = killed("no-dropout", "fsdp2")
    # Dropout's effect on this tiny model's loss is small (under 1e-6 at the first step, whose attention is nearly
    # uniform, about 5e-4 later) but far above the zero difference of the bit-for-bit comparisons it guards.
    repeated = zip(with_dropout[CHECKPOINT_EVERY:], without[CHECKPOINT_EVERY:], strict=True)
    assert all(abs(a["loss"] - b["loss"]) > 1e-5 for a, b in repeated)


# A sharded (FSDP2) checkpoint resumed unsharded on one process, resharded onto FSDP2 x TP on four, and split into
# pipeline stages. Dropout is off: its RNG streams belong to ranks, and after a layout change they are reseeded.
TARGETS = {
    "one-process": ("1", "dp_replicate=1"),
    "fsdp2xtp-4": ("4", "dp_shard=2,tp=2"),
    "pp-2": ("2", "pp=2"),
}


@pytest.fixture(scope="module")
def resharded(experiments, killed):
    """resharded(target) -> (the resumed run, the source's steps before its kill); each target once."""
    done = {}

    def resume(target: str) -> tuple[RunDir, list[dict]]:
        if target not in done:
            source, before = killed("no-dropout", "fsdp2")
            out = source.path.with_name(f"resharded-{target}")
            shutil.copytree(source.path, out)
            nproc, degrees = TARGETS[target]
            resumed = train(experiments["no-dropout"], out, "--nproc", nproc, "--layout", degrees, "--resume")
            done[target] = resumed, before
        return done[target]

    return resume


@pytest.mark.parametrize("target", TARGETS)
def test_resume_onto_another_layout_continues_within_1e5(resharded, target):
    run, before = resharded(target)
    assert "resharded, RNG streams reseeded" in run.log.read_text()
    after = run.read_steps()
    assert [s["step"] for s in after] == list(range(1, STEPS + 1))
    for old, new in zip(before[CHECKPOINT_EVERY:], after[CHECKPOINT_EVERY : KILL_AT - 1], strict=True):
        assert new["lr"] == old["lr"]  # the schedule's state carried over
        assert new["loss"] == pytest.approx(old["loss"], abs=1e-5)
        assert new["grad_norm"] == pytest.approx(old["grad_norm"], abs=1e-5)
    nproc, degrees = TARGETS[target]
    assert run.read_metrics()["layout"] == Layout.parse(degrees).resolve(int(nproc)).degrees()


def test_resume_refuses_other_changes_and_runs_with_nothing_left(experiments, killed, resharded, tmp_path):
    from trainer.launch.launcher import TrainRequest, describe, prepare

    source, _ = killed("no-dropout", "fsdp2")
    finished, _ = resharded("one-process")
    experiment = experiments["no-dropout"]

    def refused(out, *overrides: str, nproc: int = 2) -> str:
        request = TrainRequest(experiment, nproc=nproc, out=out, overrides=list(overrides), resume=True)
        with pytest.raises(ConfigError) as excinfo:
            prepare(request)
        assert "\n" not in str(excinfo.value)
        return str(excinfo.value)

    changed = "--resume continues the same experiment (only the layout and process count may change), but it changed: "
    assert refused(source.path, "train.lr=0.002") == changed + "train.lr 0.001 -> 0.002"
    assert refused(source.path, "train.global_batch_tokens=1024") == changed + "train.global_batch_tokens 512 -> 1024"
    assert refused(finished.path, nproc=1) == f"--resume: {finished.path} already finished its {STEPS} steps"
    # Killed after its final checkpoint, before metrics.json: nothing to train either.
    unfinished = shutil.copytree(finished.path, tmp_path / "final-checkpoint")
    (unfinished / "metrics.json").unlink()
    assert refused(unfinished, nproc=1) == (
        f"--resume: the latest checkpoint of {unfinished} (step_{STEPS:08d}) is its final step; "
        "nothing is left to train"
    )
    idle = {"status": "ok", "final_loss": None, "tokens_per_s": None}  # a resume that found no step left
    assert describe(idle, finished) == f"run ok: no step was left to train, results in {finished.path}"
