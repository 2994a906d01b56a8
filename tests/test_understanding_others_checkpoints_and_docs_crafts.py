"""A checkpoint known only by who made it and when (asked: no file records it), and findings joined into the docs
with a craft's verb ("graft", "splice", "weave"): an update of the docs, not a read of them."""

from __future__ import annotations

from tests.understanding_support import earlier_turn, read

SWEEP_READ = earlier_turn("read_trials", {"sweep": "sweeps/lr-scan"}, "what did lr-scan find?")


def test_a_checkpoint_someone_named_made_some_time_ago_is_asked_about(known) -> None:
    for text in ("benchmark the checkpoint that Priya trained two weeks ago",
                 "evaluate di model weh Tunde train last month"):  # fmt: skip
        intent = read(text, known)
        assert intent.command == "bench" and intent.clarify, text


def test_a_checkpoint_of_a_named_run_is_benchmarked(known) -> None:
    intent = read("benchmark runs/tp-try, the checkpoint that Priya trained two weeks ago", known)
    assert (intent.command, intent.args.get("model"), intent.clarify) == ("bench", "runs/tp-try", None)


def test_findings_spliced_into_the_docs_update_them(known) -> None:
    for text in ("splice those results into docs/training.md, please", "weave what it found into the README"):
        intent = read(text, known, SWEEP_READ)
        assert (intent.command, intent.clarify) == ("docs", None), text  # the sweep is the conversation's


def test_the_docs_asked_about_are_still_read(known) -> None:
    intent = read("what does docs/training.md say about the learning rate?", known, SWEEP_READ)
    assert intent.command == "read"
