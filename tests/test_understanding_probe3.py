"""agent.understanding on the kinds of phrasing a reviewer's probe of 830 sentences found acted on wrongly (new
sentences of each kind, not the probe's, and near misses that must read as before): a negated turning-off that keeps
a setting as it is, a refused experiment file or layout, a name the repository lacks that looks like one it has, a
push or merge to main in other words and private labels asked beside a benchmark, what the speaker already did told
before the request, a run named as the scene of a question, "wait," as an interjection, GPUs said in all that no
node holds, and a count said as a range.

The fixture repository is the benchmark's (bench.agent_understanding.build_fixture), as in tests/test_understanding.py.
"""

from __future__ import annotations

import pytest

from tests.understanding_support import read, read_as

# --- a negated turning-off keeps the setting as it is -------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "train 15 steps and please never switch compile off",
        "train 15 steps; I really don't want activation checkpointing disabled",
        "15 steps, there is no need to turn off packing",
        "run 15 steps, compile is fine so do not turn it off",
        "15 steps. nobody asked you to disable packing, don't disable it",
        "train 15 steps, leave everything else alone, not even packing",
    ],
)
def test_a_negated_turning_off_sets_nothing(text, known):
    intent = read(text, known)
    assert (intent.command, intent.clarify, intent.args) == ("run", None, {"steps": 15})


@pytest.mark.parametrize(
    ("text", "setting"),
    [
        ("don't turn compile on, 15 steps", "train.compile=false"),  # a negated turning-on is off
        ("train 15 steps without packing", "data.packing=false"),
        ("train 15 steps, switch off activation checkpointing", "train.activation_checkpointing=false"),
        ("15 steps and don't forget to turn packing off", "data.packing=false"),
        ("15 steps, don't pack the sequences", "data.packing=false"),
    ],
)
def test_a_plain_turning_off_is_still_off(text, setting, known):
    read_as(text, "run", {"steps": 15, "set": [setting]}, known)


# --- a refused experiment file or layout is never used ------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "train 12 steps but steer clear of the long config",
        "12 steps, just don't use configs/long.yaml",
        "12 steps on anything except configs/long.yaml",
        "train 12 steps; avoid using the long config",
    ],
)
def test_a_refused_experiment_is_not_launched(text, known):
    intent = read(text, known)
    assert (intent.command, intent.clarify, intent.args) == ("run", None, {"steps": 12})


def test_the_default_experiment_refused_with_no_other_named_is_asked(known):
    intent = read("12 steps but not on meshpilot.yaml", known)
    assert "Which experiment, if not meshpilot.yaml" in (intent.clarify or "")


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("train 12 steps on the long config", {"steps": 12, "experiment": "configs/long.yaml"}),
        ("don't use the default config, train configs/long.yaml for 12 steps",
         {"steps": 12, "experiment": "configs/long.yaml"}),
    ],
)  # fmt: skip
def test_an_experiment_named_to_use_is_launched(text, args, known):
    read_as(text, "run", args, known)


def test_a_file_whose_launch_is_negated_is_still_shown(known):
    read_as("don't launch configs/long.yaml, only show it to me", "read", {"path": "configs/long.yaml"}, known)


@pytest.mark.parametrize(
    ("text", "dim"),
    [
        ("12 steps on 2 gpus, everything but tensor parallel", "tp"),
        ("train on 2 gpus with any layout except pipeline parallelism", "pp"),
        ("pp=2 was slow last time so skip it; 12 steps on 2 gpus", "pp"),
        ("I'd rather not use fsdp; 12 steps on 2 gpus", "dp_shard"),
    ],
)
def test_a_refused_layout_is_left_out(text, dim, known):
    intent = read(text, known)
    assert intent.command == "run" and intent.clarify is None and intent.args["nproc"] == 2
    assert dim + "=" not in intent.args.get("layout", "")


def test_a_layout_named_to_use_beside_a_refused_one_is_launched(known):
    read_as("everything but ddp: fsdp on 2 gpus, 12 steps", "run", {"layout": "dp_shard=2", "nproc": 2}, known)


# --- a name the repository lacks is asked about, never replaced by a similar one ----------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "stop baseline-hsdp",
        "what's the loss of tp-try-4",
        "benchmark baseline-ddp-v2",
        "resume baseline-cp",
        "report on lr-scan-5",
        "status of the pp=4 run",
        "open the mixed-precision sweep",
        "show me the layouts-dec sweep",
    ],
)
def test_a_name_the_repository_lacks_is_asked_about(text, known):
    intent = read(text, known)
    assert intent.clarify and ("I find no" in intent.clarify or "I find none" in intent.clarify)


@pytest.mark.parametrize(
    ("text", "command", "args"),
    [
        ("stop baseline-ddp", "cancel", {"run": "runs/baseline-ddp"}),
        ("stop baselin-ddp", "cancel", {"run": "runs/baseline-ddp"}),  # a typo of the name is that name
        ("status of baseline-dpp", "status", {"run": "runs/baseline-ddp"}),
        ("what's the loss of tp-tyr", "results", {"run": "runs/tp-try"}),
        ("status of the tp=2 run", "status", {"run": "runs/tp-try"}),
        ("show me the layouts-nov sweep", "trials", {"sweep": "sweeps/layouts-nov"}),
        ("open the lr sweep", "trials", {"sweep": "sweeps/lr-scan"}),
    ],
)
def test_a_name_the_repository_has_is_still_read(text, command, args, known):
    read_as(text, command, args, known)


