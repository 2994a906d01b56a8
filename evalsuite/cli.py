"""`meshpilot bench`: list tasks, evaluate a model, read the leaderboard, seal a private split into the store."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from evalsuite.errors import BenchError
from evalsuite.store import Store
from evalsuite.task import BUILTIN_SUITE, check_item, load_task, read_jsonl
from trainer.config import load_experiment


def register(commands: argparse._SubParsersAction) -> None:
    bench = commands.add_parser("bench", help="evaluate models on the private benchmark suite")
    sub = bench.add_subparsers(dest="bench_command", required=True)

    tasks = sub.add_parser("tasks", help="list suites and their tasks")
    tasks.add_argument(
        "--suite",
        action="append",
        help="builtin, a directory of task files, or a task file (repeatable; default: bench.suites of the "
        "experiment file, or builtin)",
    )
    tasks.add_argument("--experiment", type=Path, default=Path("meshpilot.yaml"), help="default ./meshpilot.yaml")
    tasks.add_argument("--json", action="store_true", help="print the tasks as JSON")
    tasks.set_defaults(handler=_tasks)

    run = sub.add_parser("run", help="evaluate a model on a suite and submit the scores to the leaderboard")
    run.add_argument("--suite", required=True, help="builtin, a directory of task files, or a task file")
    run.add_argument("--model", required=True, type=Path, help="a run directory, a checkpoint or an HF directory")
    run.add_argument("--out", type=Path, help="write OUT/result.json")
    run.add_argument("--json", action="store_true", help="print the result as JSON")
    run.add_argument("--batch-tokens", type=int, default=4096, help="padded tokens per forward pass (default 4096)")
    run.add_argument(
        "--max-memory", help="device-map the model within these limits, e.g. cpu=2GiB,disk=20GiB or 0=70GiB"
    )
    run.add_argument("--offload-dir", type=Path, help="where device-mapped weights that fit nowhere else go")
    run.add_argument(
        "--train-data", type=Path, nargs="+", help="training files, for the contamination check of HF models"
    )
    run.set_defaults(handler=_run)

    board = sub.add_parser("leaderboard", help="show the leaderboard")
    board.add_argument("--suite", help="only this suite")
    board.add_argument("--private", action="store_true", help="test-split scores instead of dev-split scores")
    board.add_argument("--json", action="store_true", help="print the rows as JSON")
    board.set_defaults(handler=_leaderboard)

    seal = sub.add_parser("seal", help="move a private split's items (JSONL) into the sealed store")
    seal.add_argument("task", type=Path, help="the task file")
    seal.add_argument("file", type=Path, help="JSONL items; delete it afterwards")
    seal.add_argument("--split", default="test", help="the private split (default test)")
    seal.set_defaults(handler=_seal)


def _tasks(args: argparse.Namespace) -> int:
    # imported here: evalsuite.api loads torch and transformers (seconds), which `meshpilot --help` must not wait for
    from evalsuite.api import list_tasks

    suites = [list_tasks(suite) for suite in _suites(args)]
    if args.json:
        print(json.dumps([t for listed in suites for t in listed], indent=1))
        return 0
    for listed in suites:
        print(f"suite {listed[0]['suite']} (version {listed[0]['suite_version']}): {len(listed)} tasks")
        for t in listed:
            splits = ", ".join(
                f"{s['split']} {s['n_examples']}{' private' if s['private'] else ''}" for s in t["splits"]
            )
            print(f"  {t['task']:<18} {t['output_type']:<16} {', '.join(t['metrics']):<26} {splits}")
            print(f"  {'':<18} {t['description']}")
    return 0


def _suites(args: argparse.Namespace) -> list[str]:
    """The suites asked for, else those the experiment file names (bench.suites), else the built-in one."""
    if args.suite:
        return args.suite
    if not args.experiment.is_file():
        return [BUILTIN_SUITE]
    experiment = load_experiment(args.experiment)
    return [s if s == BUILTIN_SUITE else str(experiment.resolve_path(s)) for s in experiment.bench.suites]


def _run(args: argparse.Namespace) -> int:
    # imported here: evalsuite.api loads torch and transformers (seconds), which `meshpilot --help` must not wait for
    from evalsuite.api import run_bench

    result = run_bench(
        args.suite,
        args.model,
        args.out,
        batch_tokens=args.batch_tokens,
        max_memory=parse_max_memory(args.max_memory) if args.max_memory else None,
        offload_dir=args.offload_dir,
        train_data=args.train_data,
        progress=_progress if sys.stderr.isatty() else None,
    )
    print(json.dumps(result, indent=1) if args.json else format_result(result))
    return 0


def _leaderboard(args: argparse.Namespace) -> int:
    # imported here: evalsuite.api loads torch and transformers (seconds), which `meshpilot --help` must not wait for
    from evalsuite.api import leaderboard

    rows = leaderboard(args.suite, args.private)
    print(json.dumps(rows, indent=1) if args.json else format_leaderboard(rows, args.private))
    return 0


def _seal(args: argparse.Namespace) -> int:
    task = load_task(args.task)
    spec = task.splits.get(args.split)
    if spec is None or not spec.private:
        raise BenchError(f"task {task.name}: {args.split!r} is not a private split of the task")
    items = read_jsonl(args.file)
    for index, item in enumerate(items):
        check_item(task, item, f"{args.file} item {index}")
    Store.open().seal(task.name, args.split, items)
    print(f"sealed {len(items)} items as the {args.split} split of {task.name}; now delete {args.file}")
    return 0


def parse_max_memory(text: str) -> dict[int | str, str]:
    """`cpu=2GiB,disk=20GiB,0=70GiB` as accelerate's max_memory (GPU indices as ints)."""
    limits: dict[int | str, str] = {}
    for part in text.split(","):
        device, sep, size = part.partition("=")
        if not sep or not device.strip() or not size.strip():
            raise BenchError(f"--max-memory: expected DEVICE=SIZE[,DEVICE=SIZE...], got {text!r}")
        device = device.strip()
        limits[int(device) if device.isdigit() else device] = size.strip()
    return limits


