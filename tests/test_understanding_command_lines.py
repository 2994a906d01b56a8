"""agent.understanding on requests typed as a command line (new sentences of each kind, not a request set's, and near
misses that must read as before): a slash word the planner does not have ("/train", "/cat PATH", "/benchmark RUN"),
`--flag value`, `--flag=value` and `--no-flag` options after any slash word, a noun's subcommand ("/sweep view X"),
and a thing piped into an action's noun ("runs/tp-try -> bench"). The planner's own exact slash commands are read as
typed, as before.

The fixture repository is the benchmark's (bench.agent_understanding.build_fixture), as in tests/test_understanding.py.
"""

from __future__ import annotations

import pytest

from tests.understanding_support import earlier_turn, read, read_as

# --- slash words and flags read as the words they are ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "command", "args"),
    [
        (
            "/train --nproc 2 --layout tp=2 --steps 30 --no-compile",
            "run",
            {"nproc": 2, "layout": "tp=2", "steps": 30, "set": ["train.compile=false"]},
        ),
        ("/start --steps=15 --nproc=2 --layout=dp_shard=2", "run", {"nproc": 2, "layout": "dp_shard=2", "steps": 15}),
        (
            "/launch --nproc 2 --layout dp_shard=2 --steps 20 --no-activation-checkpointing",
            "run",
            {"nproc": 2, "steps": 20, "set": ["train.activation_checkpointing=false"]},
        ),
        # the planner's own command with flags in place of key=value: today it inspected this machine's hardware
        (
            "/plan --model qwen2.5-72b --gpu h100 --devices 8 --nodes 2",
            "plan",
            {"model": "qwen2.5-72b", "devices": 8, "nodes": 2},
        ),
        ("/report --sweep sweeps/layouts-nov", "report", {"sweep": "sweeps/layouts-nov"}),
        ("/cat runs/tp-try/log.txt", "read", {"path": "runs/tp-try/log.txt"}),
        ("/benchmark runs/tp-try", "bench", {"model": "runs/tp-try"}),
        ("/bench runs/baseline-ddp", "bench", {"model": "runs/baseline-ddp"}),  # a bare word /bench takes none of
        # a noun's subcommand: what it shows is read (today "/sweep ..." started a sweep, whatever followed)
        ("/sweep view sweeps/lr-scan", "trials", {"sweep": "sweeps/lr-scan"}),
        ("/sweep start --trials 3", "sweep", {"trials": 3}),
    ],
)
def test_command_lines_read_as_their_words(text, command, args, known):
    read_as(text, command, args, known)


def test_flags_after_a_slash_launch_carry_into_a_follow_up(known):
    earlier = earlier_turn(
        "launch_run", {"nproc": 2, "layout": "tp=2", "steps": 30}, "/train --nproc 2 --layout tp=2 --steps 30"
    )
    intent = read("again --no-packing --warmup 5", known, earlier)
    assert (intent.command, intent.clarify) == ("run", None)
    assert {key: intent.args.get(key) for key in ("nproc", "layout", "steps")} == {
        "nproc": 2,
        "layout": "tp=2",
        "steps": 30,
    }
    assert sorted(intent.args["set"]) == ["data.packing=false", "train.warmup_steps=5"]


# --- near misses: the planner's own commands, unknown words, refusals, conditions -----------------------------------


@pytest.mark.parametrize(
    ("text", "command", "args", "words"),
    [
        ("/plan devices=8 model=llama-3.1-8b", "plan", {"devices": "8", "model": "llama-3.1-8b"}, []),
        (
            "/run nproc=2 steps=5 wait=no set=data.packing=false",
            "run",
            {"nproc": "2", "steps": "5", "wait": "no", "set": ["data.packing=false"]},
            [],
        ),
        ("/status runs/tp-try", "status", {}, ["runs/tp-try"]),
        ("/compare r1 tp-try", "compare", {}, ["r1", "tp-try"]),
        ("/read notes.md", "read", {}, ["notes.md"]),
        ("/report sweep=sweeps/lr-scan", "report", {"sweep": "sweeps/lr-scan"}, []),
    ],
)
def test_the_planners_own_commands_read_as_typed(text, command, args, words, known):
    intent = read(text, known)
    assert (intent.command, intent.args, intent.words, intent.clarify) == (command, args, words, None)


@pytest.mark.parametrize("text", ["/frobnicate", "/frobnicate --fast", "/deploy to staging"])
def test_a_slash_word_that_reads_as_nothing_is_unknown(text, known):
    intent = read(text, known)
    assert (intent.command, intent.args) == ("help", {"unknown": text.split()[0]})


def test_a_slash_word_that_deletes_is_refused(known):
    assert read("/rm runs/tp-try", known).refusal


def test_a_command_line_put_off_is_held_back(known):
    intent = read("/train --nproc 2 --layout dp_shard=2 --steps 20 once r1 finishes", known)
    assert intent.command == "run" and intent.clarify


@pytest.mark.parametrize(
    "text", ["/train --nproc 2 --layout tp=2 --steps 10 --dry-run", "cancel tp-try --noop", "/sweep start --dry_run"]
)
def test_a_dry_run_flag_acts_on_nothing(text, known):
    intent = read(text, known)  # no tool pretends: the action without the flag would be real
    assert intent.clarify and intent.clarify.startswith("I have no dry run")


def test_a_no_that_is_no_flag_still_takes_back(known):
    intent = read("cancel tp-try --no wait, don't", known)
    assert intent.command == "cancel" and intent.clarify  # taken back: asked, never cancelled


# --- a thing piped into an action's noun ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "command", "args"),
    [
        ("runs/tp-try -> bench", "bench", {"model": "runs/tp-try"}),
        ("lr-scan sweep -> pr", "pr", {"sweep": "sweeps/lr-scan"}),
        ("sweep layouts-nov => report", "report", {"sweep": "sweeps/layouts-nov"}),
    ],
)
def test_a_thing_piped_into_an_action(text, command, args, known):
    read_as(text, command, args, known)


def test_an_action_before_the_arrow_is_not_dropped(known):
    assert read("cancel tp-try -> report", known).command == "cancel"


def test_an_arrow_between_values_is_a_change(known):
    read_as("plan llama-3.1-8b on 8 h100s, context 1024 -> 2048 tokens", "plan", {"devices": 8, "seq_len": 2048}, known)
