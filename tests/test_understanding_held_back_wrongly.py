"""agent.understanding on requests a person would act on that the parser held back or asked about, and on settings
said in follow-ups and metaphors (new sentences of each kind, and near misses that must stay as they were):
a courtesy left to the assistant's judgment ("if you think that is reasonable"), an aside on what the run may do ("if
this OOMs too I'm quitting"), "if so, proceed" after the user's own question whether the action is allowed, "would it
be reasonable to benchmark ..."; time spent on a setting ("waiting on compile") is no state of it, "lay the AC mulch
on" is on, "without the fp8 magic" takes fp8 back, "fp8 is not permitted" refuses it, "not begin with any warmup" is
warmup 0, "wait no." opening a follow-up takes back the turn before; "the batch job" submitted and "the approved run
is 2 GPUs ..." are the launch asked for, no run on disk; "the last tp one" after a launch is that launch.

The fixture repository is the benchmark's (bench.agent_understanding.build_fixture), as in tests/test_understanding.py.
"""

from __future__ import annotations

import pytest
from langchain_core.messages import HumanMessage

from agent.understanding.known import Known
from tests.understanding_support import earlier_turn, read


def _acted(text: str, known: Known, earlier: list | None = None):
    intent = read(text, known, earlier)
    assert intent.clarify is None, intent.clarify
    return intent


# --- hedges that hold nothing back ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("2 GPUs, dp_shard=2, 60 steps, packing off, if you think this is sensible.", {"nproc": 2, "steps": 60}),
        ("train 8 steps on 2 gpus with fsdp if you reckon that's ok", {"nproc": 2, "steps": 8}),
        ("ok. 2 gpus, tp=2, 40 steps. if this crashes again I'm going home", {"nproc": 2, "steps": 40}),
        ("2 gpus fsdp 30 steps; if it diverges I'm blaming the data", {"nproc": 2, "steps": 30}),
    ],
)
def test_a_hedge_on_nothing_to_check_launches(text, args, known):
    intent = _acted(text, known)
    assert intent.command == "run"
    assert {key: intent.args.get(key) for key in args} == args


@pytest.mark.parametrize(
    "text",
    [
        "Are we allowed to benchmark r1 on the held-out suite? Only the scores. If so, go ahead.",
        "is evaluating tp-try on the benchmark permitted under our rules? if yes, please proceed",
    ],
)
def test_if_so_proceed_after_asking_whether_allowed_acts(text, known):
    intent = _acted(text, known)
    assert intent.command == "bench"


def test_whether_fine_to_benchmark_asked_politely_acts(known):
    earlier = [HumanMessage("show me the results of tp-try")]
    intent = _acted("Many thanks. Would it be acceptable, then, to benchmark tp-try?", known, earlier)
    assert (intent.command, intent.args.get("model")) == ("bench", "runs/tp-try")


@pytest.mark.parametrize(
    ("text", "command"),
    [
        ("if tp-try finished, benchmark it", "bench"),
        ("only if you think it's safe, cancel r1", "cancel"),
        ("cancel r1 if you think that is reasonable", "cancel"),
        ("kill tp-try. if it has a checkpoint we'll keep it", "cancel"),
        ("if this works, we'll sweep tomorrow", "sweep"),
        ("if the gpus are free, I'll take 2 gpus fsdp 20 steps", "run"),
        ("2 gpus fsdp 20 steps, if you think it's safe", "run"),
        ("Is cancelling r1 within policy? If so, proceed.", "cancel"),
        ("Is r1 finished? If so, benchmark it.", "bench"),  # (its status read first, or asked)
        ("Would it be reasonable to cancel r1?", "cancel"),
        ("Would it be wise to benchmark r1?", "bench"),
    ],
)
def test_a_real_condition_or_question_still_holds_back(text, command, known):
    intent = read(text, known)
    assert intent.command != command or intent.clarify is not None


# --- settings in follow-ups and metaphors --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "setting"),
    [
        ("sick of waiting for compile, so compile off. 2 gpus fsdp 20 steps", "train.compile=false"),
        ("2 gpus fsdp 20 steps, sprinkle... no, lay the packing blanket on", "data.packing=true"),
        ("2 gpus fsdp 20 steps and flip the compile magic off please", "train.compile=false"),
        ("2 gpus fsdp 20 steps, precision bf16 - fp8 isn't allowed here", "train.precision=bf16"),
        ("2 gpus fsdp 20 steps, skip the fp8 trickery, bf16", "train.precision=bf16"),
    ],
)
def test_a_setting_said_in_other_words_is_read(text, setting, known):
    intent = _acted(text, known)
    assert intent.command == "run" and setting in intent.args["set"]
    assert not any(o == "train.precision=fp8" for o in intent.args["set"])


def test_a_run_told_not_to_open_with_warmup_has_none(known):
    intent = _acted("2 GPUs, fsdp, 30 steps, and please don't start with any warmup at all", known)
    assert "train.warmup_steps=0" in intent.args["set"]


@pytest.mark.parametrize(
    "text",
    [
        "waiting on compile. 2 gpus fsdp 20 steps",  # time on it names no state: asked, never on
        "2 gpus fsdp 20 steps, without the fp8 magic",  # fp8 taken back, nothing else said: asked
    ],
)
def test_a_setting_without_a_state_still_asks(text, known):
    intent = read(text, known)
    assert intent.clarify is not None
    assert "train.precision=fp8" not in intent.args.get("set", [])


LAUNCH = earlier_turn("launch_run", {"nproc": 2, "layout": "tp=2", "steps": 20}, "start 2 gpus with tp=2 for 20 steps")


def test_wait_no_opening_a_follow_up_takes_back_the_turn_before(known):
    intent = _acted("wait no. same again but without packing, it's too slow", known, LAUNCH)
    assert (intent.args.get("nproc"), intent.args.get("steps")) == (2, 20)
    assert "data.packing=false" in intent.args["set"]


def test_the_last_one_after_a_launch_is_that_launch(known):
    intent = _acted("ugh, the last tp one blew up. same again but with activation checkpointing", known,
                    LAUNCH)  # fmt: skip
    assert (intent.args.get("layout"), intent.args.get("steps")) == ("tp=2", 20)


# --- a launch described as its own noun or defined in the sentence --------------------------------------------------


@pytest.mark.parametrize(
    ("text", "nproc"),
    [
        ("please submit the cluster job on 2 gpus, fsdp, 20 steps", 2),
        ("The sanctioned run is 4 GPUs with dp_shard=4 for 10 steps. Launch it.", 4),
    ],
)
def test_a_launch_said_as_its_noun_is_no_run_on_disk(text, nproc, known):
    intent = _acted(text, known)
    assert (intent.command, intent.args.get("nproc")) == ("run", nproc)


@pytest.mark.parametrize(
    "text",
    [
        "relaunch the batch job on 4 gpus",  # one started before: which?
        "start the llama run on 4 gpus",
        "the llama run is 2 hours old, relaunch it on 4 gpus",
    ],
)
def test_a_run_described_that_fits_none_is_still_asked(text, known):
    assert "Which do you mean" in (read(text, known).clarify or "")
