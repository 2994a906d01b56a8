"""The entities of a sentence, each with its span in the normalised text: counts with their noun, hardware (GPU
preset, devices per node, nodes, memory per device), the model preset (matched by family, size and version), settings
with their negation, and the runs, sweeps, checkpoints and files of the repository it names.
"""

from __future__ import annotations

import difflib
import itertools
from dataclasses import dataclass, field

from agent.understanding import regex as re  # `re` with a cache the parser's patterns fit in
from agent.understanding.grammar import (
    CHANGED,
    CORRECTION,
    GPU_NAME,
    GPU_OF_NODE,
    LAYOUT_WORDS,
    NEGATED_SETTING,
    NODE_GPU,
    NODE_NOUN,
    NOT_INTERVAL,
    OPTIMIZERS,
    REFUSED_COUNT,
    SEQ_LEN_CHANGE,
    SET_TO,
    SETTING_NAMES,
    TOKENS_PER_SEQUENCE,
    unreplaced,
)
from agent.understanding.known import Known
from trainer.layout import MESH_DIMS
from trainer.model.presets import MODELS

# A count's noun: what the number counts.
NOUNS = {
    "devices": r"gpus?|cards?|devices?|accelerators?|h100s?|h200s?|a100s?|a10s?|l40s|(?:rtx[ -]?)?4090s?",
    "nproc": r"process(?:es)?|processors?|procs?|ranks?|workers?",
    "nodes": NODE_NOUN,
    "steps": r"(?:optimi[sz]er |training )?steps?|iterations?|iters?",
    "trials": r"(?:different |distinct |possible )?(?:trials?|configurations?|configs?|setups?)",
    "stages": r"(?:pipeline )?stages?",
}
COUNT = r"(\d+(?:\.\d+)?)(k?)"
NO_LAUNCH = (r"\b(?:don'?t|do not|without|no need to|never)\s+(?:actually\s+)?"
             # ("without initiating any run": a run not to start, no setting off)
             r"(?:re-?)?(?:run|launch|start|train|kick|initiat|trigger)\w*\b"
             # ("don't restart it from where it stopped, start fresh": a resume refused, not a launch)
             r"(?![^.?!;,]{0,40}?\bfrom\s+(?:where|the\s+point)\b)"
             r"(?:\s+(?:anything|it|a run|a job|any runs?))?|\bjust plan\b|\bonly plan\b|\bplan only\b|"
             r"\bno launch\w*\b|\bhypothetical\w*\b|"
             # "no run" (but not "no run named r9"), and "only plan" in German, as users mix it in
             r"\bno (?:runs?|training)\b(?!\s+(?:named|called|like|in)\b)|\bnur planen\b|"
             r"\bnothing (?:running|launched|started)\b|\bjust an? (?:estimate|guess)\b|"
             # "nothing must start", "nothing should be launched", "nothing gets trained"
             r"\bnothing\s+(?:(?:must|should|shall|may|will|is\s+to|needs?\s+to|has\s+to|gets?)\s+)(?:be\s+)?"
             r"(?:re-?)?(?:run|launch|start|train|kick)\w*\b|"
             # "I don't want another run", "no need for a new training": a launch refused
             r"\b(?:don'?t|do not|doesn'?t)\s+(?:want|need)\s+(?:another|a|any|a new|one more|more)\s+"
             r"(?:(?:training\s+)?runs?|trainings?|launch\w*|jobs?)\b|"
             r"\bno need for\s+(?:another|a|any|a new|one more|more)\s+(?:(?:training\s+)?runs?|trainings?|jobs?)\b|"
             # a clause of its own that says "not": "how to parallel it? Not start training." ("is r1 not started?"
             # asks a status: "not" there opens no clause)
             r"(?:^|[.,;!?]\s*)(?:but\s+|and\s+)?(?:please\s+)?not\s+(?:to\s+)?(?:actually\s+)?"
             r"(?:re-?)?(?:run|launch|start|train|kick)\w*\b")  # fmt: skip
# Boolean settings: their names, and the words that turn them off or on, before or after the name.
SWITCHES = {
    "data.packing": r"(?:sequence |document )?packing|packed (?:sequences|documents)|pack(?:ing)?",
    # bare "checkpointing" is activation checkpointing: saving checkpoints is "checkpoints" or "checkpoint_every"
    "train.activation_checkpointing": r"(?:activation|gradient|act)[ _-]?(?:checkpointing|checkpoints?|ckpts?)|"
    # the verb with its object ("don't checkpoint the activations"): the whole phrase, so that the negation before
    # the verb is the one read
    r"checkpoint(?:ing)?\s+(?:the\s+|of\s+(?:the\s+)?)?activations|(?:activation\s+)?recomput\w*|\bac\b|"
    r"checkpointing|ckpting",  # "ckpting" is "checkpointing" shortened, as "ckpt" is "checkpoint"
    "train.compile": r"torch[. ]?compile|compil(?:e|er|ation|ing)",
}
CLAUSE = r",|;|\.\s|\band\b|\bbut\b|\bplus\b|\bthen\b"
NEGATION_BEFORE = (
    r"\b(?:without|no|not|neither|disable|disabling|disabled|off|don'?t|do not|won'?t|will not|never|skip|w/o|"
    r"turn off|switch off|remove|removing|drop|dropping|shut off|avoid|avoiding|leave out|leaving out|opt out of|"
    r"stop|stopping|exclude|excluding|minus|sans|ditch|ditching|scrap|scrapping|forgo|forgoing)\b"
)
# A setting refused outright, ordered first in its clause: "forbid the compiler its alchemy", "and ban packing", "veto
# packing" (the clause split at CLAUSE). Only the order turns it off: "I can't deny packing helps", "denying packing
# would slow us", "Marc wants to ban packing", "no one may veto packing", "prohibit AC? maybe" say nothing of its
# state ("don't forbid packing" is OFF_BEFORE's, negated: kept).
FORBID_ORDERED = (r"^\s*(?:(?:please|pls|also|just|so|then|and|but|now)\s+)*(?:forbid|ban|prohibit|disallow|veto)\s+"
                  r"(?:the\s+|any\s+|all\s+)?$")  # fmt: skip
# A setting set against what an order turns off: "ban the bad habits, not packing", "disable compile, not AC" (it
# stays).
SPARED_FROM_OFF = (r"(?:^|[.;:!?]\s*)\W*(?:(?:please|pls|also|just|and|then)\s+)*(?:ban|forbid|prohibit|disallow|veto|"
                   r"disable|drop|remove|ditch|skip|turn\s+off|switch\s+off)\b[^.;:!?,]*,\s*(?:but\s+)?not\s+"
                   r"(?:the\s+)?$")  # fmt: skip
# What leaves a ban ordered no order for this launch: a question, a time to come, another run or a condition ("ban
# packing? maybe", "ban packing later", "ban packing for the next run", "ban packing if it's slow").
FORBID_NOT_NOW = (r"[^,;.!]*\?|[^;.!]*\b(?:later|tomorrow|next|future|afterwards|eventually|other|another|if|unless|"
                  r"once|when|after)\b")  # fmt: skip
# A ban spoken of, not ordered: "lift the ban on packing", "the ban on AC is over" (its state asked).
BAN_SPOKEN_OF = r"\b(?:ban|veto|prohibition|embargo)\s+(?:on|of|against)\s*$"
# Words that link a setting to its state after it: "packing turned off", "AC should be off", "compile must stay on".
LINKING = r"turned|switched|shut|set|is|are|be|being|to|back|again|should|shall|must|will|stays?|remains?|=|:"
NEGATION_AFTER = (
    rf"^(?:\s*(?:{LINKING}))*\s*(?:off|disabled|false|no|nope|nah|0|none|left out|excluded|omitted|"
    r"(?:not|isn'?t|aren'?t)\s+(?:be\s+)?(?:needed|required|necessary|wanted|used)|unneeded|unnecessary)\b"
)
SETTING = (
    r"\b(?:learning rate|lr|micro[- _]?batch(?: size)?|seed|weight decay|warm-?up(?: steps)?|"
    r"grad(?:ient)? clip(?:ping)?|seq(?:uence)?[ _-]?len(?:gth)?|[a-z]+\.[a-z_.]+)" + SET_TO + r"\d"
)
VAGUE_HARDWARE = (
    r"\bmore (?:memory|vram|ram)\b|"
    r"\b(?:more|fewer|less|bigger|larger|smaller|big|large|other|faster|better|some|cloud|remote|"
    r"several|(?<!how )many|a few|few|a lot of|lots of|tons of|plenty of|a bunch of|a ton of|loads of|a couple more)\s+"
    r"(?:\w+\s+)?(?:gpus?|devices?|nodes?|cards?|machines?|boxes|clusters?|servers?|"
    r"hardware|setup)\b"
)
VAGUE_CHANGE = (
    r"\b(?:other|different|another)\s+(?:layout|model|config|experiment|one|settings?)\b|"
    # ("anything bigger" is other work, later: "before we roll anything bigger out")
    r"(?<!anything )(?<!something )\b(?:bigger|larger|smaller|faster|quicker|cheaper|better)\b|"
    r"\bthe (?!\d)(?!(?:normal|default|usual|standard|regular) one)\w+(?:est)? one\b|"  # "the normal one": the default
    r"(?<!\d x )(?<!\dx )\b(?:longer|shorter)\b(?! than (?:the )?(?:default )?\d)|"
    # a setting named with no value: "set the micro batch and train", "tweak the warmup"
    r"\b(?:set|change|adjust|tweak|increase|decrease|raise|lower|bump)\s+(?:up\s+|down\s+)?(?:the\s+|a\s+)?"
    r"(?:micro[ _-]?batch(?: size)?|batch size|seed|weight decay|warm-?up|grad(?:ient)? clip(?:ping)?|steps)\b"
    r"(?!\s*(?:=|:|to|of|by)?\s*\d)|"
    # something changed that names no setting and says no value: "change the mode on the servers and restart it"
    r"\b(?:change|switch|adjust|tweak|modify|alter|flip)\s+(?:the\s+|a\s+|some\s+|its\s+)?(?:mode|modes|setting|"
    r"settings|thing|things|stuff|something|option|options|parameters?|params)\b(?!\s*(?:=|:|to|of|for)\s*\S|\s+[\w.]+\s*=)|"
    # a pronoun changed with no setting named and no value after it ("bump it and relaunch", "crank that up"): which?
    r"\b(?:bump|raise|increase|decrease|lower|crank|double|halve|up|reduce)\s+(?:it|that|this|them)\b(?![^.;!?]*\d)"
)
# Settings a comparative may change without a value ("a bigger micro batch", "a higher learning rate"): asked by name.
COMPARED_SETTING = (r"\b(?:bigger|larger|smaller|higher|lower|longer|shorter|greater)\s+"
                    rf"({'|'.join(SETTING_NAMES.values())})\b(\s*(?:=|:|to|of|at)?\s*\d)?")  # fmt: skip
# What a launch is for, not what it changes: "see if it actually goes faster", "to check whether it's better".
PURPOSE = r"\b(?:see|check|find out|test|know|learn|measure|tell)\s+(?:if|whether|how much|how)\b[^.;!?]*"
# Why a launch is asked, not what it changes: "since the last one ran out of memory", "because the bigger one crashed".
CAUSE = r"\b(?:since|because|'?cause|cuz|given that|now that|seeing as)\s+(?:the|that|this|our|my|its)\b[^.;!?,]*"
# A run or sweep pointed at only as "the other one": which is asked.
VAGUE_REFERENCE = r"\b(?:the|that)\s+other\s+(run|sweep|one|checkpoint)\b"
# Settings known only to someone else or from a talk the repository never heard: "the settings my colleague
# suggested", "the config we discussed", "what Bob used", "the usual setup", "the numbers from yesterday's meeting".
# Launching the defaults in their place would be a wrong action: asked (unless a file or run of the repository is
# named, or the values follow: "the settings Bob suggested: lr 3e-4, 20 steps").
_SETTINGS_NOUN = (r"(?:settings?|config(?:uration)?s?|setup|set-up|parameters|params|hyper-?parameters|hparams|values|"
                  r"numbers|recipe|layout|options|changes|tweaks|learning rate|lr|batch size)")  # fmt: skip
_SUGGESTED = (r"(?:suggested|recommended|proposed|sent|shared|posted|mentioned|gave|wanted|wants|picked|chose|used|"
              r"uses|liked|likes|prefers|preferred|emailed|slacked|asked for|came up with|told (?:me|us) about|"
              r"wrote down|swears by|set up)")  # fmt: skip
# Someone's choice not given yet: "suggests", "will recommend", "decides on".
_CHOOSES = (r"(?:suggests?|recommends?|proposes?|picks?|chooses?|decides?(?:\s+on)?|prefers?|sends?|says?|"
            r"thinks?\s+(?:is\s+)?best|comes?\s+up\s+with|settles?\s+on|goes\s+with|go\s+with)")  # fmt: skip
# What only the talk knows, not the repository: "that idea we talked about", "the thing we aligned on".
_REFERENT = r"(?:idea|thing|plan|one|experiment|approach|stuff|proposal|option|comparison|test|run|job|trial)"
# Where only the talk is written down: "as per the briefing", "in our prior correspondence", "from the email".
_TALK = (r"(?:briefing|brief|meeting|call|chat|discussion|email|e-mail|thread|memo|slack|standup|sync|conversation|"
         r"correspondence|whiteboard|talk|huddle)")  # fmt: skip
_SOMEONE = (r"(?:(?:my|our|the|his|her|their|a)\s+)?(?:\w+\s+)?(?:colleague|coworker|co-worker|teammate|team|boss|"
            r"manager|lead|friend|advisor|adviser|supervisor|professor|mentor|intern|someone|somebody|people|folks)|"
            r"(?!(?:i|we|you|it|that|this|the|a|an|to|is|are|was|were)\b)[a-z]+")  # fmt: skip
