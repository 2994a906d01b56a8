"""The benchmark suite without a model: task files, the sealed store, synthetic items, contamination arithmetic."""

from __future__ import annotations

import gzip
import json
import stat
from pathlib import Path

import numpy as np
import pytest
import yaml

from agent.cli import main
from evalsuite.contamination import FLAG_OVERLAP, TrainingNgrams, ngram_hashes, overlap
from evalsuite.errors import BenchError
from evalsuite.scoring import plan_batches
from evalsuite.store import Store
from evalsuite.task import BUILTIN_DIR, load_items, load_suite, load_task

ADDITION = yaml.safe_load((BUILTIN_DIR / "addition.yaml").read_text())


@pytest.fixture(autouse=True)
def store_dir(tmp_path, monkeypatch) -> Path:
    """Every test gets its own sealed store, outside any repository."""
    directory = tmp_path / "store"
    monkeypatch.setenv("MESHPILOT_DATA", str(directory))
    return directory


def write_task(directory: Path, task: dict, name: str = "task.yaml") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(yaml.safe_dump(task))
    return path


def refused(tmp_path: Path, task: dict | str, message: str) -> None:
    path = tmp_path / "suite" / "task.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(task if isinstance(task, str) else yaml.safe_dump(task))
    with pytest.raises(BenchError) as error:
        load_task(path)
    assert message in str(error.value)
    assert "\n" not in str(error.value) and str(error.value).startswith(str(path))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"metrics": ["accuracy"]}, "unknown metric 'accuracy' for generate_until (known: exact_match)"),
        ({"output_type": "ranking"}, "output_type 'ranking' is not one of perplexity, loglikelihood"),
        ({"promt": "{a}"}, "unknown key 'promt'"),
        ({"prompt": 42}, "prompt: expected str, got 42"),
        ({"data": {"generator": "multiplication"}}, "unknown generator 'multiplication'"),
        ({"data": {"generator": "addition", "corpus": "stdlib-docs"}}, "data: expected exactly one of"),
        ({"splits": {"dev": {"size": 5}, "validation": {"size": 5}}}, "unknown split 'validation'"),
        ({"splits": {"dev": {}}}, "splits.dev.size: a generated split needs a size"),
        ({"splits": {"dev": {"size": 0}}}, "splits.dev.size must be at least 1"),
        ({"prompt": "{a}+{c}="}, "field 'c' is not an item field of generator addition"),
        ({"prompt": "{a.__class__}"}, "must be a plain item field name"),
        ({"prompt": "{a}+{b"}, "bad template"),
        ({"choices": "answer"}, "choices: give it for multiple_choice tasks only"),
        ({"output_type": "perplexity", "metrics": ["perplexity"]}, "output_type perplexity has no target"),
        ({"max_new_tokens": 0}, "max_new_tokens must be at least 1"),
        ({"metrics": []}, "metrics: name at least one (for generate_until: exact_match)"),
        ({"name": "Addition Task"}, "name 'Addition Task': use lower-case letters"),
    ],
)
def test_malformed_task_files_fail_with_one_line_naming_file_and_key(tmp_path, change, message):
    task = {k: v for k, v in {**ADDITION, **change}.items() if v is not None}
    refused(tmp_path, task, message)


def test_task_file_that_is_not_yaml_or_not_a_mapping(tmp_path):
    refused(tmp_path, "name: [unclosed", "not valid YAML")
    refused(tmp_path, "- a list\n", "a task file must be a mapping of keys")
    refused(tmp_path, {"name": "x"}, "missing key 'output_type'")


def test_a_prompt_showing_the_private_label_is_refused(tmp_path):
    refused(
        tmp_path,
        {**ADDITION, "prompt": "{a}+{b}={answer}? "},
        "prompt: refused: it shows {answer}, the label of the private test split, to the model",
    )
    multiple_choice = yaml.safe_load((BUILTIN_DIR / "kv_recall.yaml").read_text())
    refused(tmp_path, {**multiple_choice, "prompt": "{pairs} (answer {gold}). {key}="}, "it shows {gold}")


def test_a_private_split_cannot_be_a_file_in_the_repository(tmp_path):
    task = {**ADDITION, "data": {"files": {"dev": "dev.jsonl", "test": "test.jsonl"}}}
    refused(tmp_path, task, "data.files.test: a private split must not be a file beside the task")
    refused(tmp_path, {**ADDITION, "data": {"files": {}}}, "splits.dev: public split without a file")
    corpus = {**ADDITION, "data": {"corpus": "stdlib-docs"}, "output_type": "perplexity", "prompt": "{text}"}
    corpus = {**corpus, "metrics": ["perplexity"], "target": None}
    refused(tmp_path, {k: v for k, v in corpus.items() if v is not None}, "the built-in corpus is public text")


def test_missing_splits_fail_before_any_model_loads(tmp_path):
    qa = {
        "name": "qa",
        "output_type": "loglikelihood",
        "data": {"files": {"dev": "dev.jsonl"}},
        "splits": {"dev": {}, "test": {"private": True}},
        "prompt": "Q: {question}\nA:",
        "target": " {answer}",
        "metrics": ["acc"],
    }
    task = load_task(write_task(tmp_path / "qa", qa))
    store = Store.open()
    with pytest.raises(BenchError, match=r"file not found: .*dev\.jsonl"):
        load_items(task, "dev", store)
    with pytest.raises(BenchError, match="the private test split is not sealed in the store"):
        load_items(task, "test", store)
    (tmp_path / "qa" / "dev.jsonl").write_text('{"question": "2+2?", "answer": "4"}\n{"question": "no answer"}\n')
    with pytest.raises(BenchError, match=r"^task qa: split dev item 1: no field 'answer'$"):
        load_items(task, "dev", store)


