"""agent.understanding on launches that name only a wish, an experiment file given to a launch or a sweep, counts
that follow a plan, and reads of a run (new sentences of each kind, and near misses that must read as before): a
launch that names a quality or a vague choice ("whichever is cheapest", "big enough", yesterday's run) and no setting
is asked about; an experiment file named with a sweep's trials or a launch's facts is their experiment, not a file to
show; docs brought "into conformity with the aforementioned sweep" take the conversation's sweep; "8 of those" after
a plan is its GPUs; "its loss numbers" after a run's status are its results; "tell me the result when it lands" waits
for the run; a roll call of the runs lists them.

The fixture repository is the benchmark's (bench.agent_understanding.build_fixture), as in tests/test_understanding.py.
"""

from __future__ import annotations

import pytest

from tests.understanding_support import earlier_turn, read, read_as

# --- a launch that names only a wish is asked about ----------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "Kick off whichever configuration comes out cheapest.",
        "Start a training run big enough to matter statistically.",
        "Run the optimal setup for me.",
        "launch the quickest thing you can",
        "relance celui d'hier, mais en mieux stp",
        "relaunch the run from yesterday",
    ],
)
def test_a_launch_of_a_wish_alone_is_asked(text, known):
    intent = read(text, known)
    assert intent.command == "run" and intent.clarify and "?" in intent.clarify


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("start a run", {}),
        ("launch a run with the defaults", {}),
        ("kick off a training run", {}),
        ("start a run, whatever", {}),  # a shrug, no choice to make
        ("start a run, I think it's best to keep the defaults", {}),
        ("I launched one yesterday. start a run now", {}),  # when something else was done
        ("train 20 steps on 2 GPUs, whichever layout is quickest", {"steps": 20, "nproc": 2}),  # the facts said
    ],
)
def test_a_plain_or_stated_launch_still_launches(text, args, known):
    read_as(text, "run", args, known)


# --- an experiment file named for a sweep or a launch is its experiment ------------------------------------------


def test_a_file_with_a_sweeps_trials_is_swept(known):
    read_as("Sweep of 6 trials on configs/long.yaml, not the default one.", "sweep",
            {"experiment": "configs/long.yaml", "trials": 6}, known)  # fmt: skip


def test_a_file_with_a_launchs_facts_is_launched(known):
    # ("fixture": a match, no edit of the file)
    read_as("Another fixture on configs/long.yaml, 2 GPUs, compile off", "run",
            {"experiment": "configs/long.yaml", "nproc": 2, "set": ["train.compile=false"]}, known)  # fmt: skip


def test_a_file_opened_is_still_read(known):
    read_as("open configs/long.yaml, I want to check the trials", "read", {"path": "configs/long.yaml"}, known)


SWEEP_READ = earlier_turn("read_trials", {"sweep": "sweeps/lr-scan"}, "what did sweeps/lr-scan find?")


def test_docs_brought_into_conformity_with_the_sweep_said_before(known):
    intent = read("please bring the README into conformity with the aforementioned sweep", known, [*SWEEP_READ])
    assert (intent.command, intent.args, intent.clarify) == ("docs", {"sweep": "sweeps/lr-scan"}, None)


def test_the_aforementioned_sweep_with_none_said_before_is_asked(known):
    intent = read("please bring the README into conformity with the aforementioned sweep", known)
    assert intent.command == "docs" and "aforementioned" in (intent.clarify or "")


# --- a count after a plan is its GPUs -------------------------------------------------------------------------------

PLAN = earlier_turn(
    "plan_layouts", {"devices": 2, "model": "llama-3.2-3b", "gpu": "l40s"}, "plan llama-3.2-3b on 2 l40s"
)


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("fine, 8 of those and seq len 2048", {"devices": 8, "seq_len": 2048}),
        ("and 6 o' them then?", {"devices": 6}),
        ("6 of those cards and seq len 2048", {"devices": 6, "seq_len": 2048}),  # near miss: read as before
    ],
)
def test_a_count_of_those_after_a_plan_is_its_gpus(text, args, known):
    intent = read(text, known, PLAN)
    assert (intent.command, intent.clarify, intent.args.get("model"), intent.args.get("gpu")) == (
        "plan",
        None,
        "llama-3.2-3b",
        "l40s",
    )
    assert {key: intent.args.get(key) for key in args} == args


# --- reads of a run -------------------------------------------------------------------------------------------------

STATUS = earlier_turn("run_status", {"run": "runs/r1"}, "how is runs/r1 doing?")


def test_its_figures_after_its_status_are_its_results(known):
    intent = read("Good to hear. Would you show me its throughput numbers?", known, STATUS)
    assert (intent.command, intent.args, intent.clarify) == ("results", {"run": "runs/r1"}, None)


def test_its_state_after_its_status_is_still_a_status(known):
    intent = read("ok, is it still running?", known, STATUS)  # near miss: no figure asked
    assert (intent.command, intent.args.get("run")) == ("status", "runs/r1")


def test_a_models_memory_after_a_status_is_still_a_plan(known):
    intent = read("could you show me its memory needs for llama-3.1-8b on 4 h100s?", known, STATUS)
    assert (intent.command, intent.args.get("model"), intent.args.get("devices")) == ("plan", "llama-3.1-8b", 4)


def test_the_result_told_when_the_run_ends_waits_for_it(known):
    read_as("send us the numbers when runs/r1 is done", "status", {"wait": "yes", "run": "runs/r1"}, known)


def test_the_results_a_run_got_when_it_ended_are_read(known):
    read_as("show me the results r1 got when it finished", "results", {"run": "runs/r1"}, known)  # near miss: past


@pytest.mark.parametrize("text", ["roll call of all our runs please", "a headcount of every experiment",
                                  "liste les runs svp"])  # fmt: skip
def test_a_roll_call_of_the_runs_lists_them(text, known):
    read_as(text, "runs", {}, known)


def test_a_french_launch_with_its_please_still_launches(known):
    read_as("lance le run sur 2 gpus stp", "run", {"nproc": 2}, known)  # near miss: "stp" is only please