UNKNOWN_SOURCE = (
    rf"\b(?:the|those|these|that|this)\s+(?:\w+\s+)?{_SETTINGS_NOUN}\s+(?:that\s+|which\s+)?(?:{_SOMEONE})\s+"
    rf"(?:(?:had|has|have|just|already)\s+)?{_SUGGESTED}\b|"
    rf"\b(?:what|whatever)\s+(?:{_SOMEONE})\s+(?:(?:had|has|just)\s+)?{_SUGGESTED}\b|"
    # the choice still to come, said in the present or the future: "whatever Marc suggests", "what the lead will pick"
    rf"\b(?:what|whatever)\s+(?:{_SOMEONE})\s+(?:(?:will|would|'ll|is going to|wants to)\s+)?{_CHOOSES}\b|"
    # someone's values still to be sent ("with Marc's numbers once he sends them", "Ana's settings when she has them")
    rf"\b[a-z]+'s\s+(?:\w+\s+)?{_SETTINGS_NOUN}\s*,?\s+(?:once|when|after|as\s+soon\s+as)\s+(?:he|she|they)\b|"
    # ("whatever's in Marc's message", "whatever is in the email")
    rf"\bwhatever(?:'s|\s+is)\s+in\s+(?:the\s+|my\s+|our\s+|his\s+|her\s+|their\s+|[a-z]+'s\s+)?(?:{_TALK}|message|"
    r"dm|text|note)\b|"
    # ("that new cluster config Sam was talking about": a talk by anyone, named or not, in any tense)
    rf"\b(?:the|those|these|that)\s+(?:\w+\s+){{0,2}}(?:{_SETTINGS_NOUN}|{_REFERENT})\s+(?:that\s+|which\s+)?"
    rf"(?:we|i|they|you and i|{_SOMEONE})\s+(?:(?:had|have|has|just|already|was|were|been|kept)\s+){{0,2}}"
    r"(?:discuss(?:ed|ing)|agreed on|agreed|talk(?:ed|ing) about|sp(?:oke|eaking) about|chatt(?:ed|ing) about|"
    r"settled on|decided on|went with|aligned on|landed on|planned|planning|came up with|coming up with|sketched|"
    r"brainstorm(?:ed|ing)|mention(?:ed|ing)|rav(?:ed|ing) about|pitch(?:ed|ing)|describ(?:ed|ing)|"
    r"propos(?:ed|ing))\b|"
    rf"\b(?:the|those|these)\s+{_SETTINGS_NOUN}\s+from\s+(?:the|our|my|this morning'?s|yesterday'?s|last week'?s|"
    r"today'?s)\s+(?:\w+\s+)?(?:meeting|call|chat|discussion|email|thread|slack|standup|sync|conversation|"
    r"whiteboard)\b|"
    rf"\b(?:the|our|my)\s+usual\s+{_SETTINGS_NOUN}\b|"
    # said of in a talk the repository does not hold: "the run referred to in our prior correspondence", "layout as
    # per the briefing", "as discussed", "the new model" (no preset named: which one only the talk knows)
    rf"\b(?:the|that|this)\s+(?:\w+\s+){{0,2}}(?:{_SETTINGS_NOUN}|{_REFERENT})\s+(?:that\s+was\s+|which\s+was\s+)?"
    r"(?:referred\s+to|referenced|mentioned|discussed|described|outlined|agreed(?:\s+(?:on|upon))?)(?=\s+"
    r"(?:in|at|during|on|over|earlier|before|previously|last|yesterday)\b)|"
    rf"\b(?:as\s+)?per\s+(?:the|our|my|your|this morning'?s|yesterday'?s|last week'?s|today'?s)\s+(?:\w+\s+)?"
    rf"{_TALK}\b|\bas\s+(?:we\s+)?(?:(?:previously|earlier|already|originally|before)\s+)?"
    r"(?:discussed|agreed|briefed|arranged|instructed|outlined)\b|"
    r"\b(?:the|our|my)\s+(?:new|newer|updated|improved|latest)\s+model\b(?!\s*[:,(]?\s*(?!(?:on|in|at|with|for|to|over|across)\b)[a-z]+[\s-]*\d)|"
    # "like my teammate did", "the way Alice set it up", "as bob had it"
    rf"\b(?:like|as|the way|how)\s+(?:{_SOMEONE})\s+(?:did|does|had it|has it|ran it|runs it|set it up|sets it up|"
    r"trained it|trains it|configured it|likes it|wants it)\b"
)
# The values said right after it: "the settings Bob suggested: lr 3e-4", "(lr 1e-3, 20 steps)", "which are ...".
SPELLED_OUT = r"^\s*(?::|\(|-|,?\s*(?:which are|namely|i\.e\.|that is|so)\b)\s*\S"
# Every preset's family (the letters its name starts with: llama, qwen, mixtral, deepseek...), longest first.
FAMILIES = "|".join(sorted({re.match(r"[a-z]+", key).group(0) for key in MODELS}, key=len, reverse=True))
OWN_MODEL = r"\b(?:(?:our|my|the repo'?s?|the experiment'?s?|this repo'?s?)\s+(?:own\s+)?model|own model)\b"
# "my first model": the user's first one trained, the experiment's own where no preset or family is named beside it
# ("my first model was the 7b llama" is that llama; "my first model and my second model" are two unknown ones).
FIRST_MODEL = r"\b(?:our|my)\s+(?:very\s+)?first\s+(?:ever\s+)?model\b"
OTHER_MODEL = r"\b(?:second|third|next|other|last|newer|latest)\s+(?:\w+\s+)?model\b"
MEMORY_EACH = r"\b(\d+(?:\.\d+)?)\s*(gib|gb)\b\s*(?:of\s+(?:memory|vram|ram)\s*)?(?:each|per|apiece|a piece)"
# A model of the user's described by what it does ("my chatbot model", "our support llm"): no preset, and maybe not
# the experiment's own either (that is "my model", "our own model"), so which is asked.
DESCRIBED_MODEL = (r"\b(?:my|our)\s+(?!(?:own|current|usual|default|main|existing|experiment'?s?|repo'?s?)\b)"
                   r"[a-z][\w-]*\s+(?:model|llm)\b")  # fmt: skip
# Cards named by their memory alone: "on 80GiB devices", "8 x 48GB cards" (each card's memory, no GPU named).
MEMORY_OF_DEVICES = r"(?<![\w.])(\d+(?:\.\d+)?)\s*(gib|gb)\s+(?:devices?|gpus?|cards?|accelerators?)\b"
NOT_NAMES = {"run", "sweep", "latest", "last", "other", "long", "good", "best", "same", "next", "first", "whole"}
NOT_FILES = {
    "readme",
    "training",
    "docs",
    "report",
    "metrics",
    "memory",
    "steps",
    "config",
    "log",
    "meshpilot",
    "model",
}
SEQ_LEN = (
    r"\b(?:seq(?:uence)?[ _-]?len(?:gth)?|context(?: length)?)" + SET_TO + r"\d|"
    r"\b\d+(?!\s+sequences\b)\s*k?\s*(?:[- ]?tokens?\s+)?(?:context|sequences?|seq)\b|" + TOKENS_PER_SEQUENCE
)
NAMES = ("run", "sweep", "checkpoint", "file", "experiment", "run_choice", "sweep_choice", "not_run", "not_sweep",
         "not_run_choice", "not_sweep_choice", "not_experiment", "said_of_run", "unknown_name")  # fmt: skip
# What excludes the run or sweep named right after it: "from the lr scan, not the layouts one", "rather than r1".
# Verbs that leave out what they name ("skip lr-scan", "ignore r1"): what a possessive names is left out instead ("skip
# r1's benchmark" skips the benchmark, not r1).
SKIPPER = r"skip|ignore|ignoring|leave out|leaving out|(?<!n't )(?<!not )forget(?: about)?"
EXCLUDER = (rf"\b(?:not|rather than|instead of|but not|except(?: for)?|other than|apart from|excluding|{SKIPPER})\s+"
            r"(?:(?:the|that|this|from|on|of|with|for)\s+)*")  # fmt: skip


@dataclass
class Entity:
    kind: str
    value: object
    span: tuple[int, int]


@dataclass
class Entities:
    text: str  # the normalised sentence the spans index
    found: list[Entity] = field(default_factory=list)

    def add(self, kind: str, value: object, span: tuple[int, int]) -> None:
        self.found.append(Entity(kind, value, span))

    def get(self, kind: str) -> object | None:
        """The last value of `kind` in the sentence: what a self-correction ("... no wait, four nodes") leaves."""
        found = self.all(kind)
        return found[-1] if found else None

    def all(self, kind: str) -> list[object]:
        """The values of `kind` in the sentence's order."""
        return [e.value for e in sorted(self.found, key=lambda e: e.span) if e.kind == kind]

    def has(self, *kinds: str) -> bool:
        return any(e.kind in kinds for e in self.found)


def extract(text: str, known: Known) -> Entities:
    lowered = text.lower()
    entities = Entities(text)
    _counts(lowered, entities)
    _ranges(lowered, entities)
    _vague_counts(lowered, entities)
    for found in _clocks(lowered):  # "14:02 UTC", "T+5m": when, never how many
        entities.add("clock", found.group(0), found.span())
    _hardware(lowered, entities)
    _model(lowered, entities)
    _switches(lowered, entities)
    _optimizer(lowered, entities)
    _names(text, entities, known)
    _relative_runs(lowered, entities, known)
    _excluded(lowered, entities)
    the_other(lowered, entities, known)
    _layouts(masked(lowered, entities), entities)
    _said_of_runs(lowered, entities)
    if found := re.search(SETTING, lowered):
        entities.add("override", found.group(0), found.span())
    if found := re.search(SEQ_LEN, lowered):
        entities.add("seq_len", found.group(0), found.span())
    if found := re.search(SEQ_LEN_CHANGE, lowered):  # "from 256 to 1024 tokens": 256 is the old length, no count
        entities.add("seq_len", found.group(0), found.span())
    if any(not refused_only_in_variant(lowered, found) for found in re.finditer(NO_LAUNCH, lowered)):
        entities.add("no_launch", True, (0, 0))
    # "not for the experiment's model, for mistral 7b": the model ruled out is no model to plan
    owned = [f for f in re.finditer(OWN_MODEL, lowered) if not re.search(rf"{EXCLUDER}$", lowered[: f.start()])]
    if owned:
        entities.add("own_model", True, owned[0].span())
    elif found := re.search(OWN_MODEL, lowered):
        entities.add("not_own_model", True, found.span())
    if not owned and (first := re.search(FIRST_MODEL, lowered)):
        _first_model(lowered, first, entities)
    model_said = entities.has("model", "model_choice", "model_unknown", "model_size", "own_model")
    if not model_said and (found := re.search(DESCRIBED_MODEL, lowered)):
        entities.add("model_unknown", found.group(0), found.span())  # "my chatbot model": which one is asked
    return entities


def _first_model(lowered: str, first: re.Match, entities: Entities) -> None:
    """What "my first model" is: the experiment's own where nothing else names the model, an unknown model to ask
    about where another of the user's is named beside it."""
    if re.search(OTHER_MODEL, lowered):
        entities.add("model_unknown", first.group(0), first.span())
    elif not entities.has("model", "model_choice", "model_unknown", "model_size") and not re.search(
        rf"\b(?:{FAMILIES})", lowered
    ):
        entities.add("own_model", True, first.span())


# What a run did, said of it as its subject in the past: "r1 ran sharded on two processes", "tp-try used tp=2 on 2
# gpus", "r1 had 20 steps". The clause's counts, layouts and settings are the run's, not the request's ("so r1 ran
# sharded on two processes, right? double that, same kind of sharding, across four GPUs" launches on 4; what of r1's
# is copied, the launch reads from its files). The clause ends at punctuation or a conjunction.
RUN_DID = (r"^\s+(?:(?:had|has|was|were|got)\s+)?(?:ran|trained|used|had|went|was|finished|completed|crashed|"
           r"failed|died)\b(?:(?![,;!?\u2013\u2014]|\.(?!\w)|\b(?:and|but|so|now|then|while|whereas|because|since|"
           r"i|we|you|please|can|could)\b).)*")  # fmt: skip
# The kinds of fact such a clause holds.
RUN_FACTS = ("nproc", "devices", "layout", "steps", "switch", "switch_mention", "switch_doubt", "override", "optimizer",
             "seq_len", "times", "relative")  # fmt: skip


def _said_of_runs(lowered: str, entities: Entities) -> None:
    """The facts said of a run in the past are one said_of_run entity (masked, as names are), none of the request;
    the settings are read again without them ("r1 had packing on; train like r1 with packing off" is off)."""
    for run in [e for e in entities.found if e.kind == "run" and e.span[1] > e.span[0]]:
        did = re.match(RUN_DID, lowered[run.span[1] :])
        if not did:
            continue
        start, end = run.span[1], run.span[1] + did.end()
        facts = [e for e in entities.found if e.kind in RUN_FACTS and start <= e.span[0] < end]
        if facts:
            entities.found = [e for e in entities.found if e not in facts]
            entities.add("said_of_run", run.value, (start, end))
    _said_of_the_past(lowered, entities)
    if said := [e.span for e in entities.found if e.kind == "said_of_run"]:
        entities.found = [e for e in entities.found if not e.kind.startswith("switch")]
        for start, end in said:
            lowered = lowered[:start] + " " * (end - start) + lowered[end:]
        _switches(lowered, entities)


# An earlier run's story, unnamed: "the old run used lr 1e-4", "lr dropped down to 1e-4 last time". Its values are
# what happened then, not what this request asks ("with lr 1e-4 like last time" asks for it: LIKENED_TO_PAST).
PAST_MARKER = (r"\b(?:last time|the time before|previously|(?:the|our|my|that)\s+(?:old|previous|earlier|last|prior|"
               r"original)\s+(?:run|one|attempt|launch|try|job))\b")  # fmt: skip
PAST_VERB = (r"\b(?:used|had|went|dropped|fell|decayed|decreased|was|were|ran|got|ended|reached|sat|stayed|climbed|"
             r"rose|peaked|started)\b")  # fmt: skip
LIKENED_TO_PAST = r"\b(?:like|as|same as|as in|from|copy|reuse|again)\s+(?:(?:the|we\s+did|i\s+did)\s+)?$"
# The next clause takes the told value up as its object: "pp=2 was slow last time so skip it" refuses pp=2.
TAKEN_UP = r"\W*(?:so|and|but|then)?\s*(?:\w+\s+){0,2}?(?:it|that|this|them|those)\b"
PAST_CLAUSE_END = r"[,;!?\u2013\u2014]|\.(?!\w)|\b(?:and|but|so|then|while|whereas|because|since)\b"


def _said_of_the_past(lowered: str, entities: Entities) -> None:
    """The facts of a clause that tells of an earlier run, unnamed, in the past, are one said_of_run entity, as
    _said_of_runs makes of a named run's."""
    start = 0
    for end in [m.start() for m in re.finditer(PAST_CLAUSE_END, lowered)] + [len(lowered)]:
        clause = lowered[start:end]
        marker = re.search(PAST_MARKER, clause)
        if marker and re.search(PAST_VERB, clause) and not re.search(LIKENED_TO_PAST, clause[: marker.start()]):
            # (a value in it: its settings are read later, from the text this masks; a switch alone, "we had
            # trouble with packing last time", is left to the switches' own reading of causes)
            facts = [e for e in entities.found if e.kind in RUN_FACTS and start <= e.span[0] < end]
            if re.search(r"\d", clause) and not re.match(TAKEN_UP, lowered[end:]):
                entities.found = [e for e in entities.found if e not in facts]
                entities.add("said_of_run", "earlier", (start, end))
        start = end


# A launch refused only in one variant ("do NOT relaunch with tensor parallel"), then ordered in a later sentence
# ("Use FSDP across 2 ranks, 20 steps"): the order is the request, the refusal only rules out that variant.
REFUSED_VARIANT = r"\s+(?:it\s+|again\s+)?with\b"
ORDERED_AFTER = (r"[.;:!?]\s+(?:instead\s*,?\s*|rather\s*,?\s*)?(?:please\s+|just\s+)?"
                 r"(?:use|launch|relaunch|run|train|start|go\s+with)\s+(?!(?:it|that|this|them|one)\b)"
                 # what it is launched with, in that sentence: its count of steps or ranks, or its layout
                 r"[^.;!?]*?(?:\b\d+\s+(?:steps?|ranks?|gpus?|processes|devices)\b|"
                 r"\b(?:fsdp|ddp|zero|dp_shard|dp_replicate|tp|pp|cp)\b)")  # fmt: skip


def refused_only_in_variant(lowered: str, refused: re.Match) -> bool:
    """Whether the launch refused is refused only with a variant and a launch is ordered after it (REFUSED_VARIANT)."""
    after = lowered[refused.end() :]
    return bool(re.match(REFUSED_VARIANT, after) and re.search(ORDERED_AFTER, after))


def _excluded(lowered: str, entities: Entities) -> None:
    """A run or sweep named or described right after a negation is the one not meant ("update the docs from the lr
    scan, not the layouts one"): kept apart as not_run / not_sweep, never taken as the one to use."""
    for entity in entities.found:
        start, end = entity.span
        if (
            entity.kind.startswith(("run", "sweep", "experiment"))
            and end > start
            and (
                re.search(rf"{EXCLUDER}$", lowered[:start])
                or _left_alone(lowered, start, end)
                or (re.search(NEGATED_VERB, lowered[:start]) and re.match(ANOTHER_INSTEAD, lowered[end:]))
                # "I don't want the default experiment, run configs/long.yaml": the other file named is the one
                or (re.search(NEGATED_VERB, lowered[:start]) and _another_file_named(entity, entities))
            )
            and not (re.search(rf"\b(?:{SKIPPER})\s+\S*$", lowered[:start]) and lowered[end:].startswith("'s"))
        ):  # "not the long config": not that experiment either
            entity.kind = "not_" + entity.kind
        elif entity.kind == "run" and end > start and re.search(SPARED, lowered[:start]):
            entities.add("spared_run", entity.value, entity.span)
        elif refused := _experiment_refused(entity, lowered):  # "avoid the long config", "no long.yaml"
            if refused.group("verb"):  # "don't use X", "never launch X": refused for a launch, still shown if asked
                entities.add("refused_experiment", entity.value, entity.span)
            else:
                entity.kind = "not_experiment"


