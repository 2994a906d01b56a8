"""Whether an action the sentence names is asked for now, or only negated, taken back, put off, made conditional,
supposed or asked about.

The tools act now and only now, so the parser acts only on an order for now: "cancel r1". The same words under a
negation ("I don't want to cancel r1"), taken back after ("cancel r1 -- wait, no, don't"), put off ("cancel r1
tomorrow", "I might cancel r1 later"), under a condition ("if the sweep found tp best, train tp=2") or supposed
("hypothetically, cancel r1: would I lose the checkpoint?") are no such order: `held_back` names which, and the parser
asks one question naming the call instead of making it.
"""

from __future__ import annotations

from agent.understanding import regex as re  # `re` with a cache the parser's patterns fit in
from agent.understanding.entities import ANOTHER_INSTEAD, LEFT_OUT, SWITCHES, WAVED_OFF, refused_only_in_variant
from agent.understanding.grammar import SETTING_NAMES
from agent.understanding.intents import DOCS_KEPT, PICKED_UP_WHERE, RESTART_WHERE_STOPPED, SET_GOING

# The words that say each action, wherever they stand in the sentence (an object word for the tools whose verb is
# loose: "open/make/push a PR").
ACTION_WORDS = {
    "run": r"\b(?:(?:re)?train\w*|(?:re)?launch\w*|restart\w*|start\w*|kick\w*\s+off|fir\w+\s+(?:off|up)|"
    rf"(?:re-?)?run(?:s|ning)?\b|tr(?:y|ies|ying)\b|{SET_GOING}\b)",
    "cancel": r"\b(?:cancel\w*|kill\w*|abort\w*|stop\w*|terminat\w*|halt\w*|shut\w*)",
    "bench": r"\b(?:benchmark\w*|bench\b|evaluat\w*|eval\b|score\b)",
    "sweep": r"\b(?:sweep\w*|search\w*|tun(?:e|ing)\b|hyper-?parameter\s+explor\w*)",
    "pr": r"\b(?:pr|prs|pull requests?)\b",
    "docs": r"\b(?:docs?|documentation|readme|document\w*)\b",
    "report": r"\b(?:report\w*|write-?up|writ(?:e|ing)\s+(?:\S+\s+){0,3}?up)\b",
    "resume": rf"\b(?:resum\w*|unpaus\w*|continu\w*|re-?queu\w*|{RESTART_WHERE_STOPPED})|{PICKED_UP_WHERE}",
}

# A negation governing the action a few words on, through words that only carry it ("I don't want to cancel", "we
# shouldn't cancel", "I never asked you to cancel", "don't ever open a PR"): not "I'm not sure I get sweeps, but ...",
# "don't forget to", "why not", "we may or may not want to" (a doubt).
_NEGATION = (r"(?<!why )(?<!\bor )(?<!\bor may )(?<!\bor might )(?<!\bor could )"
             r"\b(?:don'?t|do not|didn'?t|did not|never|shouldn'?t|should not|won'?t|will not|wouldn'?t|"
             r"would not|mustn'?t|must not|no need to|not going to|not|"
             # kept from the action, however politely asked: "might I ask you to refrain from cancelling tp-try",
             # "would you mind holding off on launching" (not "to avoid running out of memory")
             r"refrain(?:ing)? from|abstain(?:ing)? from|avoid(?:ing)?(?!\s+running\s+(?:out|into)\b)|"
             r"hold(?:ing)? off(?: on)?|steer(?:ing)? clear of|"
             r"fewer|"  # less of it, no one call: "would you mind opening fewer PRs?"
             # dismissed: "there's no point cancelling r1", "it's pointless to write a report", "nobody asked you to
             # cancel tp-try", "no one wants a PR"; the assistant told to stop: "stop trying to benchmark r1", "stop
             # asking me to launch runs" ("cancel r1, there's no point keeping it" dismisses no action)
             r"no (?:point|use|sense|reason)(?: (?:in|to))?|pointless(?: to)?|useless to|nobody|no one|noone|"
             # dreaded, not wished: "I'd hate to have a run launched by accident", "I'd hate for you to cancel r1"
             r"(?:hate|dread)\s+(?:to|for|it\s+if)|"
             r"(?:stop|quit) (?:trying|asking|offering|suggesting|pushing|nagging)(?: (?:me|us))?(?: to)?|"
             # ruled out outright: "under no circumstances cancel r1", "not a chance we launch today", "by no means
             # open a PR"; the action named as the thing least wanted: "the last thing we need is another launch"
             r"under no circumstances|in no case|by no means|(?:not a|no|fat) chance|no way|not in a million years|"
             r"the last thing (?:i|we|you|anyone|anybody|they)(?:'d)?\s+(?:\w+\s+)?(?:want|need)s?(?:\s+to\s+do)?"
             r"(?:\s+(?:right\s+)?now)?\s+is(?:\s+(?:another|more|one more|yet another))?|"
             # the words that leave a setting or an output out, said of the action: "negative on cancelling tp-try",
             # "hold the cancel on r1", "omit the cancel of tp-try", "forgo the PR"
             rf"{LEFT_OUT}"
             r")\b")  # fmt: skip
_CARRIER = (
    r"want|wants|wanted|wanna|need|needs|think|ever|asked|ask|told|tell|said|say|you|to|me|us|we|i|really|actually|even|"
    r"get|have|bot|assistant|agent|"  # "nobody should get the bot to cancel r1"
    r"be|been|"  # passive: "tp-try should not be continued from where it stopped"
    r"under|any|circumstances|go|going|gonna|bother|please|yet|plan|like|would|should|the|a|an|it|that|this|"
    r"open|make|create|file|raise|push|submit|write|update|refresh|touch|do|run|start|kick|off|launch|"
    # the verbs that make a write-up or bring the docs into line: "no need to put together a write-up", "don't bring
    # the README into accord with lr-scan", "hold off bringing the docs into line"
    r"put|together|bring|bringing|"
    r"or|nor"  # "don't launch or cancel any runs": the negation carries over to the verb after "or"
)
# (and a courtesy set aside between them: "please don't, if you would be so kind, cancel tp-try")
_COURTESY_ASIDE = (r"(?:\s*,\s*(?:if you (?:would|will|could|please)(?: be so (?:kind|good))?|"
                   r"if you'd be so (?:kind|good)|please|kindly|i beg you|i ask you)\s*,)?")  # fmt: skip
_GAP = rf"{_COURTESY_ASIDE}(?:\s+(?:{_CARRIER})\b){{0,5}}\s+"
# "I don't want a full sweep, just a quick one": the kind corrected, the action asked for; "don't benchmark r1, the
# ddp baseline is the one I want scored": the action asked for on another.
# ("don't cancel any runs, just check whether tp-try finished": another action after "just", nothing corrected.)
_KIND_CORRECTED = (r"[^,;.!?]*[,;:-]*\s*(?:but\s+)?(?:just|only|rather|simply|instead)\b"
                   r"(?!\s+(?:check|see|look|tell|show|read|watch|monitor|confirm|verify|find out|let me know)\b)|"
                   rf"\s+(?:(?:the|that|this|my|our)\s+)?[\w.-]+{ANOTHER_INSTEAD}")  # fmt: skip

# A take-back after the action: "wait, no", "just kidding", "never mind". A correction that goes on to say what
# instead ("no wait, 20 steps") is no take-back: the parser reads the correction.
TAKE_BACK = (r"\b(?:wait,?\s+no\b|(?:no|non|nein|n[aã]o),?\s+(?:wait|don'?t|stop|hold on|hang on|attends|attendez|"
              r"warte|espera|pera)\b|just kidding|kidding|jk\b|"
              # joking, in French ("cancel r1 (je plaisante)", "... je rigole")
              r"plaisant\w*|(?:je |each )?rigole\b|"
              # a pause asked as the whole last sentence: "Cancel r1. Hang on." ("Hang on, cancel tp-try" asks it)
              r"(?:(?<=[.!;]\s)|(?<=[.!;]))(?:hang on|hold on|hold up|wait(?: a (?:sec|second|moment|minute))?|"
              r"one (?:sec|second|moment))(?=\W*$)|"
              r"never\s?mind|nvm\b|scratch that|scrap (?:that|it)\b|forget (?:it|that|i said)|ignore that|"
              r"on second thought|changed my mind|"
              r"actually,?\s+(?:no|don'?t)\b|"
              # a sentence of its own that only says no: "The bot was asked to cancel tp-try. Don't.", "requeue
              # tp-try? It OOMed, so no." (not an answer to a setting asked: "train 10 steps. packing? no.")
              r"(?:(?<=[.!;]\s)|(?<=[.!;]))(?:(?:please|so|then|just)\s+)?(?:don'?t|do not|no)(?=\W*$)|"
              # the user's own answer to the action asked: "cancel r1? Don't.", "resume tp-try? I wouldn't"
              r"(?<=\?\s)(?:(?:please|so|then|just)\s+)?(?:don'?t|do not)(?=\W*$)|"
              r"(?<=\?\s)(?:i|we)(?:'d| would)?\s+(?:(?:would|should|could)(?:n'?t| not)|rather not)\b(?=\W*$)|"
              # ... or a no of their own, then why: "keep the docs in line with it? I'd say no, it's stale"
              r"(?<=\?\s)(?:(?:i|we)(?:'d| would)\s+say|(?:i|we)\s+(?:think|guess|reckon))\s+(?:no|not)\b|"
              # the proposal itself taken back, no run cancelled: "resume tp-try? no, cancel that idea"
              r"\b(?:cancel|scrap|drop|forget|ditch|shelve)\s+(?:that|the|this|my|our)\s+(?:idea|plan|thought|"
              r"suggestion|proposal|notion)\b|"
              r"\bso,?\s+no(?=\W*$))")  # fmt: skip
# What may follow a take-back and only say why ("wait, no, it's almost done, leave it", "no, scrap that, it'll OOM
# again", "wait, no, the other team still needs it"): a clause with a verb of state, with no value, name or action in
# it that would make it a correction ("wait no, it's tp-try I meant", "no wait, with 4 gpus", "no, the long config").
_REASON_ONLY = (r"^[^\d=_/]*\b(?:is|are|was|were|'s|'re|'ll|will|needs?|has|have|had|still|gone|spent|"
                r"over)\b[^\d=_/]*$")  # fmt: skip
_CORRECTION_WORDS = (r"\w-\w|\b(?:instead|meant|rather|use|with|on|make it|keep|packing|compil\w*|checkpointing|"
                     r"warmup|lr|learning rate|layout|fsdp|ddp|tp|config|yaml|gpus?|steps?|trials?)\b")  # fmt: skip
_NOTHING_MORE = (r"^(?:[\s\W]|\b(?:no|don'?t|do not|do nothing|nothing|never ?mind|forget it|leave it|not yet|"
                 r"hold off|please|wait|stop|ok|okay|sorry|actually|that|it|i|changed|my|mind|jk|just|kidding|"
                 r"lol)\b)*$")  # fmt: skip

