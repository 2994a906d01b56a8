"""agent.understanding on the kinds of phrasing fresh_ae's and fresh_af's requests showed (new sentences of each kind,
not the sets'), each with a near miss that must keep its reading: a launch read from a sentence with no launch verb
and no setting ("run" there a noun) is asked about, never the defaults launched; a benchmark's private labels taken
away to be used elsewhere ("fetch the hidden labels so I can ...") are refused like labels shown; training refused
and an evaluation asked ("do not train anything, only evaluate r1") is a benchmark; a report written with no article
("write report of ...") into the docs; the docs brought in line with findings; a run "still chugging" or "come to a
halt" is its status; every run with how each ended, or the runs table queried in SQL, is the list of runs.

The fixture repository is the benchmark's (bench.agent_understanding.build_fixture), as in tests/test_understanding.py.
"""

from __future__ import annotations

import pytest

from tests.understanding_support import read, read_as


@pytest.mark.parametrize(
    "text",
    [
        "Kindly expedite the run and do the necessary.",
        "Every run, and how each of them went, please.",
    ],
)
def test_a_launch_with_no_launch_verb_and_no_setting_is_asked(text, known):
    intent = read(text, known)
    assert intent.clarify and intent.refusal is None


def test_a_launch_verb_still_launches_the_defaults(known):
    # near miss: "start" is a launch verb, so the defaults are what was asked for
    intent = read("Kindly start the run and do the necessary.", known)
    assert (intent.command, intent.clarify) == ("run", None)


@pytest.mark.parametrize(
    "text",
    [
        "Fetch the hidden labels of the eval; I want to score r1 by hand.",
        "Grab the benchmark's gold answers so I can check baseline-ddp item by item.",
    ],
)
def test_private_labels_taken_away_are_refused(text, known):
    intent = read(text, known)
    assert intent.refusal and "labels" in intent.refusal and intent.command == "help"


def test_a_benchmark_score_fetched_is_no_refusal(known):
    # near miss: the aggregate score is the benchmark's own to give
    intent = read("Get the benchmark score for r1.", known)
    assert intent.refusal is None and intent.command != "help"


def test_training_refused_and_an_evaluation_asked_is_a_benchmark(known):
    read_as("No training please. Just evaluate runs/baseline-ddp on the benchmark.", "bench", {}, known)


def test_nothing_run_and_an_evaluation_asked_is_no_benchmark(known):
    # near miss: a benchmark is run too, so "don't run anything" holds it back
    intent = read("Don't run anything, only evaluate r1 on the benchmark.", known)
    assert intent.command != "bench" or intent.clarify


def test_a_report_with_no_article_into_the_docs_is_a_report(known):
    read_as("Kindly make summary report for lr-scan into the documentation.", "report", {}, known)


def test_docs_brought_in_line_are_updated(known):
    read_as("Bring the readme up to date with what lr-scan found.", "docs", {}, known)


def test_a_docs_file_shown_is_read(known):
    # near miss: no agreement asked, only the file
    assert read("Show me docs/training.md", known).command == "read"


@pytest.mark.parametrize("text", ["is tp-try still chugging along", "Has r1 come to a halt yet?"])
def test_still_working_or_come_to_rest_is_status(text, known):
    read_as(text, "status", {}, known)


def test_a_figure_that_came_to_rest_is_results(known):
    # near miss: the loss coming to rest is a figure of the run
    assert read("the loss came to rest at 2.1 for r1?", known).command == "results"


@pytest.mark.parametrize(
    "text", ["show each run with how it ended", "select name, steps from runs where layout = 'fsdp'"]
)
def test_every_run_with_its_end_or_the_runs_table_is_the_list(text, known):
    read_as(text, "runs", {}, known)


def test_one_run_and_how_it_finished_is_status(known):
    # near miss: one run named
    assert read("how did r1 finish", known).command == "status"


def test_one_run_queried_in_sql_is_no_list(known):
    # near miss: "from runs/r1" names one run, whose figures are asked
    assert read("SELECT loss, step_time FROM runs/r1", known).command != "runs"
