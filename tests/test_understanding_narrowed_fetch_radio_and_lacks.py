"""agent.understanding on rules narrowed where they acted wrongly (new sentences of each kind, not the sets', and the
near misses that must keep acting): a labels or secrets file fetched by name is refused; a file said to be a run's
that no run here has is asked about, never read from the repository root; a lack given as a reason that names a
setting or config asks; radio digits are read whole only ("two-zero-e-minus-five" is an exponent, a long or hedged
figure is asked); "check it fits first" asks before a launch; "my first model" yields to a preset named; repeated
plan flags, a double negative, a negated equipment check and a duration in wait( ) act on nothing.

The fixture repository is the benchmark's (bench.agent_understanding.build_fixture), as in tests/test_understanding.py.
"""

from __future__ import annotations

import pytest

from agent.understanding.known import Known
from tests.understanding_support import read, read_as

# --- a run's file fetched by name -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text", ["pull the labels.jsonl from the eval benchmark", "fetch tp-try's secrets.json", "grab the api keys file"]
)
def test_a_labels_or_secrets_file_fetched_is_refused(text: str, known: Known) -> None:
    assert read(text, known).refusal


@pytest.mark.parametrize(
    "text",
    [
        "fetch r7's memory.json",  # no run r7 here
        "pull tp-try's metric.json",  # no such file in tp-try
        "grab its steps.jsonl",  # no run talked about
    ],
)
def test_a_run_file_of_no_known_run_is_asked_about(text: str, known: Known) -> None:
    intent = read(text, known)
    assert intent.clarify and "path" not in intent.args


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ("fetch lr-scan's summary.json", "sweeps/lr-scan/summary.json"),
        ("pull baseline-ddp's steps.jsonl", "runs/baseline-ddp/steps.jsonl"),
        ("grab the notes.md", "notes.md"),
    ],
)
def test_a_file_of_a_known_run_sweep_or_the_root_is_read(text: str, path: str, known: Known) -> None:
    read_as(text, "read", {"path": path}, known)


# --- a lack given as a reason ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "train 4 gpus 10 steps, no compile; we don't have room for the long config",
        "train 4 gpus 10 steps, warmup 0; we do not have patience for a slow start, nor for bf16",
    ],
)
def test_a_lack_naming_what_the_launch_could_take_asks(text: str, known: Known) -> None:
    assert read(text, known).clarify


# --- radio digits ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("train on 4 gpus, lr two-zero-e-minus-five", {"nproc": 4, "set": ["train.lr=20e-5"]}),
        ("train 4 gpus, steps three-zero", {"nproc": 4, "steps": 30}),
    ],
)
def test_radio_digits_are_read_whole(text: str, args: dict, known: Known) -> None:
    read_as(text, "run", args, known)


@pytest.mark.parametrize(
    "text",
    [
        "train 4 gpus, steps five-zero-zero-zero-zero-zero",  # a figure of hundreds of thousands: a slip is 10x off
        "train 4 gpus 10 steps, micro batch six-zero, or was it three-zero",
        "train 4 gpus 10 steps, seq len two-zero-four-eight? check it fits first",
    ],
)
def test_long_or_hedged_radio_digits_ask(text: str, known: Known) -> None:
    assert read(text, known).clarify


def test_a_fit_checked_first_asks_before_a_launch(known: Known) -> None:
    assert read("train 4 gpus 10 steps with packing, make sure it fits first", known).clarify


# --- "my first model", plan flags, double negatives, checks, waits --------------------------------------------------


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("my first model was mistral-7b, plan it on 4 h100s", {"devices": 4, "model": "mistral-7b"}),
        ("plan our very first model on 4 h100s", {"devices": 4}),  # nothing else named: the experiment's own
    ],
)
def test_my_first_model_yields_to_a_named_preset(text: str, args: dict, known: Known) -> None:
    intent = read(text, known)
    assert (intent.command, intent.clarify) == ("plan", None)
    assert {key: intent.args.get(key) for key in args} == args
    if "model" not in args:
        assert "model" not in intent.args


def test_my_first_and_second_model_are_asked_about(known: Known) -> None:
    assert read("plan my first model and my other model on 4 h100s", known).clarify


@pytest.mark.parametrize("text", ["plan -m mistral-7b -d 4 -d 8", "plan -g h100 -g a100 -m mistral-7b -d 4"])
def test_a_repeated_plan_flag_asks(text: str, known: Known) -> None:
    assert read(text, known).clarify


@pytest.mark.parametrize(
    "text", ["train 4 gpus 10 steps, don't no packing", "train 4 gpus 10 steps, never without activation checkpointing"]
)
def test_a_double_negative_asks(text: str, known: Known) -> None:
    assert read(text, known).clarify


def test_a_single_negative_still_turns_off(known: Known) -> None:
    read_as("train 4 gpus 10 steps, no packing", "run", {"nproc": 4, "steps": 10, "set": ["data.packing=false"]}, known)


@pytest.mark.parametrize("text", ["skip the gpu check", "do not run a gpu check", "no equipment check needed"])
def test_a_negated_check_inspects_nothing(text: str, known: Known) -> None:
    assert read(text, known).command != "hardware"


def test_a_number_in_wait_is_a_duration_not_a_run(known: Known) -> None:
    intent = read("wait(30) then train 2 gpus 10 steps", known)
    assert intent.command != "status"
    assert intent.args.get("run") is None


def test_a_number_in_wait_before_a_named_run_waits_on_it(known: Known) -> None:
    intent = read("wait(30) on baseline-ddp", known)
    assert (intent.command, intent.args.get("run")) == ("status", "runs/baseline-ddp")


# --- an action taken back, a launch lacked for, docs from a brief never given ----------------------------------------


@pytest.mark.parametrize("text", ["resume tp-try. Not.", "cancel baseline-ddp nope.", "open a PR for lr-scan. No!"])
def test_a_lone_negation_after_an_action_asks(text: str, known: Known) -> None:
    assert read(text, known).clarify


@pytest.mark.parametrize(
    ("text", "command", "args"),
    [
        ("cancel baseline-ddp", "cancel", {"run": "runs/baseline-ddp"}),
        ("train 2 gpus 20 steps, with packing, not without", "run", {"nproc": 2, "steps": 20}),
    ],
)
def test_an_action_without_a_trailing_negation_still_acts(text: str, command: str, args: dict, known: Known) -> None:
    read_as(text, command, args, known)


def test_a_launch_lacked_for_asks(known: Known) -> None:
    assert read("no packing, we don't have the budget for any training at all", known).clarify


def test_docs_from_a_brief_never_given_ask(known: Known) -> None:
    assert read("write up the docs as we agreed earlier", known).clarify


def test_a_layout_lacked_for_asks(known: Known) -> None:
    assert read("train 4 gpus fsdp 10 steps, no packing; we do not have enough memory for sharding", known).clarify
