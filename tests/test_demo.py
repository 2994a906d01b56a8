"""`meshpilot demo` end to end, as a new user runs it (fewer steps per trial so that the suite stays short).

One run of the real command: a sweep of every CPU layout with and without packing in 4 processes, the winner
trained longer, evaluated on the private suite, the report committed on a branch, pushed to the bare remote and a
local pull request opened. The checks read what the demo left behind: repositories, run directories, results.
"""

from __future__ import annotations

import json

import git
import pytest
from support import meshpilot
from transformers import LlamaConfig

from agent.demo import CPU_LAYOUTS, DEMO_MODEL, MICRO_BATCH, ROWS_PER_DEVICE, SEQ_LEN, demo_layouts
from trainer.data.rows import plan_batches
from trainer.layout import Layout, check_layout_for_model
from trainer.parallel.pipeline import check_pipeline
from trainer.results.rundir import RunDir

TRIAL_STEPS, FINAL_STEPS = 2, 4


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    base = tmp_path_factory.mktemp("demo")
    env = {"MESHPILOT_DATA": str(base / "store")}  # the private suite's sealed store, outside the repositories
    done = meshpilot(
        "demo", "--dir", str(base / "demo"), "--trial-steps", str(TRIAL_STEPS), "--final-steps", str(FINAL_STEPS),
        env=env, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return base / "demo", done.stdout, done.stderr


def test_the_sweep_covers_every_cpu_layout_with_and_without_packing(demo):
    directory, stdout, _ = demo
    summary = json.loads((directory / "sweep" / "summary.json").read_text())
    tried = {(_layout(t["params"]["layout"]), t["params"]["packing"]) for t in summary["trials"]}
    assert tried == {(layout, packing) for layout in CPU_LAYOUTS for packing in (True, False)}
    finished = [t for t in summary["trials"] if t["status"] == "ok"]
    assert all(t["status"] in ("ok", "pruned") for t in summary["trials"]), [t["cause"] for t in summary["trials"]]
    winner = next(t for t in summary["trials"] if t["id"] == summary["winner"])
    assert winner["tokens_per_s"] == max(t["tokens_per_s"] for t in finished)
    assert f"winner {winner['id']}" in stdout


def test_the_winner_is_trained_longer_in_its_layout(demo):
    directory, _, _ = demo
    summary = json.loads((directory / "sweep" / "summary.json").read_text())
    winner = next(t for t in summary["trials"] if t["id"] == summary["winner"])
    metrics = RunDir(directory / "final").read_metrics()
    assert metrics["status"] == "ok" and metrics["steps"] == FINAL_STEPS
    assert metrics["layout"] == winner["params"]["layout"] and metrics["packing"] == winner["params"]["packing"]
    assert len(RunDir(directory / "final").read_steps()) == FINAL_STEPS
    # Launched from the demo's own process, which has one thread (no BLAS pool): torchrun's agent forked from it
    # rather than importing torch, transformers and the model's code afresh.
    assert "forked from the launcher" in RunDir(directory / "final").torchrun_log.read_text()


def test_the_winner_is_scored_on_the_private_suite_and_held_out_perplexity(demo):
    directory, _, _ = demo
    bench = json.loads((directory / "bench" / "result.json").read_text())
    metrics = {name for entry in bench["tasks"] for name in entry["metrics"]}
    assert "perplexity" in metrics and metrics - {"perplexity"}  # held-out perplexity and scored tasks
    assert any(entry["private"] for entry in bench["tasks"]) and bench["leaderboard_id"]


def test_the_report_is_pushed_on_a_branch_with_a_local_pull_request(demo):
    directory, stdout, _ = demo
    repo = git.Repo(directory / "experiment-repo")
    remote = git.Repo(directory / "remote.git")
    branch = next(b for b in remote.branches if b.name.startswith("meshpilot/"))
    assert [c.message for c in remote.commit("main").iter_items(remote, "main")] == [
        "Experiment: a small Llama on the built-in corpus"
    ]  # the default branch is never written
    report_path = next(line for line in stdout.splitlines() if line.startswith("report: ")).split()[1]
    report = remote.git.show(f"{branch.name}:{report_path}")
    summary = json.loads((directory / "sweep" / "summary.json").read_text())
    winner = next(t for t in summary["trials"] if t["id"] == summary["winner"])
    assert f"{winner['tokens_per_s']:,.0f}" in report
    assert repo.commit(branch.name).hexsha == branch.commit.hexsha  # pushed as committed
    description = directory / "experiment-repo" / ".git" / "meshpilot" / "pull-requests"
    assert [p.name for p in description.iterdir()] == [f"{branch.name.replace('/', '__')}.md"]


def test_the_demo_says_each_phase_as_it_starts_and_each_trial_as_it_ends(demo):
    directory, stdout, stderr = demo
    phases = [line.split()[0] for line in stdout.splitlines() if line[:4] in ("1/4 ", "2/4 ", "3/4 ", "4/4 ")]
    assert phases == ["1/4", "2/4", "3/4", "4/4"]
    assert "sweeping" in stdout and "training the winner" in stdout and "pull request" in stdout
    # stderr is a pipe here, as in CI: one plain line per trial, numbered as they end, and no redrawn bar.
    summary = json.loads((directory / "sweep" / "summary.json").read_text())
    ended = [line.split() for line in stderr.splitlines() if line.startswith("trial ")]
    total = len(summary["trials"])
    assert [words[1] for words in ended] == [f"{n}/{total}" for n in range(1, total + 1)]
    assert sorted(words[2] for words in ended) == sorted(t["id"] for t in summary["trials"])
    assert "\r" not in stderr


def test_demo_refuses_a_directory_that_is_not_empty(tmp_path):
    (tmp_path / "keep.txt").write_text("mine")
    done = meshpilot("demo", "--dir", str(tmp_path))
    assert done.returncode != 0
    assert done.stderr.strip().splitlines()[-1].startswith("meshpilot: error: --dir")
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]


@pytest.mark.parametrize("gpus", range(9))
def test_every_layout_the_demo_sweeps_is_valid_for_its_model_and_device_count(gpus):
    """The GPU choices cannot run here: check them the way the launcher will, for 1 to 8 GPUs (0: CPU)."""
    devices, layouts = demo_layouts(gpus)
    assert devices == (gpus or 4) and len(set(layouts)) == len(layouts)
    config = LlamaConfig(**{k: v for k, v in DEMO_MODEL.items() if k != "model_type"})
    for text in layouts:
        layout = Layout.parse(text)
        layout = layout.resolve(layout.world_size)
        assert layout.world_size == devices if gpus else layout.world_size <= devices  # GPU trials use them all
        layout.check_supported()
        check_layout_for_model(layout, config)
        batches = plan_batches(SEQ_LEN * ROWS_PER_DEVICE * devices, SEQ_LEN, MICRO_BATCH, layout.dp_degree)
        check_pipeline(layout.pp, config, "1f1b", 1, batches.grad_accum)


def _layout(degrees: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in degrees.items() if v != 1)
