"""agent.understanding on what a sentence points back at (new sentences of each kind, and near misses that must act
as before): a count of "those" that nothing before counted ("5 of them plus 300 steps" with no conversation, "kick
off 6 of those" or "10 trials of those" after a plan, "the best 2 of those" after a plan) is asked about; "the
aforementioned sweep" with two sweeps said, or "the said run" given to the docs, is asked about; docs told to take
their figures from a config file or from the run the conversation is on ask which sweep.

The fixture repository is the benchmark's (bench.agent_understanding.build_fixture), as in tests/test_understanding.py.
"""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from tests.understanding_support import earlier_turn, read, read_as


def sweep_read(sweep: str, text: str, call_id: str) -> list:
    """An earlier turn that read a sweep's trials (each with its own call id, so that two of them both count)."""
    call = {"name": "read_trials", "args": {"sweep": sweep}, "id": call_id}
    return [
        HumanMessage(text),
        AIMessage("", tool_calls=[call]),
        ToolMessage('{"rejected": true}', tool_call_id=call_id),
    ]


PLAN = earlier_turn("plan_layouts", {"devices": 4, "model": "mistral-7b", "gpu": "h100"}, "plan mistral-7b on 4 h100s")
LAUNCH = earlier_turn("launch_run", {"nproc": 8, "steps": 40}, "train 40 steps on 8 GPUs")
LR_SCAN = sweep_read("sweeps/lr-scan", "what did lr-scan find?", "first")
LAYOUTS_NOV = sweep_read("sweeps/layouts-nov", "and layouts-nov?", "second")
STATUS = earlier_turn("run_status", {"run": "runs/r1"}, "how is runs/r1 doing?")


def asks(intent) -> bool:
    return bool(intent.clarify) and "?" in intent.clarify


# --- a count of "those" with nothing counted before is asked about ---------------------------------------------------


@pytest.mark.parametrize("text", ["5 of them plus 300 steps", "go with 6 of those, seq len 1024"])
def test_a_count_of_those_with_no_conversation_is_asked(text, known):
    assert asks(read(text, known))


@pytest.mark.parametrize(
    "text",
    [
        "kick off 6 of those",  # the plan's layouts, no launch's GPUs
        "10 trials of those then",  # no sweep's trials in a plan
        "sweep 5 of those trials",
        "run 3 of those steps",
        "the best 2 of those, please",  # the plan's best layouts, no count of GPUs
    ],
)
def test_a_count_of_those_after_a_plan_that_is_no_gpu_count_is_asked(text, known):
    assert asks(read(text, known, PLAN))


@pytest.mark.parametrize(
    ("text", "command", "args"),
    [
        ("and with 16 of them?", "plan", {"devices": 16, "model": "mistral-7b"}),  # the plan's GPUs
        ("6 of those cards and seq len 4096", "plan", {"devices": 6, "seq_len": 4096}),
    ],
)
def test_a_count_of_the_plans_gpus_still_plans(text, command, args, known):
    intent = read(text, known, PLAN)
    assert (intent.command, intent.clarify) == (command, None)
    assert {key: intent.args.get(key) for key in args} == args


def test_a_count_of_the_launchs_gpus_still_launches(known):
    intent = read("no, 4 of them", known, LAUNCH)
    assert (intent.command, intent.clarify, intent.args.get("nproc")) == ("run", None, 4)


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("could llama-3.1-8b fit on 4 of those H200 cards?", {"devices": 4, "gpu": "h200"}),  # the GPU said after it
        ("plan llama-3.1-8b on h200s, 4 of them", {"devices": 4, "gpu": "h200"}),  # said before it
    ],
)
def test_a_count_of_gpus_the_sentence_names_still_plans(text, args, known):
    read_as(text, "plan", args, known)


# --- "the aforementioned sweep" is the one sweep said before --------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "please sync the docs with the aforementioned sweep",
        "draft a report on the said sweep",
    ],
)
def test_the_sweep_pointed_back_at_with_two_said_is_asked(text, known):
    intent = read(text, known, [*LR_SCAN, *LAYOUTS_NOV])
    assert intent.clarify and "lr-scan" in intent.clarify and "layouts-nov" in intent.clarify


def test_the_sweep_pointed_back_at_with_one_said_is_that_sweep(known):
    intent = read("please sync the docs with the aforementioned sweep", known, LR_SCAN)
    assert (intent.command, intent.args, intent.clarify) == ("docs", {"sweep": "sweeps/lr-scan"}, None)


def test_the_run_pointed_back_at_is_no_sweep_of_the_docs(known):
    intent = read("bring the README into line with the said run", known, STATUS)
    assert intent.command == "docs" and asks(intent) and "sweep" in intent.clarify


