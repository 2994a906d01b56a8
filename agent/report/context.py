"""What every document of one report is made from: the sweep, the copied result files and where they live."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from agent.report import loss, router
from agent.report.figures import Figure, Ledger, Sources
from agent.report.inputs import LongerRun, Sweep, Trial
from agent.report.prose import Part, Value
from trainer.layout import MESH_DIMS, ONE_PROCESS


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
    longer_run: LongerRun | None = None  # the winner trained for longer, copied under results/longer-run/

    def result(self, name: str) -> str:
        """Repository-relative path of a copied result file."""
        return f"{self.report_dir}/results/{name}"

    @property
    def summary(self) -> str:
        return self.result("summary.json")

    @property
    def loss_agreement(self) -> dict[str, Any]:
        """Whether the trials' loss curves agree, as results/loss_agreement.json says (see agent.report.loss)."""
        return self.sources.value(self.result(loss.RESULT))

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

    def router(self, trial: Trial, key: str, unit: str) -> Figure | None:
        """A figure of the trial's routers (results/router.json: mixture-of-experts trials only)."""
        return self.sources.figure(self.result(router.RESULT), "trials", trial.id, key, unit=unit)

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
        return self.degrees(source, key) or [ONE_PROCESS]

    def degrees(self, source: str, key: tuple) -> list[Part]:
        """`dp_shard=2,tp=2` for the degrees at `key` in `source`, each degree a figure; empty when all are one."""
        degrees = self.sources.value(source, *key) or {}
        parts: list[Part] = []
        for name in MESH_DIMS:
            if degrees.get(name, 1) != 1:
                parts += [("," if parts else "") + f"{name}=", self.sources.figure(source, *key, name, unit="count")]
        return parts

    def sweep_name(self, quote: str = "`") -> str:
        """How every document, the commit and the pull request name this sweep: "layout sweep `tiny`".

        The slug defaults to the sweep folder's name, which is often "sweep" itself: "layout sweep `sweep`" says the
        word twice and nothing else, so a slug that names itself a sweep gives way to the experiment it swept.
        """
        if _SWEEP_WORDS.isdisjoint(self.slug.split("-")):
            return f"layout sweep {quote}{self.slug}{quote}"
        return f"layout sweep of {quote}{self.experiment}{quote}"

    def settings(self, trial: Trial) -> list[Part]:
        """Beside the layout, the swept settings that set it apart from trials in the same layout (", packed"): two
        trials never read alike, and a sweep over layouts alone keeps its labels short."""
        parts: list[Part] = []
        for name in self._distinguishing_params:
            value = self.sources.value(self.summary, "trials", trial.index, "params", name)
            whole = isinstance(value, int) and not isinstance(value, bool)
            figure = self.record(trial, "params", name, unit="count" if whole else "text")
            if figure is not None:
                parts += [", ", *_setting(name, figure)]
        return parts

    @cached_property
    def _distinguishing_params(self) -> list[str]:
        """Swept parameters, in the records' order, that take two values among trials alike in their layout and in
        the parameters named before them."""
        params = [t.record.get("params") or {} for t in self.sweep.trials]
        candidates = dict.fromkeys(name for p in params for name in p if name not in _NOT_SETTINGS)
        named: list[str] = []
        for name in candidates:
            seen: dict[str, set[str]] = {}
            for p in params:
                if p.get(name) is not None:
                    alike = _key({key: p.get(key) for key in ("layout", *named)})
                    seen.setdefault(alike, set()).add(_key(p[name]))
            if any(len(values) > 1 for values in seen.values()):
                named.append(name)
        return named

    def label(self, trial: Trial) -> Value:
        return [f"`{trial.id}` (", *self.layout(trial), *self.settings(trial), ")"]

    def plain_label(self, trial: Trial) -> str:
        """For plot legends (pictures are not ledgered)."""
        parts = self.layout(trial) + self.settings(trial)
        return f"{trial.id} " + "".join(p if isinstance(p, str) else p.text for p in parts if p is not None)


_SWEEP_WORDS = frozenset({"sweep", "sweeps"})
# Not settings of their own: the layout is shown first, and the accumulation steps follow from the layout and the
# micro-batch for the experiment's global batch (naming them would say the layout again).
_NOT_SETTINGS = ("layout", "grad_accum")
_SWITCHES = {
    "packing": ("packed", "unpacked"),
    "activation_checkpointing": ("act. checkpointing", "no act. checkpointing"),
}


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _setting(name: str, figure: Figure) -> list[Part]:
    """One swept setting as a label shows it: a switch as a word, a number as a figure."""
    if isinstance(figure.value, bool):
        on, off = _SWITCHES.get(name, (f"{name} on", f"{name} off"))
        return [on if figure.value else off]
    if name == "micro_batch":
        return ["micro-batch ", figure]
    return [f"{name}=", figure]
