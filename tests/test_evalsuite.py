"""The benchmark suite on a real tiny trained run: privacy (canary), provenance, re-runs, resume, contamination,
submission limits, and the same scores from a checkpoint, an exported HF directory and a disk-offloaded device map.

One run is trained for the module, on a local text file into which the private test items of `addition` and the
test documents of `stdlib_heldout` were planted, so that the contamination check has something to find.
"""

from __future__ import annotations

import datetime
import json
import re
import secrets
import shutil
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
import yaml
from support import meshpilot, train, write_experiment
from transformers import AutoModelForCausalLM

from agent.cli import main
from evalsuite.api import eval_code_version, leaderboard, run_bench
from evalsuite.errors import BenchError
from evalsuite.leaderboard import Leaderboard
from evalsuite.runner import context_text, solved_text
from evalsuite.scoring import generate_continuous, generate_static, generation_config
from evalsuite.store import Store, git_work_tree
from evalsuite.task import BUILTIN_DIR, load_items, load_suite
from trainer.data.corpus import builtin_documents
from trainer.export.hf import export_hf, find_checkpoint, load_model, load_run_tokenizer
from trainer.results.contracts import ContractError

SIZES = {"addition": (6, 12), "kv_recall": (6, 12), "reversal": (6, 12), "stdlib_heldout": (8, 8)}
SECRET_QA = {
    "name": "secret_qa",
    "description": "Questions whose private answers must never leave the scorer.",
    "output_type": "loglikelihood",
    "data": {"files": {"dev": "secret_qa_dev.jsonl"}},
    "splits": {"dev": {}, "test": {"private": True}},
    "prompt": "Q: {question}\nA:",
    "target": " {answer}",
    "metrics": ["acc", "bits_per_byte"],
}


@dataclass
class World:
    root: Path
    store: Store
    suite: Path
    repo: Path
    run: Path


def small_suite(directory: Path) -> Path:
    """The built-in tasks with fewer items."""
    directory.mkdir()
    for name, (dev, test) in SIZES.items():
        task = yaml.safe_load((BUILTIN_DIR / f"{name}.yaml").read_text())
        task["splits"]["dev"]["size"], task["splits"]["test"]["size"] = dev, test
        (directory / f"{name}.yaml").write_text(yaml.safe_dump(task))
    return directory


def with_secret_qa(suite: Path, directory: Path) -> Path:
    """The suite plus a task whose private test split is sealed into the store."""
    shutil.copytree(suite, directory)
    (directory / "secret_qa.yaml").write_text(yaml.safe_dump(SECRET_QA))
    dev = [{"question": f"What is {n} doubled?", "answer": str(2 * n)} for n in range(4)]
    (directory / "secret_qa_dev.jsonl").write_text("".join(json.dumps(d) + "\n" for d in dev))
    return directory


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> World:
    root = tmp_path_factory.mktemp("bench")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MESHPILOT_DATA", str(root / "store"))
        store = Store.open()
        store.update_settings(daily_submissions=100)
        suite = small_suite(root / "suite")
        tasks = {t.name: t for t in load_suite(str(suite)).tasks}
        planted = [
            solved_text(tasks[n], i)
            for n in ("addition", "stdlib_heldout")
            for i in load_items(tasks[n], "test", store)
        ]
        filler = builtin_documents("stdlib-docs", "train")[:150]
        repo = root / "experiment"
        repo.mkdir()
        (repo / "train.txt").write_text("\n\n".join(filler + planted) + "\n")
        experiment = write_experiment(repo, {"data": {"train": ["train.txt"], "text_unit": "paragraph"}})
        git(repo, "init", "-q")
        git(repo, "add", "-A")
        git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "experiment")
        run = train(experiment, repo / "runs" / "tiny")
        yield World(root, store, suite, repo, run.path)


def bench(world: World, **kwargs) -> dict:
    return run_bench(str(world.suite), world.run, **kwargs)


def scores(result: dict) -> list[tuple]:
    return [(t["task"], t["split"], t["metrics"], t["n_examples"], t["contamination"]) for t in result["tasks"]]


