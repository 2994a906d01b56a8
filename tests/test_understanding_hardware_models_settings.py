"""agent.understanding on hardware, model names, counts and settings it missed or misread (new sentences of each
kind, not the sets'), each with a near miss that must keep its reading: a GPU said unavailable is not the one planned
on; "gigas" is a card's memory; cards with no preset planned on by their count and stated memory; a card added by its
place after a plan ("a third one"); the answer to "Which A100?" with a remark after it; a model described but not
named ("my chatbot model") is asked about; an MoE preset by family and total size ("qwen3 235b"), a dictated size
("twenty b", "eight by seven b"); a total with its split said ("16 h100 (2 machines, 8 each)", "2 nodes of those
8"); cards named by their memory alone ("on 48GB cards"), "feasibility" as a plan; settings said as duties ("packing
is to be off", "warmup is not to be touched"), ESL ("open the packing", "the micro batch in 8") and "w/o X and w/o Y".

The fixture repository is the benchmark's (bench.agent_understanding.build_fixture), as in tests/test_understanding.py.
"""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from agent.understanding.known import Known
from tests.understanding_support import earlier_turn, read, read_as


def _asks(text: str, known: Known, earlier: list | None = None) -> None:
    assert read(text, known, earlier).clarify


# --- a GPU said not there ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("the a100s are down today, what fits llama-3.1-70b on 2 nodes of 8 h200?", {"gpu": "h200", "devices": 8}),
        ("our h100 cluster went offline; plan llama-3.1-8b on 4 l40s", {"gpu": "l40s", "devices": 4}),
    ],
)
def test_gpu_said_unavailable_is_not_planned_on(text: str, args: dict, known: Known) -> None:
    read_as(text, "plan", args, known)


def test_gpu_said_unavailable_with_no_other_is_asked(known: Known) -> None:
    _asks("h100 pool unavailable. plan llama-3.1-8b on 8 gpus", known)


def test_gpu_brought_down_to_a_count_is_no_outage(known: Known) -> None:
    intent = read("plan llama-3.1-8b on 8 h200s", known)  # near miss: no card said gone
    assert (intent.command, intent.args.get("gpu")) == ("plan", "h200")


# --- a card's memory, and cards with no preset --------------------------------------------------------------------


def test_gigas_is_a_cards_memory(known: Known) -> None:
    read_as(
        "with 2 nodes of 8 GPUs A100 of 40 gigas each one, what layout for llama-3.1-8b?",
        "plan",
        {"gpu": "a100-40gb", "nodes": 2, "devices": 8, "model": "llama-3.1-8b"},
        known,
    )


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("plan llama-3.1-8b on 2 a6000 with 48GB each", {"devices": 2, "device_mem": "48GiB"}),
        ("would mistral-7b fit on 8 v100s (32 gigs each)?", {"devices": 8, "device_mem": "32GiB"}),
        ("plan llama-3.1-8b on 4 48GB cards", {"devices": 4, "device_mem": "48GiB"}),
    ],
)
def test_cards_with_no_preset_planned_by_count_and_memory(text: str, args: dict, known: Known) -> None:
    read_as(text, "plan", args, known)


@pytest.mark.parametrize(
    "text",
    [
        "plan llama-3.1-8b on 2 a6000",  # near miss: no memory said, so which card is asked
        "plan mistral-7b on 4 3080s",
        "train on 2 3090s (24 gigs each) for 10 steps",  # a launch runs on this machine's cards: asked
    ],
)
def test_cards_with_no_preset_and_no_plan_memory_are_asked(text: str, known: Known) -> None:
    _asks(text, known)


# --- counts of the plan before ------------------------------------------------------------------------------------


def _planned(text: str, args: dict) -> list:
    return earlier_turn("plan_layouts", args, text)


def test_card_added_by_its_place_is_one_more(known: Known) -> None:
    earlier = _planned("plan llama-3.1-8b on 3 l40s", {"model": "llama-3.1-8b", "gpu": "l40s", "devices": 3})
    intent = read("and if we bought a fourth card?", known, earlier)
    assert (intent.command, intent.clarify, intent.args.get("devices")) == ("plan", None, 4)


@pytest.mark.parametrize("text", ["and with a fifth card?", "and with a third one?"])
def test_card_added_at_another_place_is_asked(text: str, known: Known) -> None:
    earlier = _planned("plan llama-3.1-8b on 3 l40s", {"model": "llama-3.1-8b", "gpu": "l40s", "devices": 3})
    if "third" in text:  # near miss: after 2 nodes "a third one" may be a node
        earlier = _planned("plan llama-3.1-8b on 2 nodes of 2 l40s",
                           {"model": "llama-3.1-8b", "gpu": "l40s", "devices": 2, "nodes": 2})  # fmt: skip
    _asks(text, known, earlier)


