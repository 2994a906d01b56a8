"""Follow-ups and framings restated as the sentence they stand for, before anything reads them: a bare value that
changes the launch before ("not 100, 60"), a form factor said alone after a plan ("nvl?"), the answer to which size
of a GPU ("the 40 gig ones"), a bare count after a plan ("what about 8"), an acceptance criterion ("Given
configs/long.yaml, When launched on 2 GPUs ..., Then ..."). Each leaves any other sentence as said.
"""

from __future__ import annotations

from agent.understanding import regex as re  # `re` with a cache the parser's patterns fit in
from agent.understanding.arguments import SIZED_FAMILIES
from agent.understanding.context import Context
from agent.understanding.grammar import GPU_NAME
from agent.understanding.normalise import normalise
from trainer.hardware import GPUS


def restated(plain: str, context: Context) -> str:
    """The normalised sentence as the request it stands for in this conversation (see the module docstring)."""
    plain = _answer_restated(_variant_restated(_value_restated(plain, context), context), context)
    plain = _amendment_restated(_arrow_restated(plain), context)
    return _acceptance_restated(_count_restated(plain, context))


# A thing piped into an action, as a shell's shorthand: "sweep lr-scan -> report", "r1 => bench" (the action's noun
# alone after one arrow; the thing before it names a run, sweep or file, never a value: "256 -> 1024" is a change).
ARROW_TO_ACTION = (r"\s*(?P<thing>[^>\u2192]*?[a-z][^>\u2192]*?)\s*(?:->|=>|\u2192)\s*"
                   r"(?P<action>report|write-?up|pr|pull request|docs|bench(?:mark)?|eval|status|results|trials)"
                   r"\s*[.!]?\s*")  # fmt: skip
# An action ordered before the arrow ("cancel r1 -> report" is two steps): no thing alone, read as said.
ARROW_FROM_ACTION = (r"->|=>|\u2192|\b(?:cancel|kill|stop|abort|launch|train|start|rerun|run|resume|delete|remove|"
                     r"open|write|update|plan|benchmark|eval\w*|push|merge)\b")  # fmt: skip


def _arrow_restated(plain: str) -> str:
    """A thing piped into an action's noun ("sweep lr-scan -> report") as that action for the thing ("report for
    sweep lr-scan"); any other sentence as said."""
    found = re.fullmatch(ARROW_TO_ACTION, plain, re.I)
    if not found or re.search(ARROW_FROM_ACTION, found.group("thing"), re.I):
        return plain
    return f"{found.group('action')} for {found.group('thing')}"


# The request before amended in a contract's words: "The foregoing instruction is hereby amended solely so that the
# number of steps shall be 40; all other terms remain in full force and effect." (what changes, the rest as it was).
AMENDED_BEFORE = (r"\W*(?:the\s+)?(?:(?:foregoing|above|preceding|previous|prior|said|last|aforementioned|my\s+last|"
                  r"my\s+previous)\s+(?:instruction|request|order|direction|command|terms?)|"
                  # the request before as a noun itself: "The foregoing is hereby amended so that ..."
                  r"foregoing|above|preceding|aforementioned)\s+(?:is|are|shall\s+be)\s+"
                  r"(?:hereby\s+)?(?:amended|modified|varied|revised|changed)\s+(?:solely\s+|only\s+)?"
                  r"(?:so\s+that|such\s+that|to\s+provide\s+that|as\s+follows\s*:|in\s+that)\s+"
                  r"(?P<change>(?:[^;.!?]|\.(?=\w))*\w)\s*(?:[;,]\s*(?:and\s+)?all\s+other\s+(?:terms|provisions|"
                  r"settings|particulars)\s+(?:shall\s+)?remain[^;.!?]*)?[;.!]?\s*")  # fmt: skip


def _amendment_restated(plain: str, context: Context) -> str:
    """The launch or plan just before, amended in a contract's words (AMENDED_BEFORE), as the change it is ("same but
    the number of steps shall be 40"); left as said after anything else, or where more follows."""
    found = re.fullmatch(AMENDED_BEFORE, plain, re.I)
    if not found or context.previous not in ("run", "plan") or re.search(WITHDRAWN, found.group("change"), re.I):
        return plain
    return f"same but {found.group('change')}"


# An amendment that calls the request off ("... modified so that the run shall be cancelled"): no setting changed,
# so never the request before again (nothing_to_amend asks).
WITHDRAWN = (r"\b(?:cancel\w*|abort\w*|withdraw\w*|rescind\w*|revoke\w*|void\w*|terminat\w*|stop\w*|halt\w*|kill\w*|"
             r"not\s+(?:be\s+)?(?:proceed|run|launch|train|start|execut)\w*)\b")  # fmt: skip


