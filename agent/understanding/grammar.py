"""The grammar of a request: slash commands, and the rules that read a plain sentence's facts and its first
reading (agent.understanding combines them with the repository, the conversation and cue scores).

A request is a slash command with key=value arguments, or a plain sentence (normalised first by
agent.understanding.normalise). Of a plain sentence the grammar reads the facts it states (model preset, GPU and
counts, sequence length, layout words and degrees, steps, learning rate and other keys, packing, activation
checkpointing, which run) and a first reading of what it is:
- a question (about results, why something won, where the report is): answered from files, never launching;
- a what-if ("would FSDP be faster than DDP for a 7B llama on 8 H100s?"): a plan;
- a command ("train it with FSDP on 2 processes for 5 steps"): the tool call with every stated parameter.
Anything ambiguous or unknown sets `clarify`, the one question to ask instead of guessing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from agent.understanding import regex as re  # `re` with a cache the parser's patterns fit in
from trainer.config import ConfigError
from trainer.hardware import GPU_ALIASES, GPUS, gpu_preset
from trainer.layout import FAMILY_OF_DIM, LAYOUT_DIMS, Layout
from trainer.model.presets import MODELS, REFUSED, model_override, model_preset, preset_key

SLASH_COMMANDS = ("help", "plan", "why", "run", "status", "results", "cancel", "hardware", "runs", "read", "sweep",
                  "bench", "report", "pr", "compare", "trials", "where", "docs", "resume")  # fmt: skip
# Layout words, longest phrases first so that "fully sharded data parallel" is not read as "data parallel". A mesh
# dimension's key is one too without its degree ("4 gpus w/ dp_shard": the degree is the processes').
LAYOUT_WORDS: list[tuple[str, str]] = [
    (
        r"fully[- ]sharded(?: data[- ]parallel(?:ism)?)?|fsdp2?|zero[- ]?[123]|zero stage [123]|"
        r"(?:data|dp)[- _]shard(?:ing|ed)?|shard(?:ed|ing)? data(?:[- ]parallel\w*)?",
        "dp_shard",
    ),
    (r"hsdp|hybrid[- ]shard(?:ing|ed)?(?: data[- ]parallel)?", "hsdp"),
    (r"ddp|distributed data[- ]parallel|data[- ]parallel(?:ism)?|replicated?|dp[- _]replicated?", "dp_replicate"),
    (r"tensor[- ]parallel(?:ism)?|tp", "tp"),
    (r"pipeline[- ]parallel(?:ism)?|pipelined?|pp", "pp"),
    (r"context[- ]parallel(?:ism)?|ring attention|cp", "cp"),
    (r"expert[- ]parallel(?:ism)?|ep", "ep"),  # borrows dp_shard x cp's ranks: multiplies no processes
]
# Layouts people name that meshpilot does not have: asked about rather than guessed. (ZeRO's stages are FSDP2's
# sharding, train.zero_stage: a layout word above and a setting below.)
UNKNOWN_LAYOUTS = r"deepspeed|megatron|sequence[- ]parallel\w*"
# What a negation just before a setting takes back ("not in fp8"): the setting is not made.
# The optimizers a launch may name (train.optimizer), and the precisions it trains in (train.precision).
OPTIMIZERS = r"galore_adamw|sgd|adamw|adam|adafactor|lion|muon"
PRECISIONS = r"bf16|fp32|fp8|fp16"
# ("without the fp8 magic": an article between them; "no mixing of fp8 in there": fp8 taken back)
# ("do not forget bf16", "don't skip fp8": a negation taken back, the value kept)
NEGATED_SETTING = (r"\b(?:not|no|never|without|skip|avoid|ditch|instead of|rather than|other than|"
                   r"(?:don'?t|do not) (?!(?:forget|skip|omit|neglect|drop|lose|ditch|remove|miss|abandon)\b)(?:\w+ )?|"
                   # refused ("ban fp8? not sure" never proposes fp8; "don't ban fp8" orders none either)
                   r"ban|forbid|prohibit|veto|disallow|"
                   r"no mixing(?: of)?)\s*(?:(?:the|any|that)\s+)?$")  # fmt: skip
# What a negation just before a layout word takes back ("not pipelined", "no tp, just fsdp", "not on tp").
# ("anything but pipeline parallel", "any layout except tp", "whatever layout but cp": all but that one)
NEGATED_LAYOUT = (r"\b(?:not|no|never|without|avoid(?:ing)?|skip(?:ping)?|don'?t (?:use|do|want)(?: any)?|"
                  r"rather than|instead of|other than|(?:anything|everything|any\s+\w+|whatever(?:\s+\w+)?)\s+"
                  r"(?:but|except(?: for)?)|except(?: for)?|but not|apart from|"
                  # a launch refused in that layout: "do not relaunch with tensor parallel"
                  r"(?:don'?t|do not|never)\s+(?:re-?)?(?:launch|run|start|train)\w*(?:\s+(?:it|again))?)\s+"
                  r"(?:on |with |using |use |any )?$")  # fmt: skip
# A layout refused after it is said, by a pronoun in its clause: "tp=2 failed before so avoid it", "fsdp, not that".
REFUSED_AFTER = (r"^[^.;!?]{0,50}?\b(?:avoid|skip|drop|don'?t (?:use|do|want)|never use|not)\s+(?:it|that|this|"
                 r"that one|this one)\b(?!\s+(?:on|with|for|to|again)\b)")  # fmt: skip


def refused_layout(lowered: str, found: re.Match) -> bool:
    """Whether the layout `found` is taken back: a negation before it ("not pipelined", "anything but tp") or a
    pronoun after it in its clause ("tp=2 failed before so avoid it")."""
    return bool(re.search(NEGATED_LAYOUT, lowered[: found.start()]) or re.match(REFUSED_AFTER, lowered[found.end() :]))


TOPICS = {
    "memory": r"memory|\bmem\b|\boom\b|gib|\bram\b|vram",
    "optimizer": r"optimi[sz]er",
    "gradients": r"gradients?\b(?! noise)",
    "parameters": r"parameters|weights",
    "activations": r"activations?",
    "peak": r"\bpeak",
    "predicted": r"predict|estimat|expect|forecast",
    "throughput": r"throughput|tokens ?/ ?s|tokens per second|\bspeed|\bfast|\bslow",
    "mfu": r"\bmfu\b|utili[sz]ation",
    "loss": r"\bloss",
    "gns": r"noise scale|\bgns\b|batch size|recommended batch|critical batch",
    "status": r"\bstatus|did it (finish|fail)|\bfail|\bdone\b|\bfinish",
}
# Words the rules read: agent.understanding.normalise corrects a misspelling of one (one edit) first.
_VOCABULARY = """train training launch start run runs status results result memory optimizer optimiser throughput
loss layout layouts fastest processes process steps nodes sequence length faster slower compare comparison
prediction predicted measured report documentation benchmark evaluate sweep cancel hardware checkpointing
activation packing learning rate gradient gradients parameters activations pipeline tensor context parallel
replicate sharded which where would should could winner latest previous recommended explain trial trials
throughput utilization utilisation progress"""
VOCABULARY = _VOCABULARY.split()
_COMMON = """the and that this with what how much did take took does for from into then about
than was were is it its an on of to in at by be can you me my our we will why when which please show tell give
model models gpu gpus devices device node many more less fit fits per tokens time last one two first best batch
same again also just need used use using size noise scale each lane rain main plain brain their there these
those test tests state trial procs"""
COMMON = set(VOCABULARY) | set(_COMMON.split())
# (a value may open with its point, as some write a rate: ".0005")
_NUMBER = r"((?<![\w.])\.\d+(?:e-?\d+)?|\d+(?:\.\d+)?(?:e-?\d+)?)"
_COUNT_WORDS = {"a": 1, "an": 1, "one": 1, "single": 1, "two": 2, "four": 4, "eight": 8, "sixteen": 16}
# (a GeForce number alone only as cards, plural: "4 3090s")
_UNKNOWN_GPU = (r"\b(mi\d{3}x?|v100|p100|t4|b200|gb200|gh200|l4|a6000|a40|rtx ?[2-5]0[6-9]0(?: ti)?|"
                r"[2-5]0[6-9]0(?=s\b))s?\b")  # fmt: skip
# Each card's memory said right after a card with no preset: "4 3090s (24 gigs each)", "4 a6000 with 48GB each"
# (what a plan of those cards needs: their count and memory, never another card's preset).
_UNKNOWN_GPU_MEMORY = (r"^\s*(?:\(\s*|,\s*)?(?:with\s+|of\s+|at\s+)?\d+(?:\.\d+)?\s*gi?b\b\s*"
                       r"(?:of\s+(?:memory|vram|ram)\s*)?"
                       r"(?:each|apiece|per\s+(?:card|gpu|device)|\)|vram\b)")  # fmt: skip
_COUNT_BEFORE = r"(?<![\w.])(\d+)\s*(?:x\s*)?$"
GPU_NAME = r"(h100|h200|a100|l40s|a10|rtx[ -]?4090|4090)(?:[ -]?(sxm|pcie|nvl))?(?:[ -]?(\d+) ?gi?b)?s?\b"
# Nodes named by the GPUs in them ("2 H200 nodes", "a couple of DGX H100 boxes", "8 gpu nodes"): the count before
# the GPU's name is of the nodes, and the digits of a GPU's name (H200, A100, 4090) are never a count.
NODE_NOUN = r"nodes?|machines?|boxes|box|hosts?|servers?|computers?|racks?|rigs?"  # what a count of nodes counts
NODE_GPU = (r"(?:(?:nvidia|dgx|hgx)\s+)*(?:h100|h200|a100|l40s|a10|rtx[ -]?4090|4090|b200|gb200|gh200|v100|a6000|a40|"
            r"l4|t4|mi\d{3}x?|gpu)(?:[ -]?(?:sxm|pcie|nvl))?(?:[ -]?\d+ ?gi?b)?\s+")  # fmt: skip
GPU_OF_NODE = rf"(?:(?:nvidia|dgx|hgx)\s+)*(?:{NODE_GPU})?"


@dataclass
class Intent:
    command: str
    args: dict[str, Any] = field(default_factory=dict)
    words: list[str] = field(default_factory=list)
    text: str = ""
    topics: list[str] = field(default_factory=list)  # what a question about results asks for (TOPICS' keys)
    families: list[str] = field(default_factory=list)  # layout families named (DDP, FSDP...), for comparisons
    clarify: str | None = None  # the question to ask instead of acting
    notes: list[str] = field(default_factory=list)  # how a loose name was read ("'Llama 3 8B' read as llama-3.1-8b")
    refusal: str | None = None  # the reply to a request no tool may do (agent.understanding.refusals): no action


def parse_slash(text: str) -> Intent:
    """A slash command with key=value arguments ("/run nproc=2 set=train.lr=1e-3")."""
    command, *rest = text.strip()[1:].split() or ["help"]
    args, words = slash_arguments(rest)
    command = command.lower()
    if command not in SLASH_COMMANDS:
        return Intent("help", {"unknown": f"/{command}"}, [], text)
    return Intent(command, args, words, text)


# The planner's own commands that take bare words (a run, two runs, a path, a topic): "/status runs/r1", "/compare r1
# r2", "/read notes.md". The others take key=value arguments only.
SLASH_POSITIONAL = ("help", "status", "results", "cancel", "compare", "read", "resume")
# A command line's subcommand after the noun it acts on ("/sweep show sweeps/x", "/sweep run --trials 6", "/run
# cancel r1"): said as the verb first, the way a sentence orders them ("show sweep sweeps/x").
SLASH_NOUNS = r"sweeps?|reports?|prs?|trials|runs?|docs|bench(?:mark)?s?|jobs?"
SLASH_SUBCOMMANDS = (r"show|list|ls|cat|read|view|get|describe|inspect|run|start|launch|new|create|status|cancel|kill|"
                     r"stop|resume|write|open")  # fmt: skip
# Subcommands (or a first flag) that only look at the noun ("/sweep describe X", "/sweep --show X").
SLASH_LOOKS = r"(?:--)?(?:show|view|get|describe|inspect|info|display)"


def slash_as_words(text: str) -> str | None:
    """A slash command typed as a command line, not in the planner's own syntax, as the words a person reads in it
    (None for the planner's own exact command, which is read as typed): an unknown slash word ("/launch", "/cat
    runs/r1/log.txt"), `--flag` options ("--nproc 4", "--no-packing"), or bare words a command takes none of
    ("/bench runs/r1", "/sweep show sweeps/x"). agent.understanding reads those words as any sentence."""
    command, *rest = text.strip()[1:].split() or ["help"]
    command = command.lower()
    flags = any(token.startswith("--") for token in rest)
    bare = command not in SLASH_POSITIONAL and any("=" not in token for token in rest)
    if command in SLASH_COMMANDS and not flags and not bare:
        return None
    words = text.strip()[1:]
    if rest and re.fullmatch(SLASH_NOUNS, command) and re.fullmatch(SLASH_LOOKS, rest[0], re.I):
        words = " ".join(["show", command, *rest[1:]])  # "/sweep describe X", "/sweep --show X": a look, said plainly
    elif rest and re.fullmatch(SLASH_NOUNS, command) and re.fullmatch(SLASH_SUBCOMMANDS, rest[0], re.I):
        words = " ".join([rest[0], command, *rest[1:]])
    return words


def slash_arguments(tokens: list[str]) -> tuple[dict[str, Any], list[str]]:
    args: dict[str, Any] = {}
    words = []
    for token in tokens:
        # "/run nproc=2, layout=tp=2": the arguments as a question quotes them (agent.understanding), commas and all
        key, sep, value = token.removesuffix(",").partition("=")
        if not sep:
            words.append(token)
        elif key == "set":
            args.setdefault("set", []).append(value)
        else:
            args[key.replace("-", "_")] = value
    return args, words


def _one_swap(word: str, known: str) -> bool:
    """Two neighbouring letters swapped ("trian" for "train"): difflib rates this common typo low."""
    if len(word) != len(known) or word == known:
        return False
    wrong = [i for i, (a, b) in enumerate(zip(word, known, strict=True)) if a != b]
    return (
        len(wrong) == 2
        and wrong[1] == wrong[0] + 1
        and word[wrong[0]] == known[wrong[1]]
        and word[wrong[1]] == known[wrong[0]]
    )


def first_reading(fixed: str) -> str:
    """The command the grammar's rules read in a (typo-corrected) sentence; "wait" for a wait."""
    lowered = fixed.lower()
    return "wait" if re.search(_WAIT, lowered) else _classify(lowered)


def read_facts(fixed: str, command: str, text: str | None = None, devices: int | None = None) -> Intent:
    """The facts of a sentence as `command` takes them ("8 GPUs" are a plan's devices, a launch's processes).
    `devices`: the GPUs the conversation just planned for, which a launch's layout word without a degree splits
    ("ok go with fsdp then" after a plan on 2 GPUs is dp_shard=2)."""
    lowered = fixed.lower()
    waiting = command == "wait"  # "wait for the sweep": a status, given once the job ended
    intent = Intent("status" if waiting else command, {"wait": "yes"} if waiting else {}, text=text or fixed)
    intent.topics = [name for name, rule in TOPICS.items() if re.search(rule, lowered)]
    _hardware_facts(lowered, intent)
    _model_fact(lowered, intent)
    _variant_refused(lowered, intent)
    _run_facts(fixed, lowered, intent)
    if intent.command == "run":
        _launch_layout(lowered, intent, devices)
        _overrides(fixed, lowered, intent)
    elif intent.command == "plan" and "nproc" in intent.args:
        intent.args.setdefault("devices", intent.args.pop("nproc"))
    if intent.command == "read" and (found := re.search(r"\b(?:show|read|open|cat)\b\s+(\S+\.\w+)", fixed, re.I)):
        intent.words = [found.group(1)]
    return intent


# --- classifying ------------------------------------------------------------------------------------------------

_POLITE = r"^(?:(?:ok(?:ay)?|now|then|so|and|great|cool|thanks)[,!.]?\s+)*(?:(?:can|could|would|will) you\s+)?"
_POLITE += r"(?:please\s+)?(?:go ahead and\s+|let'?s\s+|i want (?:you )?to\s+|i'?d like (?:you )?to\s+)?"
_LAUNCH_VERB = r"(?:train|retrain|launch|start|kick off|fire off|run|rerun|re-run|try)\b"
_QUESTION = (r"^(?:what|how|which|why|where|when|is|are|was|were|did|does|do|would|could|should|can|will|whats|"
             r"what's|tell me|explain|compare)\b")  # fmt: skip
_WHAT_IF = (r"\b(?:would|could|what if|if i|if we|should i|should we|can i|can we|will it|will (?:a|an|the) \S+ "
            r"fit|does it fit|do i need|how (?:should|would|do|can) (?:i|we) train|how fast (?:is|would)|how many "
            r"(?:gpus|devices|nodes) do)\b")  # fmt: skip
_PAST = r"\b(?:did|was|that run|the run|last run|last one|latest run|previous run|the winner|trials?)\b"
# ("wait, don't", "wait — no", "wait, which run is newest?": an interjection, hold on, no wait for a run)
_WAIT = _POLITE + r"wait\b(?!\s*(?:,|\u2014|\u2013|-\s|\.\.\.|!|\?|\.\s*\w)(?!\s*(?:for|until|till|on)\b))"
_SWEEP_STATE = r"\bsweep\b.*\b(?:done|finish(?:ed)?|over|running|going|status|progress)\b"
# What a sweep found, named after the noun "sweep": "sweep results", "sweep winner?" (its trials, read).
SWEEP_FIGURES = r"(?:results?|winners?|numbers|figures|trials|outcomes?|findings|summary|table|stats)\b"


def _classify(lowered: str) -> str:
    if re.search(r"\b(?:show|read|open|cat)\b\s+\S+\.\w+", lowered) and not re.search(r"\bresults?\b", lowered):
        return "read"
    question = bool(re.search(_QUESTION, lowered)) or lowered.rstrip().endswith("?")
    if found := re.search(_POLITE + _LAUNCH_VERB, lowered):
        rest = lowered[found.end() :]
        if re.search(r"^\W*(?:an?|the|another|new)?\s*(?:sweep|tuning)\b", rest):
            return "sweep"
        if re.search(r"^\W*(?:an?|the)?\s*(?:benchmark|eval)", rest):
            return "bench"
        return "run"
    return _question(lowered) if question else _imperative(lowered)


def _question(lowered: str) -> str:
    """What a question asks: never a launch."""
    if re.search(r"\bwhere\b.*\b(?:report|pull request|pr|docs)\b|\b(?:link|url) (?:to|of)\b", lowered):
        return "where"
    if re.search(r"\bwhy\b", lowered):
        return "why"
    hardware_named = re.search(GPU_NAME + r"|\bnodes?\b|\b\d+ ?b\b|" + "|".join(map(re.escape, MODELS)), lowered)
    if (re.search(_WHAT_IF, lowered) or hardware_named) and not re.search(_PAST, lowered):
        return "plan"
    if len(re.findall(r"\bruns/[\w.-]+", lowered)) >= 2:
        return "compare"
    if re.search(r"\bcompare|\bcomparison|\bversus\b|\bvs\.?\b|\bdiffer", lowered) and "trial" in lowered:
        return "trials"
    if re.search(r"\bcompare|\bcomparison|\bversus\b|\bvs\.?\b|\bdiffer", lowered) and re.search(
        r"\bruns\b(?!/)|\btrials\b|\blast two\b|\bboth\b|runs/\S+.*runs/\S+|\bbetween\b", lowered
    ):
        return "compare"
    if re.search(_SWEEP_STATE, lowered):  # "is the sweep done?": its job's state, not its trials
        return "status"
    if re.search(r"\bwinner|\btrials?\b|\bsweep\b", lowered):
        return "trials"
    if re.search(r"\b(?:what|which) (?:gpus|devices|hardware)\b|\bhow many (?:gpus|devices)\b|\bhardware\b", lowered):
        return "hardware"
    if re.search(r"\b(?:list|which|what) runs\b|\bruns are there\b", lowered):
        return "runs"
    if re.search(r"\bstatus\b|\bprogress\b|\bis (?:it|the run|that run) (?:done|finished|running|over)\b", lowered):
        return "status"
    if re.search(r"\b(?:fastest|best|optimal)\b.*\blayouts?\b|\blayouts?\b.*\b(?:fastest|best)\b", lowered):
        return "plan"
    if any(re.search(rule, lowered) for rule in TOPICS.values()) or re.search(r"\bresults?\b|\bmetrics\b", lowered):
        return "results"
    return "help"


_RULES: list[tuple[str, str]] = [
    (
        "docs",
        r"\b(?:update|refresh|rewrite|write|improve|regenerate)\b.*\b(?:docs|documentation|training\.md|readme)|"
        # the docs first, their update needed after: "docs need updating per sweep results", "the readme could do
        # with a refresh" (not "the docs were updated": done)
        r"\b(?:docs|documentation|training\.md|readme)\b.*\b(?:needs?|wants?|requires?|could\s+do\s+with)\s+"
        r"(?:(?:a|an|some)\s+)?(?:updat|refresh|rewrit|regenerat)\w*",
    ),
    ("why", r"\bwhy\b|\bexplain\b"),
    ("plan", r"\b(?:fastest|best|which|optimal)\b.*\blayouts?\b|\blayouts?\b.*\b(?:fastest|best)\b|\bplan\b"),
    ("hardware", r"\bhardware\b|\bwhat (?:gpus|devices)\b|\bhow many (?:gpus|devices)\b"),
    ("cancel", r"\b(?:cancel|stop|abort|kill)\b"),
    ("resume", r"\bresume\b|\bcontinue\b.*\bpreempted\b|\bpick\b.*\bback up\b"),
    ("pr", r"\bpull request\b|\bpr\b"),
    ("report", r"\breport\b"),
    ("bench", r"\bbenchmark|\bevaluat|\beval\b"),
    ("status", _SWEEP_STATE),  # "check the sweep's progress" asks about the sweep, not for another one
    # "show sweep lr-scan", "display the summary of sweep lr-scan": a sweep read, never another one started
    ("trials", r"^\W*(?:please\s+)?(?:show|read|open|display|view|pull up)\b(?:\s+[\w'-]+){0,4}?\s+sweep\b"),
    # "sweep the layouts" asks for one; "the sweep" names one ("the report after the sweep finishes"), as "the
    # summary of sweep lr-scan" does (a noun after "of" or "from"), and "sweep findings" (a noun before its figures)
    (
        "sweep",
        r"(?<!\bthe )(?<!\bthat )(?<!\bthis )(?<!\bour )(?<!\bmy )(?<!\bits )(?<!\bof )(?<!\bfrom )\bsweep\b"
        rf"(?!'s|\s+{SWEEP_FIGURES}(?!\s*[=:]))|\btun(?:e|ing)\b",  # ("sweep trials=8": its setting)
    ),
    ("status", r"\bstatus\b|\bprogress\b"),
    ("compare", r"\bcompare\b.*\b(?:runs|trials|last two)\b"),
    ("runs", r"\b(?:list|which|what) runs\b|\blist (?:the |all )?runs\b"),
    ("results", r"\bresults?\b|\bmetrics\b|\bloss\b|\bthroughput\b|\bmemory\b|\bmfu\b|\bnoise scale\b"),
    ("run", r"\b(?:train|retrain|launch|start|run|rerun|kick off)\b"),
    ("help", r"\bhelp\b"),
]


def _imperative(lowered: str) -> str:
    return next((command for command, rule in _RULES if re.search(rule, lowered)), "help")


# --- facts ------------------------------------------------------------------------------------------------------


# What says a GPU is not there to plan on, after its name: "H100 pool unavailable", "the a100s are down".
GPU_GONE = (r"(?:\s+(?:pool|cluster|nodes?|capacity|cards?|gpus?|fleet|quota|partition|allocation|reservation))?"
            r"\s+(?:(?:is|are|was|were|went|has\s+gone|have\s+gone)\s+)?(?:currently\s+|now\s+)?"
            r"(?:unavailable|not\s+available|down\b(?!\s+to\b)|gone|offline|unreachable|out\s+of\s+(?:capacity|"
            r"stock|service)|sold\s+out|not\s+there|decommissioned|broken|dead|faulty|out\s+of\s+order|"
            # taken by others, or not ours to plan on: "our h100s are booked all week", "h100 is out, a100 is in"
            r"(?:all\s+|fully\s+)?booked\b|busy\b|no\s+longer\s+(?:available|ours|an\s+option)|not\s+an\s+option)|"
            r"\s+(?:is|are|was|were)\s+(?:now\s+)?out\b(?!\s+of\b)")  # fmt: skip
# The GPU said gone still wanted: "the H100s are down, but I still want to plan on 8 of them for when they're back",
# "the A100s are gone. Launch on 2 GPUs anyway".
GONE_STILL_WANTED = (r"\b(?:still|anyway|regardless|nonetheless|all\s+the\s+same)\b|"
                     r"\b(?:for\s+when|once|after)\s+(?:they|it)(?:'re|\s+are|'s|\s+is)\s+back\b")  # fmt: skip
# What says a GPU is not there to plan on, before its name: "we lose the H100 pool", "without our a100s", "forget the
# h200s", "moving off the l40s", "migrating from a100" (negated, it says the GPU stays: "don't forget the h100s").
GPU_LOST = (r"(?<!n't\s)(?<!not\s)(?<!never\s)\b(?:lose|loses|lost|losing|without|give\s+up|gave\s+up|giving\s+up|"
            r"forget|skip|ditch|scrap|no\s+more|"
            r"(?:move|moved|moving|migrate|migrated|migrating|switch|switched|switching|went|going)\s+(?:away\s+)?"
            r"(?:off(?:\s+of)?|from)|away\s+from)\s+(?:access\s+to\s+)?"
            r"(?:(?:all\s+)?(?:of\s+)?(?:our|the|my|those|these)\s+)?")  # fmt: skip
# A GPU named as the one replaced: "strike L40S and substitute A100", "swap the L40S for A100s", "instead of H100s",
# "L40S -> A100". The other one named is meant.
_QUOTED_GPU = r"['\"]?(?:(?:nvidia|the)\s+)?" + GPU_NAME + r"['\"]?"
REPLACED_GPU = (rf"\b(?:replace|swap|strike|drop|remove|ditch|switch)\s+(?:out\s+)?({_QUOTED_GPU})(?=\s*(?:,?\s*and\s+"
                r"(?:substitute|use|put in|go with)|with|for|by|->|\u2192|=>))|"
                rf"\b(?:instead\s+of|rather\s+than|in\s+place\s+of)\s+({_QUOTED_GPU})|"
                rf"({_QUOTED_GPU})(?=\s*(?:->|\u2192|=>))|"
                # refused: "negative on a10, same on rtx-4090", "not on h100s: a100s", "not h200s -- they're too
                # pricey. h100 pcie ..." (where another is named)
                rf"\b(?:negative\s+on|(?:not|never)(?:\s+(?:on|with|using))?)\s+({_QUOTED_GPU})|"
                # not there to plan on: "primary H100 pool unavailable", "the a100s are down" (where another is named)
                rf"({_QUOTED_GPU})(?={GPU_GONE})|"
                # lost or given up: "we lose the H100 pool and fall back to 8x L40S", "without our a100s, on l40s"
                rf"{GPU_LOST}({_QUOTED_GPU})")  # fmt: skip
# A self-correction after which a GPU is named: "not l40s -> h200, I meant l40s -> h100" (the GPUs before it are gone).
GPU_CORRECTED = (r"\bi meant\b|\bi mean\b|\bactually\b|\bscratch that\b|\bscrap that\b|\bno wait\b|"
                 r"\bcorrection\b(?=\s*[:,\u2014-])|"
                 # "8 h100 pcie. sorry, the a100 80gb ones" (not "sorry to/for/if ...": a courtesy)
                 r"\bsorry\b(?=\s*[,:.!\u2014-])")  # fmt: skip


# A GPU said as the one to use instead, after its name: "we no longer have them, use 8 a10 instead" (the GPUs named
# before it are replaced; "instead of" names the one replaced: REPLACED_GPU).
GPU_INSTEAD = rf"{GPU_NAME}(?:\s+(?:gpus?|cards?|ones|nodes?|boxes))?\s*,?\s+instead\b(?!\s+of\b)"


def unreplaced(lowered: str) -> str:
    """`lowered` with the GPUs it says are replaced blanked out, where another GPU is named beside them (and those
    named before a self-correction that names one)."""
    spans = [m.span(g) for m in re.finditer(REPLACED_GPU, lowered) for g in (1, 5, 9, 13, 17, 21) if m.group(g)]
    corrections = [m.end() for m in re.finditer(GPU_CORRECTED, lowered) if re.search(GPU_NAME, lowered[m.end() :])]
    corrections += [m.start() for m in re.finditer(GPU_INSTEAD, lowered)]
    corrections.sort()
    if corrections:
        spans += [m.span() for m in re.finditer(GPU_NAME, lowered[: corrections[-1]])]
    blanked = lowered
    for start, end in spans:
        blanked = blanked[:start] + " " * (end - start) + blanked[end:]
    return blanked if re.search(GPU_NAME, blanked) else lowered


# One card, said with an owner or a word of its size between ("my 4090", "one little a10", "a lone h100"); the card's
# name singular ("my h100s" counts none) and no node's ("my h100 box" holds some).
LONE_GPU = (
    r"\b(?:my|one|an?|a single)\s+(?:(?:own|little|small|tiny|lone|lonely|old|trusty|humble|spare|single)\s+)?"
    r"(?:(?:nvidia|rtx)[ -]?)?(?:h100|h200|a100|a10|l40s|4090)(?:[ -]?(?:sxm|pcie|nvl))?(?:[ -]?\d+ ?gi?b)?\b"
    rf"(?!\s*(?:{NODE_NOUN}|cluster|pod|fleet)\b)"
)


# A count refused right before it: "negative on 1 node, assess with 4 nodes", "not 2 nodes but 4".
REFUSED_COUNT = r"\b(?:negative(?:\s+on)?|not(?:\s+on)?|rather\s+than|instead\s+of)\s+$"


def _counted_gpu(gpu: str, lowered: str) -> re.Match | None:
    """The first GPU named, said again later with its count where first said without one ("H200s won't be available
    until March; plan mistral-7b on 8 H200": 8 of them); another GPU's count is never taken for it."""
    named = list(re.finditer(gpu, lowered))
    if not named or named[0].group(1):
        return named[0] if named else None
    counted = (m for m in named[1:] if m.group(1) and m.groups()[1:] == named[0].groups()[1:])
    if same := next(counted, None):
        return same
    if _compared(named[0], lowered):  # "H100 PCIe vs NVL ... plan on 4x h100-nvl": the one the plan counts
        return next((m for m in named[1:] if m.group(1)), named[0])
    return named[0]


# A GPU named as one side of a comparison ("H100 PCIe vs NVL", "a100 or h100?"): weighed, not yet the one planned on.
COMPARED_AFTER = r"^\s*(?:vs\.?|versus|or|compared\s+(?:to|with)|against)\s"
COMPARED_BEFORE = r"\b(?:vs\.?|versus|or|compared\s+(?:to|with)|against)\s+$"


def _compared(found: re.Match, lowered: str) -> bool:
    return bool(
        re.match(COMPARED_AFTER, lowered[found.end() :]) or re.search(COMPARED_BEFORE, lowered[: found.start()])
    )


# A GPU with the count said before it ("8 H100s", "an 8x H100", "two a100").
COUNTED_GPU = r"(?:(?<![\w.])(\d+|an?|one|two|four|eight|sixteen)\s*(?:x\s*)?)?(?:(?:nvidia|dgx|hgx)\s+)*" + GPU_NAME


def _count_carried(said: str, blanked: str) -> str | None:
    """The count of the one card a correction replaced, where the card in its place has none: "8 a100 80gb, or
    rather h100 instead" is 8 h100s (a card lost or gone gives none: how many of the other is asked)."""
    if not (re.search(GPU_CORRECTED, said) or re.search(GPU_INSTEAD, said)):
        return None
    replaced = (m for m in re.finditer(COUNTED_GPU, said) if not blanked[m.start(2) : m.end(2)].strip())
    counts = {m.group(1) for m in replaced if m.group(1)}
    return counts.pop() if len(counts) == 1 else None


def _hardware_facts(lowered: str, intent: Intent) -> None:
    """GPU preset, devices per node, nodes and sequence length ("2 nodes of 8 A100 40GB", "a 4090", "at 8k")."""
    args = intent.args
    as_said, lowered = lowered, unreplaced(lowered)
    said = rf"(?<![\w.])(\d+|an?|one|two|four|eight|sixteen)\s+{GPU_OF_NODE}nodes?\b"
    if found := next((m for m in re.finditer(said, lowered) if not re.search(REFUSED_COUNT, lowered[: m.start()])),
                     None):  # fmt: skip
        args["nodes"] = _count(found.group(1))
    gpu = COUNTED_GPU
    if found := _counted_gpu(gpu, lowered):
        count, name, variant, size = found.groups()
        count = count or _count_carried(as_said, lowered)
        key = name.replace(" ", "-") + (f"-{variant}" if variant else "") + (f"-{size}gb" if size else "")
        try:
            args["gpu"] = _gpu_key(key)
            same = [m for m in re.finditer(gpu, lowered) if m.groups()[1:] == found.groups()[1:]]
            gone = any(re.match(GPU_GONE, lowered[m.end() :]) or re.search(rf"{GPU_LOST}$", lowered[: m.start()])
                       for m in same)  # fmt: skip
            gone = gone and not re.search(GONE_STILL_WANTED, lowered)
            if gone:  # "h100 pool unavailable. plan ... on 8 gpus": no other
                intent.clarify = f"Which GPU should I plan for, if the {name.upper()}s are not available?"
        except ConfigError as error:
            intent.clarify = f"{error}. Which GPU do you mean?"
        of_node = re.match(rf"\s*(?:{NODE_NOUN})\b", lowered[found.end() :])
        if count and of_node and not re.match(r"\d+\s*x", found.group(0)):
            args.setdefault("nodes", _count(count))  # "2 H200 nodes": 2 nodes, their GPUs per node unsaid
        elif count:  # "8 H100s", "an 8x H100 node" (8 in it)
            args["devices" if intent.command in ("plan", "why") else "nproc"] = _count(count)
    found = re.search(_UNKNOWN_GPU, lowered)
    planned = intent.command in ("plan", "why") and found and re.match(_UNKNOWN_GPU_MEMORY, lowered[found.end() :])
    if planned and "gpu" not in args:  # a plan on those cards (their memory the entities read): counted, not asked
        if count := re.search(_COUNT_BEFORE, lowered[: found.start()]):
            args.setdefault("devices", int(count.group(1)))
    elif found and "gpu" not in args:  # a launch is on this machine's cards: which card is meant, asked
        intent.clarify = (
            f"I have no {found.group(1).upper()} preset (GPU presets: {', '.join(GPUS)}): which do you mean?"
        )
    # "8 accelerators", "8x 80GB GPUs": devices with their memory said between
    if found := re.search(rf"(?<![\w.])(\d+)(?![\d.])\s*(?:x\s*)?(?:\d+(?:\.\d+)?\s*gi?b\s+)?(?:gpus?|devices?|cards?|"
                          rf"accelerators?|process(?:es)?|processors?|procs?|ranks|workers)\b(?!\s+(?:{NODE_NOUN})\b)",
                          lowered):  # fmt: skip
        key = "devices" if intent.command in ("plan", "why") else "nproc"
        args.setdefault(key, int(found.group(1)))
    if found := re.search(r"\b(?:on|across|over|with)\s+(?:a|an|one)\s+(?:single\s+)?(?:gpu|device)\b", lowered):
        args.setdefault("devices" if intent.command in ("plan", "why") else "nproc", 1)
    if re.search(LONE_GPU, lowered):  # "on my 4090", "one little a10": one card
        args.setdefault("devices" if intent.command in ("plan", "why") else "nproc", 1)
    if "gpu" not in args and (found := re.search(r"\b(\d+(?:\.\d+)?)\s*(gi?b)\b", lowered)):
        args["device_mem"] = f"{found.group(1)}GiB"  # a device's GB is its GiB (entities.device_memory)
    if found := re.search(
        rf"(?:seq(?:uence)?[ _-]?len(?:gth)?|context(?: length)?){CHANGED}"
        r"\s*(?:of|=|:|to|is|were|was|at|be)?\s*(\d+)\s*(k?)\b|"
        # ("a batch of 8 sequences" counts them: no length)
        r"\b(\d+)(?!\s+sequences\b)\s*(k?)(?:[ -]tokens?)?\s+"
        r"(?:context|sequences?|seq(?:uence)?(?:[ _]len(?:gth)?)?)\b|"
        r"\bat\s+(\d+)\s*(k)\b(?!\s*(?:steps?|iter\w*|trials?|tok\w*/|tokens? per))|"  # "fit ... at 8k?": context
        r"\bat\s+(\d+)\s*(k?)\s*tokens?\b(?!\s*(?:/|per\b|a second))|"  # "at 4096 tokens", not "at 900 tokens/s"
        rf"{TOKENS_PER_SEQUENCE}|"  # "1024 tokens per sequence", "samples of 2k tokens"
        # "if the sequences were longer, stretching to 2048 tokens each"
        r"\b(?:sequences?|samples?)\b[^.;!?]{0,40}?\b(\d+)\s*(k?)[ -]?tokens?\s+(?:each|apiece)\b",
        lowered,
    ):
        groups = (1, 3, 5, 7, 9, 11, 13)
        number, kilo = next((found.group(i), found.group(i + 1)) for i in groups if found.group(i))
        args["seq_len"] = int(number) * (1024 if kilo else 1)
    if found := re.search(SEQ_LEN_CHANGE, lowered):  # "from 256 to 1024 tokens": the length it goes to
        number, kilo = next((found.group(i), found.group(i + 1)) for i in (3, 7) if found.group(i))
        args["seq_len"] = int(number) * (1024 if kilo else 1)


# A value said with an article and a word of its size or manner: "the learning rate a gentle 0.0002", "weight decay a
# modest 0.05", "grad clip a sensible 1.0". Only a word of manner (never an amount added, an estimate or an old value:
# "a further 1e-4", "an extra 2e-4", "an additional 1e-4", "a whole 1e-3 higher", "an estimated 3e-4", "a typical
# 1e-3", "a previous 1e-3" are asked), and only a value that ends its clause or goes on to another thing ("..., bf16",
# "and fsdp"): nothing comparative, partial or corrective after it ("a good 3 orders of magnitude lower", "a cool 1/3
# of the default", "a good 2-3e-4", "a 2e-4 lower than the default", "a solid 2 more than now", "a typical 1e-3 is too
# high", "a risky 1e-2? no, 1e-3" are asked).
MANNER = (r"(?:gentle|modest|mere|meagre|meager|sensible|conservative|cautious|careful|safe|humble|reasonable|"
          r"moderate|measured|mild|tame|small|tiny|healthy|generous|bold|brave|aggressive|hefty|solid|nice|cool|"
          r"comfortable|decent|respectable|sane|lean|paltry|whopping|punchy|spicy|chunky|steady|soft|calm|good|sober|"
          r"standard|classic|trusty|lowly|polite)")  # fmt: skip
_LONE_VALUE = (r"(?:\d+(?:\.\d+)?(?:e-?\d+)?|\.\d+)(?![\w/%-]|\.\d)"
               r"(?=\s*$|\s*[,;)!]|\.(?:\s|$)|\s+(?:and|with|for|in|on|then|please)\b(?!\s+top\b))")  # fmt: skip
ARTICLE_MANNER = rf"(?:(?:a|an)\s+(?:{MANNER}\s+)?(?={_LONE_VALUE}))?"


# A setting changed to its value: "sequence length bumped to 2048", "micro batch set to 4", "lr raised to 1e-3".
CHANGED = (r"(?:\s+(?:(?:is|was|were|be|been|got)\s+)?(?:bumped|raised|set|increased|changed|reduced|lowered|"
           r"dropped|cut|upped|pushed|moved|turned|doubled|halved|going|extended|expanded|lengthened|shortened|put)"
           # ("lowered gently to 1e-4": a manner said between the change and its value)
           r"(?:\s+\w+ly)?(?:\s+(?:up|down|back))?(?:\s+\w+ly)?)?")  # fmt: skip
# ("the sequence length must be 512", "lr should be 1e-3": the value it must have; "the learning rate being 3e-4";
# "if the sequence length were 2048": the value a what-if supposes)
# ("the learning rate a gentle 0.0002", "lr of a mere 1e-4": an article and a word of manner before the value)
SET_TO = (CHANGED + r"\s*(?:of|=|:|to|is|at|being|were|(?:must|should|shall|will|would|has\s+to|needs?\s+to)\s+be)?\s*"
          rf"{ARTICLE_MANNER}")  # fmt: skip
# A sequence length said as the tokens of one sequence: "1024 tokens per sequence", "sequences of 2k tokens".
TOKENS_PER_SEQUENCE = (r"\b(\d+)\s*(k?)\s*tokens?\s+(?:per|each|a|an|in each|for each|of each)\s+"
                       r"(?:sequence|sample|example|seq|document|row)\b|"
                       r"\b(?:sequences?|samples?|examples?)\s+of\s+(\d+)\s*(k?)\s*tokens?\b")  # fmt: skip


# A sequence length said as a change: "going from 256 to 1024 tokens", "256 -> 1024 tokens", "context from 2k to
# 8k", "seq len 512 to 2048" (the length it changes from is the old one, no count of anything).
_CHANGED_TO = r"(?:\s+(?:up\s+|down\s+)?to\s+|\s*(?:->|\u2192|=>)\s*)"
SEQ_LEN_CHANGE = (r"(?:\bfrom\s+|(?<![\w.])(?=\d+\s*k?(?:[ -]?tokens?)?\s*(?:->|\u2192|=>)))"
                  rf"(\d+)\s*(k?)(?:[ -]?tokens?)?{_CHANGED_TO}(\d+)\s*(k?)"
                  r"(?=[ -]?tokens?\b|\s+(?:tokens?\s+)?(?:of\s+)?(?:context|sequences?|seq)\b)|"
                  r"\b(?:seq(?:uence)?[ _-]?len(?:gth)?|context(?: length)?)\s+(?:\w+\s+)?(?:from\s+)?(\d+)\s*(k?)"
                  rf"{_CHANGED_TO}(\d+)\s*(k?)\b")  # fmt: skip


# A card's variant refused after its name, none named in its place (normalise writes "not the sxm kind, the pcie
# ones" as the pcie one).
VARIANT_REFUSED = r"^[^.;!?]{0,20}?\b(?:not|no|never|except)\s+(?:the\s+|an?\s+)?(sxm|pcie|nvl)\b"


def _variant_refused(lowered: str, intent: Intent) -> None:
    """ "8 h100s, but not the sxm kind": the card read with its default variant, the one refused, so which is asked."""
    found = re.search(GPU_NAME, lowered)
    refused = found and not found.group(2) and re.search(VARIANT_REFUSED, lowered[found.end() :])
    if refused and str(intent.args.get("gpu", "")).endswith(f"-{refused.group(1)}"):
        name = found.group(1)
        others = [gpu for gpu in GPUS if gpu.startswith(f"{name}-") and gpu != intent.args["gpu"]]
        intent.clarify = f"Which GPU, if not the {name.upper()} {refused.group(1).upper()}: {' or '.join(others)}?"


def _gpu_key(key: str) -> str:
    key = {"rtx-4090": "rtx-4090", "4090": "rtx-4090"}.get(key, key)
    found = GPU_ALIASES.get(key, key)
    gpu_preset(found)  # a one-line error naming the closest presets
    return found


def _count(word: str) -> int:
    return int(word) if word.isdigit() else _COUNT_WORDS[word]


# The mixture-of-experts presets by name (tried first: "qwen3-30b-a3b" is not "qwen3-30b").
_MOE_NAMES = r"qwen3[\s-]\d+b[\s-]a\d+b|gpt[\s-]oss[\s-]\d+b|deepseek[\s-]v3|mixtral[\s-]8x\d+b"


def _model_fact(lowered: str, intent: Intent) -> None:
    """A model preset by its name ("llama-3.1-8b", "Llama 3.1 8B") or by family and size ("a 7B llama")."""
    families = "llama|mistral|mixtral|qwen|gemma|smollm"
    named = re.search(
        rf"\b(?:[\w-]+/)?({_MOE_NAMES}|(?:{families})[\s-]?\d+(?:\.\d)?[\s-]+\d+(?:\.\d)?\s?b|mistral[\s-]7b)\b",
        lowered,
    )
    if named:  # a name with its version: the preset, or a question naming the closest
        try:
            model_preset(named.group(1))
            _set_model(preset_key(named.group(1)), intent)
        except ConfigError as error:
            intent.clarify = f"{error}." if preset_key(named.group(1)) in REFUSED else f"{error}: which do you mean?"
        return
    loose = re.search(rf"\b(\d+(?:\.\d)?)\s?b(?:illion)?(?:[\s-]+parameter)?\s+({families})", lowered) or re.search(
        rf"\b({families})[\s-]?\d*(?:\.\d)?[\s-]+(\d+(?:\.\d)?)\s?b\b", lowered
    )
    if not loose:
        return
    size, family = loose.groups() if loose.group(1)[0].isdigit() else reversed(loose.groups())
    matches = [k for k in [*MODELS, *REFUSED] if k.startswith(family) and k.endswith(f"-{size}b")]
    if len(matches) == 1:
        _set_model(matches[0], intent)
    elif matches:
        intent.clarify = f"Which {size}B {family} do you mean: {' or '.join(matches)}?"
    else:
        close = ", ".join(k for k in MODELS if k.startswith(family)) or ", ".join(MODELS)
        intent.clarify = f"I have no {size}B {family} preset. Did you mean one of {close}?"


def _set_model(key: str, intent: Intent) -> None:
    if key in REFUSED:
        intent.clarify = REFUSED[key] + "."
    else:
        intent.args["model"] = key


def _run_facts(text: str, lowered: str, intent: Intent) -> None:
    """Which run, steps, and explicit degrees (dp_shard=2,tp=2)."""
    runs = re.findall(r"\b((?:runs|sweeps)/[\w.-]+(?:/trials/[\w.-]+)?)", text)
    if runs:
        intent.words = runs
    # "every 5 steps" is an interval (checkpoint_every), never the run's step count
    if found := re.search(rf"{NOT_INTERVAL}(?<![\w.])(\d+)\s*(?:optimi[sz]er\s+)?steps?\b|"
                          rf"\bsteps?(?:\s*[=:]?|{CHANGED}\s+to)\s*(\d+)\b", lowered):  # fmt: skip
        intent.args["steps"] = int(found.group(1) or found.group(2))
    dims = "|".join(LAYOUT_DIMS)
    for found in re.finditer(rf"\b((?:{dims})=\d+(?:,(?:{dims})=\d+)*)", lowered):
        if not refused_layout(lowered, found):  # "not tp=2. train ddp on 4 gpus": refused
            intent.args["layout"] = found.group(1)
            break
    named = []
    rest = lowered
    for pattern, dim in LAYOUT_WORDS:
        if re.search(rf"\b(?:{pattern})\b", rest):
            named.append("HSDP" if dim == "hsdp" else FAMILY_OF_DIM[dim])
            rest = re.sub(rf"\b(?:{pattern})\b", " ", rest)
    intent.families = named


# A count after "every" or "each" is how often, not how many ("a checkpoint every 5 steps").
NOT_INTERVAL = r"(?<!every )(?<!each )(?<!per )"


# A self-correction: what follows it replaces what came before ("fsdp, actually make it ddp", "correction: 4 nodes").
CORRECTION = (r"\.\.\.|\bno wait\b|\bactually\b|\bi mean\b|\bsorry\b|\bscratch that\b|\brather\b(?!\s+than\b)|"
              r"\bcorrection\b(?=\s*[:,\u2014-])")  # fmt: skip


def _launch_layout(lowered: str, intent: Intent, devices: int | None = None) -> None:
    """The layout and process count of a launch, from every layout word and degree the request states (those after
    a self-correction, where it names a layout: "with fsdp, actually make it ddp" is DDP)."""
    corrected = [m.end() for m in re.finditer(CORRECTION, lowered)]
    layouts = "|".join(p for p, _ in LAYOUT_WORDS) + "|" + "|".join(LAYOUT_DIMS)
    if corrected and re.search(rf"\b(?:{layouts})\b", lowered[corrected[-1] :]):
        lowered = lowered[corrected[-1] :]
        intent.args.pop("layout", None)
        if found := re.search(rf"\b((?:{'|'.join(LAYOUT_DIMS)})=\d+(?:,(?:{'|'.join(LAYOUT_DIMS)})=\d+)*)", lowered):
            intent.args["layout"] = found.group(1)
    if unknown := re.search(UNKNOWN_LAYOUTS, lowered):
        intent.clarify = (f"meshpilot has no {unknown.group(0)} layout. Did you mean FSDP (ZeRO-3: parameters, "
                          "gradients and optimizer state sharded; ZeRO-1 or 2 with train.zero_stage), DDP, HSDP, TP, "
                          "PP or CP?")  # fmt: skip
        return
    degrees: dict[str, int | None] = {}
    if "layout" in intent.args:
        degrees = {k: int(v) for k, v in (part.split("=") for part in intent.args.pop("layout").split(","))}
    if stages := re.search(r"\b(\d+)\s+(?:pipeline\s+)?stages\b", lowered):
        degrees["pp"] = int(stages.group(1))
    rest = lowered
    for pattern, dim in LAYOUT_WORDS:
        words = rf"(?:{pattern})"
        for found in re.finditer(
            rf"(?:(\d+)\s*(?:[- ]way|x)\s+{words}|\b{words}\s*(?:=|:|(?:of\s+)?degree|(?:of\s+)?size|of|x)?\s*(\d+)\b"
            rf"(?!\s*(?:steps?|gpus?|devices?|processes|procs?|nodes?))|\b{words}\b)",
            rest,
        ):
            if refused_layout(rest, found):
                continue
            degree = found.group(1) or found.group(2)
            if dim == "hsdp":
                if hsdp := re.search(rf"\b{words}\s*\(?(\d+)\s*x\s*(\d+)\)?", rest):
                    degrees["dp_replicate"], degrees["dp_shard"] = int(hsdp.group(1)), int(hsdp.group(2))
                else:
                    degrees.setdefault("dp_replicate", None)
                    degrees.setdefault("dp_shard", None)
            elif degrees.get(dim) is None:
                degrees[dim] = int(degree) if degree else None
        rest = re.sub(rf"\b{words}\b", " ", rest)
    if not degrees:
        return
    if "ep" in degrees and not _expert_degree(degrees, intent):
        return
    nproc = intent.args.get("nproc") or devices
    if (total := stated_total(lowered)) and len(degrees) >= 2:
        nproc = total  # "tp on 2 GPUs and the data sharded on 2, so 4 GPUs total": each count after a layout its degree
        for pattern, dim in LAYOUT_WORDS:
            after = re.search(rf"\b(?:{pattern})\s+(?:across|over|on|onto|between|among)\s+(\d+)\b", lowered)
            if after and degrees.get(dim, 0) is None:
                degrees[dim] = int(after.group(1))
    known = math.prod(d for d in degrees.values() if d)
    unknown = [dim for dim, d in degrees.items() if d is None]
    if len(unknown) == 1 and nproc and nproc % known == 0 and nproc // known > 1:
        degrees[unknown[0]] = nproc // known
    elif unknown and nproc and nproc % known == 0 and len(splits := _splits(nproc // known, len(unknown))) == 1:
        degrees.update(zip(unknown, splits[0], strict=True))  # "fsdp and tp on 4 gpus": 2 x 2 is the only split
    elif unknown:
        how = " and ".join(FAMILY_OF_DIM[d] for d in unknown)
        where = f"{nproc} processes" if nproc else "how many processes"
        intent.clarify = (f"How should {where} split over {how}? Give the degrees, e.g. "
                          f"`train it with {_example(degrees, nproc)}`.")  # fmt: skip
        return
    product = math.prod(degrees.values())
    if nproc and nproc != product:
        layout = _layout_text(degrees)
        intent.clarify = f"The layout {layout} needs {product} processes, not {nproc}: which do you want?"
        return
    intent.args["nproc"] = product
    intent.args["layout"] = _layout_text({**degrees, **intent.args.pop("ep", {})})


# The total of a combination, said as such: "so total 4 GPUs", "4 GPUs total", "a total of 8", "8 in all" ("a total
# of 100 steps" counts steps).
TOTAL = (r"\b(?:a\s+|in\s+)?total(?:\s+of)?\s+(\d+)\b(?!\s*(?:k\b|steps?|iter\w*|trials?|tokens?|epochs?|samples?|"
         r"nodes?|machines?|minutes?|hours?|seconds?))|\b(\d+)\s+(?:(?:gpus?|cards?|devices?|process(?:es)?|procs?|"
         r"ranks?)\s+)?(?:in\s+total|total|in\s+all|altogether|overall|all\s+together)\b")  # fmt: skip


def stated_total(lowered: str) -> int | None:
    """The total a launch states as such, or None."""
    found = re.search(TOTAL, lowered)
    return int(found.group(1) or found.group(2)) if found else None


def _expert_degree(degrees: dict[str, int | None], intent: Intent) -> bool:
    """ep borrows dp_shard x cp's ranks (trainer.layout): set it aside from the degrees that multiply to the
    processes, with dp_shard to borrow from where none is named. False (and a question) where no degree is given."""
    ep = degrees.pop("ep")
    if ep is None:
        intent.clarify = (
            "Which expert-parallel degree? It must divide the experts, e.g. `train it with dp_shard=4,ep=4`."
        )
        return False
    if "dp_shard" not in degrees and "cp" not in degrees:
        degrees["dp_shard"] = None
    intent.args["ep"] = {"ep": ep}
    return True


def _splits(total: int, parts: int) -> list[tuple[int, ...]]:
    """Every way to write `total` as an ordered product of `parts` degrees of at least 2."""
    if parts == 1:
        return [(total,)] if total >= 2 else []
    return [(d, *rest) for d in range(2, total + 1) if total % d == 0 for rest in _splits(total // d, parts - 1)]


def _example(degrees: dict[str, int | None], nproc: int | None) -> str:
    return ",".join(f"{dim}={d or 2}" for dim, d in degrees.items()) + (f" on {nproc} processes" if nproc else "")


def _layout_text(degrees: dict[str, int | None]) -> str:
    return Layout(**{"dp_replicate": 1, **{dim: d for dim, d in degrees.items() if d and d > 1}}).argument()


# The settings people name by their words, by the key a question about one names (agent.understanding).
SETTING_NAMES = {"micro_batch": r"micro[- _]?batch(?: size)?|batch size", "lr": r"learning rate|lr",
                 "warmup": r"warm-?up(?: steps)?", "seq_len": r"seq(?:uence)?[ _-]?len(?:gth)?|context(?: length)?",
                 "weight_decay": r"weight decay", "seed": r"seed"}  # fmt: skip
# Plain-language settings of a launch, as experiment overrides.
_SETTINGS: list[tuple[str, str]] = [
    # (a value before its key: "3e-4 lr"; never another key's value, "tp=2 lr 1e-4")
    (rf"\b(?:learning rate|lr){SET_TO}{_NUMBER}|(?<![\w=:.]){_NUMBER}\s+(?:learning rate|lr)\b", "train.lr"),
    # the rate named, then its new value ordered after a colon: "I retract the learning rate implicit in that: use
    # 1e-4 instead" (a rate's form only, never a count: "the lr is fine: use 4 gpus")
    (
        r"\b(?:learning rate|lr)\b[^.;!?:]{0,40}:\s*(?:use|take|go with|make it|set it to)\s+"
        r"((?<![\w.])\.\d+|\d+(?:\.\d+)?e-?\d+|0\.\d+)\b(?!\s*(?:gpus?|steps?|nodes?|ranks?|trials?))",
        "train.lr",
    ),
    (rf"\bmicro[- _]?batch(?: size)?{SET_TO}(\d+)", "train.micro_batch"),
    # "in tiny batches of 1": batches of a few are each rank's (at most 8, as normalise.MICRO_BATCH_MOST)
    # ("a batch of 8 sequences" may be the global one: asked)
    (
        r"(?<!global )\bbatches\s+of\s+([1-8])\b(?!\s*(?:k\b|tokens?|sequences?|samples?|examples?))",
        "train.micro_batch",
    ),
    (r"\bglobal batch(?: of| size)?\s*(?:=|:|to)?\s*(\d+)\s*tokens", "train.global_batch_tokens"),
    (rf"\bseed{SET_TO}(\d+)", "train.seed"),
    (rf"\bweight decay{SET_TO}{_NUMBER}", "train.weight_decay"),
    (rf"\bwarm-?up(?: steps)?{SET_TO}(\d+)", "train.warmup_steps"),
    (rf"\b(?:grad(?:ient)?[ _]clip(?:ping)?|clip)\s*(?:of|=|:|at|to)?\s*{ARTICLE_MANNER}{_NUMBER}", "train.grad_clip"),
    # the gradients named after the verb: "clip the grads at 1.0", "clip gradient norm to 0.5"
    (
        rf"\bclip(?:ping)?\s+(?:the\s+)?grad(?:ient)?s?(?:\s+norms?)?\s+(?:at|to)\s+{ARTICLE_MANNER}{_NUMBER}",
        "train.grad_clip",
    ),
    # "in bf16", "precision=fp8", or bare in a launch's list ("..., bf16, lr 3e-4"); "in" kept in the match, so that
    # "not in fp8" is read as negated
    (r"\b(?:(?:in|with|using|at)\s+|precision\s*(?:=|:|to|of)?\s*)?(bf16|fp32|fp8)\b", "train.precision"),
    # ("zero_stage=2" too) ZeRO-3 is FSDP2's default (ZERO_3_BESIDE)
    (r"\bzero(?:[-_ ]?stage)?(?:[- ]|\s*[=:]\s*)?([12])\b", "train.zero_stage"),
    (rf"\b(?:seq(?:uence)?[ _-]?len(?:gth)?){SET_TO}(\d+)\b", "data.seq_len"),
    # "a cosine schedule", "lr schedule: linear", "constant learning rate"
    (
        r"\b(cosine|linear|constant)\s+(?:lr\s+|learning rate\s+)?(?:schedule|scheduler|decay|annealing)\b|"
        r"\b(?:lr\s+|learning rate\s+)?schedule(?:r)?\s*(?:=|:|to|of)?\s*(cosine|linear|constant)\b|"
        r"\bconstant\s+(?:lr|learning rate)\b()",
        "train.lr_schedule",
    ),
    # "save a checkpoint every 5 steps", "checkpoint_every 10"
    (
        r"\bcheckpoints?\s+every\s+(\d+)\s*(?:steps?)?|\bcheckpoint(?:ing)?[_ ]every\s*[=:]?\s*(\d+)",
        "train.checkpoint_every",
    ),
]
# Experiment trackers a launch may log to (train.trackers): "log to wandb", "with tensorboard".
TRACKERS = {"wandb": r"wandb|w&b|weights (?:and|&) biases", "tensorboard": r"tensorboard", "mlflow": r"mlflow",
            "trackio": r"trackio"}  # fmt: skip
_SWITCHES: list[tuple[str, str]] = [
    (r"(?:activation|gradient) checkpointing|recomput\w*|\bac\b", "train.activation_checkpointing"),
    (r"(?:sequence |document )?packing|packed (?:sequences|documents)", "data.packing"),
    (r"torch\.?compile|compil(?:e|ation)", "train.compile"),
]


# ZeRO-3 said beside the layout that shards ("dp_shard=4,tp=2, zero 3"): the stage, written out as said (an experiment
# file may set another); said alone ("2 gpus with zero-3") it is the layout word, FSDP2's default stage. A word
# between a negation and it is taken back with it ("not full zero-3").
ZERO_3 = r"\b(?:(?:full|plain|whole)\s+)?zero(?:[- ]?stage)?[- ]?3\b"
SHARDING_NAMED = r"\bdp_shard\s*=|\bfsdp2?\b|\bfully[- ]sharded\b"


# A learning rate written as a fraction ("lr 1/1000"): asked about, as its numerator alone is no rate.
LR_FRACTION = r"\b(?:learning rate|lr)\s*(?:[=:]|of|to|at|is)?\s*(\d+)\s*/\s*(\d+)\b"


# A precision said with "only" or "alone" while another is named and not taken back ("fp8 for now, bf16 only", "bf16
# only as a fallback", "only fp8 for the eval later", "fp8 alone diverged"): the words may qualify a fallback, a later
# eval, a past run or the run itself, so they pick none; both are asked. ("bf16 only, no fp8" takes fp8 back: one
# precision.) "not bf16 only, fp8 too" takes back the "only", not bf16: both named.
ONLY_AFTER = r"\s+(?:only|alone|exclusively)\b"


def _one_precision(said: list[re.Match], lowered: str, intent: Intent) -> list[re.Match]:
    """The precision of a sentence: the one named and not taken back, or none where two are, asked (never the first
    one guessed, nor the one said with "only": a refusal or a fallback the rules miss would flip it)."""
    only_taken_back = [found for found in re.finditer(rf"\b({PRECISIONS})\b", lowered)
                       if re.search(NEGATED_SETTING, lowered[: found.start()])
                       and re.match(ONLY_AFTER, lowered[found.end() :])]  # fmt: skip
    values = {found.group(1) for found in said + only_taken_back}
    if len(values) <= 1:
        return said
    intent.clarify = (
        intent.clarify or f"Which precision: {' or '.join(sorted(values))}? Say e.g. `train.precision=bf16`."
    )
    return []


def _zero_3_beside_a_layout(lowered: str) -> bool:
    found = re.search(ZERO_3, lowered)
    return bool(
        found and not re.search(NEGATED_SETTING, lowered[: found.start()]) and re.search(SHARDING_NAMED, lowered)
    )


# A setting's value said with an article ("the micro batch a solid 2 more than now", "the steps a further 50"): where
# ARTICLE_MANNER reads no value of its own there, a change by an amount or a factor, asked (never the number taken).
_ARTICLE_NAMES = rf"{'|'.join(SETTING_NAMES.values())}|grad(?:ient)?[ _]clip(?:ping)?|the\s+steps"
ARTICLE_SAID = rf"\b(?:{_ARTICLE_NAMES})\s*(?:of|=|:|to|is|at|being)?\s*(?:a|an)\s+(?:[a-z]+\s+){{0,2}}?\.?\d[^,;.!?]*"


def _article_value_unread(lowered: str) -> str | None:
    """What a setting is said to be, with an article, that no value was read from."""
    for found in re.finditer(ARTICLE_SAID, lowered):
        if not re.match(rf"(?:{_ARTICLE_NAMES}){SET_TO}{_NUMBER}", found.group(0)):
            return found.group(0).strip()
    return None


def _overrides(text: str, lowered: str, intent: Intent) -> None:
    """Learning rate and other keys, packing, activation checkpointing and a model preset, as `--set` values."""
    overrides = list(intent.args.pop("set", []))
    # "train.lr=2e-4, data.packing=false": the comma ends the value
    overrides += [o.rstrip(",;.") for o in re.findall(r"(?<![\w.])((?:train|data|model|hardware|search)\.[\w.]+=\S+)",
                                                      text)]  # fmt: skip
    for pattern, key in _SETTINGS:
        said = [m for m in re.finditer(pattern, lowered) if not re.search(NEGATED_SETTING, lowered[: m.start()])]
        if key == "train.precision":
            said = _one_precision(said, lowered, intent)
        found = said[0] if said else None
        if found and not any(o.startswith(key + "=") for o in overrides):
            value = next((g for g in found.groups() if g), "constant")  # "constant lr" names no group's value
            value = "0" + value if value.startswith(".") else value  # ".0005" is 0.0005
            overrides.append(f"{key}={value}")
    if _zero_3_beside_a_layout(lowered) and not any(o.startswith("train.zero_stage=") for o in overrides):
        overrides.append("train.zero_stage=3")
    trackers = [name for name, said in TRACKERS.items()
                if (found := re.search(rf"\b(?:{said})(?!\w)", lowered))
                and not re.search(NEGATED_SETTING, lowered[: found.start()])]  # fmt: skip
    if trackers and not any(o.startswith("train.trackers=") for o in overrides):
        overrides.append(f"train.trackers=[{','.join(trackers)}]")
    if fraction := re.search(LR_FRACTION, lowered):  # "lr 1/1000": the rate it means asked, never its numerator
        overrides = [o for o in overrides if not o.startswith("train.lr=")]
        intent.clarify = (f"lr {fraction.group(1)}/{fraction.group(2)}: what learning rate do you mean? Write it as "
                          "one number, e.g. `lr 1e-3`.")  # fmt: skip
    # "lr 3e-4" with no value read asks; "a constant lr", "the lr schedule" name the schedule, not a value
    named_lr = re.sub(r"\bconstant\s+(?:lr|learning rate)\b|\b(?:lr|learning rate)[ _]?schedul\w*", " ", lowered)
    if (
        fraction is None
        and re.search(r"\b(?:learning rate|lr)\b", named_lr)
        and not any(o.startswith("train.lr=") for o in overrides)
    ):
        intent.clarify = "What learning rate? e.g. `train it with lr 1e-3`."
    if intent.clarify is None and (unread := _article_value_unread(lowered)):
        intent.clarify = f"{unread!r}: what value do you mean, exactly? Say the setting's new value as one number."
    for pattern, key in _SWITCHES:
        # (the name's alternatives grouped: each read after its verb, none alone, so that a bare "the compiler" or
        # "problems with the compilation" turns nothing on)
        said = rf"\b(without|no|disable|with|enable|using|turn on|turn off)\s+(?:the\s+)?(?:{pattern})"
        if found := re.search(said, lowered):
            on = found.group(1) not in ("without", "no", "disable", "turn off")
            overrides.append(f"{key}={'true' if on else 'false'}")
    if "model" in intent.args:
        overrides = model_override(intent.args.pop("model")) + overrides
    if overrides:
        intent.args["set"] = overrides
