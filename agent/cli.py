"""The `meshpilot` command line. Each subcommand parses its arguments and calls one function of a layer below."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from trainer.config import ConfigError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="meshpilot", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    _add_train(commands)
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except ConfigError as error:
        print(f"meshpilot: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("meshpilot: interrupted", file=sys.stderr)
        return 130


def _add_train(commands: argparse._SubParsersAction) -> None:
    train = commands.add_parser("train", help="train a model with the built-in trainer")
    train.add_argument("experiment", type=Path, help="experiment file (YAML)")
    train.add_argument("--nproc", type=int, help="processes per node (default: every GPU, or 1 on CPU)")
    train.add_argument("--layout", help="degrees, e.g. dp_replicate=2 (default: data parallel over all processes)")
    train.add_argument("--steps", type=int, help="optimizer steps (overrides train.steps)")
    train.add_argument("--out", type=Path, help="run directory (default: runs/<experiment>-<time>)")
    train.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override an experiment key, e.g. --set train.lr=1e-3 (repeatable)",
    )
    train.add_argument("--resume", action="store_true", help="continue the run in --out from its latest checkpoint")
    train.add_argument("--nnodes", type=int, help="nodes taking part (default: hardware.nodes, or 1)")
    train.add_argument("--node-rank", type=int, default=0, help="this node's rank")
    train.add_argument("--rdzv-endpoint", help="host:port of the rendezvous, for multi-node runs")
    train.set_defaults(handler=_train)


def _train(args: argparse.Namespace) -> int:
    from trainer.launch import TrainRequest, describe, launch, prepare

    request = TrainRequest(
        experiment=args.experiment,
        nproc=args.nproc,
        layout=args.layout,
        steps=args.steps,
        out=args.out,
        overrides=args.overrides,
        resume=args.resume,
        nnodes=args.nnodes,
        node_rank=args.node_rank,
        rdzv_endpoint=args.rdzv_endpoint,
    )
    prepared = prepare(request)
    metrics = launch(prepared)
    print(describe(metrics, prepared.run), file=sys.stderr if metrics["status"] != "ok" else sys.stdout)
    return 0 if metrics["status"] == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
