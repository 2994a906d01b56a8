"""Requests no tool may do, refused in one line instead of mapped to a nearby tool: deleting runs, sweeps,
checkpoints or files; pushing to main or force-pushing past the pull request; printing a token, password, API key or
environment variable. meshpilot's tools read, plan, launch, cancel, wait and open pull requests; none deletes, none
pushes to main, none reveals a secret or a benchmark's private labels, none runs a shell command ("run `df -h` in a
shell", "run rm -rf on the runs folder": the verb "run" of a shell command is no launch). The reply says what the
user can do instead.

Kept precise: "remove packing" and "drop the lr" are settings, "tokens per second" a figure; a deletion negated
("don't delete anything, just cancel r1") is no deletion.
"""

from __future__ import annotations

from agent.understanding import regex as re  # `re` with a cache the parser's patterns fit in
from agent.understanding.entities import Entities

DELETE = (r"\b(?:delete|deleting|remove|removing|rm(?:\s+-\w+)*|erase|erasing|wipe|wiping|purge|purging|nuke|nuking|"
          r"trash|trashing|destroy|destroying|get rid of|getting rid of|clean(?:ing)? up|clear(?:ing)? out|drop|"
          r"dropping|throw away|throw out|truncate|truncating|"
          # emptied, said of what holds text on disk: "clear the training log of tp-try", "empty it"
          r"(?:clear|clearing|empty|emptying)(?=\s+(?:(?:the|its|their|my|our|that|this|all|of)\s+){0,3}"
          r"(?:[\w'/.-]+\s+){0,2}?(?:logs?|files?|folders?|director(?:y|ies)|dirs?|outputs?|history|it|them)\b)|"
          # Portuguese and Spanish: "apaga o tp-try", "exclui o sweeps/lr-scan", "borra el runs/tp-try", "elimina r1"
          r"apag(?:a|ar|ue)|exclu(?:i|ir|a)|borr(?:a|ar|e)|elimin(?:a|ar|e)|delet(?:a|ar|e))\b")  # fmt: skip
# Verbs that also mean "leave out of what you show me" ("compare r1 but drop the failed trials"): a deletion only
# with a name of the repository or a thing on disk as their object, never trials or results.
SOFT_DELETE = r"drop|dropping|throw out|clear(?:ing)? out"
SHOWN_THINGS = r"\s+(?:\w+\s+){0,3}?(?:trials?|results|rows?|outliers?|numbers?|figures?)\b"
# What a deletion deletes, when no name of the repository is said: "all the old runs", "those checkpoints".
DELETED_THINGS = (r"\s+(?:(?:the|all|of|my|our|old|every|those|these|that|this|its|their|failed|stale|unused|"
                  r"previous|other|remaining)\s+){0,3}(?:[\w-]+\s+)?(?:runs?|sweeps?|checkpoints?|trials?|results|"
                  r"outputs?|logs?|directories|directory|dirs?|folders?|files?|branch(?:es)?|reports?|history|"
                  r"experiments?|everything|it all)\b")  # fmt: skip
# Every member of a set the sentence defines as runs, sweeps or checkpoints: "let S be the set of failed runs; delete
# every element of S", "remove each one of those runs" (the runs said before; a soft verb's "drop every one that
# failed" only leaves them out of what is shown).
EVERY_MEMBER = (
    r"\s+(?:every|each|all|any)\s+(?:(?:of\s+)?(?:the\s+)?)(?:elements?|members?|items?|entries|entry|ones?)\b"
)
RUNS_SAID = r"\b(?:runs?|sweeps?|checkpoints?)\b"
NAMED = ("run", "sweep", "checkpoint", "file", "experiment")
# A deleting verb split around its object ("throw tp-try away", "wipe r1 out", "toss the lr-scan sweep out"): a
# deletion where the object is a name of the repository (with GLUE words only). Thrown "up" is put up to be seen
# ("chuck tp-try's log.txt up here", "throw r1's curve up on screen"): only what is wiped or cleaned up is removed.
_SPLIT_OBJECT = r"\s+((?:[\w./'-]+\s+){1,4}?)"
_AWAY = r"(?:away|out(?!\s+of\b))"
# ... unless the sentence says it is not wanted any more: "chuck the lr-scan sweep up, we don't need it anymore",
# "chuck tp-try's checkpoint up, it's useless" (thrown out, not put up to see).
_NOT_WANTED = (r"(?=[^.;!?]*\b(?:(?:don'?t|do not|no longer|never)\s+(?:\w+\s+)?need|not needed|useless|worthless|"
               r"anymore|any more|rubbish|junk|garbage|trash)\b)")  # fmt: skip
