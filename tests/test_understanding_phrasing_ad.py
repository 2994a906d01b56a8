"""agent.understanding on the kinds of phrasing fresh_ac's and fresh_ad's requests showed (new sentences of each kind,
not the sets'), each with a near miss that must keep its reading: a shell command asked to be run (refused, never a
launch by its verb "run"), a report or pull request of "the sweep" where there are several, a report written into
the docs, an experiment file as what a plan is for, reported speech and cause clauses, courtesy that is no condition,
status and sweep shorthand, Spanish words mixed into English, the long config described, an amendment of a launch
just asked, and "resume" with nothing preempted.

The fixture repository is the benchmark's (bench.agent_understanding.build_fixture), as in tests/test_understanding.py.
"""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from agent.offline import _newest_preempted
from tests.understanding_support import read, read_as


def _after(text: str, name: str, args: dict) -> list:
    """A conversation's earlier turn: `text` answered with the call `name(args)`, which the user rejected."""
    call = {"name": name, "args": args, "id": "call-1"}
    return [HumanMessage(text), AIMessage("", tool_calls=[call]),
            ToolMessage(json.dumps({"rejected": True}), tool_call_id="call-1", name=name)]  # fmt: skip


@pytest.mark.parametrize(
    "text",
    [
        "could you execute du -sh on the sweeps directory",
        "please run `ls -la runs/` and tell me what's in there",
        "just run rm dash rf on the sweeps folder real quick",
        "my lead wants you to type sudo reboot into the terminal",
        "run this in bash for me: nvidia-smi",
        "can you run a shell command for me",
    ],
)
def test_shell_commands_are_refused(text, known):
    intent = read(text, known)
    assert intent.refusal and "shell" in intent.refusal and intent.command == "help"


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("run 20 steps on 2 gpus", {"nproc": 2, "steps": 20}),
        ("run the long config on 4 gpus with fsdp", {"nproc": 4, "experiment": "configs/long.yaml"}),
    ],
)
def test_a_launch_said_with_run_is_no_shell_command(text, args, known):
    read_as(text, "run", args, known)


def test_a_run_going_in_a_terminal_is_no_shell_command(known):
    read_as("tp-try is running in my terminal, how is it doing?", "status", {"run": "runs/tp-try"}, known)


def test_a_shell_command_negated_is_no_refusal(known):
    read_as("don't run rm -rf on anything, just cancel r1", "cancel", {"run": "runs/r1"}, known)


@pytest.mark.parametrize(
    ("text", "command"),
    [
        ("draft the report on the sweep please", "report"),
        ("Priya needs a pull request for the sweep", "pr"),
        ("make a PR out of the sweep's results", "pr"),
        ("write up the report for whichever sweep it was, I can't recall its name", "report"),
        ("write a report", "report"),  # no sweep said at all: the latest would be a guess among two
    ],
)
def test_the_sweep_among_several_is_asked(text, command, known):
    intent = read(text, known)
    assert intent.command == command and intent.clarify and "layouts-nov or lr-scan" in intent.clarify


@pytest.mark.parametrize(
    ("text", "command", "args"),
    [
        ("write a report on the newest sweep", "report", {"sweep": "sweeps/layouts-nov"}),  # the latest, said
        ("open a PR for the latest sweep", "pr", {"sweep": "sweeps/layouts-nov"}),
        ("write the report for the lr-scan sweep", "report", {"sweep": "sweeps/lr-scan"}),
        ("bring the docs up to date", "docs", {}),  # update_docs' own default: the newest finished sweep
    ],
)
def test_a_sweep_said_or_left_to_the_default_is_acted_on(text, command, args, known):
    read_as(text, command, args, known)


def test_the_sweep_of_the_conversation_is_the_one_reported(known):
    earlier = _after("show me the lr-scan sweep", "read_sweep", {"sweep": "sweeps/lr-scan"})
    intent = read("now write the report for the sweep", known, earlier)
    assert (intent.command, intent.clarify, intent.args.get("sweep")) == ("report", None, "sweeps/lr-scan")


def test_a_report_written_into_the_docs_is_a_report(known):
    read_as("draft a report of the layouts sweep into the docs, on a local branch", "report",
            {"sweep": "sweeps/layouts-nov"}, known)  # fmt: skip


def test_results_written_into_the_docs_update_them(known):
    read_as("put the lr-scan numbers into the docs", "docs", {"sweep": "sweeps/lr-scan"}, known)


@pytest.mark.parametrize(
    "text",
    [
        "rank the layouts for configs/long.yaml on 8 h100s",
        "which parallelisation of the experiment configs/long.yaml fits on 8 H100 cards?",
        "plan configs/long.yaml on 8 h100s",
    ],
)
def test_an_experiment_file_planned_for_is_the_plan_s_experiment(text, known):
    read_as(text, "plan", {"experiment": "configs/long.yaml", "devices": 8}, known)


def test_an_experiment_file_asked_about_is_read(known):
    read_as("which layouts does configs/long.yaml use?", "read", {"path": "configs/long.yaml"}, known)


def test_an_order_relayed_with_its_cause_is_the_order(known):
    read_as("Ana asked me to start an fsdp run on 4 GPUs again, this time with packing off because the previous one "
            "was too slow", "run", {"nproc": 4, "layout": "dp_shard=4", "set": ["data.packing=false"]},
            known)  # fmt: skip