def nothing_to_amend(plain: str, context: Context) -> str | None:
    """The question to ask where a request before is amended (AMENDED_BEFORE) and the conversation has none to amend:
    its change alone would launch or plan from the defaults."""
    found = re.fullmatch(AMENDED_BEFORE, plain, re.I)
    if found and re.search(WITHDRAWN, found.group("change"), re.I):
        return ("Call off which request? An amendment that cancels changes no setting, so I have done nothing: say "
                "what to cancel, e.g. `cancel runs/tp-try`, or nothing if the request before is dropped.")  # fmt: skip
    if context.previous in ("run", "plan") or not found:
        return None
    return ("Amend which request? This conversation has no launch or plan before this one: say the whole request, "
            "e.g. `train 40 steps with dp_shard=2 on 2 GPUs`.")  # fmt: skip


# A value of the launch before taken back, alone: "not 100, 60" (after 100 steps), "make it 3e-4" (after an lr).
NOT_THIS_BUT = r"\W*not\s+(\d+)\s*[,;]?\s*(?:but\s+)?(\d+)\W*"
MAKE_IT_RATE = r"\W*(?:no\W+)?make\s+(?:it|that)\s+(\d+(?:\.\d+)?e-?\d+)\W*"
VALUE_NOUNS = {"steps": "steps", "nproc": "gpus"}


def _value_restated(plain: str, context: Context) -> str:
    """A bare value that replaces one of the launch before, written as the change it is ("same but 60 steps"); a
    value it matches in no place is left as said (and asked about)."""
    launch = context.launch if context.previous == "run" else None
    if not launch:
        return plain
    if found := re.fullmatch(NOT_THIS_BUT, plain, re.I):
        nouns = [noun for key, noun in VALUE_NOUNS.items() if str(launch.get(key)) == found.group(1)]
        return f"same but {found.group(2)} {nouns[0]}" if len(nouns) == 1 else plain
    rated = any(str(o).startswith("train.lr=") for o in launch.get("overrides") or [])
    if rated and (found := re.fullmatch(MAKE_IT_RATE, plain, re.I)):
        return f"same but lr {found.group(1)}"
    return plain


# A bare count asked about right after a plan: "hmm what about 8 though", "and with 16 instead?" (group 1 the count).
BARE_COUNT_AGAIN = (r"^\W*(?:(?:hmm+|hm+|um+|uh+|well|oh|ah|ok|okay|so|and|but)\W+)*"
                    r"(?:(?:what|how)\s+about|(?:with|on)|try)\s+(\d+)"
                    r"(?:\s+(?:though|then|instead|now))*\W*$")  # fmt: skip


def _count_restated(plain: str, context: Context) -> str:
    """A bare count right after a plan on one machine, as that plan's GPUs ("what about 8" after 4 L40S is 8 of
    them): the one count such a plan has. After a plan over nodes the count could be either: left as said (asked)."""
    plan = context.plan if context.previous == "plan" else None
    found = re.fullmatch(BARE_COUNT_AGAIN, plain, re.I)
    if not plan or not found or int(plan.get("nodes") or 1) != 1 or not isinstance(plan.get("devices"), int):
        return plain
    if not 1 <= int(found.group(1)) <= 64:  # ("what about 512" may be a sequence length: asked)
        return plain
    return plain[: found.end(1)] + " gpus" + plain[found.end(1) :]


# A GPU's form factor said alone ("nvl?", "and the pcie ones?"): the plan before's GPU in that form.
BARE_VARIANT = r"(?<![\w-])(?<!\d )(sxm|pcie|nvl)\b"


def _variant_restated(plain: str, context: Context) -> str:
    """A form factor said without its GPU right after a plan, as that plan's GPU in it ("nvl?" after H100 PCIe is
    "h100 nvl?"); left as said where the sentence names a GPU or the plan's GPU comes in no such form."""
    gpu = str((context.plan or {}).get("gpu") or "") if context.previous == "plan" else ""
    found = re.search(BARE_VARIANT, plain, re.I)
    family = gpu.split("-")[0]
    if not found or re.search(GPU_NAME, plain.lower()) or f"{family}-{found.group(1).lower()}" not in GPUS:
        return plain
    return plain[: found.start()] + f"{family} " + plain[found.start() :]


# GPUs sold in several memory sizes, named without one (the planner then asks which: arguments.SIZED_FAMILIES).
UNSIZED_GPU = r"\b(?:a100)s?\b(?![\s-]*\d+\s*gi?b)"
MEMORY_SAID = r"\b\d+\s*gi?b\b"


def _answer_restated(plain: str, context: Context) -> str:
    """The answer to the planner's question of which size of a GPU ("the 40 gig ones" after "Which A100?"), as the
    request asked about with it: the model and counts of that request are kept, never dropped for a plan of the
    memory alone. A sentence that names a GPU or a model, or says more than an answer does, is read as it is."""
    before = context.previous_text
    if context.previous is not None or not before or not re.search(UNSIZED_GPU, before.lower()):
        return plain
    lowered = plain.lower()
    if not re.search(MEMORY_SAID, lowered) or re.search(GPU_NAME, lowered) or len(_answer_said(lowered).split()) > 10:
        return plain
    before = normalise(before, context.known.names)
    if count := re.search(COUNT_IN_ANSWER, lowered):  # "the 80 gig ones, and 8 of them": 8 in place of the count asked
        before = re.sub(COUNT_OF_UNSIZED, count.group(1), before, count=1, flags=re.I)
        plain = plain[: count.start()] + plain[count.end() :]
    return f"{before}; {_other_size(plain, before)}"


