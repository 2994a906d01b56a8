"""agent.understanding on the kinds of phrasing fresh_y's requests showed (new sentences of each kind, not only the
set's): every negation of every boolean setting reaches the launch, nodes counted as copies of one node, a hyphenated
word beside a real run's name, a sequence length said as a change, the latest run said by when it ran, and this
machine's hardware asked after the user's own plans without a comma.

The fixture repository is the benchmark's (bench.agent_understanding.build_fixture), as in tests/test_understanding.py.
"""

from __future__ import annotations

import pytest

from tests.understanding_support import read, read_as

# --- a negated setting is set to false, in every form, never dropped and never flipped ---------------------------

# Each boolean setting by its names (nouns) and by what a user tells the trainer to do (verbs).
SETTING_NOUNS = {
    "data.packing": ["packing", "sequence packing", "packed sequences"],
    "train.activation_checkpointing": ["activation checkpointing", "checkpointing", "AC", "act ckpt",
                                       "activation checkpoints", "activation recomputation"],
    "train.compile": ["compile", "torch.compile", "torch compile", "compilation", "compiling"],
}  # fmt: skip
SETTING_VERBS = {
    "data.packing": ["pack", "pack the sequences"],
    "train.activation_checkpointing": ["checkpoint activations", "checkpoint the activations", "recompute activations"],
    "train.compile": ["compile", "compile the model"],
}
NOUN_NEGATIONS = ["without {}", "no {}", "disable {}", "skip {}", "turn off {}", "drop {}", "avoid {}", "{} off",
                  "{} disabled", "{}: false", "{} should be off", "{} must be disabled", "{} not needed",
                  "don't use {}", "with {} turned off", "leave {} out", "no need for {}",
                  "we won't need {}"]  # fmt: skip
VERB_NEGATIONS = ["don't {}", "do not {}", "never {}", "no need to {}", "please don't {}", "we won't {}"]
LAUNCHES = ["train 10 steps on 2 gpus, {}", "{}, then launch configs/long.yaml on 4 GPUs fully sharded"]


def _negated(key: str) -> list[str]:
    return [form.format(name) for name in SETTING_NOUNS[key] for form in NOUN_NEGATIONS] + [
        form.format(verb) for verb in SETTING_VERBS[key] for form in VERB_NEGATIONS
    ]


@pytest.mark.parametrize("key", sorted(SETTING_NOUNS))
def test_every_negation_of_a_setting_reaches_the_launch(key, known):
    missed = []
    for said in _negated(key):
        for launch in LAUNCHES:
            intent = read(launch.format(said), known)
            if (intent.command, intent.clarify) != ("run", None) or f"{key}=false" not in intent.args.get("set", []):
                missed.append((launch.format(said), intent.args.get("set"), intent.clarify))
    assert missed == []


@pytest.mark.parametrize(
    "said, expected",
    [
        ("packing should be on", "data.packing=true"),
        ("AC must be enabled", "train.activation_checkpointing=true"),
        ("keep compiling on", "train.compile=true"),
        ("with activation checkpoints", "train.activation_checkpointing=true"),
    ],
)
def test_a_setting_stated_on_stays_on(said, expected, known):
    assert read(f"train 10 steps on 2 gpus, {said}", known).args.get("set") == [expected]


def test_the_fresh_y_launch_keeps_both_negations(known):
    intent = read("launch configs/long.yaml on 4 GPUs fully sharded, without packing, and don't checkpoint "
                  "activations", known)  # fmt: skip
    assert sorted(intent.args["set"]) == ["data.packing=false", "train.activation_checkpointing=false"]


@pytest.mark.parametrize(
    "said, expected",
    [
        ("neither packing nor compile", ["data.packing=false", "train.compile=false"]),
        ("avoid bf16, use fp32", ["train.precision=fp32"]),  # the value taken back, another said
        ("with AC to avoid OOM", ["train.activation_checkpointing=true"]),  # avoiding no setting
    ],
)
def test_settings_taken_back_in_other_words(said, expected, known):
    intent = read(f"train 10 steps on 2 gpus, {said}", known)
    assert (sorted(intent.args.get("set", [])), intent.clarify) == (expected, None)


@pytest.mark.parametrize(
    "said, expected",
    [
        ("pack the sequences but don't compile", ["data.packing=true", "train.compile=false"]),
        ("don't compile, and pack the sequences", ["data.packing=true", "train.compile=false"]),  # it was false
        ("no packing and compile the model", ["data.packing=false", "train.compile=true"]),
        ("please checkpoint the activations", ["train.activation_checkpointing=true"]),
    ],
)
def test_a_settings_verb_told_with_its_object_turns_it_on(said, expected, known):
    intent = read(f"train 10 steps on 2 gpus, {said}", known)
    assert (sorted(intent.args.get("set", [])), intent.clarify) == (expected, None)


@pytest.mark.parametrize(
    "said", ["never pack the sequences and compile the model", "should we pack the sequences?", "compile it or not"]
)
def test_a_settings_verb_that_may_share_a_negation_or_is_asked_is_asked_about(said, known):
    """Never X and Y: is Y negated too? A question about X is no instruction to do it: both asked."""
    intent = read(f"train 10 steps on 2 gpus, {said}", known)
    assert intent.clarify and not any(o.endswith("=true") for o in intent.args.get("set", []))


