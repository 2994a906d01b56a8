"""agent.understanding on stated values corrected, counts said in another language, which GPU is meant and follow-ups
(new sentences of each kind, and near misses that must read as before): a correction that names its replacement takes
it (a card's variant or memory alone, a name after "sorry", "correction:" or "hold on, I mean", the nodes alone, a
layout after "scratch that") and never keeps the value it corrects; "N nodos de M" ("por nodo", "ciascuno") holds M
in each node; the GPU lost, given up, booked or left, or the one another is used instead of, is never the one planned
(its count carried to the card said in its place by a correction); a total said as nodes times their GPUs restates
them; "de ellas" ("delas", "davon") counts the cards named before, "el doble" doubles them; a mixture of experts'
sizes alone name its preset, "the smaller one" the family's one smaller preset; a follow-up that names a sweep after
a run's results reads that sweep.

The fixture repository is the benchmark's (bench.agent_understanding.build_fixture), as in tests/test_understanding.py.
"""

from __future__ import annotations

import pytest

from tests.understanding_support import earlier_turn, read, read_as

# --- a card's variant corrected alone ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "gpu"),
    [
        ("plan llama-3.1-8b on 4 h100s, actually make that nvl", "h100-nvl"),
        ("gemma-2-9b on 2 nodes of 8 h100 pcie. My bad, correction: they are SXM cards.", "h100-sxm"),
        ("what fits qwen2.5-7b on 8 h100-nvl -- oops, I meant the pcie ones", "h100-pcie"),
        ("layouts for mistral-7b on 4 a100 40gb? sorry, the 80gb ones", "a100-80gb"),
    ],
)
def test_a_variant_corrected_alone_is_the_card_planned(text, gpu, known):
    intent = read(text, known)
    assert (intent.command, intent.clarify, intent.args.get("gpu")) == ("plan", None, gpu)


def test_a_variant_asked_about_after_a_correction_word_changes_nothing(known):
    # near miss: "actually" opens a question about the other variant; the card planned stays as said
    intent = read("plan llama-3.1-8b on 4 h100 pcie. Actually, is the sxm variant faster?", known)
    assert intent.args.get("gpu") == "h100-pcie"


def test_a_variant_corrected_after_two_cards_is_not_given_to_either(known):
    # near miss: which card the correction is of is unsaid; neither gets the variant
    intent = read("plan llama 3.1 8b on 8 a100 or 8 h100s -- I meant the pcie ones", known)
    assert intent.args.get("gpu") != "h100-pcie"


# --- a name taken back after a pause ----------------------------------------------------------------------------------


def test_a_name_taken_back_after_a_pause_is_the_one(known):
    read_as("could you stop tp-try? hold on, wait, I mean r1", "cancel", {"run": "runs/r1"}, known)


@pytest.mark.parametrize(
    ("text", "command", "run"),
    [
        ("kill baseline-ddp, sorry, tp-try", "cancel", "runs/tp-try"),
        ("how did tp-try do? correction: r1", "results", "runs/r1"),
        ("loss of baseline-ddp please... scratch that, r1", "results", "runs/r1"),
    ],
)
def test_a_name_corrected_by_a_correcting_word_is_the_one(text, command, run, known):
    intent = read(text, known)
    assert (intent.command, intent.clarify, intent.args.get("run")) == (command, None, run)


def test_a_name_said_after_sorry_as_another_subject_is_no_correction(known):
    # near miss: "sorry, r1 is ..." goes on about r1; which run to cancel is asked
    intent = read("cancel tp-try. sorry, r1 is the one that's stuck", known)
    assert intent.clarify is not None


def test_i_mean_before_a_question_takes_no_name_back(known):
    intent = read("cancel r1? I mean, is it still running?", known)  # near miss: no name after "I mean"
    assert intent.command != "cancel"


# --- the nodes corrected alone keep the GPUs in each ------------------------------------------------------------------


def test_the_nodes_corrected_alone_keep_the_gpus_in_each(known):
    read_as("plan qwen2.5-72b on 2 nodes of 4 h200. correction: 3 nodes", "plan",
            {"nodes": 3, "devices": 4, "gpu": "h200"}, known)  # fmt: skip


def test_a_total_over_the_nodes_corrected_is_split_over_them(known):
    # near miss: the total said before the correction is spread over the nodes the correction says
    intent = read("plan qwen2.5-72b on 16 h200 across 2 nodes... no wait, 4 nodes", known)
    assert (intent.args.get("nodes"), intent.args.get("devices")) == (4, 4)


# --- a value assigned is no low end of a range ------------------------------------------------------------------------


