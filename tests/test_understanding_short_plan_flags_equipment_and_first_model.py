"""agent.understanding on a plan written with short flags, a look at the machine said in radio-speak, and "my first
model" (new sentences of each kind, not the sets', and near misses that must read as before): "plan -m X -d 8" plans
on 8 devices, "equipment check" inspects the hardware, "train my first model" trains the experiment's own model.

The fixture repository is the benchmark's (bench.agent_understanding.build_fixture), as in tests/test_understanding.py.
"""

from __future__ import annotations

import pytest

from agent.understanding.known import Known
from tests.understanding_support import read, read_as

# --- a plan's short flags: "-d" its devices where the line is a plan's with "-g" or "-m" -------------------------


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("plan -m llama-3.1-8b -d 8", {"devices": 8, "model": "llama-3.1-8b"}),
        ("step 2: plan -d 2 -g l40s -m mistral-7b", {"devices": 2, "gpu": "l40s", "model": "mistral-7b"}),
    ],
)
def test_a_plans_short_flags_are_its_arguments(text: str, args: dict, known: Known) -> None:
    read_as(text, "plan", args, known)


@pytest.mark.parametrize("text", ["plan -d 4 for llama-3.1-8b", "train -d 4 steps 10"])
def test_a_lone_short_d_is_still_asked_about(text: str, known: Known) -> None:
    assert read(text, known).clarify  # "-d" alone may be anything: which count 4 is stays a question


# --- a look at the machine in radio-speak ---------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["Control, equipment check please.", "hardware check: which cards on station?"])
def test_an_equipment_check_inspects_the_hardware(text: str, known: Known) -> None:
    read_as(text, "hardware", {}, known)


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("launch 2 gpus, 10 steps, then a gpu check", {"nproc": 2, "steps": 10}),
    ],
)
def test_a_launch_beside_a_check_still_launches(text: str, args: dict, known: Known) -> None:
    read_as(text, "run", args, known)


def test_a_skipped_equipment_check_inspects_nothing(known: Known) -> None:
    assert read("skip the equipment check, train 2 gpus 10 steps", known).command == "run"


# --- "my first model": the experiment's own, no preset to ask for --------------------------------------------------


def test_my_first_model_is_the_experiments_own(known: Known) -> None:
    read_as("time to train our very first model, 4 gpus, 20 steps", "run", {"nproc": 4, "steps": 20}, known)


def test_a_described_model_is_still_asked_about(known: Known) -> None:
    intent = read("train my fancy model on 2 gpus, 10 steps", known)
    assert "preset" in (intent.clarify or "")
