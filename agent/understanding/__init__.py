"""The offline planner's understanding of a request: what a user means, read the way a person would.

    plain = normalise(text)            typos, number words, "30-step", "80 gig", "4x", "1,000", layouts and packing
                                       described in words ("a full copy of the model on each GPU" is DDP)
    plain = restated(plain, context)   restatements: a follow-up or a framing as the request it stands for ("not
                                       100, 60" after a launch, "nvl?" after a plan, Given/When/Then)
    entities = extract(plain, known)   counts with their noun, layouts, settings with negations, the model preset,
                                       GPUs, and the runs, sweeps, checkpoints and files of the repository on disk
    scores = score(plain, ...)         every intent scored on its cues (the grammar's first reading is one of them)
    fill(intent, ...)                  arguments: the chosen tool's arguments from the entities, and from the
                                       conversation what the sentence does not restate (the plan before, the run
                                       just launched)
    clarify(intent, ...)               questions: one question, naming the best reading, instead of the action when
                                       a required argument is missing, two readings score close, or the action is
                                       negated, put off or only asked about
    other_reading(command, ...)        second_reading: a classifier fitted on the labelled examples; where it is
                                       sure of another tool that the rules nearly chose too, one question naming
                                       both readings instead of the action

A wrong action is worse than a question: where the planner is not sure of a value that changes what runs, it asks.
Runs and sweeps may be described instead of named ("the ddp baseline", "the learning rate sweep"):
agent.understanding.known reads what describes each from its files.

agent.offline turns the Intent into tool calls and replies (agent.replies). A user with a real LLM never needs this
package.
"""

from __future__ import annotations

from typing import NamedTuple