def test_a_vague_change_outside_the_cause_is_still_asked(known):
    intent = read("since the last one crashed, launch fsdp on 2 gpus but smaller", known)
    assert intent.command == "run" and intent.clarify and "What should change" in intent.clarify


@pytest.mark.parametrize(
    "text", ["Tom asked whether we should launch 20 steps on 2 gpus", "Ana wonders if we ought to cancel r1"]
)
def test_a_question_relayed_is_asked_back(text, known):
    intent = read(text, known)
    assert intent.command in ("run", "cancel") and intent.clarify and "yes / edit" in intent.clarify


def test_a_polite_request_relayed_is_asked_back(known):
    # Tom's ask, relayed: the user has not ordered it (probe3 p521, probe7 p7_103; "I wonder if you could cancel r1"
    # is the user's own and acts, tests/test_understanding_nlu52.py)
    intent = read("Tom asked if you could cancel r1", known)
    assert intent.command == "cancel" and intent.clarify and "yes / edit" in intent.clarify


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("could you start 30 steps of fsdp on 2 gpus? only if that's no bother, of course",
         {"nproc": 2, "steps": 30, "layout": "dp_shard=2"}),
        ("no pressure, but could you launch 30 steps on 4 gpus with ddp",
         {"nproc": 4, "steps": 30, "layout": "dp_replicate=4"}),
        ("train 40 steps with tp=2 on 2 gpus, if that makes sense", {"nproc": 2, "steps": 40, "layout": "tp=2"}),
    ],
)  # fmt: skip
def test_courtesy_is_no_condition_and_no_setting(text, args, known):
    read_as(text, "run", args, known)


def test_a_real_condition_still_holds_the_launch_back(known):
    intent = read("train 20 steps on 2 gpus if the loss makes sense", known)
    assert intent.command == "run" and intent.clarify and "depends" in intent.clarify


@pytest.mark.parametrize("text", ["tp-try st?", "baseline-ddp stat?"])
def test_status_shorthand_is_a_status(text, known):
    intent = read(text, known)
    assert (intent.command, intent.clarify) == ("status", None)


def test_an_ordinal_st_is_no_status(known):
    assert read("launch 50 steps of fsdp on 2 gpus, my 1st?", known).command == "run"


def test_a_sweep_s_planner_pick_against_what_was_measured_is_read_from_the_sweep(known):
    read_as("lr-scan: measured against predicted?", "trials", {"sweep": "sweeps/lr-scan"}, known)


def test_a_run_s_predicted_against_measured_is_its_results(known):
    read_as("r1: measured vs predicted memory", "results", {"run": "runs/r1"}, known)


def test_spanish_words_in_an_english_launch_are_read(known):
    read_as("oye, start un run on 2 GPUs, pipeline parallel de 2, micro batch de 4 y 30 steps", "run",
            {"nproc": 2, "layout": "pp=2", "steps": 30, "set": ["train.micro_batch=4"]}, known)  # fmt: skip


def test_spanish_resume_is_a_resume(known):
    read_as("el tp-try got preempted ayer, reanúdalo porfa", "resume", {"run": "runs/tp-try"}, known)


def test_spanish_follow_up_asks_again_of_another_run(known):
    earlier = _after("cómo le fue al r1?", "read_results", {"run": "runs/r1"})
    intent = read("y el de tp-try?", known, earlier)
    assert (intent.command, intent.clarify, intent.args.get("run")) == ("results", None, "runs/tp-try")


def test_a_lone_y_is_no_spanish(known):
    read_as("plot x and y for r1", "results", {"run": "runs/r1"}, known)


@pytest.mark.parametrize(
    "text",
    [
        "train the longer-context variant of our config on 2 gpus with fsdp",
        "launch the config with 1024 tokens on 2 gpus, fsdp",
    ],
)
def test_the_long_config_described_is_launched(text, known):
    read_as(text, "run", {"experiment": "configs/long.yaml", "nproc": 2, "layout": "dp_shard=2"}, known)


def test_a_config_described_that_no_file_fits_is_asked(known):
    intent = read("launch the config with 2048 tokens on 2 gpus, fsdp", known)
    assert intent.command == "run" and intent.clarify


def test_an_amendment_changes_the_launch_just_asked(known):
    launch = {"nproc": 2, "layout": "dp_shard=2", "steps": 20}
    earlier = _after("launch 20 steps of fsdp on 2 gpus", "launch_run", launch)
    intent = read("oh sorry, I forgot to mention: make the warmup 4 and turn on the activation checkpointing",
                  known, earlier)  # fmt: skip
    assert (intent.command, intent.clarify) == ("run", None)
    assert {k: intent.args.get(k) for k in launch} == launch
    assert sorted(intent.args["set"]) == ["train.activation_checkpointing=true", "train.warmup_steps=4"]


@pytest.mark.parametrize(
    ("text", "value"),
    [("turn on the packing, 20 steps on 2 gpus with fsdp", "true"),
     ("please don't switch on the packing, 20 steps on 2 gpus with fsdp", "false")],
)  # fmt: skip
def test_a_switch_s_article_keeps_its_verb_and_negation(text, value, known):
    intent = read(text, known)
    assert intent.command == "run" and f"data.packing={value}" in intent.args.get("set", [])


def test_resume_with_nothing_preempted_asks_which():
    reply = _newest_preempted({"runs": [{"run": "runs/r1", "status": "finished"}]}, "runs").text
    assert reply.rstrip().endswith("?")
