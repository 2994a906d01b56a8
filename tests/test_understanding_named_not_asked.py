"""agent.understanding on sentences that name an action without asking for it (new sentences of each kind a
reviewer's probe found acted on, not the probe's): the action dismissed as pointless or unwanted, the assistant told
to stop pushing it, someone else's words quoted or question relayed, the action supposed, doubted or only weighed,
and a question what it would do. Each asks one question naming the call and acts on nothing; near misses that order
the action still act.

The fixture repository is the benchmark's (bench.agent_understanding.build_fixture), as in tests/test_understanding.py.
"""

from __future__ import annotations

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from agent.graph import build_graph
from agent.offline import OfflinePlanner
from agent.understanding.known import Known
from agent.understanding.mood import offers_yes
from bench.agent_understanding import Conversation, build_fixture
from tests.understanding_support import read, read_as


def held_back(text: str, known: Known, command: str) -> str:
    """`text` is read as `command`, held back with a question that names its call; the question."""
    intent = read(text, known)
    assert intent.command == command and intent.clarify is not None and f"/{command}" in intent.clarify
    return intent.clarify


# --- dismissed: pointless, unwanted, or the assistant told to stop pushing it ------------------------------------


@pytest.mark.parametrize(
    ("text", "command"),
    [
        ("honestly there is no point in benchmarking tp-try", "bench"),
        ("no use resuming r1 now", "resume"),
        ("it's pointless to sweep the long config again", "sweep"),
        ("no one asked you to open a PR for layouts-nov", "pr"),
        ("nobody wanted a report on layouts-nov", "report"),
        ("quit asking me to cancel baseline-ddp", "cancel"),
        ("stop suggesting to benchmark tp-try", "bench"),
        ("there's no reason to kill tp-try", "cancel"),
    ],
)
def test_a_dismissed_action_is_held_back_with_no_yes(text, command, known):
    assert not offers_yes(held_back(text, known, command))  # a bare "ok" after it must not act


# --- someone else's words, or a question about the action ---------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "command"),
    [
        ("Marta typed 'kill tp-try' in the channel, not sure she meant it", "cancel"),
        ('Leo posted "resume r1" on slack an hour ago', "resume"),
        ("Ines asked if benchmarking tp-try makes sense", "bench"),
        ("Omar wants to know whether resuming r1 is safe", "resume"),
        ("the open question in the meeting was whether to open a PR for lr-scan", "pr"),
        ("I wonder whether a 4-trial sweep on the long config is worth it", "sweep"),
    ],
)
def test_quoted_words_and_questions_about_the_action_are_held_back(text, command, known):
    held_back(text, known, command)


# --- supposed, doubted, weighed ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "command"),
    [
        ("let's say we resume tp-try; does it start from the last checkpoint?", "resume"),
        ("assuming I cancel baseline-ddp, are its logs kept?", "cancel"),
        ("perhaps resume r1? dunno", "resume"),
        ("maybe a sweep with 4 trials? unsure", "sweep"),
        ("cancel baseline-ddp or not, what do you think?", "cancel"),
        ("probably ought to benchmark tp-try", "bench"),
        ("I'm kind of tempted to cancel baseline-ddp", "cancel"),
        ("a benchmark of tp-try might be interesting", "bench"),
        ("it could make sense to open a PR for layouts-nov", "pr"),
        ("resuming tp-try might help, not certain though", "resume"),
    ],
)
def test_a_supposed_doubted_or_weighed_action_is_held_back(text, command, known):
    held_back(text, known, command)


# --- asked what the action would do ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "command", "effect"),
    [
        ("what happens when I cancel tp-try?", "cancel", "its logs and partial results stay on disk"),
        ("what would resuming r1 do?", "resume", "continue a preempted run"),
        ("what's the effect of opening a PR for lr-scan?", "pr", "open a pull request"),
    ],
)
def test_asked_what_an_action_does_says_it_and_offers_no_yes(text, command, effect, known):
    question = held_back(text, known, command)
    assert effect in question and not offers_yes(question) and "\n" not in question  # one line


@pytest.fixture(scope="module")
def chat(tmp_path_factory):
    """A new conversation in the fixture repository for each call, through the agent's real graph."""
    repo = build_fixture(tmp_path_factory.mktemp("mood_k1") / "repo")
    graph = build_graph(OfflinePlanner(), InMemorySaver())
    threads = iter(range(1000))
    return lambda: Conversation(graph, repo, f"t{next(threads)}")


@pytest.mark.parametrize(
    "request_", ["what would happen if I cancel baseline-ddp?", "nobody asked you to cancel baseline-ddp"]
)
def test_an_ok_after_the_answer_acts_on_nothing(chat, request_):
    conversation = chat()
    answer = conversation.turn(request_, judged=True)
    assert "call" not in answer and "/cancel run=runs/baseline-ddp" in answer["reply"]
    assert conversation.turn("ok", judged=True).get("call", {}).get("name") != "cancel_run"


# --- near misses: the action ordered still acts -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "command", "args"),
    [
        # (a relayed order alone, "Marta asked me to cancel tp-try", is asked: test_understanding_held_back_english.py)
        ("Marta asked me to cancel tp-try, so please cancel it", "cancel", {"run": "runs/tp-try"}),
        ("kill tp-try, no point keeping it alive", "cancel", {"run": "runs/tp-try"}),
        ("stop tp-try", "cancel", {"run": "runs/tp-try"}),
        ("benchmark tp-try, no need to ask me first", "bench", {"model": "runs/tp-try"}),
        ("cancel tp-try, nobody uses it", "cancel", {"run": "runs/tp-try"}),
        ("cancel tp-try whether or not it finished", "cancel", {"run": "runs/tp-try"}),
        ("not sure what the default lr is; train 12 steps with lr 3e-4", "run", {"steps": 12}),
        ("launch 12 steps, it would be good to see the loss curve", "run", {"steps": 12}),
        ("not sure why tp-try is so slow, kill it", "cancel", {"run": "runs/tp-try"}),
        ("stop asking and cancel tp-try", "cancel", {"run": "runs/tp-try"}),
    ],
)
def test_an_ordered_action_still_acts(text, command, args, known):
    read_as(text, command, args, known)