# Said as supposed, not ordered: "hypothetically, cancel r1 - would I lose the checkpoint?"
# ("I'm supposed to try a run on 2 GPUs" is a duty the user has, asked for now; "I was supposed to", "you're not
# supposed to", "we're supposed to cancel r1 but Priya said to wait" are none: "but with lr 1e-4" only says how.)
SUPPOSED = (r"\b(?:hypothetically|in theory|theoretically|suppose|supposing|imagine|what if|what happens if|"
             r"what would happen if|say we|in principle|let'?s say|let us say|"
             r"(?<!\bi'm )(?<!\bi am )(?<!\bwe're )(?<!\bwe are )supposed|"
             r"supposed to\b[^.;!?]*\bbut(?!\s+(?:with|on|using|at|for|without|not|in|as|only|just|now)\b)|"
             # someone else's say of the duty: "Priya says we're supposed to cancel tp-try"
             r"\b(?:says?|said|thinks?|thought|claims?|told (?:me|us))\s+(?:that\s+)?(?:we|i)(?:'re| are|'m| am)\s+"
             r"supposed|"
             r"assum(?:e|ing)\s+(?:that\s+)?(?:i|we))\b")  # fmt: skip

# The supposed action, then asked for in a sentence of its own that points back at it: "Suppose I took long.yaml and
# ran it on 4 processes. Would you set that going?", "Imagine we launched that on 2 GPUs. Could you start it?" The
# supposition says what to do; the request orders it (never when the request waits on it: "..., could you then",
# "in that case", "if so"; nor where the supposition is an event, not the action: "suppose tp-try hangs. Could you
# cancel it?").
_REQUEST_OPENING = (r"(?:^|(?<=[.!?;])\s+)\W*(?:(?:so|ok(?:ay)?|well|now|right)\W+)?"
                    r"(?:(?:can|could|would|will)\s+you\s+(?:please\s+)?(?:just\s+)?(?:go\s+ahead\s+and\s+)?|"
                    r"please\s+(?:go\s+ahead\s+and\s+)?)")  # fmt: skip
_POINTS_BACK = r"\b(?:that|it|this|them|the same)\b"
_WAITS_ON_SUPPOSITION = r"\b(?:then|in that case|if so|if|when|once|should that|assuming)\b"
_PAST_LAUNCH = r"\b(?:ran|launched|trained|started|kicked\s+off|fired\s+(?:off|up))\b"
# A request that only asks what would have been done, no order: "would you have set it going last week?"
_WOULD_HAVE = r"\b(?:would|could|will|can)\s+you\s+(?:\w+\s+)?have\b|\b(?:would|could)(?:'ve|\s+have)\b"
# A state of the world or an event inside the supposition, beside the supposed action: "suppose the cluster is free
# and we ran it ...", "imagine tp-try crashed and we relaunched it" (the request waits on it, unsettled).
_SUPPOSED_EVENT = (r"\b(?:is|are|was|were|isn'?t|aren'?t|wasn'?t|weren'?t|gets?|got|becomes?|became|frees?\s+up|freed|"
                   r"finish(?:es|ed)|crash(?:es|ed)|fail(?:s|ed)|hangs?|hung|dies|died|ooms|oomed|goes\s+down|went\s+down|"
                   r"comes?\s+back|came\s+back)\b")  # fmt: skip


def _supposed(lowered: str, words: str, command: str) -> bool:
    """A supposition holds the action back (SUPPOSED), unless a sentence after every supposition asks for the
    supposed action itself, pointing back at it (never a cancel, the one action that loses work)."""
    suppositions = list(re.finditer(SUPPOSED, lowered))
    if not suppositions or command == "cancel":
        return bool(suppositions)
    for request in re.finditer(rf"{_REQUEST_OPENING}(?=(?:\S+\s+){{0,2}}?(?:{words}))[^.!?;]*[.!?]?\W*$", lowered):
        supposed = lowered[suppositions[0].start() : request.start()]
        asked = request.group(0)
        if suppositions[-1].start() >= request.start() or re.search(_WAITS_ON_SUPPOSITION, asked):
            continue
        if re.search(_WOULD_HAVE, asked) or re.search(_SUPPOSED_EVENT, supposed):
            continue
        if re.search(_POINTS_BACK, asked) and re.search(rf"{words}|{_PAST_LAUNCH}", supposed):
            return False
    return True


# A question what the action would do, not an order: "what happens if I cancel r1?", "what would cancelling r1 do?",
# "what's the effect of resuming tp-try?". The answer is what the tool does, and the command to type.
_CONSEQUENCE = (r"\bwhat\s+(?:happens|would happen|will happen|happened)\s+(?:if|when|to)\b|"
                r"\bwhat\s+(?:would|does|will|do)\s+(?:\S+\s+){1,6}?(?:do|change|mean)\s*(?:[?.!]|$)|"
                r"\b(?:what(?:'s| is| are)|what would be)\s+the\s+(?:effects?|consequences?|impact|outcome)"
                r"\s+of\b")  # fmt: skip

# Someone else's words quoted, not the user's order: "Jin said 'cancel r1' in chat", "Rui wrote \"benchmark r1\"".
# Also a request quoted ("keeps asking 'might I ask you to open a PR?'") and a speaker's line ("Sam: 'cancel r1'").
_QUOTED = (r"\b(?:said|says|wrote|writes|typed|types|posted|posts|messaged|texted|commented|replied|suggested|"
           r"pinged|tweeted|ask(?:s|ed|ing)|request(?:s|ed|ing))\s*:?\s*(?:\w+\s+)?[\"'\u201c\u2018]"
           r"([^\"\u201d\u2019]+?)[\"'\u201d\u2019]|"
           r"(?:^|[.;!?]\s*)(?!(?:please|do|note|ps|todo|task|order|request|update|plan|me|i|we|you)\b)[a-z][\w-]*\s*:\s*"
           r"[\"\u201c\u2018]([^\"\u201d\u2019]+?)[\"\u201d\u2019]|"
           r"(?:^|[.;!?]\s*)(?!(?:please|do|note|ps|todo|task|order|request|update|plan|me|i|we|you)\b)[a-z][\w-]*\s*:\s*"
           r"'((?:[^'\u201d\u2019]|(?<=\w)'(?=\w))+?)'(?=\W|$)")  # fmt: skip

# The user unsure whether to act at all: "maybe cancel r1? not sure", "perhaps benchmark it? dunno", "train 20 steps
# or not, what do you think?". ("not sure which layout is best, train 20 steps with fsdp" is unsure of a fact, not of
# the order; "cancel r1 whether or not it finished" orders it.)
_DOUBT = (r"\b(?:not (?:so |too |quite |entirely |really |that )?(?:sure|certain)|unsure|dunno|what do you think)\b"
          r"(?!\s+(?:what|which|how|where|why|who|when|about (?:the|which|what))\b)|"
          r"(?<!whether )\bor not\b\W*$|(?<!whether )\bor not\b[^.!;]*\?|\bhmm+\W*$|"
          r"^\W*(?:maybe|perhaps|possibly)\b[^.!;]*\?|\b(may|might|could) or \1 not\b")  # fmt: skip
# The action only weighed, in the clause that names it: "probably should cancel tp-try", "a report on lr-scan could
# be useful", "it might make sense to resume tp-try", "kinda tempted to launch". ("benchmark r1, it could be useful for
# the report" orders it and gives a reason in a clause of its own; "probably should have" looks back.)
_WEIGHED = (r"\bprobably\s+(?:(?:we|i)\s+)?(?:should|ought to|worth|best|better|a good idea)\b(?!\s+have\b)|"
            r"\btempted to\b|\bon the fence\b|"
            r"\b(?:might|could|may)\s+(?:be\s+(?:\w+\s+)?(?:useful|interesting|worth\w*|nice|good|helpful|wise|"
            r"smart|a good idea)|make sense|help)\b|"
            # judged, not ordered: "it would be presumptuous to cancel r1", "it's not rude to cancel r1, but ..."
            r"\b(?:it|that|this)(?:'d|'s|\s+would|\s+is|\s+will)(?:\s+not|n't)?(?:\s+be)?\s+(?:too\s+|a\s+bit\s+|"
            r"very\s+|overly\s+|rather\s+|terribly\s+)?(?:presumptuous|rude|forward|cheeky|impolite|impertinent|"
            r"premature|an\s+imposition)\s+to\b")  # fmt: skip

# Someone's approval, in the words it takes.
_APPROVAL_WORD = r"(?:approval|ok|okay|go-?ahead|sign-?off|blessing|say-?so|consent|permission|agreement)"
# A state of the world checked first, asked of the assistant: "confirm the GPUs are free", "verify r1 finished".
_CHECK_FIRST = (r"(?:confirm|verify|check|make sure|ensure|double-?check|see)(?:s|ed)?\s+"
                r"(?!(?:it|this|that)\W*(?:[,.;:!?]|$))\w")  # fmt: skip

# The assistant's own confirmation asked for, as every launch and write already waits on it: "subject to your
# confirmation", "with your approval", "once you confirm", "if you approve". No condition on the world ("once you
# confirm r1 finished", "subject to your confirmation that the node is back" are checks asked first), nor anyone
# else's say ("pending approval from Ana").
YOUR_APPROVAL = (r"(?:\b(?:subject to|pending|with|upon|on)\s+your\s+(?:confirmation|approval|ok|okay|go-?ahead|"
                 r"sign-?off)|\b(?:once|when|after|if)\s+you(?:'ve| have)?\s+(?:confirm|approve)(?:d|s)?"
                 r"(?:\s+(?:it|this|that))?)(?=\s*(?:[,.;:!?\u2013\u2014]|$))")  # fmt: skip

# Under a condition the user has not settled: "if the sweep found tp best, train ...", "if you think it's worth it,
# start a sweep". Not "see if" (a purpose), a courtesy ("if possible", "if it is not a trouble", "if I'm honest", "if
# that makes sense": the request explained, no condition to check), nor the run's state now, which the tool meets as
# it is ("abort tp-try if it's still hogging the gpus").
# What may follow a courtesy about the asker's manners (CONDITION): the end of the sentence ("cancel r1, if it isn't
# presumptuous."), or an order, a request or a question of the tools' right after its comma or colon ("I'd like, if
# it isn't presumptuous, to start a run").
_ORDER_VERB = (r"launch|start|run|train|relaunch|rerun|re-run|kick\s+off|fire\s+off|spin\s+up|cancel|kill|stop|abort|"
               r"halt|terminate|open|file|write|draft|update|refresh|benchmark|evaluate|eval|resume|continue|sweep|plan|"
               r"show|list|read|tell\s+me|give\s+me|go\s+ahead|proceed")  # fmt: skip
_COURTESY_THEN_ORDER = (r"(?=\s*(?:[.!]\s*$|$|[,:;]\s*(?:(?:please|kindly|then|just|now|to|go\s+ahead\s+and|"
                        r"(?:could|can|would|will)\s+you|i'?d\s+like\s+(?:you\s+)?to|i\s+would\s+like\s+(?:you\s+)?to)"
                        rf"\s+)*(?:{_ORDER_VERB}|what|what'?s|whats|how|how'?s|which|is|are|did|has)\b))")  # fmt: skip