@pytest.fixture(scope="module")
def reference(world) -> dict:
    return bench(world)


def test_canary_in_a_private_label_never_leaves_the_store(world, capfd):
    canary = "CANARY-" + secrets.token_hex(12)
    suite = with_secret_qa(world.suite, world.repo / "canary-suite")  # task files are part of the repository
    private = world.root / "private.jsonl"  # outside the repository, deleted once sealed
    items = [{"question": f"What is {n} squared?", "answer": str(n * n)} for n in range(5)]
    items[3]["answer"] = canary
    private.write_text("".join(json.dumps(i) + "\n" for i in items))
    assert main(["bench", "seal", str(suite / "secret_qa.yaml"), str(private), "--split", "test"]) == 0
    private.unlink()

    out = world.repo / "bench-out"
    done = meshpilot("bench", "run", "--suite", str(suite), "--model", str(world.run), "--out", str(out), "--json")
    assert done.returncode == 0, done.stderr
    for flags in ([], ["--private"], ["--json"], ["--json", "--private"]):
        assert main(["bench", "leaderboard", *flags]) == 0
    shown = capfd.readouterr()
    result = json.loads(done.stdout)
    secret = next(t for t in result["tasks"] if t["task"] == "secret_qa" and t["split"] == "test")
    assert secret["private"] and secret["n_examples"] == 5 and set(secret["metrics"]) == {"acc", "bits_per_byte"}
    assert json.loads((out / "result.json").read_text())["tasks"] == result["tasks"]
    assert "secret_qa" in shown.out and f'"leaderboard_id": {result["leaderboard_id"]}' not in shown.out

    # Everything a user, the agent or a report could see: command output, the run, the results, the commit.
    git(world.repo, "add", "-A")
    git(world.repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "results")
    seen = [done.stdout, done.stderr, shown.out, shown.err, git(world.repo, "log", "-p", "--all")]
    seen += [json.dumps(leaderboard(private=True)), json.dumps(leaderboard())]
    files = [p for p in world.repo.rglob("*") if p.is_file() and ".git" not in p.parts]
    assert {"result.json", "metrics.json", "secret_qa.yaml"} <= {p.name for p in files}
    for path in [*files, *world.store.root.rglob("*")]:
        if path.is_file():
            assert canary.encode() not in path.read_bytes(), f"the canary leaked into {path}"
    for text in seen:
        assert canary not in text

    # The canary is really there, sealed: in the store only, outside the repository, compressed, owner-only.
    assert any(i["answer"] == canary for i in world.store.sealed("secret_qa", "test"))
    assert git_work_tree(world.store.root) is None
    for path in [world.store.root, *world.store.root.rglob("*")]:
        assert stat.S_IMODE(path.stat().st_mode) == (0o700 if path.is_dir() else 0o600), path
    assert not list(world.store.cache_dir.iterdir()), "per-example results are deleted after the run"


def test_rerun_gives_identical_scores_and_full_provenance(world, reference):
    again = bench(world)
    assert scores(again) == scores(reference)
    for key in ("suite_version", "model", "config_hash", "git_commit", "seed", "eval_code_version", "batching"):
        assert again[key] == reference[key]
    metrics = json.loads((world.run / "metrics.json").read_text())
    assert reference["config_hash"] == metrics["config_hash"] and reference["seed"] == 0
    experiment_commit = git(world.repo, "rev-list", "--max-parents=0", "HEAD").strip()  # the run trained at it
    assert reference["git_commit"] == experiment_commit
    assert reference["eval_code_version"] == eval_code_version() and reference["batching"] == "continuous"
    assert {(t["task"], t["split"]) for t in reference["tasks"]} == {(n, s) for n in SIZES for s in ("dev", "test")}
    assert len({t["version"] for t in reference["tasks"]}) == len(SIZES)
    rows = {r["id"]: r for r in leaderboard(reference["suite"], private=True)}
    assert rows[again["leaderboard_id"]]["tasks"] == rows[reference["leaderboard_id"]]["tasks"]
    assert again["leaderboard_id"] > reference["leaderboard_id"]


