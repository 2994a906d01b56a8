"""agent.understanding on vague requests it must ask about and follow-ups that must keep the conversation (new
sentences of each kind, and near misses that must read as before): a correction of the launch just asked for keeps
its arguments; a launch of what only a talk holds ("the test mentioned in the standup", "as per the email", "the new
model") is asked about; a GPU replaced ("swap the L40S for H200s") is not the one planned; a model version with no
preset is asked about; an experiment file the repository lacks is asked about; "start with the X side" is no launch.

The fixture repository is the benchmark's (bench.agent_understanding.build_fixture), as in tests/test_understanding.py.
"""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from tests.understanding_support import earlier_turn, read, read_as

# --- a correction of the launch just asked for keeps what it does not change --------------------------------------

LAUNCH = earlier_turn("launch_run", {"nproc": 4, "layout": "dp_shard=4", "steps": 30}, "train 30 steps fsdp on 4 gpus")


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("actually, turn compile off", {"nproc": 4, "layout": "dp_shard=4", "steps": 30}),
        ("oops, make it 80 steps", {"nproc": 4, "layout": "dp_shard=4", "steps": 80}),
        ("please also disable activation checkpointing", {"nproc": 4, "layout": "dp_shard=4", "steps": 30}),
        ("correction: 45 steps, everything else the same", {"nproc": 4, "layout": "dp_shard=4", "steps": 45}),
    ],
)
def test_a_correction_keeps_the_launch_before(text, args, known):
    intent = read(text, known, LAUNCH)
    assert (intent.command, intent.clarify) == ("run", None)
    assert {k: intent.args.get(k) for k in args} == args


@pytest.mark.parametrize("text", ["oops, make that 8 gpus", "actually 8 gpus"])
def test_a_count_corrected_after_a_launch_is_that_launch(text, known):
    intent = read(text, known, LAUNCH)  # a launch corrected, not a plan of 8 GPUs
    assert (intent.command, intent.args.get("nproc"), intent.args.get("steps")) == ("run", 8, 30)


def test_a_correction_that_asks_for_results_reads_them(known):
    intent = read("actually, show me the loss of baseline-ddp", known, LAUNCH)  # near miss: no launch fact
    assert (intent.command, intent.args.get("run")) == ("results", "runs/baseline-ddp")


def test_a_new_launch_without_a_correction_word_starts_afresh(known):
    intent = read("train 10 steps on 2 gpus", known, LAUNCH)  # a request of its own, not a change
    assert (intent.command, intent.args.get("nproc"), intent.args.get("layout")) == ("run", 2, None)


# --- a launch of what only a talk holds is asked about -----------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "launch the test mentioned in the standup",
        "train fsdp on 2 gpus as per the email",
        "could you run the trial we discussed on friday",
        "kick off the new model on the big box",
        "start the job agreed upon yesterday",
    ],
)
def test_a_launch_of_what_only_a_talk_holds_is_asked(text, known):
    intent = read(text, known)
    assert intent.command == "run" and intent.clarify is not None


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("train the new model llama-3.1-8b on 2 gpus", {"nproc": 2}),  # the model is named
        ("train 20 steps on 2 gpus as per notes.md", {"nproc": 2, "steps": 20}),  # a file of the repository
    ],
)
def test_a_launch_that_names_its_source_acts(text, args, known):
    read_as(text, "run", args, known)


# --- a GPU replaced is not the one planned -----------------------------------------------------------------------

PLAN = earlier_turn("plan_layouts", {"devices": 8, "model": "mistral-7b", "gpu": "l40s"}, "plan mistral-7b on 8 l40s")


@pytest.mark.parametrize(
    ("text", "gpu"),
    [
        ("swap the L40S for H200s", "h200"),
        ("replace l40s with a100 80gb", "a100-80gb"),
        ("same but h100 pcie in place of the l40s", "h100-pcie"),
        ("l40s -> h200", "h200"),
    ],
)
def test_a_replaced_gpu_is_not_planned(text, gpu, known):
    intent = read(text, known, PLAN)
    assert (intent.command, intent.clarify, intent.args.get("gpu"), intent.args.get("model")) == (
        "plan",
        None,
        gpu,
        "mistral-7b",
    )


def test_a_gpu_named_alone_after_a_plan_is_planned(known):
    intent = read("and on h200s?", known, PLAN)  # near miss: nothing replaced, the one GPU named
    assert (intent.command, intent.args.get("gpu")) == ("plan", "h200")


# --- a model version with no preset is asked about, never dropped -------------------------------------------------


@pytest.mark.parametrize("text", ["plan llama 5 on 8 h100s", "qwen 9 on 4 a100 80gb, which layout?"])
def test_a_model_version_without_a_preset_is_asked(text, known):
    intent = read(text, known)
    assert intent.command == "plan" and "no preset" in str(intent.clarify)


