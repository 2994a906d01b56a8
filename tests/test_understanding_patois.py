"""Jamaican Patois read word for word: its negation "nuh" turns a setting off ("nuh compile", "nuh warmup"), never
flipped or dropped."""

from __future__ import annotations

from tests.understanding_support import read, read_as


def test_nuh_before_a_verb_turns_its_switch_off(known) -> None:
    read_as("Train 4 GPU fsdp 30 step, an nuh pack di data", "run",
            {"nproc": 4, "steps": 30, "set": ["data.packing=false"]}, known)  # fmt: skip


def test_nuh_before_a_setting_with_an_off_value_sets_it_to_zero(known) -> None:
    read_as("Launch 4 GPU fsdp 30 step pon di long config, nuh warmup an nuh compile", "run",
            {"nproc": 4, "steps": 30, "experiment": "configs/long.yaml",
             "set": ["train.warmup_steps=0", "train.compile=false"]}, known)  # fmt: skip


def test_a_launch_said_with_nuh_is_held_back(known) -> None:
    intent = read("nuh launch di run on 4 GPU yet, mi a check di config", known)
    assert intent.command != "run" or intent.clarify


def test_a_sentence_with_one_patois_like_word_is_read_as_english(known) -> None:
    read_as("train 2 gpus fsdp 20 steps, di is just a typo", "run", {"nproc": 2, "steps": 20}, known)
