"""agent.understanding on negations said in words the rules had missed (new sentences of each kind, not the sets'),
each with a near miss that must keep its reading: a setting spoken of after its negation ("problems with the
compilation") turns nothing back on; "the compiler ... left out" is compile off; "negative compile", "hold the
packing", Scots "nae packing" turn a setting off; warmup refused in other words ("leave out", "excluding", "w/o",
"don't bother with", "negative on") is warmup 0; slang "no cap" turns nothing off; a layout key in backquotes is no
shell command; a tool refused beside another one asked ("don't push anything or open a PR") is held back; a card's
variant refused for another ("not the sxm kind, the pcie ones") is the other.

The fixture repository is the benchmark's (bench.agent_understanding.build_fixture), as in tests/test_understanding.py.
"""

from __future__ import annotations

import pytest

from tests.understanding_support import read, read_as


@pytest.mark.parametrize(
    ("text", "off"),
    [
        # the negation stays: what is said of the setting afterwards is no request for it
        ("Train 30 steps on 4 GPUs without torch compile, we actually had issues with the compile step.", "compile"),
        ("Run 10 steps on 2 GPUs, no packing; honestly I had trouble with packing last week.", "packing"),
        # the tool named by what runs it, and left out after it
        ("Kick off 40 steps on 2 GPUs and see that the compiler is left out.", "compile"),
    ],
)
def test_a_setting_spoken_of_after_its_negation_stays_off(text, off, known):
    key = {"compile": "train.compile", "packing": "data.packing"}[off]
    intent = read(text, known)
    assert intent.command == "run" and intent.clarify is None
    assert f"{key}=false" in intent.args["set"] and f"{key}=true" not in intent.args["set"]


def test_a_setting_only_spoken_of_sets_nothing(known):
    # near miss: trouble with compilation, and no negation or use said: compile is neither turned on nor off
    intent = read("Launch 20 steps on 2 GPUs; I had some problems with the compilation yesterday.", known)
    assert not any(o.startswith("train.compile=") for o in intent.args.get("set", []))


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("Train 25 steps on 2 GPUs, negative packing, negative compile.",
         {"nproc": 2, "steps": 25, "set": ["data.packing=false", "train.compile=false"]}),
        ("Negative on compile. Launch 30 steps on 4 GPUs.", {"nproc": 4, "steps": 30, "set": ["train.compile=false"]}),
        ("Two GPUs, 15 steps, and hold the activation checkpointing.",
         {"nproc": 2, "steps": 15, "set": ["train.activation_checkpointing=false"]}),
        ("Gie it 30 steps on 2 GPUs wi' nae compile.", {"nproc": 2, "steps": 30, "set": ["train.compile=false"]}),
    ],
)  # fmt: skip
def test_settings_refused_in_other_words_are_off(text, args, known):
    read_as(text, "run", args, known)


@pytest.mark.parametrize(
    "text",
    [
        "Launch 30 steps on 2 GPUs and leave out the warmup phase.",
        "Launch 30 steps on 2 GPUs, excluding any warmup.",
        "Launch 30 steps on 2 GPUs w/o warmup.",
        "Launch 30 steps on 2 GPUs, don't bother with warmup.",
        "Negative on warmup. Launch 30 steps on 2 GPUs.",
        "Launch 30 steps, warmup steps zero, 2 GPUs.",
        "Launch 30 steps without warmup 2 gpus.",
    ],
)
def test_warmup_refused_in_other_words_is_zero(text, known):
    read_as(text, "run", {"nproc": 2, "steps": 30, "set": ["train.warmup_steps=0"]}, known)


def test_warmup_with_its_own_count_is_no_refusal(known):
    # near miss: a count right after the warmup with no noun of its own is its length, asked about, never read as 0
    intent = read("Launch 30 steps on 2 GPUs, no warmup 5", known)
    assert "train.warmup_steps=0" not in intent.args.get("set", [])


def test_no_cap_is_slang_and_turns_nothing_off(known):
    read_as("launch 40 steps on 4 gpus in bf16, no cap this is the one", "run",
            {"nproc": 4, "steps": 40, "set": ["train.precision=bf16"]}, known)  # fmt: skip


def test_no_mixing_of_sequences_is_packing_off(known):
    read_as("Train 20 steps on 2 GPUs, no mixing of documents please.", "run",
            {"nproc": 2, "steps": 20, "set": ["data.packing=false"]}, known)  # fmt: skip


def test_no_mixing_of_datasets_is_still_asked(known):
    # near miss: a data mix is no packing
    intent = read("Train 20 steps on 2 GPUs, no mixing of datasets.", known)
    assert "data.packing=false" not in intent.args.get("set", []) and intent.clarify


def test_a_layout_key_in_backquotes_is_no_shell_command(known):
    read_as("Launch on 4 GPUs with `cp=4`, and do not enable compilation.", "run",
            {"nproc": 4, "layout": "cp=4", "set": ["train.compile=false"]}, known)  # fmt: skip


