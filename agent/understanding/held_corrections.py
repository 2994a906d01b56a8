"""Corrections, alternatives and partial counts that leave a request with more than one reading: one question, never
the first reading guessed (issue 33: no wrong action; what is unsure is asked).

- an action's correction that takes it back, conditions it or points at something unnamed ("cancel tp-try. sorry,
  wrong run", "... correction: only if it's still running", "... I mean the other one");
- a name corrected by a name of another kind ("update the docs with lr-scan. sorry, r1": a run is no sweep), and a
  follow-up that names a sweep where the action takes a run ("and cancel lr-scan too" after a run's results);
- a correction said as a question ("sorry, is it 3 nodes?");
- a plan's alternatives ("2 nodes of 8 or 4", "8 h100s, or a100 80gb instead?", "the 30b-a3b or the 235b-a22b"), a
  reversal ("no wait, the other way round"), a total that is not the nodes times each node's GPUs ("2 nodes of 8,
  so 8 in total"), part of the hardware out ("4 of them busy", "one of the nodes has only 4 GPUs") and GPUs taken
  away from the plan before ("and without 2 of them?").
"""

from __future__ import annotations

from itertools import pairwise

from agent.understanding import regex as re
from agent.understanding.arguments import call_text
from agent.understanding.context import Context
from agent.understanding.entities import Entities, extract
from agent.understanding.grammar import GPU_NAME, TOTAL, Intent, unreplaced

# A word that says what follows corrects what came before.
CORRECTING = (r"\b(?:sorry|correction|actually|i\s+mean|i\s+meant|scratch\s+that|scrap\s+that|no\s+wait|hold\s+on|"
              r"my\s+bad|oops)\b")  # fmt: skip
# The reads of a name, which a correction alone with nothing before it never picks ("hold on, I mean r1").
READS = ("results", "status", "trials", "compare", "why")
# A follow-up that is a correction alone: "sorry, I mean r1", "hold on, I mean lr-scan".
CORRECTION_FIRST = (rf"\W*(?:(?:{CORRECTING}|wait|oh|um+|uh+)\W*)*(?:i\s+mean|i\s+meant|correction|scratch\s+that)\b|"
                    r"\W*(?:sorry|oops|my\s+bad|actually)\W+(?:the\s+)?[\w./-]+\W*$")  # fmt: skip
# What a correction says that leaves the action unresolved: a condition ("only if it's still running", "once it has
# written its checkpoint"), the action taken back ("wrong run", "wrong window") or an object it does not name ("the
# other one").
UNRESOLVED = (r"\b(?:only\s+if|if|once|when|after|unless|as\s+long\s+as|provided)\b|"
              r"\bwrong\s+(?:run|one|sweep|job|window|tab|chat|thread|channel|name|person|repo|project|place)\b|"
              r"\bthe\s+other\s+(?:one|run|sweep|job)\b|\bnot\s+(?:that|this)\s+one\b")  # fmt: skip
# A courtesy after "sorry", which corrects nothing: "sorry if this is late", "sorry for the noise", "sorry to ask".
COURTESY_AFTER = r"\s*(?:if|for|to|about)\b"
# A correction asked as a question: "sorry, is it 3 nodes?", "actually, was it the nvl variant?"
# (or with a question tagged on, or a maybe: "sorry, they're the pcie ones, aren't they?", "correction: maybe nvl?")
ASKED_CORRECTION = (rf"{CORRECTING}\W*(?:is|was|are|were|did|do)\s+(?:it|they|that|those|these|we|you)\b[^.!?]*\?|"
                    rf"{CORRECTING}[^.!?]*,\s*(?:(?:is|are|was|were|do|does|did)n'?t\s+(?:it|they|we|you)|right)\s*\?|"
                    rf"{CORRECTING}\W*(?:maybe|perhaps|possibly|probably)\b[^.!?]*\?")  # fmt: skip