CONDITION = (r"(?<!\bworries )(?<!\bworry )(?<!\bfine )(?<!\bok )(?<!\bokay )(?<!\bsee )(?<!\bcheck )(?<!\bcurious )"
              r"(?<!\bwhether )(?<!\bknow )(?<!\beven )(?<!\bas )"
              # an apology for the asking, no condition: "sorry if this is wrong: ...", "apologies if this is obvious"
              r"(?<!\bsorry )(?<!\bapologies )(?<!\bapologise )(?<!\bapologize )(?<!\bpardon me )"
              r"(?:\b(?:unless|in case|in the event|provided that|on (?:the )?condition(?: that)?|subject to)\b|"
              # another's say or a state still to come, however it is worded: "pending approval from Ana", "barring
              # objections", "contingent on r1 finishing", "in the unlikely case r1 diverges", "when and if the node
              # comes back", "Sam willing" ("pending your approval," alone is the assistant's own: YOUR_APPROVAL)
              # (not the queued state: "cancel the pending runs", "kill anything still pending")
              r"(?<!\bthe )(?<!\ba )(?<!\ball )(?<!\bany )(?<!\bmy )(?<!\bour )(?<!\bis )(?<!\bare )(?<!\bstill )"
              r"\bpending\b(?!\s+(?:runs?|jobs?|sweeps?|trials?|tasks?|ones?|work|queue|state)\b)(?!\s*(?:[.;!?]|$))|"
              r"\b(?:barring|contingent (?:on|upon)|depending (?:on|upon)|when and if|if and when)\b|"
              r"\bin the (?:\w+\s+)?(?:case|event)\b(?!\s+of\b)|"
              r"(?:^|[,;:]\s*)(?!(?:i|we|you|am|are|is)\b)[a-z][\w-]*\s+willing(?=\s*(?:[,.;:!?]|$))|"
              # someone else's approval beside or instead of the assistant's: "with your approval and Dana's", "with
              # Ana's sign-off", "with the approval of the lead"
              rf"\bwith\s+(?:your\s+{_APPROVAL_WORD}\s+and\b|(?!your\b)[\w-]+'s\s+{_APPROVAL_WORD}|(?:the\s+)?"
              rf"{_APPROVAL_WORD}\s+(?:of|from)\b)|"
              # a state of the world the assistant is to confirm first: "once you confirm the GPUs are free", "only if
              # you can verify r1 finished" (not the call itself: "once you confirm," is YOUR_APPROVAL)
              rf"\b(?:once|when|after|as soon as)\s+you(?:'ve| have)?\s+(?:can\s+|could\s+)?{_CHECK_FIRST}|"
              # "dependent on the node coming back, launch ...", "conditional on r1 finishing, benchmark it"
              r"\b(?:dependent|conditional|conditioned)\s+(?:up)?on\b|"
              # "cancel r1 provided the checkpoint is safe", "provided Priya agrees" (not "the config provided by")
              r"\bprovided(?=\s+(?:(?:it|they|we|you|i|he|she|that|this)\b|(?!(?:by|for|to|in|with|here|above|below|"
              r"earlier|as)\b)[\w.-]+\s+(?:[\w.-]+\s+){0,2}?(?:is|are|was|were|has|have|does|do|\w+s|\w+ed)\b))|"
              # "as long as the node is back, train ...", "so long as r1 finished" (not a length compared: "twice as
              # long as r1", "for as long as possible"; nor a courtesy: "as long as it's no trouble")
              r"(?<!\btwice )(?<!\bhalf )(?<!\btimes )(?<!\bfor )(?<!\bjust )(?<!\bonly )(?<!\bnot )"
              r"\b(?:as|so) long as\b(?!\s+(?:possible|needed|necessary|required|usual|before|last time|it takes|"
              # a length compared, not a state ("as long as the default config is still valid" is one)
              r"(?:the|a|an) (?:default|last|first|other|previous|baseline|usual|normal)\b(?![^,.;:!?]*\b(?:is|are|was|"
              r"were|has|have|had|finish\w*|passes|succeeds|completes|agrees?|approves?|diverges|crash\w*|\w{3,}ed)\b)|"
              rf"you (?:can|like|want|wish|need)\b(?!\s+{_CHECK_FIRST})|"
              r"you (?:don'?t|do not) mind(?=\s*(?:[,.;:!?]|$))|"
              r"(?:it|this|that)(?:'s| is) (?:no|not a|not too much) (?:trouble|bother|problem|hassle)|"
              # (not someone else's say: "as long as that's fine with Dana")
              r"(?:that|this|it)(?:'s| is) (?:ok|okay|fine|alright)\b(?!\s+(?:with|for|by|to)\s+(?!you\b)))\b)|"
              # "cancel tp-try, assuming it's still running", "assuming r1 finished, benchmark it"
              r"(?<!\bstop )(?<!\bnot )\bassuming\b|"
              # said before, inverted: "should tp-try still be running, cancel it", "were r1 done, benchmark it"
              r"^\W*(?:should|were|had)\s+(?!(?:we|i|you)\b)[\w.-]+\s+[^,;?.!]*,|"
              # a duty under any condition, the run's state now too: "I'm supposed to cancel tp-try if it's still
              # running" (the state is what the duty waits on, not what the tool meets)
              r"\bsupposed to\b[^.;!?]*\bif\b|"
              r"\b(?:only )?if\b"
              rf"(?!\s+(?:possible|you (?:can|could)\b(?!\s+{_CHECK_FIRST})|"
              r"you (?:don'?t|do not|wouldn'?t|would not) mind|"
              r"that'?s (?:ok|okay|fine|alright)|"
              # the old courtesies that only soften the order: "if you would be so kind", "if you please"
              # (not "if you'd be so kind as to check r1 finished": a check asked first)
              # (not "if you'd be so kind as to ask Priya first": a task asked first; "... as to launch 2 GPUs" is the
              # order itself, which _condition_leaves_order reads with the action's words)
              r"you(?:'d| would| will| could)? be so (?:kind|good)(?!\s+as\s+to\b)|"
              r"you please|you (?:would|will)(?=\s*(?:[.!;,]|$))|"
              r"you(?:'ve| have)?\s+(?:confirm|approve)d?(?:\s+(?:it|this|that))?(?=\s*(?:[,.;:!?]|$))|"
              r"(?:i may(?: (?:say so|ask|add|suggest|be so bold))?|i might|you permit|you allow it|at all possible)"
              r"(?=\s*(?:[,.;:!?]|$))|"
              r"(?:it'?s|it is) all the same to you|(?:that|this)(?:'s| is) (?:agreeable|acceptable)(?: to you)?"
              r"(?=\s*(?:[,.;:!?]|$))|"
              r"that works|(?:that|it|this) makes sense|needed|necessary|any|(?:this|that|it)(?:'s| is) possible|"
              # the request itself left to the planner's judgment: "if that seems appropriate to you", "if this
              # sounds reasonable" (what "that" is, is the request: nothing of the repository to check first)
              r"(?:that|this)\s+(?:seems|sounds)\s+(?:ok|okay|fine|alright|good|right|appropriate|reasonable|"
              r"sensible)(?:\s+to\s+you)?(?!\s+(?:to|for|with)\s)|"  # not "... appropriate to the team lead": their say
              r"i'?m honest|i am honest|"
              r"it'?s not (?:a |too much )?trouble|it is not (?:a |too much )?trouble|"
              r"(?:it|that)(?:'s| is) no (?:trouble|bother|problem|hassle)|"
              # a sarcastic courtesy ("now benchmark that run, if it's not too much to ask"): the order stands
              r"(?:it|that)(?:(?:'s| is) not| isn'?t) (?:too much to ask|asking too much)|"
              # the asker's own manners doubted: "if it isn't presumptuous", "if that's not too forward", "if I'm not
              # being rude" (the order stands: nothing of the repository to check), only where the courtesy stands
              # alone and an order follows it or ends the sentence before it (not "... rude to the others sharing this
              # box", "... an imposition on Marc's queue", "... presumptuous to cancel Marc's run": whose say; not "...
              # too forward and the GPUs are free": a second condition; not "..., ask Marc whether", "..., I'd like to
              # know whether", "..., don't cancel r1": a relay, a question, a negation)
              rf"(?:(?:it|that|this)(?:(?:'s| is) not| isn'?t| wouldn'?t be| would not be) (?:too |overly |terribly )?"
              r"(?:presumptuous|forward|rude|cheeky|impertinent|impolite|an imposition)|"
              r"(?:i'?m|i am) not (?:being )?(?:too |overly )?(?:presumptuous|forward|rude|cheeky|impertinent|"
              rf"impolite)){_COURTESY_THEN_ORDER}|"
              r"you (?:have|got|get) (?:the |a )?(?:time|chance|minute|moment)|"
              r"(?:it|they|that|\S+)(?:'s|'re| is| are) still)\b))")  # fmt: skip

# Conditions that leave the order standing, read with the words around them:
# a courtesy left to the assistant's judgment, last in the sentence ("4 GPUs, 200 steps, if you think that is
# reasonable": no fact to check; not "only if you think it's safe, cancel r1", nor one on a cancel);
JUDGED_REASONABLE = (r"\bif\s+you\s+(?:think|feel|believe|reckon|consider)\s+(?:that|this|it)\s*(?:'s|is|would be|"
                     r"sounds|seems)\s+(?:reasonable|sensible|sound|ok|okay|fine|alright)\W*$")  # fmt: skip
# "if so, proceed" after the user's own question whether the action is allowed ("is evaluating it on the private
# benchmark within policy? ... if so, proceed"): the assistant's policy answers it, and every call goes through it
# (not on a cancel; "if r1 finished, benchmark it" asks no such question);
IF_SO_PROCEED = (r"(?:only\s+)?if\s+(?:so|yes|it is|that'?s the case|allowed|permitted)\W+(?:then\s+)?(?:please\s+)?"
                 r"(?:proceed|go ahead|do it|go for it|carry on)\b\W*(?:please|thanks|thank you)?\W*$")  # fmt: skip
PERMISSION_ASKED = (r"\b(?:within|in line with|per)\s+(?:the\s+|our\s+)?polic(?:y|ies)\b|"
                    r"\b(?:allowed|permitted|acceptable|compliant|approved)\b")  # fmt: skip
# an aside on what the run ordered may do, with the user's own reaction ("... 150 steps. if this OOMs too I'm
# quitting"): no condition on starting it (not "if this works, we'll sweep tomorrow" for the sweep: it names it; not
# on a cancel: "kill r1, if it has a checkpoint we'll keep it").
OUTCOME_ASIDE = (r"(?:only\s+)?if\s+(?:this|it|that)(?:\s+(?:one|run|job|time|thing))?\s+[^.;!?,\d]*?,?\s*"
                 r"(?:then\s+)?\b(?:i|we)(?:'m|'re|'ll|\s+am|\s+are|\s+will|\s+shall)\s+"
                 r"(?!(?:like|want|need|prefer|rather|love|have|ask)\b)[^.;!?\d]*(?:[.;!?]|$)")  # fmt: skip

