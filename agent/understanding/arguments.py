"""The chosen tool's arguments: from the sentence's entities, and from the conversation what the sentence does not
restate (the model, GPUs and sequence length of the plan before, the run just launched, the sweep just read).

Filling can also ask (intent.clarify) where a value it needs is unclear: a setting said both on and off or named with
no value, a count of nodes no launch here can take, a sweep given settings it cannot take.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import yaml

from agent.understanding import regex as re  # `re` with a cache the parser's patterns fit in
from agent.understanding.context import Context
from agent.understanding.entities import (
    ALREADY_NAMED,
    DESCRIPTOR_WORDS,
    EXCLUDER,
    GENERIC,
    PRESET,
    SPEAKERS_MIND,
    Entities,
    Entity,
    masked,
)
from agent.understanding.entities import NO_LAUNCH as NO_LAUNCH_WORDS
from agent.understanding.entities import SWITCHES as SWITCH_WORDS
from agent.understanding.grammar import (
    LAYOUT_WORDS,
    OPTIMIZERS,
    PRECISIONS,
    REFUSED_AFTER,
    SETTING_NAMES,
    Intent,
    stated_total,
)
from agent.understanding.intents import (
    CUES,
    DONE_BEFORE,
    FOLDER,
    FOLLOW_UP,
    LISTED_RUN,
    RESUME,
    SET_GOING,
    SWEEP_FIGURES,
    TUNED_SETTING,
    negated_actions,
)
from agent.understanding.known import singular
from agent.understanding.normalise import RATE_NUMBER, TROUBLE_NOUN, normalise
from trainer.model.presets import MODELS

# A launch that repeats the one before, with what the sentence changes.
# What was done before, as the thing to launch: "run what we did last time", "train what I ran before".
DONE_LAST_TIME = (r"\bwhat\s+(?:we|i|you)\s+(?:did|ran|launched|trained|used|had)\s+(?:the\s+)?(?:last\s+time|before|"
                  r"earlier|previously)\b")  # fmt: skip
# The launch before the last one ("what we did before last time", "the run before last", "the second to last run"):
# not the launch the conversation repeats by default; asked.
BEFORE_LAST = (r"\b(?:before|prior\s+to)\s+(?:the\s+)?last\s+(?:time|one|run|launch)\b|"
               r"\b(?:time|run|launch|one)\s+before\s+(?:the\s+)?last\b|\b(?:second|2nd)[\s-]+(?:to[\s-]+)?last\b|"
               r"\bpenultimate\b")  # fmt: skip
AGAIN = (r"\bagain\b|\bsame\b|\brerun\b|\bre-run\b|\brelaunch\b|\bonce more\b|\bdo (?:it|that)\b|\bthis time\b|"
         rf"\b(?:run|train) it\b|{DONE_LAST_TIME}")  # fmt: skip
# What a launch verb's object is called when the speaker has something in mind and names nothing: "run the thing",
# "kick off that stuff", "fire up the whatsit", "run the thing again on 4 GPUs" with no launch before it (not "the thing
# from before": a repeat, asked about by itself).
LAUNCHED_PLACEHOLDER = (r"\b(?:launch|run|train|start|kick off|fire off|fire up|set off|submit|execute)\s+"
                        r"((?:the|that|this|our|my)\s+(?:thing|thingy|thingie|stuff|whatsit|whatsitsname|"
                        r"whatchamacallit|doohickey|gizmo|contraption)s?)\b"
                        r"(?!\s+from\s+before\b)(?:\s+again\b)?")  # fmt: skip
# A request that adds to the one before: "sorry, I forgot something: make the lr 3e-4", "one more thing: AC on".
AMENDED = (r"\b(?:i\s+)?forgot\s+(?:something|one thing|to\s+(?:say|mention|add|tell you))\b|\bone more thing\b|"
           r"\bi\s+should\s+have\s+(?:said|mentioned)\b|"
           # a correction of the launch just asked for: "actually make it without packing", "negative, 60 steps",
           # "sorry, please also turn off AC", "make that 4 procs", "everything else as before"
           r"^\W*(?:actually|sorry|oops|correction|negative|rather|wait|on second thought)\b|"
           r"\bmake\s+(?:it|that)\b|\balso\b|"
           r"\b(?:all|everything)\s+else\s+(?:unchanged|the\s+same|as\s+(?:before|it\s+was|is))\b|"
           r"\botherwise\s+(?:the\s+same|unchanged|as\s+before)\b")  # fmt: skip
PLAN_CARRIED = ("model", "gpu", "devices", "nodes", "seq_len", "device_mem")
LAUNCH_CARRIED = ("experiment", "nproc", "layout", "steps")
# A question about every run, not one: "which run had the best throughput?", "any OOM in the runs?"
ACROSS_RUNS = (r"\bwhich (?:of the |of my )?runs?\b|\b(?:any|all|every|each) (?:of (?:the|my) )?runs?\b|"
               r"\b(?:in|across|among|over) (?:the|my|all|all the|these) runs\b|"
               r"\bruns? (?:so far|overall)\b|"
               # "did anything OOM?", "has any of them crashed?": no run named, every run asked about
               r"^\W*(?:so\s+)?(?:did|has|have|was|were)\s+(?:anything|any of them|any jobs?|anyone)\b")  # fmt: skip
RUN_STATES = r"\boom\b|out of memory|\bfail|\bcrash|\bfinish|\bstatus\b|\bdone\b|\bsucceed|\berror|\bdied\b|\bok\b"


def _across_runs(intent: Intent, lowered: str, context: Context) -> None:
    """Every run's state is the list of runs; a figure compared over every run is asked about (the tools read one
    run at a time), never answered with the latest run's."""
    if re.search(RUN_STATES, lowered):
        intent.command = "runs"
        return
    first, second = [*context.known.runs, "runs/NAME", "runs/OTHER"][:2]
    intent.clarify = f"Which runs should I compare? I read one run at a time, e.g. `compare {first} and {second}`."


def planned_devices(context: Context, plain: str = "") -> int | None:
    """The GPUs of one machine that the turn before planned for: what "go with fsdp then" launches on. A launch
    before is such a hint only where the sentence says it is the same ("same thing but with FSDP instead"): "do it on
    tp instead" after dp_shard=2 is asked (agent/understanding/examples/probe.jsonl)."""
    launch = context.launch if context.previous == "run" else None
    if launch and re.search(r"\bsame\b", plain.lower()) and isinstance(launch.get("nproc"), int):
        return launch["nproc"]
    plan = context.plan if context.previous == "plan" else None
    if not plan or int(plan.get("nodes") or 1) != 1 or not isinstance(plan.get("devices"), int):
        return None
    return plan["devices"]


CORRECTED = r"\.\.\.|\bno wait\b|\bactually\b|\bi mean\b|\bsorry\b|\bscratch that\b|\bcorrection\b(?=\s*[:,\u2014-])"


def as_number(text: str) -> float | int:
    value = float(text)
    return int(value) if value.is_integer() else value


def _short(value: Any) -> Any:
    """A model preset's config override as its key only: the question stays one line."""
    if isinstance(value, list):
        return [f"{str(v).split('=', 1)[0]}=..." if len(str(v)) > 60 else v for v in value]
    return value


def _args_text(intent: Intent) -> str:
    return " ".join(f"{k}={v}" for k, v in intent.args.items())


def call_text(intent: Intent) -> str:
    args = ", ".join(f"{k}={_short(v)}" for k, v in intent.args.items())
    return f"/{intent.command} {args}".strip()


# --- filling each command's arguments ---------------------------------------------------------------------------


def _run_of(intent: Intent, entities: Entities, context: Context, latest: bool = True) -> str | None:
    """The run a sentence means: named, else the conversation's ("it", "that run"), else the repository's latest."""
    named = entities.all("run")
    if named:
        return str(named[-1])
    if context.run:
        return context.run
    return context.known.runs[0] if latest and context.known.runs else None


def _sweep_of(intent: Intent, entities: Entities, context: Context, latest: bool = True) -> str | None:
    named = entities.all("sweep")
    if named:
        return str(named[-1])
    if described := sweep_in_words(intent.text, context):
        return described
    if context.sweep:
        return context.sweep
    return context.known.sweeps[0] if latest and context.known.sweeps else None


def sweeps_said(context: Context) -> list[str]:
    """Every sweep the conversation's calls named, each once, in the order said ("the said sweep" is one only where
    one was said)."""
    said: list[str] = []
    for call in context.calls:
        for found in (call.args, call.result if isinstance(call.result, dict) else {}):
            sweep = found.get("sweep")
            if isinstance(sweep, str) and sweep.startswith("sweeps/") and sweep not in said:
                said.append(sweep)
    return said


def sweep_in_words(text: str, context: Context) -> str | None:
    """The one sweep a word of the sentence describes, outside a "the X sweep" phrase: "the layout findings", "the
    learning rate results" (Known.facts: what its trials vary, parts of its name)."""
    lowered = normalise(text, context.known.names).lower()
    # "not the layouts one": a word of what is ruled out describes no sweep meant
    lowered = re.sub(rf"{EXCLUDER}[\w./-]+(?:\s+(?:one|sweep|scan|run|results?))?", " ", lowered)
    for pattern, word in DESCRIPTOR_WORDS:
        lowered = re.sub(pattern, word, lowered)
    words = set(re.findall(r"[a-z0-9]+", lowered)) - GENERIC
    facts = {sweep: context.known.facts(sweep) for sweep in context.known.sweeps}
    shared = set.intersection(*facts.values()) if facts else set()
    found = [s for s, f in facts.items() if any(singular(w) in f - shared for w in words if len(w) >= 2)]
    return found[0] if len(found) == 1 else None


# A pronoun or a bare "how did it go": it points back at something the conversation must have named.
POINTING = r"\b(?:it|that|this|its|it'?s|they|them|the thing|the job)\b"
LATEST_WORDS = r"\b(?:latest|last|newest|recent|most recent|previous|current)\b"


# A run named as the likeness of another's state, not asked about: "or did it crash like the tensor-parallel one",
# "unlike r1", "the same way tp-try did".
LIKENED = r"\b(?:like|unlike|as with|same as|the same way as|similar to|just as)\s+(?:(?:the|that|our|my)\s+)?$"


def _likened(entities: Entities) -> set[str]:
    """The runs named only as what another is likened to."""
    lowered = entities.text.lower()
    return {str(e.value) for e in entities.found if e.kind == "run" and re.search(LIKENED, lowered[: e.span[0]])}


# A request in a sentence of its own, after others that set the scene: "The DDP baseline looks slow. Pull r1's numbers."
ASKED_LAST = r"(?:^|[.!;:]\s+)(?:@\w+\s+)?(?:please\s+)?(?:pull|show|get|give|fetch|grab|read)\b[^.!?;]*[.!]?\s*$"
SIDE_BY_SIDE = r"\b(?:compare\w*|versus|vs\.?|against|side by side|differ\w*|both|each)\b"


def _asked_last(entities: Entities) -> str | None:
    """The one run a closing request names when the sentences before it only set the scene (no comparison asked)."""
    lowered = entities.text.lower()
    last = re.search(ASKED_LAST, lowered)
    if not last or re.search(SIDE_BY_SIDE, lowered):
        return None
    runs = {str(e.value) for e in entities.found if e.kind == "run" and e.span[0] >= last.start()}
    return runs.pop() if len(runs) == 1 else None


# A run named as the scene of the question, not as what it asks about: the reference it is measured against
# ("compared to baseline-ddp, how did r1 do?", "against baseline-ddp's tokens/s, what did r1 manage?", "put against
# tp-try, how ...", "baseline-ddp is the reference. how's tp-try?", "r1 was fine. what about tp-try?"), one left to
# go on ("let r1 finish; meanwhile show me ..."), or one of what the speaker already did (intents.DONE_BEFORE: "I
# already benchmarked r1; how did baseline-ddp do?").
SCENE = (
    r"(?:^|[.;!?]\s*)(?:(?:put|set|measured|held|stacked)\s+)?(?:compared (?:to|with)|relative to|against|next to|"
    r"versus|vs\.?)\s+(?:the\s+)?_+(?:'s\s+[\w/]+)?\s*,|"
    r"(?:^|[.;!?]\s*)_+(?:'s\s+\w+)?\s+(?:is|was|looks?|looked|seems?|seemed)\s+(?:\w+\s+)?(?:the\s+)?"
    r"(?:reference|baseline|control|fine|ok|okay|good|great|done|finished|healthy|solid)\b[^.;!?]*[.;!?]|"
    r"(?:^|[.;!?,]\s*)let\s+_+\s+(?:finish|run|be|continue|go on|keep going|complete)\b[^.;!?]*[.;!?]"
)


def _scene_runs(entities: Entities) -> set[str]:
    """The runs named only as the scene of the request (SCENE), where another is named beside them."""
    lowered = masked(entities.text.lower(), entities)
    spans = [m.span() for m in re.finditer(SCENE, lowered)]
    spans += [m.span() for m in re.finditer(DONE_BEFORE, entities.text.lower())]
    runs = [e for e in entities.found if e.kind == "run"]
    asked = {str(e.value) for e in runs if not any(s <= e.span[0] < t for s, t in spans)}  # named again outside
    return {str(e.value) for e in runs} - asked


def _fill_run_tool(intent: Intent, entities: Entities, context: Context) -> None:
    named = list(dict.fromkeys(str(r) for r in entities.all("run")))
    if len(named) >= 2 and 0 < len(asked := [r for r in named if r not in _scene_runs(entities)]) < len(named):
        named = asked  # "compared to baseline-ddp, how did r1 do?": r1's
        if len(named) == 1 and intent.command == "compare":
            intent.command = "results"
        if len(named) == 1:
            intent.args["run"], intent.words = named[0], named
            return
    if len(named) >= 2 and intent.command == "results" and (asked := _asked_last(entities)):
        intent.args["run"], intent.words = asked, [asked]  # "the DDP baseline looks slow. Pull r1's numbers": r1's
        return
    if len(named) >= 2 and intent.command == "results":  # "r1 vs baseline-ddp loss": both, side by side
        intent.command, intent.words = "compare", named[:2]
        return
    if len(named) >= 2 and intent.command == "status":  # "did r1 finish or crash like tp-try?": tp-try is compared to
        named = [r for r in named if r not in _likened(entities)] or named
        if len(named) == 1:
            intent.args["run"], intent.words = named[0], named
            return
    if len(named) == 2 and (instead := _named_instead(entities)):
        # "wait for tp-try? ... then r1, wait on that one instead": the one named last, in place of the other
        intent.args["run"], intent.words = instead, [instead]
        return
    if len(named) >= 2:  # "cancel tp-try and baseline-ddp": the tool takes one run; never only one of those named
        intent.clarify = f"One run at a time: which first, {' or '.join(named)}?"
        return
    bare_wait = intent.args.get("wait") == "yes" and len(re.findall(r"\w+", intent.text)) <= 2  # "wait", "pls wait"
    if (
        not entities.has("run")
        and context.run is None
        and context.known.runs
        and (re.search(POINTING, intent.text.lower()) or bare_wait)
        and not re.search(LATEST_WORDS, intent.text.lower())
    ):  # "so, how did it go?" with no run in the conversation: "it" is a guess, the latest one a question
        latest = context.known.runs[0]
        intent.clarify = f"Which run do you mean by that: {latest}, the latest? e.g. `{intent.command} {latest}`."
        return
    if not entities.has("run") and (choice := entities.get("run_choice")):
        intent.clarify = f"Which run do you mean: {' or '.join(map(str, choice))}?"
        return
    if (run := _run_of(intent, entities, context)) is not None:
        intent.args["run"] = run
        intent.words = [run]


