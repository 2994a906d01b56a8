"""The sweep's parts that need no training run: the space, the pruner, the device pool, trial ids, what a resume
takes from the sweep it continues."""

from __future__ import annotations

import sys
from pathlib import Path

import optuna
import pytest
from support import TINY_MODEL, meshpilot, write_experiment

from agent.records import SWEEP, SWEEP_FILE
from agent.sweep import _new_sweep, run_sweep
from agent.sweep.runner import DevicePool
from agent.sweep.space import Range, build_space, check_space, parse_space_args
from agent.sweep.study import (
    SAMPLERS,
    ClearlyWorsePruner,
    resolve_sampler,
    start_with_planner_pick,
    suggest,
    trial_id,
)
from trainer.config import ConfigError, checkpointing_rank, load_experiment
from trainer.layout import Layout


@pytest.fixture(scope="module")
def experiment(tmp_path_factory):
    return write_experiment(tmp_path_factory.mktemp("space"), {"search": {"layouts": "auto"}})


def test_space_arguments_are_yaml(experiment):
    space = parse_space_args(
        ["train.lr=[1e-3, 3e-3]", "layout=[dp_shard=2, 'dp_replicate=1,tp=2']", "data.packing=true"]
    )
    assert space == {
        "train.lr": ["1e-3", "3e-3"],
        "layout": ["dp_shard=2", "dp_replicate=1,tp=2"],
        "data.packing": True,
    }
    choices, ranges = check_space(space, experiment)
    assert choices["train.lr"] == [1e-3, 3e-3]  # as the experiment file reads them: numbers, not strings
    assert choices["data.packing"] == [True] and ranges == {}
    _, ranges = check_space({"train.lr": {"low": "1e-4", "high": 1e-2, "log": True}}, experiment)
    assert ranges == {"train.lr": Range(1e-4, 1e-2, True)}
    with pytest.raises(ConfigError, match="--space expects KEY=VALUES"):
        parse_space_args(["train.lr"])
    with pytest.raises(ConfigError, match="did you mean 'lr'"):
        check_space({"train.lrr": [1e-3]}, experiment)
    with pytest.raises(ConfigError, match=r"train\.micro_batch: expected int, got 'two'"):
        check_space({"train.micro_batch": ["two"]}, experiment)
    with pytest.raises(ConfigError, match="a log range needs low > 0"):
        check_space({"train.weight_decay": {"low": 0, "high": 0.1, "log": True}}, experiment)
    with pytest.raises(ConfigError, match=r"every trial runs search\.trial_steps"):
        check_space({"train.steps": [5]}, experiment)


def test_points_follow_the_planner_in_a_fixed_order(experiment):
    loaded = load_experiment(experiment)
    space = build_space(experiment, loaded, {"train.lr": [1e-3, 2e-3]}, devices=2, device_type="cpu")
    points = space.points
    assert [p.id for p in points] == [f"t{i:03d}" for i in range(len(points))]
    rows = 512 // 64  # the tiny experiment's global batch in rows
    for p in points:
        layout = Layout(**p.layout)
        assert layout.world_size == p.nproc == 2
        assert p.grad_accum * p.micro_batch * layout.dp_degree == rows  # the global batch never changes
        assert Layout.parse(p.layout_arg).resolve(2) == layout
        assert p.predicted_peak_bytes > 0 and p.predicted_tokens_per_s > 0
        assert f"train.micro_batch={p.micro_batch}" in p.overrides()
    assert {p.extra["train.lr"] for p in points} == {1e-3, 2e-3}
    keys = [(str(p.layout), p.micro_batch, p.activation_checkpointing, p.extra["train.lr"]) for p in points]
    assert len(set(keys)) == len(keys)
    # Within a layout: micro-batch ascending, checkpointing off first, then the learning rates as listed.
    first = [k for k in keys if k[0] == keys[0][0]]
    assert first == sorted(first, key=lambda k: (k[1], checkpointing_rank(k[2])))
    assert [k[3] for k in first[:2]] == [1e-3, 2e-3]
    # Context parallelism runs on CPU processes too: the space holds it.
    assert any(p.layout["cp"] == 2 for p in points)


def test_a_mixture_of_experts_space_searches_ep(tmp_path):
    """A tiny Mixtral's space holds expert-parallel points beside the dense ones, each on its own processes (ep
    borrows dp_shard's ranks), and its `--layout` reads back."""
    moe = {"model_type": "mixtral", "num_local_experts": 4, "num_experts_per_tok": 2, "intermediate_size": 64}
    path = write_experiment(tmp_path, {"model": {"config": {**TINY_MODEL, **moe}}, "search": {"layouts": "auto"}})
    space = build_space(path, load_experiment(path), {}, devices=4, device_type="cpu")
    expert = [p for p in space.points if p.layout.get("ep", 1) > 1]
    assert {p.layout["ep"] for p in expert} == {2, 4}
    for p in expert:
        assert p.nproc == 4 and Layout.parse(p.layout_arg).resolve(4) == Layout(**p.layout)
        assert p.layout["ep"] <= p.layout["dp_shard"] * p.layout["cp"]


def test_a_space_nothing_fits_in_fails_with_the_planners_reason(tmp_path):
    tight = write_experiment(tmp_path, {"hardware": {"device_mem": "1MiB"}})
    with pytest.raises(ConfigError, match=r"nothing to search: .*needs .* GiB per device"):
        build_space(tight, load_experiment(tight), {}, devices=1, device_type="cpu")


