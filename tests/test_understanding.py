"""agent.understanding: the offline planner's reading of plain requests, and bench/agent_understanding's judge.

The fixture repository is the one the benchmark builds (bench.agent_understanding.build_fixture: a real git
repository with runs r1, baseline-ddp and tp-try, a checkpoint, sweeps layouts-nov and lr-scan, configs/long.yaml,
notes.md), so names are resolved against real directories.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from agent.offline import OfflinePlanner
from agent.understanding import Context, context_of
from agent.understanding.entities import extract
from agent.understanding.known import Known
from agent.understanding.normalise import normalise
from agent.understanding.second_reading import EXAMPLES
from bench.agent_understanding import build_fixture, changes_experiment, judge, load_set, record, run_set, save, table
from tests.understanding_support import read

DATA = Path(__file__).parent / "data"
SETS = EXAMPLES


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    return build_fixture(tmp_path_factory.mktemp("understanding") / "repo")


@pytest.fixture(scope="module")
def known(repo) -> Known:
    return Known.read(repo)


def planned(args: dict, text: str = "plan") -> list:
    """An earlier turn that planned (the plan's arguments are what a follow-up carries)."""
    call = {"name": "plan_layouts", "args": args, "id": "earlier"}
    return [HumanMessage(text), AIMessage("", tool_calls=[call]), ToolMessage("{}", tool_call_id="earlier")]


def launched_run(run: str) -> list:
    """An earlier turn that read a run's status (what "it" then means)."""
    call = {"name": "run_status", "args": {"run": run}, "id": "earlier"}
    return [
        HumanMessage(f"status of {run}"),
        AIMessage("", tool_calls=[call]),
        ToolMessage("{}", tool_call_id="earlier"),
    ]


def launched(args: dict) -> list:
    call = {"name": "launch_run", "args": args, "id": "earlier"}
    answer = ToolMessage(json.dumps({"rejected": True, "reason": "not now"}), tool_call_id="earlier")
    return [HumanMessage("train"), AIMessage("", tool_calls=[call]), answer]


# --- the normaliser -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, plain",
    [
        ("trian the long config", "train the long config"),
        ("how many cpu cores on this machien", "how many cpu cores on this machine"),
        ("cancle tp-try", "cancel tp-try"),
        ("open a pull reqest", "open a pull request"),
        ("layout options on eight A10s", "layout options on 8 A10s"),
        ("a 30-step run", "a 30 step run"),
        ("4 gpus with 80 gig each", "4 gpus with 80GiB each"),
        ("train for 1,000 steps", "train for 1000 steps"),
        ("would it train on a single 4090", "would it train on 1 4090"),
        ("ok, and for the repo's own model?", "ok, and for the repo's own model?"),  # "repo" is no typo of "report"
        ("wich step is r1 at", "which step is r1 at"),  # "step" is no typo of "steps"
        ("pp=2, and 3 copies of that setup", "pp=2, and dp_replicate=3"),  # copies of a layout said: its replicas
        ("keep 3 copies of the layout in the report", "keep 3 copies of the layout in the report"),  # none said
    ],
)
def test_the_normaliser_fixes_typos_and_writes_numbers_as_digits(text, plain):
    assert normalise(text) == plain


def test_the_normaliser_leaves_the_repositorys_names_alone():
    assert normalise("report on lr-scan and baseline", {"baseline"}) == "report on lr-scan and baseline"


# --- entities -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, kind, value",
    [
        ("could you launch a 30-step run with dp_shard=2", "steps", 30),
        ("start a tuning sweep with 8 trials", "trials", 8),
        ("sweep layouts for the long config, 20 trials", "trials", 20),
        ("pp=2, 2 gpus, 40 steps, go", "steps", 40),
        ("ddp on 2 procs", "nproc", 2),
        ("train for 1,000 steps", "steps", 1000),
        ("train for 2k steps", "steps", 2000),
        ("plan on 4 nodes of 8 h200 each", "per_node", 8),
        ("16 A100 80GB across two machines", "per_node", 8),
        ("plan llama 2 70b on 32 h100s, that's two nodes of 16... no wait, four nodes of eight", "node_count", 4),
        ("what if I had 4 gpus with 80 gig each", "device_mem", "80GiB"),
    ],
)
def test_counts_are_read_with_their_noun(text, kind, value, known):
    assert extract(normalise(text), known).get(kind) == value


NEGATED = [
    "train 12 steps, packing off",
    "train 10 steps with packing shut off",
    "without packing, train for 10 steps",
    "don't pack, seq_len 512, 25 steps",
    "trian the long config 5 steps on 2 gpus w/ dp_shard=2, packing disabled",
    "fire off a 50 step training job with packing turned off",
    "train with activation checkpointing and without packing",
    "train with data.packing=false",
    "launch a run, no packing please",
    "train on 2 gpus; disable packing",
    "train, do not use packing, with activation checkpointing",
    "Train for 5 steps without activation checkpointing or packing",
]


@pytest.mark.parametrize("text", NEGATED)
def test_a_negation_never_flips(text, known):
    intent = read(text, known)
    assert intent.command == "run"
    assert "data.packing=false" in intent.args["set"]
    assert "data.packing=true" not in intent.args["set"]


@pytest.mark.parametrize(
    "text, wanted",
    [
        (
            "without packing, with activation checkpointing",
            ["data.packing=false", "train.activation_checkpointing=true"],
        ),
        (
            "train with packing, no activation checkpointing",
            ["data.packing=true", "train.activation_checkpointing=false"],
        ),
        ("train, no compile and packing on", ["train.compile=false", "data.packing=true"]),
    ],
)
def test_a_negation_stays_in_its_clause(text, wanted, known):
    assert sorted(read("train " + text if not text.startswith("train") else text, known).args["set"]) == sorted(wanted)


@pytest.mark.parametrize(
    "text, args",
    [
        (
            "Llama 3 8B on 2 H200s, how would you parallelize it?",
            {"model": "llama-3.1-8b", "gpu": "h200", "devices": 2},
        ),
        ("plan llama3.1 70b on 8 H100s", {"model": "llama-3.1-70b", "gpu": "h100-sxm", "devices": 8}),
        ("qwen2.5 72b, 8x h100 nvl, plan", {"model": "qwen2.5-72b", "gpu": "h100-nvl", "devices": 8}),
        (
            "how would you lay out llama-2-13b on 4x RTX 4090?",
            {"model": "llama-2-13b", "gpu": "rtx-4090", "devices": 4},
        ),
        ("I've got 16 A100 80GB across two machines, best layout for llama 3.1 70b?", {"devices": 8, "nodes": 2}),
        ("would smollm2 1.7b train on a single 4090? which layout?", {"model": "smollm2-1.7b", "devices": 1}),
        ("could a 70B llama 3.1 fit on 2 nodes of 8 H200?", {"model": "llama-3.1-70b", "devices": 8, "nodes": 2}),
        ("plan a 13b model on 8 h100s", {"model": "llama-2-13b"}),
        ("llama3.2 3b on 2 h100 pcie cards at 2k contex, wat layout", {"gpu": "h100-pcie", "seq_len": 2048}),
    ],
)
def test_models_and_gpus_named_loosely(text, args, known):
    intent = read(text, known)
    assert intent.command == "plan" and intent.clarify is None
    assert args.items() <= intent.args.items()


def test_a_loose_model_name_says_which_preset_it_took(known):
    assert read("Llama 3 8B on 2 H200s, plan it", known).notes == ["'llama 3 8b' as the preset llama-3.1-8b"]


@pytest.mark.parametrize(
    "text, key, value",
    [
        ("r1 tok/s?", "run", "runs/r1"),
        ("final loss of baseline ddp run?", "run", "runs/baseline-ddp"),
        ("what's the gradient noise scale in the latest run?", "run", "runs/r1"),
        ("who won the layouts sweep?", "sweep", "sweeps/layouts-nov"),
        ("layots-nov sweep winner + all 12 trials", "sweep", "sweeps/layouts-nov"),
        ("Which learning rate came out best in the lr scan sweep?", "sweep", "sweeps/lr-scan"),
        ("trian the long config 5 steps", "experiment", "configs/long.yaml"),
        ("benchmark the checkpoint in r1", "model", "runs/r1"),  # its latest: run_benchmark resolves the run
        ("benchmark r1's step 20 checkpoint", "model", "runs/r1/checkpoint/step_20"),
        ("could you run the private benchmark on the baseline-ddp model?", "model", "runs/baseline-ddp"),
        ("cat notes.md", "path", "notes.md"),
    ],
)
def test_names_are_resolved_from_the_repository(text, key, value, known):
    assert read(text, known).args[key] == value


@pytest.mark.parametrize("text", ["kill r9", "status of runs/r9", "who won sweeps/old", "results of exp-3"])
def test_a_name_the_repository_lacks_is_asked_about_never_replaced_by_the_latest(text, known):
    clarify = read(text, known).clarify
    assert clarify is not None and "I find no run or sweep named" in clarify and "runs/r1" in clarify
    assert Known().resolve("r1", "runs") is None  # no repository: nothing to resolve against


def test_a_runs_name_is_no_layout(known):
    """ "baseline-ddp" names a run: a benchmark of it is not a DDP launch."""
    intent = read("could you run the private benchmark on the baseline-ddp model?", known)
    assert intent.command == "bench" and intent.clarify is None


# --- follow-ups and intents -----------------------------------------------------------------------------------


def test_a_follow_up_keeps_the_plan_before(known):
    earlier = planned({"devices": 8, "gpu": "h100-sxm", "model": "llama-3.1-8b"})
    intent = read("how much faster would it be with 16 GPUs over 2 nodes?", known, earlier)
    assert intent.command == "plan"
    assert intent.args == {"devices": 8, "nodes": 2, "gpu": "h100-sxm", "model": "llama-3.1-8b"}
    own = read("ok, and for the repo's own model?", known, earlier)
    assert own.args == {"devices": 8, "gpu": "h100-sxm"}


def test_a_follow_up_launch_keeps_the_launch_before_and_adds_the_negation(known):
    earlier = launched({"nproc": 2, "layout": "tp=2", "steps": 20})
    intent = read("do it again without packing", known, earlier)
    assert intent.command == "run"
    assert intent.args == {"nproc": 2, "layout": "tp=2", "steps": 20, "set": ["data.packing=false"]}


@pytest.mark.parametrize(
    "text, command",
    [
        ("how much RAM does this box have?", "hardware"),
        ("nvidia-smi pls", "hardware"),
        ("Before I launch anything, can you check what hardware this machine has?", "hardware"),
        ("list my runs", "runs"),
        ("what's in notes.md?", "read"),
        ("benchmark the checkpoint in r1", "bench"),
        ("turn lr-scan into a report", "report"),
        ("push layouts-nov as a PR", "pr"),
        ("refresh the docs from layouts-nov", "docs"),
        ("compare tp=2 against dp_shard=2 for llama 3.1 8b on 8 h100s, don't run anything", "plan"),
        ("tokens per second on r1, please", "results"),
    ],
)
def test_every_tool_has_its_intent(text, command, known):
    assert read(text, known).command == command


# --- the clarifying question ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, named",
    [
        ("train with a different optimizer", "optimizer"),
        ("change the seq len and relaunch", "sequence length"),
        ("compare the two runs", "runs/r1 and runs/baseline-ddp"),
        ("benchmark the good one", "benchmark runs/r1"),
        ("show me the json file from r1", "runs/r1/metrics.json"),
        ("open that file", "show meshpilot.yaml"),
        ("set the learning rate and start training", "learning rate"),
    ],
)
def test_one_question_naming_the_best_reading(text, named, known):
    clarify = read(text, known).clarify
    assert clarify is not None and named in clarify and "?" in clarify


@pytest.mark.parametrize(
    "text",
    [
        "launch training with pp=2 and 4 micro batches, 2 GPUs",
        "train 20 steps for 3 hours",
        "plan 8 h100s x 7",
        "at 9:30 train fsdp on 2 gpus for 30 steps",  # a launch set for a time would run now
    ],
)
def test_a_number_no_argument_holds_is_asked_about(text, known):
    """A stated value is never dropped: a number the call would not use gets a question naming the call."""
    clarify = read(text, known).clarify
    assert clarify is not None and clarify.startswith("What is ") and "which does not use it" in clarify


@pytest.mark.parametrize(
    "text",
    [
        "plan llama 2 70b on 32 h100s, that's 2 nodes of 16... no wait, 4 nodes of 8",
        "16 A100 80GB across 2 machines, best layout for llama 3.1 70b?",
        "benchmark runs/r1/checkpoint/step_20",
        "train 12 steps with lr 3e-4 at seq len 2048 on 2 procs",
        # a time of day or an incident's offset counts nothing; nor does a list's label after a bracket
        "09:15 UTC: plan llama 3.1 70b on 2 nodes of 8 h100s",
        "T+10m ticket: what layouts fit llama 3.1 8b on 8 h100s?",
        "1) configs/long.yaml (seq 1024) 2) 2 GPUs, ddp 3) 10 steps",
    ],
)
def test_numbers_that_name_things_or_were_corrected_are_no_dropped_values(text, known):
    assert read(text, known).clarify is None


def test_a_cancel_takes_no_guess(known):
    """Stopping a run needs the run named or the conversation's: never the latest by default."""
    assert (
        read("stop it", known).clarify
        == "Cancel runs/r1, the latest run? Name the run to confirm, e.g. `cancel runs/r1`."
    )
    assert read("stop it", known, launched_run("runs/tp-try")).args == {"run": "runs/tp-try"}


def test_a_follow_up_that_changes_the_processes_asks_about_the_layout(known):
    clarify = read("and with 4 gpus?", known, launched({"nproc": 2, "layout": "tp=2", "steps": 20})).clarify
    assert clarify is not None and clarify.startswith("The layout tp=2 needs 2 processes, not 4")


def test_vague_hardware_in_a_follow_up_is_asked_about(known):
    earlier = planned({"devices": 8, "nodes": 2, "gpu": "h100-sxm", "model": "llama-3.1-70b"})
    clarify = read("what about with more GPUs?", known, earlier).clarify
    assert clarify is not None and "the plan before: devices=8, nodes=2" in clarify


# --- the failure kinds of fresh_b (each with phrasings of our own, not the set's sentences) ---------------------


def asked_back(text: str) -> list:
    """An earlier turn the planner answered with a question: no tool call, only what the user said."""
    return [HumanMessage(text), AIMessage("Which run do you mean?")]


@pytest.mark.parametrize(
    "text",
    [
        "launch 10 steps without checkpointing, dp_shard=2 on 2 gpus",
        "train 10 steps, checkpointing off, 2 gpus dp_shard=2",
    ],
)
def test_bare_checkpointing_is_activation_checkpointing_and_its_negation_stays(text, known):
    intent = read(text, known)
    assert intent.command == "run" and "train.activation_checkpointing=false" in intent.args["set"]


def test_the_docs_verb_may_come_after_its_object(known):
    intent = read("the readme ought to reflect sweeps/lr-scan - could you refresh it?", known)
    assert (intent.command, intent.args, intent.clarify) == ("docs", {"sweep": "sweeps/lr-scan"}, None)


@pytest.mark.parametrize("text", ["set up a layout search on the long config with 3 trials", "do a search, 4 trials"])
def test_a_count_of_trials_starts_a_sweep_never_reads_one(text, known):
    intent = read(text, known)
    assert intent.command == "sweep" and intent.args["trials"] in (3, 4)


@pytest.mark.parametrize(
    "text", ["could you sweep long.yml, default trials", "sweep configs/long.yaml, the usual trials"]
)
def test_trials_left_at_their_default_start_a_sweep_of_the_file_named(text, known):
    intent = read(text, known)
    assert (intent.command, intent.args, intent.clarify) == ("sweep", {"experiment": "configs/long.yaml"}, None)


@pytest.mark.parametrize("text", ["did it crash?", "what was its loss", "hey, did the thing finish?"])
def test_it_with_no_run_in_the_conversation_is_asked_about(text, known):
    intent = read(text, known)
    assert "run" not in intent.args and intent.clarify is not None and "runs/r1, the latest?" in intent.clarify
    assert read(text, known, launched_run("runs/tp-try")).args == {"run": "runs/tp-try"}


def test_a_total_and_a_count_per_node_give_the_nodes(known):
    intent = read("how would you lay out llama-3.1-8b on 32 a100s, 4 per machine?", known)
    assert (intent.args["devices"], intent.args["nodes"]) == (4, 8)


@pytest.mark.parametrize(
    "text, memory",
    [
        ("plan for 2 cards with 24GB each", "24GiB"),
        ("three gpus, 48 GB apiece: how would you split my model?", "48GiB"),
        ("best layout on 4 nodes of 8 gpus with 40gb", "40GiB"),
        ("what if I had 2 cards with 16GiB each", "16GiB"),
        ("if we had 8 cards with 32 gig each", "32GiB"),
    ],
)
def test_a_devices_memory_has_one_form_gib(text, memory, known):
    """One rule: a device's memory is GiB. A user's "24GB" card is the size it is sold as, which is its binary size
    (a 24GB card has 24 GiB), so GB is read as GiB, and the reply says how it was read."""
    intent = read(text, known)
    assert intent.command == "plan" and intent.args["device_mem"] == memory
    if "gb" in text.lower().replace("gib", ""):
        assert any(f"as {memory}" in note for note in intent.notes)  # said, never silent


def test_a_launch_like_a_named_run_takes_its_layout_and_processes(known):
    intent = read("kick off training like baseline-ddp, but for 30 steps", known)
    assert (intent.command, intent.clarify) == ("run", None)
    assert intent.args == {"nproc": 2, "layout": "dp_replicate=2", "steps": 30}
    again = read("same as baseline-ddp again, 5 steps", known, launched({"nproc": 2, "layout": "tp=2", "steps": 20}))
    assert again.args == {"nproc": 2, "layout": "dp_replicate=2", "steps": 5}  # the run named, not the launch before
    bare = read("launch with the same settings as baseline-ddp", known)
    assert bare.clarify is not None and "dp_replicate=2" in bare.clarify  # nothing changed: confirm, naming it


@pytest.mark.parametrize(
    "text, model",
    [
        ("evaluate r1's checkpoint on the builtin suite", "runs/r1"),
        ("benchmark step_20 of r1", "runs/r1/checkpoint/step_20"),
    ],
)
def test_a_runs_checkpoint_is_its_directory_unless_a_step_is_named(text, model, known):
    assert read(text, known).args["model"] == model


def test_it_means_the_run_the_turn_before_named_even_when_that_turn_asked(known):
    assert read("cancel it", known, asked_back("is tp-try any good?")).args == {"run": "runs/tp-try"}
    unknown = read("ok then wait on it", known, asked_back("has r7 finished yet?"))
    assert unknown.clarify is not None and "runs/r7" in unknown.clarify  # never the latest in its place


@pytest.mark.parametrize(
    "text, command, run",
    [
        ("ls -l runs", "runs", None),
        ("what jobs have I trained so far?", "runs", None),
        ("gimme a list of my experiments", "runs", None),
        ("hold on until tp-try exits", "status", "runs/tp-try"),
        ("wat step is baseline-ddp at", "status", "runs/baseline-ddp"),
    ],
)
def test_listing_waiting_and_progress_in_everyday_words(text, command, run, known):
    intent = read(text, known)
    assert (intent.command, intent.args.get("run"), intent.clarify) == (command, run, None)
    assert intent.args.get("wait") == ("yes" if "hold on" in text else None)  # waiting is status with wait=yes


def test_a_multiplier_applies_to_the_count_it_names(known):
    assert read("train 3x longer than 10 steps", known).args["steps"] == 30
    assert read("train 2x longer", known).clarify.startswith("How many in all: 2 x what?")
    earlier = planned({"devices": 4, "gpu": "h100-sxm", "model": "gemma-2-9b"})
    assert read("and with twice as many cards?", known, earlier).args["devices"] == 8
    assert read("what about 3 of those nodes?", known, earlier).args == {
        "devices": 4,
        "nodes": 3,
        "gpu": "h100-sxm",
        "model": "gemma-2-9b",
    }


@pytest.mark.parametrize("text", ["what did we train last week", "so we launched a sweep yesterday?"])
def test_a_question_is_never_answered_with_an_action(text, known):
    intent = read(text, known)
    assert intent.command not in ("run", "sweep") or intent.clarify is not None


def test_a_past_tense_run_is_no_launch_verb(known):
    assert read("could u list what i've run", known).command == "runs"
    assert read("do it again without packing", known, launched({"nproc": 1})).clarify is None  # "do it": no question


def test_the_count_per_node_is_the_one_next_to_per(known):
    intent = read("plan for 48 h100s with 8 per node, llama-3.1-70b", known)
    assert (intent.args["devices"], intent.args["nodes"]) == (8, 6)


def test_n_times_as_long_as_a_stated_count(known):
    assert read("train 3 times as long as 10 steps", known).args["steps"] == 30


def test_a_repeat_with_nothing_to_repeat_asks_and_a_named_run_is_copied(known):
    assert read("launch the job from before once more", known).clarify.startswith("Repeat which launch?")
    intent = read("do the same as tp-try with 6 steps", known)  # "do the same": a command, not a question
    assert (intent.command, intent.args, intent.clarify) == ("run", {"nproc": 2, "layout": "tp=2", "steps": 6}, None)


@pytest.mark.parametrize(
    "text, command, key, value",
    [
        ("bench the ckpt of baseline-ddp", "bench", "model", "runs/baseline-ddp"),
        ("2 procs, dp_shard=2, 3 steps, act ckpt off", "run", "set", ["train.activation_checkpointing=false"]),
        ("what experiments are there", "runs", None, None),
    ],
)
def test_short_forms_of_words_the_rules_read(text, command, key, value, known):
    intent = read(text, known)
    assert intent.command == command and intent.args.get(key) == value and intent.clarify is None


# --- the benchmark and its judge ------------------------------------------------------------------------------


def test_the_benchmark_runs_a_sample_through_the_agent(tmp_path):
    items = load_set(SETS / "sample.jsonl")
    judged = run_set(items, OfflinePlanner())
    assert [j["outcome"] for j in judged] == ["right"] * len(items), [j for j in judged if j["outcome"] != "right"]
    out = tmp_path / "results.json"
    save([record("sample", "first", SETS / "sample.jsonl", judged, "offline")], out)
    save([record("sample", "second", SETS / "sample.jsonl", judged[:3], "offline")], out)
    records = json.loads(out.read_text())["records"]
    assert [(r["phase"], r["items"]) for r in records] == [("first", 13), ("second", 3)]  # earlier records kept
    assert "| sample | second | offline | 3 | 3 (100.0%) | 0 | 0 | 0 |" in table(records)


LAUNCH = {"tool": "launch_run", "args": {"steps": 12, "overrides": ["data.packing=false"], "layout": "tp=2"}}
R1 = {"tool": "read_results", "args": {"run": "runs/r1"}}
LR = {"tool": "launch_run", "args": {"overrides": ["train.lr=0.0003"]}}


def call(name: str, **args) -> dict:
    return {"call": {"name": name, "args": args}}


@pytest.mark.parametrize(
    "expect, action, outcome",
    [
        (LAUNCH, call("launch_run", steps=12, layout="tp=2", overrides=["data.packing=true"]), "wrong"),  # flipped
        (LAUNCH, call("launch_run", layout="tp=2", overrides=["data.packing=false"]), "wrong"),  # steps dropped
        (LAUNCH, call("launch_run", steps=12, layout="tp=4", overrides=["data.packing=false"]), "wrong"),
        (LAUNCH, call("plan_layouts"), "wrong"),
        (LAUNCH, call("launch_run", steps="12", layout="tp=2", overrides=["data.packing=False"]), "right"),
        (LAUNCH, {"reply": "Train 12 steps with data.packing=false? yes / edit"}, "asked"),
        (LAUNCH, {"reply": "I am the offline planner. I understand: `why did FSDP win?`."}, "nothing"),
        ({"ask": True}, call("launch_run"), "wrong"),
        ({"ask": True}, {"reply": "Which optimizer?"}, "right"),
        ({"refuse": True}, call("cancel_run", run="r1"), "wrong"),  # deleting a run: no tool may act on it
        ({"refuse": True}, {"reply": "I cannot delete runs; remove the directory yourself."}, "right"),
        (R1, call("read_results", run="r1"), "right"),
        (R1, call("read_results", run="runs/r2"), "wrong"),
        (LR, call("launch_run", overrides=["train.lr=3e-4"]), "right"),
        (LR, call("launch_run", overrides=["train.lr=3e-3"]), "wrong"),
        (LR, call("launch_run", overrides=["train.lr=3e-4", "data.packing=true"]), "wrong"),  # a setting invented
        ({"tool": "plan_layouts", "args": {"gpu": "h100"}}, call("plan_layouts", gpu="h100-sxm"), "right"),
        ({"tool": "plan_layouts", "args": {"devices": 8}}, call("plan_layouts", devices=16), "wrong"),
        # an argument left out runs the tool's default: the default experiment, said or not
        ({"tool": "run_sweep", "args": {"experiment": "meshpilot.yaml"}}, call("run_sweep"), "right"),
        ({"tool": "run_sweep", "args": {"experiment": "configs/long.yaml"}}, call("run_sweep"), "wrong"),
        ({"tool": "launch_run", "args": {"steps": 5}}, call("launch_run"), "wrong"),  # no default stands for it
    ],
)  # fmt: skip
def test_the_judge_fails_planted_wrong_answers(expect, action, outcome):
    assert judge(expect, action)[0] == outcome


def test_a_setting_that_leaves_the_experiment_as_it_is_is_asked_for_not_invented(tmp_path):
    """Keep packing on where the experiment packs: data.packing=true changes nothing, so it is no invented setting;
    packing off, or a setting the trainer refuses, is."""
    changes = changes_experiment(build_fixture(tmp_path / "repo"))
    keep = call("launch_run", overrides=["train.lr=0.0003", "data.packing=true"])
    assert judge(LR, keep, changes)[0] == "right"
    for invented in ("data.packing=false", "train.optimizer=adam"):
        assert judge(LR, call("launch_run", overrides=["train.lr=0.0003", invented]), changes)[0] == "wrong"
    longer = call("launch_run", experiment="configs/long.yaml", overrides=["train.lr=0.0003", "data.seq_len=1024"])
    assert judge(LR, longer, changes)[0] == "right"  # the file's own sequence length
    default = call("launch_run", overrides=["train.lr=0.0003", "data.seq_len=1024"])
    assert judge(LR, default, changes)[0] == "wrong"  # the default experiment's is 256


# --- never a wrong action on the evaluation set ---------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["fresh_a", "probe", "regression", "review_probe", "fresh_ab_misses", "fresh_ac", "fresh_ad"]
)
def test_no_stated_value_is_dropped_or_contradicted(name):
    """Every request of the tuning set (fresh_a), of the author's probes, of the regression set (495 requests the
    parser's engineers wrote for the miss kinds of fresh_c to fresh_i) and of outside authors' sets once scored
    first-judged and tuned on (fresh_ac, fresh_ad, fresh_ab's misses; three disputed expectations changed, each
    saying why in `changed_from_author`): all in-sample now. Never a wrong action (another tool, a stated value
    missing or contradicted), and at least 90% right."""
    items = load_set(SETS / f"{name}.jsonl")
    judged = run_set(items, OfflinePlanner())
    wrong = [(j["request"], j["why"]) for j in judged if j["outcome"] == "wrong"]
    assert wrong == []
    assert sum(j["outcome"] == "right" for j in judged) >= 0.9 * len(items)


def test_every_action_of_the_phrasing_set_keeps_every_stated_value(tmp_path):
    """The suite's own phrasings (tests/data/requests.yaml): each plan, launch or write has every argument it
    states (test_agent_requests counts accuracy; here not one may miss)."""
    from tests.test_agent_requests import _wrong_arguments, drive

    cases = [c for c in yaml.safe_load((DATA / "requests.yaml").read_text()) if c["expect"].get("call")]
    assert len(cases) >= 20
    repo = tmp_path / "repo"
    shutil.copytree(DATA / "agent_repo", repo)
    (repo / "run-files").rename(repo / "runs")
    wrong = {}
    for case in cases:
        action = drive(repo, case["text"], case.get("after")).action
        if action is None or action["name"] != case["expect"]["call"]:
            wrong[case["text"]] = action
        elif why := _wrong_arguments(case["expect"].get("args", {}), action["args"]):
            wrong[case["text"]] = why
    assert wrong == {}


def test_a_context_without_a_repository_reads_nothing_from_disk():
    assert Context().known.runs == [] and context_of([HumanMessage("hi")]).known.root is None


def test_a_what_if_against_the_plan_before_states_both_figures():
    from agent.replies import compare_plans

    def plan(devices: int, nodes: int, tokens: float, layout: str) -> dict:
        top = [{"family": "FSDP", "layout": layout, "predicted_tokens_per_s": tokens}]
        return {"top": top, "devices": devices, "nodes": nodes, "source": f"plans/{devices}x{nodes}.json"}

    reply = compare_plans(plan(8, 1, 64359.0, "dp_shard=8"), plan(8, 2, 128717.0, "dp_shard=16"))
    assert "128,717 tokens/s" in reply and "64,359 tokens/s" in reply and ": faster." in reply
    assert "plans/8x2.json, plans/8x1.json" in reply
    assert ": not faster." in compare_plans(plan(8, 2, 128717.0, "dp_shard=16"), plan(8, 1, 64359.0, "dp_shard=8"))


@pytest.mark.parametrize("content", ['{"request": "hi"}\n', "not json\n"])
def test_a_bad_set_fails_in_one_line_before_anything_runs(content, tmp_path, capsys):
    from bench.agent_understanding import main

    bad = tmp_path / "bad.jsonl"
    bad.write_text(content)
    with pytest.raises(SystemExit) as exit_:
        main(["--set", str(bad), "--out", str(tmp_path / "out.json")])
    assert exit_.value.code == 2
    assert f"--set {bad}" in capsys.readouterr().err.splitlines()[-1]
    assert not (tmp_path / "out.json").exists()


