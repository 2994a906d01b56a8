"""Archaic English read word for word ("prithee", "thou", "hath"), a value given with "let ... be", and a sequence
length said as "sequences of N" with its tokens unsaid."""

from __future__ import annotations

from tests.understanding_support import read, read_as


def test_archaic_words_read_as_their_plain_ones(known) -> None:
    read_as("Prithee, train thou upon four GPUs with FSDP for thirty steps, I pray thee.", "run",
            {"nproc": 4, "layout": "dp_shard=4", "steps": 30}, known)  # fmt: skip


def test_recount_unto_me_lists(known) -> None:
    assert read("Wilt thou recount unto me every run that hath finished?", known).command == "runs"


def test_one_archaic_like_word_alone_changes_nothing(known) -> None:
    read_as("upon reflection, train 2 gpus fsdp 20 steps", "run", {"nproc": 2, "steps": 20}, known)


def test_let_a_setting_be_a_value_sets_it(known) -> None:
    read_as("train 2 gpus fsdp 30 steps and let the weight decay be 0.05", "run",
            {"nproc": 2, "steps": 30, "set": ["train.weight_decay=0.05"]}, known)  # fmt: skip


def test_let_it_be_a_count_is_still_asked_where_it_conflicts(known) -> None:
    assert read("train 2 gpus fsdp 30 steps, let it be 4 gpus", known).clarify


def test_sequences_of_a_length_set_the_sequence_length(known) -> None:
    read_as("train 2 gpus fsdp 30 steps on sequences of 1024", "run",
            {"nproc": 2, "steps": 30, "set": ["data.seq_len=1024"]}, known)  # fmt: skip


def test_sequences_of_a_length_each_with_no_tokens_is_asked(known) -> None:
    assert read("train 2 gpus 30 steps with sequences of 512 each", known).clarify
