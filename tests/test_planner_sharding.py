"""train.zero_stage auto: the planner chooses FSDP2's sharding (trainer.costs.planner.sharding_variants) for each
candidate whose layout shards, the fastest predicted that fits, and the choice reaches what runs: the plan's table,
the exports (the torchrun line, torchtitan's and accelerate's configs) and a sweep's trials. A run started with auto
where no plan chose trains as stage 3 does. Planned for Llama-3.1-8B on 8 H100s (the preset, stated figures, no
calibration records) and for the tiny Llama on this CPU; one 2-process run pair through the real launcher."""

from __future__ import annotations

import argparse
import dataclasses
import shlex
import tomllib

import pytest
import yaml
from support import TINY_MODEL, cache_sharing_prepared_data, train, write_experiment
from transformers import AutoConfig

from trainer.config import ConfigError, Experiment, TrainSpec, load_experiment, resolve_zero_stage
from trainer.costs.plan_export import PlanContext, export
from trainer.costs.plan_request import PlanRequest, plan_request
from trainer.costs.planner import SHARDING_MARGIN, Candidate, format_table
from trainer.layout import Layout

GiB = 1024**3
# (zero_stage, fsdp_grad_sync): every sharding auto prices for a layout that shards, as pinned overrides.
SHARDINGS = {
    (3, "micro_batch"): ("train.zero_stage=3",),
    (3, "step"): ("train.zero_stage=3", "train.fsdp_grad_sync=step"),
    (2, "micro_batch"): ("train.zero_stage=2",),
    (1, "micro_batch"): ("train.zero_stage=1",),
}
LONG_ACCUMULATION = ("cp=8", 1, False)  # 32 micro-batches a step: stage 3 gathers 64 times, stage 1 once


@pytest.fixture(autouse=True)
def no_calibration(tmp_path, monkeypatch):
    # Stated H100 figures, not this machine's runs; the session's tokenized data, not prepared again for the runs.
    monkeypatch.setenv("MESHPILOT_CACHE", str(cache_sharing_prepared_data(tmp_path / "cache")))


def llama_8b(overrides: tuple[str, ...] = (), device_mem: str | None = None):
    """`meshpilot plan --model llama-3.1-8b --gpu h100 --devices 8` (and --set, --device-mem)."""
    request = PlanRequest(8, model="llama-3.1-8b", gpu="h100", overrides=overrides, device_mem=device_mem, probe=False)
    return plan_request(request)


def key_of(candidate: Candidate) -> tuple:
    return candidate.layout.describe(), candidate.micro_batch, candidate.activation_checkpointing


def by_key(candidates: list[Candidate]) -> dict[tuple, Candidate]:
    return {key_of(c): c for c in candidates}


def test_auto_keeps_the_fastest_sharding_that_fits_for_every_candidate():
    """Each candidate that shards is the fastest of the four shardings (each planned pinned, the long way) that fit,
    with that sharding's own memory and estimate; one that does not shard is stage 3; none is chosen over a leaner
    one for less than SHARDING_MARGIN; and where stage 3 does not fit, the candidate is dropped (the others hold
    more). Llama-3.1-8B on 8 H100s."""
    auto = llama_8b()
    pinned = {sharding: by_key(llama_8b(overrides).candidates) for sharding, overrides in SHARDINGS.items()}
    chosen = {(c.zero_stage, c.fsdp_grad_sync) for c in auto.candidates if c.dropped is None}
    assert {(3, "micro_batch"), (2, "micro_batch"), (1, "micro_batch")} <= chosen
    for key, candidate in by_key(auto.candidates).items():
        stage_three = pinned[3, "micro_batch"][key]
        if stage_three.dropped is not None:
            assert candidate.dropped == stage_three.dropped
            continue
        if candidate.layout.shard_degree == 1:
            assert (candidate.zero_stage, candidate.fsdp_grad_sync) == (3, "micro_batch") and candidate.runnable
            continue
        same = pinned[candidate.zero_stage, candidate.fsdp_grad_sync][key]
        assert candidate.memory == same.memory and candidate.estimate == same.estimate, key
        assert candidate.dropped is None and candidate.memory["peak"] <= auto.device_mem
        fitting = [c.estimate.tokens_per_s for c in (p[key] for p in pinned.values()) if c.dropped is None]
        assert max(fitting) <= candidate.estimate.tokens_per_s * SHARDING_MARGIN, key