from agent.understanding import regex as re  # `re` with a cache the parser's patterns fit in
from agent.understanding.arguments import call_text, fill, planned_devices
from agent.understanding.command_lines import doubt, pretended
from agent.understanding.context import Context, context_of
from agent.understanding.entities import (
    Entities,
    extract,
    masked,
    the_other,
)
from agent.understanding.grammar import (
    Intent,
    first_reading,
    parse_slash,
    read_facts,
    slash_as_words,
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
from agent.understanding.restatements import nothing_to_amend, restated
from agent.understanding.second_reading import CALLED_WITH, OFFERED, TOOL_WORDS, other_reading, words_for

__all__ = ["Context", "Intent", "context_of", "parse_request", "understand"]
WEAK = 2.5  # an action cued by no more than the grammar's first reading alone


def parse_request(text: str, context: Context | None = None) -> Intent:
    """A slash command as typed, or a plain sentence understood (see the module docstring)."""
    return understand(text, context)


def understand(text: str, context: Context | None = None) -> Intent:
    text = text.strip()
    if text.startswith("/"):
        return _slash(text, context)
    return _sentence(text, context)


def _slash(text: str, context: Context | None) -> Intent:
    """The planner's own slash command as typed; one typed as a command line ("/launch --nproc 4 --no-packing",
    "/sweep show sweeps/x") read as its words are, as a sentence. An unknown slash word that reads as no request
    ("/frobnicate") is answered as unknown."""
    words = slash_as_words(text)
    if words is None:
        return pretended(parse_slash(text))
    intent = _sentence(words, context)
    if intent.command == "help" and not intent.refusal and not intent.args:
        return parse_slash(text)  # nothing read in its words: the slash word itself is what is not understood
    if not intent.refusal and (doubted := doubt(text, intent, context)):
        return doubted  # "/pr show X", "/launch --steps 10 --draft": not acted on as read (command_lines)
    return intent


def _sentence(text: str, context: Context | None) -> Intent:
    """The parser's reading of a plain sentence, asked about where the second reading is sure of another tool that
    the rules nearly chose too: the question offers one reading (a "yes" runs it), the other reading where it is
    very likely and whole, else the rules', and names the other."""
    context = context or Context()
    intent, scores, held = _read(text, context)
    if intent.clarify is not None or intent.refusal or held:
        return intent  # held: an action refused or put off, which a bag of n-grams cannot read ("don't open a PR")
    followup = context.previous_text is not None
    if (other := other_reading(intent.command, scores, text, followup)) is None:
        return intent
    offered = _read(text, context, other.command).intent if other.chance >= OFFERED else None
    if offered is not None and offered.clarify is None:
        offered.args |= CALLED_WITH.get(other.tool, {})
        first, second = TOOL_WORDS[other.tool], words_for(intent.command)
    else:
        offered, first, second = intent, words_for(intent.command), TOOL_WORDS[other.tool]
    offered.clarify = (f"Should I {first} ({call_text(offered)})? It also reads as a request to {second}: which do "
                       f"you mean? yes / edit")  # fmt: skip
    return offered


class _Reading(NamedTuple):
    intent: Intent
    scores: dict[str, float]  # every intent scored on its cues (none where the request was refused)
    held: bool  # the sentence refuses or puts off an action


def _read(text: str, context: Context, command: str | None = None) -> _Reading:
    """The parser's reading (as `command` where given: another reading of the same sentence)."""
    plain = normalise(text, context.known.names)
    if (said := restated(plain, context)) != plain:
        text = plain = said  # what every later reading of the sentence reads
    entities = extract(plain, context.known)
    the_other(plain.lower(), entities, context.known, {"run": context.run, "sweep": context.sweep})
    if refused := refusal(plain, entities):  # "delete runs/tp-try": no tool may, and no nearby tool in its place
        return _Reading(Intent("help", text=text, refusal=refused), {}, False)
    held_actions, rest = negated_actions(plain.lower())
    scores = score(plain, entities, first_reading(rest), context.previous)
    command = command or _chosen(scores, plain, entities, context, bool(held_actions))
    intent = read_facts(masked(plain, entities), command, text, planned_devices(context, plain))
    intent.text = text
    fill(intent, plain, entities, context)
    clarify(intent, plain, entities, context, scores)
    if intent.clarify is None and not intent.refusal and (question := nothing_to_amend(plain, context)):
        intent.clarify = question  # "the foregoing instruction is amended so that ..." with nothing foregoing
    if intent.clarify is None and intent.command in ACTIONS and re.search(DRY_RUN, plain.lower()):
        intent.clarify = f"I have no dry run, so I have done nothing. Do it for real: {call_text(intent)}? yes / edit"
    return _Reading(intent, scores, bool(held_actions))


def _chosen(scores: dict[str, float], plain: str, entities: Entities, context: Context, held: bool) -> str:
    """The command the rules choose: the best scored intent, but for actions put off or refused (`held`)."""
    best = ranked(scores)
    command = best[0][0] if best[0][1] > 0 else "help"
    if command in ACTIONS and best[0][1] <= WEAK and held:
        command = "help"  # "write the report after the sweep finishes": what is left once the action put off is gone
        # is no request for another action (the grammar's reading of a noun is no verb)
    if command not in ACTIONS and best[0][1] <= WEAK and (refused := _only_refused(plain.lower(), entities)):
        command = refused  # "negative on cancelling tp-try": that action, held back and asked about (mood), not a read
    if command == "read" and context.launch and re.search(REPEAT_WITH, plain.lower()):
        command = "run"  # "do the same thing with configs/long.yaml" after a launch: that launch, on this experiment
    return command


# A command line's flag that asks to act only in pretence ("--dry-run", "--noop"): no tool has such a mode, and the
# action without it would be real.
DRY_RUN = (r"(?<![\w-])--(?:dry[-_]?run|no[-_]?op|simulate|what[-_]?if|plan[-_]only|check[-_]only|print[-_]only|"
           r"validate[-_]only)\b|"
           # said in a sentence: "train 10 steps (dry-run)", "dry run only", "do a dry run: open a PR"
           r"\bdry[-_ ]?run\b")  # fmt: skip


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


# A repeat of the launch before, on another experiment file: "the same thing with configs/long.yaml", "do that again
# for long.yaml".
REPEAT_WITH = (r"\b(?:same|again|repeat)\b.*\b(?:with|for|on|using)\s+(?:the\s+)?\S+\.ya?ml\b|"
               r"\b(?:with|for|on|using)\s+(?:the\s+)?\S+\.ya?ml\b.*\b(?:same|again)\b")  # fmt: skip