def test_sampler_choice():
    from agent.sweep.space import Point, Space

    points = [Point(f"t{i:03d}", {"dp_replicate": 1}, 1, 8, False, True) for i in range(3)]
    lists, ranged = Space(points, {}, []), Space(points, {"train.lr": Range(1e-4, 1e-2, True)}, [])
    assert SAMPLERS == ("auto", "grid", "tpe")
    assert resolve_sampler(lists, "auto", budget=3) == "grid"  # every point runs
    assert resolve_sampler(lists, "auto", budget=2) == "tpe"  # a search, not a random part of the grid
    assert resolve_sampler(ranged, "auto", budget=10) == "tpe"
    assert resolve_sampler(lists, "tpe", budget=3) == "tpe"
    with pytest.raises(ConfigError, match="the grid sampler needs lists of choices"):
        resolve_sampler(ranged, "grid", budget=3)


def test_range_values_are_sampled_and_name_the_trial(experiment):
    loaded = load_experiment(experiment)
    space = build_space(experiment, loaded, {"train.lr": {"low": 1e-4, "high": 1e-2, "log": True}}, 1, "cpu")
    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=0))
    trial = study.ask()
    point, continuous = suggest(trial, space)
    assert point in {p.id for p in space.points} and 1e-4 <= continuous["train.lr"] <= 1e-2
    assert suggest(trial, space) == (point, continuous)  # asked again, the same
    tid = trial_id(point, continuous)
    assert tid.startswith(point + "-") and tid == trial_id(point, dict(continuous))
    assert trial_id(point, {"train.lr": continuous["train.lr"] * 2}) != tid
    assert trial_id(point, {}) == point

    start_with_planner_pick(study, space)  # TPE measures the planner's favourite first
    fastest = max(p.predicted_tokens_per_s for p in space.points)
    first = study.ask()
    picked, _ = suggest(first, space)
    assert space.point(picked).predicted_tokens_per_s == fastest
    assert picked == min(p.id for p in space.points if p.predicted_tokens_per_s == fastest)


@pytest.mark.parametrize("direction", ["maximize", "minimize"])
def test_pruner_stops_only_clearly_worse_trials(direction):
    study = optuna.create_study(direction=direction, pruner=ClearlyWorsePruner(margin=0.5))
    good, bad, close = (100.0, 40.0, 60.0) if direction == "maximize" else (2.0, 3.5, 2.8)
    first = study.ask()
    first.report(good * 3, step=1)  # nothing finished yet: never pruned
    assert not first.should_prune()
    first.report(good, step=2)
    study.tell(first, good)
    worse = study.ask()
    worse.report(bad, step=2)
    assert worse.should_prune()
    near = study.ask()
    near.report(close, step=2)
    assert not near.should_prune()
    near.report(bad, step=3)  # no finished trial reached step 3: nothing to compare with
    assert not near.should_prune()


def test_device_pool_hands_out_disjoint_sets():
    pool = DevicePool([3, 1, 2, 0])
    a = pool.take(2)
    assert a == [0, 1]
    assert pool.take(3) is None  # two left: a three-device trial waits
    b = pool.take(1)
    assert b == [2] and set(a).isdisjoint(b)
    pool.give(a)
    assert pool.take(3) == [0, 1, 3]
    pool = DevicePool([0, 1])
    pool.claim([1])  # held by a trial a killed sweep left running
    assert pool.take(2) is None and pool.take(1) == [0]


def test_trial_devices_map_through_the_parents_cuda_visible_devices(monkeypatch):
    from agent.sweep.executors import _device_args

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert _device_args([0, 1], "cuda") == {"visible_devices": [0, 1]}
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,5,7,4")  # the sweep itself runs on a subset
    assert _device_args([0, 2], "cuda") == {"visible_devices": [2, 7]}
    assert _device_args([3], "cuda") == {"visible_devices": [4]}
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-aa11, GPU-bb22")
    assert _device_args([1], "cuda") == {"visible_devices": ["GPU-bb22"]}
    with pytest.raises(ConfigError, match="exceed the 2 of CUDA_VISIBLE_DEVICES"):
        _device_args([2], "cuda")


def test_a_resume_keeps_the_executor_the_sweep_started_with(experiment, tmp_path):
    """`--resume` without --executor takes sweep.json's, here slurm: on a machine without sbatch that stops at once
    (the local executor would watch the SLURM trials as local jobs). Another --executor is refused, naming both.
    Either way before the study opens or any trial starts."""
    out = tmp_path / "sweep"
    out.mkdir()
    started = _new_sweep(experiment, load_experiment(experiment), {}, "auto", 1, 1, "slurm", True, None, 600.0)
    SWEEP.write(out / SWEEP_FILE, {**started, "trackers": None})  # a SLURM sweep as it starts, before its trials
    no_slurm = {"PATH": str(Path(sys.executable).parent)}
    done = meshpilot("sweep", str(experiment), "--out", str(out), "--resume", env=no_slurm)
    assert (done.returncode, done.stderr.strip()) == (
        2,
        "meshpilot: error: executor slurm needs sbatch, which is not on PATH (no SLURM here)",
    )
    with pytest.raises(ConfigError) as excinfo:
        run_sweep(experiment, out, resume=True, executor="local")
    assert str(excinfo.value) == "--resume continues the sweep as it started: --executor was 'slurm', not 'local'"
    assert [p.name for p in out.iterdir()] == [SWEEP_FILE]