# The last run named, said to be meant in place of the one before: "..., then baseline-ddp, wait on that one
# instead", "r1 instead". Never "instead of" (which names the one left), nor where the first is kept too.
NAMED_INSTEAD = (r"^(?:'s)?\s*[,;:]?\s*(?:(?:please\s+|just\s+)?(?:\w+\s+){0,3}?(?:that|this|the\s+latter)\s+"
                 r"(?:one\s+|run\s+)?)?instead\b(?!\s+of\b)(?![^.;!?]*\b(?:too|also|as well|both)\b)")  # fmt: skip


def _named_instead(entities: Entities) -> str | None:
    """The later of two runs named, where the words right after it take it in place of the earlier one."""
    runs = sorted((e for e in entities.found if e.kind == "run"), key=lambda e: e.span)
    if len({str(e.value) for e in runs}) != 2 or str(runs[-1].value) == str(runs[0].value):
        return None
    lowered = entities.text.lower()
    if re.search(r"\b(?:both|and also|as well as)\b", lowered):
        return None
    return str(runs[-1].value) if re.match(NAMED_INSTEAD, lowered[runs[-1].span[1] :]) else None


def _fill_cancel(intent: Intent, entities: Entities, context: Context) -> None:
    """Stopping a run takes the run named or the conversation's, never a guess: else one question naming the latest.
    A run named only to be spared ("do not cancel baseline-ddp") is no target."""
    spared = set(map(str, entities.all("spared_run")))
    if len(named := set(map(str, entities.all("run"))) - spared) >= 2:
        intent.clarify = f"One run at a time: which first, {' or '.join(sorted(named))}?"
        return
    run = named.pop() if named else None if spared else _run_of(intent, entities, context, latest=False)
    if run is not None:
        intent.args["run"] = run
        intent.words = [run]
        if re.search(LATER_STOP, _stop_clauses(intent.text.lower())):  # cancel_run stops it now, never later
            intent.clarify = f"Cancel {run} now? I can only stop it now, not at a later step or time. yes / edit"
    elif context.known.runs:
        latest = context.known.runs[0]
        intent.clarify = f"Cancel {latest}, the latest run? Name the run to confirm, e.g. `cancel {latest}`."


# A stop said for later: "stop r1 after it reaches step 10", "kill it once the loss is below 3", "at step 50" ("if it is
# still running" is now).
LATER_STOP = (r"\b(?:after|once|when|as soon as|whenever)\b\s+(?!(?:that|this|you|possible|convenient)\b)\S+|"
              r"\bat step\b|\bin \d+ (?:steps?|minutes?|hours?|mins?)\b")  # fmt: skip


def _stop_clauses(lowered: str) -> str:
    """The sentences of a request that say to stop: "tp-try is stuck at step 3; shut it down" gives a reason first,
    and its step is no time to stop at."""
    clauses = re.split(r"[.;!?](?:\s+|$)", lowered)
    return " ".join(c for c in clauses if any(re.search(rule, c) for rule, _ in CUES["cancel"])) or lowered


def _fill_resume(intent: Intent, entities: Entities, context: Context) -> None:
    """The run or sweep named (or the sweep the sentence says); agent.offline finds the preempted one otherwise."""
    if entities.has("sweep") or re.search(r"\bsweep\b", intent.text.lower()):
        intent.args["kind"] = "sweep"
        if named := entities.get("sweep"):
            intent.args["sweep"] = str(named)
    elif named := _resumed_run(entities) or entities.get("run") or context.run:  # "resume it": the conversation's
        intent.args["run"] = str(named)
    elif context.sweep:  # "restart it from where it stopped" after a sweep was the subject: that sweep
        intent.args["kind"] = "sweep"
        intent.args["sweep"] = str(context.sweep)


# Where a clause ends: another clause's run is no object of the verb ("resume tp-try, then cancel r1").
CLAUSE_END = r"[,;.!?:]|\b(?:then|and|but|while|though|although|since|because)\b"


def _resumed_run(entities: Entities) -> str | None:
    """The run nearest after the resuming verb in its own clause: "resume tp-try; r1 is fine" resumes tp-try, never
    the run another clause names."""
    lowered = entities.text.lower()
    for verb in re.finditer(RESUME, lowered):
        ends = re.search(CLAUSE_END, lowered[verb.end() :])
        stop = verb.end() + ends.start() if ends else len(lowered)
        runs = [e for e in entities.found if e.kind == "run" and verb.end() <= e.span[0] < stop]
        if runs:
            return str(min(runs, key=lambda e: e.span).value)
    return None


def _fill_status(intent: Intent, entities: Entities, context: Context) -> None:
    if entities.has("sweep") and not entities.has("run"):
        intent.args["sweep"] = str(entities.get("sweep"))
        if intent.args.get("wait") != "yes":
            intent.command = "trials"
        return
    _fill_run_tool(intent, entities, context)


def _fill_trials(intent: Intent, entities: Entities, context: Context) -> None:
    """A sweep's trials read, a report or a pull request: of the sweep named or described, else the conversation's,
    else the latest; "the sweep" said of several, with none of those, is asked about (how the sweep turned out is
    that one's outcome, never the latest's in its place)."""
    if not entities.has("sweep") and (choice := entities.get("sweep_choice")):
        intent.clarify = f"Which sweep do you mean: {' or '.join(map(str, choice))}?"
        return
    if _which_sweep_unsaid(intent, entities, context, sweep_in_words(intent.text, context)):
        sweeps = " or ".join(s.removeprefix("sweeps/") for s in context.known.sweeps)
        intent.clarify = f"Which sweep do you mean: {sweeps}? There is more than one here."
        return
    if (sweep := _sweep_of(intent, entities, context)) is not None:
        intent.args["sweep"] = sweep


def _fill_sweep_named(intent: Intent, entities: Entities, context: Context) -> None:
    """A report or pull request: of the sweep named, else the conversation's, else the latest. A run named as what to
    write up ("write r1 up for the team") is asked about: a report is of a sweep, never the latest one in its place."""
    described = sweep_in_words(intent.text, context)
    if entities.has("run") and not entities.has("sweep", "sweep_choice") and described is None:
        run, sweeps = str(entities.get("run")), ", ".join(context.known.sweeps) or "none"
        intent.clarify = f"A report is written of a sweep, and {run} is a run: which sweep should it cover? ({sweeps})"
        return
    _fill_trials(intent, entities, context)  # (which asks which sweep "the sweep" is, when it is not said)


# "the sweep", as if one were meant, or its name forgotten ("whichever one it was"): the latest in its place would
# be a guess, for a report as for a reading. "a report", "the latest sweep" say which.
THE_SWEEP = (r"\bthe\s+sweep(?:'s)?\b(?!\s+(?:over|of|on|across|that|which|where)\b)|\bwhichever\s+(?:one|sweep)\b|"

             # one only told of: "someone told me a sweep found the best setup"
             r"\b(?:told|heard|said|says|claimed|claims)\b[^.;!?]*\b(?:a|some)\s+sweep\b|"
             r"\b(?:don'?t|do not|can'?t|cannot)\s+(?:\w+\s+)?(?:remember|recall)\b")  # fmt: skip


# A sweep's figures with no article, as if one sweep were meant, written from: "update docs per sweep results", "a
# report on sweep findings" (a reading of them, "sweep results pls", is the latest's; "the latest sweep results" say
# which).
SWEEP_FIGURES_WRITTEN = (r"\b(?:per|from|with|using|by|after|on|of|to|based\s+on|according\s+to)\s+"
                         rf"sweep(?:'s)?\s+{SWEEP_FIGURES}")  # fmt: skip
WRITES = ("docs", "report", "pr")


def _which_sweep_unsaid(intent: Intent, entities: Entities, context: Context, described: str | None) -> bool:
    """Whether a report, pull request or reading is of "the sweep" (a write of "sweep results") while the repository
    has several and neither the sentence nor the conversation says which: one question, never the latest in its
    place."""
    said = entities.has("sweep", "sweep_choice") or described is not None or context.sweep is not None
    lowered = intent.text.lower()
    unsaid = re.search(THE_SWEEP, lowered) or (intent.command in WRITES and re.search(SWEEP_FIGURES_WRITTEN, lowered))
    return not said and len(context.known.sweeps) > 1 and bool(unsaid)


def no_sweep_said(intent: Intent, entities: Entities, context: Context) -> str | None:
    """One question where a report (or the pull request that carries one) says no sweep at all ("do a report",
    "could you put together a write-up?"), the conversation holds none and none is called the latest, while the
    repository has several: the newest in its place would be a guess."""
    said = entities.has("sweep", "sweep_choice") or context.sweep is not None
    if said or sweep_in_words(intent.text, context) or re.search(LATEST_WORDS, intent.text.lower()):
        return None
    if len(context.known.sweeps) < 2:
        return None
    sweeps = " or ".join(s.removeprefix("sweeps/") for s in context.known.sweeps)
    what = "pull request's report" if intent.command == "pr" else "report"
    return f"Which sweep should the {what} cover: {sweeps}? There is more than one here."


# The docs brought into line with something that is no sweep ("bring the docs into line with r1"), or with every
# sweep at once ("... across all sweeps, then update the docs"): the docs take their results from one sweep.
DOCS_FROM_NO_ONE_SWEEP = r"\b(?:all|every|both|each)\s+(?:the\s+|of\s+the\s+)?sweeps?\b"


# What the docs are told to take that is the conversation's run: "update the docs with its throughput numbers" after
# r1's status.
ITS_OWN = r"\b(?:its|their)\b"
# A page of the docs, which the docs update writes (no source of its figures): docs/training.md, the README.
DOC_PAGE = r"docs/\S+|\S*(?:readme|training)(?:\.md)?|\S+\.(?:md|rst)"


def _docs_from_no_sweep(entities: Entities, intent: Intent, context: Context) -> str | None:
    """What the docs are told to take that is no sweep, where no sweep is named: a file that is no page of the docs
    ("update the docs with configs/long.yaml"), or "its" figures while the conversation is on a run and no sweep."""
    files = [str(f) for f in entities.all("file") if not re.fullmatch(DOC_PAGE, str(f), re.I)]
    if files:
        return f"{files[0]} is a file"
    if context.run and not sweeps_said(context) and re.search(ITS_OWN, intent.text.lower()):
        return f"'its' is {context.run}, a run"
    return None


def _fill_docs(intent: Intent, entities: Entities, context: Context) -> None:
    named = entities.all("sweep")
    sweeps = ", ".join(s.removeprefix("sweeps/") for s in context.known.sweeps) or "none"
    if not named and entities.has("run") and sweep_in_words(intent.text, context) is None:
        run = str(entities.get("run"))
        intent.clarify = f"The docs take their results from a sweep, and {run} is a run: which sweep? ({sweeps})"
        return
    if not named and re.search(DOCS_FROM_NO_ONE_SWEEP, intent.text.lower()) and len(context.known.sweeps) > 1:
        intent.clarify = f"The docs take their results from one sweep: which? ({sweeps})"
        return
    if (
        not named
        and sweep_in_words(intent.text, context) is None
        and (other := _docs_from_no_sweep(entities, intent, context))
    ):
        intent.clarify = f"The docs take their results from a sweep, and {other}: which sweep? ({sweeps})"
        return
    if named:
        intent.args["sweep"] = str(named[-1])
    elif described := sweep_in_words(intent.text, context):  # "get the layout findings into the docs"
        intent.args["sweep"] = described
    elif context.sweep and re.search(rf"\b(?:it|that|this|them)\b|{ALREADY_NAMED}", intent.text.lower()):
        intent.args["sweep"] = context.sweep  # "from that sweep", "into conformity with the said sweep"
    elif _which_sweep_unsaid(intent, entities, context, None):  # "bring the docs up to date with the sweep results"
        sweeps = " or ".join(s.removeprefix("sweeps/") for s in context.known.sweeps)
        intent.clarify = f"Which sweep should the docs take their results from: {sweeps}? There is more than one here."


def _at_step(run: str, lowered: str, context: Context, intent: Intent) -> str:
    """The run's checkpoint at the step the sentence names ("step 20", "step_20", "its step-20 checkpoint"), or the
    run itself: its directory is its latest checkpoint (run_benchmark resolves it). A step it has no checkpoint of
    is asked about, never taken as the latest."""
    checkpoints = context.known.checkpoints(run)
    stepped = [c for c in checkpoints if re.search(rf"\b(?:step[ _-]?){c.rsplit('_', 1)[-1]}\b", lowered)]
    if stepped:
        return stepped[0]
    if checkpoints and (named := re.search(r"\bstep[ _-]?(\d+)\b", lowered)):
        have = ", ".join(c.rsplit("/", 1)[-1] for c in checkpoints)
        intent.clarify = (f"{run} has no checkpoint at step {named.group(1)} (it has {have}). Which should I "
                          f"benchmark, e.g. `benchmark {checkpoints[0]}`?")  # fmt: skip
    return run


def _fill_bench(intent: Intent, entities: Entities, context: Context) -> None:
    lowered = intent.text.lower()
    if checkpoint := entities.get("checkpoint"):
        intent.args["model"] = str(checkpoint)
    elif entities.has("run"):
        scene = _scene_runs(entities)  # "benchmark r1 — I compared baseline-ddp to it yesterday": r1
        run = ([str(r) for r in entities.all("run") if str(r) not in scene] or [str(entities.all("run")[-1])])[-1]
        intent.args["model"] = _at_step(run, lowered, context, intent)
    elif context.run and re.search(r"\b(?:it|that|this|its|again)\b", lowered):
        intent.args["model"] = _at_step(context.run, lowered, context, intent)  # "its step-20 checkpoint"
    elif re.search(LATEST_WORDS, lowered) and context.known.runs:  # "benchmark the latest"
        intent.args["model"] = context.known.runs[0]
    else:
        example = context.known.runs[0] if context.known.runs else "runs/NAME"
        intent.clarify = f"Which run or checkpoint should I benchmark? e.g. `benchmark {example}`."
    suite, question = _suite(plain_of(intent, context).lower(), context)  # "the private sweet" said is a suite
    if suite:
        intent.args["suite"] = suite
    intent.clarify = intent.clarify or question