def test_contamination_flags_the_planted_test_sets_only(reference):
    found = {(t["task"], t["split"]): t["contamination"] for t in reference["tasks"]}
    for planted in (("addition", "test"), ("stdlib_heldout", "test")):
        # Not all: the trainer split the planted documents at blank lines, which breaks the n-grams across them.
        assert found[planted]["flagged"] and found[planted]["overlap"] > 0.5 and found[planted]["n"] == 13
    clean = [key for key in found if key not in (("addition", "test"), ("stdlib_heldout", "test"))]
    assert all(not found[key]["flagged"] for key in clean), {k: found[k] for k in clean}
    row = next(r for r in leaderboard(reference["suite"], private=True) if r["id"] == reference["leaderboard_id"])
    assert row["flagged"] == ["addition", "stdlib_heldout"]
    assert not next(r for r in leaderboard(reference["suite"]) if r["id"] == reference["leaderboard_id"])["flagged"]


def test_interrupted_evaluation_resumes_where_it_stopped(world, tmp_path):
    suite = tmp_path / "suite"
    suite.mkdir()
    for name in ("addition", "kv_recall"):
        shutil.copy(world.suite / f"{name}.yaml", suite)

    def bench(**kwargs) -> dict:
        # A small token budget: several batches a split, so that there is something to resume.
        return run_bench(str(suite), world.run, batch_tokens=256, **kwargs)

    full = bench()
    rows = len(leaderboard())

    stopped = []

    def interrupt(label: str, done: int, total: int) -> None:
        if label == "kv_recall test" and done >= 8:
            stopped.append(done)
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        bench(out=tmp_path / "out", progress=interrupt)
    assert stopped and list(Path(world.store.cache_dir).glob("*.jsonl"))
    assert not (tmp_path / "out").exists() and len(leaderboard()) == rows, "nothing half-written"

    calls = []
    resumed = bench(out=tmp_path / "out", progress=lambda *call: calls.append(call))
    labels = {label for label, _, _ in calls}
    assert not labels & {"addition dev", "addition test", "kv_recall dev"}, "finished splits are not redone"
    first = next(done for label, done, _ in calls if label == "kv_recall test")
    assert first > stopped[0], "the interrupted split continues after its cached batches"
    assert scores(resumed) == scores(full)
    assert not list(Path(world.store.cache_dir).iterdir())


def test_hf_directory_and_disk_offloaded_device_map_score_like_the_checkpoint(world, reference, tmp_path):
    exported = export_hf(world.run, tmp_path / "hf")
    from_hf = run_bench(str(world.suite), exported)
    assert scores(from_hf) == scores(reference)
    for key in ("config_hash", "git_commit", "seed"):
        assert from_hf[key] == reference[key]
    assert from_hf["model"]["checkpoint_hash"] == reference["model"]["checkpoint_hash"]
    step = sorted((world.run / "checkpoint").glob("step_*"))[-1]
    assert scores(run_bench(str(world.suite), step)) == scores(reference)

    # Without the export's provenance the training data is unknown, unless given: then the same overlaps.
    (exported / "meshpilot.json").unlink()
    unknown = run_bench(str(world.suite), exported)
    assert all(t["contamination"]["overlap"] is None for t in unknown["tasks"]) and unknown["config_hash"] is None
    given = run_bench(str(world.suite), exported, train_data=[world.repo / "train.txt"])
    assert [t["contamination"] for t in given["tasks"]] == [t["contamination"] for t in reference["tasks"]]

    offload = tmp_path / "offload"
    # fp32 embedding 64 KiB, decoder layers 36 KiB each: the embedding stays in memory, the layers go to disk.
    mapped = bench(world, max_memory={"cpu": "150kB"}, offload_dir=offload)
    assert mapped["device_mapped"] and list(offload.glob("*.dat")), "layers were offloaded to disk"
    assert mapped["batching"] == "static" and "device-mapped" in mapped["batching_note"]
    assert mapped["model"]["checkpoint_hash"] == reference["model"]["checkpoint_hash"]
    for got, want in zip(mapped["tasks"], reference["tasks"], strict=True):
        assert (got["task"], got["split"], got["contamination"]) == (want["task"], want["split"], want["contamination"])
        assert got["metrics"] == pytest.approx(want["metrics"], rel=1e-5)