@pytest.mark.parametrize(
    "text, plain",
    [
        ("how much memory is there in here", "how much memory is there in here"),
        ("were the runs done before then?", "were the runs done before then?"),
    ],
)
def test_everyday_words_are_no_typos(text, plain):
    """A word one edit from a word the rules read is left alone when it is itself a word ("here" is no "where")."""
    assert normalise(text) == plain


@pytest.mark.parametrize(
    "text",
    ["llama 3.1 8b, 4 nodes x 8 a100 80gb, seq 2048: rank layouts, no run", "mistral 7b auf 8 h100, nur planen"],
)
def test_no_run_and_only_plan_in_any_form_never_launch(text, known):
    assert read(text, known).command == "plan"


@pytest.mark.parametrize("text", ["cores and ram on this box, here?", "how many gpus and how much ram do we have here"])
def test_a_hardware_question_about_here_reads_the_hardware(text, known):
    assert read(text, known).command == "hardware"


def test_a_reading_verb_and_a_named_file_read_the_file(known):
    intent = read("dump runs/r1/metrics.json for me", known)
    assert (intent.command, intent.args) == ("read", {"path": "runs/r1/metrics.json"})
    assert read("run configs/long.yaml for 5 steps", known).command == "run"  # no reading verb: a launch


# --- phenomena behind fresh_c's misses, each with sentences of its own ------------------------------------------


@pytest.mark.parametrize(
    "text, wanted",
    [
        ("turn off packing and compile, 15 steps, dp_shard=2 on 2 gpus", ["data.packing=false", "train.compile=false"]),
        ("enable act ckpt and packing for a 12 step run", ["train.activation_checkpointing=true", "data.packing=true"]),
        ("trainiere 10 Schritte ohne packing auf 2 gpus mit dp_shard=2", ["data.packing=false"]),
        ("train 6 steps sans packing", ["data.packing=false"]),
    ],
)  # fmt: skip
def test_a_negation_reaches_every_setting_it_governs_in_any_language(text, wanted, known):
    """A verb before a list of settings ("turn off X and Y") governs each; "ohne", "sans" are "without"."""
    intent = read(text, known)
    assert intent.command == "run" and intent.clarify is None and sorted(intent.args["set"]) == sorted(wanted)


@pytest.mark.parametrize(
    "text, asked",
    [
        ("train 10 steps with packing but also packing disabled", "packing be on or off"),  # said both ways
        ("launch 10 steps on 2 gpus, packing", "packing be on or off"),  # named with neither
        ("kick off 25 steps without dropout", "'without dropout' turn off"),  # nothing it names
        ("train 20 steps, no label smoothing, dp_shard=2 on 2 gpus", "'no label smoothing"),
    ],
)
def test_a_launch_asks_when_a_setting_is_not_read_for_sure(text, asked, known):
    """The confidence rule: a setting said both on and off, named with no value, or a negation that turns off
    nothing the parser knows is asked about, and the question names what would run so far (never a guess)."""
    intent = read(text, known)
    assert intent.command == "run" and asked in (intent.clarify or "") and "So far I would train" in intent.clarify
    assert not any(o.startswith("data.packing=") for o in intent.args.get("set", []))


@pytest.mark.parametrize(
    "text",
    [
        "quick run: 5 steps on 1 gpu, nothing else changed",
        "kick off 10 steps with packing off",
        "train 10 steps with packing on... no wait, packing off",
        "no need for a long run, 4 steps with dp_shard=2 on 2 gpus",
    ],
)
def test_negations_that_turn_nothing_off_do_not_block_a_launch(text, known):
    intent = read(text, known)
    assert intent.command == "run" and intent.clarify is None


@pytest.mark.parametrize(
    "text, key, value",
    [
        ("what loss did the fsdp run reach", "run", "runs/r1"),
        ("tokens per second of the replicated baseline?", "run", "runs/baseline-ddp"),
        ("what was the peak memory of the run that ran out of memory", "run", "runs/tp-try"),
        ("which trial won the sweep over learning rates?", "sweep", "sweeps/lr-scan"),
        ("summarise the lr sweep's trials for me", "sweep", "sweeps/lr-scan"),
        ("best trial in the layouts sweep?", "sweep", "sweeps/layouts-nov"),
        ("how far along is the tp try run", "run", "runs/tp-try"),
    ],
)
def test_runs_and_sweeps_described_are_resolved_against_the_repository(text, key, value, known):
    """A run by its layout ("the fsdp run"), its outcome ("the run that ran out of memory"), parts of its name in
    any order; a sweep by what its trials vary ("over learning rates", "the layouts sweep")."""
    intent = read(text, known)
    assert intent.clarify is None and intent.args.get(key) == value


def test_a_description_that_fits_several_runs_asks_which(known):
    intent = read("how did the finished run do?", known)
    assert intent.command == "results" and "runs/r1 or runs/baseline-ddp" in intent.clarify


@pytest.mark.parametrize(
    "text, suite",
    [
        ("how well does r1's checkpoint score on the benchmark?", None),
        ("evaluate runs/r1 with the default suite", "builtin"),
        ("bench r1 on the built-in eval suite", "builtin"),
    ],
)
def test_a_benchmark_question_runs_the_benchmark_and_the_suite_is_a_suite(text, suite, known):
    intent = read(text, known)
    assert (intent.command, intent.args.get("model"), intent.clarify) == ("bench", "runs/r1", None)
    assert intent.args.get("suite") == suite


def test_a_suite_the_repository_lacks_is_asked_about_never_taken_from_a_word(known):
    intent = read("benchmark r1 on the trivia suite", known)
    assert intent.command == "bench" and "suite" not in intent.args and "'trivia'" in intent.clarify


@pytest.mark.parametrize(
    "text, args",
    [
        ("uh, and on a100 80gb cards?", {"gpu": "a100-80gb", "seq_len": 4096, "devices": 8}),
        ("hmm, what about 16k context?", {"seq_len": 16384, "model": "qwen2.5-7b", "devices": 8}),
        ("and with 4 such boxes?", {"nodes": 4, "devices": 8, "seq_len": 4096}),
    ],
)
def test_a_follow_up_plan_keeps_the_sequence_length_and_hardware_before(text, args, known):
    before = planned({"model": "qwen2.5-7b", "devices": 8, "gpu": "h100", "seq_len": 4096})
    intent = read(text, known, before)
    assert intent.command == "plan" and intent.clarify is None
    assert {k: intent.args.get(k) for k in args} == args


@pytest.mark.parametrize(
    "text, args",
    [
        ("how would llama-2-13b split over 3 Knoten mit je 8 A100 40GB?", {"nodes": 3, "devices": 8}),
        ("best layout for llama 3.1 seventy b on a pair of h200s", {"model": "llama-3.1-70b", "devices": 2}),
        ("plan llama three point two one b on sixteen l40s", {"model": "llama-3.2-1b", "devices": 16}),
    ],
)
def test_counts_in_words_and_other_languages(text, args, known):
    intent = read(text, known)
    assert intent.command == "plan" and {k: intent.args.get(k) for k in args} == args


def test_a_learning_rate_said_in_words_and_key_values_with_commas(known):
    said = read("launch 10 steps with a learning rate of three e minus four", known)
    typed = read("launch: steps=10, train.seed=3, train.lr=1e-3, data.packing=true", known)
    assert "train.lr=3e-4" in said.args["set"]
    assert {"train.seed=3", "train.lr=1e-3", "data.packing=true"} <= set(typed.args["set"])


def test_a_launch_after_a_plan_splits_the_planned_gpus(known):
    """'go with TP then' right after a what-if on 4 GPUs: TP over those 4."""
    intent = read("alright, go with tp then, 10 steps", known, planned({"devices": 4}))
    assert (intent.command, intent.args.get("nproc"), intent.args.get("layout")) == ("run", 4, "tp=4")


@pytest.mark.parametrize(
    "text, command",
    [
        ("how many training runs are in here?", "runs"),
        ("message me when tp-try has finished", "status"),
        ("what did the layouts sweep pick in the end", "trials"),
    ],
)
def test_everyday_wordings_of_listing_waiting_and_reading_a_sweep(text, command, known):
    assert read(text, known).command == command


@pytest.mark.parametrize("text", ["could we do better with a larger cluster?", "what if we had some more hardware"])
def test_vague_hardware_in_a_what_if_is_asked_about(text, known):
    intent = read(text, known)
    assert intent.command == "plan" and intent.clarify is not None and "How many GPUs" in intent.clarify


@pytest.mark.parametrize(
    "text, wanted",
    [
        ("start 7 steps with compile and packing both switched off", ["train.compile=false", "data.packing=false"]),
        ("train 9 steps; compile and AC: on", ["train.compile=true", "train.activation_checkpointing=true"]),
        ("train 3 steps, no packing and compile on", ["data.packing=false", "train.compile=true"]),
    ],
)
def test_a_state_said_once_after_a_list_of_settings_is_each_ones(text, wanted, known):
    intent = read(text, known)
    assert intent.clarify is None and sorted(intent.args["set"]) == sorted(wanted)


def test_a_list_whose_state_disagrees_with_its_preposition_is_asked_about(known):
    """ "with compile and packing off": compile on (with) and packing off, or both off? Asked, never guessed."""
    intent = read("launch 6 steps with compile and packing off", known)
    assert "be on or off" in (intent.clarify or "")


def test_a_value_held_in_an_argument_the_call_does_not_take_is_no_placed_value(known):
    """A launch takes no seq_len of its own: "context 1024" becomes data.seq_len, never held and dropped."""
    intent = read("train 12 steps at context 1024 without compile", known)
    assert intent.clarify is None and {"data.seq_len=1024", "train.compile=false"} <= set(intent.args["set"])
    assert "seq_len" not in intent.args


@pytest.mark.parametrize(
    "text, key, value",
    [
        ("what tokens/s did the oom run reach before dying", "run", "runs/tp-try"),
        ("why did the tp attempt fall over", "run", "runs/tp-try"),
        ("loss of the busted run please", "run", "runs/tp-try"),
    ],
)
def test_a_description_after_other_words_of_the_sentence(text, key, value, known):
    assert read(text, known).args.get(key) == value


def test_plurals_of_everyday_words_are_no_typos(known):
    assert normalise("how big were the optimizer states") == "how big were the optimizer states"


def test_the_config_a_run_used_is_its_file(known):
    intent = read("cat the config baseline-ddp ran with", known)
    assert (intent.command, intent.args) == ("read", {"path": "runs/baseline-ddp/config.yaml"})


@pytest.mark.parametrize("text, args", [("and on 16?", {"devices": 16}), ("what about 4k seq?", {"seq_len": 4096})])
def test_a_short_follow_up_plan_takes_its_one_new_fact(text, args, known):
    intent = read(text, known, planned({"model": "llama-3.2-3b", "devices": 4, "gpu": "l40s"}))
    assert intent.command == "plan" and intent.clarify is None and intent.args["model"] == "llama-3.2-3b"
    assert {k: intent.args[k] for k in args} == args


@pytest.mark.parametrize(
    "text",
    ["what was the loss of the tinyllama run", "benchmark the gpt run", "cancel the llama run"],
)
def test_a_description_that_fits_nothing_is_asked_about_never_the_latest(text, known):
    intent = read(text, known)
    assert "I find none it describes" in (intent.clarify or "")


def test_a_short_form_in_a_name_matches_the_long_word(known):
    assert read("summarise the november layout sweep's trials", known).args.get("sweep") == "sweeps/layouts-nov"


@pytest.mark.parametrize(
    "text", ["plan yi 34b on 16 h100s", "would falcon 40b fit 2 nodes of 8 a100 80gb?", "train phi-3 for 5 steps"]
)
def test_a_model_family_without_a_preset_is_asked_about_never_another_model(text, known):
    """A family with no preset is never planned or trained as another preset."""
    intent = read(text, known)
    assert "no preset for" in (intent.clarify or "") and "model" not in intent.args
    assert not any(o.startswith("model.") for o in intent.args.get("set", []))


@pytest.mark.parametrize(
    "text",
    ["train 6 steps with compile, scratch that, without it", "launch 5 steps with packing... no wait, turn it off"],
)
def test_a_setting_turned_off_by_a_pronoun_after_a_correction(text, known):
    intent = read(text, known)
    assert intent.clarify is None and any(o.endswith("=false") for o in intent.args["set"])
    assert not any(o.endswith("=true") for o in intent.args["set"])


def test_a_negation_next_to_a_setting_turned_on_claims_nothing(known):
    """ "with packing, no, ..." must not count "no" as packing's: the negation is asked about."""
    intent = read("train 4 steps with packing not the usual", known)
    assert intent.clarify is not None


@pytest.mark.parametrize(
    "text, command",
    [("did any of the runs run out of memory?", "runs"), ("which of my runs failed", "runs")],
)
def test_a_question_about_every_run_lists_them(text, command, known):
    assert read(text, known).command == command


def test_a_figure_over_every_run_is_asked_about_never_the_latest_runs(known):
    intent = read("which run reached the lowest loss?", known)
    assert "Which runs should I compare" in (intent.clarify or "")


def test_both_gpus_are_two(known):
    intent = read("train 8 steps on both cards with fsdp", known)
    assert (intent.args.get("nproc"), intent.args.get("layout")) == (2, "dp_shard=2")


@pytest.mark.parametrize(
    "text, args",
    [
        ("best layout for gemma two nine b on eight a one hundred eighty gig", {"gpu": "a100-80gb", "devices": 8}),
        ("plan qwen two point five seven b on four h one hundreds", {"gpu": "h100-sxm", "devices": 4}),
        ("would llama 3.1 8b fit on 2 a100 40GiB", {"gpu": "a100-40gb", "devices": 2}),
    ],
)
def test_dictated_gpu_names_and_sizes_in_gib(text, args, known):
    """ "a one hundred forty gig" is an A100 with 40 GiB, never a 140 GiB device; a size in GiB picks the preset."""
    intent = read(text, known)
    assert intent.command == "plan" and {k: intent.args.get(k) for k in args} == args


@pytest.mark.parametrize(
    "text, sweep",
    [
        ("put what we learned about layouts into the docs", "sweeps/layouts-nov"),
        ("a pull request with the learning rate findings, please", "sweeps/lr-scan"),
        ("report on the lr results", "sweeps/lr-scan"),
    ],
)
def test_a_sweep_described_by_a_word_anywhere_in_the_sentence(text, sweep, known):
    intent = read(text, known)
    assert intent.command in ("docs", "pr", "report") and intent.args.get("sweep") == sweep


@pytest.mark.parametrize("text", ["ok go ahead and run that", "launch this plan", "fine, start it"])
def test_a_launch_pointing_back_at_a_plan_is_asked_about(text, known):
    """A plan ranks layouts for its own hardware and model: "run that" launches nothing until the user says what."""
    intent = read(text, known, planned({"model": "llama-3.1-8b", "devices": 8, "gpu": "h100"}))
    assert intent.command == "run" and "Launch what" in (intent.clarify or "")


def test_a_lot_of_gpus_is_vague(known):
    assert "How many GPUs" in (read("plan our model for lots of gpus", known).clarify or "")


@pytest.mark.parametrize("word", ["stats", "lots", "lost", "world", "late", "star", "exist"])
def test_english_words_one_letter_from_a_rule_word_are_no_typos(word):
    """ "stats" is no typo of "status", "lots" none of "loss": correcting them changed what a request asked for."""
    assert normalise(f"the {word} of it") == f"the {word} of it"


@pytest.mark.parametrize(
    "text, args",
    [("train with fsdp and tp on 4 gpus, 5 steps", {"nproc": 4, "layout": "dp_shard=2,tp=2"})],
)
def test_two_layout_words_on_a_count_with_one_split(text, args, known):
    """4 processes over FSDP and TP split only as 2 x 2; 8 could be 2 x 4 or 4 x 2, so that is asked."""
    assert {k: read(text, known).args.get(k) for k in args} == args
    assert "How should 8 processes split" in (read("train with fsdp and tp on 8 gpus", known).clarify or "")


@pytest.mark.parametrize(
    "text",
    [
        "sweep 6 trials with activation checkpointing on",
        "start a layout sweep at lr 3e-4",
        "sweep for 50 steps a trial",
    ],
)
def test_a_sweep_asks_about_settings_it_cannot_take(text, known):
    intent = read(text, known)
    assert intent.command == "sweep" and "cannot take" in (intent.clarify or "")


def test_a_sweep_again_with_no_sweep_before_asks(known):
    assert "started none" in (read("do the sweep once more", known).clarify or "")


@pytest.mark.parametrize("text", ["stop r1 and tp-try", "wait for baseline-ddp and r1"])
def test_a_one_run_tool_with_two_runs_named_asks_which_first(text, known):
    assert "One run at a time" in (read(text, known).clarify or "")


def test_two_runs_in_a_results_question_compare_them(known):
    intent = read("peak memory, baseline-ddp vs r1", known)
    assert (intent.command, intent.words) == ("compare", ["runs/baseline-ddp", "runs/r1"])


def test_a_setting_turned_back_on(known):
    intent = read(
        "again, but switch compile back on", known, launched({"steps": 4, "overrides": ["train.compile=false"]})
    )
    assert intent.clarify is None and intent.args["set"] == ["train.compile=true"]


@pytest.mark.parametrize("text", ["how much vram does this box have", "tp-try metrics.json"])
def test_hardware_memory_and_a_runs_file_by_name(text, known):
    assert read(text, known).command == ("hardware" if "vram" in text else "read")


def test_a_family_named_alone_is_its_preset_or_a_choice(known):
    """ "mixtral" has two presets (8x7b, 8x22b): asked which, never dropped (and never corrected into "mistral")."""
    intent = read("plan mixtral on 16 h100s", known)
    assert "mixtral-8x7b or mixtral-8x22b" in (intent.clarify or "")


def test_why_a_named_sweep_won_reads_that_sweep(repo):
    """ "why" about lr-scan explains lr-scan, not the conversation's or the repository's latest sweep."""
    item = {"id": "why", "request": "i wanna see what the lr-scan winner was and why",
            "expect": {"tool": "read_sweep", "args": {"sweep": "sweeps/lr-scan"}}}  # fmt: skip
    assert [j["outcome"] for j in run_set([item], OfflinePlanner())] == ["right"]  # the agent's real graph
    intent = read("why did the learning rate sweep pick that one?", Known.read(repo))
    assert (intent.command, intent.args) == ("why", {"sweep": "sweeps/lr-scan"})


def test_a_multiplier_alone_after_a_plan_is_that_plan_changed(known):
    intent = read("double the gpus", known, planned({"model": "llama-3.1-8b", "devices": 8, "gpu": "h100"}))
    assert (intent.command, intent.args.get("devices"), intent.args.get("model")) == ("plan", 16, "llama-3.1-8b")


@pytest.mark.parametrize(
    "text, command, args",
    [
        (
            "entrena 12 pasos con ddp en 2 gpus, sin compile",
            "run",
            {"nproc": 2, "steps": 12, "layout": "dp_replicate=2"},
        ),
        ("lance 8 étapes avec fsdp sur 2 gpus", "run", {"nproc": 2, "steps": 8, "layout": "dp_shard=2"}),
        ("zeig mir die Ergebnisse von baseline-ddp", "results", {"run": "runs/baseline-ddp"}),
        ("espera a que termine tp-try", "status", {"wait": "yes", "run": "runs/tp-try"}),
    ],
)
def test_requests_in_spanish_french_and_german_words(text, command, args, known):
    intent = read(text, known)
    assert intent.command == command and {k: intent.args.get(k) for k in args} == args


def test_why_a_run_failed_after_reading_it_reads_its_results(known):
    intent = read("so why did it die?", known, launched_run("runs/tp-try"))
    assert (intent.command, intent.args) == ("results", {"run": "runs/tp-try"})


def test_rerun_it_after_reading_a_run_copies_that_runs_layout(known):
    """ "rerun it with AC" after reading tp-try: tp-try's layout and processes, AC on; never the defaults."""
    intent = read("rerun it, this time with act ckpt", known, launched_run("runs/tp-try"))
    assert intent.clarify is None
    assert (intent.args["nproc"], intent.args["layout"]) == (2, "tp=2")
    assert intent.args["set"] == ["train.activation_checkpointing=true"]


@pytest.mark.parametrize(
    "text, command",
    [("the crashed one, what happened?", "results"), ("sweeps?", "trials"), ("system info please", "hardware")],
)
def test_terse_requests_and_descriptions_are_no_cues(text, command, known):
    """ "the crashed one" names a run: its words are no status cue."""
    assert read(text, known).command == command


@pytest.mark.parametrize("text", ["train the 13b for 10 steps", "launch qwen on 2 gpus, 5 steps"])
def test_a_launch_naming_a_model_only_loosely_asks_which(text, known):
    assert "Which model should it train" in (read(text, known).clarify or "")


@pytest.mark.parametrize(
    "text, dim, args",
    [
        ("train on 2 gpus without tp", "tp", {"nproc": 2}),
        ("launch 5 steps on 2 gpus, no fsdp", "dp_shard", {"nproc": 2, "steps": 5}),
        ("train 10 steps, not pipelined", "pp", {"steps": 10}),
        ("fsdp on 2 procs, not ddp, 15 steps", "dp_replicate", {"nproc": 2, "steps": 15, "layout": "dp_shard=2"}),
        ("train with tp=2 on 2 processes, no pipeline parallelism", "pp", {"nproc": 2, "layout": "tp=2"}),
        ("don't use tp, train 4 steps on 2 gpus", "tp", {"nproc": 2, "steps": 4}),
    ],
)
def test_a_negated_layout_is_left_out_and_asks_nothing(text, dim, args, known):
    """ "without tp" on 2 GPUs is no tp=2 and no setting to doubt: the launch keeps what was stated, without it."""
    intent = read(text, known)
    assert intent.command == "run" and intent.clarify is None
    assert dim + "=" not in intent.args.get("layout", "") and args.items() <= intent.args.items()


@pytest.mark.parametrize(
    "text, layout",
    [
        ("train 6 steps on 2 gpus with tp, actually make that fsdp", "dp_shard=2"),
        ("launch on 2 gpus with dp_replicate=2... no wait, tp=2", "tp=2"),
    ],
)
def test_a_self_correction_replaces_the_layout_before_it(text, layout, known):
    intent = read(text, known)
    assert intent.clarify is None and intent.args["layout"] == layout


def test_at_nk_in_a_what_if_is_the_context_and_a_k_count_is_never_its_digits(known):
    """ "fit on 8 h100 at 8k?" plans 8192 tokens; "8k" never counts as the 8 of "8 h100" (a dropped value)."""
    intent = read("would llama 3.1 8b fit on 8 h100 at 16k?", known)
    assert intent.args["seq_len"] == 16384
    assert "8k" in (read("plan llama-3.1-8b on 8 h100s, 8k please", known).clarify or "")


def test_a_number_inside_a_model_presets_config_is_no_placed_value(known):
    """32 layers of llama-3.1-8b's config do not hold the user's "32": the dropped value is asked about, in one line."""
    intent = read("train llama 3.1 8b on 2 gpus with grad accumulation 32", known)
    assert "What is 32 for" in (intent.clarify or "") and "model.config=..." in intent.clarify


@pytest.mark.parametrize(
    "text, wanted",
    [
        ("train 10 steps, don't touch packing", []),
        ("train 5 steps with compile on and leave activation checkpointing as it is", ["train.compile=true"]),
        ("launch 5 steps; keep packing off", ["data.packing=false"]),
    ],
)
def test_a_setting_left_as_it_is_is_neither_set_nor_negated(text, wanted, known):
    """ "don't touch packing" is no "packing off": a wrong action the negation words would have made."""
    intent = read(text, known)
    assert intent.clarify is None and intent.args.get("set", []) == wanted


@pytest.mark.parametrize(
    "text, command",
    [
        ("So what I'd like is a run on 2 gpus with ddp for 5 steps", "run"),
        ("would you mind stopping baseline-ddp? it hangs", "cancel"),
        ("could we run 6 trials of the layouts sweep again on the long config?", "sweep"),
    ],
)
def test_polite_and_indirect_requests(text, command, known):
    intent = read(text, known)
    assert intent.command == command and intent.clarify is None


@pytest.mark.parametrize(
    "text",
    [
        "write up the other sweep",
        "tweak the warmup and launch",
        "train a little longer this time",
        "bump up the micro batch and rerun",
        "wait",
    ],
)
def test_vague_references_and_settings_without_values_are_asked_about(text, known):
    intent = read(text, known)
    assert intent.clarify is not None


@pytest.mark.parametrize("text", ["train 2 x longer than the default 20 steps", "train longer than 20 steps: 30"])
def test_a_length_with_its_number_is_no_vague_change(text, known):
    intent = read(text, known)
    assert intent.command == "run" and "What should change" not in (intent.clarify or "")


def test_benchmark_the_latest_is_the_latest_run(known):
    assert read("benchmark the latest", known).args == {"model": "runs/r1"}


def test_at_n_tokens_in_a_what_if_is_the_context_never_a_throughput(known):
    assert read("best layout for smollm2 1.7b on 4 l40s at 2048 tokens?", known).args["seq_len"] == 2048
    assert "seq_len" not in read("did baseline-ddp run at 900 tokens/s?", known).args


@pytest.mark.parametrize(
    "text",
    [
        "train 10 steps based off the long config",
        "launch 5 steps without waiting",
        "train 6 steps, no worries if it fails",
        "train 4 steps with dp_shard=2 on 2 gpus whether or not it fits",
    ],
)
def test_everyday_negations_that_switch_nothing_off_do_not_block_a_launch(text, known):
    intent = read(text, known)
    assert intent.command == "run" and intent.clarify is None


@pytest.mark.parametrize(
    "text, plain",
    [("fsdp on 4 gpsu wihtout compile", "fsdp on 4 gpus without compile"), ("packing disbaled", "packing disabled")],
)
def test_typos_of_the_words_a_negation_and_a_count_rely_on(text, plain):
    assert normalise(text) == plain


@pytest.mark.parametrize(
    "text, args",
    [
        ("and at 32k?", {"nodes": 4, "devices": 8, "seq_len": 32768}),
        ("same but a100 80gb", {"nodes": 4, "devices": 8, "gpu": "a100-80gb"}),
        ("how about llama 2 70b instead", {"nodes": 4, "devices": 8, "model": "llama-2-70b"}),
    ],
)
def test_a_follow_up_keeps_the_nodes_of_a_multi_node_plan(text, args, known):
    """The devices carried from the plan before are no devices stated now: the nodes stay (they were dropped, so a
    4-node plan became a 1-node one)."""
    before = planned({"model": "llama-3.1-70b", "devices": 8, "nodes": 4, "gpu": "h100", "seq_len": 8192})
    intent = read(text, known, before)
    assert intent.command == "plan" and {k: intent.args.get(k) for k in args} == args


@pytest.mark.parametrize(
    "text, args",
    [
        ("and with 4 per node?", {"devices": 4, "nodes": 2}),
        ("at 32k context please", {"seq_len": 32768, "nodes": 2}),
        ("and on a single one?", {"devices": 1}),
    ],
)
def test_a_follow_up_plan_changes_one_fact_of_the_plan_before(text, args, known):
    before = planned({"model": "llama-3.1-70b", "devices": 8, "nodes": 2, "gpu": "h100"})
    intent = read(text, known, before)
    assert intent.command == "plan" and intent.args["model"] == "llama-3.1-70b"
    assert {k: intent.args.get(k) for k in args} == args


@pytest.mark.parametrize(
    "text, command",
    [("is tp-try still alive", "status"), ("r1: alive or dead?", "status"), ("what's in runs/", "runs")],
)
def test_alive_and_what_is_under_runs(text, command, known):
    assert read(text, known).command == command


# --- phenomena behind fresh_d's and fresh_e's misses, each with sentences of its own -----------------------------


@pytest.mark.parametrize(
    "text, layout, nproc",
    [
        ("train on 4 gpus with every gpu keeping its own full copy of the model", "dp_replicate=4", 4),
        ("train on 2 cards, each card holding only a slice of the weights", "dp_shard=2", 2),
        ("split every weight matrix across 4 gpus and train", "tp=4", 4),
        ("train with the first half of the layers on one gpu and the second half on the other gpu", "pp=2", 2),
    ],
)
def test_a_layout_described_in_plain_words_is_the_layout_it_describes(text, layout, nproc, known):
    intent = read(text, known)
    assert intent.command == "run" and intent.clarify is None
    assert intent.args["layout"] == layout and intent.args["nproc"] == nproc


@pytest.mark.parametrize(
    "text, plain",
    [
        ("sweep configs slash long dot yaml", "sweep configs/long.yaml"),
        ("status of the t p try run", "status of the tp try run"),
        ("llama four oh five b", "llama 405 b"),
        ("a dozen trials, or half a dozen", "12 trials, or 6"),
        ("mistral7b on 2 gpus", "mistral 7b on 2 gpus"),
        ("8 40GB A100s", "8 A100 40GBs"),
        ("measure the layouts", "measure the layouts"),
    ],
)
def test_dictated_and_glued_words_are_written_as_typed(text, plain, known):
    assert normalise(text, known.names) == plain


def test_a_size_alone_names_a_model_only_where_one_preset_has_it(known):
    assert read("405b on 4 nodes of 8 h100s", known).args["model"] == "llama-3.1-405b"
    several = read("a 7b on 4 l40s?", known)
    assert "model" not in several.args and "mistral-7b" in several.clarify


