"""What the rest of meshpilot calls: run a suite on a model, list tasks, read the leaderboard.

Everything returned here is safe to show to anyone, a language model included: aggregate metrics, hashes and
counts, and examples of public dev splits only. Private inputs, labels and per-example results stay in the scorer.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from evalsuite import contamination
from evalsuite.errors import BenchError
from evalsuite.leaderboard import Leaderboard
from evalsuite.models import LoadedModel, open_model, resolve
from evalsuite.result import BENCH_RESULT, BenchResult
from evalsuite.runner import Evaluation, answer, evaluate, solved_text
from evalsuite.scoring import supported_batching
from evalsuite.store import Store
from evalsuite.task import BUILTIN_SUITE, Item, Suite, Task, load_items, load_suite, render, suite_version, task_version
from trainer.config import DataSpec
from trainer.data.rows import data_sources, read_documents
from trainer.host.environment import versions

EVAL_VERSION = "1"  # bump by hand for changes in meaning; the hash below changes with any code change
DEFAULT_BATCH_TOKENS = 4096


def eval_code_version() -> str:
    """The evaluation code's version: a hand-kept number and a hash of the code that computes scores."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in [*sorted((root / "evalsuite").glob("*.py")), root / "trainer" / "export" / "hf.py"]:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return f"{EVAL_VERSION}+{digest.hexdigest()[:12]}"