def test_suites_refuse_duplicate_names_and_empty_directories(tmp_path):
    write_task(tmp_path / "dup", ADDITION, "a.yaml")
    write_task(tmp_path / "dup", ADDITION, "b.yaml")
    with pytest.raises(BenchError, match="two tasks are named 'addition'"):
        load_suite(str(tmp_path / "dup"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(BenchError, match="no task files"):
        load_suite(str(tmp_path / "empty"))
    with pytest.raises(BenchError, match="not 'builtin', a directory of task files or a task file"):
        load_suite(str(tmp_path / "nowhere"))


def test_builtin_suite_loads_and_covers_every_output_type():
    suite = load_suite("builtin")
    assert {t.output_type for t in suite.tasks} == {"perplexity", "loglikelihood", "multiple_choice", "generate_until"}
    generated = [t for t in suite.tasks if "generator" in t.data]
    assert generated and all(t.splits["test"].private and not t.splits["dev"].private for t in generated)


def test_same_secret_same_items_other_store_other_test_items(tmp_path, monkeypatch, store_dir):
    generated = [t for t in load_suite("builtin").tasks if "generator" in t.data]

    def items() -> dict:
        return {t.name: {s: load_items(t, s, Store.open()) for s in t.splits} for t in generated}

    first, again = items(), items()
    assert first == again  # the secret is made once per store and kept

    monkeypatch.setenv("MESHPILOT_DATA", str(tmp_path / "other-store"))
    other = items()
    for name in first:
        assert other[name]["dev"] == first[name]["dev"], "public dev items are the same everywhere"
        assert other[name]["test"] != first[name]["test"], "private test items depend on the store's secret"
        dev = {json.dumps(i, sort_keys=True) for i in first[name]["dev"]}
        test = {json.dumps(i, sort_keys=True) for i in first[name]["test"]}
        assert len(test) == len(first[name]["test"]) and not dev & test, "test items are distinct and never in dev"


def test_store_is_owner_only_and_refused_inside_a_git_work_tree(tmp_path, store_dir, monkeypatch):
    store = Store.open()
    store.seal("qa", "test", [{"question": "q", "answer": "a-unique-label"}])
    for path in [store_dir, *store_dir.rglob("*")]:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o700 if path.is_dir() else 0o600), f"{path} has mode {oct(mode)}"
    sealed = store_dir / "sealed" / "qa" / "test.jsonl.gz"
    assert b"a-unique-label" not in sealed.read_bytes() and b"a-unique-label" in gzip.decompress(sealed.read_bytes())
    assert store.sealed("qa", "test") == [{"question": "q", "answer": "a-unique-label"}]

    (tmp_path / "repo" / ".git").mkdir(parents=True)
    monkeypatch.setenv("MESHPILOT_DATA", str(tmp_path / "repo" / "data" / "store"))
    with pytest.raises(BenchError, match=r"lies inside the git work tree .*repo"):
        Store.open()
    assert not (tmp_path / "repo" / "data").exists()


def test_contamination_counts_training_ngrams_and_whole_short_examples():
    rng = np.random.default_rng(0)
    training = rng.integers(0, 500, 5000)
    seen = list(training[1000:1040])  # 28 13-grams, all in training
    unseen = list(rng.integers(500, 600, 40))  # ids training never has
    index = TrainingNgrams(training)
    assert overlap(index, [seen]) == 1.0
    assert overlap(index, [unseen]) == 0.0
    assert overlap(index, [seen, unseen]) == pytest.approx(28 / 56)
    assert overlap(index, [list(training[7:12])]) == 1.0  # shorter than 13: the whole example occurs
    assert overlap(index, [[*training[7:11], 999]]) == 0.0
    assert len(ngram_hashes(np.arange(20), 13)) == 8 and FLAG_OVERLAP < 0.5


def test_batches_follow_lengths_only_and_keep_the_token_budget():
    lengths = [5, 30, 12, 30, 7, 1, 18]
    batches = plan_batches(lengths, max_tokens=60, max_rows=3)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    assert all(len(b) * lengths[b[0]] <= 60 or len(b) == 1 for b in batches)
    assert all(lengths[b[0]] == max(lengths[i] for i in b) and len(b) <= 3 for b in batches)
    assert batches == plan_batches(lengths, max_tokens=60, max_rows=3)
    assert batches[0] == [1, 3]


def test_cli_bad_suite_and_model_fail_with_one_line(tmp_path, capsys):
    assert main(["bench", "run", "--suite", str(tmp_path / "nowhere"), "--model", str(tmp_path)]) == 2
    stderr = capsys.readouterr().err
    assert stderr.startswith("meshpilot: error: suite") and stderr.count("\n") == 1
    write_task(tmp_path / "suite", {**ADDITION, "metrics": ["bleu"]})
    out = tmp_path / "out"
    assert main(["bench", "run", "--suite", str(tmp_path / "suite"), "--model", str(tmp_path), "--out", str(out)]) == 2
    assert "unknown metric 'bleu'" in capsys.readouterr().err and not out.exists()
    assert main(["bench", "run", "--suite", "builtin", "--model", str(tmp_path), "--max-memory", "cpu"]) == 2
    assert "--max-memory: expected DEVICE=SIZE" in capsys.readouterr().err