@pytest.mark.parametrize(
    "text, gpu",
    [
        ("plan llama-3.1-70b on 8 a100s", None),  # no size said: asked
        ("plan llama-3.1-8b on 8 a100s", None),  # asked even where both sizes would plan alike
        ("if we had 16 A100 cards, how would mistral 7b be split?", None),
        ("plan llama-3.1-70b on 8 a100s with 40GB each", "a100-40gb"),
        ("plan llama-3.1-70b on 8 80GB a100s", "a100-80gb"),
        ("how would llama 3.1 8b shard over 8 A100-40GB", "a100-40gb"),
        ("plan mistral 7b on 4 a100 80g", "a100-80gb"),
        ("llama 3.1 8b on 8 eighty gig A100s, what layout?", "a100-80gb"),
        ("plan llama 3.1 8b auf 8 A100 mit 40GB", "a100-40gb"),  # the size joined by a preposition of any language
    ],
)
def test_an_unsized_a100_is_always_asked_about(text, gpu, known):
    intent = read(text, known)
    assert intent.args.get("gpu") == gpu and (intent.clarify is None) == (gpu is not None)


def test_a_memory_size_follow_up_is_the_gpu_before_in_that_size(known):
    intent = read("and the 40 gig version?", known, planned({"devices": 8, "gpu": "a100-80gb"}))
    assert intent.command == "plan" and intent.args["gpu"] == "a100-40gb" and intent.args["devices"] == 8


def test_nodes_with_no_gpus_and_no_plan_before_are_asked_about(known):
    assert read("what if we had 3 nodes?", known).clarify
    after = read("what if we had 3 nodes?", known, planned({"devices": 8, "nodes": 2, "gpu": "h100"}))
    assert after.clarify is None and after.args["nodes"] == 3 and after.args["devices"] == 8


@pytest.mark.parametrize(
    "text, command",
    [
        ("before buying hardware: could 8 h200s handle llama-3.1-70b? just an estimate", "plan"),
        ("a quick summary of how runs/r1 turned out", "results"),
        ("a markdown summary of the lr-scan sweep to share", "report"),
        ("a summary of how the lr-scan sweep went", "trials"),
        ("find the fastest layout by actually trying them, 10 trials", "sweep"),
        ("try 16 different setups to find the best layout", "sweep"),
        ("show me all the experiments we ran so far", "runs"),
    ],
)
def test_everyday_wordings_of_what_ifs_summaries_and_sweeps(text, command, known):
    assert read(text, known).command == command


def test_the_same_launch_with_another_layout_word_keeps_the_processes(known):
    intent = read("same thing but with fsdp instead", known, launched({"nproc": 4, "layout": "dp_replicate=4"}))
    assert intent.args["layout"] == "dp_shard=4" and intent.args["nproc"] == 4
    assert read("give it a go on tp instead", known, launched({"nproc": 2, "layout": "dp_shard=2"})).clarify


@pytest.mark.parametrize(
    "text",
    [
        "annuleer de run r1 nu, het is fout",
        "schrijf een rapport van de lr sweep voor mij",
        "meshpilot.yaml de sweep wo hajimete kudasai, trials 4 de onegaishimasu",
        "mujhe ek naya run chala do 4 GPUs pe, dp_shard=4 ke saath",
        "mostra il file meshpilot.yaml per favore",
    ],
)
def test_a_sentence_mostly_in_an_unread_language_never_acts(text, known):
    intent = read(text, known)
    assert intent.clarify is not None and intent.clarify.startswith("Most of that is in a language I do not read")


def test_an_unread_language_may_still_wait_on_a_named_run_and_english_with_de_is_english(known):
    intent = read("aspettare che runs/r1 finisca, poi dimmi quando", known)
    assert (intent.command, intent.args, intent.clarify) == ("status", {"wait": "yes", "run": "runs/r1"}, None)
    assert read("train 20 steps with dp_shard=2 on 2 GPUs, de-duplicated data", known).clarify is None


@pytest.mark.parametrize(
    "text, layout",
    [
        ("train 30 steps on 4 GPUs, each GPU should keep a whole copy of the model", "dp_replicate=4"),
        ("go: 2 gpus, I'd like every card to have a full copy of the model, 10 steps", "dp_replicate=2"),
        ("start 40 steps splitting the tokens across 4 cards", "cp=4"),
        ("launch 20 steps on 2 gpus and split each sequence across them", "cp=2"),
        ("train with pee pee equal to four on 4 gpus, 20 steps", "pp=4"),
        ("run tee pee equals 2 on 2 gpus for 10 steps", "tp=2"),
    ],
)
def test_layouts_said_in_plain_or_dictated_words(text, layout, known):
    intent = read(text, known)
    assert (intent.command, intent.args.get("layout"), intent.clarify) == ("run", layout, None)


def test_a_follow_up_of_a_plan_that_tries_a_sequence_length_plans_again(known):
    earlier = planned({"devices": 8, "gpu": "a100-80gb", "model": "llama-3.1-8b"})
    intent = read("ok try seq_len 4096 then", known, earlier)
    assert (intent.command, intent.args.get("seq_len"), intent.args.get("devices")) == ("plan", 4096, 8)
    assert read("now launch it with seq_len 4096", known, earlier).command == "run"


def read_a_sweep(sweep: str) -> list:
    """An earlier turn that read a sweep's trials (what "that winner" then means)."""
    call = {"name": "read_sweep", "args": {"sweep": sweep}, "id": "earlier"}
    return [
        HumanMessage(f"trials of {sweep}"),
        AIMessage("", tool_calls=[call]),
        ToolMessage("{}", tool_call_id="earlier"),
    ]


def test_launching_the_winner_after_reading_a_sweep_takes_its_layout(known):
    winner = json.loads((known.root / "sweeps/layouts-nov/summary.json").read_text())["trials"][0]
    degrees = ",".join(f"{k}={v}" for k, v in winner["params"]["layout"].items() if v > 1)
    intent = read("good, train that winner on 2 GPUs for 40 steps", known, read_a_sweep("sweeps/layouts-nov"))
    assert (intent.command, intent.args.get("layout"), intent.args.get("steps"), intent.clarify) == (
        "run", degrees, 40, None)  # fmt: skip
    assert read("start the winner on 8 gpus", known, read_a_sweep("sweeps/layouts-nov")).clarify is not None


def test_an_unsized_a100_for_the_experiments_own_model_is_asked_about(known):
    assert "A100 40GB or A100 80GB" in read("plan our model on 8 A100s", known).clarify
    sized = read("plan our model on 8 A100s, the 40 gig ones", known)
    assert (sized.args.get("gpu"), sized.clarify) == ("a100-40gb", None)


def test_the_same_launch_on_another_experiment_file_is_a_launch_not_a_read(known):
    earlier = launched({"nproc": 2, "layout": "tp=2", "steps": 30})
    intent = read("repeat that again but for configs/long.yaml", known, earlier)
    assert (intent.command, intent.args.get("experiment"), intent.args.get("layout")) == (
        "run", "configs/long.yaml", "tp=2")  # fmt: skip
    assert read("show configs/long.yaml", known, earlier).command == "read"
    assert read("is the same thing in configs/long.yaml?", known).command != "run"  # no launch before


# --- fresh_g's miss kinds: negated actions, number words, refusals, a plan with nothing to plan, stated numbers -----


@pytest.mark.parametrize(
    "text, command, key, value",
    [
        ("don't open a pull request, just write up the lr-scan sweep as a report", "report", "sweep", "sweeps/lr-scan"),
        ("skip the PR for now and write the report on layouts-nov", "report", "sweep", "sweeps/layouts-nov"),
        ("without a PR, refresh the docs from the lr-scan sweep", "docs", "sweep", "sweeps/lr-scan"),
        ("not a PR, a markdown report of sweeps/layouts-nov please", "report", "sweep", "sweeps/layouts-nov"),
        ("no need for a report, open a PR with sweeps/lr-scan", "pr", "sweep", "sweeps/lr-scan"),
        ("the PR can wait, update the docs with layouts-nov", "docs", "sweep", "sweeps/layouts-nov"),
        ("instead of a PR, write a report of the lr-scan sweep", "report", "sweep", "sweeps/lr-scan"),
        ("hold off on the pull request and put the lr-scan numbers into docs/training.md", "docs", "sweep",
         "sweeps/lr-scan"),
        ("don't kill it, wait for tp-try to finish", "status", "run", "runs/tp-try"),
        ("no benchmark, just show the results of r1", "results", "run", "runs/r1"),
        ("don't pull the lr-scan results into training.md yet, just show me the winner", "trials", "sweep",
         "sweeps/lr-scan"),
    ],
)  # fmt: skip
def test_an_action_said_not_to_be_taken_is_never_taken_and_the_positive_verb_wins(text, command, key, value, known):
    intent = read(text, known)
    assert (intent.command, intent.args.get(key), intent.clarify) == (command, value, None)


@pytest.mark.parametrize(
    "text, command",
    [
        ("open a PR for the lr-scan sweep, no report needed", "pr"),
        ("no, open the PR for layouts-nov", "pr"),
        ("no wait, write the report of lr-scan", "report"),
        ("write the report of lr-scan, not the docs", "report"),
        ("train 20 steps on 2 gpus with fsdp, no PR", "run"),  # "no PR" is no setting to ask about
    ],
)
def test_a_negation_takes_back_only_the_action_it_names(text, command, known):
    intent = read(text, known)
    assert (intent.command, intent.clarify) == (command, None)


def test_negated_actions_name_the_action_and_blank_its_words():
    from agent.understanding.intents import negated_actions

    negated, rest = negated_actions("don't open a pr, only update docs/training.md")
    assert negated == {"pr"} and "open" not in rest and "update docs/training.md" in rest
    assert negated_actions("no, open the pr") == (set(), "no, open the pr")


@pytest.mark.parametrize(
    "text, plain",
    [
        ("a dozen trials", "12 trials"),
        ("half a dozen trials", "6 trials"),
        ("two dozen steps", "24 steps"),
        ("a couple of gpus", "2 gpus"),
        ("a few hundred steps", "a few hundreds steps"),  # no number: never 100
        ("several thousand steps", "several thousands steps"),
    ],
)
def test_number_words_as_counts_and_vague_ones_kept_apart(text, plain):
    assert normalise(text) == plain


@pytest.mark.parametrize(
    "text, args",
    [
        ("a dozen trials on the long config please", {"trials": 12, "experiment": "configs/long.yaml"}),
        ("search for the fastest layout with half a dozen trials", {"trials": 6}),
        ("kick off a sweep, two dozen trials", {"trials": 24}),
        ("let's hunt for the best layout automatically, say a dozen trials?", {"trials": 12}),
    ],
)
def test_a_count_of_trials_in_words_starts_a_sweep(text, args, known):
    intent = read(text, known)
    assert (intent.command, intent.clarify) == ("sweep", None)
    assert {k: intent.args.get(k) for k in args} == args


@pytest.mark.parametrize(
    "text, said",
    [
        ("run a sweep with a few trials", "a few trials"),
        ("run a few trials of the layout sweep", "a few trials"),
        ("train for several hundred steps on 2 gpus with ddp", "several hundred steps"),
        ("train 20 steps on a handful of gpus", "a handful of gpus"),
        ("plan llama 3 8b on a few h100s", "a few h100s"),
    ],
)
def test_a_count_said_with_no_number_is_asked_about(text, said, known):
    clarify = read(text, known).clarify
    assert clarify is not None and said in clarify and "?" in clarify


@pytest.mark.parametrize(
    "text, command",
    [
        ("show the top 3 trials of the lr-scan sweep", "trials"),
        ("what were the best 3 trials of the last sweep", "trials"),
        ("what did the last few steps of r1 look like", "results"),
    ],
)
def test_trials_and_steps_of_what_exists_are_read_never_run_or_asked(text, command, known):
    intent = read(text, known)
    assert (intent.command, intent.clarify) == (command, None)


@pytest.mark.parametrize(
    "text, kind",
    [
        ("delete runs/tp-try", "delete"),
        ("rm -rf sweeps/lr-scan", "delete"),
        ("please get rid of all the old runs", "delete"),
        ("wipe the baseline-ddp run, we don't need it", "delete"),
        ("erase the logs of r1", "delete"),
        ("cancel r1 and then delete it", "delete"),
        ("force-push the report branch", "push"),
        ("push the report straight to master, skip the review", "push"),
        ("print my HF token", "print"),
        ("what's the OPENAI_API_KEY env var set to?", "print"),
        ("give me the wandb api key", "print"),
        ("show me the environment variables", "print"),
    ],
)
def test_what_no_tool_may_do_is_refused_in_one_line(text, kind, known):
    intent = read(text, known)
    assert intent.refusal is not None and kind in intent.refusal and "\n" not in intent.refusal
    assert intent.command == "help" and intent.args == {}


@pytest.mark.parametrize(
    "text, command",
    [
        ("remove packing and train 20 steps on 2 gpus with ddp", "run"),
        ("drop the lr to 1e-4 and train 20 steps on 2 gpus with ddp", "run"),
        ("don't delete anything, just cancel tp-try", "cancel"),
        ("tokens per second of r1", "results"),
        ("what's the token throughput of r1", "results"),
        ("push the lr-scan sweep as a PR", "pr"),
        ("open a PR against main for lr-scan", "pr"),
    ],
)
def test_settings_removed_figures_of_tokens_and_pull_requests_are_no_refusals(text, command, known):
    intent = read(text, known)
    assert (intent.refusal, intent.command) == (None, command)


@pytest.mark.parametrize(
    "text",
    ["remove packing and train 20 steps on 2 gpus with ddp", "train 20 steps on 2 gpus with ddp and packing, "
     "actually remove it"],
)  # fmt: skip
def test_remove_turns_a_setting_off(text, known):
    intent = read(text, known)
    assert "data.packing=false" in intent.args["set"] and (intent.clarify, intent.refusal) == (None, None)


def test_a_secret_to_something_is_no_secret(known):
    assert read("what's the secret to faster training?", known).refusal is None


@pytest.mark.parametrize(
    "text, refused",
    [
        ("what's the pad_token in the tokenizer config?", False),  # a vocabulary's special tokens are no secrets
        ("what's the eos_token id?", False),
        ("compare r1 but drop the failed trials", False),  # "drop" from what is shown, not from the disk
        ("show me the HF_TOKEN", True),
        ("drop runs/tp-try", True),
        ("drop all the old checkpoints", True),
    ],
)
def test_special_tokens_and_dropped_trials_are_no_refusals(text, refused, known):
    assert (read(text, known).refusal is not None) == refused


def test_a_refusal_calls_no_tool():
    from agent.offline import respond

    reply = respond([HumanMessage("delete runs/tp-try, nobody needs it")], {"read_results", "cancel_run"})
    assert reply.tool_calls == [] and "does not delete" in reply.content


@pytest.mark.parametrize("text", ["plan layouts for me", "plan something", "give me a layout plan",
                                  "which parallel layout is best?"])  # fmt: skip
def test_a_plan_with_neither_model_nor_hardware_asks_which_model(text, known):
    intent = read(text, known)
    assert intent.command == "plan" and "Which model" in (intent.clarify or "")


@pytest.mark.parametrize(
    "text", ["plan on this machine", "plan our model", "plan on 8 h100s", "rank layouts for the gpus here"]
)
def test_a_plan_naming_this_machine_a_model_or_gpus_does_not_ask_which_model(text, known):
    intent = read(text, known)
    assert intent.command == "plan" and intent.clarify is None
    assert read("and on 16?", known, planned({"devices": 8, "model": "llama-3.1-8b"})).clarify is None


@pytest.mark.parametrize(
    "text, args",
    [
        ("plan 2x RTX-4090 smollm2-1.7b", {"devices": 2, "gpu": "rtx-4090", "model": "smollm2-1.7b"}),
        ("plan 8x rtx 4090 for qwen 2.5 7b", {"devices": 8, "gpu": "rtx-4090", "model": "qwen2.5-7b"}),
        ("how would llama 3 8b split over 4 h100s with 2048 tokens per sequence", {"devices": 4, "seq_len": 2048}),
        ("plan smollm2 1.7b on 2 l40s, sequences of 4k tokens", {"devices": 2, "seq_len": 4096}),
    ],
)
def test_a_device_count_before_a_gpu_and_tokens_per_sequence_are_taken(text, args, known):
    intent = read(text, known)
    assert intent.command == "plan" and intent.clarify is None
    assert {k: intent.args.get(k) for k in args} == args


def test_tokens_per_sample_in_a_launch_set_the_sequence_length(known):
    intent = read("train 20 steps with 512 tokens per sample on 2 gpus with ddp", known)
    assert "data.seq_len=512" in intent.args["set"] and intent.clarify is None
    assert "seq_len" not in read("what were r1's tokens per second", known).args


# --- phenomena behind fresh_h's misses, each with sentences of its own ------------------------------------------


@pytest.mark.parametrize(
    "text, args",
    [
        ("plan llama-3.1-70b on 2 h200 nodes with 8 gpus each", {"nodes": 2, "devices": 8, "gpu": "h200"}),
        ("llama-3.1-405b on 4 H100 nodes of 8, how to split?", {"nodes": 4, "devices": 8, "gpu": "h100-sxm"}),
        ("plan llama-3.1-8b on 16 H100s across 2 H100 nodes", {"nodes": 2, "devices": 8, "gpu": "h100-sxm"}),
        ("plan qwen2.5-72b on 2 8xH200 boxes", {"nodes": 2, "devices": 8, "gpu": "h200"}),
        ("plan llama-3.1-8b on an 8x h100 node", {"nodes": 1, "devices": 8, "gpu": "h100-sxm"}),
        ("plan llama-3.1-8b on 4 A100-80GB", {"nodes": None, "devices": 4, "gpu": "a100-80gb"}),
        ("plan llama-3.1-8b on two 4090 cards", {"nodes": None, "devices": 2, "gpu": "rtx-4090"}),
        ("plan qwen2.5-72b on 2 nodes of 8 h-100s", {"nodes": 2, "devices": 8, "gpu": "h100-sxm"}),
    ],
)
def test_the_digits_of_a_gpus_name_are_never_a_count(text, args, known):
    intent = read(text, known)
    assert intent.command == "plan" and intent.clarify is None
    assert {k: intent.args.get(k) for k in args} == args


@pytest.mark.parametrize(
    "text, nodes",
    [
        ("how would qwen2.5-72b do on a couple of H200 nodes?", 2),
        ("plan llama-3.1-70b on two H 200 nodes", 2),
        ("plan llama-3.1-70b on 4 l40s machines", 4),
        ("plan gemma-2-9b on 3 gpu nodes", 3),
        ("what would mistral 7b look like on 3 A100-80GB servers?", 3),
        ("plan llama-3.1-70b on 2 dgx h100 boxes", 2),
    ],
)
def test_nodes_named_by_their_gpus_ask_how_many_gpus_per_node(text, nodes, known):
    intent = read(text, known)
    assert intent.command == "plan" and intent.args.get("nodes") == nodes and "devices" not in intent.args
    assert "per node" in str(intent.clarify)


def test_gpus_in_each_node_with_no_count_of_nodes_ask_how_many_nodes(known):
    intent = read("what if llama-3.1-70b ran on 8x H100 nodes?", known)
    assert intent.args.get("nodes") is None and intent.clarify.startswith("How many nodes?")
    # a GPU's name with no count: no number at all, never its digits
    assert "devices" not in read("plan llama-3.1-8b on h100 cards", known).args
    assert "nproc" not in read("train 20 steps on a100 gpus", known).args


@pytest.mark.parametrize(
    "text, args",
    [
        ("a100 40 gig x 8, llama-2-13b, what's the best split", {"devices": 8, "gpu": "a100-40gb"}),
        ("h100x8, plan llama-3.1-8b", {"devices": 8, "gpu": "h100-sxm"}),
        ("rank layouts for mistral 7b on l40s x4", {"devices": 4, "gpu": "l40s"}),
        ("a100 80gb * 4 - best layout for llama-2-13b?", {"devices": 4, "gpu": "a100-80gb"}),
        ("4090 X 2, smollm2 1.7b, which split?", {"devices": 2, "gpu": "rtx-4090"}),
    ],
)
def test_a_count_after_a_gpus_name_counts_that_gpu(text, args, known):
    intent = read(text, known)
    assert intent.command == "plan" and intent.clarify is None
    assert {k: intent.args.get(k) for k in args} == args


def test_a_count_after_a_gpus_name_is_read_as_one_before_it_and_no_other_number_moves():
    assert normalise("a100 40 gig x 8") == "8 x a100 40GiB"
    assert normalise("h100 x 8 gpus") == "8 x h100 gpus"
    assert normalise("h100 x 2.5") == "h100 x 2.5"  # no count
    assert normalise("tp=2 x dp_shard=4") == "tp=2,dp_shard=4"


@pytest.mark.parametrize(
    "text, args",
    [
        (
            "I've got 8 accelerators with 80 GB each (not one of the presets), rank layouts for llama-3.1-70b",
            {"devices": 8, "device_mem": "80GiB", "model": "llama-3.1-70b"},
        ),
        ("plan llama-3.1-8b on 8x 80GB accelerators", {"devices": 8, "device_mem": "80GiB"}),
        ("I have four accelerators of 48GB each, plan llama-3.1-8b", {"devices": 4, "device_mem": "48GiB"}),
        ("plan llama-3.1-8b on 8 80GB cards", {"devices": 8, "device_mem": "80GiB"}),
    ],
)
def test_accelerators_with_a_memory_each_are_gpus_of_that_memory(text, args, known):
    intent = read(text, known)
    assert intent.command == "plan" and intent.clarify is None
    assert {k: intent.args.get(k) for k in args} == args


def test_a_memory_before_cards_is_no_count_of_them(known):
    intent = read("what about the 40GB cards?", known, planned({"devices": 8, "gpu": "a100-80gb"}))
    assert intent.args["devices"] == 8 and intent.args["gpu"] == "a100-40gb"


@pytest.mark.parametrize(
    "text, layout, nproc",
    [
        ("fully shard over 8 GPUs, turn on activation checkpointing, micro batch 4", "dp_shard=8", 8),
        ("shard the model across 4 GPUs and train for 3k steps", "dp_shard=4", 4),
        ("train 20 steps on 4 gpus, shard the weights and optimizer state", "dp_shard=4", 4),
        ("shard it over 2 gpus, 30 steps", "dp_shard=2", 2),
        ("train 30 steps with sharded parameters on 2 gpus", "dp_shard=2", 2),
        ("train on 2 gpus and shard everything over them for 10 steps", "dp_shard=2", 2),
        ("shard the model 4 ways, 20 steps", "dp_shard=4", 4),
        ("train with 2-way sharding for 10 steps", "dp_shard=2", 2),
    ],
)
def test_sharding_the_model_in_plain_words_is_fsdp(text, layout, nproc, known):
    intent = read(text, known)
    assert intent.command == "run" and intent.clarify is None
    assert intent.args["layout"] == layout and intent.args["nproc"] == nproc


@pytest.mark.parametrize(
    "text, command",
    [
        ("benchmark the sharded checkpoint of r1", "bench"),
        ("how should I shard the model across 8 h100s?", "plan"),
        ("how would you shard our experiment model over 2 cards with 48 gigs apiece", "plan"),
        ("shard the dataset across 4 workers and train 10 steps", "run"),
        ("benchmark the 4-way sharded checkpoint of r1", "bench"),
    ],
)
def test_shards_of_checkpoints_data_or_a_question_how_to_shard_are_no_fsdp(text, command, known):
    intent = read(text, known)
    assert intent.command == command and "dp_shard" not in str(intent.args.get("layout"))
    assert "fsdp" not in normalise(text, known.names)


@pytest.mark.parametrize(
    "text, command",
    [
        ("latest run — state?", "status"),
        ("r1 state?", "status"),
        ("what state is tp-try in?", "status"),
        ("how is the latest run doing?", "status"),
        ("what's r1 up to", "status"),
        ("where's baseline-ddp at?", "status"),
        ("r1 done?", "status"),
        ("tp-try — how's it looking?", "status"),
        ("any news on r1?", "status"),
        ("what is baseline-ddp doing", "status"),
        ("how's the loss looking on r1?", "results"),
        ("how did r1 do", "results"),
        ("final loss of r1", "results"),
        ("r1 final loss?", "results"),
        ("how's the loss of r1 doing?", "results"),
        ("what was the loss when r1 finished?", "results"),
        ("r1's optimizer state memory?", "results"),
        ("how big is the optimizer state for llama-3.1-8b on 8 h100s?", "plan"),
    ],
)
def test_a_runs_state_in_a_few_words_is_its_status_and_its_figures_its_results(text, command, known):
    assert read(text, known).command == command


@pytest.mark.parametrize(
    "text, command, wait",
    [
        ("don't wait on r1, just tell me where it is at right now", "status", None),
        ("no need to wait for tp-try, what's its status", "status", None),
        ("without waiting, is baseline-ddp done?", "status", None),
        ("do not wait for r1, where is it at?", "status", None),
        ("don't bother waiting on tp-try - what step is it on", "status", None),
        ("not waiting on it: status of r1", "status", None),
        ("wait for r1", "status", "yes"),
        ("wait for r1, don't kill it", "status", "yes"),
        ("no wait, wait for tp-try", "status", "yes"),  # "no wait" corrects, it refuses no wait
        ("don't kill r1, just wait on it", "status", "yes"),
    ],
)
def test_a_wait_said_not_to_make_is_never_made(text, command, wait, known):
    intent = read(text, known)
    assert intent.command == command and intent.args.get("wait") == wait and intent.args.get("run")


@pytest.mark.parametrize(
    "text, command",
    [
        ("Has the tp-try job completed, or where does it stand?", "status"),
        ("has the baseline-ddp training completed", "status"),
        ("where does r1 stand?", "status"),
        ("r1: finished or crashed?", "status"),
        ("is r1 stil runing?", "status"),
        ("is tp-try still runnning", "status"),
        ("has r1 finshed", "status"),
        ("has baseline-ddp compelted?", "status"),
        ("how did r1 do", "results"),
        ("what was the loss of r1 when it finished?", "results"),
        ("where does the loss of r1 stand", "results"),
    ],
)
def test_completed_or_still_running_asks_a_status_and_figures_ask_results(text, command, known):
    assert read(text, known).command == command


@pytest.mark.parametrize(
    "text, plain",
    [
        ("is r1 stil runing?", "is r1 still running?"),
        ("has it compelted", "has it completed"),
        ("did it finsih", "did it finish"),
        ("it finshed", "it finished"),
        ("is tp-try still runnning", "is tp-try still running"),
        ("skill spill stall", "skill spill stall"),  # correct words one edit from "still" are left alone
        ("tunning the lr, a cunning plan", "tunning the lr, a cunning plan"),  # nor any near "running"
        ("block till it completes", "block until it completes"),
    ],
)
def test_the_normaliser_fixes_typos_of_a_runs_state(text, plain):
    assert normalise(text) == plain


@pytest.mark.parametrize(
    "text, command, args",
    [
        (
            "our experiment model with sequence length bumped to 2048 on 4 GPUs of 24 gigs each, which layouts?",
            "plan",
            {"seq_len": 2048, "devices": 4, "device_mem": "24GiB"},
        ),
        ("plan llama-3.1-8b on 8 h100s with seq len raised to 4096", "plan", {"seq_len": 4096, "devices": 8}),
        ("plan llama-3.1-8b on 8 h100s, context of 8192 tokens", "plan", {"seq_len": 8192}),
        ("plan llama-3.1-8b on 8 h100s, sequence length set to 1024", "plan", {"seq_len": 1024}),
        ("train 10 steps on 2 gpus with seq len increased to 1024", "run", {"set": ["data.seq_len=1024"]}),
        (
            "start a run pipelined into 2 stages on 2 GPUs, micro batch set to 4",
            "run",
            {"set": ["train.micro_batch=4"]},
        ),
        ("train 20 steps with lr set to 1e-3 on 2 gpus", "run", {"set": ["train.lr=1e-3"]}),
        ("train 20 steps on 2 gpus, micro batch bumped up to 8", "run", {"set": ["train.micro_batch=8"]}),
    ],
)
def test_a_setting_changed_to_a_value_keeps_the_value(text, command, args, known):
    intent = read(text, known)
    assert intent.command == command and intent.clarify is None
    assert {k: intent.args.get(k) for k in args} == args


@pytest.mark.parametrize(
    "text, command, run",
    [
        ("Please wait the end of run r1.", "status", "runs/r1"),
        ("wait for run r1.", "status", "runs/r1"),
        ("Cancel r1.", "cancel", "runs/r1"),
        ("status of run r1!", "status", "runs/r1"),
    ],
)
def test_a_full_stop_after_a_name_is_no_part_of_it(text, command, run, known):
    intent = read(text, known)
    assert intent.command == command and intent.args.get("run") == run and intent.clarify is None


def test_a_missing_name_before_a_full_stop_is_still_asked_about(known):
    assert "'r9'" in str(read("results of r9.", known).clarify)


@pytest.mark.parametrize(
    "text, args",
    [
        (
            "Gemma 2 9b in 2 GPU of 48GB memory, how to parallel it? Not start training.",
            {"model": "gemma-2-9b", "devices": 2, "device_mem": "48GiB"},
        ),
        ("mistral 7b on 4 gpu of 24GB, how to parallel?", {"model": "mistral-7b", "devices": 4, "device_mem": "24GiB"}),
        ("how to split llama-3.1-8b in 8 h100?", {"model": "llama-3.1-8b", "devices": 8}),
    ],
)
def test_how_to_parallel_a_model_on_gpus_is_a_plan(text, args, known):
    intent = read(text, known)
    assert intent.command == "plan" and intent.clarify is None
    assert {k: intent.args.get(k) for k in args} == args


def test_not_inside_a_status_question_is_no_refused_launch(known):
    assert read("is r1 not started yet?", known).command == "status"


@pytest.mark.parametrize(
    "text, command",
    [
        ("What compute is available on the current machine?", "hardware"),
        ("what resources are available here?", "hardware"),
        ("what compute do I have on this box", "hardware"),
        ("how much compute would llama-3.1-8b need on 8 h100s?", "plan"),
    ],
)
def test_compute_available_here_is_the_hardware(text, command, known):
    assert read(text, known).command == command