# The suite a benchmark request names: "the builtin eval suite", "suite=tasks/qa.yaml", "on the default benchmark".
SUITE = (r"\bsuite\s*[=:]\s*(\S+)|\b([\w./-]+)\s+(?:eval(?:uation)?\s+|benchmark\s+|test\s+)?suite\b|"
         r"\b(?:on|with|using) the ([\w./-]+) (?:benchmark|eval)\b")  # fmt: skip
BUILTIN = {"builtin", "built-in", "built", "default", "standard", "private", "usual", "normal", "own", "our",
           "internal", "in-house", "inhouse", "proprietary", "company", "held-out", "hold-out", "holdout",
           "hidden"}  # fmt: skip  # "the held-out benchmark": the private one
NOT_A_SUITE = {"the", "a", "an", "eval", "evaluation", "benchmark", "whole", "full", "entire", "my", "on", "test"}


def _suite(lowered: str, context: Context) -> tuple[str | None, str | None]:
    """The suite "builtin" for the one meshpilot ships (by any of its everyday names), a task file or directory of the
    repository by its path, else a question: a suite is never a word of the sentence taken as its name."""
    lowered = re.sub(r"\bbuilt[- ]in\b", "builtin", lowered)
    for found in re.finditer(SUITE, lowered):
        name = next(g for g in found.groups() if g).strip(".,;:?!'\"")
        if name in BUILTIN:
            return "builtin", None
        if name in NOT_A_SUITE:
            continue
        path = context.known.file(name) or (name if context.known.root and (context.known.root / name).exists()
                                            else None)  # fmt: skip
        if path:
            return path, None
        return None, f"Which suite: the builtin one, or a task file or directory of the repository? I know no {name!r}."
    return None, None


def _fill_read(intent: Intent, entities: Entities, context: Context) -> None:
    lowered = intent.text.lower()
    if re.search(LISTED_RUN, lowered) and (run := entities.get("run")):
        intent.args["path"] = str(run)  # "ls runs/tp-try": read_file lists its folder
        intent.words = [str(run)]
        return
    # (the words as typed: "logg" is the log with its last letter doubled, which normalise corrects in plain only)
    if not entities.has("file", "experiment") and not re.search(r"\b(?:logg?|file|json|yaml|txt|config)\b", lowered):
        if entities.has("sweep") and not entities.has("run"):  # "show sweeps/layouts-nov": its trials
            intent.command = "trials"
            return _fill_trials(intent, entities, context)
        if entities.has("run"):  # "show r1": its results
            intent.command = "results"
            return _fill_run_tool(intent, entities, context)
    files = [str(f) for f in entities.all("file")]
    run = entities.get("run") or (context.run if re.search(r"\b(?:its|it'?s|that run'?s?)\b", lowered) else None)
    run = run or (context.run if _lone_file_of_run(lowered, context) else None)
    # "not the metrics, the log of r1": a file said not to be wanted is no stem of the one to show
    stem = _file_stem(negated_actions(lowered)[1])
    in_run = [f for f in context.known.files if run and stem and f.startswith(f"{run}/{stem}.")]
    # a file no path of the repository has, named of a run (or of the run just talked about: "display log.txt of R")
    # (or of a sweep: "layouts-nov's summary.json" is sweeps/layouts-nov/summary.json)
    owners = [r for r in (run, context.run, entities.get("sweep")) if r and files
              and _has_file(f"{r}/{files[-1]}", context)]  # fmt: skip
    owner = owners[0] if owners else None
    if files and owner and files[-1] not in context.known.files:
        intent.args["path"] = f"{owner}/{files[-1]}"  # "r1's steps.jsonl"
    elif files and (unowned := _unowned_file(lowered, files[-1], run, context)):
        intent.clarify = unowned
        return
    elif files:
        intent.args["path"] = files[-1]
    elif len(in_run) == 1:
        intent.args["path"] = in_run[0]
    elif entities.get("experiment"):
        intent.args["path"] = str(entities.get("experiment"))
    elif run and re.search(r"\blogg?\b", lowered):
        intent.args["path"] = f"{run}/log.txt"
    elif (folder := re.search(FOLDER, lowered)) and context.known.root and (context.known.root / folder[1]).is_dir():
        intent.args["path"] = folder[1]  # "what's in the sweeps folder": read_file lists a directory
    elif run and (kind := re.search(r"\b(json|jsonl|yaml|txt)\b", lowered)):
        found = [f for f in context.known.files if f.startswith(f"{run}/") and f.endswith("." + kind.group(1))]
        if len(found) == 1:
            intent.args["path"] = found[0]
        else:
            names = " or ".join(f"`{f}`" for f in found) or f"a file of {run}"
            intent.clarify = f"Which file do you mean: {names}?"
            return
    if "path" in intent.args and (missing := _missing_owner(intent.args["path"], context)):
        intent.clarify = missing
        return
    if "path" in intent.args:
        intent.words = [intent.args["path"]]
    elif intent.clarify is None:
        example = context.file or "meshpilot.yaml"
        intent.clarify = f"Which file should I show? e.g. `show {example}`."


def _has_file(path: str, context: Context) -> bool:
    """Whether the repository has the file at `path` (a sweep's files are not among the names a user types)."""
    return path in context.known.files or bool(context.known.root and (context.known.root / path).is_file())


# A file said to be someone's: "its metrics.json", "r9's metrics.json", "metrics.json of r9".
OWNED_FILE = r"\b(?:its|their|[\w-]+'s)\s+{name}|{name}\s+(?:of|from|for|in)\s+(?!the\s+repo)"


def _unowned_file(lowered: str, name: str, run: object, context: Context) -> str | None:
    """One question where a file is said to be a run's but no run known here has it ("grab r9's metrics.json",
    "r1's metric.json", "its memory.json" with no run talked about): the repository root's file of that name would be
    another file than the one asked for."""
    if not context.known.files or _has_file(name, context) or "/" in name:
        return None  # (no repository read: nothing to tell a run's file from the root's)
    said = re.escape(name.lower())
    if not run and not re.search(OWNED_FILE.format(name=said), lowered):
        return None
    found = [f for f in context.known.files if f.rsplit("/", 1)[-1] == name]
    runs = ", ".join(context.known.runs)
    if found:
        return f"Which run's {name} do you mean ({runs})?"
    if run:
        listed = ", ".join(f.rsplit("/", 1)[-1] for f in context.known.files if f.startswith(f"{run}/"))
        return f"I find no {name} in {run}, so I have not read it ({run} has {listed}). Which file do you mean?"
    return f"I find no {name} of that run here, so I have not read it (runs: {runs}). Which file of which run?"


def _missing_owner(path: str, context: Context) -> str | None:
    """One question where a file's path is of a run or sweep the repository lacks ("runs/r2/metrics.json" with no
    runs/r2): reading it would show an error, never the figure asked for; the name is likely a slip for a known one."""
    owner = re.match(r"(runs|sweeps)/([^/\s]+)/", path)
    if owner is None or not context.known.root or (context.known.root / path).exists():
        return None
    known = context.known.runs if owner[1] == "runs" else context.known.sweeps
    if not known or f"{owner[1]}/{owner[2]}" in known:
        return None
    kind = "run" if owner[1] == "runs" else "sweep"
    listed = ", ".join(known)
    return f"I find no {kind} {owner[1]}/{owner[2]} here, so I have not read {path} ({owner[1]}: {listed}). Which?"


# A run's file named alone, as a follow-up asks it: "log?", "and the log file?", "what about its config?".
LONE_FILE = (r"\W*(?:and\s+|what\s+about\s+|how\s+about\s+)?(?:the\s+|its\s+)?(?:log|config|memory)"
             r"(?:\.\w+|\s+file)?(?:\s+(?:too|then|please|pls))?\W*")  # fmt: skip
# The turns that were about one run, whose files such a follow-up asks for.
ABOUT_A_RUN = ("status", "results", "wait", "cancel", "bench", "resume")


def _lone_file_of_run(lowered: str, context: Context) -> bool:
    """Whether the sentence is only a run's file named, right after a turn about a run: that run's file ("log?"
    after "status runs/tp-try" is its log)."""
    return context.previous in ABOUT_A_RUN and bool(re.fullmatch(LONE_FILE, lowered))


# A run's file by its stem: "the memory file", "log.txt", "the log".
FILE_STEM = r"(?<!out of )(?<!out-of-)\b(metrics|memory|steps|config|log)(?:\.\w+)?(?: file)?\b"


def _file_stem(lowered: str) -> str | None:
    """The stem of the run's file the sentence names; one said as a file ("the log file", "memory.json") before a
    bare word ("went down with an out-of-memory. Read me the log file": the log, not the memory file)."""
    named = re.search(r"\b(metrics|memory|steps|config|log)(?:\.\w+|\s+file)\b", lowered)
    bare = re.search(FILE_STEM, lowered)
    found = named or bare
    return found.group(1) if found else None


def _fill_sweep(intent: Intent, entities: Entities, context: Context) -> None:
    """A sweep takes its experiment and trial count only: a setting, step count or layout the sentence states would
    be dropped, so it is asked about; "again" with no sweep in the conversation too."""
    if experiment := entities.get("experiment") or _experiment_file(entities):
        intent.args["experiment"] = experiment
    if trials := entities.get("trials"):
        intent.args["trials"] = trials
    elif _sweep_follow_up(intent, context):  # "same for the long config" after 6 trials: 6 trials again
        intent.args["trials"] = context.last("run_sweep").args["trials"]
    _refused_experiment(intent, entities)
    stated = [
        e for e in entities.found if e.kind in ("switch", "switch_doubt", "override", "optimizer", "steps", "nproc")
    ]
    tuned = re.search(TUNED_SETTING, plain_of(intent, context).lower())
    if tuned and intent.clarify is None:  # "tune the learning rate for configs/long.yaml": no sweep varies it
        setting = re.search("|".join(SETTING_NAMES.values()), tuned.group(0)).group(0)
        intent.clarify = (f"A sweep varies layouts only (the experiment's search section), not the {setting}. Sweep "
                          f"the layouts (`{f'/sweep {_args_text(intent)}'.strip()}`), or launch a run for each value "
                          "to compare, e.g. `train 20 steps with lr 3e-4`?")  # fmt: skip
    if stated and intent.clarify is None:
        said = plain_of(intent, context)[stated[0].span[0] : stated[0].span[1]] or str(stated[0].value)
        intent.clarify = (f"A sweep varies layouts over the experiment as it is: it cannot take {said!r}. Change the "
                          f"experiment file first, or sweep without it (/sweep {_args_text(intent)})?")  # fmt: skip
    again = re.search(r"\bagain\b|\bre-?run\b|\bonce more\b|\bsame\b", intent.text.lower())
    if again and not context.last("run_sweep") and not intent.args and intent.clarify is None:
        intent.clarify = "Start a new sweep of meshpilot.yaml with the default trials? This conversation started none."


def _sweep_follow_up(intent: Intent, context: Context) -> bool:
    before = context.last("run_sweep")
    said = plain_of(intent, context).lower()  # normalised: "mesmo número de trials" is "same number of trials"
    return before is not None and "trials" in before.args and bool(re.search(FOLLOW_UP, said))


DEFAULT_EXPERIMENT = "meshpilot.yaml"


def _refused_experiment(intent: Intent, entities: Entities) -> None:
    """An experiment the sentence refuses ("avoid the long config", "not meshpilot.yaml") is never the one used: one
    carried from the launch before is dropped, so the default runs; where the default is the one refused and no other
    is named, which one is asked."""
    refused = {str(v) for v in [*entities.all("not_experiment"), *entities.all("refused_experiment")]}
    if not refused:
        return
    if intent.args.get("experiment") in refused:
        named = [str(v) for v in [*entities.all("experiment"), *entities.all("file")] if str(v).endswith(".yaml")]
        if others := [v for v in named if v not in refused]:  # "don't use the long config, use other.yaml"
            intent.args["experiment"] = others[-1]
        else:
            intent.args.pop("experiment")
    if "experiment" not in intent.args and DEFAULT_EXPERIMENT in refused and intent.clarify is None:
        intent.clarify = (f"Which experiment, if not {DEFAULT_EXPERIMENT}? Name its file, e.g. "
                          f"`{'sweep' if intent.command == 'sweep' else 'train'} configs/long.yaml`.")  # fmt: skip


def _missing_experiment(intent: Intent, context: Context) -> str | None:
    """An experiment file the repository lacks ("--experiment configs/xl.yaml"): asked about, never launched (the
    launch would fail, or run a file written since that nobody checked)."""
    experiment = str(intent.args.get("experiment") or "")
    if not experiment.endswith((".yaml", ".yml")) or context.known.root is None or context.known.file(experiment):
        return None
    files = ", ".join(context.known.experiments()) or "none"
    return f"I find no {experiment} in this repository (experiment files: {files}): which experiment should it run?"


def _experiment_file(entities: Entities) -> str | None:
    files = [str(f) for f in entities.all("file") if str(f).endswith((".yaml", ".yml"))]
    return files[-1] if files else None


def _only_the_latest(entities: Entities) -> bool:
    """The only run the sentence names is "the last one" (entities: the newest on disk, no span of its own)."""
    runs = [e for e in entities.found if e.kind == "run"]
    return len(runs) == 1 and runs[0].span == (0, 0)


# The run named as what the launch before did, in the user's words: "tp-try ran out of memory like that. Can you do
# the same but ...": "like that" points at the launch in the conversation, which the user takes the run for.
LIKE_THAT = r"\blike\s+(?:that|this)\b|\bthat\s+way\b|\bwith\s+(?:those|these)\s+settings\b"


def _named_as_the_launch_before(named: object, lowered: str, context: Context) -> bool:
    """The run named "like that" is the launch before as the user sees it: every fact the run records (its
    processes and layout) agrees with that launch, so its own facts and the launch's are one (any fact that differs
    leaves the run named as the one to copy)."""
    if named is None or not context.launch or not re.search(LIKE_THAT, lowered):
        return False
    recorded = context.known.launch_of(str(named))
    return bool(recorded) and all(str(context.launch.get(key)) == str(value) for key, value in recorded.items())


