"""agent.understanding on values and names the fresh_ag to fresh_aj sets showed dropped or asked about (new sentences of
each kind, not the sets'), each with a near miss that must keep its reading: a fraction said in words ("3 parts in
10000", "a tenth"); a setting's value after "being"; Slurm's tasks as processes; an experiment key named, then set
("`train.seed` set to 7"); a memory had ("possessing 24 gibibytes"); a sequence length said as "sequence of" or
"token length of"; Mixtral by its experts, or its size said apart from it; "N of those" after nodes with cards each;
a bulleted list, whose lines end their numbers; Portuguese "no"/"na" before a file, "por nó" and "nós"; an
experiment file as "the long version" or "the 1024 version" ("the 1024 one" alone still asked); a sweep by its size
and what it tried; a sweep's "tries"; "held-out" and "2e-4" as no run's name.

The fixture repository is the benchmark's (bench.agent_understanding.build_fixture), as in tests/test_understanding.py.
"""

from __future__ import annotations

import pytest

from tests.understanding_support import read, read_as


@pytest.mark.parametrize(
    ("text", "command", "args"),
    [
        ("train 30 steps on 2 gpus with the learning rate at three parts in ten thousand", "run",
         {"nproc": 2, "steps": 30, "set": ["train.lr=0.0003"]}),
        ("train 30 steps on 2 gpus with weight decay at a tenth", "run",
         {"nproc": 2, "steps": 30, "set": ["train.weight_decay=0.1"]}),
        ("train 30 steps on 2 gpus with weight decay at 5 hundredths", "run",
         {"nproc": 2, "steps": 30, "set": ["train.weight_decay=0.05"]}),
        ("train 10 steps on 2 gpus with the learning rate being 5e-4", "run",
         {"nproc": 2, "steps": 10, "set": ["train.lr=5e-4"]}),
        ("run 12 steps with 4 slurm tasks", "run", {"nproc": 4, "steps": 12}),
        ("launch 30 steps on 4 gpus and `train.seed` set to 7.", "run",
         {"nproc": 4, "steps": 30, "set": ["train.seed=7"]}),
        ("launch 30 steps on 4 gpus with data.seq_len to 512", "run",
         {"nproc": 4, "steps": 30, "set": ["data.seq_len=512"]}),
        ("- run\n- 2 gpus\n- 40 steps\n- lr 1e-4", "run", {"nproc": 2, "steps": 40, "set": ["train.lr=1e-4"]}),
        ("roda 40 steps na configs/long.yaml com 4 GPUs, sem packing", "run",
         {"nproc": 4, "steps": 40, "experiment": "configs/long.yaml", "set": ["data.packing=false"]}),
        ("launch the 1024 version on 2 gpus for 10 steps", "run",
         {"nproc": 2, "steps": 10, "experiment": "configs/long.yaml"}),
        ("start a sweep with 6 attempts", "sweep", {"trials": 6}),
        ("can we run a sweep with like 3 tries?", "sweep", {"trials": 3}),
    ],
)  # fmt: skip
def test_values_said_in_words_are_launched_as_said(text, command, args, known):
    read_as(text, command, args, known)


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("plan llama-3.1-8b on a card having 24 gibibytes of memory, 2 of them to a node",
         {"devices": 2, "device_mem": "24GiB", "model": "llama-3.1-8b"}),
        ("qwen2.5-7b on 2 h100, token length of 2048: which layout?",
         {"devices": 2, "seq_len": 2048, "model": "qwen2.5-7b"}),
        ("plan mixtral with 8 7b experts on 8 h100", {"devices": 8, "model": "mixtral-8x7b"}),
        ("plan the mixtral one, the 8x22b, on 16 h100", {"devices": 16, "model": "mixtral-8x22b"}),
        ("l40s nodes with 4 cards each. llama-3.1-8b across 3 of those",
         {"nodes": 3, "devices": 4, "gpu": "l40s", "model": "llama-3.1-8b"}),
        ("llama-3.1-70b em h100, 4 por nó, 2 nós, cabe?", {"nodes": 2, "devices": 4, "model": "llama-3.1-70b"}),
        ("plan llama-2-13b on 8 A100 cards of 40 gigabytes",
         {"devices": 8, "gpu": "a100-40gb", "model": "llama-2-13b"}),
    ],
)  # fmt: skip
def test_hardware_and_models_said_in_words_are_planned(text, args, known):
    read_as(text, "plan", args, known)


