"""A second reading of which tool a request asks for, learned from the labelled examples: the parser's safety net.

The parser (the rest of this package) reads a sentence by rules written for the registers it has met, and on a
register it has not met (a cast nobody tuned on: a novelist's narrative, Portuguese, a Texan's "compilin") it
sometimes reads a confident wrong action: a sweep read where a launch was asked, a run's results where its file
was. Those readings are where a second reader that does not share its rules helps most: a naive Bayes classifier
over the character n-grams and words of the sentence, fitted at first use on every labelled request in
`examples/` (the request sets written by outside authors, the regression set and the reviewers' probes: some
9,900 requests, each labelled with its expected tool, "ask" or "refuse").

It never acts. Where it is sure of another tool than the parser's, and the parser's own cues for that tool came
close to those of the reading it took (`other_reading`: two readers, each unsure alone, pointing the same other way),
the parser's action becomes one question naming both readings, the one offered first the second reading's where
it is very sure (OFFERED): a wrong action turned into a question. Left out of the fit, a sixth of the fresh sets at
a time, it picks the expected label of 92% of their requests (BENCHMARKS.md, "second reading").

No weights are shipped, only the examples: the fit (about a second) is kept in meshpilot's cache, keyed by the
contents of the examples and of this module.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

from agent.understanding import regex as re
from trainer.host.cache import cached_dir, fingerprint

EXAMPLES = Path(__file__).parent / "examples"  # JSON lines: {"request", "history"?, "expect": {...}}
NGRAMS = (3, 4, 5)  # character n-grams: what survives a typo, a dropped "g" or another language's inflection
SMOOTHING = 0.1  # additive (Lidstone) smoothing of each feature's count per label
# Naive Bayes counts every n-gram of a word as independent evidence, so its probabilities are far too sure (0.99999
# that "plot x and y for r1" waits for r1); divided by this, its log-probabilities are calibrated: the temperature
# that minimised the log loss on request sets left out of the fit (six folds of the fresh sets; 24 to 32 did best).
TEMPERATURE = 28.0
SURE = 0.5  # the second reading's likeliest tool counts where it is more likely than not
# Where it is this sure, its reading is the one the question offers (a "yes" runs it): on the outside authors' sets
# judged since it came, its reading was right in each of its 15 questions, most of them at 0.9 or above; on the
# suite's own near-miss sentences, written by the rules' authors at their edges, its doubts are mostly below (0.56
# to 0.89, the rules right; two statements of work done above it)
OFFERED = 0.9
# How close the parser's own score for the other tool must come to its best for a doubt to count: the reading the
# rules nearly took (a strong cue is worth 2; agent.understanding.questions asks itself within 1, CLOSE).
RULES_CLOSE = 2.0
NO_TOOL = ("ask", "refuse")  # labels that name no tool: a disagreement with them is the parser's rules' to settle

# The tools each of the parser's commands may call first (agent.offline's handlers; "where" calls none, answering
# from the repository's listing).
COMMAND_TOOLS: dict[str, tuple[str, ...]] = {
    "plan": ("plan_layouts", "inspect_hardware"),
    "why": ("read_sweep", "plan_layouts", "inspect_hardware"),
    "compare": ("read_results",),
    "run": ("launch_run",),
    "sweep": ("run_sweep",),
    "status": ("run_status", "wait_run", "read_sweep", "list_runs"),
    "results": ("read_results",),
    "cancel": ("cancel_run",),
    "resume": ("resume_job", "list_runs"),
    "hardware": ("inspect_hardware",),
    "runs": ("list_runs",),
    "read": ("read_file",),
    "trials": ("read_sweep",),
    "bench": ("run_benchmark",),
    "report": ("write_report",),
    "pr": ("open_pull_request",),
    "docs": ("update_docs",),
}

# What a command's arguments must say for it to call that tool rather than another of its own (the status command
# waits for a run only when told to).
CALLED_WITH = {"wait_run": {"wait": "yes"}}

# A tool said in words, for the question.
TOOL_WORDS = {
    "plan_layouts": "plan layouts",
    "inspect_hardware": "look at this machine's hardware",
    "launch_run": "start a training run",
    "run_sweep": "start a sweep",
    "run_status": "check a run's state",
    "wait_run": "wait for a run to end",
    "read_results": "read a run's results",
    "cancel_run": "cancel a run",
    "resume_job": "resume a preempted run or sweep",
    "list_runs": "list the runs",
    "read_file": "show a file",
    "read_sweep": "read a sweep",
    "run_benchmark": "benchmark a checkpoint",
    "write_report": "write a sweep's report",
    "open_pull_request": "open a pull request",
    "update_docs": "update the docs",
}


def features(request: str, followup: bool = False) -> set[str]:
    """The sentence's character n-grams (its words padded by spaces) and words, and whether it follows a turn."""
    text = " " + " ".join(request.lower().split()) + " "
    found = {"c" + text[i : i + n] for n in NGRAMS for i in range(len(text) - n + 1)}
    found |= {"w" + word for word in re.findall(r"[a-z0-9_.=/-]+", text)}
    return found | {"FOLLOWUP"} if followup else found


