"""agent.understanding on values a launch must not take as said: a rate's value corrected in place ("X, no, Y"), two
values of a setting offered ("X or maybe Y"), a value scheduled over part of the run ("for the first N steps, then
..."), a setting put off to a later or another run, and a launch whose content is someone else's choice not given
yet ("whatever Marc suggests"). New sentences of each kind, and near misses that must keep acting.

The fixture repository is the benchmark's (bench.agent_understanding.build_fixture), as in tests/test_understanding.py.
"""

from __future__ import annotations

import pytest

from tests.understanding_support import earlier_turn, read, read_as

# --- a rate's value corrected in place: the value said last, for that setting ---------------------------------------


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("train on 4 gpus for 40 steps, lr 5e-4, no, 3e-4.", {"nproc": 4, "steps": 40, "set": ["train.lr=3e-4"]}),
        ("launch 30 steps with learning rate 2e-3; sorry, 1e-3", {"steps": 30, "set": ["train.lr=1e-3"]}),
        ("train 10 steps, lr 6e-4 -- I mean 4e-4, on 2 gpus", {"steps": 10, "nproc": 2, "set": ["train.lr=4e-4"]}),
        ("train 15 steps, weight decay 0.2, actually 0.01", {"steps": 15, "set": ["train.weight_decay=0.01"]}),
        ("train 15 steps, lr 7e-4, no wait, 6e-4.", {"steps": 15, "set": ["train.lr=6e-4"]}),
        ("train 15 steps, lr 7e-4, um, 5e-4.", {"steps": 15, "set": ["train.lr=5e-4"]}),
    ],
)
def test_a_rate_corrected_in_place_takes_the_last(text, args, known):
    read_as(text, "run", args, known)


@pytest.mark.parametrize(
    "text",
    [
        "launch 12 steps, lr 2e-4, actually 0.05 for the weight decay as well",
        "launch 12 steps, lr 2e-4, sorry, 0.3 with grad clip",
        "launch 12 steps, lr 2e-4, I mean 0.02 and the warmup too",
    ],
)
def test_a_value_said_for_another_setting_corrects_no_rate(text, known):
    """The value after "actually"/"sorry" belongs to the setting named after it: the rate is not corrected to it (the
    value is asked about, its setting unclear)."""
    intent = read(text, known)
    assert intent.clarify and "train.lr=2e-4" in intent.args.get("set", [])


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("train 25 steps with lr 3e-4, no warmup", {"steps": 25, "set": ["train.lr=3e-4", "train.warmup_steps=0"]}),
        ("train 25 steps, lr 3e-4, no packing", {"steps": 25, "set": ["train.lr=3e-4", "data.packing=false"]}),
    ],
)
def test_a_no_before_a_setting_is_no_correction(text, args, known):
    read_as(text, "run", args, known)


# --- two values of a setting offered: which is asked ------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "train 20 steps on 2 gpus, lr 5e-4 or maybe 1e-3.",
        "launch 12 steps with warmup 3 or perhaps 6",
        "train 20 steps with seed 7 or 11.",
        "train 20 steps, lr 4e-4, perhaps 8e-4.",
        "train 20 steps with lr 4e-4, or is it 6e-4?",
    ],
)
def test_two_values_offered_are_asked(text, known):
    intent = read(text, known)
    assert intent.command == "run" and intent.clarify and "Which" in intent.clarify


# --- a value scheduled over part of the run: asked, its count no run length ------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "train on 2 gpus with lr 2e-4 for the first 30 steps, then 1e-4",
        "launch 4 processes, warmup 0 but lr 1e-3 over the last 15 steps.",
        "train 2 gpus, lr 5e-4 till step 40, then drop it to 1e-4",
        "train 80 steps on 2 gpus; past 20 steps, lower the lr to 1e-5",
        "train 50 steps, lr 1e-3 during the second half.",
    ],
)
def test_a_schedule_is_asked(text, known):
    intent = read(text, known)
    assert intent.command == "run" and intent.clarify
    assert intent.args.get("steps") not in (30, 15, 40, 20)


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("train until step 60 on 2 gpus", {"steps": 60, "nproc": 2}),
        ("train 2 gpus for 30 steps and stop after 30 steps", {"steps": 30, "nproc": 2}),
        ("train for 20 steps, then show me the loss", {"steps": 20}),
    ],
)
def test_a_run_length_is_no_schedule(text, args, known):
    intent = read(text, known)
    assert intent.command == "run" and intent.clarify is None
    assert {key: intent.args.get(key) for key in args} == args


# --- a setting put off to a later or another run: held back, asked ----------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "train 20 steps on 2 gpus; switch compile off next time",
        "launch 10 steps, and turn on activation checkpointing for the following run",
        "train 2 gpus for 15 steps, no packing from the next launch",
        "train 30 steps, we'll try fp8 later on",
        "train 20 steps on 2 gpus. For any future runs, enable compile",
        "train 20 steps, warmup 5 for the next run",
        "train 20 steps, and switch compile off after this run finishes.",
    ],
)
def test_a_setting_put_off_is_not_applied_now(text, known):
    intent = read(text, known)
    assert intent.command == "run" and intent.clarify
    set_now = " ".join(intent.args.get("set", []))
    assert not any(word in set_now for word in ("compile", "activation", "packing", "fp8", "warmup"))


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("train 20 steps on 2 gpus, compile off for this run", {"steps": 20, "set": ["train.compile=false"]}),
        ("train 20 steps without packing now; I'll check the results later", {"set": ["data.packing=false"]}),
    ],
)
def test_a_setting_for_this_run_acts(text, args, known):
    read_as(text, "run", args, known)


# --- a launch whose content is someone else's choice, not given: asked ------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "launch whatever Ingrid recommends",
        "start what my supervisor will pick, on 2 gpus",
        "train whatever the tech lead decides on",
        "launch whatever is in Dana's email",
    ],
)
def test_someone_elses_choice_is_asked(text, known):
    intent = read(text, known)
    assert intent.command == "run" and intent.clarify and "Which settings" in intent.clarify


def test_what_we_did_last_time_after_a_launch_is_that_launch(known):
    earlier = earlier_turn("launch_run", {"nproc": 2, "steps": 20}, "train 20 steps on 2 gpus")
    intent = read("run what we did last time", known, earlier)
    assert intent.command == "run" and intent.clarify is None
    assert intent.args.get("nproc") == 2 and intent.args.get("steps") == 20


def test_what_we_did_last_time_with_no_launch_before_is_asked(known):
    intent = read("kick off what we did previously", known)
    assert intent.command == "run" and intent.clarify and "Repeat which launch" in intent.clarify