def _run_or_launch_before(named: object, lowered: str, context: Context) -> str | None:
    """One question where the run named "like that" ran otherwise than the launch before: which is repeated."""
    recorded = context.known.launch_of(str(named)) if named is not None else {}
    if not recorded or not context.launch or not re.search(LIKE_THAT, lowered):
        return None
    before = {key: context.launch[key] for key in LAUNCH_CARRIED if key in context.launch}
    return (f"Which launch should I repeat: {named}'s ({recorded}) or the one before in this conversation "
            f"({before})? They differ.")  # fmt: skip


def _fill_launch(intent: Intent, entities: Entities, context: Context) -> None:
    """A launch: every stated value, negations kept; "again" and "the same but" start from the launch before."""
    lowered = intent.text.lower()
    # launch_run takes no nodes: it starts on this machine ("2 machines, 4 gpus each" are nodes the grammar misses)
    nodes = max(int(intent.args.pop("nodes", None) or 1), int(entities.get("node_count") or 1))
    if (seq_len := intent.args.pop("seq_len", None)) and not any(
        o.startswith("data.seq_len=") for o in intent.args.get("set", [])
    ):  # "context 512" in a launch: the experiment's sequence length (launch_run takes no seq_len of its own)
        intent.args["set"] = [*intent.args.get("set", []), f"data.seq_len={seq_len}"]
    amends = re.search(FOLLOW_UP, lowered) or re.search(AMENDED, lowered)
    # (read in the normalised sentence too: "uguale, ma lr 3e-4" is "same, but lr 3e-4")
    again = re.search(AGAIN, lowered) or re.search(AGAIN, plain_of(intent, context).lower())
    again = again or (context.previous == "run" and amends)
    named = entities.get("run")
    # "the last tp one got too full! same again, but ...": the launch just before is the latest
    latest_before = bool(named is not None and again and context.launch and _only_the_latest(entities))
    latest_before = latest_before or bool(again and _named_as_the_launch_before(named, lowered, context))
    if again and not latest_before and (which := _run_or_launch_before(named, lowered, context)):
        intent.clarify = intent.clarify or which
    if latest_before:
        named = None
    if named is None and not context.launch and context.run and re.search(r"\b(?:it|that|this)\b", lowered):
        named = context.run  # "rerun it with AC" after reading tp-try: tp-try's layout and processes, AC on
    copying = named is not None and re.search(COPY, lowered) and context.known.launch_of(str(named))
    if again and context.launch and not copying:  # "like r1 again": r1's, not the launch before
        before = context.launch
        if "layout" not in intent.args and _layout_by_word(before, context.previous_text):
            before = _at_count(before, intent.args.get("nproc"))  # data parallel over all GPUs, as many as said
        for key in LAUNCH_CARRIED:  # "no, 4 GPUs" after fsdp on 2: fsdp on 4 ("dp_shard=2" on 4 is asked about)
            if key in before and key not in intent.args:
                intent.args[key] = before[key]
        carried = [o for o in context.launch.get("overrides", []) if not o.startswith("model.")]
        intent.args["set"] = _merge(carried, intent.args.get("set", []))
    if experiment := entities.get("experiment") or _experiment_file(entities):
        intent.args["experiment"] = experiment
    _refused_experiment(intent, entities)
    if intent.clarify is None and (missing := _missing_experiment(intent, context)):
        intent.clarify = missing
    repeat = re.search(rf"\bagain\b|\bsame\b|\bre-?run\b|\bonce more\b|\bfrom before\b|{DONE_LAST_TIME}", lowered)
    if repeat and not context.launch and not copying and not intent.args and not entities.has("switch", "optimizer"):
        # "do the thing from before again": nothing in the conversation to repeat, so ask, never launch the defaults
        latest = context.known.runs[0] if context.known.runs else "runs/NAME"
        intent.clarify = (
            f"Repeat which launch? This conversation has none: name a run to copy, e.g. `same as {latest}`."
        )
    only_changed = not any(key in intent.args for key in ("nproc", "layout", "steps"))
    if intent.clarify is None and repeat and not context.launch and not copying and context.run and only_changed:
        # "how did tp-try do?" then "same again with AC": the run read may be what to repeat, but only its change is
        # said, and the defaults with AC would be a run nobody asked for
        intent.clarify = (f"Repeat {context.run}'s launch with that change? Say e.g. `same as {context.run} but with "
                          f"...`, or give the whole launch. {launch_text(intent.args)}")  # fmt: skip
    if intent.clarify is None and repeat and re.search(BEFORE_LAST, lowered):
        # "what we did before last time": the launch before the last one, which the conversation may not hold
        intent.clarify = f"Repeat which launch? Name the run to copy, e.g. `same as runs/NAME`. {launch_text({})}"
    pointing = re.search(r"\b(?:launch|run|train|start|do|kick off|go with|execute) (?:it|that|this|the plan|"
                         r"th(?:at|is) plan|th(?:at|is) one)\b", lowered)  # fmt: skip
    if pointing and not repeat and not context.launch and not intent.args and not entities.has("switch", "optimizer"):
        # "ok launch that" after a plan: the plan is for other hardware and model; what runs here is asked, not guessed
        intent.clarify = (
            "Launch what, exactly? Give the layout, processes and steps, e.g. `train 20 steps with dp_shard=2 on 2 "
            "GPUs`"
            + (" (a plan ranks layouts for its own hardware; it launches nothing here)." if context.plan else ".")
        )
    placeholder = re.search(LAUNCHED_PLACEHOLDER, lowered)
    unsaid = not context.launch and not entities.has("file", "experiment", "run", "sweep", "model")
    if placeholder and unsaid and not (placeholder.group(0).endswith("again") and intent.clarify):
        # "run the thing on the cluster": a word for something only the speaker knows, no experiment of the repository
        # (the facts said beside it still leave what to train unsaid, and the defaults in its place would be a guess)
        intent.clarify = (f"Which experiment do you mean by {placeholder.group(1)!r}? Nothing here says; name the "
                          "config file or a run to copy, e.g. `train configs/long.yaml for 20 steps on 2 GPUs` (a "
                          "launch runs on this machine's GPUs).")  # fmt: skip
    set_going = re.search(SET_GOING, lowered)
    earlier = context.launch or context.run or context.file or context.plan
    if set_going and not earlier and not entities.has("file", "experiment", "run", "sweep", "model"):
        # "set it going on 2 GPUs", with nothing earlier it could be: what to train is unsaid, whatever settings come
        # with it (a supposition's "ran it on 2 processes" names nothing either)
        intent.clarify = (f"Which experiment do you mean by {set_going.group(0)!r}? Nothing earlier in this "
                          "conversation says; name the config file or a run to copy, e.g. `train configs/long.yaml "
                          "for 20 steps on 2 GPUs`.")  # fmt: skip
    if copying:
        before = _at_count(context.known.launch_of(str(named)), intent.args.get("nproc"))
        for key, value in before.items():  # "same like r1 but 50 steps": r1's layout and processes, from its metrics
            intent.args.setdefault(key, value)
        copied = True
        if not entities.has("steps", "switch", "optimizer", "override", "times", "nproc", "devices", "layout"):
            # "the same settings as r1" and nothing else: its metrics do not hold every setting, so confirm
            copy = ", ".join(f"{k}={v}" for k, v in before.items())
            intent.clarify = (f"Train with {named}'s layout and processes ({copy}), the experiment's other settings "
                              "as they are now? yes / edit")  # fmt: skip
    else:
        copied = False
    if re.search(r"\b(?:winner|winning|won(?!'t))\b", lowered) and "layout" not in intent.args:  # "won't": no win
        _launch_winner(intent, entities, context)
    if steps := entities.get("steps"):
        intent.args["steps"] = steps
    if (times := entities.get("times")) and steps and re.search(r"\bthan\b|\bas (?:long|many|much) as\b", lowered):
        intent.args["steps"] = int(float(times) * int(steps))  # "2x longer than the default 20 steps": 40
    elif times and intent.clarify is None and not _multiple_said(float(times), entities, named if copied else None,
                                                                 context):  # fmt: skip
        intent.clarify = (
            f"How many in all: {as_number(float(times))} x what? Give the number. {launch_text(intent.args)}"
        )
    # The switches as entities read them (a negation anywhere near wins), in the sentence's order, not the grammar's.
    switches = [str(e.value) for e in sorted(entities.found, key=lambda e: e.span) if e.kind == "switch"]
    keys = {s.split("=", 1)[0] + "=" for s in switches} | {f"{k}=" for k, _ in entities.all("switch_doubt")}
    keys |= {f"{k}=" for k in entities.all("switch_kept")}  # "don't disable packing": the grammar's off dropped
    kept = [o for o in intent.args.get("set", []) if not any(o.startswith(k) for k in keys)]
    stated = switches
    if optimizer := entities.get("optimizer"):
        stated.append(f"train.optimizer={optimizer}")
    if stated or kept != intent.args.get("set", []):
        intent.args["set"] = _merge(kept, stated)
    if not intent.args.get("set"):
        intent.args.pop("set", None)
    if intent.clarify is None and (vague := entities.get("vague_setting")):
        intent.clarify = _which_setting(str(vague), intent)
    if intent.clarify is None and (unknown := entities.get("model_unknown")):
        intent.clarify = f"I have no preset for {unknown!r}: which model should it train? {launch_text(intent.args)}"
    if intent.clarify is None and (share := re.search(PERCENT, lowered)):
        intent.clarify = (f"{share.group(0)} of what? Give the number itself (warmup in steps, e.g. `warmup 5`). "
                          f"{launch_text(intent.args)}")  # fmt: skip
    if intent.clarify is None and (half := re.search(NO_SUCH_PRECISION, lowered)):
        intent.clarify = (f"meshpilot trains in fp32, bf16 or fp8 (train.precision), not {half.group(0)}: which do "
                          f"you want? {launch_text(intent.args)}")  # fmt: skip
    if intent.clarify is None and not entities.has("model") and entities.has("model_size", "model_choice"):
        # "train the 7b": a model named by size alone is never dropped for the experiment's own
        choice = entities.get("model_choice")
        which = " or ".join(map(str, choice)) if choice else f"the {entities.get('model_size')}B of which family"
        intent.clarify = f"Which model should it train: {which}? {launch_text(intent.args)}"
    if intent.clarify is None:
        intent.clarify = _setting_doubt(plain_of(intent, context), entities, intent)
    # ep borrows dp_shard x cp's ranks (trainer.layout): it multiplies no processes.
    degrees = [int(d) for d in re.findall(r"(?:^|,)(?!ep=)\w+=(\d+)", str(intent.args.get("layout", "")))]
    if intent.clarify is None and degrees and "nproc" in intent.args and math.prod(degrees) != intent.args["nproc"]:
        intent.clarify = (f"The layout {intent.args['layout']} needs {math.prod(degrees)} processes, not "
                          f"{intent.args['nproc']}: which layout do you want? {launch_text(intent.args)}")  # fmt: skip
    stated = entities.has("nproc", "devices") and entities.has("layout")  # "relaunch r1, fsdp 2 procs": all it needs
    if intent.clarify is None and not copied and not stated and not latest_before and (named := entities.get("run")):
        # never drop the name
        intent.clarify = (f"A launch cannot copy {named}'s settings: which layout, processes and steps should it use? "
                          f"{launch_text(intent.args)}")  # fmt: skip
    choice = entities.get("run_choice") if not entities.has("run") else None
    if intent.clarify is None and not copied and not stated and choice:
        # "relaunch the one that worked": several runs fit, and a launch copies none of them (never the defaults)
        intent.clarify = (f"Which run do you mean: {' or '.join(map(str, choice))}? A launch cannot copy its settings: "
                          f"say its layout, processes and steps. {launch_text(intent.args)}")  # fmt: skip
    if intent.clarify is None and (relative := entities.get("relative")):
        intent.clarify = f"How many in all: {relative} than what? Give the number. {launch_text(intent.args)}"
    counts = _process_counts(entities, intent.args.get("nproc"))  # "fsdp over 4 ... on 8 procs": which?
    if intent.clarify is None and counts:
        intent.clarify = f"How many processes: {' or '.join(map(str, counts))}? {launch_text(intent.args)}"
    if intent.clarify is None and entities.has("vague_hardware") and "nproc" not in intent.args:
        intent.clarify = f"On how many GPUs (processes), and with which layout? {launch_text(intent.args)}"
    if intent.clarify is None:
        intent.clarify = _multi_node_question(nodes, intent, lowered)
    if intent.clarify is None:
        intent.clarify = _value_not_for_this_launch(plain_of(intent, context).lower(), intent)
    if intent.clarify is None and (borrowed := re.search(SETTING_OF_CONFIG, lowered)):
        intent.clarify = (f"The {borrowed.group(1)} of {borrowed.group(2)}: which value? Give the number itself; "
                          f"I would not leave it out. {launch_text(intent.args)}")  # fmt: skip


# Two values of one setting joined by "or" ("lr 1e-4 or maybe 2e-4", "warmup 5 or 10"): the speaker's choice is
# unsaid, and the first is never guessed.
_VALUE = r"\d+(?:\.\d+)?(?:e-?\d+)?"
# ("lr either 1e-4 or 2e-4", "lr 1e-4, maybe 2e-4", "lr 1e-4, or was it 2e-4?"; "lr 1e-3 / 2" divides)
_OR = (r"\s*(?:,?\s*(?:or|and/or)\s+(?:(?:maybe|perhaps|possibly|even|rather|else|probably|was\s+it|is\s+it)\s+)?|"
       r",\s*(?:maybe|perhaps|possibly)\s+|\s+(?:vs\.?|versus)\s+|"
       # ("lr 3e-4/5e-4": a slash between two rates; "lr 1e-3 / 2" divides)
       r"/(?=\d*\.\d|\d+(?:\.\d+)?e-?\d))")  # fmt: skip
VALUE_ALTERNATIVES = (rf"\b(?P<name>{'|'.join(SETTING_NAMES.values())})\s*(?:of|=|:|to|at|is)?\s*(?:either\s+)?"
                      rf"(?P<one>{_VALUE}){_OR}(?P<other>{_VALUE})(?!\w|\.\d)")  # fmt: skip
# A choice between settings left to the agent ("lr 3e-4 or weight decay 0.1, whichever you prefer"): asked.
CHOICE_LEFT = (r"\bwhichever\s+(?:you|one|is|seems|works|sounds)|\beither\s+(?:one\s+)?(?:is\s+fine|works|will\s+do)\b|"
               r"\b(?:your\s+(?:call|choice|pick)|up\s+to\s+you)\b")  # fmt: skip
# A setting given a value and then put back to its default ("lr 3e-4, actually, leave the lr at default"): the value
# must not stay; dropped and asked.
BACK_TO_DEFAULT = (rf"\b(?:leave|keep|reset|put|set)\s+(?:the\s+)?({'|'.join(SETTING_NAMES.values())})\s+"
                   r"(?:at|to|as|on)\s+(?:the\s+|its\s+)?default\b")  # fmt: skip