# Variants offered as alternatives: "actually, nvl or pcie?"
VARIANT_OR_VARIANT = r"\b(?:sxm\d?|pcie|nvl)\s*,?\s+or\s+(?:the\s+)?(?:sxm\d?|pcie|nvl)\b"
# Some of the cards of another variant or card: "sorry, 4 of them are the pcie variant" (how many of which, unsaid).
SOME_OTHER = (rf"\b\d+\s+(?:of\s+them|of\s+those|gpus?|cards?)\s+(?:are|is)\s+(?:the\s+|an?\s+)?"
              rf"(?:sxm\d?\b|pcie\b|nvl\b|{GPU_NAME})")  # fmt: skip
# Nodes corrected with another card and no count of it in each: "sorry, 3 nodes of a100 80gb".
NODES_OF_A_CARD = rf"{CORRECTING}.*\b\d+\s+nodes?\s+of\s+(?:the\s+)?{GPU_NAME}"
# Two counts offered as alternatives: "2 nodes of 8 or 4 h100", "with 8 or 16 H100?", "of 8, or 4 nodes of 4".
COUNT_OR_COUNT = (r"(?<![\w.])\d+\s*(?:gpus?|cards?|devices?|nodes?)?\s*,?\s+or\s+(?:maybe\s+|perhaps\s+)?"
                  r"\d+(?![\w.])")  # fmt: skip
# A GPU offered as another choice, not as a correction ("or rather h100" corrects): "8 h100s, or a100 80gb
# instead?", "on 8 l40s ..., or h200s?".
GPU_OR = (
    r"\bor\s+(?!rather\b|actually\b|better\b|i\s+mean\b)(?:the\s+|maybe\s+|perhaps\s+)?(?:\d+\s*(?:x\s*)?)?" + GPU_NAME
)
# A plan conditioned on the answer to the question just asked: "are the h100s busy? if so, plan ... on a100s", "the
# h200s are busy? plan ... on 8 h200 if not" (the answer is the user's to give).
ANSWER_CONDITION = (r"\?\s*(?:and\s+)?(?:if\s+(?:so|not|yes|no|they\s+are|they\s+aren'?t)|otherwise)\b|"
                    r"\?[^?]*\bif\s+(?:so|not)\s*[.!]?\s*$")  # fmt: skip
# What was just said, reversed: "h100 is out, h200 is in — no wait, the other way round".
REVERSED = (r"\b(?:the\s+other\s+way\s+a?round|vice\s+versa|"
            r"(?:the\s+)?(?:reverse|opposite)\s+of\s+(?:that|what\s+i\s+said))\b")  # fmt: skip
# Part of the hardware out: "4 of them busy", "of which 2 are broken", "but one is down", "one of the nodes has only
# 4 GPUs" (how many are left to plan on is unsaid).
PART_OUT = (r"\b(?:\d+|one|two|three|four|some|a\s+few)\s+(?:of\s+(?:them|those|these|the\s+\w+)\s+)?"
            r"(?:(?:gpus?|cards?|nodes?)\s+)?(?:(?:is|are|being|was|were)\s+)?(?:currently\s+|still\s+|now\s+)?"
            r"(?:busy|broken|down|dead|faulty|out|offline|occupied|unavailable|taken|guast[oi]|rott[oi])\b|"
            r"\bof\s+which\s+(?:\d+|one|two|some)\s+(?:is|are)\b|"
            r"\bone\s+of\s+(?:the|them|those)\s*(?:nodes?|machines?|boxes|hosts?)?\s+"
            r"(?:has|have|holds?)\s+only\b")  # fmt: skip