def test_continuous_and_static_generation_match_one_prompt_at_a_time(world):
    found = find_checkpoint(world.run)
    model, (tokenizer, _) = load_model(found), load_run_tokenizer(found)
    task = next(t for t in load_suite(str(world.suite)).tasks if t.name == "addition")
    dev = load_items(task, "dev", world.store)
    prompts = [
        [tokenizer.eos_token_id, *tokenizer(context_text(task, item, i, dev, "dev"))["input_ids"]]
        for i, item in enumerate(dev)
    ]
    prompts = [p[: 6 + 3 * i] for i, p in enumerate(prompts)]  # lengths 6..21: padding matters
    config = generation_config(8, tokenizer.eos_token_id, tokenizer.pad_token_id)
    alone = [generate_static(model, torch.device("cpu"), [p], config)[0] for p in prompts]
    assert generate_static(model, torch.device("cpu"), prompts, config) == alone
    assert generate_continuous(model, prompts, config) == alone
    assert any(alone)


def test_bench_tasks_lists_the_suites_of_the_experiment_with_public_examples_only(world, capsys):
    experiment = world.root / "listing.yaml"
    experiment.write_text(yaml.safe_dump({"bench": {"suites": ["builtin", str(world.suite)]}}))
    assert main(["bench", "tasks", "--experiment", str(experiment), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert {(t["suite"], t["task"]) for t in listed} == {(s, n) for s in ("builtin", "suite") for n in SIZES}
    for task in listed:
        assert task["dev_examples"] and len(task["version"]) == 16
        private = {s["split"] for s in task["splits"] if s["private"]}
        assert private == (set() if task["task"] == "stdlib_heldout" else {"test"})
    addition = next(t for t in listed if t["suite"] == "suite" and t["task"] == "addition")
    test_items = load_items(load_suite(str(world.suite)).tasks[0], "test", world.store)
    shown = json.dumps(listed)
    assert all(f'"{i["a"]}+{i["b"]}="' not in shown for i in test_items), "no private input is listed"
    assert addition["splits"] == [
        {"split": "dev", "private": False, "n_examples": 6},
        {"split": "test", "private": True, "n_examples": 12},
    ]
    assert main(["bench", "tasks", "--suite", str(world.suite)]) == 0
    assert "suite suite (version " in capsys.readouterr().out


def test_submission_limit_per_model_per_day(world, tmp_path, monkeypatch):
    """The limit counts weights, not paths: a re-export of the run, saved in other files, is the same model; a
    model whose weights differ in one value is another."""
    monkeypatch.setenv("MESHPILOT_DATA", str(tmp_path / "store"))
    Store.open().update_settings(daily_submissions=1)
    suite = str(world.suite / "reversal.yaml")
    first = run_bench(suite, world.run)
    assert first["submissions_today"] == 1 and first["daily_limit"] == 1
    with pytest.raises(BenchError, match=r"submission limit reached: .* has made 1 of 1 submissions today"):
        run_bench(suite, world.run, out=tmp_path / "out")
    assert not (tmp_path / "out").exists() and len(leaderboard()) == 1

    exported = export_hf(world.run, tmp_path / "export")
    model = AutoModelForCausalLM.from_pretrained(str(exported))
    copy = tmp_path / "re-exported"
    shutil.copytree(exported, copy)
    for weights in copy.glob("*.safetensors"):
        weights.unlink()
    model.save_pretrained(str(copy), max_shard_size="40KB")  # other files, other bytes, the same weights
    files = lambda directory: sorted(p.name for p in directory.glob("*.safetensors"))  # noqa: E731
    assert files(copy) != files(exported)
    weights = first["model"]["checkpoint_hash"]
    with pytest.raises(BenchError, match=f"^submission limit reached: {re.escape(str(copy))} \\(weights {weights}\\)"):
        run_bench(suite, copy)

    with torch.no_grad():
        next(model.parameters())[0, 0] += 1.0  # another model: one weight differs
    other = tmp_path / "other"
    shutil.copytree(exported, other)
    model.save_pretrained(str(other))
    assert run_bench(suite, other)["submissions_today"] == 1
    assert len(leaderboard()) == 2


def test_submission_day_rolls_over_at_utc_midnight(tmp_path):
    """With an injected clock: the last second of a UTC day still counts against it, its midnight starts afresh."""
    midnight = datetime.datetime(2026, 3, 1, tzinfo=datetime.UTC).timestamp()
    now = [midnight - 1.0]
    board = Leaderboard(tmp_path / "leaderboard.sqlite", clock=lambda: now[0])
    result = bench_result()
    board.record("weights-a", result, limit=1)
    with pytest.raises(BenchError, match=r"weights-a\) has made 1 of 1 submissions today"):
        board.check_limit("weights-a", 1, "runs/a")
    with pytest.raises(BenchError, match="submission limit reached"):
        board.record("weights-a", result, limit=1)
    board.check_limit("weights-b", 1)  # another model has its own count
    now[0] = midnight
    assert board.today() == "2026-03-01" and board.submissions_today("weights-a") == 0
    board.check_limit("weights-a", 1)
    board.record("weights-a", result, limit=1)
    assert [day for (day,) in board._query("SELECT day FROM submissions ORDER BY id")] == ["2026-02-28", "2026-03-01"]


def bench_result(**changes) -> dict:
    """A result as run_bench makes it: one task's dev split."""
    task = {"task": "addition", "version": "v1", "split": "dev", "private": False, "metrics": {"exact_match": 0.5},
            "n_examples": 6, "contamination": {"n": 8, "overlap": None, "flagged": False}}  # fmt: skip
    return {"suite": "s", "suite_version": "v1", "model": {"path": "runs/a", "checkpoint_hash": "weights-a"},
            "config_hash": None, "git_commit": None, "seed": None, "eval_code_version": "1+abc", "batching": "static",
            "batching_note": None, "device_mapped": False, "versions": {"torch": "2.13.0"}, "tasks": [task],
            **changes}  # fmt: skip


def test_a_bad_result_is_refused_in_one_line_before_it_is_stored_or_shown(tmp_path):
    path = tmp_path / "leaderboard.sqlite"
    board = Leaderboard(path)
    with pytest.raises(ContractError, match=rf"^{re.escape(str(path))}: the submission: tasks\.0\.n_examples: "):
        board.record("weights-a", bench_result(tasks=[{**bench_result()["tasks"][0], "n_examples": -1}]), limit=5)
    assert board.rows() == []  # nothing was stored
    board.record("weights-a", bench_result(), limit=5)
    assert [row["score"] for row in board.rows()] == [0.5]
    # A row stored by another version (an unknown field): the leaderboard names the file and the submission.
    board._query("UPDATE submissions SET result = ?", (json.dumps(bench_result(extra=1)),))
    with pytest.raises(ContractError, match=rf"^{re.escape(str(path))} submission 1: extra: unknown field"):
        board.rows()


def test_vocabulary_mismatch_is_refused_with_one_line(world, tmp_path, capsys):
    model = tmp_path / "model"
    export_hf(world.run, model)
    capsys.readouterr()
    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**config, "vocab_size": 256}))
    out = tmp_path / "out"
    assert main(["bench", "run", "--suite", str(world.suite), "--model", str(model), "--out", str(out)]) == 2
    error = capsys.readouterr().err
    assert "vocabulary mismatch: the tokenizer has 512 tokens but the model's vocab_size is 256" in error
    assert error.count("\n") == 1 and not out.exists()
    shutil.rmtree(model)
