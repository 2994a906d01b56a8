"""agent.understanding on requests framed by headings, reasons, deadlines and politeness (new sentences of each kind,
not the sets'), each with a near miss that must keep its reading: a number that labels a heading or counts a list
("Goal 1:", "Two requirements:") is no argument; a study "of N trials" is a sweep; a deadline for the results ("I
need the results by friday") or a time that dates a past event ("crashed around 02:00") is no put-off; "whenever
you get a chance" opens an order; permission asked to start something ("may we launch ...?") asks for it; a
launch refused in one variant, then ordered ("don't relaunch with pipeline parallel. Train with fsdp ...") is the
order; holding until a run completes is a wait; a learning rate named, then its new value after a colon, is set;
a run's checkpoint named by its step ("its step-20 checkpoint") is that checkpoint.

The fixture repository is the benchmark's (bench.agent_understanding.build_fixture), as in tests/test_understanding.py.
"""

from __future__ import annotations

import pytest

from agent.understanding.known import Known
from tests.understanding_support import earlier_turn, read, read_as

# --- a number that labels a heading or counts a list -------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "command", "args"),
    [
        ("Goal 1: measure throughput. Train on 2 GPUs with FSDP for 40 steps.", "run",
         {"nproc": 2, "steps": 40, "layout": "dp_shard=2"}),
        ("Phase 3 covers the long-context work: plan layouts for configs/long.yaml on 8 H100s.", "plan",
         {"devices": 8, "experiment": "configs/long.yaml"}),
        ("Step 2: launch 30 steps on 4 GPUs with ddp.", "run", {"nproc": 4, "steps": 30, "layout": "dp_replicate=4"}),
        ("Two requirements: 2 GPUs with fsdp, and 40 steps.", "run", {"nproc": 2, "steps": 40, "layout": "dp_shard=2"}),
    ],
)  # fmt: skip
def test_heading_numbers_are_no_arguments(text: str, command: str, args: dict, known: Known) -> None:
    read_as(text, command, args, known)


@pytest.mark.parametrize(
    "text",
    [
        "launch 20 steps on 2 GPUs with fsdp, phase 3 of the plan",  # near miss: no heading, mid-sentence
        "Step 7 of the run: launch 20 steps on 2 GPUs with fsdp.",  # near miss: "step 7" without its colon
    ],
)
def test_numbers_outside_a_heading_are_still_asked_about(text: str, known: Known) -> None:
    assert read(text, known).clarify.startswith("What is ")


# --- a study of N trials ------------------------------------------------------------------------------------------


def test_a_study_of_trials_is_a_sweep(known: Known) -> None:
    text = "Task 2 needs a tuning study with 8 trials on configs/long.yaml. Please initiate it."
    read_as(text, "sweep", {"experiment": "configs/long.yaml", "trials": 8}, known)


def test_a_finished_exploration_asked_about_starts_nothing(known: Known) -> None:
    intent = read("did the exploration with 8 trials on configs/long.yaml finish?", known)
    assert intent.command != "sweep" or intent.clarify  # near miss: asked about, never a new sweep


# --- deadlines and past times are no put-off ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "command", "args"),
    [
        ("start a layout sweep with 4 trials on configs/long.yaml, I need the results by friday", "sweep",
         {"experiment": "configs/long.yaml", "trials": 4}),
        ("baseline-ddp crashed around 02:00 (node failure). requeue it", "resume", {"run": "runs/baseline-ddp"}),
    ],
)  # fmt: skip
def test_deadlines_and_past_times_do_not_put_off(text: str, command: str, args: dict, known: Known) -> None:
    read_as(text, command, args, known)


@pytest.mark.parametrize(
    "text",
    [
        "start a layout sweep with 4 trials on configs/long.yaml next friday",  # a dot in the name ends no clause
        "resume tp-try at 4am",
        "resume r1, I want it restarted at 9am",  # a participle wanted done then, not done already
        "cancel tp-try, it is scheduled at 3am",
        "I need r1 cancelled by monday",
    ],
)
def test_real_put_offs_still_hold_back(text: str, known: Known) -> None:
    intent = read(text, known)
    assert intent.command not in ("sweep", "resume", "cancel") or intent.clarify


