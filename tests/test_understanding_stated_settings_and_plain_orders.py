"""Requests a colleague would act on that the parser dropped a setting of, or held back: a setting said as a German
compound or with a French or German "to" ("Gradientencheckpointing", "micro batch à 2"), a switch ruled out by a
modal in the passive ("compile must not be enabled"); words read as a negation or a put-off that are none (a race's
"and we're off!", "Kick-off:", a purpose clause "so that ... not skewed", "no wahala" for no problem, the user's own
approval promised, "this time let's try"); and a courtesy or a tag beside a plain order ("sorry if this is basic",
", ok?", a condition that names only the launch's own settings). Each kind has its near misses, which must stay
asked: a real condition, a time to come, a tag that checks a fact, a cancel, a setting whose state is not said."""

from __future__ import annotations

import pytest

from tests.understanding_support import earlier_turn, read, read_as

LAUNCH = earlier_turn("launch_run", {"nproc": 4, "layout": "dp_shard=4", "steps": 40}, "train 40 steps fsdp on 4 gpus")


@pytest.mark.parametrize(
    ("text", "command", "args"),
    [
        # a setting said as a compound or with another language's "to"
        (
            "Start 20 steps on 2 GPUs with Gradientencheckpointing, micro batch 2.",
            "run",
            {"nproc": 2, "steps": 20, "set": ["train.activation_checkpointing=true", "train.micro_batch=2"]},
        ),
        (
            "Train 30 steps on 4 GPUs, dp_shard=4, Sequenzpacking off.",
            "run",
            {"nproc": 4, "steps": 30, "layout": "dp_shard=4", "set": ["data.packing=false"]},
        ),
        (
            "Lance 30 steps sur 2 GPUs, micro batch à 2 et sans packing.",
            "run",
            {"nproc": 2, "steps": 30, "set": ["train.micro_batch=2", "data.packing=false"]},
        ),
        ("Train 10 steps on 2 GPUs with the learning rate auf 5e-4.", "run", {"set": ["train.lr=5e-4"]}),
        # a switch ruled out by a modal in the passive
        (
            "Launch 2 GPUs for 20 steps; torch compile must not be enabled.",
            "run",
            {"nproc": 2, "steps": 20, "set": ["train.compile=false"]},
        ),
        # no negation: the race begun, a launch opened as "Kick-off:", a purpose clause
        (
            "Go time: 4 GPUs, dp_shard=4, 50 steps, lr 3e-4 - and we're off!",
            "run",
            {"nproc": 4, "steps": 50, "layout": "dp_shard=4", "set": ["train.lr=3e-4"]},
        ),
        ("Kick-off: 2 GPUs, tp=2, 30 steps.", "run", {"nproc": 2, "steps": 30, "layout": "tp=2"}),
        (
            "Train 20 steps on 2 GPUs with dp_shard=2, so that the loss curves are not skewed.",
            "run",
            {"nproc": 2, "steps": 20, "layout": "dp_shard=2"},
        ),
        # no put-off: the user's own approval promised, "this time let's try"
        (
            "We will approve one run, budget-wise: 4 GPUs, dp_shard=4, 25 steps.",
            "run",
            {"nproc": 4, "steps": 25, "layout": "dp_shard=4"},
        ),
        (
            "This time let's try 15 steps on 2 GPUs with grad clip 0.5 - 2 GPUs is plenty.",
            "run",
            {"nproc": 2, "steps": 15, "set": ["train.grad_clip=0.5"]},
        ),
        (
            "Use the adamw optimizer with grad clip 0 - 12 steps on 2 GPUs.",
            "run",
            {"nproc": 2, "steps": 12, "set": ["train.grad_clip=0", "train.optimizer=adamw"]},
        ),
        # a courtesy or a tag beside a plain order
        (
            "Apologies if this is basic: please benchmark runs/r1/checkpoint/step_20.",
            "bench",
            {"model": "runs/r1/checkpoint/step_20"},
        ),
        ("Benchmark runs/baseline-ddp, ok?", "bench", {"model": "runs/baseline-ddp"}),
        ("Open a pull request with the layouts-nov report, yeah?", "pr", {"sweep": "sweeps/layouts-nov"}),
        # a condition that names only the launch's own settings, which the launch meets
        (
            "Launch 2 GPUs, tp=2, 30 steps, on condition that compile is off and the lr is 2e-4.",
            "run",
            {"nproc": 2, "steps": 30, "layout": "tp=2", "set": ["train.compile=false", "train.lr=2e-4"]},
        ),
    ],
)
def test_a_stated_request_is_acted_on(text: str, command: str, args: dict, known) -> None:
    read_as(text, command, args, known)


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("No probs, same again but with micro batch 2.", {"steps": 40, "set": ["train.micro_batch=2"]}),
        ("No wahala, same thing but without compile.", {"steps": 40, "set": ["train.compile=false"]}),
    ],
)
def test_no_problem_before_a_follow_up_is_no_negation(text: str, args: dict, known) -> None:
    intent = read(text, known, LAUNCH)
    assert (intent.command, intent.clarify) == ("run", None)
    assert {key: sorted(value) if key == "set" else value for key, value in intent.args.items() if key in args} == {
        key: sorted(value) if key == "set" else value for key, value in args.items()
    }