def test_stage_one_where_it_fits_and_is_faster_and_stage_three_where_memory_is_tight():
    """On 8 H100s auto picks stage 1 for some candidates: each fits and is predicted faster than stage 3. For one
    of them (cp=8, 32 micro-batches a step: stage 1 gathers the parameters once where stage 3 gathers them 64 times),
    with exactly stage 1's peak per device it is stage 1, with a byte less another, with stage 3's peak (the least of
    the four) stage 3, and with a byte less it is dropped."""
    stage_one = [c for c in llama_8b().candidates if c.zero_stage == 1]
    stage_three = by_key(llama_8b(("train.zero_stage=3",)).candidates)
    assert stage_one
    for candidate in stage_one:
        three = stage_three[key_of(candidate)]
        assert candidate.dropped is None and candidate.memory["peak"] > three.memory["peak"]
        assert candidate.estimate.tokens_per_s > SHARDING_MARGIN * three.estimate.tokens_per_s

    unbounded = {s: by_key(llama_8b(o, "1000GiB").candidates)[LONG_ACCUMULATION] for s, o in SHARDINGS.items()}
    peaks = {sharding: c.memory["peak"] for sharding, c in unbounded.items()}
    speed = {sharding: c.estimate.tokens_per_s for sharding, c in unbounded.items()}
    assert speed[1, "micro_batch"] > 1.3 * speed[3, "micro_batch"]  # the premise: many gathers saved
    assert peaks[3, "micro_batch"] == min(peaks.values()) < peaks[1, "micro_batch"] == max(peaks.values())

    def chosen(device_mem: int) -> Candidate:
        return by_key(llama_8b(device_mem=str(device_mem)).candidates)[LONG_ACCUMULATION]

    fits, alone = chosen(peaks[1, "micro_batch"]), unbounded[1, "micro_batch"]
    assert (fits.zero_stage, fits.memory, fits.estimate) == (1, alone.memory, alone.estimate)
    assert chosen(peaks[1, "micro_batch"] - 1).zero_stage != 1
    tight = chosen(peaks[3, "micro_batch"])
    assert (tight.zero_stage, tight.fsdp_grad_sync, tight.dropped) == (3, "micro_batch", None)
    assert chosen(peaks[3, "micro_batch"] - 1).dropped.startswith("needs ")


def test_pinned_stages_and_grad_sync_are_planned_as_given():
    """train.zero_stage 1, 2 or 3 is every candidate's stage; a train.fsdp_grad_sync the experiment sets is never
    switched (on 64 H100s, where auto picks once-per-step sync for some candidates)."""
    for stage in (1, 2, 3):
        planned = llama_8b((f"train.zero_stage={stage}",)).candidates
        assert {(c.zero_stage, c.fsdp_grad_sync) for c in planned} == {(stage, "micro_batch")}
        refused = [c for c in planned if c.layout.shard_degree == 1 and c.dropped is None]
        assert all(not c.runnable for c in refused) == (stage != 3)  # stages 1 and 2 need something sharded
    nodes = PlanRequest(8, nodes=8, model="llama-3.1-8b", gpu="h100", probe=False)
    assert any(c.fsdp_grad_sync == "step" for c in plan_request(nodes).candidates if c.dropped is None)
    set_sync = dataclasses.replace(nodes, overrides=("train.fsdp_grad_sync=micro_batch",))
    assert {c.fsdp_grad_sync for c in plan_request(set_sync).candidates} == {"micro_batch"}


def test_the_table_says_the_sharding_where_it_is_not_stage_three():
    planned = llama_8b()
    table = format_table(planned.candidates, limit=400).splitlines()
    feasible = [c for c in planned.candidates if c.dropped is None]
    for line, candidate in zip(table[2:], feasible, strict=False):
        note = line[line.index(f"{candidate.estimate.tokens_per_s:,.0f}") :]
        assert ("zero_stage=" in note) == (candidate.zero_stage != 3), line
        if candidate.zero_stage != 3:
            assert f"zero_stage={candidate.zero_stage}" in note


# --- what runs: the trainer, the exports, a sweep's trials -----------------------------------------------------