def _experiment_refused(entity: Entity, lowered: str) -> re.Match | None:
    """What refuses an experiment (or a YAML file, one to launch) named only to be refused: never the one launched.
    A verb negated before it ("never launch long.yaml") refuses it for a launch or sweep only: "never launch
    long.yaml, just show it" shows it."""
    experiment = entity.kind == "experiment" or (entity.kind == "file" and str(entity.value).endswith(".yaml"))
    start, end = entity.span
    return re.search(REFUSED_EXPERIMENT, lowered[:start]) if experiment and end > start else None


def _another_file_named(entity: Entity, entities: Entities) -> bool:
    """Whether `entity` is an experiment and the sentence names another experiment file beside it."""
    return entity.kind == "experiment" and any(
        e.kind in ("experiment", "file") and e.value != entity.value and str(e.value).endswith((".yaml", ".yml"))
        for e in entities.found
    )


def the_other(lowered: str, entities: Entities, known: Known, before: dict[str, str | None] | None = None) -> None:
    """ "Not the layouts sweep, the other one": with one ruled out, "the other" is the one left, where exactly one is
    left of its kind (of three runs, one ruled out, it is still asked which). `before`: the run and sweep the
    conversation last used, ruled out the same way ("who won the other sweep?" after reading one)."""
    found = re.search(VAGUE_REFERENCE, lowered)
    if not found or entities.has("run", "sweep"):
        return
    for label, paths in (("sweep", known.sweeps), ("run", known.runs)):
        excluded = {str(v) for v in entities.all(f"not_{label}")} or {v for v in [(before or {}).get(label)] if v}
        left = [p for p in paths if p not in excluded]
        if excluded and len(left) == 1 and found.group(1) in (label, "one"):
            entities.add(label, left[0], found.span())
            entities.found = [e for e in entities.found if e.kind != "vague_reference"]
            return


# An action said not to be done to what it names, and in the next clause another named as the one it is for: "don't
# benchmark r1, the ddp baseline is the one I want scored", "never read lr-scan; layouts-nov instead". The negation
# is of the first object, not of the action (agent.understanding.intents.negated_actions keeps the action).
# The words that take an action back, here and in agent.understanding.intents (its refused actions).
# Other words that leave an action or an output out, shared by the tools' negations (here and mood.held_back's):
# "leave out the PR", "excluding the PR", "omit the cancel of tp-try", "forgo the PR", "negative on cancelling", "hold
# the benchmark" (a diner's "hold the mayo"; never "hold on" nor "hold off" alone).
LEFT_OUT = (r"leave out|leaving out|exclud(?:e|ing)|omit(?:ting)?|forgo(?:ing)?|negative on|hold the|"
            r"scrap(?:ping)?|ditch(?:ing)?")  # fmt: skip
# An output or an action named, then waved off after a colon or a question mark: "PR? nah", "PR: nah", "cancel
# tp-try: nope", "stop r1? no no, leave it" ("? no rush" asks on).
WAVED_OFF = r"\s*[?:]\s*(?:(?:no|nah|nope)\s+)*(?:nah|nope|no(?=\s*[,.;:!\-\u2013\u2014]|\s*$))\b"
NEGATOR = (r"\b(?:(?:don'?t|do not|no need to)\s+bother(?:\s+(?:to|with))?|"
           r"no need (?:for|to)|no|not|without|don'?t|do not|never|skip(?:ping)?|hold off(?: on)?|"
           rf"forget(?: about)?|instead of|rather than|nor|nvm|never ?mind|{LEFT_OUT})\s+")  # fmt: skip
NEGATED_VERB = rf"{NEGATOR}\w+\s+(?:(?:the|that|this|my|our)\s+)?$"
# What refuses an experiment file named right after it, beside EXCLUDER: "don't use the long config", "avoid the long
# config", "no long config please", "anything but configs/long.yaml".
REFUSED_EXPERIMENT = (rf"(?:{EXCLUDER}$|(?P<verb>{NEGATED_VERB})|\b(?:avoid(?:ing)?|no|(?:anything|everything|"
                      r"any\s+\w+)\s+(?:but|except)|steer(?:ing)? clear of|stay(?:ing)? away from)\s+"
                      r"(?:(?:using|use|the|that|this)\s+)*$)")  # fmt: skip
# "The one" is the one to act on only where what follows says so, restating the wish or the act ("the one I want
# scored", "the one to stop", "the one I meant"); "tp-try is the one I don't trust", "... the one we already scored",
# "... the one I want to compare it with" describe the other, and ask nothing of it.
_ACT_WORD = (
    r"(?:bench\w*|benchmark\w*|scor\w*|evaluat\w*|evals?|test\w*|measur\w*|run|stop\w*|cancel\w*|kill\w*|"
    r"abort\w*|halt\w*|terminat\w*|resum\w*|read|show\w*|check\w*|report\w*|document\w*|sweep\w*|us(?:e|ed))"
)
_WANTED_TAIL = (
    rf"\s+(?:(?:that|which)\s+)?(?:(?:i|we)\s+(?:really\s+|actually\s+)?(?:want|need|'d like|would like|"
    rf"mean|meant)(?:\s+(?:to\s+)?(?:be\s+)?(?:had\s+|get\s+|got\s+)?{_ACT_WORD}\b|(?=\s*(?:[.,;!?]|$)))|"
    rf"to\s+(?:be\s+)?{_ACT_WORD}\b)"
)
ANOTHER_INSTEAD = (r"(?:'s)?\s*[,;:]\s*(?:but\s+|rather\s+|just\s+|only\s+)?(?:(?:the|that|this|my|our)\s+)?"
                   rf"[\w.-]+(?:\s+[\w.-]+){{0,3}}?(?:(?:'s|\s+is)\s+the\s+one\b{_WANTED_TAIL}|\s+instead\b)"
                   # never where the other is the one to leave alone, or later: "r1 is the one I want kept"
                   r"(?![^.;!?]*\b(?:kept|keep|leave|left|spared?|alone|untouched|skip\w*|ignor\w*|not|\w+n't|never|"
                   r"yet|later|either)\b)")  # fmt: skip


# A run or sweep named to be left as it is: "don't touch baseline-ddp", "leave r1 alone", "keep tp-try running",
# "spare the lr scan". It is no target of the sentence's action (a cancel of it would be the one thing not wanted).
LEFT_ALONE_BEFORE = (r"\b(?:(?:don'?t|do not|never|without)\s+(?:touch\w*|interrupt\w*|disturb\w*|mess\w*\s+with|"
                     r"affect\w*)|spare)\s+(?:(?:the|that|my|our)\s+)?$")  # fmt: skip
# A run named after a stop taken back ("abort tp-try; do not cancel baseline-ddp") is spared by the cancel only: "don't
# kill r1, just wait on it" still waits on r1.
SPARED = (r"\b(?:don'?t|do not|never|without|no need to)\s+(?:cancel\w*|kill\w*|stop\w*|abort\w*|halt\w*|"
          r"terminat\w*)\s+(?:(?:the|that|my|our)\s+)?$")  # fmt: skip
# Or left out of what is done, the verb split around it: "leave the layouts sweep out of it", "keep r1 aside".
LEFT_ALONE_AROUND = (
    r"\b(?:leave|leaving|keep|keeping)\s+(?:(?:the|that|my|our)\s+)?$",
    r"^(?:\s+(?:run|sweep))?\s+(?:alone|running|going|alive|be|as (?:it )?is|untouched|intact|in peace|out|aside)\b",
)


def _left_alone(lowered: str, start: int, end: int) -> bool:
    before, after = LEFT_ALONE_AROUND
    return bool(re.search(LEFT_ALONE_BEFORE, lowered[:start])) or bool(
        re.search(before, lowered[:start]) and re.match(after, lowered[end:])
    )


def masked(text: str, entities: Entities) -> str:
    """`text` with the names of runs, sweeps and files blanked out: "baseline-ddp" names a run, not a layout."""
    for entity in entities.found:
        start, end = entity.span
        if entity.kind in NAMES and end > start:
            text = text[:start] + "_" * (end - start) + text[end:]
    return text


def _layouts(lowered: str, entities: Entities) -> None:
    """Layout degrees ("dp_shard=2,tp=2", "pp=2") and words (FSDP, "tensor parallel", "2 replicas x 2 shards") and
    GPU names: cues of a launch or a plan (the grammar reads their values)."""
    for pattern, _ in LAYOUT_WORDS:
        if found := re.search(rf"\b(?:{pattern})\b", lowered):
            entities.add("layout", found.group(0), found.span())
    if found := re.search(rf"\b(?:{'|'.join(MESH_DIMS)})\s*=\s*\d+", lowered):
        entities.add("layout", found.group(0), found.span())
    if found := re.search(GPU_NAME, unreplaced(lowered)):  # "swap the L40S for A100s": the A100s
        entities.add("gpu_named", found.group(0), found.span())


def _counts(lowered: str, entities: Entities) -> None:
    """Every number followed by what it counts ("12 steps", "20 trials", "2 procs", "4 nodes"), and counts after
    their noun ("steps=40", "trials: 8")."""
    for kind, noun in NOUNS.items():
        # "2 H200 nodes" and "8 gpu nodes" count nodes, not GPUs ("8x H100 nodes" are 8 H100s in each node: RIG)
        before = GPU_OF_NODE if kind == "nodes" else ""
        after = rf"(?!\s+(?:{NOUNS['nodes']})\b)" if kind == "devices" else ""
        times = "" if kind == "nodes" else r"(?:x\s*)?"
        interval = NOT_INTERVAL if kind == "steps" else ""  # "a checkpoint every 5 steps" counts no steps
        counted = rf"{interval}\b{COUNT}\s*{times}(more\s+|fewer\s+|less\s+)?{before}(?:{noun})\b{after}"
        for found in re.finditer(counted, lowered):
            number = _number(found.group(1), found.group(2), kind)
            if found.group(3):  # "2 more steps": relative to the launch or plan before, not 2
                entities.add("relative", f"{found.group(3).strip()} {number} {kind}", found.span())
                continue
            entities.add(kind, number, found.span())
        # "steps set to 40", "the trials to 8" (a setting's count, as "lr to 1e-3"): not "2 gpus to 4"
        # "the steps is 40", as learners say it; "the number of steps shall be 40", as a contract says it
        linked = r"\s+(?:is|are|should be|will be|shall be)\s"
        to = rf"|{CHANGED}\s+to\s|{linked}" if kind in ("steps", "trials", "stages") else ""
        for found in re.finditer(rf"\b(?:{noun})(?:\s*(?:=|:){to})\s*{COUNT}\b", lowered):
            entities.add(kind, _number(found.group(1), found.group(2), kind), found.span())


# A range said where one count is wanted: "20-30 steps", "6 to 8 trials", "between 4 and 8 h100s" ("from 20 to 30
# steps" is a change, to 30; a range of clock times or a model's name is no count; a line's end ends a number:
# "- 4\n- 80 steps" is a list; a setting's value is no low end: "tp=2 - 40 steps" is the layout, then the steps).
COUNT_RANGE = (r"(?<![\w.:/=-])(?<!from )(?:between\s+)?(\d+)[ \t]*(?:-|\u2013|\u2014|to|and)[ \t]*(\d+)\s*"
               rf"(?:{'|'.join(NOUNS.values())})\b")  # fmt: skip


# A setting's name right before the low end: that number is its value, then a dash, then a count ("grad clip 0 — 30
# steps on 2 GPUs", "micro batch 2 - 40 steps").
VALUE_BEFORE_DASH = (rf"\b(?:{'|'.join(SETTING_NAMES.values())}|grad(?:ient)?[ _]clip(?:ping)?|clip)"
                     r"\s*(?:=|:|of|at|is)?\s*$")  # fmt: skip


# Warm-up is counted in steps: "warmup 5 - 10 steps" is the warm-up's range, no value before a count of steps.
WARMUP_BEFORE_DASH = r"\bwarm-?up(?: steps)?\s*(?:=|:|of|at|is)?\s*$"
# A setting given two values with a range's or a choice's word between them, no count after the second: "lr 1e-4 -
# 3e-4", "micro batch 2 - 4", "grad clip 0.5 to 1.0", "micro batch de 2 à 4", "seed 1 or 2" (which one is asked; "grad
# clip 0 - 12 steps" is the clip, then the steps).
SETTING_RANGE = (rf"\b(?:{'|'.join(SETTING_NAMES.values())}|grad(?:ient)?[ _]clip(?:ping)?)\s*(?:=|:|of|at|is)?\s*"
                 r"(?:(?:from|between|de|entre|von|zwischen)\s+)?((?<![\w.])\.\d+(?:e-?\d+)?|\d+(?:\.\d+)?(?:e-?\d+)?)\s*"
                 r"(?:-|\u2013|\u2014|to|à|a|bis|and|et|und|y|or|ou|oder)\s*((?<![\w.])\.\d+(?:e-?\d+)?|\d+(?:\.\d+)?(?:e-?\d+)?)\b"
                 rf"(?!\s*(?:{'|'.join(NOUNS.values())}|%)\b)")  # fmt: skip


def _setting_ranges(lowered: str, entities: Entities) -> None:
    """A setting said with two different values (SETTING_RANGE): which one is asked, never the first taken."""
    for found in re.finditer(SETTING_RANGE, lowered):
        if float(found.group(1)) != float(found.group(2)):
            entities.add("setting_range", found.group(0), found.span())


def _ranges(lowered: str, entities: Entities) -> None:
    """A count said as a range (its low end below its high end): which one is asked, never its top taken."""
    _setting_ranges(lowered, entities)
    for found in re.finditer(COUNT_RANGE, lowered):
        before = lowered[: found.start()]
        said_as_range = re.search(r"\b(?:to|and)\b", found.group(0)) or (
            re.search(WARMUP_BEFORE_DASH, before) and re.search(r"\bsteps?$", found.group(0))
        )
        if re.search(VALUE_BEFORE_DASH, before) and not said_as_range:
            continue  # "grad clip 0 — 30 steps": the clip's value, then the steps
        ranged = found.group(0).startswith("between") or " and " not in found.group(0)  # "4 and 8 steps": two
        if ranged and int(found.group(1)) < int(found.group(2)):
            entities.add("count_range", found.group(0), found.span())


# A count said with no number ("a few trials", "several hundred steps", "a handful of procs"): asked, never guessed.
VAGUE_COUNT = (r"\b(?:(?:a\s+few|a\s+couple(?:\s+of)?|couple\s+of|several|some|many)\s+(?:hundreds|thousands|dozens)"
               r"(?:\s+of)?|(?:hundreds|thousands|dozens)\s+of|a\s+few|few|several|a\s+handful\s+of|handful\s+of|"
               r"a\s+bunch\s+of|a\s+lot\s+of|lots\s+of|a\s+number\s+of)\s+(?:more\s+)?(?:[a-z]+\s+)?")  # fmt: skip


def _vague_counts(lowered: str, entities: Entities) -> None:
    for kind in NOUNS:
        for found in re.finditer(rf"{VAGUE_COUNT}(?:{NOUNS[kind]})\b", lowered):
            entities.add("vague_count", (kind, found.group(0)), found.span())


