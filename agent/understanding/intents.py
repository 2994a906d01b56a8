"""Which tool a sentence asks for: every intent scored on its cues (words, question form, the entities found, the
conversation's previous action), the grammar's first reading counted as one more cue.

The scores are sums of weights; the best intent wins, and `close` says when a second one is near enough that the
planner should ask instead of acting.
"""

from __future__ import annotations

from agent.understanding import regex as re  # `re` with a cache the parser's patterns fit in
from agent.understanding.entities import (
    ANOTHER_INSTEAD,
    NEGATOR,
    NOUNS,
    SWITCHES,
    WAVED_OFF,  # "stop r1? no, just check its loss", "PR? nah", "PR: nope"
    Entities,
    masked,
)
from agent.understanding.grammar import SETTING_NAMES, SWEEP_FIGURES

# "do" opens a question only before its subject: "do we have ...?", not "do the same as r1 with 50 steps".
QUESTION = (r"^(?:what|what'?s|whats|how|how'?s|which|why|where|when|is|are|was|were|did|does|would|could|should|"
            r"can|will|who|tell me|explain|do (?:you|we|i|they))\b")  # fmt: skip
# ("would you set that going?", "set it running": a launch in the words for setting a machine going)
SET_GOING = r"set(?:ting)?\s+(?:it|that|this|them|(?:the|a|that|this)\s+(?:run|job|training))\s+(?:going|running)"
LAUNCH_VERB = (r"\b(?:train|retrain|launch|relaunch|restart|start|kick(?:ing)? off|fir(?:e|ing) (?:off|up)|run|rerun|"
               rf"re-run|try|{SET_GOING})\b")  # fmt: skip
# A run wanted in a state of going, as a sweep is: "I would like a run launched on 2 GPUs", "I want a training run
# started", or asked for in the passive: "I request that a run be launched" (not "I'd like the run launched yesterday
# looked at": the run named is one that exists; not "Dana requested that ...": hers, relayed).
# (Not asked whether one is going: "do we have a run going on 2 GPUs?", "did you get a run started?": RUN_GOING_ASKED.)
RUN_WANTED_GOING = (r"(?:(?<!\bdo we )(?<!\bdid we )(?<!\bdo you )(?<!\bdid you )(?<!\bdo i )(?<!\bdid i )"
                    r"\b(?:like|want|need|get|have)|\b(?:i|we)\s+(?:\w+\s+)?request\s+that|"
                    r"\bit\s+is\s+(?:hereby\s+)?requested\s+that)\s+"
                    r"(?:a|an|another|one more|a new|a fresh)\s+(?:[\w-]+\s+){0,2}?"
                    r"(?:run|training|job)\s+(?:be\s+)?(?:launched|started|kicked\s+off|fired\s+off|going|under\s?way|"
                    r"set\s+up)\b")  # fmt: skip
# Whether a run is going, asked: "do we have a run going on 2 GPUs right now?", "did you get a job started yesterday?"
# (a list of the runs answers it; never a launch offered).
RUN_GOING_ASKED = (r"\b(?:do|did|does|have|has)\s+(?:we|you|i|they|anyone|somebody|someone)\s+(?:already\s+|still\s+)?"
                   r"(?:have|get|got)\s+(?:a|an|any)\s+(?:[\w-]+\s+){0,2}?(?:runs?|jobs?|training)\s+"
                   r"(?:going|running|started|launched|kicked\s+off|under\s?way)\b|"
                   # its subject left out: "have a run going on the GPUs already?"
                   r"^\W*(?:have|got)\s+(?:a|an|any)\s+(?:[\w-]+\s+){0,2}?(?:runs?|jobs?)\s+(?:going|running|under\s?way)\b"
                   r"[^.!?;]*\?")  # fmt: skip
# A reply that changes the request before: "no, 4 GPUs", "yes, but 40 steps", "keep everything but use 4 gpus", "on the
# long config", "use the long config for that". ("no, don't" and "yes" alone change nothing.)
CHANGES_BEFORE = (r"^\W*(?:(?:no|nope|nah|yes|yeah|yep|sure)\b[\s,.!]*(?:but\b|(?=\d))|"
                  r"keep\s+(?:everything|all|the\s+rest)(?:\s+else)?\b[\s,]*but\b|"
                  r"(?:(?:yes|yeah|yep|ok(?:ay)?)\W+)?(?:but\s+)?(?:on|use|using)\s+(?:the\s+)?[\w.-]+\s+"
                  r"(?:config|experiment)\b)")  # fmt: skip
FOLLOW_UP = (r"^\W*(?:(?:hmm+|hm+|um+|uh+|well|oh|ah|right|alright|so)\W+)*"  # "hmm, what about 8k?"
             r"(?:and|what about|how about|same|ok|okay|now|then|also|cool|great|instead|but|with)\b|\binstead\b|"
             rf"\bagain\b|\bsame\b|\btoo\b\W*$|{CHANGES_BEFORE}")  # fmt: skip
# Started again where it stopped: "restart it from where it stopped" (a fresh launch starts from step 0; "where it
# left off" is its checkpoint).
RESTART_WHERE_STOPPED = (r"(?:restart|relaunch|rerun|re-run|run|start|continu|kick|reschedul|resubmit|resum|"
                         r"keep\s+go|carr(?:y|ies)\s+on)\w*\b"  # "can it keep going from where it stopped?"
                         r"[^.?!;]{0,40}?\bfrom\s+(?:where|the\s+point)\s+(?:it|they|that|we|you)?\s*"
                         r"(?:was\s+|were\s+|had\s+|got\s+)?(?:stopped|stopping|left off|died|dropped(?:\s+off)?|"
                         r"broke off|was cut|got to|cut out|halted|paused)\b")  # fmt: skip
# Taken up again where it stopped, "from" left out: "can you pick it up where it left off?", "take the sweep up again
# where it stopped" (a job's checkpoint; "pick up the log where it says ..." stops nothing).
PICKED_UP_WHERE = (r"\b(?:pick|take)(?:s|ed|ing)?\s+(?:(?:it|them|that|this|(?:the|that|this|our|my)\s+(?:[\w.-]+\s+)?"
                   r"(?:run|job|sweep|training))\s+)?up\s+(?:again\s+)?(?:from\s+)?(?:where|the\s+point)\s+"
                   r"(?:it|they|that|we|you)?\s*(?:was\s+|were\s+|had\s+|got\s+)?(?:stopped|left off|died|"
                   r"dropped(?:\s+off)?|broke off|was cut|got to|cut out|halted|paused)\b")  # fmt: skip
RESUME = (r"\b(?:resume|resuming|unpause)\b|\bcontinue\b.*\b(?:preempted|interrupted)\b|"
          # the stop told first, then the job to go on: "the sweep was preempted. Could you continue it?"
          r"\b(?:preempted|interrupted)\b.*\b(?:continue|carry on with|keep going with)\s+(?:it|them|that|this)\b|"
          r"\bpick\b.*\bback up\b|\bcarry on with\b|"
          # a job put back in the queue, or started again where it stopped: "requeue it"
          rf"\bre-?queue\w*\b|\b{RESTART_WHERE_STOPPED}|{PICKED_UP_WHERE}")  # fmt: skip
ACTIONS = ("run", "sweep", "bench", "cancel", "pr", "report", "docs", "resume")

# Hardware to be bought or rented: a what-if, never this machine ("in order to" orders nothing).
BUYING = r"\b(?:buy|buying|purchase|purchasing|(?<!in )order|ordering|rent|renting)\b"

# Something started, or had done, to find the best layout: what a sweep is for, said by someone who does not know the
# word ("kick something off that figures out the fastest layout", "so the tool works out the best way to split").
FINDS_BEST = (
    r"\b(?:start|launch|run|kick(?:ing)?\s+(?:\S+\s+)?off|fire\s+(?:\S+\s+)?off|set up|begin|have|let|get)\b"
    r"(?!\s+to\b)[^.?!]*?\b(?:figures?|finds?|works?|picks?|determines?|discovers?|tries|tests?|measures?|searches|"
    r"searching)\s+(?:out\s+|for\s+)?(?:\w+\s+){0,3}?(?:best|fastest|optimal|quickest|ideal)\s+(?:way\s+to\s+"
    r"(?:split|shard|paralleli[sz]e|distribute|divide|spread|lay)|layouts?|mesh|split|parallelism|setups?|"
    r"configurations?|settings?)\b|"
    # found by the tool itself, by trying: "have it automatically find the fastest setup", "auto-pick the layout"
    r"\bautomatic(?:ally)?\s+(?:find|pick|choose|select|search|determine|figure\s+out|work\s+out|tune)s?\b"
)
# A run stopped in everyday words ("shut it down", "pull the plug on r1", "pul the plug": the idiom is its own evidence
# with a letter dropped, too short for the typo fixer); "did r1 shut down cleanly?" asks, as any
# question about an action does (score). A setting shut off ("shut off packing", "shut AC off") is no run stopped.
_SETTING_NAMES = "|".join(SWITCHES.values())
_NO_SETTING = rf"(?!(?:off\s+)?(?:the\s+)?(?:{_SETTING_NAMES})\b)"
SHUT_DOWN = (
    rf"shut(?:ting|s)?\s+{_NO_SETTING}(?:\S+\s+){{0,3}}?(?:down|off)(?!\s+(?:the\s+)?(?:{_SETTING_NAMES})\b)|"
    rf"shutdown|pull?(?:ing)?\s+the\s+plug|take\s+{_NO_SETTING}(?:\S+\s+){{1,3}}?(?:down|offline)\b|"
    # a run ended in the words for a product or an animal ended: "sunset r1", "retire that job", "put it down now"
    r"(?:sunset(?:ting)?|retir(?:e|ing))\s+(?!(?:from|to|at|in|on|early|soon|after|before|when|and|or|now)\b)"
    r"[\w./-]+|"
    r"put(?:ting)?\s+(?:it|that|this|(?:the|that|this)\s+(?:run|job))\s+down\b(?!\s+(?:as|for|to|in|on)\b)"
)
# How well a run used the hardware, in words: its MFU (a figure of the run), never a question about this machine.
_WELL = r"(?:(?:really|very|so)\s+)?(?:well|efficiently|fully|effectively|properly|badly|poorly)\b"
_USE = (r"\b(?:us(?:e|ed|es|ing)|utili[sz](?:e|ed|es|ing)|exploit(?:ed|s|ing)?)\s+"
        r"(?:the\s+|our\s+|its\s+|all\s+(?:the\s+)?)?")  # fmt: skip
_HARDWARE = r"(?:hardware|gpus?|cards?|accelerators?|compute)\b"
# The cards of this machine, by the names users give them (the hardware cues' questions about them).
_OWN_CARDS = r"(?:gpus?|cards?|graphics cards?|accelerators?)\b"
USED_WELL = (rf"{_USE}{_HARDWARE}\s+{_WELL}|\bhow\s+{_WELL}[^.?!;]*?{_USE}{_HARDWARE}|"
             rf"\b{_HARDWARE}\s+(?:(?:is|was|are|were|being|got|get)\s+)?(?:used|utili[sz]ed|exploited)\s+{_WELL}|"
             r"\b(?:hardware|gpu|compute)\s+(?:utili[sz]ation|efficiency)\b")  # fmt: skip
# A setting named as what to tune or sweep, the verb's object in a request ("tune the learning rate for
# configs/long.yaml", "please sweep the lr"; not "did we tune the lr in lr-scan?"): a sweep is asked for, which
# varies layouts only (the planner asks; agent.understanding.arguments._fill_sweep). A sweep named by what it varied
# ("the lr sweep", "a finished sweep over learning rates") is one on disk, no request.
TUNED_SETTING = (r"(?:^|[,;:.!?]\s*|\b(?:to|please|pls|and|then|you|let'?s)\s+)(?:tune|sweep)"
                 r"\s+(?:over\s+|across\s+)?(?:the\s+|our\s+|my\s+|its\s+)?"
                 rf"(?:{'|'.join(SETTING_NAMES.values())})s?\b")  # fmt: skip
# Trials left at their default ("default trials", "the usual number of trials"): a setting of a sweep to run where a
# sweep is asked for ("sweep long.yaml, the usual trials"); else a sweep's trials to read ("show me the usual trials of
# lr-scan"). score() decides which, after the other cues.
_DEFAULT = ("default", "usual", "standard", "normal", "stock")
DEFAULT_TRIALS = rf"\b(?:{'|'.join(_DEFAULT)})\s+(?:number\s+of\s+|count\s+of\s+)?trials?\b"
_NOT_DEFAULT = "".join(rf"(?<!{word}\s)" for word in _DEFAULT)
# Cue words of each intent, with their weights.
# The docs by any of their names ("the doc page", "the readme"), and what brings them up to date, in any form
# ("refreshing", "updated").
DOC_NOUN = r"(?:docs|documentation|documents|readme|training\.md|docs?\s+pages?|training\s+docs?)"
DOC_VERB = r"(?:updat|refresh|freshen|regenerat|rewrit|sync)\w*\b"
# "put the lr-scan numbers into docs/training.md", "pull the figures from x into the README": figures written into
# the docs are an update of them
_WRITE_INTO = (r"(?:put|add|get|write|bring|record|copy|paste|pull|move|carry|feed|fold|transfer|go|goes|land|"
               # or joined in, said as a craft: "graft those findings into the README", "weave them into the docs"
               r"graft|splice|insert|incorporate|integrate|weave|stitch)")  # fmt: skip
_INTO_DOCS = rf"\b(?:in|into|to|onto)\s+(?:the\s+)?(?:{DOC_NOUN}|\S*training\.md)\b"
WRITTEN_INTO_DOCS = rf"\b{_WRITE_INTO}\b.*{_INTO_DOCS}"
# "bring the readme in line with these findings", "keep docs/training.md up to date", "bring docs/training.md and the
# README into accord with layouts-nov": the docs made to agree (their pages are written to, not read)
DOCS_AGREE = (rf"\b(?:bring|brings|keep|keeps|get|make)\b.*\b{DOC_NOUN}\b.*\b(?:(?:in|into)\s+(?:line|sync|step|"
              r"accord|agreement|accordance|harmony|keeping|conformity|conformance|alignment|parity)\s+with|"
              r"up to date|in sync|consistent with)\b")  # fmt: skip
# The docs asked to say something: "can the docs reflect lr-scan now?", "could the README cover what it found?" ("do
# the docs mention lr-scan?" asks what they say: read).
DOCS_TO_REFLECT = (rf"\b(?:can|could|should|would|will|let|please)\s+(?:the\s+|our\s+)?{DOC_NOUN}\s+(?:now\s+)?"
                   r"(?:reflect|include|cover|capture|incorporate)\b")  # fmt: skip
# The docs said not to say it: "the docs can't reflect lr-scan until we review it", "I'd like the docs to never cover
# lr-scan" (mood.held_back holds the update back).
DOCS_KEPT = (rf"\b{DOC_NOUN}\s+(?:to\s+)?(?:can'?t|cannot|shouldn'?t|should not|mustn'?t|must not|won'?t|will not|"
             r"never|not|don'?t|do not)\s+(?:(?:yet|ever|be made to)\s+)?"
             r"(?:reflect|include|cover|capture|incorporate|mention|say)\b")  # fmt: skip