SPLIT_DELETE = (rf"\b(?:throw(?:ing)?|toss(?:ing)?|chuck(?:ing)?){_SPLIT_OBJECT}(?:{_AWAY}|up{_NOT_WANTED})\b|"
                rf"\b(?:wip(?:e|ing)|clean(?:ing)?|clear(?:ing)?){_SPLIT_OBJECT}(?:{_AWAY}|up)\b")  # fmt: skip
PUSH = (r"\bforce[- ]?push\w*|\bpush\w*\s+(?:-f|--force)\b|\bpush\w*\s+(?:\S+\s+){0,4}?(?:straight|directly|right)?\s*"
        r"(?:to|into|onto)\s+(?:origin\s+)?(?:main|master)\b|\b(?:commit|merge)\w*\s+(?:\S+\s+){0,4}?"
        r"(?:straight|directly)\s+(?:to|into|onto)\s+(?:main|master)\b|\b(?:skip(?:ping)?|without|bypass\w*)\s+"
        r"(?:the\s+|a\s+)?(?:pr|pull request|review)\b.*\b(?:main|master)\b|"
        r"\brewrite\s+(?:the\s+)?(?:git\s+)?history\b|\breset\s+--hard\b")  # fmt: skip
# Changes landed on main by the agent itself, in other words than a push: "git push origin main", "merge the report
# branch into main", "commit the docs update to main", "put the report directly on main", "ship it to main", "overwrite
# main with ...", and main named before the review it skips ("into main, no PR needed", "to main w/o a pull request").
MAIN = r"(?:the\s+)?(?:origin[\s/]+)?(?:main|master)(?:\s+branch)?\b"
# ("shove the report straight onto main", "dump it on main"; "stick to main" keeps using it)
LANDED = (r"(?:push|merg|commit|ship|put|appl|land|send|deploy|writ|upload|check\s+in|overwrit|force|"
          r"shov|stick(?!\s+(?:to|with)\b)|slap|dump|chuck|toss|throw)\w*")  # fmt: skip
ON_MAIN = (rf"\bgit\s+push\s+(?:-\S+\s+)*(?:origin|upstream)\s+(?:main|master)\b|"
           rf"\b{LANDED}\s+(?:[^\s,;.!?]+\s+){{0,6}}?(?:(?:straight|directly|right)\s+)?(?:to|into|onto|on|in)\s+{MAIN}"
           # the branch itself, not "the main results" or "the main table of the docs": what follows ends it
           r"(?=\s*(?:$|[,.;:!?)\u2013\u2014-]|(?:and|with|without|w/o|directly|straight|now|please|yourself|too|so|"
           r"then|skip\w*|no|right|today|asap|for me)\b))|"
           rf"\boverwrit\w*\s+{MAIN}|{MAIN}[^.;!?]*\b(?:skip(?:ping)?|without|w/o|bypass\w*|no|sans)\s+(?:the\s+|a\s+|any\s+)?"
           r"(?:pr|pull request|review|code review)s?\b")  # fmt: skip
