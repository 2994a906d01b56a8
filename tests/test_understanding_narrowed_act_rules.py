"""agent.understanding acts on a launch whose every value is stated only where a careful colleague would (the rules
of tests/test_understanding_ended_machine_and_stated_launches.py, narrowed); where in doubt it asks:

- a launch announced before a colon, a "?" after it: acted on only after an opener that names the launch ("trying
  something new:", "going with this:") and a "?" of uptalk right on its last value; a question about doing it (after
  the last value, in brackets, or after an opener that only weighs it) is asked;
- a value after an article and a word of manner ("weight decay a conservative 0.01"): taken only when nothing
  comparative, partial or corrective follows it, never an amount added, a factor, a range or an old value;
- a precision said with "only" or "alone" ("fp32 only as a fallback", "fp8 for the moment, bf16 only") picks none of
  two named and not taken back: both are asked (the rule that let it win is reverted); "do not forget fp32" keeps it;
- a courtesy about the asker's manners ("if it isn't too cheeky, launch ..."): no condition only where it stands
  alone before an order (or ends the sentence after one); a courtesy toward others, a second condition, a relay or a
  question is asked; an action judged rude is no order;
- ban/veto/forbid turn a setting off only as an order for this launch ("veto the compiler"), never a ban spoken of
  nor one for later or another run;
- a question beside "I'll review it at the approval prompt" is asked; a launch "on all of them" asks how many GPUs;
- the question proposed never carries a value the sentence refused ("Ban fp8? Unsure." proposes no fp8);
- "the gpu situation during r1" is that run's results, not this machine's hardware.

The fixture repository is the benchmark's (bench.agent_understanding.build_fixture), as in tests/test_understanding.py.
"""

from __future__ import annotations

import pytest

from agent.understanding.known import Known
from tests.understanding_support import read, read_as

# --- a launch announced before a colon ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "so trying something new: 2 gpus, dp_shard=2, 25 steps, lr 0.0005 - reasonable?",
        "trying something new: 2 gpus, dp_shard=2, 25 steps, lr 0.0005, right?",
        "trying something new: 2 gpus, dp_shard=2, 25 steps, lr 0.0005, no?",
        "trying something new: 2 gpus, dp_shard=2, 25 steps (is that allowed?)",
        "trying something new: 2 gpus, dp_shard=2, 25 steps (before the review?)",
        "bouncing an idea off you: 2 gpus, dp_shard=2, 25 steps?",
        "trying something new: 2 gpus, dp_shard=2, 25 steps, too big an lr 0.0005?",
        "trying to work out: 2 gpus, dp_shard=2, 25 steps?",
    ],
)
def test_a_question_about_an_announced_launch_is_asked(text: str, known: Known) -> None:
    assert read(text, known).clarify is not None


def test_uptalk_on_the_last_value_of_an_announced_launch_acts(known: Known) -> None:
    read_as(
        "now going with this: 2 gpus, dp_shard=2, 25 steps, lr 0.0005?",
        "run",
        {"nproc": 2, "layout": "dp_shard=2", "steps": 25, "set": ["train.lr=0.0005"]},
        known,
    )


# --- a value after an article and a word of manner ----------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "Start 2 GPUs for 30 steps with the learning rate a further 5e-5 higher.",
        "Start 2 GPUs for 30 steps, lr an extra 1e-4.",
        "Start 2 GPUs for 30 steps, the learning rate a good 2 orders of magnitude smaller.",
        "Start 2 GPUs for 30 steps, the learning rate a modest 1/10 of the default.",
        "Start 2 GPUs for 30 steps with lr a solid 1-2e-4.",
        "Start 2 GPUs for 30 steps; lr a usual 1e-3 is too much, go with 5e-4.",
        "Start 2 GPUs for 30 steps, the seq_len a healthy 512 longer.",
        "Start 2 GPUs for 30 steps with the micro batch a mere 2 above now.",
    ],
)
def test_an_amount_a_factor_or_a_correction_after_an_article_is_asked(text: str, known: Known) -> None:
    intent = read(text, known)
    assert intent.clarify is not None
    assert not any(key in str(intent.args.get("set", [])) for key in ("train.lr=", "data.seq_len", "micro_batch"))


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("Start 2 GPUs for 30 steps, weight decay a conservative 0.01.", "train.weight_decay=0.01"),
        ("Start 2 GPUs for 30 steps, warmup a modest 3 steps.", "train.warmup_steps=3"),
        ("Start 2 GPUs for 30 steps with gradient clipping a cautious 0.5.", "train.grad_clip=0.5"),
    ],
)
def test_a_value_alone_after_an_article_is_taken(text: str, value: str, known: Known) -> None:
    read_as(text, "run", {"nproc": 2, "steps": 30, "set": [value]}, known)


# --- a precision said alone ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "Start 2 GPUs for 30 steps in bf16; fp32 only as a debugging fallback.",
        "Start 2 GPUs for 30 steps; bf16 alone overflowed before, so fp32.",
        "Just fp8 is too risky: start 2 GPUs for 30 steps in bf16.",
        "Start 2 GPUs for 30 steps: not fp32 only, bf16 as well.",
        "Start 2 GPUs for 30 steps, fp8 for the moment, bf16 only.",  # two named, neither taken back
    ],
)
def test_only_or_alone_of_no_runs_precision_is_asked(text: str, known: Known) -> None:
    intent = read(text, known)
    assert intent.clarify is not None
    assert not any(str(value).startswith("train.precision=") for value in intent.args.get("set", []))