# GPUs taken away from those of the plan before: "and without 2 of them?", "minus 2".
TAKEN_AWAY = r"\b(?:without|minus|less|except(?:\s+for)?)\s+(\d+)\b"
# A count of cards by their name, not of the nodes that hold them ("16 h100s", not "2 h200 nodes").
COUNTED_CARDS = rf"(?<![\w.])(\d+)\s*(?:x\s*)?{GPU_NAME}(?!\s*(?:nodes?|machines?|boxes|hosts?|servers?)\b)"
# A count of GPUs, not of each node's ("24 gpus", not "8 gpus each").
COUNTED_GPUS = r"(?<![\w.])(\d+)\s+(?:gpus?|cards?|devices?)\b(?!\s+(?:each|per|in\s+each|on\s+each))"
# A name's kind by its folder.
KIND_OF = {"runs": "run", "sweeps": "sweep"}


def held_correction(intent: Intent, plain: str, entities: Entities, context: Context, actions: tuple[str, ...]
                    ) -> str | None:  # fmt: skip
    """The one question a correction, an alternative or a partial count calls for, or None where the request reads
    one way."""
    lowered = plain.lower()
    if context.previous in actions and intent.command not in actions and re.match(CORRECTION_FIRST, lowered):
        # "sorry, I mean r1" after "cancel tp-try": the action before, of another object, or a read? never guessed
        named = intent.args.get("run") or intent.args.get("sweep") or "that"
        return (f"Do you mean to {context.previous} {named} instead, or only {_call(intent)}? I have done nothing; "
                f"say it in full, e.g. `{context.previous} {named}`.")  # fmt: skip
    if (
        intent.command in READS
        and re.match(CORRECTION_FIRST, lowered)
        and not (context.previous or context.previous_text)
    ):
        return (
            f"What does that correct? Nothing earlier in this conversation; say it in full (so far: {_call(intent)})."
        )
    if which := _one_of_two_corrected(intent.text, context):  # "compare r1 and tp-try. correction: baseline-ddp"
        return f"Which of {which[0]} and {which[1]} does {which[2]} replace? I have done nothing."
    if intent.command in actions:
        return _action_unresolved(intent, lowered, entities, context)
    if intent.command == "plan":
        return _plan_unresolved(intent, lowered, context)
    return None


def _action_unresolved(intent: Intent, lowered: str, entities: Entities, context: Context) -> str | None:
    call = _call(intent)
    if _correction_unresolved(lowered, entities):
        return (f"Your correction leaves it unclear what to do, so I have done nothing. Which run or sweep, and "
                f"should I act now? (I would have called {call}.)")  # fmt: skip
    if re.search(ASKED_CORRECTION, lowered):
        return f"Is that a correction? I have done nothing; say the name to act on (I would have called {call})."
    if _corrected_again(intent.text, context):  # "cancel tp-try, scratch that, r1, I mean baseline-ddp"
        return f"Which one, exactly? You corrected the name more than once; I have done nothing (so far: {call})."
    if mixed := _kinds_corrected(intent.text, context):
        return f"Which do you mean: {mixed[0]} or {mixed[1]}? One is a run and one a sweep; I have done nothing."
    if _sweep_for_a_run(intent, entities):
        sweep = entities.get("sweep")
        return f"{sweep} is a sweep, and {call} acts on a run: which run do you mean? I have done nothing."
    return None


def _correction_unresolved(lowered: str, entities: Entities) -> bool:
    """Whether a correction after the object named takes the action back, conditions it or names no object."""
    named = [found.span[0] for found in entities.found if found.kind in ("run", "sweep")]
    for mark in re.finditer(CORRECTING, lowered):
        if named and mark.start() < min(named):
            continue  # "sorry, cancel r1 when you can": a courtesy before the request, no correction of it
        after = lowered[mark.end() :]
        if mark.group(0) == "sorry" and re.match(COURTESY_AFTER, after):
            continue
        if re.search(UNRESOLVED, after) or _named_in_part(lowered, entities, mark.end()):
            return True
    return False


def _named_in_part(lowered: str, entities: Entities, start: int) -> bool:
    """Whether a run or sweep after `start` is read from a word that is only part of its name ("correction: the
    title should mention the layouts" names no sweep layouts-nov)."""
    for found in entities.found:
        if found.kind in ("run", "sweep") and found.span[0] >= start:
            said = lowered[found.span[0] : found.span[1]]
            if said not in (str(found.value).lower(), str(found.value).lower().split("/", 1)[-1]):
                return True
    return False