# "report" as "tell": "report back", "report how it ended", "report the terminal state", "report final state" (no
# report written)
TOLD_BACK = (r"\s+(?:back|how|whether|if|when|what|(?:(?:its|the|their)\s+)?(?:terminal\s+|final\s+|end\s+)?"
             r"(?:state|status|outcome|exit))\b")  # fmt: skip
# A run's state told, as a "status report" or "progress report" is: no report of a sweep written.
STATE_TOLD = r"(?<!\bstatus )(?<!\bprogress )"
# A run's folder listed as on a shell: "ls runs/tp-try", "ls -la runs/r1/".
LISTED_RUN = r"^\W*(?:ls|dir|tree)\s+(?:-\w+\s+)*runs/[\w.-]+/?\W*$"
# A folder of the repository named as one: "the sweeps folder", "configs/" (runs/ lists the runs: CUES["runs"]).
FOLDER = r"\b(?:the\s+)?(sweeps|configs|docs)(?:/(?![\w.-])|\s+(?:folder|directory|dir)\b)"
# "st?", "stat?": a run's status, in the shortest shorthand ("50st" is 50 steps)
STATUS_SHORTHAND = r"(?<![\w.-])(?:st|stat|sts)\s*\?"
# A machine, and what it holds (the hardware cues below).
_MACHINE = r"(?:box|machine|host|computer|server|workstation|node|rig)"
_PART = r"(?:gpus?|accelerators?|cards|cores|cpus?|memory|v?ram)"
# A file the object of a fetching verb ("pull its memory.json"), right after the verb and a determiner.
FETCHED_FILE = (r"\b(?:pull|grab|fetch)\s+(?:up\s+)?(?:(?:its|the|their|[\w-]+'s)\s+)?"
                r"[\w./-]+\.(?:jsonl?|ya?ml|txt|md|log|csv|toml)\b")  # fmt: skip