# A pull request asked for in the same sentence: "push the results to main as a PR" is the pull request it asks.
AS_PR = r"\b(?:as|in|via|through|open|opening|create|with)\s+(?:a\s+|the\s+)?(?:pr|pull request)\b"
# A landing on main the agent itself would do beside the pull request it opens: "open a PR and push it straight to
# main", "..., then merge it into main yourself" ("push the results to main as a PR" is that PR).
BYPASSED = r"\b(?:straight|directly|right)\s+(?:to|into|onto|on)\b|^[^.;!?]*?\byourself\b"
# What a benchmark keeps private, asked to be shown: its labels ("dump the hidden labels", "print the private label
# file"), the correct answers ("what the right ones are"), which examples a model got wrong. run_benchmark returns
# aggregate scores only; the request is refused whole (the benchmark beside it too: what it would show is the secret).
LABELS = (r"\b(?:(?:hidden|private|held[- ]out|sealed|gold|ground[- ]truth|secret|test)\s+(?:test\s+)?(?:labels?|"
          r"label\s+files?|answers?)|answer[- ]?keys?|labels?\s+files?|(?:correct|right|expected|true|gold)\s+"
          r"(?:answers?|labels?)|(?:benchmark|eval\w*|test)\s+(?:labels|answers))\b|"
          # a labels file named by its file name: "grab its labels.json from the benchmark"
          r"\blabels?\.(?:jsonl?|csv|tsv|txt|ya?ml|parquet)\b|"
          # per-example results: "which benchmark answers r1 got wrong", "the questions r1 failed"
          r"\b(?:answers?|questions?)\s+(?:that\s+|which\s+)?(?:[\w./-]+\s+){0,2}?"
          r"(?:got\s+wrong|got\s+right|failed|missed|gets?\s+wrong|flunked)\b")  # fmt: skip
# Private labels taken to be used elsewhere are shown as surely: "pull the private labels so I can score it myself".
FETCHED = r"\b(?:pull|get|fetch|grab|download|extract|retrieve|obtain|hand\s+over|need|want)\b"  # "i need the labels"
REVEAL = (r"\b(?:print|show|display|reveal|tell|give|echo|dump|cat|read|list|output|paste|send|post|leak|expose|"
          r"export|share|copy|what(?:'s| is| are)|whats|where(?:'s| is)|"
          # looked at rather than shown: "peek at the private answer labels", "let me see the hidden answers"
          r"peek\w*|look\w*|see|view|inspect\w*|check|access|open|glance|brows\w*|examin\w*)\b")  # fmt: skip
SECRET = (r"\b(?:api[ _-]?keys?|access[ _-]?tokens?|auth(?:entication)?[ _-]?tokens?|(?:hf|hugging ?face|github|gh|"
          r"openai|wandb|bearer|slack|aws)[ _-]?(?:tokens?|keys?|secrets?)|"
          r"secret(?:s|[ _-]keys?)?(?!\s+(?:to|of|behind|sauce|recipe))|passwords?|passwd|"  # not "the secret to speed"
          r"credentials?|creds|env(?:ironment)?[ _-]?var(?:iable)?s?|\.env|ssh[ _-]?keys?|private[ _-]?keys?|"
          r"(?!(?:pad|bos|eos|unk|sep|cls|mask|special|start|end|max|min|num|new|sort|cache)_)"  # a vocabulary's
          r"[a-z]+_(?:token|key|secret|password)|(?:my|the|your|our)\s+(?:[a-z]+\s+)?token"
          r"(?!\s*(?:/|per\b|counts?\b|budgets?\b|rates?\b|throughput\b|limits?\b|length\b|ids?\b|usage\b)))"
          r"\b")  # fmt: skip
# The only words between a deleting verb and the name it deletes: "remove the old run tp-try", "wipe out r1" (the
# verb's particle), not "remove packing from configs/long.yaml" (a setting of that file); Portuguese and Spanish
# articles too ("apaga o tp-try", "borra el runs/tp-try").
GLUE = {"the", "all", "of", "my", "our", "old", "those", "these", "that", "this", "run", "sweep", "checkpoint", "dir",
        "directory", "folder", "named", "called", "file", "both", "whole", "entire", "-r", "-rf", "-fr",
        "out", "o", "os", "el", "la", "los", "las"}  # fmt: skip