def test_a_setting_value_before_a_dash_is_no_range(known):
    read_as("train on 2 gpus with tp=2, scratch that, dp_shard=2 - 30 steps", "run",
            {"nproc": 2, "layout": "dp_shard=2", "steps": 30}, known)  # fmt: skip


def test_a_range_of_steps_is_still_asked(known):
    intent = read("train on 2 gpus, 20 - 40 steps", known)  # near miss
    assert intent.clarify is not None


# --- a total that restates nodes times their GPUs ---------------------------------------------------------------------


def test_a_total_equal_to_nodes_times_their_gpus_restates_them(known):
    read_as("plan qwen2.5-72b on 4 nodes of 4 h200, that's 16 altogether", "plan",
            {"nodes": 4, "devices": 4, "gpu": "h200", "model": "qwen2.5-72b"}, known)  # fmt: skip


def test_a_total_that_is_not_their_product_is_asked(known):
    intent = read("plan qwen2.5-72b on 4 nodes of 4 h200, that's 32 altogether", known)  # near miss
    assert intent.clarify is not None


# --- nodes of so many GPUs, said in another language ------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "planifica llama 3.1 70b en 2 nodos de 8 h100",
        "pianifica llama-3.1-70b su 2 nodi da 8 h100",
        "llama-3.1-70b : deux nœuds de 8 H100, ça passe ?",
        "llama-3.1-70b, 8 h100 por nodo, 2 nodos",
        "llama-3.1-70b su 2 nodi con 8 h100 ciascuno",
    ],
)
def test_nodes_of_so_many_gpus_hold_them_each(text, known):
    intent = read(text, known)
    assert (intent.command, intent.args.get("nodes"), intent.args.get("devices")) == ("plan", 2, 8)


def test_nodes_of_a_memory_hold_no_count(known):
    intent = read("plan llama-3.1-70b on 16 a100 en 2 nodos de 80GB", known)  # near miss: 80GB is each card's
    assert intent.args.get("devices") != 80


# --- the GPU lost is never the one planned ----------------------------------------------------------------------------


def test_the_gpu_lost_gives_way_to_the_one_named_after(known):
    read_as("if we lost access to our A100s, what layouts fit llama-3.1-8b on 4 l40s?", "plan",
            {"gpu": "l40s", "devices": 4, "model": "llama-3.1-8b"}, known)  # fmt: skip


@pytest.mark.parametrize(
    ("text", "gpu", "devices"),
    [
        ("the a100 partition is fully booked this month, so what fits llama-3.1-8b on 4 h200?", "h200", 4),
        ("h200 are out, l40s are in: plan qwen2.5-7b on 8", "l40s", 8),
        ("skip the a10s; gemma-2-9b on 4 h100 nvl, what fits?", "h100-nvl", 4),
        ("we're switching from l40s to 2 h200 -- which layouts fit mistral-7b?", "h200", 2),
        ("plan mistral-7b on 4 l40s... those are retired now, use h100 pcie ones instead", "h100-pcie", 4),
    ],
)
def test_the_gpu_taken_or_left_is_not_planned(text, gpu, devices, known):
    intent = read(text, known)
    assert (intent.command, intent.clarify, intent.args.get("gpu"), intent.args.get("devices")) == (
        "plan",
        None,
        gpu,
        devices,
    )


def test_a_gpu_wanted_instead_of_another_is_planned(known):
    # near miss: "instead of" names the one replaced, the card counted before it stays
    read_as("plan mistral-7b on 8 h200 instead of a100s", "plan", {"gpu": "h200", "devices": 8}, known)


def test_the_gpu_lost_alone_is_asked_about(known):
    intent = read("we lose the h200 nodes tonight; plan mistral-7b on 8 gpus", known)  # near miss: no other named
    assert intent.clarify is not None


def test_a_gpu_not_to_forget_is_planned(known):
    # near miss: the loss negated keeps the GPU, it is never asked about as gone
    read_as("don't forget the a100 80gb cards have nvlink: plan mistral-7b on 4 of them", "plan",
            {"gpu": "a100-80gb", "devices": 4}, known)  # fmt: skip


def test_the_gpu_booked_alone_is_asked_about(known):
    intent = read("our a10s are booked; plan gemma-2-9b on 4 gpus", known)  # near miss: no other named
    assert intent.clarify is not None


# --- follow-ups of a plan ---------------------------------------------------------------------------------------------

L40S_PLAN = earlier_turn("plan_layouts", {"model": "gemma-2-9b", "devices": 2, "gpu": "l40s"},
                         "plan gemma-2-9b on 2 l40s")  # fmt: skip