@pytest.mark.parametrize(
    "text, command",
    [
        ("don't resume r1, just tell me its status", "status"),
        ("no need to resume tp-try, how did it do?", "results"),
        ("without resuming it, what's r1's loss", "results"),
        ("don't pick r1 back up, what was its loss", "results"),
        ("no resuming, status of r1", "status"),
        ("don't rerun r1, just its status", "status"),
        ("resume r1", "resume"),
        ("pick r1 back up", "resume"),
    ],
)
def test_a_resume_said_not_to_make_is_never_made(text, command, known):
    intent = read(text, known)
    assert intent.command == command and intent.args.get("run") in ("runs/r1", "runs/tp-try")


@pytest.mark.parametrize(
    "text, wanted",
    [
        ("train 20 steps in fp8 on 2 GPUs with dp_shard=2", ["train.precision=fp8"]),
        ("train 20 steps on 2 gpus with dp_shard=2, not in fp8", []),
        ("train 20 steps on 2 gpus, never with bf16", []),
        ("train the tiny model 10 steps with zero stage 1 on 2 gpus", ["train.zero_stage=1"]),
        ("train with zero-2 on 4 gpus for 50 steps", ["train.zero_stage=2"]),
        ("train with ZeRO-3 on 4 gpus for 50 steps", []),  # FSDP2's default: the layout alone
    ],
)
def test_a_precision_or_zero_stage_is_set_unless_a_negation_takes_it_back(text, wanted, known):
    """ZeRO's stages are FSDP2's sharding (train.zero_stage), not an unknown layout; "not in fp8" sets no fp8 (and
    may ask what it turns off, as any negation it cannot place)."""
    intent = read(text, known)
    assert intent.command == "run" and (intent.clarify is None or not wanted)
    assert [o for o in intent.args.get("set", []) if o.startswith(("train.precision", "train.zero_stage"))] == wanted
    assert intent.args["layout"].startswith("dp_shard") if "zero" in text.lower() else True


def test_push_to_main_is_refused_even_when_a_pr_is_named_only_to_be_declined(known):
    assert "never pushes to main" in read("push the report to main, don't open a PR", known).refusal
    assert read("push the layouts-nov report as a PR", known).refusal is None


# --- fresh_k's miss kinds, in sentences of our own --------------------------------------------------------------


@pytest.mark.parametrize(
    "text, command, args",
    [
        ("hlat tp-try now", "cancel", {"run": "runs/tp-try"}),
        ("stpo baseline-ddp please", "cancel", {"run": "runs/baseline-ddp"}),
        ("pls wiat on baseline-ddp", "status", {"run": "runs/baseline-ddp", "wait": "yes"}),
        ("resmue r1", "resume", {"run": "runs/r1"}),
        ("kil tp-try", "cancel", {"run": "runs/tp-try"}),
        ("train the lnog config for 10 steps on 2 gpus with ddp", "run", {"experiment": "configs/long.yaml"}),
        ("20 steps on 2 gpus with fsdp, micro bacth 2", "run", {"set": ["train.micro_batch=2"]}),
        ("benchamrk the basline ddp run", "bench", {"model": "runs/baseline-ddp"}),
        ("plan llama 3.2 1b on a singel rtx 4090", "plan", {"devices": 1, "gpu": "rtx-4090"}),
    ],
)
def test_typos_of_action_words_and_of_the_repositorys_names_are_read_as_them(text, command, args, known):
    intent = read(text, known)
    assert intent.command == command and intent.clarify is None
    assert {k: intent.args.get(k) for k in args} == args


@pytest.mark.parametrize(
    "text",
    [
        "I want to watch the match, then shop for a song",  # want/wait, match/batch, shop/stop, song/long
        "a lone step, then a halo",  # lone/long, step/stop, halo/halt
        "the wail and the macro",  # one letter changed in a short word: never a typo of wait or micro
        "I presume a micron",  # a letter more than resume or micro: everyday words
    ],
)
def test_everyday_words_one_letter_from_a_short_action_word_are_no_typos(text, known):
    assert normalise(text, known.names) == text


@pytest.mark.parametrize(
    "text, command",
    [
        ("write up lr-scan, then later a PR", "report"),
        ("report on layouts-nov; maybe later we can open a pull request", "report"),
        ("make a report of lr-scan, the PR can come afterwards", "report"),
        ("write the lr-scan report, we will decide on the pull request tomorrow", "report"),
        ("we'll think about a benchmark afterwards, first stop tp-try", "cancel"),
        ("cancel tp-try; we can see about a sweep later", "cancel"),
        ("open a pull request for lr-scan, and after that update the docs", "pr"),
        ("first the benchmark of r1, a report we can do afterwards", "bench"),
        ("the report I'll write later, first benchmark r1", "bench"),  # "later, first X": X is first
        ("do the report of lr-scan, and the pull request after", "report"),
        ("report for layouts-nov now, PR in a second moment", "report"),
        ("first report of lr-scan, the pr we decide later", "report"),
        ("open the pr after the report of lr-scan", "report"),  # the PR comes after the report
        ("do a report after the layouts-nov sweep", "report"),  # after a sweep: from it, and no new sweep
        ("update the docs after the lr-scan sweep", "docs"),
        # not put off: the action itself
        ("open a PR for layouts-nov", "pr"),
        ("stop r1 and I'll check it later", "cancel"),
    ],
)
def test_an_action_put_off_to_later_is_not_the_action_asked_for_now(text, command, known):
    intent = read(text, known)
    assert intent.command == command and intent.clarify is None


def test_an_action_that_is_all_put_off_is_never_taken(known):
    assert read("open a PR for lr-scan later", known).command not in ("pr", "report", "docs")


@pytest.mark.parametrize(
    "text, command, args",
    [
        ("start another pass of layout tuning on the long config", "sweep", {"experiment": "configs/long.yaml"}),
        ("kick off a fresh round of tuning", "sweep", {}),
        # a report of a sweep named by "<name> sweep" starts none; a new run is a launch
        ("do the report of lr-scan sweep", "report", {"sweep": "sweeps/lr-scan"}),
        ("launch a new run on 2 gpus with fsdp for 10 steps", "run", {"layout": "dp_shard=2"}),
    ],
)
def test_a_round_of_layout_tuning_is_a_sweep(text, command, args, known):
    intent = read(text, known)
    assert intent.command == command and intent.clarify is None
    assert {k: intent.args.get(k) for k in args} == args


@pytest.mark.parametrize(
    "text, command, args",
    [
        ("refresh the docs with layouts-nov rather than the lr one", "docs", {"sweep": "sweeps/layouts-nov"}),
        ("report on the layouts sweep rather than lr-scan", "report", {"sweep": "sweeps/layouts-nov"}),
        ("status of r1, not tp-try", "status", {"run": "runs/r1"}),
        ("benchmark the checkpoint of r1, not baseline-ddp", "bench", {"model": "runs/r1"}),
        ("results of baseline-ddp, not the fsdp one", "results", {"run": "runs/baseline-ddp"}),
        # the action said not to be done to one, and another named as the one it is for
        ("don't benchmark r1, the ddp baseline is the one I want scored", "bench", {"model": "runs/baseline-ddp"}),
        ("do not evaluate r1; baseline-ddp instead", "bench", {"model": "runs/baseline-ddp"}),
        ("don't cancel tp-try, r1 is the one to stop", "cancel", {"run": "runs/r1"}),
        ("don't benchmark r1, it is not ready", "results", {"run": "runs/r1"}),  # no other named: no benchmark
    ],
)
def test_a_run_or_sweep_after_a_negation_is_the_one_not_meant(text, command, args, known):
    intent = read(text, known)
    assert intent.command == command and intent.clarify is None
    assert {k: intent.args.get(k) for k in args} == args


@pytest.mark.parametrize(
    "text, refused",
    [
        ("don't benchmark r1, baseline-ddp is the one I want left alone", "bench"),  # the other is left alone too
        ("don't cancel tp-try, r1 instead", "cancel"),  # a stop taken back stays taken back
        ("don't resume r1, tp-try instead", "resume"),
    ],
)
def test_an_action_taken_back_moves_to_no_other_run_unless_asked(text, refused, known):
    """The other named is no object of the action taken back: what to do with it is asked, naming the action."""
    intent = read(text, known)
    verb = {"bench": "benchmark"}.get(refused, refused)
    assert intent.command != refused
    assert intent.clarify == (f"You said not to {verb} that one: what should I do with the other, e.g. `{verb} NAME` "
                              "or `status of NAME`?")  # fmt: skip


@pytest.mark.parametrize(
    "text",
    [
        "don't benchmark r1, tp-try is the one, but not yet",  # put off
        "don't benchmark r1, baseline-ddp is the one I'd rather not score either",  # refused too
        "don't benchmark r1, tp-try is the one I don't trust",  # described, not asked for
        "don't benchmark r1, baseline-ddp is the one we already scored",
        "don't benchmark r1, tp-try is the one I want to compare it with",  # another action wanted with it
        "don't benchmark r1, its checkpoint is the one that broke",  # no other run named at all
    ],
)
def test_the_one_after_an_action_taken_back_is_acted_on_only_where_the_tail_asks_for_it(text, known):
    """ "X is the one" names what to act on only where what follows restates the wish ("the one I want scored")."""
    intent = read(text, known)
    assert intent.command != "bench" and intent.clarify is not None


@pytest.mark.parametrize(
    "text, sweep",
    [
        ("show me the usual trials of lr-scan", "sweeps/lr-scan"),
        ("lr-scan: the standard trials, please", "sweeps/lr-scan"),
    ],
)
def test_default_trials_read_without_a_sweep_verb_are_a_sweeps_trials(text, sweep, known):
    """ "The usual trials" sets a new sweep's count only beside a verb that asks for a sweep; else they are read."""
    intent = read(text, known)
    assert intent.command == "trials" and intent.args == {"sweep": sweep} and intent.clarify is None


@pytest.mark.parametrize(
    "text, excluded",
    [
        ("update the docs, not from layouts-nov", "sweeps/layouts-nov"),  # the latest is the one ruled out
        ("write the report, but not for the lr sweep", "sweeps/lr-scan"),
        ("cancel it, not r1", "runs/r1"),
    ],
)
def test_a_sentence_that_only_rules_a_name_out_asks_which_it_means(text, excluded, known):
    intent = read(text, known)
    assert intent.clarify and f"if not {excluded}" in intent.clarify


@pytest.mark.parametrize(
    "text, command, run",
    [
        ("don't wait, just tell me where tp-try is at", "status", "runs/tp-try"),
        ("where tp-try's at?", "status", "runs/tp-try"),
        ("can you check where baseline-ddp is up to", "status", "runs/baseline-ddp"),
        ("where the loss of r1 is at", "results", "runs/r1"),  # a figure's value: its results
    ],
)
def test_where_a_run_is_at_is_its_status(text, command, run, known):
    intent = read(text, known)
    assert intent.command == command and intent.args.get("run") == run and intent.clarify is None


@pytest.mark.parametrize(
    "text, command",
    [
        ("are any jobs still going?", "runs"),
        ("what's running right now?", "runs"),
        ("I forgot everything I launched, remind me", "runs"),
        ("is something still training in this repo?", "runs"),
        ("anything running?", "runs"),
        ("which jobs are active", "runs"),
        ("is r1 still running?", "status"),  # one run named: its state
    ],
)
def test_a_question_about_every_runs_state_lists_the_runs(text, command, known):
    assert read(text, known).command == command


@pytest.mark.parametrize(
    "text, command",
    [
        ("Can we circulate the lr-scan learnings? A written summary for the execs", "report"),
        ("I need a one-pager on layouts-nov for my boss", "report"),
        ("put the layouts-nov findings in a memo", "report"),
        ("summary of lr-scan", "trials"),  # a summary to read, not a document
        ("I'd like a recap of how layouts-nov went, for my team update", "trials"),
    ],
)
def test_a_written_summary_is_a_report_and_a_summary_to_read_is_the_sweep(text, command, known):
    intent = read(text, known)
    assert intent.command == command and intent.clarify is None and intent.args.get("sweep")


@pytest.mark.parametrize(
    "text, wanted",
    [
        ("ddp on 2 gpus, fp32, 10 steps", ["train.precision=fp32"]),
        ("fsdp on 2 procs, bf16, seed 3, 12 steps", ["train.precision=bf16", "train.seed=3"]),
        ("train 10 steps with ddp on 2 gpus, precision fp8", ["train.precision=fp8"]),
        ("train 20 steps on 2 gpus with dp_shard=2, not fp8, bf16", ["train.precision=bf16"]),
        ("launch 10 steps with fsdp on 2 gpus using sgd instead of adamw", ["train.optimizer=sgd"]),
        ("skip adam for once, fsdp on 2 gpus for 10 steps, lion", ["train.optimizer=lion"]),
        ("dont use adam, use adamw on 2 gpus ddp 10 steps", ["train.optimizer=adamw"]),
        (
            "ddp on 2 gpus, 10 steps, seed 7, weight decay 0.1, warmup 5, grad clip 1.0",
            ["train.seed=7", "train.weight_decay=0.1", "train.warmup_steps=5", "train.grad_clip=1.0"],
        ),
    ],
)
def test_a_precision_or_optimizer_named_alone_in_a_launch_is_set(text, wanted, known):
    intent = read(text, known)
    assert intent.command == "run" and intent.clarify is None
    assert sorted(o for o in intent.args["set"] if not o.startswith("model.")) == sorted(wanted)


@pytest.mark.parametrize(
    "text, question",
    [
        ("train 10 steps on 2 gpus with ddp, no adam", "Which optimizer"),  # taken back, nothing instead
        ("train 10 steps with ddp on 2 gpus in fp16", "not fp16"),  # no such precision: never dropped
        ("launch 10 steps on 2 gpus, packing", "packing be on or off"),  # last in the list: asked
        ("train 10 steps with packing off and compile", "torch.compile be on or off"),
    ],
)
def test_a_value_taken_back_with_none_instead_or_one_the_trainer_lacks_is_asked(text, question, known):
    intent = read(text, known)
    assert intent.command == "run" and question in str(intent.clarify)


@pytest.mark.parametrize(
    "text, wanted",
    [
        (
            "ddp on 4 gpus, 10 steps, activation checkpointing, lr 1e-3",
            ["train.activation_checkpointing=true", "train.lr=1e-3"],
        ),
        ("fsdp on 2, packing, 30 steps", ["data.packing=true"]),
        (
            "fsdp on 2, 30 steps, packing off, compile, seed 1",
            ["data.packing=false", "train.compile=true", "train.seed=1"],
        ),
    ],
)
def test_a_switch_named_alone_inside_a_launchs_list_is_on(text, wanted, known):
    intent = read(text, known)
    assert intent.command == "run" and intent.clarify is None
    assert sorted(intent.args["set"]) == sorted(wanted)


@pytest.mark.parametrize(
    "text, question",
    [
        ("fp32 with ddp on 2 gpus, let's see whether it gets any slower", None),  # what it is for, not a change
        ("ddp on 2 gpus for 10 steps, check if bigger batches help", None),
        ("train 10 steps with ddp on 2 gpus, make it faster", "What should change"),
    ],
)
def test_what_a_launch_is_for_is_no_change_to_ask_about(text, question, known):
    intent = read(text, known)
    assert intent.command == "run"
    assert (intent.clarify is None) if question is None else question in str(intent.clarify)


@pytest.mark.parametrize(
    "text, command",
    [
        ("cores?", "hardware"),
        ("how much ram?", "hardware"),
        ("cuda?", "hardware"),
        ("hw?", "hardware"),
        ("runs?", "runs"),
    ],
)
def test_a_bare_word_about_this_machine_asks_its_hardware(text, command, known):
    assert read(text, known).command == command


@pytest.mark.parametrize(
    "text, model",
    [
        ("benchmark r1 on the in-house eval suite", "runs/r1"),
        ("how does baseline-ddp's checkpoint do on our proprietary benchmark suite", "runs/baseline-ddp"),
        ("evaluate r1 against the internal suite", "runs/r1"),
    ],
)
def test_an_internal_or_in_house_suite_is_the_builtin_one(text, model, known):
    intent = read(text, known)
    assert intent.command == "bench" and intent.clarify is None
    assert intent.args == {"model": model, "suite": "builtin"}


def test_a_suite_the_repository_lacks_is_still_asked_about(known):
    assert "'nightly'" in str(read("benchmark r1 on the nightly suite", known).clarify)


@pytest.mark.parametrize(
    "text, command, asks",
    [
        ("care to open the PR for lr-scan?", "pr", False),
        ("any chance you could write up layouts-nov?", "report", False),
        ("layouts-nov is done, would you mind drafting the report?", "report", False),
        ("did we write the layouts-nov report?", "report", True),  # a question about it: confirmed first
    ],
)
def test_a_polite_request_asked_as_a_question_is_a_request(text, command, asks, known):
    intent = read(text, known)
    assert intent.command == command and (intent.clarify is not None) == asks


@pytest.mark.parametrize(
    "text, args",
    [
        ("give it a whirl on 2 gpus with fsdp", {"nproc": 2, "layout": "dp_shard=2"}),
        ("give the long config a go, 10 steps", {"experiment": "configs/long.yaml", "steps": 10}),
        ("take meshpilot.yaml for a spin, stock settings", {"experiment": "meshpilot.yaml"}),
    ],
)
def test_giving_an_experiment_a_spin_launches_it(text, args, known):
    intent = read(text, known)
    assert intent.command == "run" and intent.args == args
    # the second reading may doubt a file named beside the launch (it reads "show a file" in "take meshpilot.yaml
    # for a spin"): then the launch is what its question offers
    assert intent.clarify is None or "It also reads as a request to show a file" in intent.clarify


@pytest.mark.parametrize(
    "text, command",
    [
        ("without relaunching anything, what's the loss of tp-try", "results"),
        ("don't retrain, just status of r1", "status"),
        ("no need to restart it, tokens/s of baseline-ddp please", "results"),
        ("rerun r1 with 30 steps", "run"),
    ],
)
def test_a_relaunch_said_not_to_make_is_never_made(text, command, known):
    assert read(text, known).command == command


@pytest.mark.parametrize(
    "text, steps, wanted",
    [
        ("ddp on 2 gpus, 10 steps, save a checkpoint every 5 steps", 10, ["train.checkpoint_every=5"]),
        ("fsdp on 2 gpus for 30 steps, checkpoint_every 10", 30, ["train.checkpoint_every=10"]),
        ("fsdp on 2 gpus, 10 steps, cosine schedule", 10, ["train.lr_schedule=cosine"]),
        ("ddp on 2 gpus 12 steps, constant lr", 12, ["train.lr_schedule=constant"]),
        ("ddp on 2 gpus, 10 steps, log to wandb and tensorboard", 10, ["train.trackers=[wandb,tensorboard]"]),
        (
            "train 10 steps with ddp on 2 gpus, lr schedule linear, lr 1e-3",
            10,
            ["train.lr_schedule=linear", "train.lr=1e-3"],
        ),
    ],
)
def test_an_interval_a_schedule_or_a_tracker_of_a_launch_is_kept_and_no_interval_is_its_step_count(
    text, steps, wanted, known
):
    intent = read(text, known)
    assert intent.command == "run" and intent.clarify is None and intent.args["steps"] == steps
    assert sorted(intent.args["set"]) == sorted(wanted)


@pytest.mark.parametrize(
    "text",
    [
        "fsdp on 2 gpus, 10 steps, lr 1e-3 with warmup of 10%",  # a share is no warmup step count
        "fsdp on 2 gpus, 10 steps, batch size 16",  # micro batch or global? asked
        "launch tp=2 on 2 procs with grad accumulation 4",
    ],
)
def test_a_launch_value_no_setting_takes_as_said_is_asked(text, known):
    intent = read(text, known)
    assert intent.command == "run" and intent.clarify


def test_what_is_left_once_the_action_put_off_is_gone_starts_nothing_else(known):
    """'the sweep' is a noun here: with the report put off, nothing asks for a new sweep."""
    intent = read("write the report after the sweep finishes", known)
    assert intent.command not in ("sweep", "run", "bench", "pr", "docs", "cancel")


@pytest.mark.parametrize(
    "text, asks",
    [
        ("stop r1 after it reaches step 10", True),  # cancel_run stops it now: asked, never early
        ("kill tp-try once the loss is below 3", True),
        ("cancel baseline-ddp at step 50", True),
        ("abort tp-try if it's still hogging the gpus", False),  # a condition on now
        ("cancel r1 when you can", False),
        ("kill tp-try, after that show me the loss", False),
    ],
)
def test_a_stop_said_for_later_is_asked_and_a_stop_now_is_made(text, asks, known):
    intent = read(text, known)
    assert intent.command == "cancel" and intent.args.get("run") and (intent.clarify is not None) == asks


@pytest.mark.parametrize(
    "text, command, args",
    [
        ("give r1 another go with 30 steps", "run", {"steps": 30, "nproc": 2, "layout": "dp_shard=2"}),
        ("have we got any runs that crashed?", "runs", {}),
        ("did any of my runs fail", "runs", {}),
    ],
)
def test_another_go_of_a_run_repeats_it_and_any_run_crashed_lists_them(text, command, args, known):
    intent = read(text, known)
    assert intent.command == command and intent.clarify is None and intent.args == args


def test_trying_an_experiment_out_with_launch_facts_is_a_launch_and_a_what_if_stays_a_plan(known):
    intent = read("could you kick the tires on the long config? 5 steps, 2 gpus, ddp", known)
    assert intent.command == "run" and intent.clarify is None
    assert intent.args == {"experiment": "configs/long.yaml", "nproc": 2, "layout": "dp_replicate=2", "steps": 5}
    assert read("would 2 gpus with ddp for 5 steps be enough for llama-3.1-8b?", known).command == "plan"


@pytest.mark.parametrize(
    "text, command, args, asks",
    [
        ("pls benchmark the newest checkpoint, not the ddp one", "bench", {"model": "runs/r1"}, False),
        ("report on the latest sweep, not lr-scan", "report", {"sweep": "sweeps/layouts-nov"}, False),
        ("report on the latest sweep, not layouts-nov", "report", {}, True),  # the latest is the one ruled out
    ],
)
def test_the_latest_beside_a_name_ruled_out_is_taken_unless_it_is_that_one(text, command, args, asks, known):
    intent = read(text, known)
    assert intent.command == command and (intent.clarify is not None) == asks
    assert {k: intent.args.get(k) for k in args} == args


def test_a_sequence_length_after_a_plan_is_the_plans_and_asks_nothing(known):
    earlier = planned({"gpu": "l40s", "devices": 4}, "plan on 4 l40s")
    intent = read("now try seq_len 2048", known, earlier)
    assert intent.command == "plan" and intent.clarify is None and intent.args["seq_len"] == 2048


@pytest.mark.parametrize(
    "text, command, wait",
    [
        ("stop waiting, just tell me r1's loss", "results", None),  # the wait is stopped, not r1
        ("quit waiting on tp-try and show its status", "status", None),
        ("hold on, what is the loss of r1", "results", None),  # an interjection, no wait
        ("hang on, is baseline-ddp done?", "status", None),
        ("dont stop r1, just wait", "status", "yes"),
        ("hold on until tp-try exits", "status", "yes"),
    ],
)
def test_stopping_a_wait_cancels_nothing_and_hold_on_waits_only_for_something(text, command, wait, known):
    intent = read(text, known)
    assert intent.command == command and intent.args.get("wait") == wait and intent.args.get("run")


@pytest.mark.parametrize(
    "text, command",
    [
        ("nvm the pr, write up layouts-nov", "report"),
        ("scrap the benchmark, just the status of r1", "status"),
        ("PR for lr-scan? nah, just a report", "report"),
        ("stop r1? no, just check its loss", "results"),  # a stop asked about and answered no
        ("kill tp-try? nope. status please", "status"),
        ("Can we run 16 trials of the layout sweep on configs/long.yaml? no rush", "sweep"),  # no rush refuses nothing
    ],
)
def test_an_action_waved_off_is_not_taken(text, command, known):
    assert read(text, known).command == command


@pytest.mark.parametrize(
    "text", ["train 10 steps on 2 gpus with ddp, not the long config", "not on the long config: ddp on 2 gpus, 5 steps"]
)
def test_an_experiment_ruled_out_is_not_launched_and_asks_nothing(text, known):
    intent = read(text, known)
    assert intent.command == "run" and intent.clarify is None and "experiment" not in intent.args


def test_a_hyphenated_word_is_no_run_name(known):
    intent = read("Team wants a deck-ready summary of layouts-nov", known)
    assert intent.clarify is None and intent.args.get("sweep") == "sweeps/layouts-nov"


@pytest.mark.parametrize(
    "text, value",
    [
        ("train 20 steps on 2 gpus with dp_shard=2, ckpting on", "true"),
        ("launch 10 steps dp_shard=2 on 2 gpus, ckpting off", "false"),
        ("2 procs, tp=2, 30 steps, ckpting: on, packing off", "true"),
        ("run dp_shard=2 on 2 gpus for 10 steps with no ckpting", "false"),
    ],
)
def test_ckpting_is_activation_checkpointing(text, value, known):
    intent = read(text, known)
    assert intent.command == "run" and f"train.activation_checkpointing={value}" in intent.args["set"]


def test_saving_a_ckpt_is_no_activation_checkpointing(known):
    intent = read("train 20 steps dp_shard=2 on 2 gpus, save a ckpt every 5 steps", known)
    assert not any("activation_checkpointing" in s for s in intent.args.get("set", []))


@pytest.mark.parametrize(
    "text, path",
    [
        ("show me meshpilto.yaml", "meshpilot.yaml"),
        ("cat noets.md", "notes.md"),
        ("open nots.md", "notes.md"),  # a letter left out of a stem of five
        ("show me meshpilot.yaml", "meshpilot.yaml"),
    ],
)
def test_a_file_named_with_a_typo_is_the_file_it_misspells(text, path, known):
    intent = read(text, known)
    assert intent.args.get("path") == path


# a stem of 4 has too many neighbours one letter changed ("lonq"), though not two letters swapped (below) nor one left
# out ("lng", test_fresh_t_kinds); a digit added names another file ("meshpilot2.yaml"), not a typo
@pytest.mark.parametrize("text", ["show me trainer.yaml", "cat configs/lonq.yaml", "show me meshpilot2.yaml"])
def test_a_file_far_from_every_name_or_short_stays_as_typed(text, known):
    assert read(text, known).args.get("path") == text.split()[-1]


@pytest.mark.parametrize(
    "text", ["start a 3-trial sweep of the long-context config", "sweep the long-seq experiment, 4 trials"]
)
def test_a_config_named_first_in_a_compound_is_that_config(text, known):
    intent = read(text, known)
    assert intent.command == "sweep" and intent.args.get("experiment") == "configs/long.yaml"


def test_a_compound_config_the_repository_lacks_names_none(known):
    intent = read("sweep the short-context config with 3 trials", known)
    assert intent.args.get("experiment") != "configs/long.yaml"


@pytest.mark.parametrize(
    "text",
    [
        "make sure the readme reflects lr-scan",
        "I want the documentation to show the numbers of layouts-nov",
        "can we have training.md and the docs updated from lr-scan",
        "get the README synced with the layouts sweep",
        "pull the figures from lr-scan into the training doc",
        "move layouts-nov's results into training.md and the readme",  # the pages named are written to, not read
        "feed the lr-scan numbers into the README and training.md both",
    ],
)
def test_docs_made_to_say_a_sweep_update_the_docs(text, known):
    intent = read(text, known)
    assert intent.command == "docs" and intent.clarify is None and intent.args.get("sweep", "").startswith("sweeps/")


@pytest.mark.parametrize(
    "text",
    [
        "does the readme reflect lr-scan?",
        "what do the docs say about layouts-nov?",
        # figures said not to be written into the docs
        "don't put the lr-scan numbers into the readme",
        "never add the lr-scan figures to the docs",
    ],
)
def test_a_question_about_the_docs_writes_nothing_unasked(text, known):
    intent = read(text, known)
    assert intent.command != "docs" or intent.clarify is not None


@pytest.mark.parametrize(
    "text, command",
    [
        ("is it possible to benchmark r1?", "bench"),
        ("would it be possible to write up lr-scan as a report?", "report"),
        ("is possible to refresh the docs from layouts-nov?", "docs"),
    ],
)
def test_is_it_possible_to_asks_for_a_tool_that_writes_or_measures(text, command, known):
    intent = read(text, known)
    assert intent.command == command and intent.clarify is None


def test_is_it_possible_to_train_asks_whether_it_could_work_never_launches(known):
    intent = read("is it possible to train llama-3.1-70b on 4 h100s?", known)
    assert intent.command != "run" or intent.clarify is not None


@pytest.mark.parametrize(
    "text",
    [
        "I'd like to make a training on 2 gpus with ddp, 10 steps",
        "please create a new training with fsdp on 2 GPU",
        "do a training of 20 steps, dp_shard=2 on 2 gpus",
        "could you make the training with fsdp on 2 gpus, 10 steps?",
        "please do the training on 2 gpus with ddp",
    ],
)
def test_making_a_training_is_a_launch(text, known):
    assert read(text, known).command == "run"


@pytest.mark.parametrize(
    "text", ["make a training plan for llama-3.1-8b on 8 h100s", "make a training estimate for 8 h100s"]
)
def test_a_training_plan_is_no_launch(text, known):
    assert read(text, known).command != "run"


@pytest.mark.parametrize(
    "text, model",
    [
        ("plan 8 h100s - not our own model, qwen 2.5 7b", "qwen2.5-7b"),
        ("layouts for llama 3.1 8b rather than my model, 4 a100 80gb", "llama-3.1-8b"),
        ("what fits on 8 h100s for mistral 7b, not the experiment's model", "mistral-7b"),
    ],
)
def test_the_own_model_ruled_out_leaves_the_model_named(text, model, known):
    intent = read(text, known)
    assert intent.command == "plan" and intent.args.get("model") == model and intent.clarify is None


