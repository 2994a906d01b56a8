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
from agent.understanding.second_reading import (
    COMMAND_TOOLS,
    EXAMPLES,
    TOOL_WORDS,
    NaiveBayes,
    example_files,
    features,
    label,
    read_examples,
)
from bench.agent_understanding import Conversation, build_fixture
from tests.understanding_support import read


def test_the_examples_name_every_tool_the_parser_calls_first():
    labels = {name for _, name in read_examples()}
    tools = {tool for tools in COMMAND_TOOLS.values() for tool in tools}
    assert tools <= labels and tools <= set(TOOL_WORDS)
    assert {"ask", "refuse"} <= labels


def test_a_set_left_out_of_the_fit_is_read_by_its_likeliest_label():
    """Fitted without fresh_bf (its outside author's 105 requests), the likeliest label is the expected one for
    most of them (BENCHMARKS.md: 92% over the fresh sets, left out a sixth at a time)."""
    left_out = EXAMPLES / "fresh_bf.jsonl"
    model = NaiveBayes(read_examples(path for path in example_files() if path != left_out))
    items = [json.loads(line) for line in left_out.read_text().splitlines() if line.strip()]
    right = 0
    for item in items:
        chances = model.probabilities(features(item["request"], bool(item.get("history"))))
        right += max(chances, key=chances.__getitem__) == label(item["expect"])
    assert right >= 0.85 * len(items)


@pytest.mark.parametrize(
    ("text", "other"),
    [
        # fresh_bc: a launch read as a question about the sweep's winner
        ("How about 4 GPUs, FSDP, 50 steps, lr 3e-4, weight decay 0.1, and why not skip the warmup entirely, no "
         "warmup steps?", "launch_run"),
        # fresh_bc: a launch said in Portuguese, read as r1's results
        ("sem compile e sem activation checkpointing, fsdp em 4 gpus, zero stage 3, 40 steps, beleza?", "launch_run"),
        # fresh_bd: the sweep's summary file, read as its trials
        ("I should be grateful for sight of the learning-rate sweep's summary file itself, rather than a digest of it.",
         "read_file"),
        # the rules' own runner-up (a read of the sweep) is what the examples read
        ("train the winner of sweeps/lr-scan", "read_sweep"),
    ],
)  # fmt: skip
def test_a_reading_both_readers_doubt_is_asked_naming_both(text, other, known):
    intent = read(text, known)
    assert intent.clarify is not None
    assert intent.clarify.startswith("Should I ") and intent.clarify.endswith("? yes / edit")
    assert f"It also reads as a request to {TOOL_WORDS[other]}: which do you mean?" in intent.clarify


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


def test_a_yes_to_the_question_runs_the_parsers_reading(tmp_path):
    """The question offers the parser's reading ("yes" runs it, still through the approval); the other reading is
    named for the user to say instead."""
    conversation = Conversation(build_graph(OfflinePlanner(), InMemorySaver()), build_fixture(tmp_path / "repo"), "t")
    question = conversation.turn("train the winner of sweeps/lr-scan", judged=True)["reply"]
    assert question.startswith("Should I start a training run (")
    assert conversation.turn("yes", judged=True)["call"]["name"] == "launch_run"
