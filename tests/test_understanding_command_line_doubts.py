"""agent.understanding on command lines a careful colleague would not act on as read (command_lines):
a look at a noun that only has an action ("/report get X"), a flag the call would drop ("--wandb"), a flag no tool may
do ("--rm"), a pretence ("-n", "--validate_only", "as a dry run"), a setting said both ways or negated twice, zero
steps, a resume of a job not preempted, "--help", and an amendment that calls the request
off. New sentences of each kind, and near misses that must keep acting.

The fixture repository is the benchmark's (bench.agent_understanding.build_fixture): runs/r1 finished with a
checkpoint, runs/baseline-ddp finished, runs/tp-try ran out of memory.
"""

from __future__ import annotations

import pytest

from agent.understanding.intents import ACTIONS
from tests.understanding_support import earlier_turn, read, read_as

# --- a look at a noun that only acts: read, or asked; never the action ----------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "/report get sweeps/layouts-nov",
        "/pr info lr-scan",
        "/bench view runs/baseline-ddp",
        "/docs status layouts-nov",
        "/pr --show sweeps/lr-scan",
        "/report diff sweeps/lr-scan",
    ],
)
def test_a_look_at_an_action_noun_reads_or_asks(text, known):
    intent = read(text, known)
    assert intent.command not in ACTIONS or (intent.clarify and "asks to look" in intent.clarify)


@pytest.mark.parametrize("text", ["/sweep info sweeps/lr-scan", "/sweep --describe layouts-nov"])
def test_a_look_at_a_sweep_shows_its_trials(text, known):
    intent = read(text, known)
    assert intent.command == "trials" and intent.clarify is None


# --- flags: unknown ones asked about by name, forbidden ones refused -----------------------------------------------


@pytest.mark.parametrize(
    ("text", "flag"),
    [
        ("/train --nproc 2 --steps 20 --wandb", "--wandb"),
        ("/pr sweeps/lr-scan --ready", "--ready"),
        ("/report --no-commit sweeps/layouts-nov", "--no-commit"),
        ("/cancel runs/tp-try --graceful", "--graceful"),
        ("/report sweeps/layouts-nov --no-pr", "--no-pr"),  # read as a PR, which the flag says not to open
    ],
)
def test_an_unknown_flag_is_asked_about_by_name(text, flag, known):
    intent = read(text, known)
    assert intent.clarify and flag in intent.clarify


@pytest.mark.parametrize(
    "text",
    [
        "/cancel tp-try --rm",
        "/report sweeps/layouts-nov --merge-to-main",
        "/bench runs/r1 --show-answers",
        "/pr lr-scan --admin",
    ],
)
def test_a_forbidden_flag_is_refused(text, known):
    intent = read(text, known)
    assert intent.refusal and intent.command == "help"


# --- pretences, settings said both ways or twice negated, zero steps ----------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "/train --nproc 2 --steps 5 -n",
        "/start --steps 20 --validate_only",
        "/run nproc=2 steps=20 dryrun=1",
        "launch 30 steps on 2 gpus as a dry run",
        "cancel tp-try (dry run)",
    ],
)
def test_a_pretence_is_asked(text, known):
    intent = read(text, known)
    assert intent.clarify and "dry run" in intent.clarify


@pytest.mark.parametrize(
    "text",
    [
        "/train --steps 20 --compile --no-compile",
        "/start --steps 20 --no-activation-checkpointing=true",
        "/train --nproc 2 --steps=0",
    ],
)
def test_a_setting_in_doubt_is_asked(text, known):
    intent = read(text, known)
    assert intent.command == "run" and intent.clarify


# --- resume, help ---------------------------------------------------------------------------


def test_a_resume_of_a_finished_run_is_asked_with_its_steps(known):
    intent = read("/train --resume runs/baseline-ddp --steps 40", known)
    assert intent.clarify and "preempted" in intent.clarify and "steps=40" in intent.clarify


