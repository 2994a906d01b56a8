"""agent.understanding on corrections and stated settings a reviewer's probe found dropped (new sentences of each
kind, not the probe's, and near misses that must read as before): a number, a card or a name taken back after a full
stop, a semicolon, a dash or "sorry, I meant"; a precision by its type's long name, gradient checkpointing shortened;
a sequence length in fractional thousands; a learning rate written as a fraction; plan arguments as key=value.

The fixture repository is the benchmark's (bench.agent_understanding.build_fixture), as in tests/test_understanding.py.
"""

from __future__ import annotations

import pytest

from tests.understanding_support import earlier_turn, read, read_as

# --- a value taken back after a full stop, a semicolon, a dash or "sorry, I meant" --------------------------------


@pytest.mark.parametrize(
    ("text", "command", "args"),
    [
        ("launch 30 steps. Make it 35.", "run", {"steps": 35}),
        ("train for 15 steps; sorry, 18", "run", {"steps": 18}),
        ("kick off a 5-trial sweep. Actually 7.", "sweep", {"trials": 7}),
        ("train 10 steps on 2 gpus. Actually, 3.", "run", {"steps": 10, "nproc": 3}),
        ("plan llama 3.1 8b on 2 h100 — make it 4", "plan", {"devices": 4}),
        ("plan mistral 7b on 4 a100 80gb. Make that h200s", "plan", {"devices": 4, "gpu": "h200"}),
        ("plan llama 3.1 8b on 4 gpus, not a100 — h100", "plan", {"devices": 4, "gpu": "h100-sxm"}),
        ("show results of tp-try — sorry, I meant r1", "results", {"run": "runs/r1"}),
    ],
)
def test_the_value_said_last_counts(text, command, args, known):
    read_as(text, command, args, known)


@pytest.mark.parametrize(
    ("text", "command", "args"),
    [
        ("train 20 steps. Then wait 5 minutes", "run", {"steps": 20}),  # a number of another noun corrects nothing
        ("train 20 steps, 4 gpus", "run", {"steps": 20, "nproc": 4}),  # two values, no taking back
        ("plan llama 3.1 8b on 4 h100, 80gb each", "plan", {"devices": 4}),
    ],
)
def test_values_not_taken_back_stay(text, command, args, known):
    intent = read(text, known)
    assert intent.command == command
    assert {key: intent.args.get(key) for key in args} == args


def test_no_i_meant_keeps_its_no(known):
    from agent.understanding.normalise import normalise

    assert normalise("no, I meant tp-try", {"tp-try"}) == "no, I meant tp-try"
    assert normalise("cancel tp-try. I meant it", {"tp-try"}) == "cancel tp-try. I meant it"  # "it" is no name


# --- a stated precision or checkpointing is never dropped ----------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "setting"),
    [
        ("launch 12 steps using float-32", "train.precision=fp32"),
        ("run 12 steps with single precision", "train.precision=fp32"),
        ("12 steps, bfloat16 please", "train.precision=bf16"),
        ("train 12 steps at float8", "train.precision=fp8"),
        ("12 steps with gradient ckpt on", "train.activation_checkpointing=true"),
        ("turn on grad checkpointing and train 12 steps", "train.activation_checkpointing=true"),
    ],
)
def test_a_stated_setting_is_kept(text, setting, known):
    read_as(text, "run", {"steps": 12, "set": [setting]}, known)


def test_half_precision_is_still_asked(known):
    intent = read("train 12 steps in float16", known)
    assert intent.clarify is not None


# --- numbers in other notations -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "setting"),
    [
        ("train 12 steps with seq len 0.75k", "data.seq_len=768"),
        ("12 steps, sequence length 2.5k", "data.seq_len=2560"),
    ],
)
def test_a_fractional_thousand_of_tokens(text, setting, known):
    read_as(text, "run", {"steps": 12, "set": [setting]}, known)


def test_a_learning_rate_as_a_fraction_is_asked(known):
    intent = read("train 12 steps with lr 3/10000", known)
    assert intent.clarify is not None and "3/10000" in intent.clarify
    assert not any(str(o).startswith("train.lr=3") for o in intent.args.get("set") or [])


# --- plan arguments as key=value ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "plan model=mistral-7b nodes=2 devices=4 gpu=h200",
        "plan devices: 4, nodes: 2, model: mistral-7b, gpu: h200",
    ],
)
def test_plan_keys_bind_to_their_arguments(text, known):
    intent = read(text, known)
    assert (intent.command, intent.args.get("devices"), intent.args.get("nodes")) == ("plan", 4, 2)


