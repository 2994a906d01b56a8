"""Requests that only look like plain orders, which a careful colleague would ask about rather than act on: a tag
after words that are more than one order (a noun where the verb would be, a fact or a consequence checked, an
objection, a wait or a choice beside it, nothing named to act on), a resume promised as the user's own approval, a
switch's rule asked about, a past run told before "this time", something vague to try, someone else's plan to
repeat a launch, and a setting given two values. Each kind has its controls, which must keep acting."""

from __future__ import annotations

import pytest

from agent.understanding.intents import ACTIONS
from tests.understanding_support import earlier_turn, read, read_as

TP_LAUNCH = earlier_turn("launch_run", {"nproc": 2, "layout": "tp=2", "steps": 30}, "train 30 steps tp=2 on 2 gpus")


@pytest.mark.parametrize(
    "text",
    [
        # the opening word a noun, or a statement checked
        "Sweep's done by now, yeah?",
        "Launch with tp=2 is the safer bet, yes?",
        "Benchmark runs/r1, you did that already, yeah?",
        # a consequence, an objection or a relayed say beside the order
        "Train 30 steps on 4 GPUs with compile off, that'll take ages, eh?",
        "Write the report for lr-scan, Bob won't like it, eh?",
        "Train 30 steps on 4 GPUs, Ana reckons, ok?",
        # a wait, a put-off, a choice, a comparison, two runs asked for
        "Open a PR for layouts-nov after Bob signs off, ok?",
        "File under someday: docs for lr-scan, ok?",
        "Open a PR for lr-scan or for layouts-nov, yeah?",
        "Evaluate if tp-try did better than r1, ok?",
        "Benchmark runs/baseline-ddp two ways, with and without compile, ok?",
        # nothing named to act on
        "Update the documentation, ok?",
    ],
)
def test_a_tag_on_more_than_a_plain_order_is_asked(text: str, known) -> None:
    intent = read(text, known)
    assert intent.command not in ACTIONS or intent.clarify is not None


@pytest.mark.parametrize(
    ("text", "command", "args"),
    [
        ("Write the report for layouts-nov, aye?", "report", {"sweep": "sweeps/layouts-nov"}),
        ("Train 30 steps on 4 GPUs with dp_shard=4, okay?", "run", {"nproc": 4, "steps": 30, "layout": "dp_shard=4"}),
        ("Benchmark runs/r1/checkpoint/step_20, cool?", "bench", {"model": "runs/r1/checkpoint/step_20"}),
        ("I'll approve one launch: 2 GPUs, tp=2, 20 steps.", "run", {"nproc": 2, "steps": 20, "layout": "tp=2"}),
        ("This time let's try 25 steps on 4 GPUs.", "run", {"nproc": 4, "steps": 25}),
        (
            "Use grad clip 1 - 30 steps on 2 GPUs.",
            "run",
            {"nproc": 2, "steps": 30, "set": ["train.grad_clip=1"]},
        ),
        (
            "Train 25 steps on 2 GPUs, warmup 5, micro batch 4.",
            "run",
            {"nproc": 2, "steps": 25, "set": ["train.micro_batch=4", "train.warmup_steps=5"]},
        ),
    ],
)
def test_a_plain_order_still_acts(text: str, command: str, args: dict, known) -> None:
    read_as(text, command, args, known)


@pytest.mark.parametrize(
    ("text", "command"),
    [
        # a resume promised as the user's approval: no launch or write that approval gates
        ("I'll authorise a resume of runs/tp-try.", "resume"),
        # a switch's rule asked about or told as someone's, then overruled
        ("Packing shall not be used, Ana says. Train 20 steps on 2 GPUs with it anyway.", "run"),
        # the facts of a past run before "this time", something vague to try
        ("Yesterday we ran 30 steps on 4 GPUs; this time let's try 60.", "run"),
        ("Let's try something else this time.", "run"),
        # a setting given two values, a warm-up's range of steps
        ("Train 20 steps on 2 GPUs, lr 2e-4 to 5e-4.", "run"),
        ("Train 20 steps on 2 GPUs, micro batch 4 - 8.", "run"),
        ("Train 20 steps on 2 GPUs, warmup 2 - 8 steps.", "run"),
    ],
)
def test_an_unsure_request_is_asked(text: str, command: str, known) -> None:
    intent = read(text, known)
    assert intent.command == command
    assert intent.clarify is not None


def test_a_setting_asked_about_is_never_read_off(known) -> None:
    """A rule asked about ("compile must not be enabled, you said?") and overruled is no setting of the launch."""
    intent = read("Compile must not be enabled, Ana said? Train 30 steps on 2 GPUs with it anyway.", known)
    assert "train.compile=false" not in intent.args.get("set", [])
    assert intent.clarify is not None


def test_someone_elses_repeat_is_asked(known) -> None:
    intent = read("Bob is going to do the same but with compile off.", known, TP_LAUNCH)
    assert (intent.command, intent.clarify is not None) == ("run", True)


def test_the_users_own_repeat_acts(known) -> None:
    intent = read("Let's do the same but with compile off.", known, TP_LAUNCH)
    assert (intent.command, intent.clarify) == ("run", None)
    assert (intent.args["layout"], intent.args["set"]) == ("tp=2", ["train.compile=false"])


@pytest.mark.parametrize(
    ("text", "command"),
    [
        # scores told as in already: a question about them, no new benchmark
        ("Benchmark scores for tp-try are in by now, yeah?", "bench"),
        # a doubt of fact put after the order as its alternative
        ("Let's try 20 steps of tp=2 on 2 GPUs, or was that the one that crashed?", "run"),
        # a cancel asked with "let's" alone
        ("Let's go: kill tp-try?", "cancel"),
    ],
)
def test_a_question_beside_the_order_is_asked(text: str, command: str, known) -> None:
    intent = read(text, known)
    assert intent.command == command
    assert intent.clarify is not None


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("Let's cancel tp-try.", {"run": "runs/tp-try"}),
        ("Could you cancel baseline-ddp?", {"run": "runs/baseline-ddp"}),
    ],
)
def test_a_cancel_ordered_or_asked_for_acts(text: str, args: dict, known) -> None:
    read_as(text, "cancel", args, known)


RESULTS_READ = earlier_turn("read_results", {"run": "runs/tp-try"}, "how did tp-try do?")


def test_a_repeat_after_a_run_read_is_asked(known) -> None:
    """A repeat after only reading a run ("same thing again, packing off"): which launch is repeated is unsaid."""
    intent = read("Same thing again but packing off.", known, RESULTS_READ)
    assert (intent.command, intent.clarify is not None) == ("run", True)


def test_a_copy_of_the_run_read_acts(known) -> None:
    intent = read("Same as tp-try but with packing off.", known, RESULTS_READ)
    assert (intent.command, intent.clarify) == ("run", None)
    assert (intent.args["layout"], intent.args["set"]) == ("tp=2", ["data.packing=false"])
