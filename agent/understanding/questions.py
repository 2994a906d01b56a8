"""When the offline planner asks instead of acting: one question that names its best reading.

A wrong action is worse than a question. Beside a missing argument, the planner asks when it is not sure of a value
that changes what runs: a number no argument of the call holds; a run, sweep, model or suite described or named that
the repository or the presets lack (never the latest or the experiment's own in its place); an action the user
negates, puts off, supposes, relays or only asks about; two readings that score close; a request mostly in a language
it does not read.
"""

from __future__ import annotations

import json

from agent.understanding import regex as re  # `re` with a cache the parser's patterns fit in
from agent.understanding.arguments import (
    CORRECTED,
    LATEST_WORDS,
    as_number,
    call_text,
    describes_experiment,
    launch_text,
    no_sweep_said,
    sweep_in_words,
    sweeps_said,
)
from agent.understanding.context import Context
from agent.understanding.entities import (
    ALREADY_NAMED,
    DEFAULT_ONE,
    DESCRIBED_BY_SIZE,
    SPELLED_OUT,
    WHEN_TO_ACT,
    Entities,
    Entity,
    masked,
)
from agent.understanding.grammar import (
    TOTAL,
    Intent,
)
from agent.understanding.held_corrections import held_correction
from agent.understanding.intents import (
    ACTIONS,
    DO_THAT,
    FOLLOW_UP,
    NOT_BY_POSSIBLE,
    POSSIBLE_TO,
    RUN_WANTED_GOING,
    launch_verb,
    negated_actions,
    ranked,
)
from agent.understanding.mood import (
    ACTION_WORDS,
    LATER,
    MAY_I,
    MAY_I_START,
    OWN_INTENT,
    SUPPOSED,
    TAKE_BACK,
    WAITS_ON,
    WISHED_RUN,
    YOUR_APPROVAL,
    conditional,
    guarantee_ordered,
    held_back,
    held_back_question,
    offers_yes,
    only_taken_back,
    without_notices,
    without_own_approval,
)
from agent.understanding.normalise import ENGLISH_FUNCTION, OTHER_LANGUAGE, THEM_NOUNS, UNITS

CLOSE = 1.0  # two actions scoring within this of each other: ask which is meant


# "no, I meant baseline-ddp", "and r1?" right after a benchmark: the benchmark of another run, or only its results.
MEANT_ANOTHER = r"^\W*(?:(?:no|nope|sorry)\W+)*i\s+meant\b"


def _benchmark_or_results(plain: str, intent: Intent, context: Context) -> str | None:
    """A follow-up of a benchmark read as a run's results is asked about: the benchmark again, on the run named, is
    as likely, and neither is guessed."""
    lowered = plain.lower()
    if context.previous != "bench" or intent.command != "results" or "run" not in intent.args:
        return None
    if not (re.search(FOLLOW_UP, lowered) or re.search(MEANT_ANOTHER, lowered)):
        return None
    run = intent.args["run"]
    return f"Benchmark {run} as the one before, or read its results ({call_text(intent)})?"


# A lone negation ending the message after an action: "cancel r1. Not.", "benchmark r1 no." ("fp8? no." answers a
# question of its own; "with packing, not without" has its word after the negation). Read in the words as typed: a
# translated "nahi" or "nicht" may be a setting's negation.
TRAILING_NO = r"(?:[.!;]\s*(?:not|no|nope|nah)\s*[.!]*|(?<=[\w/-])\s+(?:no|nope|nah)\s*[.!]+)$"


def _unknown_source(entities: Entities) -> str | None:
    """One question when a launch or sweep is to use settings only someone else knows ("the settings my colleague
    suggested"): the repository cannot know them, so the defaults in their place would be a guess. A file or run of
    the repository named says where they are: acted on."""
    said = entities.get("unknown_source")
    named = entities.has("run", "file", "checkpoint") or any(v != "meshpilot.yaml" for v in entities.all("experiment"))
    if said is None or named:
        return None
    return (f"Which settings do you mean by {str(said)!r}? I cannot know them from here: name a config file or a run "
            "to copy, or say the values, e.g. `train 20 steps with dp_shard=2 on 2 GPUs, lr 3e-4`.")  # fmt: skip


# Tools that change nothing: acted on even when much of the sentence is in a language the rules do not read, those
# that read a run or sweep only when the sentence names it (never the latest in its place). Reading a file is not
# one: a file named in such a sentence is as often what to launch ("roda o meshpilot.yaml com ...") as what to show.
READ_ONLY = ("plan", "runs", "hardware", "help")
READ_NAMED = ("why", "results", "status", "trials", "compare")  # a wait is a status


def _safe_unread(intent: Intent, entities: Entities, context: Context) -> bool:
    named = entities.has("run", "sweep") or sweep_in_words(intent.text, context) is not None
    return intent.command in READ_ONLY or (intent.command in READ_NAMED and named)


def _other_language(plain: str) -> bool:
    """Whether the sentence is mostly in a language the rules do not read: at least two of its function words, and
    more of them than English ones (the command words of those languages that are certain are already English)."""
    words = re.findall(r"(?<![\w'./=-])[^\W\d_]+(?![\w'./=-])", plain.lower())
    other = sum(word in OTHER_LANGUAGE for word in words)
    return other >= 2 and other > sum(word in ENGLISH_FUNCTION for word in words)


# A go-ahead and nothing else ("go", "ok, go ahead", "do it"): it agrees to what was said before, and with nothing
# before it agrees to nothing (never a launch of the defaults).
BARE_GO = (r"\W*(?:(?:ok(?:ay)?|alright|right|so|then|now|yes|yep|sure)\W+)*(?:go|go ahead|go for it|let'?s go|do it|"
           r"proceed|send it|ship it|make it so)(?:\W+(?:then|now|please|pls))*\W*")  # fmt: skip


NUMBER = re.compile(r"(?<![\w.=/-])(\d+(?:\.\d+)?(?:e-?\d+)?)(k?)(?![\w.=/-]|\.\d)", re.I)


# The counts each action takes, and an example of each: "a few trials" for a sweep is asked about, never guessed.
VAGUE_TAKEN = {
    "run": ("steps", "nproc", "devices", "nodes", "stages"),
    "sweep": ("trials",),
    "plan": ("devices", "nodes"),
}
COUNT_EXAMPLES = {"steps": "30 steps", "trials": "8 trials", "nproc": "on 2 processes", "devices": "on 8 GPUs",
                  "nodes": "on 2 nodes", "stages": "pp=2"}  # fmt: skip


def _vague_count(entities: Entities, intent: Intent) -> str | None:
    """One question when a count the action takes is said with no number ("a few trials", "several hundred steps")."""
    for kind, said in entities.all("vague_count"):
        if kind in VAGUE_TAKEN.get(intent.command, ()) and not entities.has(kind):
            reading = launch_text(intent.args) if intent.command == "run" else f"I would call {call_text(intent)}."
            said = re.sub(r"\b(hundred|thousand|dozen)s\b(?!\s+of)", r"\1", said.strip())  # as normalise kept it
            return f"How many, exactly? {said!r} is no number: say e.g. `{COUNT_EXAMPLES[kind]}`. {reading}"
    return None


# A count of GPUs or nodes refused: "all else unchanged, but not on 4 gpus" (how many, then?).
REFUSED_COUNT = (r"\b(?:not|never)\s+(?:on\s+|with\s+|using\s+|across\s+)?(\d+)\s*"
                 r"(gpus?|devices?|cards?|process(?:es)?|procs?|nodes?)\b")  # fmt: skip
COUNTED_BY = {"gpu": ("nproc", "devices"), "dev": ("nproc", "devices"), "car": ("nproc", "devices"),
              "pro": ("nproc",), "nod": ("nodes",)}  # fmt: skip


def _refused_count(plain: str, intent: Intent) -> str | None:
    """One question when the action would use the very count the sentence refuses (and names none in its place)."""
    for found in re.finditer(REFUSED_COUNT, plain.lower()):
        keys = COUNTED_BY[found.group(2)[:3]]
        if any(str(intent.args.get(key)) == found.group(1) for key in keys):
            return f"Not on {found.group(1)} {found.group(2)}: on how many, then? Say e.g. `on 8 GPUs`."
    return None


# The arguments each action's tool call takes (agent.offline): a number held in any other key is dropped.
TAKEN = {
    "run": ("experiment", "nproc", "layout", "steps", "set"),
    "sweep": ("experiment", "trials"),
    "plan": ("devices", "nodes", "device_mem", "device_type", "experiment", "model", "gpu", "seq_len"),
}


def _unplaced_number(plain: str, entities: Entities, intent: Intent) -> str | None:
    """A question when the sentence states a number that no argument holds: a stated value is never dropped.
    Numbers that name something (a model's size, a GPU, a run) or that a self-correction replaced do not count."""
    lowered = plain.lower()
    corrected = [m.end() for m in re.finditer(CORRECTED, lowered)]
    # a time of day names no count ("14:02 UTC planning ticket", "it's 9:30 here"), but a launch or sweep set for a
    # time ("at 9:30 train ...") would run now: its number is asked about
    spans = [e.span for e in entities.found if e.span[1] > e.span[0] and not _time_to_act(e, intent, lowered)]
    taken = {k: v for k, v in intent.args.items() if k in TAKEN.get(intent.command, intent.args)}
    if "set" in taken:  # a model preset's config is full of numbers (4096, 32...): none of them is a stated value
        taken["set"] = [o for o in taken["set"] if not str(o).startswith("model.")]
    held = json.dumps(taken)
    for found in NUMBER.finditer(lowered):
        if any(start <= found.start() < end for start, end in spans) or (corrected and found.start() < corrected[-1]):
            continue
        if re.search(OLD_VALUE, lowered[: found.start()]):  # "100 steps instead of the usual 20": 20 is no argument
            continue
        if _number_of_its_own(found, lowered, spans) or _total_of_the_plan(found, lowered, intent):
            continue
        number, kilo = found.group(1), found.group(2)
        readings = {number, str(as_number(number))}
        if kilo:  # "8k" is 8192 or 8000, never the 8 of "8 GPUs"
            readings = {str(int(float(number) * 1024)), str(int(float(number) * 1000))}
        if not any(re.search(rf"(?<![\d.]){re.escape(r)}(?![\d])", held) for r in readings):
            what = "sequence length, steps, processes" if intent.command == "run" else "devices, nodes, memory"
            return (f"What is {found.group(0)} for ({what}...)? I would call {call_text(intent)}, which does not "
                    "use it.")  # fmt: skip
    return None


# A number with a noun of its own that no tool takes: "I've slept 4 hours", "3 days ago" (a time the action would
# take or wait for, "for 4 hours", "in 2 days", is still asked about).
TIME_SPENT = r"\s*(?:hours?|hrs?|minutes?|mins?|days?|weeks?|months?|years?|nights?)\b"
TIME_OF_ACTION = r"\b(?:for|in|within|after|every|under|over|than|to|up to|at most|about|around|by|until|till)\s+$"
# Chat's "4" for "for" before what it is for: "what layouts work 4 mistral 7b", "4 the eval" (a model's span right
# after it, or an article).
COUNTING_VERB = r"\b(?:plan|train|run|launch|fit|bench\w*|eval\w*|sweep|tune|start|use|need|have|got)\s+$"
FOR_WORDS = r"\s+(?:the|a|an|my|our|me|us|you|it|this|that|him|her|them)\b"


# A number that labels a part of the message, not a value: a heading at the start of a sentence ("Objective 1:",
# "Milestone 2 assumes ...", "Work package 4 calls for ...", "Step 6: ..." with its colon, since "step 20" may be a
# checkpoint), or the count of a list it opens ("Three conditions, jointly necessary: ...", "2 requirements: ...").
SENTENCE_START = r"(?:^|[.;!?\n]\s*|:\s+)"
LABEL_NOUNS = (r"objective|milestone|goal|phase|task|item|part|section|point|work\s*package|wp|deliverable|"
               r"question|scenario|priority|requirement|action\s+item|bullet")  # fmt: skip
HEADING_BEFORE = rf"{SENTENCE_START}\W*(?:{LABEL_NOUNS})\s*#?\s*$"
STEP_HEADING = (rf"{SENTENCE_START}\W*step\s+$", r"\s*[:.)]")  # before and after the number
LIST_COUNTED = (r"\s+(?:conditions|requirements|things|points|items|asks|requests|questions|goals|constraints|"
                r"criteria|objectives|milestones|parts)\b")  # fmt: skip


# A number that names a ticket, issue, case or pull request, not a value: "Ticket #48240:", "update on #48270",
# "issue 512", "PR #77", "JIRA 4411". Never one with a count's noun after it ("in case 2 GPUs fail": a count).
REFERENCE_BEFORE = (r"(?:#|\b(?:tickets?|issues?|case|cases|bugs?|incidents?|prs?|pull\s+requests?|jira|mrs?|"
                    r"merge\s+requests?)\s*(?:(?:no\.?|number|nr\.?|id)\s*)?[#:]?\s*)$")  # fmt: skip
COUNTED_AFTER = (r"\s*(?:x\s*)?(?:gpus?|devices?|cards?|nodes?|process(?:es)?|procs?|steps?|trials?|stages?|"
                 r"layers?|tokens?|epochs?|(?:[a-z]+\s+)?(?:gpus|nodes))\b")  # fmt: skip


