"""agent.understanding on three kinds of plain request (new sentences of each kind, and near misses that must not
change):

- whether a run ended, asked in any words ("did it actually die", "does a run ever finish? has r1?"): its status,
  not its results; a figure, a why or a wait beside it keeps the reading it had;
- this machine's hardware asked about loosely ("the gpu situation on this rig", "this machine: its accelerators, its
  cores, its memory"): the hardware tool, not a run's memory;
- a launch whose every value is stated, asked about needlessly before: a courtesy about the asker's manners ("if it
  isn't presumptuous"), the user's own look at the approval prompt ("I will review it at the approval prompt"), a
  value after an article and a word of manner ("the learning rate a gentle 2e-4"), a setting forbidden ("forbid the
  compiler") or a precision kept away ("keep fp8's blade sheathed", "bf16 alone"), a launch announced with uptalk
  ("ok trying something bigger: ..., lr 3e-4?"); and the GPU a plan counts after two were compared. Two precisions
  named, neither taken back nor said alone, are asked about: a negation the rules miss never flips.

The fixture repository is the benchmark's (bench.agent_understanding.build_fixture), as in tests/test_understanding.py.
"""

from __future__ import annotations

import pytest

from agent.understanding.known import Known
from tests.understanding_support import read, read_as

# --- whether a run ended, asked ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "run"),
    [
        ("so baseline-ddp, did it actually crash or is it just being slow?", "runs/baseline-ddp"),
        ("be honest with me about r1: did the thing die?", "runs/r1"),
        ("Do jobs ever really end? Philosophy aside, has baseline-ddp?", "runs/baseline-ddp"),
        ("tp-try - has it completed, or did it fail?", "runs/tp-try"),
    ],
)
def test_whether_a_run_ended_is_its_status(text: str, run: str, known: Known) -> None:
    read_as(text, "status", {"run": run}, known)


@pytest.mark.parametrize(
    ("text", "command"),
    [
        ("why did baseline-ddp crash?", "results"),  # why it ended: what its results say, no status
        ("did r1 finish, and what was its loss?", "results"),  # a figure beside it
        ("baseline-ddp is finished; would you mind writing a report on the layouts-nov sweep?", "report"),
    ],
)
def test_an_end_beside_a_figure_a_why_or_a_statement_keeps_its_reading(text: str, command: str, known: Known) -> None:
    assert read(text, known).command == command


def test_a_wait_until_it_finished_is_still_a_wait(known: Known) -> None:
    intent = read("please wait until r1 has finished and then tell me how it went?", known)
    assert (intent.command, intent.args.get("wait")) == ("status", "yes")


# --- this machine's hardware, asked loosely ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "how's the gpu situation on this rig",
        "whats the hardware sitation",
        "tell me what this box is made of: its GPUs, its cores, its memory",
        "the cards, the cores and the ram inside this workstation, if you please",
    ],
)
def test_this_machine_asked_loosely_is_its_hardware(text: str, known: Known) -> None:
    read_as(text, "hardware", {}, known)


@pytest.mark.parametrize(
    ("text", "command"),
    [
        ("what's the memory situation on tp-try", "results"),  # a run's memory
        ("how did r1 use the gpus and memory of this box?", "results"),
    ],
)
def test_a_runs_memory_is_no_machine(text: str, command: str, known: Known) -> None:
    assert read(text, known).command == command


def test_a_parking_lot_is_no_packing(known: Known) -> None:
    intent = read("Parking lot: maybe pp later. For now train 20 steps on 2 gpus.", known)
    assert not any("packing" in str(value) for value in intent.args.get("set", []))


# --- launches with every value stated ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "args"),
    [
        (
            "If it isn't too forward, I'd like to start a run on 4 processes with dp_shard=4 for 60 steps.",
            {"nproc": 4, "layout": "dp_shard=4", "steps": 60},
        ),
        (
            "I hope I'm not being presumptuous: launch 2 GPUs, dp_shard=2, 15 steps.",
            {"nproc": 2, "layout": "dp_shard=2", "steps": 15},
        ),
        (
            "8 GPUs, dp_shard=8, 50 steps, weight decay 0.1. Go ahead; we'll check the details at the confirmation "
            "step.",
            {"nproc": 8, "layout": "dp_shard=8", "steps": 50, "set": ["train.weight_decay=0.1"]},
        ),
        (
            "Two GPUs as dp_shard=2 for sixty steps, the learning rate a modest 0.0003.",
            {"nproc": 2, "layout": "dp_shard=2", "steps": 60, "set": ["train.lr=0.0003"]},
        ),
        (
            "Launch 4 GPUs with dp_shard=4 for 30 steps; ban the compiler, keep fp8 off, bf16 only.",
            {"nproc": 4, "layout": "dp_shard=4", "steps": 30, "set": ["train.compile=false", "train.precision=bf16"]},
        ),
        (
            "start 20 steps on 2 gpus with dp_shard=2, fp8 stays shelved, fp32 alone",
            {"nproc": 2, "layout": "dp_shard=2", "steps": 20, "set": ["train.precision=fp32"]},
        ),
        (
            "alright going for it: 2 gpus, ddp (that's dp_replicate=2 right?), 40 steps, lr 0.001?",
            {"nproc": 2, "layout": "dp_replicate=2", "steps": 40, "set": ["train.lr=0.001"]},
        ),
    ],
)
def test_a_launch_with_every_value_stated_acts(text: str, args: dict, known: Known) -> None:
    read_as(text, "run", args, known)


@pytest.mark.parametrize(
    "text",
    [
        "train 20 steps on 2 gpus, fp8 or bf16",  # two precisions, neither chosen
        "launch 4 gpus with dp_shard=4, fp8 gleams, bf16 whispers",
        "If Priya isn't too busy, launch 2 GPUs with dp_shard=2 for 15 steps.",  # someone's say: a condition
        "8 GPUs, dp_shard=8, 50 steps. I'll review it tomorrow.",  # put off
        "trying something: should I cancel r1?",  # a question after the announcement
    ],
)
def test_what_is_really_unclear_is_still_asked(text: str, known: Known) -> None:
    assert read(text, known).clarify is not None


def test_a_factor_after_an_article_is_no_learning_rate(known: Known) -> None:
    intent = read("train 20 steps on 2 gpus with the learning rate a 10x smaller", known)
    assert not any(str(value).startswith("train.lr=") for value in intent.args.get("set", []))
    assert intent.clarify is not None


def test_a_precision_taken_back_never_flips(known: Known) -> None:
    intent = read("train 20 steps on 2 gpus; keep fp8's edge sheathed", known)
    assert "train.precision=fp8" not in intent.args.get("set", [])


def test_dont_forbid_a_setting_leaves_it(known: Known) -> None:
    intent = read("train 20 steps on 2 gpus, and don't forbid packing", known)
    assert "data.packing=false" not in intent.args.get("set", [])


# --- the GPU a plan counts, after two were compared ----------------------------------------------------------------


def test_the_counted_gpu_after_a_comparison_is_planned(known: Known) -> None:
    read_as(
        "Open question: A100 80GB versus H100 for qwen2.5-7b. Next step: plan on 8x h100.",
        "plan",
        {"devices": 8, "gpu": "h100-sxm", "model": "qwen2.5-7b"},
        known,
    )


def test_a_gpu_named_alone_first_keeps_its_count(known: Known) -> None:
    intent = read("plan llama-3.1-8b on 4 a100-80gb, then maybe 8 h100s later", known)
    assert intent.args.get("gpu") == "a100-80gb"