def _answer_said(lowered: str) -> str:
    """The sentence that answers, where the others say nothing countable ("and the 40 gig ones? i suspect i know the
    answer but humour me": a remark after the answer); else all of it."""
    sentences = [part for part in re.split(r"(?<=[.?!])\s+", lowered) if part]
    answer = [part for part in sentences if re.search(MEMORY_SAID, part)]
    rest = [part for part in sentences if part not in answer]
    return answer[0] if len(answer) == 1 and not any(re.search(r"\d", part) for part in rest) else lowered


# A memory size refused in the answer: "not the 80 gig ones", "anything but the 80 gig ones", "the 40 gig ones, not 80".
REFUSED_MEMORY = (r"\b(?:not|no|anything\s+but|anything\s+except|except|but\s+not|other\s+than|rather\s+than|"
                  r"instead\s+of)\s+(?:the\s+)?(\d+)\s*(?:gi?b)?\b"
                  r"(?:\s+(?:ones?|cards?|gpus?|version|variant|kind))?")  # fmt: skip
# A count said in the answer: "and 8 of them" (normalised "and 8 gpus"); and the count of the GPU asked about before it.
COUNT_IN_ANSWER = r"[,;]?\s*(?:and\s+)?\b(\d+)\s+(?:gpus|cards|of them)\b"
COUNT_OF_UNSIZED = r"\b\d+(?=\s*(?:x\s*)?(?:nvidia\s+)?a100s?\b)"


def _other_size(answer: str, before: str) -> str:
    """The answer with a refused memory size written as the family's other one ("not the 80 gig ones" is the 40 gig
    ones, where A100s come in 40 and 80 GB); left as said where no single other size is left."""
    refused = re.search(REFUSED_MEMORY, answer, re.I)
    family = next((f for f in SIZED_FAMILIES if re.search(rf"\b{f}s?\b", before.lower())), None)
    if not refused or family is None:
        return answer
    others = [p for p in SIZED_FAMILIES[family] if not p.endswith(f"-{refused.group(1)}gb")]
    rest = (answer[: refused.start()] + answer[refused.end() :]).strip(" ,;")
    if len(others) != 1:
        return answer
    if re.search(MEMORY_SAID, rest.lower()):  # "the 40 gig ones, not 80": the size said, the refusal dropped
        return rest
    size = re.search(r"(\d+)gb$", others[0])
    return f"{rest} the {size.group(1)}GiB ones".strip() if size else answer


# An acceptance criterion: "Given <what>, When <action with its facts>, Then <expected result>". Where the Given names
# a thing of the repository (an experiment file, the main experiment), the When clause is the action asked for and the
# Then its purpose; a Given that states the world ("Given the node is back") stays a condition, read as said.
ACCEPTANCE = (r"^\W*given\s+(?P<given>[^,;]+?)\s*[,;]\s*when\s+(?P<when>[^;]+?)\s*[,;]\s*then\s+"
              r"(?P<then>[^.;!?]+)(?P<rest>.*)$")  # fmt: skip
GIVEN_THING = r"(?:(?:the\s+)?(?:main|default|base|usual)\s+(?:experiment|config)|\S+\.ya?ml)"
# The When clause's subject and passive, as the order's verb: "I launch ..." and "launched ..." are "launch ...".
WHEN_AS_ORDER = {
    r"^(?:i|we|you)\s+(?=(?:launch|train|run|start)\b)": "",
    r"^(?:it\s+(?:is|gets)\s+)?(launch|train|start)ed\b": r"\1",
    r"^(?:it\s+(?:is|gets)\s+)?run\b": "run",
}


def _acceptance_restated(plain: str) -> str:
    """An acceptance criterion on a thing of the repository (ACCEPTANCE, GIVEN_THING), as the order its When clause
    gives, on that thing, for the purpose its Then states; any other sentence as said."""
    found = re.fullmatch(ACCEPTANCE, plain, re.I)
    if not found or not re.fullmatch(GIVEN_THING, found.group("given"), re.I) or "?" in plain:
        return plain  # ("..., then what happens to memory?": a question about the launch, read as said)
    when = found.group("when")
    for said, order in WHEN_AS_ORDER.items():
        when = re.sub(said, order, when, count=1, flags=re.I)
    if when == found.group("when"):
        return plain  # no launch said in the When clause: read as said
    return f"{when} using {found.group('given')}, so that {found.group('then')}{found.group('rest')}"