def test_devices_without_a_nodes_key_stay_a_count(known):
    intent = read("plan mistral 7b devices=4 gpu=h200", known)
    assert (intent.command, intent.args.get("devices"), intent.args.get("nodes")) == ("plan", 4, None)


# --- a follow-up that changes the request before keeps the rest of it ----------------------------------------------


FSDP_LAUNCH = earlier_turn(
    "launch_run", {"nproc": 2, "layout": "dp_shard=2", "steps": 15}, "train 15 steps, fsdp, 2 gpus"
)


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("nope, 25 steps", {"nproc": 2, "layout": "dp_shard=2", "steps": 25}),
        ("yeah, but lr 2e-4", {"nproc": 2, "layout": "dp_shard=2", "steps": 15, "set": ["train.lr=2e-4"]}),
        ("no, 8 gpus", {"nproc": 8, "layout": "dp_shard=8", "steps": 15}),  # fsdp by its word: over all 8
        ("keep everything else but use 4 gpus", {"nproc": 4, "layout": "dp_shard=4", "steps": 15}),
        ("ok but on the long config", {"nproc": 2, "steps": 15, "experiment": "configs/long.yaml"}),
    ],
)
def test_a_change_keeps_the_launch_before(text, args, known):
    intent = read(text, known, FSDP_LAUNCH)
    assert (intent.command, intent.clarify) == ("run", None)
    assert {key: intent.args.get(key) for key in args} == args


def test_a_degree_the_user_wrote_is_asked_about_at_another_count(known):
    earlier = earlier_turn("launch_run", {"nproc": 2, "layout": "dp_shard=2", "steps": 15}, "15 steps dp_shard=2 on 2")
    intent = read("no, 8 gpus", known, earlier)
    assert intent.clarify is not None and "dp_shard=2" in intent.clarify


def test_a_sweep_follow_up_keeps_its_trials(known):
    earlier = earlier_turn("run_sweep", {"trials": 5}, "sweep with 5 trials")
    intent = read("same on the long config", known, earlier)
    assert (intent.command, intent.clarify, intent.args.get("trials")) == ("sweep", None, 5)


@pytest.mark.parametrize("text", ["and tp-try?", "nope, I meant tp-try"])
def test_another_run_after_a_benchmark_is_asked_about(text, known):
    earlier = earlier_turn("run_benchmark", {"model": "runs/r1"}, "benchmark r1")
    intent = read(text, known, earlier)
    assert intent.clarify is not None and "tp-try" in intent.clarify


def test_no_alone_after_a_launch_changes_nothing(known):
    intent = read("no, don't", known, FSDP_LAUNCH)
    assert intent.command not in ("run", "sweep", "bench") or intent.clarify is not None


def test_a_setting_of_another_config_is_asked_about(known):
    intent = read("train 15 steps with the warmup from the long config, on meshpilot.yaml", known)
    assert intent.clarify is not None and "warmup" in intent.clarify


# --- short names and a value restated alone: read, not asked about ---------------------------------------------------


@pytest.mark.parametrize(
    ("text", "setting"),
    [
        ("train 15 steps, wd=0.01", "train.weight_decay=0.01"),
        ("15 steps with ctx len 2048", "data.seq_len=2048"),
    ],
)
def test_short_setting_names(text, setting, known):
    read_as(text, "run", {"steps": 15, "set": [setting]}, known)


def test_a_value_before_instead_of_takes_its_noun(known):
    read_as("launch 35 instead of 15 steps", "run", {"steps": 35}, known)


def test_a_value_of_the_launch_before_taken_back_alone(known):
    intent = read("not 15, 45", known, FSDP_LAUNCH)
    assert (intent.command, intent.clarify, intent.args.get("steps"), intent.args.get("nproc")) == ("run", None, 45, 2)


def test_a_value_the_launch_before_lacks_is_not_placed(known):
    intent = read("not 7, 45", known, FSDP_LAUNCH)  # no 7 before: nothing to replace, never a launch of 45 steps
    assert intent.command != "run" or intent.clarify is not None


def test_make_it_a_rate_after_a_launch_with_a_rate(known):
    earlier = earlier_turn("launch_run", {"steps": 15, "overrides": ["train.lr=1e-3"]}, "train 15 steps at lr 1e-3")
    intent = read("make it 5e-4", known, earlier)
    assert (intent.command, intent.clarify, intent.args.get("steps")) == ("run", None, 15)
    assert intent.args.get("set") == ["train.lr=5e-4"]