@pytest.mark.parametrize(
    ("text", "command"),
    [
        # a real condition, or one on the world beside the settings
        ("Train 20 steps on 2 GPUs only if packing is off.", "run"),
        ("Train 20 steps on 2 GPUs provided that packing is off and the node is free.", "run"),
        ("Train 20 steps on 2 GPUs as long as packing fits on the node.", "run"),
        ("Cancel r1 provided that packing is off.", "cancel"),
        ("Sorry, if r1 finished, benchmark it.", "bench"),
        # a time to come, the user's own launch to come
        ("I'll approve one run tomorrow: 2 GPUs, dp_shard=2, 60 steps.", "run"),
        ("I'll launch one run: 2 GPUs, dp_shard=2, 60 steps.", "run"),
        # a tag that checks a fact, a cancel, a question before the tag
        ("Launch 2 GPUs for 20 steps with dp_shard=2, right?", "run"),
        ("Open a PR for lr-scan, no?", "pr"),
        ("Cancel tp-try, ok?", "cancel"),
        ("Should we open a PR for lr-scan, ok?", "pr"),
        # a setting whose state is not said, and a range of counts
        ("Train 8 GPUs for 120 steps, packing and compile, they're off!", "run"),
        ("Launch 2 GPUs for 20 steps; packing should not be disabled.", "run"),
        ("Train with grad clip 1, 20-30 steps on 2 GPUs.", "run"),
    ],
)
def test_near_miss_is_still_asked(text: str, command: str, known) -> None:
    intent = read(text, known)
    assert intent.command == command
    assert intent.clarify is not None


TP_LAUNCH = earlier_turn("launch_run", {"nproc": 2, "layout": "tp=2", "steps": 30}, "train 30 steps tp=2 on 2 gpus")


def test_a_run_named_like_that_is_the_launch_before(known) -> None:
    """The run the user takes the launch before for, told failing "like that": that launch again, with the change."""
    intent = read("Hmm, tp-try blew up like that. Could you redo the same with compile off?", known, TP_LAUNCH)
    assert (intent.command, intent.clarify) == ("run", None)
    assert {k: intent.args.get(k) for k in ("nproc", "layout", "steps", "set")} == {
        "nproc": 2,
        "layout": "tp=2",
        "steps": 30,
        "set": ["train.compile=false"],
    }


@pytest.mark.parametrize(
    "text",
    [
        # the run named ran otherwise than the launch before: which one is asked
        "tp-try blew up like that. Could you redo the same with compile off?",
        # a failure told with a launch's facts in it: a launch told as done
        "I ran 4 GPUs for 20 steps and it crashed. Without packing.",
    ],
)
def test_a_failure_told_that_names_another_launch_is_asked(text: str, known) -> None:
    earlier = earlier_turn("launch_run", {"nproc": 4, "layout": "dp_shard=4", "steps": 30}, "train fsdp on 4 gpus")
    intent = read(text, known, earlier if text.startswith("tp-try") else None)
    assert intent.command == "run"
    assert intent.clarify is not None