@pytest.mark.parametrize(
    ("text", "precision"),
    [
        ("Start 2 GPUs for 30 steps; do not forget fp32.", "fp32"),
        ("Start 2 GPUs for 30 steps, fp8 kept off, just bf16.", "bf16"),
        ("Start 2 GPUs for 30 steps; don't use fp8, use bf16.", "bf16"),
    ],
)
def test_the_runs_precision_said_alone_or_kept_acts(text: str, precision: str, known: Known) -> None:
    read_as(text, "run", {"nproc": 2, "steps": 30, "set": [f"train.precision={precision}"]}, known)


# --- a courtesy about the asker's manners -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "If it isn't rude to the people queued behind us, launch 2 GPUs with dp_shard=2 for 30 steps.",
        "If it isn't forward, I'd like to know whether to cancel baseline-ddp.",
        "If that's not an imposition and the node is idle, launch 2 GPUs with dp_shard=2 for 30 steps.",
        "If it isn't too cheeky, ask Priya whether we can cancel tp-try.",
        "If it isn't presumptuous to stop Priya's job, cancel baseline-ddp.",
        "It would be rude to cancel baseline-ddp.",
        "Cancel tp-try, but wait for Priya.",
    ],
)
def test_a_courtesy_hiding_a_condition_a_relay_or_a_question_is_asked(text: str, known: Known) -> None:
    assert read(text, known).clarify is not None


@pytest.mark.parametrize(
    ("text", "command", "args"),
    [
        (
            "If it isn't too cheeky, launch 2 GPUs with dp_shard=2 for 30 steps.",
            "run",
            {"nproc": 2, "layout": "dp_shard=2", "steps": 30},
        ),
        ("Cancel baseline-ddp, if that's not rude.", "cancel", {"run": "runs/baseline-ddp"}),
    ],
)
def test_a_courtesy_about_the_askers_manners_alone_acts(text: str, command: str, args: dict, known: Known) -> None:
    read_as(text, command, args, known)


def test_a_wait_negated_is_no_wait(known: Known) -> None:
    read_as("open a PR for layouts-nov, don't wait for CI", "pr", {"sweep": "sweeps/layouts-nov"}, known)


# --- ban, veto, forbid --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "Vetoing the compiler would cost us speed. Launch 2 GPUs, 30 steps.",
        "Lift the ban on activation checkpointing and launch 2 GPUs for 30 steps.",
        "Nobody can forbid compile here. 2 GPUs, 30 steps.",
        "Priya wants to veto the compiler; launch 2 GPUs for 30 steps.",
        "I can't deny the compiler helps: 2 GPUs, 30 steps.",
        "Veto the compiler for the next run; launch 2 GPUs for 30 steps now.",
        "Launch 2 GPUs for 30 steps and prohibit packing later.",
    ],
)
def test_a_ban_spoken_of_turns_nothing_off(text: str, known: Known) -> None:
    intent = read(text, known)
    assert not any(str(value).endswith("=false") for value in intent.args.get("set", []))


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("Launch 2 GPUs for 30 steps, and prohibit packing.", "data.packing=false"),
        ("Start 2 GPUs for 30 steps; veto the compiler.", "train.compile=false"),
    ],
)
def test_a_ban_ordered_turns_it_off(text: str, value: str, known: Known) -> None:
    read_as(text, "run", {"nproc": 2, "steps": 30, "set": [value]}, known)


def test_a_setting_spared_from_a_ban_stays(known: Known) -> None:
    read_as("Ban the old hacks, not packing: launch 2 GPUs for 30 steps.", "run", {"nproc": 2, "steps": 30}, known)
    assert read("Ban the old hacks, not packing: launch 2 GPUs for 30 steps.", known).args.get("set") is None


def test_a_question_never_proposes_a_refused_precision(known: Known) -> None:
    intent = read("Ban fp8? Unsure. Launch 2 GPUs for 30 steps.", known)
    assert intent.clarify is not None and "fp8" not in intent.clarify
    assert "train.precision=fp8" not in intent.args.get("set", [])


# --- the approval prompt beside a question; every GPU, no count ---------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "2 GPUs, dp_shard=2, 30 steps - too long? I'll review it at the approval prompt.",
        "Cancel tp-try? We'll check it at the confirmation step.",
        "train 30 steps across all the gpus",
        "What's on this box: train on all of them for 30 steps.",
    ],
)
def test_a_question_beside_the_approval_or_every_gpu_uncounted_is_asked(text: str, known: Known) -> None:
    assert read(text, known).clarify is not None


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("2 GPUs, dp_shard=2, 30 steps. I'll review it at the approval prompt.", {"nproc": 2, "steps": 30}),
        ("train 30 steps on 4 gpus, all of them in bf16", {"nproc": 4, "steps": 30}),
    ],
)
def test_the_approval_look_or_a_count_of_all_still_acts(text: str, args: dict, known: Known) -> None:
    read_as(text, "run", args, known)


def test_the_gpu_situation_during_a_run_is_its_results(known: Known) -> None:
    read_as("What did the gpu situation look like during baseline-ddp?", "results", {"run": "runs/baseline-ddp"}, known)
    read_as("what's the gpu situation on this box?", "hardware", {}, known)  # the machine's: still its hardware