def _drop_setting(intent: Intent, name: str) -> bool:
    """Drop the override of the setting named in words (`name`, e.g. "lr"); whether there was one."""
    key = next((key for key, words in SETTING_KEYS.items() if re.fullmatch(rf"(?:{words})", name)), None)
    kept = [o for o in intent.args.get("set", []) if o.split("=", 1)[0] != key]
    if key is None or len(kept) == len(intent.args.get("set", [])):
        return False
    intent.args["set"] = kept
    if not kept:
        intent.args.pop("set")
    return True


# A rate corrected by a share of itself ("lr 3e-4, no, half that", "wd 0.1, actually a tenth of it"): the value is
# not said; asked, the first not launched.
_RATE = RATE_NUMBER  # a rate's value, as normalise reads one
RATE_RELATIVE = (rf"(?<![\w.])({_RATE})(?!\w|\.\d)[^.;]{{0,30}}?\b(?:half|a\s+(?:third|quarter|tenth)|"
                 r"(?:twice|ten\s+times|10x)|halve)\s+(?:of\s+)?(?:that|it|this)\b")  # fmt: skip
# A value taken back for another setting ("lr 3e-4, sorry, I meant weight decay 3e-4", "lr 0.01, actually that was
# the weight decay", "lr 3e-4, no, weight decay 3e-4"): the first setting's value must not stay; asked.
_MOVED_TO = (r"\b(?:weight[\s_-]*decay|wd|warm[\s-]?up\w*|lr|learning\s+rate|micro[\s_-]*batch\w*|seq\w*[\s_-]*len\w*|"
             r"seed)\b")  # fmt: skip
VALUE_MOVED = (rf"(?<![\w.])({_RATE}|\d+)(?!\w|\.\d)\s*[,;\u2014\u2013-]+\s*(?:(?:sorry|no\s*[,!.]|actually|oops|wait|"
               r"i\s+mean[t]?|that\s+(?:was|is|should\s+be)(?:\s+(?:for|meant\s+for))?|i\s+meant?\s+(?:it\s+)?for)\s*[,!.]?\s*)+"
               rf"(?:the\s+)?{_MOVED_TO}(?!\s+(?:too|as\s+well|also)\b)"
               r"(?=\s*(?:[,.;!?]|$|\s*\1\b|\s+(?:of|to|at|=|:)?\s*\1\b))")  # fmt: skip
# A follow-up that moves the value said before to another setting ("sorry, I meant weight decay 3e-4" after "lr 3e-4"):
# the launch carried keeps the first setting's value beside the new one; asked.
MEANT_FOR_OTHER = (r"^\W*(?:(?:sorry|oops|no|actually|wait)\W+)*i\s+meant?\s+(?:the\s+)?"
                   rf"{_MOVED_TO}\s*(?:of|to|at|=|:)?\s*({_RATE}|\d+)(?!\w|\.\d)")  # fmt: skip


def _same_value_elsewhere(intent: Intent, value: str) -> bool:
    """Whether the launch sets `value` on two settings (the one carried from before and the one now said)."""
    same = [o for o in intent.args.get("set", []) if o.split("=", 1)[1] == value]
    return len(same) > 1


# A setting said to change during the run ("lr 1e-4 for the first 10 steps, then 3e-4", "lr 3e-4 until step 50, then
# 1e-4", "after 50 steps drop the lr to 1e-4"): a launch keeps each setting for the whole run, and the count is of a
# part of the run, not its steps. Asked. ("train until step 100" or "stop after 50 steps" is the run's length.)
_CHANGE_VERB = r"(?:drop|lower|raise|switch|change|set|decay|cut|bump|increase|reduce|go|move|turn|use|make|anneal)"
SCHEDULED = (r"\b(?:for|during|over|in|on)\s+the\s+(?:first|last|final|next|remaining|initial|opening)\s+(\d+)\s+"
             r"steps?\b|"
             # ("lr 2e-4 for the first half, then 1e-4": a part of the run by its share)
             r"\b(?:for|during|over|in)\s+the\s+(?:first|second|last|final)\s+(?:half|third|quarter|part)\b()|"
             r"\b(?:until|till|up\s+to|after|past|from)\s+step\s+(\d+)\s*,?\s*(?:and\s+)?then\b|"
             rf"\b(?:after|past)\s+(?:the\s+first\s+)?(\d+)\s+steps?\s*,?\s*(?:then\s+)?{_CHANGE_VERB}\b|"
             rf"\bfor\s+(\d+)\s+steps?\s*,?\s*(?:and\s+)?then\s+(?:{_CHANGE_VERB}\s+)?(?:(?:it\s+)?to\s+)?"
             r"(?:\d[\d.e-]*|lr\b|learning rate|warm\w*)")  # fmt: skip
# A setting put off to a later or another run ("disable packing later", "turn compile off for the next run", "AC on
# next time"): no order for this launch, never applied now ("packing off for this run" is one).
LATER_RUN = (r"\b(?:later(?:\s+on)?|tomorrow|next\s+time|afterwards|eventually|in\s+(?:the\s+)?future|"
             r"(?:for|on|in|with|from)\s+(?:the\s+|a\s+|any\s+)?(?:next|later|future|following|subsequent|another|"
             r"other)\s+(?:one|runs?|launch(?:es)?|time|attempts?|rounds?|experiments?|jobs?|tr(?:y|ies))|"
             r"(?:next|future|later)\s+(?:runs?|launch(?:es)?|jobs?)|"
             r"(?:after|once)\s+(?:this|that|the\s+current)\s+(?:one|run|launch|job)"
             r"(?:\s+(?:is\s+done|finishes|ends))?|"
             # ("the time after", "for another day", "down the line", "in the run after", "on the follow-up",
             # "in a second run", "for the rerun", "when we rerun")
             r"the\s+time\s+after|for\s+another\s+day|down\s+the\s+(?:line|road)|"
             r"(?:in|for|on)\s+the\s+(?:run|one|launch|job)\s+after|"
             r"(?:in|for|on|with)\s+(?:the\s+|a\s+)?follow[\s-]?ups?|"
             r"(?:in|for|on|with)\s+(?:the\s+|a\s+)second\s+(?:runs?|launch|attempt|round|job|try)|"
             r"(?:in|for|on)\s+(?:the|a)\s+re-?run|"
             r"(?:when|once|if)\s+(?:we|i|you)\s+re-?(?:run|launch))\b")  # fmt: skip
_SETTING_SAID = (rf"\b(?:{'|'.join(SWITCH_WORDS.values())}|{'|'.join(SETTING_NAMES.values())}|{PRECISIONS}|"
                 rf"{OPTIMIZERS})\b")  # fmt: skip


def _value_not_for_this_launch(lowered: str, intent: Intent) -> str | None:
    """One question when a stated value is not this launch's for sure: two values of a setting offered, a value
    scheduled over part of the run, or a setting put off to a later run (held back from the launch named)."""
    if found := re.search(VALUE_ALTERNATIVES, lowered):
        name, one, other = found.group("name"), found.group("one"), found.group("other")
        return f"Which {name}: {one} or {other}? Say the one to use, e.g. `{name} {other}`. {launch_text(intent.args)}"
    if re.search(CHOICE_LEFT, lowered) and re.search(r"\bor\b", lowered) and intent.args.get("set"):
        return (f"Which do you want? {lowered.strip()!r} leaves the choice to me; say the one to use. "
                f"{launch_text(intent.args)}")  # fmt: skip
    if (found := re.search(BACK_TO_DEFAULT, lowered)) and _drop_setting(intent, found.group(1)):
        return f"Leave {found.group(1)} at its default, then? ({found.group(0)!r}) {launch_text(intent.args)}"
    if found := re.search(RATE_RELATIVE, lowered):
        intent.args["set"] = [o for o in intent.args.get("set", []) if not o.endswith(f"={found.group(1)}")]
        if not intent.args["set"]:
            intent.args.pop("set")
        return f"Which value exactly ({found.group(0)!r})? Give the number itself. {launch_text(intent.args)}"
    if found := re.search(VALUE_MOVED, lowered):
        intent.args["set"] = [o for o in intent.args.get("set", []) if not o.endswith(f"={found.group(1)}")]
        if not intent.args["set"]:
            intent.args.pop("set")
        return (f"Which setting takes {found.group(1)} ({found.group(0)!r}), and the other at its default? "
                f"{launch_text(intent.args)}")  # fmt: skip
    if (found := re.search(MEANT_FOR_OTHER, lowered)) and _same_value_elsewhere(intent, found.group(1)):
        return (f"Which setting takes {found.group(1)}: the one before, or only the one now said "
                f"({found.group(0).strip()!r})? {launch_text(intent.args)}")  # fmt: skip
    if found := re.search(SCHEDULED, lowered):
        count = next((int(group) for group in found.groups() if group), None)
        if count is not None and intent.args.get("steps") == count:
            intent.args.pop("steps")  # a part of the run, not its length
        return (f"A launch keeps each setting for the whole run; it has no schedule by step ({found.group(0)!r}). "
                f"Which single value, and how many steps in all? {launch_text(intent.args)}")  # fmt: skip
    if clause := _put_off_clause(lowered):
        setting = re.search(_SETTING_SAID, clause)
        put_off = [
            key for key, words in {**SWITCH_WORDS, **SETTING_KEYS}.items() if re.search(rf"\b(?:{words})\b", clause)
        ]
        kept = [o for o in intent.args.get("set", []) if o.split("=", 1)[0] not in put_off]
        intent.args["set"] = kept
        if not kept:
            intent.args.pop("set")
        return (f"Is {setting.group(0)!r} for this launch? {clause.strip()!r} reads as for a later run, so I would "
                f"leave it out now. {launch_text(intent.args)}")  # fmt: skip
    return None


# The override keys of the settings named in words (grammar.SETTING_NAMES), the precision and the optimizer.
SETTING_KEYS = {"train.lr": SETTING_NAMES["lr"], "train.micro_batch": SETTING_NAMES["micro_batch"],
                "train.warmup_steps": SETTING_NAMES["warmup"], "data.seq_len": SETTING_NAMES["seq_len"],
                "train.weight_decay": SETTING_NAMES["weight_decay"], "train.seed": SETTING_NAMES["seed"],
                "train.precision": PRECISIONS, "train.optimizer": OPTIMIZERS}  # fmt: skip


def _put_off_clause(lowered: str) -> str | None:
    """The clause that puts a setting off to a later run: the setting and the time in one clause, or the time said
    alone before the clause of the setting ("next run, use bf16")."""
    for sentence in re.split(r"[;.!?]|\bbut\b|\bthen\b", lowered):
        parts = sentence.split(",")
        for index, part in enumerate(parts):
            if not re.search(LATER_RUN, part):
                continue
            if re.search(_SETTING_SAID, part):
                return part
            alone = re.fullmatch(rf"\W*(?:and\s+|so\s+)?(?:{LATER_RUN})\W*", part)
            if alone and index + 1 < len(parts) and re.search(_SETTING_SAID, parts[index + 1]):
                return f"{part},{parts[index + 1]}"
    return None


# A setting taken from another experiment file than the one run ("the seq len of the long config, on the default
# experiment"): its value is that file's, which the launch cannot borrow; asked, never dropped.
SETTING_OF_CONFIG = (r"\b(seq(?:uence)?[ _]?len(?:gth)?|learning rate|lr|micro batch|warmup|precision|optimizer)\s+"
                     r"(?:of|from)\s+(?:the\s+)?([a-z][\w./-]*(?:\s+(?:config|experiment)\b|\.ya?ml\b))")  # fmt: skip


# This machine said to be the one to train on, beside other nodes ("the cluster has 4 nodes but use just this one",
# "only on this box"): the nodes counted are not the launch's.
JUST_THIS_NODE = (
    r"\b(?:just|only)\s+(?:use\s+|on\s+)?(?:this|one|a single)\s+(?:one|node|machine|box|host|server)\b|"
    r"\buse\s+(?:just|only)\s+(?:this|one)\b|\bthis\s+(?:one|node|machine|box|host|server)\s+only\b"
)


def _multi_node_question(nodes: int, intent: Intent, lowered: str) -> str | None:
    """A run over several nodes is never shrunk to this one unasked: launch_run starts on this machine only."""
    if nodes <= 1 or re.search(JUST_THIS_NODE, lowered):
        return None
    return (f"A launch from here runs on this machine only; a run over {nodes} nodes is started on each node "
            f"(`meshpilot train --nnodes {nodes} --node-rank R --rdzv-endpoint HOST:PORT`). Train on this one node "
            f"instead? {launch_text(intent.args)}")  # fmt: skip


def _layout_by_word(launch: dict[str, object], said: str | None) -> bool:
    """Whether the launch before ran data parallel named by its word alone ("fsdp on 2 gpus", "ddp"): a layout over
    all its GPUs, whatever their count. A degree the user wrote ("dp_shard=2") or tp is theirs to change."""
    layout = str(launch.get("layout", ""))
    return bool(re.fullmatch(r"dp_(?:shard|replicate)=\d+", layout)) and not re.search(r"=\s*\d", said or "")


def _at_count(launch: dict[str, object], nproc: object) -> dict[str, object]:
    """A run's launch (Known.launch_of) on the processes a sentence states instead: its layout's kind at the new count
    where it has one dimension ("like r1, dp_shard=2, on four GPUs" is dp_shard=4); a layout of several dimensions is
    kept, and its count asked about (which degree grows is not said)."""
    layout = str(launch.get("layout", ""))
    if not isinstance(nproc, int) or nproc == launch.get("nproc") or not re.fullmatch(r"\w+=\d+", layout):
        return launch
    return {**launch, "nproc": nproc, "layout": f"{layout.split('=')[0]}={nproc}"}


def _multiple_said(times: float, entities: Entities, copied: object, context: Context) -> bool:
    """Whether a multiple ("double that") is of the copied run's processes and the sentence states what it comes to
    ("r1 ran on two processes; double that, across four GPUs"): the count said is the answer, nothing to ask."""
    before = context.known.launch_of(str(copied)).get("nproc") if copied else None
    said = [int(v) for v in [*entities.all("nproc"), *entities.all("devices")] if isinstance(v, int)]
    return isinstance(before, int) and said == [int(times * before)]


