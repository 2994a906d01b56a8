"""The `meshpilot` command line: each package registers its own subcommands (a `register` function in its cli
module), and only the module of the command given is imported, so `meshpilot train` never loads the chat UI."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from importlib.metadata import PackageNotFoundError, version

from trainer.config import ConfigError, print_error

DESCRIPTION = """meshpilot chooses how to spread a transformer's training over your devices (data parallel, FSDP2,
HSDP, tensor, pipeline and context parallel), runs it with the built-in trainer, benchmarks the result and writes
reports and pull requests into your git repository. New here? Run `meshpilot demo --dir /tmp/demo` (a few
minutes on a laptop CPU), then `meshpilot chat` in your repository."""

# command: the module whose register() adds it (several commands may share one)
COMMANDS = {
    "train": "trainer.cli",
    "plan": "trainer.cli",
    "export": "trainer.cli",
    "probe": "trainer.cli",
    "bench": "evalsuite.cli",
    "sweep": "agent.sweep.cli",
    "ask": "agent.ask",
    "report": "agent.report.cli",
    "chat": "tui.cli",
    "demo": "agent.demo",
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(
        prog="meshpilot", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"meshpilot {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    named = COMMANDS.get(argv[0]) if argv else None
    for module in dict.fromkeys([named] if named else COMMANDS.values()):  # every command only for help
        importlib.import_module(module).register(commands)
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except ConfigError as error:
        print_error(error)
        return 2
    except KeyboardInterrupt:
        print("meshpilot: interrupted", file=sys.stderr)
        return 130


def _version() -> str:
    try:
        return version("meshpilot")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "(not installed)"


# Commands that skip the interpreter's teardown (freeing torch's and transformers' modules: over a second; five and
# more for a sweep's, on a loaded 2-core machine) that job supervisors, sweeps, the agent and shells would wait for.
# Their work is done when main returns: a train's ranks have ended, a plan's table is printed, a sweep's trials have
# ended (or been preempted and waited for) and its study committed every write to its SQLite file, a demo's sweep,
# run, benchmark (its leaderboard's SQLite in autocommit) and pushed report are done, and the files each wrote are
# closed.
QUICK_EXIT = ("train", "plan", "sweep", "demo")


def run() -> None:
    """The `meshpilot` command: `main`, then exit: at once for QUICK_EXIT's commands, once stdout and stderr are
    flushed. Every other command ends the usual way (the chat's SQLite, the TUI's terminal)."""
    code = main()
    if sys.argv[1:2] and sys.argv[1] in QUICK_EXIT:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    run()
