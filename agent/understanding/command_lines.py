"""Doubts about a slash command typed as a command line (grammar.slash_as_words reads its words as a sentence): what a
careful colleague would not act on as read. A look at a noun that only has an action ("/pr show X", "/bench get r1")
is no order to act; a flag whose setting the call does not carry ("--draft", "--frobnicate") was not understood, and
acting without it is another request; a flag no tool may do ("--push main", "--and-delete", "--print-labels") is
refused as its words are; a pretence ("-n", "--validate-only"), a setting said both ways ("--no-packing --packing")
or twice negated ("--no-compile=false"), zero steps and a resume (only a preempted job may be) are asked about.

Each returns the question (or refusal) naming its best reading; None when the command line may be acted on.
"""

from __future__ import annotations

from agent.understanding import regex as re  # `re` with a cache the parser's patterns fit in
from agent.understanding.arguments import call_text
from agent.understanding.context import Context
from agent.understanding.entities import Entities
from agent.understanding.grammar import Intent
from agent.understanding.intents import ACTIONS
from agent.understanding.refusals import refusal

# Subcommands and flags that only look ("/pr show X", "/sweep --describe X", "/docs diff X"): no action.
LOOKS = r"show|list|ls|cat|read|view|get|describe|inspect|status|diff|info|print|display|logs?"
# Flags that ask for help on the command, never for the command itself.
HELP_FLAGS = ("--help", "-h", "-?", "--usage")
# Short flags of a pretence: "-n" is make's, rsync's and git's dry run.
PRETENCE_SHORT = ("-n",)
# Flags the call carries under another name ("--gpus 4" is nproc, "--warmup 5" is train.warmup_steps).
ALIASES = {
    "gpus": ("nproc",),
    "nproc_per_node": ("nproc",),
    "procs": ("nproc",),
    "num_gpus": ("nproc",),
    "warmup": ("warmup_steps",),
    "seq": ("seq_len",),
    "mesh": ("layout",),
    "run": ("run", "model"),
    "checkpoint": ("model",),
    "ckpt": ("model",),
    "config": ("experiment",),
    "cfg": ("experiment",),
    "exp": ("experiment",),
}
# Flags that name a layout's dimension or family ("--tp 2", "--dp-shard 2", "--fsdp"): carried in the call's layout.
LAYOUT_FLAGS = (r"(?:dp_?shard|dp_?replicate|tp|pp|cp|ep|fsdp|hsdp|ddp|zero\d?|tensor_parallel|pipeline_parallel|"
                r"data_parallel|context_parallel|sharded|replicated)")  # fmt: skip
# Words a flag may open with that only say on or off ("--disable-packing", "--enable-compile"), like "--no-".
SWITCHES = r"^(?:no|enable|disable|use|with|without)_"
# What a call never does anyway, so a flag that forbids it changes nothing ("/report X --no-push": no push).
NEVER_DONE = {"report": ("push", "pr", "pull_request"), "cancel": ("force",)}
# What a forbidden flag says in words, for agent.understanding.refusals to refuse as it refuses the sentence.
FORBIDDEN = (
    (r"delete|remove|rm|purge|wipe|erase", "delete the run"),
    (r"push|merge|admin|skip[-_]?review|no[-_]?review", "push it to main without the pull request"),
    (r"labels?|answers?|gold", "print the private labels of the benchmark"),
)


def flags_of(text: str) -> list[str]:
    """The `--flag` and `-f` tokens of a command line, as typed (a value after "=" kept)."""
    return [token for token in text.split()[1:] if re.match(r"-{1,2}[a-z?]", token, re.I)]


def doubt(text: str, intent: Intent, context: Context | None) -> Intent | None:
    """The reply in place of `intent`, read from the command line `text`, where acting on it would not be what was
    typed; None where it may stand."""
    tokens = text.strip()[1:].split()
    command, rest = tokens[0].lower(), tokens[1:]
    flags = flags_of(text)
    if forbidden := _forbidden(flags):
        return Intent("help", text=text, refusal=forbidden)
    if any(flag.lower() in HELP_FLAGS for flag in flags):
        question = (f"`/{command} --help` asks what /{command} does, so I have done nothing: `/help` lists every "
                    f"command. What should /{command} do here?")  # fmt: skip
        return Intent("help", {}, [command], text, clarify=question)  # "/launch --help": nothing launched
    if intent.command not in ACTIONS or intent.clarify:
        return None  # a read, or an action already asked about
    looked = next((word for word in rest[:1] + flags if re.fullmatch(rf"(?:--)?(?:{LOOKS})", word, re.I)), None)
    if looked:
        return _asked(intent, f"`{looked}` asks to look, and /{command} acts: I have done nothing")
    if question := _flag_doubt(flags, intent):
        return _asked(intent, question)
    if intent.args.get("steps") == 0:
        return _asked(intent, "--steps 0 trains nothing: I have launched nothing")
    if intent.command == "resume" and not _preempted(str(intent.args.get("run", "")), context):
        return _asked(intent, "only a preempted job can be resumed, and this one was not (or I cannot tell)")
    return None