def label(expect: dict) -> str:
    """An example's label: its expected tool, "ask" or "refuse"."""
    return "refuse" if expect.get("refuse") else "ask" if expect.get("ask") else expect["tool"]


@dataclass
class NaiveBayes:
    """Multinomial naive Bayes over the presence of features (each counted once per example)."""

    labels: list[str]
    row: dict[str, int]  # a feature's row of `weight`
    weight: np.ndarray  # log P(feature | label): a row per feature, a column per label
    prior: np.ndarray  # log P(label)

    @classmethod
    def fit(cls, examples: list[tuple[set[str], str]]) -> NaiveBayes:
        labels = Counter(name for _, name in examples)
        names = sorted(labels)
        column = {name: i for i, name in enumerate(names)}
        row: dict[str, int] = {}
        cells: list[int] = []  # row * len(names) + column, once per feature of each example
        for found, name in examples:
            cells += [row.setdefault(feature, len(row)) * len(names) + column[name] for feature in found]
        counts = np.bincount(cells, minlength=len(row) * len(names)).reshape(len(row), len(names))
        totals = counts.sum(axis=0) + SMOOTHING * len(row)
        prior = np.log(np.array([labels[name] for name in names]) / len(examples))
        return cls(names, row, np.log((counts + SMOOTHING) / totals).astype(np.float32), prior)

    def save(self, folder: Path) -> None:
        np.save(folder / "weight.npy", self.weight)
        np.save(folder / "prior.npy", self.prior)
        (folder / "features.json").write_text(json.dumps({"labels": self.labels, "features": list(self.row)}))

    @classmethod
    def load(cls, folder: Path) -> NaiveBayes:
        names = json.loads((folder / "features.json").read_text())
        row = {feature: i for i, feature in enumerate(names["features"])}
        return cls(names["labels"], row, np.load(folder / "weight.npy"), np.load(folder / "prior.npy"))

    def probabilities(self, found: set[str]) -> dict[str, float]:
        rows = [self.row[feature] for feature in found if feature in self.row]  # unseen features say nothing
        scores = (self.prior + self.weight[rows].sum(axis=0)) / TEMPERATURE
        chances = np.exp(scores - scores.max())
        return dict(zip(self.labels, (chances / chances.sum()).tolist(), strict=True))


def example_files() -> list[Path]:
    """The labelled sets under EXAMPLES: the outside authors' sets, the regression set and the reviewers' probes."""
    return sorted(EXAMPLES.rglob("*.jsonl"))


def read_examples(paths: Iterable[Path] | None = None) -> list[tuple[set[str], str]]:
    """Every labelled request of `paths` (all of `example_files` by default) as (features, label)."""
    examples = []
    for path in example_files() if paths is None else paths:
        for line in path.read_text().splitlines():
            if line.strip():
                item = json.loads(line)
                examples.append((features(item["request"], bool(item.get("history"))), label(item["expect"])))
    return examples


@functools.cache
def model() -> NaiveBayes:
    """The classifier fitted on every example, kept in meshpilot's cache under the fingerprint of the examples and
    of this module (whose constants and code make the fit): fitting takes about a second, loading a tenth of that
    (a command such as `meshpilot ask` pays it once per call)."""
    files = example_files()
    key = fingerprint([hashlib.sha256(path.read_bytes()).hexdigest() for path in [Path(__file__), *files]])
    folder = cached_dir("second-reading", key, lambda staging: NaiveBayes.fit(read_examples(files)).save(staging))
    return NaiveBayes.load(folder)


def likely(request: str, followup: bool = False) -> dict[str, float]:
    """How likely the request asks for each tool (or "ask", "refuse"), by the examples."""
    return model().probabilities(features(request, followup))


def words_for(command: str) -> str:
    """What the parser's command does, in words ("read a run's results" for "results")."""
    return TOOL_WORDS[COMMAND_TOOLS[command][0]]


class OtherReading(NamedTuple):
    tool: str  # the tool the second reading is sure of
    command: str  # the parser's command that calls it (the best scored of those that may)
    chance: float  # how likely the second reading finds it


def other_reading(command: str, scores: dict[str, float], request: str, followup: bool = False) -> OtherReading | None:
    """The tool the second reading is sure of (SURE) instead of the parser's `command`, where the parser's own cues
    for a command that calls it come close (`scores`, the parser's intents scored: within RULES_CLOSE of its best);
    None where it agrees, names no tool (asking and refusing are the rules' to decide), or the rules read the other
    far below."""
    own = COMMAND_TOOLS.get(command)
    if own is None:
        return None
    chances = likely(request, followup)
    best = max(chances, key=chances.__getitem__)
    if best in own or best in NO_TOOL or chances[best] < SURE:
        return None
    callers = [name for name, tools in COMMAND_TOOLS.items() if best in tools]
    caller = max(callers, key=lambda name: scores.get(name, 0.0))
    close = max(scores.values()) - scores.get(caller, 0.0) < RULES_CLOSE
    return OtherReading(best, caller, chances[best]) if close else None