def test_the_trainer_resolves_auto_to_stage_three(tmp_path):
    """auto is the default and resolves to 3 where no plan chose, in one place; a run's files and hash are those of
    stage 3 (and of every earlier version's default); a bad value is refused in one line."""
    from trainer.costs.memory_model import MemoryPlan, predict_memory
    from trainer.launch.launcher import TrainRequest, prepare
    from trainer.parallel.data_parallel import fsdp_options

    assert TrainSpec().zero_stage == "auto" and [resolve_zero_stage(s) for s in ("auto", 3, 2, 1)] == [3, 3, 2, 1]
    assert fsdp_options(TrainSpec()) == fsdp_options(TrainSpec(zero_stage=3)) == {}
    config = AutoConfig.for_model(**TINY_MODEL)
    layout = Layout(dp_replicate=1, dp_shard=2)
    memory = {stage: predict_memory(config, layout, MemoryPlan(1, 64, "bf16", "none", TrainSpec(zero_stage=stage), 4))
              for stage in ("auto", 3, 2)}  # fmt: skip
    assert memory["auto"] == memory[3] != memory[2]
    stage_three = Experiment(train=TrainSpec(zero_stage=3))
    assert Experiment().config_hash() == stage_three.config_hash() == "0f11ef3b0b1f0b7c"
    for layout_arg in ("dp_shard=2", "dp_replicate=2"):  # auto shards nothing under dp_replicate: 3, no refusal
        out = tmp_path / layout_arg
        prepared = prepare(TrainRequest(experiment=write_experiment(tmp_path), out=out, nproc=2, layout=layout_arg))
        prepared.lock.release(discard=True)
        assert prepared.experiment.train.zero_stage == 3
        assert "zero_stage" not in yaml.safe_load((out / "config.yaml").read_text())["train"]
    with pytest.raises(ConfigError, match=r"^train\.zero_stage: 'four' is not one of auto, 3, 2, 1$"):
        load_experiment(write_experiment(tmp_path), ["train.zero_stage=four"])


def test_an_auto_run_trains_as_the_stage_three_run(tmp_path):
    """2 processes, dp_shard=2, 2 micro-batches a step, through `meshpilot train`: auto (no plan chose) gives the
    explicit stage-3 run's losses and gradient norms exactly, and the same recorded config."""
    experiment = write_experiment(tmp_path, {"train": {"micro_batch": 1, "global_batch_tokens": 4 * 64,
                                                       "gns_every": 0}})  # fmt: skip
    auto = train(experiment, tmp_path / "auto", "--nproc", "2", "--layout", "dp_shard=2")
    three = train(experiment, tmp_path / "three", "--nproc", "2", "--layout", "dp_shard=2",
                  "--set", "train.zero_stage=3")  # fmt: skip
    got, expected = auto.read_steps(), three.read_steps()
    assert len(got) == 3 and auto.read_metrics()["grad_accum"] == 2
    assert [(s["loss"], s["grad_norm"]) for s in got] == [(s["loss"], s["grad_norm"]) for s in expected]
    assert auto.read_metrics()["config_hash"] == three.read_metrics()["config_hash"]


def planned_context(planned, path=None, overrides=()) -> PlanContext:
    return PlanContext(planned.experiment, planned.hardware, planned.seq_len, path, list(overrides), "llama-3.1-8b")


def parsed_train_line(launch: str) -> argparse.Namespace:
    from trainer.cli import register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    argv = shlex.split(launch)
    assert argv[:2] == ["meshpilot", "train"]
    return parser.parse_args(argv[1:])


def test_the_torchrun_line_carries_the_chosen_sharding(tmp_path):
    """The exported `meshpilot train` line, parsed back with meshpilot's own parser and loaded as the run loads it,
    runs the stage the planner chose (and its grad sync); a stage the experiment pins is left to the file."""
    planned = llama_8b()
    sharding = [c for c in planned.candidates if c.dropped is None and c.layout.shard_degree > 1]
    for stage in (1, 2, 3):
        chosen = next(c for c in sharding if c.zero_stage == stage)
        done = export("torchrun", chosen, planned_context(planned), tmp_path / str(stage))
        args = parsed_train_line(done.launch)
        assert Layout.parse(args.layout) == chosen.layout
        loaded = load_experiment(args.experiment, args.overrides)
        assert (loaded.train.zero_stage, loaded.train.fsdp_grad_sync) == (stage, chosen.fsdp_grad_sync)
        assert f"zero_stage={stage}" in done.summary or stage == 3
    step = dataclasses.replace(sharding[0], zero_stage=3, fsdp_grad_sync="step")
    args = parsed_train_line(export("torchrun", step, planned_context(planned), tmp_path / "step").launch)
    assert load_experiment(args.experiment, args.overrides).train.fsdp_grad_sync == "step"
    path = write_experiment(tmp_path, {"model": {"config": TINY_MODEL}, "train": {"zero_stage": 2}})
    pinned = PlanContext(load_experiment(path), planned.hardware, 64, path, [])
    args = parsed_train_line(export("torchrun", dataclasses.replace(step, zero_stage=2), pinned, tmp_path).launch)
    assert not any(o.startswith("train.zero_stage") for o in args.overrides)
    assert load_experiment(args.experiment, args.overrides).train.zero_stage == 2


