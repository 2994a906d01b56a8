"""agent.understanding on the kinds of phrasing fresh_ac's and fresh_ad's requests showed (new sentences of each kind,
not the sets'): numbers in mathematical notation ("2^11", "5·10⁻⁴", "η"), GPU counts with a multiplication sign and a
card's memory in brackets, an operator's shorthand and key=value flags ("np4 20st", "dp_rep=2", "zero_stage=2"),
counts that contradict a layout, a mind changed mid-sentence, a warmup's step count, activation checkpointing described
instead of named, mixture-of-experts presets said loosely, an experiment named in a plan, and a memory alone after a
plan on a GPU sold in two sizes. Each kind has a near miss that must not change.

The fixture repository is the benchmark's (bench.agent_understanding.build_fixture), as in tests/test_understanding.py.
"""

from __future__ import annotations

import pytest

from agent.understanding.normalise import normalise
from tests.understanding_support import earlier_turn, read, read_as


@pytest.mark.parametrize(
    ("text", "plain"),
    [
        ("context 2^10 please", "context 1024 please"),
        ("lr 2·10⁻⁵ and 10 steps", "lr 2e-5 and 10 steps"),
        ("lr 4×10^-4", "lr 4e-4"),
        ("weight decay 10^-2", "weight decay 1e-2"),
        ("η: 6e-4", "lr: 6e-4"),
        ("3× L40S", "3 x L40S"),
        # near misses: a power too big for any count, a version, a plain product of counts
        ("a 7^20 budget", "a 7^20 budget"),
        ("llama 3.1 8b", "llama 3.1 8b"),
    ],
)  # fmt: skip
def test_mathematical_notation_is_read_as_numbers(text, plain, known):
    assert normalise(text, known.names) == plain


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("train 30 steps with ddp on 2 gpus, η = 2·10⁻⁴", {"nproc": 2, "steps": 30, "set": ["train.lr=2e-4"]}),
        ("launch fsdp on 4 gpus, context 2^10, 12 steps",
         {"nproc": 4, "steps": 12, "set": ["data.seq_len=1024"]}),
        ("2 gpus ddp, 15 steps, learning rate 7×10^-5", {"steps": 15, "set": ["train.lr=7e-5"]}),
    ],
)  # fmt: skip
def test_launches_with_mathematical_notation(text, args, known):
    read_as(text, "run", args, known)


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("rank layouts for mistral 7b on 3× L40S", {"devices": 3, "gpu": "l40s", "model": "mistral-7b"}),
        ("which layouts fit llama-3.1-8b on 4× H100 PCIe (80 GB)?",
         {"devices": 4, "gpu": "h100-pcie", "model": "llama-3.1-8b"}),
        ("plan qwen2.5-7b on 4 A100s (40GB)", {"devices": 4, "gpu": "a100-40gb", "model": "qwen2.5-7b"}),
        ("plan gemma 2 9b on 2×4 H200 (141 GB), seq len 2^12",
         {"nodes": 2, "devices": 4, "gpu": "h200", "model": "gemma-2-9b", "seq_len": 4096}),
        ("would llama 3.2 1b fit on 6 of the 24 gig 4090s", {"devices": 6, "gpu": "rtx-4090", "model": "llama-3.2-1b"}),
        ("what fits on our 2x4090 box, say mistral 7b", {"devices": 2, "nodes": 1, "gpu": "rtx-4090"}),
    ],
)  # fmt: skip
def test_gpu_counts_with_a_multiplication_sign_and_memory_in_brackets(text, args, known):
    read_as(text, "plan", args, known)


def test_a_memory_in_brackets_that_is_not_the_cards_own_is_asked_about(known):
    intent = read("plan llama-3.1-8b on 4 H100 (40 GB)", known)
    assert intent.clarify and "40" in intent.clarify


def test_rigs_counted_in_the_plural_still_ask_how_many(known):
    intent = read("what fits on our 8xh100 rigs", known)
    assert intent.clarify and "How many nodes" in intent.clarify


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("np2 ddp 15st nocompile", {"nproc": 2, "layout": "dp_replicate=2", "steps": 15,
                                    "set": ["train.compile=false"]}),
        ("np=4 fsdp st60 fp8", {"nproc": 4, "layout": "dp_shard=4", "steps": 60, "set": ["train.precision=fp8"]}),
        ("np4 dp_repl=2 dp_shard=2 12st mb2", {"nproc": 4, "layout": "dp_replicate=2,dp_shard=2", "steps": 12,
                                               "set": ["train.micro_batch=2"]}),
        ("fsdp nproc=4 zero_stage=1 steps=10", {"nproc": 4, "steps": 10, "set": ["train.zero_stage=1"]}),
        ("ddp on 2 gpus, 10 steps, galore", {"set": ["train.optimizer=galore_adamw"]}),
        ("2 gpus ddp 10 steps with the GaLore AdamW optimiser", {"set": ["train.optimizer=galore_adamw"]}),
        ("the long cfg, np2 ddp, 8st", {"experiment": "configs/long.yaml", "nproc": 2, "steps": 8}),
    ],
)  # fmt: skip
def test_an_operators_shorthand_is_launched(text, args, known):
    read_as(text, "run", args, known)


def test_flags_with_a_file_then_a_count_are_a_sweep(known):
    read_as("sweep --config configs/long.yaml --trials 6", "sweep",
            {"experiment": "configs/long.yaml", "trials": 6}, known)  # fmt: skip


def test_plan_keys_said_as_key_value(known):
    read_as("plan model=mistral-7b gpu=a10 devices=4 seq=2048", "plan",
            {"model": "mistral-7b", "gpu": "a10", "devices": 4, "seq_len": 2048}, known)  # fmt: skip