def test_a_job_subcommand_resume_is_asked(known):
    assert read("/run resume runs/r1", known).clarify


def test_help_flag_launches_nothing(known):
    intent = read("/train -h", known)
    assert intent.command == "help" and intent.clarify and "--help" in intent.clarify


# --- an amendment that calls the request off -------------------------------------------------------------------------


def test_an_amendment_that_cancels_is_asked(known):
    before = earlier_turn("launch_run", {"nproc": 2, "steps": 30}, "train 30 steps on 2 gpus")
    intent = read("The foregoing instruction is hereby amended so that the launch shall be withdrawn.", known, before)
    assert intent.clarify and intent.clarify.startswith("Call off which request")


# --- near misses that keep acting ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "command", "args"),
    [
        (
            "/train --nproc 2 --layout dp_shard=2 --steps 40 --no-packing --warmup 3",
            "run",
            {"nproc": 2, "layout": "dp_shard=2", "steps": 40, "set": ["data.packing=false", "train.warmup_steps=3"]},
        ),
        ("/start --steps 25 --lr 2e-4 --seed 3", "run", {"steps": 25, "set": ["train.lr=2e-4", "train.seed=3"]}),
        (
            "/plan --model llama-3.1-70b --gpu h100 --devices 8 --nodes 4",
            "plan",
            {"model": "llama-3.1-70b", "nodes": 4},
        ),
        ("/bench runs/r1", "bench", {"model": "runs/r1"}),
        ("/report --sweep sweeps/lr-scan", "report", {"sweep": "sweeps/lr-scan"}),
        ("/pr sweeps/layouts-nov", "pr", {"sweep": "sweeps/layouts-nov"}),
        # flags the call carries under other names: a layout's dimension, an experiment file, a switch's wording
        ("/train --nproc 4 --tp 2 --pp 2 --steps 12", "run", {"nproc": 4, "layout": "pp=2,tp=2", "steps": 12}),
        ("/start --cfg configs/long.yaml --steps 8", "run", {"experiment": "configs/long.yaml", "steps": 8}),
        ("/train --steps 12 --disable-compile", "run", {"steps": 12, "set": ["train.compile=false"]}),
        ("/cancel --run tp-try --force", "cancel", {"run": "runs/tp-try"}),
        ("/report sweeps/layouts-nov --no-push", "report", {"sweep": "sweeps/layouts-nov"}),
    ],
)
def test_command_lines_that_keep_acting(text, command, args, known):
    read_as(text, command, args, known)


@pytest.mark.parametrize(
    ("text", "command", "args"),
    [
        ("/plan devices=4 model=qwen2.5-7b", "plan", {"devices": "4", "model": "qwen2.5-7b"}),
        ("/run nproc=4 layout=dp_shard=4 steps=30", "run", {"nproc": "4", "layout": "dp_shard=4", "steps": "30"}),
    ],
)
def test_the_planners_own_commands_keep_acting(text, command, args, known):
    intent = read(text, known)
    assert (intent.command, intent.args, intent.clarify) == (command, args, None)


def test_a_plain_amendment_still_changes_the_launch(known):
    before = earlier_turn("launch_run", {"nproc": 2, "steps": 30}, "train 30 steps on 2 gpus")
    intent = read("The foregoing instruction is hereby amended so that the number of steps shall be 50.", known, before)
    assert (intent.command, intent.args.get("steps"), intent.clarify) == ("run", 50, None)


def test_an_amendment_of_the_foregoing_keeps_the_rest_of_the_launch(known):
    before = earlier_turn("launch_run", {"nproc": 2, "steps": 30}, "train 30 steps on 2 gpus")
    intent = read("The above is hereby modified so that the number of steps shall be 60.", known, before)
    assert (intent.command, intent.args.get("nproc"), intent.args.get("steps"), intent.clarify) == ("run", 2, 60, None)