# a condition on a pull request that the pull request itself meets: it is the review ("provided it goes through the
# normal review channel, open a PR", "as long as this gets reviewed"); not a review of something else first ("provided
# the report was reviewed", "if Dana reviews it first": someone's say, still to come).
MET_BY_A_PR = (r"(?:provided|as long as|so long as|on (?:the )?condition that|if)\s+(?:that\s+)?"
               r"(?:it|this|that|the changes?|everything|all of (?:it|this))\s+"
               r"(?:(?:goes|go|is going|will go|gets routed|is routed)\s+through\s+(?:the\s+|our\s+)?"
               r"(?:(?:normal|usual|standard|proper|regular|formal|official)\s+)?(?:code\s+)?review"
               r"(?:\s+(?:channel|process|path|route|flow|pipeline))?|"
               r"(?:gets|is|will be)\s+(?:properly\s+)?(?:code\s+)?reviewed)"
               r"(?!\s+(?:first|before|by)\b)")  # fmt: skip

# a condition on a launch that names only its own settings and their states: "provided that activation checkpointing
# shall be enabled and packing shall not be used", "as long as the lr is 1e-4" (the launch itself meets it, as its
# settings; not "if"/"only if", which weigh whether to launch at all, nor any word of the world: "provided packing was
# off in r1", "as long as packing fits on the node").
SETTINGS_CONDITION = (r"(?:provided|providing)(?:\s+that)?|on\s+(?:the\s+)?condition\s+that|(?:as|so)\s+long\s+as|"
                      r"with\s+the\s+proviso\s+that")  # fmt: skip
_SETTING_TERM = rf"\b(?:{'|'.join(SWITCHES.values())}|{'|'.join(SETTING_NAMES.values())}|[a-z]+\.[a-z_.]+)\b"
_SETTING_STATE_WORDS = (r"that|the|and|is|are|be|shall|should|must|will|stays?|remains?|kept|set|to|at|of|enabled|"
                        r"disabled|used|on|off|true|false|not|no|turned|switched|applied|activated|left|out|both|also|"
                        r"too|\d[\w.-]*")  # fmt: skip


def _settings_only(said: str) -> bool:
    """The condition at `said` (SETTINGS_CONDITION) names only settings of the launch and their states."""
    opened = re.match(rf"(?:{SETTINGS_CONDITION})\s+((?:[^.;!?]|\.(?=\d))*)", said)  # "0.0002" ends no clause
    if not opened:
        return False
    rest, named = re.subn(_SETTING_TERM, " ", opened.group(1))
    return named > 0 and bool(re.fullmatch(rf"(?:[\s,=:]|\b(?:{_SETTING_STATE_WORDS})\b)*", rest))


# the request itself put as "if you would": thanks said ahead for it ("I'd be grateful if you would open a PR", "I'd
# appreciate it if you launched 20 steps", "it would be lovely if you benchmarked r1") or "kindly" in it ("if you'd
# kindly benchmark r1"): the action is the if-clause's own verb, nothing else to meet first.
GRATEFUL_BEFORE = (r"\b(?:appreciate(?:\s+it)?|grateful|obliged|thankful|great|nice|lovely|helpful|wonderful|ideal|"
                   r"perfect|brilliant)\s*$")  # fmt: skip
ASKED_AS_IF = (r"if\s+you(?:'d|\s+would|\s+could|\s+can|\s+will)?\s+(?P<kindly>please\s+|kindly\s+)?"
               r"(?:(?:open|make|create|file|raise|push|submit|write|update|refresh|do|run|start|kick off)\s+"
               r"(?:(?:a|an|the|up)\s+)?)?(?:{words})")  # fmt: skip


# the old courtesy put on the action itself: "if you'd be so kind as to launch 2 GPUs" (not "... as to ask Priya first,
# launch 2 GPUs": a task asked first).
KIND_AS_TO = (r"if\s+you(?:'d|\s+would|\s+will|\s+could)?\s+be\s+so\s+(?:kind|good)\s+as\s+to\s+(?:please\s+)?"
              r"(?:(?:open|make|create|file|raise|push|submit|write|update|refresh|do|run|start|kick off)\s+"
              r"(?:(?:a|an|the|up)\s+)?)?(?:{words})")  # fmt: skip


# What each tool guarantees by its own description, asked about before an order that assumes the answer ("what does
# cancelling do to r1 - just stop the process, nothing deleted? If so, cancel it", "is a launch going to write
# anything outside runs/? Assuming not: ..."): the claims it makes true (yes) and those it never does (no). An
# assumption the tool meets is no condition to check; one it does not ("does it delete the checkpoint? if so, ...")
# and any about the world ("if r1 finished") still hold the order.
_ON_A_BRANCH = (r"\b(?:only|just)\s+(?:(?:a|the|its own|a feature|a separate|a new)\s+)?(?:feature\s+)?branch(?:es)?\b|"
                r"\bnever\s+(?:(?:to|on|into|touches)\s+)?main\b|\bnot\s+(?:to|on|into)\s+main\b|"
                r"\b(?:a|its own|a feature|a separate|a new)\s+branch\b(?!\s+(?:is|gets|was|will)\b)")  # fmt: skip
_ONTO_MAIN = r"\b(?:push(?:es|ed)?|writes?|commits?|merges?|goes|go)\s+(?:\w+\s+)?(?:to|on|into)\s+main\b"
TOOL_GUARANTEES = {
    "cancel": (
        r"\b(?:just|only|simply)\s+(?:stops?|ends?|kills?|halts?)\b|\bnothing\s+(?:gets?\s+|is\s+|will\s+be\s+)?"
        r"(?:deleted|removed|lost|wiped)\b|\b(?:keeps?|leaves?)\s+(?:the\s+|its\s+)?(?:checkpoints?|logs?|files|"
        r"results|outputs?)\b",
        r"\b(?:delet|remov|wip|los)(?:e|es|ing)\b",
    ),
    "run": (
        r"\b(?:only|just)\s+(?:writes?\s+)?(?:in(?:to|side)?|under|within)\s+runs/|\bstays?\s+(?:in(?:side)?|under|"
        r"within)\s+runs/",
        r"\boutside\s+(?:of\s+)?runs/",
    ),
    "pr": (_ON_A_BRANCH, _ONTO_MAIN),
    "docs": (_ON_A_BRANCH, _ONTO_MAIN),
}
# The answer assumed: yes to the claim asked ("if so", "if that's right"), no to it ("assuming not"), or stated
# ("assuming a branch", "if it only stops the process").
_ASSUMED_YES = (r"(?:(?:only\s+)?if|assuming)\s+(?:so|yes|(?:that|this)(?:'s|\s+is)\s+(?:right|correct|true|so|"
                r"the case))\b")  # fmt: skip
_ASSUMED_NO = r"(?:(?:only\s+)?if|assuming)\s+not\b"
_ASSUMED_STATED = r"(?:(?:only\s+)?if|assuming)\s+(?:that\s+)?(?P<claim>[^,.;:!?]+)"


def _guarantee_assumed(before: str, said: str, command: str) -> bool:
    """The condition at `said` assumes what the tool itself guarantees (TOOL_GUARANTEES), in answer to the user's
    question about that tool right before it."""
    if command not in TOOL_GUARANTEES:
        return False
    yes, no = TOOL_GUARANTEES[command]
    asked = re.findall(r"[^.?!]*\?", before)
    question = asked[-1] if asked and not re.search(r"[.!]", before[before.rfind("?") :]) else ""
    if not question or not re.search(ACTION_WORDS[command], question):
        return False
    if re.match(_ASSUMED_YES, said):
        return bool(re.search(yes, question)) and not re.search(no, question)
    if re.match(_ASSUMED_NO, said):
        return bool(re.search(no, question)) and not re.search(yes, question)
    stated = re.match(_ASSUMED_STATED, said)
    claim = stated.group("claim") if stated else ""
    return bool(re.search(yes, claim)) and not re.search(no, claim) and not re.search(r"\bnot\b|n't\b", claim)


def guarantee_ordered(lowered: str, command: str) -> bool:
    """The action ordered on an assumption its tool itself guarantees, asked about just before (_guarantee_assumed):
    the question is the user's, the order stands."""
    return any(_guarantee_assumed(lowered[: found.start()], lowered[found.start() :], command)
               for found in re.finditer(r"\b(?:only\s+if|if|assuming)\b", lowered))  # fmt: skip


def _asked_as_if(said: str, before: str, words: str) -> bool:
    if re.match(KIND_AS_TO.format(words=words), said):
        return True
    asked = re.match(ASKED_AS_IF.format(words=words), said)
    return bool(asked) and (bool(asked.group("kindly")) or bool(re.search(GRATEFUL_BEFORE, before)))


def conditional(lowered: str, words: str, command: str) -> bool:
    """Some condition (CONDITION) holds the action: one none of the exceptions above leaves standing."""
    return any(not _condition_leaves_order(lowered, found.start(), words, command)
               for found in re.finditer(CONDITION, lowered))  # fmt: skip


# An order said to be carried out now, before a "pending ...": it holds until then ("stop it immediately, pending
# review"), no condition to meet first.
_NOW_FIRST = r"\b(?:immediately|right now|right away|at once|asap|now)\b[^.;!?]*$"


# A wh-question up to its comma, before "if not": "what is documentation, if not ...?", "who are we, if not ...?" (a
# rhetorical question: "if not" says "other than", no condition).
RHETORICAL_OPENING = r"(?:^|[.!?]\s+)\W*(?:what|who|where|why|how)\b[^.!?,;]*,\s*$"


def _condition_leaves_order(lowered: str, start: int, words: str, command: str) -> bool:
    said, before = lowered[start:], lowered[:start]
    # the request itself put as "if you would": no condition, whatever the action ("I'd appreciate it if you cancelled
    # baseline-ddp"); another condition in the sentence still holds it ("..., assuming Sam doesn't object")
    if _asked_as_if(said, before, words):
        return True
    if re.match(r"if\s+not\b", said) and re.search(RHETORICAL_OPENING, before):
        return True  # "what is documentation, if not a record of what we learned?": what it is, no condition
    if re.match(r"pending\b", said) and re.search(_NOW_FIRST, before):
        return True  # "stop it immediately, pending review": stopped while the review is pending
    if _guarantee_assumed(before, said, command):  # "... nothing deleted? If so, cancel it": the tool's own answer
        return True
    if command == "cancel":  # the one action that loses work: any condition on it stays held
        return False
    if (command == "pr" and re.match(MET_BY_A_PR, said)) or re.match(YOUR_APPROVAL, said):
        return True
    if command == "run" and _settings_only(said):  # "provided that packing is off": met by the launch's settings
        return True
    aside = re.match(OUTCOME_ASIDE, said)
    if aside and re.search(r"\w", before) and not re.search(words, aside.group(0)):
        return True
    if re.match(JUDGED_REASONABLE, said):
        return True
    if re.match(IF_SO_PROCEED, said):
        questions = re.findall(r"[^.?!]*\?", before)
        return any(re.search(PERMISSION_ASKED, q) and re.search(words, q) for q in questions)
    return False


