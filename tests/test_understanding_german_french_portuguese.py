"""agent.understanding on requests written partly in German, French or Portuguese (new sentences of each kind, not
the sets', each with a near miss that must keep its reading): "N nodes à M GPUs" is M in each node; German nouns of
a report or configuration; Portuguese "num/numa X só" (on one X), "espera ... terminar" (wait until it ends), "sem
compilar" (without compile), "tá muito alto" (a value criticised, never the one asked for) and "não," (the no that
corrects); French function words, and its "ne ... pas", which never flips.

The fixture repository is the benchmark's (bench.agent_understanding.build_fixture), as in tests/test_understanding.py.
"""

from __future__ import annotations

import pytest

from agent.understanding.known import Known
from tests.understanding_support import earlier_turn, read

PLANNED = earlier_turn(
    "plan_layouts", {"model": "llama-3.1-8b", "devices": 8, "gpu": "h100"}, "plan llama-3.1-8b on 8 h100"
)
SUMMARY_READ = earlier_turn("read_sweep", {"sweep": "sweeps/layouts-nov"}, "Read the summary of sweeps/layouts-nov.")


# --- "N nodes à M GPUs": M in each node ------------------------------------------------------------------------------


def test_nodes_a_gpus_counts_the_gpus_of_each_node(known: Known) -> None:
    intent = read("plan qwen2.5-7b on 2 nodes à 4 H100", known)
    assert (intent.command, intent.args.get("nodes"), intent.args.get("devices")) == ("plan", 2, 4)


def test_gpus_across_nodes_still_counts_them_in_all(known: Known) -> None:  # near miss
    intent = read("plan qwen2.5-7b on 8 H100 across 4 nodes", known)
    assert (intent.args.get("nodes"), intent.args.get("devices")) == (4, 2)


# --- German nouns ----------------------------------------------------------------------------------------------------


def test_german_final_report_into_the_docs_is_a_report(known: Known) -> None:
    intent = read("ok, put the Abschlussbericht for it into the docs on a local branch", known, SUMMARY_READ)
    assert (intent.command, intent.args.get("sweep")) == ("report", "sweeps/layouts-nov")


def test_docs_updated_with_numbers_stay_docs(known: Known) -> None:  # near miss
    assert read("update the docs with its numbers", known, SUMMARY_READ).command == "docs"


# --- Portuguese ------------------------------------------------------------------------------------------------------


def test_num_x_so_is_one_gpu(known: Known) -> None:
    intent = read("qwen2.5-7b numa h100 só, cabe?", known)
    assert (intent.command, intent.args.get("devices"), intent.args.get("gpu")) == ("plan", 1, "h100-sxm")


def test_a_count_of_gpus_stays_its_count(known: Known) -> None:  # near miss
    assert read("qwen2.5-7b em 4 h100, cabe?", known).args.get("devices") == 4


def test_wait_until_it_ends_is_a_wait(known: Known) -> None:
    intent = read("oi, espera o baseline-ddp terminar e me fala, tá?", known)
    assert (intent.command, intent.args.get("wait"), intent.args.get("run")) == ("status", "yes", "runs/baseline-ddp")


def test_tell_me_the_results_reads_them(known: Known) -> None:  # near miss
    assert read("me fala os resultados do r1", known).command == "results"


def test_without_compiling_turns_compile_off(known: Known) -> None:
    intent = read("roda 10 steps com 2 gpus sem compilar", known)
    assert (intent.command, intent.args.get("set")) == ("run", ["train.compile=false"])


def test_not_run_stays_held_back(known: Known) -> None:  # near miss: "não" before the action holds it back
    assert read("não roda com 2 gpus sem compilar", known).command != "run"


@pytest.mark.parametrize(
    ("text", "rate", "nproc"),
    [
        ("lr 3e-4 tá muito baixo, roda com 1e-3 em 2 gpus", "1e-3", 2),
        ("the lr 2e-3 seems too high, train on 4 gpus with 5e-4", "5e-4", 4),
    ],
)
def test_a_criticised_rate_is_not_the_one_asked_for(text: str, rate: str, nproc: int, known: Known) -> None:
    intent = read(text, known)
    assert (intent.command, intent.args.get("nproc"), intent.args.get("set"), intent.clarify) == (
        "run", nproc, [f"train.lr={rate}"], None)  # fmt: skip


def test_a_criticised_rate_alone_asks_for_the_new_one(known: Known) -> None:  # near miss
    intent = read("lr 1e-3 is too high, run on 2 gpus", known)
    assert "train.lr=1e-3" not in intent.args.get("set", []) and intent.clarify


def test_nao_no_then_not_run_is_held_back(known: Known) -> None:
    launched = earlier_turn("launch_run", {"nproc": 2, "steps": 20}, "roda 20 steps com 2 gpus")
    assert read("não, não roda", known, launched).command != "run"


# --- French ----------------------------------------------------------------------------------------------------------


def test_french_follow_up_changes_the_plan(known: Known) -> None:
    intent = read("Et avec seq_len 2048 aussi?", known, PLANNED)
    assert (intent.command, intent.args.get("seq_len"), intent.args.get("model")) == ("plan", 2048, "llama-3.1-8b")


@pytest.mark.parametrize(
    "text",
    [
        "ne lance pas 10 steps sur 4 gpus",
        "ne relance pas le run sur 2 gpus",
        "lance pas 30 steps sur 2 gpus",  # spoken French, without its "ne"
        "le relance pas sur 4 gpus",
    ],
)
def test_french_negation_never_launches(text: str, known: Known) -> None:
    assert read(text, known).command != "run"


def test_french_launch_launches(known: Known) -> None:  # near miss
    intent = read("lance 20 steps sur 2 gpus sans compile", known)
    assert (intent.command, intent.args.get("nproc"), intent.args.get("steps")) == ("run", 2, 20)


# --- the experiment's own model on a count of named GPUs: a plan, never a launch -------------------------------------


def test_own_model_on_named_gpus_is_a_plan(known: Known) -> None:
    intent = read("Kontrolle: the experiment's own model on 4 L40S, seq_len 1024.", known)
    assert (intent.command, intent.args.get("devices"), intent.args.get("seq_len")) == ("plan", 4, 1024)


def test_experiment_file_with_steps_still_launches(known: Known) -> None:  # near miss
    assert read("configs/long.yaml, 2 gpus, 30 steps", known).command == "run"


# --- a sweep moved to another experiment file ------------------------------------------------------------------------

SWEPT = earlier_turn("run_sweep", {"trials": 6}, "roda um sweep com 6 trials")


@pytest.mark.parametrize(
    "text",
    ["não, troca pra configs/long.yaml, mesmo número de trials", "nope, switch it to configs/long.yaml, same trials"],
)
def test_sweep_moved_to_another_file_keeps_its_trials(text: str, known: Known) -> None:
    intent = read(text, known, SWEPT)
    assert (intent.command, intent.args.get("experiment"), intent.args.get("trials")) == (
        "sweep",
        "configs/long.yaml",
        6,
    )


def test_file_shown_after_a_sweep_is_read(known: Known) -> None:  # near miss
    assert read("show configs/long.yaml", known, SWEPT).command == "read"


def test_sweep_on_a_file_negated_is_not_run(known: Known) -> None:  # near miss: the negation holds it back
    assert read("no, don't sweep configs/long.yaml", known, SWEPT).command != "sweep"