# --- docs told to take what is no sweep ask which sweep -------------------------------------------------------------


def test_docs_with_a_config_file_ask_which_sweep(known):
    intent = read("refresh the README with configs/long.yaml please", known)
    assert intent.command == "docs" and asks(intent) and "configs/long.yaml" in intent.clarify


def test_docs_with_the_runs_own_figures_ask_which_sweep(known):
    intent = read("put their loss figures into the docs", known, STATUS)
    assert intent.command == "docs" and asks(intent) and "runs/r1" in intent.clarify


@pytest.mark.parametrize(
    ("text", "earlier", "args"),
    [
        ("refresh docs/training.md", [], {}),  # the page written to is no source
        ("update the docs with that sweep's numbers", LR_SCAN, {"sweep": "sweeps/lr-scan"}),  # the sweep said
        ("update the docs with the layouts-nov results", [], {"sweep": "sweeps/layouts-nov"}),
    ],
)
def test_docs_from_a_sweep_or_none_still_update(text, earlier, args, known):
    intent = read(text, known, earlier)
    assert (intent.command, intent.args, intent.clarify) == ("docs", args, None)


# --- an experiment file put aside is no experiment of the action ----------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "train 30 steps on 4 GPUs; we will go over configs/long.yaml tomorrow",
        "start a sweep of 5 trials. long.yaml seems busted, leave it alone",
    ],
)
def test_a_file_put_aside_is_not_the_experiment(text, known):
    intent = read(text, known)
    assert "experiment" not in intent.args and "configs/long.yaml" in (intent.clarify or "")


@pytest.mark.parametrize(
    ("text", "command", "args"),
    [
        ("train configs/long.yaml on 4 GPUs, I'll check the loss later", "run", {"experiment": "configs/long.yaml"}),
        ("sweep configs/long.yaml with 5 trials", "sweep", {"experiment": "configs/long.yaml", "trials": 5}),
    ],
)
def test_a_file_given_to_the_action_is_still_its_experiment(text, command, args, known):
    read_as(text, command, args, known)


# --- how a run or sweep went is no order to start one -----------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "friday's sweep of 6 trials on configs/long.yaml was pointless",
        "the run on 8 GPUs with fsdp turned out slow",
    ],
)
def test_how_a_run_or_sweep_went_is_asked(text, known):
    intent = read(text, known)
    assert intent.command in ("run", "sweep") and intent.clarify and intent.clarify.endswith("yes / edit")


def test_a_run_defined_in_the_present_still_launches(known):
    read_as("the run is 4 GPUs with fsdp for 30 steps", "run", {"nproc": 4, "steps": 30}, known)  # near miss


# --- a sweep that names only a wish is asked about --------------------------------------------------------------------


@pytest.mark.parametrize("text", ["kick off a sweep wide enough to be convincing", "sweep whatever layout is lightest"])
def test_a_sweep_of_a_wish_alone_is_asked(text, known):
    intent = read(text, known)
    assert intent.command == "sweep" and asks(intent)


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("start a sweep to find the fastest layout", {}),  # what a sweep finds, no wish about it
        ("sweep 6 trials, whichever layout wins", {"trials": 6}),
    ],
)
def test_a_plain_or_stated_sweep_still_sweeps(text, args, known):
    read_as(text, "sweep", args, known)


# --- a run told by its day, done again, is asked about ----------------------------------------------------------------


@pytest.mark.parametrize("text", ["rerun monday's job with warmup 5", "relaunch the run from this morning on 4 GPUs"])
def test_a_run_told_by_its_day_done_again_is_asked(text, known):
    intent = read(text, known)
    assert intent.command == "run" and asks(intent) and "runs/r1" in intent.clarify


def test_a_run_named_done_again_still_copies_it(known):
    read_as("rerun runs/r1 with warmup 5", "run", {"nproc": 2, "layout": "dp_shard=2"}, known)  # near miss


def test_a_sweep_pointed_back_at_is_no_order_for_a_new_one(known):
    intent = read("do the aforesaid sweep once more, 6 trials", known, LR_SCAN)
    assert intent.command == "sweep" and intent.clarify and intent.clarify.endswith("yes / edit")


def test_several_runs_done_again_are_asked(known):
    intent = read("restart all our jobs please", known)
    assert intent.command == "run" and asks(intent)


def test_one_run_named_done_again_is_not_several(known):
    intent = read("relaunch runs/baseline-ddp with warmup 10", known)  # near miss: one run, named
    assert intent.command == "run" and "several" not in (intent.clarify or "")