# A time of day or an offset from an incident's start, as an on-call log writes them ("14:02 UTC", "at 9:30am",
# "T+0", "T+5m", "t-30s"): the numbers in it count nothing.
# "90:10" is a ratio, "9:30" alone could be either: a time of day is one where something says so, its zone or am/pm,
# a word of when before it ("at 9:30", "it's 9:30"), its seconds, or another time so said in the same text (a
# timeline: "14:02 UTC ... 14:05 want layout ranking"); its hour and minutes in range.
CLOCK = (r"\b([01]?\d|2[0-3]):[0-5]\d(?::[0-5]\d)?(?:\s*(?:utc|gmt|cet|pst|est|z|am|pm|h|o'?clock)\b)?|"
         r"\bt\s*[+-]\s*\d+(?:\.\d+)?\s*(?:s|sec|secs|m|min|mins|h|hrs?|d|days?)?\b|"
         r"\b(?:1[0-2]|0?\d)\s*(?:am|pm)\b")  # fmt: skip
CLOCK_SAID = (r"(?:\b(?:at|by|until|till|before|after|around|from|since|starting|it'?s|it\s+is|now|past|"
              r"tonight|tomorrow|today)\s+$)")  # fmt: skip
WHEN_TO_ACT = r"\b(?:at|by|until|till|before|after|around|from|starting)\s+$"


def _clocks(lowered: str) -> list[re.Match]:
    """The times of day and incident offsets in `lowered` (CLOCK), those with something that says they are times."""
    found = list(re.finditer(CLOCK, lowered))

    def said(clock: re.Match) -> bool:
        return bool(
            clock.group(1) is None  # "T+5m", "5pm"
            or re.search(r"\d:\d\d:\d|[a-z]$", clock.group(0))  # seconds, a zone, am/pm
            or re.search(CLOCK_SAID, lowered[: clock.start()])
        )

    timeline = any(said(clock) for clock in found)
    return [clock for clock in found if timeline]


def _number(digits: str, kilo: str, kind: str) -> int:
    value = float(digits) * (1000 if kilo else 1)
    return int(value)


# (or the plan said to start there: "would I need 2 nodes? let's start with 1 node of 8", "we'll start on 1 node")
# (a start only said as the plan chosen: "start with 1 node later" after the nodes planned stays on them)
ON_JUST_ONE_NODE = (r"\b(?:on\s+(?:just|only)|(?:let'?s|let\s+us|we'?ll|we\s+will|i'?ll|i\s+will)\s+(?:just\s+)?start"
                    r"\s+(?:with|on)(?:\s+(?:just|only))?)\s+1\s+node\b")  # fmt: skip


