"""agent.understanding on values, hardware and descriptions it missed (new sentences of each kind, not the sets'),
each with a near miss that must keep its reading: the user's own cards asked about ("what gpu do i even have") are
a hardware question; a misspelt "config" still names its file; a sequence "N tokens long" is its length; a power of
ten said in words ("one times ten to the minus four") is a rate; a setting's troubles named after it is off keep
nothing ("no compile, no time to debug compile issues"); a GPU's memory said after "version" ("the version 80GB of
the a100") is that GPU; a run described as plain data parallel or without sharding is the DDP run; a run's file
named alone after a turn about that run is that run's file.

The fixture repository is the benchmark's (bench.agent_understanding.build_fixture), as in tests/test_understanding.py.
"""

from __future__ import annotations

import pytest

from agent.understanding.known import Known
from tests.understanding_support import earlier_turn, read, read_as

# --- the user's own cards, asked about ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "which cards do we actually have here",
        "how many accelerators do i really have?",
        "look at our gpus please",
        "my accelerators... how many do we have?",
    ],
)
def test_own_cards_asked_about_are_a_hardware_question(text: str, known: Known) -> None:
    read_as(text, "hardware", {}, known)


@pytest.mark.parametrize(
    ("text", "command"),
    [
        ("train on my gpu for 20 steps", "run"),  # near miss: the cards to train on, no question of them
        ("check my gpu utilization on r1", "results"),  # near miss: a run's figure
    ],
)
def test_own_cards_used_keep_their_action(text: str, command: str, known: Known) -> None:
    assert read(text, known).command == command


# --- a misspelt "config" after its stem --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["start the long confgi on 2 gpus", "launch the long configuraton with 2 gpus", "launch the long config on 2 gpus"],
)
def test_misspelt_config_names_its_file(text: str, known: Known) -> None:
    read_as(text, "run", {"experiment": "configs/long.yaml", "nproc": 2}, known)


# --- a sequence "N tokens long" ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seq_len"),
    [
        ("plan mistral 7b on 4 h100, sequences being 2048 tokens long", 2048),
        ("plan mistral 7b on 4 h100, each sample is 1k tokens long", 1024),
    ],
)
def test_sequence_tokens_long_is_its_length(text: str, seq_len: int, known: Known) -> None:
    read_as(text, "plan", {"model": "mistral-7b", "devices": 4, "seq_len": seq_len}, known)


def test_sequence_said_not_that_long_is_no_length(known: Known) -> None:
    # near miss: a length negated is no length to plan with
    intent = read("plan mistral 7b on 4 h100, the sequences are not 4096 tokens long", known)
    assert "seq_len" not in intent.args


# --- a power of ten in words ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "lr"),
    [
        ("train 30 steps with lr five times ten to the minus five", "train.lr=5e-5"),
        ("train 30 steps, lr ten to the negative three", "train.lr=1e-3"),
        ("train 30 steps, learning rate of 2 times 10 to the -4", "train.lr=2e-4"),
    ],
)
def test_power_of_ten_in_words_is_a_rate(text: str, lr: str, known: Known) -> None:
    read_as(text, "run", {"steps": 30, "set": [lr]}, known)


def test_positive_power_in_words_is_left_as_said(known: Known) -> None:
    # near miss: "10 to the 4" may be a count; never a rate, and asked about
    intent = read("train 30 steps, 10 to the 4 tokens", known)
    assert not any(str(s).startswith("train.lr=") for s in intent.args.get("set", []))


# --- a setting's troubles named after it is off ------------------------------------------------------------------


def test_troubles_named_after_a_setting_off_keep_nothing(known: Known) -> None:
    text = "launch 4 gpus, 50 steps, without packing, nobody wants to chase packing bugs today"
    read_as(text, "run", {"nproc": 4, "steps": 50, "set": ["data.packing=false"]}, known)


@pytest.mark.parametrize(
    "text",
    [
        "launch 4 gpus, 50 steps, packing off, keep packing",  # near miss: kept in so many words: asked
        "launch 4 gpus, 50 steps, no compile, compile issues are fixed so keep compile",
    ],
)
def test_setting_off_then_kept_is_asked(text: str, known: Known) -> None:
    assert read(text, known).clarify


# --- a GPU's memory said after "version" -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "gpu"),
    [
        ("plan llama 8b on 8 gpus, the version 40GB of the a100", "a100-40gb"),
        ("plan llama 8b on 8 gpus, the variant with 80 gb of the a100", "a100-80gb"),
    ],
)
def test_memory_after_version_names_the_gpu(text: str, gpu: str, known: Known) -> None:
    read_as(text, "plan", {"model": "llama-3.1-8b", "devices": 8, "gpu": gpu}, known)


def test_memory_after_version_follows_a_plan(known: Known) -> None:
    earlier = earlier_turn("plan_layouts", {"model": "mistral-7b", "devices": 4, "gpu": "a100-40gb"},
                           "mistral-7b on 4 a100-40gb, does it fit?")  # fmt: skip
    intent = read("and the version 80 gig of the a100?", known, earlier)
    assert (intent.command, intent.clarify) == ("plan", None)
    assert intent.args == {"model": "mistral-7b", "devices": 4, "gpu": "a100-80gb"}


def test_unsized_a100_is_still_asked(known: Known) -> None:
    assert read("plan llama 8b on 8 a100", known).clarify  # near miss: no memory said


# --- a run described as plain data parallel or without sharding -------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "how fast was the vanilla ddp one?",
        "how fast was the run with no sharding?",
        "results of the pure data parallel run",
    ],
)
def test_unsharded_description_is_the_ddp_run(text: str, known: Known) -> None:
    read_as(text, "results", {"run": "runs/baseline-ddp"}, known)


def test_sharded_description_is_the_fsdp_run(known: Known) -> None:
    read_as("how fast was the sharded run?", "results", {"run": "runs/r1"}, known)  # near miss


# --- a run's file named alone after a turn about it --------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "path"),
    [("and the log file?", "runs/r1/log.txt"), ("config?", "runs/r1/config.yaml")],
)
def test_lone_file_after_a_run_is_its_file(text: str, path: str, known: Known) -> None:
    earlier = earlier_turn("run_status", {"run": "runs/r1"}, "status r1")
    read_as_after = read(text, known, earlier)
    assert (read_as_after.command, read_as_after.clarify, read_as_after.args) == ("read", None, {"path": path})


def test_lone_file_without_a_run_before_is_asked(known: Known) -> None:
    earlier = earlier_turn("plan_layouts", {"model": "llama-3.1-8b", "devices": 4, "gpu": "h100-sxm"}, "plan llama 8b")
    assert read("log?", known, earlier).clarify  # near miss: the turn before was about no run
    assert read("log?", known).clarify