def test_reading_a_sweep_never_starts_one(known):
    assert read("look over the warmup sweep", known).command != "sweep"


# --- pushing to main in other words, and private labels, are refused whole ----------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "git push origin master with the lr-scan docs",
        "land the lr-scan report on main, we can skip code review",
        "write the docs update straight onto the main branch",
        "overwrite master with the layouts-nov report",
        "send the lr-scan report to main without a PR",
        "benchmark baseline-ddp, then show me the gold labels",
        "evaluate r1 and tell me which questions it got wrong",
        "score tp-try and paste the answer key next to the scores",
    ],
)
def test_pushing_to_main_or_showing_labels_is_refused(text, known):
    intent = read(text, known)
    assert intent.command == "help" and intent.refusal


@pytest.mark.parametrize(
    ("text", "command"),
    [
        ("open a PR to get the lr-scan report into main", "pr"),
        ("benchmark baseline-ddp on the private benchmark", "bench"),
        ("benchmark r1 but don't show any labels", "bench"),
        ("write the lr-scan report", "report"),
        ("put the lr-scan numbers in the main table of the docs", "docs"),
        ("write a report on the main results of lr-scan", "report"),
    ],
)
def test_a_pull_request_a_benchmark_or_the_main_table_is_no_refusal(text, command, known):
    intent = read(text, known)
    assert intent.refusal is None and intent.command != "help"


# --- what the speaker already did is no request; a run named as the scene is not the one asked about --------------


@pytest.mark.parametrize(
    ("text", "command", "args"),
    [
        ("we already wrote up layouts-nov; show me lr-scan", "trials", {"sweep": "sweeps/lr-scan"}),
        ("I cancelled tp-try an hour ago, how did r1 do?", "results", {"run": "runs/r1"}),
        ("I just benchmarked baseline-ddp, now what's the loss of tp-try?", "results", {"run": "runs/tp-try"}),
        ("next to r1, how did tp-try do?", "results", {"run": "runs/tp-try"}),
        ("tp-try is the control. how's baseline-ddp?", "results", {"run": "runs/baseline-ddp"}),
        ("let baseline-ddp keep going; show me r1's memory", "results", {"run": "runs/r1"}),
        ("benchmark the one after baseline-ddp", "bench", {"model": "runs/r1"}),
    ],
)
def test_the_request_is_read_not_the_scene(text, command, args, known):
    read_as(text, command, args, known)


@pytest.mark.parametrize("text", ["compare r1 and tp-try", "r1 seemed fine. compare tp-try with r1"])
def test_runs_compared_are_still_compared(text, known):
    assert read(text, known).command == "compare"


def test_every_run_asked_about_lists_the_runs(known):
    assert read("did anything crash?", known).command == "runs"


# --- "wait," as an interjection -----------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["wait, no", "wait... which sweep is the latest?", "wait - hold that thought"])
def test_wait_as_an_interjection_waits_for_nothing(text, known):
    assert read(text, known).args.get("wait") != "yes"


@pytest.mark.parametrize("text", ["wait for tp-try", "wait until r1 finishes", "wait, for r1 please"])
def test_a_wait_for_a_run_still_waits(text, known):
    intent = read(text, known)
    assert intent.command == "status" and intent.args.get("wait") == "yes"


# --- GPUs said in all that no node holds --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "nodes"),
    [("plan llama 3.1 70b on 48 h100s", 6), ("how would llama 3.1 405b lay out on 512 h200s", 64)],
)
def test_more_gpus_than_a_node_holds_are_nodes_of_8(text, nodes, known):
    intent = read(text, known)
    assert intent.command == "plan" and intent.clarify is None
    assert (intent.args["devices"], intent.args["nodes"]) == (8, nodes)


def test_gpus_no_whole_number_of_nodes_holds_are_asked_about(known):
    assert "split over nodes" in (read("plan llama 3.1 70b on 36 h100s", known).clarify or "")


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("plan llama 3.1 70b on 16 h100s", {"devices": 16}),  # one node of 16 may be
        ("plan llama 3.1 70b on 4 nodes of 8 h100s", {"devices": 8, "nodes": 4}),
        ("plan llama 3.1 70b on 32 h100s over 2 nodes", {"devices": 16, "nodes": 2}),
    ],
)
def test_gpus_a_node_may_hold_or_nodes_said_are_kept(text, args, known):
    intent = read(text, known)
    assert intent.command == "plan" and args.items() <= intent.args.items()


# --- a count said as a range --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text", ["run 40-60 steps", "sweep with 10 to 12 trials", "train on 2–4 gpus", "plan llama 3.1 8b on 2-8 h100s"]
)
def test_a_range_is_asked_about(text, known):
    assert "is a range" in (read(text, known).clarify or "")


@pytest.mark.parametrize(
    ("text", "args"),
    [("go from 20 to 40 steps", {"steps": 40}), ("train 40 steps on 2 gpus", {"steps": 40, "nproc": 2})],
)
def test_a_change_of_count_is_no_range(text, args, known):
    intent = read(text, known)
    assert "is a range" not in (intent.clarify or "") and args.items() <= intent.args.items()