def _kinds_corrected(text: str, context: Context) -> tuple[str, str] | None:
    """A run's and a sweep's name either side of a correction ("docs for lr-scan. sorry, r1"): both, by path."""
    lowered = text.lower()
    mark = re.search(CORRECTING, lowered)
    if mark is None:
        return None
    before, after = _names_in(lowered[: mark.start()], context), _names_in(lowered[mark.end() :], context)
    if len(before) == 1 and len(after) == 1 and KIND_OF[before[0].split("/")[0]] != KIND_OF[after[0].split("/")[0]]:
        return before[0], after[0]
    return None


def _corrected_again(text: str, context: Context) -> bool:
    """Whether the name is corrected twice or more, over three names or more: which one stands is unsure."""
    lowered = text.lower()
    return len(re.findall(CORRECTING, lowered)) > 1 and len(_names_in(lowered, context)) > 2


def _one_of_two_corrected(text: str, context: Context) -> tuple[str, str, str] | None:
    """Two names before a correction that says one: which it replaces is unsaid (both, then the new one)."""
    lowered = text.lower()
    marks = list(re.finditer(CORRECTING, lowered))
    if len(marks) != 1:
        return None
    before, after = _names_in(lowered[: marks[0].start()], context), _names_in(lowered[marks[0].end() :], context)
    if len(before) == 2 and len(after) == 1 and after[0] not in before:
        return before[0], before[1], after[0]
    return None


def _names_in(text: str, context: Context) -> list[str]:
    """The runs and sweeps `text` names, by path ("runs/r1")."""
    paths = [*context.known.runs, *context.known.sweeps]
    return [path for path in paths if re.search(rf"(?<![\w./-])(?:{re.escape(path)}|{re.escape(path.split('/', 1)[1])})"
                                                r"(?![\w/-])", text)]  # fmt: skip


def _sweep_for_a_run(intent: Intent, entities: Entities) -> bool:
    """Whether the action takes a run the sentence does not name, where it names a sweep only ("and cancel lr-scan
    too" after r1's results: never r1 cancelled instead)."""
    return "run" in intent.args and entities.has("sweep") and not entities.has("run")


def _plan_unresolved(intent: Intent, lowered: str, context: Context) -> str | None:
    call = _call(intent)
    if re.search(ASKED_CORRECTION, lowered):
        return f"Is that a correction or a question? Say the hardware to plan on (so far: {call})."
    if re.search(COUNT_OR_COUNT, lowered) or re.search(VARIANT_OR_VARIANT, lowered) or _gpu_alternative(lowered):
        return f"Which of the alternatives should I plan for? Say one (so far I read {call})."
    if _model_alternative(lowered, context) or _cards_side_by_side(lowered) or _other_side_started(intent, lowered):
        return f"Which of the alternatives should I plan for? Say one (so far I read {call})."
    if re.search(ANSWER_CONDITION, lowered):
        return f"That depends on the answer to your own question: should I plan {call}, or something else?"
    if re.search(REVERSED, lowered):
        return f"Which way round, exactly? Say the GPU to plan on (so far I read {call})."
    if why := _total_unmatched(intent, lowered):
        return f"{why} How many nodes, and how many GPUs in each? (so far I read {call})"
    if re.search(SOME_OTHER, lowered) or re.search(NODES_OF_A_CARD, lowered):
        return f"How many of which GPU, in each node? Say them, e.g. `2 nodes of 8 H100s` (so far I read {call})."
    if re.search(PART_OUT, lowered):
        return f"How many GPUs in each node can I plan on, with some out? (so far I read {call})"
    if (taken := re.search(TAKEN_AWAY, lowered)) and context.plan:
        return (f"Without {taken.group(1)} of them: on how many GPUs, in all? e.g. `on 6 GPUs` (so far I read "
                f"{call}).")  # fmt: skip
    return None