def sharded(stage: int, sync: str = "micro_batch") -> Candidate:
    return Candidate(Layout.parse("dp_shard=8"), 2, 4, False, {"peak": 0}, zero_stage=stage, fsdp_grad_sync=sync)


@pytest.mark.parametrize(
    ("stage", "sync", "reshards", "words"),
    [
        (3, "micro_batch", True, []),
        (2, "micro_batch", False, []),
        (1, "micro_batch", False, ["has no ZeRO-1", "exports stage 2"]),
        (3, "step", True, ["reduce-scatters the gradient after every micro-batch"]),
    ],
)
def test_torchtitan_and_accelerate_run_stage_two_where_the_plan_chose_one_or_two(tmp_path, stage, sync, reshards,
                                                                                  words):  # fmt: skip
    """Neither has ZeRO-1: stage 1 exports as stage 2 (parameters kept from forward to backward), which holds no
    more than stage 1, with a note; accelerate's accumulation syncs as planned (sync_each_batch where FSDP2
    reduce-scatters every micro-batch, its default no_sync where once per step)."""
    from accelerate.commands.config.config_args import ClusterConfig

    planned = llama_8b(("train.zero_stage=3",))
    context = planned_context(planned)
    titan = export("torchtitan", sharded(stage, sync), context, tmp_path / "titan")
    job = tomllib.loads(titan.files[0].read_text())
    assert job["parallelism"].get("fsdp_reshard_after_forward", "default") == ("default" if reshards else "never")
    assert all(any(w in note for note in titan.notes) for w in words)
    accelerated = export("accelerate", sharded(stage, sync), context, tmp_path / "accelerate")
    fsdp = ClusterConfig.from_yaml_file(str(accelerated.files[0])).fsdp_config
    assert fsdp["fsdp_reshard_after_forward"] is reshards
    accumulation = accelerated.notes[0]
    once_per_step = stage == 1 or sync == "step"
    assert ("sync_each_batch=True" in accumulation) == (not once_per_step)
    assert ("has no ZeRO-1" in " ".join(accelerated.notes)) == (stage == 1)


def test_a_sweep_trial_runs_with_the_chosen_sharding(tmp_path):
    """A sweep's points carry the planner's choice for layouts that shard, and their trials' overrides set it;
    dp_replicate points and an experiment that pins the stage set nothing (the tiny Llama on this CPU)."""
    from pydantic import TypeAdapter

    from agent.records import SpaceRecord
    from agent.sweep.space import Space, build_space
    from trainer.costs.planner import plan
    from trainer.hardware import this_machine

    changes = {"data": {"seq_len": 64}, "train": {"global_batch_tokens": 8 * 64},
               "search": {"layouts": ["dp_shard=2", "dp_replicate=2"]}}  # fmt: skip
    path = write_experiment(tmp_path, changes)
    experiment = load_experiment(path)
    space = build_space(path, experiment, {}, 2, "cpu")
    config = AutoConfig.for_model(**TINY_MODEL)
    planned = by_key(plan(experiment, config, this_machine("cpu", 2), 2**40, 64))
    stages = set()
    for point in space.points:
        candidate = planned[Layout(**point.layout).describe(), point.micro_batch, point.activation_checkpointing]
        set_stage = [o for o in point.overrides() if o.startswith("train.zero_stage=")]
        if candidate.layout.shard_degree > 1:
            assert set_stage == [f"train.zero_stage={candidate.zero_stage}"]
            assert point.params()["zero_stage"] == candidate.zero_stage
            stages.add(candidate.zero_stage)
        else:
            assert set_stage == [] and point.zero_stage is None
    assert stages - {3}  # the choice is not stage 3 everywhere: what the trials carry is the planner's
    stored = TypeAdapter(SpaceRecord).validate_python(space.to_dict())  # sweep.json's record of the space
    assert Space.from_dict(stored).points == space.points
    pinned_path = write_experiment(tmp_path, {**changes, "train": {**changes["train"], "zero_stage": 3}})
    pinned = build_space(pinned_path, load_experiment(pinned_path), {}, 2, "cpu")
    assert not any(o.startswith("train.zero_stage") for p in pinned.points for o in p.overrides())
