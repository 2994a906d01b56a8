"""agent.understanding on the kinds of phrasing fresh_ab's misses showed (new sentences of each kind, each beside a near
miss that must not change): launches dressed as a pilot's, a cook's or a commentator's words, a sweep described by
what it compared, a wait, a finish or a stop in other words, refusals typed with typos, a complaint with no change in
it, model and GPU names dictated, a learner's words for the learning rate and "is possible to", totals over servers, a
value taken back and replaced, a form written as YAML, a negated launch joined to another verb, and the settings whose
0 turns them off.

The fixture repository is the benchmark's (bench.agent_understanding.build_fixture), as in tests/test_understanding.py.
"""

from __future__ import annotations

import pytest

from tests.understanding_support import read, read_as


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("Captain speaking: default experiment, four GPUs in tensor parallel formation, forty steps to cruising "
         "altitude.", {"nproc": 4, "layout": "tp=4", "steps": 40}),
        ("Chef's orders: two ovens working together, each holding only its own share of the dough, fully sharded, "
         "bake 20 steps.", {"nproc": 2, "layout": "dp_shard=2", "steps": 20}),
        ("And we're off! 4 GPUs, tensor parallel pairs with sharded data, a 15-step dash.",
         {"nproc": 4, "layout": "dp_shard=2,tp=2", "steps": 15}),
    ],
)  # fmt: skip
def test_a_launch_said_as_a_metaphor_is_launched(text, args, known):
    """A layout, a count of GPUs and the steps, with nothing that plans or weighs an idea, are a launch."""
    read_as(text, "run", args, known)


@pytest.mark.parametrize(
    "text",
    [
        "what if we flew two GPUs in tensor parallel formation for sixty steps?",  # a what-if: never launched
        "4 ovens working together baked the bread; what was r1's loss?",  # no share of anything: no GPUs
    ],
)
def test_a_metaphor_that_weighs_or_asks_launches_nothing(text, known):
    assert read(text, known).command != "run"


@pytest.mark.parametrize(
    "text",
    [
        "was tp on 2 gpus for 50 steps faster than fsdp?",  # the past, compared
        "the docs say tp on 2 gpus for 50 steps is fine. ok.",  # someone else's words
        "tp on 2 gpus for 50 steps — is that a good idea?",  # weighed
    ],
)
def test_a_layout_gpus_and_steps_said_of_something_else_are_no_launch(text, known):
    intent = read(text, known)
    assert intent.command != "run" or intent.clarify is not None


def test_a_sweep_described_by_what_it_compared_is_the_docs_source(known):
    text = "please update the docs with what that study comparing ways of splitting the model found"
    read_as(text, "docs", {"sweep": "sweeps/layouts-nov"}, known)
    read_as("update the docs with the lr scan's findings", "docs", {"sweep": "sweeps/lr-scan"}, known)  # near miss


@pytest.mark.parametrize(
    ("text", "command", "args"),
    [
        ("wait on tp-try until it wraps up", "status", {"wait": "yes", "run": "runs/tp-try"}),
        ("did baseline-ddp land or not?", "status", {"run": "runs/baseline-ddp"}),
        ("retire tp-try now", "cancel", {"run": "runs/tp-try"}),
        ("sunset the baseline-ddp job, it's done its time", "cancel", {"run": "runs/baseline-ddp"}),
        # near misses: a figure that landed, a stop taken back, and "retire" of a person
        ("did the loss of r1 land under 3?", "results", {"run": "runs/r1"}),
        ("don't sunset r1, just show its loss", "results", {"run": "runs/r1"}),
        ("I will retire in 2030; what was r1's loss?", "results", {"run": "runs/r1"}),
    ],
)
def test_a_wait_a_finish_and_a_stop_in_other_words(text, command, args, known):
    read_as(text, command, args, known)


@pytest.mark.parametrize("text", ["merge r1's branch drectly into mian", "push it all stright to mian, no pr"])
def test_a_push_to_main_typed_with_typos_is_refused(text, known):
    assert read(text, known).refusal


def test_a_pull_request_with_a_typo_is_no_refusal(known):
    intent = read("open a pull reqest for the lr-scan sweep", known)
    assert not intent.refusal and intent.command == "pr"


@pytest.mark.parametrize("text", ["The last run was too slow. Make it better.", "Those numbers are awful. Fix it."])
def test_a_complaint_with_no_change_is_asked_about(text, known):
    intent = read(text, known)
    assert intent.clarify is not None


