"""A question that names one reading ("Do you want me to run (/run nproc=2, layout=tp=2)? yes / edit") and the
user's answer, through the agent's real graph in the benchmark's fixture repository: a yes runs exactly that
reading (still through the approval), a no does nothing, and a yes with no such question before it acts on
nothing."""

from __future__ import annotations

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from agent.graph import build_graph
from agent.offline import OfflinePlanner
from agent.understanding import context_of, parse_request
from bench.agent_understanding import Conversation, build_fixture


@pytest.fixture(scope="module")
def chat(tmp_path_factory):
    """A new conversation in the fixture repository for each call."""
    repo = build_fixture(tmp_path_factory.mktemp("confirm") / "repo")
    graph = build_graph(OfflinePlanner(), InMemorySaver())
    threads = iter(range(1000))
    return lambda: Conversation(graph, repo, f"t{next(threads)}")


@pytest.mark.parametrize(
    "request_, answer, call",
    [
        ("the docs say to use tp=2; could we try that on 2 gpus?", "yes",
         ("launch_run", {"nproc": 2, "layout": "tp=2"})),
        ("cancel r1 at 17:00", "yes please", ("cancel_run", {"run": "runs/r1"})),
        ("so we launch configs/long.yaml on two GPUs with ddp, no?", "Yes, do it.",
         ("launch_run", {"nproc": 2, "layout": "dp_replicate=2", "experiment": "configs/long.yaml"})),
    ],
)  # fmt: skip
def test_a_yes_runs_the_reading_the_question_named(chat, request_, answer, call):
    conversation = chat()
    question = conversation.turn(request_, judged=True)["reply"]
    assert question.endswith("? yes / edit")  # its quoted call is no unbacked figure: no footnote
    name, args = call
    assert conversation.turn(answer, judged=True) == {"call": {"name": name, "args": args}}


@pytest.mark.parametrize("answer", ["no", "nope", "never mind"])
def test_a_no_does_nothing(chat, answer):
    conversation = chat()
    conversation.turn("cancel r1 at 17:00", judged=True)
    assert conversation.turn(answer, judged=True) == {
        "reply": "Nothing done. Say what to change, or give the command yourself (`/help` lists them)."
    }


def test_a_yes_acts_only_on_a_reading_the_question_just_before_named(chat):
    assert "call" not in chat().turn("yes", judged=True)  # no question before it
    conversation = chat()
    conversation.turn("train bs 16 on 2 gpus", judged=True)  # asks what 16 is: it names no reading to say yes to
    assert "call" not in conversation.turn("yes", judged=True)
    conversation = chat()
    conversation.turn("cancel r1 at 17:00", judged=True)
    conversation.turn("loss of r1?", judged=False)  # something else came between
    assert "call" not in conversation.turn("yes", judged=True)


def test_a_call_as_a_question_quotes_it_reads_as_typed():
    intent = parse_request("/run nproc=2, layout=dp_shard=2,tp=2, steps=10", context_of([]))
    assert (intent.command, intent.args) == ("run", {"nproc": "2", "layout": "dp_shard=2,tp=2", "steps": "10"})