def _preempted(run: str, context: Context | None) -> bool:
    """Whether the run named was preempted (its metrics say so): the only job a resume continues."""
    return bool(run.startswith("runs/") and context and context.known.root and "preempted" in context.known.facts(run))


def _forbidden(flags: list[str]) -> str | None:
    """The refusal of a flag no tool may do, worded as agent.understanding.refusals words it."""
    for flag in flags:
        name = flag.lstrip("-").partition("=")[0].lower()
        if name.startswith("no-") or name.startswith("no_"):
            continue  # "--no-push": a thing not done, never one refused
        for pattern, words in FORBIDDEN:
            if re.search(rf"(?:^|[-_])(?:{pattern})(?:$|[-_])", name):
                return refusal(words, Entities(words))
    return None


def _flag_doubt(flags: list[str], intent: Intent) -> str | None:
    """Why the flags cannot be acted on as read: one said both ways or negated twice, a pretence, or one whose
    setting the call does not carry (dropped, so the call is not what was typed)."""
    names = [flag.lstrip("-").partition("=")[0].lower().replace("-", "_") for flag in flags]
    for flag, name in zip(flags, names, strict=True):
        plain = re.sub(SWITCHES, "", name)
        value = flag.partition("=")[2].lower()
        if re.match(r"(?:no|enable|disable)_", name) and value in ("true", "false", "0", "1", "yes", "no", "on", "off"):
            return f"{flag} says the switch twice, so I cannot tell on from off"
        if {f"no_{plain}", f"disable_{plain}"} & set(names) and {plain, f"enable_{plain}"} & set(names):
            return f"--{plain.replace('_', '-')} is said both on and off"
        if flag in PRETENCE_SHORT or re.search(r"(?:^|_)(?:only|dry|noop|simulate|pretend)(?:$|_)", name):
            return f"I have no dry run ({flag}), so I have done nothing"
        if plain != name and plain == intent.command:
            return f"{flag} says not to do what the command reads as, so I have done nothing"
        if not _carried(plain, intent):
            return f"I do not know the flag {flag}, and acting without it is another request: I have done nothing"
    return None


def pretended(intent: Intent) -> Intent:
    """The planner's own slash command with a pretence among its keys ("/run steps=10 dry_run=true"): asked, since no
    tool pretends and the call without it would be real."""
    if intent.command in ACTIONS and any(re.search(r"dry|noop|simulate|pretend", key) for key in intent.args):
        return _asked(intent, "I have no dry run, so I have done nothing")
    return intent


def _carried(name: str, intent: Intent) -> bool:
    """Whether the call carries the setting a flag names: an argument of that name, or a setting whose key ends in it
    ("--no-packing" is data.packing=false, "--warmup 5" train.warmup_steps=5), or a layout's dimension in the call's
    layout ("--tp 2"); or the flag changes nothing of what the call does ("/report X --no-push")."""
    name = re.sub(SWITCHES, "", name)
    if name == intent.command or name in NEVER_DONE.get(intent.command, ()):
        return True  # "--resume runs/x": the call is the resume
    if "layout" in intent.args and re.fullmatch(LAYOUT_FLAGS, name):
        return True
    if any(key in intent.args for key in (name, *ALIASES.get(name, ()))):
        return True
    keys = [str(setting).partition("=")[0].rsplit(".", 1)[-1] for setting in intent.args.get("set", [])]
    return any(key == name or key.startswith(f"{name}_") for key in keys)


def _asked(intent: Intent, why: str) -> Intent:
    """`intent` held back with a question naming it."""
    intent.clarify = f"{why}. Did you mean {call_text(intent)}? yes / edit"
    return intent