def _process_counts(entities: Entities, nproc: object) -> list[int]:
    """The different counts of processes (or GPUs) a launch states, where the one it would take (`nproc`) is not
    the one total that stands: a count right after a layout word is that layout's degree ("on 8 GPUs: fsdp across 4
    and tp 2" runs 8), what a self-correction says stands ("on 4 gpus... no wait, 2"). Else one would be dropped
    ("fsdp over 4 and tp 2 on 8 procs" launched on 4): asked."""
    found = sorted((e for e in entities.found if e.kind in ("nproc", "devices") and isinstance(e.value, int)),
                   key=lambda e: e.span)  # fmt: skip
    counts = list(dict.fromkeys(int(e.value) for e in found))
    if len(counts) < 2:
        return []
    lowered = entities.text.lower()
    corrected = [m.end() for m in re.finditer(CORRECTED, lowered)]
    stands = ([e for e in found if e.span[0] >= corrected[-1]] or found) if corrected else found
    layout = "|".join(pattern for pattern, _ in LAYOUT_WORDS)
    after_layout = rf"\b(?:{layout})\s+(?:across|over|on|with|using)?\s*$"
    degrees = {e.value for e in stands
               if re.search(after_layout, lowered[: e.span[0]]) or _part_of_first(e, stands, lowered)}  # fmt: skip
    totals = {e.value for e in stands} - degrees or {e.value for e in stands}
    if (total := stated_total(lowered)) in totals and total == nproc:
        return []  # "tp on 2 and fsdp on 2, so 4 GPUs total": the total said as such, the others its degrees
    return [] if totals == {nproc} else counts


def _part_of_first(entity: Entity, stands: list[Entity], lowered: str) -> bool:
    """Whether a count said before a layout word is a part of the first count said: "on 4 GPUs, 2 of them sharding
    and 2 in tensor parallel" (a smaller count that divides it; "2 GPUs FSDP vs 4 GPUs FSDP" are two launches)."""
    first = stands[0]
    if entity is first or not re.match(rf"\s*(?:{'|'.join(p for p, _ in LAYOUT_WORDS)})\b", lowered[entity.span[1] :]):
        return False
    return int(entity.value) < int(first.value) and int(first.value) % int(entity.value) == 0


COPY = (
    r"\b(?:same|like|as in|as for|copy|repeat|again|rerun|re-run|reuse|re-use)\b|"
    r"\b(?:another|one more|a second)\s+(?:go|spin|try|shot|whirl)\b|"
    # "relaunch r1's setup", "keep r1's layout", "with tp-try's settings": that run's launch, what is said changed
    r"'s\s+(?:own\s+)?(?:setup|set-up|settings|config|configuration|layout|recipe|hyperparameters|hparams|args|"
    r"arguments)\b|\b(?:what|whatever)\s+[\w.-]+\s+(?:used|ran with|had)\b"  # "what r1 used"
)  # "give r1 another go": r1 again
# A share said as a percentage ("warmup of 10%"): no setting of a launch takes one, and it is no count.
PERCENT = r"\b\d+(?:\.\d+)?\s*(?:%|percent\b|per cent\b)"
# Precisions people name that the trainer lacks (trainer.config: auto, fp32, bf16, fp8): asked about, never dropped.
NO_SUCH_PRECISION = r"(?<!not )(?<!no )(?<!without )\b(?:fp16|float16|half[- ]precision)\b"

# --- the confidence rule: a setting of a launch is taken only when it is read for sure ----------------------------

SWITCH_NAMES = {"data.packing": "packing", "train.activation_checkpointing": "activation checkpointing",
                "train.compile": "torch.compile"}  # fmt: skip
# A negation: what it turns off must be a setting the sentence names, else the launch asks what it means.
NEGATION = (r"\b(?:without|w/o|no|not|disable[sd]?|disabling|turn(?:ed)? off|switch(?:ed)? off|off|don'?t|"
            r"do not|never|skip(?:ping)?|exclude|excluding)\b|"
            # "avoid bf16" takes a value back, as "no bf16" does ("to avoid OOM" takes no setting back)
            rf"\b(?:avoid|avoiding|ditch|ditching)(?=\s+(?:using\s+)?(?:{PRECISIONS}|{OPTIMIZERS})\b)")  # fmt: skip
# Negations that turn no setting off: "no wait", "nothing else changed", "no need to", "kick off", "don't wait".
NOT_A_SETTING = (r"^(?:no,|no wait|no need|not sure|no more than|no less than|no later|no rush|no hurry|no idea|"
                 r"no reason to (?:turn|switch|shut|disabl)|no problem|no worries|no matter|never ?mind|"
                 # "no problem" as English speakers elsewhere say it: "No wahala, same thing but ..." (Nigerian
                 # Pidgin), "no probs", "no sweat", "no dramas", "no problemo"
                 r"no (?:wahala|probs?\b|problemo|sweat|dramas?\b)|"
                 r"not (?:too|more|less|yet|now|a big deal)|"
                 # courtesy: "only if it's no trouble", "no pressure", "not a bother"
                 r"no (?:trouble|bother|pressure|stress|hassle|biggie|big deal)|"
                 r"not (?:(?:a|any|too much)\s+)?(?:trouble|bother)\b|"
                 # the asker's manners: "I hope I'm not being presumptuous", "if that's not too forward"
                 r"not (?:being )?(?:too |overly )?(?:presumptuous|forward|rude|cheeky|impertinent|impolite|"
                 r"an imposition)\b|"
                 # slang for "no lie": "fp8, no cap lets go" (not "no cap on the gradient norm")
                 r"no cap\b(?!\s+(?:on|of|for|at)\b)|"
                 # mixing that is no packing: "no mixing up the configs" (confusing them), "no mixing precisions"
                 r"(?:no|without|w/o) mixing\s+(?:up\b|(?:of\s+)?(?:the\s+)?precisions?\b)|"
                 r"don'?t (?:change|touch|forget|wait|bother|worry|ask|need)|do not (?:change|touch|forget|wait|ask)|"
                 rf"{SPEAKERS_MIND}|"  # "I don't know the technical side"
                 r"no (?:other|further) change|without (?:waiting|asking|confirm\w*|delay|further ado|me)|"
                 rf"no (?:[\w-]+\s+){{1,3}}?{TROUBLE_NOUN}|"  # "no grad clipping problems lately": the problems
                 r"off (?:the|of|from|_)|not\b.{0,12}\?$)")  # fmt: skip
# What the team lacks for something, said as the reason of a setting turned off before it ("no warmup, we don't
# have bandwidth for a ramp-up"). Said alone ("we don't have time for packing") it is asked about.
LACKING_FOR = (r"(?:don'?t|do not|doesn'?t|does not)\s+have\s+(?:the\s+|any\s+|enough\s+)?(?:bandwidth|time|budget|"
               r"capacity|patience|appetite|room)\s+for\b")  # fmt: skip
# A bare "no" that opens the message, alone in its sentence ("wait no. same thing but ...", "no! redo it with ..."):
# the turn before taken back, no setting ("fp8? no." takes fp8 back: a word before it).
NO_FIRST = r"no\s*[.!;:\u2013\u2014-]"
# The user's own answer to a question they asked, said as "not": "Assuming not:", "hopefully not.", "if not,".
ANSWERED_NOT = r"\b(?:assuming|if|hopefully|presumably|probably|i\s+(?:hope|guess|think|suppose|assume))\s+$"
TAKE_BACK_OPENER = r"\W*(?:(?:wait|oh|ah|hmm+|ugh|uh|um|erm|sorry|actually)\W+)*"
# A layout taken back ("not pipelined", "no tp"): the grammar leaves it out of the layout, no setting is meant.
# ("not full zero-3, only zero 1": a word saying how much of it is taken back with it)
NEGATED_LAYOUT = (rf"^\S+\s+(?:(?:on|with|using|use|do|want|any|the|full|fully|plain|pure|real|whole)\s+){{0,2}}"
                  rf"(?:{'|'.join(p for p, _ in LAYOUT_WORDS)})\b")  # fmt: skip
# "kick off" (or "Kick-off:") is a launch, "based off" a source, not a negation; "or not", "if not" ask nothing off
LAUNCH_OFF = (r"\b(?:kick(?:ing|ed)?|fir(?:e|ing|ed)|set|head|start|show|sign|log|based|spin|going|or|if|whether)"
              r"[\s-]*$")  # fmt: skip
# The race's cry, last in the message: "... 120 steps -- and they're off!", "and we're off!" (the launch begun, no
# setting: a setting said off by "they" is read, or asked about, by the entities first).
RACE_OFF = r"(?:^|\band\s+|[,;:\u2013\u2014-]\s*)(?:they|we)(?:'re|\s+are)\s+$"
RACE_OFF_END = r"off\s*!+\W*$"
# A purpose clause whose own subject is said not to be something: "..., so that the per-sequence statistics are not
# confounded", "so the loss curves aren't skewed" (what the launch is for, no setting turned off; not a switch's verb:
# "so that packing is not used" names it).
PURPOSE_OPENED = r"\b(?:so(?:\s+that)?|in\s+order\s+that|to\s+make\s+sure|to\s+ensure|lest)\s+[^,;:.!?]*$"
PURPOSE_NOT = (r"not\s+(?:be\s+|get\s+)?(?!(?:enabled|used|applied|activated|turned|switched|included|packed|compiled|"
               r"checkpointed|on|off|set)\b)[a-z]+(?:ed|en)\b")  # fmt: skip


def _launch_winner(intent: Intent, entities: Entities, context: Context) -> None:
    """ "launch that winner on 2 gpus" after reading a sweep: its winning trial's layout, on the processes said (asked
    about when they differ from the trial's, whose degrees fit its own count only)."""
    sweep = entities.get("sweep") or context.sweep
    winner = context.known.winner_of(str(sweep)) if sweep else {}
    if "layout" not in winner:
        intent.clarify = intent.clarify or "Which sweep's winner? Name the sweep, e.g. `launch the winner of NAME`."
        return
    if "nproc" in winner and intent.args.setdefault("nproc", winner["nproc"]) != winner["nproc"]:
        intent.clarify = intent.clarify or (
            f"{sweep}'s winner ran {winner['layout']} on {winner.get('nproc')} processes, not {intent.args['nproc']}:"
            " which layout should it use?"
        )
        return
    intent.args["layout"] = winner["layout"]


def plain_of(intent: Intent, context: Context) -> str:
    """The sentence as the entities read it (normalised)."""
    return normalise(intent.text, context.known.names)


def _setting_doubt(plain: str, entities: Entities, intent: Intent) -> str | None:
    """One question when a launch's setting is not read for sure: a setting said both on and off, or named with
    neither; a negation ("without", "no", "disable", "off") that turns off nothing the sentence names. What runs is
    never a guess at what the user switched off."""
    if doubt := entities.get("switch_doubt"):
        key, why = doubt
        return (f"Should {SWITCH_NAMES.get(key, key)} be on or off? I read {why}. Say e.g. `{key}=false`. "
                f"{launch_text(intent.args)}")  # fmt: skip
    taken = intent.args.get("experiment") or intent.args.get("layout")
    if taken and (lack := re.search(LACKED_CONFIG, plain.lower())):
        # "no compile; we don't have room for the long config", "... the gpus for fsdp": what the user lacks for is
        # never launched
        return f"Should I launch with that? You said you {lack.group(1)}. {launch_text(intent.args)}"
    if lack := re.search(LACKED_LAUNCH, plain.lower()):
        # "no compile, we don't have time for a run at all": the launch itself lacked for
        return f"Should I launch at all? You said you {lack.group(1)}. {launch_text(intent.args)}"
    lowered = masked(plain.lower(), entities)
    # a negation is about a setting named next to it that it turns off: "without packing", "packing off"
    mentions = [e.span for e in entities.found if e.kind == "switch_mention" and e.value[1] != "true"]
    for found in re.finditer(NEGATION, negated_actions(lowered)[1]):  # "no PR" negates an action, not a setting
        after, before = lowered[found.start() :], lowered[: found.start()]
        if (re.match(NOT_A_SETTING, after) or re.match(NEGATED_LAYOUT, after)
                or (found.group(0) in ("off", "not") and re.search(LAUNCH_OFF, before))):  # fmt: skip
            continue
        if found.group(0) == "off" and re.search(RACE_OFF, before) and re.match(RACE_OFF_END, after):
            continue  # "... -- and they're off!": the launch begun
        if re.match(PURPOSE_NOT, after) and re.search(PURPOSE_OPENED, before):
            continue  # "so that the statistics are not confounded": what the launch is for
        if re.search(NO_LAUNCH_WORDS, lowered[max(0, found.start() - 20) : found.end() + 40]):
            continue
        if re.search(ANSWERED_NOT, before) and re.match(r"not\s*[:,;.!?]", after):
            continue  # "is a launch going to write outside runs/? Assuming not: ...": a question answered, no setting
        if re.match(NO_FIRST, after) and re.fullmatch(TAKE_BACK_OPENER, before):
            continue  # "wait no. same thing but without AC": the turn before taken back, then the change
        if _replaced(lowered[found.end() :], intent):  # "not adam this time, plain sgd", "not fp8, bf16"
            continue
        said_on = [e for e in entities.found if e.kind == "switch_mention" and e.value[1] == "true"]
        not_without = re.match(NOT_WITHOUT, after) or (re.search(r"\bnot\s+$", before) and re.match(WITHOUT, after))
        if not_without and any(e.span[1] <= found.start() for e in said_on):
            continue  # "with packing, not without": the setting said on, said again
        if re.match(VALUE_NOT_THAT, after) and re.search(r"\d\s*,?\s*$", before):
            continue  # "the micro batch in 4, not 8": the value said, the one refused after it no setting
        if _lack_names_nothing(after) and (re.search(NEGATION, before) or _turned_off(intent)):
            continue  # "no warmup, we don't have bandwidth for a ramp-up": the reason of a setting turned off before
        if _refers_to_a_layout(lowered, found, entities):  # "pp=2 was slow so skip it": the layout, no setting
            continue
        # "not the long config", "don't want the default experiment": a name
        if re.match(r"\s*(?:(?:want|need|use|the|that|this|from|on)\s+)*_+", lowered[found.end() :]):
            continue  # ruled out (masked), no setting
        ahead = [s for s in mentions if s[0] >= found.end() and len(lowered[found.end() : s[0]].split()) <= 3]
        behind = [s for s in mentions if s[1] <= found.start() and len(lowered[s[1] : found.start()].split()) <= 3]
        inside = [s for s in mentions if s[0] <= found.start() < s[1]]  # "without it": the pronoun's setting
        if ahead or behind or inside:
            continue
        words = " ".join(plain.lower()[found.start() :].split()[:4])  # as said, names unmasked
        return (
            f"What should {words!r} turn off? I can switch off packing (`data.packing=false`), activation "
            f"checkpointing or torch.compile, or set any key, e.g. `train.lr=1e-4`. {launch_text(intent.args)}"
        )
    return None