def test_de_ellas_counts_the_cards_of_the_plan_before(known):
    intent = read("bueno, ¿y con 4 de ellas?", known, L40S_PLAN)
    assert (intent.command, intent.clarify) == ("plan", None)
    assert (intent.args.get("devices"), intent.args.get("gpu"), intent.args.get("model")) == (4, "l40s", "gemma-2-9b")


@pytest.mark.parametrize("text", ["e com 2 delas?", "und mit 2 davon?"])
def test_of_them_in_another_language_counts_the_cards_before(text, known):
    intent = read(text, known, L40S_PLAN)
    assert (intent.command, intent.clarify, intent.args.get("devices"), intent.args.get("gpu")) == (
        "plan",
        None,
        2,
        "l40s",
    )


@pytest.mark.parametrize("text", ["and what with double?", "¿y con el doble?"])
def test_double_alone_after_a_plan_doubles_its_gpus(text, known):
    intent = read(text, known, L40S_PLAN)
    assert (intent.command, intent.clarify, intent.args.get("devices")) == ("plan", None, 4)


def test_double_alone_after_a_launch_is_asked(known):
    launch = earlier_turn("launch_run", {"nproc": 2, "steps": 30}, "train 30 steps on 2 gpus")
    intent = read("and with double?", known, launch)  # near miss: double of what, the steps or the processes?
    assert intent.clarify is not None


QWEN_PLAN = earlier_turn("plan_layouts", {"model": "qwen3-30b-a3b", "devices": 8, "gpu": "h200"},
                         "plan qwen3 30b a3b on 8 h200")  # fmt: skip


def test_the_sizes_of_a_mixture_of_experts_name_its_preset(known):
    intent = read("and the bigger 235b-a22b?", known, QWEN_PLAN)
    assert (intent.command, intent.clarify, intent.args.get("model")) == ("plan", None, "qwen3-235b-a22b")


MIXTRAL_PLAN = earlier_turn("plan_layouts", {"model": "mixtral-8x22b", "devices": 8, "gpu": "h200"},
                            "plan mixtral 8x22b on 8 h200")  # fmt: skip
LLAMA_PLAN = earlier_turn("plan_layouts", {"model": "llama-3.1-70b", "devices": 8, "gpu": "h200"},
                          "plan llama 3.1 70b on 8 h200")  # fmt: skip


def test_the_smaller_one_is_the_family_s_one_smaller_preset(known):
    intent = read("ok, how about the smaller model", known, MIXTRAL_PLAN)
    assert (intent.command, intent.clarify, intent.args.get("model")) == ("plan", None, "mixtral-8x7b")


def test_the_smaller_one_of_several_is_asked(known):
    intent = read("and the smaller one?", known, earlier_turn("plan_layouts", {"model": "llama-3.1-405b", "devices": 8,
                  "gpu": "h200"}, "plan llama 3.1 405b on 8 h200"))  # fmt: skip  # near miss: 8b or 70b?
    assert intent.clarify is not None


def test_the_largest_one_is_the_family_s_largest(known):
    intent = read("fine, now the largest one", known, LLAMA_PLAN)
    assert (intent.command, intent.clarify, intent.args.get("model")) == ("plan", None, "llama-3.1-405b")


def test_a_size_alone_names_no_mixture_of_experts(known):
    intent = read("plan the 22b on 8 h200", known)  # near miss: "22b" is no preset's sizes
    assert intent.args.get("model") != "mixtral-8x22b"


def test_a_sequence_length_said_long_without_tokens(known):
    read_as("plan gemma-2-9b on 4 l40s with samples 4096 long", "plan",
            {"seq_len": 4096, "devices": 4, "model": "gemma-2-9b"}, known)  # fmt: skip


# --- a follow-up that names a sweep after a run's results -------------------------------------------------------------

RESULTS = earlier_turn("read_results", {"run": "runs/r1"}, "how did r1 do?")


def test_the_same_question_of_a_sweep_reads_that_sweep(known):
    intent = read("ok, and the same for sweeps/layouts-nov", known, RESULTS)
    assert (intent.command, intent.args.get("sweep")) == ("trials", "sweeps/layouts-nov")


def test_the_same_question_of_a_run_reads_that_run(known):
    intent = read("ok, and the same for tp-try", known, RESULTS)  # near miss: another run, its results
    assert (intent.command, intent.args.get("run")) == ("results", "runs/tp-try")


def test_another_action_asked_of_the_sweep_is_no_read_of_it(known):
    # near miss: the follow-up names a sweep but asks about cancelling it; it is never read as its trials
    intent = read("and what about sweeps/lr-scan, should I cancel it?", known, RESULTS)
    assert intent.command != "trials"
    assert intent.clarify is not None
