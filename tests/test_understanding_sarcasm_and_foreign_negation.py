"""agent.understanding on French, German and Portuguese negations, conditions and take-backs, and on an action asked
as a question then scorned (new sentences of each kind, not the sets', each with a near miss that must keep its
reading): French "ne ... pas/rien/jamais/plus", "pas question de", "évitez de", "jamais de"; German "nicht" last or
after the verb, "kein(en)", "nie", the cancel split around its run ("brich X ab"); French "seulement si", "ne ... que
si", "plus tard", "X aimerait que tu ..., mais attends mon ok"; Portuguese "não, pera, deixa ele terminar", "pediu
pra ..., mas espera eu confirmar", "quando ... terminar"; German "erst, wenn", "falls"; and "cancel r1? As if.",
"..., psych!", "..., said no one ever". None of them may act: a negation never flips.

The fixture repository is the benchmark's (bench.agent_understanding.build_fixture), as in tests/test_understanding.py.
"""

from __future__ import annotations

import pytest

from agent.understanding.intents import ACTIONS
from agent.understanding.known import Known
from tests.understanding_support import read, read_as


def acted(text: str, known: Known) -> bool:
    """`text` is read as an action made at once, with no question asked first."""
    intent = read(text, known)
    return intent.command in ACTIONS and intent.clarify is None


# --- French and German negations: never an action --------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "N'ouvre pas de PR pour le sweep layouts-nov.",
        "Ne lance rien sur les 4 gpus ce soir.",
        "Pas question de relancer le sweep lr-scan.",
        "Ne lance plus de run sur 2 gpus avec dp_shard=2 pour 20 steps.",
        "Jamais de run sur 2 gpus avec dp_shard=2 pour 20 steps.",
        "Évitez d'annuler baseline-ddp.",
        "Je ne veux pas que tu annules baseline-ddp.",
        "Tu ne vas pas relancer tp-try, hein ?",
        "Starte den Lauf auf 4 GPUs mit dp_shard=4 bitte nicht.",
        "Bitte keinen Lauf auf 2 GPUs mit dp_shard=2 starten.",
        "Starte nie einen Lauf auf 4 GPUs.",
        "Brich baseline-ddp bitte nicht ab.",
        "Bitte keinen PR für layouts-nov öffnen.",
    ],
)
def test_a_negation_never_acts(text: str, known: Known) -> None:
    assert not acted(text, known)


def test_french_launch_still_launches(known: Known) -> None:  # near miss
    read_as("lance le run sur 2 gpus avec dp_shard=2", "run", {"nproc": 2, "layout": "dp_shard=2"}, known)


def test_german_cancel_split_around_its_run_cancels(known: Known) -> None:  # near miss
    read_as("Brich baseline-ddp ab, es blockiert die GPUs.", "cancel", {"run": "runs/baseline-ddp"}, known)


def test_german_not_then_wait_waits(known: Known) -> None:
    intent = read("Brich baseline-ddp nicht ab, warte lieber auf tp-try.", known)
    assert (intent.command, intent.args.get("wait"), intent.args.get("run")) == ("status", "yes", "runs/tp-try")


# --- conditions, deferrals, relays and take-backs in French, Portuguese and German: held back -------------------------


@pytest.mark.parametrize(
    "text",
    [
        "Relance tp-try seulement si baseline-ddp est fini.",
        "N'annule le baseline-ddp que si r1 est fini.",
        "Pas maintenant, plus tard lance le run sur 4 gpus.",
        "Dana aimerait que tu annules baseline-ddp, mais attends mon ok.",
        "cancela o baseline-ddp? não, pera, deixa ele terminar",
        "o Sam pediu pra cancelar o tp-try, mas espera eu confirmar",
        "quando o tp-try terminar, roda o benchmark nele",
        "Schreib den Bericht zu layouts-nov erst, wenn tp-try fertig ist.",
        "Falls baseline-ddp fertig ist, brich tp-try ab.",
        "Dana möchte, dass du tp-try abbrichst. Ich nicht.",
    ],
)
def test_a_condition_deferral_or_take_back_is_held_back(text: str, known: Known) -> None:
    assert not acted(text, known)


def test_portuguese_run_still_runs(known: Known) -> None:  # near miss
    read_as("roda com 2 gpus, dp_shard=2, 20 steps", "run", {"nproc": 2, "layout": "dp_shard=2", "steps": 20}, known)


def test_portuguese_cancel_still_cancels(known: Known) -> None:  # near miss
    read_as("cancela o baseline-ddp, tá travando as gpus", "cancel", {"run": "runs/baseline-ddp"}, known)


# --- an action asked, then scorned: no order -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "Relaunch tp-try? As if.",
        "Cancel baseline-ddp? Not a chance, it's nearly done.",
        "Benchmark r1? In your dreams.",
        "Start a sweep with 8 trials? Over my dead body.",
        "A PR for layouts-nov, shall we? Nah.",
        "Resume the lr-scan sweep, psych!",
        "Kill tp-try, said nobody ever.",
        "Yeah right, write a report for layouts-nov that no one reads.",
    ],
)
def test_a_scorned_action_is_no_order(text: str, known: Known) -> None:
    assert not acted(text, known)


def test_an_action_answered_yes_acts(known: Known) -> None:  # near miss
    read_as("cancel tp-try? yes, do it", "cancel", {"run": "runs/tp-try"}, known)


def test_yeah_right_now_acts(known: Known) -> None:  # near miss: no scorn
    read_as("Cancel tp-try? Yeah, right now.", "cancel", {"run": "runs/tp-try"}, known)


def test_a_setting_asked_then_refused_keeps_the_launch(known: Known) -> None:  # near miss: "nah" answers the setting
    read_as("train 20 steps on 4 gpus, compile? nah, keep it", "run", {"nproc": 4, "steps": 20}, known)