def _names_a_reference(found: re.Match, lowered: str) -> bool:
    """Whether the number found is a ticket's, issue's or pull request's (REFERENCE_BEFORE), not a count."""
    before, after = lowered[: found.start()], lowered[found.end() :]
    return bool(re.search(REFERENCE_BEFORE, before)) and not re.match(COUNTED_AFTER, after)


def _labels_a_part(found: re.Match, lowered: str) -> bool:
    """Whether the number found heads or counts a part of the message (HEADING_BEFORE, STEP_HEADING, LIST_COUNTED)."""
    before, after = lowered[: found.start()], lowered[found.end() :]
    if re.search(HEADING_BEFORE, before):
        return True
    if re.search(STEP_HEADING[0], before) and re.match(STEP_HEADING[1], after):
        return True
    return bool(re.search(rf"{SENTENCE_START}\W*$", before) and re.match(LIST_COUNTED, after))


def _total_of_the_plan(found: re.Match, lowered: str, intent: Intent) -> bool:
    """Whether the number is said as the total of the GPUs the plan holds, nodes times each node's: "2 nodes of 8, so
    16 in total" restates them (a total that is not their product is asked about)."""
    devices, nodes = intent.args.get("devices"), intent.args.get("nodes")
    if intent.command != "plan" or not isinstance(devices, int) or not isinstance(nodes, int):
        return False
    said = (m for m in re.finditer(TOTAL, lowered) if found.start() in (m.start(1), m.start(2)))
    return next(said, None) is not None and float(found.group(1)) == devices * nodes


def _number_of_its_own(found: re.Match, lowered: str, spans: list[tuple[int, int]]) -> bool:
    """Whether the number found counts or stands for something that is no argument of any tool."""
    after, before = lowered[found.end() :], lowered[: found.start()]
    if re.match(TIME_SPENT, after) and not re.search(TIME_OF_ACTION, before):
        return True
    if _labels_a_part(found, lowered) or _names_a_reference(found, lowered):
        return True
    # "4" for "for" follows a word, not a verb that may count ("plan 4 llama-3.1-8b" may mean copies: asked)
    if found.group(0) != "4" or not re.search(r"[a-z]\s+$", before) or re.search(COUNTING_VERB, before):
        return False
    start = found.end() + len(after) - len(after.lstrip())
    return bool(re.match(FOR_WORDS, after)) or any(begin == start for begin, _ in spans)


# A time of day that dates what already happened, right after its verb: "got preempted at 3am", "crashed around
# 02:00", "was killed at 17:00" (never a time set ahead: "scheduled at 3am", "needed at 9").
PAST_EVENT = (r"\b(?:(?!(?:schedul|plann|queu|tim|slat|book|reserv|need|want|ask|expect|requir|intend)ed\b)[a-z]{2,}ed|"
              r"died|broke|crashed|hung|ran out|went down|fell over|blew up)\s+"
              r"(?:(?:again|just|suddenly|overnight|today|yesterday|last night)\s+)?"
              r"(?:at|around|about)\s+$")  # fmt: skip
# A participle of what is wanted done then, not done already: "I want it restarted at 9am", "it should be resumed at
# 3am", "get it cancelled at 5pm".
WANTED_DONE = (r"(?:\b(?:be|being|get|gets|getting)\s+|\b(?:want|wants|need|needs|like|prefer|have|has)\s+"
               r"(?:\S+\s+){1,3}?)\w+ed\s+(?:\w+\s+)?(?:at|around|about)\s+$")  # fmt: skip


def _time_to_act(entity: Entity, intent: Intent, lowered: str) -> bool:
    """Whether `entity` is a time of day said as when the command is to act ("cancel r1 at 17:00"): the tools act now,
    so such a time is asked about, never dropped. A time that dates a past event ("preempted at 3am") is none."""
    acts_now = intent.command in ACTIONS
    before = lowered[: entity.span[0]]
    if not (acts_now and entity.kind == "clock" and re.search(WHEN_TO_ACT, before)):
        return False
    return not re.search(PAST_EVENT, before) or bool(re.search(WANTED_DONE, before))


# "Tp-try is the one" after an action taken back, with no word of what to do with it ("don't benchmark r1, tp-try is
# the one I don't trust"), or another named "instead" of an action that stays taken back ("don't cancel tp-try, r1
# instead"): what is wanted is asked (entities.ANOTHER_INSTEAD reads the tails that say it).
THE_ONE = r"\b(?:is|'s)\s+the\s+one\b|[,;:]\s*(?:(?:the|that|this)\s+)?[\w./-]+\s+instead\b"


def _the_one_undone(plain: str, intent: Intent) -> str | None:
    negated = negated_actions(plain.lower())[0] - {intent.command}
    if not negated or not re.search(THE_ONE, plain.lower()):
        return None
    verbs = " or ".join(EXAMPLE_VERBS.get(action, action) for action in sorted(negated))
    return (
        f"You said not to {verbs} that one: what should I do with the other, e.g. `{verbs} NAME` or `status of NAME`?"
    )


EXAMPLE_VERBS = {"bench": "benchmark", "pr": "open a PR for", "docs": "update the docs from", "report": "report on",
                 "run": "train"}  # fmt: skip
# The training made into something ("make the training deterministic", "make the training config use fsdp"): a change
# to the experiment, which no tool makes ("make the training with pp of 2" is a launch: intents.CUES; so is "make the
# run but not with packing", "make the run without compile": the run made, with what it goes without).
MADE_INTO = (r"\bmake\s+(?:the|our|my|this)\s+(?:training|run|experiment)(?:\s+(?:config\w*|setup|recipe|yaml))?\s+"
             r"(?!(?:with|without|but|on|using|for|over|across|in|now|please|again|of|run|runs|plan)\b)"
             r"(\w+)")  # fmt: skip


def _made_into(plain: str, intent: Intent) -> str | None:
    if intent.command not in ("run", "plan", "read", "sweep") or not (made := re.search(MADE_INTO, plain.lower())):
        return None
    return (
        f"No tool changes the experiment's config ({made.group(0)!r}); which setting should a launch use, e.g. "
        "`train 20 steps with train.seed=0 on 2 GPUs`?"
    )


def _timed(plain: str, entities: Entities, intent: Intent) -> str | None:
    """One question for a command set for a time of day ("cancel r1 at 17:00"): it would act now."""
    lowered = plain.lower()
    when = [e for e in entities.found if _time_to_act(e, intent, lowered)]
    if not when:
        return None
    return f"I can only act now, not at {when[0].value}: {intent.command} now ({call_text(intent)})? yes / edit"


# A number named as the value being replaced, right before it: "instead of the usual 20", "up from 50", "rather
# than the default 10".
OLD_VALUE = (r"\b(?:instead of|rather than|up from|down from|compared to|"
             r"vs\.?|versus)\s+(?:(?:the|our|my)\s+)?(?:(?:usual|default|normal|old|previous|current|last|standard|"
             r"original|typical)\s+)?$")  # fmt: skip


# A question that also asks for something to be done: "can you launch ...", "could you update them?", "please ...".
REQUEST = (r"\b(?:can|could|would|will) (?:you|we|i)\b|\b(?:can|could|would|will|won'?t) (?:ya|u)\b|\bplease\b|"
           r"\bkindly\b|"  # "What are docs for, if not ...? Kindly bring them into line with lr-scan."
           r"\blet'?s\b|\bwanna\b|"
           r"\bi(?: want| need|'d like| would like|'d like)\b|\bwhat i(?:'d| would) like\b|"
           # polite requests asked as questions: "mind turning it into a write-up?", "care to open the PR?"
           r"(?:^(?:\S+\s+){0,12}?|[,;.!?]\s*)(?:(?:would|do) you\s+)?mind\s+\w+ing\b|"
           r"\bcare to\b|\bany chance (?:you|we)\b|"
           r"\bhow about (?:you|we)\b|"
           # the assistant asked through a third person: "could someone have it kick off a sweep?", "can somebody get
           # the bot to open a PR?" ("could someone cancel r1?" may ask a colleague: no request of the assistant)
           r"\b(?:can|could|would|will)\s+(?:someone|somebody|anyone|anybody|one of you)\s+(?:please\s+)?"
           r"(?:have|get|make|tell|ask)\s+(?:it|the (?:bot|assistant|agent|tool)|meshpilot|you)\b")  # fmt: skip


# The opening of a question: a wh-word, or an auxiliary before its subject ("did we", "is it"; "do it again" is no
# question).
ASKING = (r"^(?:so,?\s+|and\s+|ok,?\s+)?(?:what|what'?s|whats|which|why|where|when|who|how)\b|"
          r"^(?:is|are|was|were|has|have|had)\s+(?:you|we|i|they|it|the|my|our|that|this|there)\b|"
          r"^(?:do|does|did)\s+(?:you|we|i|they)\b|"
          # whether to act, asked: "should we train long.yaml on 4 gpus or wait", "would it be wise to train ..."
          r"^(?:should|shall)\s+(?:we|i)\b|^(?:would|will|is)\s+(?:it|that)\s+(?:be\s+)?(?:wise|smart|sensible|"
          r"a good idea|worth\s+it|okay|ok|fine|safe|better)\b")  # fmt: skip


# A change asked for by its hoped-for effect only: "Fix it.", "make it better", "improve that", "sort it out".
VAGUE_FIX = (r"\b(?:fix|improve|sort out|sort|tune up|make)\s+(?:it|this|that|them|things)\s*(?:out\s*)?"
             r"(?:better|faster|good|right|work)?\s*(?:please|then|already|for me)?\W*$")  # fmt: skip


def _change_unsaid(plain: str, intent: Intent) -> str | None:
    """One question when a launch would only repeat the defaults for a complaint ("the numbers on that run are not
    where we need them. Fix it."): what to change is the user's to say, and the same run again would change
    nothing."""
    said = {key: value for key, value in intent.args.items() if key != "experiment"}
    if said or not re.search(VAGUE_FIX, plain.lower()):
        return None
    return ("What should I change to fix it? Say the setting or layout, e.g. `train it again with train.lr=1e-4` or "
            "`rerun with dp_shard=2 on 2 GPUs`; I would not launch the same run again unchanged.")  # fmt: skip


def _launch_unasked(plain: str, entities: Entities, intent: Intent, context: Context) -> str | None:
    """One question when a launch was read from a sentence with no launch verb and no fact of a launch ("every run
    and how it finished", "prepone the run and do the needful"): "run" there is a noun, and the defaults launched
    for it would be a run nobody asked for. Within a conversation an earlier turn may say what to launch."""
    if intent.args or context.calls or context.previous_text or launch_verb(masked(plain.lower(), entities)):
        return None
    return ("What should I launch? I read no launch verb and no setting, so I would only train the defaults "
            f"({call_text(intent)}). Say what to train, e.g. `train 20 steps with dp_shard=2 on 2 GPUs`, or ask "
            "for `list runs` to see every run and how it ended.")  # fmt: skip


# What a launch is wished to be, in words no tool takes: a best or cheapest choice, "whatever is fastest", "large
# enough to be significant", yesterday's run, "the same but better" in French or German. The experiment's defaults in
# its place would be a run nobody asked for. ("..., whatever": a shrug, no choice; "best regards": a sign-off.)
VAGUE_WISH = (
    r"\b(?:cheapest|fastest|quickest|speediest|optimal|optimum|ideal|most\s+(?:efficient|economical|accurate|"
    r"cost[\s-]?effective)|least\s+(?:expensive|costly))\b|"
    r"(?<!all the )(?<!do your )\bbest\b(?!\s+(?:regards|wishes|of luck|to)\b|\s*,\s*\w+\W*$)|"
    r"(?<![,;] )(?<![,;])\b(?:whatever|whichever)\b|"
    r"\b(?:large|big|long|many|high|low|small|fast|good|accurate)\s+enough\b|\bstatistically\b|"
    r"\bsignificant\s+(?:results?|differences?|improvements?|gains?|speed-?ups?|effects?)\b|"
    r"\byesterday's\b|\b(?:from|of|like|as)\s+yesterday\b|\bd'hier\b|\bvon gestern\b|\bde ayer\b|\bdi ieri\b|"
    r"\bsomething\s+(?:different|else|new|other)\b|\b(?:a\s+)?different\s+(?:thing|approach|tack)\b|"
    r"\b(?:en|in)\s+mieux\b|\bmeilleure?s?\b|\bplus\s+(?:rapide|vite)\b|\bmoins\s+cher\b|\bbesser\b|\bschneller\b"
)
# A launch told as one done before, then "this time" with what changes: "last time we did 20 steps on 2 GPUs; this time
# let's try 40" (the facts read may be the past run's, and the change may name no setting; "this time let's try 15
# steps on 2 GPUs" alone states the launch).
PAST_THEN_NOW = (r"\b(?:last\s+time|previously|the\s+other\s+day|yesterday|earlier|before)\b[^.!?]*?"
                 r"\b(?:we|i|you|it)\s+(?:did|ran|used|trained|tried|had|went\s+with|launched)\b[^.!?]*?"
                 r"\bthis\s+time\b")  # fmt: skip