CUES: dict[str, list[tuple[str, float]]] = {
    "hardware": [
        (r"\bhardware\b(?!\s*[:=]\s*\S)", 4),  # "- hardware: 1 x H100" is a field of the request, no question of it
        (
            r"\bnvidia-smi\b|\bcpu cores?\b|"
            r"\bhow much (?:v?ram|memory|gpu memory)\b.*\b(?:box|machine|host|computer|server|here|node)\b",
            5,
        ),
        (
            r"\b(?:how many|what|which) (?:gpus?|cpus?|cores|devices|accelerators)\b.*"
            r"\b(?:i have|have i|this|here|got)",
            5,
        ),
        (r"\bwhat (?:gpus|devices) (?:do|does|are)\b", 3),
        (r"\b(?:this|the|my|current|local) (?:box|machine|host|computer|server|workstation|rig)\b", 2),
        # the GPUs' state here, as a whole: "what's the gpu situation?", "the hardware picture on this box" (not a
        # run's: "the gpu situation during r1", "the hardware picture of tp-try's OOM")
        (
            r"\b(?:gpu|hardware|accelerator|compute)s?\s+(?:situation|picture|inventory|lineup|line-up)\b"
            rf"(?![^.?!;]*\b(?:during|of|for|from|in)\s+(?!(?:this|the|my|our)\s+{_MACHINE}\b))",
            3,
        ),
        # the machine named with what it holds, listed: "this machine: its accelerators, its cores, its memory"
        (
            rf"\b(?:this|my|our)\s+{_MACHINE}\b[^.?!;]*\b{_PART}\b[^.?!;]*\b{_PART}\b|"
            rf"\b{_PART}\b[^.?!;]*\b{_PART}\b[^.?!;]*\b(?:of|in|on|inside)\s+(?:this|my|our)\s+{_MACHINE}\b",
            4,
        ),
        # what the machine holds, asked: "what's on this box, GPUs and memory?", "what is in this server?"
        (
            r"\bwhat(?:'s| is)\s+(?:on|in|inside)\s+(?:this|the|my|our)\s+(?:box|machine|host|computer|server|"
            r"workstation|node)\b[^.?!;]*\b(?:gpus?|memory|v?ram|cpus?|cards|cores|accelerators)\b",
            4,
        ),
        # radio-speak for a look at the machine: "equipment check", "say accelerators on station"
        # (not one said not to be done: "skip the equipment check", "don't do a gpu check", "no gpu check needed")
        (
            r"(?:^|[.?!;,])(?:(?!\b(?:skip\w*|don'?t|do not|no|not|without|never|forget)\b)[^.?!;,])*?"
            r"\b(?:equipment|hardware|gpu|accelerator)\s+check\b(?!\s+(?:is\s+)?(?:needed|necessary|required))",
            4,
        ),
        (r"\b(?:accelerators?|gpus?|cards)\s+(?:on|at)\s+(?:station|hand)\b", 3),
        (r"\bram\b", 1.5),
        # "run nvidia-smi for me": the hardware tool's own look at the cards, no launch ("run" of a program)
        (r"\b(?:run|execute|exec)\s+(?:\S+\s+){0,2}?nvidia-smi\b(?!\s+-)", 4),
        (
            r"\b(?:accelerators?|gpus?|devices?|cores?|cpus?|compute|resources)\b.*"
            r"\b(?:available|installed|attached|in here)\b|"
            # what is installed first, the machine after: "what's actually installed in this machine: cores, cards?"
            r"\b(?:installed|available|fitted|inside)\s+(?:in|on|inside)?\s*(?:this|the|my|our)\s+(?:box|machine|"
            r"host|computer|server|workstation|node)\b",
            4,
        ),
        (
            r"\blscpu\b|\bhtop\b|\bfree -h\b|\bspecs\b|"
            r"\b(?:gpu|system|hardware|hw|machine|cpu) info\b|"
            r"^\W*(?:meshpilot\s+)?(?:hw|hardware)\s+--?\w+|"  # the command with its flags: "hw --show gpus"
            r"\bwhat (?:machine|box|hardware|computer|server)\b|"
            r"\b(?:machine|box|server) am i on\b|"
            # "what kind of machine am I sitting on?", "what sort of box is this?"
            r"\bwhat (?:kind|sort|type) of (?:machine|box|hardware|computer|server|workstation|node)\b",
            5,
        ),
        # the machine that is mine asked about, the verb after its object as some learners order it: "tell me which
        # machine I have", "what hardware we are on"
        (
            r"\b(?:what|which) (?:machine|box|host|computer|server|workstation|hardware|system|node)\s+"
            r"(?:(?:do|am|are|did)\s+)?(?:i|we)\s*(?:have|got|use|'?m on|am on|are on|'?re on|run on|work on)\b",
            5,
        ),
        # what this machine holds, asked: "what's actually inside this machine?", "what is in the box we're on?"
        (
            r"\bwhat(?:'s|s| is| do we have| have we got)\s+(?:\w+\s+)?(?:in|inside)\s+(?:this|the|my|our)\s+"
            r"(?:box|machine|host|computer|server|workstation|node|rig)\b",
            5,
        ),
        # the machine named first, what it has after: "for this computer, how many cores and how much memory?"
        (
            r"\b(?:this|the|my|current|local|which|what) (?:box|machine|host|computer|server|workstation)\b.*"
            r"\bhow (?:much|many) (?:v?ram|memory|gpus?|cores?|cpus?)\b",
            5,
        ),
        # a bare word asked: "gpus?", "cores?", "how much ram?"
        (
            r"^\W*(?:any\s+|which\s+|what\s+|how many\s+|how much\s+)?(?:gpus?|cpus?|cores|cuda|devices|"
            r"accelerators|v?ram|gpu count|gpu memory|hw|specs|hardware)\W*$",
            5,
        ),
        (
            r"\bdo (?:i|we) have (?:any )?(?:gpus?|cuda|a gpu|accelerators?)\b|\bany gpus?\b|\bmy gpus\b|"
            r"\b(?:is there|are there) (?:a |any )?(?:gpus?|cuda)\b",
            5,
        ),
        # the user's own cards asked about, with a word or two between the verb and "have": "what gpu do i even
        # have", "which cards do we actually have"; looked at: "check my gpu", "look at our accelerators"; or their
        # count asked after them: "my gpu. how many I have?"
        (
            rf"\b(?:what|which|how many) (?:kind of |sort of |type of )?{_OWN_CARDS}\s+(?:do|did|have)\s+(?:i|we)\s+"
            r"(?:\w+\s+){0,2}?(?:have|got|own)\b(?!\s+to\b)|"
            rf"\b(?:check|show|see|inspect|list|look at|tell me about)\s+(?:me\s+)?(?:my|our)\s+{_OWN_CARDS}"
            r"(?!\s+(?:utili|usage|use|efficiency|memory use))|"
            rf"\b{_OWN_CARDS}\W+(?:\w+\W+){{0,3}}?how many (?:do |did )?(?:i|we) (?:\w+ )?(?:have|got|own)\b",
            5,
        ),
    ],
    "runs": [
        (
            r"\blist (?:\w+ )?runs\b|\b(?:what|which) runs\b|\bruns (?:do i|have i|are there|so far)\b|"
            r"\bruns (?:that |which )?(?:are )?exist(?:s|ing)?\b|"  # "which of the runs are existing now?"
            r"\ball (?:the |my |our |of the |of our )?(?:training )?runs\b|\bmy runs\b|\bruns in (?:this|the) repo|"
            r"^\W*(?:show|list|see|print|display)\s+(?:me\s+)?(?:the\s+|my\s+|all\s+)?runs\W*$|^\W*runs\W*$|"
            # the noun first, its verb after, tersely: "runs. list.", "all runs: show", "runs, list them please"
            r"^\W*(?:(?:the|my|all(?: the)?)\s+)?runs\W+(?:list|ls|overview|show|display|status(?:es)?|states?)"
            r"(?:\s+(?:them|please))*\W*$|"
            # the listing typed as a command with its flags: "runs ls --all --with-status", "runs list -a"
            r"^\W*(?:meshpilot\s+)?runs\s+(?:list|ls)(?:\s+--?[\w-]+(?:=\S+)?)+\W*$|"
            # a cluster's listing command said of the runs: "kubectl get runs" ("get runs/r1" is one run)
            r"\b(?:kubectl|meshpilot|oc)\s+(?:get|ls|list)\s+runs\b(?!/)|"
            # every job with its state, as a scheduler lists them ("squeue: every job and its state")
            r"\bsqueue\b|\b(?:every|each|all(?: the| our| my)?)\s+(?:runs?|jobs?|experiments?)\s+(?:and|with)\s+"
            r"(?:its|their|the)\s+(?:state|status)(?:es)?\b|"
            # the runs named, then all of them asked for: "look at the runs first. Could you show me all of them?"
            r"\bruns\b(?!/).{0,100}?\b(?:show|list|see|give)\s+(?:me\s+|us\s+)?all\s+of\s+them\b|"
            r"\boverview of (?:all |the |my )?runs\b|\bbeen run\b|"
            # "I want to see every run in the repository", "list each run", "browse all of the runs"
            r"\b(?:see|view|look at|show(?: me| us)?|list|browse|get)\s+(?:every|each|all(?: of)?(?: the| my| our)?)\s+"
            r"(?:[a-z]+\s+)?(?:training\s+)?runs?\b(?!'s)|"  # (not "every run's loss": a figure of each)
            r"^\W*(?:meshpilot\s+)?ls\s+(?:-\w+\s+)?runs\b(?!/)|\b(?:under|in|inside) runs/?(?=\W*$)|"
            r"\bhow many (?:of (?:the|our|my) )?(?:\w+ )?(?:experiments|runs|jobs|trainings|model fits)\b|"
            # "which are the runs that exist?", "what training runs do we have?"
            r"\b(?:which|what) are (?:the |all the )?runs\b|"
            r"\b(?:what|which) (?:training |finished |past |old )?runs (?:do|did|have|are|exist)\b|"
            # the runs as a collection kept: "our run inventory", "the catalogue of experiments"
            r"\b(?:runs?|experiments?|jobs?)\s+(?:inventory|catalog(?:ue)?|roster)\b|"
            # "a full inventory of every training initiative we've run": the runs, in a manager's nouns
            r"\b(?:inventory|catalog(?:ue)?|roster)\s+of\s+(?:(?:the|our|my|all|every|each)\s+)*"
            r"(?:(?:training|past|previous)\s+)?(?:runs?|experiments?|jobs?|initiatives?|efforts?|trainings?)\b|"
            # every run with how each ended: "the roster - every run and how it finished" (one run's end is status)
            r"\b(?:roster|inventory|catalog(?:ue)?|lineup)\W+(?:every|each|all(?: the)?)\s+runs?\b|"
            # "a roll call of every run on the roster", "headcount of our jobs": each run called out, none launched
            r"\b(?:roll[\s-]?call|head[\s-]?count|census)\s+of\s+(?:(?:the|our|my|all|every|each)\s+)*"
            r"(?:runs?|jobs?|experiments?)\b(?!/)|"
            r"\b(?:every|each|all(?: the)?)\s+runs?\s+(?:on|in)\s+(?:the|our|my)\s+(?:roster|books|inventory|"
            r"catalog(?:ue)?)\b|"
            r"\b(?:every|each|all(?: the)?)\s+runs?,?\s+(?:and|with)\s+how\s+(?:it|they|each)\s+"
            r"(?:finished|ended|went|turned out)\b|"
            # "what the runs are ... everything we have and whether each one worked": how every run ended
            r"\b(?:whether|if|how)\s+(?:each|every)\s+(?:run|job)\s+(?:worked|succeeded|finished|failed|ended)\b|"
            r"\bruns\b(?!/).{0,120}?\b(?:whether|if)\s+(?:each|every)\s+(?:one|of them)\s+"
            r"(?:worked|succeeded|finished|failed|ended)\b|"
            # the runs table queried in SQL: "select name, status from runs where ..." (not "from runs/r1": one run)
            r"^\W*select\b.*\bfrom\s+runs\b(?!/)",
            8,
        ),
        # "which experiments did I run here?", "what jobs have we trained", "give me the list"
        (
            r"\b(?:which|what) (?:experiments|jobs|trainings|runs)\b.*\b(?:ran|run|launched|trained|did|done)\b|"
            r"\b(?:which|what) (?:experiments|jobs|trainings) (?:are there|exist|do (?:i|we) have)\b|"
            r"\b(?:list|overview|rundown|summary) of (?:the |my |all |every |each )?(?:\w+ )?"
            r"(?:runs?|experiments?|jobs?)\b(?!/)|"
            r"\bgive me the list\b|"
            r"\b(?:show|list|see|give)\b.*\ball (?:the |my |of the |of our )?"
            r"(?:experiments|jobs|trainings|training runs)\b|"
            r"\bwhat (?:i'?ve|i have|we'?ve|we have|i|we) (?:already |ever )?(?:run|ran|launched|trained)\b|"
            # a list asked for of what runs are called anywhere ("list all the model fits (jobs? runs?) done so far")
            r"^\W*(?:(?:can|could|would) you\s+|please\s+)*(?:list|enumerate)\b[^.?!]*?\b(?:runs|jobs|experiments|"
            r"trainings|(?:model\s+)?fits|(?:every|each)\s+(?:run|job|experiment|training|model fit))\b(?!/)",
            8,
        ),
        # a question about every run's state, no run named: "is anything still running?", "what's running right now?",
        # "I lost track of what I started"
        (
            r"\b(?:(?:is|are)\s+(?:there\s+)?)?(?:anything|something|any\s+(?:runs?|jobs?|trainings?|experiments?))\s+"
            r"(?:still\s+)?(?:running|going|active|alive|in progress|in flight|training)\b|"
            r"\b(?:which|what) (?:jobs|runs|trainings|experiments) (?:are|is) (?:still )?(?:running|active|going|alive|"
            r"in progress)\b|"
            r"\bwhat(?:'s|s| is| are)?\s+(?:still\s+)?(?:running|active|in flight|in progress)\b|"
            r"\b(?:what|everything) (?:i'?ve|i have|we'?ve|we have|i|we) (?:already )?"
            r"(?:started|launched|kicked off)\b|"
            r"\blost track of\b|"
            # "any runs that crashed?", "did any job fail?": every run's state
            r"\bany (?:of (?:the|my|our) )?(?:runs?|jobs?|trainings?|experiments?) (?:that |which )?(?:have |has )?"
            r"(?:crash|fail|die|died|broke|oom|error|finish|succeed|complete)\w*\b",
            8,
        ),
        (RUN_GOING_ASKED, 8),  # "do we have a run going on 2 GPUs right now?": what is running, never a launch
    ],
    "read": [
        (r"\b(?:cat|less|head|tail|print|dump)\b", 2),
        (
            r"\bwhat'?s in\b|\bwhat is in\b|\bcontents? of\b|\bshow me\b|\bshow\b|\bopen\b|\bread\b|\bdisplay\b|"
            r"\b(?:can|could|may) (?:i|we) (?:see|view|look at)\b|\blet me (?:see|view|look at)\b|"
            r"\b(?:have|take|get|sneak) a (?:quick |little )?peek\b|\bpeek (?:at|into)\b|"  # a look at it: show it
            r"\bpull up\b|\bwhat(?:'s| is) written (?:in|inside|on)\b",
            1.5,
        ),
        (r"\blog(?: file)?\b|\bfile\b|\bconfig(?:uration)?\b(?! (?:won|wins|was best))", 1.5),
        (r"\b(?:metrics|memory|steps|config|log)(?:\.\w+)? file\b", 3),
        # a folder of the repository looked into: "list what's in the sweeps folder", "show me configs/"
        (
            rf"\b(?:list|ls|show|see|open|browse|what'?s in|what is in|contents of|look in(?:side)?)\b[^.?!]{{0,30}}?"
            rf"{FOLDER}",
            4,
        ),
        # a reading verb and a file named by its extension: the file itself, not what its figures mean
        (r"\b(?:cat|less|head|tail|print|dump|show|open|display|read)\b.*\.(?:jsonl?|ya?ml|txt|md|log|csv|toml)\b", 4),
        # the file itself the object of a fetching verb: "pull its memory.json", "grab tp-try's config.yaml" (not
        # "pull the loss out of metrics.json": a figure fetched)
        (FETCHED_FILE, 4),
        # a run's folder listed as on a shell: "ls runs/tp-try" (its files, not the list of runs)
        (LISTED_RUN, 6),
    ],
    "results": [
        (
            r"\bresults?\b|\bmetrics\b|\bhow did\b.*\b(?:do|go|turn out|perform|went)\b|"
            r"\bhow (?:well|fast|quick(?:ly)?) (?:did|was|were)\b|"
            r"\bhow'?d\b",
            2.5,
        ),
        (
            r"\bloss\b|\btok(?:ens)?\s*/\s*s\b|\btokens per second\b|\bthroughput\b|\bmfu\b|\bmemory\b|"
            r"\bnoise scale\b|\bgns\b|\bpeak\b|\bpredicted\b|\bmeasured\b|\bspeed\b|\butili[sz]ation\b|"
            r"\bwhat happened\b|\bwhat went wrong\b|"
            r"\bstats\b|\bstatistics\b|\b(?:headline |key |final )?(?:numbers|figures)\b|\bkpis?\b",
            2,
        ),
        # how well a run used the hardware is its MFU: "whether it used the GPUs well", "hardware efficiency"
        (USED_WELL, 4),
    ],
    "status": [
        (
            r"\bwhat step is\b|\bstep is \S+ (?:on|at)\b|"
            # (not a flag's "--with-status"; "gaun" is going in Scots)
            r"(?<!-)\bstatus\b|\bstate of\b|\bstill (?:going|goin'?|gaun|running|runnin'?|alive|active|up|training|"
            r"at it|toil\w*|working|chugging|grinding)\b|"
            # "is it still growing?" (a run as a plant: still going; "still growing its loss" is a figure), and how it
            # exited: "the condition code of tp-try", "exit code"
            r"\bstill growing\b(?!\s+(?:its|the|their|a|an)\b)|\b(?:exit|return|condition)\s+(?:code|status)\b|"
            # "has r1 come to rest?": finished, said in other words
            r"\b(?:come|came) to (?:a\s+)?(?:rest|halt|stop|an end)\b|"
            r"\b(?:alive|dead)\W*$|\bfinish(?:ed)? ok\b|\b(?:which|what) step\b|"
            r"\bhow'?s \S+ doing\b|\bprogress\b|\bis (?:\S+\s+){1,3}(?:done|finished|running|over|complete)\b|"
            r"\bdid (?:\S+\s+){1,3}(?:finish|complete|end|crash|fail|shut down|stop|die)\b|"
            # "did r1 land or not?": whether it finished, no figure ("did the loss land under 2" is one)
            r"\bdid (?:\S+\s+){1,2}land\b(?!\s+(?:at|under|below|above|near|around|on|in|where)\b)|"
            r"\bcheck (?:on|in on|up on)\b|"
            r"\bsuccessful\b|\bcrash(?:ed)?\b|\bdid it (?:finish|fail|crash)\b|\bis it (?:done|running|finished)\b|"
            r"\bsucceed(?:ed)?\b|\bfail(?:ed)?\b|\bwhere is \S+ at\b|\bhow far\b|\bright now\b|"
            r"\bhas (?:\S+\s+){1,4}?(?:finished|ended|completed|stopped|crashed)\b|\byet\b|"
            # "where does r1 stand?", "completed, or still going?": how far it got, not its figures
            r"\bwhere (?:does|do|did) (?:\S+\s+){1,3}?stand\b|\bstanding\b|" + STATUS_SHORTHAND + "|"
            r"\b(?:completed|finished|done|complete)\W*\s*or\b|"
            r"\b(?:running|dead|alive)\b\s*(?:\?|or\b)|\bor (?:dead|running|done|finished)\b|"
            # "latest run — state?", "what state is r1 in?", "how's the run doing?", "what's r1 up to?", "r1 done?"
            r"(?<!optimizer )(?<!optimiser )(?<!training )(?<!model )\bstate\b(?!\s*(?:dict|of the art|space)\b)|"
            r"\bhow(?:'s|s| is)\s+(?:\S+\s+){0,3}?(?:doing|going|looking|coming along|gett?in[g']? on|progressing)\b|"
            r"\bwhat(?:'s|s| is)\s+(?:\S+\s+){1,3}?(?:up to|doing)\b|\bwhere(?:'s|s| is)\s+(?:\S+\s+){1,3}?at\b|"
            # "tell me where r1 is at", "where the job's at", "where it stands now"
            r"\bwhere\s+(?:\S+\s+){1,3}?(?:is|are|'s|was)\s+(?:at|up to)\b|\bwhere\s+(?:\S+\s+){0,3}?\S+'s\s+at\b|"
            r"\bany (?:news|updates?)\b|"
            # "is the job we ran last healthy?": a run's health is how it ended or goes, no figure of it and no
            # hardware
            r"\b(?:is|was|are|were)\s+(?:(?!(?:loss|curves?|throughput|memory|mfu|grad\w*|numbers?|gpus?|cards?|"
            r"machines?|box|node|hardware|disk)\b)\S+\s+){1,6}?healthy\b|"
            # "just whether r1 finished", "I only want to know if tp-try is still running"
            r"\b(?:whether|(?:know|see|check|tell me|wondering|only|just)\s+if)\s+(?:\S+\s+){1,4}?"
            r"(?:(?:is|was|has)\s+)?(?:still\s+)?(?:finished|done|complete|completed|crashed|failed|running|died|"
            r"succeeded|over|alive)\b|"
            r"^\W*(?:\S+\s+){0,3}?(?:done|finished|over|complete|completed)\s*\?\s*$",
            4,
        ),
    ],
    "wait": [
        (
            # (not "we cannot wait till Monday": impatience, the wait refused)
            r"(?<!can't )(?<!cant )(?<!cannot )(?<!can not )(?<!couldn't )\bwait (?:for|until|till|on)\b|"
            r"\bblock (?:until|till)\b|"
            # "block on r1 till it's done": blocking on a run named, until it ends
            r"\bblock (?:on|for) (?:\S+ ){1,3}?(?:until|till)\b|\blet me know (?:once|when)\b|\bi'?ll wait\b|"
            r"\bwait for it\b|\buntil it (?:ends?|finish(?:es)?|completes?|is done|'s done)\b|\bnotify me when\b|"
            # "sit on it until it wraps up": a wait to its end in everyday words
            r"\buntil\b.*(?:\b(?:completes|finishes|finished|ends|exits|terminates|is done|is over|wraps up|"
            r"is wrapped up|(?:has\s+)?reach(?:es|ed)\s+(?:its\s+)?(?:completion|the end|its end))|"
            r"'s (?:done|over|finished))\b|"
            # "please hold until r1 has reached completion": a wait said as holding
            r"\b(?:hold|sit tight|stand by)\s+(?:off\s+)?(?:until|till)\b|"
            r"\bawait\b|"
            # "hold on until r1 is done" waits; "hold on, what is the loss of r1?" is an interjection
            r"\b(?:hold|hang) on\b(?=\s+(?:[\w.-]+\s+){0,2}?(?:until|till|while)\b|\s+(?:for|while)\b|\W*$)|"
            r"\bhang tight\b|\bjust wait\b|"
            r"\b(?:ping|tell|notify|alert|message) me (?:once|when|as soon as|after)\b|"
            r"\bonce (?:\S+ ){1,3}(?:is|has) (?:over|done|finished|ended|complete)\b|"
            # the end said as a noun: "the final state upon its completion", "waiting for such completion"
            r"\b(?:upon|on|after|at) (?:its|their|the run's|the job's) completion\b|"
            r"\bwaiting (?:for|on|until) (?:such |its |their |the )?completion\b|"
            # a terse command, the tool's verb and a colon: "wait: runs/r1 ; report final state"
            r"^\W*wait\s*:|"
            # the verb written as a call, as a programmer does: "wait(2) on r1", "wait(r1)"
            # (a number in it a duration: "wait(5) on tp-try" waits on the run named after it, "wait(5) then launch"
            # on no run)
            r"^\W*wait\s*\((?!\s*\d)[^()]{0,20}\)|^\W*wait\s*\(\s*\d[^()]{0,18}\)\s*(?:on|for)\s+\S|"
            # a report asked for when the run ends, its subject left out: "report final state when complete"
            r"\b(?:report|tell|give|send|ping)\b[^.?!;]{0,30}\b(?:when|once|upon)\s+(?:it'?s\s+|it\s+is\s+)?"
            r"(?:complete|completed|done|finished|over)\b|"
            # "waiting for r1 to finish, ping me": the wait asked by its participle, and word sent after the end
            r"^\W*(?:keep\s+)?waiting (?:for|on|until|till)\b|"
            r"\b(?:finish\w*|complete\w*|is done|ends?)\b[^.?!;]{0,20}\b(?:ping|tell|notify|alert|message) me\b",
            6,
        ),
    ],
    "cancel": [
        (r"\b(?:cancel(?:l?ing)?|kill(?:ing)?|abort(?:ing)?|stop(?:ping)?|terminat(?:e|ing)|halt(?:ing)?)\b", 5),
        # a stop in everyday words: "please shut it down", "pull the plug on r1", "shut the tp-try job off"
        (rf"\b(?:{SHUT_DOWN})\b", 5),
        # the stop asked for as thanks ahead: "I'd appreciate it if you cancelled r1" (mood holds back another's
        # wish and any condition beside it)
        (
            r"\b(?:appreciate(?:\s+it)?|grateful|obliged|thankful|great|nice|lovely|helpful|ideal|perfect)\s+if\s+you\s+"
            r"(?:cancell?ed|killed|aborted|stopped|terminated|halted)\b",
            5,
        ),
    ],
    # "resume r1", "continue the preempted run", "pick the sweep back up": a preempted job, in its own directory
    "resume": [(RESUME, 9)],
    "trials": [
        (rf"\bwinner\b|\bwho won\b|\bwhich\b.*\b(?:won|win|best|came out)\b|{_NOT_DEFAULT}\btrials\b|\bwhat won\b", 3),
        (r"\bwhat did (?:\S+ ){1,4}(?:pick|choose|find|select|conclude|recommend)\b", 2),
        (r"\bwinning trial\b", 3),  # "need the winning trial's train.lr": a sweep's winner, read
        # the setups a sweep tried, in words: "of the setups we tested last month, which was fastest?"
        (
            r"\b(?:setups|set-ups|configurations|configs|layouts|variants|options|candidates)\s+(?:that\s+|which\s+)?"
            r"(?:we|i|you|it|meshpilot)\s+(?:\w+\s+)?(?:tested|tried|measured|swept|compared|benchmarked|timed)\b",
            5,
        ),
        (r"\bsweep\b", 1),
        (r"^\W*sweeps?\W*$", 3),
        # a sweep that exists, read: "read the warmup sweep", "show me the batch-size sweep" (never a new one; a name
        # the repository lacks is asked about)
        # ... or named by a noun after its figures or with no article: "show summary of sweep lr-scan", "display
        # sweep layouts-nov" (a verb of reading never asks for a new sweep)
        (
            r"\b(?:read|show|open|display|view|look (?:at|over)|pull up|go over)\s+(?:me\s+|us\s+)?"
            r"(?:(?:the|that|this|our|my)\s+(?:[\w.-]+\s+){0,2}|(?:the\s+)?(?:[\w-]+\s+){0,2}?"
            rf"{SWEEP_FIGURES}\s+(?:of|from|for|in)\s+(?:the\s+)?)?sweep\b(?!\s+(?:again|anew|once more)\b)",
            6,
        ),
    ],
    "sweep": [
        (
            # "kick off a new round of layout tuning"; "do the report of layouts-nov sweep" names a sweep to report
            r"\b(?:kick off|start|launch|run|begin|do|fire off|make|set up|create)\s+"
            r"(?:(?:a|an|another|new|the|fresh|quick|second)\s+)*(?:(?:round|pass|batch|bit|set|cycle)\s+of\s+)?"
            r"(?:(?!(?:reports?|write-?ups?|summary|docs|documentation|prs?|pull|benchmarks?|results?|numbers|trials|"
            r"winner|of|from)\b)[\w-]+\s+){0,3}(?:sweep|tuning|search)\b"
            # "make the lr sweep result go in the docs": what a sweep found is no sweep to make
            r"(?!\s+(?:results?|numbers|figures|findings|winner|outcomes?|trials?)\b)",
            6,
        ),
        # a sweep wanted in a state of going: "I'd like a layout sweep going", "get a new sweep started"
        (
            r"\b(?:like|want|need|get|have|see|keep)\s+(?:a|an|another|new|fresh)\s+(?:[\w-]+\s+){0,2}(?:sweep|search)\s+"
            r"(?:going|started|running|kicked\s+off|under\s?way|launched|set\s+up)\b",
            6,
        ),
        # asked in the passive: "it is requested that a new sweep over the layouts be started"
        (
            r"\b(?:a|an|another)\s+(?:new\s+|fresh\s+)?(?:[\w-]+\s+){0,2}?(?:sweep|search)\b[^.;!?]{0,40}?"
            r"\b(?:be|is|get|gets|being)\s+(?:started|launched|run|kicked\s+off|begun|initiated|set\s+up)\b",
            6,
        ),
        # "sweep the layouts" commands one; "sweep results layouts-nov?" is a noun before the sweep's figures
        (rf"^\W*(?:(?:can|could|would) you |please |pls )*sweep\b(?!\s+{SWEEP_FIGURES})", 6),
        # "can we run 16 trials of the layout sweep": trials to run are a new sweep, whatever sweep they are like
        (
            r"\b(?:run|start|launch|kick off|do|try)\s+(?:another\s+|\w+\s+)?"
            r"(?:\d+|a few|several|a couple of|a handful of|a bunch of)\s+(?:more\s+)?"
            r"(?:different\s+|distinct\s+)?(?:trials|setups|configurations|configs)\b",
            10,
        ),
        (r"\btune\b|\bsweep (?:over|the layouts|layouts)\b", 2),
        # a sweep with its count of trials, the way one is ordered: "a sweep with 24 trials on configs/long.yaml"
        # or named by what it explores: "a hyperparameter exploration of 12 trials", "a tuning study with 8 trials"
        (
            r"\b(?:a|an|another|new)\s+(?:[\w-]+\s+)?(?:sweep|search|exploration|scan|study)\s+(?:with|of|over)\s+"
            r"\d+\s+trials\b",
            6,
        ),
        (TUNED_SETTING, 4),
        # the layouts tuned, as a verb and its object: "tune layouts for configs/long.yaml", "auto-tune the mesh"
        (r"\b(?:auto[- ]?)?tune\s+(?:the\s+|our\s+|my\s+|its\s+)?(?:layouts?|mesh(?:es)?|parallelism|sharding)\b", 4),
        # "a much bigger search this time", "compare layouts again, 24 trials ... kick it off": a count of trials to
        # launch, or a search made bigger, is a new sweep (the comparison it makes is of layouts, not of two runs)
        (r"\b(?:bigger|larger|wider|broader|longer|new|fresh|another|second|deeper)\s+(?:layout\s+)?search\b", 3),
        # a bigger sweep suggested with its count of trials said after: "perhaps a larger sweep would help - something
        # like 24 trials on long.yaml" (a new one, of that size; not "the larger sweep had 24 trials")
        (
            r"\b(?:a|an|another)\s+(?:bigger|larger|wider|broader|longer|deeper|more\s+thorough)\s+(?:layout\s+)?"
            r"(?:sweep|search)\b.*\b\d+\s+trials\b",
            8,
        ),
        (
            r"\b\d+\s+trials\b.*\b(?:kick|start|launch|fire|go ahead|initiate)\b|"
            r"\b(?:kick|start|launch|fire|initiate)\b.*\b\d+\s+trials\b",
            5,
        ),
        # "search for the best mesh automatically": found by trying layouts, not predicted
        (
            r"\b(?:search|hunt|look)\s+(?:for|over)\s+(?:the\s+)?(?:best|fastest|optimal|right)\s+(?:\w+\s+)?"
            r"(?:mesh|layout|setup|config\w*|parallel\w*)|\bauto[- ]?tun\w*",
            4,
        ),
        # the best layout found by measuring, not predicting: "by actually trying them", "try 16 setups"
        (
            r"\b(?:by |after )?(?:actually )?(?:trying|testing|measuring|benchmarking|running) (?:them|each|all|every|"
            r"the layouts|the options|out)\b|\b(?:try|tries|test|tests|measure|measures) (?:them|each|all|every one|"
            r"the layouts|(?:all|each|every) (?:of )?(?:the )?layouts?)(?: out)?\b|"
            r"\b(?:instead of|rather than|not just|without) predict\w*|\bfor real\b|"
            r"\bby (?:actually )?(?:trying|testing|measuring|benchmarking|running)\b|\bempirically\b",
            4,
        ),
        # "start one" after sweeps are named: one of them ("I don't get sweeps yet, but could you start one?")
        (
            r"\bsweeps?\b[^.?!]*?\b(?:start|launch|run|kick off|do|set up|fire off|begin|make)\s+"
            r"(?:a\s+new\s+|another\s+|a\s+fresh\s+)?one\b(?!\s+(?:more|of)\b)|"
            r"\bsweeps?\b[^.?!]*?\b(?:set|kick|fire|spin)\s+(?:a\s+new\s+|another\s+)?one\s+(?:up|off)\b",
            6,
        ),
        # a sweep by its purpose: something started that finds the best way to split ("start something that figures
        # out the fastest layout", "have meshpilot find the best split"); a question which layout is best is a plan
        (FINDS_BEST, 6),
        # many ways of splitting tried: what a sweep does, said by someone without its words ("try lots of ways of
        # dividing the training between the graphics cards and tell us which is fastest")
        (
            r"\b(?:try|tries|trying|test|testing|run|running|compare|comparing|measure|measuring)\s+(?:out\s+)?"
            r"(?:lots\s+of|a\s+lot\s+of|many|several|various|different|multiple|a\s+bunch\s+of|a\s+few|all\s+sorts\s+of|"
            r"all\s+the|every)\s+(?:different\s+)?(?:ways?|splits|setups|configurations|options|approaches)\s+(?:of|to|for)\s+"
            r"(?:split|divid|shard|distribut|spread|paralleli|lay(?:ing)?\s+out|cut)\w*",
            6,
        ),
        # every layout tried: what a sweep does ("a job that tries all the layouts", "run each layout once")
        (
            r"\b(?:tries|try|trying|tests?|testing|runs?|running|benchmarks?|benchmarking|measur\w+|time|timing)\s+"
            r"(?:out\s+)?(?:all|each|every)\s+(?:of\s+)?(?:the\s+)?(?:possible\s+|candidate\s+)?layouts?\b",
            6,
        ),
    ],
    "bench": [
        (r"\bbenchmarks?\b|\bevaluat\w*|\bevals?\b|\bbench\b", 5),
        # "how good is r1's checkpoint on our benchmarks?": a question answered by running the benchmark
        (r"\b(?:on|in|at|against) (?:our|the|my|its|a|your) (?:\w+ )?(?:benchmarks?|evals?|eval suite)\b", 2),
        (r"\b(?:run|start|launch|kick off|do)\s+(?:a |an |the )?(?:\w+ )?(?:benchmark|eval\w*)", 2),
        # a score of the model's quality, or a held-out set to score it on: "a quality score ... against our internal
        # test set" (a run's own loss is its results)
        (r"\b(?:quality|accuracy|eval(?:uation)?|benchmark|task)\s+(?:scores?|tests?|checks?|suites?)\b", 3),
        (
            r"\b(?:on|against|with|using)\s+(?:our|the|my|its|a|your)\s+(?:\w+\s+)?(?:test|eval(?:uation)?|held-?out|"
            r"holdout|validation)\s+(?:set|suite|data(?:set)?|tasks?)\b",
            3,
        ),
        # a model scored on tests: "score the one from our latest training on the internal tests", "score r1 against
        # the eval set" (scoring is what a benchmark does; the tests are its suite)
        (
            r"\bscor(?:e|es|ing)\s+(?:\S+\s+){0,8}?(?:on|against|with|using)\s+(?:\w+\s+){0,2}?"
            r"(?:tests?|evals?|benchmarks?|test\s+sets?|suites?|tasks)\b",
            5,
        ),
        # a model held up against tests of its quality, asked or not: "does r1 hold up on our internal quality tests?"
        (
            r"\b(?:holds?|holding|stands?|standing)\s+up\s+(?:on|against|to|in)\s+(?:\w+\s+){0,3}?"
            r"(?:tests?|evals?|benchmarks?|test\s+sets?|checks)\b",
            5,
        ),
    ],
    "report": [
        (rf"{STATE_TOLD}\breport\b(?!{TOLD_BACK})|\bwrite[- ]?up\b|\bwrite it up\b|\bmarkdown\b", 4),
        # a summary in writing, or one passed around: "a written summary for leadership", "a one-pager", "a memo",
        # "socialize the learnings" (a summary "for the team update" is read to the user: they write the update)
        (
            r"\bwritten\s+(?:summary|overview|recap|account|document|doc|read-?out|brief(?:ing)?)\b|\bone[- ]pager\b|"
            r"\bmemo\b|\b(?:summary|recap|overview)\s+(?:doc(?:ument)?|page|note|document)\b|"
            r"\b(?:sociali[sz]e|circulate|write down)\b|\b(?:be|been|get|gets|got)\s+written\s+down\b",
            5,
        ),
        (r"\b(?:as|in) (?:a )?markdown\b", 3),
        # a new report made, its verb before it: "can you do a report on layouts-nov", "put together a short write-up"
        # (not a run's state told: "do a status report on r1")
        (
            r"\b(?:do|make|write|draft|prepare|produce|put\s+together|generate|create)\s+(?:me\s+|us\s+)?"
            r"(?:a|an)\s+(?!(?:status|progress|state)\b)(?:[\w-]+\s+){0,2}?(?:report|write-?up)\b"
            rf"(?!{TOLD_BACK})",
            3,
        ),
        # a report is what is written into the docs: "write a report of the lr sweep into the documentation", the
        # article left out too ("write report of ..."), (the
        # report tool writes into docs/ on a local branch; an update of the docs rewrites docs/training.md)
        (
            r"\b(?:write|writing|put|add|draft|generate|make)\s+(?:(?:a|an|the)\s+)?(?:\S+\s+){0,2}?report\b.*"
            r"\b(?:in|into|to)\s+(?:the\s+)?(?:docs|documentation)\b",
            6,
        ),
        # where a report is committed: "on a local branch", "on a branch", "a local branch only" (a pull request's
        # is pushed)
        (r"\b(?:on|in|to|into)\s+(?:a|the)\s+(?:new\s+)?(?:local\s+|separate\s+)?branch\b|\ba\s+local\s+branch\b", 3),
        # a write-up named by what it is of, put into the docs: "a write-up of the layouts-nov sweep in the docs"
        (r"\b(?:write-?up|report)\s+of\b.*\b(?:in|into|to)\s+(?:the\s+)?(?:docs|documentation)\b", 6),
        # the verb "write up", its object inside or after it: "write the lr-scan results up", "write up the results"
        # (the results are what the report is of, no reading asked)
        (r"\bwrit(?:e|es|ing|ten)\s+(?:\S+\s+){0,4}?up\b", 6),
        # a summary made to be passed on is a document, a report: "a summary of the lr sweep to share with the team"
        (
            r"\b(?:summary|summari[sz]e|recap|read-?out)\b.*\b(?:to|and|for me to|so (?:i|we) can|i can) "
            r"(?:share|send|post|circulate|hand out|forward)\b",
            4,
        ),
    ],
    "pr": [
        # (not one named by its number: "PR #77 follow-up: ..." refers to a pull request there is, opens none)
        (r"\b(?:pull request|pr|merge request)\b(?!\s*#?\s*\d)", 6),
        # what a pull request is for, said instead of its name: "get the findings to the team for sign-off"
        (r"\bfor\s+(?:(?:a|their|the|team'?s?|your|our)\s+)?(?:sign[- ]?off|review|approval)\b|\breview process\b", 6),
        # "packaged up as a change the team can review and approve on GitHub"
        (
            r"\bchange\s+(?:that\s+)?(?:the\s+team|people|others|reviewers|colleagues|we|they)\s+(?:can|could)\s+"
            r"review\b|\b(?:review|approve|merge)\s+(?:(?:and|or)\s+(?:approve|merge)\s+)?(?:it\s+)?on\s+github\b",
            6,
        ),
    ],
    "docs": [
        (rf"\b{DOC_NOUN}\b", 3),
        (rf"\b{DOC_VERB}.*\b{DOC_NOUN}\b", 3),
        # "the docs must show sweeps/x, can you update them?", "get the README refreshed": the verb after its object
        (rf"\b{DOC_NOUN}\b.*\b{DOC_VERB}", 3),
        # "bring the readme in line with these findings", "keep docs/training.md up to date": docs made to agree
        (DOCS_AGREE, 6),
        # the docs said to agree, in a formal passive: "the documentation shall be conformed to the sweep's findings"
        # (never through a negation: "the docs shall not be conformed to it")
        (
            rf"\b{DOC_NOUN}\b(?:(?!\bnot\b|n't\b|\bnever\b).)*\b(?:be|been|get|gets)\s+"
            r"(?:conformed|aligned|reconciled|harmoni[sz]ed)\s+(?:to|with)\b",
            6,
        ),
        # "make sure the docs reflect the last sweep", "I want the readme to show lr-scan", "I would like the docs to
        # reflect it": docs made to say it
        (
            rf"\b(?:make sure|ensure|gets?|have|has|wants?|needs?|(?:would|'d)\s+like)\b.*\b{DOC_NOUN}\b.*"
            r"\b(?:reflects?|shows?|includes?|match(?:es)?|covers?|says?)\b",
            3,
        ),
        (WRITTEN_INTO_DOCS, 3),
        # something wanted in the docs, by the user or by someone the user then hands it over for: "we need r1's
        # results in docs", "Sam wants the lr-scan numbers in the README, please handle" (not "Sam wants ..." alone)
        (
            rf"(?:^|[.!?;,]\s*)(?:i|we)\s+(?:want|need|(?:would|'d)\s+like)\s+(?:[\w'-]+\s+){{1,4}}?in(?:to)?\s+"
            rf"(?:the\s+)?{DOC_NOUN}\b|\b(?:wants|needs)\s+(?:[\w'-]+\s+){{1,4}}?in(?:to)?\s+(?:the\s+)?{DOC_NOUN}\b"
            r".*\bplease\s+handle\b",
            3,
        ),
        # the docs asked to say something, the verb after them: "can the docs reflect the layouts-nov findings now?"
        (DOCS_TO_REFLECT, 3),
    ],
    "plan": [
        (r"\bplan\b", 3),
        (r"\blayouts?\b|\blay (?:it )?out\b|\bshard\b|\bparalleli[sz]e\b|\bsplit\b|\bwhat fits\b|\bfit\b", 1.5),
        (r"\bwhat[- ]if\b|\bif i had\b|\bwould\b", 1),
        # the layouts weighed against each other: "evaluate the layout options", "rank the possible layouts"
        (
            r"\b(?:evaluate|assess|rank|weigh(?:\s+up)?|review|score)\s+(?:the\s+|all\s+|our\s+|possible\s+)*"
            r"(?:layouts?|parallelism|sharding)\s*(?:options|choices|candidates|alternatives|strategies)?\b",
            3,
        ),
        # "how to parallel it?", "how do I split llama across 4 cards": a layout asked for, in any wording
        (
            r"\bhow (?:to|do (?:i|we)|should (?:i|we)|can (?:i|we)|would you|best to) "
            r"(?:parallel\w*|split|shard|distribute|spread|lay (?:it )?out|partition|cut|divide|slice|chop)\b",
            3,
        ),
        # a what-if about hardware not bought yet: "could 4 cards handle training X? just an estimate"
        (r"\bestimate\b|\b(?:could|would|can|will)\b.*\b(?:handle|cope with|manage)\b", 2),
        # a forecast is of what has not run: "a forecast of the memory for mistral 7b on 4 H100s"
        (r"\bforecast\w*\b", 2),
        # whether it would fit at all: "memory feasibility of X on 80GiB devices", "is it feasible on 4 nodes"
        (r"\bfeasib(?:le|ility)\b|\binfeasible\b", 2),
        (BUYING, 2),
    ],
    "run": [
        (r"\bsmoke test\b|\bgo\b\W*$|\bagain\b", 1.5),
        (RUN_WANTED_GOING, 6),
        # a launch again, ordered at the start of its clause: "it ran out of memory. Relaunch it with tp=2" (what went
        # before is the scene, not a reading asked)
        (
            r"(?:^|[.!;:]\s+)(?:(?:ok(?:ay)?|so|then|now|please|pls)\W+)*(?:relaunch|rerun|re-run)\s+"
            r"(?:it|that|this|the\s+(?:run|job))\b",
            3,
        ),
        # "give the default experiment a spin", "take the long config for a spin", "give it a whirl"
        (
            r"\bgive\s+(?:it|that|this|(?:the|our|my|this)\s+(?:[\w.-]+\s+){0,2}?(?:experiment|config\w*|model|setup|"
            r"[\w-]+\.ya?ml))\s+a\s+(?:spin|go|whirl|try|shot)\b|\btake\s+(?:\S+\s+){1,3}?for a spin\b|"
            # "kick the tires on the long config", "test-drive meshpilot.yaml": try it by running it
            r"\bkick(?:ing)? the tires\b|\btest[- ]?driv\w*\b|"
            # "give r1 another go with 30 steps": that run again
            r"\bgive\s+(?:\S+\s+){1,3}?(?:another|one more|a second|a new)\s+(?:spin|go|whirl|try|shot)\b",
            6,
        ),
        (
            # "make a training with the long config": a training made is a run, as "do a training" is
            r"\b(?:get|have|start|kick off|fire off|do|want|need|launch|make|create|begin|initiate|commence|trigger)\s+"
            r"(?:a|an|another|new)\s+"
            r"(?:[\w-]+\s+){0,2}(?:run|training)\b(?!\s+(?:plan|estimate|budget|docs?|report))|"
            # "could you please to make the training with pipeline of 2 stages": the training done, as learners say
            # ("make the training deterministic", "make the training config use fsdp" change it, and launch nothing)
            r"\b(?:make|do)\s+the\s+training(?=\s*(?:[,.;:!?]|$)|\s+(?:with|on|using|for|over|across|in|now|"
            r"please|again|of)\b)",
            3,
        ),
    ],
    "compare": [(r"\bcompare\b|\bversus\b|\bvs\.?\b|\bagainst\b|\bside by side\b|\bdiffer", 2)],
    "why": [(r"\bwhy\b|\bexplain\b", 3)],
    "where": [(r"\bwhere\b.*\b(?:report|pull request|pr|docs)\b", 3)],
    "help": [(r"\bhelp\b|\bwhat can you do\b", 2)],
}


