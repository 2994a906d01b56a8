"""A number that names a reviewer or a part of a paper ("Reviewer 2", "Table 3") is no count, and "one more" of
something wanted ("my boss wants one more result") points at no run."""

from __future__ import annotations

from tests.understanding_support import read, read_as


def test_a_reviewers_number_is_no_count(known) -> None:
    read_as("Referee 3 wants to know: plan qwen3-30b-a3b on 16 H100s, 2 nodes of 8", "plan",
            {"model": "qwen3-30b-a3b", "nodes": 2, "devices": 8}, known)  # fmt: skip


def test_a_number_with_its_own_noun_after_the_title_is_still_a_count(known) -> None:
    intent = read("for the table, 3 nodes: plan qwen3-30b-a3b on 8 H100s", known)
    assert intent.command == "plan" and (intent.args.get("nodes") == 3 or intent.clarify)


def test_one_more_of_something_wanted_points_at_no_run(known) -> None:
    read_as("my PI wants one more datapoint, so train fsdp on 2 gpus for 60 steps", "run",
            {"nproc": 2, "layout": "dp_shard=2", "steps": 60}, known)  # fmt: skip


def test_a_run_described_as_the_failed_one_is_still_that_run(known) -> None:
    intent = read("benchmark the failed one", known)
    assert (intent.command, intent.args.get("model")) == ("bench", "runs/tp-try")
