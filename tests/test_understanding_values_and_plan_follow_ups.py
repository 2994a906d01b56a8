"""agent.understanding on values taken back or said loosely, and on follow-ups of a plan or a launch (new sentences of
each kind, and near misses that must read as before): a value taken back for the setting's default is dropped; the
plan said last ("let's start with one node") is the one; a card's variant named as a kind of it ("the PCIe variant of
the H100"); a bare setting or count right after a plan changes that plan; "igualito" is the launch before again; "4 of
em" counts the cards named before; a card named first without its count, then counted; a shell comment that only
explains sets nothing; "do not use any warmup" is warmup 0; "learning speed" is the learning rate; "make the run but
not with ..." is a launch; "same AC" keeps the switch as the launch before had it.

The fixture repository is the benchmark's (bench.agent_understanding.build_fixture), as in tests/test_understanding.py.
"""

from __future__ import annotations

import pytest

from tests.understanding_support import earlier_turn, read, read_as

# --- a value taken back for the setting's default is dropped -----------------------------------------------------


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("train 30 steps on 2 gpus with lr 1e-3 - actually no, keep the default lr", {"nproc": 2, "steps": 30}),
        ("train 30 steps on 2 gpus, warmup 10, hmm, leave the warmup at its default", {"nproc": 2, "steps": 30}),
        ("train on 2 gpus with learning rate 2e-4... on second thought use the default lr", {"nproc": 2}),
    ],
)
def test_a_value_taken_back_for_the_default_is_dropped(text, args, known):
    intent = read(text, known)
    assert (intent.command, intent.clarify, intent.args.get("set")) == ("run", None, None)
    assert {key: intent.args.get(key) for key in args} == args


def test_the_default_of_another_setting_keeps_the_value(known):
    # near miss: the seed's default takes no lr back
    read_as("train 30 steps on 2 gpus, lr 1e-3, actually keep the default seed", "run",
            {"nproc": 2, "steps": 30, "set": ["train.lr=1e-3"]}, known)  # fmt: skip


# --- the plan said last is the one -------------------------------------------------------------------------------


def test_the_node_count_started_with_is_the_plan(known):
    text = "would llama-3.1-70b fit on h200s or does it need 4 nodes? we'll start on a single node of 8, plan that"
    intent = read(text, known)
    assert (intent.command, intent.args.get("nodes"), intent.args.get("devices")) == ("plan", 1, 8)


def test_a_start_said_later_keeps_the_nodes_planned(known):
    intent = read("plan llama-3.1-70b on 2 nodes of 8 h200s, start with 1 node later", known)  # near miss
    assert (intent.command, intent.args.get("nodes")) == ("plan", 2)


# --- a card's variant named as a kind of it ----------------------------------------------------------------------

PLAN = earlier_turn(
    "plan_layouts", {"model": "llama-3.1-8b", "devices": 8, "gpu": "h100"}, "plan llama-3.1-8b on 8 h100s"
)


@pytest.mark.parametrize(
    ("text", "gpu"),
    [
        ("same thing on the nvl version of an h100 please", "h100-nvl"),
        ("now the PCIe flavour of the H100s", "h100-pcie"),
    ],
)
def test_a_variant_of_the_card_is_that_card(text, gpu, known):
    intent = read(text, known, PLAN)
    assert (intent.command, intent.args.get("gpu"), intent.args.get("devices")) == ("plan", gpu, 8)


# --- a bare setting or count right after a plan changes that plan -------------------------------------------------

L40S_PLAN = earlier_turn(
    "plan_layouts", {"model": "gemma-2-9b", "devices": 4, "gpu": "l40s"}, "plan gemma-2-9b on 4 l40s"
)


@pytest.mark.parametrize(("text", "args"), [
    ("seq_len 4096.", {"seq_len": 4096, "devices": 4, "model": "gemma-2-9b"}),
    ("ok and if the sequence length were 1024?", {"seq_len": 1024, "devices": 4, "model": "gemma-2-9b"}),
    ("um how abt 2 tho", {"devices": 2, "model": "gemma-2-9b", "gpu": "l40s"}),
    ("and with 16 instead?", {"devices": 16, "model": "gemma-2-9b", "gpu": "l40s"}),
])  # fmt: skip
def test_a_bare_value_after_a_plan_changes_it(text, args, known):
    intent = read(text, known, L40S_PLAN)
    assert (intent.command, intent.clarify) == ("plan", None)
    assert {key: intent.args.get(key) for key in args} == args


def test_a_launch_verb_with_the_setting_after_a_plan_launches(known):
    intent = read("train it with seq_len 4096", known, L40S_PLAN)  # near miss: a launch asked for
    assert intent.command == "run"