# A setting said on and its absence refused after it, nothing more: "with packing — not without".
WITHOUT = r"without(?:\s+it)?\W*$"
NOT_WITHOUT = rf"not\s+{WITHOUT}"
# A value refused right after the value said, nothing named after it: "in 4, not 8".
VALUE_NOT_THAT = r"not\s+\d+(?:\.\d+)?(?:e-?\d+)?(?=\s*(?:[,.;!?]|$))"


# What a launch could take, said in a lack's reason: a switch, a precision, a config, a layout, a count.
LAUNCH_TAKES = (r"\b(?:" + "|".join(SWITCH_WORDS.values()) + r"|fp8|fp16|bf16|fp32|precision|configs?|yaml|experiment|"
                r"fsdp|ddp|zero[\w-]*|tp|pp|lr|steps?|batch\w*|seq\w*|gpus?|nodes?|devices?|compile\w*)\b")  # fmt: skip


# A config lacked for: "we don't have budget for the long config".
LACKED_CONFIG = (rf"((?:{LACKING_FOR}|(?:don'?t|do not)\s+have\s+(?:the\s+|enough\s+)?(?:gpus?|compute|resources|"
                 r"hardware|memory)\s+for\b)[^.;!?]*?\b(?:configs?|yaml|experiment|fsdp|hsdp|ddp|tp|pp|cp|ep|"
                 r"zero[\w-]*|sharding|tensor\s+parallel\w*|pipeline\w*)\b)")  # fmt: skip
# The launch itself lacked for: "we don't have time for a run at all", "... the gpus for training".
LACKED_LAUNCH = (rf"((?:{LACKING_FOR}|(?:don'?t|do not)\s+have\s+(?:the\s+)?(?:gpus?|compute|resources|hardware)\s+for)"
                 r"\s+(?:a\s+|any\s+|the\s+)?(?:runs?|launch\w*|training|any\s+of\s+(?:this|it)|it|this|that)"
                 r"(?:\s+at\s+all)?)\s*(?:[.;!?]|$)")  # fmt: skip


def _lack_names_nothing(after: str) -> bool:
    """Whether `after` is a lack said as a reason ("we don't have patience for a long ramp") whose clause names
    nothing the launch could take: a name (masked as "_": "the long config") or a setting ("nor for fp8") the user
    lacks is one to ask about, never to launch with."""
    lack = re.match(LACKING_FOR, after)
    if not lack:
        return False
    clause = re.split(r"[.;!?]", after[lack.end() :], maxsplit=1)[0]
    return "_" not in clause and not re.search(rf"\b(?:nor|or|and)\b|{LAUNCH_TAKES}", clause)


def _turned_off(intent: Intent) -> bool:
    """Whether the launch turns a setting off or to zero ("no warmup" is train.warmup_steps=0)."""
    return any(o.endswith(("=false", "=0")) for o in intent.args.get("set", []))


def _refers_to_a_layout(lowered: str, negation: re.Match, entities: Entities) -> bool:
    """Whether a negation is a layout's refusal said after it by a pronoun ("tp=2 failed before so avoid it")."""
    for layout in (e for e in entities.found if e.kind == "layout" and e.span[1] <= negation.start()):
        refused = re.match(REFUSED_AFTER, lowered[layout.span[1] :])
        if refused and layout.span[1] + refused.end() > negation.start():
            return True
    return False


# Settings whose values are named alone ("fp8", "adam"): a negation before one takes that value back.
VALUES = {"train.precision": PRECISIONS, "train.optimizer": OPTIMIZERS}


def _replaced(after: str, intent: Intent) -> bool:
    """Whether a negation takes back a setting's value that the launch sets to another one ("not adam ..., sgd")."""
    for key, values in VALUES.items():
        # ("no mixing of fp8 in there, bf16 only": a precision mixed in, taken back)
        taken_back = re.match(rf"\s*(?:(?:in|with|using|use|the|plain|any|mixing(?:\s+of)?)\s+)*({values})\b", after)
        if taken_back and any(
            o.startswith(f"{key}=") and o != f"{key}={taken_back.group(1)}" for o in intent.args.get("set", [])
        ):
            return True
    return False


def _merge(before: list[str], after: list[str]) -> list[str]:
    """Overrides with the later value of each key, in place: what the sentence says wins over what it repeats."""
    merged = list(before)
    for override in after:
        key = override.split("=", 1)[0] + "="
        same = [i for i, o in enumerate(merged) if o.startswith(key)]
        if same:
            merged[same[0]] = override
            merged = [o for i, o in enumerate(merged) if i not in same[1:]]
        else:
            merged.append(override)
    return merged


# The settings a question may name when the sentence changes one without its value (grammar.SETTING_NAMES), and an
# example of each.
SETTING_EXAMPLES = {"seq_len": ("sequence length", "seq_len 512"), "micro_batch": ("micro batch", "micro batch 8"),
                    "lr": ("learning rate", "lr 1e-3"), "warmup": ("warmup", "warmup 5"),
                    "weight_decay": ("weight decay", "weight decay 0.1"), "seed": ("seed", "seed 7")}  # fmt: skip


def _which_setting(vague: str, intent: Intent) -> str:
    reading = launch_text(intent.args)
    if vague == "optimizer":
        return f"Which optimizer (e.g. `train.optimizer=sgd` or `adamw`)? {reading}"
    if vague in SETTING_EXAMPLES:
        name, example = SETTING_EXAMPLES[vague]
        return f"Which {name}, exactly (e.g. `{example}`)? {reading}"
    return f"What should change, exactly: the layout, processes, steps or a setting? {reading}"


def launch_text(args: dict[str, Any]) -> str:
    parts = [f"{k}={args[k]}" for k in ("experiment", "nproc", "layout", "steps") if k in args]
    parts += args.get("set", [])
    return f"So far I would train with {', '.join(parts)}." if parts else "So far I would train with the defaults."


def _relative_nodes(entities: Entities, context: Context) -> int | None:
    """Nodes said as "N more": N added to the plan before's nodes, or, with no plan before, the N nodes to come
    ("we're getting two more nodes, 8x H100 each, is 70b viable on that?" plans those). "N fewer" needs a plan."""
    for value in entities.all("relative"):
        word, number, kind = str(value).split()
        if kind != "nodes":
            continue
        if context.plan is None:
            return int(number) if word == "more" else None
        total = int(context.plan.get("nodes") or 1) + (int(number) if word == "more" else -int(number))
        return total if total >= 1 else None
    return None


def _fill_plan(intent: Intent, entities: Entities, context: Context) -> None:
    """A plan: the stated model, GPUs and counts; a follow-up keeps what the plan before had and it does not restate."""
    args = intent.args
    args.pop("nproc", None)
    if experiment := entities.get("experiment") or _experiment_file(entities):
        args["experiment"] = experiment  # "with the long configuration": that file's model and sequence length
    if model := entities.get("model"):
        args["model"] = model
        intent.notes += [str(n) for n in entities.all("model_note")]
        if intent.clarify and "GPU" not in intent.clarify:  # the grammar's question about the model: answered
            intent.clarify = None
    elif unknown := entities.get("model_unknown"):
        intent.clarify = f"I have no preset for {unknown!r}. Which model: {', '.join(MODELS)}, or the experiment's own?"
    elif choice := entities.get("model_choice"):
        intent.clarify = f"Which model do you mean: {' or '.join(map(str, choice))}?"
    elif (size := entities.get("model_size")) and (sized := _same_family((context.plan or {}).get("model"), size)):
        args["model"] = sized
        intent.notes.append(f"{size}B as the preset {sized} (the family of the plan before)")
    elif (size := entities.get("model_size")) and (sized := _only_preset_of_size(size)):
        args["model"] = sized  # "405b on 16 nodes": the one preset of that size
        intent.notes.append(f"{size}B as the preset {sized}, the only one of that size")
    elif relative := entities.get("model_relative"):  # "and the smaller one?" after a plan
        before = str((context.plan or {}).get("model") or "")
        if sized := _relative_preset(before, str(relative)):
            args["model"] = sized
            intent.notes.append(f"the {relative} one as the preset {sized} (the family of the plan before)")
        else:
            than = (
                f": no one preset is {relative if relative.endswith('er') else relative[:-3] + 'er'} than {before}"
                if before
                else ""
            )
            intent.clarify = f"Which model is the {relative} one{than}? Name it, e.g. `plan llama-3.1-70b`."
    elif size := entities.get("model_size"):  # "a 7b on 4 l40s": several presets, never the experiment's instead
        sized = [k for k in MODELS if (m := PRESET.match(k)) and float(m.group(3)) == float(str(size))]
        intent.clarify = f"Which {size}B model: {' or '.join(sized) or 'no preset has that size'}?"
    if nodes := entities.get("node_count"):
        args["nodes"] = nodes
    if per_node := entities.get("per_node"):
        args["devices"] = per_node
    elif nodes and (devices := _device_count(entities)) and devices % nodes == 0 and devices > nodes:
        lowered = plain_of(intent, context).lower()  # as normalised: "apiece" is each
        # "each"/"per" of the nodes, not of a card ("80 gigs per card"); "16 GPUs total" is over all the nodes
        each = re.search(r"\b(?:each|per)\b(?!\s+(?:card|gpu|device|accelerator)s?\b)", lowered)
        args["devices"] = devices if each and stated_total(lowered) != devices else devices // nodes
    if "nodes" not in args and (more := _relative_nodes(entities, context)):
        args["nodes"] = more  # after the devices: "8 h100s, and 2 more nodes" are 8 in each, not 8 split over 2
    _gpu_size(intent, entities, context)
    if (device_mem := entities.get("device_mem")) and "gpu" not in args:
        args["device_mem"] = device_mem
        intent.notes += [str(n) for n in entities.all("device_mem_note")]  # "24GB read as 24GiB": said in the reply
    if entities.has("own_model"):
        args.pop("model", None)
    if entities.has("not_own_model") and "model" not in args and intent.clarify is None:
        intent.clarify = "Which model should I plan for, if not the experiment's? e.g. `plan llama-3.1-8b`."
    times, scaled = entities.get("times"), None
    doubt = _multiplied_doubt(plain_of(intent, context).lower(), context) if times and context.plan else None
    if doubt and intent.clarify is None:
        intent.clarify = doubt
        times = None
    if times and "devices" not in args and context.plan and isinstance(context.plan.get("devices"), int):
        scaled = int(float(times) * context.plan["devices"])  # "twice as many gpus": of the plan before
        intent.notes.append(f"{scaled} devices: {as_number(float(times))} x the {context.plan['devices']} "
                            "of the plan before")  # fmt: skip
        args["devices"] = scaled
    added = _card_added(plain_of(intent, context).lower(), context) if "devices" not in args else None
    if added:
        args["devices"] = added  # "if i pick up a third one": one card more than the plan before's
        intent.notes.append(f"{added} devices: one more than the {added - 1} of the plan before")
    elif added == 0 and intent.clarify is None:  # "a fourth card" after 2: which count is meant, asked
        intent.clarify = "How many GPUs should I plan for, in all? e.g. `on 4 GPUs`."
    follow_up = context.plan is not None and (re.search(FOLLOW_UP, intent.text.lower()) or context.previous == "plan")
    if follow_up and context.plan:
        # devices this sentence states in all (not per node, not the plan before's carried just now) replace nodes
        stated_devices = "devices" in args and not entities.has("per_node")
        for key in PLAN_CARRIED:
            if key in args or key not in context.plan:
                continue
            if key == "model" and entities.has("own_model"):
                continue
            if key == "nodes" and stated_devices:
                continue
            if key == "device_mem" and "gpu" in args:
                continue
            args[key] = context.plan[key]
    _over_nodes(intent, entities)
    if (said := entities.get("nodes_unsaid")) and "nodes" not in args and intent.clarify is None:
        intent.clarify = f"How many nodes? {str(said)!r} says each node's GPUs, e.g. `2 {said}`."
    if "nodes" in args and "devices" not in args and intent.clarify is None:
        # "what if we had 4 nodes?": nodes of what? This machine's GPUs are no answer about other machines
        gpu = args.get("gpu")
        nodes = f"{args['nodes']} node{'s' if args['nodes'] != 1 else ''}"
        intent.clarify = (f"How many {str(gpu).upper()}s per node? e.g. `{nodes} of 8 {str(gpu).upper()}s`" if gpu
                          else f"How many GPUs per node, and which GPU? e.g. `{nodes} of 8 H100s`")  # fmt: skip
    if intent.clarify is None and not context.plan and _nothing_to_plan(intent, entities):
        intent.clarify = (
            "Which model should I plan for, and on which GPUs? e.g. `plan llama-3.1-8b on 8 H100s`, or `plan our "
            "model on this machine` (the experiment's own model on the GPUs here)."
        )
    if scaled:
        args["devices"] = scaled
    elif (entities.has("vague_hardware") and not _device_count(entities)) or times:
        # "some L40S cards, say 4 of them": the count said after the vague words settles it
        before = ", ".join(f"{k}={v}" for k, v in (context.plan or {}).items() if k in PLAN_CARRIED)
        intent.clarify = ("How many GPUs (and nodes) should I plan for? e.g. `on 16 GPUs over 2 nodes`"
                          + (f" (the plan before: {before})." if before else "."))  # fmt: skip


# A card added, counted by its place: "if i pick up a third one", "with a fourth card" (not "a third of the memory").
# (or named by its model: "a second 4090", "a third rtx-4090", "a second h100 card")
CARD_ADDED = (r"\b(?:a|one)\s+(second|third|fourth|fifth|sixth|seventh|eighth)\s+"
              r"(?:one|card|gpu|device|(?:[a-z]+[\s-]?)?[a-z]?\d{3,4}[a-z]*)\b(?!\s+of\b)")  # fmt: skip