def test_a_size_and_what_a_sweep_tried_name_it(known):
    read_as("the tiny sweep that varied layouts, which trial won?", "trials", {"sweep": "sweeps/layouts-nov"}, known)


@pytest.mark.parametrize(
    "text",
    ["benchmark r1 on the hold-out suite", "Evaluate runs/r1 on the held-out benchmark, aggregate numbers only"],
)
def test_held_out_is_the_private_suite_no_run(text, known):
    read_as(text, "bench", {"model": "runs/r1", "suite": "builtin"}, known)


# Near misses: what the kinds above must leave as it was.
def test_a_share_of_something_is_no_value(known):
    intent = read("train 30 steps on 2 gpus, a tenth of the steps as warmup", known)
    assert "train.warmup_steps=0.1" not in intent.args.get("set", [])


def test_a_range_on_one_line_is_still_asked(known):
    intent = read("run 20-30 steps on 2 gpus", known)
    assert intent.clarify and "range" in intent.clarify


def test_a_sequence_of_a_few_is_no_length(known):
    intent = read("plan llama-3.1-8b on 2 h100, sequence of 8 gpus", known)
    assert "seq_len" not in intent.args


def test_mixtral_without_its_size_is_asked(known):
    intent = read("plan mixtral on 8 h100", known)
    assert intent.clarify and "mixtral-8x22b" in intent.clarify


def test_english_no_before_a_file_is_no_portuguese(known):
    intent = read("train 20 steps but no configs/long.yaml, just the main one", known)
    assert intent.args.get("experiment") != "configs/long.yaml"


@pytest.mark.parametrize(
    "text", ["launch the 2048 one on 2 gpus", "i'd like the long version, the 2048 one, on 4 gpus"]
)
def test_a_value_no_experiment_holds_is_asked(text, known):
    intent = read(text, known)
    assert intent.clarify and "2048" in intent.clarify


def test_a_value_alone_as_one_is_asked(known):
    intent = read("launch the 1024 one on 2 gpus for 10 steps", known)
    assert intent.clarify and "1024" in intent.clarify


def test_a_run_by_its_size_alone_is_asked(known):
    intent = read("results of the little run", known)
    assert intent.clarify and "little run" in intent.clarify


def test_tasks_with_no_count_are_no_processes(known):
    intent = read("train 20 steps on 2 gpus; the tasks are in evalsuite", known)
    assert intent.args.get("nproc") == 2


@pytest.mark.parametrize(
    "text", ["benchmark r1 on 3 tasks of the builtin suite", "run the benchmark on r1 with 5 tasks"]
)
def test_a_benchmarks_tasks_are_no_processes(text, known):
    intent = read(text, known)
    assert intent.command == "bench" and "nproc" not in intent.args


def test_tasks_with_no_slurm_word_are_asked(known):
    intent = read("run 2 tasks for 10 steps", known)
    assert "nproc" not in intent.args and intent.clarify


def test_the_normal_one_launched_is_the_experiment_as_it_is(known):
    read_as("could you launch a training run for me? the standard one is fine", "run", {}, known)


@pytest.mark.parametrize("text", ["results of the normal one", "show me the regular run's loss"])
def test_the_normal_one_read_is_still_asked(text, known):
    assert "Which do you mean by" in (read(text, known).clarify or "")


# --- a setting's value in set notation (fresh_ay's academic): "|steps| = 100", "lr := 3e-4" -------------------------


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("train on 2 gpus, |steps| = 40", {"nproc": 2, "steps": 40}),
        ("launch 20 steps with warmup := 5 on 4 gpus", {"nproc": 4, "steps": 20, "set": ["train.warmup_steps=5"]}),
    ],
)
def test_set_notation_states_the_setting(text, args, known):
    read_as(text, "run", args, known)