def test_a_copy_in_backquotes_is_still_a_shell_command(known):
    # near miss: `cp` opening a command is the program
    assert read("run `cp runs/r1/log.txt /tmp` for me", known).refusal


@pytest.mark.parametrize(
    "text",
    [
        "Write the report of the lr-scan sweep, but don't merge anything or open a pull request yet.",
        "Write up the lr-scan sweep as a report; we won't open a PR for now.",
    ],
)
def test_a_tool_refused_beside_the_one_asked_is_held_back(text, known):
    assert read(text, known).command == "report"


def test_a_pull_request_asked_is_still_opened(known):
    # near miss: no negation of the pull request
    assert read("Open a pull request with the lr-scan report.", known).command == "pr"


def test_a_card_variant_refused_for_another_is_the_other(known):
    read_as("plan llama 3 8b on 4 h100s, not the sxm ones but the pcie kind", "plan",
            {"devices": 4, "gpu": "h100-pcie"}, known)  # fmt: skip


def test_a_card_variant_named_alone_is_kept(known):
    # near miss: a variant named, no refusal
    read_as("plan llama 3 8b on 4 h100 sxm", "plan", {"devices": 4, "gpu": "h100-sxm"}, known)


def test_a_card_default_variant_refused_alone_is_asked(known):
    # "h100" alone is the SXM one: refused with no other named, which is asked, never the refused one planned
    intent = read("plan mistral 7b on 4 h100s, just not the sxm ones", known)
    assert intent.clarify and "pcie" in intent.clarify


def test_another_variant_refused_keeps_the_default(known):
    # near miss: the PCIe refused, the card's default (SXM) is not the one refused
    read_as("plan mistral 7b on 4 h100s, not pcie", "plan", {"devices": 4, "gpu": "h100-sxm"}, known)


@pytest.mark.parametrize(
    ("text", "switch"),
    [
        ("Train 20 steps on 2 GPUs without compile or warmup.", "train.compile=false"),
        ("Train 20 steps on 2 GPUs with no warmup or packing.", "data.packing=false"),
        ("Train 20 steps on 2 GPUs, turn off packing and warmup.", "data.packing=false"),
    ],
)
def test_warmup_in_a_list_with_a_switch_shares_its_negation(text, switch, known):
    read_as(text, "run", {"nproc": 2, "steps": 20, "set": [switch, "train.warmup_steps=0"]}, known)


@pytest.mark.parametrize(
    "text", ["Train 20 steps on 2 GPUs, ditch the warmup.", "Train 20 steps on 2 GPUs, we don't need warmup."]
)
def test_warmup_dropped_or_not_needed_is_zero(text, known):
    read_as(text, "run", {"nproc": 2, "steps": 20, "set": ["train.warmup_steps=0"]}, known)


def test_warmup_lowered_is_no_zero(known):
    # near miss: "drop the warmup from 100 to 10" changes its length, never turns it off
    intent = read("Train 20 steps on 2 GPUs, drop the warmup from 100 to 10.", known)
    assert "train.warmup_steps=0" not in intent.args.get("set", [])


def test_a_switch_negated_beside_warmup_said_as_usual_leaves_warmup(known):
    # near miss: the warmup after the list is said to stay, so it keeps its value
    intent = read("Train 20 steps on 2 GPUs, no compile, and warmup as usual.", known)
    assert intent.args["set"] == ["train.compile=false"]


@pytest.mark.parametrize(
    "text", ["Train 20 steps on 2 GPUs minus the compile.", "Train 20 steps on 2 GPUs, ditch compile."]
)
def test_a_switch_ditched_is_off(text, known):
    read_as(text, "run", {"nproc": 2, "steps": 20, "set": ["train.compile=false"]}, known)


def test_scrap_that_is_a_correction_not_a_negation(known):
    # near miss: "scrap that" takes back what came before; the setting after it is on as said
    read_as("Train 20 steps on 2 GPUs, scrap that, compile on.", "run",
            {"nproc": 2, "steps": 20, "set": ["train.compile=true"]}, known)  # fmt: skip


@pytest.mark.parametrize(
    "text",
    [
        "Draft the lr-scan report, but I won't be opening a pull request.",
        "Draft the lr-scan report; we don't want to open a PR yet.",
    ],
)
def test_a_pull_request_not_wanted_beside_a_report_is_held_back(text, known):
    assert read(text, known).command == "report"


def test_a_switch_answered_nope_is_off(known):
    read_as("Train 20 steps on 2 GPUs, packing: nope.", "run", {"nproc": 2, "steps": 20, "set": ["data.packing=false"]},
            known)  # fmt: skip


def test_a_no_brainer_is_no_negation(known):
    # near miss: "a no-brainer" praises the setting; never read as off
    intent = read("Train 20 steps on 2 GPUs, packing is a no-brainer.", known)
    assert "data.packing=false" not in intent.args.get("set", [])