# Someone else's plan or wish to repeat a launch, told: "Ana will do the same but with AC", "Bob wants the same again
# on 4 GPUs" (theirs to run, or the user passing it on: asked, never a duplicate launched; "let's do the same" and "I
# want the same again" are the user's).
ANOTHERS_REPEAT = (r"\b(?!(?:i|we|you|u|it|this|that|which|what|who|there|then|and|so|please|just|let'?s|lets|one)\b)"
                   r"[a-z][\w-]*\s+(?:will|'ll|wants?|would\s+like|'d\s+like|(?:is|'s)\s+going\s+to|(?:is|'s)\s+gonna|plans\s+to|"
                   r"is\s+planning\s+to)\s+(?:to\s+)?(?:(?:do|run|try|have|launch|train)\s+)?"
                   r"(?:the\s+same|same\s+again|it\s+again|that\s+again)\b")  # fmt: skip


def _anothers_repeat(plain: str, intent: Intent) -> str | None:
    """One question when the launch repeated is someone else's plan or wish told (ANOTHERS_REPEAT)."""
    told = re.search(ANOTHERS_REPEAT, plain.lower())
    if told is None:
        return None
    return (f"Do you want me to launch it ({call_text(intent)})? {told.group(0)!r} reads as someone else's plan. "
            "yes / edit")  # fmt: skip


def _past_then_now(plain: str, intent: Intent) -> str | None:
    """One question when the launch's facts follow a past run's told before "this time" (PAST_THEN_NOW): which of
    the facts said are this launch's is the user's to confirm."""
    if not re.search(PAST_THEN_NOW, plain.lower()):
        return None
    return (f"Which settings for this launch, exactly? You told me what was run last time and what changes this time; "
            f"I read {call_text(intent)}. Say the whole launch, e.g. `train 40 steps on 2 GPUs`.")  # fmt: skip


# What a launch states that the tool takes: with one of these the vague wish is a wish about a stated launch.
LAUNCH_STATED = ("steps", "nproc", "devices", "layout", "switch", "override", "optimizer", "seq_len", "model")


def _vague_launch(plain: str, entities: Entities, intent: Intent) -> str | None:
    """One question when a launch names only a quality or a vague choice ("launch whatever is cheapest", "a run
    large enough to be significant", "relaunch yesterday's run but better") and no setting the tool can take: the
    defaults launched for it would be a guess. A run or sweep named that gave the launch its settings answers it
    ("train the best trial of lr-scan")."""
    wish = re.search(VAGUE_WISH, masked(plain.lower(), entities))
    if wish is None or entities.has(*LAUNCH_STATED):
        return None
    if entities.has("run", "sweep") and any(key != "experiment" for key in intent.args):
        return None
    return (f"What should I launch, exactly? {wish.group(0)!r} names no setting I can set, so I would only train the "
            f"defaults ({call_text(intent)}). Say the settings, e.g. `train 20 steps with dp_shard=2 on 2 GPUs`, or "
            "`train with the defaults`.")  # fmt: skip


# A run pointed at by its day, to be done again: "rerun yesterday's run with lr 0.0003", "relaunch last night's job on
# 2 GPUs", "redo the run from this morning": which run is unsaid, and a launch copies no run's settings.
_DAY = r"(?:yesterday|last\s+(?:night|week)|this\s+morning|(?:mon|tues|wednes|thurs|fri|satur|sun)day)"
RUN_OF_A_DAY_AGAIN = (r"\b(?:re-?run|re-?launch|re-?start|re-?do|repeat|re-?submit|re-?queue|run\s+again)\s+"
                      rf"(?:{_DAY}'s\s+(?:\w+\s+)?(?:run|job|training|experiment)|"
                      rf"the\s+(?:run|job|training|experiment)\s+(?:from|of)\s+{_DAY})\b")  # fmt: skip


def _run_of_a_day_again(plain: str, entities: Entities, intent: Intent, context: Context) -> str | None:
    """One question where a launch repeats a run told only by its day and no run is named: which run, and its
    settings, are unsaid (never the defaults with only the change said)."""
    again = re.search(RUN_OF_A_DAY_AGAIN, plain.lower())
    if again is None or entities.has("run"):
        return None
    runs = ", ".join(context.known.runs) or "none"
    return (f"Which run is {again.group(0).split(maxsplit=1)[1]!r} ({runs})? A launch cannot copy its settings: say "
            f"its layout, processes and steps. {launch_text(intent.args)}")  # fmt: skip


# Several runs to be done again at once: "relaunch the runs of the list", "rerun all our jobs" (a launch starts one
# run, and copies no run's settings).
RUNS_AGAIN = (r"\b(?:re-?run|re-?launch|re-?start|re-?do|re-?submit|re-?queue)\s+(?:all\s+|every\s+)?"
              r"(?:the|those|these|our|my|all)\s+(?:\w+\s+)?(?:runs|jobs|trainings|experiments)\b")  # fmt: skip


# What a sweep is wished to be, in words no argument takes: "big enough to matter", "whichever config is cheapest",
# yesterday's sweep ("a sweep for the best lr" or "the fastest layout" is what a sweep finds: no wish about it).
SWEEP_WISH = (r"(?<![,;] )(?<![,;])\b(?:whatever|whichever)\b|"
              r"\b(?:large|big|long|many|wide|broad|thorough|good)\s+enough\b|\bstatistically\b|"
              r"\bsignificant\s+(?:results?|differences?|findings?)\b|\byesterday's\b|"
              r"\b(?:from|of|like|as)\s+yesterday\b")  # fmt: skip
# What a sweep states that it takes: its trials or experiment file, or a sweep named to repeat.
SWEEP_STATED = ("trials", "file", "sweep")


def _vague_sweep(plain: str, entities: Entities, intent: Intent) -> str | None:
    """One question when a sweep names only a wish ("run a sweep big enough to matter", "sweep whichever config is
    cheapest") and nothing it takes: the defaults swept for it would be a guess."""
    wish = re.search(SWEEP_WISH, masked(plain.lower(), entities))
    if wish is None or entities.has(*SWEEP_STATED):
        return None
    return (f"What should I sweep, exactly? {wish.group(0)!r} names nothing I can set, so I would only sweep the "
            f"defaults ({call_text(intent)}). Say the trials or the config, e.g. `sweep configs/long.yaml with 8 "
            "trials`.")  # fmt: skip


# An experiment file put aside in a clause of its own, none of the action's: one the user will look at themself
# ("I'll look at configs/long.yaml later"), or said broken or to be left alone ("configs/long.yaml is broken so leave
# it alone"). The clause ends at a stop, a semicolon or a comma.
_USER_LOOKS_AT = (r"\b(?:i|we)(?:'ll|'d|'m\s+going\s+to|\s+(?:will|would|can|could|might|shall|am\s+going\s+to|"
                  r"want\s+to|need\s+to|have\s+to|plan\s+to))\s+(?:\w+\s+){0,2}?(?:look|check|review|read|fix|deal|"
                  r"handle|get|inspect|go\s+over|examine|debug|edit|sort)\b[^;.!?,]*$")  # fmt: skip
_SAID_BROKEN = (r"^\s*(?:\w+\s+){0,2}?(?:is|'s|seems|looks|was|got)\s+(?:\w+\s+)?(?:broken|buggy|busted|borked|"
                r"corrupt\w*|messed\s+up|off[\s-]limits|a\s+mess)\b|\bleave\s+(?:it|that|this)\s+alone\b")  # fmt: skip


def _file_put_aside(plain: str, entities: Entities, intent: Intent) -> str | None:
    """One question where the experiment a launch or sweep would take is a file the sentence puts aside (the user's
    to look at later, broken, to be left alone): the experiment's own in its place, offered for a yes."""
    experiment = intent.args.get("experiment")
    lowered = plain.lower()
    for found in entities.found:
        if found.kind != "file" or str(found.value) != experiment:
            continue
        start, end = found.span
        before = re.split(r"[;.!?,]", lowered[:start])[-1]
        after = re.split(r"[;.!?,]", lowered[end:])[0]
        if re.search(_USER_LOOKS_AT, before) or re.search(_SAID_BROKEN, after):
            del intent.args["experiment"]
            verb = "launch" if intent.command == "run" else intent.command
            return (f"You put {experiment} aside, so I would {verb} the experiment's own config instead: "
                    f"{call_text(intent)}? yes / edit")  # fmt: skip
    return None


# A sentence that only tells how a run or sweep went, its subject that run or sweep and its verb past: "last week's
# tuning sweep with 8 trials on configs/long.yaml was a waste", "yesterday's run on 4 GPUs was slow" (no order: a
# second clause may give one, "..., so rerun it on 8": then the order is read as usual).
TOLD_HOW_IT_WENT = (r"^\W*(?:(?:so|well|honestly|fyi|btw|ugh|hmm|ok|okay|sadly|frankly)\W+)*"
                    r"(?:the|that|this|our|my|(?:last|previous)\s+(?:week|month|night|time|year)'s|"
                    rf"{_DAY}'s|the\s+(?:last|previous|earlier|old))\s+(?:[\w/.'=-]+\s+){{0,8}}?"
                    r"(?:sweep|run|job|training|launch)\b(?:[^;:.!?,]|\.(?=\w))*?\b(?:was|were|went|turned\s+out|"
                    r"ended\s+up|took|failed|crashed|had|got)\b[^;:!?,]*[.!]?\s*$")  # fmt: skip


def _told_how_it_went(plain: str, intent: Intent) -> str | None:
    """One question where the sentence only tells how a run or sweep went: its facts are no new one's to start."""
    if not re.search(TOLD_HOW_IT_WENT, plain.lower()):
        return None
    verb = "launch" if intent.command == "run" else "start"
    return f"That tells me how it went; do you want me to {verb} a new one ({call_text(intent)})? yes / edit"


# A count of what "those" or "them" point back at, the noun it counts said after the count or not at all: "8 of
# those", "4 of those steps", "8 trials of those", "top 3 of them" (GPUs or nodes said before or after it in the
# sentence are what it counts: "8 h100s, 4 of them for tp", "8 of those H200 things").
_COUNTED_NOUN = "|".join(THEM_NOUNS.values())
COUNT_OF_THOSE = (r"\b(?:(top|best|first)\s+)?(\d+|one|two|three|four|five|six|seven|eight|nine|ten|twelve|sixteen)\s+"
                  rf"(?:({_COUNTED_NOUN})\s+)?of\s+(?:those|them|these|'?em)\b(?:\s+({_COUNTED_NOUN})\b)?")  # fmt: skip
HARDWARE_SAID = rf"\b(?:{THEM_NOUNS['gpus']}|{THEM_NOUNS['nodes']})\b"


def _count_of_those(intent: Intent, context: Context) -> str | None:
    """One question where a count points back at what nothing counted: "8 of those and seq len 2048" with no
    conversation, "launch 4 of those" or "8 trials of those" after a plan (its layouts, no GPUs of a launch or trials
    of a sweep), "top 3 of those" (the best of what was listed, no count of GPUs). Only the GPUs of the plan before
    ("now 8 of those") and of the launch just before ("make it 4 of them") are counted so."""
    lowered = intent.text.lower()
    found = re.search(COUNT_OF_THOSE, lowered)
    if found is None or re.search(HARDWARE_SAID, lowered[: found.start()]):
        return None  # no such count, or the GPUs it counts said before it ("8 h100s, 4 of them for tp")
    top, count, between, after = found.groups()
    if not top and any(noun and re.fullmatch(HARDWARE_SAID, noun) for noun in (between, after)):
        return None  # "8 of those H200 things", "2 nodes of those": what it counts, said
    counted = context.plan or context.launch if intent.command == "plan" else None
    if intent.command == "run" and context.previous == "run":
        counted = context.launch  # "make it 4 of them" after a launch: its GPUs
    if counted and not top and not (between or after):
        return None
    if top:  # the best of a list picked, which no tool does
        return (f"What should I do with {found.group(0)!r}? It picks among what was listed, which I cannot do; I "
                f"would only guess ({call_text(intent)}, {count} as a count of GPUs). Say it outright, e.g. `plan on "
                f"{count} GPUs` or `train 20 steps with dp_shard=2 on 2 GPUs`.")  # fmt: skip
    return (
        f"What does {found.group(0)!r} count? Nothing said before is counted so, and I would only guess "
        f"({call_text(intent)}). Say it outright, e.g. `plan on {count} GPUs` or `train 20 steps on 2 GPUs`."
    )


# "When you can, ...", "whenever you get a chance, ...": a politeness about the assistant's time that opens an order,
# no question ("when" asks only where a question follows it: "when can you ...?").
WHEN_YOU_CAN = (r"^\W*when(?:ever)?\s+you\s+(?:can|get\s+(?:a|the)\s+(?:chance|moment|minute|sec|second)|"
                r"have\s+(?:a|the)\s+(?:chance|moment|minute|sec|second)|have\s+time|get\s+(?:a|some)\s+time)"
                r"\s*[,;:.!-]+\s*")  # fmt: skip


# An order opened by its verb, closed by a tag that only seeks the listener's agreement: "Open a PR wi' the lr-scan
# write-up, aye?", "benchmark r1's checkpoint, ok?", "launch 2 GPUs for 20 steps, yeah?" (an order, which the approval
# of every launch and write confirms anyway; not "..., right?" or "..., no?", which check a fact, nor a cancel, which
# loses work).
ORDER_OPENING = (r"^\W*(?:(?:so|ok(?:ay)?|right|now|then|just|please)\W+)*(?:open|make|write|draft|launch|train|run|"
                 r"start|kick\s+off|fire\s+off|spin\s+up|relaunch|rerun|re-run|benchmark|bench|evaluate|eval|score|"
                 r"update|refresh|bring|resume|continue|sweep|push|file|raise|submit)\b")  # fmt: skip
