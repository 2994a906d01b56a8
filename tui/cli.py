"""`meshpilot chat`: the terminal UI. Everything that can be wrong with the command line is found before the
terminal switches to the app, so a mistake is one line on stderr (exit code 2), not a broken screen."""

from __future__ import annotations

import argparse
import sys

from agent.ask import add_agent_arguments, check_agent_arguments
from trainer.config import ConfigError


def register(commands: argparse._SubParsersAction) -> None:
    chat = commands.add_parser("chat", help="chat with meshpilot in a terminal UI", description=__doc__)
    add_agent_arguments(chat, thread_help="conversation to open (default: a new one; ctrl+t lists them)")
    chat.set_defaults(handler=_chat)


def _chat(args: argparse.Namespace) -> int:
    # imported here: `meshpilot --help` and every other command register this one without loading the agent
    # (requests, httpx, rich: a second)
    from agent.approvals import Policy
    from agent.llm import llm_settings, make_llm
    from agent.session import Agent

    policy = Policy().with_threshold(check_agent_arguments(args))
    settings = llm_settings(args.llm_base_url, args.llm_model)
    llm = make_llm(settings)
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise ConfigError("meshpilot chat needs a terminal; use `meshpilot ask` in scripts")

    from tui.app import MeshpilotApp  # imported here: textual loads only for a command line found good

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