def run_bench(
    suite: str,
    model: Path,
    out: Path | None = None,
    *,
    batch_tokens: int = DEFAULT_BATCH_TOKENS,
    max_memory: dict | None = None,
    offload_dir: Path | None = None,
    train_data: list[Path] | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> BenchResult:
    """Evaluate `model` on every split of every task of `suite`, record a leaderboard submission, return the result.

    With `out`, the result is also written to OUT/result.json. An interrupted run continues where it stopped when
    called again with the same arguments. Raises BenchError (before loading anything) for bad input.
    """
    if batch_tokens < 1:
        raise BenchError(f"batch_tokens must be positive, got {batch_tokens}")
    if out is not None and (Path(out) / "result.json").exists():
        raise BenchError(f"{Path(out) / 'result.json'} exists; choose another --out")
    store = Store.open()
    loaded_suite = load_suite(suite)
    source = resolve(Path(model))
    train_sources = _train_sources(train_data) if train_data else None
    board = Leaderboard(store.leaderboard_path)
    limit = store.settings()["daily_submissions"]
    items = _all_items(loaded_suite, store)
    task_versions = {t.name: task_version(t, items[t.name]) for t in loaded_suite.tasks}
    code_version = eval_code_version()

    with open_model(source, max_memory, offload_dir) as lm:
        # A model is its weights, wherever they are stored: known once loaded, and checked before evaluating.
        board.check_limit(lm.checkpoint_hash, limit, str(source.path))
        batching, note = supported_batching(lm.model, lm.device_mapped)
        evaluation = Evaluation(lm, store, batching, note, batch_tokens, code_version, progress)
        entries = _evaluate_tasks(evaluation, loaded_suite, items, task_versions, _training_ngrams(lm, train_sources))
        result: BenchResult = {
            "suite": loaded_suite.name,
            "suite_version": suite_version(loaded_suite, task_versions),
            "model": {"path": str(source.path), "checkpoint_hash": lm.checkpoint_hash},
            "config_hash": lm.config_hash,
            "git_commit": lm.git_commit,
            "seed": lm.seed,
            "eval_code_version": code_version,
            "batching": evaluation.batching,
            "batching_note": evaluation.batching_note,
            "device_mapped": lm.device_mapped,
            "versions": {k: v for k, v in versions().items() if k in ("python", "torch", "transformers")},
            "tasks": entries,
        }
    result["leaderboard_id"] = board.record(lm.checkpoint_hash, result, limit)
    evaluation.discard_caches()
    result["submissions_today"] = board.submissions_today(lm.checkpoint_hash)
    result["daily_limit"] = limit
    if out is not None:
        BENCH_RESULT.write(Path(out) / "result.json", result)
    return result


def list_tasks(suite: str = BUILTIN_SUITE) -> list[dict[str, Any]]:
    """The tasks of a suite: what they measure, their splits, and two examples of each public dev split."""
    store = Store.open()
    loaded_suite = load_suite(suite)
    items = _all_items(loaded_suite, store)
    versions_ = {t.name: task_version(t, items[t.name]) for t in loaded_suite.tasks}
    listed = []
    for task in loaded_suite.tasks:
        dev = items[task.name].get("dev", []) if "dev" in task.splits and not task.splits["dev"].private else []
        listed.append(
            {
                "suite": loaded_suite.name,
                "suite_version": suite_version(loaded_suite, versions_),
                "task": task.name,
                "version": versions_[task.name],
                "description": task.description,
                "output_type": task.output_type,
                "metrics": task.metrics,
                "splits": [
                    {"split": s.name, "private": s.private, "n_examples": len(items[task.name][s.name])}
                    for s in task.splits.values()
                ],
                "dev_examples": [_example(task, item) for item in dev[:2]],
            }
        )
    return listed


def leaderboard(suite: str | None = None, private: bool = False) -> list[dict[str, Any]]:
    """Leaderboard rows, best first: dev-split scores, or test-split scores with `private`."""
    return Leaderboard(Store.open().leaderboard_path).rows(suite, private)


def _evaluate_tasks(
    evaluation: Evaluation,
    suite: Suite,
    items: dict[str, dict[str, list[Item]]],
    task_versions: dict[str, str],
    training: contamination.TrainingNgrams | None,
) -> list[dict[str, Any]]:
    """One entry per task and split: aggregate metrics and the contamination check, nothing per example."""
    entries = []
    for task in suite.tasks:
        dev = items[task.name].get("dev", [])
        for split, spec in task.splits.items():
            split_items = items[task.name][split]
            metrics = evaluate(evaluation, task, split, split_items, dev, task_versions[task.name])
            texts = [_encode(evaluation.lm, solved_text(task, item)) for item in split_items]
            entries.append(
                {
                    "task": task.name,
                    "version": task_versions[task.name],
                    "split": split,
                    "private": spec.private,
                    "metrics": metrics,
                    "n_examples": len(split_items),
                    "contamination": contamination.result(training, texts),
                }
            )
    return entries


def _all_items(suite: Suite, store: Store) -> dict[str, dict[str, list[Item]]]:
    """Every split's items, read before any model loads: a missing or malformed split fails in a second."""
    return {t.name: {split: load_items(t, split, store) for split in t.splits} for t in suite.tasks}


def _example(task: Task, item: Item) -> dict[str, Any]:
    shown = {"input": render(task.prompt, item)[:500]}
    if task.output_type == "multiple_choice":
        shown["choices"] = item[task.choices]
    if task.target is not None:
        shown["target"] = answer(task, item)
    return shown


def _train_sources(files: list[Path]) -> tuple[DataSpec, list[str]]:
    spec = DataSpec(train=[str(Path(p).resolve()) for p in files])
    return spec, data_sources(spec, Path.cwd())


def _training_ngrams(
    lm: LoadedModel, train_sources: tuple[DataSpec, list[str]] | None
) -> contamination.TrainingNgrams | None:
    """The training data's n-grams: given files tokenized as the trainer does, or the run's tokenized corpus."""
    if train_sources is not None:
        documents = read_documents(*train_sources)
        eos = lm.tokenizer.eos_token_id
        ids = [np.asarray([*_encode(lm, d), eos], dtype=np.uint32) for d in documents]
        return contamination.TrainingNgrams(np.concatenate(ids))
    return contamination.TrainingNgrams(np.load(lm.train_tokens, mmap_mode="r")) if lm.train_tokens else None


def _encode(lm: LoadedModel, text: str) -> list[int]:
    return lm.tokenizer(text, add_special_tokens=False)["input_ids"]