_WEEKDAY = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
# A time to come, in the clause that names the action ("cancel r1 in an hour") or alone in its own ("tomorrow morning,
# start a sweep"): the tools act now only. ("we need those GPUs in ten minutes" times something else.)
LATER = (rf"\b(?:later(?:\s+(?:on|today|tonight))?|tonight|tomorrow(?:\s+(?:morning|afternoon|evening|night))?|"
          rf"eventually|someday|some day|at some (?:point|stage)|at a later (?:point|stage|date)|for later|"
          rf"this (?:evening|afternoon|weekend)|"
          rf"(?:over|on|for|at) the weekend|(?:some ?time\s+)?next (?:week|month|time|sprint|quarter|year|release|"
          rf"cycle|iteration|{_WEEKDAY})|sometime(?:\s+(?:soon|later|this (?:week|month|sprint)))?|"
          r"some time (?:soon|later)|"
          rf"(?:on|by|this|next) {_WEEKDAY}|"
          r"after (?:lunch|dinner|breakfast|the weekend|the meeting|work|hours)|at (?:midnight|noon)|"
          r"in (?:an?|one|two|three|a few|a couple of|\d+) (?:more )?(?:hours?|minutes?|mins?|days?|weeks?)|"
          rf"(?:until|till|til) (?:{_WEEKDAY}|tomorrow|later|next week|the weekend)|"
          r"not (?:right )?now|not yet|remind me|schedule (?:it|a|an|the|this|that)\b|"
          r"queue (?:it|a|an|the|this|that)\b)")  # fmt: skip
# Fillers a clause holding only a time may carry: "next, ...", "ok so tomorrow morning, ...".
# ("but don't until Monday": the time the action waits for, "don't" only says not before)
_FILLER = (r"(?:[\s\W]|\b(?:next|then|ok|okay|so|and|but|first|maybe|perhaps|please|morning|evening|night|don'?t|"
           r"do not)\b)*")  # fmt: skip
# The user's own action to come, said of themselves: "I'm going to start a sweep", "we will open a PR", "I might
# cancel r1", "let me think about launching", "I was thinking of launching".
OWN_INTENT = (r"\b(?:i|we)(?:'m| am|'re| are| was| were)?\s+(?:going to|gonna|planning (?:to|on)|"
               r"thinking (?:of|about)|considering|about to)\b|"
               r"\b(?:i|we)\s*(?:'ll|will|might|may|could)\b(?!\s+(?:you|need|have)\b)|"
               r"\blet me (?:think|see|consider)\b|\b(?:i|we) (?:plan|intend|hope) to\b")  # fmt: skip
# The user's own approval of the action promised, as the approval every launch and write waits on: "I'll approve one
# run, capped: 2 GPUs, ...", "we will sign off on a PR for lr-scan" (no action of theirs put off; a time, a wait or a
# condition beside it still holds the action). Only of a launch or a write, which that approval gates: "I'll approve
# one resume: runs/tp-try" promises a resume no gate checks (of a run that may not have been preempted), asked.
OWN_APPROVAL = (r"\b(?:i|we)\s*(?:'ll|will|shall)\s+(?:happily\s+|gladly\s+)?(?:approve|authori[sz]e|allow|permit|"
                r"sanction|green-?light|sign\s+off\s+on)\b"
                r"(?=\s+(?:(?:one|a|an|the|this|that|another|your)\s+)?(?:[\w-]+\s+)?(?:run|launch|training|pr|"
                r"pull\s+request|report|write-?up|docs?|documentation)\b)")  # fmt: skip


def without_own_approval(lowered: str) -> str:
    """`lowered` with the user's own approval promised (OWN_APPROVAL) blanked, so that OWN_INTENT reads no plan of
    theirs in it."""
    return re.sub(OWN_APPROVAL, lambda found: " " * len(found.group(0)), lowered)


# A time clause the action waits on, wherever it stands: "when the GPUs free up", "once the sweep is done".
WAITS_ON = (r"\b(?:after|once|when(?:ever)?|as soon as)\s+(?!you\b)[\w.-]+(?:'s|'re)\s+back\b|"  # "once he's back"
            r"\b(?:hold|wait)(?:\s+(?:off|on|up|it))?\s+(?:until|till|til)\b|"  # "hold until r1 completes, then ..."
            # someone's word waited for: "cancel r1, but wait for Marc" (not "wait for it to finish": the run's own;
            # not "don't wait for CI")
            r"(?<!n't )(?<!\bdont )(?<!\bnot )(?<!\bnever )(?<!\bno need to )(?<!\bwithout )\bwait\s+(?:for|on)\s+"
            r"(?!(?:the|it|its|them|a|an|me|you|this|that|those|these|r\d+)\b)[a-z]+\b"
            r"(?=\s*(?:'s\b|[.;!,]|$|to\s+(?:agree|approve|sign|say|confirm|reply|answer|respond)))|"
            r"\b(?:after|once|when(?:ever)?|as soon as)\s+(?!you\b)(?:(?:the|that|this|my|our|it|they|we|i|r\d|"
             r"[\w.-]+)\s+)(?:\S+\s+){0,3}?(?:(?:is|are|'s|has|have|gets?|becomes?)\s+(?:\w+\s+)?(?:done|finished|"
             r"over|complete\w*|free\w*|idle|available|landed|wrapped\s+up)|finish\w*|complet\w*|end(?:s|ed)?|"
             r"free(?:s|d)?(?:\s+up)?|wraps?\s+up|wrapped\s+up|lands?|landed|"
             # something else to happen first: "when the node comes back", "once the reservation starts", "when CI
             # is green", "once the report is reviewed"
             r"(?:comes?|is|are|gets?)\s+back|(?:is|are|gets?|turns?)\s+(?:\w+\s+)?(?:green|reviewed|approved|merged|"
             r"signed\s+off|ready|fixed|up|written|published)|starts?|begins?|opens?|passes|returns?|recovers?|"
             # someone's say first: "once Dana reviews the report", "when the lead approves"
             r"reviews?|approves?|signs?\s+off|confirms?|agrees?|"
             # ... said as done by then: "once Dana has reviewed it", "after the lead has signed off"
             r"(?:has|have)\s+(?:\w+\s+)?(?:reviewed|approved|signed\s+off|agreed|confirmed|checked|looked))"
             r"\b")  # fmt: skip
# A time clause that says when to tell the user, not when to act: "launch 20 steps and ping me once it finishes".
_NOTICE_WHEN = (r"\b(?:tell|ping|notify|message|text|email|alert|update|let)\s+(?:me|us)(?:\s+know)?\s+"
                r"(?:\w+\s+){0,2}?(?:after|once|when(?:ever)?|as soon as)\b[^.;!?]*")  # fmt: skip


def without_notices(lowered: str) -> str:
    """`lowered` without the time clauses that only say when to tell the user (WAITS_ON reads the rest)."""
    return re.sub(_NOTICE_WHEN, "", lowered)


# Someone's return waited on, said with the contracted verb WAITS_ON misses: "once he's back", "when they're back".
_BACK_AGAIN = r"\b(?:after|once|when(?:ever)?|as soon as)\s+(?:he|she|they|we)(?:'s|'re)\s+back\b"

# A time clause of the user's own before the action: "after I check the logs, benchmark r1".
_OWN_FIRST = r"\b(?:after|once|when|as soon as)\s+(?:i|we)\b(?!\s+(?:can|could|will)\b)"
# (a dot inside a name, "configs/long.yaml next friday", ends no clause)
_CLAUSE = r"(?:[;:!?\u2013\u2014]|\.(?!\w))+|,|\s-+\s|\s--?\s|\b(?:and|but|then|so)\b"

# Asking whether the user may or should act, not asking the assistant to: "can I train the long config on 2 gpus?",
# "should I cancel r1?". ("could you cancel r1?", "can I get a report" ask for it.)
# A suggestion weighed, not made: "perhaps we should cancel tp-try", "maybe I should train longer".
MAY_I = (r"^\W*(?:so,?\s+|and\s+|ok,?\s+)?(?:can|could|may|might|should|shall)\s+i\b"
          r"(?!\s+(?:get|have|please|ask you)\b)|"
          r"\b(?:perhaps|maybe|probably)\s+(?:we|i)\s+(?:should|could|ought to)\b")  # fmt: skip
# Permission asked for something to be started ("may I start a sweep with 6 trials?", "may we launch ...") asks the
# assistant to start it: a request (a cancel so asked is still asked about: it cannot be undone).
MAY_I_START = r"^\W*may\s+(?:i|we)\s+(?:please\s+)?(?:start|launch|kick\s+off|begin|submit|trigger|request)\b"
# ... unless it asks whether the user may at all, not for a start: "may I launch runs on this cluster at all? I'm new"
_ALLOWED_AT_ALL = (
    r"\bat all\b|\b(?:allowed|permitted|have (?:the )?(?:right|permission|access))\b|\b(?:i'?m|i am) new\b"
)

# The action asked as a question, in a message that leaves the decision to later: "Item 4: cancel r1? I'm listing
# options, not deciding now", "Point 5 on the agenda: should we cancel baseline-ddp? Discuss Monday."
_UNDECIDED = (r"\bnot (?:deciding|decided|choosing|committing)\b|\bnot (?:going to |gonna )?decide\b|\bundecided\b|"
              r"\bto be decided\b|\btbd\b|\bon the agenda\b|\b(?:listing|collecting|gathering|noting) (?:down )?"
              r"(?:options|ideas)\b|\bbrainstorm\w*|^\W*discuss\b|(?<=[.!?]\s)discuss\b|\bto discuss\b")  # fmt: skip


# Someone else's question relayed, not an order relayed: "Tom asked whether we should cancel r1", "Ana wonders if
# I ought to train longer" ask as "should we cancel r1?" does ("Tom asked me to cancel r1" is the order itself).
_RELAYED_QUESTION = (r"\b(?:ask(?:s|ed|ing)?|wonder(?:s|ed|ing)?|wants? to know|wanted to know|curious)\s+"
                     r"(?:(?:me|us|you)\s+)?(?:whether|if)\s+(?:we|i|they|he|she|you)\s+(?:should|ought to|shall|"
                     r"need to|must)\b")  # fmt: skip
# A question asked about the action, by the user or relayed, whoever should act: "Priya asked whether benchmarking r1
# is allowed", "Sara wants to know whether it's worth launching", "I wonder whether a 12-trial sweep would help",
# "the question from the standup was whether to cancel it". ("I wonder if you could cancel r1", "Tom asked if you could
# cancel r1" ask for it.)
_QUESTION_ABOUT = (r"\b(?:ask(?:s|ed|ing)?|wants? to know|wanted to know|curious|debat\w+|undecided|"
                   r"wonder(?:s|ed|ing)?)\s+(?:(?:me|us|you|him|her|them)\s+)?(?:whether|if)\b"
                   r"(?P<polite>\s+you\s+(?:could|can|would|might|please)\b)?|"
                   r"\bquestion\b[^.?!;]*?\b(?:is|was|were)\s+whether\b")  # fmt: skip


