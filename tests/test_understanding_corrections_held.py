"""Corrections, alternatives and partial counts with no one reading are asked, never the first reading guessed: an
action's correction that takes it back, conditions it or names no object; a name corrected by one of another kind; a
sweep named where the action takes a run; a plan's alternatives, reversals, unmatched totals, hardware partly out;
"double" of something other than the GPUs (issue 33)."""

from __future__ import annotations

import pytest

from tests.understanding_support import earlier_turn, read, read_as

# --- an action's correction that leaves it unresolved ------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "stop baseline-ddp. sorry, wrong tab",
        "kill r1 -- oops, wrong one",
        "cancel tp-try. actually, only once the eval has finished",
        "cancel baseline-ddp, sorry, I mean after it saves the next checkpoint",
        "stop r1. hold on, I mean the other run",
        "cancel tp-try. Correction: unless it has already finished",
    ],
)
def test_a_correction_that_leaves_the_action_unresolved_is_asked(text, known):
    intent = read(text, known)
    assert intent.command == "cancel" and intent.clarify is not None


def test_a_correction_naming_the_other_run_still_acts(known):
    read_as("cancel tp-try. sorry, r1", "cancel", {"run": "runs/r1"}, known)  # near miss


def test_a_courtesy_after_sorry_corrects_nothing(known):
    read_as("cancel tp-try, sorry for the noise", "cancel", {"run": "runs/tp-try"}, known)  # near miss


def test_a_correction_naming_a_sweep_by_a_part_of_its_name_is_asked(known):
    intent = read("open a PR for lr-scan. correction: the title should say something about the layouts", known)
    assert intent.clarify is not None


# --- the object corrected by another kind, or a sweep where a run is acted on -------------------------------------


def test_a_sweep_corrected_by_a_run_is_asked(known):
    intent = read("write a report on lr-scan. sorry, tp-try", known)
    assert intent.clarify is not None and "sweeps/lr-scan" in intent.clarify


def test_a_sweep_named_in_a_follow_up_never_cancels_the_run_before(known):
    earlier = earlier_turn("read_results", {"run": "runs/tp-try"}, "how did tp-try go?")
    intent = read("and please cancel layouts-nov as well", known, earlier)
    assert intent.clarify is not None


# --- a correction asked as a question -----------------------------------------------------------------------------


def test_a_correction_asked_as_a_question_is_no_correction(known):
    intent = read("plan llama-3.1-8b on 2 nodes of 8 a100 80gb. actually, was it 4 nodes?", known)
    assert intent.command == "plan" and intent.clarify is not None


# --- a card's variant and memory ----------------------------------------------------------------------------------


def test_a_cards_own_memory_restated_keeps_its_variant(known):
    read_as("plan llama-3.1-8b on 4 h100 pcie. sorry, 80gb ones", "plan", {"gpu": "h100-pcie", "devices": 4}, known)


def test_a_variant_corrected_with_two_variants_before_is_not_taken_for_both(known):
    intent = read("plan llama-3.1-8b on 4 h100 pcie and 4 h100 sxm. correction: nvl", known)
    assert intent.args.get("gpu") != "h100-nvl" or intent.clarify is not None


def test_a_memory_corrected_on_a_card_without_variant_still_corrects(known):
    read_as("plan llama-3.1-8b on 4 a100 80gb. sorry, 40gb", "plan", {"gpu": "a100-40gb", "devices": 4}, known)


# --- a plan's alternatives and reversals --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "plan qwen2.5-72b on 4 nodes of 8 or 16 h200",
        "planifica qwen2.5-72b en 4 nodos de 8 o 16 h200",
        "Plane qwen2.5-72b auf 4 Knoten mit 4 oder 8 H200",
        "plan qwen2.5-72b on 16 h200, or l40s maybe?",
        "plan llama-3.1-8b or qwen2.5-7b on 4 h100",
        "a100 is in, h100 is out -- no wait, vice versa: plan llama-3.1-8b on 4",
    ],
)
def test_a_plans_alternatives_are_asked(text, known):
    intent = read(text, known)
    assert intent.command == "plan" and intent.clarify is not None


def test_a_card_corrected_with_or_rather_is_no_alternative(known):
    read_as("plan llama-3.1-8b on 4 a100 80gb, or rather h200 instead", "plan", {"gpu": "h200", "devices": 4}, known)


# --- totals, partial hardware and GPUs taken away -----------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "plan qwen2.5-72b on 4 nodes of 8 h200, so 16 in total",
        "plan qwen2.5-72b on 2 nodes of 8 h200. sorry, 12 gpus",
        "plan qwen2.5-72b on 2 nodes of 8 h200, 3 of them are down",
        "plan qwen2.5-72b on 2 nodes of 8 h200, of which 4 are faulty",
        "planifica qwen2.5-72b con 24 h200 en 2 nodos de 8",
    ],
)
def test_a_total_or_partial_hardware_that_does_not_match_is_asked(text, known):
    intent = read(text, known)
    assert intent.command == "plan" and intent.clarify is not None


def test_a_total_that_matches_is_no_question(known):
    read_as("plan qwen2.5-72b on 4 nodes of 8 h200, 32 in total", "plan", {"nodes": 4, "devices": 8}, known)


def test_pro_before_an_english_machine_is_no_per_node(known):
    intent = read("plan qwen2.5-72b on 4 nodes, 32 h200 on the pro machine plan", known)
    assert (intent.args.get("nodes"), intent.args.get("devices")) == (4, 8)