AGREEMENT_TAG = r"[\s,\u2013\u2014-]+(?:aye|ok(?:ay)?|yeah|yea|alright|all\s+right|eh|yes|innit|cool)\s*\?+\s*$"
# What makes the words before the tag more than one plain order, so that the tag may check it rather than agree: a
# second clause ("..., that's slower, eh?", "..., says Bob, ok?", "File this under later: ..."), a verb of a statement
# or a subject ("Train loss went up", "Sweep's finished", "Launch on 2 GPUs is what you'd suggest", "you haven't
# already"), a choice or a wait ("... or the layouts-nov one", "evaluate whether ...", "once Ana has read it"), or the
# opening word not a verb at all ("Resume-wise, ...").
NOT_ONE_ORDER = (r"[,;:!\u2013\u2014]|\.(?!\d)|\s-\s|^\W*\w+(?:'|-)|'(?:s|re|ve|d|ll)\b|n't\b|"
                 r"\b(?:i|you|he|she|we|they|is|are|was|were|am|be|been|has|have|had|does|did|would|will|could|"
                 r"should|can|may|might|must|went|came|looks?|seems?|says?|said|wants?|thinks?|hates?|or|whether|if|"
                 r"once|when|after|until|till|before|unless|than|twice|later|already)\b")  # fmt: skip


def _order_with_tag(lowered: str) -> bool:
    """A plain order with an agreement tag (ORDER_OPENING, AGREEMENT_TAG), the message's only question: the words
    before the tag one clause opened by the order's verb, with nothing in it a tag could be checking
    (NOT_ONE_ORDER). The caller checks that the order names what it acts on."""
    tagged = re.search(AGREEMENT_TAG, lowered)
    if not tagged or not re.match(ORDER_OPENING, lowered) or lowered.count("?") != 1:
        return False
    order = lowered[: tagged.start()].strip()
    return not re.search(NOT_ONE_ORDER, order) and not re.search(ACTION_WORDS["cancel"], lowered)


def _names_its_object(intent: Intent, entities: Entities) -> bool:
    """The order names what it acts on (a run, sweep or model, or a fact of the launch): a tag on an order with
    nothing named would confirm a guess."""
    return entities.has("run", "sweep", *LAUNCH_STATED) or any(key != "experiment" for key in intent.args)


def _asks_only(plain: str, named: bool = False) -> bool:
    """A question without a request in it ("what did we train last week?", "so we ran the sweep?"): it asks about
    something, so an action that would launch, cancel or write is confirmed first, never taken."""
    lowered = re.sub(WHEN_YOU_CAN, "", plain.lower().strip())
    if named and _order_with_tag(lowered):
        return False  # "open a PR for lr-scan, aye?": an order (not "bring the docs up to date, yeah?": which sweep?)
    question = bool(re.search(ASKING, lowered)) or lowered.endswith("?")
    return question and not re.search(REQUEST, lowered) and not re.search(MAY_I_START, lowered)


# A launch the user announces as what they do now, its facts after a colon: "ok trying something bigger: 4 gpus,
# fsdp, 30 steps, lr 3e-4?", "so launching this: ..., no packing?" (a "?" right on its last value checks that value,
# as uptalk does; "(that's dp_replicate=2 right?)" checks a spelling). Only an opener that names the launch itself
# ("trying something", "going with", "launching this", "kicking off the long one"; not "running something by you",
# "trying to decide", "doing the math", "kicking off a discussion", "launching next month"), and never a question
# about doing it: one after the last value ("- too much?", "sane?", ", right?", ", no?", "ok with you?") or in
# brackets ("(should I?)", "(do we have 4?)", "(after r1's review?)", "(or 8?)").
ANNOUNCED = (r"^\W*(?:(?:ok(?:ay)?|so|right|alright|now|next|then)\W+)*(?:(?:i'?m|we'?re|i am|we are)\s+)?"
             r"(?:trying|going\s+(?:with|for)|doing|launching|running|kicking\s+off)"
             r"(?:\s+(?:something(?:\s+(?:bigger|smaller|new|else|different|longer|quick))?|it|this|that|"
             r"(?:the|a|an|this)\s+(?:[\w-]+\s+)?(?:one|run|launch|job)))?\s*:"
             r"(?P<facts>.*)$")  # fmt: skip
ASKED_AFTER = (r"\b(?:should|shall|can|could|would|will|do|does|did|is|are|was|were|what|which|how|why|whether|"
               r"if|or)\b")  # fmt: skip
# The word a "?" of uptalk sits on: a value, its unit, or a setting said on or off ("lr 3e-4?", "30 steps?", "no
# packing?", "dp_shard=4?").
UPTALK_ON = (r"(?:\d[\w.+-]*|[\w.]+=[\w.,]+|steps?|gpus?|nodes?|trials?|packing|compile|checkpointing|bf16|fp8|fp16|"
             r"fp32|ddp|fsdp|off|on)\s*\?\s*$")  # fmt: skip
# What makes a question in brackets one about the action: a word that asks, a time or condition, a judgment
# ("(should I?)", "(or 8?)", "(after r1's review?)", "(sane?)"); not a name or spelling checked ("(that's
# dp_replicate=2 right?)", "(I believe people call this tensor parallel?)").
ACTION_ASKED_ASIDE = (rf"{ASKED_AFTER}|\b(?:after|before|once|until|till|unless|when|first|later|yet|ok|okay|sane|"
                      r"safe|fine|wise|good|worth\w*|too|enough|fits?|objections?|thoughts|agree|sure|really|maybe|"
                      r"possible)\b")  # fmt: skip


# Every GPU named with no count: "launch on all of them", "across all the gpus", "use every card".
ALL_DEVICES = (r"\b(?:on|across|over|using|use|with|onto|to)\s+(?:all|every(?:\s+one)?|each)\s+(?:of\s+)?"
               r"(?:them\b|(?:the\s+|our\s+|my\s+|these\s+|those\s+|its\s+)?"
               r"(?:gpus?|cards?|devices?|accelerators?)\b)")  # fmt: skip


def _every_gpu_uncounted(plain: str, intent: Intent) -> bool:
    """Every GPU named with no count ("launch on all of them"): of which machine, or the experiment's own count?"""
    return "nproc" not in intent.args and bool(re.search(ALL_DEVICES, plain.lower()))


# A doubt of fact put after the order, as its alternative: "let's try tp=2 on 2 GPUs again, or was that the one that
# OOMed?", "open the PR, or is it merged already?" (whether to act at all is in question).
OR_DOUBT = (r"\bor\s+(?:was|is|were|are|did|does|do|has|have|had|would|will|should|could)\s+(?:that|it|this|he|she|"
            r"they|we|i|there)\b[^.!?]*\?\s*$")  # fmt: skip
# "Let's", the only request word of a cancel that ends in a question ("let's try: cancel baseline-ddp?"): a cancel
# loses work, so it asks as much as it orders ("could you cancel r1?", "please kill tp-try?" ask for it).
LETS = r"\blet'?s\b"


def _asked_beside(plain: str, command: str = "") -> bool:
    """A question about the action beside it that _asks_only misses: in an aside ("4 gpus (do we have 4?), dp_shard=4,
    30 steps"), or before the user's look at the approval prompt ("8 GPUs, ... - is that too much? I'll review it at
    the approval prompt": that look answers no question they asked first), a doubt after it (OR_DOUBT), or a cancel
    asked with "let's" alone (LETS)."""
    lowered = plain.lower().strip()
    if re.search(OR_DOUBT, lowered):
        return True
    if command == "cancel" and lowered.endswith("?") and _only_lets_requests(lowered):
        return True
    return _asked_in_brackets(plain) or ("?" in plain and bool(re.search(REVIEWED_AT_APPROVAL, lowered)))


def _only_lets_requests(lowered: str) -> bool:
    """The message's only word of a request (REQUEST) is "let's"."""
    return bool(re.search(LETS, lowered)) and not re.search(REQUEST, re.sub(LETS, " ", lowered))


def _asked_in_brackets(plain: str) -> bool:
    """A question in brackets about the action (ACTION_ASKED_ASIDE): "(should I?)", "(do we have 4?)"."""
    asides = re.findall(r"\([^()]*\)", plain.lower())
    return any("?" in aside and re.search(ACTION_ASKED_ASIDE, aside) for aside in asides)


def _announced_launch(plain: str) -> bool:
    announced = re.match(ANNOUNCED, plain.lower().strip())
    if not announced:
        return False
    facts = announced.group("facts")
    if _asked_in_brackets(facts):
        return False
    facts = re.sub(r"\([^()]*\)", " ", facts).strip()  # an aside in brackets asks nothing of me
    if re.search(ACTION_ASKED_ASIDE, facts) or "?" in facts[:-1]:
        return False
    last = re.split(r"[,;]|\s[-\u2013\u2014]+\s", facts)[-1]
    return "?" not in facts or bool(re.search(UPTALK_ON, last))


# The action named only as the event something no tool does waits on: "retire r1 after the benchmark", "archive it
# once the eval is in" ask for something after it, never for it now.
WAITED_ON = (r"\b(?:after|once|when|following|until|till)\s+(?:(?:the|its|a|an|that|this|our|my|[\w.-]+'s)\s+)?"
             r"(?:\w+\s+)?$")  # fmt: skip


def _only_waited_on(lowered: str, command: str) -> bool:
    """Whether every word of the action `command` stands right after "after the" (or its like) and what waits on it
    is no action of the tools ("open the PR after the report of lr-scan" asks for the report now, the PR after)."""
    said = list(re.finditer(ACTION_WORDS.get(command, r"(?!)"), lowered))
    others = [words for other, words in ACTION_WORDS.items() if other != command]
    waiting = any(re.search(words, lowered) for words in others)
    return bool(said) and not waiting and all(re.search(WAITED_ON, lowered[: found.start()]) for found in said)


# What holds back a launch said only by its facts, beyond mood.held_back's notions (which need the action's verb):
# a hedge ("ideally", "option B", "worst case"), a wait on someone ("pending approval from Ana", "let me check with
# Ana first", "hold that thought", "? nah"), the facts told as what is usual or was said or done ("our default is",
# "team standard is", "the paper used", "I launched ... last night", "is what I'd have done", "that's what the
# ticket says"; not "the default experiment file, 2 GPUs ...": the file to use), or a past time ("last week", "back
# in March", "an hour ago").
_HEDGED = (r"\b(?:ideal(?:ly)?|perfect world|dream\w*|option\s+\w\b|plan\s+[a-z]\b|(?:worst|best)[- ]case|maybe|"
           r"perhaps|possibly|to-?do|wish ?list|proposal|proposed|suggest\w*|pending|approv\w*|sign-?off|"
           r"check with|wait for|hold (?:that|the|this) thought|hold off|"
           r"(?:default|standard|usual|norm)\s+(?:\w+\s+)?(?:is|was|are|were)|usually|always|typically|normally|"
           r"fyi|for the record|quot\w*|wiki|ticket|paper|"
           # the past not taken: "would've been nice", "should have used 4 GPUs"
           r"(?:is|was|that'?s|this is) what|(?:would|could|should)(?: have|'ve)|i'?d have|i'd'?ve|"
           # the past of a launch ("get it started" is none)
           r"(?<!\bget it )(?<!\bget this )(?<!\bget that )(?<!\bhave it )"
           r"(?:launched|trained|started|kicked off|fired (?:off|up)|ran|did|used|went|tried))\b")  # fmt: skip
_PAST_TIME = (r"\b(?:last (?:night|week|month|quarter|year|weekend|(?:mon|tues|wednes|thurs|fri|satur|sun)day)|"
              r"yesterday|\w+ ago|this morning|earlier today|back in|in (?:january|february|march|april|may|june|"
              r"july|august|september|october|november|december))\b")  # fmt: skip
# A ticket named by its number, heading the facts ("Ticket #48290: 8 GPUs, 200 steps"), is no ticket quoted; an
# approval said given, in a sentence of its own ("Approved by the PI."), is no approval waited on.
TICKET_NUMBERED = r"\bticket\s*#?\s*\d+"
APPROVAL_GIVEN = (r"(?:^|(?<=[.;!]\s))(?:(?:already|now)\s+)?approved\s+by\s+(?:the\s+|my\s+|our\s+|their\s+)?"
                  r"[\w-]+\s*(?:[.!]\W*|$)")  # fmt: skip
# The facts quoted: "'2 GPUs, FSDP, 20 steps' is the smoke test".
_QUOTED = r"(?:^|[\s:(])['\"\u2018\u201c][^'\"\u2019\u201d]*\d[^'\"\u2019\u201d]*['\"\u2019\u201d]"


# The manner of the launch, likened to someone else's ("the way Michelson would have", "as a careful physicist would
# have done"): how to run it, no past not taken. (Not the user's own "the way I would have", "as we should have":
# a regret of theirs.)
_LIKENED = (r"\b(?:the way|as|like)\s+(?!(?:i|we|you)\b)(?:[\w.-]+\s+){1,3}?(?:would|might)(?: have|'ve)"
            r"(?:\s+(?:done|run|set up|designed)(?:\s+(?:it|this|that|one))?)?"
            r"(?=\s*(?:[,.;:!?\u2013\u2014]|$))")  # fmt: skip