# Someone else's duty or order told to the user, not the user's own ask: "Dana will cancel r1", "my manager told me
# to cancel r1", "I was told: cancel r1", "the manager said: open a PR". ("please cancel r1, Dana asked for it" orders
# it with a reason; "can someone have the bot cancel r1" asks the assistant.) Said with the action's words right after.
_RELAYED = (r"\b(?:told|asked|instructed|wants?|wanted)\s+(?:me|us)\s+to\s+|"
            r"\b(?:i|we)\s+(?:was|were|have been|'ve been|got)\s+(?:told|asked|instructed)\s*(?::\s*|to\s+)|"
            r"\b(?:said|says|asked|asks|wrote|writes|posted|messaged)\s*:\s*|"
            # another's own promise told: "Dana said she'd put together a write-up", "Marc says he'll do the docs"
            r"\b(?:said|says|promised|promises|offered|offers|told (?:me|us))\s+(?:that\s+)?(?!(?:i|we|you|u)\b)"
            r"[a-z][\w-]*(?:'d|'ll|\s+would|\s+will|\s+is going to|\s+was going to)\s+|"
            # a duty left to no one in particular: "somebody ought to write lr-scan up" (not a request of the assistant)
            r"\b(?:somebody|someone|anybody|anyone)\s+(?:really\s+)?(?:ought to|should|must|needs to|has to)\s+"
            r"(?:really\s+|probably\s+|eventually\s+)?|"
            r"\b(?!(?:i|we|you|u|it|this|that|which|what|who|there|they|then|and|so|please)\b)[a-z][\w-]*\s+"
            r"(?:will|'ll|is going to|is gonna|plans to|is planning to|is about to)\s+|"
            # advice told or read somewhere, not the user's ask: "the README says to launch on 2 GPUs first", "the
            # reviewer suggested opening a PR", "according to notes.md, we should relaunch", "Bob wants a sweep"
            r"\b(?!(?:i|we|you|u)\b)[a-z][\w.-]*\s+(?:(?:says|said|suggests|suggested|recommends|recommended|proposes|"
            r"proposed|advises|advised)\s+(?:(?:that\s+)?(?:we|i|you)\s+(?:should|ought to|must|need to|could)\s+|"
            r"to\s+)|(?:suggests|suggested|recommends|recommended|proposes|proposed)\s+(?=\w+ing\b))|"
            r"\baccording to\s+(?:[^,;.!?]|\.(?=\w))+,?\s+"
            r"(?:(?:we|i|you)\s+(?:should|ought to|must|need to|have to)\s+|"
            r"(?:the\s+)?(?:next\s+)?(?:step|plan|thing)\s+is\s+to\s+)?|"
            r"\b(?!(?:i|we|you|u|it|this|that|which|what|who|there|they|then|and|so|please|nobody|no one)\b)"
            r"[a-z][\w-]*\s+"
            r"(?:wants|asked for|asks for|requested|requests)\s+(?:(?:a|an|another|the|one more|some|their)\s+)?"
            r"(?:[\w-]+\s+){0,2}?")  # fmt: skip
# The user's own go-ahead after the relay makes it their order: "Bob wants a sweep on long.yaml -- please run it for
# him", "Marc told me to cancel it, and I agree, do it".
# (The action itself taken up by "it": not another one asked beside, "Dana will cancel r1, could you open the PR?")
_ENDORSED = (r"\b(?:go ahead|make it so|i agree|(?:please\s+)?do (?:it|that|so)|(?:please|pls|plz)\s+ha?n?dle?\b|"
             r"(?:do|run|start|launch|open|make|cancel|kill|stop|write|update)\s+(?:it|that|this|them)\b)")  # fmt: skip
# A wish about the past, not an order: "would've been nice to cancel r1 earlier", "the PR would have been nice".
_PAST_WISH = (r"\bwould(?:'ve|\s+have)\s+been\s+(?:\w+\s+)?(?:nice|good|great|better|helpful|useful|smart|wise)\b|"
              r"\bshould(?:'ve|\s+have)\s+been\b")  # fmt: skip


# The courtesy the relayed order is put in: "my advisor asked: would you mind cancelling baseline-ddp?".
_COURTESY_OPENER = (r"(?:(?:would|could|can|will)\s+you\s+(?:please\s+|kindly\s+)?"
                    r"(?:mind\s+|be so (?:kind|good) as to\s+)?|"
                    r"(?:might|may|could|can)\s+i\s+ask\s+you\s+to\s+|if you(?:'d| would) be so (?:kind|good),?\s+|"
                    r"please\s+|kindly\s+)?")  # fmt: skip
# Someone else's wish told, the action in it: "Jo would like a run launched on 2 GPUs", "the other team would like
# baseline-ddp killed", "Sam would be grateful if you cancelled r1" ("I would like ..." is the user's own).
_WISHED_BY_ANOTHER = (r"\b(?!(?:i|we|you|u|it|this|that|which|what|who|there|then|and|so|please|also|just|really|still|"
                      r"now|ok|okay|but|hi|hey|one)\b)[a-z][\w-]*\s+(?:would|'d)\s+(?:really\s+|so\s+|much\s+|very\s+)?"
                      r"(?:like|love|appreciate|prefer|be\s+(?:so\s+|very\s+|most\s+|much\s+)?(?:grateful|thankful|"
                      r"obliged|happy|glad))\b[^.;!?]*?")  # fmt: skip


# Something another wants put where the action writes: "Priya wants the lr-scan numbers in the README" (the docs).
_PLACED_BY_ANOTHER = (r"\b(?!(?:i|we|you|u|it|this|that|who|there|and|so|please|also|just)\b)[a-z][\w-]*\s+"
                      r"(?:wants?|wanted|needs?|needed|asked\s+for|expects?)\s+[^.;!?]*?\b(?:in|into|to)\s+"
                      r"(?:the\s+|our\s+)?")  # fmt: skip


# The action in the wish said as a verb ("a run launched", "if you cancelled r1"), not a run's spec named ("Priya
# would like a DDP run on 4 GPUs, 80 steps": the user passing on the launch to make).
_AS_A_VERB = r"(?=\w+(?:ed|ing)\b)|(?<=\byou )|(?<=\bto )"


def _endorsed(after: str) -> bool:
    """The user's own go-ahead after a relay (_ENDORSED), with no "not", "but" or doubt that would unsay it."""
    return bool(re.search(_ENDORSED, after)) and not re.search(r"\b(?:not|no|never|but|unless|if)\b|n't\b", after)


def _relayed(lowered: str, words: str) -> bool:
    """Every mention of the action is someone else's order, duty or wish told (_RELAYED, _WISHED_BY_ANOTHER)."""
    verb = (r"(?:(?:open|mak|creat|fil|rais|push|submit|writ|updat|refresh|bring|put together|do)\w*\s+"
            r"(?:(?:a|an|the|up)\s+)?)?")  # fmt: skip
    ordered = rf"(?:{_RELAYED}){_COURTESY_OPENER}{verb}(?:{words})"
    wished = rf"{_WISHED_BY_ANOTHER}(?:{_AS_A_VERB})(?:{words})[^.;!?,]*"
    told = f"{ordered}|{wished}|{_PLACED_BY_ANOTHER}(?:{words})"
    relayed = list(re.finditer(told, lowered))
    if not relayed or _endorsed(lowered[relayed[-1].end() :]):
        return False
    rest = lowered
    for found in relayed:
        rest = rest[: found.start()] + " " * (found.end() - found.start()) + rest[found.end() :]
    return not re.search(words, rest)


def only_taken_back(lowered: str) -> bool:
    """The message only takes back what came before ("wait no.", "never mind"): nothing in it to act on."""
    return bool(re.search(TAKE_BACK, lowered)) and bool(re.match(_NOTHING_MORE, lowered))


# The user unsure only in which form to name the object ("not sure if I should give you the checkpoint or the run but
# it's r1 anyway"): no doubt about acting, and no condition; the name itself is read where it is said.
_FORM_UNSURE = (r"\b(?:not sure|unsure|dunno|don'?t know)\s+(?:if|whether|which)\s+(?:i\s+should\s+|to\s+)?"
                r"(?:give|pass|send|point|hand)\s+you\s+(?:the\s+)?(?P<form>checkpoint|run|model|path|name|"
                r"folder|directory)\s+or\s+(?:the\s+)?(?!(?P=form)\b)(?:checkpoint|run|model|path|name|folder|"
                r"directory)\b")  # fmt: skip


# The docs left as they are, by the user's own word: "leave the docs as they are", "let the README be" (no update).
DOCS_LEFT = (r"\b(?:leave|let)\s+(?:the\s+|our\s+)?(?:docs|documentation|readme|training\.md)\s+"
             r"(?:as\s+(?:they|it)\s+(?:are|is|stands?)|alone|be|untouched|unchanged)\b")  # fmt: skip
# Whether the docs agree, asked: "tell me whether the docs are in line with lr-scan", "check if the README matches
# it" (their state read, no update).
DOCS_STATE_ASKED = (r"\b(?:whether|if)\s+(?:the\s+|our\s+)?(?:docs|documentation|readme|training\.md)\s+"
                    r"(?:(?:are|is|still)\s+|(?:agree|match|reflect|cover|say|mention)s?\b)")  # fmt: skip
# A write or a resume told as done, not asked for: "we already put together a write-up of it", "the docs were brought
# into line yesterday", "Marc already brought the README into accord", "the docs needed updating, which Dana did",
# "we picked the sweep up where it left off" ("get the docs brought into line" asks for it).
_DONE_VERB = r"(?:brought|updated|written|wrote|done|did|refreshed|synced|put|picked|took|taken|resumed|continued)"
TOLD_DONE = (rf"\balready\s+(?:\w+\s+)?{_DONE_VERB}\b|"
             rf"\b(?:was|were|had been|has been|have been)\s+(?:\w+\s+)?{_DONE_VERB}\b|"
             r"(?<!\bbe )(?<!\bare )(?<!\bis )\bbrought\b|"
             r"\b(?:needed|wanted|required)\s+(?:an?\s+)?(?:updat|refresh|rewrit|sync)\w*|\bwhich\s+[\w-]+\s+did\b|"
             r"\b(?:i|we|he|she|they)\s+(?:picked|took)\b")  # fmt: skip
# The done form asked for, as what the user wants made so: "can we get the README brought up to date", "I want the docs
# updated", "make sure the docs are brought into line".
_DONE_WANTED = (r"\b(?:get|gets|getting|have|want|wants|need|needs|like|make sure|ensure|see)\b"
                r"(?!\s+(?:been|had|already)\b)")  # fmt: skip


# The verbs that would order the action again, in a clause of its own: "the docs were updated last week; update them
# again from lr-scan", "the README was written before lr-scan, so please refresh it".
_ORDERED_AGAIN = {
    "docs": r"\b(?:update|refresh|bring|sync|rewrite|redo|fix)\b",
    "report": r"\b(?:write|put together|do|make|draft)\b",
    "resume": r"\b(?:resume|continue|pick|take|restart)\b",
}


def _told_done(lowered: str, words: str, command: str) -> bool:
    """Every clause that names the action, or orders it with a verb of its own, tells it as done (TOLD_DONE):
    nothing asked for now."""
    clauses = [
        c for c in re.split(rf"{_CLAUSE}", lowered) if re.search(words, c) or re.search(_ORDERED_AGAIN[command], c)
    ]
    return bool(clauses) and all(re.search(TOLD_DONE, c) and not re.search(_DONE_WANTED, c) for c in clauses)


