"""Preemption: SIGTERM (what SLURM and Kubernetes send before a kill) or SIGUSR1 (what a scheduler may send ahead of
time, e.g. `sbatch --signal=USR1@60`) ends a run as "preempted", resumable, never as a crash.

    launcher (`meshpilot train`)      notes the signal and passes it on to every rank, again at each poll until the
                                      run ends (a rank that was not yet listening gets it once it is)
    torchrun's agent                  ignores both: torchrun would otherwise stop the ranks at once
    ranks                             note it (`requested`); at the next step boundary they agree on it (`agreed`),
                                      save a checkpoint if time allows, rank 0 writes metrics.json with status
                                      "preempted" and the signal, and every rank exits 0

A signal sent to the launcher alone, to its process group, or to every process of a SLURM job step ends the run the
same way. The time allowed for the save after the signal: MESHPILOT_PREEMPT_GRACE_S seconds (default 25, under
SLURM's default KillWait of 30 s); a step boundary reached later stops without saving, and `--resume` continues from
the checkpoint before.
"""

from __future__ import annotations

import os
import signal
import time

SIGNALS = (signal.SIGTERM, signal.SIGUSR1)
GRACE_ENV = "MESHPILOT_PREEMPT_GRACE_S"
_DEFAULT_GRACE_S = 25.0
# torchrun's agent turns these into an exception that stops the ranks; SIGTERM and SIGUSR1 are left out (ignored).
AGENT_HANDLED = "SIGINT,SIGHUP,SIGQUIT"

_received: dict[str, float] = {}  # this process: the signal's number and when it came (monotonic), once one did


def _note(signum: int, _frame: object) -> None:
    _received.setdefault("signal", float(signum))
    _received.setdefault("at", time.monotonic())


def listen() -> None:
    """In a rank or a launcher: note SIGTERM and SIGUSR1 instead of dying (or, in a forked rank, instead of the
    exception torchrun's handler, inherited from the agent, would raise)."""
    for signum in SIGNALS:
        signal.signal(signum, _note)


def ignore_in_agent() -> None:
    """In torchrun's agent, before it starts the ranks: neither signal stops it or them (the ranks listen). Its
    launch config must leave them out too (`AGENT_HANDLED`): torchrun installs its handlers as it starts them."""
    for signum in SIGNALS:
        signal.signal(signum, signal.SIG_IGN)


def requested() -> int:
    """The signal received (its number), or 0."""
    return int(_received.get("signal", 0))


def name(signum: int) -> str:
    return signal.Signals(signum).name


def grace_s() -> float:
    return float(os.environ.get(GRACE_ENV, _DEFAULT_GRACE_S))


def save_allowed(expected_save_s: float) -> bool:
    """Whether a save that takes about `expected_save_s` ends within the grace period since the signal."""
    if "at" not in _received:
        return True
    return time.monotonic() - _received["at"] + expected_save_s <= grace_s()