# The reason given for the facts, after them: "galore_adamw because apparently that's what we do now", "4 GPUs,
# because that's what the paper used". What is usual or was done, said there, explains the order; it states none.
_REASON = r"(?:(?<=\w )|(?<=, ))(?:because|'?cause|cuz)\b[^.;:!?]*"


# "4 GPUs FSDP 40 steps? nah": the facts said, then waved off ("nope, 25 steps" corrects a launch before instead)
_NAH_AFTER = r"\w.*\b(?:nah|nope)\W*$"


def _takes_back_this(lowered: str) -> bool:
    """A take-back of what the message says: not one that opens it before the facts it asks instead ("wait no. same
    thing but without AC", "never mind, 2 GPUs then": the turn before taken back)."""
    return any(re.search(r"\w", lowered[: found.start()]) or not re.search(r"\w", lowered[found.end() :])
               for found in re.finditer(TAKE_BACK, lowered))  # fmt: skip


# The user's own look at the call at the approval every launch goes through: "I will review the consequences at the
# approval prompt", "we'll check it at the confirmation step", "I'll look it over when you ask me to approve" (the
# assistant's own gate, no launch put off nor approval waited on).
REVIEWED_AT_APPROVAL = (r"\b(?:i|we)\s*(?:'ll|will|shall|can|'m going to|am going to|are going to)\s+(?:\w+\s+){1,5}?"
                        r"(?:(?:at|in|on|during)\s+(?:the\s+|your\s+)?(?:approval|confirmation)(?:\s+(?:prompt|step|"
                        r"stage|screen|dialog|request))?|when\s+you\s+ask\s+(?:me|us)\s+to\s+(?:approve|confirm))"
                        r"(?=\s*(?:[.;!,]|$))")  # fmt: skip


# A sentence of its own that tells how a run went wrong, with no fact of a launch in it: "tp-try ran out of memory like
# that." before "can you do the same but without packing?" (why the change is asked, no launch told as done; one
# with its facts, "I ran 4 GPUs for 20 steps and it crashed", still tells one).
FAILURE_TOLD = (r"(?:^|(?<=[.!?;]\s))[^.!?;\d=]*\b(?:ran out of memory|oom'?(?:ed|'d|d)?|went oom|crashed|diverged|"
                r"blew up|died|failed|broke)\b[^.!?;\d=]*[.!;]")  # fmt: skip


def _unordered_launch(lowered: str, entities: Entities) -> str | None:
    """Why a launch the sentence states only by its facts, with no launch verb ("4 GPUs, FSDP, 40 steps"), is no
    order for now, or None when nothing holds it back. With a launch verb, mood.held_back decides alone."""
    if launch_verb(masked(lowered, entities)):
        return None
    # the user's own look at the approval prompt: no wait (blanked, so that the facts' spans still fit)
    lowered = re.sub(REVIEWED_AT_APPROVAL, lambda found: " " * len(found.group(0)), lowered)
    if _takes_back_this(lowered) or re.search(_NAH_AFTER, lowered):
        return "taken back"
    if re.search(SUPPOSED, lowered):
        return "supposed"
    if conditional(lowered, ACTION_WORDS["run"], "run"):
        return "conditional"
    own_intent = re.search(OWN_INTENT, without_own_approval(lowered))  # "I'll approve one run: ...": an order
    if re.search(LATER, lowered) or re.search(WAITS_ON, without_notices(lowered)) or own_intent:
        return "deferred"
    stated = _from_last_facts(lowered, entities)  # "r1 ran on 2 gpus; double that on 4": the past is r1's
    stated = re.sub(_REASON, " ", stated)  # "..., because apparently that's what we do now": why, not what was done
    stated = re.sub(FAILURE_TOLD, " ", stated)  # "tp-try ran out of memory like that. ...": why, no launch told
    stated = re.sub(RUN_WANTED_GOING, " ", stated)  # "I'd like a run launched on 2 GPUs": wanted, no past launch
    stated = re.sub(YOUR_APPROVAL, " ", stated)  # "subject to your approval": the gate every launch goes through
    stated = without_own_approval(stated)  # "I'll approve one run, capped: ...": the user's own, given with it
    stated = re.sub(_LIKENED, " ", stated)  # "the way Michelson would have": how, not a past not taken
    stated = re.sub(APPROVAL_GIVEN, " ", re.sub(TICKET_NUMBERED, " ", stated))
    if re.search(MAY_I, lowered) or re.search(_HEDGED, stated) or re.search(_PAST_TIME, stated):
        return "asked"
    return "asked" if re.search(_QUOTED, stated) else None


_WEEKDAY = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
# A launch of what was said somewhere the parser cannot read: "launch the run from the briefing on 4 GPUs", "rerun
# what we talked about at standup", "as discussed at the sync" (only the change said here is known; the rest would be
# the defaults, never what was meant).
_MEETING = r"(?:briefing|stand-?up|meeting|sync|call|huddle|retro|review|discussion|chat|slack|thread)"
SAID_ELSEWHERE = (rf"\b(?:run|one|config|setup|experiment|plan)s?\s+(?:\w+\s+){{0,3}}?(?:from|at|in|during)\s+"
                  rf"(?:the\s+|our\s+|today'?s\s+|yesterday'?s\s+|this morning'?s\s+|(?:last\s+)?{_WEEKDAY}'?s\s+|"
                  rf"last (?:week|month)'?s\s+)?{_MEETING}\b|"
                  # "launch what Dana described in standup": someone's words not in this conversation
                  r"\bwhat (?:we|you|they|he|she|[a-z]+) (?:talked about|discussed|agreed(?: on)?|said|decided|"
                  r"described|mentioned|proposed|suggested|outlined|presented)\b|"
                  rf"\bas (?:discussed|agreed|decided)(?:\s+(?:at|in|during)\s+(?:the\s+)?{_MEETING})?\b")  # fmt: skip


# What a request points at without saying it, that neither this conversation nor the repository holds: a thing only
# a talk knows ("the Optimierung we discussed yesterday", "the two I mentioned to my editor"), a judgement no file
# records ("the previous known-good layout"), a version or a place only described ("the big-model version of this",
# "on the new cluster"), or one of several left unsaid ("one of our sweeps"). Acting would fill it with defaults or
# the latest run: asked, naming the best reading.
_TALKED = (
    r"(?:discuss(?:ed)?|mention(?:ed)?|talked\s+about|spoke\s+about|agreed(?:\s+(?:on|upon))?|settled\s+on|"
    r"decided\s+on|aligned\s+on|landed\s+on|came\s+up\s+with|went\s+over|promised|told\s+\w+\s+about)"
)
_SETTING = r"(?:layout|config\w*|setup|set-up|settings?|version|state|recipe|one)"
# Someone else, whose run or config the repository does not mark as theirs.
_OTHER_PERSON = (r"(?:colleague|co-?worker|teammate|team-mate|labmate|lab-mate|friend|boss|advisor|adviser|supervisor|"
                 r"manager|lead|mentor|intern|officemate)s?")  # fmt: skip
_THING = r"(?:runs?|sweeps?|jobs?|one|config\w*|setup|experiments?|settings?)"
# A past time that alone tells which one ("last month", "two weeks ago", "over the weekend", "on Tuesday").
_WHEN_DONE = (rf"(?:last\s+(?:week|month|year|quarter|{_WEEKDAY})|(?:a|one|two|three|four|a few|a couple of|\d+)\s+"
              rf"(?:days?|weeks?|months?|years?)\s+ago|over\s+the\s+(?:last\s+)?weekend|on\s+{_WEEKDAY}|"
              rf"(?:in|back in)\s+(?:january|february|march|april|may|june|july|august|september|october|november|"
              rf"december))")  # fmt: skip
# A text outside the repository the settings come from.
_OUTSIDE = (r"(?:paper|preprint|article|blog(?:\s+post)?|post|tweet|thread|slides?|slide\s+deck|deck|e-?mail|talk|"
            r"presentation|tutorial|book|textbook|video|podcast|lecture)")  # fmt: skip
POINTED_AT = (
    rf"\b(?:the|those|these|that|this)\s+(?:[\w'-]+\s+){{1,3}}?(?:that\s+|which\s+)?(?:we|i|you|they|you and i)\s+"
    rf"(?:(?:had|have|has|just|already)\s+)?{_TALKED}\b|"
    rf"\b(?:the|our|my)\s+(?:(?:previous|last|latest|old|earlier)\s+)?(?:known[\s-]+good|good|working|stable)\s+"
    rf"{_SETTING}\b|"
    r"\bthe\s+(?:[\w-]+\s+){0,2}?version\s+of\s+(?:this|that|it)\b|"
    r"\bthe\s+(?:big|bigger|large|larger|huge|small|smaller|new|newer|improved|optimi[sz]ed|fixed|final|full)"
    r"(?:[\s-]+model)?[\s-]+version\b|"
    r"\b(?:the|our|that)\s+(?:new|other|bigger|big|next|shiny)\s+(?:cluster|partition|machines?|nodes|box|"
    r"servers?)\b|"
    r"\b(?:one|either|any|some|a\s+couple|\d+)\s+of\s+(?:our|the|my|these|those)\s+(?:\w+\s+)?(?:runs|sweeps|"
    r"configs|configurations|experiments|checkpoints)\b|"
    # written down outside the repository: "the settings from the paper", "the recipe from the blog post"
    rf"\b(?:{_SETTING}|recipe|hyper-?parameters?|hparams|values|numbers)s?\s+(?:\w+\s+){{0,2}}?(?:from|in|of)\s+"
    rf"(?:the|that|this|our|their|his|her|[a-z]+'s)\s+(?:[\w-]+\s+)?{_OUTSIDE}\b|"
    # someone else's, which the repository does not tell apart: "my colleague's run", "the sweep of my teammate"
    rf"\b(?:(?:my|our|a)\s+{_OTHER_PERSON}'s|the\s+{_OTHER_PERSON}'s)\s+(?:[\w-]+\s+)?{_THING}\b|"
    rf"\bthe\s+(?:[\w-]+\s+)?{_THING}\s+(?:of|from|by)\s+(?:my|our|a)\s+{_OTHER_PERSON}\b|"
    # someone else knows which: "whatever sweep is newest, Ana knows which"
    r"\b(?!(?:who|nobody|no one|god)\b)[a-z]+\s+knows\s+which(?:\s+one)?(?=\s*(?:[,.;:!?)]|$))"
)
# Known only by when it was done: "the one that worked last month", "the report we wrote last week" (a choice the
# repository offers, "the one that worked", is no answer: no file records what was done when).
POINTED_BY_TIME = (
    rf"\bthe\s+(?:[\w-]+\s+){{0,2}}?(?:one|run|job|report|write-?up|sweep|{_SETTING})s?\s+"
    rf"(?:that\s+|which\s+)?(?:(?:we|i|you|they|he|she)\s+)?(?:[\w'-]+\s+){{1,3}}?{_WHEN_DONE}\b|"
    # a model only by when it was made: "the viral model from last week", "the checkpoint we saved on Tuesday" (not
    # "spreading the model across GPUs last month", where the time tells when something else was done)
    rf"\bthe\s+(?:[\w-]+\s+){{0,2}}?(?:model|checkpoint)s?\s+(?:(?:from|of)\s+|(?:that\s+|which\s+)?"
    rf"(?:we|i|you|they|he|she)\s+(?:[\w'-]+\s+){{1,2}}?){_WHEN_DONE}\b|"
    # or made by someone named, in a relative clause ("the checkpoint that Dana trained last week", Patois "di
    # checkpoint weh Dana train last week"): no file records who trained what when
    rf"\b(?:the|di)\s+(?:[\w-]+\s+){{0,2}}?(?:model|checkpoint)s?\s+(?:that|which|weh|wey|dat)\s+"
    rf"(?:[\w'-]+\s+){{2,3}}?{_WHEN_DONE}\b|"
    # "the same as yesterday", "the same one from last week": what was done then, no run of the repository
    rf"\bthe\s+same\s+(?:[\w-]+\s+)?(?:as|of|from)\s+(?:yesterday|last\s+night|{_WHEN_DONE})\b"
)
# What points at an earlier turn ("the one of before", "the previous layout", "the other configuration"): held by a
# conversation that has one, asked about in one that has none.
POINTED_BEFORE = (rf"\bthe\s+{_SETTING}\s+(?:of|from)\s+before\b|\bthe\s+(?:previous|earlier|old)\s+{_SETTING}\b|"
                  r"\bthe\s+other\s+(?:config\w*|setup|settings?|layout)\b")  # fmt: skip


def _pointed_at(plain: str, intent: Intent, entities: Entities, context: Context) -> str | None:
    """The words of what the request depends on but only points at (POINTED_AT, POINTED_BEFORE), where the
    conversation and the repository do not hold it; None where a run, sweep, file, model or the values are named."""
    lowered = plain.lower()
    dated = re.search(POINTED_BY_TIME, lowered)
    if dated and not entities.has("run", "sweep", "file", "checkpoint", "model"):
        return dated.group(0)
    named = entities.has("run", "sweep", "file", "checkpoint", "model", "run_choice", "sweep_choice")
    if named or any(v != "meshpilot.yaml" for v in entities.all("experiment")):
        return None
    found = re.search(POINTED_AT, lowered)
    if found is None and not _earlier_taken(intent, context):
        found = re.search(POINTED_BEFORE, lowered)
    if found is None or re.match(SPELLED_OUT, lowered[found.end() :]):
        return None  # "the settings we agreed on: lr 3e-4, 20 steps": said here
    return found.group(0)


