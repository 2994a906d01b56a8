"""What the tests of agent.understanding share: the benchmark's fixture repository (bench.agent_understanding's
build_fixture) as the parser knows it, reading a sentence there, and the check that it reads as one call."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from agent.understanding import context_of, understand
from agent.understanding.known import Known
from bench.agent_understanding import build_fixture


def fixture_known(tmp_path_factory) -> Known:
    """The fixture repository as the parser knows it, built once per test session (tests/conftest.py's `known`
    fixture returns it to every test of agent.understanding)."""
    return Known.read(build_fixture(tmp_path_factory.mktemp("understanding") / "repo"))


def earlier_turn(tool: str, args: dict, text: str) -> list:
    """An earlier turn of the conversation: `text`, answered by a call of `tool` with `args`, rejected at the
    approval (the benchmark's history turns)."""
    call = {"name": tool, "args": args, "id": "earlier"}
    return [
        HumanMessage(text),
        AIMessage("", tool_calls=[call]),
        ToolMessage('{"rejected": true}', tool_call_id="earlier"),
    ]


def read(text: str, known: Known, earlier: list | None = None):
    """The Intent of `text` in the fixture repository, after the `earlier` messages of the conversation."""
    context = context_of([*(earlier or []), HumanMessage(text)], str(known.root))
    return understand(text, context)


def read_as(text: str, command: str, args: dict, known: Known) -> None:
    """`text` is read as `command` with (at least) `args` (settings compared in any order), asking nothing."""
    intent = read(text, known)

    def plain(values: dict) -> dict:
        return {key: sorted(value) if key == "set" else value for key, value in values.items() if key in args}

    assert (intent.command, intent.clarify, plain(intent.args)) == (command, None, plain(args))
