"""Calibration of the throughput model: what measured runs taught about one machine kind (seconds per predicted
second of compute, communication and dispatch, and the fixed seconds the formulas leave out), fitted to the records
rank 0 stores at the end of every run (trainer.rank.loop) and applied by every prediction on that machine."""

from __future__ import annotations

import itertools
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from filelock import FileLock

from trainer.costs.probe import STATED, figures_source
from trainer.hardware import Hardware
from trainer.host.cache import calibration_dir

# What a calibration record keeps of a run, in the order Calibration.predict takes them.
FEATURES = ("compute_s", "comm_s", "collectives", "micro_batches", "dispatch_s")


@dataclass
class Calibration:
    """What measured runs taught about one machine kind: seconds per predicted second of compute and of
    communication, and the fixed seconds per collective and per micro-batch that the formulas leave out (gloo on
    CPU spends milliseconds on a collective that the stated latency puts at 0.1 ms; every forward-backward pass
    pays for launching its operations)."""

    compute_scale: float = 1.0
    comm_scale: float = 1.0
    collective_s: float = 0.0
    micro_batch_s: float = 0.0
    dispatch_scale: float = 1.0
    runs: int = 0

    def predict(
        self, compute_s: float, comm_s: float, collectives: int, micro_batches: int, dispatch_s: float = 0.0
    ) -> float:
        fixed = self.collective_s * collectives + self.micro_batch_s * micro_batches
        return self.compute_scale * compute_s + self.comm_scale * comm_s + self.dispatch_scale * dispatch_s + fixed

    @classmethod
    def load(cls, hardware: Hardware) -> Calibration:
        """The fit of the runs predicted from the figures predictions use now: a run predicted from other figures
        (the stated defaults before a probe, an earlier probe) measured its step against other seconds."""
        source = figures_source(hardware)
        return fit([r for r in calibration_records(hardware) if r.get("figures", STATED) == source])

    @staticmethod
    def record(hardware: Hardware, estimate: object, measured_step_s: float) -> Calibration:
        """Store a measured run and refit; later predictions on this machine use the new factors. `estimate`: the
        run's trainer.costs.throughput.StepEstimate (its FEATURES are read)."""
        from trainer.results.contracts import write_json  # here: `meshpilot plan` only reads (pydantic takes 0.1 s)

        path = _calibration_path(hardware)
        path.parent.mkdir(parents=True, exist_ok=True)
        # Parallel sweep trials finish together: the lock keeps each one's read-append-write whole, and the
        # atomic write keeps a reader from ever seeing half a file.
        with FileLock(path.with_suffix(".lock")):
            records = calibration_records(hardware)
            features = {f: getattr(estimate, f) for f in FEATURES}
            records.append({**features, "measured_s": measured_step_s, "figures": figures_source(hardware)})
            write_json(path, {"hardware": asdict(hardware), "records": records[-200:]})
        return Calibration.load(hardware)


def fit(records: list[dict]) -> Calibration:
    """Non-negative least squares for measured = a compute + b comm + c collectives + d micro-batches
    + e dispatch, in relative error.

    Exact for so few unknowns: every subset of the terms is solved, those with a factor <= 0 are dropped, and
    the closest fit wins. Compute is always in, and communication and dispatch too once some run had any; a subset
    needs more runs than terms. Otherwise one common factor scales compute, communication and dispatch alike (a
    single run).
    """
    if not records:
        return Calibration()
    # Relative errors: a step of 10 ms predicted as 20 ms is as wrong for ranking as 1 s predicted as 2 s, so
    # each run's equation is divided by its measured time and asks for 1.
    measured = np.array([r["measured_s"] for r in records])
    features = np.array([[r.get(f, 0) for f in FEATURES] for r in records], dtype=float) / measured[:, None]
    ones = np.ones(len(records))
    scaled_alike = [FEATURES.index(f) for f in ("compute_s", "comm_s", "dispatch_s")]
    required = {0} | {i for i in scaled_alike[1:] if features[:, i].any()}
    together = features[:, scaled_alike].sum(axis=1)
    scale = float(together @ ones / max(together @ together, 1e-30))
    best = Calibration(scale, scale, dispatch_scale=scale, runs=len(records))
    best_residual = float(np.sum((together * scale - ones) ** 2))
    for size in range(len(required), min(len(FEATURES), len(records) - 1) + 1):
        for terms in itertools.combinations(range(len(FEATURES)), size):
            columns = features[:, terms]
            if not required <= set(terms) or not columns.any(axis=0).all():
                continue
            factors, *_ = np.linalg.lstsq(columns, ones, rcond=None)
            residual = float(np.sum((columns @ factors - ones) ** 2))
            if np.all(factors > 0) and residual < best_residual:
                fitted = dict(zip((FEATURES[t] for t in terms), factors.tolist(), strict=True))
                best, best_residual = _calibration(fitted, len(records)), residual
    return best


def _calibration(fitted: dict[str, float], runs: int) -> Calibration:
    """Factors by feature name; without communication or dispatch in any run, it is assumed to scale like compute."""
    compute = fitted["compute_s"]
    comm, dispatch = fitted.get("comm_s", compute), fitted.get("dispatch_s", compute)
    collective_s, micro_batch_s = fitted.get("collectives", 0.0), fitted.get("micro_batches", 0.0)
    return Calibration(compute, comm, collective_s, micro_batch_s, dispatch, runs)


def calibration_records(hardware: Hardware) -> list[dict]:
    """The runs measured on this machine kind, oldest first: FEATURES and measured_s (the median step)."""
    path = _calibration_path(hardware)
    return json.loads(path.read_text())["records"] if path.is_file() else []


def _calibration_path(hardware: Hardware) -> Path:
    # v5: dispatch apart from compute (dispatch_s); v4 counted the layers' memory traffic kernel by kernel
    # (LAYER_BYTES). Records of earlier estimates fit other seconds.
    return calibration_dir() / f"{hardware.key}.v5.json"