# An action the sentence says not to take: "no PR yet", "don't open a PR", "without a report", "skip the benchmark",
# "instead of a sweep", "the PR can wait" (entities.NEGATOR). Its intent never wins, and its words are no cue of any
# other: the positive verb beside it decides ("no PR yet, just draft the writeup" is a report). A launch not to make is
# NO_LAUNCH.
_DOING = (r"(?:(?:open|create|make|file|raise|push|send|submit|write|draft|do|run|start|launch|kick off|update|touch|"
          r"change|edit|generate|produce|need|want|bother with|put up|publish|regenerate|refresh|rewrite|"
          r"put together|bring|keep)\w*\s+)?"
          r"(?:(?:up\s+)?(?:a|an|the|any|that|this|my|our|another|new)\s+)?(?:[\w.-]+(?:'s)?\s+)?")  # fmt: skip
DONT_DO = {
    "pr": r"pull[- ]requests?|prs?|merge[- ]requests?",
    "report": r"reports?|write-?ups?|markdown",
    "docs": r"docs|documentation|readme|training\.md",
    "sweep": r"sweeps?|searche?s?|tuning",
    "bench": r"benchmarks?|bench|evals?|evaluations?",
}
# The verbs that are the action themselves: "don't kill it", "no need to benchmark", "don't sweep".
DONT_VERB = {
    "cancel": rf"cancel\w*|kill\w*|abort\w*|stop\w*|terminat\w*|halt\w*|{SHUT_DOWN}",
    "bench": r"benchmark\w*|evaluat\w*",
    "sweep": r"sweep\w*",
    "docs": r"document\w*",
    "report": r"writ(?:e|es|ing)\s+(?:\S+\s+){0,3}?up\b",  # "no need to write anything up", "without writing it up"
    # "don't resume r1", "no need to continue the preempted run", "don't pick it back up", "no resuming"
    "resume": r"resum\w*|unpaus\w*|continu\w*|carry(?:ing)? on|pick(?:ing)?\s+(?:\S+\s+){0,3}?back up|re-?queu\w*|"
    # "don't restart it from where it stopped, start fresh": no resume
    rf"{RESTART_WHERE_STOPPED}|{PICKED_UP_WHERE}",
}
# A wait not to make: "don't wait on it", "no need to wait", "without waiting", "not wait". Not NEGATOR's bare "no":
# "no wait, four nodes" corrects the sentence, it refuses nothing.
DONT_WAIT = (r"\b(?:no need (?:for|to)|not|without|don'?t|do not|never|skip(?:ping)?|no point (?:in )?|"
             r"(?:don'?t|do not|no need to) bother(?: with)?)\s+(?:(?:to|for|on)\s+)?(?:wait(?:ing)?|await\w*)\b|"
             # "stop waiting, just tell me r1's loss": the wait is stopped, no run is
             r"\bno waiting\b|\b(?:stop|quit|cancel|no more)\s+(?:the\s+)?(?:waiting|wait)\b")  # fmt: skip
