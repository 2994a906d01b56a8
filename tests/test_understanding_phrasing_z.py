"""agent.understanding on the kinds of phrasing fresh_z's and fresh_aa's requests showed (new sentences of each kind,
not only the sets'): layouts described in words with a count inside ("each of two GPUs keeps its own full copy"),
nodes by another name or as a launcher's variables, GPUs split evenly over nodes, a wait said as blocking, a request
after sentences that only set the scene, a run described by memory as its cause of failure, a config told apart after
its noun, the main experiment's noun followed by a file's name, and a launch asked with formal verbs and degrees.

The fixture repository is the benchmark's (bench.agent_understanding.build_fixture), as in tests/test_understanding.py.
"""

from __future__ import annotations

import pytest

from tests.understanding_support import read, read_as


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("train 5 steps where each of the 2 GPUs has its own copy of the model", {"layout": "dp_replicate=2"}),
        ("start a run where each one of our four cards keeps a full copy of the model", {"layout": "dp_replicate=4"}),
        ("10 steps on 4 gpus, the whole model is sharded over them", {"layout": "dp_shard=4", "nproc": 4}),
        ("a quick run on 2 GPUs with the model sharded across them", {"layout": "dp_shard=2"}),
        ("no pipeline today. shard everything evenly over 2 gpus", {"layout": "dp_shard=2", "nproc": 2}),
        ("train 20 steps on 4 gpus with pipeline parallelism of size 2 and data parallelism of degree 2",
         {"layout": "pp=2,dp_replicate=2"}),
        ("start a run on 2 gpus with fully-sharded data parallelism", {"layout": "dp_shard=2"}),
    ],
)  # fmt: skip
def test_layouts_described_in_words_are_launched(text, args, known):
    read_as(text, "run", args, known)


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("3 racks, each carrying 8 h100s: plan llama 3.1 70b", {"nodes": 3, "devices": 8}),
        ("plan qwen 2.5 72b on 2 pods, each with 4 h200 gpus", {"nodes": 2, "devices": 4}),
        ("NODES=4 GPUS_PER_NODE=8 GPU=h100 MODEL=llama-3.1-70b ./plan", {"nodes": 4, "devices": 8}),
        ("dos nodos con 8 H100 cada uno, llama 3.1 70b, solo planear", {"nodes": 2, "devices": 8}),
        ("32 H100s spread equally over 4 nodes, plan qwen 2.5 72b", {"nodes": 4, "devices": 8}),
        ("plan llama 3.1 8b: twelve H100 cards split evenly over three machines", {"nodes": 3, "devices": 4}),
    ],
)
def test_nodes_said_in_other_words_are_planned(text, args, known):
    read_as(text, "plan", args, known)


@pytest.mark.parametrize(
    "text", ["block on r1 till it's done", "block for r1 until it finishes", "block until r1 is done"]
)
def test_blocking_on_a_run_waits_for_it(text, known):
    read_as(text, "status", {"wait": "yes", "run": "runs/r1"}, known)


@pytest.mark.parametrize(
    ("text", "run"),
    [
        ("The tp-try run crashed yesterday, whatever. Show me r1's loss.", "runs/r1"),
        ("the DDP baseline looks slow to me. I'll check it myself. @meshpilot pull r1's numbers.", "runs/r1"),
        ("throughput of the run which got killed by memory", "runs/tp-try"),
        ("loss of the one that died because of memory", "runs/tp-try"),
    ],
)
def test_the_run_a_request_asks_about(text, run, known):
    read_as(text, "results", {"run": run}, known)


def test_runs_asked_side_by_side_are_still_compared(known):
    assert read("r1 looked fine. show baseline-ddp and r1 numbers", known).command == "compare"


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ("could you pull up the main experiment file?", "meshpilot.yaml"),
        ("what is written inside the config for the long context?", "configs/long.yaml"),
        ("show me the experiment file for long sequences", "configs/long.yaml"),
        ("show me the experiment file configs/long.yaml", "configs/long.yaml"),
    ],
)
def test_experiment_files_read(text, path, known):
    read_as(text, "read", {"path": path}, known)


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("initiate a new run on 2 gpus for 10 steps", {"nproc": 2, "steps": 10}),
        ("Please initiate a training run with the experiment file configs/long.yaml on 4 processes, combining tensor "
         "parallelism of degree 2 with fully-sharded data parallelism of degree 2",
         {"experiment": "configs/long.yaml", "layout": "dp_shard=2,tp=2", "nproc": 4}),
        ("train 10 steps with the config for long sequences", {"experiment": "configs/long.yaml"}),
    ],
)  # fmt: skip
def test_launches_asked_formally(text, args, known):
    read_as(text, "run", args, known)


@pytest.mark.parametrize(
    ("text", "command", "args"),
    [
        ("make the lr sweep results land in the docs", "docs", {"sweep": "sweeps/lr-scan"}),
        ("update the documents with the layouts-nov results", "docs", {"sweep": "sweeps/layouts-nov"}),
        ("I request that a fresh layout sweep be launched with 8 trials", "sweep", {"trials": 8}),
        ("it is asked that another sweep over the layouts be started, 6 trials", "sweep", {"trials": 6}),
        ("Inputs:\n- model: llama 3.1 8b\n- hardware: 8 x A100 80GB\nWhich layout is best?", "plan",
         {"model": "llama-3.1-8b", "devices": 8}),
    ],
)  # fmt: skip
def test_requests_said_in_the_passive_or_as_fields(text, command, args, known):
    read_as(text, command, args, known)


