"""`meshpilot sweep`: the command line of agent.sweep.run_sweep."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from trainer.host.lifeline import tie_to_parent


def register(commands: argparse._SubParsersAction) -> None:
    sweep = commands.add_parser("sweep", help="tune layouts and settings with unattended trial runs")
    sweep.add_argument("experiment", type=Path, help="experiment file (YAML); its search section sets the sweep")
    sweep.add_argument("--out", type=Path, required=True, help="sweep directory")
    sweep.add_argument("--resume", action="store_true", help="continue the sweep in --out after a crash or kill")
    sweep.add_argument(
        "--executor",
        choices=("local", "slurm", "submitit-local"),
        help="where trials run: this machine, SLURM jobs, or submitit's local executor (default local; with "
        "--resume, the executor the sweep started with)",
    )
    sweep.add_argument("--max-parallel", type=int, default=1, help="trials at once, on disjoint devices (default 1)")
    sweep.add_argument("--trials", type=int, help="trials to run (default search.trials)")
    sweep.add_argument("--devices", type=int, help="devices the trials share (default: every GPU, or every core)")
    sweep.add_argument(
        "--space",
        action="append",
        default=[],
        metavar="KEY=YAML",
        help="vary a key: a list of choices ('train.lr=[1e-3, 3e-3]', 'layout=[dp_shard=2, tp=2]') or a range "
        "('train.lr={low: 1e-4, high: 1e-2, log: true}') (repeatable)",
    )
    sweep.add_argument(
        "--sampler",
        default="auto",
        choices=("auto", "grid", "tpe"),
        help="optuna sampler (default: grid for lists of choices, tpe when a range is given)",
    )
    sweep.add_argument("--trial-timeout", type=float, help="seconds a trial may run in all (default: no limit)")
    sweep.add_argument(
        "--hang-timeout",
        type=float,
        default=600.0,
        help="seconds without a new step before a trial counts as hung (default 600)",
    )
    sweep.add_argument("--no-prune", action="store_true", help="never stop a trial early for being clearly worse")
    sweep.add_argument(
        "--trackers",
        metavar="NAMES",
        help="experiment trackers of every trial, comma-separated (tensorboard,wandb,mlflow,trackio), or none "
        "(default: the experiment's train.trackers); each trial is a tracker run of its own",
    )
    sweep.add_argument(
        "--slurm",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="submitit parameter for SLURM trials, e.g. slurm_partition=gpu (repeatable)",
    )
    sweep.set_defaults(handler=_sweep)


def _sweep(args: argparse.Namespace) -> int:
    tie_to_parent()  # started by a job supervisor (agent.jobs.start_sweep): die with it, and the trials with this
    from agent.sweep import run_sweep
    from agent.sweep.progress import SweepReporter
    from agent.sweep.runner import SweepPreempted
    from agent.sweep.space import parse_space_args
    from trainer.config import ConfigError

    slurm = {}
    for item in args.slurm:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--slurm expects KEY=VALUE, got {item!r}")
        slurm[key] = value
    with SweepReporter(sys.stderr) as reporter:
        try:
            summary = run_sweep(
                args.experiment,
                args.out,
                resume=args.resume,
                executor=args.executor,
                max_parallel=args.max_parallel,
                trials=args.trials,
                devices=args.devices,
                space=parse_space_args(args.space) or None,
                sampler=args.sampler,
                trial_timeout_s=args.trial_timeout,
                hang_s=args.hang_timeout,
                prune=not args.no_prune,
                slurm=slurm,
                progress=reporter.update,
                trackers=_trackers(args.trackers),
            )
        except SweepPreempted as e:  # its running trials preempted (the message names any that saved nothing)
            print(f"meshpilot: {e}", file=sys.stderr)
            return 128 + e.signum  # as a shell reports a command a signal ended, like `meshpilot train`
    print(describe(summary, args.out), file=sys.stdout if summary["winner"] else sys.stderr)
    return 0 if summary["winner"] else 1


def _trackers(value: str | None) -> list[str] | None:
    if value is None:
        return None
    return [] if value.strip() == "none" else [name.strip() for name in value.split(",") if name.strip()]


def describe(summary: dict, out: Path) -> str:
    """One line per trial and one for the winner."""
    lines = []
    for t in summary["trials"]:
        figure = f"{t['tokens_per_s']:,.0f} tokens/s" if t["tokens_per_s"] else (t["cause"] or "")
        lines.append(f"  {t['id']:<14} {t['status']:<9} {figure}")
    winner = summary["winner"]
    lines.append(f"winner: {winner or 'none'}; summary in {Path(out) / 'summary.json'}")
    return "\n".join(lines)