ORDINALS = {"second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7, "eighth": 8}


def _card_added(lowered: str, context: Context) -> int | None:
    """The devices with one card added by its place, where it is the one after the plan before's (one node of them:
    "a third one" after 2 nodes might be a node); 0 where the place is another (asked about); None where no card
    is added after a plan."""
    found = re.search(CARD_ADDED, lowered)
    plan = context.plan or {}
    if not found or not plan:
        return None
    count = ORDINALS[found.group(1)]
    one_node = int(plan.get("nodes") or 1) == 1
    return count if one_node and isinstance(plan.get("devices"), int) and count == plan["devices"] + 1 else 0


# GPUs per node: the common server of data-centre GPUs (H100, H200, A100...) holds 8, the largest single ones 16
# (HGX-2 class). Up to 16 said in all may be one node ("70b on 16 of H100", as the plan has always read it); more
# never is.
NODE_GPUS = 8
ONE_NODE_MOST = 16


def _over_nodes(intent: Intent, entities: Entities) -> None:
    """GPUs said in all, more than any one node holds, with no nodes said ("70b on 64 h100s"): plan_layouts takes
    GPUs per node, so they are nodes of 8 (64 is 8 nodes of 8), as a person who rents them reads it; a count that 8
    does not divide is asked about, never planned as one node."""
    args, devices = intent.args, intent.args.get("devices")
    if "nodes" in args or entities.has("per_node") or not isinstance(devices, int) or devices <= ONE_NODE_MOST:
        return
    if _device_count(entities) != devices:  # a count this sentence does not state as GPUs: not read again here
        return
    if devices % NODE_GPUS == 0:
        args["devices"], args["nodes"] = NODE_GPUS, devices // NODE_GPUS
        intent.notes.append(f"{devices} GPUs as {devices // NODE_GPUS} nodes of {NODE_GPUS} (no node holds "
                            f"{devices})")  # fmt: skip
    elif intent.clarify is None:
        intent.clarify = (f"How are the {devices} GPUs split over nodes? No node holds that many, and they are no "
                          f"whole number of nodes of {NODE_GPUS}: say the nodes and the GPUs in each, e.g. "
                          f"`{devices // NODE_GPUS} nodes of {NODE_GPUS}`.")  # fmt: skip


# This machine named as the hardware: "on this box", "here", "the GPUs I have".
THIS_MACHINE = (r"\b(?:this|the|my|our)\s+(?:own\s+)?(?:machine|box|host|node|computer|server|workstation|hardware|"
                r"setup|rig)\b|\bhere\b|\blocal(?:ly)?\b|\b(?:what|the gpus?|the cards?) (?:i|we) have\b|"
                r"\b(?:my|our) (?:gpus?|cards?)\b")  # fmt: skip
MODEL_NAMED = ("model", "model_choice", "model_unknown", "model_size", "own_model", "experiment")
HARDWARE_NAMED = ("gpu_named", "devices", "node_count", "per_node", "device_mem", "vague_hardware", "vague_count")


def _nothing_to_plan(intent: Intent, entities: Entities) -> bool:
    """A plan that names neither a model nor hardware ("plan layouts for me"): what to plan is asked, never this
    machine's GPUs for the experiment's model taken as meant. Naming this machine ("plan on this box") says both: the
    GPUs here, and the model of the experiment here."""
    stated = ("model", "gpu", "devices", "nodes", "device_mem", "experiment")
    if any(key in intent.args for key in stated) or entities.has(*MODEL_NAMED, *HARDWARE_NAMED):
        return False
    return not re.search(THIS_MACHINE, intent.text.lower())


def _same_family(model: object, size: object) -> str | None:
    """The preset of `model`'s family (its version first) with `size` billion parameters."""
    before = PRESET.match(str(model)) if model else None
    if before is None:
        return None
    sized = [
        k
        for k in MODELS
        if (m := PRESET.match(k)) and m.group(1) == before.group(1) and float(m.group(3)) == float(size)
    ]
    same_version = [k for k in sized if PRESET.match(k).group(2) == before.group(2)]
    found = same_version or sized
    return found[0] if len(found) == 1 else None


# GPUs sold in two memory sizes under one name: a plan on an unsized one always asks which. The memory decides which
# layouts fit, and people who plan expect to be asked (two outside authors did, for a model that fits either size);
# a plan on a size they never said would be a guess shown as a fact.
SIZED_FAMILIES = {"a100": ("a100-40gb", "a100-80gb")}
# "the 40 gig version": the GPU of the plan before, in that memory size.
# ("same w/ 40g" after a plan on A100s: the memory alone, with what it is said of left to the plan before)
OTHER_SIZE = (r"\b(\d+)\s*gi?b\s+(?:version|variant|ones?|model|edition|cards?|gpus?)\b|"
              r"\bwith\s+(?:the\s+)?(\d+)\s*gi?b\b(?!\s*(?:of\s+)?(?:memory|vram|ram|each|per|apiece)\b)")  # fmt: skip


def _gpu_size(intent: Intent, entities: Entities, context: Context) -> None:
    """The memory size of a GPU sold in several: said with its name ("A100 40GB"), per device ("8 A100s with 40GB
    each"), or as "the 40 gig version" of the plan before's GPU; else one question."""
    args, lowered = intent.args, plain_of(intent, context).lower()
    named = re.sub(r"[\s-]", "", str(entities.get("gpu_named") or "")).removesuffix("s")
    before = str((context.plan or {}).get("gpu") or "")
    family = named if named in SIZED_FAMILIES else None
    size = re.search(OTHER_SIZE, lowered)
    if family is None and size and not entities.has("gpu_named"):
        family = next((f for f, presets in SIZED_FAMILIES.items() if before in presets), None)
    if family is None:
        return
    beside = re.search(rf"\b(\d+)\s*gi?b\s+(?:nvidia\s+)?{family}|{family}s?\s+(\d+)\s*gi?b\b", lowered)
    said = next((g for g in size.groups() if g), None) if size else None
    memory = said or re.sub(r"gib$", "", str(entities.get("device_mem") or "").lower())
    memory = next((g for g in beside.groups() if g), memory) if beside else memory  # "80GB A100s"
    presets = SIZED_FAMILIES[family]
    sized = [p for p in presets if memory and p.endswith(f"-{memory}gb")]
    if sized:
        args["gpu"] = sized[0]
        args.pop("device_mem", None)
        return
    args.pop("gpu", None)
    sizes = " or ".join(f"{family.upper()} {p.rsplit('-', 1)[-1].upper()}" for p in presets)
    intent.clarify = intent.clarify or f"Which {family.upper()}: {sizes}? The memory decides which layouts fit."


def describes_experiment(described: str, intent: Intent, context: Context) -> bool:
    """Whether every number of a description ("the 1024 one") is a value of the experiment file the sentence names
    (its seq_len 1024): the file described again, not a run or sweep to find."""
    numbers = re.findall(r"\d+(?:\.\d+)?", described)
    experiment = intent.args.get("experiment")
    if not numbers or not experiment or context.known.root is None:
        return False
    try:
        values = _values(yaml.safe_load((Path(context.known.root) / str(experiment)).read_text()))
    except (OSError, yaml.YAMLError):
        return False
    return all(n in values for n in numbers)


def _values(tree: object) -> set[str]:
    """Every scalar value in a loaded YAML tree, as text."""
    if isinstance(tree, dict):
        return set().union(*(_values(v) for v in tree.values())) if tree else set()
    if isinstance(tree, list):
        return set().union(*(_values(v) for v in tree)) if tree else set()
    return {str(tree)}


# What a multiplier is said of ("double the memory", "2 x the nodes", "el doble de pasos"): the word after it.
MULTIPLIED = (r"(?:\b(?:double|doubling|triple|tripling)|(?<![\w.])\d+(?:\.\d+)?\s*x)\s+"
              r"(?:(?:as\s+(?:many|much)|the|of|more|our|my)\s+)*([a-z][\w-]*)")  # fmt: skip
# What a plan's GPU count is called: doubled, the plan before's GPUs are.
GPU_COUNT_WORDS = r"gpus?|devices?|cards?|h100s?|h200s?|a100s?|l40s|a10s?|4090s?"


def _multiplied_doubt(lowered: str, context: Context) -> str | None:
    """The question a plan's multiplier calls for where it may be of something other than the plan before's GPUs:
    said of another thing ("double the memory", "double precision", "double the seq len", "double the nodes"), or
    said alone after a plan over nodes or of a sequence length ("and with double?": GPUs, nodes or length?)."""
    said = re.search(MULTIPLIED, lowered)
    noun = said.group(1) if said else None
    if noun and re.fullmatch(GPU_COUNT_WORDS, noun) and not (context.plan or {}).get("nodes"):
        return None  # "twice as many gpus": the plan before's GPUs
    if noun is None or noun in ("on", "with", "at", "please", "then", "instead", "and", "too"):
        plan = context.plan or {}
        if not plan.get("nodes") and not plan.get("seq_len"):
            return None  # "and with double?" after 4 GPUs: 8 of them
    return ("Double what, exactly: the GPUs, the nodes or something else? Say the new value, e.g. `on 8 GPUs` or "
            "`on 2 nodes of 4` (I plan only the model, the GPUs, the nodes and the sequence length).")  # fmt: skip


def _family_and_size(key: str) -> tuple[str, float] | None:
    """A preset's family (with its version) and its size in billions: llama-3.1-8b is ("llama-3.1", 8), qwen3-30b-a3b
    ("qwen3", 30), mixtral-8x7b ("mixtral", 56)."""
    if parsed := PRESET.match(key):
        return f"{parsed.group(1)}-{parsed.group(2)}", float(parsed.group(3))
    if experts := re.search(r"^(.+?)-(\d+)x(\d+(?:\.\d+)?)b$", key):
        return experts.group(1), int(experts.group(2)) * float(experts.group(3))
    if sized := re.search(r"^(.+?)-(\d+(?:\.\d+)?)b(?:-a\d+b)?$", key):
        return sized.group(1), float(sized.group(2))
    return None


def _relative_preset(before: str, relative: str) -> str | None:
    """The preset of `before`'s family that is "the smaller one" (the only smaller; "the smallest": the least), or
    None where that is not one preset."""
    said = _family_and_size(before)
    if said is None:
        return None
    family = [(size, key) for key in MODELS if (found := _family_and_size(key)) and found[0] == said[0]
              for size in (found[1],)]  # fmt: skip
    smaller = relative.startswith("small")
    others = sorted(item for item in family if (item[0] < said[1] if smaller else item[0] > said[1]))
    if relative.endswith("est") and others:
        return (others[0] if smaller else others[-1])[1]
    return others[0][1] if len(others) == 1 else None


def _only_preset_of_size(size: object) -> str | None:
    """The one preset with `size` billion parameters ("405b" is llama-3.1-405b); None where several have it."""
    sized = [k for k in MODELS if (m := PRESET.match(k)) and float(m.group(3)) == float(str(size))]
    return sized[0] if len(sized) == 1 else None


def _device_count(entities: Entities) -> int | None:
    found = entities.get("devices")
    return int(found) if isinstance(found, int) else None


def _fill_compare(intent: Intent, entities: Entities, context: Context) -> None:
    runs = list(dict.fromkeys(str(r) for r in entities.all("run")))
    if len(runs) >= 2:
        intent.words = runs[:2]
        return
    lowered = intent.text.lower()
    if len(context.known.runs) > 2 and not re.search(r"\b(?:last|latest|newest|recent) two\b", lowered):
        first, second = context.known.runs[:2]
        intent.clarify = (
            f"Compare {first} and {second}, the latest two? Or name the two runs, e.g. `compare {first} and {second}`."
        )


def _fill_why(intent: Intent, entities: Entities, context: Context) -> None:
    """Why a sweep's winner won: the sweep named or described, else the conversation's (agent.offline). Why a run
    failed ("why did it crash?" after reading tp-try): that run's results."""
    if named := entities.get("sweep") or sweep_in_words(intent.text, context):
        intent.args["sweep"] = str(named)
    elif context.run and re.search(POINTING, intent.text.lower()) and not context.last("read_sweep", "plan_layouts"):
        intent.command = "results"
        _fill_run_tool(intent, entities, context)


FILL = {
    "why": _fill_why,
    "results": _fill_run_tool,
    "status": _fill_status,
    "cancel": _fill_cancel,
    "resume": _fill_resume,
    "trials": _fill_trials,
    "report": _fill_sweep_named,
    "pr": _fill_sweep_named,
    "docs": _fill_docs,
    "bench": _fill_bench,
    "read": _fill_read,
    "sweep": _fill_sweep,
    "run": _fill_launch,
    "plan": _fill_plan,
    "compare": _fill_compare,
}


def fill(intent: Intent, plain: str, entities: Entities, context: Context) -> None:
    """The chosen tool's arguments, from the entities and from the conversation what the sentence does not
    restate (the plan before, the run just launched)."""
    across = intent.command == "results" or (intent.command == "status" and re.search(RUN_STATES, plain.lower()))
    if across and not entities.has("run", "run_choice") and re.search(ACROSS_RUNS, plain.lower()):
        _across_runs(intent, plain.lower(), context)
    FILL.get(intent.command, lambda *a: None)(intent, entities, context)
    if intent.clarify is None and intent.command == "sweep" and _sweep_told_of(plain.lower()):
        intent.clarify = (f"You told me of a sweep, not to run one, so I have done nothing. Do you want me to run it "
                          f"now: {call_text(intent)}? yes / edit")  # fmt: skip
    if intent.clarify is None and (place := _one_by_its_place(plain.lower(), intent, context)):
        intent.clarify = (f"Which do you mean by 'a {place} one'? Nothing here names it, so I have done nothing; "
                          f"name it, e.g. the run or its settings (so far I read {call_text(intent)}).")  # fmt: skip


# A sweep with its trials told of, not ordered: one run before ("last month we ran a hyperparameter exploration of 12
# trials"), or someone else's wish ("my manager wants a study of 10 trials"); an order after it ("please run it for
# him") still asks for it.
SWEEP_TOLD_OF = (r"\b(?:ran|did|had|tried|finished|completed|wants|wanted|asked\s+for|requested|suggested|proposed|"
                 r"mentioned|needs|needed)\s+(?:a|an|another|new)\s+(?:[\w-]+\s+)?(?:sweep|search|exploration|scan|study)\s+"
                 r"(?:with|of|over)\s+\d+\s+trials\b")  # fmt: skip
SWEEP_ORDERED_AFTER = (r"\b(?:please|go\s+ahead|(?:run|start|launch|kick|fire|do)\s+(?:it|that|one|this|the\s+same)\b|"
                       r"(?:run|start|launch|kick\s+off)\s+(?:a|an|another|the)\s+)")  # fmt: skip


def _sweep_told_of(lowered: str) -> bool:
    """Whether the sentence tells of a sweep (SWEEP_TOLD_OF) and orders none after it."""
    found = re.search(SWEEP_TOLD_OF, lowered)
    return bool(found) and not re.search(SWEEP_ORDERED_AFTER, lowered[found.end() :])


# Something counted by its place and named by "one" alone: "cancel a third one too", "launch a third one like the
# first two". What the ones before it were is no name of it (a third card after a plan of 2 is: _card_added).
ONE_BY_PLACE = rf"\b(?:a|one)\s+({'|'.join(ORDINALS)})\s+one\b(?!\s+of\b)"


def _one_by_its_place(lowered: str, intent: Intent, context: Context) -> str | None:
    """The place ("third") of a thing named only by it, where no plan before makes it one card more."""
    found = re.search(ONE_BY_PLACE, lowered)
    if not found or (intent.command == "plan" and context.plan and _card_added(lowered, context)):
        return None
    return found.group(1)