def test_the_own_model_ruled_out_and_none_named_is_asked(known):
    intent = read("plan 8 h100s but not for our model", known)
    assert intent.command == "plan" and "model" not in intent.args and "Which model" in (intent.clarify or "")


def test_the_own_model_named_is_still_planned(known):
    intent = read("plan our model on 8 h100s", known)
    assert intent.command == "plan" and "model" not in intent.args and intent.clarify is None


@pytest.mark.parametrize(
    "text, trials",
    [("not a big sweep, just a small 3-trial one", 3), ("I don't need a long sweep - only a quick 2-trial one", 2)],
)
def test_not_a_big_x_just_a_small_one_asks_for_x(text, trials, known):
    intent = read(text, known)
    assert intent.command == "sweep" and intent.args.get("trials") == trials


@pytest.mark.parametrize("text", ["no sweep, just train 10 steps on 2 gpus with ddp", "don't sweep, only a 5-step run"])
def test_not_x_just_another_kind_still_negates_x(text, known):
    assert read(text, known).command == "run"


@pytest.mark.parametrize("text", ["show me teh runs", "list hte runs", "list all teh runs please"])
def test_the_with_two_letters_swapped_is_the(text, known):
    assert read(text, known).command == "runs"


@pytest.mark.parametrize(
    "text, model",
    [
        ("pln llama-3.1-8b on 8 h100s", "llama-3.1-8b"),
        ("plan lamma 3.1 8b on 8 h100s", "llama-3.1-8b"),
        ("what fits for qewn 2.5 7b on 4 a100 80gb?", "qwen2.5-7b"),
        ("layouts for llamma 2 70b on 16 h100s over 2 nodes", "llama-2-70b"),
    ],
)
def test_a_misspelt_family_with_its_version_and_size_is_that_preset(text, model, known):
    intent = read(text, known)
    assert intent.command == "plan" and intent.args.get("model") == model and intent.clarify is None


@pytest.mark.parametrize("text", ["plan the 70b on 8 h100s", "plan lamma 70b on 8 h100s"])  # no version: which 70B?
def test_a_size_without_version_or_family_is_still_asked(text, known):
    intent = read(text, known)
    assert "model" not in intent.args and intent.clarify


@pytest.mark.parametrize(
    "text",
    [
        "what sort of box is this, how many cores and how much ram?",
        "on this machine, how many gpus does it have?",
        "for the current server: how much memory and how many cpus?",
    ],
)
def test_a_hardware_question_naming_the_machine_reads_the_hardware(text, known):
    intent = read(text, known)
    assert intent.command == "hardware" and intent.clarify is None


@pytest.mark.parametrize(
    "text",
    [
        "which are all the runs we have?",
        "what finished runs do we have here?",
        "what runs exist in this repo?",
        "As an engineer I want to see every run here so that I can choose one",  # a user story's want, not its reason
        "browse each run in this repo",
    ],
)
def test_which_runs_exist_lists_the_runs(text, known):
    intent = read(text, known)
    assert intent.command == "runs" and intent.clarify is None


@pytest.mark.parametrize("text", ["which run had the lowest loss, r1 or tp-try?", "I want to see every run's loss"])
def test_which_run_did_best_is_no_list(text, known):
    assert read(text, known).command != "runs"


@pytest.mark.parametrize("text", ["wait on tp-try until it finish", "keep waiting for r1 until it complete"])
def test_until_it_finish_without_s_waits(text, known):
    intent = read(text, known)
    assert intent.command == "status" and intent.args.get("wait") == "yes"


@pytest.mark.parametrize(
    "text, gpu",
    [
        ("plan llama-3.1-8b on 4 A100 of 80 GB", "a100-80gb"),
        ("plan llama-3.1-8b on 2 a100s with 40GB", "a100-40gb"),
        ("what fits for mistral 7b on 8 A100 of 40 gig", "a100-40gb"),
    ],
)
def test_a_gpu_of_its_memory_is_that_gpu(text, gpu, known):
    intent = read(text, known)
    assert intent.command == "plan" and intent.args.get("gpu") == gpu and intent.clarify is None


def test_a_card_with_one_preset_keeps_it_whatever_memory_is_said(known):
    intent = read("could llama 3.2 1b run on 1 a10 with 24GB", known)
    assert intent.args.get("gpu") == "a10"


@pytest.mark.parametrize(
    "text, command",
    [
        ("is it possible to cancel r1?", "cancel"),
        ("would it be possible to sweep 4 trials on the long config?", "sweep"),
        ("is it possible to resume r1?", "resume"),
    ],
)
def test_is_it_possible_to_cancel_sweep_or_resume_is_confirmed_never_taken(text, command, known):
    intent = read(text, known)
    assert intent.command == command and (intent.clarify or "").startswith("Do you want me to")


@pytest.mark.parametrize(
    "text, model",
    [
        ("is it possible to train llama 3.1 70b on 4 h100s?", "llama-3.1-70b"),
        # a layout described and asked to be done, of a model named: a what-if
        ("each gpu keeps its own full copy of the model: can we do that with llama 3.1 8b on 8 h100s?", "llama-3.1-8b"),
    ],
)
def test_is_it_possible_to_train_a_model_on_gpus_is_a_plan(text, model, known):
    intent = read(text, known)
    assert intent.command == "plan" and intent.args.get("model") == model


# --- kinds fresh_m missed (issue 33): other phrasings of each, and what must not change ----------------------------


@pytest.mark.parametrize(
    "text, nodes, devices",
    [
        ("plan llama 3.1 70b on 4 nodes 8x h200", 4, 8),  # the count with "x" after the nodes is each node's
        ("3 machines, 8 x a100 80gb, llama 3.1 70b: which layouts?", 3, 8),
        ("plan 2x8 a100 80g for llama 3.1 70b", 2, 8),  # 2 nodes of 8
        ("4 x 8 h100s for llama 3.1 70b, what fits?", 4, 8),
        ("two computers, each with four h100s: how to split llama 3.1 70b?", 2, 4),
        ("plan llama 3.1 70b on 3 servers each having 8 h200s", 3, 8),
        ("plan llama 3.1 70b on two 8-GPU H100 nodes", 2, 8),
        ("plan mistral 7b on 2 machines, 4 a100 80gb per machine", 2, 4),  # the memory is no count per node
        ("plan llama 3.1 70b, 8 80gb h100s per node, 2 nodes", 2, 8),
        # what must not change: a total beside the nodes is split over them, "8x h100" alone is one node's
        ("plan llama 3.1 70b on 4 nodes, 32 h100s", 4, 8),
        ("16 a100 80gb across 2 computers for llama 3.1 70b", 2, 8),
        ("plan llama 3.1 8b on 8x h100", None, 8),
        ("picture 2 racks, each carrying 8 h100s: how to split llama 3.1 70b?", 2, 8),
        ("plan llama 3.1 70b on 3 servers each packing 4 h100s", 3, 4),
        # a rack holds nodes: it is one only where its GPUs are given directly (above)
        ("plan llama 3.1 70b on a rack of 4 servers, 8 h100s each", 4, 8),
        ("plan llama 3.1 70b on 2 racks of 4 nodes each, 8 h100s per node", 8, 8),
        ("plan llama 3.1 70b on 2 racks with 16 nodes total, 8 h100s each", 16, 8),
        ("plan llama 3.1 70b on two racks, each carrying eight H100 NVL", 2, 8),
    ],
)
def test_nodes_described_by_the_gpus_in_each(text, nodes, devices, known):
    intent = read(text, known)
    assert intent.command == "plan" and intent.clarify is None
    assert intent.args.get("nodes") == nodes and intent.args.get("devices") == devices


def test_a_gpus_size_said_after_nodes_of_them_is_that_gpu(known):
    intent = read("if we got 2 computers each with 4 A100s (the 40 gig ones), how would mistral 7b be split?", known)
    assert intent.args.get("gpu") == "a100-40gb" and intent.args.get("nodes") == 2 and intent.clarify is None


@pytest.mark.parametrize(
    "text, layout",
    [
        ("train 20 steps on 4 gpus, each layer split across them", "tp=4"),
        ("train on 2 gpus, slice every weight matrix between them, 10 steps", "tp=2"),
        ("train on 4 gpus with each gpu doing a slice of every layer", "tp=4"),
        ("train on 4 gpus, every gpu holding a chunk of consecutive layers, 10 steps", "pp=4"),
        ("cut the model into 4 stages and train 10 steps", "pp=4"),
        ("train 10 steps, different layers on each gpu, 2 gpus", "pp=2"),
        ("train on 4 gpus with each gpu taking a part of the sequence", "cp=4"),
        ("train on 2 gpus with the sequence split between them, 10 steps", "cp=2"),
        ("train on 4 gpus, the whole model on every gpu, 10 steps", "dp_replicate=4"),
        ("train on 4 gpus, only split the data, 10 steps", "dp_replicate=4"),
        ("train 10 steps on 2 gpus, the parameters split between them", "dp_shard=2"),
        ("train on 8 gpus with the weights sharded, 10 steps", "dp_shard=8"),
        (
            "train on 4 gpus, sharded within each node and replicated across nodes, 10 steps",
            "dp_replicate=2,dp_shard=2",
        ),
        ("train on two gpus, each side carrying half of every layer", "tp=2"),  # half of it: a degree of 2
        # copies of a layout said before it are its data-parallel replicas
        (
            "train 10 steps, each layer split across 2 gpus, and 2 copies of that whole setup, 4 gpus in all",
            "dp_replicate=2,tp=2",
        ),
        ("train pipeline over 2 gpus with 2 replicas of that arrangement, so 4 gpus total", "pp=2,dp_replicate=2"),
    ],
)
def test_a_layout_described_in_plain_words_is_that_layout(text, layout, known):
    intent = read(text, known)
    assert intent.command == "run" and intent.args.get("layout") == layout and intent.clarify is None


@pytest.mark.parametrize(
    "text, args",
    [
        (
            "the guide says each gpu keeps its own full copy of the model; can we try that on 4 gpus?",
            {"nproc": 4, "layout": "dp_replicate=4"},
        ),
        ("the docs say to use tp=2; could we try that on 2 gpus?", {"nproc": 2, "layout": "tp=2"}),
    ],
)
def test_a_layout_described_then_asked_about_is_confirmed_before_it_launches(text, args, known):
    """ "Can we try that on 4 GPUs?" asks: the launch it would be is named in one question, never started unasked."""
    intent = read(text, known)
    assert intent.command == "run" and intent.args == args
    call = ", ".join(f"{k}={v}" for k, v in args.items())
    assert intent.clarify == f"Do you want me to run (/run {call})? yes / edit"


@pytest.mark.parametrize(
    "text, layout",
    [
        ("train on 4 gpus, not splitting the model itself, 10 steps", "dp_replicate=4"),  # the model whole: DDP
        ("train on 2 gpus without sharding the weights", "dp_replicate=2"),
        ("train on 2 gpus, the model is not split, 10 steps", "dp_replicate=2"),
        # another layout named: the negation adds none of its own, and never the split it negates
        ("train on 2 gpus with fsdp, not splitting the layers", "dp_shard=2"),
        ("train 10 steps on 4 gpus, don't put the layers on different gpus, shard the weights", "dp_shard=4"),
        ("train on 2 gpus with tp, not sharding the weights", "tp=2"),
    ],
)
def test_a_split_taken_back_never_becomes_the_split_it_negates(text, layout, known):
    intent = read(text, known)
    assert intent.command == "run" and intent.args.get("layout") == layout and intent.clarify is None


@pytest.mark.parametrize(
    "text",
    [
        "train on 4 gpus, no splitting each layer across them, 10 steps",
        "train 10 steps on 2 gpus, without putting different layers on each gpu",  # words between the negation
        "train 10 steps on 4 gpus, I don't want each gpu to hold a slice of the weights",
        "train 10 steps on 2 gpus and please don't give each gpu a full copy of the model",
        "train 10 steps on 2 gpus, I didn't want each gpu to keep a full copy of the model",
    ],
)
def test_a_layout_description_taken_back_adds_no_layout(text, known):
    intent = read(text, known)
    assert intent.command == "run" and "layout" not in intent.args and intent.clarify is None


def test_a_negation_in_another_clause_takes_no_description_back(known):
    intent = read("don't worry and give each gpu a full copy of the model, 2 gpus 10 steps", known)
    assert intent.args.get("layout") == "dp_replicate=2"


@pytest.mark.parametrize(
    "text",
    ["how should I split the layers across 4 h100s for llama 3.1 8b?", "what's the best way to split each layer "
     "across 8 h100s for llama 3.1 70b?"],
)  # fmt: skip
def test_a_question_how_to_split_is_still_a_plan(text, known):
    assert read(text, known).command == "plan"


@pytest.mark.parametrize(
    "text, packing",
    [
        ("train 10 steps on 2 gpus without the sequences being glued together into one long stream", "false"),
        ("train 10 steps on 2 gpus, don't concatenate the documents", "false"),
        ("train 10 steps on 2 gpus with the documents not glued together", "false"),
        ("train 10 steps on 2 gpus, pad each sequence separately", "false"),
        ("train 10 steps on 2 gpus, keep the samples separate", "false"),
        ("train 10 steps, 2 gpus, the sequences should not be concatenated", "false"),
        ("train 10 steps, 2 gpus, the documents shouldn't get glued together", "false"),  # a contraction is no typo
        ("train 10 steps on 2 gpus, the samples packed together into one long stream", "true"),
        ("train 10 steps on 2 gpus and concatenate the documents into one long stream", "true"),
    ],
)
def test_packing_described_by_what_it_does_keeps_its_negation(text, packing, known):
    intent = read(text, known)
    assert intent.command == "run" and intent.args.get("set") == [f"data.packing={packing}"] and intent.clarify is None


@pytest.mark.parametrize(
    "text, args",
    [
        (
            "restart tp-try's setup on 2 procs with fsdp, packing off",
            {"nproc": 2, "layout": "dp_shard=2", "set": ["data.packing=false"]},
        ),
        ("keep r1's layout but train 50 steps", {"nproc": 2, "layout": "dp_shard=2", "steps": 50}),
        # the layout and processes stated: the run named is no missing piece
        ("relaunch baseline-ddp, tp on 2 gpus, 10 steps", {"nproc": 2, "layout": "tp=2", "steps": 10}),
        ("use tp-try's settings with 30 steps", {"nproc": 2, "layout": "tp=2", "steps": 30}),
    ],
)
def test_a_runs_setup_taken_over_with_what_the_sentence_states_launches(text, args, known):
    intent = read(text, known)
    assert intent.command == "run" and intent.clarify is None
    assert {k: intent.args.get(k) for k in args} == args


@pytest.mark.parametrize(
    "text", ["relaunch r1", "restart baseline-ddp's setup", "relaunch tp-try with activation checkpointing this time"]
)
def test_a_run_relaunched_with_its_layout_and_processes_unsaid_is_asked(text, known):
    intent = read(text, known)
    assert intent.command == "run" and intent.clarify


def test_a_runs_setup_asked_about_is_no_launch(known):
    assert read("what was r1's layout?", known).command == "results"


@pytest.mark.parametrize(
    "text, run",
    [
        ("kill tp-try but leave r1 alone", "runs/tp-try"),
        ("stop r1, keep baseline-ddp running", "runs/r1"),
        ("cancel r1 and spare tp-try", "runs/r1"),
        ("abort tp-try; do not cancel baseline-ddp", "runs/tp-try"),
        ("please kill r1 but keep the baseline-ddp run going", "runs/r1"),
        ("stop the latest run, leave tp-try be", "runs/r1"),
    ],
)
def test_a_run_named_to_be_left_alone_is_no_second_target(text, run, known):
    intent = read(text, known)
    assert intent.command == "cancel" and intent.args.get("run") == run and intent.clarify is None


def test_a_run_left_alone_is_never_the_one_cancelled(known):
    intent = read("leave r1 running", known)
    assert intent.command != "cancel" or intent.clarify


def test_a_stop_taken_back_spares_the_run_for_the_cancel_only(known):
    intent = read("don't kill r1, just wait on it", known)
    assert intent.command == "status" and intent.args.get("run") == "runs/r1"


@pytest.mark.parametrize(
    "text, command",
    [
        ("put the lr-scan numbers in the docs so people stop asking me", "docs"),
        ("write the lr-scan report so the team stops wondering which lr won", "report"),
        ("stop training r1", "cancel"),  # a run's own doing stopped is a cancel
        ("stop running tp-try please", "cancel"),
    ],
)
def test_stop_in_its_everyday_sense_is_no_cancel(text, command, known):
    assert read(text, known).command == command


@pytest.mark.parametrize(
    "text",
    [
        "kick something off that figures out the fastest layout for our experiment on these gpus",
        "have meshpilot find the best way to split our experiment across the gpus here by actually running it",
        "please launch a job that tries all the layouts and tells me which is fastest",
        "sweeps are new to me, could you set one up for the long config?",  # "one": a sweep
    ],
)
def test_a_sweep_described_by_what_it_does_starts_one(text, known):
    intent = read(text, known)
    assert intent.command == "sweep" and intent.clarify is None


@pytest.mark.parametrize(
    "text",
    [
        "what's the best way to split llama 3.1 8b across 8 h100s?",  # a question which layout wins: predicted
        "can you figure out the best layout for llama 3.1 8b on 8 h100s?",
        "I have to find the best layout for llama 3.1 70b on 8 h100s",
    ],
)
def test_a_question_which_layout_is_best_stays_a_plan(text, known):
    assert read(text, known).command == "plan"


@pytest.mark.parametrize(
    "text",
    [
        "train with the config we discussed",
        "launch a run with what Bob used",
        "train with the usual settings on 2 gpus",
        "train with the numbers from yesterday's meeting",
        "start a sweep with the layout my boss wants",
        "kick off training using the hyperparameters my teammate recommended",
        "train 20 steps like my teammate did",
        "launch the experiment the way Alice set it up",
        "train with the config Alice sent me, 2 gpus",
        "launch the new config Priya was describing at standup",  # a named person, any tense
        "train with the setup Sam kept talking about",
        "start a sweep on the layout our lead has been pitching",
    ],
)
def test_settings_only_someone_else_knows_are_asked_about_never_the_defaults(text, known):
    intent = read(text, known)
    assert intent.command in ("run", "sweep") and (intent.clarify or "").startswith("Which settings do you mean")


@pytest.mark.parametrize(
    "text, args",
    [
        ("launch the long config with the settings my colleague suggested", {"experiment": "configs/long.yaml"}),
        ("train with what r1 used, 50 steps", {"steps": 50, "layout": "dp_shard=2"}),  # a run named: copied
        ("train 20 steps like r1 did", {"steps": 20, "layout": "dp_shard=2"}),
        (
            "train with the settings bob suggested: lr 3e-4, 20 steps on 2 gpus with ddp",  # the values follow
            {"steps": 20, "layout": "dp_replicate=2", "set": ["train.lr=3e-4"]},
        ),
        ("train with the layout that is fastest on 2 gpus, fsdp", {"layout": "dp_shard=2"}),
        ("train the long config Sam was talking about", {"experiment": "configs/long.yaml"}),
        ("launch the config Sam was talking about: 20 steps on 2 gpus with ddp", {"steps": 20, "nproc": 2}),
    ],
)
def test_settings_of_a_named_file_or_run_or_spelled_out_are_acted_on(text, args, known):
    intent = read(text, known)
    assert intent.command == "run" and intent.clarify is None
    assert {k: intent.args.get(k) for k in args} == args


def test_the_usual_in_a_question_about_results_asks_nothing(known):
    intent = read("how did my latest run go? loss, throughput, the usual", known)
    assert intent.command == "results" and intent.clarify is None


# --- fresh wordings of kinds the fresh_n set missed (issue 33) -------------------------------------------------


@pytest.mark.parametrize(
    "text, path",
    [
        ("i'd like to scroll through baseline-ddp's full log myself", "runs/baseline-ddp/log.txt"),
        ("tp-try crashed. can I see its raw output log, the plain text?", "runs/tp-try/log.txt"),
        ("r1 is done; paste the whole training log here", "runs/r1/log.txt"),
    ],
)
def test_a_runs_log_asked_for_is_its_log_file_not_its_figures(text, path, known):
    intent = read(text, known)
    assert (intent.command, intent.args.get("path"), intent.clarify) == ("read", path, None)


@pytest.mark.parametrize("text", ["loss of r1 in log scale", "relaunch r1 with 20 steps and log to wandb"])
def test_log_as_a_scale_or_a_verb_reads_no_log_file(text, known):
    assert read(text, known).command != "read"


@pytest.mark.parametrize(
    "text, run",
    [
        ("r1 is eating the whole budget for nothing, pull the plug on it", "runs/r1"),
        ("tp-try looks stuck at step 3; shut the job off please", "runs/tp-try"),
        ("Finance keeps asking about baseline-ddp. Shut it down now.", "runs/baseline-ddp"),
        ("take r1 down, it is burning money", "runs/r1"),
    ],
)
def test_a_reason_then_a_stop_in_everyday_words_cancels(text, run, known):
    intent = read(text, known)
    assert (intent.command, intent.args.get("run"), intent.clarify) == ("cancel", run, None)


@pytest.mark.parametrize(
    "text, command",
    [
        ("did r1 shut down cleanly?", "status"),  # a question about a stop: no cancel
        ("don't shut r1 down, just tell me its loss", "results"),
        ("train 10 steps, shut off packing", "run"),  # a setting shut off: no run stopped
        ("rerun r1 but shut activation checkpointing off", "run"),
    ],
)
def test_a_stop_asked_about_or_taken_back_cancels_nothing(text, command, known):
    assert read(text, known).command == command


@pytest.mark.parametrize(
    "text, run",
    [
        ("not the loss, only whether r1 finished", "runs/r1"),
        ("no need for the metrics of baseline-ddp, is it still going?", "runs/baseline-ddp"),
        ("I don't need numbers: did tp-try crash?", "runs/tp-try"),
        ("I don't care about the throughput, did r1 finish?", "runs/r1"),
        ("not interested in results, is baseline-ddp still running?", "runs/baseline-ddp"),
    ],
)
def test_a_reading_said_not_to_be_wanted_is_no_cue_of_it(text, run, known):
    intent = read(text, known)
    assert (intent.command, intent.args.get("run")) == ("status", run)


@pytest.mark.parametrize(
    "text, command, args",
    [
        ("loss of r1, not the throughput", "results", {"run": "runs/r1"}),
        ("the full results of r1 please, not just the status", "results", {"run": "runs/r1"}),
        ("not the metrics, the log of r1", "read", {"path": "runs/r1/log.txt"}),
        ("skip r1's benchmark, just read its loss", "results", {"run": "runs/r1"}),  # the benchmark skipped, not r1
    ],
)
def test_a_reading_refused_beside_another_reads_the_other(text, command, args, known):
    intent = read(text, known)
    assert (intent.command, intent.clarify) == (command, None) and args.items() <= intent.args.items()


@pytest.mark.parametrize(
    "text, args",
    [
        ("train 10 steps sharded over 4 gpus", {"nproc": 4, "layout": "dp_shard=4", "steps": 10}),
        ("launch on 2 procs, sharded, 5 steps", {"nproc": 2, "layout": "dp_shard=2", "steps": 5}),
        ("ddp over 4 - 10 steps", {"nproc": 4, "layout": "dp_replicate=4", "steps": 10}),
        ("tp on 2 then 30 steps", {"nproc": 2, "layout": "tp=2", "steps": 30}),
        (
            "fsdp over 4 but not plain zero-3: zero 2",
            {"nproc": 4, "layout": "dp_shard=4", "set": ["train.zero_stage=2"]},
        ),
    ],
)
def test_a_bare_sharded_or_a_bare_count_after_a_layout_is_its_degree(text, args, known):
    intent = read(text, known)
    assert intent.command == "run" and intent.clarify is None
    assert {k: intent.args.get(k) for k in args} == args


def test_a_sharded_checkpoint_is_no_layout(known):
    assert "layout" not in read("train on 2 gpus from a sharded checkpoint", known).args


@pytest.mark.parametrize(
    "text, args",
    [
        ("we may rent H100 cards, maybe eight of them in one node. layouts for llama 3.1 8b? just plan",
         {"devices": 8, "gpu": "h100-sxm"}),
        ("could llama 3.1 70b fit in 16 of H100?", {"devices": 16, "gpu": "h100-sxm"}),
        ("plan llama 2 13b on 8 A100 40s", {"devices": 8, "gpu": "a100-40gb"}),
        ("how would llama 3.1 70b lay out on 8 a100-80s", {"devices": 8, "gpu": "a100-80gb"}),
    ],
)  # fmt: skip
def test_gpu_counts_written_as_of_them_of_a_gpu_and_sizes_without_a_unit(text, args, known):
    intent = read(text, known)
    assert intent.command == "plan" and intent.clarify is None
    assert args.items() <= intent.args.items()


@pytest.mark.parametrize(
    "text, plain",
    [
        ("renting L40S cards, say 4 of them", "renting L40S cards, say 4 gpus"),
        ("some h100 nodes, 2 of them with 8 gpus each", "some h100 nodes, 2 nodes with 8 gpus each"),
        ("we have 3 runs; show me 2 of them", "we have 3 runs; show me 2 of them"),  # no hardware: left as said
        ("an h100 for 40 minutes", "an h100 for 40 minutes"),  # a duration, no memory size
    ],
)
def test_them_counts_the_noun_said_before_it_and_a_size_needs_a_card_before_it(text, plain):
    assert normalise(text) == plain


def test_a_vague_hardware_with_no_count_after_it_is_still_asked_about(known):
    assert read("what if we rented some more L40S cards?", known).clarify is not None


@pytest.mark.parametrize(
    "text",
    [
        "please tell me which computer I have and how many GPU",
        "what hardware are we on?",
        "explain me what machine we are on, how many cores and how much memory",
    ],
)
def test_a_hardware_question_in_another_word_order_reads_the_hardware(text, known):
    assert read(text, known).command == "hardware"


def test_a_run_on_some_machine_is_no_hardware_question(known):
    assert read("which machine ran r1 and how much memory did it use?", known).command == "results"


@pytest.mark.parametrize(
    "text, command, sweep",
    [
        ("could I get a report on the layout tuning", "report", "sweeps/layouts-nov"),
        ("who won the learning rate search?", "trials", "sweeps/lr-scan"),
        ("can we have a writeup of what the november search found?", "report", "sweeps/layouts-nov"),
    ],
)
def test_a_sweep_named_by_its_month_or_purpose_and_a_writeup_asked_for(text, command, sweep, known):
    intent = read(text, known)
    assert (intent.command, intent.args.get("sweep"), intent.clarify) == (command, sweep, None)


@pytest.mark.parametrize("text", ["redo the layout tuning with 12 trials", "start a new layout search with 4 trials"])
def test_tuning_done_again_is_a_new_sweep_not_the_one_before(text, known):
    intent = read(text, known)
    assert intent.command == "sweep" and "sweep" not in intent.args


@pytest.mark.parametrize(
    "text, command, sweep",
    [
        ("skip lr-scan; write up the other sweep", "report", "sweeps/layouts-nov"),
        ("forget layouts-nov. what did the other one pick?", "trials", "sweeps/lr-scan"),
        ("ignoring the lr sweep, who won the other one?", "trials", "sweeps/layouts-nov"),
    ],
)
def test_the_other_of_two_after_one_is_ruled_out_is_the_one_left(text, command, sweep, known):
    intent = read(text, known)
    assert (intent.command, intent.args.get("sweep"), intent.clarify) == (command, sweep, None)


def test_a_name_not_to_forget_is_not_ruled_out(known):
    intent = read("don't forget r1 when you compare it with tp-try", known)
    assert (intent.command, intent.words) == ("compare", ["runs/r1", "runs/tp-try"])


def test_the_other_sweep_after_reading_one_is_the_one_left(known):
    intent = read("and who won the other sweep?", known, read_a_sweep("sweeps/layouts-nov"))
    assert (intent.command, intent.args.get("sweep"), intent.clarify) == ("trials", "sweeps/lr-scan", None)


@pytest.mark.parametrize(
    "text",
    ["not r1, the other run: what was its loss?", "who won the other sweep?", "ignore r1, how did the other run do?"],
)
def test_the_other_of_several_or_of_nothing_ruled_out_is_asked_about(text, known):
    assert "the other" in (read(text, known).clarify or "")


@pytest.mark.parametrize(
    "text, wanted",
    [
        ("train 10 steps with lr 3e-4, seed 7 and packing", "data.packing=true"),
        ("fsdp on 2 gpus with micro batch 2 and compile, 20 steps", "train.compile=true"),
        ("tp=2 on 2 gpus using bf16 and activation checkpointing for 5 steps", "train.activation_checkpointing=true"),
        ("2 gpus sharded plus activation checkpointing, 15 steps", "train.activation_checkpointing=true"),
    ],
)
def test_a_setting_named_bare_in_a_with_list_is_on(text, wanted, known):
    intent = read(text, known)
    assert intent.command == "run" and intent.clarify is None and wanted in intent.args["set"]


@pytest.mark.parametrize(
    "text",
    [
        "train 10 steps with packing off and compile",
        "train with fsdp, no packing or compile",
        "train 10 steps, packing off plus compile",
    ],
)
def test_a_bare_setting_after_a_state_in_the_list_is_still_asked_or_off(text, known):
    intent = read(text, known)
    assert "train.compile=true" not in intent.args.get("set", [])


# --- kinds the fresh_o set read as wrong actions (issue 33) ----------------------------------------------------