def _hardware(lowered: str, entities: Entities) -> None:
    """Nodes and devices per node: "2 nodes of 8", "8 per node", "16 GPUs across 2 machines" (8 per node)."""
    text = lowered
    # a correction restates a count or a card; "4 nodes... does it fit?" (no number after it) corrects no hardware
    correction = [found for found in re.finditer(CORRECTION, text) if re.search(r"\d", text[found.end() :])]
    start = correction[-1].end() if correction else 0
    part = text[start:]  # a self-correction: what follows it stands
    # (a number glued to a card's name by a hyphen is no count: "my rtx-4090 rig" is one rig)
    said_nodes = re.finditer(rf"(?<![a-z]-)\b{COUNT}\s+{GPU_OF_NODE}(?:{NOUNS['nodes']})\b", part)
    # ("negative on 1 node, assess with 4 nodes": the count refused is none)
    nodes = next((m for m in said_nodes if not re.search(REFUSED_COUNT, part[: m.start()])), None)
    nodes = nodes or re.search(NODE_COPIES, part)
    per_node = re.search(PER_NODE, part)
    total = re.search(  # "16 GPUs across 2 machines"; a model's size ("qwen2.5-72b on 2 nodes") is no total
        rf"\b(\d+)(k?)(?![.\d]|\s*(?:gi?b|b(?:illion)?)\b)\s*(?:x\s*)?(?:[a-z][\w-]*\s+|\d+\s*gb\s+){{0,3}}?"
        rf"(?:{NOUNS['devices']})?\s*(?:[a-z]\w*\s+)?(?:(?:evenly|equally)\s+)?"
        rf"(?:across|over|spread over|split over|on|in)\s+{COUNT}\s+"
        rf"{GPU_OF_NODE}(?:{NOUNS['nodes']})\b",
        part,
    )
    single = re.search(rf"\b1\s+(?:[a-z][\w-]*\s+){{1,2}}(?:{NOUNS['nodes']})\b", part)
    if nodes and re.search(ON_JUST_ONE_NODE, part[nodes.end() :]):
        # "we own 2 nodes, but plan llama-3.1-8b on just 1 node": the nodes owned, then the one planned on
        nodes, single = None, re.search(ON_JUST_ONE_NODE, part)
    if not (nodes or per_node or total) and (held := re.search(HOLDERS, part) or re.search(SAID_AS_VARIABLES, part)):
        span = (start + held.start(), start + held.end())  # nodes by another name, or as a launcher's variables
        entities.add("node_count", int(float(held.group(1))), span)
        entities.add("per_node", int(float(held.group(3))), span)
    if not (nodes or per_node or total) and (held := re.search(HOLDERS_OF, part) or re.search(HOLDERS_OF_EACH, part)):
        span = (start + held.start(), start + held.end())  # "2 rows of 8 h100s": nodes by another name
        entities.add("node_count", int(float(held.group(1))), span)
        entities.add("per_node", int(float(held.group(3))), span)
    if times := re.search(RIG_TIMES, part):  # "8x h200 x 4 nodes": 8 in each of 4 nodes
        span = (start + times.start(), start + times.end())
        entities.add("per_node", int(times.group(1)), span)
        entities.add("node_count", int(times.group(2)), span)
        nodes = single = per_node = total = None
    rig = None if times else re.search(RIG, part) or re.search(RIG_COUNTED, part)
    if rig:  # "an 8x H100 node", "2 8xA100 boxes", "two 8-GPU nodes": the count with "x" or "GPU" is per node
        span = (start + rig.start(), start + rig.end())
        entities.add("per_node", int(rig.group(2)), span)
        copies = re.search(rf"{COPIES_OF}$", part[: rig.start()])  # "4 clones of an 8x H100 node": 4 nodes
        if copies and not rig.group(1):
            entities.add("node_count", int(float(copies.group(1))), (start + copies.start(), span[1]))
        elif rig.group(1) or rig.group(3) in ("node", "machine", "box", "host", "server", "computer", "rig"):
            entities.add("node_count", int(rig.group(1) or 1), span)
        else:  # "on 8x H100 nodes": how many nodes is unsaid
            entities.add("nodes_unsaid", rig.group(0), span)
        nodes = single = per_node = total = None
    if nodes:
        entities.add("node_count", int(float(nodes.group(1))), (start + nodes.start(), start + nodes.end()))
    elif single:  # "a single DGX H100 box": one node, the "1" a count of it
        entities.add("node_count", 1, (start + single.start(), start + single.end()))
    said = re.search(TOTAL_SAID, part)
    if per_node and said and per_node.start() < said.end() and said.start() < per_node.end():
        per_node = None  # "2 nodes with 16 h200s total": 16 is all of them, not each one's
    kept = re.search(PER_NODE, text[:start]) if correction and nodes and not (per_node or total or said) else None
    if per_node:
        entities.add("per_node", per_node_count(per_node), (start + per_node.start(), start + per_node.end()))
    elif kept:  # "2 nodes of 8 h100... no wait, 4 nodes": the nodes corrected, the GPUs in each as said before
        entities.add("per_node", per_node_count(kept), kept.span())
    elif total and nodes and float(total.group(3)) == float(nodes.group(1)):
        devices, count = int(total.group(1)), int(float(total.group(3)))
        if count and devices % count == 0 and devices > count:
            entities.add("per_node", devices // count, (start + total.start(), start + total.end()))
    elif nodes and said:  # "2 nodes with 16 h200s total": 8 on each
        devices, count = int(said.group(1)), int(float(nodes.group(1)))
        if count and devices % count == 0 and devices > count:
            entities.add("per_node", devices // count, (start + said.start(), start + said.end()))
    if (
        (found := re.search(MEMORY_EACH, text))
        or (found := re.search(r"\bwith\s+(\d+(?:\.\d+)?)\s*(gib|gb)\b", text))
        or (found := re.search(MEMORY_VERSION, text))
        or (found := re.search(MEMORY_OF_DEVICES, text))
    ):
        entities.add("device_mem", device_memory(found.group(1)), found.span())
        if found.group(2) == "gb":
            entities.add("device_mem_note", DEVICE_GB_NOTE.format(found.group(1)), found.span())
    if per_node and not nodes and (devices := _total_devices(part)) and devices % per_node_count(per_node) == 0:
        count = devices // per_node_count(per_node)  # "64 H100s, 8 per box": 8 boxes
        if count > 1:
            entities.add("node_count", count, (start + per_node.start(), start + per_node.end()))
    if found := re.search(TIMES, text):
        entities.add("times", float(found.group(1) or 2), found.span())
    if re.search(VAGUE_HARDWARE, text):
        entities.add("vague_hardware", True, (0, 0))


# A count of devices said to be the total beside a count of nodes: "2 nodes with 16 h200s total", "32 GPUs in total
# over 4 nodes".
TOTAL_SAID = (r"\b(\d+)\s*(?:x\s*)?[a-z][\w-]*(?:\s+[a-z][\w-]*)?\s+(?:in\s+)?"
              r"(?:total|overall|altogether|combined|all\s+told)\b")  # fmt: skip


# What each node holds, after the nodes' count: "2 computers, each with 4 A100s", "4 machines each having 8", "two
# racks, each carrying eight H100s", "two (2) nodes, each comprising eight (8) GPUs" (a contract's words).
EACH_HAS = (
    r"(?:(?:and\s+)?each\s+(?:of\s+(?:them|which)\s+|(?:node|machine|box|host|server|one)\s+)?(?:being\s+)?"
    r"(?:with|having|has|holding|holds|containing|of|comprising|comprises|consisting\s+of|consists\s+of|"
    r"carrying|carries|hosting|hosts|housing|houses|packing|packs|(?:fitted|loaded|equipped)\s+with)\s+)"
)


# The GPUs in each node: "2 nodes of 8", "8 per node", "4 machines each with 8", "2 nodes, 8 to each".
PER_NODE = (
    rf"\b(?:{NOUNS['nodes']})\s*,?\s+{EACH_HAS}{COUNT}\b|\b(?:{NOUNS['nodes']})\s+(?:of|with|x)\s+{COUNT}\b|"
    # a model's size is no count of GPUs: "gemma 2 9b on a box of 4" has 4 on its box, not 9
    # ("3 replicas of a node" are 3 nodes: NODE_COPIES)
    rf"\b{COUNT}(?!\s*(?:gi?bs?|b(?:illion)?)\b)\s*(?:(?:[a-z]\w*|\d+\s*gi?bs?)\s+){{0,3}}?(?:per|each|(?<!\bof )a)"
    r"\s+(?:node|machine|box|host|server|computer)\b|"
    rf"\b(?:{NOUNS['nodes']})\s*,?\s+{COUNT}\s*x\s*(?={NODE_GPU}|(?:{NOUNS['devices']})\b)|"
    # "spread across 2 nodes, 8 to each"
    rf"\b(?:{NOUNS['nodes']})\s*,\s*{COUNT}\s+(?:to|in|on|for|at)\s+each\b"
)


# Nodes by any other name, known by the GPUs each holds: "2 panels, each with four H200 breakers on it", "3 racks,
# each carrying 8 gpus" (group 1 the nodes, the last COUNT each one's GPUs); never a count of runs or trials.
HOLDERS = (rf"\b{COUNT}\s+(?!(?:runs|trials|jobs|sweeps|experiments|configs|layouts|steps|models|checkpoints)\b)"
           rf"[a-z]+s\s*,?\s+{EACH_HAS}{COUNT}\s*(?:x\s*)?(?={NODE_GPU}|(?:{NOUNS['devices']})\b)")  # fmt: skip
# Or as groups of GPUs: "2 rows of 8 h100s", "three racks of 8 GPUs" (never groups a layout or a run makes).
HOLDERS_OF = (rf"\b{COUNT}\s+(?!(?:runs|trials|jobs|sweeps|experiments|configs|layouts|steps|models|checkpoints|"
              r"replicas|copies|shards|stages|ranks|pipelines|processes|experts|layers|heads|batches|groups|"
              r"sequences|tokens|sets)\b)"
              rf"[a-z]+s\s+of\s+{COUNT}\s*(?:x\s*)?(?={NODE_GPU}|(?:{NOUNS['devices']})\b)")  # fmt: skip
# Or as groups of things by any name, "each" saying the second count is of the first's: "two villages of 8 houses
# each" (never steps, trials or tokens of runs).
_NOT_HOLDERS = (r"runs|trials|jobs|sweeps|experiments|configs|layouts|steps|models|checkpoints|replicas|copies|shards|"
                r"stages|ranks|pipelines|processes|experts|layers|heads|batches|groups|sequences|samples|tokens|sets|"
                r"hours|minutes|days|epochs|iterations|iters|seeds|points")  # fmt: skip
HOLDERS_OF_EACH = (
    rf"\b{COUNT}\s+(?!(?:{_NOT_HOLDERS})\b)[a-z]+s\s+of\s+{COUNT}\s+(?!(?:{_NOT_HOLDERS})\b)[a-z]+s\s+each\b"
)
# Or said as a launcher's variables: "NODES=2 GPUS_PER_NODE=4" (the same groups).
SAID_AS_VARIABLES = (rf"\b(?:nnodes|num_nodes|nodes)\s*[=:]\s*{COUNT}\b[^\n]{{0,40}}?\b(?:gpus|devices)_?per_"
                     rf"node\s*[=:]\s*{COUNT}\b")  # fmt: skip


# A node by the GPUs in it: "an 8x H100 node", "2 8xA100 boxes" (the first count the nodes', the one with "x" each
# node's GPUs).
RIG = rf"\b(?:(\d+)\s+|(?:an?|one)\s+)?(\d+)\s*x\s*{NODE_GPU}({NOUNS['nodes']})\b"
# Or its count of nodes after the GPUs, with a second "x": "8x h200 x 4 nodes" (group 1 each node's, 2 the nodes).
RIG_TIMES = rf"\b(\d+)\s*x\s*{NODE_GPU}x\s*(\d+)\s+(?:{NOUNS['nodes']})\b"
# Or without the "x", two counts said: "two 8-GPU H100 nodes" (a count alone, "8 gpu nodes", counts the nodes).
RIG_COUNTED = rf"\b(\d+)\s+(\d+)\s*(?:gpus?|cards?)\s+(?:{NODE_GPU})?({NOUNS['nodes']})\b"


# A GPU's memory size as its version: "the 40 gig version", "the 80GB ones", "the 40GB cards".
MEMORY_VERSION = (r"\b(\d+(?:\.\d+)?)\s*(gib|gb)\s+(?:version|variant|ones?|model|edition|cards?|gpus?|kind|type|"
                  r"sort|flavou?r)\b")  # fmt: skip


# Nodes counted as copies of one: "3 replicas of a node with 4 L40S each", "two copies of this box" (the count is
# the nodes', the GPUs said of the one node are each node's).
COPIES_OF = rf"\b{COUNT}\s+(?:identical\s+)?(?:replicas?|copies|clones?|instances?|duplicates?)\s+of\s+"
NODE_COPIES = (rf"{COPIES_OF}(?:a|an|one|the|this|that|our|my)\s+(?:single\s+)?{GPU_OF_NODE}(?:node|machine|box|"
               r"host|server|computer)\b")  # fmt: skip


def device_memory(number: str) -> str:
    """The one form of a device's memory: GiB. A card sold as "24GB" or "80GB" has 24 or 80 GiB (the sizes in
    trainer.hardware's presets), so a user's GB for a device is read as GiB; the reply says so (DEVICE_GB_NOTE)."""
    return f"{number}GiB"


DEVICE_GB_NOTE = "{0}GB per device as {0}GiB, a card's size as sold (say device_mem={0}e9 for decimal bytes)"


# A multiplier of a count: "2 x longer than 20 steps", "2 x as many gpus" (normalised from "twice"), "double the",
# "and with double?" (said alone, of the count before).
TIMES = (r"\b(\d+(?:\.\d+)?)\s*x\s+(?:longer|more|as (?:many|long|much)|the)\b|\b(?:double|doubling)\s+(?:the\s+)?|"
         r"\b(?:with|on|at|use|try|about)\s+(?:the\s+)?double\s*(?=[?.!,]|$)")  # fmt: skip


def per_node_count(found: re.Match) -> int:
    """The count of the per-node pattern that matched (each alternative has its own COUNT group, then its "k")."""
    return int(float(next(g for g in found.groups()[::2] if g)))


def _total_devices(part: str) -> int | None:
    found = re.search(rf"\b(\d+)\s*(?:x\s*)?(?:{NOUNS['devices']})\b", part)
    return int(found.group(1)) if found else None


SIZE_FIRST = rf"\b(\d+(?:\.\d+)?)\s*b(?:illion)?(?:[\s-]+param\w*)?\s+({FAMILIES})(?:[\s-]*(\d+(?:\.\d+)?))?"
SIZE_ONLY = r"\b(\d+(?:\.\d+)?)\s*b(?:illion)?(?:[\s-]+param\w*)?\s+(?:model|llm|transformer|network)\b"
PRESET = re.compile(r"^([a-z]+)-?(?:(\d+(?:\.\d+)?)-)?(\d+(?:\.\d+)?)b$")


# Model families people name that have no preset here: a plan for them is asked about, never another model's.
OTHER_FAMILIES = (r"\b(mixtral|phi[- ]?\d*|falcon|deepseek\w*|gpt[- ]?\w+|bloom\w*|opt-\d+\w*|pythia|olmo\w*|"
                  r"starcoder\w*|codellama|vicuna|mpt|yi|internlm\w*|baichuan\w*|command[- ]r\w*|grok|claude|"
                  r"t5|bert|gemini)\b(?:[\s-]*\d+(?:\.\d+)?\s*x?\s*\d*\s*b\b)?")  # fmt: skip


# How close a misspelt family must be to a preset's ("lamma" is llama, 0.8): read only with a version and a size after
# it, which together name the preset ("lamma 3.1 70b"); the reply says which preset it took.
FAMILY_CLOSE = 0.75


def _misspelt_family(lowered: str) -> re.Match | None:
    for found in re.finditer(r"\b([a-z]{4,})[\s-]*(\d+(?:\.\d+)?)[\s-]+(\d+(?:\.\d+)?)\s*b\b", lowered):
        if difflib.get_close_matches(found.group(1), FAMILIES.split("|"), n=1, cutoff=FAMILY_CLOSE):
            return found
    return None


# A preset said by its whole name with spaces or hyphens between its parts ("gpt oss 20b", "qwen3 30b a3b"): no
# other preset of the family is meant. (Presets named by family and size alone are read below, with their versions.)
# (a size may be said apart from its "b", as dictation writes "twenty b": "gpt oss 20 b")
def _name_pattern(parts: list[str]) -> str:
    return r"\b" + r"[\s-]*".join(re.sub(r"^(\d+)b$", r"\1\\s?b", re.escape(part)) for part in parts) + r"\b"


_PRESET_OF_PATTERN = {
    _name_pattern(key.split("-")): key for key in sorted(MODELS, key=len, reverse=True) if not PRESET.match(key)
}
# Or by its family and total size alone, where one preset has them ("qwen3 235b" is qwen3-235b-a22b): the active
# size left out, never another said in its place ("qwen3 30b a22b" names no preset).
_PRESET_OF_SIZE = {
    _name_pattern(key.split("-")[:-1]) + r"(?![\s-]*a\d)": key
    for key in MODELS
    if not PRESET.match(key)
    and re.fullmatch(r"a\d+b", key.split("-")[-1])
    and sum(other.startswith(key.rsplit("-", 1)[0] + "-") for other in MODELS) == 1
}


# Or by its sizes alone, where they say more than one size and one preset ends with them ("the 30b-a3b" is
# qwen3-30b-a3b, "the 8x22b" mixtral-8x22b): a mixture of experts' sizes name it without its family.
_SIZES = r"\d+(?:\.\d+)?b-a\d+(?:\.\d+)?b|\d+x\d+(?:\.\d+)?b"
_TAILS = [match.group(0) for key in MODELS if (match := re.search(rf"(?:{_SIZES})$", key))]
_PRESET_OF_SIZES = {
    r"(?<![\w.-])" + _name_pattern(tail.split("-")) + r"(?![\w.-])": key
    for tail in _TAILS
    if _TAILS.count(tail) == 1
    for key in MODELS
    if key.endswith("-" + tail)
}


def _preset_named(lowered: str) -> tuple[str, re.Match] | None:
    for pattern, key in (*_PRESET_OF_PATTERN.items(), *_PRESET_OF_SIZE.items(), *_PRESET_OF_SIZES.items()):
        if found := re.search(pattern, lowered):
            return key, found
    return None


# A version said as letters and a number after a family's name ("deepseek-r2", "gemma-x9"): the presets named so
# were read whole before (_preset_named), so one left is a version no preset has.
VERSION_TAG = r"-?([a-z]{1,2}\d+(?:\.\d+)?)\b"


# A count's noun right after a number: "qwen 4 gpus" says no version of qwen.
COUNTED_AFTER = r"\s*(?:x\b|gpus?|devices?|cards?|nodes?|procs?|process|ranks?|steps?|trials?|[ahl]\d)"


# A model said by its size beside the one before: "and the smaller one?", "the biggest model of that family".
RELATIVE_MODEL = (r"\bthe\s+(smaller|smallest|bigger|biggest|larger|largest)\s+(?:one|model|variant|version|sibling|"
                  r"size)\b")  # fmt: skip


def _model(lowered: str, entities: Entities) -> None:
    """A model named loosely ("Llama 3 8B", "llama3.1 70b", "qwen2.5 72b", "a 7B llama"): the preset of that family
    and size whose version starts with the one given; the entity says which preset it took. A family without a
    preset ("mixtral", "falcon 40b") is a model_unknown: asked about."""
    found = re.search(OTHER_FAMILIES, lowered)
    if found and not any(k.replace("-", "").startswith(re.sub(r"[\s-]", "", found.group(1))) for k in MODELS):
        entities.add("model_unknown", found.group(0), found.span())
        return
    if named := _preset_named(lowered):  # "gpt oss 20b", "gpt-oss-120b": that preset, its size telling it apart
        key, said = named
        entities.add("model", key, said.span())
        if not re.fullmatch(_name_pattern(key.split("-")), said.group(0)):
            entities.add("model_note", f"{said.group(0)!r} as the preset {key}", said.span())
        return
    found = re.search(rf"\b({FAMILIES})[\s-]*(\d+(?:\.\d+)?)?[\s-]+(\d+(?:\.\d+)?)\s*b\b", lowered)
    if found:
        family, version, size = found.groups()
    elif found := re.search(SIZE_FIRST, lowered):
        size, family, version = found.groups()
    elif found := re.search(SIZE_ONLY, lowered):
        size, family, version = found.group(1), None, None
    elif found := re.search(rf"\b({FAMILIES})(?:[\s-]*(\d+(?:\.\d+)?))?\b(?!\s*[-.]?\d)", lowered):
        family, version = found.groups()
        tag = re.match(VERSION_TAG, lowered[found.end() :])
        if tag and not version and not re.match(GPU_NAME, tag.group(1)):  # "deepseek-r2": no preset's version
            entities.add("model_unknown", found.group(0) + tag.group(0), (found.start(), found.end() + tag.end()))
            return
        matches = [k for k in MODELS if PRESET.match(k) and PRESET.match(k).group(1) == family
                   and (not version or (PRESET.match(k).group(2) or "").startswith(version))]  # fmt: skip
        if not version:  # presets not named by family and size ("mixtral-8x7b", "deepseek-v3"): by family alone
            matches = matches or [k for k in MODELS if k.split("-")[0] == family]
        if len(matches) == 1:
            entities.add("model", matches[0], found.span())
            entities.add("model_note", f"{found.group(0)!r} as the preset {matches[0]}", found.span())
        elif matches:
            entities.add("model_choice", matches, found.span())
        elif version and not re.match(COUNTED_AFTER, lowered[found.end() :]):
            entities.add("model_unknown", found.group(0), found.span())  # "llama-4 scout": a version with no preset
        return
    elif found := _misspelt_family(lowered):
        family, version, size = found.groups()
        family = difflib.get_close_matches(family, FAMILIES.split("|"), n=1, cutoff=FAMILY_CLOSE)[0]
    else:
        if bare := re.search(r"(?<![\w.])(\d+(?:\.\d+)?)\s*b\b", lowered):
            entities.add("model_size", bare.group(1), bare.span())  # "and for 70b?": the family of the plan before
        elif relative := re.search(RELATIVE_MODEL, lowered):  # "and the smaller one?": of the plan before's family
            entities.add("model_relative", relative.group(1), relative.span())
        return
    matches = []
    for key in MODELS:
        parsed = PRESET.match(key)
        if not parsed or family not in (None, parsed.group(1)) or float(parsed.group(3)) != float(size):
            continue
        if version and not (parsed.group(2) or "").startswith(version):
            continue
        matches.append(key)
    said = found.group(0)
    if len(matches) == 1:
        entities.add("model", matches[0], found.span())
        if matches[0] != said.replace(" ", "-"):
            entities.add("model_note", f"{said!r} as the preset {matches[0]}", found.span())
    elif len(matches) > 1:
        entities.add("model_choice", matches, found.span())


def _switches(lowered: str, entities: Entities) -> None:
    """Boolean settings with their negation: "packing off", "no packing", "don't pack", "packing turned off",
    "without activation checkpointing" are false; "turn on packing", "with AC", "packing: true" are true. Every
    mention is read with the words around it; a bare name joined to the one before ("disable act ckpt and packing",
    "without AC or packing") takes that one's value. A setting whose mentions disagree (and no self-correction
    settles it) or that no mention gives a value is a doubt ("switch_doubt"): a launch asks about it, never guesses."""
    mentions = sorted(
        ((m, key) for key, name in SWITCHES.items() for m in re.finditer(rf"\b(?:{name})\b", lowered)),
        key=lambda found: found[0].start(),
    )
    values: list[str | None] = []
    joined = [False] + [
        bool(re.fullmatch(COORDINATED, lowered[before[0].end() : after[0].start()]))
        and not _told_to_do("", after[0], lowered[after[0].end() :])  # "... and pack the sequences": its own verb
        for before, after in itertools.pairwise(mentions)
    ]
    for index, (mention, _) in enumerate(mentions):
        value = _switch_value(lowered, mention)
        if value is None and joined[index]:
            value = values[-1]
        if value is None and (_listed(lowered, mention) or _with_list(lowered, mention)):
            value = "true"
        values.append(value)
    # "don't no compile", "not without packing": a negation of a negation, on or off asked, never guessed
    doubted: set[str] = {key for mention, key in mentions if re.search(DOUBLE_NEGATED, lowered[: mention.start()])}
    for first, last in _chains(joined):  # "packing and compile both disabled": the state after a list is each one's
        if not (state := re.match(CHAIN_STATE, lowered[mentions[last][0].end() :])):
            continue
        value = "false" if state.group(2) in ("off", "disabled", "false") else "true"
        for index in range(first, last + 1):
            if state.group(1) or values[index] in (None, value):  # "both", "all": the list's state wins
                values[index] = value
            elif re.search(r"\bno\s+$", lowered[: mentions[index][0].start()]):  # "no compile and packing on": its own
                continue
            else:  # "with packing and compile off": compile on (with) or off? asked, never guessed
                doubted.add(mentions[index][1])
    pronouns = [(found, "false") for found in re.finditer(PRONOUN_OFF, lowered)]
    pronouns += [(found, "true") for found in re.finditer(PRONOUN_ON, lowered)]  # "packing off - actually keep it on"
    pronouns += [(found, "keep") for found in re.finditer(PRONOUN_KEPT, lowered)]  # "no packing -- wait, keep it"
    for found, value in pronouns:  # "with packing... actually no, without it": it is packing
        before = [(m, k) for m, k in mentions if m.end() <= found.start()]
        if before:
            mentions.append((found, before[-1][1]))
            clause = re.split(CLAUSE, lowered[max(0, found.start() - 60) : found.start()])[-1]
            values.append("keep" if value == "false" and re.search(OFF_NEGATED, clause) else value)
    for (mention, key), value in zip(mentions, values, strict=True):
        entities.add("switch_mention", (key, value), mention.span())
    corrected = [m.end() for m in re.finditer(SWITCH_CORRECTION, lowered)]
    for key in SWITCHES:
        said = [(m, v) for (m, k), v in zip(mentions, values, strict=True) if k == key]
        # "packing on... no wait, off": the last (a later mention with no state corrects nothing: "without compile,
        # actually some problems with the compilation")
        if corrected and any(m.start() >= corrected[-1] and v is not None for m, v in said):
            said = [(m, v) for m, v in said if m.start() >= corrected[-1]]
        stated = {v for _, v in said if v not in (None, "keep")} | ({"true", "false"} if key in doubted else set())
        if _kept_after_off(lowered, said):  # "no no packing, keep it": off, then kept, with no correction between
            stated |= {"true", "false"}
        if not stated and any(v == "keep" for _, v in said):
            # "leave packing as is", "don't turn packing off": nothing to set (a launch drops the grammar's reading
            # of "disable packing" in it), nothing to ask
            entities.add("switch_kept", key, next(m for m, v in said if v == "keep").span())
            continue
        if len(stated) == 1:
            value = stated.pop()
            mention = next(m for m, v in said if v == value)
            entities.add("switch", f"{key}={value}", mention.span())
        elif said:
            why = "both on and off" if stated else "neither on nor off"
            entities.add("switch_doubt", (key, why), said[0][0].span())


DOUBLE_NEGATED = (r"\b(?:don'?t|do\s+not|not|never)\s+(?:\w+\s+){0,2}?(?:no|not|without|w/o|never)\s+"
                  r"(?:the\s+)?$")  # fmt: skip


def _listed(lowered: str, mention: re.Match) -> bool:
    """A setting named alone inside a list of what to use ("hsdp on 8 gpus, bf16, activation checkpointing,
    lr 2e-4"): on, as "with" it. Only between two commas: last in a sentence it may be a question or an afterthought
    ("launch 10 steps on 2 gpus, packing" is asked), and after "and" it may share a state said before it ("packing
    off and compile" is asked)."""
    return bool(re.search(r"[,;]\s*\Z", lowered[: mention.start()])) and bool(
        re.match(r"\s*[,;]\s*\S", lowered[mention.end() :])
    )


# A list of what to use opened by "with" ("with micro batch 4 and activation checkpointing"): each item in it is
# used, a setting named bare there on. Up to the setting, no state or negation may stand in it ("with packing off and
# compile" is asked about): only settings, values and counts.
WITH_LIST = r"\b(?:with|using|plus)\s+((?:[\w.=-]+\s*,?\s+){0,7}?)(?:and|&|plus|as well as)\s+(?:the\s+|also\s+)?\Z"
STATE_WORDS = (r"\b(?:off|on(?!\s+\d)|no|not|without|disabled?|enabled?|false|true|never|don'?t|w/o|skip|but|then|"
               r"or|nor)\b")  # fmt: skip


# Or added by "plus", "along with": "2 gpus sharded plus activation checkpointing" (unless a state was said before it
# in the sentence: "packing off plus compile" is asked).
ADDED = r"\b(?:plus|along with|together with|as well as)\s+(?:the\s+)?\Z"


def _with_list(lowered: str, mention: re.Match) -> bool:
    before = lowered[: mention.start()]
    if added := re.search(ADDED, before):
        return not re.search(STATE_WORDS, re.split(r"[.;!?]\s", before[: added.start()])[-1])
    found = re.search(WITH_LIST, before)
    return bool(found) and not re.search(STATE_WORDS, found.group(1))


# The state stated once after a list of settings: "packing and compile both disabled", "AC and packing: on".
CHAIN_STATE = (r"^\s*(?:(?:are|turned|switched|set|being|to|=|:)\s*)*((?:both|all|each|all of them|both of them)\s+)?"
               r"(?:(?:are|turned|switched|set|being|to|=|:)\s*)*(off|disabled|false|on|enabled|true)\b")  # fmt: skip


def _chains(joined: list[bool]) -> list[tuple[int, int]]:
    """(first, last) index of each run of two or more settings joined by conjunctions."""
    chains, start = [], 0
    for index in range(1, len(joined) + 1):
        if index == len(joined) or not joined[index]:
            if index - 1 > start:
                chains.append((start, index - 1))
            start = index
    return chains


# A self-correction before a setting's state (grammar.CORRECTION's and those said of a setting: "no packing -- wait,
# scrap that, keep packing"; a proposal asked and answered: "w/o packing? nope, with it", "packing? nah, keep it").
SWITCH_CORRECTION = (rf"{CORRECTION}|\b(?:scrap|forget|ignore)\s+that\b|\bi misspoke\b|"
                     r"(?:--|\u2014|[,;.!])\s*wait\b|\?\s*(?:no|nope|nah|negative)\b")  # fmt: skip


def _kept_after_off(lowered: str, said: list[tuple[re.Match, str | None]]) -> bool:
    """Whether a setting said off is said kept after it ("no no packing, keep it"): which one is meant? Its troubles
    named after it keep nothing ("no torch.compile, we have no time to debug compile issues": why it is off)."""
    values = [v for m, v in said if v is not None and not re.match(TROUBLE_AFTER, lowered[m.end() :])]
    return "false" in values and "keep" in values[values.index("false") :]


# A setting named before kept by a pronoun, the end of its clause: "no packing -- wait, keep it" (not "keep it off",
# "keep it simple", "keep it that way").
PRONOUN_KEPT = r"\bkeep\s+(?:it|that|this)\s*(?=$|[,;.!?)]|\s+(?:please|then|instead|after all)\b)"


# A negation of a setting named before by a pronoun: "without it", "turn that off", "disable it".
PRONOUN_OFF = (r"\b(?:without|w/o|disable|no more|turn off|switch off|drop|remove)\s+(?:it|that|this)\b|"
               r"\b(?:turn|switch)\s+(?:it|that|this)\s+off\b")  # fmt: skip


PRONOUN_ON = (r"\b(?:keep|leave|turn|switch|put)\s+(?:it|that|this)\s+(?:back\s+)?on\b|"
              # the answer to a proposal asked: "w/o packing? nope, with it"
              r"(?:(?<=\bno, )|(?<=\bnope, )|(?<=\bnah, )|(?<=\bno )|(?<=\bnope )|(?<=\bnah ))with\s+(?:it|that)\b|"
              r"\b(?:enable|re-?enable)\s+(?:it|that|this)\b")  # fmt: skip


# Only a conjunction between two settings' names: the second shares the first one's verb ("disable X and Y").
COORDINATED = r"\s*(?:,\s*)?(?:and|or|nor|&|plus|as well as|,)\s*(?:the\s+|also\s+)?"


# A negation of the speaker's own mind, no setting's: "I don't know the technical side", "I don't really understand
# packing" (asked about, never read as packing off).
SPEAKERS_MIND = (r"\b(?:don'?t|do not|never)\s+(?:really\s+|fully\s+)?(?:know|understand|get|care|mind|think|remember|"
                 r"follow)\b")  # fmt: skip


# A negation of something said of a setting, not of the setting: "no pressure on packing either way", "no rush on
# packing changes" leave it as it is.
NO_HURRY_ON = (r"\bno\s+(?:pressure|rush|hurry|stress|strong\s+(?:feelings|opinions?)|preference|opinion)\s+"
               r"(?:on|with|about|regarding|for|re:?)(?:\s+(?:the|any))?")  # fmt: skip


ARTICLES = {"the", "a", "an", "that", "this"}
VAGUE_NOUNS = {"thing", "stuff", "feature", "option", "setting", "mode", "trick"}


def _switch_value(lowered: str, mention: re.Match) -> str | None:
    # Only the words of the mention's own clause: "without packing, with AC" does not negate AC.
    before = re.split(CLAUSE, lowered[max(0, mention.start() - 60) : mention.start()])[-1]
    before = re.sub(SPEAKERS_MIND, " ", before)
    if re.search(NO_HURRY_ON + r"\s*$", before):
        return "keep"  # "no rush on packing changes": the hurry negated, no setting changed
    if re.search(r"\b(?:or|nor)\s*$", before):  # "without activation checkpointing or packing": both off
        return "false" if re.search(NEGATION_BEFORE, before) else None
    after = re.split(CLAUSE, lowered[mention.end() : mention.end() + 30])[0]
    # (articles and a vague noun after the name are no words of the state: "don't switch on the activation
    # checkpointing thing" is "don't switch on activation checkpointing")
    before_words = " ".join([w for w in re.findall(r"[\w'/]+", before) if w not in ARTICLES][-3:])
    after_words = " ".join([w for w in re.findall(r"[\w'/]+", after) if w not in VAGUE_NOUNS][:3])
    if re.search(SAID_AS_A_CAUSE, lowered[max(0, mention.start() - 80) : mention.start()]) and re.search(
        r"\b(?:broke|failed|crashed|diverged|hurt|blew up|went wrong|caused)\b", lowered[mention.end() :]
    ):
        return None  # "packing on, because no packing broke things last time": why, not what to do
    if re.match(TROUBLE_AFTER, after):
        return "keep"  # "we don't want packing issues again": the issues negated, packing left as it is
    if re.match(NOT_WANTED_AFTER, after):  # "excluding packing isn't what I want": the exclusion not wanted
        return "keep" if re.search(NEGATION_BEFORE, before_words) else "false"
    if re.search(KEEP_BEFORE, before_words) and re.match(r"\s*out\b", after):
        return "false"  # "leave packing out": left out of the run, not left as it is
    if re.search(KEEP_BEFORE, before_words) and not re.search(STATE_AFTER, after_words):
        return "keep"  # "don't touch packing", "leave AC as it is": no change, and no negation
    if _off_taken_back(lowered[: mention.start()], before, after):
        return "keep"  # "never turn off packing", "I don't want packing turned off": it stays as it is
    if re.search(SPARED_FROM_OFF, lowered[max(0, mention.start() - 80) : mention.start()]):
        return "keep"  # "ban the bad habits, not packing": packing spared
    if re.search(BAN_SPOKEN_OF, before_words):
        return None  # "lift the ban on packing": its state, asked
    if re.match(FORBID_ORDERED, before):
        return None if re.match(FORBID_NOT_NOW, after) else "false"  # "ban packing? maybe": asked
    if re.search(NEGATION_BEFORE, before_words) or re.search(NEGATION_AFTER, after_words):
        return "false"
    if re.search(NEGATED_BY_WORD, before_words) and not re.match(r"\s*on\b", after):
        return "false"  # ("hold the packing on" holds it on)
    if re.search(SETTING_VERB, before_words) and (state := re.match(STATE_AFTER_A_WORD, after)):
        return "true" if state.group(1) == "on" else "false"  # "lay the activation checkpointing mulch on"
    if re.search(SPOKEN_OF, before_words):
        return None  # "some problems with the compilation": what is said of it, not a use of it
    if re.search(r"\b(?:with|enable|enabling|turn on|switch on|use|using|w/|on)\s*$", before_words + " ") or re.search(
        rf"^(?:\s*(?:{LINKING}))*\s*(?:on|enabled|true|yes|1)\b", after_words
    ):
        return "true"
    if _told_to_do(before, mention, after) and not _shares_a_negation(lowered[: mention.start()]):
        return "true"  # "pack the sequences", "checkpoint the activations": the trainer told to do it
    if re.search(KEEP_AFTER, after):
        return "keep"
    return None


# Negations that close right on the setting's name (each would read loosely elsewhere: "a negative effect on
# packing", "hold onto the packing"): "negative compile", "negative on packing" (radio talk), "hold the packing" (as a
# diner's "hold the mayo").
NEGATED_BY_WORD = r"\b(?:negative(?:\s+on)?|hold)\s*$"
# A cause said of an earlier run, the setting in it: "because no packing broke things last time".
SAID_AS_A_CAUSE = r"\b(?:because|since|'cause|cuz|seeing as)\b[^.;!?,]*$"
# Or named as what troubles came from: "because we don't want packing issues again", "no compile errors so far".
TROUBLE_AFTER = (r"^\s+(?:issues?|problems?|troubles?|bugs?|errors?|crash(?:es)?|surprises?|regressions?|weirdness|"
                 r"instabilit(?:y|ies)|glitch(?:es)?|headaches?)\b")  # fmt: skip
# A setting named with a word of the user's own after it ("mulch", "magic", "goodness"), after a verb that puts it on or
# turns it, then its state, last in the clause: "lay the activation checkpointing mulch on", "flip the compile magic
# off" ("turn on the packing thing" is read by VAGUE_NOUNS).
SETTING_VERB = r"\b(?:lay|put|slap|throw|pile|layer|toss|stick|turn|switch|flip)\s*$"
STATE_AFTER_A_WORD = r"^\s*[a-z]+\s+(on|off)\s*(?:please\s*)?$"
# A setting spoken of, not used: "problems with the compilation", "no issues with packing so far"; time spent on it
# ("knackered from waiting on compile", "sick of waiting for the compilation": its "on" is no state).
SPOKEN_OF = (r"\b(?:issues?|problems?|troubles?|bugs?|errors?|crash(?:es)?|difficult(?:y|ies)|struggles?)\s+"
             r"(?:with|in|from|of|about|around)\s*$|"
             r"\b(?:wait(?:s|ed|ing)?|stuck|hung|blocked|sat|sitting|hours|minutes|ages|forever)\s+"
             r"(?:on|for)\s*$")  # fmt: skip


# Turning a setting off, said right before it ("disable packing", "turn off the compile") or after it ("packing
# turned off", "compile should be off").
OFF_BEFORE = (r"\b(?:disabl(?:e|ed|ing)(?:\s+of)?|(?:turn|switch|shut)(?:s|ed|ing)?\s+off(?:\s+of)?|"
              # or left out of the run: "don't drop packing", "don't leave out packing" (negated: kept)
              r"drop(?:s|ped|ping)?|remov(?:e|es|ed|ing)|omit(?:s|ted|ting)?|exclud(?:e|es|ed|ing)|"
              r"ditch(?:es|ed|ing)?|(?:leave|leaves|leaving|left)\s+out|"
              # refused outright ("don't forbid packing": kept)
              r"forbid(?:s|ding)?|forbade|ban(?:s|ned|ning)?|prohibit(?:s|ed|ing)?|disallow(?:s|ed|ing)?|"
              r"veto(?:es|ed|ing)?|den(?:y|ies|ied|ying)|"
              r"(?:turn|switch|shut)(?:s|ed|ing)?\s+(?=\S+\s+off\b))\s*(?:the\s+)?$")  # fmt: skip
OFF_AFTER = rf"^(?:\s*(?:{LINKING}))*\s*(?:off|disabled|false)\b"
# A negation of that turning off, a few words before it: "don't switch packing off", "never turn off AC", "there's no
# reason to disable packing", "who said anything about turning packing off?", "without disabling packing", "no
# turning packing off" (not "why not disable it", a suggestion, nor "don't forget to turn packing off").
OFF_NEGATED = (r"(?:\b(?:don'?t|do not|never(?!\s*mind)|(?<!why )(?<!if )(?<!or )not|no (?:reason|need) to|won'?t|"
               r"without|no(?=\s+\w+ing\b|\s*$)|"
               r"will not|shouldn'?t|should not|mustn'?t|must not|who said anything about|"
               # an idea of it dropped: "ditch the idea of turning packing off"
               r"(?:ditch|scrap|drop|forget|abandon)\s+(?:the|that|this)\s+(?:idea|thought|plan|notion)\s+of|"
               r"(?:nobody|no one)\s+(?:said|asked|told|wants?|wanted|needs?))\b)"
               # ("don't bother with warmup" is no such case, but "don't bother turning packing off" is)
               r"(?!\s+(?:forget|hesitate|even|bother\s+(?:with|about))\b)(?:\s+[\w']+){0,3}\s*$")  # fmt: skip
# The turning off refused in an answer right after it: "turning packing off: nope", "packing off? no".
OFF_ANSWERED_NO = (rf"^(?:\s*(?:off|{LINKING})\b)*\s*(?:[:?]|\s-+)?\s*"
                   r"(?:nope|nah|negative|no way|not happening)\s*(?:$|[.!?])|"
                   rf"^(?:\s*(?:off|{LINKING})\b)*\s*\?\s*no\s*(?:$|[.!])")  # fmt: skip
# Its negation said not wanted: "excluding packing isn't what I want" (packing kept), "packing is not what we need".
NOT_WANTED_AFTER = r"^\s*(?:isn'?t|is not|ain'?t|'?s not)\s+(?:what|something)\s+(?:i|we)\b"
# "Don't change anything else, not even packing": what is kept, named.
NOT_EVEN_CHANGED = (r"\b(?:(?:don'?t|do not|never)\s+(?:change|touch|modify|alter)|leave\s+(?:everything|anything|all|"
                    r"the rest)\b)[^.;!?]*\bnot even\s*$")  # fmt: skip


def _off_taken_back(said_before: str, clause_before: str, after: str) -> bool:
    """Whether turning the setting off is itself negated (a negation of a negation): the setting stays as it is,
    neither on nor off. "Don't turn packing on" is no such case: off, as said."""
    if re.search(NOT_EVEN_CHANGED, said_before):
        return True
    if off := re.search(OFF_BEFORE, clause_before):
        return bool(re.search(OFF_NEGATED, clause_before[: off.start()]) or re.match(OFF_ANSWERED_NO, after))
    return bool(re.match(OFF_AFTER, after)) and bool(
        re.search(OFF_NEGATED, clause_before) or re.match(OFF_ANSWERED_NO, after)
    )


# A setting's verb told to the trainer with its object, first in its clause: "pack the sequences", "please compile
# the model", "also checkpoint the activations" (a negation before it is read first; "should we pack them?" asks).
TOLD_BEFORE = r"^\s*(?:(?:please|pls|also|do|just|then|so|and|but|let'?s)\s+)*$"
TOLD_VERB = r"pack|compile|recompute|checkpoint(?:ing)?\s.*activations"
TOLD_OBJECT = (r"^\s+(?:the\s+|our\s+|its\s+|all\s+(?:the\s+)?)?"
               r"(?:sequences?|documents?|samples?|model|it|activations)\b")  # fmt: skip


# What makes the verb no instruction: an alternative or a question in its clause ("compile it or not?").
TOLD_UNSURE = r"^[^,;.!]*?(?:\bor\b|\?)"


def _told_to_do(before: str, mention: re.Match, after: str) -> bool:
    verb = mention.group(0)
    told = re.fullmatch(TOLD_VERB, verb) and (verb.endswith("activations") or re.match(TOLD_OBJECT, after))
    return bool(told) and bool(re.match(TOLD_BEFORE, before)) and not re.match(TOLD_UNSURE, after)


def _shares_a_negation(said_before: str) -> bool:
    """Whether a verb joined by "and" may share a negated verb said before it ("never pack the sequences and compile
    the model": compile too, or not?): asked, never read as on. Not after a comma ("don't compile, and pack the
    sequences") nor after a negated noun ("no packing and compile the model"): its own clause."""
    joined = re.search(r"(?<!,)\s+(?:and|or|nor)\s+(?:(?:please|also|then|just)\s+)*$", said_before)
    earlier = said_before[max(0, joined.start() - 60) : joined.start()] if joined else ""
    return bool(re.search(r"\b(?:don'?t|do not|never|not)\b", earlier))


# A setting named to be left as it is: neither on nor off, and no doubt either.
KEEP_BEFORE = r"\b(?:(?:don'?t|do not|never)\s+(?:touch|change|modify|alter|mess with)|leave|keep)(?:\s+the)?\s*$"
KEEP_AFTER = (
    r"^\s*(?:(?:is\s+|are\s+)?(?:left|kept|stays?|remains?)\s+)?(?:as (?:it )?is|unchanged|as before|untouched|alone|"
    r"at (?:its |the )?default)\b"
)
STATE_AFTER = rf"^(?:\s*(?:{LINKING}))*\s*(?:on|off|enabled|disabled|true|false)\b"


# A value said to stay as it is: "optimizer stays adam", "keep adam", "leave it on adam" (no change asked).
KEPT_AS_IS = (r"\b(?:stays?|remains?|keeps?|keeping|leave|leaving|still|unchanged)\s+"
              r"(?:(?:the|as|at|on|with|it|optimi[sz]er)\s+)*$")  # fmt: skip


# A size word said of a stand-in for the launch, as the heading of its facts: "same dish, bigger pan: 8 GPUs, ...",
# "larger oven: ..." (a noun, then the facts after a colon, comma or dash). Not of a thing a GPU count does not
# answer ("a bigger model, 8 GPUs"), nor alone ("on 2 gpus but smaller": smaller what?).
SIZED_THING = (
    r"(?:model|models|one|ones|batch|config\w*|experiment|dataset|data|network|net|seq\w*|context|"
    r"lr|learning|vocab\w*|hidden|layers?|checkpoint|runs?|gpus?|cards?|nodes?|machines?|tokens?)"
)
METAPHOR_HEADING = rf"\s+(?!{SIZED_THING}\b)[a-z]+\s*(?::|,|\s-+\s|\u2014)"


def _size_said_of_nothing(vague: list[str], lowered: str) -> list[str]:
    """The vague words less "bigger", "larger", "smaller" said of a stand-in heading the facts: with the GPUs or
    layout stated, the size asked for is said."""
    found = list(re.finditer(VAGUE_CHANGE, lowered))
    loose = [m for m in found if m.group(0) in ("bigger", "larger", "smaller")]
    sized = [m.group(0) for m in found if m not in loose or not re.match(METAPHOR_HEADING, lowered[m.end() :])]
    return [word for word in vague if word in sized]


def _optimizer(lowered: str, entities: Entities) -> None:
    """The optimizer the sentence sets: the first one not taken back ("not adam this time, plain sgd" is sgd); one
    only taken back ("no adam") asks which instead."""
    said = re.finditer(rf"\b({OPTIMIZERS})\b(?:\s+optimi[sz]er)?|\boptimi[sz]er\s*(?:=|:|to|of)?\s*({OPTIMIZERS})\b",
                       lowered)  # fmt: skip
    # an optimizer kept as it is ("Optimizer stays Adam", "keep adam") changes nothing: no value to set
    said = [m for m in said if not re.search(KEPT_AS_IS, lowered[: m.start()])]
    found = next((m for m in said if not re.search(NEGATED_SETTING, lowered[: m.start()])), None)
    if found:
        entities.add("optimizer", found.group(1) or found.group(2), found.span())
    elif said or re.search(r"\b(?:different|another|other|new)\s+optimi[sz]er\b", lowered):
        entities.add("vague_setting", "optimizer", (0, 0))
    if re.search(r"\b(?:change|set|different|another|other|new|tweak|adjust)\s+(?:the\s+)?(?:seq(?:uence)?[ _]?len"
                 r"(?:gth)?|context length)\b(?!\s*(?:to|=|of)?\s*\d)", lowered):  # fmt: skip
        entities.add("vague_setting", "seq_len", (0, 0))
    compared = list(re.finditer(COMPARED_SETTING, lowered))
    for found in compared:  # "a bigger micro batch": which size, exactly? ("a bigger micro batch of 8" says it)
        if not found.group(2):
            key = next(k for k, name in SETTING_NAMES.items() if re.fullmatch(name, found.group(1)))
            entities.add("vague_setting", key, found.span())
    rest = re.sub(COMPARED_SETTING, " ", lowered) if compared else lowered
    vague = [found.group(0) for found in re.finditer(VAGUE_CHANGE, re.sub(f"{PURPOSE}|{CAUSE}", " ", rest))]
    if entities.has("steps"):  # "have it go longer this time, 200 steps": how much longer, said as its step count
        vague = [word for word in vague if word not in ("longer", "shorter")]
    if entities.has("devices", "nproc", "layout"):  # "same dish, bigger pan: ... on 8 GPUs": how much bigger, said
        vague = _size_said_of_nothing(vague, rest)  # as its GPUs ("a bigger model on 8 GPUs" still asks which)
    if vague:
        entities.add("vague_setting", "other", (0, 0))
    if re.search(VAGUE_REFERENCE, lowered):
        entities.add("vague_reference", True, (0, 0))
    for found in re.finditer(UNKNOWN_SOURCE, lowered):
        if not re.match(SPELLED_OUT, lowered[found.end() :]):
            entities.add("unknown_source", found.group(0), found.span())


def _names(text: str, entities: Entities, known: Known) -> None:
    """Runs, sweeps, checkpoints and files the sentence names, checked against the repository."""
    lowered = text.lower()
    for found in re.finditer(r"(?<![\w/.-])((?:runs|sweeps)/[\w.-]+(?:/[\w.-]+)*)", text):
        path = found.group(1).rstrip(".,;:)?!")
        kind = "checkpoint" if "/checkpoint/" in path else "file" if re.search(r"\.\w+$", path) else path.split("/")[0]
        entities.add({"runs": "run", "sweeps": "sweep"}.get(kind, kind), path, found.span())
        if kind in ("checkpoint", "file"):
            entities.add("run", "/".join(path.split("/")[:2]), found.span())
    # (the suffix in any case: "PRINT MESHPILOT.YAML" shouts the file's name, which the repository keeps in lower case)
    for found in re.finditer(r"(?<![\w/.-])([\w.-]+(?:/[\w.-]+)*\.(?:ya?ml|md|json|jsonl|txt|toml|py|csv|log))\b",
                             text, flags=re.I):  # fmt: skip
        if found.group(1).lower().startswith(("runs/", "sweeps/")):
            continue
        path = known.file(found.group(1)) or known.file(found.group(1).lower()) or found.group(1)
        entities.add("file", path, found.span())
    # a name ends on a letter or digit: "wait for run r1." names r1, its full stop ends the sentence
    tokens = list(re.finditer(r"(?<![\w/.=-])[a-z0-9](?:[\w.]*\w)?(?:-[\w.]*\w)*(?![\w/=])", lowered))
    for index in range(len(tokens)):
        _name(tokens[index : index + 3], entities, known)
    for found in re.finditer(r"\b(?:the|that|this|my)\s+([a-z][\w-]+)(?:\s+(sweep|run|model|one))?\b", lowered):
        word, noun = found.groups()
        if word in NOT_NAMES:
            continue
        for kind, label in (("runs", "run"), ("sweeps", "sweep")):
            nouns = (
                (None, "one", "model", label) if len(word) >= 4 else (label,)
            )  # "the lr" is no sweep, "the lr sweep" is
            if noun in nouns and (path := known.resolve(word, kind)):
                entities.add(label, path, found.span())
    for found in re.finditer(BARE_NAMED, lowered):  # "baseline run tok/s": a word of its name before its noun
        word, label = found.groups()
        if word not in GENERIC and len(word) >= 4 and (path := known.resolve(word, label + "s")):
            entities.add(label, path, (found.start(1), found.end(2)))
    _described(lowered, entities, known)
    for found in re.finditer(DESCRIBED_BY_VALUE, lowered):  # "the one with 1024 tokens": asked unless it fits
        entities.add("unknown_description", found.group(0), found.span())  # the experiment named (agent.understanding)
    # "the notes file", "my notes"; and the file by what it holds, as some learners say it ("the file of notes")
    for found in re.finditer(r"\b(?:the|my|our|your)\s+(?:file\s+(?:of|with|for)\s+(?:the\s+|my\s+|our\s+)?)?(\w+)"
                             r"(?:\s+file)?\b", lowered):  # fmt: skip
        if found.group(1) not in NOT_FILES and (path := known.stem(found.group(1))):
            entities.add("file", path, found.span())
    found = re.search(MAIN_EXPERIMENT, lowered)
    # ("`configs/long.yaml` ... the experiment's own model": the experiment named before, not the main one)
    named_file = any(e.kind == "file" and str(e.value).endswith((".yaml", ".yml")) for e in entities.found)
    if found and named_file and not found.group(1):
        found = None
    if found and known.file("meshpilot.yaml") and not (found.group(1) and known.config(found.group(1))):
        entities.add("experiment", "meshpilot.yaml", found.span())  # (configs/default.yaml is named as it is)
    # "the long config", and its stem first in a compound: "the long-context config", "the long-seq experiment", "the
    # long sequence experiment"
    for found in re.finditer(r"\b(?=(?:the\s+)?(\w+)(?:-\w+|\s+(?:sequence|seq|context|ctx|seqlen)s?)?\s+"
                             r"(?:config(?:uration)?|experiment)(?:\s+file)?\b)",
                             lowered):  # fmt: skip
        if path := known.config(found.group(1)):
            entities.add("experiment", path, found.span(1))
    # the noun first, what tells it apart after: "the experiment file for the long sequence", "the config with the long
    # context" (that file, never the main experiment the bare noun would be)
    for found in re.finditer(CONFIG_FOR, lowered):
        if path := known.config(found.group(1)):
            entities.found = [e for e in entities.found if e.kind != "experiment" or e.span[1] <= found.start()
                              or e.span[0] >= found.end()]  # fmt: skip
            entities.add("experiment", path, found.span(1))
    # "the 1024 config": the one experiment file that value tells apart (its seq_len), no count of configs to try
    for found in re.finditer(CONFIG_BY_VALUE, lowered):
        entities.found = [
            e for e in entities.found if e.kind != "trials" or not found.start() <= e.span[0] < found.end()
        ]
        if path := known.config_of_value(found.group(1)):
            entities.add("experiment", path, found.span())
        elif known.root:  # "the 2048 config" where no file has it: asked, never the default experiment in its place
            entities.add("unknown_description", found.group(0), found.span())
    for found in re.finditer(CONFIG_AS_VERSION, lowered):  # "the long version", "the 1024 version": that file, if any
        word = found.group(1)
        if path := known.config(word) or (word.isdigit() and known.config_of_value(word)):
            entities.add("experiment", path, found.span())
    _config_described(lowered, entities, known)
    latest = r"\b(?:latest|last|most recent|newest|previous|recent)\s+(?:\w+\s+)?"
    said_latest = [*re.finditer(latest + r"(?:run|one|training)\b", lowered), *re.finditer(RAN_LAST, lowered)]
    if known.runs and any(not _one_of_a_sweep(found) for found in said_latest):
        entities.add("run", known.runs[0], (0, 0))
    if known.sweeps and not _older_sweep(lowered, entities, known) and re.search(latest + r"sweep\b", lowered):
        entities.add("sweep", known.sweeps[0], (0, 0))


# A sweep named by its age among the repository's (newest first): "the older sweep", "the earlier one of the sweeps",
# "the first sweep we ran", "the sweep before layouts-nov", "the previous sweep, not the latest" ("the previous
# sweep" alone is the one before now: the latest).
OLDER_SWEEP = (r"\b(older|earlier|oldest|first|prior)\s+(?:\w+\s+)?sweep\b|"
               r"\bprevious\s+(?:\w+\s+)?sweep\b(?=.*\bnot\s+the\s+(?:latest|last|newest|most recent|current)\b)|"
               r"\bsweep\s+(?:(?:right|just|immediately)\s+)?(?:before|prior to|preceding)\s+([\w.-]+)")  # fmt: skip


def _older_sweep(lowered: str, entities: Entities, known: Known) -> bool:
    """Whether the sentence names a sweep by its age; the one it names is added (one asked about where several
    older ones could be meant)."""
    found = re.search(OLDER_SWEEP, lowered)
    if not found:
        return False
    sweeps = list(known.sweeps)
    if found.group(2):  # "the sweep before layouts-nov": the one after it in the newest-first order
        named = found.group(2).removeprefix("sweeps/")
        at = next((i for i, s in enumerate(sweeps) if s.removeprefix("sweeps/") == named), None)
        if at is None:
            return False
        entities.found = [e for e in entities.found if not (e.kind == "sweep" and e.span[0] >= found.start(2))]
        older = sweeps[at + 1 :]
    else:
        older = sweeps[-1:] if found.group(1) in ("oldest", "first") else sweeps[1:]
    if len(older) == 1:
        entities.add("sweep", older[0], found.span())
    elif older:
        entities.add("sweep_choice", older, found.span())
    else:
        entities.add("unknown_description", found.group(0), found.span())
    return True


# The latest run said by when it ran, after its noun: "the training job we ran most recently", "the run I just
# launched" ("the run we did last week" says a time, not the latest).
_RAN = r"(?:ran|run|launched|started|kicked off|did|trained|submitted)"
_WHO = r"(?:we|i|you)(?:'ve|\s+have)?\s+"
RAN_LAST = (
    rf"\b(?:run|job|training|one)\s+(?:(?:that|which)\s+(?:{_WHO})?|{_WHO})(?:just\s+{_RAN}\b|"
    rf"{_RAN}\s+(?:\w+\s+)?(?:most recently|recently|last(?!\s+(?:week|night|month|year|weekend|\w+day)\b)))"
)


def _one_of_a_sweep(found: re.Match) -> bool:
    """Whether "the last one" stands for a sweep, the nearer of the nouns it may stand for said before it ("a new
    sweep with more trials because the last one felt small")."""
    nouns = re.findall(r"\b(sweeps?|runs?|trainings?|jobs?)\b", found.string[: found.start()])
    return bool(re.search(r"\bone\b", found.group(0))) and bool(nouns) and nouns[-1].startswith("sweep")


# The repository's own experiment, meshpilot.yaml: "the experiment file", "the main experiment file", "our default
# config" (a config named by such a word, configs/default.yaml, is that file).
# (never when a file's name follows it: "the experiment file configs/long.yaml" names that one)
MAIN_EXPERIMENT = (r"\b(?:the|my|our)\s+(?:(main|default|primary|base|top-level|root|standard)\s+"
                   r"(?:experiment|config(?:uration)?)|experiment)(?:\s+file|\s+config)?\b"
                   r"(?!(?:\s+(?:file|config))?\s+(?:[\w./-]+\.ya?ml\b|_{4,}))")  # fmt: skip
# A run or sweep named by a word of its name before its noun, with no article, at the start of a clause or after a
# preposition: "baseline run tok/s", "loss of baseline run" ("a baseline run", "start new run" name none on disk).
BARE_NAMED = r"(?:^|[,;:.!?(]\s*|\b(?:of|for|from|on|in|about|with|vs|and|is|did|was)\s+)([a-z][\w]+)\s+(run|sweep)\b"
# A run or sweep described, not named: "the ddp baseline", "the learning rate sweep", "the FSDP run", "the layout one".
# ("this time let's try ...": "let's" opens an order, no word of a description)
DESCRIBED = (r"\b(?:the|that|this|my|our|your)\s+((?:(?!(?:the|an?|of|in|on|at|for|with|to|and|or|that|this|my|our|"
             rf"what|which|is|was|let'?s)\b)(?:(?:{'|'.join(MESH_DIMS)})=\d+|[a-z0-9][\w'.-]*)\s+){{1,4}}?)"
             r"(run|sweep|one|job|baseline|training|attempt|try|tuning|search|scan|experiment|study)\b"
             # ("my advisor wants one more number": a count of what follows, no run; "the failed one more time" is one)
             r"(?!\s*(?:=|\.\w))(?<!one(?=\s+more\s+(?!times?\b)[a-z]))")  # fmt: skip
# Heads that name a sweep only where its words fit one ("the November layout experiment"); an experiment is a config
# file too, so one that fits nothing is no question of a sweep ("the default experiment").
STUDY_HEADS = ("experiment", "study")
# Heads of a description that name a sweep by what it did: "the November layout tuning", "the learning rate search".
SWEEP_HEADS = ("sweep", "sweeps", "tuning", "search", "scan")
# A verb that does the activity such a head names: "redo the layout tuning", "start the lr search over".
DONE_AGAIN = (r"\b(?:re-?do|re-?run|repeat|start|launch|run|kick off|do|begin|restart|try)\s+(?:(?:it|that|the|a|an|"
              r"another|new|fresh|whole)\s+)*$")  # fmt: skip
# Or after its noun: "the run that crashed", "the one which ran out of memory".
# Its memory named as the cause: "the run which was failed by memory", "the one that died from memory" (an OOM).
_BY_MEMORY = r"(?:failed|killed|crashed|died|broke)\s+(?:by|because of|due to|from|of|on)\s+(?:the\s+)?memory"
DESCRIBED_AFTER = (r"\bthe\s+(run|one|attempt)\s+(?:that|which)\s+(?:was\s+|got\s+)?((?:crashed|failed|died|broke|"
                   rf"blew up|completed|finished|succeeded|worked|oom'?(?:ed|'d|d)|ran out of memory|went oom)|"
                   rf"{_BY_MEMORY})\b")  # fmt: skip
# Or by the sharding it did without: "the run without sharding", "the one with no sharding" (Known.facts' "unsharded").
DESCRIBED_UNSHARDED = (r"\bthe\s+(run|one|job|attempt)\s+(?:without|with\s+no|that\s+(?:did\s+not|didn'?t)\s+use|"
                       r"not\s+using)\s+(?:any\s+)?(?:sharding|fsdp)\b")  # fmt: skip
# A config described by one of its values, after its noun: "the one with 1024 tokens", "the config that has 2048
# context" (what the sentence names is checked against its file, never a value to set).
DESCRIBED_BY_VALUE = (r"\bthe\s+(?:one|config(?:uration)?|experiment)\s+(?:with|that has|which has|having|that uses|"
                      r"using|at)\s+\d+(?:\.\d+)?\s*k?\s+(?:tokens?|context|seq\w*|sequence length)\b")  # fmt: skip
# A config named after its noun by what it is for: "the experiment file for the long sequence".
CONFIG_FOR = (r"\b(?:the\s+)?(?:config(?:uration)?|experiment)(?:\s+file)?\s+(?:for|of|with)\s+(?:the\s+)?(\w+)"
              r"(?:-\w+|\s+(?:sequences?|seqs?|contexts?|ctx|seqlens?))\b")  # fmt: skip


def _config_described(lowered: str, entities: Entities, known: Known) -> None:
    """An experiment file described after its noun by the one value that tells it apart ("the config with 1024
    tokens" is configs/long.yaml): that file, in place of the main experiment the bare noun named or a description
    to ask about. A value no file holds stays asked ("the config with 2048 tokens")."""
    for found in re.finditer(DESCRIBED_BY_VALUE, lowered):
        number = re.search(r"\d+(?:\.\d+)?", found.group(0))
        if "one" in found.group(0).split() or not number or not (path := known.config_of_value(number.group(0))):
            continue
        start, end = found.span()
        entities.found = [e for e in entities.found if not (e.kind in ("experiment", "unknown_description")
                                                            and e.span[0] < end and e.span[1] > start)]  # fmt: skip
        entities.add("experiment", path, (start, end))


# A config named by one of its values before its noun: "the 1024 config", "our 1024-token experiment".
CONFIG_BY_VALUE = (r"\b(?:the|that|this|my|our|your)\s+(\d+(?:\.\d+)?)(?:[\s-]+(?:tokens?|ctx|context|seq\w*))?[\s-]+"
                   r"(?:config(?:uration)?|experiment|ya?ml)(?:\s+file)?\b")  # fmt: skip
# A run or sweep described by its size alone ("the little sweep"): asked unless the rest of the sentence tells it
# apart ("... where we tried different learning rates", agent.understanding.questions).
DESCRIBED_BY_SIZE = (r"(?:the|that|this|my|our|your)\s+(?:little|tiny|wee|large|huge|small|big)\s+"
                     r"(?:run|sweep|one|job|training|experiment)")  # fmt: skip
# The experiment as it is, said as "one" ("start a training thing, just the normal one"): no run's description in a
# launch, its defaults (agent.understanding.questions)
DEFAULT_ONE = r"(?:the|that|this|my|our|your)\s+(?:normal|default|usual|standard|regular)\s+one"
# A run or sweep pointed at as the one already named ("the said sweep", "the aforementioned run"): the conversation's,
# no description of one (asked where the conversation holds none).
ALREADY_NAMED = (r"\b(?:the|that|this)\s+(?:said|aforesaid|aforementioned|above[\s-]?mentioned|afore-?named)\s+"
                 r"(run|sweep|one|job|experiment)\b")  # fmt: skip
# An experiment file as a "version" of the experiment, by its stem or a value only it holds: "the long version", "the
# 1024 variant" ("the 1024 one" alone may be a run: asked, unless a file named has that value)
CONFIG_AS_VERSION = (r"\b(?:the|that|this|my|our|your)\s+(\w+)(?:[\s-]+(?:tokens?|ctx|context|seq\w*))?[\s-]+"
                     r"(?:version|variant)\b")  # fmt: skip
# Words of a description that do not describe one run ("the latest run", "the same one", "my first training").
GENERIC = NOT_NAMES | {"previous", "recent", "newest", "current", "most", "new", "entire", "main", "final", "actual",
                       "training", "real", "full", "big", "small", "short", "quick", "one", "two", "earlier", "older",
                       "old", "second", "third", "it", "its", "whole", "sweep", "runs", "sweeps", "default",
                       "usual"}  # fmt: skip
# A sweep by what it varies: "the sweep over learning rates", "the sweep across layouts"; the article may go unsaid
# after a preposition ("results of sweep over learning rates"), never at a verb's place ("sweep over layouts" is one
# to run).
SWEPT_OVER = (r"(?:\bthe\s+|(?<=\bof\s)|(?<=\bfrom\s)|(?<=\bin\s)|(?<=\bfor\s))sweep\s+(?:over|of|on|across|for)\s+"
              r"(?:the\s+)?((?:learning rates?|lrs?|layouts?|\w+))\b")  # fmt: skip
# An experiment described by the question it answered, how to split the model ("our latest 'which way should we split
# the model across GPUs' experiment", "the study on how to shard llama"): the sweep that tried layouts.
LAYOUT_PURPOSE = (r"\b(?:the|our|my|that|this)\s+(?:\w+\s+){0,3}?['\"]?(?:which|what|how|best)\b[^.;!?,]{0,60}?"
                  r"\b(?:split|shard|paralleli[sz]e|distribute|divide|lay\s+out|layout|spread)\w*\b[^.;!?,]{0,50}?"
                  r"\b(?:experiment|study|investigation|comparison|test|exercise)s?\b|"
                  # the noun first: "the experiment that tested which layout is best"
                  r"\b(?:the|our|my|that|this)\s+(?:\w+\s+)?(?:experiment|study|investigation|comparison|test)\s+"
                  r"(?:that|which|where|on|about|of)\s+(?:\w+\s+){0,3}?(?:which|what|how|best)\b[^.;!?,]{0,40}?"
                  r"\b(?:split|shard|paralleli[sz]e|distribute|divide|lay\s+out|layout|spread)\w*\b|"
                  # the ways it compared: "that big experiment comparing ways of spreading the model across GPUs"
                  r"\b(?:the|our|my|that|this)\s+(?:\w+\s+){0,2}?(?:experiment|study|investigation|comparison|test)\s+"
                  r"(?:that\s+|which\s+)?(?:compar|test|tr[iy]|measur|benchmark)\w*\s+(?:the\s+|different\s+)*"
                  r"(?:ways?|options|methods|strategies|approaches)\s+(?:of|to|for)\s+"
                  r"(?:split|shard|paralleli[sz]|distribut|divid|spread|lay\w*\s+out|layout)\w*\b")  # fmt: skip
# Descriptions in other words than the facts' own (agent.understanding.known.Known.facts).
# ("plain data parallel", "vanilla DDP": data parallel and nothing sharded, Known.facts' "unsharded")
DESCRIPTOR_WORDS = [(r"\b(?:plain|vanilla|pure|simple|basic|ordinary|classic)\s+(?:old\s+)?(?:distributed\s+)?"
                     r"(?:data[- ]parallel\w*|ddp)\b", "unsharded ddp"), (r"\b(?:non|un)[- ]?sharded\b", "unsharded"),
                    (r"\blearning rates?\b", "lr"), (r"\btensor[- ]parallel\w*\b", "tp"),
                    (r"\bpipeline[- ]parallel\w*\b", "pp"), (r"\bfully[- ]sharded(?: data[- ]parallel)?\b", "fsdp"),
                    (r"\bdistributed data[- ]parallel\b|\bdata[- ]parallel\b", "ddp"),
                    (rf"\b(?:ran |run |went )?out of memory\b|\b(?:went )?oom'?(?:ed|'d|d)?\b|{_BY_MEMORY}\b",
                     "oom")]  # fmt: skip


def _described(lowered: str, entities: Entities, known: Known) -> None:
    """Runs and sweeps described by their layout, outcome, name parts or what a sweep varies (Known.describe): the
    one that fits, or the choice when several do (the planner then asks which)."""
    taken = [e.span for e in entities.found if e.kind in ("run", "sweep") and e.span[1] > e.span[0]]
    phrases = [(f, f.group(1), f.group(2)) for f in re.finditer(DESCRIBED, lowered)]
    phrases += [(f, f.group(2), f.group(1)) for f in re.finditer(DESCRIBED_AFTER, lowered)]
    phrases += [(f, "unsharded", f.group(1)) for f in re.finditer(DESCRIBED_UNSHARDED, lowered)]
    phrases += [(f, f.group(1), "sweep") for f in re.finditer(SWEPT_OVER, lowered)]
    phrases += [(f, "layout", "sweep") for f in re.finditer(LAYOUT_PURPOSE, lowered)]
    for found, words, head in phrases:
        if any(start < found.end() and found.start() < end for start, end in taken):
            continue
        if head in SWEEP_HEADS[2:] and re.search(DONE_AGAIN, lowered[: found.start()]):
            continue  # "redo the layout tuning": the activity asked for again, a new sweep, not the one done
        words = re.sub(r"\b(?:crashed|died|broke|blew up|blown up|dead|busted)\b", "failed", words)
        words = re.sub(r"\b(?:completed|succeeded|worked)\b", "finished", words)
        for pattern, word in DESCRIPTOR_WORDS:
            words = re.sub(pattern, word, words)
        words = [w for w in re.findall(r"[a-z_]+=\d+|[a-z0-9]+", words) if w not in ("s", "very", "one")]
        if head in STUDY_HEADS and (set(words) & GENERIC or any(known.config(w) for w in words)
                                    or re.search(DONE_AGAIN, lowered[: found.start()])):  # fmt: skip
            continue  # "the main experiment", "the long experiment": a file; "do the fsdp experiment": a new one
        # (what an experiment studied, over trials, is a sweep's: "the November layout experiment")
        if head in (*SWEEP_HEADS, *STUDY_HEADS) or (head == "one" and re.search(r"\bsweeps?\b", lowered)):
            kinds = ["sweeps"]
        elif head == "baseline":
            kinds, words = ["runs", "sweeps"], [*words, head]
        else:
            kinds = ["runs"] if head != "one" else ["runs", "sweeps"]
        matches = [(kind, path) for kind in kinds for path in known.describe(words, kind)]
        label = {"runs": "run", "sweeps": "sweep"}
        if (not matches and known.root and not (set(words) & GENERIC) and not any(known.config(w) for w in words)
                and head not in STUDY_HEADS):  # fmt: skip
            # "the llama run": a description that fits nothing here is asked about, never the latest in its place
            entities.add("unknown_description", found.group(0), found.span())
        if len(matches) == 1:
            entities.add(label[matches[0][0]], matches[0][1], found.span())
        elif len({kind for kind, _ in matches}) == 1:
            entities.add(label[matches[0][0]] + "_choice", [path for _, path in matches], found.span())


# A run named by its place beside another: "the run before r1" (older), "the one after baseline-ddp" (newer).
RELATIVE_RUN = (r"\bthe\s+(?:run|one|job|training(?:\s+run)?)\s+(?:(?:right|just|immediately)\s+)?"
                r"(before|after|prior to|preceding|following)\s+")  # fmt: skip


def _relative_runs(lowered: str, entities: Entities, known: Known) -> None:
    """The run that stands before or after the one named (the repository's order, newest first): never the named
    one in its place; one with none there is asked about."""
    for found in re.finditer(RELATIVE_RUN, lowered):
        named = [e for e in entities.found if e.kind == "run" and e.span[0] == found.end()]
        if not named or str(named[0].value) not in known.runs:
            continue
        entities.found.remove(named[0])
        newer = found.group(1) in ("after", "following")
        index = known.runs.index(str(named[0].value)) + (-1 if newer else 1)
        span = (found.start(), named[0].span[1])
        if 0 <= index < len(known.runs):
            entities.add("run", known.runs[index], span)
        else:
            entities.add("unknown_description", lowered[span[0] : span[1]], span)


# Hyphenated words that are English or a number, never a run's name: "the held-out benchmark", "lr 2e-4".
ENGLISH_HYPHENATED = {"held-out", "hold-out", "built-in", "follow-up", "read-only", "well-known", "open-source",
                      "pre-trained", "fine-tuned", "state-of-the-art", "up-to-date", "out-of-the-box"}  # fmt: skip


def _plain_hyphenated(word: str) -> bool:
    return word in ENGLISH_HYPHENATED or bool(re.fullmatch(r"\d+(?:\.\d+)?e-\d+", word))


def _one_word_said_as_two(first: str, second: str) -> bool:
    """Whether two words may be one word of a name dictated with a space in it ("base line"): both plain words of
    three letters at least (the joined word must still name a run or sweep exactly)."""
    return all(re.fullmatch(r"[a-z]{3,}", word) for word in (first, second))


def _name(tokens: list[re.Match], entities: Entities, known: Known) -> None:
    """A bare run or sweep name ("r1", "tp-try", "layots-nov") or two words of one ("lr scan", "baseline ddp")."""
    readings = [(tokens[0].group(0), tokens[0].span())]
    new = re.search(r"\b(?:a|an|another|new|fresh)\s+$", tokens[0].string[: tokens[0].start()])
    if len(tokens) >= 2 and not new:  # "start a DDP baseline": one to make, no name of one on disk
        readings.insert(0, (f"{tokens[0].group(0)} {tokens[1].group(0)}", (tokens[0].start(), tokens[1].end())))
        if _one_word_said_as_two(tokens[0].group(0), tokens[1].group(0)):  # dictated: "base line ddp" is baseline-ddp
            joined = tokens[0].group(0) + tokens[1].group(0)
            readings.insert(0, (joined, (tokens[0].start(), tokens[1].end())))
            if len(tokens) == 3:
                readings.insert(0, (f"{joined} {tokens[2].group(0)}", (tokens[0].start(), tokens[2].end())))
    for candidate, span in readings:
        for kind, label in (("runs", "run"), ("sweeps", "sweep")):
            # two words name a run only exactly ("lr scan", "base line"), never by a near miss
            close = " " not in candidate and span[1] - span[0] == len(candidate)
            if path := known.resolve(candidate, kind, prefix=False, close=close):
                entities.add(label, path, span)
                return
    if "-" in tokens[0].group(0) and not _plain_hyphenated(tokens[0].group(0)) and known.another_of(tokens[0].group(0)):
        # "tp-try-2", "baseline-fsdp": a name, one the repository lacks (asked about), and no layout word in it
        entities.add("unknown_name", tokens[0].group(0), tokens[0].span())
