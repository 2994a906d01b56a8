"""agent.understanding on the limits of rules a reviewer's probe (probe8) found acting wrongly, and on corrections
said later in the sentence (new sentences of each kind, not the probe's, and near misses that must read as before):
a sweep with its trials told of, not ordered; a thing named only by its place ("a third one"); the alternative a
heading names, picked by it; a value corrected later ("on second thought, make it 4", "in 8 — no, in 4"); French "pas
de X"; a data amount in gigas; a GPU said broken, or still wanted though gone; an order taken back and given again on
another run; a count avoided then replaced "instead"; "X, not without"; a value refused after the one said.

The fixture repository is the benchmark's (bench.agent_understanding.build_fixture), as in tests/test_understanding.py.
"""

from __future__ import annotations

import pytest

from agent.understanding.known import Known
from tests.understanding_support import earlier_turn, read, read_as


def asks(text: str, known: Known, earlier: list | None = None) -> None:
    """`text` is asked about, never acted on."""
    assert read(text, known, earlier).clarify is not None


# --- a sweep with its trials told of (run before, someone else's wish), not ordered -------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "Last week we did a tuning study of 6 trials.",
        "In spring the team ran a hyperparameter scan of 20 trials; it found nothing.",
        "Carol wants a hyperparameter exploration of 8 trials on configs/long.yaml.",
        "Dev suggested a search with 16 trials, but we have no budget.",
    ],
)
def test_a_sweep_told_of_is_asked_about(text, known):
    asks(text, known)


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("Run a hyperparameter exploration of 12 trials.", {"trials": 12}),
        ("I want a tuning study of 6 trials on configs/long.yaml.", {"trials": 6, "experiment": "configs/long.yaml"}),
        ("Carol wants a sweep of 8 trials on configs/long.yaml, please run it for her.", {"trials": 8}),
    ],
)
def test_a_sweep_ordered_with_its_trials_still_runs(text, args, known):
    read_as(text, "sweep", args, known)


# --- a thing named only by its place: "a third one" ----------------------------------------------------------------


def test_a_third_one_to_cancel_after_two_is_asked_about(known):
    earlier = earlier_turn("cancel_run", {"run": "runs/r1"}, "stop r1")
    earlier += earlier_turn("cancel_run", {"run": "runs/tp-try"}, "stop tp-try")
    asks("Stop a third one as well.", known, earlier)


@pytest.mark.parametrize("text", ["Train a fourth one like the others.", "Benchmark a second one too."])
def test_a_thing_named_by_its_place_alone_is_asked_about(text, known):
    asks(text, known)


def test_a_third_card_after_a_plan_of_two_still_plans_three(known):
    earlier = earlier_turn("plan_layouts", {"model": "llama-3.1-8b", "devices": 2, "gpu": "h100"},
                           "plan llama-3.1-8b on 2 h100")  # fmt: skip
    intent = read("and if i pick up a third one?", known, earlier)
    assert (intent.command, intent.args.get("devices"), intent.clarify) == ("plan", 3, None)


@pytest.mark.parametrize(
    ("text", "args"),
    [("One third of the GPUs, so 4 of them, for 10 steps.", {"nproc": 4, "steps": 10}),
     ("Launch a second run on 4 GPUs for 20 steps.", {"nproc": 4, "steps": 20})],
)  # fmt: skip
def test_a_fraction_or_a_second_run_said_in_full_is_no_place(text, args, known):
    read_as(text, "run", args, known)


# --- the alternative a heading names, picked by its heading ----------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("Option A: 40 steps. Option B: 80 steps. Run option B on 2 GPUs.", {"nproc": 2, "steps": 80}),
        ("Variant 1: micro batch 4; variant 2: micro batch 8; train variant 1 on 4 GPUs.",
         {"nproc": 4, "set": ["train.micro_batch=4"]}),
    ],
)  # fmt: skip
def test_the_heading_picked_gives_its_settings(text, args, known):
    read_as(text, "run", args, known)