def _pointed_question(plain: str, intent: Intent, entities: Entities, context: Context) -> str | None:
    """One question naming the best reading where the request only points at what it depends on (_pointed_at)."""
    if not (pointed := _pointed_at(plain, intent, entities, context)):
        return None
    runs, sweeps = ", ".join(context.known.runs) or "none", ", ".join(context.known.sweeps) or "none"
    return (f"Which do you mean by {pointed!r}? Neither this conversation nor the repository says, so I have done "
            f"nothing: name the run, sweep or config file, or say the values (runs: {runs}; sweeps: {sweeps}). So far "
            f"I read {call_text(intent)}.")  # fmt: skip


def _earlier_taken(intent: Intent, context: Context) -> bool:
    """Whether the conversation holds the earlier turn pointed at and the call takes it: a launch keeps the launch
    before's experiment, processes and layout ("relaunch with the previous layout"), never only the one value said
    ("start it with the previous settings, 40 steps" that kept none of them)."""
    if intent.command != "run":
        return bool(context.calls or context.previous_text)
    launch = context.launch or {}
    return bool(launch) and all(key in intent.args for key in ("experiment", "nproc", "layout") if key in launch)


# A move to another experiment file, said right after a sweep: "switch to configs/long.yaml", "use long.yaml instead".
MOVE_TO_FILE = (r"\b(?:switch\w*|swap\w*|chang(?:e|es|ed|ing)|mov(?:e|es|ed|ing)|us(?:e|es|ed|ing)|tr(?:y|ies|ying)|"
                r"go(?:es|ing)?\s+with)\b")  # fmt: skip


# The move asked, then answered no: "switch to configs/long.yaml? hmm, maybe not".
MOVE_ANSWERED_NO = (rf"{MOVE_TO_FILE}(?:[^.!?;]|\.(?=\w))*\?\s*(?:(?:hmm+|well|actually)\W+)*"
                    r"(?:maybe not|probably not|no|nah|nope|not really|better not)\b"
                    r"(?!\s+(?:wait|sorry)\b)")  # fmt: skip


# The move someone else said: "Sam says use configs/long.yaml instead" (not the user's own "I said use ...").
MOVE_RELAYED = (
    rf"\b(?!(?:i|we)\b)[a-z]+\s+(?:says|said|thinks|suggests|suggested)\s+(?:to\s+|we\s+should\s+)?{MOVE_TO_FILE}"
)


def _sweep_move_held(plain: str, intent: Intent, entities: Entities, context: Context) -> str | None:
    """Right after a sweep, a move to an experiment file that the sentence negates, puts off, makes conditional or
    relays ("no, don't switch to configs/long.yaml", "use configs/long.yaml, subject to Ana's OK"): no reading of the
    file, nor the sweep on it, is asked for. One question naming the sweep on it, or None."""
    lowered = plain.lower()
    named = [str(v) for kind in ("file", "experiment") for v in entities.all(kind)]
    files = [v for v in named if v.endswith((".yaml", ".yml"))]
    if context.previous != "sweep" or len(set(files)) != 1 or not re.search(MOVE_TO_FILE, lowered):
        return None
    if intent.command in ACTIONS and held_back(lowered, intent.command):
        return None  # held back on its own words: that question is asked
    why = held_back(lowered, "sweep", MOVE_TO_FILE)
    if why is None and re.search(MOVE_ANSWERED_NO, lowered):
        why = "taken back"
    if why is None and re.search(MOVE_RELAYED, lowered):
        why = "asked"
    before = context.last("run_sweep")
    trials = before.args.get("trials") if before else None  # the sweep before's, kept as a move keeps them
    call = f"/sweep experiment={files[0]}" + (f", trials={trials}" if trials else "")
    return held_back_question(why, call, "sweep") if why else None


def _run_wish_held(plain: str, entities: Entities) -> str | None:
    """Why a run wished for ("I don't want a run launched on 8 GPUs", "would I like a run launched on 8 GPUs? not
    really"), read as a plan of its GPUs where the launch is held back, is no request for that plan either: the
    sentence is about the launch. None where a model is named (a plan asked beside it)."""
    lowered = plain.lower()
    if entities.has("model") or not re.search(WISHED_RUN, lowered):
        return None
    return held_back(lowered, "run")


LAUNCH_FACTS = ("steps", "nproc", "devices", "layout")


def _from_last_facts(lowered: str, entities: Entities) -> str:
    """The sentence from the start of the last one (of those split by a full stop, semicolon or exclamation) that
    states a launch's facts: an earlier one may tell what another run did."""
    starts = [e.span[0] for e in entities.found if e.kind in LAUNCH_FACTS and e.span != (0, 0)]
    if not starts:
        return lowered
    bounds = [found.end() for found in re.finditer(r";|!|\.(?!\w)", lowered[: max(starts)])]
    return lowered[bounds[-1] if bounds else 0 :]


# A question only a benchmark answers: "how good is r1's checkpoint on our benchmarks?", "what does r1 score on eval?"
BENCH_QUESTION = (r"\bhow (?:good|well|accurate)\b|\bwhat (?:score|accuracy)\b|\bscores?\b|\bhow (?:(?:does|do|did|"
                  r"would|will) )?(?:\S+\s+){1,3}?(?:do|does|score\w*|perform\w*|fare\w*|stacks? up|"
                  r"measures? up)\b")  # fmt: skip


# Scores told as already there, which a question checks: "benchmark scores for r1 came back already, yeah?" (no new
# measurement asked for).
SCORES_IN = (r"\b(?:came|come|coming)\s+back\b|\b(?:are|were|is|was)\s+(?:in|back|out|ready|done|up)\b|\balready\b|"
             r"\barrived\b|\blanded\b")  # fmt: skip


POSSIBLE_LAUNCH = POSSIBLE_TO + r"\s+(?:launch|start|kick off|fire off|fire up|begin)\b"


# A request put as whether it is fine to act, as "would it be possible to" puts one: "would it be reasonable, then, to
# evaluate its checkpoint?" (for a tool that writes or measures, as POSSIBLE_TO; "would it be wise to" asks advice).
FINE_TO = (r"\b(?:would|will|is)\s+(?:it|that)\s+be\s+(?:reasonable|ok|okay|alright|all right|fine|acceptable)"
           r"(?:\s*,\s*(?:then|now|perhaps|please)\s*,)?\s+(?:for you\s+)?to\b")  # fmt: skip


WRITES_REPOSITORY = ("pr", "docs")


def _requested(intent: Intent, plain: str) -> bool:
    """A question that asks for its action: one answered by the action's measurement, or "is it possible to
    benchmark r1?" for a tool that writes or measures (intents.POSSIBLE_TO)."""
    possible = intent.command not in NOT_BY_POSSIBLE and bool(
        re.search(POSSIBLE_TO, plain.lower())
        # whether it is fine to write to the repository (a PR, the docs) is asked back, as for a launch
        or (intent.command not in WRITES_REPOSITORY and re.search(FINE_TO, plain.lower()))
    )
    # a launch asked for as a possibility with its own verb ("is it possible to launch ..."), not "possible to run X
    # on 4 GPUs?" (whether it fits: a plan's question)
    possible = possible or (intent.command in ("run", "sweep") and bool(re.search(POSSIBLE_LAUNCH, plain.lower())))
    return possible or _measured_by(intent, plain)


def _measured_by(intent: Intent, plain: str) -> bool:
    """A question whose answer is the action's measurement (a benchmark's scores): asking it asks for the action."""
    lowered = plain.lower()
    return (intent.command == "bench" and "model" in intent.args and bool(re.search(BENCH_QUESTION, lowered))
            and not re.search(SCORES_IN, lowered))  # fmt: skip


NAMED_TOOLS = ("results", "status", "cancel", "bench", "trials", "report", "pr", "docs", "compare", "resume")
# Words shaped like a run's or sweep's name ("r9", "exp-3", "runs/old") that are something else.
NOT_A_NAME = (
    r"^(?:[ahl]\d+\w*|rtx-?\d+|\d+\w*|(?:llama|mistral|qwen|gemma|smollm|mixtral)[\w.-]*|nvidia-smi|step[_-]\d+|"
    r"fp\d+|bf16|e-\d+|\d+(?:\.\d+)?e-\d+|x\d+|held-out|hold-out|dp_\w+|tp|pp|cp|re-run|w/o|a100-\w+|h100-\w+|non-\w+|built-in|in-house|up-to-date|"
    r"follow-up|write-up|one-pager|what-if|so-called|\w+-wise|e\.g|i\.e|"
    r"q[1-4]|fy\d+|"  # a quarter or a fiscal year ("for the Q3 deck"), no run's name
    r"(?:sign|hand|check|roll|print|read)-(?:offs?|ins?|outs?|throughs?)|"  # "for sign-off", "a roll-out": words
    # meetings and events ("before the all-hands", "at the stand-up", "after the off-site"): times, no run's name
    r"all-hands?|stand-ups?|town-halls?|off-sites?|on-sites?|one-on-ones?|1-on-1s?|sync-ups?|kick-offs?|catch-ups?|"
    r"check-ins?|wrap-ups?|deep-dives?|brown-bags?|lunch-and-learns?|show-and-tells?|q-and-a|go-lives?|"
    # business idioms ("double-click on the lr sweep", "a drill-down", "our north-star"): words, no run's name
    r"double-click(?:s|ed|ing)?|drill-downs?|level-sets?|north-stars?|game-changers?|best-in-class|end-to-end|"
    r"high-level|top-line|bottom-line|long-term|short-term|low-hanging|deep-dive[sd]?|follow-ups?|"
    # a unit or a share said as a compound ("per-device memory", "to basis-point precision", "mixed-precision")
    r"per-\w+|\w+-points?|(?:mixed|half|full|single|double)-precision|"
    # a rate said as a compound ("the tokens-per-second figure", "samples-per-gpu"): a figure, no run's name
    r"\w+-per-\w+|"
    # a check said as a compound verb ("please double-check against that sweep", "cross-checked"): no run's name
    r"(?:double|cross|fact|sanity|spot|re)-check\w*|"
    # a point in a job's course ("preempted mid-tourney", "died mid-epoch", "stopped half-way"): when, no run's name
    r"mid-\w+|half-way|part-way|"
    r"\w+-(?:ready|based|like|level|style|friendly|only|free|heavy|bound|aware|sized|related|specific))$"
)


def _unknown_name(plain: str, entities: Entities, context: Context, intent: Intent) -> str | None:
    """A question when the sentence (or the turn before, for "it") names a run or sweep the repository does not
    have: never the latest instead."""
    if context.known.root is None:
        return None
    lowered = masked(plain.lower(), entities)
    # ("#ml-infra" is a chat's channel, "@jan" a person: no names of runs)
    said = re.finditer(r"(?<![\w/.=#@-])((?:runs|sweeps)/[\w.-]+|[a-z]+\d+[a-z0-9]*|[a-z0-9]+(?:-[a-z0-9]+)+)"
                       r"(?![\w/=])", lowered)  # fmt: skip
    known = {*context.known.runs, *context.known.sweeps}
    one_named = any(str(v) in known for v in [*entities.all("run"), *entities.all("sweep")])
    named = [m.group(1) for m in said if not (one_named and _a_word_beside_a_name(m, lowered))]
    unknown = [n for n in named if not re.match(NOT_A_NAME, n.split("/")[-1]) and n not in KNOWN_WORDS]
    unknown += [str(v) for v in [*entities.all("run"), *entities.all("sweep")] if str(v) not in known]
    unknown += [str(v) for v in entities.all("unknown_name")]  # "tp-try-2": masked above, as a name is
    taken = [str(intent.args[k]) for k in ("run", "sweep") if isinstance(intent.args.get(k), str)]
    unknown += [t for t in taken if t not in known and t.startswith(("runs/", "sweeps/"))]
    if not unknown:
        return None
    runs = ", ".join(context.known.runs) or "none"
    sweeps = ", ".join(context.known.sweeps) or "none"
    return f"I find no run or sweep named {unknown[0]!r} here (runs: {runs}; sweeps: {sweeps}). Which do you mean?"


# Where an unknown word stands in a name's place: after what introduces a run or joins one name to another ("the
# run old-base", "r1 vs old-base", "the loss of old-base"), or before a run's noun, "one" or possessive ("old-base's").
NAME_BEFORE = (r"(?:\b(?:runs?|sweeps?|named|called|and|or|vs\.?|versus|with|against|than|to|from|between|of|for|on|"
               r"in)|[,&])\s*(?:the\s+)?$")  # fmt: skip
NAME_AFTER = r"^(?:'s\b|\s*(?:runs?|sweeps?|ones?|and|or|vs\.?|versus|,|&)(?!\w))"


def _a_word_beside_a_name(found: re.Match, lowered: str) -> bool:
    """Whether a hyphenated word the repository lacks is a plain word in a sentence that names a real run or sweep
    ("our baseline-ddp run is basically the vsync-on reference capture"): not where a name stands (NAME_BEFORE,
    NAME_AFTER), where it is asked about as a name."""
    if "-" not in found.group(1) or "/" in found.group(1):
        return False
    return not (re.search(NAME_BEFORE, lowered[: found.start()]) or re.match(NAME_AFTER, lowered[found.end() :]))