def test_a_count_after_a_family_is_no_version(known):
    intent = read("plan llama-3.1-8b on 4 gpus", known)
    assert (intent.command, intent.clarify, intent.args.get("model")) == ("plan", None, "llama-3.1-8b")


# --- an experiment file the repository lacks ----------------------------------------------------------------------


def test_a_missing_experiment_file_is_asked(known):
    intent = read("train configs/huge.yaml on 2 gpus, 10 steps", known)
    assert intent.command == "run" and "configs/huge.yaml" in str(intent.clarify)


def test_an_experiment_file_of_the_repository_is_launched(known):
    read_as("train configs/long.yaml on 2 gpus, 10 steps", "run", {"experiment": "configs/long.yaml"}, known)


# --- "start with the X side" orders a question, it launches nothing ------------------------------------------------


def test_start_with_a_side_is_no_launch(known):
    intent = read("Budget question: mistral-7b on 4 H200s versus 4 L40S. Start with the H200 side.", known)
    assert (intent.command, intent.args.get("gpu"), intent.args.get("model")) == ("plan", "h200", "mistral-7b")


def test_start_with_a_count_still_launches(known):
    read_as("start with 2 gpus, fsdp, 20 steps", "run", {"nproc": 2, "steps": 20}, known)


# --- a follow-up of a plan that says only what changes ------------------------------------------------------------

PCIE_PLAN = earlier_turn(
    "plan_layouts", {"devices": 4, "model": "qwen2.5-7b", "gpu": "h100-pcie"}, "qwen2.5-7b on 4 h100 pcie"
)
A100_PLAN = earlier_turn(
    "plan_layouts", {"devices": 4, "model": "mistral-7b", "gpu": "a100-40gb"}, "mistral-7b, 4 a100 40gb"
)


@pytest.mark.parametrize(("text", "gpu"), [("sxm then?", "h100-sxm"), ("what about nvl", "h100-nvl")])
def test_a_form_factor_alone_is_the_plan_before_in_that_form(text, gpu, known):
    intent = read(text, known, PCIE_PLAN)
    assert (intent.command, intent.clarify, intent.args.get("gpu"), intent.args.get("model")) == (
        "plan",
        None,
        gpu,
        "qwen2.5-7b",
    )


def test_a_form_factor_alone_with_no_plan_before_is_asked(known):
    intent = read("nvl?", known, LAUNCH)  # near miss: the turn before launched, no GPU to take the form of
    assert intent.clarify is not None


def test_a_memory_size_in_portuguese_after_a_plan(known):
    intent = read("e os de 80GB, muda muito?", known, A100_PLAN)
    assert (intent.command, intent.args.get("gpu"), intent.args.get("model")) == ("plan", "a100-80gb", "mistral-7b")


def test_a_sequence_length_lengthened_after_a_plan(known):
    intent = read("and if the context length were lengthened to 8192, any difference?", known, A100_PLAN)
    assert (intent.command, intent.clarify, intent.args.get("seq_len")) == ("plan", None, 8192)


# --- a condition the planner cannot check holds the action back ---------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["provided that the lr sweep looks sane, write the report", "in the event of an OOM on r1, update the docs"],
)
def test_a_condition_holds_the_action_back(text, known):
    assert read(text, known).clarify is not None


# --- the answer to the planner's question of a GPU's size keeps the request asked about ---------------------------


def _asked(text: str, question: str) -> list:
    """An earlier turn the planner answered with a question, no tool called."""
    return [HumanMessage(text), AIMessage(question)]


WHICH_A100 = _asked("plan qwen2.5-7b on 4 a100s", "Which A100: A100 40GB or A100 80GB?")


@pytest.mark.parametrize(("text", "gpu"), [("the 80 gig ones", "a100-80gb"), ("40GB variant please", "a100-40gb")])
def test_the_size_answered_keeps_the_request(text, gpu, known):
    intent = read(text, known, WHICH_A100)
    assert (
        intent.command,
        intent.clarify,
        intent.args.get("gpu"),
        intent.args.get("model"),
        intent.args.get("devices"),
    ) == (
        "plan",
        None,
        gpu,
        "qwen2.5-7b",
        4,
    )


def test_a_size_after_another_question_is_read_alone(known):
    earlier = _asked("plan qwen2.5-7b on 4 h100s", "Which model?")  # near miss: no A100 size was asked
    intent = read("the 80 gig ones", known, earlier)
    assert intent.args.get("model") is None


@pytest.mark.parametrize("text", ["uguale, ma senza packing", "lo stesso, ma 50 steps"])
def test_same_said_in_another_language_keeps_the_launch_before(text, known):
    intent = read(text, known, LAUNCH)  # "uguale" / "lo stesso" is "same": the launch before, changed
    assert (intent.command, intent.args.get("nproc"), intent.args.get("layout")) == ("run", 4, "dp_shard=4")