NEGATED = r"\b(?:don'?t|do not|never|not|no need to|without|instead of|rather than)\s+(?:\w+\s+)?$"
# A secret's file fetched is shown as surely: "grab r1's secrets.json" ("pull request" is no fetch).
SECRET_FETCHED = r"\b(?:pull(?!\s+requests?\b)|fetch|grab|download|retrieve)\b"
# A secret named under a negation of its showing ("show it to me, don't dump any env vars or API keys alongside it",
# "never print my token"): the verb and its object's words, or a noun joined to the secret ("tokens or passwords"),
# may stand between the negation and the secret.
SECRET_NEGATED = (r"\b(?:don'?t|do not|never|not|no need to|without|instead of|rather than)\s+(?:\w+\s+){0,3}"
                  r"(?:[\w-]+\s*,?\s*(?:or|and|nor)\s+(?:(?:any|the|my|our|your)\s+)?)*$")  # fmt: skip


def refusal(plain: str, entities: Entities) -> str | None:
    """The one-line reply to a request no tool may do, or None."""
    lowered = plain.lower()
    if deleted := _deletion(lowered, entities):
        where = f" (e.g. `rm -r {deleted}`)" if deleted.startswith(("runs/", "sweeps/")) else ""
        cancel = (
            f" I can cancel a run that is still going (`/cancel {deleted}`)." if deleted.startswith("runs/") else ""
        )
        return (f"meshpilot does not delete runs, sweeps, checkpoints or files: remove them yourself if you are sure"
                f"{where}.{cancel}")  # fmt: skip
    if _shell_command(lowered):  # "run `df -h` in a shell": the verb "run" of a shell command, never a launch
        return ("meshpilot does not run shell commands: run it in your own terminal. I can read runs and sweeps, plan "
                "layouts, launch, cancel or resume training, and open pull requests.")  # fmt: skip
    if _said(GPU_CHANGED, lowered):  # "nvidia-smi -r": no look at the hardware, a reset of it
        return ("meshpilot only looks at the GPUs (e.g. `what hardware do I have`); it never resets them or changes "
                "their settings: run that yourself if you are sure.")  # fmt: skip
    pushed = _said(PUSH, lowered) or _said(ON_MAIN, lowered)
    if pushed and (not _said(AS_PR, lowered) or re.search(BYPASSED, pushed.group(0) + lowered[pushed.end() :])):
        return ("meshpilot never pushes to main or force-pushes: it opens a pull request (`/pr`) on a branch of its "
                "own, for you to review and merge.")  # fmt: skip
    if _said(LABELS, lowered, SECRET_NEGATED) and re.search(rf"{REVEAL}|{FETCHED}|\bwhich\b|\bwhat\b", lowered):
        return ("meshpilot never shows a benchmark's private labels, correct answers or per-example results: "
                "run_benchmark reports aggregate scores only (e.g. `benchmark runs/r1`), so I am not doing any of "
                "this request.")  # fmt: skip
    if _said(SECRET, lowered, SECRET_NEGATED) and re.search(rf"{REVEAL}|{SECRET_FETCHED}", lowered):
        return ("meshpilot never prints tokens, passwords, API keys or environment variables: read them in your own "
                "shell (e.g. `echo $HF_TOKEN`) if you need them.")  # fmt: skip
    return None


# nvidia-smi with a flag that changes the GPUs (a reset, persistence or compute mode, power limit, clocks, ECC, MIG):
# bare "nvidia-smi" or "nvidia-smi -q" only reads them.
GPU_CHANGED = (r"\bnvidia-smi\b[^.;!?|]*?\s(?:-r|--gpu-reset|-pm|--persistence-mode|-pl|--power-limit|-ac|"
               r"--applications-clocks|-rac|-lgc|--lock-gpu-clocks|-rgc|-lmc|-c|--compute-mode|-mig|-e|--ecc-config|"
               r"-p|--reset-ecc-errors)(?![\w-])")  # fmt: skip


def _said(pattern: str, lowered: str, negated: str = NEGATED) -> re.Match | None:
    """The first match of `pattern` that no negation before it takes back ("don't push to main")."""
    return next((m for m in re.finditer(pattern, lowered) if not re.search(negated, lowered[: m.start()])
                 and not _no_doing(lowered[: m.start()], m.group(0))), None)  # fmt: skip


