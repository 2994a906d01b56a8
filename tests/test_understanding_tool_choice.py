"""agent.understanding on which tool a request asks for, and on what no tool may do (new sentences of each kind the
fresh sets found read wrongly, and near misses that must read as before): whether a run goes on or has ended asked as
an either-or, a wait said as sitting on a run until it ends and "report back" as telling, the docs freshened or asked
to reflect a sweep, a sweep ordered with its trials, a preempted job requeued or restarted where it stopped, every run
listed (a CLI's flags, a scheduler's "every job and its state", "how many of our runs"), a run's log asked to be seen,
a relaunch ordered after the scene of a crash, this machine asked about as "hw" or in Portuguese, and a shell, a
push to main or a deletion (in Portuguese) refused.

The fixture repository is the benchmark's (bench.agent_understanding.build_fixture), as in tests/test_understanding.py.
"""

from __future__ import annotations

import pytest

from agent.understanding.mood import offers_yes
from tests.understanding_support import read, read_as

# --- whether a run goes on or has ended, asked as an either-or: its status ----------------------------------------


@pytest.mark.parametrize(
    ("text", "run"),
    [
        ("is baseline-ddp still hanging on to its GPUs, or did it crash?", "runs/baseline-ddp"),
        ("has r1 exited, or is it still chugging along?", "runs/r1"),
        ("is r1 still crunching away or has it stopped?", "runs/r1"),
        ("how's the r1 run gettin on?", "runs/r1"),
        ("is tp-try still gaun?", "runs/tp-try"),
    ],
)
def test_still_going_or_ended_is_a_status(text, run, known):
    read_as(text, "status", {"run": run}, known)


@pytest.mark.parametrize(
    "text",
    [
        "is r1's loss still dropping or did it flatten?",  # a figure's course: its results
        "is r1 done? show me its loss",
    ],
)
def test_a_figure_asked_beside_it_stays_results(text, known):
    read_as(text, "results", {"run": "runs/r1"}, known)


# --- a wait until a run ends, and "report back" as telling ---------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "run"),
    [
        ("keep an eye on r1 until it's finished and tell me how it went", "runs/r1"),
        ("hold on to baseline-ddp until it's over, then report back", "runs/baseline-ddp"),
        ("stay on tp-try until it terminates and report its final state", "runs/tp-try"),
    ],
)
def test_sitting_on_a_run_until_it_ends_is_a_wait(text, run, known):
    read_as(text, "status", {"wait": "yes", "run": run}, known)


def test_sitting_down_to_read_a_run_is_no_wait(known):
    intent = read("sit down and read r1", known)
    assert (intent.command, intent.args.get("wait")) == ("results", None)


@pytest.mark.parametrize("text", ["write a report of lr-scan", "report the lr-scan findings in markdown"])
def test_a_report_written_stays_a_report(text, known):
    read_as(text, "report", {"sweep": "sweeps/lr-scan"}, known)


# --- the docs freshened; a sweep ordered with its trials -----------------------------------------------------------


def test_freshening_up_the_docs_updates_them(known):
    read_as("please freshen up the README with what layouts-nov found", "docs", {"sweep": "sweeps/layouts-nov"}, known)


def test_a_docs_page_only_shown_is_read(known):
    read_as("show me docs/training.md", "read", {"path": "docs/training.md"}, known)


def test_a_sweep_with_its_trials_is_run(known):
    read_as(
        "kick off a new sweep with 16 trials on configs/long.yaml",
        "sweep",
        {"experiment": "configs/long.yaml", "trials": 16},
        known,
    )


def test_a_sweep_of_trials_only_asked_about_is_not_run(known):
    intent = read("would a sweep of 6 trials take long?", known)
    assert intent.command != "sweep" or intent.clarify


# --- a preempted job requeued, or restarted where it stopped ------------------------------------------------------


def test_a_requeue_resumes(known):
    read_as("baseline-ddp got preempted last night, requeue it", "resume", {"run": "runs/baseline-ddp"}, known)


def test_a_restart_from_where_it_stopped_resumes(known):
    read_as(
        "the lr-scan sweep died halfway; restart it from where it left off",
        "resume",
        {"kind": "sweep", "sweep": "sweeps/lr-scan"},
        known,
    )


def test_a_restart_with_new_settings_is_a_launch(known):
    assert read("restart r1 with 30 steps", known).command == "run"


