"""How well the second reading (agent.understanding.second_reading) reads sets it was not fitted on.

The outside authors' sets (fresh_*.jsonl of agent/understanding/examples) are split into six folds; each fold's
requests are read by a classifier fitted on every other example (the other folds, the regression set, the
reviewers' probes). Reported per label kind: how often the likeliest label is the expected one, and how often the
reading is sure (SURE) of another tool where a tool was expected: the most it could doubt of right actions before
the parser's own scores are consulted (agent.understanding's question needs both).

    python -m bench.second_reading [--folds 6] [--out FILE]

Writes bench/results/second_reading.json (or --out).
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from agent.understanding.second_reading import NO_TOOL, SURE, NaiveBayes, example_files, features, label, read_examples
from bench.machine import RESULTS, describe_machine


def _items(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--folds", type=int, default=6)
    parser.add_argument("--out", type=Path, default=RESULTS / "second_reading.json")
    args = parser.parse_args(argv)
    fresh = [path for path in example_files() if path.name.startswith("fresh_")]
    counts: Counter[str] = Counter()
    for fold in range(args.folds):
        held = fresh[fold :: args.folds]
        model = NaiveBayes.fit(read_examples(path for path in example_files() if path not in held))
        for item in (item for path in held for item in _items(path)):
            expected = label(item["expect"])
            chances = model.probabilities(features(item["request"], bool(item.get("history"))))
            likeliest = max(chances, key=chances.__getitem__)
            kind = expected if expected in NO_TOOL else "tool"
            counts[f"{kind}_items"] += 1
            counts[f"{kind}_right"] += likeliest == expected
            counts["sure_of_another_tool"] += (
                kind == "tool" and likeliest != expected and likeliest not in NO_TOOL and chances[likeliest] >= SURE
            )
    items = sum(counts[f"{kind}_items"] for kind in ("tool", *NO_TOOL))
    right = sum(counts[f"{kind}_right"] for kind in ("tool", *NO_TOOL))
    result = {
        "benchmark": "second_reading",
        "machine": describe_machine(),
        "sets": [path.stem for path in fresh],
        "folds": args.folds,
        "items": items,
        "likeliest_right": right,
        "likeliest_right_pct": round(100 * right / items, 1),
        "by_kind": {kind: [counts[f"{kind}_right"], counts[f"{kind}_items"]] for kind in ("tool", *NO_TOOL)},
        "sure_of_another_tool": counts["sure_of_another_tool"],
        "sure_of_another_tool_pct_of_tools": round(100 * counts["sure_of_another_tool"] / counts["tool_items"], 1),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k not in ("machine", "sets")}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
