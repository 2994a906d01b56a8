"""agent.understanding on four kinds of phrasing (new sentences of each kind, and near misses that must still ask):
a ticket's, issue's or pull request's number heading the message ("Issue #3310:", "Re case 9021", "PR #412
follow-up") is a reference, never an argument; the user's question about what a tool itself guarantees, then the
order on that answer ("does killing tp-try only stop the process? If so, kill it") is the order, while an answer the
tool does not give or a condition on the world still asks; an acceptance criterion "Given <file>, When <launch>,
Then <result>" asks for the launch in its When clause; and "what's on this box, GPUs and memory?" is the hardware.

The fixture repository is the benchmark's (bench.agent_understanding.build_fixture), as in tests/test_understanding.py.
"""

from __future__ import annotations

import pytest

from agent.understanding.known import Known
from tests.understanding_support import read, read_as

# --- ticket and reference numbers ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "command", "args"),
    [
        ("Issue #3310: can mistral-7b be trained on 8 h100s? Only a plan, nothing launched.", "plan",
         {"devices": 8, "model": "mistral-7b"}),
        ("Re case 9021 - plan llama-3.1-8b on 4 l40s.", "plan", {"devices": 4, "gpu": "l40s"}),
        ("Ticket 7781: 2 GPUs, dp_shard=2, 30 steps. Approved by the lead.", "run",
         {"nproc": 2, "steps": 30, "layout": "dp_shard=2"}),
        # a pull request named by its number is one there is: no PR to open
        ("PR #412 follow-up: train 30 steps on 2 GPUs.", "run", {"nproc": 2, "steps": 30}),
    ],
)  # fmt: skip
def test_a_reference_number_is_no_argument(text: str, command: str, args: dict, known: Known) -> None:
    read_as(text, command, args, known)


@pytest.mark.parametrize(
    "text",
    [
        "Update 48270: plan llama-3.1-8b on 4 l40s.",  # no ticket word, no "#": what the number is for is asked
        "Ticket #512: user requests a training run on 2 GPUs, 40 steps. Pending approval by PI.",
    ],
)
def test_a_number_or_approval_unexplained_still_asks(text: str, known: Known) -> None:
    assert read(text, known).clarify is not None


# --- a question about what the tool guarantees, then the order on that answer ---------------------------------------


@pytest.mark.parametrize(
    ("text", "command", "args"),
    [
        ("Does killing tp-try only stop the process, nothing deleted? If so, kill it.", "cancel",
         {"run": "runs/tp-try"}),
        ("Will a training run write anything outside runs/? If not, train 20 steps on 2 GPUs.", "run",
         {"nproc": 2, "steps": 20}),
        ("When you open a PR, does it only push a feature branch, never main? If that's correct, open one for "
         "sweeps/lr-scan.", "pr", {"sweep": "sweeps/lr-scan"}),
        ("Does updating the docs go to a branch or straight to main? Assuming a branch, update the docs from "
         "layouts-nov.", "docs", {"sweep": "sweeps/layouts-nov"}),
    ],
)  # fmt: skip
def test_an_order_on_the_tools_own_guarantee_acts(text: str, command: str, args: dict, known: Known) -> None:
    read_as(text, command, args, known)


@pytest.mark.parametrize(
    "text",
    [
        "Does a PR go straight to main? If so, open one for sweeps/lr-scan.",  # the tool never does
        "Does the docs update write to main or to a branch? Assuming main, update the docs from lr-scan.",
        "Does killing tp-try only stop the process? If so, and if the node is back, kill it.",  # the world's state
        "Is r1 finished? If so, cancel it.",
    ],
)
def test_an_answer_the_tool_does_not_give_or_the_worlds_state_still_asks(text: str, known: Known) -> None:
    intent = read(text, known)
    assert intent.command not in ("cancel", "pr", "docs", "run") or intent.clarify is not None


# --- Given / When / Then -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("Given configs/long.yaml, When we train on 4 GPUs with dp_shard=4 for 30 steps, Then throughput beats r1.",
         {"nproc": 4, "steps": 30, "layout": "dp_shard=4", "experiment": "configs/long.yaml"}),
        ("Given the default experiment, When launched on 2 GPUs with tp=2 for 40 steps, Then the loss matches "
         "baseline-ddp.", {"nproc": 2, "steps": 40, "layout": "tp=2"}),
    ],
)  # fmt: skip
def test_an_acceptance_criterion_on_a_file_launches_its_when_clause(text: str, args: dict, known: Known) -> None:
    read_as(text, "run", args, known)


@pytest.mark.parametrize(
    "text",
    [
        "Given the node is back, When I launch on 2 GPUs for 20 steps, Then I get a baseline.",  # the world's state
        "Given configs/long.yaml, When I launch on 2 GPUs for 20 steps if the node is back, Then I get a baseline.",
        "Given configs/long.yaml, when I launch on 2 GPUs for 20 steps, then what happens to memory?",
    ],
)
def test_an_acceptance_criterion_on_the_world_or_asked_does_not_launch(text: str, known: Known) -> None:
    intent = read(text, known)
    assert intent.command != "run" or intent.clarify is not None


# --- the machine asked about; the object's form unsure ---------------------------------------------------------------


def test_what_is_on_this_machine_with_its_gpus_is_the_hardware(known: Known) -> None:
    read_as("What is inside this server in terms of GPUs and RAM? Touch nothing.", "hardware", {}, known)
    assert read("what's on the box for r1's results", known).command != "hardware"


def test_unsure_only_of_the_objects_form_still_acts(known: Known) -> None:
    read_as("benchmark tp-try please, not sure whether to pass you the run or the checkpoint, it's tp-try either way",
            "bench", {"model": "runs/tp-try"}, known)  # fmt: skip
    assert read("not sure if I should benchmark r1 or not", known).clarify is not None
