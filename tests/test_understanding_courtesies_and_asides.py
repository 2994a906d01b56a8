"""Requests a person would act on that the parser held back: the assistant asked through a third person ("could
someone have it ..."), a courtesy or an aside beside the order ("if it's not too much to ask", "because apparently
that's what we do now", "I want to know if ..."), a duty ("I'm supposed to ..."), a teacher's "now we'll ...", and a
launch said by a metaphor of size ("same dish, bigger pan: ... on 8 GPUs"). Each kind has its near misses, which must
stay held back: reported speech about whether to act, a real doubt, a time to come, a size said of a thing."""

from __future__ import annotations

import pytest

from tests.understanding_support import read, read_as


@pytest.mark.parametrize(
    ("text", "command", "args"),
    [
        # the assistant asked through someone else
        ("Would anyone have the bot cancel tp-try? It's hogging the GPUs.", "cancel", {"run": "runs/tp-try"}),
        ("Could somebody get the assistant to benchmark r1 on the eval suite?", "bench", {"model": "runs/r1"}),
        # a courtesy, an aside, a purpose
        ("Cancel tp-try, if it isn't too much to ask.", "cancel", {"run": "runs/tp-try"}),
        (
            "4 GPUs, FSDP, 40 steps, because that's what the paper used.",
            "run",
            {"nproc": 4, "steps": 40, "layout": "dp_shard=4"},
        ),
        ("Evaluate tp-try on the benchmark, I'm curious if it holds up.", "bench", {"model": "runs/tp-try"}),
        ("Could you cancel tp-try? Curious whether it frees the GPUs.", "cancel", {"run": "runs/tp-try"}),
        # a duty the user has now
        ("We're supposed to cancel tp-try now, the team needs the GPUs.", "cancel", {"run": "runs/tp-try"}),
        (
            "I'm supposed to launch 20 steps on 2 GPUs with dp_shard=2, but with lr 1e-4 this time.",
            "run",
            {"nproc": 2, "steps": 20, "layout": "dp_shard=2", "set": ["train.lr=1e-4"]},
        ),
        # a teacher's "now we'll"
        ("Now we'll cancel tp-try and free the GPUs.", "cancel", {"run": "runs/tp-try"}),
        (
            "We will now launch 20 steps on 2 GPUs with dp_shard=2.",
            "run",
            {"nproc": 2, "steps": 20, "layout": "dp_shard=2"},
        ),
        # a size said as a metaphor, its amount said as the GPUs
        (
            "Same recipe, larger oven: 8 GPUs, dp_shard 8, 30 steps.",
            "run",
            {"nproc": 8, "steps": 30, "layout": "dp_shard=8"},
        ),
    ],
)
def test_request_held_back_by_an_aside_is_acted_on(text: str, command: str, args: dict, known) -> None:
    read_as(text, command, args, known)


@pytest.mark.parametrize(
    ("text", "command"),
    [
        # reported speech about whether to act, or someone (maybe a colleague) asked
        ("Priya asked whether we should cancel r1", "cancel"),
        ("Priya asked whether someone could have it cancel r1", "cancel"),
        ("Could someone cancel r1?", "cancel"),
        ("Can someone get the bot to cancel r1 tomorrow?", "cancel"),
        # a real doubt or condition beside the courtesy
        ("if it's not too much trouble, could you maybe cancel r1? not sure", "cancel"),
        ("Cancel tp-try if it's too much trouble for the cluster.", "cancel"),
        # the facts told as what was done, not ordered
        ("'4 GPUs, FSDP, 40 steps' is what the paper used.", "run"),
        ("4 GPUs, FSDP, 40 steps is what I'd have done.", "run"),
        # no duty now: past, negated, supposed
        ("I was supposed to cancel tp-try yesterday.", "cancel"),
        ("We're supposed to cancel r1 but Priya said to wait.", "cancel"),
        ("You're not supposed to cancel r1.", "cancel"),
        ("Suppose we cancel r1: would we lose the checkpoint?", "cancel"),
        # a question about the action itself
        ("Benchmark r1, I want to know whether it's worth keeping.", "bench"),
        ("Cancel r1, I want to know if that's safe.", "cancel"),
        ("I'm curious if cancelling r1 would free the GPUs.", "cancel"),
        ("Benchmark r1? Priya wants to know if it's good.", "bench"),
        # the user's own action, or one to come
        ("We'll cancel tp-try.", "cancel"),
        ("Now I'll cancel tp-try.", "cancel"),
        ("Now we'll launch it tomorrow morning.", "run"),
        ("we'll launch it tomorrow", "run"),
        # a size said of a thing a GPU count does not answer
        ("Train a bigger model on 8 GPUs, 20 steps.", "run"),
        ("A bigger model, 8 GPUs, 20 steps.", "run"),
        ("Go bigger: 8 GPUs with dp_shard=8, 20 steps.", "run"),
        ("launch fsdp on 4 gpus but larger", "run"),
    ],
)
def test_near_miss_stays_held_back(text: str, command: str, known) -> None:
    intent = read(text, known)
    assert intent.command == command
    assert intent.clarify is not None