@pytest.mark.parametrize(
    "text", ["can u change the mode on the servers and restart it?", "tweak some settings and train 10 steps"]
)
def test_a_change_that_names_nothing_is_asked_about(text, known):
    intent = read(text, known)
    assert intent.command == "run" and intent.clarify and intent.clarify.startswith("What should change")


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("change the setting train.lr=1e-4 and run 10 steps", {"steps": 10, "set": ["train.lr=1e-4"]}),
        ("switch the mode to fsdp and train on 2 gpus", {"layout": "dp_shard=2"}),
    ],
)
def test_a_change_with_its_value_is_launched(text, args, known):
    read_as(text, "run", args, known)


@pytest.mark.parametrize(
    ("text", "command", "args"),
    [
        ("tp=2 nproc2 lr .0005 steps 40", "run", {"set": ["train.lr=0.0005"], "steps": 40}),
        ("train on 2 gpus with ddp, the steps is 30", "run", {"steps": 30, "layout": "dp_replicate=2"}),
        ("start configs/long.yaml on 4 gpus with tensor parallel of 2 and sharding of 2", "run",
         {"layout": "dp_shard=2,tp=2", "nproc": 4}),
        ("3 rigs, 8 h100 each: what layout for llama 3.1 70b? plan only", "plan", {"nodes": 3, "devices": 8}),
        ("plan llama 3.1 8b on two machines, each machine being equipped with 4 A100 80GB", "plan",
         {"nodes": 2, "devices": 4}),
        ("rank the possible layouts for qwen 2.5 7b on 4 h100s", "plan", {"model": "qwen2.5-7b", "devices": 4}),
        ("meshpilot ls runs", "runs", {}),
        ("can you show us every run in this repo?", "runs", {}),
    ],
)  # fmt: skip
def test_terse_and_roundabout_values(text, command, args, known):
    read_as(text, command, args, known)


@pytest.mark.parametrize(
    ("text", "command", "args"),
    [
        ("loss of r1, to two-decimal-point precision", "results", {"run": "runs/r1"}),
        ("r1's per-step throughput please", "results", {"run": "runs/r1"}),
        ("forecast the memory of llama 3.1 8b on 2 a100 80gb", "plan", {"model": "llama-3.1-8b", "devices": 2}),
        ("a forecast of the per-device memory for mistral 7b on 4 h100s, no training", "plan",
         {"model": "mistral-7b", "devices": 4}),
        ("fire off a run of 10 steps with lr 3e-4, would ya?", "run", {"steps": 10, "set": ["train.lr=3e-4"]}),
        ("kick off a run with lr 1e-3 will ya?", "run", {"set": ["train.lr=1e-3"]}),
        ("what's actually installed on this box: cpus, ram, gpus?", "hardware", {}),
    ],
)  # fmt: skip
def test_compounds_forecasts_and_tag_requests(text, command, args, known):
    read_as(text, command, args, known)


def test_an_unknown_hyphenated_name_is_still_asked_about(known):
    assert "old-base" in str(read("loss of old-base", known).clarify)


@pytest.mark.parametrize(
    ("text", "command", "args"),
    [
        ("I don't want the main experiment, train configs/long.yaml on 2 gpus with ddp", "run",
         {"experiment": "configs/long.yaml", "layout": "dp_replicate=2"}),
        ("a 10-step run on 2 gpus before we try something larger", "run", {"steps": 10, "nproc": 2}),
        ("fsdp 4p 10 steps", "run", {"layout": "dp_shard=4", "steps": 10}),
        ("start a run:\n- processes: 2\n- layout: fully sharded across both\n- steps: 20", "run",
         {"nproc": 2, "layout": "dp_shard=2", "steps": 20}),
        ("¿Cuántas GPUs tiene esta máquina?", "hardware", {}),
        ("I'd like to know whether the run called tp-try has crashed", "status", {"run": "runs/tp-try"}),
    ],
)  # fmt: skip
def test_what_is_ruled_out_said_tersely_or_politely(text, command, args, known):
    read_as(text, command, args, known)


def test_a_bigger_change_still_asks_which(known):
    assert read("train 10 steps on 2 gpus, but bigger", known).clarify


@pytest.mark.parametrize(
    ("text", "command", "args"),
    [
        ("package the findings of the November layout experiment as a change the team can review", "pr",
         {"sweep": "sweeps/layouts-nov"}),
        ("put the lr-scan results up so we can review and approve on github", "pr", {"sweep": "sweeps/lr-scan"}),
        ("trials of the november layout study", "trials", {"sweep": "sweeps/layouts-nov"}),
        ("let's do the fsdp experiment on 4 gpus for 10 steps", "run", {"layout": "dp_shard=4", "steps": 10}),
        ("show me the main experiment", "read", {"path": "meshpilot.yaml"}),
    ],
)  # fmt: skip
def test_an_experiment_that_studied_layouts_is_the_sweep(text, command, args, known):
    read_as(text, command, args, known)