# The object first, its refusal after: "a PR isn't needed", "the report can wait", "PR later", "the PR can come
# afterwards", "a benchmark maybe down the line".
LATER = (r"(?:later(?: on)?|afterwards?|after that|down the line|eventually|at some point|for later|another time|"
         r"some other time|next week|tomorrow|next time|at a later (?:point|stage|time|date)|"
         r"in a (?:second|next|later) (?:moment|time|step|phase|stage|round)|after(?=\s*(?:[.,;!?]|$)))")  # fmt: skip
AFTER_OBJECT = (
    r"(?:\s+(?:(?:is|are)\s+)?(?:not needed|isn'?t needed|not necessary|unnecessary|can wait|later|not yet|not now)\b|"
    rf"{WAVED_OFF}|"  # "PR for lr-scan? nah, just a report" ("? no rush" asks on)
    rf"\s+(?:(?:can|could|will|should|may|might)\s+(?:come|be done|happen|follow|wait)\s+|comes\s+|"
    r"(?:we|i|you)(?:'ll|'d)?\s+(?:(?:can|could|will|may|might|should|shall)\s+)?(?:do|write|open|make|handle|run|"
    r"sort out|tackle|see about|see|decide|discuss|think about|talk about|figure out|look at)\s+(?:(?:it|that|one|"
    rf"on it|about it)\s+)?|(?:maybe|perhaps|possibly|probably)\s+)?{LATER}\b|"
    # "open the PR after the report", "the PR after we write it up": what comes after another output is not the first
    # action ("the docs after the lr-scan sweep" are the docs from it); only the object is blanked, not what it follows
    r"(?=\s+(?:only\s+)?after\s+(?:(?:we|i|you)\b|(?:(?:the|a|an|writing|doing|making)\s+)?(?:[\w.-]+\s+)?"
    r"(?:reports?|write-?ups?|docs|documentation|benchmarks?|evals?|prs?|pull requests?)\b)))"
)
# An action put off to later is not the action asked for now (the one before it is): "and after we will see for the
# pull request", "then later a PR", "maybe later we can benchmark it", "we'll think about a report afterwards".
DEFERRED = (
    r"(?:\b(?:we|i|you)?(?:'ll|'d)?\s*(?:(?:will|can|could|shall|may|might|should)\s+)?(?:see|think|talk|decide|"
    r"worry)\s+(?:later\s+)?(?:about|for|on|regarding|of|into)\s+|"
    # a deliberation whether to act is no request to: "think about whether we should start a new sweep", "consider
    # if we need a report"
    # ("see if the sweep is done" asks to check: no deliberation)
    r"\b(?:think|thinking|wonder|wondering|consider|considering|ponder|decide|deciding|discuss)\s+(?:about\s+)?"
    r"(?:whether|if)\s+(?:(?:we|i|you|it)\s+)?(?:(?:should|could|would|might|need|needs|ought|want|is worth)"
    r"(?:\s+to)?\s+)?|"
    # "later, we can open a PR" puts the PR off; "later, first bench r1" orders the benchmark first
    rf"\b(?:(?:and|then|maybe|perhaps|possibly|probably)\s+)*{LATER}(?:\s+|\s*,\s*(?!(?:first|now|but|then|and|"
    r"right now|immediately|today)\b))(?:(?:maybe|perhaps|possibly|"
    r"probably)\s+)?(?:(?:we|i|you)(?:'ll|'d)?\s+)?(?:(?:can|could|might|may|will|should|shall)\s+)?)"
)


# What to read said not to be wanted: "I don't want the full results, just whether tp-try is running", "not the loss,
# only if it finished". Its word cues nothing: what is asked beside it decides (the reading is never blocked, since
# "not r1's results, tp-try's" still asks for results).
DONT_READ = (r"results?|metrics|numbers|figures|stats|statistics|loss(?:es)?|throughput|details|breakdown|status|"
             r"state|progress")  # fmt: skip
# Not wanting something said as not caring for it: "I don't care about the throughput", "not interested in results".
NOT_CARING = (r"\b(?:(?:don'?t|do not|doesn'?t)\s+(?:really\s+)?care\s+(?:about|for)|"
              r"not\s+(?:really\s+)?interested\s+in|no\s+interest\s+in)\s+")  # fmt: skip
# What follows a refused reading and asks for the same reading of another run: "not r1's results, tp-try's".
SAME_KIND_READ = (r"(?:\s+(?:of|for|from|on)\s+\S+)?\s*[,;:-]*\s*(?:but\s+|just\s+|only\s+|rather\s+)?"
                  r"(?:the\s+ones?\b|those\b|\S+'s\b)")  # fmt: skip
# What follows a negated output and asks for one of the same kind: "I don't want a full sweep, just a quick one",
# "no big report, only a short one". The negation is of its size, not of its kind.
SAME_KIND_INSTEAD = (
    r"\s*(?:(?:is |are )?(?:needed|necessary|required)\b)?\s*[,;:-]*\s*(?:but\s+)?"
    r"(?:just|only|rather|simply)\s+(?:an?\s+)?(?:[\w-]+\s+){0,3}?one\b"
)


# A refusal said of what the speaker will do: "we won't open a pull request yet", "I will not write a report" (with its
# subject: "why won't it open" is no refusal).
WONT = r"\b(?:we|i|you)\s+(?:won'?t|will not|shan'?t|shall not)\s+(?:be\s+|need\s+|want\s+)?"
# Another verb the same negation governs, first: "do not push anything or open any pull request".
SHARED_NEGATION = r"(?:[\w-]+\s+(?:anything|it|them|that|this)\s*,?\s+(?:or|nor)\s+)?"
# The form a pull request would give it, refused: "though not yet sent out into the world as a pull request", "not
# published as a PR" (the verb and its words between: no DONT_DO verb needs to stand there).
NOT_AS_PR = r"\bnot\s+(?:yet\s+)?(?:[\w-]+\s+){1,6}?as\s+(?:a|an)\s+(?:pull[- ]requests?|prs?|merge[- ]requests?)\b"
# The wish refused rather than the act: "we don't want to open a PR", "I won't need to write a report".
WANT_TO = r"(?:(?:want|need|have|plan|intend|wish)\s+to\s+)?"


# A complaint told of the user's habit: "my supervisor was giving out that I never write anything up", "the team
# moans that we don't update the docs". What the user never does is the reason for the request beside it, no refusal
# of it and no request either (its words are blanked: what is asked beside it decides).
COMPLAINED_NEVER = (r"\b(?:giv(?:e|es|ing)\s+out|gave\s+out|complain\w*|moan\w*|grumbl\w*|whing\w*|nag\w*|"
                    r"(?:is|are|was|were|been|keeps?\s+(?:on\s+)?)\s*(?:always\s+)?on\s+at\s+(?:me|us)|"
                    r"(?:giving|gives|gave)\s+(?:me|us)\s+(?:grief|stick|a\s+hard\s+time))"
                    r"\s+(?:(?:about\s+(?:how|the\s+fact)\s+)?that\s+|about\s+how\s+|because\s+)?(?:i|we)\s+"
                    r"(?:never|don'?t|do\s+not|didn'?t|rarely|hardly\s+ever|seldom)\b"
                    r"(?:[^,;:!?.\u2013\u2014-]|-(?=\w)|\.(?=\w))*")  # fmt: skip


