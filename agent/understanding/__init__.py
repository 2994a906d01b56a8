"""The offline planner's understanding of a request: what a user means, read the way a person would.

    plain = normalise(text)            typos, number words, "30-step", "80 gig", "4x", "1,000", layouts and packing
                                       described in words ("a full copy of the model on each GPU" is DDP)
    entities = extract(plain, known)   counts with their noun, layouts, settings with negations, the model preset,
                                       GPUs, and the runs, sweeps, checkpoints and files of the repository on disk
    scores = score(plain, ...)         every intent scored on its cues (the grammar's first reading is one of them)
    fill(intent, ...)                  arguments: the chosen tool's arguments from the entities, and from the
                                       conversation what the sentence does not restate (the plan before, the run
                                       just launched)
    clarify(intent, ...)               questions: one question, naming the best reading, instead of the action when
                                       a required argument is missing, two readings score close, or the action is
                                       negated, put off or only asked about

A wrong action is worse than a question: where the planner is not sure of a value that changes what runs, it asks.
Runs and sweeps may be described instead of named ("the ddp baseline", "the learning rate sweep"):
agent.understanding.known reads what describes each from its files.

agent.offline turns the Intent into tool calls and replies (agent.replies). A user with a real LLM never needs this
package.
"""

from __future__ import annotations

from agent.understanding import regex as re  # `re` with a cache the parser's patterns fit in
from agent.understanding.arguments import SIZED_FAMILIES, fill, planned_devices
from agent.understanding.context import Context, context_of
from agent.understanding.entities import (
    Entities,
    extract,
    masked,
    the_other,
)
from agent.understanding.grammar import (
    GPU_NAME,
    Intent,
    first_reading,
    parse_slash,
    read_facts,
)
from agent.understanding.intents import (
    ACTIONS,
    negated_actions,
    ranked,
    score,
)
from agent.understanding.mood import held_back
from agent.understanding.normalise import normalise
from agent.understanding.questions import clarify
from agent.understanding.refusals import refusal
from trainer.hardware import GPUS

__all__ = ["Context", "Intent", "context_of", "parse_request", "understand"]
WEAK = 2.5  # an action cued by no more than the grammar's first reading alone


def parse_request(text: str, context: Context | None = None) -> Intent:
    """A slash command as typed, or a plain sentence understood (see the module docstring)."""
    return understand(text, context)


def understand(text: str, context: Context | None = None) -> Intent:
    text = text.strip()
    if text.startswith("/"):
        return parse_slash(text)
    context = context or Context()
    plain = normalise(text, context.known.names)
    restated = _answer_restated(_variant_restated(_value_restated(plain, context), context), context)
    restated = _acceptance_restated(_count_restated(restated, context))
    if restated != plain:
        text = plain = restated  # what every later reading of the sentence reads
    entities = extract(plain, context.known)
    the_other(plain.lower(), entities, context.known, {"run": context.run, "sweep": context.sweep})
    if refused := refusal(plain, entities):  # "delete runs/tp-try": no tool may, and no nearby tool in its place
        return Intent("help", text=text, refusal=refused)
    scores = score(plain, entities, first_reading(negated_actions(plain.lower())[1]), context.previous)
    best = ranked(scores)
    command = best[0][0] if best[0][1] > 0 else "help"
    if command in ACTIONS and best[0][1] <= WEAK and negated_actions(plain.lower())[0]:
        command = "help"  # "write the report after the sweep finishes": what is left once the action put off is gone
        # is no request for another action (the grammar's reading of a noun is no verb)
    if command not in ACTIONS and best[0][1] <= WEAK and (refused := _only_refused(plain.lower(), entities)):
        command = refused  # "negative on cancelling tp-try": that action, held back and asked about (mood), not a read
    if command == "read" and context.launch and re.search(REPEAT_WITH, plain.lower()):
        command = "run"  # "do the same thing with configs/long.yaml" after a launch: that launch, on this experiment
    intent = read_facts(masked(plain, entities), command, text, planned_devices(context, plain))
    intent.text = text
    fill(intent, plain, entities, context)
    clarify(intent, plain, entities, context, scores)
    return intent


# What may be left beside a refused action and say nothing more: "negative on cancelling tp-try for now".
_FILLERS = (r"(?:[\s\W]|\b(?:the|a|an|on|of|for|to|now|today|yet|please|pls|it|this|that|run|job|sweep|thanks|ok|okay|"
            r"update|updates|refresh)\b)*")  # fmt: skip


# The courtesy a refusal may be wrapped in, which says nothing more: "would you mind not cancelling r1", "might I ask
# you to not kill tp-try", "subject to your confirmation, I'd rather not cancel r1".
_COURTESY = (r"\b(?:(?:would|do) you mind|(?:might|may|could|can) i ask you(?: to)?|i(?:'d| would) (?:appreciate it|be "
             r"grateful) if you|if you (?:would|could|please)(?: be so kind)?|kindly|i(?:'d| would) rather|"
             r"i(?:'d| would) prefer(?: (?:it if you|we|you|that))?|(?:subject to|with) your (?:confirmation|approval)|"
             r"once you confirm)\b")  # fmt: skip


def _only_refused(lowered: str, entities: Entities) -> str | None:
    """The one action the sentence refuses, where nothing but what it names is said beside it (a weak reading of the
    name alone is no request to read it), and mood holds it back too (no refusal it misses may become the action)."""
    negated, rest = negated_actions(lowered)
    refused = [action for action in negated if action in ACTIONS]
    if len(refused) != 1:
        return None
    for found in sorted(entities.found, key=lambda entity: -entity.span[0]):
        if found.kind in ("run", "sweep"):
            rest = rest[: found.span[0]] + " " + rest[found.span[1] :]
    rest = re.sub(_COURTESY, " ", rest)  # "could I ask you to not kill r1": the refusal, put politely
    if not re.fullmatch(_FILLERS, rest) or not held_back(lowered, refused[0]):
        return None
    return refused[0]


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


# A repeat of the launch before, on another experiment file: "the same thing with configs/long.yaml", "do that again
# for long.yaml".
REPEAT_WITH = (r"\b(?:same|again|repeat)\b.*\b(?:with|for|on|using)\s+(?:the\s+)?\S+\.ya?ml\b|"
               r"\b(?:with|for|on|using)\s+(?:the\s+)?\S+\.ya?ml\b.*\b(?:same|again)\b")  # fmt: skip


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
