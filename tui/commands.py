"""The slash commands the prompt completes: the offline planner's.

The planner's HANDLERS say which commands exist and its HELP how each is called, so the completion list follows
the planner when it learns a command. With an OpenAI-compatible model the same commands read as plain requests.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from agent.offline import HANDLERS, HELP

# One line each for the completion list; the planner's HELP gives the arguments.
DESCRIPTIONS = {
    "bench": "evaluate a checkpoint on a benchmark suite",
    "cancel": "stop a run",
    "compare": "runs side by side (default: the latest two)",
    "docs": "update docs/training.md and README from a sweep, as a pull request",
    "hardware": "detect this machine's devices",
    "help": "what the offline planner understands",
    "plan": "rank parallelism layouts for this model",
    "pr": "write a sweep's report and open a pull request",
    "read": "read a file of the repository",
    "report": "write a sweep's report on a branch",
    "results": "a finished run's metrics and losses",
    "resume": "continue a preempted run or sweep from its checkpoint",
    "run": "train with the built-in trainer",
    "runs": "list the runs",
    "status": "a run's state and step",
    "sweep": "run a tuning sweep and wait for it",
    "trials": "the latest sweep's trials and winner",
    "where": "where the reports and pull requests are",
    "why": "why the plan's winner won",
}


@dataclass(frozen=True)
class SlashCommand:
    name: str  # without the slash
    usage: str  # e.g. /plan [devices=N] [nodes=M]
    help: str  # what it does, where the help text says


@cache
def slash_commands() -> tuple[SlashCommand, ...]:
    usages = {usage[1:].split()[0]: usage for usage in re.findall(r"`(/[a-z]+[^`]*)`", HELP)}
    return tuple(
        SlashCommand(name, usages.get(name, f"/{name}"), DESCRIPTIONS.get(name, "")) for name in sorted(HANDLERS)
    )


def complete(text: str) -> list[SlashCommand]:
    """The commands that `text`, a slash and the start of a name with nothing after it, may become."""
    if not re.fullmatch(r"/[a-z]*", text):
        return []
    return [c for c in slash_commands() if c.name.startswith(text[1:])]