def negated_actions(lowered: str) -> tuple[set[str], str]:
    """The actions the sentence says not to take, and the sentence with those phrases blanked out."""
    negated: set[str] = set()
    for found in re.finditer(COMPLAINED_NEVER, lowered):  # "they complain I never write anything up": a reason
        lowered = lowered[: found.start()] + " " * (found.end() - found.start()) + lowered[found.end() :]
    spans: list[tuple[int, int]] = []
    for intent, objects in DONT_DO.items():
        for found in re.finditer(rf"(?:{NEGATOR}|{DEFERRED}|{WONT}){SHARED_NEGATION}{WANT_TO}{_DOING}(?:{objects})\b"
                                 rf"(?:\s+(?:yet|for now|just yet|at all|now))?|"
                                 rf"\b(?:{objects})(?:\s+(?:for|of|on|from)\s+[\w./-]+)?{AFTER_OBJECT}",
                                 lowered):  # fmt: skip
            if re.match(SAME_KIND_INSTEAD, lowered[found.end() :]) or _for_another(lowered[found.end() :]):
                continue  # "not a full sweep, just a quick one": that kind asked for, smaller
            negated.add(intent)
            spans.append(found.span())
    for found in re.finditer(NOT_AS_PR, lowered):
        negated.add("pr")  # "though not yet sent out as a pull request": what is written stays on its branch
        spans.append(found.span())
    for found in re.finditer(rf"{NEGATOR}{_WRITE_INTO}\b[^.;!?]*?{_INTO_DOCS}", lowered):
        negated.add("docs")  # "don't put the lr-scan numbers into the readme": the docs left as they are
        spans.append(found.span())
    for intent, verbs in DONT_VERB.items():
        # ("hold the cancel on tp-try", "omit the cancel of r1": the verb as a noun)
        for found in re.finditer(rf"{NEGATOR}(?:the\s+)?(?:{verbs})\b|{DEFERRED}(?:{verbs})\b|"
                                 rf"\b(?:{verbs})\s+(?:(?:it|that|this|them)\s+)?{LATER}\b|"
                                 rf"\b(?:{verbs})\b[^?.!;]{{0,40}}{WAVED_OFF}", lowered):  # fmt: skip
            if intent not in ("cancel", "resume") and _for_another(lowered[found.end() :]):
                continue  # (a stop or a resume taken back stays taken back, whatever follows)
            negated.add(intent)
            spans.append(found.span())
    for found in re.finditer(rf"(?:{NEGATOR}|{NOT_CARING})(?:(?:just|only|merely)\s+)?{_DOING}(?:{DONT_READ})\b",
                             lowered):  # fmt: skip
        if not re.match(SAME_KIND_READ, lowered[found.end() :]):
            spans.append(found.span())  # no cue of the reading it refuses, no action refused either
    # "don't launch or cancel any runs": an action joined to a negated launch is negated too (the launch itself is
    # entities.NO_LAUNCH's, so it is no span here)
    launches = [found.span() for found in re.finditer(rf"{NEGATOR}{NEGATED_LAUNCH}", lowered)]
    spans += _coordinated(lowered, spans + launches, negated)
    for found in re.finditer(DONT_WAIT, lowered):
        negated.add("wait")
        spans.append(found.span())
    spans += [found.span() for found in re.finditer(STOP_DOING, lowered)]  # no action, nothing negated either
    spans += [found.span() for found in re.finditer(IDEA_DROPPED, lowered)]  # the proposal dropped, no run cancelled
    spans += [found.span() for found in re.finditer(DONE_BEFORE, lowered)]  # done already: no action asked
    later = [*re.finditer(OWN_LATER, lowered), *re.finditer(LAUNCH_PUT_OFF, lowered)]  # an act to come: no cue
    spans += [found.span() for found in later]
    for start, end in spans:
        lowered = lowered[:start] + " " * (end - start) + lowered[end:]
    if any(launch_verb(found.group(0)) for found in later) and not launch_verb(lowered):
        negated.add("run")  # "before I launch: fsdp on 2 gpus": the launch is theirs, later; no other asked for
    # a verb taken back in one clause and said in another ("abort tp-try; do not cancel baseline-ddp"): the action is
    # asked for, only not on what the negation names (entities.SPARED)
    negated -= {intent for intent, verbs in DONT_VERB.items() if re.search(rf"\b(?:{verbs})\b", lowered)}
    return negated, lowered


def _for_another(after: str) -> bool:
    """Whether what follows a negated action is its object and another named as the one it is for ("don't benchmark
    r1, baseline-ddp is the one"): the action is wanted, on that other (entities.NEGATED_VERB rules the first out)."""
    return bool(re.match(rf"\s+(?:(?:the|that|this|my|our)\s+)?[\w.-]+{ANOTHER_INSTEAD}", after))


# What joins a second action to a negated one, under the same negation: "no need to benchmark or write anything up",
# "don't sweep, nor open a PR".
_JOINED = r"\s*,?\s*(?:or|nor|and not|or even|not even)\s+"
# A launch verb, as negated ("don't launch", "never start"): what is joined to it by "or" is not done either.
NEGATED_LAUNCH = r"(?:re-?)?(?:launch|start|run|train|kick)\w*\b"


def _coordinated(lowered: str, spans: list[tuple[int, int]], negated: set[str]) -> list[tuple[int, int]]:
    """The actions joined by 'or'/'nor' to a negated one, added to `negated`; their spans, to blank out."""
    found_spans: list[tuple[int, int]] = []
    ends = sorted(end for _, end in spans)
    while ends:
        end = ends.pop(0)
        joined = re.match(rf"(?:\s+[\w./'-]+){{0,2}}?{_JOINED}", lowered[end:])  # "don't bench r1 or write it up"
        if not joined:
            continue
        start = end + joined.end()
        for intent, pattern in [*((i, rf"{_DOING}(?:{o})\b") for i, o in DONT_DO.items()),
                                *((i, rf"(?:{v})\b") for i, v in DONT_VERB.items())]:  # fmt: skip
            match = re.match(pattern, lowered[start:])
            if match and match.end():
                negated.add(intent)
                found_spans.append((start, start + match.end()))
                ends.append(start + match.end())
                break
    return found_spans


# "stop" in its everyday sense, someone ceasing to do something ("so new hires stop asking me", "to stop worrying"):
# no cancel. Stopping a run's own doing ("stop training r1", "stop running it") is one; "stop waiting" is DONT_WAIT's.
STOP_DOING = (r"\b(?:stop|stops|stopped|quit|quits)\s+(?!(?:running|training|waiting|it|that|this|the)\b)"
              r"(?!(?:every|any|some|no)thing\b)\w+ing\b")  # fmt: skip


# A proposal taken back, not a run: "resume tp-try? no, cancel that idea", "scrap that plan" (no cancel).
IDEA_DROPPED = (r"\b(?:cancel|scrap|drop|forget|ditch|shelve|kill|abort)\s+(?:that|the|this|my|our)\s+"
                r"(?:idea|plan|thought|suggestion|proposal|notion)\b")  # fmt: skip


# The user's own act to come, said as when the request is for: "before I start anything big, ...", "before we launch
# anything", "before I try anything, could you check the hardware". Its verb is the user's, no request: it cues no
# action; what is asked beside it decides ("before I start anything big, could you kick off a layout sweep" starts the
# sweep), and a launch of their own to come is no launch now where no other launch verb asks for one. The clause ends
# at punctuation or where the request begins ("... can you", "... I want to understand what hardware this has").
OWN_LATER = (r"\bbefore\s+(?:i|we|you)\b(?:[^,;:!?.\u2013\u2014]|\.(?=\w))*?"
             r"(?=\s*(?:[,;:!?\u2013\u2014]|\.(?!\w)|\s-\s|$)|"
             r"\s+(?:can|could|would|will|please|pls|and|but|so|then)\b|"
             r"\s+(?:i|we)(?:'d|\s+would)?\s+(?:want|need|like|have to|must|should|wanna)\b)")  # fmt: skip


# What the speaker already did, told as the scene of the request: "I opened a PR for lr-scan already; read ...", "I
# benchmarked r1 yesterday, now check ...", "we updated the docs from lr-scan; show me ...", "after benchmarking r1
# last week, I want ...", "since we cancelled tp-try, show ...", "benchmark r1 — I compared baseline-ddp to it
# yesterday" (after a dash too). Its verb is done, no request: it cues no action
# (what is asked beside it decides). The clause ends at a stop, a dash or a comma.
DONE_VERBS = (r"opened|benchmarked|evaluated|scored|wrote|written|updated|cancell?ed|killed|stopped|launched|started|"
              r"kicked off|trained|swept|reported|merged|submitted|resumed|read|checked|planned|compared|ran(?!\s+out)|"
              r"documented|pushed|filed|made|created|did|put together|brought|picked|took")  # fmt: skip
DONE_BEFORE = (rf"(?:^|(?<=[,;:.!?\u2013\u2014])\s*|(?<=\s-)\s+|\b(?:since|because|as|now that|after|once)\s+)"
               rf"(?:(?:i|we|you)(?:'ve|'d|\s+have|\s+had)?\s+(?:already\s+|just\s+|recently\s+)?(?:{DONE_VERBS})|"
               r"(?<=after )\w+ing)\b(?:[^,;:!?.\u2013\u2014]|\.(?=\w))*?"
               r"(?=\s*(?:[,;:!?\u2013\u2014]|\.(?!\w)|\s-\s|$))")  # fmt: skip


# A launch put off while something else is asked for now: "you can train long.yaml on 2 gpus later, for now show me
# it" (the launch is not this request; what is asked "for now" is).
LAUNCH_PUT_OFF = (rf"{LAUNCH_VERB}(?:[^,;!?.]|\.(?=\w))*?\b{LATER}\b(?=[^.!?]*\b(?:for now|first|right now|meanwhile|"
                  r"in the meantime|at the moment)\b)")  # fmt: skip


# A request worded as a question: "could you launch ...", "would you mind ...". It asks for the action.
# ("could I get a report", "can we have that drafted?" ask for something to be made, as "could you" does)
POLITE_REQUEST = (r"\b(?:can|could|would) you\b|\blet'?s\b|^\W*how about\b|\bwould you mind\b|"
                  r"\b(?:can|could|may) (?:i|we) (?:get|have)\b|"
                  # "can we kick that off?": the launch asked for now, no what-if ("can we run 70b on 4 gpus?")
                  r"\b(?:can|could|shall) (?:we|i) (?:please |now |just )?(?:kick|fire) off\b")  # fmt: skip
# "would it be possible to refresh the docs?", "is possible to evaluate r1?": a request. For a launch it asks whether
# one could work ("is it possible to train 70b on 4 gpus?"), a what-if; a sweep, a cancel or a resume so asked is
# confirmed first (NOT_BY_POSSIBLE), never taken on a question.
POSSIBLE_TO = r"\b(?:(?:is|would|will)\s+(?:it|that)\s+be\s+|is\s+(?:it\s+)?)possible\s+to\b"
NOT_BY_POSSIBLE = ("run", "sweep", "cancel", "resume")


def score(text: str, entities: Entities, grammar: str, previous: str | None) -> dict[str, float]:
    """The score of every intent for the normalised sentence `text`."""
    negated, lowered = negated_actions(text.lower())
    scores = {intent: sum(w for rule, w in cues if re.search(rule, lowered)) for intent, cues in CUES.items()}
    # a name is no cue: "memory.json" names a file, it does not ask about memory; "the failed one" names a run
    for intent in ("results", "status"):
        scores[intent] = sum(w for rule, w in CUES[intent] if re.search(rule, masked(lowered, entities)))
    scores["run"] += 3 if launch_verb(masked(lowered, entities)) else 0  # "tp-try" names a run: no "try" in it
    if re.search(DEFAULT_TRIALS, lowered):  # a setting of the sweep asked for, or the trials of one to read
        scores["sweep" if scores["sweep"] > 0 else "trials"] += 3
    if grammar != "help":  # the grammar's first reading: one cue among the others
        scores[grammar] = scores.get(grammar, 0) + 2.5
    if (
        entities.has("trials")
        and not entities.has("sweep", "sweep_choice")
        and not re.search(rf"{TRIALS_OF_A_SWEEP}\s+(?:\d+\s+)?(?:{NOUNS['trials']})\b", lowered)
    ):  # "maybe a dozen trials?": trials to run, not the word "trials" of a sweep's results (nor the grammar's reading)
        scores["trials"] -= 3 + (2.5 if grammar == "trials" else 0)
    # no word of the sentence cues another intent: "long.yaml, 2 gpus, fsdp" is a launch's facts, "layouts for
    # configs/long.yaml on 8 h100s" a plan's
    only_facts = all(v <= 0 for k, v in scores.items() if k not in ("read", "run"))
    # or those facts with the hardware a launch takes too (a plan's cue): "a job on 1 node, 8 gpus, long.yaml, ..."
    facts_and_hardware = all(v <= 0 for k, v in scores.items() if k not in ("read", "run", "plan"))
    _entity_cues(lowered, entities, scores, only_facts, facts_and_hardware)
    if _still_or_ended(masked(lowered, entities)):
        scores["status"] += 4  # "still holding its allocation, or did it die?": whether it goes on, no figure
    if _ended_asked(masked(lowered, entities)):
        scores["status"] = max(scores["status"] + 4, scores["results"] + 2)  # "has r1 finished?": its state, no
        # figure (the grammar's reading of "finish" as a topic of its results is no figure asked)
    if scores["status"] > 0 and _ended_and_measured(masked(lowered, entities)):
        scores["results"] = max(scores["results"], scores["status"] + 0.5)  # what the status says, and the figure
    said = text.lower()
    question = bool(re.search(QUESTION, said)) or said.rstrip().endswith("?")
    if question and not re.search(POLITE_REQUEST, said):
        possible = bool(re.search(POSSIBLE_TO, said))
        for action in ACTIONS:
            if not possible or action == "run":
                scores[action] -= 2  # a question asks; it launches only when it asks to ("could you launch ...")
    if scores["sweep"] < 6 and re.search(SWEEP_CHECKED, masked(lowered, entities)):
        scores["trials"] = max(scores["trials"], scores["sweep"]) + 1.5  # "verify that sweep's claim": its trials, read
    if entities.has("no_launch"):
        for action in ("run", "sweep", "bench"):
            if action != "bench" or not _evaluated_not_trained(lowered):
                scores[action] = -10.0
        scores["plan"] += 2
    if "pr" not in negated and re.search(PR_ORDERED, lowered):
        scores["pr"] = max(scores["pr"], scores["report"] + 2)  # "write it up and open a PR": the PR writes it too
    if (read_first := re.search(READ_THEN, lowered)) and not scores["run"] > 0:
        for action in WRITTEN_AFTER_A_READ:  # "show the lr-scan summary, then open a PR": the read comes first
            if not re.search(CUES_OF_WRITES[action], lowered[: read_first.end()]):
                scores[action] -= 8
    for action in negated:  # "don't open a PR": never that action, whatever else cues it
        scores[action] = -10.0
    if previous in ("plan", "run") and entities.has(
        "times", "relative"
    ):  # "double the gpus": the action before, changed
        scores[previous] += 3
    replans = entities.has("gpu_named", "devices", "model", "node_count", "own_model", "seq_len", "per_node",
                           "device_mem", "model_relative")  # fmt: skip
    if previous == "plan" and replans and _only_what_a_plan_takes(entities):
        scores["plan"] += 2  # "at 16k context please", "seq 8192." right after a plan: that plan, changed
    if previous and re.search(FOLLOW_UP, lowered):
        scores[previous] = scores.get(previous, 0) + 2.5
        replanned = entities.has("gpu_named", "devices", "model", "node_count", "own_model", "seq_len", "device_mem",
                                 "model_relative")  # fmt: skip
        if previous == "plan" and replanned and not entities.has("steps", "switch", "override", "layout", "nproc"):
            scores["plan"] += 4  # "try that on A100s instead": the what-if again, not a launch
        elif previous == "plan" and replanned and _what_if_again(lowered, entities):
            scores["plan"] += 6  # "now try seq_len 2048": "try" tries the what-if; only a launch verb launches
        if previous == "run" and not entities.has("model", "gpu_named", "no_launch"):
            scores["run"] += 3  # "and with 4 gpus?" after a launch: the launch again
        if (
            previous in READ_OF
            and scores[previous] >= max(scores.values())
            and (other := _read_of_the_other(entities, previous))
        ):  # "same question: sweeps/lr-scan" after a run's results: the same read of that sweep, its trials (where
            # the follow-up reads as that read again, and cues no other action: "should I cancel it?")
            scores[other] = scores[previous] + 1
    elif previous == "run" and re.search(CORRECTS, lowered) and _changes_a_launch(entities):
        scores["run"] += 5.5  # "oops, make that 4 gpus" after a launch: that launch, corrected (as a follow-up is)
    if previous == "sweep" and "sweep" not in negated and _sweep_moved_to_a_file(lowered, entities):
        scores["sweep"] += 5  # "no, change it to configs/long.yaml, same trials" after a sweep: that sweep, on the file
    if previous in ("status", "wait") and _its_figures_asked(lowered, entities):
        # "okay, phew. could you show me its loss numbers?" after its status: the run's figures now, not its state
        # again, nor a plan (the grammar's "could you" is no what-if of a model)
        scores["results"] = max(scores["results"], scores["status"] + 1, scores["plan"] + 1)
    if "wait" not in negated and re.search(TOLD_WHEN_IT_ENDS, masked(lowered, entities)):
        scores["wait"] = max(scores["wait"], scores["results"] + 1)  # "tell me the result when it lands": a wait
    return scores