def test_a_bare_count_after_a_plan_over_nodes_is_asked(known):
    plan = earlier_turn("plan_layouts", {"model": "gemma-2-9b", "devices": 4, "nodes": 2, "gpu": "l40s"},
                        "plan gemma-2-9b on 2 nodes of 4 l40s")  # fmt: skip
    intent = read("what about 8", known, plan)  # near miss: 8 GPUs in each node, or 8 nodes?
    assert intent.clarify is not None


def test_a_large_bare_number_after_a_plan_is_asked(known):
    intent = read("what about 2048", known, L40S_PLAN)  # near miss: a sequence length, perhaps
    assert intent.clarify is not None


# --- "igualito": the launch before again ---------------------------------------------------------------------------

SPANISH_LAUNCH = earlier_turn("launch_run", {"nproc": 2, "layout": "dp_shard=2", "steps": 40},
                              "lanza 40 steps con fsdp en 2 gpus")  # fmt: skip


def test_igualito_is_the_launch_before(known):
    intent = read("ahora igualito pero sin compile porfa", known, SPANISH_LAUNCH)
    assert (intent.command, intent.clarify) == ("run", None)
    assert (intent.args.get("nproc"), intent.args.get("steps"), intent.args.get("set")) == (
        2,
        40,
        ["train.compile=false"],
    )


# --- counts of the cards named before, and a card counted after it is first named --------------------------------


def test_of_em_counts_the_cards_named_before(known):
    read_as("we got some l40s cards, plan gemma-2-9b on 2 of 'em", "plan",
            {"gpu": "l40s", "devices": 2, "model": "gemma-2-9b"}, known)  # fmt: skip


def test_a_card_named_then_counted(known):
    read_as("the SXM H100 is pricey. plan mistral-7b on 4 h100 sxm", "plan",
            {"gpu": "h100-sxm", "devices": 4, "model": "mistral-7b"}, known)  # fmt: skip


# --- a shell comment that only explains sets nothing ---------------------------------------------------------------


def test_a_comment_that_explains_sets_nothing(known):
    read_as("launch 20 steps on 2 gpus with dp_shard=2  # baseline crashed without packing", "run",
            {"nproc": 2, "steps": 20, "layout": "dp_shard=2"}, known)  # fmt: skip
    assert (
        read("launch 20 steps on 2 gpus with dp_shard=2  # baseline crashed without packing", known).args.get("set")
        is None
    )


def test_a_comment_that_sets_is_read(known):
    read_as("launch 20 steps on 2 gpus with dp_shard=2  # no packing", "run",
            {"nproc": 2, "steps": 20, "set": ["data.packing=false"]}, known)  # fmt: skip


# --- settings said in other words ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "setting"),
    [("launch 25 steps, don't use warmup", "train.warmup_steps=0"),
     ("launch 25 steps, never use weight decay", "train.weight_decay=0"),
     ("train 30 steps with the learning speed at 1e-3", "train.lr=1e-3"),
     ("train 30 steps, lr put to 3e-4", "train.lr=3e-4")],
)  # fmt: skip
def test_a_setting_said_in_other_words(text, setting, known):
    intent = read(text, known)
    assert (intent.command, intent.clarify, intent.args.get("set")) == ("run", None, [setting])


def test_a_warmup_with_a_value_not_used_is_asked(known):
    intent = read("launch 25 steps, don't use warmup 5", known)  # near miss: not 5, but what then?
    assert intent.clarify is not None


def test_make_the_run_without_a_switch_is_a_launch(known):
    read_as("make the run without compile, 20 steps", "run", {"steps": 20, "set": ["train.compile=false"]}, known)


def test_make_the_training_a_quality_is_asked(known):
    assert read("make the training deterministic", known).clarify is not None  # near miss: no tool does that


# --- "same AC": the switch as the launch before had it -------------------------------------------------------------

YAML_LAUNCH = earlier_turn(
    "launch_run",
    {"experiment": "meshpilot.yaml", "nproc": 2, "layout": "dp_shard=2", "steps": 30},
    "launch meshpilot.yaml on 2 GPUs with dp_shard=2, 30 steps",
)


def test_the_same_switch_keeps_the_launch_before(known):
    intent = read("same packing, but 50 steps", known, YAML_LAUNCH)
    assert (intent.command, intent.clarify, intent.args.get("set")) == ("run", None, None)
    assert (intent.args.get("nproc"), intent.args.get("steps")) == (2, 50)


def test_the_same_switch_as_a_run_is_asked(known):
    assert read("same packing as r1, 50 steps", known, YAML_LAUNCH).clarify is not None  # near miss
