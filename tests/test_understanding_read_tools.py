"""Read-only tools the parser chose wrongly, and an experiment file named in a plan or a launch: the runs listed in
other words ("list every single run", "oc get runs", "runs: states", whether each run worked), a run's file or folder
(a run's log named after it, a file of the run just talked about, the log file beside an out-of-memory, a shell's
"ls runs/<run>", a file's name shouted in capitals), a run's status (its exit code, "still growing", a status
report, a hold on a run until it ends), a sweep's summary asked for by its noun, and a config file named with a
plan's hardware or a launch's facts. Each kind has its near misses, which must keep their reading."""

from __future__ import annotations

import pytest
from langchain_core.messages import HumanMessage

from tests.understanding_support import read, read_as


@pytest.mark.parametrize(
    ("text", "command", "args"),
    [
        # the runs listed
        ("list every single run you can find", "runs", {}),
        ("oc get runs please", "runs", {}),
        ("runs: states", "runs", {}),
        ("Not sure which runs we have. Show me all we've got and whether every one of them succeeded.", "runs", {}),
        # a run's file or folder
        ("r1 training log, please", "read", {"path": "runs/r1/log.txt"}),
        ("ls -l runs/baseline-ddp", "read", {"path": "runs/baseline-ddp"}),
        ("OPEN CONFIGS/LONG.YAML", "read", {"path": "configs/long.yaml"}),
        ("tp-try ran out of memory. show me its log file", "read", {"path": "runs/tp-try/log.txt"}),
        # a run's status
        ("exit code of r1?", "status", {"run": "runs/r1"}),
        ("is baseline-ddp still growing?", "status", {"run": "runs/baseline-ddp"}),
        ("give me a status report on r1", "status", {"run": "runs/r1"}),
        (
            "hold on tp-try until it lands, then report its final status",
            "status",
            {"run": "runs/tp-try", "wait": "yes"},
        ),
        # a sweep's summary by its noun
        ("lr-scan results: which trial won?", "trials", {"sweep": "sweeps/lr-scan"}),
        ("sweeps/layouts-nov summary, I want the winning trial", "trials", {"sweep": "sweeps/layouts-nov"}),
        # a config file in a plan or a launch
        (
            "how would configs/long.yaml split across 8 H100s?",
            "plan",
            {"experiment": "configs/long.yaml", "devices": 8},
        ),
        (
            "job spec: experiment configs/long.yaml, 4 GPUs, layout dp_shard=4, 100 steps",
            "run",
            {"experiment": "configs/long.yaml", "nproc": 4, "layout": "dp_shard=4", "steps": 100},
        ),
    ],
)
def test_read_only_tool_and_named_config(text: str, command: str, args: dict, known) -> None:
    read_as(text, command, args, known)


def test_file_of_the_run_just_talked_about(known) -> None:
    earlier = [HumanMessage("what's the status of r1?")]
    intent = read("now print the steps.jsonl in it", known, earlier)
    assert (intent.command, intent.args.get("path")) == ("read", "runs/r1/steps.jsonl")
    # a file the repository has at its root stays that file
    intent = read("now print notes.md", known, earlier)
    assert (intent.command, intent.args.get("path")) == ("read", "notes.md")


@pytest.mark.parametrize(
    ("text", "command", "args"),
    [
        ("show me configs/long.yaml", "read", {"path": "configs/long.yaml"}),
        ("is r1 still growing its loss?", "results", {"run": "runs/r1"}),
        ("list runs", "runs", {}),
        ("hold on, what's the loss of r1?", "results", {"run": "runs/r1"}),
        ("write a report of the lr-scan sweep", "report", {"sweep": "sweeps/lr-scan"}),
        ("tp-try memory.json", "read", {"path": "runs/tp-try/memory.json"}),
        ("launch configs/long.yaml on 2 GPUs with fsdp", "run", {"experiment": "configs/long.yaml", "nproc": 2}),
        ("open configs/long.yaml and tell me if it fits 4 A10s", "read", {"path": "configs/long.yaml"}),
    ],
)
def test_near_misses_keep_their_reading(text: str, command: str, args: dict, known) -> None:
    read_as(text, command, args, known)


def test_a_figure_of_every_run_is_no_list(known) -> None:
    assert read("show every single run's loss", known).command != "runs"


@pytest.mark.parametrize(
    "text",
    [
        "the results of configs/long.yaml with 500 steps and dp_shard=4",
        "compare configs/long.yaml at 300 steps with dp_shard=2",
        "status of configs/long.yaml, 500 steps, dp_shard=4",
    ],
)
def test_a_config_with_launch_facts_and_another_cue_is_no_launch(text: str, known) -> None:
    """Never launched as read: another reading, or a launch only offered by a question that names both (the second
    reading reads "compare configs/long.yaml at 300 steps with dp_shard=2" as a launch)."""
    intent = read(text, known)
    assert intent.command != "run" or "It also reads as a request to" in (intent.clarify or "")