def _gpu_alternative(lowered: str) -> bool:
    """Whether another GPU is offered beside the one planned ("8 h100s, or a100 80gb instead?")."""
    kept = unreplaced(lowered)
    for offered in re.finditer(GPU_OR, lowered):
        if re.search(rf"(?:\bno\b|\blet'?s\s+say\b|{CORRECTING})[^.;?]*{GPU_NAME}", lowered[offered.end() :]):
            continue  # "(or maybe H200 — no, let's say H100)": the alternative taken back
        if re.search(GPU_NAME, lowered[: offered.start()]) or re.search(GPU_NAME, kept[offered.end() :]):
            return True
    return False


def _cards_side_by_side(lowered: str) -> bool:
    """Whether two counted cards of different kinds are both kept ("on 8 h100 sxm and 8 h100 pcie"): a plan takes
    one."""
    kept = unreplaced(lowered)
    counted = list(re.finditer(COUNTED_CARDS, kept))
    for one, other in pairwise(counted):
        joined = re.fullmatch(r"\s*,?\s*(?:and|&|plus|\+)?\s*", kept[one.end() : other.start()])
        if joined and one.groups()[1:] != other.groups()[1:]:
            return True  # (a comparison, "8 h100s versus 8 a100s", is weighed: the side started with is planned)
    return False


def _other_side_started(intent: Intent, lowered: str) -> bool:
    """Whether two cards are compared and the side said to start with is not the card read ("4 h200 versus 4 a100
    80gb; begin with the a100 side": never the H200s)."""
    compared = re.search(rf"{GPU_NAME}\s*(?:,\s*)?(?:versus|vs\.?|compared\s+(?:to|with)|against)\s+(?:\d+\s*)?"
                         rf"{GPU_NAME}", lowered)  # fmt: skip
    started = re.search(rf"\b(?:start|begin|go|lead)\s+with\s+(?:the\s+)?{GPU_NAME}", lowered)
    if not compared or not started:
        return False
    return not str(intent.args.get("gpu", "")).startswith(started.group(1))


def _model_alternative(lowered: str, context: Context) -> bool:
    """Whether two models are offered, one either side of an "or" ("the 30b-a3b or the 235b-a22b")."""
    for offered in re.finditer(r"\bor\b", lowered):
        before = extract(lowered[: offered.start()], context.known).get("model")
        after = extract(lowered[offered.end() :], context.known).get("model")
        if before and after and before != after:
            return True
    return False


def _total_unmatched(intent: Intent, lowered: str) -> str | None:
    """A count of all the GPUs said beside nodes that is not the nodes times each one's GPUs ("2 nodes of 8 h100.
    sorry, 24 gpus", "3 nodes, 16 gpus in total")."""
    devices, nodes = intent.args.get("devices"), intent.args.get("nodes")
    if not isinstance(devices, int) or not isinstance(nodes, int):
        return None
    corrected = [mark.end() for mark in re.finditer(CORRECTING, lowered)]
    lowered = lowered[corrected[-1] :] if corrected else lowered  # what a correction replaced is no count said
    totals = [int(found.group(1) or found.group(2)) for found in re.finditer(TOTAL, lowered)]
    counted = [int(found.group(1)) for found in re.finditer(COUNTED_CARDS, lowered)]
    if corrected:  # "sorry, 24 gpus": all of them, corrected
        counted += [int(found.group(1)) for found in re.finditer(COUNTED_GPUS, lowered)]
    unmatched = [t for t in totals if t != devices * nodes]
    unmatched += [count for count in counted if count not in (devices, devices * nodes)]
    if unmatched:
        return f"{unmatched[0]} GPUs is not {nodes} nodes of {devices}."
    return None


def _call(intent: Intent) -> str:
    return call_text(intent)