@pytest.mark.parametrize(
    "text, command",
    [
        ("don't bother to benchmark or write it up, just show me the trials of lr-scan", "trials"),
        ("no need to sweep nor open a PR, I only want layouts-nov's winner", "trials"),
        ("skip the benchmark and don't write anything up, what won in lr-scan?", "trials"),
        ("give me the lr-scan trial table without writing anything up", "trials"),
        ("don't benchmark r1 or write a report, just show its loss", "results"),
    ],
)
def test_a_tool_joined_to_a_negated_one_is_never_chosen(text, command, known):
    intent = read(text, known)
    assert intent.command == command


@pytest.mark.parametrize(
    "text",
    [
        "launch that plan we talked about last week",
        "start a sweep with the idea you and i discussed",
        "kick off the experiment we agreed on at standup",
        "go ahead and run the approach we settled on",
        "train the one we brainstormed yesterday",
    ],
)
def test_a_launch_of_what_only_a_talk_knows_is_asked_about(text, known):
    intent = read(text, known)
    assert intent.command in ("run", "sweep") and intent.clarify  # never the defaults in its place


@pytest.mark.parametrize(
    "text, args",
    [
        ("launch the plan we talked about: fsdp on 2 gpus, 30 steps", {"layout": "dp_shard=2", "steps": 30}),
        ("start the idea we discussed with configs/long.yaml", {"experiment": "configs/long.yaml"}),
    ],
)
def test_a_talked_about_launch_with_a_file_or_values_acts(text, args, known):
    intent = read(text, known)
    assert intent.command == "run" and intent.clarify is None
    assert {k: intent.args.get(k) for k in args} == args


@pytest.mark.parametrize(
    "text",
    [
        "could you refresh the doc page with what lr-scan found?",
        "lr-scan is done; mind updating the readme bit from it?",
        "the docs page needs refreshing from layouts-nov",
    ],
)
def test_docs_by_another_name_or_verb_form_are_updated(text, known):
    intent = read(text, known)
    assert intent.command == "docs" and intent.clarify is None


@pytest.mark.parametrize(
    "text, path",
    [
        ("open configs/long.yml", "configs/long.yaml"),
        ("cat long.yml", "configs/long.yaml"),
        ("show meshpilot.yml", "meshpilot.yaml"),
    ],
)
def test_a_file_named_with_its_suffix_spelled_the_other_way_is_the_one_there(text, path, known):
    intent = read(text, known)
    assert intent.command == "read" and intent.args["path"] == path


def test_a_suffix_spelling_of_no_file_there_resolves_to_nothing(known):
    assert read("show configs/short.yml", known).args.get("path") == "configs/short.yml"


@pytest.mark.parametrize(
    "text, key, value",
    [
        ("kick off a sweep with ate trials", "trials", 8),
        ("train 10 steps on for gpus with fsdp", "nproc", 4),
        ("launch it across to gpus with ddp, 10 steps", "nproc", 2),
    ],
)
def test_counts_dictated_as_homophones_are_read_where_a_count_goes(text, key, value, known):
    assert read(text, known).args.get(key) == value


@pytest.mark.parametrize(
    "text, said",
    [
        ("train for 20 steps with fsdp on 2 gpus", {"steps": 20, "nproc": 2}),
        ("go to 2 gpus with ddp for 10 steps", {"steps": 10, "nproc": 2}),
    ],
)
def test_for_and_to_outside_a_count_are_no_number(text, said, known):
    intent = read(text, known)
    assert {k: intent.args.get(k) for k in said} == said


@pytest.mark.parametrize(
    "text, args",
    [
        ("3 machines × 4 A100s, what layouts for llama 3.1 8b?", {"nodes": 3, "devices": 4}),
        ("plan llama 3.1 8b on 2 nodes x 8 h100", {"nodes": 2, "devices": 8}),
        ("NVL H100 x 8, plan llama 3.1 8b", {"gpu": "h100-nvl"}),
        ("plan llama 3.1 8b on 4 PCIe H100s", {"gpu": "h100-pcie", "devices": 4}),
        ("plan llama 3.1 8b on 4 H100 PCIe cards", {"gpu": "h100-pcie", "devices": 4}),
        ("plan llama 3.1 8b on 4 H100s", {"gpu": "h100-sxm", "devices": 4}),
    ],
)
def test_a_rig_said_with_a_times_sign_or_the_variant_first_is_read(text, args, known):
    intent = read(text, known)
    assert intent.command == "plan" and {k: intent.args.get(k) for k in args} == args


# --- kinds the fresh_o set asked about needlessly (issue 33) ---------------------------------------------------


@pytest.mark.parametrize(
    "text, command",
    [
        ("lsit the runs", "runs"),
        ("waht is the status of r1", "status"),
        ("rnu 10 steps with fsdp on 2 gpus", "run"),
    ],
)
def test_letters_swapped_in_short_and_everyday_words_are_read(text, command, known):
    intent = read(text, known)
    assert intent.command == command and intent.clarify is None


@pytest.mark.parametrize(
    "text, args",
    [
        ("fsdp on 2 gpus, 50 steps instead of the usual 20", {"steps": 50, "nproc": 2}),
        ("ddp on 2 gpus for 30 steps, up from 10", {"steps": 30, "nproc": 2}),
        ("fsdp on 2 gpus, 40 steps rather than the default 20", {"steps": 40, "nproc": 2}),
    ],
)
def test_a_number_named_as_the_old_value_is_no_argument(text, args, known):
    intent = read(text, known)
    assert intent.command == "run" and intent.clarify is None
    assert {k: intent.args.get(k) for k in args} == args


def test_a_stray_number_is_still_asked_about(known):
    assert (read("fsdp on 2 gpus for 40 steps and 7", known).clarify or "").startswith("What is 7 for")


@pytest.mark.parametrize(
    "text, command",
    [
        ("is it possible to start a run with fsdp on 2 gpus for 10 steps?", "run"),
        ("how does the r1 checkpoint measure up on the benchmark?", "bench"),
        ("how does r1 stack up on our evals?", "bench"),
    ],
)
def test_a_polite_question_asking_for_its_action_is_a_request(text, command, known):
    intent = read(text, known)
    assert intent.command == command and intent.clarify is None


def test_whether_a_model_fits_stays_a_plan(known):
    assert read("is it possible to run llama 3.1 70b on 4 gpus?", known).command == "plan"


@pytest.mark.parametrize(
    "text",
    [
        "train 10 steps with 2 replicas, each sharded over 2 gpus",
        "launch 10 steps: 2 copies, each one split across 2 devices",
    ],
)
def test_hybrid_sharding_described_as_replicas_each_sharded_is_hsdp(text, known):
    intent = read(text, known)
    assert intent.command == "run" and intent.clarify is None
    assert intent.args["layout"] == "dp_replicate=2,dp_shard=2" and intent.args["nproc"] == 4


@pytest.mark.parametrize(
    "text, run",
    [
        ("is r1 still running or did it die like tp-try?", "runs/r1"),
        ("did tp-try finish, unlike baseline-ddp?", "runs/tp-try"),
    ],
)
def test_a_run_named_as_a_likeness_is_no_second_status_target(text, run, known):
    intent = read(text, known)
    assert intent.command == "status" and intent.clarify is None and intent.args["run"] == run


def test_two_runs_asked_about_still_ask_which_first(known):
    assert (read("status of r1 and tp-try", known).clarify or "").startswith("One run at a time")


@pytest.mark.parametrize(
    "text, trials",
    [
        ("let's compare layouts once more with a bigger search, 16 trials, start it", 16),
        ("I want to compare layouts with a wider search, 12 trials, go ahead and start it", 12),
    ],
)
def test_a_comparison_of_layouts_with_trials_to_launch_is_a_sweep(text, trials, known):
    intent = read(text, known)
    assert intent.command == "sweep" and intent.clarify is None and intent.args["trials"] == trials


def test_showing_a_sweeps_trials_is_no_new_sweep(known):
    assert read("show me the 8 trials of lr-scan", known).command == "trials"


def test_a_config_described_again_by_its_own_value_is_that_config(known):
    intent = read("launch the long config, the 1024 one, on 2 gpus with fsdp", known)
    assert intent.command == "run" and intent.clarify is None
    assert intent.args["experiment"] == "configs/long.yaml" and intent.args["layout"] == "dp_shard=2"


@pytest.mark.parametrize(
    "text",
    [
        "launch configs/long.yaml, the 2048 one, on 2 gpus with fsdp",  # not its value: which is meant
        "train the 1024 one on 2 gpus with fsdp",  # no file named: nothing it describes
    ],
)
def test_a_value_description_fitting_no_named_config_is_asked_about(text, known):
    assert "Which do you mean by" in (read(text, known).clarify or "")


# --- kinds the fresh_p set missed (issue 33) ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "text", ["dlete sweeps/lr-scan, it's useless", "pls remov the tp-try run", "delet r1", "wipe out r1 pls"]
)
def test_a_typo_of_a_deleting_verb_still_refuses(text, known):
    intent = read(text, known)
    assert intent.refusal is not None and "does not delete" in intent.refusal


@pytest.mark.parametrize(
    "text, plain",
    [
        ("the remote machine", "the remote machine"),  # "remote" is no typo of "remove"
        ("after lunch, how did r1 do?", "after lunch, how did r1 do?"),  # "lunch" is a meal
        ("we had lunch the day before", "we had lunch the day before"),
        ("lunch the long config", "launch the long config"),  # a verb before its object: a typo of "launch"
    ],
)
def test_everyday_words_near_action_words_are_read_as_said(text, plain):
    assert normalise(text) == plain


@pytest.mark.parametrize(
    "text, experiment",
    [
        ("auto-tune the mesh for configs/long.yaml", "configs/long.yaml"),
        ("tune the layouts of meshpilot.yaml", "meshpilot.yaml"),
        ("can you have it automatically pick the best configuration for the long config?", "configs/long.yaml"),
    ],
)
def test_layouts_tuned_for_a_file_are_a_sweep_of_that_file(text, experiment, known):
    intent = read(text, known)
    assert intent.command == "sweep" and intent.clarify is None and intent.args["experiment"] == experiment


@pytest.mark.parametrize(
    "text, command",
    [
        ("what layouts are set in configs/long.yaml?", "read"),  # a file asked about, nothing tuned
        ("what's the fastest setup for llama 3.1 8b on 8 h100s?", "plan"),  # a question which is best: a plan
    ],
)
def test_a_file_or_a_best_setup_asked_about_is_no_sweep(text, command, known):
    assert read(text, known).command == command


@pytest.mark.parametrize(
    "text",
    [
        "enumerate every job we've done here so far",
        "can you list the model fits (runs, I mean) from this project?",
        "how many finished trainings are there in this repo?",
        "how many training experiments have we run so far?",
    ],
)
def test_the_runs_asked_for_by_any_name_are_listed(text, known):
    intent = read(text, known)
    assert intent.command == "runs" and intent.clarify is None


@pytest.mark.parametrize(
    "text, command",
    [("list the trials of lr-scan", "trials"), ("list the files of runs/r1", "results")],
)
def test_a_list_of_something_else_is_no_list_of_runs(text, command, known):
    assert read(text, known).command == command


@pytest.mark.parametrize(
    "text, args",
    [
        ("train on 2 gpus with fsdp and put the steps at 25", {"steps": 25, "nproc": 2}),
        ("leave the warmup on 5 and train 10 steps with ddp on 2 gpus", {"steps": 10, "set": ["train.warmup_steps=5"]}),
        ("set the number of steps to 30 and run ddp on 2 gpus", {"steps": 30, "nproc": 2}),
        ("fsdp on 2 gpus, steps bumped to 15", {"steps": 15, "nproc": 2}),
        ("put the lr at 3e-4 and run 10 steps of fsdp on 2 gpus", {"set": ["train.lr=3e-4"], "steps": 10}),
    ],
)
def test_a_setting_put_on_or_set_to_a_value_takes_it(text, args, known):
    intent = read(text, known)
    assert intent.command == "run" and intent.clarify is None
    assert {k: intent.args.get(k) for k in args} == args


def test_a_count_on_processes_after_steps_is_no_step_count(known):
    intent = read("train 40 steps with fsdp on 2", known)
    assert (intent.args["steps"], intent.args["nproc"]) == (40, 2)


@pytest.mark.parametrize(
    "text, args",
    [
        ("what-if for our model on 4 H100s, how to divide it? nothing should be launched", {"devices": 4}),
        ("our model on 8 L40S, how would you slice it? Nothing is to start.", {"devices": 8, "gpu": "l40s"}),
    ],
)
def test_a_what_if_where_nothing_must_start_is_a_plan(text, args, known):
    intent = read(text, known)
    assert intent.command == "plan" and {k: intent.args.get(k) for k in args} == args


@pytest.mark.parametrize(
    "text, command, run",
    [
        ("I don't need another training, just tell me tp-try's loss", "results", "runs/tp-try"),
        ("no, I don't want another run, just show tp-try's figures", "results", "runs/tp-try"),
        ("nope, I do not want a new run. what was the throughput of baseline-ddp?", "results", "runs/baseline-ddp"),
    ],
)
def test_a_launch_refused_then_a_reading_asked_reads(text, command, run, known):
    intent = read(text, known)
    assert intent.command == command and intent.clarify is None and intent.args["run"] == run


def test_another_thing_not_wanted_is_no_refused_launch(known):
    intent = read("I don't want another optimizer, train 10 steps with fsdp on 2 gpus", known)
    assert intent.command == "run" and intent.args["steps"] == 10


@pytest.mark.parametrize(
    "text, plain",
    [
        ("a more big micro batch", "a bigger micro batch"),
        ("a bit more long than the default", "a bit longer than the default"),
        ("more big models are coming", "more big models are coming"),  # more of them, no comparative
    ],
)
def test_a_comparative_said_with_more_is_the_comparative(text, plain):
    assert normalise(text) == plain


@pytest.mark.parametrize(
    "text, named",
    [
        ("please launch with a more big micro batch", "micro batch"),
        ("train 10 steps with ddp on 2 gpus and a longer warmup", "warmup"),
    ],
)
def test_a_setting_made_bigger_without_its_value_is_asked_by_name(text, named, known):
    assert (read(text, known).clarify or "").startswith(f"Which {named}, exactly")


def test_a_setting_made_bigger_with_its_value_takes_it(known):
    intent = read("train with a bigger micro batch of 8 on 2 gpus with ddp", known)
    assert intent.clarify is None and intent.args["set"] == ["train.micro_batch=8"]


@pytest.mark.parametrize(
    "text, run",
    [
        ("did tp-try crash, and what was its peak memory?", "runs/tp-try"),
        ("was the last job successful? how fast was it?", "runs/r1"),
    ],
)
def test_how_a_run_ended_and_a_figure_asked_together_are_its_results(text, run, known):
    intent = read(text, known)
    assert intent.command == "results" and intent.args["run"] == run


@pytest.mark.parametrize("text", ["did r1 finish?", "is r1 still going, how fast so far?"])
def test_a_state_alone_or_a_run_still_going_is_a_status(text, known):
    assert read(text, known).command == "status"


@pytest.mark.parametrize(
    "text, model",
    [
        ("I'd like a quality score for baseline-ddp on our validation set", "runs/baseline-ddp"),
        ("please get the accuracy score of r1 against the held-out tasks", "runs/r1"),
    ],
)
def test_a_quality_score_or_a_held_out_set_is_a_benchmark(text, model, known):
    intent = read(text, known)
    assert intent.command == "bench" and intent.args["model"] == model


def test_a_runs_loss_on_a_set_is_its_results(known):
    assert read("what was r1's loss on the validation set?", known).command == "results"


@pytest.mark.parametrize(
    "text, layout, nproc",
    [
        ("2 procs, sharded 2 ways, no tp", "dp_shard=2", 2),
        ("4 gpus: tp2 and shard2, 10 steps", "dp_shard=2,tp=2", 4),
        ("train with shard=4 on 4 procs", "dp_shard=4", 4),
    ],
)
def test_shard_with_its_degree_is_fsdp_and_a_negated_layout_is_none(text, layout, nproc, known):
    intent = read(text, known)
    assert intent.command == "run" and intent.clarify is None
    assert (intent.args["layout"], intent.args["nproc"]) == (layout, nproc)


def test_a_checkpoints_shard_is_no_layout():
    assert normalise("the checkpoint shard 3 is missing") == "the checkpoint shard 3 is missing"


@pytest.mark.parametrize(
    "text, plain",
    [
        ("what's the loss of are one", "what's the loss of r1"),
        ("how did are one do", "how did r1 do"),
        ("we are one team", "we are one team"),  # the verb "are": no name dictated
        ("they are one step away", "they are 1 step away"),
        ("evaluate r1 on the builtin sweet", "evaluate r1 on the builtin suite"),
        ("that's sweet, thanks", "that's sweet, thanks"),
        ("run the bench mark on r1", "run the benchmark on r1"),
    ],
)
def test_dictated_names_and_homophones_are_read_as_meant(text, plain, known):
    assert normalise(text, known.names) == plain


def test_a_dictated_name_not_in_the_repository_stays_words():
    assert normalise("show the log of are two", {"r1"}) == "show the log of are 2"


def test_a_dictated_run_and_suite_are_benchmarked(known):
    intent = read("bench mark are one on the default sweet", known)
    assert intent.command == "bench" and intent.args == {"model": "runs/r1", "suite": "builtin"}


@pytest.mark.parametrize(
    "text, layout",
    [
        ("train on 2 gpus where every card keeps only half of the parameters", "dp_shard=2"),
        ("launch on 2 gpus, the whole model on each gpu, not split", "dp_replicate=2"),
        ("start a run on 2 gpus where each gpu holds a full copy of the model, never split up", "dp_replicate=2"),
    ],
)
def test_layouts_in_plain_words_with_a_bare_not_split(text, layout, known):
    intent = read(text, known)
    assert intent.command == "run" and intent.clarify is None and intent.args["layout"] == layout


def test_the_data_not_split_adds_no_layout(known):
    intent = read("train 10 steps with fsdp on 2 gpus, the data not split up", known)
    assert intent.clarify is None and intent.args["layout"] == "dp_shard=2"


@pytest.mark.parametrize(
    "text, sweep",
    [
        ("send the lr-scan findings to the team for review", "sweeps/lr-scan"),
        ("get the layout results up for approval", "sweeps/layouts-nov"),
    ],
)
def test_findings_put_up_for_review_or_sign_off_are_a_pull_request(text, sweep, known):
    intent = read(text, known)
    assert intent.command == "pr" and intent.clarify is None and intent.args["sweep"] == sweep


def test_a_review_of_results_is_no_pull_request(known):
    assert read("review r1's results for me", known).command == "results"


@pytest.mark.parametrize(
    "text",
    ["which of the setups you tried was quickest?", "among the layouts we tried in november, which was quickest?"],
)
def test_the_setups_we_tested_are_a_sweeps_trials(text, known):
    intent = read(text, known)
    assert intent.command == "trials" and intent.args["sweep"] == "sweeps/layouts-nov"


def test_which_run_was_fastest_is_no_sweep(known):
    assert read("which run was fastest?", known).command != "trials"


@pytest.mark.parametrize(
    "text, command",
    [
        ("launch the longer config on 2 gpus with ddp for 10 steps", "run"),
        ("sweep the long-context configuration", "sweep"),
        ("train the long config (the one with 1024 tokens) on 2 gpus with fsdp", "run"),
    ],
)
def test_a_config_by_its_comparative_compound_or_own_value_is_that_file(text, command, known):
    intent = read(text, known)
    assert intent.command == command and intent.clarify is None and intent.args["experiment"] == "configs/long.yaml"


def test_a_config_described_by_a_value_it_lacks_is_asked_about(known):
    intent = read("train the long config (the one with 2048 tokens) on 2 gpus with fsdp", known)
    assert "Which do you mean by 'the one with 2048 tokens'" in (intent.clarify or "")


def test_a_comparative_of_no_config_stays_as_said():
    assert normalise("a faster config", {"long"}) == "a faster config"


@pytest.mark.parametrize("text", ["write the lr-scan results up", "write up the lr-scan results"])
def test_results_written_up_are_a_report(text, known):
    intent = read(text, known)
    assert intent.command == "report" and intent.args["sweep"] == "sweeps/lr-scan"


@pytest.mark.parametrize("text", ["write r1 up for the team", "write a report on r1", "open a pr for tp-try"])
def test_a_run_named_as_what_to_write_up_is_asked_about_never_the_latest_sweep(text, known):
    intent = read(text, known)
    assert intent.command in ("report", "pr") and "sweep" not in intent.args
    assert (intent.clarify or "").startswith("A report is written of a sweep")


def test_a_report_of_a_sweep_with_a_runs_benchmark_is_that_sweeps(known):
    intent = read("write a report of layouts-nov with r1's benchmark", known)
    assert intent.command == "report" and intent.clarify is None and intent.args["sweep"] == "sweeps/layouts-nov"


@pytest.mark.parametrize(
    "text, command",
    [
        ("cancel r1 if it failed, its loss is bad anyway", "cancel"),  # a state and a figure beside an action
        ("relaunch the layout we tried in r1 with 10 steps", "run"),  # one layout tried is no sweep's trials
    ],
)
def test_a_state_and_figure_or_a_layout_tried_beside_an_action_keep_the_action(text, command, known):
    assert read(text, known).command == command


@pytest.mark.parametrize(
    "text",
    [
        "fsdp over 4 and tp 2 on 8 procs",  # the degree said first is no count of processes: which total?
        "fsdp on 2 gpus with 4 procs",
        "ddp on 4 gpus... no wait, 2 gpus",  # the corrected count is not the one the layout was read with
    ],
)
def test_two_process_counts_where_one_would_be_dropped_are_asked_about(text, known):
    assert (read(text, known).clarify or "").startswith("How many processes:")


@pytest.mark.parametrize(
    "text, nproc, layout",
    [
        ("kick off the long config on 8 GPUs: fsdp across 4 and tp 2, 30 steps", 8, "dp_shard=4,tp=2"),
        ("fsdp on 2 gpus, 2 processes", 2, "dp_shard=2"),
    ],
)
def test_a_layouts_degree_beside_the_total_or_the_same_count_twice_acts(text, nproc, layout, known):
    intent = read(text, known)
    assert intent.clarify is None and (intent.args["nproc"], intent.args["layout"]) == (nproc, layout)


@pytest.mark.parametrize(
    "text, command, args",
    [
        ("configs/long.yaml on 4 gpus", "run", {"experiment": "configs/long.yaml", "nproc": 4}),
        ("long.yaml for 30 steps", "run", {"experiment": "configs/long.yaml", "steps": 30}),
        ("meshpilot.yaml, ddp over 2 gpus", "run", {"experiment": "meshpilot.yaml", "layout": "dp_replicate=2"}),
        ("long.yaml", "read", {"path": "configs/long.yaml"}),  # a file alone is read
        ("what does long.yaml set the steps to?", "read", {"path": "configs/long.yaml"}),  # a question about it
        ("cat long.yaml, the 2 gpu fsdp one", "read", {"path": "configs/long.yaml"}),  # a verb of reading
        ("set steps to 50 in configs/long.yaml", "read", {"path": "configs/long.yaml"}),  # a change to it: no launch
        ("the long config on 2 gpus with ddp", "run", {"experiment": "configs/long.yaml", "nproc": 2}),  # by its name
        ("the 256 config on 4 gpus with ddp", "run", {"experiment": "meshpilot.yaml", "nproc": 4}),  # by its value
        ("layouts for the experiment on 4 gpus", "plan", {"devices": 4}),  # another intent's word: no launch
        ("update long.yaml so packing is off", "read", {"path": "configs/long.yaml"}),
    ],
)
def test_an_experiment_file_given_a_launchs_facts_is_launched(text, command, args, known):
    intent = read(text, known)
    assert intent.command == command and {k: intent.args.get(k) for k in args} == args


@pytest.mark.parametrize(
    "text",
    ["compare long.yaml with meshpilot.yaml on 2 gpus", "estimate memory of configs/long.yaml on 2 gpus with fsdp",
     "rank layouts for configs/long.yaml on 8 h100s"],
)  # fmt: skip
def test_files_compared_or_a_plan_of_a_file_are_no_launch(text, known):
    assert read(text, known).command != "run"


@pytest.mark.parametrize(
    "text, key, value",
    [
        ("sweep results lr-scan, which lr won?", "sweep", "sweeps/lr-scan"),
        ("sweep winner for layuots-nov", "sweep", "sweeps/layouts-nov"),  # the sweep's name with a typo
        ("sweep results pls", "sweep", "sweeps/layouts-nov"),  # no name: the latest sweep's, never a run's results
    ],
)
def test_sweep_before_its_figures_is_a_noun_read(text, key, value, known):
    intent = read(text, known)
    assert intent.command == "trials" and intent.args[key] == value


def test_sweep_as_a_verb_still_starts_one(known):
    assert read("sweep the layouts for configs/long.yaml", known).command == "sweep"


@pytest.mark.parametrize(
    "text, path",
    [
        ("show confgs/long.yaml", "configs/long.yaml"),  # a typo in the folder, the file's name exact
        ("sweep layouts on cnofigs/long.yaml, 4 trials", "configs/long.yaml"),
        ("show cofigs/long.yml", "configs/long.yaml"),  # the folder's typo and the suffix's other spelling
        ("show cnfigs/meshpilot.yaml", "cnfigs/meshpilot.yaml"),  # no such file in configs/: never moved there
        ("show configz/short.yaml", "configz/short.yaml"),  # nothing on disk it is close to: as said, never invented
        ("show docs/long.yaml", "docs/long.yaml"),  # another folder, no typo of configs
    ],
)
def test_a_path_typo_is_corrected_against_the_disk_only(text, path, known):
    intent = read(text, known)
    assert path in (intent.args.get("path"), intent.args.get("experiment"))


@pytest.mark.parametrize(
    "text",
    [
        "did r1 use the GPUs efficiently, and how fast was it?",
        "what was the hardware utilisation of the latest run?",
        "how well did baseline-ddp utilise the hardware",
        "was the hardware used well by r1?",  # the passive
    ],
)
def test_how_well_a_run_used_the_hardware_is_its_results(text, known):
    assert read(text, known).command == "results"


@pytest.mark.parametrize("text", ["what hardware is in this box?", "what hardware do we have here?"])
def test_the_hardware_itself_is_still_the_machine(text, known):
    assert read(text, known).command == "hardware"


def test_a_quarter_or_fiscal_year_is_no_runs_name(known):
    intent = read("loss and tok/s of the latest run, for the FY26 planning and the Q4 review", known)
    assert (intent.command, intent.clarify, intent.args["run"]) == ("results", None, "runs/r1")


@pytest.mark.parametrize(
    "text",
    [
        "which runs exist here right now?",
        "the runs that are existing in this repo, which are they?",
    ],
)
def test_runs_asked_as_existing_are_listed(text, known):
    assert read(text, known).command == "runs"


@pytest.mark.parametrize(
    "text",
    [
        "does r1 hold up against our internal tests?",
        "can you see whether the last model we trained holds up on the quality checks",
    ],
)
def test_a_model_held_up_against_quality_tests_is_a_benchmark(text, known):
    intent = read(text, known)
    assert intent.command == "bench" and str(intent.args.get("model", "")).startswith("runs/r1")


@pytest.mark.parametrize(
    "text, refused",
    [
        ("show me notes.md, but never print any tokens or passwords from it", False),
        ("open meshpilot.yaml and don't paste the API key or env vars with it", False),
        ("show meshpilot.yaml and the API keys", True),  # no negation: the secret is asked for
        ("don't show meshpilot.yaml, print my HF token", True),  # the negation takes back the file, not the token
    ],
)
def test_a_secret_under_a_negation_of_its_showing_is_no_request_for_it(text, refused, known):
    assert (read(text, known).refusal is not None) == refused


@pytest.mark.parametrize(
    "text, earlier, nodes",
    [
        ("if we add 3 more machines with 8 h200s each, how would llama 3.1 70b split?", None, 3),  # the new ones
        ("what about 2 more nodes?", {"devices": 8, "nodes": 2, "gpu": "h100", "model": "llama-3.1-70b"}, 4),
        ("and 2 fewer nodes?", {"devices": 8, "nodes": 3, "gpu": "h100", "model": "llama-3.1-70b"}, 1),
        ("plan llama 3.1 8b on 8 h100s, and what if we had 2 more nodes", None, 2),  # 8 in each, not 8 over 2
    ],
)
def test_nodes_said_as_more_are_the_new_ones_or_added_to_the_plan_before(text, earlier, nodes, known):
    intent = read(text, known, planned(earlier) if earlier else None)
    assert intent.command == "plan" and intent.args.get("nodes") == nodes and intent.args.get("devices") == 8


def test_more_steps_with_no_launch_before_are_still_asked_about(known):
    assert "How many in all" in (read("train 2 more steps on 2 gpus with ddp", known).clarify or "")


@pytest.mark.parametrize(
    "text, experiment",
    [
        ("launch the 1024 config on 2 gpus with ddp", "configs/long.yaml"),  # its seq_len tells it apart
        ("train our 1024-token experiment on 2 gpus, fsdp", "configs/long.yaml"),
        ("kick off the 256 config, fsdp on 2 gpus", "meshpilot.yaml"),
    ],
)
def test_a_config_named_by_a_value_that_tells_it_apart_is_that_file(text, experiment, known):
    intent = read(text, known)
    assert intent.command == "run" and intent.clarify is None and intent.args["experiment"] == experiment
    assert "trials" not in intent.args


@pytest.mark.parametrize(
    "text",
    [
        "train the 2048 config on 2 gpus",  # no file has it
        "train the 20 config on 2 gpus",  # every file has it (20 steps): it tells none apart
    ],
)
def test_a_config_named_by_a_value_that_tells_none_apart_is_asked_about(text, known):
    assert "Which do you mean by" in (read(text, known).clarify or "")