def _excluded_taken(intent: Intent, entities: Entities, context: Context) -> str | None:
    """A question when the sentence says which run or sweep it does not mean and the call would take that one, or,
    naming no other, the latest in its place (which may be the one excluded): never the one the user ruled out."""
    for kind in ("run", "sweep"):
        choices = [path for choice in entities.all(f"not_{kind}_choice") for path in choice]
        excluded = [str(v) for v in [*entities.all(f"not_{kind}"), *choices]]
        if not excluded:
            continue
        taken = intent.args.get(kind) or (intent.args.get("model") if kind == "run" else None)
        named = entities.has(kind, f"{kind}_choice") or re.search(LATEST_WORDS, intent.text.lower())  # "the newest"
        if str(taken).split("/checkpoint")[0] in excluded or (not named and intent.command in NAMED_TOOLS):
            others = [p for p in (context.known.runs if kind == "run" else context.known.sweeps) if p not in excluded]
            return f"Which {kind} do you mean, if not {' or '.join(excluded)}? ({', '.join(others) or 'none'})"
    return None


KNOWN_WORDS = {"tok/s", "step20"}
GREETING = r"^\W*(?:hi|hello|hey|help|thanks|thank you)\W*$|\bhelp\b|\bwhat can you do\b|\bcommands\b"
EXAMPLES = {
    "plan": "plan layouts, e.g. `plan llama-3.1-8b on 8 H100s`",
    "run": "train, e.g. `train 20 steps with dp_shard=2 on 2 GPUs`",
    "results": "read a run's results, e.g. `loss and tokens/s of the latest run`",
    "status": "check a run, e.g. `is the latest run done?`",
    "runs": "list the runs",
    "trials": "read a sweep, e.g. `who won the latest sweep?`",
    "read": "show a file, e.g. `show meshpilot.yaml`",
    "hardware": "see this machine's hardware",
}


def _unsure(best: list[tuple[str, float]]) -> str:
    """The question for a sentence no intent reads: the closest reading first, else the main things I do."""
    guess = next((name for name, value in best if value > 0 and name in EXAMPLES), None)
    if guess:
        return f"I am not sure what you want. Do you want me to {EXAMPLES[guess]}? (/help lists what I understand)"
    some = "; ".join(EXAMPLES[k] for k in ("plan", "run", "results", "runs"))
    return f"I am not sure what you want. Do you want me to {some}? (/help lists what I understand)"


LAUNCH_ONLY = ("steps", "switch", "optimizer", "override")  # facts only a launch takes


def _launch_close(scores: dict[str, float], entities: Entities) -> bool:
    """A plan read where a launch scores close and the sentence states what only a launch takes ("could you kick the
    tires on the long config? 5 steps, 2 gpus, ddp"): a plan would drop them, so which is meant is asked."""
    return bool(_launch_facts(entities)) and scores.get("run", 0) > 0 and scores["plan"] - scores["run"] < 2 * CLOSE


def _launch_facts(entities: Entities) -> list[str]:
    """What the sentence states that only a launch takes (a sequence length is a plan's too)."""
    found = [e for e in sorted(entities.found, key=lambda e: e.span) if e.kind in LAUNCH_ONLY]
    return [f"{e.kind}={e.value}" for e in found if not re.search(r"seq|context", str(e.value))]


def _close_call(intent: Intent, best: list[tuple[str, float]], entities: Entities) -> str | None:
    """One question naming the best reading when a second action scores close to it."""
    (first, top), (second, runner_up) = best[0], best[1]
    if first not in ACTIONS or second not in ACTIONS or top - runner_up >= CLOSE or runner_up <= 0:
        return None
    reading = (
        launch_text(intent.args)
        if first == "run"
        else f"/{intent.command} " + " ".join(f"{k}={v}" for k, v in intent.args.items() if k != "set")
    )
    return f"Do you want me to {first} ({reading.strip()}) or to {second}? yes / edit"


# A launch's own noun with the word of where it runs, said as what to start ("submit the batch job on 4 processors"):
# the launch asked for, no run on disk described (not "relaunch the batch job": one started before).
LAUNCH_NOUN = (r"\b(?:submit|start|launch|kick off|fire off|queue|run|begin|create|spin up)\s+"
               r"(?:the|a|my|our)\s+(?:batch|cluster|slurm|compute)\s+(?:job|run)\b")  # fmt: skip
# A run defined by the sentence that names it: "the approved run is 2 GPUs with FSDP for 20 steps" (not "the fsdp run
# is 2 hours old": no fact of a launch).
DEFINED_AS = (r"\s*(?:(?:is|will be|should be|would be|must be)\s*:?|[:=])\s*(?:[\w-]+\s+){0,3}?"
              r"\d+\s*(?:x\s*)?(?:gpus?|steps?|nodes?|process(?:es)?|procs?|devices?|cards?)\b")  # fmt: skip


def _the_launch_itself(described: str, lowered: str) -> bool:
    """Whether a launch's description that fits no run here is the launch the sentence asks for: said as its
    noun, or defined in the sentence by the launch's facts."""
    if re.search(LAUNCH_NOUN, lowered) and re.search(rf"\b{re.escape(described)}", lowered):
        return bool(re.fullmatch(r"(?:the|a|my|our)\s+(?:batch|cluster|slurm|compute)\s+(?:job|run)", described))
    return bool(re.search(rf"\b{re.escape(described)}{DEFINED_AS}", lowered))


# The tools that take a sweep and no run: "the aforementioned run" is none of theirs.
SWEEP_TAKERS = ("docs", "report", "pr", "trials")


def _named_before(described: str, intent: Intent, context: Context) -> bool:
    """Whether a description only points back at the one the conversation named ("the aforementioned sweep"); with
    two sweeps said, or a run pointed at for a tool that takes a sweep, which is unsaid (asked)."""
    pointed = re.fullmatch(ALREADY_NAMED, described)
    if pointed is None:
        return False
    one_sweep = len(sweeps_said(context)) == 1
    if pointed.group(1) == "sweep" or intent.command in SWEEP_TAKERS:
        return one_sweep and pointed.group(1) in ("sweep", "one", "experiment")
    return bool(context.run) or one_sweep


def _pointed_back_unclear(described: str, intent: Intent, context: Context) -> str | None:
    """The question for "the said sweep" where the conversation named two sweeps or none, or for "the aforementioned
    run" given to a tool that takes a sweep."""
    pointed = re.fullmatch(ALREADY_NAMED, described)
    if pointed is None or (pointed.group(1) != "sweep" and intent.command not in SWEEP_TAKERS):
        return None
    sweeps = ", ".join(context.known.sweeps) or "none"
    if pointed.group(1) in ("run", "job"):
        return f"That takes a sweep, and {described!r} is a run: which sweep do you mean? ({sweeps})"
    said = sweeps_said(context)
    told = " and ".join(said) if len(said) > 1 else "no sweep"
    return f"Which sweep do you mean by {described!r}? The conversation named {told} (sweeps here: {sweeps})."


# A JSON pair the normaliser left as said (normalise.JSON_PAIR): its key is none the parser knows.
UNKNOWN_JSON_KEY = r'"([A-Za-z_][\w.-]*)"\s*:'


def _unknown_json_key(plain: str, intent: Intent) -> str | None:
    """One question where a setting written as JSON has a key the parser does not know: never dropped."""
    if not (found := re.search(UNKNOWN_JSON_KEY, plain)):
        return None
    return (f"I do not know the setting {found.group(1)!r}: which key of the experiment is it (e.g. `train.lr`, "
            f"`data.packing`)? I would call {call_text(intent)} without it.")  # fmt: skip


# A fit to be checked before anything runs: "check it fits first", "make sure it fits before you launch".
FITS_FIRST = (r"\b(?:check|see|verify|make\s+sure|confirm|ensure)\s+(?:that\s+|whether\s+|if\s+)?"
              r"(?:it|this|that|everything|the\s+\w+)\s+(?:fits|will\s+fit|would\s+fit|can\s+fit)\b")  # fmt: skip
# Digits said radio-style ("five-zero", "one-zero-two-four"), as typed; and a hedge around a value ("or was it",
# "maybe", "-ish", a question mark).
RADIO_SAID = r"(?<![\w-])(?:one|two|three|four|five|six|seven|eight|nine)(?:-(?:zero|one|two|three|four|five|six|seven|eight|nine))+(?![\w-])"  # noqa: E501
RADIO_HEDGE = r"\bor\s+was\s+it\b|\bmaybe\b|\bor\s+so\b|-ish\b|\bi\s+think\b|\?"


def _radio_doubt(intent: Intent) -> str | None:
    """One question where digits said radio-style are too many to be sure of (a figure of five digits or more:
    "steps one-zero-zero-zero-zero-zero-zero") or hedged ("four-zero... or was it eight-zero gig"): a slip of one
    word is a value ten times off."""
    text = intent.text.lower()
    said = [m.group(0) for m in re.finditer(RADIO_SAID, text) if "zero" in m.group(0)]
    if not said:
        return None
    # a sweep's trials run one by one, so four digits of them (1000) already cost too much to take on one slip
    least = 3 if intent.command == "sweep" else 4
    long = [s for s in said if s.count("-") >= least]
    if not long and not re.search(RADIO_HEDGE, text):
        return None
    figures = ", ".join(f"{s!r} as {''.join('0' if w == 'zero' else str(UNITS[w]) for w in s.split('-'))}"
                        for s in (long or said))  # fmt: skip
    return (f"Did I read your digits right ({figures})? Say the value in figures, e.g. `100`. I would call "
            f"{call_text(intent)}.")  # fmt: skip


# Radio digits no one says for a figure: a leading zero ("zero-two", "micro batch zero-four") or a tens word before
# "zero" ("ten-zero"); each reads as two things (ZeRO-2 and 2; 10 and 100), so the value is asked, never guessed
ODD_RADIO = (r"(?<![\w-])(?:zero(?:-(?:zero|one|two|three|four|five|six|seven|eight|nine))+"
             r"|(?:ten|eleven|twelve|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety)-zero)"
             r"(?![\w-])")  # fmt: skip
# "steps 120 minus the warmup": a count less another is arithmetic, not the warmup turned off
LESS_THE = (r"(?:\d|\b(?:zero|one|two|three|four|five|six|seven|eight|nine|ten|hundred|thousand))\s+(?:steps?\s+)?"
            r"(?:minus|less)\s+(?:the\s+)?warm-?\s?ups?\b")  # fmt: skip
# "equipment check, then launch": a check of the machine asked before the action (not one that already passed)
CHECK_FIRST = (r"\b(?:equipment|hardware|gpu|device|machine|node)\s+(?:check|inspection)\b[^.;]{0,12}?"
               r"\b(?:then|first|before)\b")  # fmt: skip
# "a PR, no report": the PR writes the report, so the two wishes cannot both hold
NO_REPORT = (r"\b(?:no|without(?:\s+(?:a|the))?|skip(?:\s+the)?)\s+(?:write-?\s?up|report)s?\b"
             r"(?!\s+(?:is\s+)?(?:needed|required|necessary))")  # fmt: skip
# "write it up and get a PR open": a PR asked for beside the report, with no "not"/"no" anywhere that could undo it
PR_WANTED = (r"\b(?:get|open|make|create|file|raise|send)\s+(?:a\s+|the\s+)?(?:pr|pull\s+request)\b"
             r"|\b(?:pr|pull\s+request)\s+(?:open|up)\b")  # fmt: skip
# ("ain't got all day" is haste, not a "not")
ANY_NO = r"\b(?:not|no|never|without|don't|dont|won't|shouldn't|needn't|mat|nicht|instead|after|later|once|maybe|or)\b"


# Tagalog function words: a Taglish request ("ulitin po natin yung run") whose settings the rules cannot read
TAGALOG = frozenset({"po", "natin", "yung", "ang", "ng", "mga", "pero", "naman", "sana", "ba", "lang", "kasi", "nga"})


def _taglish(lowered: str) -> bool:
    """Whether at least two Tagalog function words are said (a Taglish request)."""
    return sum(word in TAGALOG for word in re.findall(r"[a-z]+", lowered)) >= 2


# "runs.filter(status==oom)", ".wait() on it": a method call that names another tool's work than the read chosen
OTHER_METHOD = r"\.(?:filter|wait|list|where|select)\s*\("


def _method_unread(plain: str, intent: Intent) -> str | None:
    """One question where a code-style call names work (filter the runs, wait on one) the status or results read
    chosen does not do: reading the wrong thing is asked about, not done."""
    if intent.command not in ("status", "results") or not re.search(OTHER_METHOD, plain.lower()):
        return None
    return f"Do you mean {call_text(intent)}? Say `list runs` to list them, or `wait for r1` to wait on one."