@pytest.mark.parametrize("said", ["avoid bf16", "ditch adam"])
def test_a_value_avoided_with_none_in_its_place_is_asked_about(said, known):
    assert read(f"train 10 steps on 2 gpus, {said}", known).clarify


@pytest.mark.parametrize("text", ["train on 2 gpus, drop act ckpt", "remove activation checkpoints, train on 2 gpus"])
def test_a_setting_dropped_is_no_deletion(text, known):
    intent = read(text, known)
    assert (intent.refusal, intent.args.get("set")) == (None, ["train.activation_checkpointing=false"])


def test_checkpoints_of_a_run_deleted_are_still_refused(known):
    assert read("delete the activation checkpoints in runs/r1", known).refusal is not None


# --- nodes counted as copies of one node -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, args",
    [
        ("3 replicas of a node with 4 L40S each, which layout would you pick?", {"nodes": 3, "devices": 4}),
        ("plan llama 3.1 8b on two copies of a box with 8 H100s", {"nodes": 2, "devices": 8}),
        ("plan llama 3.1 8b on four clones of an 8x H100 node", {"nodes": 4, "devices": 8}),
        ("8 GPUs a node, 2 nodes, plan llama 3.1 8b", {"nodes": 2, "devices": 8}),  # "a node" is per node
    ],
)
def test_copies_of_a_node_are_nodes(text, args, known):
    read_as(text, "plan", args, known)


# --- a hyphenated word beside a real run's name is a word, not another name -------------------------------------


@pytest.mark.parametrize(
    "text, command, args",
    [
        ("our tp-try run is basically the gold-plated reference capture, pull its numbers", "results",
         {"run": "runs/tp-try"}),
        ("the lr-scan sweep is our go-to reference study, who won?", "trials", {"sweep": "sweeps/lr-scan"}),
        ("loss of r1, it's the fp8-ish state-of-the-art setup", "results", {"run": "runs/r1"}),
    ],
)  # fmt: skip
def test_a_hyphenated_word_beside_a_real_name_is_no_name(text, command, args, known):
    read_as(text, command, args, known)


@pytest.mark.parametrize(
    "text",
    [
        "compare r1 with old-base",
        "results of r1 and old-base",
        "old-base's loss vs r1",
        "loss of r1; is that the old-base one?",  # "one" stands for a run
    ],
)
def test_a_hyphenated_word_where_a_name_stands_is_still_asked_about(text, known):
    assert "I find no run or sweep named 'old-base'" in (read(text, known).clarify or "")


# --- a sequence length said as a change: the length it goes to ----------------------------------------------------


@pytest.mark.parametrize(
    "text, command, args",
    [
        ("Going from 512 to 2048 tokens is like a bigger canvas. Layouts for our model at 2048 on 2 A100 80GB "
         "cards? just the estimate", "plan", {"devices": 2, "gpu": "a100-80gb", "seq_len": 2048}),
        ("context from 2k to 8k, plan llama 3.1 8b on 8 h100s", "plan", {"devices": 8, "seq_len": 8192}),
        ("256 -> 1024 tokens, plan our model on 2 h100s", "plan", {"devices": 2, "seq_len": 1024}),
        ("seq len 256 to 1024, plan our model on 2 h100s", "plan", {"devices": 2, "seq_len": 1024}),
        ("we go from 1024 tokens to 4096 tokens, train 10 steps on 2 gpus", "run",
         {"nproc": 2, "steps": 10, "set": ["data.seq_len=4096"]}),
    ],
)  # fmt: skip
def test_a_sequence_length_changed_from_one_to_another_is_the_new_one(text, command, args, known):
    read_as(text, command, args, known)


def test_a_range_that_is_no_sequence_length_is_still_asked_about(known):
    assert read("plan our model on 4 h100s at 2048 tokens, going from 2 to 4 nodes", known).clarify


# --- the latest run said by when it ran -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, command",
    [
        ("Is the training job we ran most recently healthy? Just yes or no on whether it finished fine.", "status"),
        ("did the run I just launched crash?", "status"),
        ("loss of the job we kicked off last", "results"),
        ("is the job that ran last healthy?", "status"),  # a run's health is how it went
    ],
)
def test_the_run_that_ran_last_is_the_latest(text, command, known):
    read_as(text, command, {"run": "runs/r1"}, known)


# --- this machine's hardware, after the user's own plans with no comma between, or asked as what is in it -------


@pytest.mark.parametrize(
    "text",
    [
        "Before we commit any more budget I want to understand what hardware this machine actually has. Can you "
        "pull that together?",
        "before we train anything I'd like to see what hardware we have here",
        "before I launch anything big we need to know what gpus this box has",
        "what's actually inside this machine? cores, gpus, memory",
    ],
)
def test_this_machines_hardware_asked_in_passing_is_inspected(text, known):
    read_as(text, "hardware", {}, known)
