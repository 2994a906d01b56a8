"""agent.understanding.second_reading: a naive Bayes reading of which tool a request asks for, fitted on the
labelled examples, that turns the parser's action into a question where both readers point to another tool.

The sentences held back below come from fresh_bc and fresh_bd, sets of outside authors that none of the examples
came from (the parser read each as the wrong tool when they were first judged)."""

from __future__ import annotations

import json

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from agent.graph import build_graph
from agent.offline import OfflinePlanner
from agent.understanding.second_reading import COMMAND_TOOLS, TOOL_WORDS, NaiveBayes, features, model, read_examples
from bench import second_reading as second_reading_bench
from bench.agent_understanding import Conversation, build_fixture
from tests.understanding_support import read


def test_the_examples_name_every_tool_the_parser_calls_first():
    labels = {name for _, name in read_examples()}
    tools = {tool for tools in COMMAND_TOOLS.values() for tool in tools}
    assert tools <= labels and tools <= set(TOOL_WORDS)
    assert {"ask", "refuse"} <= labels


def test_sets_left_out_of_the_fit_are_read_by_their_likeliest_label(tmp_path):
    """bench.second_reading: fitted without a sixth of the outside authors' sets at a time, the likeliest label is
    the expected one for most of their requests, and sure of another tool for few of those that expect a tool."""
    out = tmp_path / "second_reading.json"
    assert second_reading_bench.main(["--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["items"] >= 3000 and result["machine"]["cores"] >= 1
    assert result["likeliest_right_pct"] >= 85
    assert result["sure_of_another_tool_pct_of_tools"] <= 2


@pytest.mark.parametrize(
    ("text", "offered", "named"),
    [
        # fresh_bg: a wait read as r1's results; the other reading (the wait) offered first
        ("Waiting of r1 until the end, please.", ("status", {"run": "runs/r1", "wait": "yes"}), "read_results"),
        # fresh_bh: a sweep read as a look at the file it names
        ("A sweep, I think, is now in order: some ten trials upon the long configuration, configs/long.yaml, so that "
         "we may set it beside the record of earlier experiments.",
         ("sweep", {"experiment": "configs/long.yaml", "trials": 10}), "read_file"),
        # fresh_bj: a pull request read as the report alone
        ("Big finale: write up the lr-scan, push the branch and open that pull request for the whole audience!",
         ("pr", {"sweep": "sweeps/lr-scan"}), "write_report"),
        # fresh_bc: a launch read as a question about the sweep; the launch would ask something itself, so the rules'
        # reading is offered and the launch named
        ("How about 4 GPUs, FSDP, 50 steps, lr 3e-4, weight decay 0.1, and why not skip the warmup entirely, no "
         "warmup steps?", ("why", {"sweep": "sweeps/lr-scan"}), "launch_run"),
    ],
)  # fmt: skip
def test_a_reading_both_readers_doubt_is_asked_naming_both(text, offered, named, known):
    intent = read(text, known)
    command, args = offered
    assert intent.command == command and args.items() <= intent.args.items()
    assert intent.clarify.startswith("Should I ") and intent.clarify.endswith("? yes / edit")
    assert f"It also reads as a request to {TOOL_WORDS[named]}: which do you mean?" in intent.clarify


@pytest.mark.parametrize(
    ("text", "command"),
    [
        ("sweep 6 trials, whichever layout wins", "sweep"),  # the examples read a sweep's winner; the rules, far more
        ("plot x and y for r1", "results"),  # the examples' likeliest (a wait) is less likely than not
        ("cancel tp-try whether or not it finished", "cancel"),
    ],
)
def test_a_reading_the_rules_are_sure_of_is_not_doubted(text, command, known):
    intent = read(text, known)
    assert (intent.command, intent.clarify) == (command, None)


def test_a_yes_to_the_question_runs_the_reading_it_offered(tmp_path):
    """The question offers one reading ("yes" runs it, still through the approval) and names the other."""
    conversation = Conversation(build_graph(OfflinePlanner(), InMemorySaver()), build_fixture(tmp_path / "repo"), "t")
    question = conversation.turn("Waiting of r1 until the end, please.", judged=True)["reply"]
    assert question.startswith("Should I wait for a run to end (")
    assert conversation.turn("yes", judged=True) == {"call": {"name": "wait_run", "args": {"run": "runs/r1"}}}


def test_the_fit_is_kept_in_the_cache_and_read_back_the_same(tmp_path, monkeypatch):
    monkeypatch.setenv("MESHPILOT_CACHE", str(tmp_path))
    model.cache_clear()
    try:
        loaded = model()
    finally:
        model.cache_clear()  # the other tests' model is their session's
    (kept,) = (tmp_path / "second-reading").iterdir()
    assert sorted(path.name for path in kept.iterdir()) == ["features.json", "prior.npy", "weight.npy"]
    fitted = NaiveBayes.fit(read_examples())
    for text in ("tokens/s of r1?", "sem compile, fsdp em 4 gpus, 40 steps"):
        assert loaded.probabilities(features(text)) == pytest.approx(fitted.probabilities(features(text)))


@pytest.mark.parametrize(
    "text", ["N'ouvre pas de PR pour le sweep layouts-nov.", "Bitte keinen PR für layouts-nov öffnen."]
)
def test_an_action_refused_is_the_rules_to_read(text, known):
    """A bag of n-grams cannot tell "open a PR" from "do not open a PR": where the rules read an action refused or
    put off, the second reading is not asked (it would offer a write)."""
    clarify = read(text, known).clarify or ""
    assert "It also reads as" not in clarify
