"""agent.understanding on the kinds of phrasing a reviewer's probe of 577 sentences found acted on wrongly (new
sentences of each kind, not the probe's, and near misses that must read as before): a launch said only by its facts
in a sentence that is no order (a time, a hedge, a take-back, a wait on someone, a quote, what is usual or was done),
a negated turning-off said with "without" or "no ...ing", a negation of a noun a setting qualifies, shell commands and
launches named beside a shell, waits said as "wraps up" or "lands", Spanish times and conditions, a sweep named by its
age, a run in a past clause or named as the reference, a count of GPUs said as the total over nodes, and an action
named only as the event another waits on.

The fixture repository is the benchmark's (bench.agent_understanding.build_fixture), as in tests/test_understanding.py.
"""

from __future__ import annotations

import pytest

from tests.understanding_support import read, read_as

# --- a launch said only by its facts is no order when the sentence holds it back -----------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "this weekend: 2 GPUs, tensor parallel, 50 steps",
        "8 GPUs FSDP 200 steps, in a perfect world",
        "2 GPUs, FSDP, 30 steps — scratch that",
        '"2 GPUs, FSDP, 30 steps" is what the runbook says',
        "the blog post used 4 GPUs with FSDP for 90 steps",
        "we ran 2 GPUs FSDP for 30 steps two days ago",
        "Ben launched 4 GPUs with FSDP for 60 steps yesterday",
        "plan B: 4 GPUs, FSDP, 60 steps",
        "2 GPUs FSDP 30 steps, pending a sign-off from Ben",
    ],
)
def test_a_launch_said_by_its_facts_but_held_back_is_never_made(text, known):
    intent = read(text, known)
    assert intent.command != "run" or intent.clarify is not None  # asked, or a plan (read-only)


@pytest.mark.parametrize(
    "text",
    [
        "three GPUs with FSDP, 70 steps",
        "2 GPUs, FSDP, 30 steps, please",
        "go: 2 GPUs, FSDP, 30 steps",
        "the default experiment file, 2 GPUs, FSDP, 30 steps",  # the file to use, not what is usual
    ],
)
def test_a_launch_said_by_its_facts_alone_still_launches(text, known):
    intent = read(text, known)
    assert (intent.command, intent.clarify) == ("run", None)


def test_a_launch_verb_beside_a_past_run_still_launches(known):
    read_as("launch 2 GPUs FSDP 30 steps, like the one I started yesterday", "run", {"nproc": 2, "steps": 30}, known)


# --- "without"/"no" before a turning-off keep the setting; a negated noun of a setting sets nothing ---------------


@pytest.mark.parametrize(
    "text",
    [
        "train 20 steps without switching off compile",
        "train 20 steps, no disabling of activation checkpointing",
        "no hurry on compile, train 20 steps",
        "train 20 steps, no grad clipping problems lately",
        "train 20 steps; no weight decay complaints from anyone",
    ],
)
def test_a_negated_turning_off_or_a_negated_noun_sets_nothing(text, known):
    intent = read(text, known)
    assert (intent.command, intent.clarify, intent.args.get("set", [])) == ("run", None, [])
    assert intent.args["steps"] == 20


@pytest.mark.parametrize(
    ("text", "setting"),
    [
        ("train 20 steps without packing", "data.packing=false"),
        ("train 20 steps, no packing", "data.packing=false"),
        ("train 20 steps with no warmup", "train.warmup_steps=0"),
        ("train 20 steps, no gradient clipping", "train.grad_clip=0"),
    ],
)
def test_a_setting_negated_itself_is_still_off(text, setting, known):
    read_as(text, "run", {"steps": 20, "set": [setting]}, known)


# --- shell commands refused; a launch named beside a shell is no shell command -------------------------------------


@pytest.mark.parametrize("text", ["open a console and run htop", "run `python -m pytest` in a terminal"])
def test_a_shell_command_is_refused(text, known):
    intent = read(text, known)
    assert intent.command == "help" and intent.refusal


def test_a_launch_named_beside_a_shell_launches(known):
    read_as("run 20 steps with fsdp on 2 GPUs, the way I'd type it in bash", "run", {"nproc": 2, "steps": 20}, known)


def test_no_merging_to_main_beside_a_report_is_no_refusal(known):
    read_as("write the report for lr-scan; no merging to main", "report", {"sweep": "sweeps/lr-scan"}, known)


def test_pushing_to_main_is_still_refused(known):
    assert read("push the report to main", known).refusal


# --- "wraps up", "lands" are waits ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text", ["benchmark tp-try as soon as it wraps up", "once baseline-ddp has landed, write up layouts-nov"]
)
def test_an_action_waiting_on_a_run_wrapping_up_is_asked(text, known):
    assert read(text, known).clarify is not None


# --- Spanish times and conditions hold a launch back ----------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "luego entrena el run de 2 GPUs y 20 steps",
        "el viernes lanza el run de 2 GPUs y 20 steps",
        "¿entreno el run de 2 GPUs y 20 steps?",
        "si puedes, lanza el run de 2 GPUs y 20 steps",
    ],
)
def test_a_spanish_launch_put_off_or_asked_is_asked(text, known):
    intent = read(text, known)
    assert intent.command == "run" and intent.clarify is not None


def test_a_spanish_launch_for_now_still_launches(known):
    read_as("lanza el run de 2 GPUs y 20 steps", "run", {"nproc": 2, "steps": 20}, known)


# --- a sweep named by its age ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "command"),
    [
        ("write up the oldest sweep", "report"),
        ("read the sweep prior to layouts-nov", "trials"),
        ("the earlier of our sweeps: open a PR for the older sweep", "pr"),
    ],
)
def test_an_older_sweep_is_never_the_newest(text, command, known):
    read_as(text, command, {"sweep": "sweeps/lr-scan"}, known)


def test_the_latest_sweep_is_still_the_newest(known):
    read_as("show me the latest sweep", "trials", {"sweep": "sweeps/layouts-nov"}, known)


# --- a run in a past clause or named as the reference is no target --------------------------------------------------


def test_a_run_in_a_past_clause_after_a_dash_is_no_target(known):
    read_as("benchmark tp-try - we cancelled r1 this morning", "bench", {"model": "runs/tp-try"}, known)


def test_a_run_named_as_the_reference_is_no_target(known):
    read_as("relative to r1's loss, how did tp-try do?", "results", {"run": "runs/tp-try"}, known)


# --- a count of GPUs said as the total over nodes -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "per_node"),
    [
        ("plan llama 3.1 70b on 4 nodes with 32 h100s in total", 8),
        ("plan llama 3.1 70b on 2 nodes with 8 h100s", 8),  # no total said: each node's
    ],
)
def test_a_total_over_nodes_is_divided(text, per_node, known):
    intent = read(text, known)
    assert (intent.command, intent.args["devices"]) == ("plan", per_node)


# --- an action named only as the event another waits on -------------------------------------------------------------


def test_an_action_named_only_as_what_another_waits_on_is_asked(known):
    assert read("archive tp-try after the eval", known).clarify is not None


def test_an_action_asked_for_with_its_own_verb_is_taken(known):
    read_as("benchmark tp-try", "bench", {"model": "runs/tp-try"}, known)


def test_a_spanish_evaluation_asked_is_a_benchmark(known):
    read_as("hola, evalúa tp-try y dime los scores", "bench", {"model": "runs/tp-try"}, known)
