"""Values, counts and GPUs a launch or a plan dropped, misread or asked about: a rate written from its point (".0005"),
a change with a manner between it and its value ("lowered gently to 1e-4"), "grad_clip 0.5", "batches of 2",
"processors" as processes, a number with a noun of its own ("slept 4 hours"), chat's "4" for "for", one card said
with an owner or an adjective ("my 4090", "one little a10"), the nodes said after the GPUs ("8x h200 x 4 nodes") or as
groups of them ("3 racks of 8 a100s"), a card's memory as its kind, "8 to each", a family's version no preset has
("deepseek-r2"), a GPU or a count of nodes refused in a follow-up, and a sequence length as "N tokens each". Each kind
has a near miss that must still ask or keep its reading."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from tests.understanding_support import read, read_as


def _planned(args: dict, text: str) -> list:
    """An earlier turn: `text`, answered by a plan with `args`."""
    call = {"name": "plan_layouts", "args": args, "id": "earlier"}
    return [HumanMessage(text), AIMessage("", tool_calls=[call]), ToolMessage('{"ok": true}', tool_call_id="earlier")]


@pytest.mark.parametrize(
    ("text", "command", "args"),
    [
        # a rate from its point, a manner between the change and its value, a key written with "_"
        ("train 30 steps on 4 gpus with fsdp, lr .0002", "run", {"nproc": 4, "set": ["train.lr=0.0002"]}),
        (
            "fsdp on 4 gpus, 40 steps, with the lr dropped slowly down to 3e-4",
            "run",
            {"nproc": 4, "steps": 40, "set": ["train.lr=3e-4"]},
        ),
        ("train 10 steps on 2 gpus, fsdp, grad_clip 1.5", "run", {"nproc": 2, "set": ["train.grad_clip=1.5"]}),
        (
            "fsdp across 4 gpus, 50 steps, in small batches of 2",
            "run",
            {"nproc": 4, "steps": 50, "set": ["train.micro_batch=2"]},
        ),
        # processors are the processes
        ("Launch 4 processors, dp_shard=4, 15 steps.", "run", {"nproc": 4, "layout": "dp_shard=4", "steps": 15}),
        # a number with a noun of its own, "4" for "for"
        (
            "it took me 3 days to get here. train fsdp on 4 gpus for 25 steps",
            "run",
            {"nproc": 4, "steps": 25, "layout": "dp_shard=4"},
        ),
        (
            "which layouts are good 4 llama 3.1 8b on 8 h100s",
            "plan",
            {"devices": 8, "gpu": "h100-sxm", "model": "llama-3.1-8b"},
        ),
        # one card, said with an owner or a word of its size
        ("plan qwen2.5-7b on my a100 80gb", "plan", {"devices": 1, "gpu": "a100-80gb", "model": "qwen2.5-7b"}),
        ("plan mistral-7b on one lonely h100", "plan", {"devices": 1, "model": "mistral-7b"}),
        # nodes after the GPUs, nodes as groups of GPUs, a card's memory as its kind, "8 to each"
        (
            "llama-3.1-70b, 4x h100 x 2 servers, what layout?",
            "plan",
            {"devices": 4, "nodes": 2, "model": "llama-3.1-70b"},
        ),
        (
            "plan llama-3.1-405b on three racks of 8 a100 80gb",
            "plan",
            {"devices": 8, "nodes": 3, "gpu": "a100-80gb", "model": "llama-3.1-405b"},
        ),
        (
            "plan qwen2.5-72b on 32 A100s of the 80GB type spread over 4 nodes, 8 to each",
            "plan",
            {"devices": 8, "nodes": 4, "gpu": "a100-80gb", "model": "qwen2.5-72b"},
        ),
    ],
)
def test_value_or_count_is_read(text: str, command: str, args: dict, known) -> None:
    read_as(text, command, args, known)


@pytest.mark.parametrize(
    "text",
    [
        # a time the action would take is still asked about; "4" right after a verb may count
        "train fsdp on 4 gpus for 25 steps, for 3 hours",
        "plan 4 llama-3.1-8b on 8 h100s",
        # a big batch is no micro batch; groups a layout makes are no nodes
        "fsdp across 4 gpus, 50 steps, in batches of 64",
        "plan llama-3.1-8b on 8 h100s as 2 groups of 4 gpus",
        # a family's version no preset has is asked about, never replaced by the family's preset
        "plan deepseek-r9 on 8 h100s",
    ],
)
def test_value_with_no_place_is_asked(text: str, known) -> None:
    assert read(text, known).clarify is not None


def test_owned_cards_counted_plural_say_no_count(known) -> None:
    intent = read("plan qwen2.5-7b on my h100s", known)
    assert "devices" not in intent.args


def test_node_box_named_by_its_card_is_no_single_card(known) -> None:
    intent = read("plan llama-3.1-8b on my h100 box", known)
    assert intent.args.get("devices") != 1


def test_gpu_refused_in_a_follow_up_is_not_used(known) -> None:
    earlier = _planned({"model": "mistral-7b", "devices": 4, "gpu": "l40s"}, "plan mistral-7b on 4 l40s")
    intent = read("Negative on l40s. Try it on a100 80gb.", known, earlier)
    assert (intent.command, intent.args.get("gpu"), intent.args.get("devices")) == ("plan", "a100-80gb", 4)


def test_nodes_refused_in_a_follow_up_are_not_used(known) -> None:
    earlier = _planned({"model": "llama-3.1-70b", "devices": 8, "gpu": "h100"}, "plan llama-3.1-70b on 8 h100s")
    intent = read("Not on 1 node. Assess with 2 nodes.", known, earlier)
    assert (intent.command, intent.args.get("nodes"), intent.clarify) == ("plan", 2, None)


def test_sequence_length_said_as_tokens_each_in_a_follow_up(known) -> None:
    earlier = _planned({"model": "mistral-7b", "devices": 4, "gpu": "l40s"}, "plan mistral-7b on 4 l40s")
    intent = read("And what if the samples grew to 4096 tokens each?", known, earlier)
    assert (intent.command, intent.args.get("seq_len"), intent.clarify) == ("plan", 4096, None)


def test_parts_of_the_gpus_said_before_their_layout_are_its_degrees(known) -> None:
    read_as(
        "launch on 4 gpus, 2 of them fsdp and 2 in tensor parallel, 30 steps",
        "run",
        {"nproc": 4, "steps": 30, "layout": "dp_shard=2,tp=2"},
        known,
    )


def test_parts_that_do_not_make_the_total_are_asked(known) -> None:
    assert read("launch on 8 gpus, 2 of them fsdp and 2 in tensor parallel, 30 steps", known).clarify is not None


def test_nodes_said_as_groups_of_anything_each_in_a_follow_up(known) -> None:
    earlier = _planned({"model": "llama-3.1-70b", "devices": 8, "gpu": "h100"}, "plan llama-3.1-70b on 8 h100s")
    intent = read("And what if it had three islands of 8 palms each?", known, earlier)
    assert (intent.args.get("nodes"), intent.args.get("devices"), intent.clarify) == (3, 8, None)


def test_steps_of_runs_each_are_no_nodes(known) -> None:
    assert "nodes" not in read("train fsdp on 2 gpus, 2 runs of 8 steps each", known).args


@pytest.mark.parametrize(
    "text",
    ["4 gpus dp_shard=2 tp=2 lr 3e-4 40 steps", "steps=30 lr=5e-4", "train 30 steps at 5e-4 lr, tp=2 on 2 gpus"],
)
def test_another_keys_value_is_never_the_learning_rate(text, known):
    intent = read(text, known)  # "tp=2 lr 3e-4": the 2 is tp's, the lr is the number after it
    rates = [o for o in intent.args.get("set", []) if o.startswith("train.lr=")]
    assert rates in (["train.lr=3e-4"], ["train.lr=5e-4"])