def _no_doing(before: str, said: str) -> bool:
    """Whether "no" stands right before the verb's -ing: "no pushing to main" forbids the push ("no seriously
    delete r1" is no such negation)."""
    return bool(re.search(r"\bno\s+$", before)) and bool(re.match(r"\w+ing\b", said))


def _deletion(lowered: str, entities: Entities) -> str | None:
    """What the sentence asks to delete (the name it gives, else its words), or None: the verb's object must be a
    run, sweep, checkpoint or file, named or in words, within three words of it."""
    for verb in re.finditer(DELETE, lowered):
        if re.search(NEGATED, lowered[: verb.start()]):
            continue
        named = [e for e in entities.found if e.kind in NAMED and e.span[0] >= verb.end()
                 and set(lowered[verb.end() : e.span[0]].split()) <= GLUE]  # fmt: skip
        if named:
            return str(min(named, key=lambda e: e.span).value)
        if re.fullmatch(SOFT_DELETE, verb.group(0)) and re.match(SHOWN_THINGS, lowered[verb.end() :]):
            continue
        if (found := re.match(DELETED_THINGS, lowered[verb.end() :])) and not _a_setting(verb.end() + found.end(),
                                                                                         entities):  # fmt: skip
            return found.group(0).strip()
        rest = lowered[verb.end() :]
        if (
            not re.fullmatch(SOFT_DELETE, verb.group(0))
            and re.match(EVERY_MEMBER, rest)
            and re.search(RUNS_SAID, lowered)
        ):
            return re.match(EVERY_MEMBER, rest).group(0).strip()
        if not re.fullmatch(SOFT_DELETE, verb.group(0)) and (some := re.match(SOME_ONES, rest)):
            return some.group(0).strip()
        names = [e for e in entities.found if e.kind in NAMED]
        if names and not entities.has("switch_mention") and re.match(PRONOUN, lowered[verb.end() :]):
            return str(names[-1].value)  # "cancel r1 and then delete it": r1, never a setting ("remove it")
    return _split_deletion(lowered, entities)


def _a_setting(end: int, entities: Entities) -> bool:
    """Whether the thing a deleting verb takes ends inside a setting's name: "drop act ckpt", "remove activation
    checkpoints" turn activation checkpointing off, they delete no checkpoint. Not where a run or checkpoint is
    named ("delete the activation checkpoints in runs/r1" means files on disk)."""
    mentions = [e.span for e in entities.found if e.kind == "switch_mention"]
    return not entities.has("run", "checkpoint") and any(start < end <= stop for start, stop in mentions)


def _split_deletion(lowered: str, entities: Entities) -> str | None:
    """The name a deleting verb split around its object deletes ("throw tp-try away"), or None."""
    for verb in re.finditer(SPLIT_DELETE, lowered):
        if re.search(NEGATED, lowered[: verb.start()]):
            continue
        start, end = verb.span(1) if verb.group(1) else verb.span(2)
        named = [e for e in entities.found if e.kind in NAMED and start <= e.span[0] < end]
        rest = lowered[start:end]
        for e in sorted(named, key=lambda e: -e.span[0]):
            rest = rest[: e.span[0] - start] + " " + rest[e.span[1] - start :]
        if named and set(rest.replace("'s", " ").split()) <= GLUE:
            return str(named[0].value)
    return None


PRONOUN = r"\s+(?:it|them|that|those|both|this)\b"
# Runs pointed at as "ones" after a list of them: "every experiment and its status, then wipe the oom ones" (not
# after "drop", which may leave rows out of what is shown: "compare them but drop the failed ones").
SOME_ONES = r"\s+(?:(?:the|all|those|these|old|failed|other)\s+){0,3}(?:[\w-]+\s+)?ones\b"