# --- politeness about timing ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "command", "args"),
    [
        ("whenever you get a chance, benchmark r1 please", "bench", {"model": "runs/r1"}),
        ("When you have a moment: write a report of lr-scan.", "report", {"sweep": "sweeps/lr-scan"}),
        ("May we launch 30 steps on 2 GPUs with fsdp?", "run", {"nproc": 2, "steps": 30, "layout": "dp_shard=2"}),
    ],
)
def test_polite_openers_order(text: str, command: str, args: dict, known: Known) -> None:
    read_as(text, command, args, known)


@pytest.mark.parametrize(
    "text",
    [
        "when can you cancel tp-try?",
        "When you can, cancel tp-try tomorrow.",
        "may I cancel tp-try?",
        "can I train the long config on 2 gpus?",
        "should I cancel r1?",
    ],
)
def test_questions_and_put_offs_behind_polite_words_still_hold_back(text: str, known: Known) -> None:
    assert read(text, known).clarify


# --- a launch refused in one variant, then ordered -------------------------------------------------------------------


def test_variant_refused_then_ordered_launches_the_order(known: Known) -> None:
    text = "Plan C for the crash: don't relaunch with pipeline parallel. Train with fsdp on 2 ranks, 30 steps."
    read_as(text, "run", {"nproc": 2, "steps": 30, "layout": "dp_shard=2"}, known)


def test_refused_variant_is_never_the_layout(known: Known) -> None:
    intent = read("do not launch with tensor parallel. launch 20 steps on 2 gpus.", known)
    assert "tp" not in str(intent.args.get("layout", ""))


@pytest.mark.parametrize(
    "text", ["never launch with tensor parallel. Use it only for planning.", "do not relaunch r1 with tp."]
)
def test_refused_launch_with_no_order_after_launches_nothing(text: str, known: Known) -> None:
    intent = read(text, known)
    assert intent.command != "run" or intent.clarify


# --- holding until a run completes --------------------------------------------------------------------------------


def test_holding_until_completion_is_a_wait(known: Known) -> None:
    intent = read("stand by until tp-try reaches completion, then show me its loss", known)
    assert (intent.command, intent.clarify, intent.args.get("wait"), intent.args.get("run")) == (
        "status", None, "yes", "runs/tp-try",
    )  # fmt: skip


def test_holding_a_cancel_waits_on_nothing(known: Known) -> None:
    assert read("hold the cancel of r1 until tomorrow", known).args.get("wait") is None  # near miss


# --- a learning rate named, then its new value ----------------------------------------------------------------------

LAUNCH = earlier_turn("launch_run", {"nproc": 2, "layout": "dp_shard=2", "steps": 30, "experiment": "meshpilot.yaml"},
                      "Launch 30 steps on 2 GPUs with FSDP.")  # fmt: skip


def test_rate_named_then_given_after_a_colon(known: Known) -> None:
    intent = read("about the learning rate of that run: go with 3e-4 this time, all else unchanged.", known, LAUNCH)
    assert (intent.command, intent.clarify, intent.args["set"]) == ("run", None, ["train.lr=3e-4"])


def test_a_count_after_the_rate_is_no_rate(known: Known) -> None:
    intent = read("the lr is fine: use 4 gpus instead.", known, LAUNCH)
    assert not any(str(o).startswith("train.lr=") for o in intent.args.get("set", []))  # near miss


# --- a checkpoint named by its step ----------------------------------------------------------------------------------

READ_R1 = earlier_turn("read_results", {"run": "runs/r1"}, "Report the final loss of runs/r1.")


def test_its_step_checkpoint_is_that_checkpoint(known: Known) -> None:
    intent = read("score its step-20 checkpoint on the private suite", known, READ_R1)
    assert (intent.command, intent.clarify, intent.args["model"]) == ("bench", None, "runs/r1/checkpoint/step_20")


@pytest.mark.parametrize("text", ["benchmark its step 40 checkpoint", "benchmark the step-40 checkpoint of r1"])
def test_a_step_without_a_checkpoint_is_asked_about(text: str, known: Known) -> None:
    intent = read(text, known, READ_R1)
    assert intent.command == "bench" and "no checkpoint at step 40" in intent.clarify