# A figure of "it" (the run the conversation is on) asked for: "its loss numbers", "their memory figures".
ITS_FIGURES = (r"\b(?:its|their)\s+(?:(?:final|latest|peak|raw)\s+)?(?:loss|memory|throughput|tok(?:ens)?\s*/\s*s|"
               r"mfu|speed|numbers|figures|metrics|results|stats|statistics)\b")  # fmt: skip


def _its_figures_asked(lowered: str, entities: Entities) -> bool:
    """Whether the sentence asks a figure of the run the conversation is on, naming nothing a plan takes."""
    planned = entities.has("model", "model_choice", "gpu_named", "devices", "device_mem", "own_model", "node_count")
    return bool(re.search(ITS_FIGURES, lowered)) and not planned and not entities.has("sweep")


# What the run gives when it ends, asked to be told then: "tell me the final result when it lands", "send me the loss
# once r1 finishes" (the end still to come, in the present tense; "its results when it finished" reads them now).
TOLD_WHEN_IT_ENDS = (r"\b(?:tell|show|give|send|report|bring|ping)\s+(?:me|us)\s+(?:[\w'-]+\s+){0,4}?"
                     r"(?:when|once|as soon as)\s+(?:it|they|the\s+(?:run|job)|_+)\s+"
                     r"(?:lands|finishes|ends|completes|is\s+(?:done|over|finished)|wraps\s+up|"
                     r"crosses\s+the\s+finish(?:ing)?(?:\s+line)?)\b")  # fmt: skip


# The read of a run's results and of a sweep's (its trials): a follow-up that names the other kind only asks the same
# of it.
READ_OF = {"results": "run", "trials": "sweep"}


def _read_of_the_other(entities: Entities, previous: str) -> str | None:
    """The read of the other kind where the follow-up names one of it and none of the kind read before."""
    other = next(read for read, kind in READ_OF.items() if read != previous)
    said = entities.has(READ_OF[other]) and not entities.has(READ_OF[previous])
    return other if said else None


# A reading ordered first, then something else: "show the summary of sweep layouts-nov and then open a PR for it",
# "display the sweep winners, then update the docs". The first action is the reading; the write after "then" is a
# step to come, asked for once the user has seen what it would be of.
READ_THEN = (r"^\W*(?:(?:please|pls|first|ok|okay|so)\W+)*(?:show|display|read|view|pull\s+up|list|look\s+at|print)\b"
             r"[^.;!?]*?(?:,\s*|\s+)(?:and\s+)?then\b")  # fmt: skip
WRITTEN_AFTER_A_READ = ("pr", "docs", "report")
CUES_OF_WRITES = {"pr": r"\b(?:pull request|pr|merge request)\b", "docs": rf"\b{DOC_NOUN}\b",
                  "report": r"\breport\b|\bwrite[- ]?up\b"}  # fmt: skip


# A pull request ordered at the start of its clause, beside the write-up it comes with: "write it up and open a PR",
# "push the branch and open a pull request", "please raise a PR". open_pull_request writes the report as well, so the
# write-up asked with it is no rival reading ("should we open a PR?" asks; "write it up, don't open a PR" negates it).
PR_ORDERED = (r"(?:^|[.!;:,]\s*|\b(?:and|then|also|please|plus|now)\s+)(?:(?:then|also|please|now|just)\s+)?"
              r"(?:open|create|file|raise|submit|put\s+up|send)\s+(?:up\s+)?(?:a|an|the)\s+(?:[\w.-]+\s+)?"
              r"(?:pull[- ]request|pr|merge[- ]request)\b")  # fmt: skip
# A correction of what was just asked for: "actually ...", "oops, make that ...", "negative, 60 steps".
CORRECTS = (r"^\W*(?:(?:no|nope|nah)\W+)?(?:actually|sorry|oops|correction|negative|rather|wait|on second thought)\b|"
            r"\bmake\s+(?:it|that)\b")  # fmt: skip


# An experiment file put in place of the one before, right before the file: "no, change it to configs/long.yaml",
# "use long.yaml instead" ("show long.yaml", "set steps to 50 in long.yaml" read or edit it).
MOVED_TO = (r"^\W*(?:(?:no|nope|nah|actually|rather|sorry|ok|okay|then|now|and|but)\W+)*"
            r"(?:(?:change|switch|swap|move)\s+(?:(?:it|that|this|the\s+\w+)\s+)?(?:over\s+)?to|use|using|on|with|"
            r"try)\s+(?:the\s+)?$")  # fmt: skip
AGAIN_WITH = r"\b(?:with|for|on|using|to)\s+(?:the\s+)?$"


def _sweep_moved_to_a_file(lowered: str, entities: Entities) -> bool:
    """Whether the sentence names one experiment file (a YAML config, not a run's or sweep's) as the one to use
    in place of the one before, and nothing a sweep does not take (a setting, steps, a layout)."""
    configs = [
        e
        for e in entities.found
        if e.kind in ("file", "experiment")
        and str(e.value).endswith((".yaml", ".yml"))
        and not str(e.value).startswith(("runs/", "sweeps/"))
    ]
    if len(configs) != 1 or entities.has("steps", "switch", "override", "layout", "nproc", "run", "sweep"):
        return False
    before = lowered[: configs[0].span[0]]
    # or the same sweep again with it: "same with configs/long.yaml", "do it again for long.yaml"
    again = re.search(r"\b(?:same|again|instead)\b", lowered) and re.search(AGAIN_WITH, before)
    return bool(re.search(MOVED_TO, before) or again)


def _changes_a_launch(entities: Entities) -> bool:
    """Whether the sentence states what a launch takes, and names no model or GPU (which a plan takes)."""
    launch = entities.has("steps", "nproc", "devices", "switch", "override", "layout", "optimizer")
    return launch and not entities.has("model", "gpu_named", "no_launch", "run", "sweep")


# How a run ended and a figure of it, asked together ("did it finish cleanly, and how fast was it going?"): its
# results say both (read_results reports the run's status beside its figures). A run still going has no results yet:
# its progress is a status.
ENDED = r"\b(?:finish\w*|complet\w*|crash\w*|fail\w*|succe\w*|cleanly|end(?:ed)?|died|oom\w*)\b"
FIGURE = (r"\bhow (?:fast|quick(?:ly)?|well)\b|\bloss\b|\btok(?:ens)?\s*/\s*s\b|\btokens per second\b|"
          r"\bthroughput\b|\bmfu\b|\bspeed\b|\bmemory\b")  # fmt: skip
STILL_GOING = r"\bstill\b|\bright now\b|\bwhat step\b|\bprogress\b|\byet\b|\bso far\b|\bcurrently\b"


# Whether a run goes on or has ended, asked as an either-or in any words: "is r1 still holding its allocation or did
# it die", "has r1 terminated, or is it still being collected?" (its status; "is the loss still falling or did it
# plateau?" asks about a figure: FIGURE rules it out).
_ENDED_VERB = r"(?:has|did|is|was)\s+(?:\S+\s+){1,3}?\w+(?:ed|ne|ie|ied|ead|ver|one)\b"
STILL_OR_ENDED = (rf"\bstill\b[^.?!;]{{0,60}}?\bor\s+{_ENDED_VERB}|"
                  rf"\b{_ENDED_VERB}[^.?!;]{{0,20}}?\bor\s+(?:is|are|was)\b[^.?!;]{{0,40}}?\bstill\b")  # fmt: skip


def _still_or_ended(lowered: str) -> bool:
    return bool(re.search(STILL_OR_ENDED, lowered)) and not re.search(FIGURE, lowered)


# Whether a run has ended, asked: "did it actually die?", "does a run ever truly finish? ... has r1?" (not "did the
# loss end up under 2": FIGURE; nor "did r1 end up faster": an outcome compared).
# The auxiliary opens its question ("layouts-nov is finished; would you mind ..." states it; "wait until it has
# finished" waits on it).
ENDED_ASKED = (r"(?:^|[.;:!?,\u2013\u2014]\s*|\s-\s*|\b(?:or|and|but|so)\s+)(?:did|does|do|has|have|is|was|will)\s+"
               r"(?:\S+\s+){0,4}?(?:die[ds]?|finish(?:e[sd])?|end(?:s|ed)?|complete[sd]?|terminate[sd]?|"
               r"crash(?:e[sd])?|fail(?:s|ed)?|succeed(?:s|ed)?)\b(?!\s+(?:up|with|in|at|on)\b)[^.!?;]*\?")  # fmt: skip


def _ended_asked(lowered: str) -> bool:
    """A question whether a run ended, with no figure, no why and no word of its results beside it."""
    if not re.search(ENDED_ASKED, lowered) or re.search(FIGURE, lowered) or re.search(r"\bwhy\b", lowered):
        return False
    return not any(re.search(rule, lowered) for rule, _ in CUES["results"])


def _ended_and_measured(lowered: str) -> bool:
    return bool(re.search(ENDED, lowered) and re.search(FIGURE, lowered) and not re.search(STILL_GOING, lowered))


def _only_what_a_plan_takes(entities: Entities) -> bool:
    """Whether the sentence states nothing only a launch takes: no steps, switch, processes, run or sweep, and no
    override but the sequence length (which a plan reads too: "seq 8192." after a plan changes that plan)."""
    only_plan = all("seq" in str(value) for value in entities.all("override"))
    return only_plan and not entities.has("steps", "switch", "nproc", "run", "sweep")


def _what_if_again(lowered: str, entities: Entities) -> bool:
    """A follow-up that changes only what a plan takes (its one override the sequence length a plan reads too),
    with no launch verb but "try"."""
    only_plan = all("seq" in str(value) for value in entities.all("override"))
    untried = re.sub(r"\btry\b", "", masked(lowered, entities))
    return only_plan and not entities.has("steps", "switch", "layout", "nproc") and not launch_verb(untried)


# Words after which "run", "start" or "train" is a noun ("the latest run", "a training run"), not a command.
_NOUN_BEFORE = """the a an that this latest last recent previous my our your each every which what first new whole
one same ddp fsdp baseline of training good best failed finished current its his her their other been was were
be is i've we've you've have has had already ever did"""
NOUN_BEFORE = set(_NOUN_BEFORE.split())


def _evaluated_not_trained(lowered: str) -> bool:
    """Whether only training is refused and a benchmark asked for: "do not train anything, only evaluate r1 on the
    benchmark" (an evaluation trains nothing), not "don't run anything" (a benchmark is run too)."""
    trained = re.search(rf"{NEGATOR}(?:re-?)?train\w*\b", lowered)
    launched = re.search(rf"{NEGATOR}(?:re-?)?(?:launch|start|run|kick)\w*\b", lowered)
    return bool(trained and not launched and re.search(rf"\b(?:{DONT_VERB['bench']})\b", lowered))


# An order of the parts of a question: "start with the H100 side", "let's start with the first half".
START_WITH_PART = (r"\s+(?:off\s+)?with\s+(?:the\s+)?(?:[\w.-]+\s+){0,2}(?:side|half|part|leg|variant|case|"
                   r"scenario|branch|option|column)\b")  # fmt: skip


# What a sweep found, checked: "verify that for me" of a sweep said to have found the best setup, "double-check
# against that same sweep". Checking reads what it found; no new sweep is asked for (a launch verb for one scores 6).
_CHECK_VERB = r"\b(?:verif(?:y|ies|ied)|(?:double|fact|cross|sanity)-?check\w*)\b"
SWEEP_CHECKED = rf"{_CHECK_VERB}(?=.*\bsweep\b)|\bsweep\b.*{_CHECK_VERB}"


def launch_verb(lowered: str) -> bool:
    """Whether the sentence uses a launch verb as a verb: "run it", "could you run", not "the latest run"."""
    for found in re.finditer(LAUNCH_VERB, lowered):
        before = re.findall(r"[\w']+", lowered[: found.start()])
        if found.group(0) in ("run", "start", "train", "try") and before and before[-1] in NOUN_BEFORE:
            continue
        if found.group(0) == "run" and before and set(before[-1]) == {"_"}:  # "the tp try run": a name, masked
            continue
        if found.group(0) == "start" and re.match(START_WITH_PART, lowered[found.end() :]):
            continue  # "start with the H100 side": which part of the question first, no launch
        if found.group(0) == "run" and re.match(
            r"\s*(?:'s|status|dir|directory|folder|results?)\b", lowered[found.end() :]
        ):
            continue
        return True
    return False


# What asks for a plan or weighs an idea, not a launch: "plan", "what if", "would it fit", "which layout".
# Nor a launch: what was run, compared or said by someone else ("was tp on 2 gpus for 50 steps faster?", "the docs
# say tp on 2 gpus for 50 steps is fine").
PLANNING = (r"\bplan\w*\b|\bwhat if\b|\bwould\b|\bsuppose\b|\bimagine\b|\bhypothetical\w*\b|\bfits?\b|"
            r"\bwhich (?:layout|parallel)\w*\b|\bbest layout\b|\bif (?:i|we) had\b|\bidea\b|\bshould\b|"
            r"\b(?:was|were|did|had|used|than|faster|slower|better|worse|compar\w*|vs)\b|"
            r"\b(?:says?|said|suggest\w*|recommend\w*|according|docs?|readme|tutorial|paper)\b")  # fmt: skip
# A question that asks for the launch itself: "Fire it up?", "shall we kick it off?".
LAUNCH_ASKED = r"\b(?:fire|kick|start|launch|go|run|train)\b(?:\s+(?:it|this|that|them))?(?:\s+(?:up|off))?\s*\?"


def _launch_spec(lowered: str, entities: Entities) -> bool:
    """Whether the sentence states a layout, a count of GPUs and the steps, and nothing that plans, names a run or
    sweep, or weighs an idea: a launch, however it is dressed ("tower, requesting clearance: 2 GPUs in tensor
    parallel formation, 60 steps on the flight plan")."""
    stated = entities.has("layout") and entities.has("steps") and entities.has("devices", "nproc")
    named = entities.has("run", "sweep", "model", "model_choice", "node_count", "gpu_named")
    asked = "?" in lowered and not re.search(LAUNCH_ASKED, lowered)  # a question, unless it asks for the launch
    return stated and not named and not asked and not re.search(PLANNING, lowered)


