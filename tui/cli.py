"""`meshpilot chat`: the terminal UI. Everything that can be wrong with the command line is found before the
terminal switches to the app, so a mistake is one line on stderr (exit code 2), not a broken screen."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from trainer.config import ConfigError

_THREAD = re.compile(r"^[\w.:-]{1,100}$")


def register(commands: argparse._SubParsersAction) -> None:
    chat = commands.add_parser("chat", help="chat with meshpilot in a terminal UI", description=__doc__)
    chat.add_argument("--repo", type=Path, default=Path("."), help="experiment repository (default: .)")
    chat.add_argument("--thread", help="conversation to open (default: a new one; ctrl+t lists them)")
    chat.add_argument(
        "--approve-below",
        type=float,
        metavar="DEVICE_HOURS",
        help="launches cheaper than this start without asking (default: MESHPILOT_APPROVE_BELOW, else 1)",
    )
    chat.add_argument("--llm-base-url", help="OpenAI-compatible endpoint (default: MESHPILOT_LLM_BASE_URL)")
    chat.add_argument("--llm-model", help="model name at that endpoint (default: MESHPILOT_LLM_MODEL)")
    chat.set_defaults(handler=_chat)


def _chat(args: argparse.Namespace) -> int:
    from agent.approvals import Policy, threshold_from_env
    from agent.llm import llm_settings, make_llm
    from agent.session import Agent

    if not args.repo.is_dir():
        raise ConfigError(f"--repo {args.repo} is not a directory")
    if args.thread is not None and not _THREAD.match(args.thread):
        raise ConfigError(f"--thread {args.thread!r}: use letters, digits, dots, colons, dashes and underscores")
    threshold = args.approve_below if args.approve_below is not None else threshold_from_env()
    policy = Policy().with_threshold(threshold)
    settings = llm_settings(args.llm_base_url, args.llm_model)
    llm = make_llm(settings)
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise ConfigError("meshpilot chat needs a terminal; use `meshpilot ask` in scripts")

    from tui.app import MeshpilotApp

    agent = Agent(args.repo, llm, policy=policy)
    app = MeshpilotApp(agent, args.thread, llm_description=settings.describe())
    message = app.run()
    if message:
        print(message)
    if app.return_code:
        return app.return_code
    if not app.agent_runs:  # an agent call still under way keeps the connection until the process ends
        agent.close()
    return 0