# Programs no one would name for anything but a shell: "run rm -rf on runs", "execute du -sh runs/*".
SHELL_PROGRAMS = (r"rm|rmdir|df|du|ls|sudo|pkill|killall|chmod|chown|mkfs|curl|wget|bash|zsh|sh|apt|apt-get|htop|"
                  r"ps\s+aux|kill\s+-\d+|mv|scp|rsync|ssh|crontab|shutdown|reboot")  # fmt: skip
# A shell named as where to run something ("run nvidia-smi in a shell", "open a terminal and run pip install ..."):
# the imperative only ("r1 is running in my terminal" asks about r1); a dotted file name may stand in it.
_SHELL_NOUN = r"(?:shell|bash|terminal|console|command line)\b"
SHELL_PLACE = (r"(?<!\bis )(?<!\bit's )\b(?:run|execute|exec|type|enter|paste)\b(?:[^.;!?]|\.(?=\w)){0,80}?\b(?:in|on|"
               rf"from|into|via|through|using)\s+(?:(?:a|the|your|my|our)\s+)?{_SHELL_NOUN}|"
               rf"\bopen\s+(?:up\s+)?(?:(?:a|the|your|my|our|new)\s+)*{_SHELL_NOUN}|"
               # a shell handed over: "give me a shell on the node", "get me a root terminal"
               r"\b(?:give|get|hand|grant)\s+(?:me|us)\s+(?:a|an)\s+(?:root\s+|interactive\s+|login\s+)?"
               rf"{_SHELL_NOUN}")  # fmt: skip
# What a launch takes, stated outside any backquoted command: "run it in my terminal: 2 GPUs FSDP, 30 steps" and "run
# 30 steps with fsdp on 2 GPUs, like I'd do from the shell" name the shell only as how the user would say it.
LAUNCH_FACTS = r"\b\d+\s*(?:gpus?|steps?)\b|\b(?:fsdp|ddp|hsdp|tensor parallel|dp_shard|tp=\d)\b"
# Any program's name, when it opens a backquoted command ("run `cat runs/r1/log | tail` for me"; "`cp=2`" is a
# layout's key and value, no copy). (nvidia-smi too, though bare "run nvidia-smi" asks what the hardware is)
QUOTED_PROGRAMS = (
    SHELL_PROGRAMS + r"|cat|echo|find|grep|tail|head|top|free|git|docker|pip|tar|cp|kill|ps|nvtop|env|nvidia-smi"
)
SHELL = (r"\b(?:run|running|execute|executing|exec|type|typing|enter|fire off)\s+(?:(?:this|the|a|quick|command|"
         rf"please|just|me)\s+)*(?:`\s*)?(?:{SHELL_PROGRAMS})(?![\w.-])|`\s*(?:{QUOTED_PROGRAMS})(?![\w.=-])[^`]*`|"
         r"\brm\s+(?:-{1,2}\w+|dash\s+\w+)|\b(?:run|execute|exec)\s+(?:(?:a|the|some|this|that|these|those|any|"
         r"few|couple of)\s+)*(?:shell|bash|terminal|unix|linux)\s+commands?\b|"
         # a command line typed as such: "sudo nvidia-smi -pm 1", "cat notes.md | sh" (piped into a shell)
         r"^\W*sudo\s+\S|\|\s*(?:sudo\s+)?(?:sh|bash|zsh|xargs)\b|"
         # processes killed, not a run cancelled: "kill every python process", "kill all the python procs"
         r"\bkill\w*\s+(?:(?:all|every|each|the|any|of|those|these|my)\s+){0,3}(?:[\w-]+\s+)?"
         r"(?:process(?:es)?|procs?|pids?)\b|"
         # (the imperative only: "r1 is running in my terminal" asks about r1)
         rf"{SHELL_PLACE}")  # fmt: skip


def _shell_command(lowered: str) -> bool:
    """Whether the sentence asks for a shell command to be run (never negated: "don't run rm -rf, just cancel r1")."""
    found = _said(SHELL, lowered)
    if found is None:
        return False
    placed = re.fullmatch(SHELL_PLACE, found.group(0))
    return not (placed and "`" not in lowered and re.search(LAUNCH_FACTS, lowered))
