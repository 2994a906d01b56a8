"""agent.understanding on radio-style digits, waits said as a call or a report when the run ends, briefings the
conversation never held, and a run's file fetched by name (new sentences of each kind, not the sets', and near misses
that must read as before): "five-zero" is 50, "wait(r1)" and "report its final state when done" wait on the run,
"as previously briefed" asks which settings, "grab its metrics.json" reads that file.

The fixture repository is the benchmark's (bench.agent_understanding.build_fixture), as in tests/test_understanding.py.
"""

from __future__ import annotations

import pytest

from agent.understanding.known import Known
from tests.understanding_support import read, read_as

# --- digits said one by one, joined by hyphens, with a zero among them ----------------------------------------------


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("train on 2 gpus, dp_shard two, steps two-zero", {"nproc": 2, "steps": 20}),
        ("launch on four, steps one-two-zero, negative compile", {"nproc": 4, "steps": 120}),
    ],
)
def test_radio_digits_are_one_number(text: str, args: dict, known: Known) -> None:
    read_as(text, "run", args, known)


def test_radio_digits_give_a_plan_its_memory(known: Known) -> None:
    read_as("plan llama-3.1-8b, four devices, device memory four-zero gig", "plan", {"device_mem": "40GiB"}, known)


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("train 2 gpus, twenty-five steps", {"nproc": 2, "steps": 25}),  # a number word, no digits
        ("train on 2 gpus with zero-3, thirty steps", {"nproc": 2, "steps": 30}),  # ZeRO-3 is a layout
    ],
)
def test_near_misses_of_radio_digits_keep_their_numbers(text: str, args: dict, known: Known) -> None:
    read_as(text, "run", args, known)


# --- a wait written as a call, or a report asked for when the run ends ----------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "wait(r1)",
        "wait(5) on tp-try, then print its exit code",
        "keep an eye on tp-try and report its final state once done",
        "Meshpilot, stand by on r1, give me the outcome when finished.",
    ],
)
def test_a_wait_as_a_call_or_a_report_at_the_end_waits(text: str, known: Known) -> None:
    intent = read(text, known)
    assert (intent.command, intent.args.get("wait"), intent.clarify) == ("status", "yes", None)


@pytest.mark.parametrize(
    "text",
    [
        "report the final state of r1",
        "was tp-try done? report its final state",
        "don't wait(2) on r1, just report its status",
    ],
)
def test_a_report_of_the_state_now_does_not_wait(text: str, known: Known) -> None:
    intent = read(text, known)
    assert intent.command == "status" and "wait" not in intent.args


# --- a briefing the conversation never held: asked about, never the defaults --------------------------------------


@pytest.mark.parametrize(
    "text",
    ["Go ahead and launch as earlier discussed.", "cleared for training, carry on as previously outlined"],
)
def test_a_launch_as_briefed_before_asks(text: str, known: Known) -> None:
    assert read(text, known).clarify  # asked, whichever tool it names: nothing launched


def test_a_launch_as_briefed_with_its_values_acts(known: Known) -> None:
    read_as("proceed as previously outlined: train 2 gpus dp_shard=2 20 steps", "run", {"nproc": 2, "steps": 20}, known)


# --- a run's file fetched by its name --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ("loss looks off on r1, can you grab its metrics.json", "runs/r1/metrics.json"),
        ("memory trouble with tp-try: fetch its config.yaml", "runs/tp-try/config.yaml"),
    ],
)
def test_a_run_file_fetched_by_name_is_read(text: str, path: str, known: Known) -> None:
    read_as(text, "read", {"path": path}, known)


@pytest.mark.parametrize(
    "text", ["pull the loss of tp-try", "memory issue on tp-try, pull the peak out of memory.json"]
)
def test_a_figure_fetched_is_still_a_result(text: str, known: Known) -> None:
    assert read(text, known).command == "results"