def _safety_doubt(plain: str, intent: Intent) -> str | None:
    """One question where acting would most likely do something other than what was meant: odd radio digits, a
    count less the warmup, a check asked before the launch, a PR that must not write its report, a report where a PR
    was asked for. (A resume of a run that ended otherwise than preempted is the tool's to refuse, in one line:
    agent.jobs.resumable_job says which runs resume.)"""
    lowered, command = plain.lower(), intent.command
    odd = re.search(ODD_RADIO, intent.text.lower()) or re.search(ODD_RADIO, lowered)
    if command in ("run", "plan", "sweep") and odd:
        return (f"Which value do you mean by {odd.group(0)!r}? Say it in figures, e.g. `20`. I would call "
                f"{call_text(intent)}.")  # fmt: skip
    if command == "run" and re.search(LESS_THE, intent.text.lower()):
        return (f"How many steps, exactly? Say the count in figures; I would not turn the warmup off. I would call "
                f"{call_text(intent)}.")  # fmt: skip
    if command == "run" and re.search(CHECK_FIRST, lowered):
        return (f"Should I check the hardware first (`/inspect`), or launch now ({call_text(intent)})? I do one "
                f"at a time.")  # fmt: skip
    if command == "pr" and re.search(NO_REPORT, lowered):
        return f"Opening a PR writes the sweep's report. Open it anyway ({call_text(intent)})? yes / edit"
    if command == "report" and re.search(PR_WANTED, lowered) and not re.search(ANY_NO, lowered):
        return f"Write the report only ({call_text(intent)}), or open a PR with it (`/pr`)?"
    if command == "run" and not intent.args and (_other_language(plain) or _taglish(lowered)):
        return (
            "What should I launch, exactly? I read no setting I can set, so I would only train the defaults "
            "(/run). Say the settings, e.g. `train 20 steps with dp_shard=2 on 2 GPUs`."
        )
    return None


def clarify(intent: Intent, plain: str, entities: Entities, context: Context, scores: dict[str, float]) -> None:
    """One question instead of the action where the planner is not sure of it (see the module docstring): the
    checks in order, each where no earlier one asked, and the holds (negated, put off, asked about) over all."""
    best = ranked(scores)
    if intent.clarify is None:
        intent.clarify = _benchmark_or_results(plain, intent, context)
    if intent.clarify is None:
        intent.clarify = _close_call(intent, best, entities)
    if intent.clarify is None and intent.command == "plan" and _launch_close(scores, entities):
        intent.clarify = (f"Do you want me to train with what you said ({', '.join(_launch_facts(entities))}) or to "
                          f"plan layouts ({call_text(intent)})? A plan takes no steps or settings.")  # fmt: skip
    if intent.clarify is None and intent.command == "resume" and entities.has("switch", "override"):
        # "requeue tp-try with activation checkpointing on": a resume keeps the run's settings, so the change said
        # would be dropped; a launch makes it
        intent.clarify = (f"Resuming keeps the run's own settings, so the change you named would not apply. Resume "
                          f"as it was ({call_text(intent)}), or start a new run with the change (say its GPUs and "
                          f"steps, e.g. `train 20 steps on 2 GPUs` with the setting)?")  # fmt: skip
    if intent.clarify is None and intent.command in ("run", "plan", "sweep"):
        intent.clarify = _unknown_json_key(plain, intent) or _unplaced_number(plain, entities, intent)
    if intent.clarify is None and intent.command in ("run", "plan", "sweep"):
        intent.clarify = _count_of_those(intent, context) or _radio_doubt(intent)
    if intent.clarify is None and intent.command in ACTIONS:
        intent.clarify = _safety_doubt(plain, intent)
    if intent.clarify is None:
        intent.clarify = _method_unread(plain, intent)
    if intent.clarify is None and intent.command == "run" and re.search(FITS_FIRST, plain.lower()):
        # "seq len 1024? check it fits first": a fit checked before the launch is a plan first, not the launch
        intent.clarify = (f"Should I plan layouts first to check that it fits (`/plan`), or launch now "
                          f"({call_text(intent)})?")  # fmt: skip
    if intent.clarify is None and intent.command in ("run", "sweep") and intent.args.get("experiment"):
        intent.clarify = _file_put_aside(plain, entities, intent)
    if intent.clarify is None and intent.command in ("run", "sweep"):
        intent.clarify = _told_how_it_went(plain, intent)
    if intent.clarify is None:
        intent.clarify = _timed(plain, entities, intent)
    if intent.clarify is None:
        intent.clarify = _the_one_undone(plain, intent) or _made_into(plain, intent)
    if intent.clarify is None:
        intent.clarify = _vague_count(entities, intent)
    if intent.clarify is None and intent.command in ("run", "plan"):
        intent.clarify = _refused_count(plain, intent)
    if intent.clarify is None and intent.command == "run":
        intent.clarify = _change_unsaid(plain, intent) or _launch_unasked(plain, entities, intent, context)
    if intent.clarify is None and intent.command in VAGUE_TAKEN and (said := entities.get("count_range")):
        intent.clarify = (f"How many, exactly? {str(said)!r} is a range: say one number. I would call "
                          f"{call_text(intent)}.")  # fmt: skip
    if intent.clarify is None and intent.command == "run" and (said := entities.get("setting_range")):
        intent.clarify = (f"Which value, exactly? {str(said)!r} gives a setting two values: say one. "
                          f"{launch_text(intent.args)}")  # fmt: skip
    if (intent.clarify is None and intent.command in ACTIONS and _asks_only(plain, _names_its_object(intent, entities))
            and not _requested(intent, plain)
            and not guarantee_ordered(plain.lower(), intent.command)
            and not (intent.command == "run" and _announced_launch(plain))):  # fmt: skip
        intent.clarify = f"Do you want me to {intent.command} ({call_text(intent)})? yes / edit"
    if intent.clarify is None and intent.command == "run" and _every_gpu_uncounted(plain, intent):
        intent.clarify = f"How many GPUs, exactly? Say one number, e.g. `on 4 GPUs`. {launch_text(intent.args)}"
    if intent.clarify is None and intent.command in ACTIONS and _asked_beside(plain, intent.command):
        intent.clarify = f"Do you want me to {intent.command} ({call_text(intent)})? yes / edit"
    if intent.clarify is None and intent.command == "run" and re.search(DO_THAT, plain.lower()):
        # "the docs say to use tp=2; could we try that on 2 gpus?": a described layout tried is a launch asked
        # about, confirmed with what it would run
        intent.clarify = f"Do you want me to {intent.command} ({call_text(intent)})? yes / edit"
    if intent.command in NAMED_TOOLS and (unknown := _unknown_name(plain, entities, context, intent)):
        intent.clarify = unknown  # the name the user gave first: never another run in its place
    if intent.command in (*NAMED_TOOLS, "run") and (excluded := _excluded_taken(intent, entities, context)):
        intent.clarify = excluded
    if entities.has("vague_reference") and intent.command in NAMED_TOOLS and not entities.has("run", "sweep"):
        runs, sweeps = ", ".join(context.known.runs) or "none", ", ".join(context.known.sweeps) or "none"
        intent.clarify = f"Which one do you mean by 'the other'? (runs: {runs}; sweeps: {sweeps})"
    described = entities.get("unknown_description")
    winner = intent.command == "run" and re.search(r"\bwinn", str(described)) and context.sweep  # the sweep's
    if described and describes_experiment(str(described), intent, context):
        described = None  # "the long-context config, the 1024 one": its seq_len, said of the file named
    if described and re.fullmatch(DESCRIBED_BY_SIZE, str(described)) and sweep_in_words(intent.text, context):
        described = None  # "the little sweep where we tried learning rates": the rest of the sentence tells it apart
    if described and _named_before(str(described), intent, context):
        described = None  # "the said sweep" after a sweep was read: that sweep (arguments fills it)
    if described and intent.command == "run" and re.fullmatch(DEFAULT_ONE, str(described)):
        described = None  # "start a training run, just the normal one": the experiment's defaults
    if described and intent.command == "run" and _the_launch_itself(str(described), plain.lower()):
        described = None  # "submit the batch job on 4 GPUs", "the approved run is 2 GPUs ...; start it"
    if described and intent.command in (*NAMED_TOOLS, "run") and not entities.has("run", "sweep") and not winner:
        runs, sweeps = ", ".join(context.known.runs) or "none", ", ".join(context.known.sweeps) or "none"
        intent.clarify = _pointed_back_unclear(str(described), intent, context) or (
            f"Which do you mean by {described!r}? I find none it describes (runs: {runs}; sweeps: {sweeps})."
        )
    if intent.clarify is None and intent.command in ("run", "sweep") and (source := _unknown_source(entities)):
        intent.clarify = source
    if intent.clarify is None and intent.command == "docs" and not entities.has("sweep"):
        intent.clarify = _unknown_source(entities)  # "update the docs as previously briefed": no sweep, no brief
    if intent.clarify is None and intent.command in ACTIONS and re.search(TRAILING_NO, intent.text.strip().lower()):
        # "cancel r1. Not.", "benchmark r1 no.": the action taken back by a lone negation after it
        intent.clarify = f"Do you want me to {intent.command} ({call_text(intent)}) or not? yes / no"
    if intent.clarify is None and intent.command in (*ACTIONS, *NAMED_TOOLS, "plan"):
        intent.clarify = _pointed_question(plain, intent, entities, context)
    if (
        intent.clarify is None
        and intent.command in ("report", "pr")
        and (which := no_sweep_said(intent, entities, context))
    ):
        intent.args.pop("sweep", None)  # "do a report", "pull meshpilot.yaml for review": no sweep said, none taken
        intent.clarify = which
    if intent.clarify is None or offers_yes(intent.clarify):
        intent.clarify = _sweep_move_held(plain, intent, entities, context) or intent.clarify
    if intent.clarify is None and intent.command == "plan" and (why := _run_wish_held(plain, entities)):
        devices = intent.args.get("devices")  # the launch wished for, on the GPUs it said
        intent.clarify = held_back_question(why, "/run" + (f" nproc={devices}" if devices else ""), "run")
    if intent.clarify is None or offers_yes(intent.clarify):  # a correction or alternative with no one reading
        intent.clarify = held_correction(intent, plain, entities, context, ACTIONS) or intent.clarify
    why = held_back(plain.lower(), intent.command) if intent.command in ACTIONS else None
    question = held_back_question(why, call_text(intent), intent.command) if why else None
    # negated, put off, asked...: never acted on; where a yes must not act on it either (negated, supposed, asked
    # what it would do), no earlier question may offer one
    if question and (intent.clarify is None or (offers_yes(intent.clarify) and not offers_yes(question))):
        intent.clarify = question
    if intent.clarify is None and intent.command == "status" and only_taken_back(plain.lower()):
        # "wait no." after "cancel r1": the turn before taken back, no wait on the run asked for
        intent.clarify = "You took that back, so I have done nothing. What would you like instead?"
    waited_on = _only_waited_on(masked(plain.lower(), entities), intent.command)
    if intent.clarify is None and intent.command in ACTIONS and waited_on:
        intent.clarify = held_back_question("asked", call_text(intent))  # "retire r1 after the benchmark"
    if intent.clarify is None and intent.command in ("run", "sweep") and re.search(SAID_ELSEWHERE, plain.lower()):
        intent.clarify = (f"What was said there is not in this conversation, so I have done nothing. Which experiment "
                          f"and settings do you mean? So far I read {call_text(intent)}.")  # fmt: skip
    if intent.clarify is None and intent.command == "run" and (why := _unordered_launch(plain.lower(), entities)):
        intent.clarify = held_back_question(why, call_text(intent))  # "tonight: 4 GPUs, FSDP, 120 steps"
    if intent.clarify is None and intent.command == "run":
        intent.clarify = _run_of_a_day_again(plain, entities, intent, context)
    if intent.clarify is None and intent.command == "run" and (several := re.search(RUNS_AGAIN, plain.lower())):
        intent.clarify = (f"Which run should I launch again? {several.group(0)!r} is several, and a launch starts one "
                          f"and copies none of their settings. {launch_text(intent.args)}")  # fmt: skip
    if intent.clarify is None and intent.command == "run":  # after the questions that name what is unsaid better
        intent.clarify = (_vague_launch(plain, entities, intent) or _past_then_now(plain, intent)
                          or _anothers_repeat(plain, intent))  # fmt: skip
    if intent.clarify is None and intent.command == "sweep":
        intent.clarify = _vague_sweep(plain, entities, intent)
    if intent.clarify is None and intent.command == "sweep" and (earlier := re.search(ALREADY_NAMED, plain.lower())):
        # "run the aforementioned sweep again", "bring the team into alignment with the said sweep": one that ran
        # before, whose settings a new sweep does not copy
        intent.clarify = (f"Do you want me to start a new sweep ({call_text(intent)})? {earlier.group(0)!r} ran "
                          "before, and a new sweep does not copy its settings. yes / edit")  # fmt: skip
    if intent.command == "help" and intent.clarify is None and not re.search(GREETING, plain.lower()):
        intent.clarify = _unsure(best)
    if (
        intent.command in ACTIONS
        and re.fullmatch(BARE_GO, plain.lower())
        and not (context.calls or context.previous_text)
    ):
        intent.clarify = ("Go with what? Nothing earlier in this conversation says what to do; say it, e.g. "
                          "`train 20 steps with dp_shard=2 on 2 GPUs`.")  # fmt: skip
    if _other_language(plain) and not _safe_unread(intent, entities, context):
        intent.clarify = (
            f"Most of that is in a language I do not read; I understood {call_text(intent)}. "
            "What should I do? Please say it in English, e.g. `train 20 steps with dp_shard=2 on 2 GPUs`."
        )