@pytest.mark.parametrize("text", ["was the 1st run any good", "did the 21st trial finish"])
def test_ordinals_are_no_steps(text, known):
    assert "steps" not in normalise(text, known.names)


@pytest.mark.parametrize("text", ["np2 tp=4 10st", "np8 dp_shard=2 st30"])
def test_processes_that_cannot_hold_the_layout_are_asked_about(text, known):
    intent = read(text, known)
    assert intent.command == "run" and intent.clarify
    assert intent.args.get("steps") in (10, 30)  # the steps said are kept in the reading it names


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("train 30 steps — no wait, make it 50 — on 2 gpus with ddp", {"steps": 50, "nproc": 2}),
        ("fsdp across 8 - actually no, make it 4 - gpus, 10 steps", {"nproc": 4, "layout": "dp_shard=4"}),
        ("ddp on 2 gpus, 20 steps, micro batch 4 — sorry, make the micro batch 2", {"set": ["train.micro_batch=2"]}),
        ("2 gpus ddp 10 steps with packing on — hmm, r1 had it on? — ok then, turn packing off",
         {"set": ["data.packing=false"]}),
    ],
)  # fmt: skip
def test_the_value_said_last_after_a_change_of_mind_counts(text, args, known):
    read_as(text, "run", args, known)


def test_a_correction_of_another_kind_is_left_as_said(known):
    assert normalise("train 30 steps on 2 gpus, no packing", known.names) == "train 30 steps on 2 gpus, no packing"


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("Launch 200 steps on 2 GPUs with DDP. Warmup should be 20 steps.",
         {"steps": 200, "set": ["train.warmup_steps=20"]}),
        ("ddp on 2 gpus, 40 steps, 4 warmup steps", {"steps": 40, "set": ["train.warmup_steps=4"]}),
        ("start 2 gpus ddp and warm up for 6 steps", {"set": ["train.warmup_steps=6"]}),
    ],
)  # fmt: skip
def test_a_warmup_in_steps_is_never_the_runs_steps(text, args, known):
    read_as(text, "run", args, known)


def test_steps_after_a_warmup_taken_back_stay_the_runs(known):
    """Without warmup for 10 steps: the run's 10 steps, with no warmup (the trainer's 0), never a warmup of 10."""
    read_as("train without warmup for 10 steps on 2 gpus", "run",
            {"steps": 10, "nproc": 2, "set": ["train.warmup_steps=0"]}, known)  # fmt: skip


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("train 10 steps with ddp on 2 gpus, the memory trick on, the one that recomputes activations rather than "
         "storing them", "true"),
        ("2 gpus ddp 10 steps. Keep the memory-saving option off, the thing that recomputes stuff instead of "
         "holding it in memory.", "false"),
        ("ddp on 2 gpus, 10 steps, and please don't turn on the activation checkpointing thing", "false"),
        ("ddp on 2 gpus, 10 steps, with the activation checkpointing feature on", "true"),
    ],
)  # fmt: skip
def test_activation_checkpointing_described_is_set(text, value, known):
    read_as(text, "run", {"set": [f"train.activation_checkpointing={value}"]}, known)


def test_a_request_explained_with_if_that_makes_sense_is_no_condition(known):
    read_as("train 10 steps on 2 gpus with ddp, if that makes sense", "run", {"steps": 10}, known)


@pytest.mark.parametrize(
    ("text", "model"),
    [
        ("plan gpt oss 120b on 8 h200", "gpt-oss-120b"),
        ("which layouts for gpt-oss-20b on 4 l40s", "gpt-oss-20b"),
        ("plan mixtral 8x22 on 2x8 h100", "mixtral-8x22b"),
        ("plan qwen three two hundred thirty five b a twenty two b on 2x8 h200", "qwen3-235b-a22b"),
    ],
)  # fmt: skip
def test_mixture_of_experts_presets_said_loosely(text, model, known):
    read_as(text, "plan", {"model": model}, known)


def test_a_family_without_its_size_still_asks_which(known):
    intent = read("plan gpt-oss on 8 h100", known)
    assert intent.clarify and "gpt-oss-20b" in intent.clarify and "gpt-oss-120b" in intent.clarify


@pytest.mark.parametrize(
    "text",
    ["plan the long cfg on 4 h100", "which layouts fit the longer-sequence variant of the config on 8 a100 80gb"],
)
def test_an_experiment_named_in_a_plan_is_planned(text, known):
    assert read(text, known).args.get("experiment") == "configs/long.yaml"


def test_a_memory_alone_after_a_plan_picks_the_gpus_other_size(known):
    earlier = earlier_turn("plan_layouts", {"model": "mistral-7b", "gpu": "a100-40gb", "devices": 2}, "plan mistral")
    intent = read("same w/ 80g", known, earlier)
    assert (intent.command, intent.args.get("gpu"), intent.args.get("devices")) == ("plan", "a100-80gb", 2)


def test_a_memory_no_preset_has_after_a_plan_is_asked_about(known):
    earlier = earlier_turn("plan_layouts", {"model": "mistral-7b", "gpu": "a100-40gb", "devices": 2}, "plan mistral")
    assert read("same with 48gb", known, earlier).clarify


def test_a_forgotten_setting_amends_the_launch_before(known):
    earlier = earlier_turn("launch_run", {"nproc": 2, "layout": "dp_replicate=2", "steps": 20}, "train 20 steps ddp")
    intent = read("oh, I forgot to mention: lr 2e-4 please", known, earlier)
    assert (intent.command, intent.clarify) == ("run", None)
    assert intent.args.get("nproc") == 2 and "train.lr=2e-4" in intent.args.get("set", [])
