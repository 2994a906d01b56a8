"""agent.understanding on Italian and Hinglish negations, deletions and times to come said with ONE word of the
language only (normalise.ITALIAN_ALONE, normalise.HINGLISH_ALONE): new sentences of each kind, not the probe's. A
negation beside an action ("non fermare", "mat karna", "na karo", "karne ki zaroorat nahi") holds it back, a deletion
("cancella", "elimina", "... ki history saaf kar do") is refused, "domani"/"kal" (tomorrow) hold a launch back, "non
senza" (not without) keeps the setting; near misses in English ("do not cancel", "non-stop", "a non issue", "na",
"format") read as before.

The fixture repository is the benchmark's (bench.agent_understanding.build_fixture), as in tests/test_understanding.py.
"""

from __future__ import annotations

import pytest

from agent.understanding.normalise import normalise
from tests.understanding_support import read, read_as


@pytest.mark.parametrize(
    "text",
    [
        # Italian: a negated action, or no need of it
        "non fermare baseline-ddp",
        "non riprendere baseline-ddp",
        "non serve riprendere baseline-ddp",
        "non aprire la PR per lr-scan",
        "non voglio una PR per lr-scan",
        # Hinglish: one word of the language, the negation beside the verb
        "baseline-ddp stop na karo",
        "baseline-ddp ko cancel kabhi mat karna",
        "baseline-ddp ko resume karne ki zaroorat nahi",
        "lr-scan ka PR kholne ki koi zaroorat nahi hai",
        # a time to come
        "lancia 20 step domani",
        "20 steps kal chala do",
    ],
)
def test_a_negated_or_put_off_action_is_held_back(text, known):
    intent = read(text, known)
    assert intent.clarify and intent.refusal is None


@pytest.mark.parametrize(
    "text",
    ["elimina il run baseline-ddp", "cancella lo sweep lr-scan", "baseline-ddp ki history saaf kar do"],
)
def test_a_deletion_said_in_one_word_of_the_language_is_refused(text, known):
    assert read(text, known).refusal


@pytest.mark.parametrize(
    ("text", "command", "args"),
    [
        ("ferma baseline-ddp", "cancel", {"run": "runs/baseline-ddp"}),
        ("baseline-ddp ko dobara shuru kar do", "resume", {"run": "runs/baseline-ddp"}),
        # "non senza": not without, so compile stays as it is
        ("lancia 20 step su 2 GPU, non senza compile", "run", {"nproc": 2, "steps": 20}),
        ("PR nahi, sirf report likh do lr-scan ki", "report", {"sweep": "sweeps/lr-scan"}),
    ],
)
def test_an_action_asked_in_one_word_of_the_language(text, command, args, known):
    read_as(text, command, args, known)
    assert "train.compile=false" not in read(text, known).args.get("set", [])


def test_non_before_a_setting_never_turns_it_on(known):
    assert "train.precision=fp8" not in read("run 20 steps, non in fp8", known).args.get("set", [])


@pytest.mark.parametrize(
    "text",
    ["a non issue: cancel r1", "run 10 steps non-stop on 2 gpus", "format the report for layouts-nov",
     "na, cancel r1", "show me the mat file results of r1", "do not cancel r1"],
)  # fmt: skip
def test_english_with_non_na_or_mat_reads_as_before(text):
    # near misses: "non" before no Italian word, "non-stop", "na" and "mat" before no verb of doing
    assert normalise(text) == text


@pytest.mark.parametrize(
    ("text", "run"),
    [
        # "band kar do" stops a run of the repository's; "band mat karo" keeps it; "mat bhoolna" is no negation
        ("baseline-ddp ko band mat karna, tp-try ko band kar do", "runs/tp-try"),
        ("yaad rakhna aur mat bhoolo, baseline-ddp ko band kar do", "runs/baseline-ddp"),
    ],
)
def test_band_kar_do_stops_a_named_run(text, run, known):
    read_as(text, "cancel", {"run": run}, known)


def test_band_kar_do_of_a_setting_still_turns_it_off(known):
    read_as("packing band kar do yaar, 20 steps 2 gpu pe chala do", "run",
            {"nproc": 2, "steps": 20, "set": ["data.packing=false"]}, known)  # fmt: skip


def test_a_stop_taken_back_with_nahi_nahi_does_nothing(known):
    intent = read("baseline-ddp band kar do? nahi nahi, rehne do", known)
    assert intent.command != "cancel" or intent.clarify