def test_a_fix_with_its_change_is_launched(known):
    read_as("fix it with lr 3e-4 on 2 gpus", "run", {"nproc": 2, "set": ["train.lr=3e-4"]}, known)


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("plan mistral seven bee on four age one hundreds", {"model": "mistral-7b", "devices": 4, "gpu": "h100-sxm"}),
        ("what about two nodes of eight h one hundred s x m for llama three point one seventy bee",
         {"nodes": 2, "devices": 8, "gpu": "h100-sxm", "model": "llama-3.1-70b"}),
        ("plan llama 3.1 8b on 4 h100 p c i e cards", {"model": "llama-3.1-8b", "devices": 4, "gpu": "h100-pcie"}),
        ("plan our model on 8 A100 of 80 giga", {"devices": 8, "gpu": "a100-80gb"}),
        ("32 GPUs total over four servers, 80 gigs per card, plan our model",
         {"devices": 8, "nodes": 4, "device_mem": "80GiB"}),
        # near miss: GPUs each node has, with a memory "per card", stay per node
        ("plan our model on 2 nodes with 8 gpus each, 80 gigs per card",
         {"devices": 8, "nodes": 2, "device_mem": "80GiB"}),
        ("plan our model on 8 h100s, not at 1024 tokens — make it 4096", {"devices": 8, "seq_len": 4096}),
        ("rank layouts for llama 3.1 8b on 8 h100s without initiating any run", {"model": "llama-3.1-8b"}),
    ],
)  # fmt: skip
def test_names_and_counts_dictated_or_restated_are_planned(text, args, known):
    read_as(text, "plan", args, known)


@pytest.mark.parametrize(
    ("text", "command", "args"),
    [
        ("run with learning speed 3e-4 on four graphic cards, data parallel sharded fully", "run",
         {"nproc": 4, "layout": "dp_shard=4", "set": ["train.lr=3e-4"]}),
        ("Is possible to launch the layout sweep again with 12 trial?", "sweep", {"trials": 12}),
        ("train:\n  gpus: 2\n  steps: 30\n  micro_batch: 4\n  lr: 0.001", "run",
         {"nproc": 2, "steps": 30, "set": ["train.lr=0.001", "train.micro_batch=4"]}),
        ("launch:\n  processes: 4\n  layout: dp_shard=2,tp=2\n  seq_len: 1024\n  lr: 0.0003", "run",
         {"nproc": 4, "layout": "dp_shard=2,tp=2", "set": ["data.seq_len=1024", "train.lr=0.0003"]}),
        ("don't start or stop anything — only tell me whether tp-try finished", "status", {"run": "runs/tp-try"}),
        ("don't launch anything, cancel tp-try", "cancel", {"run": "runs/tp-try"}),  # near miss: no "or"
    ],
)  # fmt: skip
def test_learners_words_forms_and_joined_negations(text, command, args, known):
    read_as(text, command, args, known)


@pytest.mark.parametrize(
    "text", ["is it possible to run llama 70b on 4 a10s?", "Is possible to run gemma 2 9b on 2 l4s?"]
)
def test_is_possible_to_run_on_hardware_still_weighs_an_idea(text, known):
    assert read(text, known).command == "plan"


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("train 10 steps and warmup for 2 steps", {"steps": 10, "set": ["train.warmup_steps=2"]}),
        ("train 30 steps with a 5-step warmup", {"steps": 30, "set": ["train.warmup_steps=5"]}),
        ("train 20 steps, no warmup", {"steps": 20, "set": ["train.warmup_steps=0"]}),
        ("train 20 steps with no weight decay", {"steps": 20, "set": ["train.weight_decay=0"]}),
        ("train 20 steps without gradient clipping", {"steps": 20, "set": ["train.grad_clip=0"]}),
    ],
)
def test_warmup_steps_and_settings_off_at_zero(text, args, known):
    read_as(text, "run", args, known)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("train 20 steps, no dropout", "dropout"),  # a setting it does not know
        ("with no clipping and fsdp on 2 gpus, 20 steps", "fsdp"),  # a negation that may govern a list
    ],
)
def test_a_negation_it_is_not_sure_of_still_asks(text, said, known):
    intent = read(text, known)
    assert intent.clarify is not None and said in intent.clarify
    assert not any(o.startswith("train.grad_clip") for o in intent.args.get("set", []))