@pytest.mark.parametrize(
    "text, steps",
    [
        ("retrain the default experiment, let it run longer, 300 steps on 2 gpus with ddp", 300),
        ("this time make it shorter: 8 steps, ddp on 2 gpus", 8),
    ],
)
def test_longer_or_shorter_with_the_step_count_said_is_that_count(text, steps, known):
    intent = read(text, known)
    assert (intent.command, intent.clarify, intent.args.get("steps")) == ("run", None, steps)


def test_longer_with_no_step_count_is_still_asked_about(known):
    assert "What should change" in (read("train it longer on 2 gpus with ddp", known).clarify or "")


@pytest.mark.parametrize(
    "text, command",
    [
        ("write up our last 'how should we shard the model over the cards' experiment for the team", "report"),
        ("open a PR with the results of the 'what is the best way to split the model' study", "pr"),
        ("the experiment that tested which layout is best: show the winner", "trials"),  # the noun first
    ],
)
def test_an_experiment_described_by_its_question_of_how_to_split_is_the_layout_sweep(text, command, known):
    intent = read(text, known)
    assert intent.command == command and intent.args.get("sweep") == "sweeps/layouts-nov"


def test_an_experiment_about_something_else_is_no_layout_sweep(known):
    intent = read("write up our last 'which learning rate is best' experiment", known)
    assert intent.args.get("sweep") != "sweeps/layouts-nov"
    assert read("plan the best way to split the model, as a test", known).command == "plan"


def test_written_up_is_a_report(known):
    assert read("I'd like lr-scan written up for the team", known).command == "report"


@pytest.mark.parametrize(
    "text, nproc, layout",
    [
        ("ddp 2 x pp 2, 10 steps", 4, "pp=2,dp_replicate=2"),  # each layout with its own degree
        ("train 10 steps, layout fsdp 2 * tp 4", 8, "dp_shard=2,tp=4"),
        ("train with 2 x tp on 2 gpus", 2, "tp=2"),  # a degree before its layout stays that layout's
    ],
)
def test_layouts_joined_by_times_each_keep_their_degree(text, nproc, layout, known):
    intent = read(text, known)
    assert intent.clarify is None and (intent.args["nproc"], intent.args["layout"]) == (nproc, layout)


@pytest.mark.parametrize(
    "text, nproc, layout",
    [
        ("tp across 2 gpus and fsdp across 4, 8 gpus total, 10 steps", 8, "dp_shard=4,tp=2"),
        (
            "train with the data sharded over 2 and the model split by tensor across 2, a total of 4 gpus",
            4,
            "dp_shard=2,tp=2",
        ),
        ("put the layers into 2 stages and tensor parallel across 2 gpus, 4 in all, 10 steps", 4, "pp=2,tp=2"),
    ],
)
def test_a_total_said_as_such_that_the_degrees_make_is_the_process_count(text, nproc, layout, known):
    intent = read(text, known)
    assert intent.clarify is None and (intent.args["nproc"], intent.args["layout"]) == (nproc, layout)


def test_a_total_the_degrees_do_not_make_is_asked_about(known):
    intent = read("tp across 2 gpus and fsdp across 4, 6 gpus in total", known)
    assert "needs 8 processes, not 6" in (intent.clarify or "")


@pytest.mark.parametrize(
    "text, layout",
    [
        ("train 10 steps on 2 gpus, only the data is sharded across them", "dp_replicate=2"),  # only the data: DDP
        ("train 10 steps on 2 gpus with the sharded dataset", None),  # a dataset's shards are no layout
        ("train 10 steps on 2 gpus with ddp; the data is sharded across 4 files", "dp_replicate=2"),  # storage
    ],
)
def test_data_sharded_only_or_as_a_dataset_is_no_fsdp(text, layout, known):
    assert read(text, known).args.get("layout") == layout


@pytest.mark.parametrize(
    "text",
    ["tune the learning rate for configs/long.yaml", "please sweep the lr on the long config",
     "could you sweep the warmup for me"],
)  # fmt: skip
def test_a_setting_to_tune_by_a_sweep_is_asked_about(text, known):
    intent = read(text, known)
    assert intent.command == "sweep" and "A sweep varies layouts only" in (intent.clarify or "")


@pytest.mark.parametrize(
    "text",
    ["the sweep over learning rates, who won?", "there's a finished sweep over learning rates, which value won?",
     "best lr from the lr sweep?", "did we tune the learning rate in lr-scan?"],
)  # fmt: skip
def test_a_sweep_named_by_the_setting_it_varied_is_read(text, known):
    intent = read(text, known)
    assert (intent.command, intent.args.get("sweep"), intent.clarify) == ("trials", "sweeps/lr-scan", None)


def test_tuning_by_hand_before_a_launch_is_the_launch(known):
    intent = read("tuning the lr by hand, then train 10 steps at lr 3e-4 on 2 gpus with ddp", known)
    assert (intent.command, intent.clarify) == ("run", None)


def test_tuning_the_layouts_is_still_a_sweep(known):
    intent = read("tune the layouts for configs/long.yaml", known)
    assert (intent.command, intent.clarify) == ("sweep", None)


@pytest.mark.parametrize(
    "text, refused",
    [
        ("throw tp-try away", True),  # the verb split around its object
        ("wipe r1 out pls", True),
        ("toss the lr-scan sweep out", True),
        ("don't throw tp-try away, just cancel it", False),
        ("clear r1 out of the comparison", False),  # left out of what is shown
        ("throw the failed trials of lr-scan out and show the rest", False),  # no name is the object
    ],
)
def test_a_deleting_verb_split_around_a_name_is_refused(text, refused, known):
    assert (read(text, known).refusal is not None) == refused


@pytest.mark.parametrize(
    "text, key, value",
    [
        ("status of tp-tyr", "run", "runs/tp-try"),  # two letters swapped in a short name
        ("who won in lyouts-nov", "sweep", "sweeps/layouts-nov"),
        ("lr-sacn winner?", "sweep", "sweeps/lr-scan"),
    ],
)
def test_a_name_with_a_typo_is_the_one_on_disk_it_is_closest_to(text, key, value, known):
    intent = read(text, known)
    assert intent.args.get(key) == value and intent.clarify is None


def test_a_name_far_from_every_one_on_disk_is_asked_about(known):
    assert "I find no run or sweep named" in (read("status of tp-attempt", known).clarify or "")


# --- fresh_r's kinds (issue 33) ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, key, value",
    [
        ("scan lr winner?", "sweep", "sweeps/lr-scan"),  # a name's words in another order
        ("status of try tp", "run", "runs/tp-try"),
        ("nov layouts trials", "sweep", "sweeps/layouts-nov"),
        ("baseline run loss", "run", "runs/baseline-ddp"),  # a word of its name before its noun, no article
        ("memory of baseline run?", "run", "runs/baseline-ddp"),
        ("report on the layuots sweep", "sweep", "sweeps/layouts-nov"),  # two letters swapped in a word of a name
        ("loss of the baseilne ddp", "run", "runs/baseline-ddp"),
    ],
)
def test_a_run_or_sweep_named_by_its_words_in_any_order_is_that_one(text, key, value, known):
    intent = read(text, known)
    assert intent.args.get(key) == value and intent.clarify is None


@pytest.mark.parametrize("text", ["start a ddp baseline on 2 procs", "launch a baseline run on 2 gpus"])
def test_a_run_to_make_named_like_one_on_disk_is_a_new_launch(text, known):
    intent = read(text, known)
    assert intent.command == "run" and intent.args.get("nproc") == 2


@pytest.mark.parametrize("text", ["tp-try crashed y/n", "is baseline-ddp done (yes/no)", "r1 finished, yes or no"])
def test_a_state_asked_as_yes_or_no_is_the_runs_status(text, known):
    assert read(text, known).command == "status"


def test_an_action_asked_as_yes_or_no_is_confirmed_first(known):
    intent = read("bench r1 y/n", known)
    assert intent.command == "bench" and intent.clarify is not None


@pytest.mark.parametrize(
    "text, nproc, layout",
    [
        ("let every card compute part of each matrix multiplication, 2 gpus, 10 steps", 2, "tp=2"),
        ("train on 4 gpus, each layer's weights split into 4 pieces", 4, "tp=4"),
        ("train 10 steps on 2 gpus where the layer weights are cut in half", 2, "tp=2"),
        ("train on 2 gpus with each gpu holding half of the weights", 2, "dp_shard=2"),  # the weights only: FSDP
        ("split the layers into 2 stages and train on 2 gpus", 2, "pp=2"),  # the layers, not each one: pipeline
    ],
)
def test_each_matmul_or_layers_weights_cut_is_tensor_parallel(text, nproc, layout, known):
    intent = read(text, known)
    assert (intent.command, intent.args.get("nproc"), intent.args.get("layout")) == ("run", nproc, layout)


def test_weights_cut_in_two_on_more_gpus_is_asked_about(known):
    intent = read("train on 4 gpus, each layer's weights split in two", known)
    assert "tp=2 needs 2 processes, not 4" in (intent.clarify or "")


@pytest.mark.parametrize(
    "text, layout",
    [
        ("train dp_shrad=2 on 2 gpus", "dp_shard=2"),
        ("train 10 steps with dpshard=4", "dp_shard=4"),
        ("train dp-shard=2,pt=2 on 4 gpus", "dp_shard=2,tp=2"),
        ("train dp_replciate=2 on 2 gpus adn 10 steps", "dp_replicate=2"),
    ],
)
def test_a_layout_key_with_a_typo_is_the_key_it_misspells(text, layout, known):
    intent = read(text, known)
    assert intent.command == "run" and intent.args.get("layout") == layout


@pytest.mark.parametrize(
    "text, plain",
    [
        ("what is dp_shrad", "what is dp_shrad"),  # a key only in its key=value form
        ("train with lr=3e-4 seed=2", "train with lr=3e-4 seed=2"),
        ("lauch it adn wait", "launch it and wait"),
        ("to and fro", "to and fro"),
        ("rslts of r1", "results of r1"),  # the vowels left out
        ("lnch 2 gpus", "launch 2 gpus"),
        ("latest chkpt", "latest checkpoint"),  # an abbreviation: its first, last and some consonants between
        ("thrpt of r1", "throughput of r1"),
        ("an llm on 8 gpus", "an llm on 8 gpus"),  # words without vowels of their own
        ("fsdp with sgd, log to wandb", "fsdp with sgd, log to wandb"),
        ("please actualise the readme", "please update the readme"),
        ("actually, train 10 steps", "actually, train 10 steps"),
        ("--nproc 4 --foo 3", "4 processes --foo 3"),  # a flag no tool takes stays
        ("links at 400 gigabits per second", "links at 400 gigabits per second"),  # a rate, no memory
        ("2x rtx 4900", "2 x rtx 4090"),  # two digits swapped: the one card so close
        ("4 rtx 3090s", "4 rtx 3090s"),  # a real card without a preset: asked about, never another
        ("plan q wen 2.5 7b", "plan qwen 2.5 7b"),  # a family dictated as two words
        ("plan for the 7b", "plan for the 7b"),
        ("train, not the default steps: 60 steps", "train, 60 steps"),
        ("train, not the default steps, 2 gpus", "train, not the default steps, 2 gpus"),  # no count of steps
    ],
)
def test_the_normaliser_reads_fresh_rs_shorthand(text, plain, known):
    assert normalise(text, known.names) == plain


@pytest.mark.parametrize(
    "text, key, value",
    [
        ("launch configs/olng.yaml on 2 gpus", "experiment", "configs/long.yaml"),  # two letters swapped in a stem of 4
        ("show lnog.yaml", "path", "configs/long.yaml"),  # the name alone, one file on disk so close
    ],
)
def test_a_short_file_name_with_two_letters_swapped_is_the_file_on_disk(text, key, value, known):
    assert read(text, known).args.get(key) == value


@pytest.mark.parametrize(
    "text, command, key, value",
    [
        ("stts of tp-try", "status", "run", "runs/tp-try"),
        ("rslts r1 pls", "results", "run", "runs/r1"),
        ("bnchmrk tp-try", "bench", "model", "runs/tp-try"),
        ("could you actualise the readme from lr-scan", "docs", "sweep", "sweeps/lr-scan"),
        ("actualizing the docs with layouts-nov please", "docs", "sweep", "sweeps/layouts-nov"),
        ("write a report on layouts-nov and keep lr-scan out of it", "report", "sweep", "sweeps/layouts-nov"),
        ("open a PR for the lr scan, leave the layouts sweep aside", "pr", "sweep", "sweeps/lr-scan"),
        ("keep r1 running and cancel tp-try", "cancel", "run", "runs/tp-try"),
    ],
)
def test_tool_words_in_shorthand_and_sweeps_left_out_read_as_said(text, command, key, value, known):
    intent = read(text, known)
    assert (intent.command, intent.args.get(key), intent.clarify) == (command, value, None)


@pytest.mark.parametrize("text", ["runs. list.", "all runs: show", "runs, list them please", "runs list"])
def test_runs_then_a_listing_verb_lists_them(text, known):
    assert read(text, known).command == "runs"


def test_a_runs_path_then_show_is_no_list(known):
    assert read("runs/r1 show me the loss", known).command == "results"


@pytest.mark.parametrize(
    "text, command, args",
    [
        ("sweep --trials 6 --experiment configs/long.yaml", "sweep", {"trials": 6, "experiment": "configs/long.yaml"}),
        ("launch --steps=30 --layout dp_shard=2,tp=2", "run", {"steps": 30, "layout": "dp_shard=2,tp=2"}),
        (
            "plan --devices=4 --gpu a100-80gb --seq_len 8192",
            "plan",
            {"devices": 4, "gpu": "a100-80gb", "seq_len": 8192},
        ),
        (
            "plan --nnodes 4 --gpus 8 --model llama-3.1-70b",
            "plan",
            {"nodes": 4, "devices": 8, "model": "llama-3.1-70b"},
        ),
        ("torchrun --nproc_per_node 2, train it", "run", {"nproc": 2}),
    ],
)
def test_command_line_flags_of_the_tools_arguments_are_those_arguments(text, command, args, known):
    intent = read(text, known)
    assert intent.command == command and {k: intent.args.get(k) for k in args} == args and intent.clarify is None


@pytest.mark.parametrize(
    "text, args",
    [
        ("plan llama 3.1 8b on 4 gpus with 48 gigabytes each", {"devices": 4, "device_mem": "48GiB"}),
        ("a 4090 with 24 gigabits, what layout for llama 3.2 1b", {"gpu": "rtx-4090", "devices": 1}),
        ("plan mist raw 7b on 2 h100s", {"model": "mistral-7b", "devices": 2}),
        ("plan llama 3.1 8b on 4 RTX 4009s", {"gpu": "rtx-4090", "devices": 4}),
        ("plan llama 3.1 70b, 4 nodes, 8 gpus/node", {"nodes": 4, "devices": 8}),
        ("405b on h200s, 2 boxes, 8 h200/box, plan it", {"nodes": 2, "devices": 8, "model": "llama-3.1-405b"}),
    ],
)
def test_hardware_said_loosely_is_planned_as_meant(text, args, known):
    intent = read(text, known)
    assert intent.command == "plan" and {k: intent.args.get(k) for k in args} == args and intent.clarify is None


def test_a_card_with_no_preset_is_still_asked_about(known):
    assert "no RTX 3090 preset" in (read("plan llama 3.1 8b on 4 rtx 3090s", known).clarify or "")


@pytest.mark.parametrize(
    "text, key, value",
    [
        ("train on 2 gpus, not the usual number of steps but 150", "steps", 150),
        ("sweep configs/long.yaml, not the default trials: 12", "trials", 12),
        ("train 10 steps, not the default learning rate, use 3e-4", "set", ["train.lr=3e-4"]),
    ],
)
def test_a_default_refused_then_a_value_is_that_value(text, key, value, known):
    intent = read(text, known)
    assert intent.args.get(key) == value and intent.clarify is None


# --- fresh_s's kinds (issue 33) ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, command, key, value",
    [
        (
            "before I start anything big, could you kick off a layout sweep on configs/long.yaml",
            "sweep",
            "experiment",
            "configs/long.yaml",
        ),
        ("before we launch the real thing, can you run a quick 5 step smoke test on 2 gpus", "run", "steps", 5),
        ("before I try anything, benchmark r1 please", "bench", "model", "runs/r1"),
        ("Before I launch anything, what hardware is this?", "hardware", "", None),
    ],
)
def test_the_users_own_act_to_come_cues_nothing_and_leaves_the_request(text, command, key, value, known):
    intent = read(text, known)
    assert (intent.command, intent.args.get(key), intent.clarify) == (command, value, None)


def test_a_launch_of_the_users_own_to_come_is_no_launch_now(known):
    assert read("before I launch: fsdp on 2 gpus, 10 steps", known).command != "run"


@pytest.mark.parametrize(
    "text, nproc, layout",
    [
        ("train on 4 gpus with data parallelism, but sharded", 4, "dp_shard=4"),
        ("data parallel (sharded) on 2 gpus, 10 steps", 2, "dp_shard=2"),
        ("train with data parallel, sharded 4 ways", 4, "dp_shard=4"),
        ("train on 2 gpus, data parallel that is not sharded", 2, "dp_replicate=2"),  # said not to be: DDP
        ("train on 4 gpus with data parallel and the checkpoints sharded", 4, "dp_replicate=4"),  # a checkpoint's
        ("train ddp on 4 gpus, data parallel and sharded checkpoints", 4, "dp_replicate=4"),
    ],
)
def test_data_parallel_said_to_be_sharded_after_its_name_is_fsdp(text, nproc, layout, known):
    intent = read(text, known)
    assert (intent.command, intent.args.get("nproc"), intent.args.get("layout")) == ("run", nproc, layout)


@pytest.mark.parametrize(
    "text, model",
    [("score tp-try on the regression tests", "runs/tp-try"), ("score the latest run on our own tests", "runs/r1")],
)
def test_a_model_scored_on_tests_is_benchmarked(text, model, known):
    intent = read(text, known)
    assert (intent.command, intent.args.get("model"), intent.clarify) == ("bench", model, None)


@pytest.mark.parametrize(
    "text, command", [("what was the final score of r1's loss?", "results"), ("scores of the lr-scan trials", "trials")]
)
def test_a_score_read_of_a_run_or_sweep_is_no_benchmark(text, command, known):
    assert read(text, known).command == command


@pytest.mark.parametrize(
    "text, nproc, layout",
    [
        ("long.yaml on 2 gpus w/ dp_shard", 2, "dp_shard=2"),
        ("train 8 procs using dp_replicate, 10 steps", 8, "dp_replicate=8"),
        ("train 2 gpus w/o packing w/ ddp", 2, "dp_replicate=2"),
        ("train on 4 gpus with dp_shard and tp", 4, "dp_shard=2,tp=2"),  # two layouts: the one split of 4
    ],
)
def test_a_mesh_key_without_its_degree_takes_the_process_count(text, nproc, layout, known):
    intent = read(text, known)
    assert (intent.command, intent.args.get("nproc"), intent.args.get("layout")) == ("run", nproc, layout)


def test_w_slash_is_with_and_w_slash_o_is_still_without(known):
    intent = read("train 2 gpus w/o packing w/ ddp", known)
    assert intent.args.get("set") == ["data.packing=false"]


@pytest.mark.parametrize(
    "text, nodes, devices",
    [("2n x 4 h100, llama 3.1 8b, plan it", 2, 4), ("plan llama 3.1 70b on 2n8g h100", 2, 8)],
)
def test_nodes_in_shorthand_are_nodes(text, nodes, devices, known):
    intent = read(text, known)
    assert (intent.command, intent.args.get("nodes"), intent.args.get("devices")) == ("plan", nodes, devices)


@pytest.mark.parametrize(
    "text, plain",
    [
        ("4n x 8 a100", "4 nodes of 8 a100"),
        ("train 4n steps", "train 4n steps"),  # "4n" alone: no nodes
        ("Step 1: use configs/long.yaml. Step 2: 2 gpus", "use configs/long.yaml. 2 gpus"),
        ("Step one: long.yaml. Step two: 2 gpus", "long.yaml. 2 gpus"),
        ("1) long.yaml 2) ddp on 2 gpus 3) 20 steps", "long.yaml, ddp on 2 gpus, 20 steps"),
        ("train with 2 processes (dp_shard 2) and 10 steps", "train with 2 processes (dp_shard 2) and 10 steps"),
        ("wait until r1 reaches step 10. then stop it", "wait until r1 reaches step 10. then stop it"),
        ("replicated twice", "replicated 2 x"),  # the past of a word the rules read is no typo of it
        ("it finishde", "it finished"),
    ],
)
def test_the_normaliser_reads_fresh_ss_shorthand(text, plain, known):
    assert normalise(text, known.names) == plain


def test_numbered_steps_are_no_step_counts(known):
    intent = read("Step 1: configs/long.yaml. Step 2: ddp on 2 gpus. Step 3: 30 steps. Go.", known)
    assert intent.command == "run" and intent.clarify is None
    assert (intent.args.get("steps"), intent.args.get("nproc"), intent.args.get("experiment")) == (
        30,
        2,
        "configs/long.yaml",
    )


@pytest.mark.parametrize(
    "text, command, key, value",
    [
        ("[from #ml-infra] @jan asks: who won layouts-nov?", "trials", "sweep", "sweeps/layouts-nov"),
        ("write up lr-scan for the stand-up tomorrow", "report", "sweep", "sweeps/lr-scan"),
        ("refresh the docs from layouts-nov before the off-site", "docs", "sweep", "sweeps/layouts-nov"),
    ],
)
def test_a_chats_channel_or_a_meeting_is_no_runs_name(text, command, key, value, known):
    intent = read(text, known)
    assert (intent.command, intent.args.get(key), intent.clarify) == (command, value, None)


def test_an_unknown_hyphenated_name_is_still_asked_about(known):
    assert "I find no run or sweep named 'ml-infra'" in (read("results of ml-infra", known).clarify or "")


@pytest.mark.parametrize(
    "text, nproc, layout",
    [
        ("same as r1 but on 4 gpus", 4, "dp_shard=4"),  # r1's layout kind (dp_shard=2) on the count said
        ("relaunch r1's setup on 8 gpus", 8, "dp_shard=8"),
        ("like r1 but on 4 gpus with tp", 4, "tp=4"),  # a layout said wins over the copied one
        ("r1 ran on two gpus with fsdp; double that, same layout, on 4 gpus", 4, "dp_shard=4"),
        ("tp-try ran out of memory on 2 gpus with tp; train 4 gpus with fsdp, 10 steps", 4, "dp_shard=4"),
    ],
)
def test_a_copied_runs_layout_kind_runs_on_the_count_said(text, nproc, layout, known):
    intent = read(text, known)
    assert (intent.command, intent.args.get("nproc"), intent.args.get("layout"), intent.clarify) == (
        "run",
        nproc,
        layout,
        None,
    )


def test_a_multiple_the_count_said_does_not_make_is_asked_about(known):
    intent = read("r1 ran on 2 processes, same sharding but on 6 gpus, double that", known)
    assert (intent.clarify or "").startswith("How many in all")


def test_a_copy_with_no_change_is_still_confirmed(known):
    assert (read("train the same as r1", known).clarify or "").startswith("Train with runs/r1's layout")


def test_a_layout_of_several_dimensions_is_not_regrown():
    from agent.understanding.arguments import _at_count

    launch = {"nproc": 4, "layout": "dp_shard=2,tp=2"}
    assert _at_count(launch, 8) == launch and _at_count({"nproc": 2, "layout": "tp=2"}, 4)["layout"] == "tp=4"


def test_a_runs_past_step_count_is_no_step_count_of_the_request(known):
    assert read("r1 ran 20 steps; run it again with 40 steps", known).args.get("steps") == 40


def test_a_runs_past_setting_is_no_doubt_about_the_one_asked(known):
    intent = read("r1 had packing on; train like r1 but with packing off", known)
    assert intent.args.get("set") == ["data.packing=false"] and intent.clarify is None


@pytest.mark.parametrize(
    "text, path",
    [
        ("show me the main experiment file", "meshpilot.yaml"),
        ("what's in our default config?", "meshpilot.yaml"),
        ("show the long config", "configs/long.yaml"),
    ],
)
def test_the_main_experiment_is_meshpilot_yaml(text, path, known):
    intent = read(text, known)
    assert (intent.command, intent.args.get("path")) == ("read", path)


@pytest.mark.parametrize(
    "text, nproc, layout",
    [
        ("train on 4 gpus, sharded 2-way and replicated 2x", 4, "dp_replicate=2,dp_shard=2"),
        ("8 gpus: replicate across 2 and shard across 4, 30 steps", 8, "dp_replicate=2,dp_shard=4"),
        ("train tp=2,dp_shard=2 for a total of 100 steps", 4, "dp_shard=2,tp=2"),  # a total of steps: no processes
    ],
)
def test_hsdp_said_as_ways_replicated_and_sharded(text, nproc, layout, known):
    intent = read(text, known)
    assert (intent.command, intent.args.get("nproc"), intent.args.get("layout"), intent.clarify) == (
        "run",
        nproc,
        layout,
        None,
    )


def test_hsdp_ways_that_make_another_count_are_asked_about(known):
    intent = read("train 8 gpus replicated 2 times and sharded 2 ways", known)
    assert "needs 4 processes, not 8" in (intent.clarify or "")


def test_a_negation_of_the_speakers_mind_turns_nothing_off(known):
    intent = read("I don't really know the details, just train 10 steps on 2 gpus with fsdp", known)
    assert intent.command == "run" and intent.clarify is None and "set" not in intent.args
    unsure = read("train 10 steps on 2 gpus, I don't understand packing", known)
    assert "data.packing=false" not in unsure.args.get("set", []) and unsure.clarify  # asked, never off
    assert read("train 10 steps, I don't want packing", known).args.get("set") == ["data.packing=false"]


# --- fresh_t's kinds, read in general ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, command, args",
    [
        # a launch verb with its object before "off" is the verb, no setting turned off; "can we kick off" asks it
        ("train on 2 gpus where each gpu keeps its own full copy of the model. Can we kick that off?", "run",
         {"nproc": 2, "layout": "dp_replicate=2"}),
        ("fire it off on 2 gpus with fsdp, 10 steps", "run", {"nproc": 2, "layout": "dp_shard=2", "steps": 10}),
        # "weight for" opening a clause is "wait for", as it sounds; the noun stays a noun
        ("Please weight for baseline-dip to finish", "status", {"wait": "yes", "run": "runs/baseline-ddp"}),
        ("what's the weight for layer 3 in r1?", "results", {"run": "runs/r1"}),
        # the runs as a collection, a summary in writing to pass on
        ("What does our run inventory look like right now?", "runs", {}),
        ("Can we get a written readout of the November layouts sweep that I can share with leadership?", "report",
         {"sweep": "sweeps/layouts-nov"}),
        # a mesh key spelled out, its degree "set to" it; never plain data parallel
        ("Can you lunch a run on two processors with data parallel shard set to two", "run",
         {"nproc": 2, "layout": "dp_shard=2"}),
        ("train on 4 gpus, dp replicate 2 and dp shard 2", "run", {"nproc": 4, "layout": "dp_replicate=2,dp_shard=2"}),
        # ZeRO's stage said beside a layout is written out; "mb" before a number is the micro batch
        ("launch: nproc 8, dp_shard=4,tp=2, zero 3, mb 4, seq 1024, 500 steps", "run",
         {"nproc": 8, "layout": "dp_shard=4,tp=2", "steps": 500,
          "set": ["train.micro_batch=4", "train.zero_stage=3", "data.seq_len=1024"]}),
        ("fsdp on 2 but not full zero-3, only zero 1", "run", {"set": ["train.zero_stage=1"]}),
        ("train on 2 gpus with zero-3, 10 steps", "run", {"layout": "dp_shard=2", "set": None}),  # the layout word
        # a plain-words layout: the model's layers cut in halves, one half a GPU, is two pipeline stages
        ("I want to cut the model's layers into two halves, first half on one GPU and second half on the other, "
         "run 25 steps with micro batch 2", "run",
         {"nproc": 2, "layout": "pp=2", "steps": 25, "set": ["train.micro_batch=2"]}),
        ("split the layers into halves and train 10 steps", "run", {"nproc": 2, "layout": "pp=2"}),
        # the weights split so each card holds a share of them: FSDP
        ("train on 4 GPUs where the weights are split up so each GPU only holds a share of them, 80 steps", "run",
         {"nproc": 4, "layout": "dp_shard=4", "steps": 80}),
        # a question tag is no negation; a foreign filler ("Allora") no other language
        ("Allora, the long config, the one with 1024 tokens. Basically I want to launch it on two GPUs with fsdp, no?",
         "run", {"experiment": "configs/long.yaml", "nproc": 2, "layout": "dp_shard=2", "set": None}),
        # dialect words, a size said of the machines counted
        ("Aye, we've got three wee servers wi' four L40S apiece. Whit layouts would ye run mistral 7b on?", "plan",
         {"nodes": 3, "devices": 4, "gpu": "l40s", "model": "mistral-7b"}),
        # a price per GPU-hour or per node is no count
        ("Pricing out two nodes, each 8 H100 at roughly $3.20 per GPU-hour ($25.60/hr per node). Which layouts "
         "would rank best for gemma 2 9b?", "plan", {"nodes": 2, "devices": 8, "model": "gemma-2-9b"}),
        # a file name one letter short of the one file near it, in the same folder
        ("cn u show configs/lng.yaml", "read", {"path": "configs/long.yaml"}),
        # a run-on request: the ask comes first, a deliberation about a sweep after it is no request of one, and
        # "the last one" after "sweep" is the sweep, no run
        ("I'd love for you to pull the results for baseline-ddp and then line them up against whatever r1 did and "
         "maybe after that think about whether we should start a new sweep with more trials because the last one "
         "felt small to me.", "compare", {}),
    ],
)  # fmt: skip
def test_fresh_t_kinds(text, command, args, known):
    intent = read(text, known)
    assert (intent.command, intent.clarify) == (command, None)

    def plain(values: dict) -> dict:
        return {key: sorted(v) if key == "set" and v else v for key, v in values.items()}

    assert {key: plain(intent.args).get(key) for key in args} == plain(args)