def test_nodes_of_those_gpus_are_nodes_of_that_many(known: Known) -> None:
    earlier = _planned("plan llama-3.1-70b on 4 h200", {"model": "llama-3.1-70b", "gpu": "h200", "devices": 4})
    intent = read("now 3 nodes of those 4", known, earlier)
    assert (intent.command, intent.clarify, intent.args.get("devices"), intent.args.get("nodes")) == (
        "plan",
        None,
        4,
        3,
    )


def test_memory_answer_with_a_remark_after_it(known: Known) -> None:
    earlier = [HumanMessage("is llama-3.1-8b ok on 2 a100s?"), AIMessage("Which A100: A100 40GB or A100 80GB?")]
    intent = read(
        "The 80 gig ones. Just curious, nothing urgent, I am only comparing options for the team.", known, earlier
    )
    assert (intent.command, intent.clarify) == ("plan", None)
    assert {k: intent.args.get(k) for k in ("gpu", "devices", "model")} == {
        "gpu": "a100-80gb",
        "devices": 2,
        "model": "llama-3.1-8b",
    }


@pytest.mark.parametrize(
    ("text", "nodes"),
    [
        ("could deepseek-v3 fit on 16 h100 (2 machines, 8 per machine)?", 2),
        ("plan llama-3.1-70b on 4 nodes, 8 each, of h200", 4),
    ],
)
def test_total_with_its_split_said(text: str, nodes: int, known: Known) -> None:
    intent = read(text, known)
    assert (intent.command, intent.clarify, intent.args.get("devices"), intent.args.get("nodes")) == (
        "plan",
        None,
        8,
        nodes,
    )


# --- model names -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "model"),
    [
        ("plan qwen3 30b on 8 h100", "qwen3-30b-a3b"),
        ("what fits gpt oss one hundred twenty b on 2 nodes of 8 h200", "gpt-oss-120b"),
        ("plan mixtral eight by twenty two b on 2 nodes of 8 h100s", "mixtral-8x22b"),
    ],
)
def test_moe_preset_by_family_and_size(text: str, model: str, known: Known) -> None:
    intent = read(text, known)
    assert (intent.command, intent.clarify, intent.args.get("model")) == ("plan", None, model)


def test_moe_size_with_another_active_size_is_asked(known: Known) -> None:
    _asks("plan qwen3 30b a22b on 8 h100", known)  # near miss: no preset has that active size


@pytest.mark.parametrize("text", ["could you plan our support llm on 8 h100s", "plan my summariser model on 4 l40s"])
def test_described_model_is_asked_about(text: str, known: Known) -> None:
    _asks(text, known)


def test_own_model_is_still_the_experiments(known: Known) -> None:
    intent = read("plan my own model on 4 h100", known)  # near miss
    assert (intent.command, intent.clarify, "model" in intent.args) == ("plan", None, False)


def test_feasibility_of_a_model_on_cards_is_a_plan(known: Known) -> None:
    read_as(
        "feasibility check: llama-3.1-70b on 48GB devices, 8 per node, 2 nodes",
        "plan",
        {"model": "llama-3.1-70b", "device_mem": "48GiB", "devices": 8, "nodes": 2},
        known,
    )


# --- settings ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "settings"),
    [
        ("run 25 steps; compile is to be off, and packing is not to be touched", ["train.compile=false"]),
        ("train 15 steps, packing is to be on", ["data.packing=true"]),
        ("launch 30 steps and open the packing, but no compile", ["data.packing=true", "train.compile=false"]),
        ("launch a training of 50 steps with the micro batch in 8", ["train.micro_batch=8"]),
        ("run 10 steps w/o warmup and w/o compile", ["train.warmup_steps=0", "train.compile=false"]),
    ],
)
def test_settings_said_as_duties_or_esl(text: str, settings: list, known: Known) -> None:
    intent = read(text, known)
    assert (intent.command, intent.clarify, sorted(intent.args.get("set", []))) == ("run", None, sorted(settings))


@pytest.mark.parametrize("text", ["open the packing notes", "open the compile log of r1"])
def test_opening_a_file_about_a_switch_turns_nothing_on(text: str, known: Known) -> None:
    assert read(text, known).command != "run"  # near miss