PLAN = earlier_turn(
    "plan_layouts", {"model": "llama-3.1-8b", "devices": 8, "gpu": "h100"}, "plan llama-3.1-8b on 8 h100"
)
NODES_PLAN = earlier_turn(
    "plan_layouts",
    {"model": "llama-3.1-70b", "devices": 8, "nodes": 2, "gpu": "h100"},
    "plan llama-3.1-70b on 2 nodes of 8 h100",
)


def test_gpus_taken_away_from_the_plan_before_are_never_the_count(known):
    intent = read("and minus 3 of them?", known, [*PLAN])
    assert intent.args.get("devices") != 3 or intent.clarify is not None


# --- "double" of what is named ------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["and with double the batch size?", "what about double the sequence length?"])
def test_double_of_something_else_is_asked(text, known):
    intent = read(text, known, PLAN)
    assert intent.command == "plan" and intent.clarify is not None


def test_double_alone_after_a_plan_over_nodes_is_asked(known):
    intent = read("and what about double?", known, NODES_PLAN)
    assert intent.clarify is not None


def test_double_the_gpus_of_a_single_node_plan_doubles_them(known):
    intent = read("and with double the gpus?", known, PLAN)
    assert (intent.command, intent.clarify, intent.args.get("devices")) == ("plan", None, 16)


# --- a card corrected, in part or as a question -------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "plan llama-3.1-8b on 4 a100 40gb and 4 a100 80gb",
        "plan llama-3.1-8b on 8 h100. sorry, 2 of them are the nvl variant",
        "plan llama-3.1-70b on 2 nodes of 8 h200. actually, 4 nodes of h100",
        "plan llama-3.1-8b on 8 h100. sorry, they're nvl, right?",
        "plan llama-3.1-8b on 8 h100. correction: perhaps pcie?",
        "plan llama-3.1-8b on 8 h100. actually, sxm or nvl?",
    ],
)
def test_a_card_corrected_in_part_or_as_a_question_is_asked(text, known):
    intent = read(text, known)
    assert intent.command == "plan" and intent.clarify is not None


def test_a_variant_corrected_with_the_same_count_is_that_variant(known):
    read_as("plan llama-3.1-8b on 4 h100. sorry, I meant 4 of the nvl kind", "plan", {"gpu": "h100-nvl", "devices": 4},
            known)  # fmt: skip


def test_a_card_corrected_after_sorry_replaces_the_card(known):
    read_as("plan llama-3.1-8b on 4 h100 sxm. sorry, the h200 ones", "plan", {"gpu": "h200", "devices": 4}, known)


def test_two_cards_compared_plan_the_side_started_with(known):
    read_as("llama-3.1-8b on 4 a100 80gb versus 4 h200; begin with the a100 side", "plan",
            {"gpu": "a100-80gb", "devices": 4}, known)  # fmt: skip


def test_the_second_side_started_with_is_never_the_first_planned(known):
    intent = read("llama-3.1-8b on 4 h200 versus 4 a100 80gb; begin with the a100 side", known)
    assert intent.args.get("gpu") == "a100-80gb" or intent.clarify is not None


def test_a_name_corrected_twice_is_asked(known):
    intent = read("stop baseline-ddp -- scratch that, tp-try... no wait, I mean r1", known)
    assert intent.clarify is not None


def test_a_name_corrected_once_acts_on_the_new_name(known):
    read_as("stop baseline-ddp -- scratch that, tp-try", "cancel", {"run": "runs/tp-try"}, known)  # near miss


# --- a request scratched for a question ---------------------------------------------------------------------------


def test_a_request_scratched_for_a_question_reads_the_questions_object(known):
    read_as("stop baseline-ddp. scrap that, did tp-try finish?", "status", {"run": "runs/tp-try"}, known)


def test_a_name_scratched_for_a_name_keeps_the_request(known):
    read_as("stop baseline-ddp; scratch that, tp-try", "cancel", {"run": "runs/tp-try"}, known)  # near miss


# --- a correction alone after an action ---------------------------------------------------------------------------

CANCEL = earlier_turn("cancel_run", {"run": "runs/baseline-ddp"}, "cancel baseline-ddp")


@pytest.mark.parametrize("text", ["oops, I meant tp-try", "my bad, r1", "wait, I mean layouts-nov"])
def test_a_correction_alone_after_an_action_is_asked_never_read(text, known):
    intent = read(text, known, CANCEL)
    assert intent.clarify is not None


def test_a_question_after_an_action_is_read(known):
    intent = read("how did tp-try do?", known, CANCEL)  # near miss
    assert (intent.command, intent.clarify, intent.args.get("run")) == ("results", None, "runs/tp-try")


def test_one_name_correcting_one_of_two_is_asked(known):
    intent = read("compare baseline-ddp and r1. sorry, tp-try", known)
    assert intent.clarify is not None and "runs/tp-try" in intent.clarify


def test_a_correction_with_nothing_before_it_reads_nothing(known):
    intent = read("wait, I mean tp-try", known)
    assert intent.clarify is not None


# --- a plan conditioned on the answer to the question asked -------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "is the a100 pool down? if so, plan llama-3.1-8b on 4 l40s",
        "are the l40s free? plan llama-3.1-8b on 4 of them if not",
    ],
)
def test_a_plan_conditioned_on_the_answer_to_a_question_is_asked(text, known):
    intent = read(text, known)
    assert intent.command == "plan" and intent.clarify is not None


def test_a_plan_after_a_statement_of_what_is_busy_acts(known):
    read_as("the a100s are busy, so plan llama-3.1-8b on 4 l40s", "plan", {"gpu": "l40s", "devices": 4}, known)
