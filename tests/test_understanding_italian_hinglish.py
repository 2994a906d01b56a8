"""agent.understanding on requests in Italian and in Hinglish (Hindi in Latin letters mixed with English), read word
for word where two words of the language at least say so (normalise.ITALIAN, normalise.HINGLISH): new sentences of
each kind, not the sets'. Negations never flip ("senza", "niente", "non"; "mat", "nahi", "na" before the verb),
"na" after the verb only softens it, a deletion in either language is refused (and one refused is no deletion),
"kal" (tomorrow) puts a launch off, "har node pe 4" is 4 per node; English sentences holding "pe", "do", "na", "ka",
"ke" read as they did.

The fixture repository is the benchmark's (bench.agent_understanding.build_fixture), as in tests/test_understanding.py.
"""

from __future__ import annotations

import pytest

from agent.understanding.normalise import normalise
from tests.understanding_support import read, read_as


@pytest.mark.parametrize(
    ("text", "args"),
    [
        # Italian: the launch, its counts and what it is without
        ("allora, lancia 20 passi su 2 GPU senza compile, grazie",
         {"nproc": 2, "steps": 20, "set": ["train.compile=false"]}),
        ("ciao, niente packing e niente warmup, 30 passi su 2 GPU con dp_shard=2",
         {"nproc": 2, "steps": 30, "layout": "dp_shard=2", "set": ["data.packing=false", "train.warmup_steps=0"]}),
        ("allora, spegni il packing e lancia 30 passi su 4 GPU",
         {"nproc": 4, "steps": 30, "set": ["data.packing=false"]}),
        # Hinglish: the refused setting is said before its verb ("mat lagana", "mat rakhna", "na karo", "nahi chahiye")
        ("bhai 2 gpu pe 30 steps chala do, compile mat lagana",
         {"nproc": 2, "steps": 30, "set": ["train.compile=false"]}),
        ("yaar do gpu pe 20 steps chala do, warmup bhi mat rakhna",
         {"nproc": 2, "steps": 20, "set": ["train.warmup_steps=0"]}),
        ("compile na karo yaar, 10 steps 2 gpu pe chala do", {"nproc": 2, "steps": 10, "set": ["train.compile=false"]}),
        ("packing nahi chahiye, 20 steps 2 gpu pe chala do yaar",
         {"nproc": 2, "steps": 20, "set": ["data.packing=false"]}),
        # "na" after the verb softens it: packing stays on
        ("20 steps 2 gpu pe chala do na yaar, packing on kar ke",
         {"nproc": 2, "steps": 20, "set": ["data.packing=true"]}),
    ],
)  # fmt: skip
def test_a_launch_in_italian_or_hinglish_keeps_its_settings(text, args, known):
    read_as(text, "run", args, known)


@pytest.mark.parametrize(
    ("text", "command", "args"),
    [
        ("quante GPU ci sono su questa macchina, allora?", "hardware", {}),
        ("kitne gpu hain is box pe bhai, batao na", "hardware", {}),
        ("runs ki list dikha do na yaar", "runs", {}),
        # "non lanciare niente": no launch, only the reading asked
        ("allora, non lanciare niente, fammi solo vedere i risultati di r1", "results", {"run": "runs/r1"}),
        ("3 node, har node pe 4 h100 — llama-3.1-70b plan kar ke batao", "plan",
         {"nodes": 3, "devices": 4, "model": "llama-3.1-70b"}),
    ],
)  # fmt: skip
def test_a_reading_or_plan_in_italian_or_hinglish(text, command, args, known):
    read_as(text, command, args, known)


@pytest.mark.parametrize(
    "text",
    ["cancella il run tp-try, grazie", "lr-scan ka sab kuch delete kar do bhai",
     "mi servono le etichette del benchmark, grazie"],
)  # fmt: skip
def test_a_deletion_or_the_labels_asked_in_italian_or_hinglish_is_refused(text, known):
    assert read(text, known).refusal


@pytest.mark.parametrize(
    ("text", "run"),
    [("allora non cancellare tp-try, fammi vedere i risultati", "runs/tp-try"),
     ("r1 delete mat karna yaar, bas uske results dikha do", "runs/r1")],
)  # fmt: skip
def test_a_deletion_refused_in_italian_or_hinglish_is_no_deletion(text, run, known):
    intent = read(text, known)
    assert intent.refusal is None and (intent.command, intent.args.get("run")) == ("results", run)


def test_kal_puts_a_hinglish_launch_off(known):
    intent = read("kal 20 steps 2 gpu pe chala dena yaar", known)
    assert intent.command == "run" and intent.clarify  # held back: asked, never launched now


@pytest.mark.parametrize(
    "text",
    ["do 20 steps on 2 GPUs with rope pe scaling, na", "is the loss band ok for r1? do tell me",
     "ka-boom, the run r1 died; is it the ke value?", "run 30 steps on 2 GPUs, do not use compile, na",
     "plan llama-3.1-8b on 8 MI300X, ma'am"],
)  # fmt: skip
def test_english_with_words_of_those_languages_reads_as_before(text):
    # near misses: one word of Hindi or Italian at most, or inside a name ("ka-boom", "MI300X"), is no such sentence
    assert normalise(text) == text


def test_na_at_the_end_of_an_english_request_keeps_its_negation(known):
    read_as("Please do 20 steps on 2 GPUs, no compile, na", "run",
            {"nproc": 2, "steps": 20, "set": ["train.compile=false"]}, known)  # fmt: skip


@pytest.mark.parametrize(
    ("text", "command", "args"),
    [
        # the action refused before "mat"/"na" is held back, the one asked after its object ("ko") is done
        ("r1 cancel mat karna bhai, bas status batao", "status", {"run": "runs/r1"}),
        ("20 steps 2 gpu pe abhi launch mat karo yaar, bas plan batao", "plan", {"devices": 2}),
        ("tp-try ko cancel kar do yaar", "cancel", {"run": "runs/tp-try"}),
    ],
)
def test_a_hinglish_action_refused_or_asked_before_its_verb(text, command, args, known):
    read_as(text, command, args, known)