def held_back(lowered: str, command: str, words: str | None = None) -> str | None:
    """Why the action `command` the sentence names is not asked for now, or None when it is: "negated" (or
    dismissed), "taken back", "consequence" (what it would do, asked), "supposed", "quoted" (someone else's words),
    "conditional", "deferred", "doubted" or "asked". `words` say the action where its own (ACTION_WORDS) do not."""
    words = words or ACTION_WORDS.get(command)
    if words is None:
        return None
    lowered = re.sub(_FORM_UNSURE, " ", lowered)
    if _negated(lowered, words, command == "run") or (command == "docs" and re.search(DOCS_KEPT, lowered)):
        return "negated"
    if command == "docs" and re.search(DOCS_LEFT, lowered):
        return "negated"
    if command == "docs" and re.search(DOCS_STATE_ASKED, lowered):
        return "asked"
    if command == "run" and re.search(_DREADED_RUN, lowered):
        return "negated"
    if _taken_back(lowered, words):
        return "taken back"
    if re.search(_CONSEQUENCE, lowered):
        return "consequence"
    if _supposed(lowered, words, command):
        return "supposed"
    if _quoted(lowered, words):
        return "quoted"
    if _dismissed(lowered, words):
        return "taken back"
    if conditional(lowered, words, command):
        return "conditional"
    if _deferred(lowered, words):
        return "deferred"
    if re.search(_DOUBT, lowered) or _weighed(lowered, words):
        return "doubted"
    if _relayed(lowered, words) or re.search(_PAST_WISH, lowered):
        return "asked"
    starts = re.search(MAY_I_START, lowered) and not re.search(_ALLOWED_AT_ALL, lowered)
    may_i = re.search(MAY_I, lowered) and not (command != "cancel" and starts)
    if _undecided(lowered, words):
        return "asked"
    if may_i or re.search(_RELAYED_QUESTION, lowered) or _asked_about(lowered, words):
        return "asked"
    if _whether_action(lowered, words) or _own_wish_asked(lowered, words):
        return "asked"
    if command in _ORDERED_AGAIN and _told_done(lowered, words, command):
        return "asked"
    return None


# A run wished for in the passive that the user asks themselves, not an order: "would I like a run launched on 8
# GPUs?", "we need a training job started on 4 GPUs? I doubt it" (asked, or answered no). ("could we get a run
# started?" and "can I have a run launched?" ask the assistant for it; "I'd like a run launched on 2 GPUs" orders it.)
_RUN_PASSIVE = (r"(?:a|an|another|one more|a new|a fresh)\s+(?:[\w-]+\s+){0,2}?(?:run|training|job)\s+(?:be\s+)?"
                r"(?:launched|started|kicked\s+off|fired\s+off|going|under\s?way|set\s+up)\b")  # fmt: skip
WISHED_RUN = rf"\b(?:like|want|need)\s+{_RUN_PASSIVE}"
_WISHED_RUN = rf"{WISHED_RUN}[^.!?;]*\?"
_OWN_WISH_ASKED = (rf"(?:^|[.!;]\s*)\W*(?:(?:so|and|but|then|hmm+|ok|okay)\W+)*(?:(?:would|do|did|should)\s+(?:i|we)|"
                   rf"(?:i|we)(?:'d|\s+would|\s+really|\s+still|\s+even|\s+actually)?(?=\s+{_WISHED_RUN}\s*"
                   rf"(?:i doubt it|not really|no|nah|nope|hardly|i don'?t think so|probably not)\b))"
                   rf"\s+{_WISHED_RUN}")  # fmt: skip


# A run dreaded in the passive, its noun no negation carries across: "I'd hate to have a training job kicked off".
_DREADED_RUN = rf"\b(?:hate|dread)\s+(?:to\s+(?:have|get|see)|for|it\s+if)\s+{_RUN_PASSIVE}"


def _undecided(lowered: str, words: str) -> bool:
    """The action said only in a question, and the message leaves the decision to later (_UNDECIDED)."""
    if not re.search(_UNDECIDED, lowered):
        return False
    sentences = re.findall(r"[^.!?]*(?:[.!?]+|$)", lowered)
    said = [sentence for sentence in sentences if re.search(words, sentence)]
    return bool(said) and all(sentence.rstrip().endswith("?") for sentence in said)


def _own_wish_asked(lowered: str, words: str) -> bool:
    return any(re.search(words, found.group(0)) for found in re.finditer(_OWN_WISH_ASKED, lowered))


# What the user wants to learn from an action ordered before it: "benchmark r1, I want to know if it's any good".
# Not a question about the action itself: one that names it or weighs it ("I want to know whether benchmarking r1 is
# worth it", "... if it's safe") stays asked.
# The user, right before "want to know", "curious", or no one there ("... for 20 steps? Curious if it even works").
_OWN_ASKER = r"(?:\b(?:i|we)(?:'d| would| really|'m| am)?\s+|(?:^|[.!?,;]\s*)(?:(?:just|really|kinda|so)\s+)?)$"
_WEIGHING = (r"\b(?:worth\w*|should|ought|allowed|ok|okay|safe|wise|good idea|necessary|needed|need to|must|"
             r"sensible|makes? sense|fine|a problem|risky)\b")  # fmt: skip


# A question whose object is the action itself, asked in the clause after it: "we'll need to decide whether to cancel
# tp-try", "could you tell me whether cancelling r1 is safe?" ("cancel r1 and tell me whether it worked" asks for the
# cancel; "tell me if r1 finished" names none).
_WHETHER_ACTION = r"\b(?:decid(?:e|es|ing)|tell (?:me|us)|let (?:me|us) know)\s+(?:on\s+)?(?:whether|if)\b"


def _whether_action(lowered: str, words: str) -> bool:
    for found in re.finditer(_WHETHER_ACTION, lowered):
        asked = re.split(r"[.;!?]", lowered[found.end() :], maxsplit=1)[0]
        decided = found.group(0).startswith("decid")
        if re.search(words, asked) and (decided or re.search(_WEIGHING, asked)):
            return True
    return False


# The user asking "whether you could" themselves ("I wonder if you could", "may I ask whether you could", "just
# wondering if you can"), not someone else (Priya asked me whether you could cancel tp-try": hers, relayed).
_OWN_POLITE_ASKER = (r"(?:\b(?:i|we)(?:'d|'m|'re| would| was| were| am| are| just| really| also)*"
                     r"(?:\s+(?:like|love|want)\s+to)?|\b(?:may|might|can|could)\s+(?:i|we)|\blet\s+me|"
                     r"(?:^|[.!?,;:]\s*)(?:(?:just|so|and)\s+)?)\s*$")  # fmt: skip


def _asked_about(lowered: str, words: str) -> bool:
    """A question asked about the action (_QUESTION_ABOUT), not the user's purpose in ordering it."""
    for found in re.finditer(_QUESTION_ABOUT, lowered):
        if found.group("polite") and re.search(_OWN_POLITE_ASKER, lowered[: found.start()]):
            continue  # "I wonder if you could cancel r1": the user's own ask, put politely
        own = re.match(r"want|curious", found.group(0)) and re.search(_OWN_ASKER, lowered[: found.start()])
        asked = re.split(r"[.;!?]", lowered[found.end() :], maxsplit=1)[0]
        ordered_before = re.search(words, lowered[: found.start()])
        if not (own and ordered_before and not re.search(words, asked) and not re.search(_WEIGHING, asked)):
            return True
    return False


def _weighed(lowered: str, words: str) -> bool:
    """The action only weighed, in its own clause."""
    clauses = re.split(r"[.;:!?,\u2013\u2014]+|\s-+\s|\bbut\b", lowered)
    return any(re.search(_WEIGHED, clause) and re.search(words, clause) for clause in clauses)


def _quoted(lowered: str, words: str) -> bool:
    """The action said only inside someone's quoted words."""
    return any(re.search(words, said) for found in re.finditer(_QUOTED, lowered) for said in found.groups() if said)


# The action named, then waved off or dismissed after it, in its clause: "cancel tp-try: nope", "requeueing
# baseline-ddp is pointless" ("cancel r1, keeping it is pointless" dismisses the keeping).
_DISMISSED_AFTER = (rf"[^?.!;,:]{{0,40}}?{WAVED_OFF}|"
                    # asked to do less of it, no one call asked: "would you mind launching fewer runs?"
                    r"\s+(?:fewer|less)\s+(?:runs|jobs|things|experiments|sweeps|prs|pull requests|often|frequently)\b|"
                    r"[^,?.!;]{0,40}?\b(?:is|are|'s|seems|would be|sounds)\s+"
                    r"(?:pointless|useless|unnecessary|not needed|no use|a waste(?: of time)?)\b|"
                    # ruled out, said of the action as the subject (its object at most between, no "because" or
                    # "since" that would make it another's): "cancelling r1 is not an option", "opening a PR for
                    # layouts-nov is out of the question", "killing tp-try was a mistake last time"
                    r"(?:\s+(?!(?:because|since|as|if|when|and|but|so|while)\b)[\w./-]+){0,4}?\s+"
                    r"(?:is|'s|was|would be)\s+(?:not an option|out of the question|off the table|(?:a )?mistake|"
                    r"not what (?:i|we) (?:want|need|asked for)|"
                    # "cancelling r1 is the last thing I want"
                    r"the last thing (?:i|we|you|anyone|anybody|they)(?:'d)?\s+(?:\w+\s+)?(?:want|need)s?)\b|"
                    # nothing to act on: "let r1 run; cancel nothing", "launch none of them"
                    r"\s+(?:nothing|none)\b(?!\s+but\b)")  # fmt: skip


def _negated(lowered: str, words: str, launch: bool = False) -> bool:
    """Every mention of the action is under a negation (one said plainly elsewhere is asked for: "don't run the
    sweep, train 10 steps"). A launch refused in one variant, then ordered ("do not relaunch with tp. Use FSDP on 2
    GPUs"), is no refusal of the launch (entities.refused_only_in_variant)."""
    negated = [found for found in re.finditer(rf"{_NEGATION}{_GAP}(?:{words})", lowered)
               if not re.match(_KIND_CORRECTED, lowered[found.end() :])
               and not (launch and refused_only_in_variant(lowered, found))]  # fmt: skip
    negated += re.finditer(rf"(?:{words})(?:{_DISMISSED_AFTER})", lowered)
    negated += re.finditer(rf"(?:{words}){_PASSIVE_REFUSED}", lowered)
    if _no_more_of_it(lowered, words):
        return True
    if not negated:
        return False
    rest = lowered
    for found in negated:
        rest = rest[: found.start()] + " " * (found.end() - found.start()) + rest[found.end() :]
    return not re.search(words, rest)


# The action's own noun refused in the passive: "the docs must not be updated with lr-scan", "the README shall not be
# conformed to the sweep", "tp-try's resume should never get started" (the noun stands before its negated verb).
_PASSIVE_REFUSED = (r"(?:\s+[\w'./-]+){0,6}?\s+(?:must|should|shall|will|would|can|could|may|need|is|are|am)"
                    r"(?:n'?t|\s+not|\s+never)\s+(?:be|get|been)\s+\w+")  # fmt: skip