def format_result(result: dict) -> str:
    generation = "continuous batching"
    if result["batching"] != "continuous":
        generation = f"static batching ({result['batching_note']})"
    lines = [
        f"suite {result['suite']} (version {result['suite_version']}), model {result['model']['path']} "
        f"(weights {result['model']['checkpoint_hash']}), generation: {generation}",
        f"  {'task':<18} {'split':<5} {'private':<7} {'examples':>8}  {'13-gram overlap':<16} metrics",
    ]
    for t in result["tasks"]:
        overlap = t["contamination"]["overlap"]
        seen = (
            "unknown" if overlap is None else f"{overlap:.1%}" + (" FLAGGED" if t["contamination"]["flagged"] else "")
        )
        metrics = "  ".join(f"{k} {v:.4g}" for k, v in t["metrics"].items())
        private = "yes" if t["private"] else "no"
        lines.append(f"  {t['task']:<18} {t['split']:<5} {private:<7} {t['n_examples']:>8}  {seen:<16} {metrics}")
    lines.append(
        f"leaderboard entry {result['leaderboard_id']} ({result['submissions_today']} of {result['daily_limit']} "
        "submissions today for this model)"
    )
    return "\n".join(lines)


def format_leaderboard(rows: list[dict], private: bool) -> str:
    if not rows:
        return "no submissions yet"
    lines = [f"{'private (test)' if private else 'public (dev)'} leaderboard"]
    for rank, row in enumerate(rows, 1):
        score = "-" if row["score"] is None else f"{row['score']:.4f}"
        flagged = f"  contaminated: {', '.join(row['flagged'])}" if row["flagged"] else ""
        lines.append(
            f"{rank:>3}. score {score}  #{row['id']} {row['day']} {row['suite']} {row['model']} "
            f"(weights {row['checkpoint_hash']}){flagged}"
        )
        for task, t in row["tasks"].items():
            metrics = "  ".join(f"{k} {v:.4g}" for k, v in t["metrics"].items())
            lines.append(f"       {task:<18} {metrics}")
    return "\n".join(lines)


def _progress(label: str, done: int, total: int) -> None:
    print(f"\r{label}: {done}/{total}   ", end="" if done < total else "\n", file=sys.stderr, flush=True)