# The planner's prediction held against what was measured, either way round: "planner pick vs actual", "measured
# against predicted" (a sweep's summary sets its measured layouts beside the plan's ranking).
_PREDICTED = r"(?:planner|plan|predict\w*|forecast\w*|estimat\w*)(?:'s)?(?:\s+(?:pick|choice|ranking|rank|numbers?))?"
_MEASURED = r"(?:actual\w*|measured|real(?:ity)?|observed)(?:\s+(?:pick|choice|ranking|rank|numbers?|results?))?"
_VERSUS = r"\s+(?:vs\.?|versus|against|compared (?:to|with))\s+(?:the\s+|what\s+(?:was\s+)?)?"
PREDICTED_VS_MEASURED = rf"\b{_PREDICTED}{_VERSUS}{_MEASURED}\b|\b{_MEASURED}{_VERSUS}{_PREDICTED}\b"


def _entity_cues(
    lowered: str,
    entities: Entities,
    scores: dict[str, float],
    only_facts: bool = False,
    facts_and_hardware: bool = False,
) -> None:
    planned = entities.has("model", "model_choice") + entities.has("gpu_named") + entities.has("node_count")
    planned += entities.has("device_mem") + entities.has("own_model")  # "on 8 cards with 40 gigs each", "our model"
    if planned:
        scores["plan"] += 1.5 * planned
    if entities.has("devices") and not entities.has("run", "sweep", "file"):
        scores["plan"] += 1
    launching = sum(entities.has(kind) for kind in ("steps", "nproc", "switch", "optimizer", "layout", "override"))
    scores["run"] += 1.5 * launching
    if _launch_spec(lowered, entities):
        scores["run"] += 4  # "two GPUs in tensor parallel formation, sixty steps": all a launch takes, in any words
    if launching and entities.has("not_experiment") and not entities.has("file", "experiment"):
        scores["read"] -= 1.5  # "20 steps, no long config please": the config refused for a launch, no file to show
    if scores["sweep"] >= 6 or scores["bench"] >= 5:
        scores["run"] -= 3  # "kick off a layout sweep", "run the private benchmark": the verb's object decides
    if entities.has("run"):
        for intent in ("results", "status", "wait", "cancel", "bench"):
            scores[intent] += 1
        scores["plan"] -= 2
        if not entities.has("sweep"):
            scores["why"] -= 3  # "why did tp-try fail?": its results say
            scores["results"] += 4 if re.search(r"\bwhy\b", lowered) else 1
    if (
        entities.has("run")
        and re.search(COPIED, lowered)
        and entities.has("steps", "relative", "times", "switch", "nproc", "devices", "layout", "optimizer")
    ):
        scores["run"] += 4  # "the same as r1 with 50 steps", "like r1 on 4 gpus": a launch copying it, not a read
    if len(set(entities.all("run"))) >= 2 and scores["compare"] > 0:
        scores["compare"] += 4  # "compare r1 and baseline-ddp"
    if entities.has("sweep"):
        for intent in ("trials", "report", "pr", "docs"):
            scores[intent] += 1.5
        scores["plan"] -= 2
    if entities.has("sweep") and not entities.has("run") and re.search(PREDICTED_VS_MEASURED, lowered):
        scores["trials"] += 3  # "layouts-nov: planner pick vs actual?": the sweep's own comparison, not two runs
        scores["compare"] -= 2
    if any(e.kind == "sweep" and re.match(rf"\s+(?:sweep(?:'s)?\s+)?{SWEEP_FIGURES}", lowered[e.span[1] :])
           and re.search(rf"{LOOKED_AT}|^\W*$", lowered[: e.span[0]]) for e in entities.found):  # fmt: skip
        scores["trials"] += 3  # "open the layouts-nov summary", "lr-scan summary - ...": what that sweep found,
        # looked at ("write the lr-scan results up" writes them)
    sweeps_figures = entities.has("sweep") or re.search(rf"\bsweeps?\s+{SWEEP_FIGURES}", lowered)
    if sweeps_figures and not entities.has("run"):  # "the results of the lr-scan sweep", "sweep results?": its trials
        # (unless the figures are written into the docs: "put its results into the README" updates them)
        scores["trials"] += 0 if re.search(WRITTEN_INTO_DOCS, lowered) else max(scores["results"], 0)
        scores["results"] = 0
    if (
        only_facts
        and entities.has("file", "experiment")
        and (launching or entities.has("devices"))
        and not entities.has("own_model")  # "the experiment's own model on 2 A100s": the model planned for
        and _launched_file(lowered, entities)
    ):
        scores["run"] += 4  # "long.yaml, 2 gpus, fsdp": an experiment file given what a launch takes, no reading asked
    elif _launch_of_file(lowered, entities):
        scores["run"] += 3  # "so we launch long.yaml on two GPUs with ddp, no?": the file is the launch's object
    elif (
        facts_and_hardware
        and launching >= 2
        and not entities.has(*PLANNED_HARDWARE)
        and _launched_file(lowered, entities)
    ):
        scores["run"] += 4  # "a training job on 8 gpus, manifest configs/long.yaml, 500 steps, layout ...": the
        # experiment launched with what a launch takes, though the hardware is named too
    elif _plan_of_file(lowered, entities) or _file_on_hardware(lowered, entities):
        scores["plan"] += 4  # "rank the layouts for the experiment configs/long.yaml": the plan's experiment, not read
    elif entities.has("file") and _docs_written(lowered, entities):
        scores["read"] -= 2.5  # "put its results into the docs, training.md and README": the docs' pages written to
        # (the grammar's first reading of a file named), not read
    elif entities.has("trials") and scores["sweep"] > 0 and _launched_file(lowered, entities):
        scores["sweep"] += 3  # "a tuning sweep, 8 trials, on configs/long.yaml": the file is what the sweep tunes,
        # no file to show (no verb of reading, no question)
    elif any(e.kind == "file" and lowered[e.span[0] : e.span[1]].strip() for e in entities.found):
        # (a file inside what a negation took back is no cue: "don't pull the results into training.md")
        scores["read"] += 3
        named = re.search(r"\.(?:jsonl?|ya?ml|txt|md|log|csv|toml)\b", lowered)
        if named and not launch_verb(masked(lowered, entities)):  # "tp-try memory.json": that file, not its topic
            scores["read"] += 2
    if entities.has("vague_hardware") and re.search(
        r"\bwhat if\b|\bif (?:i|we) (?:had|got|get)\b|\b(?:would|could)\b", lowered
    ):
        scores["plan"] += 3  # "what if we had more hardware?": hardware that is not this machine's
        scores["hardware"] -= 3
    if re.search(USED_WELL, lowered):
        scores["hardware"] -= 4  # "did it use the hardware well?": a figure of the run (its MFU), not this machine
    if re.search(BUYING, lowered):
        scores["hardware"] -= 5  # "before we buy hardware": hardware to have, not this machine's
    if entities.has("experiment") or entities.has("trials"):
        scores["sweep"] += 1 if scores["sweep"] > 0 else 0
    if entities.has("trials") and not entities.has("sweep"):
        scores["sweep"] += 3  # a number of trials is what a new sweep takes; reading one takes its name
    if entities.has("checkpoint"):
        scores["bench"] += 1
    if re.search(DO_THAT, lowered) and entities.has("layout") and not entities.has(*WHAT_IF_NAMES):
        scores["run"] += 3  # "it says to try the mode where every GPU keeps a full copy. Can I do that on 2 GPUs?"
    if entities.has("run") and (re.search(RUN_LOG, lowered) or _log_of_named_run(lowered, entities)):
        scores["read"] += 3  # "r1's raw training log, the text one": its log file, not the figures read from it
        if re.search(LOG_SHOWN, lowered):
            scores["read"] += 2  # "can I see the log of tp-try? what went wrong?": the log to look through myself


# A layout described, then asked to be done: "the tutorial says to try the mode where each GPU keeps a full copy ...
# can I do that on 2 GPUs?" tries it on the experiment. A what-if names what it is about (a model, a GPU, nodes):
# "can we do that with llama 70b on 8 H100s?" plans.
DO_THAT = r"\b(?:can|could|may)\s+(?:i|we)\s+(?:just\s+)?(?:do|try)\s+(?:that|this|it)\b"
# What only a plan takes (a launch runs on this machine's GPUs, its model the experiment's): a model, a GPU by name.
PLANNED_HARDWARE = ("model", "model_choice", "gpu_named", "device_mem", "own_model")
WHAT_IF_NAMES = ("model", "model_choice", "gpu_named", "node_count", "device_mem", "own_model")


# Verbs that change a file: "set steps to 50 in long.yaml", "update long.yaml so packing is off" (no launch).
EDITING = (r"\b(?:set|sets|setting|change[sd]?|changing|edit\w*|updat\w*|modif\w*|sav(?:e|es|ed|ing)|writ\w*|put|"
           r"add\w*|patch\w*|tweak\w*|adjust\w*|rewrit\w*|replac\w*|fix(?:e[sd]|ing)?|bump\w*|increas\w*|decreas\w*|rais\w*|"
           r"lower\w*|commit\w*|creat\w*|copy|copied)\b")  # fmt: skip


def _launched_file(lowered: str, entities: Entities) -> bool:
    """Whether the files named are experiment files (a YAML config, not a run's own) stated with no verb of reading
    or editing and no question: "configs/long.yaml on 4 gpus" runs it; "show long.yaml", "does long.yaml use fsdp?"
    read it, as a change to it ("set steps to 50 in long.yaml") does (no tool edits a file)."""
    named = {str(f) for f in [*entities.all("file"), *entities.all("experiment")]}
    experiments = len(named) == 1 and all(f.endswith((".yaml", ".yml")) and not f.startswith(("runs/", "sweeps/"))
                                          for f in named)  # fmt: skip  # two files named are compared, not launched
    reading = any(re.search(rule, lowered) for rule, _ in CUES["read"][:2]) or re.search(EDITING, lowered)
    return experiments and not reading and not re.search(QUESTION, lowered) and "?" not in lowered


def _launch_of_file(lowered: str, entities: Entities) -> bool:
    """Whether an experiment file (a YAML config, not a run's own) is the object of a launch verb right before it
    ("launch long.yaml", "train the configs/long.yaml"); "does long.yaml train with fsdp?" asks about the file."""
    configs = [e for e in entities.found if e.kind in ("file", "experiment")
               and str(e.value).endswith((".yaml", ".yml")) and not str(e.value).startswith("runs/")]  # fmt: skip
    if entities.has("no_launch"):  # "never launch long.yaml, just show it": the verb is taken back
        return False
    return any(re.search(rf"{LAUNCH_VERB}\s+(?:(?:the|our|my|this)\s+)?$", lowered[: e.span[0]]) for e in configs)


# What a plan is of, right before the experiment file it names: "the layouts for configs/long.yaml", "plan the
# parallelisation of the experiment long.yaml" ("which layouts does long.yaml use?" reads the file: a verb of it).
PLANNED_FOR = (
    r"\b(?:layouts?|plan|planning|paralleli[sz]ation|parallelism|sharding|split(?:ting)?)\s+(?:\w+\s+){0,2}?"
    r"(?:for|of)\s+(?:(?:the|our|my|this)\s+)?(?:(?:experiment|config|configuration)\s+)?(?:file\s+)?$"
)


def _plan_of_file(lowered: str, entities: Entities) -> bool:
    """Whether an experiment file named as a file (a YAML config, not a run's own) is what a plan of layouts is for
    ("the fastest layout for our experiment" names no file: a sweep may find it)."""
    configs = [e for e in entities.found if e.kind in ("file", "experiment") and not str(e.value).startswith("runs/")
               and re.search(r"\.ya?ml\b", lowered[e.span[0] : e.span[1]])]  # fmt: skip
    return any(re.search(PLANNED_FOR, lowered[: e.span[0]]) for e in configs)


def _file_on_hardware(lowered: str, entities: Entities) -> bool:
    """Whether one experiment file is named with the hardware a plan takes (a GPU by name, its memory) and no verb
    of reading, editing or launching: "what would the planner say about configs/long.yaml on 4 A10s?" plans that
    experiment ("show configs/long.yaml" reads it; "launch configs/long.yaml" runs it)."""
    configs = {str(e.value) for e in entities.found if e.kind in ("file", "experiment")}
    experiment = len(configs) == 1 and all(f.endswith((".yaml", ".yml")) and not f.startswith(("runs/", "sweeps/"))
                                           for f in configs)  # fmt: skip
    reading = any(re.search(rule, lowered) for rule, _ in CUES["read"][:2]) or re.search(EDITING, lowered)
    hardware = entities.has("gpu_named", "device_mem")
    return experiment and hardware and not reading and not launch_verb(masked(lowered, entities))


# A run's log named right after the run: "tp-try log", "r1 training logs" ("r1 log every 10 steps" is a setting).
LOG_AFTER_RUN = r"\s+(?:(?:raw|text|training|console|output)\s+)?logs?\b(?!\s+(?:every|each|to|into|in|at)\b)"


def _log_of_named_run(lowered: str, entities: Entities) -> bool:
    return any(e.kind == "run" and re.match(LOG_AFTER_RUN, lowered[e.span[1] :]) for e in entities.found)


def _docs_written(lowered: str, entities: Entities) -> bool:
    """Whether every file named is a page of the docs (training.md, the README) that the sentence writes into."""
    pages = all(re.fullmatch(rf"docs/\S+|(?:{DOC_NOUN})(?:\.md)?", str(f), re.I) for f in entities.all("file"))
    return pages and bool(re.search(WRITTEN_INTO_DOCS, lowered) or re.search(DOCS_AGREE, lowered))


# A run's log as a thing to look at (its log.txt): "the raw training log", "r1's logs", "the text log" ("log every 10
# steps", "log to wandb" are settings of a launch).
RUN_LOG = (r"(?:\b(?:the|its|their|raw|text|plain|training|full|whole|entire|complete|console|output)|'s)\s+"
           r"(?:(?:raw|text|plain|training|full|whole|entire|complete|console|output)\s+)?logs?\b"
           r"(?!\s+(?:every|each|to|into|in|at)\b)")  # fmt: skip
# The log itself the object of a verb of looking: "can I see the log of tp-try", "show me r1's training log".
LOG_SHOWN = (r"\b(?:see|show|open|read|view|look at|cat|tail|print|pull up|check)\s+(?:me\s+|us\s+)?"
             r"(?:the|its|their|[\w.-]+'s)\s+(?:(?:raw|text|plain|training|full|whole|console|output)\s+)?"
             r"logs?\b")  # fmt: skip
# A verb of looking right before what it looks at: "open the layouts-nov summary", "pull up the lr-scan results".
LOOKED_AT = r"\b(?:open|show|see|view|read|display|pull up|look at|bring up)\s+(?:me\s+|us\s+)?(?:the\s+)?$"
# A run's launch taken over, with what the sentence changes: "the same as r1", "like r1", "r1's setup with 30 steps".
COPIED = (
    r"\b(?:same|like)\b|'s\s+(?:own\s+)?(?:setup|set-up|settings|configuration|layout|recipe|hyperparameters|hparams)\b"
)


# Words before a count of trials that point at a sweep's trials ("the top 3 trials", "its 12 trials"): read, not run.
TRIALS_OF_A_SWEEP = r"\b(?:the|top|best|worst|first|last|all|its|those|these|each|every|fastest|slowest)"


def ranked(scores: dict[str, float]) -> list[tuple[str, float]]:
    return sorted(scores.items(), key=lambda item: -item[1])