def test_megabytes_are_no_micro_batch(known):
    assert "train.micro_batch=512" not in read("train on 2 gpus with 512 mb of cache", known).args.get("set", [])


def test_a_question_tag_is_no_negation_but_or_no_still_asks(known):
    assert read("train 10 steps with packing, no?", known).args.get("set") == ["data.packing=true"]
    assert "turn off" in (read("train 10 steps with packing or no?", known).clarify or "")


def test_a_run_on_request_compares_in_the_order_said(known):
    intent = read(
        "pull the results for baseline-ddp and then line them up against whatever r1 did and maybe after that think "
        "about whether we should start a new sweep because the last one felt small",
        known,
    )
    assert (intent.command, intent.words) == ("compare", ["runs/baseline-ddp", "runs/r1"])


def test_a_file_name_near_two_files_or_one_letter_changed_is_not_guessed(tmp_path):
    (tmp_path / "configs").mkdir()
    for name in ("long", "song", "lone"):
        (tmp_path / "configs" / f"{name}.yaml").write_text("train: {}\n")
    found = Known.read(tmp_path)
    assert found.file("configs/lng.yaml") == "configs/long.yaml"  # one letter left out, one file so near
    assert found.file("configs/lon.yaml") is None  # "long" and "lone": two files one letter away, asked
    assert found.file("configs/tong.yaml") is None  # one letter changed in a short name: another word


@pytest.mark.parametrize(
    "text, layout",
    [
        ("4 data-parallel replicas each sharded over 2 gpus, 10 steps", "dp_replicate=4,dp_shard=2"),
        ("train on 8 gpus: 2 data parallel replicas, each split across 4 gpus", "dp_replicate=2,dp_shard=4"),
        ("train with 2 data parallel replicas on 2 gpus", "dp_replicate=2"),
    ],
)
def test_data_parallel_replicas_each_sharded_are_hsdp(text, layout, known):
    intent = read(text, known)
    assert (intent.command, intent.args.get("layout"), intent.clarify) == ("run", layout, None)


def test_a_budget_is_no_count_and_kick_it_off_turns_nothing_off(known):
    plan = read("plan llama 3 8b on 8 h100s with a budget of $500", known)
    assert (plan.args.get("devices"), plan.clarify) == (8, None)
    launch = read("kick it off with 4 gpus, ddp, 10 steps", known)
    assert (launch.args.get("nproc"), launch.args.get("set"), launch.clarify) == (4, None, None)


@pytest.mark.parametrize(
    "text, command, args",
    [
        # the layers cut in halves said passively, "in" or "into"; a card by its index; the halves joined by a comma
        ("train 2 gpus, the layers split in two halves, 20 steps", "run", {"nproc": 2, "layout": "pp=2"}),
        ("put the first half of the model on gpu 0 and the second half on gpu 1, 30 steps", "run",
         {"nproc": 2, "layout": "pp=2", "steps": 30}),
        ("first half on gpu #0, second half on gpu #1, 10 steps", "run", {"nproc": 2, "layout": "pp=2"}),
        # "apiece" after a card's memory is in each node, as "each" is
        ("4 nodes, 8 a100 80gb apiece, plan llama 3 70b", "plan", {"nodes": 4, "devices": 8}),
        ("4 beefy nodes, 8 a100 80gb apiece, plan llama 3 70b", "plan", {"nodes": 4, "devices": 8}),
        # the launcher's key said bare ("nproc 4", "nproc=2"), as its flag is
        ("launch: nproc 4, fsdp, zero 2, mb 2, 100 steps", "run",
         {"nproc": 4, "layout": "dp_shard=4", "set": ["train.micro_batch=2", "train.zero_stage=2"]}),
        ("launch nproc=2 ddp 10 steps", "run", {"nproc": 2, "layout": "dp_replicate=2"}),
        # a wait asked by its participle, or with word to send once the run ends
        ("waiting for r1 to finish, ping me", "status", {"wait": "yes", "run": "runs/r1"}),
        ("weighting for r1 to finish, ping me", "status", {"wait": "yes", "run": "runs/r1"}),
        ("let r1 finish and ping me", "status", {"wait": "yes", "run": "runs/r1"}),
    ],
)  # fmt: skip
def test_fresh_t_kinds_said_otherwise(text, command, args, known):
    test_fresh_t_kinds(text, command, args, known)


def test_the_speakers_own_wait_with_a_question_reads_the_question(known):
    assert read("I'm waiting for r1 to finish, what's its loss so far?", known).command == "results"


@pytest.mark.parametrize(
    "text, command",
    [
        ("can you right up the lr-scan results", "report"),  # "write up" as it sounds
        ("right it up for the layouts-nov sweep", "report"),
        ("all right, up next: show r1's loss", "results"),  # "right" and "up" of other words
    ],
)
def test_write_up_said_as_it_sounds(text, command, known):
    assert read(text, known).command == command


def test_a_check_is_no_deliberation_and_new_machines_are_no_count_said(known):
    assert read("see if the lr-scan sweep finished", known).command == "trials"
    # "2 new nodes" may be 2 more than a plan's: not read as the nodes in all (asked, as before)
    intent = read("what if we add 2 new nodes to the plan for llama 3 70b on 8 h100s", known)
    assert intent.args.get("nodes") != 2 and intent.clarify


# --- fresh_v's kinds, read in general ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, command, args",
    [
        # a mesh dimension glued to its degree is that layout, a launch (not a plan of the GPU count)
        ("tp2 on two gpus", "run", {"nproc": 2, "layout": "tp=2"}),
        ("pp2 on 2 gpus, 10 steps", "run", {"nproc": 2, "layout": "pp=2", "steps": 10}),
        ("launch cp2 on two gpus", "run", {"nproc": 2, "layout": "cp=2"}),
        # a relative "where" describes the layout, it asks nothing: the state split between the cards is FSDP
        ("it says to train where each GPU sees its own part of the data but the weights, gradients and optimizer "
         "state get split between the GPUs instead of copied. I have two GPUs, can you start that for me?", "run",
         {"nproc": 2, "layout": "dp_shard=2"}),
        ("I would like that you launch, on two processes, a training where the parameters are sharded between the "
         "devices, with a learning rate of 0.0005", "run",
         {"nproc": 2, "layout": "dp_shard=2", "set": ["train.lr=0.0005"]}),
        ("start a run where the weights are split across 4 gpus, 20 steps", "run",
         {"nproc": 4, "layout": "dp_shard=4"}),
        # German compounds of the words read: the words apart
        ("Please start Trainingsrun with Tensorparallelismus degree two on two GPUs. Precision bf16.", "run",
         {"nproc": 2, "layout": "tp=2", "set": ["train.precision=bf16"]}),
        ("Start configs/long.yaml, 2 GPUs, Contextparallel 2, Microbatch 1, 80 Steps.", "run",
         {"experiment": "configs/long.yaml", "nproc": 2, "layout": "cp=2", "steps": 80}),
        ("starte Trainingslauf mit Pipelineparallel 2 auf 2 GPUs, Mikrobatch 4", "run",
         {"nproc": 2, "layout": "pp=2", "set": ["train.micro_batch=4"]}),
        # Slurm's flags: the nodes and the GPUs (or tasks) per node
        ("if I sbatch with --nodes=4 --gres=gpu:8 on the a100 80g partition, what layout would you go with for "
         "llama 2 70b? dry run only", "plan", {"nodes": 4, "devices": 8, "gpu": "a100-80gb", "model": "llama-2-70b"}),
        ("srun -N 2 --ntasks-per-node=8 on h100s, smollm2 1.7b. which layout ranks first?", "plan",
         {"nodes": 2, "devices": 8, "model": "smollm2-1.7b"}),
        ("salloc -N 3 --gpus-per-node=4 on a100 40gb: layouts for mistral 7b?", "plan", {"nodes": 3, "devices": 4}),
        ("plan llama 3 8b, sbatch --gres=gpu:a100:4 -N 2", "plan", {"nodes": 2, "devices": 4}),
        # a batch counted in sequences is the micro batch
        ("fsdp 2 gpu, act ckpt on, bs 2, lr 0.001, no packing, 25 steps", "run",
         {"nproc": 2, "layout": "dp_shard=2", "steps": 25,
          "set": ["data.packing=false", "train.activation_checkpointing=true", "train.lr=0.001",
                  "train.micro_batch=2"]}),
        ("ddp on 2 gpus, batch size 4, 10 steps", "run", {"set": ["train.micro_batch=4"]}),
        ("train 10 steps on 2 gpus, bs=8", "run", {"set": ["train.micro_batch=8"]}),  # a few sequences: each rank's
        # many ways of splitting tried, said without the word: a layout sweep
        ("I just want the computer to try lots of ways of dividing the training between the graphics cards and tell "
         "us which is fastest. Can you get that started?", "sweep", {}),
        ("test several ways to split the model across the gpus and keep the quickest", "sweep", {}),
    ],
)  # fmt: skip
def test_fresh_v_kinds(text, command, args, known):
    test_fresh_t_kinds(text, command, args, known)


def test_a_global_batch_in_tokens_is_no_micro_batch(known):
    sets = read("train 10 steps on 2 gpus with global batch size 65536 tokens", known).args.get("set") or []
    assert "train.micro_batch=65536" not in sets


@pytest.mark.parametrize("text", ["bump it and relaunch", "raise that and rerun", "double it and launch again"])
def test_a_pronoun_changed_with_nothing_to_point_at_is_asked(text, known):
    intent = read(text, known)
    assert intent.clarify and not intent.args


def test_a_pronoun_changed_to_a_value_acts(known):
    intent = read("bump it to 4 gpus and relaunch with fsdp", known)
    assert (intent.command, intent.args.get("nproc"), intent.clarify) == ("run", 4, None)


def test_a_question_where_to_shard_is_still_a_plan(known):
    assert read("where should the weights be sharded for llama 3 8b on 4 h100s?", known).command == "plan"


def test_a_bigger_batch_size_may_be_global_and_is_asked(known):
    intent = read("fsdp on 2 gpus, 10 steps, bs 32", known)
    assert intent.clarify and "train.micro_batch=32" not in (intent.args.get("set") or [])


@pytest.mark.parametrize(
    "text, command, args",
    [
        # a sweep wanted in a state of going, its experiment "the main" one
        ("Every hour those GPUs sit idle is money out the door, so I'd like a layout sweep going on the main "
         "experiment right now. Keep it to six trials so it's wrapped before the open.", "sweep",
         {"experiment": "meshpilot.yaml", "trials": 6}),
        ("we need a new sweep started on configs/long.yaml, 8 trials", "sweep", {"trials": 8}),
        # a file's suffix typed with a typo; a file named by what it holds, as learners say it
        ("show me configs/long.ymal", "read", {"path": "configs/long.yaml"}),
        ("cat configs/long.yaml", "read", {"path": "configs/long.yaml"}),
        ("what's in meshpilot.yamll?", "read", {"path": "meshpilot.yaml"}),
        ("Could you show to me the content of the file of notes that I have written yesterday?", "read",
         {"path": "notes.md"}),
        ("open the file with my notes", "read", {"path": "notes.md"}),
        # "micro" said before the short form, misspelt
        ("fsdp 2 gpus, mirco bs 4, activaton ckpt on, go", "run",
         {"nproc": 2, "layout": "dp_shard=2",
          "set": ["train.activation_checkpointing=true", "train.micro_batch=4"]}),
        ("ddp on 2, micro bs 16, 10 steps", "run", {"set": ["train.micro_batch=16"]}),
        # a model's size in words, "of" between the family and its size
        ("which decomposition is optimal for the Llama 2 of 13 billions of parameters on four A100 of 40 GB?", "plan",
         {"model": "llama-2-13b", "devices": 4, "gpu": "a100-40gb"}),
        ("plan llama 2 13 billion parameters on 4 a100 40gb", "plan", {"model": "llama-2-13b"}),
        ("a 7 billion mistral on 2 l40s, layouts?", "plan", {"model": "mistral-7b", "devices": 2}),
    ],
)  # fmt: skip
def test_fresh_v_asked_kinds(text, command, args, known):
    test_fresh_t_kinds(text, command, args, known)


def test_a_sweep_running_asked_about_is_no_sweep(known):
    assert read("is there a sweep running right now?", known).command != "sweep"


@pytest.mark.parametrize(
    "text, command, args",
    [
        # a value refused by a pronoun after it is taken back, no setting turned off
        ("fp32 is too slow, don't use it. bf16, 2 procs sharded, 40 steps", "run",
         {"nproc": 2, "layout": "dp_shard=2", "steps": 40, "set": ["train.precision=bf16"]}),
        ("adam diverged last time, avoid it; sgd, ddp on 2, 10 steps", "run", {"set": ["train.optimizer=sgd"]}),
        # a stage said alone beside ZeRO is ZeRO's
        ("long config on 2 gpus sharded, but not full zero-3, stage 1 only", "run",
         {"experiment": "configs/long.yaml", "nproc": 2, "layout": "dp_shard=2", "set": ["train.zero_stage=1"]}),
        ("fsdp on 4 gpus with zero, stage 2, 10 steps", "run", {"set": ["train.zero_stage=2"]}),
        # the GPUs in each node said with a "g" after their count, no memory
        ("2n x 4g h100 nvl, mistral 7b, seq 4096. plan", "plan",
         {"nodes": 2, "devices": 4, "gpu": "h100-nvl", "model": "mistral-7b", "seq_len": 4096}),
        ("2 nodes x 8g a100 80g, plan llama 3 70b", "plan", {"nodes": 2, "devices": 8, "gpu": "a100-80gb"}),
        # "single" before a card's name is one of it
        ("single RTX 4090, 24GB VRAM, Llama 3.2 1B at 2048 context: what does the memory budget per layout look "
         "like?", "plan", {"devices": 1, "gpu": "rtx-4090", "model": "llama-3.2-1b", "seq_len": 2048}),
        ("a single h100, llama 3 8b, layouts?", "plan", {"devices": 1}),
        # a decimal dictated digit by digit after "zero point", among dictated homophones of counts
        ("launch a run with tensor parallel to and data sharding to on for gpus learning rate zero point zero zero "
         "one for fifty steps", "run",
         {"nproc": 4, "layout": "dp_shard=2,tp=2", "steps": 50, "set": ["train.lr=0.001"]}),
        ("ddp on 2 gpus, lr zero point zero zero zero three, 10 steps", "run", {"set": ["train.lr=0.0003"]}),
        # a layout refused and named again as what went wrong is no second request of it
        ("run it on 2 gpus with context parallel, not tp, tp oomed last time", "run", {"nproc": 2, "layout": "cp=2"}),
        ("train on 2 gpus with fsdp, not ddp, ddp was too slow, 10 steps", "run",
         {"nproc": 2, "layout": "dp_shard=2"}),
        # a setting's value it "must be"
        ("I want to make training with pipeline of two stage on 2 gpu, and also the sequence length must be 512 "
         "please", "run", {"nproc": 2, "layout": "pp=2", "set": ["data.seq_len=512"]}),
        ("ddp on 2 gpus, the learning rate should be 0.0003, 10 steps", "run", {"set": ["train.lr=0.0003"]}),
    ],
)  # fmt: skip
def test_fresh_v_asked_kinds_said_otherwise(text, command, args, known):
    test_fresh_t_kinds(text, command, args, known)


def test_a_value_refused_alone_still_asks_what_to_do(known):
    assert read("fp8 is flaky, don't use it", known).clarify


@pytest.mark.parametrize(
    "text, command, args",
    [
        # Portuguese read word for word where the sentence is Portuguese: its function words, switches and counts
        ("beleza, agora roda um sweep de layouts on configs/long.yaml com 10 trials, por favor", "sweep",
         {"experiment": "configs/long.yaml", "trials": 10}),
        ("cara, preciso saber se o Gemma 2 9B cabe em duas A10, só o plano, não precisa rodar nada", "plan",
         {"devices": 2, "gpu": "a10", "model": "gemma-2-9b"}),
        ("rodar configs/long.yaml com 4 GPUs e sem compile, por favor", "run",
         {"experiment": "configs/long.yaml", "nproc": 4, "set": ["train.compile=false"]}),
        ("roda o meshpilot.yaml com 2 GPUs em FSDP, mas desliga o packing", "run",
         {"nproc": 2, "layout": "dp_shard=2", "set": ["data.packing=false"]}),
        ("abre um pull request com os resultados do sweep layouts-nov", "pr", {"sweep": "sweeps/layouts-nov"}),
    ],
)  # fmt: skip
def test_portuguese_is_read(text, command, args, known):
    test_fresh_t_kinds(text, command, args, known)


def test_portuguese_words_alone_are_left_as_they_are(known):
    assert (
        normalise("um, what is the loss of r1 e.g. in the last step?")
        == "um, what is the loss of r1 e.g. in the last step?"
    )


@pytest.mark.parametrize("text", ["batch of 8 sequences, ddp on 2", "global batch size of 8 sequences, ddp on 2"])
def test_a_count_of_sequences_is_no_sequence_length(text, known):
    intent = read(text, known)
    assert intent.clarify and not any("seq_len" in o for o in intent.args.get("set") or [])


def test_slurms_gpus_in_all_is_no_count_per_node(known):
    intent = read("sbatch -N 2 --gres=gpu:4, plan mistral 7b on a100 40gb", known)
    assert (intent.args.get("nodes"), intent.args.get("devices")) == (2, 4)
    assert "per node" not in normalise("srun --gpus=16 -N 2")


def test_english_words_that_are_portuguese_too_mark_no_portuguese(known):
    assert normalise("um, which os and how many cores here?") == "um, which os and how many cores here?"
    assert read("um, which os and how many cores here?", known).command == "hardware"


@pytest.mark.parametrize(
    "text", ["Start configs/long.yaml, 2 GPUs, Contextparallel 2, Optimizer stays Adam, 80 Steps.",
             "ddp on 2, keep adam, 10 steps", "fsdp on 2 gpus, leave the optimizer on adamw, 10 steps"],
)  # fmt: skip
def test_an_optimizer_kept_as_it_is_sets_nothing(text, known):
    intent = read(text, known)
    assert intent.command == "run" and not any("optimizer" in o for o in intent.args.get("set") or [])


def test_an_optimizer_said_is_still_set(known):
    assert read("ddp on 2, sgd optimizer, 10 steps", known).args.get("set") == ["train.optimizer=sgd"]


# --- fresh_w: phenomena of the held-out set by a new cast of personas ------------------------------------------


@pytest.mark.parametrize(
    "text, command, args",
    [
        # a request put as a question of permission asks for the action, as "could you" does
        ("would it be ok to start the long config on 2 GPUs with FSDP?", "run",
         {"experiment": "configs/long.yaml", "nproc": 2, "layout": "dp_shard=2"}),
        ("is it alright if you launch meshpilot.yaml with ddp on 2 gpus?", "run", {"nproc": 2,
                                                                                  "layout": "dp_replicate=2"}),
        ("would it be alright to have a peek at the main experiment file?", "read", {"path": "meshpilot.yaml"}),
        ("is it okay if you take a peek at configs/long.yaml?", "read", {"path": "configs/long.yaml"}),
        # a model's size is no count of GPUs on a box
        ("before we spend anything: gemma 2 9b on a box of 4 H100 PCIe cards — how would you lay it out?", "plan",
         {"devices": 4, "gpu": "h100-pcie", "model": "gemma-2-9b"}),
        ("mistral 7b on a box with 2 H100s, what layout?", "plan", {"devices": 2, "model": "mistral-7b"}),
        # a sweep named by what it varied, the article unsaid after a preposition
        ("Show me results of sweep over learning rates, please", "trials", {"sweep": "sweeps/lr-scan"}),
        ("what came out of sweep across layouts?", "trials", {"sweep": "sweeps/layouts-nov"}),
        # docs the team needs to reflect a sweep: an update of them, not a reading of the file named
        ("The team needs docs/training.md and the README to reflect what we learned from the November layout sweep. "
         "Can you make that happen?", "docs", {"sweep": "sweeps/layouts-nov"}),
        ("the README needs to show what the lr sweep found", "docs", {"sweep": "sweeps/lr-scan"}),
        # the runs in a manager's nouns
        ("Can I get a full inventory of every training initiative we've run so far? Just want a pulse check on the "
         "portfolio.", "runs", {}),
        ("a catalogue of all our past experiments, please", "runs", {}),
        # layouts described by analogy or in words
        ("It's like every nurse on shift getting the full chart but each one handling different patients. I want that "
         "kind of setup for training on 4 GPUs — can you start it?", "run", {"nproc": 4, "layout": "dp_replicate=4"}),
        ("like every chef getting the whole recipe book while each one cooks different orders; train that on 2 gpus",
         "run", {"nproc": 2, "layout": "dp_replicate=2"}),
        ("I don't know the jargon — I just want training to use both our GPUs, each with its own full copy of the "
         "model, splitting the data between them. Please get it started.", "run",
         {"nproc": 2, "layout": "dp_replicate=2"}),
        ("train on 4 cards, every one having its own copy of the model", "run", {"nproc": 4,
                                                                                "layout": "dp_replicate=4"}),
        ("my sequences in the long config are huge, so I'd like each one cut into 2 pieces with each GPU handling one "
         "piece. I have 2 GPUs. Can you start that?", "run",
         {"experiment": "configs/long.yaml", "nproc": 2, "layout": "cp=2"}),
        ("the sequences are long: train with each one split into 4 parts, each gpu taking one, on 4 gpus", "run",
         {"nproc": 4, "layout": "cp=4"}),
    ],
)  # fmt: skip
def test_fresh_w_kinds(text, command, args, known):
    test_fresh_t_kinds(text, command, args, known)


@pytest.mark.parametrize("text", ["go", "ok, go ahead!", "Go for it.", "do it please"])
def test_a_go_ahead_with_nothing_before_it_asks(text, known):
    """Nothing earlier says what to do: a bare go-ahead is no launch of the defaults."""
    assert read(text, known).clarify


def test_a_go_with_what_to_do_still_launches(known):
    intent = read("go with fsdp on 2 gpus", known)
    assert (intent.command, intent.clarify, intent.args.get("layout")) == ("run", None, "dp_shard=2")


@pytest.mark.parametrize(
    "text", ["would it be possible to train llama 3.1 70b on 4 a10s?", "is it fine to train llama 3.1 70b on 4 a10s?"]
)
def test_a_possibility_question_about_a_launch_stays_a_what_if(text, known):
    assert read(text, known).command == "plan"


def test_an_analogy_of_different_parts_of_the_model_is_no_ddp(known):
    intent = read("every worker getting the full model but each one handling different layers, on 2 gpus, start it",
                  known)  # fmt: skip
    assert intent.args.get("layout") != "dp_replicate=2"


def test_each_one_cut_in_pieces_that_is_no_sequence_is_no_context_parallel(known):
    intent = read("train on 2 gpus with the batches, each one cut into 2 pieces with each GPU handling one", known)
    assert "cp=2" not in str(intent.args.get("layout"))


@pytest.mark.parametrize(
    "text, command, args",
    [
        # a ticket's labels are no settings; what it rules out is not done
        ("MLOPS-388 Kick off training. AC: 4 GPUs, fully sharded data parallel across all 4, 50 steps, default "
         "experiment file. DoD: run id posted in ticket.", "run", {"nproc": 4, "layout": "dp_shard=4", "steps": 50}),
        ("MLOPS-412 Start training run. AC: 2 GPUs, FSDP, activation checkpointing disabled. Out of scope: TP.", "run",
         {"nproc": 2, "layout": "dp_shard=2", "set": ["train.activation_checkpointing=false"]}),
        ("INFRA-7 launch training. Acceptance criteria: 2 GPUs, DDP, 30 steps. Definition of done: loss logged.",
         "run", {"nproc": 2, "layout": "dp_replicate=2", "steps": 30}),
        # HSDP's degrees in words
        ("8 GPUs, HSDP with 2 replicas of 4 shards, lr 3e-4, micro batch 2, 200 steps", "run",
         {"nproc": 8, "layout": "dp_replicate=2,dp_shard=4", "steps": 200,
          "set": ["train.lr=3e-4", "train.micro_batch=2"]}),
        ("train on 8 gpus as 4 replicas of 2 shards", "run", {"nproc": 8, "layout": "dp_replicate=4,dp_shard=2"}),
        # typos of a verb and of a suite's name; an experiment by its compound name
        ("opne the config for the long seqeunce experiment", "read", {"path": "configs/long.yaml"}),
        ("show me the long context config", "read", {"path": "configs/long.yaml"}),
        ("benchamrk runs/r1 on the privte suite", "bench", {"model": "runs/r1", "suite": "builtin"}),
        # a business idiom is no name of a run
        ("Let's double-click on the learning-rate sweep — which trial is our north star?", "trials",
         {"sweep": "sweeps/lr-scan"}),
        ("a drill-down on the layouts-nov sweep please, who won?", "trials", {"sweep": "sweeps/layouts-nov"}),
    ],
)  # fmt: skip
def test_fresh_w_asked_kinds(text, command, args, known):
    test_fresh_t_kinds(text, command, args, known)


def test_ac_with_its_state_is_still_activation_checkpointing(known):
    intent = read("train on 2 gpus with fsdp, AC: off", known)
    assert intent.args.get("set") == ["train.activation_checkpointing=false"]


# --- fresh_x's session: known faults of launches (issue 33) --------------------------------------------------------


@pytest.mark.parametrize(
    "text, nodes",
    [
        ("train fsdp on 2 nodes with 8 gpus per node for 20 steps", 2),
        ("launch ddp across 2 machines, 4 gpus each", 2),
        ("train fsdp on a single node of 8 gpus", 1),  # one node is this machine: nothing to ask
    ],
)
def test_a_launch_over_several_nodes_asks_and_never_passes_nodes(text, nodes, known):
    """launch_run starts on this machine and takes no nodes: a multi-node run is never shrunk to one node unasked."""
    intent = read(text, known)
    assert intent.command == "run" and "nodes" not in intent.args
    assert (intent.clarify is not None and f"--nnodes {nodes}" in intent.clarify) == (nodes > 1)


@pytest.mark.parametrize(
    "text",
    [
        "should we train configs/long.yaml on 4 gpus with fsdp or wait",
        "would it be wise to train long.yaml on 2 gpus with ddp",
        "the docs say to use tp=2; could we try that on 2 gpus?",
    ],
)
def test_a_launch_asked_about_is_confirmed_never_started(text, known):
    intent = read(text, known)
    assert intent.command == "run" and (intent.clarify or "").startswith("Do you want me to run (/run ")


@pytest.mark.parametrize(
    "text",
    [
        "never launch long.yaml, just show it",  # the launch verb negated
        "before you launch long.yaml, show it to me",  # the launch after what is asked now
        "you can train configs/long.yaml on 2 gpus later, for now show me it",
    ],
)
def test_a_launch_taken_back_or_put_off_reads_the_file(text, known):
    intent = read(text, known)
    assert intent.command == "read" and intent.args.get("path") == "configs/long.yaml" and intent.clarify is None


@pytest.mark.parametrize(
    "text",
    ["make the training config use fsdp with 2 gpus", "make the training deterministic",
     "make the training reproducible on 2 gpus"],
)  # fmt: skip
def test_the_training_made_into_something_is_no_launch(text, known):
    """ "Make the training X" changes the experiment (no tool does): asked, never a launch of the defaults."""
    intent = read(text, known)
    assert intent.command != "run" and intent.clarify is not None


@pytest.mark.parametrize(
    "text, asked",
    [
        ("plan llama 3.1 8b on 8 h100s with a 90:10 split", "What is 90 for"),  # a ratio, no time of day
        ("cancel r1 at 17:00", "I can only act now, not at 17:00: cancel now (/cancel run=runs/r1)? yes / edit"),
        ("benchmark r1 at 5pm", "I can only act now, not at 5pm"),
        ("train 20 steps, 2 gpus, at 9am", "I can only act now, not at 9am"),
        ("train fsdp on 2 gpus for 30 steps, it's 9:30 here", None),  # the time now, no time to act
    ],
)
def test_a_time_of_day_is_one_only_in_clock_context_and_a_timed_command_asks(text, asked, known):
    clarify = read(text, known).clarify
    assert clarify == asked if asked is None else (clarify or "").startswith(asked)


@pytest.mark.parametrize(
    "text, args",
    [
        ("train with tp=2 on 2 gpus; make 2 copies of that setup as backups", {"nproc": 2, "layout": "tp=2"}),
        ("not tp=2. train ddp on 4 gpus", {"nproc": 4, "layout": "dp_replicate=4"}),  # a refused layout is no layout
        ("train fsdp on 2 gpus. the cluster has 4 nodes but use just this one", {"nproc": 2, "layout": "dp_shard=2"}),
        ("1) train fsdp on 2 gpus (steps: 10) 2) then benchmark it", {"nproc": 2, "layout": "dp_shard=2", "steps": 10}),
    ],
)
def test_a_launch_keeps_what_was_said_and_not_what_was_refused_or_set_aside(text, args, known):
    intent = read(text, known)
    assert intent.command == "run" and intent.args == args
    assert intent.clarify is None or "steps=10" in intent.clarify  # (the list's second item, a benchmark, is asked)


@pytest.mark.parametrize(
    "text, command",
    [
        ("so we launch long.yaml on two GPUs with ddp, no?", "run"),  # a launch asked back for a yes: confirmed first
        ("so we train configs/long.yaml for 10 steps, right?", "run"),
        ("does long.yaml train with fsdp?", "read"),  # the file is the subject, not the launch's object
    ],
)
def test_an_experiment_file_after_a_launch_verb_is_launched_and_a_question_confirms(text, command, known):
    intent = read(text, known)
    assert intent.command == command and (intent.clarify or "").startswith("Do you want me to run") == (
        command == "run"
    )
