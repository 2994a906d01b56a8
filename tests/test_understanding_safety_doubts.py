"""Requests where acting would most likely do something other than what was meant, so the parser asks one question
(questions._safety_doubt, _method_unread and the sweep's radio digits): odd radio digits, a step count less the
warmup, a check asked before the launch, a PR that must not write its report, a report where a PR was asked for, a
Taglish launch with no setting read, a code-style call that names other work than the read chosen. Near misses keep
acting."""

from __future__ import annotations

import pytest

from tests.understanding_support import read, read_as


@pytest.mark.parametrize(
    "text",
    [
        "launch 20 steps on 2 gpus with micro batch zero-eight",  # a leading zero: a slip or ZeRO?
        "train on 2 gpus for zero-three steps",
        "train 2 gpus, steps fifty-zero",  # 50 or 500?
        "run a sweep of two-zero-zero-zero trials",  # thousands of trials on one slip
        "train 2 gpus for two-four-zero steps less the warmup",  # arithmetic, not the warmup off
        "equipment check first and then run 20 steps on 2 gpus",  # the check first
        "open a pull request for lr-scan without a report",  # a PR writes the report
        "write up the lr-scan sweep and make a PR",  # a report only would drop the PR
        "Write up lr-scan and get a PR open, we ain't got long",  # haste, not a "not"
        "pwede po bang ulitin natin yung run",  # Taglish, no setting read: the defaults
        "runs.where(status==failed)",  # a filter, not one run's status
    ],
)
def test_asks_where_acting_would_likely_be_wrong(text, known):
    intent = read(text, known)
    assert intent.clarify, (text, intent.command, intent.args)


@pytest.mark.parametrize(
    ("text", "command", "args"),
    [
        ("train 2 gpus, steps two-zero", "run", {"nproc": 2, "steps": 20}),
        ("sweep with two-zero-zero trials", "sweep", {"trials": 200}),
        ("train 2 gpus 100 steps, warmup 0", "run", {"nproc": 2, "steps": 100}),
        ("train 2 gpus 20 steps with zero stage 2", "run", {"nproc": 2, "steps": 20}),
        ("resume r1", "resume", {"run": "runs/r1"}),
        ("no report needed, open a PR for lr-scan", "pr", {"sweep": "sweeps/lr-scan"}),
        ("write up lr-scan, no PR", "report", {"sweep": "sweeps/lr-scan"}),
        ("Summarise lr-scan and open a PR, I ain't got long", "pr", {"sweep": "sweeps/lr-scan"}),
    ],
)
def test_near_misses_keep_acting(text, command, args, known):
    read_as(text, command, args, known)