# --- a value corrected later in the sentence -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("Train on 8 GPUs; second thoughts, make it 2.", {"nproc": 2}),
        ("Run 100 steps. On second thought, make it 60 steps.", {"steps": 60}),
        ("Launch on 4 GPUs with the seed in 3 — no, in 7.", {"nproc": 4, "set": ["train.seed=7"]}),
        ("Ignore what I said about 100 steps; train 40 steps on 2 GPUs.", {"nproc": 2, "steps": 40}),
    ],
)
def test_the_value_corrected_later_counts(text, args, known):
    read_as(text, "run", args, known)


def test_a_second_thought_on_another_noun_is_not_taken_as_the_count(known):
    intent = read("Launch 8 GPUs. On second thought, make it 4 nodes.", known)
    assert intent.args.get("nproc") != 4 or intent.clarify is not None


# --- French "pas de X"; a data amount in gigas; "not without"; a value refused after the one said --------------------


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("Train on 4 GPUs, pas de packing.", {"nproc": 4, "set": ["data.packing=false"]}),
        ("Train on 4 GPUs with compile, not without it.", {"nproc": 4, "set": ["train.compile=true"]}),
        ("Launch on 2 GPUs with seed 7, not 3.", {"nproc": 2, "set": ["train.seed=7"]}),
    ],
)
def test_settings_said_once_and_kept(text, args, known):
    read_as(text, "run", args, known)


@pytest.mark.parametrize("text", ["Train on 2 GPUs, 5 gigs of text.", "Train for 3 gigas of tokens on 4 GPUs."])
def test_a_data_amount_in_gigas_is_asked_about_never_dropped(text, known):
    intent = read(text, known)
    assert intent.clarify is not None and "device_mem" not in intent.args


def test_a_negation_with_no_setting_still_asks(known):
    asks("Launch on 2 GPUs, not without.", known)


def test_gigs_of_memory_stay_memory(known):
    intent = read("Plan llama-3.1-8b on 4 GPUs of 24 gigas each.", known)
    assert intent.args.get("device_mem") == "24GiB"


# --- a GPU said broken, or still wanted though gone ----------------------------------------------------------------


def test_a_broken_gpu_then_a_launch_is_asked_about(known):
    asks("The H100s are faulty; launch on 8 GPUs.", known)


def test_a_gpu_gone_but_still_wanted_is_planned_on(known):
    read_as("The L40S cards are dead; plan llama-3.1-8b on 4 of them anyway.", "plan",
            {"gpu": "l40s", "devices": 4, "model": "llama-3.1-8b"}, known)  # fmt: skip


def test_a_gpu_gone_with_no_other_named_is_still_asked_about(known):
    asks("The H100 pool is unavailable; plan llama-3.1-8b on 8 GPUs.", known)


# --- an order taken back and given again; a count avoided then replaced "instead" ------------------------------------


@pytest.mark.parametrize(
    ("text", "command", "args"),
    [
        ("Cancel r1 — no wait, cancel baseline-ddp.", "cancel", {"run": "runs/baseline-ddp"}),
        ("Launch on 8 GPUs. Scratch that, launch on 2 GPUs.", "run", {"nproc": 2}),
        ("Don't train on 4 cards, train on 2 cards instead.", "run", {"nproc": 2}),
    ],
)
def test_the_order_given_again_counts(text, command, args, known):
    read_as(text, command, args, known)


def test_an_order_taken_back_for_another_on_a_pronoun_is_asked_never_the_first(known):
    intent = read("Stop tp-try. Scratch that, evaluate it.", known)
    assert intent.command != "cancel" and intent.clarify is not None


def test_an_order_taken_back_alone_is_held(known):
    asks("Cancel tp-try. Scratch that.", known)


def test_a_gpu_said_first_without_its_count_takes_the_count_said_later(known):
    read_as("L40S cards arrive next week; plan llama-3.1-8b on 4 L40S then.", "plan",
            {"gpu": "l40s", "devices": 4, "model": "llama-3.1-8b"}, known)  # fmt: skip


def test_another_gpus_count_is_never_taken_for_the_first(known):
    intent = read("plan llama-3.1-8b on h100, or maybe 8 a100 80gb", known)
    assert not (intent.args.get("gpu") == "h100-sxm" and intent.args.get("devices") == 8 and intent.clarify is None)