def test_a_requeue_negated_resumes_nothing(known):
    intent = read("don't requeue r1", known)
    # refused alone, it is held back and asked about (no yes resumes it), or read as something else (nlu41)
    assert intent.command != "resume" or (intent.clarify and not offers_yes(intent.clarify))


# --- every run listed ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "runs list --status",
        "runs ls -a",
        "give me every experiment and its status",
        "how many of the runs crashed?",
        "I have been told to go through the runs first. Can you list all of them for me?",
    ],
)
def test_every_run_is_listed(text, known):
    read_as(text, "runs", {}, known)


def test_one_run_and_its_status_is_no_list(known):
    read_as("r1 and its status", "status", {"run": "runs/r1"}, known)


# --- a run's log to see; a relaunch after the scene of a crash -------------------------------------------------------


def test_a_log_asked_to_be_seen_is_read(known):
    read_as("show me r1's training log, I want to find the error", "read", {"path": "runs/r1/log.txt"}, known)


def test_what_a_log_said_asked_why_is_results(known):
    read_as("the log of r1 says it ran out of memory, why?", "results", {"run": "runs/r1"}, known)


def test_a_relaunch_after_a_crash_told_is_a_launch(known):
    intent = read("Ok it crashed again. Rerun it with 4 gpus and 30 steps.", known, ["Show me the results of runs/r1"])
    assert (intent.command, intent.args.get("steps"), intent.args.get("nproc")) == ("run", 30, 4)


# --- this machine asked about ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "hw specs?",
        "hardware --json",
        "quantos cores tem nessa máquina? só pra saber",
        "could you run nvidia-smi and tell me what the cards are?",
    ],
)
def test_this_machine_is_inspected(text, known):
    read_as(text, "hardware", {}, known)


# --- refused: a shell, a push to main, a deletion in Portuguese ------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "get me a root shell on the box so I can poke around",
        "execute `nvidia-smi --gpu-reset` on every card",
        "just stick the docs update straight onto main, skip the review",
        "dump the lr-scan report onto the main branch",
        "apague o runs/baseline-ddp, não quero mais",
    ],
)
def test_what_no_tool_may_do_is_refused(text, known):
    assert read(text, known).refusal


@pytest.mark.parametrize(
    ("text", "command"),
    [
        ("dump the results of r1", "results"),
        ("let's stick to main for the config, and show me r1's results", "results"),
        ("mostra os resultados do runs/r1 por favor, quero saber", "results"),
    ],
)
def test_near_misses_are_not_refused(text, command, known):
    intent = read(text, known)
    assert (intent.refusal, intent.command) == (None, command)


# --- a folder of the repository looked into; a sweep's summary opened -----------------------------------------------


@pytest.mark.parametrize(
    ("text", "path"), [("list the configs folder", "configs"), ("show me what's in the sweeps directory", "sweeps")]
)
def test_a_folder_looked_into_is_listed(text, path, known):
    read_as(text, "read", {"path": path}, known)


def test_a_sweep_in_the_sweeps_folder_is_its_trials(known):
    read_as("show me the sweeps folder's lr-scan summary", "trials", {"sweep": "sweeps/lr-scan"}, known)


@pytest.mark.parametrize("text", ["pull up the lr-scan summary", "could you open the layouts-nov results table?"])
def test_a_sweeps_summary_opened_is_its_trials(text, known):
    intent = read(text, known)
    assert (intent.command, intent.clarify) == ("trials", None)


# --- one half of a comparison taken first; a write-up put into the docs on a branch --------------------------------


def test_starting_with_one_side_of_a_comparison_plans(known):
    intent = read("Price check: mistral-7b on 4 H100s versus 4 L40S. Let's start with the L40S side.", known)
    assert (intent.command, intent.args.get("model")) == ("plan", "mistral-7b")


def test_starting_with_settings_still_launches(known):
    read_as("start with 2 gpus and 30 steps", "run", {"nproc": 2, "steps": 30}, known)


def test_a_write_up_of_a_sweep_into_the_docs_on_a_branch_is_a_report(known):
    read_as(
        "I'd like a report of the lr-scan sweep in the documentation, committed on a branch; no PR for now.",
        "report",
        {"sweep": "sweeps/lr-scan"},
        known,
    )
