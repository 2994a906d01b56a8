"""What every document of one report is made from: the sweep, the copied result files and where they live."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agent.report.figures import Figure, Ledger, Sources
from agent.report.inputs import Sweep, Trial
from agent.report.prose import Part, Value
from trainer.layout import MESH_DIMS


@dataclass
class Context:
    sweep: Sweep
    benches: list[tuple[str, dict[str, Any]]]  # (file name under results/bench/, sanitized result)
    report_dir: str  # repository-relative
    slug: str
    date: str
    experiment: str  # the experiment file as the reproduce command names it
    sources: Sources
    ledger: Ledger = field(default_factory=Ledger)
    prose: Any = None
    prose_origins: dict[str, str] = field(default_factory=dict)

    def result(self, name: str) -> str:
        """Repository-relative path of a copied result file."""
        return f"{self.report_dir}/results/{name}"

    @property
    def summary(self) -> str:
        return self.result("summary.json")

    def run_file(self, trial: Trial, name: str) -> str:
        return self.result(f"trials/{trial.id}/{name}")

    def record(self, trial: Trial, *key: str, unit: str, reduce: str | None = None) -> Figure | None:
        """A figure of the trial's entry in summary.json."""
        return self.sources.figure(self.summary, "trials", trial.index, *key, unit=unit, reduce=reduce)

    def metric(self, trial: Trial, *key: str, unit: str) -> Figure | None:
        return self.sources.figure(self.run_file(trial, "metrics.json"), *key, unit=unit)

    def memory(self, trial: Trial, side: str, category: str) -> Figure | None:
        """The largest of any rank's `category` bytes, `side` predicted or measured."""
        source = self.run_file(trial, "memory.json")
        return self.sources.figure(source, side, "*", category, unit="mib", reduce="max")

    def communication(self, trial: Trial, *key: str, unit: str = "mib") -> Figure | None:
        return self.sources.figure(self.result("predicted_communication.json"), "trials", trial.id, *key, unit=unit)

    def layout(self, trial: Trial) -> list[Part]:
        """The trial's layout as `dp_shard=2,tp=2` (degrees as figures), from summary.json or its metrics."""
        key: tuple = ("trials", trial.index, "params", "layout")
        source = self.summary
        if not isinstance(self.sources.value(source, *key), dict):
            source, key = self.run_file(trial, "metrics.json"), ("layout",)
        if not isinstance(self.sources.value(source, *key), dict):
            return ["layout not recorded"]
        return self.degrees(source, key) or ["one process"]

    def degrees(self, source: str, key: tuple) -> list[Part]:
        """`dp_shard=2,tp=2` for the degrees at `key` in `source`, each degree a figure; empty when all are one."""
        degrees = self.sources.value(source, *key) or {}
        parts: list[Part] = []
        for name in MESH_DIMS:
            if degrees.get(name, 1) != 1:
                parts += [("," if parts else "") + f"{name}=", self.sources.figure(source, *key, name, unit="count")]
        return parts

    def label(self, trial: Trial) -> Value:
        return [f"`{trial.id}` (", *self.layout(trial), ")"]

    def plain_label(self, trial: Trial) -> str:
        """For plot legends (pictures are not ledgered)."""
        parts = self.layout(trial)
        return f"{trial.id} " + "".join(p if isinstance(p, str) else p.text for p in parts if p is not None)
