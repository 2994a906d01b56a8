"""agent.understanding on the kinds of phrasing fresh_as found acted on wrongly or with a stated value dropped (new
sentences of each kind, not the set's, and near misses that must read as before): Scots numbers ("twa"), a command
line's "--no-warmup", a setting's value dictated as "one", a wait said as the run's completion or as "wait:", a
resume asked after the preemption is told, and a run's name dictated with one of its words split in two.

The fixture repository is the benchmark's (bench.agent_understanding.build_fixture), as in tests/test_understanding.py.
"""

from __future__ import annotations

import pytest

from agent.understanding.known import Known
from tests.understanding_support import earlier_turn, read, read_as

# --- stated values kept -----------------------------------------------------------------------------------------


def test_scots_two_is_a_count(known: Known) -> None:
    read_as("gie it a shot on twa GPUs for 40 steps", "run", {"nproc": 2, "steps": 40}, known)


def test_command_line_no_warmup_is_warmup_zero(known: Known) -> None:
    read_as(
        "train: nproc=4 steps=30 --no-warmup", "run", {"nproc": 4, "steps": 30, "set": ["train.warmup_steps=0"]}, known
    )


def test_micro_batch_dictated_as_one(known: Known) -> None:
    read_as(
        "launch on four GPUs thirty steps micro batch one",
        "run",
        {"nproc": 4, "steps": 30, "set": ["train.micro_batch=1"]},
        known,
    )


def test_the_seed_one_is_a_pronoun_never_seed_one(known: Known) -> None:
    intent = read("launch on 4 gpus with the seed one from before", known)
    assert "train.seed=1" not in intent.args.get("set", [])


# --- waits ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "Kindly report the outcome of runs/r1 after its completion.",
        "wait: runs/r1 then show its status",
        "tell me how runs/r1 ends, waiting for its completion if need be",
    ],
)
def test_wait_said_as_completion_or_terse_command(text: str, known: Known) -> None:
    read_as(text, "status", {"run": "runs/r1", "wait": "yes"}, known)


def test_no_waiting_for_completion_is_no_wait(known: Known) -> None:
    intent = read("Is runs/r1 done? no waiting for completion, just tell me now", known)
    assert intent.args.get("wait") != "yes"


# --- resume after a preemption told first -----------------------------------------------------------------------


def test_preempted_then_continue_it_resumes(known: Known) -> None:
    read_as("lr-scan got preempted overnight, could you continue it?", "resume", {"sweep": "sweeps/lr-scan"}, known)


def test_keep_going_from_where_it_stopped_resumes(known: Known) -> None:
    read_as("lr-scan got preempted, keep going from where it left off", "resume", {"sweep": "sweeps/lr-scan"}, known)


@pytest.mark.parametrize(
    "text",
    ["lr-scan was preempted; don't continue it yet", "lr-scan got preempted overnight. Should I continue it or not?"],
)
def test_resume_held_back_when_negated_or_asked(text: str, known: Known) -> None:
    intent = read(text, known)
    assert intent.command != "resume" or intent.clarify


# --- a name dictated with a word split in two -------------------------------------------------------------------


def test_name_with_one_word_split_in_two(known: Known) -> None:
    read_as("show the results of base line ddp", "results", {"run": "runs/baseline-ddp"}, known)


def test_split_word_near_miss_names_nothing(known: Known) -> None:
    intent = read("show the results of base lime ddp", known)
    assert intent.args.get("run") != "runs/baseline-ddp"


# --- a layout said as its manner, docs made to agree formally, impatience no wait ------------------------------------


def test_split_across_gpus_the_sharded_way_is_fsdp(known: Known) -> None:
    read_as("train on 4 GPUs in a sharded fashion for 20 steps", "run", {"nproc": 4, "layout": "dp_shard=4"}, known)


def test_not_the_sharded_way_is_no_fsdp(known: Known) -> None:
    intent = read("train on 4 GPUs, not the sharded way, 20 steps", known)
    assert intent.args.get("layout") != "dp_shard=4"


def test_docs_aligned_with_a_sweep_updates_docs(known: Known) -> None:
    read_as(
        "The README, that is docs/training.md too, should be aligned with the lr-scan sweep.",
        "docs",
        {"sweep": "sweeps/lr-scan"},
        known,
    )


def test_cannot_wait_is_no_wait(known: Known) -> None:
    intent = read("Move the launch up to tomorrow please, we can't wait until next week.", known)
    assert intent.args.get("wait") != "yes"


# --- a card added, named by its model --------------------------------------------------------------------------


def _after_one_card_plan(text: str, known: Known):
    earlier = earlier_turn(
        "plan_layouts", {"model": "llama-3.2-1b", "gpu": "rtx-4090", "devices": 1}, "can one rtx-4090 fit llama-3.2-1b?"
    )
    return read(text, known, earlier)


def test_a_second_card_named_by_its_model_is_two(known: Known) -> None:
    intent = _after_one_card_plan("and what if I added a second rtx-4090?", known)
    assert (intent.command, intent.args.get("devices"), intent.clarify) == ("plan", 2, None)


def test_a_third_card_after_one_is_asked(known: Known) -> None:
    intent = _after_one_card_plan("and what if I added a third 4090?", known)
    assert intent.args.get("devices") != 3 and intent.clarify


def test_a_card_name_number_before_rig_is_no_node_count(known: Known) -> None:
    intent = read("would my rtx-3090 box handle llama-3.2-1b on one card?", known)
    assert intent.args.get("nodes") in (None, 1)


def test_nodes_counted_before_their_noun_still_read(known: Known) -> None:
    intent = read("plan llama-3.1-70b on 2 nodes of 8 h100", known)
    assert (intent.args.get("nodes"), intent.args.get("devices")) == (2, 8)