# The action named, then refused again by a pronoun, last in the message: "we ran a sweep of 12 trials last month; I
# don't want another one", "r1 was relaunched twice, no more of that".
# (Not another action's: "cancel tp-try, and don't launch another one" cancels it.)
_NO_MORE = (
    rf"(?:{_NEGATION}{_GAP}(?:another(?:\s+one)?|one more|(?:it|that|one) again)|\bno more of (?:it|that))(?=\W*$)"
)


def _no_more_of_it(lowered: str, words: str) -> bool:
    said = [found.end() for found in re.finditer(words, lowered)]
    others = [other for other in ACTION_WORDS.values() if other != words]
    return bool(said) and any(
        found.start() >= said[-1] and not any(re.search(other, found.group(0)) for other in others)
        for found in re.finditer(_NO_MORE, lowered)
    )


def _taken_back(lowered: str, words: str) -> bool:
    """The action said, then taken back with nothing asked in its place."""
    said = [found.end() for found in re.finditer(words, lowered)]
    if not said:
        return False
    back = [found for found in re.finditer(TAKE_BACK, lowered) if found.start() >= said[-1]]
    if not back:
        return False
    rest = lowered[back[-1].end() :]
    return bool(re.match(_NOTHING_MORE, rest)) or _reason_only(rest)


def _reason_only(rest: str) -> bool:
    """What follows the take-back only says why (_REASON_ONLY): no action, value or name said in its place."""
    if not re.match(_REASON_ONLY, rest) or re.search(_CORRECTION_WORDS, rest):
        return False
    return not any(re.search(words, rest) for words in ACTION_WORDS.values())


def _deferred(lowered: str, words: str) -> bool:
    """The action put off: a time to come in its own clause, or alone in one; a time clause it waits on; the user's
    own say that they will do it."""
    # not the event waited on itself: "open a PR only after the lr-scan report is written" writes the report first
    if any(not re.search(words, found.group(0)) for found in re.finditer(WAITS_ON, without_notices(lowered))):
        return True
    first = re.search(words, lowered)
    if first and re.search(_OWN_FIRST, lowered[: first.start()]):
        return True
    if re.search(_BACK_AGAIN, lowered):  # "once he's back": someone's return, still to come
        return True
    clauses = [clause for clause in re.split(_CLAUSE, lowered) if re.search(r"\w", clause)]
    acting = [bool(re.search(words, clause)) for clause in clauses]
    for at, clause in enumerate(clauses):
        own_intent = re.search(OWN_INTENT, without_own_approval(clause)) and not _now_together(clause, words)
        if acting[at] and (_timed_here(clause) or own_intent):
            return True
        # a time alone in its clause, before the action or right after it ("No PR. Not yet." times the PR)
        before = any(acting[at + 1 :]) and not any(acting[:at])
        if (before or (at and acting[at - 1])) and re.fullmatch(rf"{_FILLER}(?:{LATER}|\blater\b){_FILLER}", clause):
            return True
    return False


# "we'll" with "now" at the action: what the user and the assistant do together now, as a teacher says it ("now
# we'll run a tiny experiment", "we will now launch it"). Not "I'll" (the user's own), nor "we'll ... tomorrow".
_NOW_TOGETHER = r"\bnow,?\s+we(?:'ll| will)\s+(?:{words})|\bwe(?:'ll| will)\s+now\s+(?:{words})"


def _now_together(clause: str, words: str) -> bool:
    return bool(re.search(_NOW_TOGETHER.format(words=words), clause))


# A deadline for what the action yields, not a time to act: "we need numbers by monday", "I want the results by
# friday" (acting now meets it). The thing needed is the action's output, never an action ("I need r1 cancelled by
# monday" stays put off).
_NEEDED_BY = (r"\b(?:need|needs|want|wants|require|requires|expect|expects|must have)\s+(?:the\s+|some\s+|those\s+|"
              r"these\s+|its\s+|their\s+)?(?:numbers|results|figures|data|metrics|answers?|findings)\s+$")  # fmt: skip


def _timed_here(clause: str) -> bool:
    """A time to come in the clause, said of its action: not of a thing it is for ("write up lr-scan for the
    stand-up tomorrow"), nor a deadline for its results ("we need numbers by monday")."""
    for found in re.finditer(LATER, clause):
        before = clause[: found.start()]
        if re.search(r"\bfor\s+(?:(?:the|a|an|our|my|your)\s+)?[\w-]+\s+$", before):
            continue
        if found.group(0).startswith("by ") and re.search(_NEEDED_BY, before):
            continue
        return True
    return False


# The action asked as a question, then answered with a scornful no: "cancel r1? As if.", "kill tp-try? Over my dead
# body.", "launch on 8 GPUs? In your dreams, we have 2.", "a PR for lr-scan? Not today though." (the rest of that
# sentence only says why); or mocked after it wherever it stands: "launch 2 GPUs, psych!", "cancel r1, said no one
# ever"; or before it: "yeah right, open a PR ...". ("cancel r1? yes, do it" answers yes; "yeah, right now" is no
# scorn.)
_SCORNFUL_NO = (r"(?:as if|over my dead body|not a chance|(?:no|fat) chance|no way|yeah,?\s+right|in your dreams|"
                r"dream on|not on your life|not (?:really|likely|today|yet)|i doubt it|nah|nope|hell no)")  # fmt: skip
DISMISSED = (rf"(?<=\?)\s*{_SCORNFUL_NO}\b(?!\s+(?:now|away)\b)[^.!?]*|"
             r"\bpsych(?:e|ed)?\b|\bsaid\s+no\s?(?:one|body),?\s+ever\b|"
             # mocked in a clause after it: "launch 64 GPUs, as if we had the budget" (the means the order lacks;
             # not "as if I had time to babysit it -- just cancel tp-try", said before), "..., what could go wrong"
             r"(?:(?<=,\s)|(?<=;\s)|(?<=\u2014\s)|(?<=\u2013\s)|(?<=\s-\s))as if\s+(?:we|i|you|they|anyone|anybody)\s+"
             r"(?:had|have|got|could afford|were made of|own(?:ed)?)\b|"
             r"(?:(?<=,\s)|(?<=[.!]\s)|(?<=\u2014\s))what could (?:possibly )?go wrong\b|"
             # a sentence of mock praise, alone after it: "cancel r1 right before the deadline. Genius."
             r"(?:(?<=[.!]\s)|(?<=[.!]))(?:(?:just|pure|sheer|real|truly)\s+)?(?:genius|brilliant|smart move|"
             r"real smart)\W*$|"
             # the order as a retort on how well it went before: "Sure, because cancelling r1 worked so well last
             # time" (the action inside it)
             r"^\W*(?:oh\s+)?(?:sure|yeah|right|of course|totally|absolutely),?\s+because\b[^.;!?]*?\b(?:worked|went|"
             r"turned out|ended)\s+(?:so|really|super|just so)\s+(?:well|great|nicely|smoothly)\b[^.;!?]*|"
             r"^\W*yeah\s+right\b(?!\s+(?:now|away|after|then|there|here)\b)")  # fmt: skip


# A tag that leaves the question about the action before it: "a PR would be nice, wouldn't it?", ", shall we?"
_TAG = (r"\s*(?:\w+n't|\w+\s+not|shall|should|will|would|do|does|is|are|can)\s+(?:it|we|you|they|i)\s*|"
        r"\s*(?:right|ok|okay|eh)\s*")  # fmt: skip


def _dismissed(lowered: str, words: str) -> bool:
    """The action scorned (DISMISSED): a scornful answer after its every mention, or a sneer before them all."""
    said = [found.start() for found in re.finditer(words, lowered)]
    return bool(said) and any(
        (found.start() >= said[-1] and _answers_the_action(lowered[: found.start()], words))
        or (found.start() == 0 and (found.end() <= said[0] or found.end() > said[-1]))
        for found in re.finditer(DISMISSED, lowered)
    )


def _answers_the_action(before: str, words: str) -> bool:
    """What the scorn answers is the action asked (its words in the last clause of the question, or a tag after
    them), not a setting asked after it ("train 20 steps, packing? nah, keep it")."""
    if not before.rstrip().endswith("?"):
        return True  # "psych", "said no one ever": no question answered
    question = re.split(r"[.!;]", before.rstrip()[:-1])[-1]
    last = re.split(r"[,;:]", question)[-1]
    return bool(re.search(words, last)) or (bool(re.fullmatch(_TAG, last)) and bool(re.search(words, question)))


# Where the user said not to act, took it back or only supposed it, no yes may act on it (agent.offline runs the
# reading a question ending in "yes / edit" offers on a bare "ok"): the command is named for them to type.
QUESTIONS = {
    "negated": "You said not to do that, so I have done nothing. Do you want it after all? Then say `{call}`.",
    "taken back": "You took that back, so I have done nothing. Do you want it after all? Then say `{call}`.",
    "supposed": "I act only on what you ask for now, so I have done nothing. Do you want it now? Then say `{call}`.",
    "consequence": "{effect} I have done nothing: do you want it now? Then say `{call}`.",
    "quoted": "Those are someone else's words, so I have done nothing. Do you want it now? Then say `{call}`.",
    "conditional": "That depends on something I have not checked, so I have done nothing yet. Do it now: {call}? "
    "yes / edit",
    "deferred": "I can only act now, not later, so I have done nothing. Do it now: {call}? yes / edit",
    "doubted": "You sound unsure, so I have done nothing yet. Do you want me to do it now: {call}? yes / edit",
    "asked": "Do you want me to do it now: {call}? yes / edit",
}

# The tool each action calls: what it does is said from the tool's own description.
TOOL_OF = {
    "run": "launch_run",
    "cancel": "cancel_run",
    "bench": "run_benchmark",
    "sweep": "run_sweep",
    "pr": "open_pull_request",
    "report": "write_report",
    "docs": "update_docs",
    "resume": "resume_job",
}


def held_back_question(why: str, call: str, command: str = "") -> str:
    """The one question asked instead of an action held back: the call it would make, named (and, asked what it
    would do, what it does)."""
    return QUESTIONS[why].format(call=call, effect=effect_of(command))


def offers_yes(question: str) -> bool:
    """The question offers its call for a bare yes (agent.offline runs it on "ok")."""
    return question.rstrip().endswith("yes / edit")


def effect_of(command: str) -> str:
    """What the action's tool does, in its description's first sentence: "That would stop a running or queued run;
    its logs and partial results stay on disk."."""
    from agent import tools  # here, not above: the parser needs the tools only to answer what one does

    tool = getattr(tools, TOOL_OF.get(command, ""), None)
    if tool is None:
        return ""
    first = re.split(r"(?<=\.)\s", " ".join(tool.description.split()), maxsplit=1)[0]
    first = re.sub(r";\s+returns\b[^;.]*", "", first)  # what the call returns is no part of what it does
    first = re.sub(r":\s.*", ".", first)  # nor its list of details
    return f"That would {first[:1].lower()}{first[1:]}"
