"""Settings written as JSON pairs, a warmup taken back before the run's steps, and gradient clipping said with the
gradients after the verb: every stated setting read, a key the parser does not know asked about, never dropped."""

from __future__ import annotations

from tests.understanding_support import earlier_turn, read, read_as


def test_a_json_object_of_call_arguments_and_config_keys_is_read(known) -> None:
    read_as('start {"nproc": 8, "layout": "dp_shard=8", "steps": 120, "compile": true}', "run",
            {"nproc": 8, "layout": "dp_shard=8", "steps": 120, "set": ["train.compile=true"]}, known)  # fmt: skip


def test_an_overrides_object_inside_the_json_keeps_every_key(known) -> None:
    read_as('run {"nproc": 4, "layout": "dp_shard=4", "overrides": {"train.seed": 7, "data.seq_len": 512}}', "run",
            {"nproc": 4, "layout": "dp_shard=4", "set": ["train.seed=7", "data.seq_len=512"]}, known)  # fmt: skip


def test_a_json_plan_is_read(known) -> None:
    read_as('plan this: {"model": "llama-3.1-70b", "gpu": "h100", "devices": 8, "nodes": 2}', "plan",
            {"model": "llama-3.1-70b", "devices": 8, "nodes": 2}, known)  # fmt: skip


def test_a_json_key_the_parser_does_not_know_is_asked_about(known) -> None:
    for text in ('launch {"nproc": 2, "steps": 30, "frobnicate": 3}',
                 'launch {"nproc": 2, "steps": 30, "frobnicate": "yes"}'):  # fmt: skip
        intent = read(text, known)
        assert intent.clarify and "frobnicate" in intent.clarify, text


def test_a_warmup_taken_back_before_a_count_of_steps_leaves_the_steps_to_the_run(known) -> None:
    read_as("train on 4 gpus fsdp without warmup 60 steps", "run",
            {"nproc": 4, "steps": 60, "set": ["train.warmup_steps=0"]}, known)  # fmt: skip


def test_a_warmup_with_its_own_steps_is_not_taken_back(known) -> None:
    read_as("train on 4 gpus fsdp, warmup 10 steps, 60 steps", "run",
            {"nproc": 4, "steps": 60, "set": ["train.warmup_steps=10"]}, known)  # fmt: skip


def test_a_change_of_steps_after_a_taken_back_warmup_is_still_asked(known) -> None:
    assert read("no warmup 5 steps more", known).clarify


def test_clipping_said_with_the_gradients_after_the_verb(known) -> None:
    read_as("train 30 steps on 2 gpus, clipping the gradients to 0.5", "run",
            {"steps": 30, "nproc": 2, "set": ["train.grad_clip=0.5"]}, known)  # fmt: skip


def test_clipping_refused_is_never_set(known) -> None:
    intent = read("train 30 steps on 2 gpus, don't clip the gradients at 0.5", known)
    assert "train.grad_clip=0.5" not in intent.args.get("set", []) and intent.clarify


def test_a_bare_json_pair_changes_the_plan_before(known) -> None:
    earlier = earlier_turn("plan_layouts", {"model": "llama-3.1-8b", "gpu": "h100", "devices": 4}, "plan llama 8b on 4")
    intent = read('again, but "gpu": "a100-80gb"', known, earlier)
    assert (intent.command, intent.args.get("gpu"), intent.args.get("devices")) == ("plan", "a100-80gb", 4)
