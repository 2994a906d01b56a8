"""A sentence made plain before it is read: typos of the words the rules rely on (letters swapped, left out, or every
vowel dropped: "bnchmrk"), number words, hyphenated counts ("a 30-step run"), thousands written with commas or "k",
memory units ("80 gig" is 80GiB), nodes by the GPUs in each ("2x8 a100" is 2 nodes of 8, "8/node", "4n x 8"), a
tool's arguments written as command-line flags ("--nproc 4"), a list's labels ("Step 1:", "2)": no counts), "w/" for
"with", and layouts and packing described in words (agent.understanding.descriptions; HSDP as ways replicated and
sharded).

Names the repository holds (runs, sweeps, files) are never "corrected": they are passed in as known words.
"""

from __future__ import annotations

import difflib
from dataclasses import fields

from agent.understanding import regex as re  # `re` with a cache the parser's patterns fit in
from agent.understanding.descriptions import layouts_in_words, packing_in_words
from agent.understanding.grammar import (
    COMMON,
    LAYOUT_WORDS,
    MANNER,
    OPTIMIZERS,
    PRECISIONS,
    SETTING_NAMES,
    VOCABULARY,
    _one_swap,
)
from trainer.config import DataSpec, TrainSpec
from trainer.hardware import GPU_ALIASES, GPUS

# Number words, composed as people say them ("seventy", "thirty-two", "two hundred", "three point two"): a run of
# them is one number; "one" alone is a number only before what it counts ("the layout one" is no count).
# "zero" is no count here: ZeRO-2 and ZeRO-3 are names of layouts.
_UNIT_WORDS = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen"
UNITS = {w: n for n, w in enumerate([*_UNIT_WORDS.split(), "seventeen", "eighteen", "nineteen"], 1)}
_TEN_WORDS = "twenty thirty forty fifty sixty seventy eighty ninety"
TENS = {w: 10 * n for n, w in enumerate(_TEN_WORDS.split(), 2)}
SCALES = {"hundred": 100, "thousand": 1000}
_WORD = "|".join(sorted([*UNITS, *TENS, *SCALES], key=len, reverse=True))
NUMBER_RUN = re.compile(
    rf"\b(?:an?\s+(?=hundred|thousand))?(?:{_WORD})(?:(?:\s+|-)(?:and\s+)?(?:{_WORD}|point))*\b", re.I
)
# What a lone "one" counts when it is a count ("one gpu", "one e minus three"), not a pronoun ("the fast one").
# Or a setting's value after its name ("micro batch one", "seed one"): dictated, it is that setting at 1.
# (not "the seed one from before": "the ... one" is a pronoun, and "one" must end its item)
ONE_AFTER_SETTING = (r"(?<!\bthe\s)(?<!\bthat\s)(?<!\bthis\s)\b(?:micro[\s_-]?batch(?:\s+size)?|batch\s+size|seed)"
                     r"\s*(?:of|to|at|is|=|:)?\s*$")  # fmt: skip
ONE_ENDS_ITEM = r"\s*(?:$|[,.;!?)]|(?:and|then|please|for|on|with)\b)"
ONE_COUNTS = r"\s*(?:gpus?|cards?|devices?|nodes?|machines?|box|hosts?|process|proc|rank|worker|step|trial|e\s+minus\b)"
# Other languages users mix in (German mostly): the English word the rules read.
FOREIGN = {"knoten": "nodes", "schritte": "steps", "schritten": "steps", "ohne": "without", "mit": "with",
           "kein": "no", "keine": "no", "nicht": "not", "aus": "off", "und": "and", "nur": "only", "planen": "plan",
           "karten": "cards", "grafikkarten": "gpus", "prozesse": "processes", "starte": "start", "starten": "start",
           "trainiere": "train", "trainieren": "train", "sans": "without", "sin": "without", "auf": "on",
           "je": "each", "warte": "wait", "zeig": "show", "zeige": "show", "ergebnisse": "results",
           "abbrechen": "cancel", "stoppe": "stop", "abbrichst": "cancel", "keinen": "no", "keinem": "no",
           "keiner": "no", "nie": "never", "niemals": "never", "nichts": "nothing", "bitte": "please",
           "öffnen": "open", "öffne": "open", "schreib": "write", "schreibe": "write", "schreiben": "write",
           "für": "for", "lauf": "run", "läufe": "runs", "heute": "today", "neuer": "new", "neuen": "new", "einen": "a",
           "erstellen": "create", "fortsetzen": "resume",
           # a report, the configuration and a plan said in German nouns ("the Abschlussbericht", "which Konfiguration")
           "abschlussbericht": "final report", "bericht": "report", "berichte": "reports",
           "konfiguration": "configuration", "konfigurationen": "configurations", "layoutplanung": "layout plan",
           "gegenprobe": "cross-check",
           # Spanish
           "con": "with", "pasos": "steps", "nodos": "nodes", "tarjetas": "cards", "lanza": "launch",
           "lanzar": "launch", "entrena": "train", "entrenar": "train", "espera": "wait", "esperar": "wait",
           "cancela": "cancel", "cancelar": "cancel", "muestra": "show", "resultados": "results",
           "procesos": "processes", "cada": "each", "nodo": "node", "dos": "two", "cuatro": "four", "ocho": "eight",
           # nodes and their counts in Italian and French, which no English word spells ("4 nodi con 8 h100
           # ciascuno", "deux nœuds de 8 H100")
           "nodi": "nodes", "ciascuno": "each", "ciascuna": "each", "deux": "two", "trois": "three",
           "quatre": "four", "huit": "eight",
           "uno": "one", "cuántas": "how many", "cuantas": "how many", "cuántos": "how many", "tiene": "has",
           "esta": "this", "máquina": "machine", "maquina": "machine", "doble": "double",
           # French
           "avec": "with", "étapes": "steps", "noeuds": "nodes", "nœuds": "nodes", "lance": "launch",
           "lancer": "launch", "entraîne": "train", "attends": "wait", "annule": "cancel",
           "résultats": "results",
           # Portuguese, Italian, Dutch, Japanese romaji and Hindi-English: command words whose reading is certain
           "roda": "run", "rodar": "run", "sem": "without", "com": "with",
           # "of them", said of the cards named before ("e com 8 delas?", "und mit 8 davon?")
           "delas": "of them", "deles": "of them", "davon": "of them", "aspetta": "wait", "aspettare": "wait",
           "finisca": "finishes", "schrijf": "write", "rapport": "report", "stappen": "steps",
           "hajimete": "start", "onegaishimasu": "please", "chala": "run", "wale": ""}  # fmt: skip
# German word order around its negations and conditions, put in English order so that a negation never drops and a
# condition is read as one: "Starte den Lauf bitte nicht" (the "nicht" last: don't start it), "Brich tp-try (nicht)
# ab" (the cancel split around its object), "keinen PR öffnen" (the verb last: don't open a PR), "erst, wenn r1 fertig
# ist" (only once r1 is done), "falls r1 fertig ist" (if), "Sam möchte, dass du r1 abbrichst" (would like you to),
# "Ich nicht." (I don't, a sentence of its own).
_GERMAN_LAST = "öffnen|schreiben|starten|abbrechen|trainieren|erstellen|machen|fortsetzen|zeigen|lesen|pushen"
GERMAN_PHRASES = {
    r"\bbrich\s+([\w./-]+)\s+(?:bitte\s+)?nicht\s+ab\b": r"don't cancel \1",
    r"\bbrich\s+([\w./-]+)\s+(?:bitte\s+)?ab\b": r"cancel \1",
    r"\bm[öo]chtes?t?,?\s+dass\s+du\s+([\w./-]+)\s+([^\W\d_]+)\b": r"would like you to \2 \1",
    r"(?<=[.!;]\s)ich\s+(?:aber\s+)?nicht(?=\W*$)": "don't",
    # "den Bericht bitte noch nicht als PR": the report, no PR yet
    r"\s*\bnoch\s+nicht\s+als\b": ", not yet as a", r"\bnoch\s+nicht\b": "not yet",
    r"\bwarte\s+lieber\s+auf\s+([\w./-]*\w)": r"wait for \1 instead",
    r"\bwarte\s+auf\b": "wait for",
    r"\berst,?\s+(?:wenn|sobald|nachdem)\b": "only once", r"\b(?:sobald|nachdem)\b": "once",
    r"\bwenn\b": "if", r"\bfalls\b(?=[^.;!?]*\b(?:ist|sind|haben)\b)": "if",
    r"\bfertig\s+ist\b|\bist\s+fertig\b": "is done",
    # the verb first, "nicht" last in its clause (not a pronoun first: "Ich nicht")
    r"(^|[.!?;]\s+)(?!(?:ich|du|er|sie|es|wir|ihr|das|don't)\b)([^\W\d_]+)\b([^.!?;,]*?)\s+(?:bitte\s+)?nicht"
    r"(?=\s*(?:[.!?;,]|$))": r"\1don't \2\3",
    # ... or right after the verb: "Starte nie einen Lauf" (never start a run), "Starte keinen Lauf" (don't start a run)
    r"(^|[.!?;]\s+)(?!(?:ich|du|er|sie|es|wir|ihr|das|den|die|der)\b)([^\W\d_]+)\s+(?:bitte\s+)?(?:nie|niemals)\b":
    r"\1never \2",
    r"(^|[.!?;]\s+)(?!(?:ich|du|er|sie|es|wir|ihr|das|den|die|der)\b)([^\W\d_]+)\s+(?:bitte\s+)?kein(?:e|en)?\b":
    r"\1don't \2 a",
}  # fmt: skip
# a clause whose verb comes last, after its object: the verb put first, with its negation
GERMAN_VERB_LAST = (r"(^|[,.;!?]\s*)((?:(?:bitte|nur|dann|und|aber)\s+)*)(?:(kein(?:e|en|em|er)?)\s+)?([^,.;!?]*?)"
                    rf"\s+(?:(nichts?)\s+)?({_GERMAN_LAST})(?=\s*(?:[,.;!?]|$))")  # fmt: skip


def _german_verb_first(found: re.Match) -> str:
    start, lead, none, said, negation, verb = found.groups()
    if re.search(r"\bbitte\b", said, flags=re.I):  # "r1 bitte nicht abbrechen": please don't cancel r1
        lead, said = f"{lead}bitte ", re.sub(r"\s*\bbitte\b", "", said, flags=re.I).strip()
    if none:
        return f"{start}{lead}don't {verb} a {said}"
    if negation:
        anything = " anything" if negation.lower() == "nichts" else ""
        return f"{start}{lead}don't {verb}{anything} {said}"
    return f"{start}{lead}{verb} {said}"


def _german(text: str) -> str:
    for pattern, english in GERMAN_PHRASES.items():
        text = re.sub(pattern, english, text, flags=re.I)
    return re.sub(GERMAN_VERB_LAST, _german_verb_first, text, flags=re.I)


# "4 nodes à 8 H200", "2 Knoten à 4 GPUs" (German and French write "à" for "each of"), "4 nodos de 8 H200", "2 nodi
# da 4", "2 Knoten von 8" (Spanish, Portuguese, Italian and German "of"): the GPUs in each node, never the GPUs in all
# (a memory after the "of" is no count: "2 nodos de 80GB" stays as said)
NODES_EACH_OF = (r"\b(\d+|one|two|three|four|eight)\s+(nodes?|machines?|hosts?|servers?|boxes|nodos?|nodi|knoten|"
                 r"n(?:œ|oe)uds?|n[óo]s)\s+(?:à|de|di|da|von|mit)\s+"
                 r"(?=\d+(?![\d.])(?!\s*(?:gi?b|gigs?|g)\b))")  # fmt: skip
# "or" between two counts in Spanish, Italian, Portuguese, French or German ("2 nodos de 8 o 4", "mit 8 oder 16
# H100", "de 8, ou 4 nœuds"): an alternative, which the plan asks about (only between numbers: "o" is also an article).
FOREIGN_OR = r"(?<=\d)(\s*,?\s+)(?:o|ou|oder|oppure)(\s+)(?=\d)"
# "8 h100 por nodo", "8 per nodo", "8 pro Knoten", "8 par nœud": the GPUs in each node, said in another language
# ("pro" before an English "machine" is no German: "16 h200 on the pro machine tier" is a tier's name)
PER_NODE_SAID = (r"\b(?:por|pro|par)\s+(?:nodes?|nodo|n[óo]|knoten|n(?:œ|oe)ud|m[áa]quina)\b|\bper\s+nodo\b|"
                 r"\b(?:por|par)\s+machine\b|\bpro\s+maschine\b")  # fmt: skip
ENGLISH_NODES = r"nodes?|machines?|hosts?|servers?|boxes"


def _nodes_each_of(found: re.Match) -> str:
    """The nodes, then "of" the GPUs in each, in English words ("2 nodi da 8" is 2 nodes of 8)."""
    noun = found.group(2) if re.fullmatch(ENGLISH_NODES, found.group(2), flags=re.I) else "nodes"
    return f"{found.group(1)} {noun} of "


# Portuguese, read word for word where the sentence is Portuguese (two of its own words at least, none an English
# word, so not "um", "os" or "em": PORTUGUESE_MARKS): its function words too ("o", "e", "em"), which elsewhere are
# letters or other languages'.
PORTUGUESE_MARKS = {
    "muda",
    "muito",
    "uma",
    "com",
    "sem",
    "roda",
    "rodar",
    "não",
    "nao",
    "agora",
    "beleza",
    "preciso",
    "precisa",
    "duas",
    "dois",
    "cabe",
    "cabem",
    "só",
    "plano",
    "nada",
    "dos",
    "das",
    "resultados",
    "abre",
    "treinar",
    "executar",
    "saber",
    "favor",
    "também",
    "quero",
    "queria",
    "mostra",
    "passos",
    "desliga",
    "desligar",
    "desligue",
    "desativa",
    "desativar",
    "desative",
    "nunca",
    "apaga",
    "apagar",
    "apague",
    "quantas",
    "quantos",
    "nessa",
    "nesta",
    "nó",
    "nós",
    "dá",
    "num",
    "numa",
    "tá",
    "né",
    "terminar",
    "fala",
    "pra",
    "mesmo",
    "compilar",
    "eu",
    "pediu",
    "pera",
    "deixa",
    "ainda",
}
PORTUGUESE_PHRASES = {# "cancela o r1? não, pera, deixa ele terminar": the no after the action asked, then "wait, let it
                      # finish" (a take-back); "a Ana pediu pra cancelar ..., mas espera eu confirmar": Ana asked me to
                      # ..., only once I confirm (the order waits on the user's own say)
                      r"(?<=[?!.])(\s*)n[ãa]o\s*(?=[,;:!.]|\s+-)": r"\1no",
                      r"\bpera(?:[íi]|\s+a[íi])?\b": "wait",
                      r"\bdeixa\s+(?:ele|ela|isso|o|a)?\s*(?:terminar|acabar|rodar|quiet[oa]|como\s+t[áa]|assim)\b":
                      "leave it",
                      r"\b(?:pediu|pediram|mandou|falou|disse)\s+(?:pra|para)\b": "asked me to",
                      r"\b(?:espera|aguarda)\s+(?:eu|a\s+gente)\s+(?:confirmar|aprovar|liberar|dar\s+o\s+ok)\b":
                      "only once I confirm",
                      r"\b(?:espera|aguarda)\s+(?:o\s+)?meu\s+(?:ok|sinal)\b": "only once I confirm",
                      r"\bdepois\s+que\b": "after", r"\bn[ãa]o\s+faz\s+nada(?:\s+ainda)?\b": "not yet",
                      r"\bn[ãa]o\s+(?=lan[çc]a|cancela|roda|relan[çc]a|abre|muda|troca)": "don't ",
                      r"\bn[ãa]o\s+(?:precisa|precisamos|é\s+preciso)\s+(?:de\s+)?(?:rodar|executar|treinar|lançar)\s+"
                      r"nada\b": "no need to run anything",
                      r"\bsem\s+(?:rodar|executar|treinar)\s+nada\b": "without running anything",
                      r"\bpor\s+favor\b": "please",
                      # "não, muda pra ...": the "no" that corrects what was said before, as English's "no, ..."
                      # ("não" before a verb stays "not": the action it negates is held back)
                      r"^(\W*)n[ãa]o\s*(?=[,;:!.]|\s+-)": r"\1no",
                      r"\b(?:muda|mudar|troca|trocar)\s+(?:pra|para)\b": "change to",
                      # "..., tá?", "..., né?": a tag asking for agreement, as English's ", ok?"; "me fala": tell me
                      r",?\s*\b(?:t[áa]|n[ée])\s*\?": "?", r"\bme\s+(?:fala|avisa|diz)\b": "tell me",
                      # "espera o r1 terminar": wait for r1 to finish (a wait, never a reading of its results)
                      r"\bespera(?:r)?\s+(?=(?:(?:o|a)\s+)?\S+\s+(?:terminar|acabar)\b)": "wait for ",
                      r"\b(?:terminar|acabar)\b": "to finish",
                      # "muito alto": too high, said of a value (criticised, never the one asked for)
                      r"\bmuito\s+(?=(?:alt|baix|grande|pequen)[oa]s?\b)": "too ",
                      # "8 por nó, 4 nós": the GPUs in each node, the nodes ("nós" after a count, never "we")
                      r"\bpor\s+n[óo]\b": "per node", r"\b(\d+)\s+n[óo]s\b": r"\1 nodes",
                      r"\bd[áa]\s+ou\s+n[ãa]o\s+d[áa]\b": "does it fit",
                      # "no configs/long.yaml", "na config": in that file ("no" is "em o"), never a refusal of it
                      r"\bn[oa]\s+(?=configs?/|[\w.-]+\.ya?ml\b)": "in ",
                      # "as de 40GB": the 40GB ones (of the GPUs the conversation is about)
                      r"\b(?:os|as)\s+de\s+(\d+\s*gb)\b": r"the \1 ones"}  # fmt: skip
PORTUGUESE = {"o": "the", "os": "the", "e": "and", "em": "on", "do": "of the", "da": "of the", "dos": "of the",
              "das": "of the", "de": "of", "um": "a", "uma": "a", "com": "with", "sem": "without", "para": "for",
              "se": "if", "só": "only", "não": "not", "nao": "not", "mas": "but", "também": "also", "agora": "now",
              "beleza": "ok", "cara": "", "preciso": "I need to", "precisa": "need to", "quero": "I want",
              "queria": "I would like", "saber": "know", "cabe": "fits", "cabem": "fit", "duas": "2", "dois": "2",
              "três": "3", "quatro": "4", "oito": "8", "plano": "plan", "nada": "nothing", "abre": "open",
              "mostra": "show", "resultados": "results", "passos": "steps", "treinar": "train", "treina": "train",
              "executar": "run", "executa": "run", "roda": "run", "rodar": "run", "placas": "gpus",
              # switches, so that what is turned off is never read as turned on
              "desliga": "turn off", "desligar": "turn off", "desligue": "turn off", "desativa": "disable",
              "desativar": "disable", "desative": "disable", "liga": "turn on", "ligar": "turn on", "ligue": "turn on",
              "ativa": "enable", "ativar": "enable", "ative": "enable", "nunca": "never",
              "mostrar": "show",
              # hardware asked about, and a deletion (refused: never read as a reading of what it deletes)
              "quantas": "how many", "quantos": "how many", "quanto": "how much", "quanta": "how much",
              "tem": "are there", "nessa": "in this", "nesta": "in this", "nesse": "in this", "neste": "in this",
              "memória": "memory", "memoria": "memory", "apaga": "delete", "apagar": "delete", "apague": "delete",
              "deleta": "delete", "deletar": "delete", "exclui": "delete", "excluir": "delete", "exclua": "delete",
              "histórico": "history", "tudo": "everything",
              "muda": "changes", "mudar": "change", "muito": "much",
              "troca": "switch", "trocar": "switch", "troque": "switch",
              # "num rtx 4090 só": on one (em + um), "pra": to, "tá": is, "mesmo número": the same number
              "num": "on one", "numa": "on one", "pra": "to", "tá": "is", "né": "right", "mesmo": "same",
              "mesma": "same", "número": "number", "numero": "number", "alto": "high", "alta": "high",
              "baixo": "low", "baixa": "low", "compilar": "compile", "compilação": "compile", "compilacao": "compile",
              "termina": "finishes", "terminou": "finished", "acabou": "finished", "fala": "tell",
              # a time the action waits on, and the verbs of the actions
              "quando": "when", "nele": "on it", "nela": "on it", "lança": "launch",
              "lançar": "launch", "relança": "relaunch", "cancela": "cancel", "cancelar": "cancel"}  # fmt: skip


def _portuguese(text: str) -> str:
    words = re.findall(r"[^\W\d_]+", text.lower())
    if sum(word in PORTUGUESE_MARKS for word in words) < 2:
        return text
    for pattern, english in PORTUGUESE_PHRASES.items():
        text = re.sub(pattern, english, text, flags=re.I)
    return re.sub(r"(?<![\w'./=-])(" + "|".join(sorted(PORTUGUESE, key=len, reverse=True)) + r")(?![\w'./=-])",
                  lambda found: PORTUGUESE[found.group(1).lower()], text, flags=re.I)  # fmt: skip


# Spanish mixed into an English request ("oye, launch un run ... tensor parallel de 2 y FSDP de 2", "y el de DDP?"):
# read word for word where two of its own words at least say so (SPANISH_MARKS, none an English word nor the
# Italian's or Portuguese's), its function words too ("de", "un"), which elsewhere are other languages'.
SPANISH_MARKS = {"y", "el", "oye", "anoche", "del", "al", "pero", "cómo", "qué", "cuál", "los", "las", "porfa",
                 "hola", "gracias", "ahora", "luego", "también", "reanuda", "reanúdalo", "reanudar", "reanudalo",
                 "lanza", "corre", "córrelo", "mañana", "ayer", "hoy", "bueno", "vale", "lanzo", "lunes",
                 "quieres"}  # fmt: skip
SPANISH_PHRASES = {
    r"\b(?:el|la|los|las)\s+de\s+([\w./-]+)": r"the \1 one",  # "el de DDP": the DDP one
    r"\bpor\s+favor\b": "please",
    r"\bc[óo]mo\s+(?:le\s+)?(?:fue|ha ido|va)\s+(?:a\s+|al\s+|con\s+(?:el\s+)?)?": "how did it go for ",
    # a time to come or a condition, which hold an action back as their English words do (mood)
    r"\bpasado\s+mañana\b": "in two days",
    r"\besta\s+noche\b": "tonight",
    r"\bm[áa]s\s+tarde\b": "later",
    r"\b(?:el|este|el\s+pr[óo]ximo)\s+(lunes|martes|mi[ée]rcoles|jueves|viernes|s[áa]bado|domingo)\b": r"on \1",
    r"\bsi\s+(?:quieres|puedes|te\s+parece|hace\s+falta)\b": "if you want",
}
SPANISH = {"y": "and", "el": "the", "la": "the", "los": "the", "las": "the", "un": "a", "una": "a", "de": "of",
           "del": "of the", "al": "to the", "oye": "hey", "hola": "hi", "pero": "but", "anoche": "last night",
           "ayer": "yesterday", "hoy": "today", "ahora": "now", "gracias": "thanks", "porfa": "please",
           "reanuda": "resume", "reanudar": "resume", "reanúdalo": "resume it", "reanudalo": "resume it",
           "también": "also", "bueno": "ok", "vale": "ok", "mañana": "tomorrow", "luego": "later",
           "mismo": "same", "misma": "same",
           "lunes": "monday", "martes": "tuesday", "miércoles": "wednesday", "miercoles": "wednesday",
           "jueves": "thursday", "viernes": "friday", "sábado": "saturday", "sabado": "saturday", "domingo": "sunday",
           # the speaker's own launch, asked about ("¿lanzo el run?": should I launch it?)
           "lanzo": "should i launch", "entreno": "should i train", "cancelo": "should i cancel",
           "terminó": "finished", "termino": "finished", "acabó": "finished", "evalúa": "evaluate",
           "evalua": "evaluate", "dime": "tell me",
           # the launch before again ("igualito pero con activation checkpointing": the same, with it on)
           "igualito": "the same", "igualita": "the same",
           # what was named before ("¿y con 8 de ellas?": with 8 of them, the cards of the plan before)
           "ellas": "them", "ellos": "them"}  # fmt: skip


def _spanish(text: str) -> str:
    words = re.findall(r"[^\W\d_]+", text.lower())
    if sum(word in SPANISH_MARKS for word in words) < 2:
        return text
    for pattern, english in SPANISH_PHRASES.items():
        text = re.sub(pattern, english, text, flags=re.I)
    return re.sub(r"(?<![\w'./=-])(" + "|".join(sorted(SPANISH, key=len, reverse=True)) + r")(?![\w'./=-])",
                  lambda found: SPANISH[found.group(1).lower()], text, flags=re.I)  # fmt: skip


# Italian mixed into an English request or said whole ("allora, lancia un run su 4 GPU con dp_shard=4", "senza
# packing", "e con 2 nodi invece di uno?"): read word for word where two of its own words at least say so
# (ITALIAN_MARKS, none an English word nor the Spanish's or Portuguese's). "cancella" deletes (it is no cancel), and
# "non", "senza", "niente" stay negations.
ITALIAN_MARKS = {"allora", "lancia", "lanciare", "lancialo", "grazie", "senza", "niente", "nessun", "nessuna", "nodi",
                 "nodo", "invece", "uguale", "stesso", "stessa", "buongiorno", "ciao", "vorrei", "voglio", "nella",
                 "nello", "nel", "dello", "della", "delle", "degli", "dei", "sul", "sulla", "il", "gli", "valuta",
                 "valutare", "passi", "schede", "poi", "dimmi", "quante", "quanti", "sono", "anche", "mostrami",
                 "fammi", "esegui", "avvia", "addestra", "cancella", "elimina", "rimuovi", "spegni", "disattiva",
                 "accendi", "questa", "questo", "macchina", "punteggi", "risultati", "ma", "ogni", "sto", "usare",
                 "vinto", "servono", "bastano", "attimo", "etichette", "esempi", "privato", "annulla", "ferma",
                 "domani", "stasera", "confronta", "documentazione"}  # fmt: skip
ITALIAN_PHRASES = {r"\bnon\s+senza\b": "keep",  # "non senza packing": a double negation keeps it
                   r"\bnon\s+cancellar(?:e|lo)\b": "do not cancel",  # neither a cancel nor a deletion: held back
                   r"\b(pr|pull\s+request|report|run)\s+per\b": r"\1 for",  # "la PR per layouts-nov"
                   r"\bnon\s+(?:è\s+necessario|serve|servono|c'è\s+bisogno\s+di)\b": "no need to",
                   r"\bnon\s+voglio\s+(?=(?:una|la|il|un)\s+(?:pr|pull\s+request)\b)": "do not open ",
                   r"\bnon\s+so\s+se\b": "i am not sure whether", r"\bnon\s+in\b": "not in",
                   r"\bda\s+dove\s+si\s+è\s+fermat[oa]\b": "where it left off",
                   r"\bper\s+favore\b": "please", r"\bva\s+bene\b": "ok", r"\bper\s+ora\b": "for now",
                   r"\bper\s+nodo\b": "per node", r"\bci\s+sono\b": "are there", r"\bfammi\s+vedere\b": "show me",
                   r"\bpiù\s+tardi\b": "later", r"\bbutta\s+via\b": "delete", r"\bsecondo\s+te\b": "do you think",
                   r"\bmi\s+(?:bastano|basta)\b": "i only need", r"\bmi\s+serv(?:e|ono)\b": "i need",
                   r"\bchi\s+ha\s+vinto\b": "which won", r"\bstessa\s+cosa\b": "same", r"\be\s+se\b": "what if",
                   r"\bsto\s+(\w+)ando\b": r"i am \1ing",
                   # an adjective after its noun: "benchmark privato" the private benchmark
                   r"\b(benchmark|branch|test|dati)\s+(privat[oaie]|local[ei])\b": r"\2 \1",
                   # "le etichette del benchmark": the benchmark's labels (refused: they are its secret)
                   r"\betichett[ae]\s+(?:del|dello|della|dei)\s+((?:privat[oaie]\s+)?(?:benchmark|test))\b":
                       r"\1 labels"}  # fmt: skip
ITALIAN = {"allora": "so", "lancia": "launch", "lanciare": "launch", "lancialo": "launch it", "grazie": "thanks",
           "ciao": "hi", "buongiorno": "good morning", "e": "and", "ma": "but", "anche": "also", "poi": "then",
           "un": "a", "una": "a", "uno": "one", "il": "the", "lo": "the", "la": "the", "gli": "the", "le": "the",
           "di": "of", "del": "of the", "dello": "of the", "della": "of the", "dei": "of the", "degli": "of the",
           "delle": "of the", "nel": "in the", "nello": "in the", "nella": "in the", "sul": "on the",
           "sulla": "on the", "su": "on", "con": "with", "se": "if", "invece": "instead", "uguale": "same",
           "stesso": "same", "vorrei": "i would like", "voglio": "i want", "dimmi": "tell me", "mostrami": "show me",
           "mostra": "show", "esegui": "run", "avvia": "start", "addestra": "train", "valuta": "evaluate",
           "valutare": "evaluate", "confronta": "compare", "annulla": "cancel", "ferma": "stop",
           "pianifica": "plan", "piano": "plan", "usa": "use", "usare": "use", "passi": "steps", "nodi": "nodes",
           "nodo": "node", "schede": "gpus", "scheda": "gpu", "ogni": "each", "quante": "how many",
           "quanti": "how many", "questa": "this", "questo": "this", "macchina": "machine", "risultati": "results",
           "punteggi": "scores", "documentazione": "docs", "locale": "local", "locali": "local",
           "privato": "private", "privata": "private", "privati": "private",
           "domani": "tomorrow", "stasera": "tonight", "quale": "which", "solo": "only", "etichette": "labels",
           "esempi": "examples", "controllare": "check", "controlla": "check", "attimo": "moment",
           # negations and switches, so that what is turned off is never read as turned on
           "senza": "without", "niente": "no", "nessun": "no", "nessuna": "no", "non": "do not", "spegni": "turn off",
           "disattiva": "disable", "accendi": "turn on", "attiva": "enable",
           # a deletion (refused: never read as a cancel nor a reading of what it deletes)
           "cancella": "delete", "elimina": "delete", "rimuovi": "delete", "cancellare": "delete",
           "eliminare": "delete", "rimuovere": "delete", "fammi": "let me", "vedere": "see", "tutti": "all",
           "tutte": "all", "cronologia": "history",
           # actions, in the imperative and the infinitive ("non fermare r1": do not stop r1)
           "fermare": "stop", "fermarlo": "stop it", "riprendi": "resume", "riprendere": "resume",
           "riprendilo": "resume it", "apri": "open", "aprire": "open", "aprila": "open it", "è": "is",
           "finito": "finished", "stato": "status"}  # fmt: skip
# Words that make a sentence Italian alone, none an English word ("non-stop" is one word): a negation or an action of
# its own, which must never be left for the English rules to misread ("cancella r1" deletes, "non aprire la PR").
# ("non" before an Italian verb or word only: "a non issue" stays English)
ITALIAN_ALONE = (r"(?<![\w'./=-])(?:niente|senza|domani|cancella|cancellare|elimina|eliminare|ferma|fermare|"
                 r"riprendi|riprendere|apri|aprire|lancia|lanciare|non\s+(?:[a-zàèéìòù]+(?:are|ere|ire|[aei]rl[oaie])|"
                 r"voglio|vorrei|serve|servono|è|so|senza|in))(?![\w'./=-])")  # fmt: skip


def _italian(text: str) -> str:
    return _word_for_word(text, ITALIAN_MARKS, ITALIAN_PHRASES, ITALIAN, ITALIAN_ALONE)


# Hindi in Latin letters mixed with English ("yaar 4 gpu pe fsdp laga ke 50 steps chala do"): read where two of its
# own words at least say so (HINGLISH_MARKS, none an English word: not "do", "is", "pe", "na", "mat"). Hindi puts
# the verb last: a refusal ("compile mat karna": don't compile; "warmup nahi chahiye": no warmup; "band kar do":
# turn off) and a deletion ("tp-try delete kar do") are turned round so that the negation or verb comes first, as
# the rules read them. A "na" after the verb ("list kar do na") only softens it; before it ("na karo") it negates.
HINGLISH_MARKS = {"yaar", "bhai", "ka", "ki", "ke", "ko", "hai", "hain", "kar", "karo", "karna", "karke", "nahi",
                  "nahin", "chahiye", "aur", "bhi", "ek", "baar", "sab", "kya", "batao", "mein", "likh", "kholna",
                  "kholo", "abhi", "hoga", "theek", "chala", "chalao", "kitne", "kitni", "laga", "lagao", "pata",
                  "saaf", "wala", "wale", "dena", "kijiye", "karein", "dikhao", "bata"}  # fmt: skip
_HINGLISH_DO = r"(?:kar\s+do|kardo|karo|kar\s+dena|kijiye|karein|karna(?:\s+hai)?|do|dena)"
_HINGLISH_NOT = r"(?:(?:abhi|bhi|bilkul|kabhi|kabhi\s+bhi)\s+)?(?:mat|na|nahi|nahin)"  # "bilkul mat": not at all
_HINGLISH_ACTIONS = r"(?:launch|run|start|train|cancel|stop|resume|push|merge|submit|compare)"
_NO_NEED = r"(?:koi\s+)?(?:zaroorat|zarurat|jaroorat|jarurat)\s+(?:nahi|nahin)\b(?:\s+hai)?"
# Words that make a sentence Hinglish alone, none an English word: a negation before a verb of doing ("mat karna",
# "na karein"; "na" and "mat" alone are English words), "nahi", "no need" and "kal" (tomorrow), never dropped for want
# of a second mark ("agar r1 khatam ho gaya toh cancel mat karna" is no cancel).
HINGLISH_ALONE = (r"(?<![\w'./=-])(?:nahi|nahin|zaroorat|zarurat|kal|(?:mat|na)\s+(?:kar|karo|karna|karein|kijiye|"
                  r"karte|kare))(?![\w'./=-])")  # fmt: skip
HINGLISH_PHRASES = {
    r"\bis\s+(?=(?:machine|box|node|server|cluster|run|sweep)\b)": "this ",  # "is machine pe": on this machine
    # "kal" is yesterday and tomorrow: yesterday where it says so, else tomorrow (a launch put off is held back)
    r"\bkal\s+se\b": "since yesterday", r"\bkal\s+(?:raat|wala|wale|wali|ka|ki|ke)\b": "yesterday's",
    r"\b(do|karo|dena|batao|dikhao|chalao|kijiye)\s+na\b": r"\1",  # a softener after the verb, no negation
    r"\bsab\s+kuch\b": "everything", r"\bdo\s+(?=gpus?\b|nodes?\b|cards?\b)": "2 ",  # "do gpu": 2 GPUs
    # a deletion refused by "mat" stays refused; an action asked for has its object before the verb
    rf"((?:[\w./-]+\s+)?)(?:(?:ka|ki|ke)\s+[\w-]+\s+)?(delete|remove|hata|mita)\s+{_HINGLISH_NOT}\s+{_HINGLISH_DO}\b":
        r"do not delete \1",
    rf"([\w./-]+)(?:\s+(?:ka|ki|ke)\s+[\w-]+|\s+ko)?\s+(?:delete|remove|hata|mita)\s+{_HINGLISH_DO}\b": r"delete \1",
    # no need of an action ("r1 ko cancel karne ki zaroorat nahi": no need to cancel r1), nor of a PR opened
    rf"((?:[\w./-]+\s+)?)(?:ko\s+)?({_HINGLISH_ACTIONS})\s+karne\s+ki\s+{_NO_NEED}": r"no need to \2 \1",
    rf"([\w./-]+)\s+(?:ka|ki|ke)\s+(pr|pull\s+request)\s+kholne\s+ki\s+{_NO_NEED}": r"no need to open a \2 for \1",
    r"\bdobara\s+shuru\b": "resume", r"\bjahan\s+ruka\s+tha\b": "where it left off",
    rf"((?:[\w./-]+\s+)?)(?:ko\s+)?band\s+{_HINGLISH_NOT}\s+{_HINGLISH_DO}\b": r"do not stop \1",
    r"\bkhatam\s+ho\s+gaya\b": "has finished",
    r"\b(?:nahi|nahin)(?:\s*,?\s*(?:nahi|nahin)\b)+": "no", r"\brehne\s+do\b": "leave it",  # "nahi nahi": no
    r"\bmat\s+bhool(?:na|o|ein|iye)\b": "remember",  # "mat bhoolna": don't forget, no negation of what follows
    # a history or log cleared ("r1 ki history saaf kar do"): deleted, so refused
    rf"([\w./-]+)\s+(?:ka|ki|ke)\s+([\w-]+)\s+saaf\s+{_HINGLISH_DO}\b": r"clean up the \2 of \1",
    # what is refused before what is asked: "PR nahi, sirf report likh do" (not a PR, only a report)
    r"\b(pr|pull\s+request|report)\s+(?:nahi|nahin)\s*,": r"not a \1,",
    r"\breport\s+likh(?:o|\s+do|\s+dena)?\b": "write a report",
    # an action refused ("tp-try ko cancel mat karo": do not cancel tp-try), or asked with its object before it
    rf"((?:[\w./-]+\s+)?)(?:ko\s+)?(?:abhi\s+)?(launch|run|start|train|cancel|stop|resume|push|merge|submit)\s+"
    rf"{_HINGLISH_NOT}\s+"
    rf"{_HINGLISH_DO}\b": r"do not \2 \1",
    rf"([\w./-]+)(?:\s+(?:ka|ki|ke)\s+[\w-]+|\s+ko)?\s+(cancel|stop|resume|compare)\s+{_HINGLISH_DO}\b": r"\2 \1",
    r"\b([\w./-]+)\s+(?:ki|ka)\s+list\s+(?:dikha|dikhao|bata|batao|de)(?:\s+(?:do|dena))?\b": r"list the \1",
    # what is refused or turned off is said before the verb
    rf"\b([\w./-]+)\s+{_HINGLISH_NOT}\s+(?:khol(?:na|o|iye|ein))\b": r"do not open \1",
    rf"\b([\w./-]+)\s+{_HINGLISH_NOT}\s+(?:chala(?:na|o|iye|ein)?)\b": r"do not run \1",
    rf"\b([\w./-]+)\s+{_HINGLISH_NOT}\s+(?:(?:laga|rakh)(?:na|o|iye|ein)?|kar(?:na|o|iye|ein)|use\s+{_HINGLISH_DO})\b":
        r"without \1",
    r"\b([\w./-]+)\s+(?:bhi\s+)?(?:nahi|nahin|mat)\s+(?:chahiye|chaiye)\b": r"without \1",
    rf"\bband\s+{_HINGLISH_DO}\b": "off",
    r"\b(on|off)\s+kar\s+ke\b": r"\1 and",
    rf"\b(on|off)\s+{_HINGLISH_DO}\b": r"\1",
    # "har node pe 8 h200": 8 of them in each node
    r"\bhar\s+(node|machine|box|host)\s+(?:pe|par|mein)\s+(\d+(?:\s+[\w.-]+)?)": r"\2 per \1",
    # a postposition after its noun: "4 gpu pe" on 4 GPUs, "docs mein" in the docs
    r"\b((?:\d+|this|local)\s+)?([\w./-]+)\s+(?:pe|par)\b": r"on \1\2",
    r"\b((?:\d+|this)\s+)?([\w./-]+)\s+mein\b": r"in \1\2",
    r"\b(?:laga|kar)\s*ke\b": "and",
    # an English verb and "kar do" (do it), or a Hindi verb and "do" (give): the verb
    r"\b(chala|likh|bata|dikha|de)\s+(?:do|dena)\b": r"\1",
    r"\b([a-z]+)\s+(?:kar\s+do|kardo|karo|kar\s+dena|kijiye|karein)\b": r"\1",
    r"\bpata\s+nahi[n]?\b": "who knows",
    r"\btheek\s+hai\b": "ok",
    r"\bek\s+baar\b": "",
    r"\bfit\s+hoga\s+kya\b": "will it fit",
}  # fmt: skip
HINGLISH = {"yaar": "", "bhai": "", "ji": "", "ka": "", "ki": "", "ke": "", "ko": "", "hai": "", "hain": "",
            "kar": "", "karo": "", "karna": "", "bas": "just", "aur": "and", "bhi": "also", "sab": "all",
            "kya": "", "batao": "tell me", "bata": "tell me", "likh": "write", "abhi": "now", "ab": "now",
            "kitne": "how many", "kitni": "how many", "chalao": "run", "chala": "run", "dikhao": "show",
            "dikha": "show", "kal": "tomorrow", "pade": "lying", "kachra": "junk",
            "saaf": "clean up", "nahi": "no", "nahin": "no", "mat": "do not", "chahiye": "needed",
            "wala": "", "wale": "", "har": "each", "agar": "if", "toh": "then", "sirf": "only",
            "subah": "morning", "shaam": "evening"}  # fmt: skip


# French mixed into a request ("Et avec seq_len 4096 en plus?", "lance le run sur 2 gpus"): read word for word where
# two of its own words at least say so (FRENCH_MARKS, none an English word), or where it negates ("ne lance pas": its
# "ne ... pas" around the verb is never dropped, so that the action it negates is held back).
FRENCH_MARKS = {"et", "avec", "pour", "sur", "aussi", "quelle", "quel", "meilleure", "meilleur", "les", "des",
                "du", "une", "en", "puis", "mais", "sans", "lance", "lancer", "relance", "encore", "merci",
                "fois", "aucun", "aucune", "seulement", "maintenant", "aimerait", "stp", "svp", "liste"}  # fmt: skip
_FRENCH_VERBS = r"lance|lancer|relance|annule|annuler|attends|entraîne|arrête|stoppe"  # its command words
FRENCH_PHRASES = {
    # refusals, and "ne ... que si" (only if), read before "ne ... pas": "pas question de lancer" (no way I want it
    # launched), "évite de lancer" (avoid launching), "je ne veux pas que tu annules" (I don't want you to cancel),
    # "tu ne vas pas annuler r1" (you're not going to), "ne relance le tp-try que si r1 est fini"
    r"\bpas\s+question\s+(?:de\s+|d')": "do not ", r"\b[ée]vite[sz]?\s+(?:de\s+|d')": "do not ",
    r"\b(?:il\s+)?ne\s+faut\s+pas\s+": "you must not ", r"\bne\s+sais\s+pas\s+si\b": "am not sure whether",
    # "je n'ai pas dit de lancer, j'ai dit de planifier": I didn't say to launch, I said to plan
    r"\bn'ai\s+pas\s+dit\s+(?:de\s+|d')": "didn't say to ", r"\bj'ai\s+dit\s+(?:de\s+|d')": "I said to ",
    r"\bne\s+(?:veux|voudrais|veut|voulons)\s+pas\s+que\s+(?:tu|vous)\s+": "don't want you to ",
    r"\b(?:tu|vous)\s+ne\s+(?:vas|allez)\s+pas\s+": "you are not going to ",
    r"\bne\s+([a-zàâçéèêëîïôûù]+)\s+([^.;!?]*?)\bque\s+si\b": r"\1 \2only if",
    r"\b(?:seulement|uniquement)\s+si\b": "only if", r"\bune\s+fois\s+que\b": "once",
    r"\best\s+(?:fini|termin[ée])e?\b": "is finished",
    # "ne lance pas le run", "n'annule pas", "ne le reprends pas", "ne lance plus": don't (the verb after it read by
    # FOREIGN's table); "jamais" never, "rien" nothing, "ne pas lancer" not to launch, "n'ouvre pas de PR" don't open
    # any PR
    r"\bne\s+(?:l[ea]s?\s+|l')?([a-zàâçéèêëîïôûù]+)\s+rien\b": r"don't \1 anything",
    r"\bn'([a-zàâçéèêëîïôûù]+)\s+rien\b": r"don't \1 anything",
    r"\bne\s+(?:l[ea]s?\s+|l')?([a-zàâçéèêëîïôûù]+)\s+jamais\b": r"never \1",
    r"\bn'([a-zàâçéèêëîïôûù]+)\s+jamais\b": r"never \1",
    r"\bne\s+(?:l[ea]s?\s+|l')?([a-zàâçéèêëîïôûù]+)\s+(?:pas|plus)\s+(?:de\s+|d')": r"don't \1 any ",
    r"\bn'([a-zàâçéèêëîïôûù]+)\s+(?:pas|plus)\s+(?:de\s+|d')": r"don't \1 any ",
    r"\bne\s+(?:l[ea]s?\s+|l')?([a-zàâçéèêëîïôûù]+)\s+(?:pas|plus)\b": r"don't \1",
    r"\bn'([a-zàâçéèêëîïôûù]+)\s+(?:pas|plus)\b": r"don't \1",
    r"\bne\s+pas\s+": "not to ",
    # "pas maintenant, plus tard": not now, later (put off); "X aimerait que tu ...": X would like you to ...; "attends
    # mon ok": only once I approve (the order waits on the user's own say)
    r"\bpas\s+maintenant\b": "not now", r"\bplus\s+tard\b": "later",
    r"\b(?:aimerait|voudrait|aimerais|voudrais)\s+que\s+(?:tu|vous)\s+": "would like you to ",
    r"\battend(?:s|ez)\s+(?:mon|notre)\s+(?:ok|okay|accord|feu\s+vert|go|signal)\b": "only once I approve",
    r"\baucune?\s+": "no ", r"\bjamais\s+(?:de\s+|d')": "no ", r"\bni\s+([^\s,.;!?]+)\s+ni\s+": r"no \1 and no ",
    # "lance pas le run", "le lance pas", as French is spoken, without its "ne": don't launch (it)
    rf"(?:\bl[ea]s?\s+|\bl')?\b({_FRENCH_VERBS})\s+pas\b": r"don't \1",
    r"\bpas\s+(?:de|d')\s*": "no ",  # "pas de compile": no compile
    r"\ben\s+plus\b": "too", r"\bet\s+si\b": "what if", r"\bla\s+m[êe]me\s+chose\b": "the same",
    r"\bquelle\s+est\b|\bquel\s+est\b": "what is",
}  # fmt: skip
FRENCH = {"et": "and", "avec": "with", "pour": "for", "sur": "on", "aussi": "too", "les": "the", "le": "the",
          "la": "the", "des": "of the", "du": "of the", "de": "of", "une": "a", "un": "a", "en": "in", "puis": "then",
          "mais": "but", "sans": "without", "encore": "again", "merci": "thanks", "meilleure": "best",
          "meilleur": "best", "disposition": "layout", "relance": "relaunch",
          # command words conjugated ("que tu lances", "n'annule jamais"), and the words of a condition or a time
          "annuler": "cancel", "annules": "cancel", "lances": "launch", "relancer": "relaunch", "relances": "relaunch",
          "ouvre": "open", "ouvrir": "open", "écris": "write", "écris-le": "write it", "écrire": "write",
          "reprends": "resume", "reprendre": "resume", "touche": "touch", "seulement": "only", "si": "if",
          "est": "is", "fini": "finished", "finie": "finished", "terminé": "finished", "je": "I", "tu": "you",
          "rapport": "report", "rien": "nothing", "aujourd'hui": "today", "maintenant": "now",
          "lancement": "launch", "non plus": "either", "préfère": "prefer", "planifier": "plan",
          # "liste des runs stp": list the runs, please
          "liste": "list", "lister": "list", "stp": "please", "svp": "please"}  # fmt: skip
# its negations and refusals, never dropped for want of a second mark ("n'annule jamais le r1", "pas question de ...",
# "pas de warmup": no warmup)
FRENCH_ALONE = (rf"(?<![\w'./=-])(?:ne\s+(?:l[ea]s?\s+|l')?\S+\s+(?:pas|jamais|rien|plus)|"
                rf"n'\S+\s+(?:pas|jamais|rien|plus)|ne\s+pas\s+\S+|pas\s+question|[ée]vite[sz]?\s+d(?:e\s|')\S+|"
                rf"jamais\s+d(?:e\s|')\S+|pas\s+d(?:e\s|')\S+|"
                rf"que\s+si|ni\s+\S+\s+ni|(?:{_FRENCH_VERBS})\s+pas)(?![\w'./=-])")  # fmt: skip


def _french(text: str) -> str:
    return _word_for_word(text, FRENCH_MARKS, FRENCH_PHRASES, FRENCH, FRENCH_ALONE)


# Jamaican Patois, word for word where two of its marks are said ("nuh pack di data", "pon di long config"): "nuh" is
# "don't" before a verb and "no" before a setting that is turned off by its 0 ("nuh warmup neither": no warmup).
PATOIS_MARKS = {"nuh", "di", "dis", "dat", "mi", "fi", "pon", "weh", "waan", "yuh", "cyaan", "wid", "inna", "seh"}
PATOIS_PHRASES = {r"\bnuh\s+(?=(?:di\s+)?(?:warm-?up|weight\s+decay|grad(?:ient)?\s+clip|clipping)\b)": "no "}
PATOIS = {"nuh": "don't", "di": "the", "dis": "this", "dat": "that", "mi": "me", "fi": "to", "jus": "just", "pon": "on",
          "weh": "that", "waan": "want", "yuh": "you", "cyaan": "can't", "wid": "with", "inna": "in", "seh": "say",
          "neither": "either"}  # fmt: skip
# its negation, never dropped for want of a second mark ("nuh compile it")
PATOIS_ALONE = r"(?<![\w'./=-])(?:nuh|cyaan)\s+[a-z]"


def _patois(text: str) -> str:
    return _word_for_word(text, PATOIS_MARKS, PATOIS_PHRASES, PATOIS, PATOIS_ALONE)


# Archaic English, word for word where two of its marks are said ("Prithee, recount unto me every run that hath been",
# "Launch thou a run ..., I beseech thee"): the plain words ("recount" is to tell them over: list).
ARCHAIC_MARKS = {"prithee", "thou", "thee", "thy", "thine", "ye", "hath", "doth", "dost", "wilt", "shalt", "unto",
                 "beseech", "hither", "whence", "mayhap", "perchance", "forsooth", "ere"}  # fmt: skip
ARCHAIC_PHRASES = {r"[,;]?\s*i\s+(?:beseech|pray)\s+(?:thee|you)\b": ", please", r"\bdid\s+fare\b": "did",
                   r"\brecount\s+(?:unto\s+|to\s+)?me\b": "list", r"\bi\s+prithee\b": "please"}  # fmt: skip
ARCHAIC = {"prithee": "please", "thou": "you", "thee": "you", "thy": "your", "thine": "your", "ye": "you",
           "hath": "has", "doth": "does", "dost": "do", "wilt": "will", "shalt": "shall", "unto": "to",
           "recount": "list", "hither": "here", "mayhap": "maybe", "perchance": "maybe", "ere": "before",
           "upon": "on"}  # fmt: skip
ARCHAIC_ALONE = r"(?!)"  # none of its words acts or negates alone


def _archaic(text: str) -> str:
    return _word_for_word(text, ARCHAIC_MARKS, ARCHAIC_PHRASES, ARCHAIC, ARCHAIC_ALONE)


# A value given with "let ... be": "let the learning rate be 0.0005", "let the seed be 7" (the setting set to it; "let
# it be 4 gpus" is left to the rules that read counts).
LET_BE = r"\blet\s+((?:the\s+)?(?!it\b|them\b)[a-z][a-z _-]{0,25}?)\s+be\s+(?=[\d.])"
# A sequence length said as the sequences' size alone: "with sequences of 4096", "sequences of 8k" (its tokens
# unsaid; a count of something else after it is that count's).
SEQUENCES_OF = (
    r"\b(sequences?\s+of\s+(?:length\s+)?)(\d{3,6}|\d+k)\b"
    r"(?!\s*(?:tokens?|gpus?|nodes?|steps?|devices?|trials?|samples?|examples?|rows?|each|per)\b)"
)


def _hinglish(text: str, known: set[str] | frozenset[str] = frozenset()) -> str:
    # "band kar do" stops a run of the repository's ("r1 ko band kar do"), elsewhere it turns a setting off
    names = "|".join(re.escape(name) for name in sorted(known, key=len, reverse=True))
    stopped = {rf"(?<![\w./-])((?:runs/)?(?:{names}))\s+(?:ko\s+)?band\s+{_HINGLISH_DO}\b": r"stop \1"} if names else {}
    return _word_for_word(text, HINGLISH_MARKS, {**stopped, **HINGLISH_PHRASES}, HINGLISH, HINGLISH_ALONE)


def _word_for_word(text: str, marks: set[str], phrases: dict[str, str], words: dict[str, str], alone: str) -> str:
    """`text` read word for word where two of its words at least are `marks` of its language, or where it says
    `alone` (a negation or action of the language's own, never dropped for want of a second mark); else as it is."""
    words_said = re.findall(r"(?<![\w'./=-])[^\W\d_]+(?![\w'./=-])", text.lower())  # not "ka" of "ka-boom"
    if sum(word in marks for word in words_said) < 2 and not re.search(alone, text, flags=re.I):
        return text
    for pattern, english in phrases.items():
        text = re.sub(pattern, english, text, flags=re.I)
    text = re.sub(r"(?<![\w'./=-])(" + "|".join(sorted(words, key=len, reverse=True)) + r")(?![\w'./=-])",
                  lambda found: words[found.group(1).lower()], text, flags=re.I)  # fmt: skip
    return re.sub(r"[ \t]{2,}", " ", text)


# Function words of languages the rules do not read (Portuguese, Italian, Dutch, Japanese romaji, Hindi-English),
# none of them an English word: a sentence made mostly of them is one the parser only partly understood.
_OTHER_LANGUAGE = """os um uma em da dos das por favor nao não para mostra abre che il dei su mi fai un piano
niente solo poi dimmi ci sono nel quali girare een het van voor zitten er deze laat zien wo ga kudasai misete kekka
dore ichiban yokatta mai pe ek ka ki ke hai hain kya mein liye batao yaar bhai kaunse karo kuch mat de e o
mujhe naya saath woh phir thoda kaun tha bada kaisa kaise"""
OTHER_LANGUAGE = set(_OTHER_LANGUAGE.split())
_ENGLISH_FUNCTION = """the a an to of in on for with without is are be it that this and or my our please what
which how can do does should would i we you me us"""
ENGLISH_FUNCTION = set(_ENGLISH_FUNCTION.split())
# Arguments written as a command line's flags ("--nproc 4", "--gpu=h100-nvl", "--model llama-2-70b"): the tools'
# argument names, and those of torchrun and training scripts for them, read as the words that say each argument (a
# plan's devices are per node: "per node" where the nodes are given too). An unknown flag is left as it is.
FLAG = r"(?<![\w-])--([a-z][\w-]*)(?:\s*=\s*|\s+)(?!-)(\S+)"
FLAG_PHRASES = {"nproc": "{} processes", "steps": "{} steps", "trials": "{} trials", "nodes": "{} nodes",
                "devices": "{} gpus", "seq_len": "seq_len {}", "device_mem": "{} each"}  # fmt: skip
FLAG_AS_SAID = ("experiment", "layout", "gpu", "model", "run", "sweep", "path", "set")  # a value that says itself
FLAG_ALIASES = {"nproc_per_node": "nproc", "nnodes": "nodes", "num_nodes": "nodes", "gpus": "devices",
                "num_gpus": "devices", "max_steps": "steps", "config": "experiment",
                "seq_length": "seq_len"}  # fmt: skip
NODES_FLAG = r"(?<![\w-])--(?:nodes|nnodes|num[-_]nodes)\b"


def _flag(found: re.Match) -> str:
    name = found.group(1).lower().replace("-", "_")
    name = FLAG_ALIASES.get(name, name)
    if name not in (*FLAG_PHRASES, *FLAG_AS_SAID):
        return found.group(0)
    value = found.group(2).rstrip(",.;:")
    said = FLAG_PHRASES.get(name, "{}").format(value)
    if name in FLAG_AS_SAID and re.match(r"\s+--[a-z]", found.string[found.end() :], re.I):
        said += ","  # "--experiment configs/long.yaml --trials 4": a name as said, not run into the next flag's count
    if name == "devices" and re.search(NODES_FLAG, found.string, re.I):
        said += " per node"
    return said + found.group(2)[len(value) :]


# A plan written with short flags ("plan -g h100 -d 8 -m llama-3.1-8b"): "-d" is its devices where the line is a
# plan's command and names its card or model by flag too ("-d" alone elsewhere may be anything: docker's detach).
PLAN_SHORT_LINE = r"\bplan(?:\s+-[gdm]\s+\S+){2,}"
PLAN_SHORT_FLAGS = {"g": "--gpu", "d": "--devices", "m": "--model"}


def _plan_short_flags(text: str) -> str:
    """`text` with a plan's short flags written long ("-d 4" is "--devices 4"), where the line is a plan's."""
    line = re.search(PLAN_SHORT_LINE, text, re.I)
    if not line or not re.search(r"\s-[gm]\s", line.group(0)):
        return text
    flags = re.findall(r"(?<=\s)-([gdm])(?=\s)", line.group(0))
    if len(flags) != len(set(flags)):
        return text  # "plan -d 2 -d 4": which one is meant is asked, never the first taken

    long = re.sub(r"(?<=\s)-([gdm])(?=\s)", lambda flag: PLAN_SHORT_FLAGS[flag.group(1)], line.group(0))
    return text[: line.start()] + long + text[line.end() :]


# Slurm's flags for the machines a job gets ("sbatch --nodes=4 --gres=gpu:8", "srun -N 2 --ntasks-per-node=8"): the
# nodes, and the GPUs (or ranks, one a GPU) in each, as the words that say them. "-N" is Slurm's nodes ("-n" its tasks).
# ("--gpus=16" is the job's GPUs in all: left to the tools' flags below)
SLURM_PER_NODE = (r"(?<![\w-])--(?:gres\s*[=\s]\s*gpu(?::[\w.-]+)?:|(?:gpus|ntasks|tasks)[-_]per[-_]node\s*[=\s]\s*)"
                  r"(\d+)\b")  # fmt: skip
SLURM_NODES = r"(?<![\w-])-N\s*=?\s*(\d+)\b"


def _slurm(text: str) -> str:
    """`text` with Slurm's node and per-node GPU flags said in words (before the tools' own flags are read)."""
    text = re.sub(SLURM_NODES, r"\1 nodes", text)
    return re.sub(SLURM_PER_NODE, r"\1 gpus per node", text, flags=re.I)


# "bs 2", "batch size 4": a batch of a few sequences is each rank's, the micro batch (the global batch is counted in
# tokens, and one of a few sequences over several GPUs is no global batch anyone trains with); a bigger one ("batch
# size 16") may be either: left as said, asked. "global batch 512k tokens" stays.
# ("micro bs 4" says which, whatever its size)
BATCH_SIZE = (r"(?<!global )\b(micro[\s_-]*)?(?:bs|batch[ _-]?size)\s*(?:[=:]|of|to|at)?\s*(\d+)\b"
              r"(?!\.\d|\s*(?:k\b|tokens?))")  # fmt: skip
MICRO_BATCH_MOST = 8


def _batch_size(found: re.Match) -> str:
    micro, size = found.groups()
    return f"micro batch {size}" if micro or int(size) <= MICRO_BATCH_MOST else found.group(0)


# A value named, then refused by a pronoun after it ("fp32 is too slow, don't use it. bf16", "adam diverged, avoid
# it"): that value taken back, as "no fp32" says it, never a setting turned off.
REFUSED_AFTER = (rf"\b({PRECISIONS}|{OPTIMIZERS})\b([^.;!?]{{0,40}}?)[,.;:!\u2013\u2014-]?\s*(?:so\s+)?"
                 r"(?:(?:do\s+not|don'?t|never|please\s+don'?t)\s+(?:use|want|pick|take|run\s+(?:in|with))|avoid|drop|skip)"
                 r"\s+(?:it|that|this|them)\b")  # fmt: skip


# Or said not to be allowed after it: "fp8 precision is NOT permitted; use bf16", "adamw isn't an option".
FORBIDDEN_AFTER = (rf"\b({PRECISIONS}|{OPTIMIZERS})\b(\s+(?:precision|optimi[sz]er|training|mode))?\s+"
                   r"(?:(?:is|are)\s+(?:not|never)|isn'?t|aren'?t)\s+"
                   r"(?:permitted|allowed|acceptable|approved|an option|ok|okay)\b")  # fmt: skip


# Or kept away, however figuratively: "keep fp8 off", "keep fp8's blade sheathed", "leave adamw aside", "fp8 stays
# off" (a value taken back, as "no fp8" says it; a word between only after its possessive, so that "keep bf16 compile
# off" keeps bf16).
_AWAY = r"(?:sheathed|off|out|aside|away|at\s+bay|disabled|shelved|benched|on\s+the\s+shelf|in\s+(?:its|the)\s+sheath)"
KEPT_AWAY = (rf"\b(?:keep|keeping|leave|leaving|put|putting)\s+(?:the\s+)?({PRECISIONS}|{OPTIMIZERS})\b"
             rf"(?:'s\s+[a-z]+)?\s+{_AWAY}\b|"
             rf"\b({PRECISIONS}|{OPTIMIZERS})\b(?:'s\s+[a-z]+)?\s+(?:stays?|remains?|is\s+kept|kept)\s+"
             rf"{_AWAY}\b")  # fmt: skip


def _kept_away(found: re.Match) -> str:
    return f"no {found.group(1) or found.group(2)}"


# German compounds of the words the rules read, written as one ("Tensorparallelismus", "Contextparallel",
# "Microbatch", "Trainingsrun"): the words apart, as English writes them.
COMPOUND_HEAD = r"\b(tensor|kontext|context|pipeline|sequenz|sequence|daten|data|experten|expert)[-]?(?=parallel)"
COMPOUND_WORDS = {r"\bparallelismus\b|\bparallelit(?:ä|ae)t\b": "parallelism", r"\bkontext\b": "context",
                  r"\b(?:micro|mikro)batch(?:size|gr(?:ö|oe)(?:ß|ss)e)?\b": "micro batch",
                  r"\btrainings?(?:run|lauf)\b": "training run",
                  # a switch written as one word with the German for what it acts on ("Aktivierungscheckpointing",
                  # "Gradientencheckpointing", "Sequenzpacking"): the setting, never a word read as nothing
                  r"\b(?:aktivierungs?|gradienten)-?(?:checkpointing|checkpoints?)\b": "activation checkpointing",
                  r"\b(?:sequenz|sequence|daten|dokumenten?)-?packing\b": "sequence packing"}  # fmt: skip


def _compounds(text: str) -> str:
    text = re.sub(COMPOUND_HEAD, r"\1 ", text, flags=re.I)
    for pattern, words in COMPOUND_WORDS.items():
        text = re.sub(pattern, words, text, flags=re.I)
    return text


# The suffixes of the files a request may name (agent.understanding.known reads the repository's by them).
FILE_SUFFIXES = (".yaml", ".yml", ".md", ".json", ".jsonl", ".txt", ".toml", ".py", ".csv", ".log")
# A file's suffix typed with two letters swapped or one left out or added ("configs/long.ymal", "long.yamll",
# "r1.jsno"): that suffix. Only after a name joined to it (no sentence's full stop: "run it.Thanks").
SUFFIX = r"(?<=[\w-])\.([a-z]{2,6})\b(?![\w./-])"


def _suffix_typo(found: re.Match) -> str:
    said = found.group(1).lower()
    suffixes = [s[1:] for s in FILE_SUFFIXES]
    if said in suffixes:
        return found.group(0)
    close = [s for s in suffixes if _one_swap(said, s) or (len(s) >= 3 and len(said) != len(s) and _one_edit(said, s))]
    close = [s for s in close if s != "yml"] if "yaml" in close else close  # "ymal": the spelling of its letters
    return f".{close[0]}" if len(close) == 1 else found.group(0)


# A list's labels, at the start of the sentence or of one of its parts: "Step 1: use configs/long.yaml. Step 2: 4 GPUs
# with FSDP.", "1) long.yaml 2) ...". They number what is said, no count of anything (step 1 is no step count): dropped
# (a comma between the items where no punctuation ends the one before).
LIST_LABEL = (rf"(?:^|(?<=[.;!?:]\s)|(?<=\n))\s*(?:(?:step|stage|point|item|part|task|no\.?|#)\s*(?:\d+|{_WORD})\s*"
              r"[:.)\u2013\u2014-]|\(?\d+\))\s+")  # fmt: skip


# A form written as YAML, one "key: value" to a line ("  steps: 80", "  lr: 0.002"); two at least.
KEY_VALUE_LINE = r"(?m)^([ \t]*[A-Za-z][\w.-]*)[ \t]*:[ \t]*([^\s:#][^\n:]*?)[ \t]*$"


COUNTED_KEY = r"(?:gpus?|cards?|devices?|nodes?|process(?:es)?|trials?)"


def _key_value_lines(text: str) -> str:
    """Each "key: value" line as "key value;": a clause of its own, so no value is read with another line's key
    ("seq_len: 512" then "lr: 0.002" is no lr of 512)."""
    if len(re.findall(KEY_VALUE_LINE, text)) < 2:
        return text

    def clause(found: re.Match) -> str:
        key, value = found.group(1), found.group(2)
        if re.fullmatch(rf"\s*{COUNTED_KEY}", key, re.I):  # "gpus: 4" is 4 GPUs, a count before its noun
            return f"{key[: len(key) - len(key.lstrip())]}{value} {key.strip()};"
        return f"{key} {value};"

    return re.sub(KEY_VALUE_LINE, clause, text)


# Alternatives under numbered headings, and the one the action picks by its heading: "Experiment 1: lr 1e-3.
# Experiment 2: lr 3e-4. Launch only experiment 2" launches with lr 3e-4 (what experiment 2 says), never experiment 1's.
_HEADING_NOUN = r"experiment|option|variant|setup|candidate|config(?:uration)?|choice|version"
HEADED_ALTERNATIVE = rf"\b({_HEADING_NOUN})\s+(\d+|[a-d])\s*:\s*([^.;:!?]*?)\s*(?:[.;]\s+|[.;]?$)"
HEADING_PICKED = (rf"\b((?:launch|run|train|start|use|go\s+with|pick|take)\s+(?:only\s+|just\s+)?(?:the\s+)?)"
                  rf"({_HEADING_NOUN})\s+(\d+|[a-d])\b(?!\s*:)")  # fmt: skip


def _heading_picked(text: str) -> str:
    """`text` with the alternative its action picks by heading said in the heading's place, and the alternatives
    dropped; left as said where the heading picked is none of theirs or two headings read the same."""
    picked = re.search(HEADING_PICKED, text, re.I)
    headed = list(re.finditer(HEADED_ALTERNATIVE, text, re.I))
    if not picked or len(headed) < 2:
        return text
    said = {(found.group(1).lower(), found.group(2).lower()): found.group(3) for found in headed}
    key = (picked.group(2).lower(), picked.group(3).lower())
    if key not in said or len(said) != len(headed):
        return text
    chosen = picked.group(1) + said[key]
    text = text[: picked.start()] + chosen + text[picked.end() :]
    for found in reversed(headed):  # the headings all stand before the pick: its span is unmoved
        if found.end() <= picked.start():
            text = text[: found.start()] + text[found.end() :]
    return text


def _list_labels(text: str) -> str:
    """`text` without its list's labels; "2)" inside the sentence is one only in a list opened by "1)" ("train with
    2 processes (dp_shard 2) and ..." keeps its degree)."""
    listed = re.match(r"\s*\(?1\)\s", text)
    text = re.sub(LIST_LABEL, lambda found: found.group(0) if _in_brackets(found) else "", text, flags=re.I)
    if not listed:
        return text
    following = iter(range(2, 100))
    expected = next(following)

    def label(found: re.Match) -> str:
        """The list's next label (2, then 3...); a number closing a bracket opened before it ("(steps: 10) 2)") is
        that bracket's value."""
        nonlocal expected
        if int(found.group(1)) != expected or _in_brackets(found):
            return found.group(0)
        expected = next(following)
        return ","

    return re.sub(r"(?<=[\w)\]])\s+\(?(\d+)\)(?=\s)", label, text)  # "(the 1024 one) 2) ..." too


def _in_brackets(found: re.Match) -> bool:
    """Whether `found` stands inside a bracket opened before it: "(steps: 10)" closes on its value, no label."""
    depth = 0
    for char in found.string[: found.start()]:  # (a ")" that closes nothing is a label's: "1) ...")
        depth = depth + 1 if char == "(" else max(0, depth - 1) if char == ")" else depth
    return depth > 0


# A memory size in words, "gigabits" said for gigabytes too ("a 4090 with 24 gigabits of ram"): a card's memory is
# never given in bits. A rate ("100 gigabits per second", a network's) is no memory.
GIGABYTES = r"\b(\d+(?:\.\d+)?)\s*(?:gigabytes?|gigabits?|gbits?|gbytes?)\b(?!\s*(?:per|/|a)\s*s(?:ec(?:ond)?)?\b)"
GIBIBYTES = r"\b(\d+(?:\.\d+)?)\s*gibibytes?\b"
# A memory a device is said to have by a verb of having ("a device possessing 48GiB of memory"): what "with" says
# ("packing" is the switch, never a verb of having here)
MEMORY_HAD = (r"\b(?:possessing|having|holding|boasting|sporting|carrying|that\s+(?:has|holds))\s+"
              r"(?=\d+(?:\.\d+)?\s*gi?b\b)")  # fmt: skip
# A fraction said as a physicist or lawyer says it: "2 parts in 10000" (a learning rate of 0.0002), "one tenth" (0.1)
PARTS_IN = r"\b(\d+)\s+parts?\s+(?:in|per)\s+(\d+)\b(?!\.\d)"
ORDINAL_PARTS = {"tenth": 10, "hundredth": 100, "thousandth": 1000, "ten-thousandth": 10000}
FRACTION_WORDS = (rf"\b(a|one|1|\d+)\s+({'|'.join(sorted(ORDINAL_PARTS, key=len, reverse=True))})(s?)\b"
                  r"(?!\s+of\b)")  # fmt: skip  # "a tenth of the steps" is a share of something else
# Slurm's tasks are its processes, one a GPU: "submit 2 tasks", "launch with 4 slurm tasks" ("on 3 tasks" of a
# benchmark are its tasks: Slurm named, or its verbs)
SLURM_TASKS = (r"\b(submit|launch|srun|sbatch)\s+(\d+)\s+(?:slurm\s+)?tasks\b|"
               r"\b(with|across|on|using)\s+(\d+)\s+slurm\s+tasks\b")  # fmt: skip
# A key of the experiment named, then its value: "`train.grad_clip` set to 1.0", "data.seq_len to 2048"
KEY_SET_TO = (r"`?\b((?:train|data|model|hardware|search)\.[a-z_][\w.]*[a-z_])`?\s*(?:(?:is\s+|be\s+)?set\s+(?:to|at)|"
              r"to|at|of|is|being|should\s+be|must\s+be)\s+`?([\w.+-]*\w)`?(?=[\s,;)]|\.(?!\w)|$)")  # fmt: skip
# Mixtral by its experts and their size: "Mixtral of 8 experts at 22b each", "mixtral with 8 7b experts"
MIXTRAL_EXPERTS = (r"\bmixtral\s+(?:of|with)\s+(\d+)\s+experts?\s+(?:at|of|with)\s+(\d+)b(?:\s+(?:each|apiece))?\b|"
                   r"\bmixtral\s+(?:of|with)\s+(\d+)\s+(\d+)b\s+experts?\b")  # fmt: skip
# Its size said apart from it, after "mixtral" ("the mixtral one, the 8x7b"): that preset
MIXTRAL_SIZE_APART = r"\b(mixtral)((?:\s+(?:one|model))?\s*,?\s*(?:the\s+)?)(\d+x\d+b)\b"


# "Actualize" as learners say "update" (German aktualisieren, Spanish actualizar, French actualiser): "please actualize
# the docs", "actualising the readme".
FALSE_FRIEND_UPDATE = r"\bactuali[sz](e|es|ed|ing)\b"
# Words the new rules read too (intents and entities): corrected like the grammar's own VOCABULARY.
_MORE_WORDS = """which machine context request pull benchmark cancel sweep layouts winner checkpoint report
finished finishes completes exits parallelize hardware evaluate update refresh documentation llama mistral gemma smollm
trials without gpus disabled enabled disable enable list
completed finish stop wait kill abort halt resume batch micro precision default delete remove open private
single baseline config configuration
main straight directly handle
situation
compile"""  # the refusal rules' own words ("push stright to mian" is pushed to main); the hardware's ("the gpu
# sitation"); a setting's ("no compil": torch.compile off)
WORDS = sorted(set(VOCABULARY) | set(_MORE_WORDS.split()))
# mixtral is no typo of mistral: a family without a preset, asked about (entities.OTHER_FAMILIES)
_KEEP = """mixtral phi falcon deepseek gig gigs nvl pcie sxm smollm qwen gemma llama mistral model repo repos notes note
replica replicas shard shards master logs branch branches erase wipe purge nuke trash secret secrets token password
passwords creds push pushed sbatch srun salloc"""
# Everyday English words one edit away from a word the rules read ("here" from "where", "were" from "where",
# "than" from "then"): correct words are never typos.
_ENGLISH = """here there were than then them they their these those this that what when whom whose with have
make made take give like same some more most much many also each from into onto over only just very well good
best fine done does been being will would could should shall must might time times last next first other
again still ever even once both such into your yours ours mine away back about after before while since until
part parts rest test tests case cases type types plan plans step stop start starts state status store
boss cold date dinner exist full hate late lose lost lots race rates seep sleep star stat states stats steep sweet
toss world presume micron lunch remote fro content contents repot parking lower"""
KEEP = COMMON | set(_KEEP.split()) | set(_ENGLISH.split())  # words the typo fixer must leave alone ("repo" is no
# typo of "report")


# Chat shorthand read as the word it stands for ("wat step", "stop n relaunch", "w 4 gpus", "hold on till it ends").
SHORTHAND = {"wat": "what", "wut": "what", "n": "and", "w": "with", "u": "you", "ur": "your", "pls": "please",
             "plz": "please", "gimme": "give me", "lemme": "let me", "till": "until", "til": "until", "'til": "until",
             "twice": "2 x", "thrice": "3 x", "abt": "about", "tho": "though",  # "what abt 8 tho"
             # typos of a run's state, listed: "running" and "still" have too many everyday neighbours one edit away
             # ("tunning" is tuning, "skill" is no "still") to be corrected by closeness
             "runing": "running", "runnning": "running", "runnig": "running", "runnin": "running", "rnning": "running",
             "stil": "still", "stll": "still", "sitll": "still", "stilll": "still",
             # a short action word with a letter left out, too short (three letters) to be corrected by closeness
             "kil": "kill", "pln": "plan",
             # "log" with its last letter doubled, too short (three letters) to be corrected by closeness
             "logg": "log", "loggs": "logs",
             # "the" with two letters swapped: too short for closeness, and the commonest typo there is
             "teh": "the", "hte": "the",
             # Scots and dialect: "three wee servers wi' four L40S apiece. Whit layouts would ye run?"
             "wi'": "with", "whit": "what", "ye": "you", "yer": "your", "o'": "of",  # "8 o' them"
             # Scots negations: "nae packing", "dinnae bother wi' warmup"
             "nae": "no", "dinnae": "don't", "dinna": "don't",
             # Scots numbers and verbs: "gie it a go on twa GPUs"
             "twa": "two", "gie": "give"}  # fmt: skip
# A trial's arms, as a clinical trial has them, in a sentence about a sweep: "8 arms with varied settings ... start that
# sweep" is 8 trials (not "2 arms" said of anything else).
SWEEP_ARMS = r"\b(\d+)\s+arms\b(?=.*\bsweep\b)|(?<=\bsweep\b)(.*\b\d+)\s+arms\b"


# A word the rules read with its "g" dropped, as some say it ("learnin' rate", "packin' off"): the word itself. Only
# a word the rules know ("fixin' to" is left as it is).
# (The typo fixer may have put the "g" back already: "learning' rate".)
DROPPED_G = r"(?<![\w'`])([a-z]{3,}in)g?'(?!\w)"


def _dropped_g(found: re.Match) -> str:
    word = found.group(1) + "g"
    return word if word.lower() in WORDS else found.group(0)


# "lunch" is an everyday word (KEEP), and "launch" typed one letter short only where a verb stands: before its object
# ("lunch the long config", "pls lunch it"), never "after lunch" or "lunch break".
LUNCH_THE = (r"\blunch(?=\s+(?:the|a|an|it|that|this|my|our|another|\d+|configs?/|[\w-]+\.ya?ml|training|run|job|"
             r"sweep|fsdp|ddp|tp|pp)\b)")  # fmt: skip
# "repot" is the gardener's verb ("repot it into something bigger": a metaphor no tool reads, KEEP), and "report"
# typed a letter short anywhere else ("write the repot", "a repot of lr-scan").
REPOT = r"\brepot(?!\s+(?:it|them|this|that|these|those)\s+(?:in|into|to)\b)"
# "pul request", "pull requst", "pul-request": a pull request typed a letter short or off.
PULL_REQUEST_TYPO = r"\bpul[\s-]+req\w*|\bpull[\s-]+req(?!uests?\b)\w*"
# A write tool's own name typed as a command, opening the request ("write_report sweeps/layouts-nov"): that tool, in
# its English words (named inside a sentence, "does write_report push anything?", it is asked about: KEEP).
TOOL_NAME_TYPED = {r"^(\W*)write_report(?![\w./-])": r"\1write a report of",
                   r"^(\W*)open_pull_request(?![\w./-])": r"\1open a pull request for",
                   r"^(\W*)update_docs(?![\w./-])": r"\1update the docs for"}  # fmt: skip
# Words before the meal itself: "after lunch the run ended", "we had lunch the day before".
MEAL = (r"\b(?:after|before|for|at|had|have|having|eat|eating|ate|grab|grabbing|get|got|from|during|over|my|our|the|"
        r"a|of)\s+$")  # fmt: skip


# A price and the rate it is per ("$3.20 per GPU-hour", "$25.60/hr per node", "2 dollars an hour"): no count of
# GPUs, nodes or anything a tool takes.
_RATE = r"(?:(?:gpu|node|card|instance|machine)[\s-]*)?(?:hr|hour|h|month|mo|day|node|gpu|card|instance|machine)s?\b"
# A number that names a person or a part of a paper, not a count: "Reviewer 2 asked", "as in Table 3", "Figure 4b"
# (the noun kept, its number dropped: "Reviewer 2 ... 32 H100s" has one count).
NUMBERED_NAME = (r"\b(reviewer|referee|figure|fig\.|table|appendix|equation|eq\.)\s*#?\s*\d+[a-z]?\b"
                 r"(?!\s*(?:gpus?|nodes?|steps?|devices?|trials?|process(?:es)?|procs?|%|x\b))")  # fmt: skip
PRICE = (r"(?:[$\u20ac\u00a3]\s?\d[\d,]*(?:\.\d+)?(?:\s?[km]\b)?|"
         r"\b\d[\d,]*(?:\.\d+)?\s*(?:dollars?|usd|eur|euros?|bucks|gbp|pounds)\b)"
         rf"(?:\s*(?:/|per\b|an?\b|each\b)\s*{_RATE})*")  # fmt: skip
# (not "new", "spare" or "extra": "add 2 new nodes" may be 2 more than the plan's)
MACHINE_ADJECTIVES = r"(?:wee|small|little|tiny|big|beefy|large|chunky|separate|physical|bare[- ]metal)"
# A question tag after a statement ("launch it on two GPUs with fsdp, no?", "..., non?"): it asks for agreement,
# it turns nothing off ("packing or no?" asks which, left as said), said as ", right?" (still a tag, no uptalk on a
# value: questions.UPTALK_ON).
NO_TAG = r"(?<!\bor)\s*,\s*(?:no|non|nein|nope)\s*\?"
# The mesh's data-parallel keys said in words: "data parallel shard", "data-parallel replicate", "dp shard".
SPELLED_DIM = (r"\b(?:data[\s-]+parallel(?:ism)?|dp)[\s_-]+(shard(?:ed|ing)?|replicat(?:e|ed|ion|ing))\b"
               r"(?!\s+(?:data|dataset|checkpoints?|files?)\b)")  # fmt: skip
# "kick that off", "fire it off": a launch verb with its object between it and "off", read as the verb ("kick off
# that"), never as a setting turned off.
SEPARATED_OFF = (r"\b(kick(?:s|ed|ing)?|fir(?:e|es|ed|ing))\s+(it|that|this|them|those|these|one|"
                 r"(?:the|a|my|our)\s+(?:run|job|training|experiment))\s+off\b")  # fmt: skip


# "weight for r1 to finish", "please weight until it's done": "wait" misspelt as it sounds, where a verb opens the
# clause ("the weight for layer 3", "weight decay" are the noun).
VERB_OPENS = r"(^\s*|[,.;:!?]\s+|\b(?:please|pls|just|then|and|you|to|let's|lets|i'll|we'll|gonna)\s+)"
WEIGHT_FOR = VERB_OPENS + r"weight(ing)?(?=\s+(?:for|on|until|till|til)\b)"


# "can you right up the lr-scan results", "right it up": "write up" misspelt as it sounds, where a verb opens the
# clause and an object stands beside "up" ("right up to step 50", "all right, up next" stay).
RIGHT_UP = (
    VERB_OPENS + r"right(?=\s+(?:up\s+(?:the|a|an|our|my|those|these|this|that|it)\b|(?:it|this|that|them)\s+up\b))"
)


def _lunch(found: re.Match) -> str:
    return found.group(0) if re.search(MEAL, found.string[: found.start()], re.I) else "launch"


# A model family dictated as two words that sound like it, right before a size ("mist roll 7 b", "jem ma 7b"): the
# family their letters are closest to.
DICTATED_FAMILY = r"\b([a-z]+)\s+([a-z]+)(?=[\s-]+(?:\d+(?:\.\d+)?[\s-]+)?\d+(?:\.\d+)?\s*b\b)"
FAMILY_SOUNDS = 0.8  # difflib's ratio of the joined words to the family's name


def _dictated_family(found: re.Match) -> str:
    families = MODEL_FAMILIES.split("|")
    if any(word.lower() in families for word in found.groups()):
        return found.group(0)
    close = difflib.get_close_matches("".join(found.groups()).lower(), families, n=1, cutoff=FAMILY_SOUNDS)
    return close[0] if close else found.group(0)


# A GeForce card's number with two digits swapped ("2x rtx 4900"): the preset's number, where exactly one is so close
# (no card is called 4900; the 4090 is). A real card without a preset ("rtx 3090") is no swap of one: asked about.
RTX_NUMBERS = sorted({number for key in GPUS for number in re.findall(r"rtx-(\d+)", key)})
SWAPPED_CARD = r"\b(rtx|geforce)([\s-]*)(\d{4})(?=s?\b)"


def _card_number(found: re.Match) -> str:
    name, space, number = found.groups()
    close = [n for n in RTX_NUMBERS if _one_swap(number, n)]
    return f"{name}{space}{close[0]}" if number not in RTX_NUMBERS and len(close) == 1 else found.group(0)


# A layout's key typed with a typo, in its key=value form only ("dp_shrad=2", "dp-shard=2", "pt=2"): the one key it is
# closest to (a long key by one edit, a two-letter one by its letters swapped). A word elsewhere is left as it is.
LAYOUT_KEY = r"(?<![\w.-])([a-z][a-z_-]*)(?=\s*=\s*\d)"
KEY_PREFIX_LEAST = 5  # "dp_re" on: shorter beginnings ("dp", "dp_") say no one key


def _layout_key(found: re.Match) -> str:
    key = found.group(1).lower().replace("-", "_")
    keys = DIMS.split("|")
    if found.group(1).lower() in keys:
        return found.group(0)
    if key in keys:  # "dp-shard=2"
        return key
    close = [k for k in keys if _one_swap(key, k) or (len(k) > NO_CHANGE and _close(key, k))]
    # a long key cut short ("dp_rep=2", "dp_repl=2"): the one key it begins
    close = close or [k for k in keys if len(key) >= KEY_PREFIX_LEAST and k.startswith(key)]
    return close[0] if len(close) == 1 else found.group(0)


# HSDP's degrees in words: "2 replicas of 4 shards", "2 replicas x 4 shards", "2 replicas, 4 shards each" (replicate
# first, shard second, as "hsdp 2x4" is read).
REPLICAS_OF_SHARDS = (r"(?:\b(?P<named>hsdp|hybrid[- ]shard\w*)\W*(?:with\s+|as\s+|of\s+)?)?"
                      r"\b(\d+)\s+(?:replicas?|replicated\s+groups?)\s*(?:,|of|x|by|with|each\s+(?:of|with))\s*"
                      r"(\d+)\s+(?:shards?|sharded\s+ranks?)(?:\s+each)?\b")  # fmt: skip


def _replicas_of_shards(found: re.Match) -> str:
    return f"{found.group('named') or 'hsdp'} {found.group(2)}x{found.group(3)}"


# A ticket's section labels ("AC: 4 GPUs, FSDP", "DoD: run id posted"): acceptance criteria and definition of done,
# no setting ("AC" is activation checkpointing only with its state: "AC: off").
TICKET_LABEL = (r"\b(?:AC|A/C|[Aa]cceptance [Cc]riteria|DoD|DOD|[Dd]efinition of [Dd]one)\s*:"
                r"(?!\s*(?:on|off|true|false|yes|no|enabled?|disabled?|ON|OFF)\b)\s*")  # fmt: skip
# What a ticket rules out: "Out of scope: TP" (no tensor parallel), "non-goals: packing".
OUT_OF_SCOPE = r"\b(?:out of scope|non-?goals?)\s*:\s*"


# A yes-or-no question marked as one instead of by its "?": "r1 finished y/n", "done (yes/no)", "crashed, yes or no".
YES_NO = r"\s*\(?\b(?:y/n|yes/no)\b\)?\s*\??|\s*,?\s*\(?\byes or no\b\)?\s*\??\s*$"
# A request put as a question of permission: "would it be ok to start the long config?", "is it alright if you open
# the config?" ask for the action, as "could you" does (not whether it could work: "is it possible to" stays a what-if).
PERMISSION = (
    # "Is possible to make the tuning again?": a learner's "can you", with no "it" (with it, "is it possible to run
    # 70b on 4 a10s?" weighs whether it fits, left as it is)
    # (nor "is possible to run 70b on 4 a10s?", "... to train ...": whether it fits, or a launch confirmed first)
    r"(?:^|(?<=[.!?]\s)|(?<=\bplease,\s)|(?<=\bplease\s))is\s+possible\s+(?:for\s+you\s+)?to\s+"
    r"(?!(?:run|train|fit|use|have|put|load|host|serve|launch|start)\b)|"
    # ("is it fine to run 70b on 4 a10s?", "is it ok to use tp here?" weigh an idea: left as they are)
    r"\b(?:would|will)\s+it\s+be\s+(?:ok(?:ay)?|alright|all right)\s+(?:to|if\s+(?:you|we|i)"
    r"(?:\s+(?:could|can))?)\s+|\bis\s+it\s+(?:ok(?:ay)?|alright|all right)\s+if\s+(?:you|we|i)\s+"
)

# The same ask as a polite formula around the verb: "would you mind launching 20 steps?", "might I ask you to open a
# PR?" are "could you launch ...", "could you open ..." ("would you mind not launching" keeps its negation: no verb of
# the list follows "mind").
_ASKED_GERUNDS = {"launching": "launch", "relaunching": "relaunch", "training": "train", "retraining": "retrain",
                  "running": "run", "rerunning": "rerun", "starting": "start", "restarting": "restart",
                  "kicking": "kick", "firing": "fire", "benchmarking": "benchmark", "evaluating": "evaluate",
                  "cancelling": "cancel", "canceling": "cancel", "killing": "kill", "stopping": "stop",
                  "aborting": "abort", "opening": "open", "writing": "write", "updating": "update",
                  "refreshing": "refresh", "resuming": "resume", "requeueing": "requeue", "requeuing": "requeue",
                  "sweeping": "sweep", "making": "make", "creating": "create", "doing": "do", "trying": "try",
                  "planning": "plan", "comparing": "compare", "checking": "check", "showing": "show",
                  "listing": "list", "reading": "read", "telling": "tell", "putting": "put", "setting": "set",
                  "giving": "give", "preparing": "prepare", "drafting": "draft", "filing": "file",
                  "waiting": "wait"}  # fmt: skip
MIND_DOING = rf"\b(?:would|do|could|will)\s+you\s+(?:kindly\s+)?mind\s+({'|'.join(_ASKED_GERUNDS)})\b"
ASK_YOU_TO = r"\b(?:might|may|could|can)\s+i\s+(?:please\s+|kindly\s+)?ask\s+(?:you\s+)?(?:kindly\s+)?to\s+"


def _mind_doing(found: re.Match) -> str:
    return f"could you {_ASKED_GERUNDS[found.group(1).lower()]}"


# ("fsdp on 2 but not zero-3", "ddp over 4 - 10 steps": a clause or a dash after it ends the count too)
BARE_COUNT = (r"\b(on|over|across)\s+(\d+)(?=\s*(?:,|;|\.(?!\d)|[?!)]|$|\band\b|\bfor\b|\bwith\b|\binstead\b|"
              r"\bbut\b|\bthen\b|[-\u2013\u2014]\s))")  # fmt: skip
DIMS = "dp_shard|dp_replicate|tp|pp|cp|ep"


# A rack holds nodes: "a rack of 4 servers" is 4 nodes, "2 racks of 4 nodes each" 8, "2 racks with 16 nodes total" 16.
# (A rack whose GPUs are given directly, "two racks, each carrying eight H100s", stays a node: grammar.NODE_NOUN.)
RACKS_OF_NODES = (r"\b(\d+|an?|one)\s+racks?\s*,?\s+(?:of|with|holding|containing|housing|"
                  r"each\s+(?:with|holding|of))\s+(\d+)\s+(nodes?|servers?|machines?|boxes|hosts?|computers?)\b"
                  r"(\s*(?:in\s+)?(?:total|all|altogether|overall|combined))?"
                  r"(?:\s+(?:each|per\s+rack|apiece))?")  # fmt: skip


def _nodes_in_racks(found: re.Match) -> str:
    racks = 1 if found.group(1).lower() in ("a", "an", "one") else int(found.group(1))
    nodes = int(found.group(2)) * (1 if found.group(4) else racks)
    return f"{nodes} {found.group(3)}"


# What the speaker says they will do themselves is no request, and what it names is not what they ask about: "I'll
# handle the baseline myself. Pull r1's numbers" asks for r1's only. Said as a sentence of its own.
DONE_MYSELF = (r"(?:^|(?<=[.!?;]\s))\s*i(?:'ll|\s+will|'m\s+going\s+to|\s+am\s+going\s+to|\s+can)\s+(?:handle|"
               r"take\s+care\s+of|do|look\s+at|check|deal\s+with|cover|sort(?:\s+out)?|run)\s+[^.!?;\n]{1,60}?\s+"
               r"myself\s*(?:[.!;]+\s*|$)")  # fmt: skip


# Numbers in mathematical notation: a power written with superscripts or a caret ("seq len 2^11" is 2048, "10⁻⁴"),
# a mantissa times a power of ten ("5·10⁻⁴", "3×10^-4" are 5e-4 and 3e-4), and η, the learning rate's symbol
# ("η = 1e-3"), read as the digits and e-notation the rules read.
SUPERSCRIPTS = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺", "0123456789-+")
SUPERSCRIPT_RUN = r"(?<=\d)\s*([⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺]+)"
TIMES_TEN_TO = r"(?<![\w.])(?:(\d+(?:\.\d+)?)\s*[·×x*]\s*)?10\s*(?:\^|\*\*)\s*\(?([-+]?\d+)\)?(?!\d|\.\d)"
POWER = r"(?<![\w.^])(\d+)\s*(?:\^|\*\*)\s*(\d+)(?!\d|\.\d|\^)"
POWER_MOST = 10**7  # a power bigger than any count or length a request gives is left as written


def _times_ten_to(found: re.Match) -> str:
    mantissa, exponent = found.group(1) or "1", int(found.group(2))
    if exponent < 0:
        return f"{mantissa}e{exponent}"
    value = float(mantissa) * 10**exponent
    return f"{value:g}" if value != int(value) else str(int(value))


def _power(found: re.Match) -> str:
    base, exponent = int(found.group(1)), int(found.group(2))
    if exponent > 64 or base**exponent > POWER_MOST:
        return found.group(0)
    return str(base**exponent)


def _math_notation(text: str) -> str:
    text = re.sub(SUPERSCRIPT_RUN, lambda found: "^" + found.group(1).translate(SUPERSCRIPTS), text)
    text = re.sub(TIMES_TEN_TO, _times_ten_to, text)
    text = re.sub(POWER, _power, text)
    text = re.sub(r"(?<!\w)η(?!\w)", "lr", text)
    # a size written as a set's ("|steps| = 100") and a definition's sign ("lr := 3e-4"): the value of that setting
    text = re.sub(r"\|\s*([a-z_.]+)\s*\|(?=\s*(?::?=|is\b))", r"\1", text, flags=re.I)
    text = re.sub(r"(?<=\w)\s*:=\s*", " = ", text)
    return re.sub(r"(?<=\d)\s*×", "x", text)  # "2× A100", "2×8 H100": the multiplication sign as people type it


# A card's memory in brackets after its name ("4x H100 NVL (94 GB)", "2x8 H100 (80 GB)", "A100 (40GB)"): the card's own,
# no count of anything. Where it names one of the card's presets it is written as the name reads it ("A100 40GB");
# where it is the preset's memory (give or take GB against GiB) it says nothing more; otherwise it is left, asked about.
MEMORY_IN_BRACKETS = (r"\b(h100|h200|a100|l40s|a10|rtx[ -]?4090|4090)((?:[\s-]+(?:sxm|pcie|nvl))?)(s?)\s*"
                      r"\(\s*(\d+(?:\.\d+)?)\s*(?:gi?b|gigs?|g)\s*\)")  # fmt: skip
GB_AS_GIB = 0.1  # a card sold as N GB holds about N GiB, within this share


def _preset_of(key: str) -> str | None:
    key = {"rtx4090": "rtx-4090"}.get(key, key)
    key = GPU_ALIASES.get(key, key)
    return key if key in GPUS else None


def _holds(preset: str | None, size: str) -> bool:
    """Whether the preset's card is the one sold with `size` GB (its GiB within GB_AS_GIB)."""
    return bool(preset) and abs(GPUS[preset].memory_mib / 1024 - float(size)) <= GB_AS_GIB * float(size)


def _memory_before_card(found: re.Match) -> str:
    """The count, memory and card of "8 40GB A100s" as "8 A100 40GBs"; a card with one preset, of that memory, as
    its name ("6 24GB 4090s" are 6 4090s); another memory left as said."""
    count, size, unit, name, plural = found.groups()
    key = re.sub(r"^nvidia\s+|\s+", "", name.lower())
    if _preset_of(f"{key}-{size}gb") or not _preset_of(key):
        return f"{count} {name} {size}{unit}{plural}"
    return f"{count} {name}{plural}" if _holds(_preset_of(key), size) else found.group(0)


def _memory_in_brackets(found: re.Match) -> str:
    name, variant, plural, size = found.groups()
    key = re.sub(r"[\s-]+", "-", f"{name}{variant}".lower())
    if _preset_of(f"{key}-{size}gb"):
        return f"{name}{variant} {size}GB{plural}"
    return f"{name}{variant}{plural}" if _holds(_preset_of(key), size) else found.group(0)


# A launch's terse shorthand, as an operator types it: "np4"/"np=4" is 4 processes, "50st"/"st100" so many steps
# ("1st", "21st" are ordinals: no steps), "nopack"/"nocompile" turn the setting off, "galore" is GaLore's AdamW.
SHORT_PROCESSES = r"(?<![\w.-])np\s*[=:]?\s*(\d+)\b(?!\.\d)"
SHORT_STEPS = r"(?<![\w.-])(?:(\d*(?:[02-9]|11))\s*st|st\s*[=:]?\s*(\d+))\b(?!\.\d)"
GLUED_OFF = r"\bno(pack(?:ing)?|compile|ac)\b"
GALORE = r"\bgalore(?:[\s_-]*adam[\s_-]*w?)?\b(?![\w-])"
_COUNTED = r"(processes|procs|gpus|devices|nodes)"
COUNT_AFTER_NOUN = rf"(?<![\w.-])(?:(?<!\d ){_COUNTED}\s*:|{_COUNTED}\s*=)\s*(\d+)\b(?![.\d])"
NODES_AS_KEY = r"(?<![\w.-])nodes\s*[=:]\s*\d"


def _count_after_noun(found: re.Match, text: str) -> str:
    """A count after its noun ("gpus=4") as before it ("4 gpus"). Beside a nodes key ("devices=8 nodes=2",
    "nodes: 4, devices: 8") the keys are the planner's and launcher's own, whose count is that of each node."""
    noun = found.group(1) or found.group(2)
    if noun.lower() == "nodes" and re.search(r"per_node\s*[=:]", text, re.I):
        return found.group(0)  # "NODES=2 GPUS_PER_NODE=4": a launcher's variables, read together (entities)
    per_node = noun.lower() != "nodes" and re.search(NODES_AS_KEY, text, re.I)
    return f"{found.group(3)} {noun}{' per node' if per_node else ''}"


# A step count said of the warmup ("set the warmup to 5 steps", "warm up for 10 steps", "warmup a meagre 2 steps"): the
# warmup's length, never the run's steps. ("train without warmup for 10 steps": a warmup taken back has no length;
# those are the run's. "warmup a mere 2 steps longer" changes it by 2: left for the rules that ask.)
WARMUP_STEPS = (r"\bwarm[\s-]?up(?:\s+steps)?(?:\s+(?:to|of|for|at|is|=|:|set\s+to|should\s+be)\s*|\s*[=:]\s*|\s+)"
                rf"(?:(?:a|an)\s+(?:{MANNER}\s+)?)?(\d+)\s*(?:steps?|iters?|iterations?)\b"
                r"(?!\s+(?:more|less|longer|shorter|fewer|than|over|under|above|below|extra)\b)")  # fmt: skip
WARMUP_REFUSED = r"\b(?:no|without|skip|disable|drop|zero|not)\s+(?:the\s+|any\s+)?$"


def _warmup_steps(found: re.Match) -> str:
    if re.search(WARMUP_REFUSED, found.string[: found.start()], re.I):
        return found.group(0)
    return f"warmup {found.group(1)}"


# A precision by its type's long name ("in float32", "bfloat16", "full precision", "fp-8"): the trainer's name of it
# (train.precision), so that it is never dropped. Half precision (float16) is asked about where it is read.
PRECISION_NAMES = {r"\b(?:float|fp)[\s_-]?32\b|\b(?:full|single)[\s-]precision\b": "fp32",
                   r"\bb(?:float|f)[\s_-]?16\b|\bbrain[\s-]?float[\s_-]?16\b": "bf16",
                   r"\b(?:float|fp)[\s_-]?8\b": "fp8"}  # fmt: skip
# Gradient checkpointing shortened ("grad ckpt", "grad checkpointing"): activation checkpointing, its other name.
GRAD_CHECKPOINTING = r"\bgrad(?:ient)?[\s_-]*(?:ckpt(?:ing)?|checkpointing)\b"
# The GPUs in each node said after the nodes and a comma: "32 H200 (4 nodes, 8 each)" is 4 nodes with 8 each.
_NODE_WORD = r"(?:nodes?|machines?|servers?|hosts?|boxes)"
NODES_THEN_EACH = rf"\b(\d+\s+{_NODE_WORD})\s*,\s*(\d+)\s+(?=each\b|per\s+{_NODE_WORD}\b)"
# Nodes of the GPUs counted before: "2 nodes of those 8" (after "8 h100s") is 2 nodes of 8.
NODES_OF_THOSE = (r"\b(\d+\s+nodes?)\s+of\s+(?:those|these)\s+(\d+)\b"
                  r"(?!\s*(?:nodes?|steps?|gi?b|gigs?)\b|\.\d)")  # fmt: skip
# A switch's state said as a duty: "packing is to be off" is "packing should be off"; "warmup is not to be touched"
# leaves the warmup as it is (the negation keeps the setting, it never turns it off).
TO_BE_STATE = r"\b(is|are)\s+to\s+be\s+(?=(?:on|off|enabled|disabled|turned\s+(?:on|off))\b)"
NOT_TO_BE_TOUCHED = r"\b(?:is|are)\s+not\s+to\s+be\s+(?:touched|changed|modified|altered)\b"
# A switch opened or closed, as Spanish "abrir"/"cerrar" say it: "open the activation checkpointing" turns it on.
# (not a file of it: "open the compile log" is a read)
_SWITCH_NAME = r"(?:activation\s+checkpointing|(?:sequence\s+)?packing|(?:torch[. ]?)?compile)"
_NOT_A_SWITCH = r"(?!\s*(?:logs?|config\w*|files?|reports?|results?|notes?|docs?|outputs?|settings?|options?)\b)"
# A switch ruled out by a modal in the passive: "packing shall not be used", "compile must not be enabled" (off; one
# "not to be disabled" is left to the entities, which ask). Not a rule asked about or told as someone's ("compile must
# not be enabled, you said? Launch ... with it anyway"), whose clause the user may overrule.
SWITCH_NOT_TO_BE_USED = (rf"\b({_SWITCH_NAME})\s+(?:should|shall|must|may|is\s+to|are\s+to)(?:\s+not|n't)\s+be\s+"
                         r"(?:used|enabled|applied|activated|turned\s+on|switched\s+on|on)\b"
                         r"(?![^.;!?]*(?:\?|\b(?:said|says|told|claims?|claimed|reckons?)\b))")  # fmt: skip
OPEN_SWITCH = rf"\bopen\s+(?:up\s+)?(?:the\s+)?(?={_SWITCH_NAME}\b{_NOT_A_SWITCH})"
CLOSE_SWITCH = rf"\bclose\s+(?:the\s+)?(?={_SWITCH_NAME}\b{_NOT_A_SWITCH})"
# A setting's value said with "in", as Spanish "en" says it: "the micro batch in 4" is the micro batch at 4, "the seed
# in 7" the seed 7.
# A setting's value after the French or German "to"/"at" ("lr à 3e-4", "micro batch auf 4"): the value it is set to
# (only after a setting's name and before a number: "4 nodes à 8" is NODES_EACH_OF's).
VALUE_AT_FOREIGN = (r"\b(learning\s+rate|lr|micro[\s_-]?batch(?:\s+size)?|batch\s+size|seed|warm-?up(?:\s+steps)?|"
                    r"weight\s+decay|grad(?:ient)?\s+clip(?:ping)?)\s+(?:à|auf)\s+(?=\.?\d)")  # fmt: skip
VALUE_IN = r"\b(micro[\s_-]?batch(?:\s+size)?|batch\s+size|seed)\s+in\s+(?=\d+\b(?!\s*(?:steps?|gpus?|nodes?|%)))"
# A sequence length in thousands with a fraction ("seq len 1.5k", "context 0.5k"): thousands of 1024, as "2k" is 2048.
SEQ_LEN_FRACTION_K = (r"\b((?:seq(?:uence)?[\s_-]*len(?:gth)?|context(?:[\s_-]*len(?:gth)?)?|ctx)"
                      r"\s*(?:[=:]|of|to|at|is)?\s*)(\d*\.\d+)\s*k\b")  # fmt: skip


def _seq_len_fraction(found: re.Match) -> str:
    tokens = float(found.group(2)) * 1024
    return f"{found.group(1)}{int(tokens)}" if tokens.is_integer() else found.group(0)


# Short names of settings, before their value ("wd 0.05", "wd=0.1", "ctx len 512"): the names the rules read.
SHORT_SETTING_NAMES = {r"\bwd(?=\s*[=:]?\s*\d|\s*[=:]?\s*\.\d)": "weight decay",
                       r"\b(?:context|ctx)[\s_-]*len\b": "context length",
                       # the rate named as a learner may ("the learning speed put at 0.0002")
                       r"\blearning\s+speed\b": "learning rate"}  # fmt: skip
# A value said before "instead of" the old one and its noun ("train 40 instead of 20 steps"): the noun is the new
# value's too ("40 steps instead of 20").
INSTEAD_BEFORE_NOUN = r"\b(\d+(?:\.\d+)?)\s+instead\s+of\s+(\d+(?:\.\d+)?)\s+(steps|gpus|trials|processes|nodes)\b"


# A number said again after a full stop, a semicolon or a dash, with a word that takes the first back ("20 steps. Make
# it 25.", "an 8-trial sweep. Actually 12.", "on 8 h200; sorry, 4 h200"): the number said last, with the first one's
# noun. A number after the mark with another noun ("20 steps. Actually wait 5 minutes") corrects nothing, nor is the
# exponent of a rate a number of its own ("lr 3e-4, actually 30" is no 3e-30).
_TAKEN_BACK = r"(?:(?:sorry|actually|(?:no|nope|wait)\s*[,!.]|make\s+(?:it|that)|i\s+meant?|rather)\s*[,!.]?\s*)"
NUMBER_RESTATED = (r"(?<![\w.])(?<!\de-)(?<!\de\+)\d+(?:\.\d+)?\b(?!\.\d)((?:[\s-]+[a-z][\w-]*){0,2}?)"
                   rf"\s*(?:[.;]|[\u2014\u2013]+|\s-{{1,2}}\s|,)\s*{_TAKEN_BACK}+"
                   r"(\d+(?:\.\d+)?)\b(?!\.\d)(?:\s+([a-z][\w-]*))?(?=\s*(?:[.;,!?)]|$))")  # fmt: skip


# A rate's value taken back in place for another of its form ("lr 1e-4, no, 2e-4", "3e-4, sorry, 5e-4", "1e-4 - I
# mean 2e-4", "0.1, actually 0.05"): the value said last, for the same setting. Only a value written as a rate (an
# exponent or a decimal point in both), so that "lr 1e-4, no warmup" (no value after "no") corrects nothing and a
# count after it ("1e-4, no, 4 gpus") stays its own.
RATE_NUMBER = r"(?:\d+(?:\.\d+)?e-?\d+|\d*\.\d+)"  # a rate's value: 3e-4, 0.01
_RATE_TAKEN_BACK = rf"(?:{_TAKEN_BACK}|(?:no\s+wait|er+m?|um+|uh+|hmm+)\s*[,!.]?\s*)"  # "no wait, 2e-4", "er, 2e-4"
# The rest of the clause names no other setting the value could be of ("lr 3e-4, actually 0.01 for weight decay"
# adds a weight decay: no lr corrected).
_ANOTHER_SETTING = (r"\b(?:weight[\s_-]*decay|wd|warm[\s-]?up\w*|grad\w*[\s_-]*clip\w*|clip\w*|micro[\s_-]*batch\w*|"
                    r"batch\w*|dropout|beta\w*|eps\w*|momentum|seq\w*|precision)\b")  # fmt: skip
RATE_RESTATED = (rf"(?<![\w.]){RATE_NUMBER}(?!\w|\.\d)\s*(?:[;]|[\u2014\u2013]+|\s-{{1,2}}\s|,)\s*{_RATE_TAKEN_BACK}+"
                 rf"({RATE_NUMBER})(?!\w|\.\d)(?=\s*(?:[.;,!?)]|$|\s+(?:and|with|on|for|please)\b(?![^.;,!?]*?"
                 rf"{_ANOTHER_SETTING})))")  # fmt: skip


def _number_restated(found: re.Match) -> str:
    noun, last, last_noun = found.groups()
    said = noun.strip(" -").split()
    if last_noun and (not said or not _same_word(said[-1], last_noun)):
        return found.group(0)  # another noun: another setting, not this number corrected
    return f"{last}{noun}"


def _same_word(one: str, other: str) -> bool:
    """A noun and its plural ("h100s", "h100") are one word."""
    return one.lower().rstrip("s") == other.lower().rstrip("s")


# A card or a name taken back after a dash, a comma or a stop ("on 8 h100s — make that h200s", "not h100 — h200",
# "read r1 — sorry, I meant baseline-ddp"): the one said last. A name is taken back by "I meant", and only by a name
# (a known one, or one with a digit, a dash, a dot or a slash), so that "no, I meant ..." keeps its "no"; or by a word
# that says it corrects, a known name by a known name: "cancel tp-try, sorry, r1", "stop tp-try -- scratch that, r1".
# A name asked about may be taken back too, with a pause before: "cancel runs/baseline-ddp? Actually, hold on, I mean
# runs/r1" (a correction, no second request; the question stays one).
_MARK = r"\s*(?:[.;,]|[\u2014\u2013]+|\s-{1,2}\s)\s*"
_PAUSE = r"(?:(?:sorry|actually|hold\s+on|wait|oops|my\s+bad|hmm+|um+|uh+|er+m?)\s*[,!.]?\s*)*"
_TAKES_BACK = (r"(?:i\s+meant?\s+|(?:sorry|correction|scratch\s+that|scrap\s+that|no\s+wait|make\s+(?:it|that))\s*"
               r"[,:;.!\u2014-]*\s*)")  # fmt: skip
NAME_TAKEN_BACK = (rf"(?<![\w./-])([a-z][\w./-]*\w)({_MARK}|\s*[?!]\s*){_PAUSE}{_TAKES_BACK}(?:the\s+)?(?!\d+\b)"
                   r"([\w./-]*\w)(?=\s*(?:[.;,!?)]|$))")  # fmt: skip


# A name corrected at the end of the message, the correction saying only the new name: "read r1's results.
# correction: baseline-ddp", "show results of r1... scratch that, tp-try" (the one name said before it is replaced;
# with two said before, which one is corrected is unsaid: left as said, and asked about).
NAME_CORRECTED_LAST = (rf"(?:[.;,!?]|[\u2014\u2013]+|\s-{{1,2}}\s)\s*{_PAUSE}{_TAKES_BACK}(?:the\s+)?"
                       r"([\w./-]*\w)\s*[.!]?\s*$")  # fmt: skip
NAME_WORD = r"(?<![\w./-])[a-z][\w./-]*\w"


# A request scratched for a question asked in its place: "cancel tp-try; scratch that, how did r1 do?" is the
# question alone (the names of the request scratched are no object of it).
REQUEST_SCRATCHED = (r"^[^.;!?]*?\s*[.;,!?\u2014-]+\s*(?:scratch|scrap|forget|ignore)\s+that\s*[,;:.!\u2014-]*\s*"
                     r"(?=(?:how|what|which|did|does|is|are|was|were|why|when|where)\b[^.;!]*\?\s*$)")  # fmt: skip


def _name_corrected_last(text: str, known: set[str]) -> str:
    """`text` with the one known name before a correction at its end replaced by the name the correction says."""
    found = re.search(NAME_CORRECTED_LAST, text, flags=re.I)
    if not found or not _known_name(found.group(1), known):
        return text
    named = [
        word for word in re.finditer(NAME_WORD, text[: found.start()], flags=re.I) if _known_name(word.group(0), known)
    ]
    if len({word.group(0).lower() for word in named}) != 1:
        return text
    before = text[: found.start()]
    for word in reversed(named):
        before = before[: word.start()] + found.group(1) + before[word.end() :]
    return before + text[found.start() : found.start() + 1].strip(",;")


def _known_name(word: str, known: set[str]) -> bool:
    """Whether `word` is a run's, a sweep's or a file's name the repository holds ("r1", "runs/r1")."""
    return word.lower().split("/", 1)[-1] in known and (
        word.count("/") == 0 or word.lower().startswith(("runs/", "sweeps/"))
    )


def _asked(mark: str) -> str:
    """The question or exclamation mark of the words taken back, which the sentence keeps."""
    return "".join(sign for sign in mark if sign in "?!")


def _name_taken_back(found: re.Match, known: set[str]) -> str:
    first, mark, last = found.groups()
    if not re.search(r"\bi\s+meant?\b", found.group(0), flags=re.I):  # "cancel tp-try, sorry, r1": both known names
        return last + _asked(mark) if _known_name(first, known) and _known_name(last, known) else found.group(0)
    if all(word.lower() in known or re.search(r"[\d/.-]", word) for word in (first, last)):
        return last + _asked(mark)  # ("benchmark r1. I meant it": "it" is no name, and r1 stays) (a question
        # stays one: "did r1 finish? sorry, I meant tp-try")
    return found.group(0)


# A value said, then taken back for the setting's default ("lr 5e-4 - actually wait, keep the default lr", "warmup 10,
# no, leave the warmup at its default", "80 steps... actually just use the default steps"): no value of that setting
# is left. Only the same setting's default takes it back ("lr 5e-4, actually keep the default seed" keeps the lr).
_SETTING_SAID = rf"(?:{'|'.join(SETTING_NAMES.values())})"
_DEFAULT_WORD = r"(?:default|usual|standard|stock|configured)"
_KEEP = r"(?:keep|leave|use|go\s+with|stick\s+(?:with|to)|stay\s+(?:with|on))"
DEFAULT_KEPT = (rf"(?:\b(?:set\s+)?(?:the\s+)?(?P<name>{_SETTING_SAID})\s*(?:[=:]|\bto\b|\bof\b|\bat\b)?\s*"
                r"(?<![\w.])\d+(?:\.\d+)?(?:e-?\d+)?k?\b(?!\.\d)|(?<![\w.])\d+\s+(?P<count>steps|trials))"
                r"\s*(?:[,;.]+|[\u2014\u2013]+|\s-{1,2})?\s*"
                r"(?:(?:actually|wait|no|nope|sorry|hmm+|um+|uh+|oh|on\s+second\s+thought|scratch\s+that|"
                r"never\s*mind)\s*[,!.]*\s*)+(?:just\s+)?"
                rf"(?:{_KEEP}\s+(?:the|its|our)\s+{_DEFAULT_WORD}\s+(?P<again>{_SETTING_SAID}|steps|trials)"
                r"(?:\s+(?:count|number))?|"
                rf"(?:keep|leave)\s+(?:the\s+)?(?P<kept>{_SETTING_SAID}|steps|trials)\s+(?:at|as|on)\s+"
                rf"(?:the|its)\s+{_DEFAULT_WORD})\b")  # fmt: skip


def _setting_key(said: str) -> str:
    """The key a setting's name says ("learning rate" and "lr" are one), or the counted noun itself."""
    said = said.lower()
    return next((key for key, name in SETTING_NAMES.items() if re.fullmatch(name, said)), said)


def _default_kept(found: re.Match) -> str:
    first = found.group("name") or found.group("count")
    again = found.group("again") or found.group("kept")
    return "" if _setting_key(first) == _setting_key(again) else found.group(0)


# A mind changed in the middle of the sentence, set off by dashes or commas: the value said last counts ("on 4 —
# actually no, make it 2 — GPUs" is 2 GPUs, "40 steps, no, make it 60" 60 steps, "warmup 3 — no, make the warmup 2" a
# warmup of 2).
_ASIDE = r"\s*(?:[—–]+|\s-{1,2}\s|,)\s*"
NUMBER_CHANGED = (rf"(?<![\w.])\d+(?:\.\d+)?(\s+[a-z]+)?{_ASIDE}(?:(?:actually|wait|hmm|oh|um|uh)\s*,?\s*)?"
                  r"(?:no|nope|sorry)\b(?:\s*,?\s*(?:wait|actually))?[\s,!.]*"
                  # "the micro batch in 8 — no, in 4": the ESL "in" a setting's value is said with, said again
                  r"(?:make\s+(?:it|that)|make\s+the\s+[a-z][a-z ]{0,30}?|i\s+mean|rather|change\s+it\s+to|in)\s+"
                  rf"(\d+(?:\.\d+)?)(?:\s*[—–]+\s*|\s+-{{1,2}}\s+|(?=[\s,.;!?]|$))")  # fmt: skip


# An order taken back and another given at once: "cancel r1. Scrap that, cancel tp-try", "cancel r1, nein, warte,
# cancel tp-try" are the last order alone; "cancel r1. Scrap that, benchmark it" the benchmark alone ("it" then names
# nothing: asked about, never the cancel).
_ORDER_VERBS = r"cancel|stop|kill|abort|launch|train|resume|benchmark|evaluate|plan|sweep|open|write|update|show|read"
ORDER_REPLACED = (rf"\b(?:{_ORDER_VERBS})\b[^.;!?—–]*?[\s,.;!—–-]+"
                  r"(?:(?:no|nein|non|nope)\s*,?\s*(?:wait|hang\s+on|hold\s+on)|scrap\s+that|scratch\s+that)"
                  rf"\s*[,.;:!—–-]*\s*(?=(?:{_ORDER_VERBS})\b)")  # fmt: skip


# A count refused, then the launch ordered on another "instead": "avoid launching anything on 8 GPUs; launch on 2
# instead" is "launch on 2 GPUs instead of 8" (the refusal kept as the count refused, never read as the one to use).
COUNT_AVOIDED_THEN_INSTEAD = (r"\b(?:avoid|don'?t|do\s+not|never)\s+(?:launch|run|train|start)\w*\s+"
                              r"(?:anything\s+|it\s+|a\s+run\s+)?on\s+(\d+)\s+(gpus?|cards?|devices?)\s*[;,.]\s*"
                              r"((?:launch|run|train|start)\w*\s+(?:it\s+)?on\s+\d+)(?:\s+\2)?"
                              r"\s+instead\b")  # fmt: skip


# A value taken back before the order that replaces it: "forget what I said about 8, launch on 2 GPUs" (the 8 no
# value of this order; said alone, with no order after it, it is left as said).
VALUE_FORGOTTEN = (r"\b(?:forget|ignore|disregard|scratch)\s+(?:what\s+i\s+said|my\s+(?:earlier\s+)?\w+)\s+about\s+"
                   r"(?:the\s+)?\d+(?:\.\d+)?(?:\s+[a-z]+)?\s*[,;:—–]\s*"
                   r"(?=(?:launch|run|train|start|plan|use)\b)")  # fmt: skip


# A count changed in the next sentence on second thought: "launch 8 GPUs. On second thought, make it 4" is 4 GPUs (the
# value said last counts); "make it 4 nodes", another noun than the first value's, is left as said (asked about).
NUMBER_RETHOUGHT = (r"(?<![\w.])\d+(?:\.\d+)?(\s+[a-z]+)?\s*[.;,—–]+\s*(?:on\s+)?second\s+thoughts?\s*[,—–]?\s*"
                    r"(?:make\s+(?:it|that)|i\s+mean|change\s+it\s+to)\s+(\d+(?:\.\d+)?)(?:\1)?"
                    r"(?=\s*(?:[,.;!?]|$))")  # fmt: skip


def _number_changed(found: re.Match) -> str:
    ends_apart = found.group(0)[-1].isspace() or found.group(0)[-1] in "—–-"
    return f"{found.group(2)}{found.group(1) or ''}{' ' if ends_apart else ''}"


# A switch said to stay as the launch before had it ("same AC, but without torch.compile", "same packing, 40 steps"):
# that launch again, the switch neither on nor off ("same packing as r1" names what it copies: read as said).
SWITCH_KEPT_SAME = (r"\bsame\s+(?:ac|activation[ _-]?checkpointing|packing|torch\.?\s?compile|compile)"
                    r"(?:\s+(?:setting|settings|state))?\b(?!\s*(?:as|like|of|than)\b)")  # fmt: skip


# A switch's state taken back in an aside and said again after it: "activation checkpointing off — wait, r1 had it
# off? — fine, then turn activation checkpointing ON": the state said again counts; the first and the aside are dropped.
SWITCH_RESTATED = (r"\b((?:[a-z]+\s+){0,2}[a-z]+)\s+(?:on|off|enabled|disabled)\s*[—–]+\s*"
                   r"(?:wait|hmm|actually|hold on)\b[^—–]*[—–]+\s*"
                   r"(?:(?:fine|ok(?:ay)?|alright|right|so)\s*[,.!]?\s*)+(?:then\s*,?\s*)?"
                   r"(?=(?:(?:turn|switch|set|keep|make|leave|put|have)\s+)?(?:it\s+|the\s+)?\1\b)")  # fmt: skip


# Activation checkpointing described, after a vague name of it ("the memory-saving mode turned on, the one that
# recomputes things instead of keeping them around"): its name, with the state said of the vague one.
_VAGUE_FEATURE = r"(?:mode|option|feature|setting|thing|trick)"
RECOMPUTING_DESCRIBED = (rf"\b(?:the\s+)?(?:[\w-]+\s+){{0,2}}?{_VAGUE_FEATURE}\b(?P<state>[^,.;]{{0,25}}?),?\s+"
                         rf"(?:the\s+)?(?:one|{_VAGUE_FEATURE})\s+(?:that|which)\s+recomput\w*\s+[^,.;]{{0,40}}?"
                         r"(?:instead of|rather than)\s+(?:keeping|storing|saving|holding)\s+(?:them|it)"
                         r"(?:\s+(?:around|in memory))?")  # fmt: skip


# A power of ten said in words, negative ("one times ten to the minus four", "1 times 10 to the -4", "ten to the
# minus three"): the e-notation a rate is read in (number words are digits by then, save a lone "one"). A positive
# power said so ("10 to the 4") may be a count or a range: left as said.
SPOKEN_POWER_OF_TEN = (r"(?:\b(\d+(?:\.\d+)?|one)\s+(?:times|x)\s+)?\b10\s+to\s+the\s+(?:power\s+(?:of\s+)?)?"
                       r"(?:minus\s+|negative\s+|-\s*)(\d+)(?:th)?(?:\s+power)?\b")  # fmt: skip


def _spoken_power_of_ten(found: re.Match) -> str:
    mantissa = found.group(1) or "1"
    return f"{'1' if mantissa.lower() == 'one' else mantissa}e-{found.group(2)}"


# A sequence length said as how long a sequence is: "the sequence were 8192 tokens long", "sequences are 2k tokens
# long", "sequences 2048 long" (the tokens unsaid) (a negation between, "are not 4096 tokens long", is no length to
# plan with: left as said).
TOKENS_LONG = (r"\b(?:the\s+|each\s+|every\s+|our\s+|my\s+)?(?:sequences?|samples?|contexts?)\s+"
               r"(?:(?:is|are|was|were|be|being|get|gets|got|became|become)\s+)?(?:(?:all|each|now|only|just)\s+)?"
               r"(\d+)\s*(k?)(?:[ -]?tokens?)?[ -]long\b")  # fmt: skip
# A GPU's memory said after the word for its version, before the GPU, as French or Spanish order it ("the version
# 80GB of the a100", "la variante de 40 gb de la A100"): the GPU of that memory, as "the 80GB version of the a100".
MEMORY_VERSION_OF = (r"\b(version|variant|edition|flavou?r)\s+(?:of\s+|with\s+|de\s+)?(\d+)\s*(?:gi?b|gigs?|g)\b"
                     r"(?=\s+(?:of|de|for)\s+(?:the\s+|an?\s+|la\s+|l')?(?:nvidia\s+)?(?:h100|h200|a100|l40s|a10|"
                     r"b200|v100|mi\d{3}x?)s?\b)")  # fmt: skip


# An experiment file said as a version of the experiment ("the longer-sequence version of the experiment", "the long
# variant of the config"): that config by its stem, as "the long-sequence experiment" says it.
VERSION_OF = (r"\b((?:[a-z]+[\s-])?[a-z]+)\s+(?:version|variant|flavou?r)\s+of\s+(?:the|our|my|this)\s+"
              r"(?=(?:experiment|config(?:uration)?)\b)")  # fmt: skip


# A comment after the request, as a shell line has one ("... compile OFF  # tp-try oom'd w/o ckpt"): where it only
# says what happened before (a past event, a reason), it sets nothing and is left out. One that could order, hold back
# or ask anything ("# no compile", "# not before 5pm", "# launch later?") is read as said.
COMMENT = r"(?<=\S)[ \t]+#[ \t]+([^\n#]+)$"
COMMENT_EXPLAINS = (r"\b(?:oom'?d|oomed|ooms|crash\w*|fail\w*|died|broke|blew\s+up|was|were|had|did|because|since|"
                    r"bc|cuz|fyi|last\s+time|previously|earlier|yesterday)\b")  # fmt: skip
COMMENT_ORDERS = (r"\?|\b(?:launch|run|start|train|cancel|stop|kill|resume|push|pr|merge|sweep|plan|wait|hold|later|"
                  r"tomorrow|tonight|until|after|before|when|once|if|then|now|please|pls|don'?t|do\s+not|never|"
                  r"set|use|make|turn|keep|enable|disable)\b")  # fmt: skip


def _explaining_comment(text: str) -> str:
    """`text` without a trailing comment that only explains (COMMENT)."""
    found = re.search(COMMENT, text)
    if not found or re.search(COMMENT_ORDERS, found.group(1), re.I):
        return text
    return text[: found.start()] if re.search(COMMENT_EXPLAINS, found.group(1), re.I) else text


# Settings written as JSON ("launch {"nproc": 4, "steps": 40, "packing": false}", a bare `"gpu": "h200"`): each pair
# as the `key=value` the parser reads. A call's own argument keeps its name, a key of the trainer's config said without
# its section gets it ("packing" is data.packing), an "overrides" object is unwrapped; a key the parser does not know
# is left as JSON, so that it is asked about (questions.UNKNOWN_JSON_KEY), never dropped.
JSON_PAIR = (r'"(?P<key>[A-Za-z_][\w.-]*)"\s*:\s*'
             r'(?P<value>"[^"\\]*"|-?(?:\d+(?:\.\d*)?|\.\d+)(?:e-?\d+)?|true|false)(?=\s*[,}\]]|\s*$|\s)')  # fmt: skip
JSON_OVERRIDES_OPEN = r'"(?:overrides|set)"\s*:\s*[{\[]'
CALL_KEYS = {"nproc", "layout", "steps", "model", "gpu", "devices", "nodes", "seq_len", "experiment", "trials",
             "sweep", "run", "memory", "metric", "path"}  # fmt: skip
SECTIONS = {"data": DataSpec, "train": TrainSpec}
SECTION_KEYS = {section: {field.name for field in fields(spec)} for section, spec in SECTIONS.items()}


def _json_key(key: str) -> str | None:
    """The key a JSON pair's key stands for, or None where the parser does not know it."""
    if "." in key or key in CALL_KEYS:
        return key
    sections = [section for section, names in SECTION_KEYS.items() if key in names]
    return f"{sections[0]}.{key}" if len(sections) == 1 else None


def _json_pair(found: re.Match) -> str:
    key = _json_key(found.group("key"))
    return f"{key}={found.group('value').strip(chr(34))}" if key else found.group(0)


def _json_settings(text: str) -> str:
    if not re.search(JSON_PAIR, text):
        return text
    text = re.sub(JSON_OVERRIDES_OPEN, " ", text)
    text = re.sub(JSON_PAIR, _json_pair, text)
    if re.search(r'"[\w.-]+"\s*:', text):
        return text  # a key left as JSON: asked about with its object as said
    return re.sub(r"[{}\[\]]", " ", text)  # the object's braces gone once its pairs are read ("{nproc=4, steps=40}")


def normalise(text: str, known: set[str] | frozenset[str] = frozenset()) -> str:
    """`text` with typos fixed and numbers written as digits; case and paths kept."""
    known = {k.lower() for k in known}
    text = _explaining_comment(text)
    text = _json_settings(text)
    text = _key_value_lines(text)
    text = _heading_picked(text)
    text = _list_labels(text)
    text = _math_notation(text)
    text = re.sub(MEMORY_IN_BRACKETS, _memory_in_brackets, text, flags=re.I)
    text = re.sub(DONE_MYSELF, "", text, flags=re.I)
    text = re.sub(PRICE, "a price", text, flags=re.I)
    text = re.sub(NUMBERED_NAME, r"\1", text, flags=re.I)
    text = _slurm(text)
    text = re.sub(SUFFIX, _suffix_typo, text, flags=re.I)
    text = _plan_short_flags(text)
    text = re.sub(FLAG, _flag, text, flags=re.I)
    text = re.sub(KEY_SET_TO, r"\1=\2", text, flags=re.I)
    text = _compounds(text)
    text = re.sub(VALUE_AT_FOREIGN, r"\1 at ", text, flags=re.I)
    text = _patois(text)
    text = _archaic(text)
    text = re.sub(LET_BE, r"set \1 to ", text, flags=re.I)
    text = re.sub(SEQUENCES_OF, r"\1\2 tokens", text, flags=re.I)
    text = _portuguese(text)
    text = _spanish(text)
    text = _italian(text)
    text = _hinglish(text, known)
    text = _french(text)
    text = _german(text)
    text = re.sub(r"(?<![\w'./=-])(" + "|".join(FOREIGN) + r")(?![\w'./=-])", _foreign, text, flags=re.I)
    text = re.sub(FOREIGN_OR, r"\1or\2", text, flags=re.I)
    text = re.sub(NODES_EACH_OF, _nodes_each_of, text, flags=re.I)
    text = re.sub(PER_NODE_SAID, "per node", text, flags=re.I)
    text = re.sub(FALSE_FRIEND_UPDATE, r"updat\1", text, flags=re.I)
    text = _fix_typos(text, known)
    for said, name in SHORT_SETTING_NAMES.items():
        text = re.sub(said, name, text, flags=re.I)
    text = re.sub(INSTEAD_BEFORE_NOUN, r"\1 \3 instead of \2", text, flags=re.I)
    for said, precision in PRECISION_NAMES.items():
        text = re.sub(rf"(?<![\w./-])(?:{said})(?!\.?[\w/-])", precision, text, flags=re.I)  # no file's name
    text = re.sub(GRAD_CHECKPOINTING, "activation checkpointing", text, flags=re.I)
    text = re.sub(TO_BE_STATE, "should be ", text, flags=re.I)
    text = re.sub(NOT_TO_BE_TOUCHED, "stays untouched", text, flags=re.I)
    text = re.sub(SWITCH_NOT_TO_BE_USED, r"\1 off", text, flags=re.I)
    text = re.sub(OPEN_SWITCH, "turn on ", text, flags=re.I)
    text = re.sub(CLOSE_SWITCH, "turn off ", text, flags=re.I)
    text = re.sub(VALUE_IN, r"\1 at ", text, flags=re.I)
    text = re.sub(SEQ_LEN_FRACTION_K, _seq_len_fraction, text, flags=re.I)
    text = re.sub(NAME_TAKEN_BACK, lambda found: _name_taken_back(found, known), text, flags=re.I)
    text = _name_corrected_last(text, known)
    text = re.sub(REQUEST_SCRATCHED, "", text, flags=re.I)
    text = re.sub(LAYOUT_KEY, _layout_key, text, flags=re.I)
    text = re.sub(r"(?<![\w'./=-])(" + "|".join(SHORTHAND) + r")(?![\w'./=-])", _shorthand, text, flags=re.I)
    text = re.sub(DROPPED_G, _dropped_g, text, flags=re.I)
    text = re.sub(SWEEP_ARMS, lambda found: f"{found.group(1) or found.group(2)} trials", text, flags=re.I)
    text = re.sub(LUNCH_THE, _lunch, text, flags=re.I)
    text = re.sub(REPOT, "report", text, flags=re.I)
    text = re.sub(PULL_REQUEST_TYPO, "pull request", text, flags=re.I)
    for said, words in TOOL_NAME_TYPED.items():
        text = re.sub(said, words, text, flags=re.I)
    text = re.sub(SEPARATED_OFF, r"\1 off \2", text, flags=re.I)
    text = re.sub(r"\bapiece\b", "each", text, flags=re.I)  # "four L40S apiece."
    # the launcher's key said bare, as the flag is ("--nproc 4"): "nproc 4", "nproc=4", "nproc_per_node: 8"
    text = re.sub(r"(?<![\w-])n_?procs?(?:[_-]per[_-]node)?\s*[=:]?\s*(\d+)\b(?!\.\d)", r"\1 processes", text,
                  flags=re.I)  # fmt: skip
    text = re.sub(r"(?<![\w.-])([1-9]|1[0-6])p\b", r"\1 processes", text, flags=re.I)  # "ddp 2p 40 steps"
    text = re.sub(SHORT_PROCESSES, r"\1 processes", text, flags=re.I)
    text = re.sub(SHORT_STEPS, lambda found: f"{found.group(1) or found.group(2)} steps", text, flags=re.I)
    text = re.sub(GLUED_OFF, r"no \1", text, flags=re.I)
    text = re.sub(GALORE, "galore_adamw", text, flags=re.I)
    text = re.sub(r"(?<![\w./-])cfg(s?)(?![\w./-])", r"config\1", text, flags=re.I)  # "long cfg"
    text = re.sub(VERSION_OF, r"\1 ", text, flags=re.I)
    text = re.sub(RECOMPUTING_DESCRIBED, r"activation checkpointing\g<state>", text, flags=re.I)
    # a count after its noun, as a list or a form gives it: "processes: 2", "gpus=4" ("on 8 gpus: 2 replicas" counts
    # the gpus before)
    # ("a10 devices=4": a number before "=" is no count of the noun, as one before ":" may be)
    text = re.sub(COUNT_AFTER_NOUN, lambda found: _count_after_noun(found, text), text, flags=re.I)
    text = re.sub(WEIGHT_FOR, lambda found: f"{found.group(1)}wait{found.group(2) or ''}", text, flags=re.I)
    text = re.sub(RIGHT_UP, r"\1write", text, flags=re.I)
    text = re.sub(r"(?<![\w./])w/(?!o\b)\s*(?=[a-z0-9])", "with ", text, flags=re.I)  # "w/ dp_shard"; "w/o" stays
    text = re.sub(YES_NO, "?", text, flags=re.I)
    text = re.sub(NO_TAG, ", right?", text, flags=re.I)
    text = re.sub(PERMISSION, "could you ", text, flags=re.I)
    text = re.sub(MIND_DOING, _mind_doing, text, flags=re.I)
    text = re.sub(ASK_YOU_TO, "could you ", text, flags=re.I)
    text = re.sub(TICKET_LABEL, "", text)
    text = re.sub(OUT_OF_SCOPE, "no ", text, flags=re.I)
    # dictated GPU names before numbers are composed: "a one hundred forty gig" is an A100 of 40 GiB, not 140
    # "h" said as it sounds ("eight age one hundreds", "aitch two hundred"), "a" or "h" before the number
    text = re.sub(r"\b(?:age|aitch|haitch)\s+(?=(?:one|two)\s+hundred)", "h ", text, flags=re.I)
    text = re.sub(r"\b([ah])\s+one\s+hundred(s?)\b", r"\g<1>100\2", text, flags=re.I)
    text = re.sub(r"\bh\s+two\s+hundred(s?)\b", r"h200\1", text, flags=re.I)
    # "a few hundred steps" is no number (entities.VAGUE_COUNT asks how many), never 100: kept from the number words
    text = re.sub(r"\b(a few|a couple(?: of)?|couple of|several|some|many)\s+(hundred|thousand|dozen)\b", r"\1 \2s",
                  text, flags=re.I)  # fmt: skip
    text = re.sub(r"\b(?:half\s+a|a\s+half)\s+dozen\b", "6", text, flags=re.I)  # "half a dozen trials"
    text = re.sub(r"\b(?:a|one)\s+dozen\b", "12", text, flags=re.I)
    text = re.sub(SPOKEN_NAME, lambda found: _spoken_name(found, known), text, flags=re.I)
    text = re.sub(SPOKEN_DIGITS, _spoken_digits, text, flags=re.I)
    text = re.sub(RADIO_EXPONENT, _radio_exponent, text, flags=re.I)
    text = re.sub(RADIO_DIGITS, _spoken_digits, text, flags=re.I)
    text = re.sub(HOMOPHONE_COUNT, _homophone, text, flags=re.I)
    # a decimal dictated from "zero point" digit by digit ("zero point zero zero one" is 0.001); "zero" alone stays
    text = re.sub(rf"\bzero\s+point((?:\s+(?:zero|oh|{_DIGIT}))+)\b", _dictated_decimal, text, flags=re.I)
    text = NUMBER_RUN.sub(_digits, text)
    text = re.sub(r"\b(\d+)\s*\(\1\)", r"\1", text)  # "two (2) nodes", as a contract writes it: one number
    text = re.sub(PARTS_IN, lambda found: _fraction(int(found.group(1)), int(found.group(2))), text, flags=re.I)
    text = re.sub(FRACTION_WORDS, _fraction_words, text, flags=re.I)
    if not re.search(r"\b(?:bench\w*|eval\w*|suite)\b", text, re.I):
        text = re.sub(SLURM_TASKS, lambda found: "{} {} processes".format(*filter(None, found.groups())), text,
                      flags=re.I)  # fmt: skip
    text = re.sub(r"\b(\d+)\s+dozen\b", lambda m: str(12 * int(m.group(1))), text, flags=re.I)
    text = re.sub(DEFAULT_KEPT, _default_kept, text, flags=re.I)
    text = re.sub(NUMBER_CHANGED, _number_changed, text, flags=re.I)
    text = re.sub(ORDER_REPLACED, "", text, flags=re.I)
    text = re.sub(VALUE_FORGOTTEN, "", text, flags=re.I)
    text = re.sub(COUNT_AVOIDED_THEN_INSTEAD, r"\3 \2 instead of \1", text, flags=re.I)
    text = re.sub(NUMBER_RETHOUGHT, lambda found: f"{found.group(2)}{found.group(1) or ''}", text, flags=re.I)
    text = re.sub(RATE_RESTATED, r"\1", text, flags=re.I)
    text = re.sub(NUMBER_RESTATED, _number_restated, text, flags=re.I)
    text = re.sub(GPU_TAKEN_BACK, _gpu_taken_back, text, flags=re.I)
    text = re.sub(SWITCH_RESTATED, "", text, flags=re.I)
    text = re.sub(SWITCH_KEPT_SAME, "same", text, flags=re.I)
    text = re.sub(WARMUP_STEPS, _warmup_steps, text, flags=re.I)
    text = re.sub(r"\b(\d+)\s+warm[\s-]?up\s+(?:steps?|iters?|iterations?)\b", r"warmup \1", text, flags=re.I)
    # "set the lr to like 3e-4": "like" a filler before the value, as speech has it
    text = re.sub(r"\b(to|=|is|at|of|with|for|on|about)\s+like\s+(?=\d)", r"\1 ", text, flags=re.I)
    if re.search(r"\bsweep", text, re.I):  # "a sweep with 4 tries": its trials
        text = re.sub(r"\b(\d+)\s+(?:tries|attempts)\b", r"\1 trials", text, flags=re.I)
    # "1 e minus 3", "1e minus 3" (said or typed loosely): the number 1e-3
    text = re.sub(r"\b(\d+(?:\.\d+)?)\s*e\s*minus\s*(\d+)\b", r"\1e-\2", text, flags=re.I)
    text = re.sub(SPOKEN_POWER_OF_TEN, _spoken_power_of_ten, text, flags=re.I)
    text = re.sub(TOKENS_LONG, r"seq_len \1\2", text, flags=re.I)
    text = re.sub(MEMORY_VERSION_OF, r"\2GB \1", text, flags=re.I)
    text = re.sub(RATE_CRITICISED, _rate_criticised, text, flags=re.I)
    text = re.sub(r"\b(\d+(?:\.\d+)?)\s+times\s+(?=as\b|longer\b|more\b|the\b)", r"\1 x ", text, flags=re.I)
    # "2 of those nodes", "4 of these cards": the count of that noun
    # ("4 of them" is a pronoun's count, no noun after it: below, once the GPU named before is known to be its noun)
    # ("8 of the 40 gig A100s": the memory said before the GPU's name too)
    # ("4 of those and seq len 4096": a word that joins on is no noun; "4 of them" is read below)
    text = re.sub(r"\b(\d+)\s+of\s+(?:those|these|the|our|my)\s+(?=(?!(?:and|or|but|plus|with|at|on|in|for|to|instead|"
                  r"now|then|too|please|each|apiece|if|so)\b)[a-z]|\d+(?:\.\d+)?\s*(?:gi?b|gigs?|g)\b)", r"\1 ",
                  text, flags=re.I)  # fmt: skip
    # "8 of H200", "4 of the A100s": the count of that GPU ("1 of 8 gpus" is no count of it)
    text = re.sub(rf"\b(\d+)\s+of\s+(?=(?:{GPU_WORD})(?![\w-]))", r"\1 ", text, flags=re.I)
    text = re.sub(r"(\d),(\d{3})\b", r"\1\2", text)  # 1,000 steps
    text = re.sub(r"(?<![\w.])\.(\d+)\b(?!\.)", r"0.\1", text)  # "lr .0005": a decimal without its leading zero
    text = re.sub(RACKS_OF_NODES, _nodes_in_racks, text, flags=re.I)
    text = re.sub(r"\b(\d+)-(?=[a-z])", r"\1 ", text, flags=re.I)  # a 30-step run, 2-way TP
    # "2n x 4g", "2 nodes x 4g": the GPUs in each node said by a "g" after their count, no memory (before "80g" is read)
    text = re.sub(r"\b(\d+)\s*(?:n|nodes?)\s*[x×*]\s*(\d+)\s*g\b(?!\w)", r"\1 nodes of \2 gpus", text, flags=re.I)
    # "2 gigas of tokens", "5 gigs of text": so much data (2e9 tokens), no memory; no argument takes it (asked about)
    text = re.sub(GIGA_DATA, r"\1e9 ", text, flags=re.I)
    text = re.sub(r"\b(\d+(?:\.\d+)?)\s*gig(?:s|as?)?\b|\b(\d+(?:\.\d+)?)\s*g\b(?!\w)", _gig, text, flags=re.I)
    text = re.sub(GIGABYTES, r"\1GB", text, flags=re.I)
    text = re.sub(GIBIBYTES, r"\1GiB", text, flags=re.I)
    text = re.sub(MEMORY_HAD, "with ", text, flags=re.I)
    # "4n x 8 a100", "2n8g": nodes counted in shorthand, before the GPUs in each ("4n" alone stays as said)
    text = re.sub(r"\b(\d+)n(\d+)g(?:pus?)?\b", r"\1 nodes of \2 gpus", text, flags=re.I)
    text = re.sub(r"\b(\d+)n(?=\s*[x×*]\s*\d)", r"\1 nodes", text, flags=re.I)
    # "2 nodes × 8 H100", "2 machines x 4 gpus": the GPUs in each node
    text = re.sub(rf"\b(\d+\s+(?:nodes?|machines?|servers?|hosts?|boxes))\s*[x×*]\s*(\d+)\s+(?=(?:{GPU_WORD}|gpus?|"
                  r"cards?|devices?)\b)", r"\1 of \2 ", text, flags=re.I)  # fmt: skip
    text = re.sub(NODES_THEN_EACH, r"\1 with \2 ", text, flags=re.I)
    text = re.sub(NODES_OF_THOSE, r"\1 of \2", text, flags=re.I)
    # "PCIe H100s", "NVL H100": the variant said before the card's name is its variant ("h100 pcie")
    # ("the PCIe variant of the H100", "the NVL version of an H100": the variant named as a kind of the card)
    text = re.sub(VARIANT_OF_CARD, r"\2 \1", text, flags=re.I)
    text = re.sub(r"\b(sxm\d?|pcie|nvl)[\s-]+(h100|h200|a100)s?\b", r"\2 \1", text, flags=re.I)
    text = re.sub(VARIANT_REFUSED, _variant_instead, text, flags=re.I)
    text = _variant_alone_instead(text)
    text = _variant_corrected(text)
    # "2x8 a100", "4 x 8 H100s": nodes by the GPUs in each (a count of GPUs is one number, "16 a100")
    text = re.sub(rf"\b(\d+)\s*[x×*]\s*(\d+)\s+(?=(?:{GPU_WORD}|gpus?|cards?|devices?)\b)", r"\1 nodes of \2 ", text,
                  flags=re.I)  # fmt: skip
    text = re.sub(r"\b(\d+)\s*x\b(?=\s*[a-z])", r"\1 x", text, flags=re.I)  # 4x RTX 4090, 8x h100
    # "8/node", "8 gpus/box": a count in each node
    text = re.sub(r"\b(\d+(?:\s+[a-z][\w-]*)?)\s*/\s*(node|machine|box|host|server|computer)\b", r"\1 per \2", text,
                  flags=re.I)  # fmt: skip
    text = re.sub(rf"\b(?:a|one) single(?: one)?\b|\bsingle\b(?=\s+(?:process|proc|gpu|card|device|node|machine|rank|"
                  rf"{GPU_WORD}(?![\w-])))", "1", text, flags=re.I)  # fmt: skip  # "single RTX 4090" too
    text = re.sub(r"\b(?:a\s+)?(?:pair|couple)\s+of\b", "2", text, flags=re.I)  # "a pair of 4090s"
    # dictated GPU names: "h 100" is h100, "4 a 100" is 4 a100 (a count before "a" makes it no article)
    text = re.sub(r"\bh[\s-]+(100|200)(s?)\b", r"h\1\2", text, flags=re.I)  # "h-100s" too
    text = re.sub(r"\ba-(100|10)(s?)\b", r"a\1\2", text, flags=re.I)
    text = re.sub(r"\b(\d+\s+)a\s+(100|10)\b", r"\1a\2", text, flags=re.I)
    # "4 A100 80s", "the H100 80": a memory size after the name of a card sold in several, written as its model is
    # called, without a unit
    text = re.sub(rf"\b((?:a100|h100|h200)s?)[\s-]+({CARD_SIZES})s?\b(?![.\d]|\s*(?:gi?b|gigs?|g|steps?|gpus?|cards?|"
                  r"process\w*|procs?|nodes?|trials?|x|minutes?|mins?|hours?|seconds?|times|tokens?|percent)\b|%)",
                  r"\1 \2GiB", text, flags=re.I)  # fmt: skip
    # "2 A100 of 40 GB", "H100s with 80GB", "8 A100 da 80GB": the card's memory, written as the card's name says it
    # ("A100 40 GB"), joined by a preposition in any language; only for the cards whose presets are named by their
    # memory (an "a10 with 24GB" is the one A10)
    # ("16 A100 devices of 80GB": the devices' noun between, after the name)
    text = re.sub(r"\b((?:h100|h200|a100)s?)\s+(?:(gpus?|cards?|devices?)\s+)?(?:of|with|da|de|di|del|con|mit|von|"
                  r"avec|com)\s+(\d+(?:\.\d+)?\s*(?:gi?b|gigs?|g)\b)", lambda m: f"{m.group(1)} {m.group(3)}"
                  + (f" {m.group(2)}" if m.group(2) else ""),
                  text, flags=re.I)  # fmt: skip
    # "both GPUs", "both our GPUs", "both of the cards": two of them
    text = re.sub(r"\bboth\s+(?:of\s+)?(?:(?:our|my|the|your|their)\s+)?"
                  r"(?=(?:gpus|cards|devices|nodes|machines|boxes)\b)", "2 ", text, flags=re.I)  # fmt: skip
    text = re.sub(r"\b(\d+)\s+(?:such|identical|similar|more such)\s+(?=[a-z])", r"\1 ", text, flags=re.I)
    text = re.sub(REPLICAS_OF_SHARDS, _replicas_of_shards, text, flags=re.I)
    # a size or kind said of counted machines is no part of their count: "3 wee servers", "2 beefy boxes"
    text = re.sub(rf"\b(\d+)\s+{MACHINE_ADJECTIVES}\s+(?=(?:nodes?|machines?|servers?|boxes|hosts?|computers?)\b)",
                  r"\1 ", text, flags=re.I)  # fmt: skip
    text = re.sub(r"\bctx\b", "context", text, flags=re.I)
    # "mb 4", "mbs=8": the micro batch by its short form, a number after it ("512 mb" is megabytes, the number before)
    text = re.sub(r"(?<![\d.])(?<!\d\s)\bmbs?\s*[=:]?\s*(?=\d+\b(?!\s*(?:gi?b|mb|gb)\b))", "micro batch ", text,
                  flags=re.I)  # fmt: skip
    text = re.sub(r"(?<![\w.])mbs?(?=\d+\b)", "micro batch ", text, flags=re.I)  # "mb4" ("4mb" is megabytes)
    text = re.sub(BATCH_SIZE, _batch_size, text, flags=re.I)
    text = re.sub(REFUSED_AFTER, r"no \1\2", text, flags=re.I)
    text = re.sub(FORBIDDEN_AFTER, r"no \1\2", text, flags=re.I)
    text = re.sub(KEPT_AWAY, _kept_away, text, flags=re.I)
    # a stage said alone beside ZeRO ("not full zero-3, stage 1 only") is ZeRO's stage; beside pipeline words a stage
    # is the pipeline's
    if re.search(r"\bzero\b", text, re.I) and not re.search(r"\bpipelin\w*|\bpp\b|\bstages\b", text, re.I):
        text = re.sub(r"(?<!zero )(?<!zero-)\bstage\s*([123])\b", r"zero stage \1", text, flags=re.I)
    # a mesh dimension glued to its degree ("tp2", "pp4"), as "shard2" is: the dimension of that degree
    text = re.sub(r"\b(tp|pp|cp|ep)(\d+)\b", lambda found: found.group(0) if found.group(0).lower() in known else
                  f"{found.group(1)}={found.group(2)}", text, flags=re.I)  # fmt: skip
    text = re.sub(SPLIT_WORDS, lambda found: found.group(0).replace(" ", "").lower(), text, flags=re.I)
    text = re.sub(SUITE_HOMOPHONE, r"\1 suite", text, flags=re.I)
    text = re.sub(MORE_ADJECTIVE, _comparative, text, flags=re.I)
    text = re.sub(PUT_ON, r"set \1 to ", text, flags=re.I)
    text = re.sub(MOVED_TO, r"\1 to ", text, flags=re.I)
    text = re.sub(NOT_DEFAULT, _not_default, text, flags=re.I)
    text = re.sub(NOT_THAT_VALUE, r"\g<at>\g<value> \g<noun>", text, flags=re.I)
    text = re.sub(COMPARED_CONFIG, lambda found: _config_stem(found, known), text, flags=re.I)
    text = _dictated(text)
    text = re.sub(r"\b(tee|pee|see|ee)\s+pee\b", lambda m: SPOKEN_DIMS[m.group(0).lower()], text, flags=re.I)
    # a mesh dimension's key spelled out ("data parallel shard", "dp replicate"): that key, never plain data parallel
    text = re.sub(SPELLED_DIM, lambda found: "dp_" + ("shard" if found.group(1).lower().startswith("shard") else
                                                      "replicate"), text, flags=re.I)  # fmt: skip
    text = re.sub(rf"\b({DIMS})\s+(?:equals?|equal\s+to|set\s+(?:to|at)|of|at|is)\s+(?=\d)", r"\1=", text,
                  flags=re.I)  # fmt: skip  # "tp equals 2", "dp_shard set to 2"
    # "8 40GB A100s": the count, the GPU, then its memory, as the GPU's name reads it ("8 A100 40GBs")
    text = re.sub(r"\b(\d+)\s+(\d+)\s*(gi?b)\s+((?:nvidia\s+)?(?:a100|h100|h200|l40s|a10|rtx ?4090|4090))(s?)\b",
                  _memory_before_card, text, flags=re.I)  # fmt: skip
    text = re.sub(r"\b(?:graphics?|video|gpu)\s+cards?\b", lambda m: "gpus" if m.group(0)[-1] == "s" else "gpu", text,
                  flags=re.I)  # fmt: skip
    text = re.sub(rf"\b({MODEL_FAMILIES})(\d+(?:\.\d+)?b)\b", r"\1 \2", text, flags=re.I)  # "mistral7b"
    # a model's size in words, as learners say it: "13 billions of parameters" is 13b; "Llama 2 of 13b", "Gemma 2 with
    # 9b": the family's model of that size
    text = re.sub(r"\b(\d+(?:\.\d+)?)\s+billions?(?:\s+(?:of\s+)?param(?:eter)?s\b)?", r"\1b", text, flags=re.I)
    text = re.sub(rf"\b((?:{MODEL_FAMILIES})(?:[\s-]*\d+(?:\.\d+)?)?)\s+(?:of|with)\s+(?=\d+(?:\.\d+)?b\b)", r"\1 ",
                  text, flags=re.I)  # fmt: skip
    # a size dictated after a family ("llama 3.1 8 bee", "llama 2 70 bee"): "b" said as it sounds
    text = re.sub(rf"\b((?:{MODEL_FAMILIES})(?:[\s-]*\d+(?:\.\d+)?)?[\s-]+\d+(?:\.\d+)?)\s+bee\b", r"\1b",
                  text, flags=re.I)  # fmt: skip
    text = re.sub(DICTATED_FAMILY, _dictated_family, text, flags=re.I)
    # a mixture of experts' name said loosely: "mixtral 8x7" (its "b" left out), "mixtral eight by twenty two b"
    # (dictated: "by" for the "x", the "b" apart), "qwen 3 30 b a 3 b" (dictated)
    text = re.sub(r"\b(mixtral)[\s-]*(\d+)\s*(?:x|by)\s*(\d+)(?:\s*b)?(?![\w.])", r"\1-\2x\3b", text, flags=re.I)
    text = re.sub(MIXTRAL_EXPERTS, lambda found: "mixtral-{}x{}b".format(*filter(None, found.groups())), text,
                  flags=re.I)  # fmt: skip
    text = re.sub(MIXTRAL_SIZE_APART, r"\1\2mixtral-\3", text, flags=re.I)
    text = re.sub(rf"\b({MODEL_FAMILIES})[\s-]*(\d+(?:\.\d+)?)[\s-]+(\d+)\s*b[\s-]+a[\s-]*(\d+)\s*b\b",
                  r"\1\2-\3b-a\4b", text, flags=re.I)  # fmt: skip
    text = re.sub(SWAPPED_CARD, _card_number, text, flags=re.I)
    text = re.sub(HSDP_WAYS, _hsdp_ways, text, flags=re.I)
    text = re.sub(WORKERS_TOGETHER, r"\1 gpus ", text, flags=re.I)
    text = re.sub(RACE_START, "go", text, flags=re.I)
    text = re.sub(NOUN_PLAN, r"\1plan", text, flags=re.I)
    text = layouts_in_words(text, "|".join(pattern for pattern, _ in LAYOUT_WORDS))
    text = packing_in_words(text)
    text = re.sub(r"\bckpts?\b", "checkpoint", text, flags=re.I)
    text = re.sub(r"\blearning[-_]rate\b", "learning rate", text, flags=re.I)
    text = re.sub(WARMUP_FOR, lambda found: f"warmup {found.group('count') or found.group('count2')}", text, flags=re.I)
    text = re.sub(ZERO_AFTER_SWITCH, _zeroed_beside_a_switch, text, flags=re.I)
    text = re.sub(ZERO_BEFORE_SWITCH, _zeroed_beside_a_switch, text, flags=re.I)
    text = re.sub(ZERO_NEGATED, r"keep \g<key>", text, flags=re.I)
    text = re.sub(TURNED_OFF_BY_ZERO, _zeroed_unless_taken_back, text, flags=re.I)
    text = re.sub(ZERO_AFTER, _zeroed_unless_taken_back, text, flags=re.I)
    # the rate said as learners translate it ("velocidad de aprendizaje"): "the learning speed 0.0005"
    text = re.sub(r"\blearning\s+(?:speed|velocity|pace|step\s+size)\b", "learning rate", text, flags=re.I)
    text = re.sub(r"\b(?:seq|sequence)(?:\s+|\s*[=:]\s*)(?=\d)", "seq_len ", text, flags=re.I)  # "seq=4096" too
    # "Sequence of 4096", "a chain length of 1024": a length of tokens (a count of a few is no length)
    text = re.sub(r"\b(?:sequence|(?:chain|token|input|window)\s+length)\s+(?:of\s+)?(?=\d{3,}\b)", "seq_len ", text,
                  flags=re.I)  # fmt: skip
    text = re.sub(r"\s@\s*(?=\d)", " at ", text)
    # "2 of those," no noun after ("4 of em", "4 of 'em": them as it is said)
    text = re.sub(r"\b(\d+) of (?:them|those|these|'?em)\b", _of_them, text, flags=re.I)
    text = re.sub(ON_JUST_ONE, _one_of_the_nodes, text, flags=re.I)
    # "a100 40GiB x 8", "h100x8", "h200 * 4": the count after a GPU's name, as it reads before it ("8 x h100")
    # ("8x h200 x 4 nodes": a count of nodes after it stays theirs)
    text = re.sub(rf"\b({GPU_WORD})\s*(?:x|\*|×)\s*(\d+)\b(?!\.\d|\s*(?:k|b|steps?|nodes?|machines?|boxes|hosts?|"
                  r"servers?)\b)", r"\2 x \1", text, flags=re.I)  # fmt: skip
    text = re.sub(r"(?<=[a-z0-9])\s*\bx(\d+)\b", r" x \1 gpus", text, flags=re.I)  # "a100 80g x8"
    # "fsdp on 2, 30 steps": a bare count after on/over/across counts processes
    # "tp=2 x dp_shard=4", "tp=2 + dp_shard=2": one layout of both degrees
    text = re.sub(rf"\b((?:{DIMS})=\d+)\s*(?:x|\*|×|\+|&|and|with)\s*(?=(?:{DIMS})=\d)", r"\1,", text, flags=re.I)
    # "fsdp 4 x tp 2", "dp_shard 2 * pp 2": each layout with its own degree, not "4 x tp" (a degree of 4 for tp)
    names = "|".join(pattern for pattern, _ in LAYOUT_WORDS)
    text = re.sub(rf"\b((?:{names})\s*\d+)\s*(?:x|\*|×)\s*(?=(?:{names})\s*\d)", r"\1 and ", text, flags=re.I)
    text = _refused_layout_again(text)
    text = re.sub(BARE_COUNT, r"\1 \2 processes", text, flags=re.I)
    # HSDP in words: "2 replicas x 2 shards", "2 replicas and 2 shards" are its degrees
    text = re.sub(r"\b(\d+)\s+replicas?\s*(?:x|and|by|times|,|with)?\s*(\d+)\s+shards?\b",
                  r"dp_replicate=\1,dp_shard=\2", text, flags=re.I)  # fmt: skip
    # "two replicas, each sharded over two devices", "2 copies each split across 4 gpus": HSDP's degrees
    text = re.sub(r"\b(\d+)\s+(?:data[- ]parallel\s+)?(?:replicas?|copies|model copies)"
                  r"\s*,?\s*(?:(?:with\s+)?each\s+(?:one\s+|of them\s+)?)?"
                  r"(?:is\s+)?(?:sharded|fsdp|split|spread|partitioned)\s+(?:over|across|on|into|between|among)\s+(\d+)\s+"
                  r"(?:devices?|gpus?|cards?|ranks?|processes|shards?|ways?)\b",
                  r"dp_replicate=\1,dp_shard=\2", text, flags=re.I)  # fmt: skip
    return re.sub(COPIES_OF_SETUP, lambda found: _copies_of_setup(found, names), text, flags=re.I)


# Copies of a layout said before it, each a data-parallel replica: "split each layer across 2 GPUs, and keep 2 copies
# of that whole setup" (tp=2 twice: dp_replicate=2,tp=2), "2 replicas of this arrangement". Copies of the model are
# DDP's own words (agent.understanding.descriptions), not these.
COPIES_OF_SETUP = (r"\b(\d+)\s+(?:full\s+|whole\s+|identical\s+|separate\s+)?(?:copies|replicas|clones|instances)"
                   r"\s+of\s+(?:that|this|the)\s+(?:(?:whole|entire|full|same)\s+)?"
                   r"(?:setup|set-up|thing|arrangement|group|pair|layout)\b(?!\s+(?:files?|in|into|to)\b)"
                   # copies kept aside train nothing: "2 copies of that setup as backups"
                   r"(?![^.;!?]*\b(?:backups?|back\s+up|spares?|standby|archiv\w*|safe\s*keeping)\b)")  # fmt: skip


def _copies_of_setup(found: re.Match, layout_names: str) -> str:
    """dp_replicate of the copies, where a layout was said before them ("2 copies of the layout in the report" copy
    nothing that trains)."""
    before = found.string[: found.start()]
    said = [layout for layout in re.finditer(rf"\b(?:{layout_names}|(?:tp|pp|cp|dp_shard)\s*=?\s*\d)", before, re.I)
            if not re.search(rf"{_REFUSER}$", before[: layout.start()], re.I)]  # fmt: skip  # not a refused one
    return f"dp_replicate={found.group(1)}" if said else found.group(0)


# A layout refused ("not tp") and named again as what went wrong ("tp oomed last time", "fsdp was too slow"): the reason
# for refusing it, no second request of it ("it oomed last time").
_REFUSER = r"\b(?:not|no|never|without|avoid)\s+"
REFUSED_LAYOUT = _REFUSER + r"(tp|pp|cp|ep|fsdp|ddp|dp_shard|dp_replicate)\b"
WENT_WRONG = (r"(?:oomed|oom'?d|ooms|crashed|crashes|failed|fails|diverged|hung|died|blew\s+up|was|were|is|ran\s+out|"
              r"keeps|kept)\b")  # fmt: skip


def _refused_layout_again(text: str) -> str:
    for name in {found.group(1).lower() for found in re.finditer(REFUSED_LAYOUT, text, re.I)}:
        text = re.sub(rf"(?<![\w=-]){name}\s+(?={WENT_WRONG})", "it ", text, flags=re.I)
    return text


# HSDP by how many ways the data-parallel ranks are replicated and sharded, in either order: "replicated twice and
# sharded four ways", "sharded 4-way, replicated 2x", "replicated across 2 and sharded across 4 gpus".
_WAYS = (r"(?:(?:across|over|into|on)\s+)?(\d+)(?:\s*x\b|\s+times\b|[- ]?ways?\b|[- ]fold\b|"
         r"\s+(?:gpus?|devices?|ranks?|cards?))?")  # fmt: skip
_THEN = r"\s*(?:,|;|and|with|while|but|then)?\s*(?:and\s+|then\s+)?(?:(?:being|is|are|also)\s+)?"
HSDP_WAYS = (rf"\breplicat\w*\s+{_WAYS}{_THEN}shard\w*\s+{_WAYS}|"
             rf"\bshard\w*\s+{_WAYS}{_THEN}replicat\w*\s+{_WAYS}")  # fmt: skip


def _hsdp_ways(found: re.Match) -> str:
    replicated, sharded = (found.group(1), found.group(2)) if found.group(1) else (found.group(4), found.group(3))
    return f"dp_replicate={replicated},dp_shard={sharded}"


# What "them" counts: the last of these nouns said before it ("some L40S cards, say 4 of them" are 4 GPUs; "h100
# nodes, 2 of them" are 2 nodes); another noun ("3 runs; show me 2 of them") leaves it as said, none at all is the
# GPUs of the conversation ("now with 8 of them").
THEM_NOUNS = {"gpus": r"gpus?|cards?|devices?|accelerators?|h100s?|h200s?|a100s?|a10s?|l40s|4090s?|b200s?|v100s?",
              "nodes": r"nodes?|machines?|boxes|box|hosts?|servers?|computers?",
              "": r"runs?|sweeps?|trials?|checkpoints?|steps?|files?|jobs?|experiments?|configs?|layouts?|"
                  r"models?"}  # fmt: skip


def _of_them(found: re.Match) -> str:
    before = found.string[: found.start()].lower()
    # a noun counted in each of another ("a100 nodes, 4 cards each") is no noun of "2 of those"
    said = [(m.start(), noun) for noun, words in THEM_NOUNS.items() for m in re.finditer(rf"\b(?:{words})\b", before)
            if not re.match(r"\s*(?:each|apiece|per|in each|to a)\b", before[m.end() :])]  # fmt: skip
    noun = max(said)[1] if said else "gpus"  # "now with 8 of them" after a plan: its GPUs
    return f"{found.group(1)} {noun}" if noun else found.group(0)


# A GPU by its name, its variant and memory size ("A100 40GiB", "h100 sxm"): what a count after it counts.
GPU_WORD = (r"(?:nvidia\s+)?(?:h100|h200|a100|l40s|a10|rtx[ -]?4090|4090|b200|v100|mi\d{3}x?)s?"
            r"(?:[ -]?(?:sxm|pcie|nvl))?(?:[ -]?\d+(?:\.\d+)?\s*gi?b)?")  # fmt: skip
# A card taken back after a dash, a comma or a stop ("8 a100 80gb — make that h100s", "not h100 — h200", "on 8 h100;
# sorry, h200"): the card said last. Without "not" before it, a word that takes it back must be said.
GPU_TAKEN_BACK = (rf"(\bnot\s+)?\b({GPU_WORD})(?![\w-]){_MARK}({_TAKEN_BACK}*)({GPU_WORD})(?![\w-])"
                  r"(?=\s*(?:[.;,!?)]|$))")  # fmt: skip


def _gpu_taken_back(found: re.Match) -> str:
    negated, _, taking_back, last = found.groups()
    return last if negated or taking_back else found.group(0)


# Numbers dictated as words that sound like them ("start a sweep with ate trials", "on for GPUs"), read as numbers
# only where a count is expected: "ate" right before what is counted, "for"/"to" only after a word that takes a count
# ("with", "on", "across"...), as both are common words elsewhere ("train for 20 steps", "go to 2 nodes").
HOMOPHONES = {"ate": "8", "for": "4", "to": "2", "too": "2"}
_COUNTED = (r"(?:trials?|steps?|gpus?|cards?|devices?|nodes?|machines?|process(?:es)?|procs?|ranks?|workers?|epochs?|"
            rf"{GPU_WORD})\b")  # fmt: skip
_TAKES_COUNT = ("with", "on", "across", "over", "using", "onto", "into")
HOMOPHONE_COUNT = (r"(?:" + "|".join(rf"(?<=\b{word} )" for word in _TAKES_COUNT) + ")"
                   rf"(?:for|to|too)\b(?=\s+{_COUNTED})|"
                   rf"\bate\b(?=\s+{_COUNTED})")  # fmt: skip


def _homophone(found: re.Match) -> str:
    return HOMOPHONES[found.group(0).lower()]


# The memory sizes of the cards sold in several ("A100 40GB" and "A100 80GB"; the H100's and H200's).
CARD_SIZES = "40|80|94|141"
# Model families written glued to their size ("mistral7b", "llama70b"): the size is read apart.
MODEL_FAMILIES = "llama|mistral|mixtral|qwen|gemma|smollm"
# Layout names dictated letter by letter ("tee pee equals two" is tp=2).
SPOKEN_DIMS = {"tee pee": "tp", "pee pee": "pp", "see pee": "cp", "ee pee": "ep"}


# A number said digit by digit with "oh" for zero ("four oh five b", "one oh two four"); the digit after "point" is a
# version's ("three point one four oh five" is 3.1 and 405).
_DIGIT = "one|two|three|four|five|six|seven|eight|nine"
SPOKEN_DIGITS = rf"(?<!point\s)\b(?:{_DIGIT})(?:\s+(?:oh|{_DIGIT}))*\s+oh(?:\s+(?:oh|{_DIGIT}))*\b"
# The same said radio-style, digits joined by hyphens with "zero" among them ("steps five-zero" is 50, "one-two-
# zero-eight" is 1208): "zero" makes it digits, never a sum ("twenty-five" stays a number word). The first digit is
# never "zero" (ZeRO-3 is a layout).
# Only a whole sequence, never one inside a longer expression ("one-zero-e-minus-four" is RADIO_EXPONENT's); a long
# or hedged one is asked about (questions._radio_doubt).
RADIO_DIGITS = (rf"(?<!point\s)(?<![\w-])(?:{_DIGIT})(?:-(?:zero|{_DIGIT}))*-zero"
                rf"(?:-(?:zero|{_DIGIT}))*(?![\w-])")  # fmt: skip


# Letters dictated as the words that sound like them, then a number: "are one" is r1, "tee two" is t2. Read as that
# name only where the repository has a run, sweep or file of that name ("are one" stays words elsewhere).
LETTER_SOUNDS = {"are": "r", "ar": "r", "see": "c", "sea": "c", "tee": "t", "tea": "t", "pee": "p", "bee": "b",
                 "dee": "d", "ee": "e", "eff": "f", "gee": "g", "jay": "j", "kay": "k", "el": "l", "em": "m",
                 "en": "n", "oh": "o", "cue": "q", "ess": "s", "vee": "v", "ex": "x", "zee": "z",
                 "zed": "z"}  # fmt: skip
_LETTER = "|".join([*LETTER_SOUNDS, "[a-z]"])
SPOKEN_NAME = rf"\b((?:(?:{_LETTER})\s+){{1,3}})({'|'.join([*UNITS, *TENS])}|\d+)\b"


# Words after which "are", "see" or "you" are the verb or pronoun they sound like ("we are one team", "they are
# one of"): no name dictated.
NOT_DICTATED = r"(?:\b(?:we|they|you|i|these|those|there|who|which|that|both|all|and|to|will|can|could|would|let)\s+)$"


def _spoken_name(found: re.Match, known: set[str]) -> str:
    before, after = found.string[: found.start()], found.string[found.end() :]
    if re.search(NOT_DICTATED, before, re.I) or re.match(r"\s+of\b", after):  # "they are one of us"
        return found.group(0)
    letters = "".join(LETTER_SOUNDS.get(w, w) for w in found.group(1).lower().split())
    number = found.group(2).lower()
    name = letters + str(UNITS.get(number) or TENS.get(number) or number)
    return name if name in known else found.group(0)


# Words written apart that the rules read as one ("bench mark", "through put", "hard ware").
SPLIT_WORDS = r"\bbench\s+mark(?=s?\b|ing\b)|\bthrough\s+put\b|\bhard\s+ware\b"
# "suite" dictated as "sweet", after what names a suite ("the private sweet", "our eval sweet").
SUITE_HOMOPHONE = (r"\b(private|builtin|built-in|default|standard|usual|internal|in-house|eval|evaluation|benchmark|"
                   r"test|task)\s+sweets?\b")  # fmt: skip
# A comparative said with "more", as some learners say it ("a more big micro batch", "a bit more long"): the
# comparative the rules read ("bigger"), so that a change said without its value is asked about.
COMPARATIVES = {"big": "bigger", "large": "larger", "small": "smaller", "long": "longer", "short": "shorter",
                "fast": "faster", "quick": "quicker", "high": "higher", "low": "lower", "cheap": "cheaper"}  # fmt: skip
MORE_ADJECTIVE = (rf"\b(a|an|the|much|bit|little|even|slightly|lot)\s+more\s+({'|'.join(COMPARATIVES)})\b|"
                  rf"\b()more\s+({'|'.join(COMPARATIVES)})(?=\s+than\b)")  # fmt: skip


def _comparative(found: re.Match) -> str:
    before = found.group(1) or ""
    return f"{before} {COMPARATIVES[(found.group(2) or found.group(4)).lower()]}".strip()


# A config named by the comparative of its name ("the longer config", "the shorter experiment"): the one whose name
# the comparative is made of (configs/long.yaml), where the repository has it.
COMPARED_CONFIG = r"\b([a-z]+?)(e?r)(?=[\s-]+(?:\w+[\s-]+)?(?:config(?:uration)?s?|experiments?|ya?ml)\b)"


def _config_stem(found: re.Match, known: set[str]) -> str:
    stem = found.group(1)
    if found.group(0).lower() in known:  # configs/longer.yaml is named as it is
        return found.group(0)
    for name in (stem, stem + "e", stem[:-1] if len(stem) > 2 and stem[-1] == stem[-2] else None):  # big(g)er
        if name and name.lower() in known:
            return name
    return found.group(0)


# A setting put on a value, as some learners say it ("put the steps on 40", "set the learning rate at 0.001"): set to
# it. Only after such a verb: "40 steps on 2" counts processes.
_SETTING_NAME = rf"(?:the\s+)?(?:steps?|trials?|{'|'.join(SETTING_NAMES.values())})"
PUT_ON = rf"\b(?:put|set|leave|keep|place)\s+({_SETTING_NAME})\s+(?:on|at)\s+(?=\d)"


# A setting moved to a value, the way it moves said ("learning rate down to 1e-4", "seed up to 7"): set to it. Only the
# setting's name right before: "lr went down to 1e-4 last time" tells an earlier run's story.
MOVED_TO = rf"\b({'|'.join(SETTING_NAMES.values())})\s+(?:down|up)\s+to\s+(?=\d)"


# A card's variant named as a kind of it: "the PCIe variant of the H100", "the SXM version of an A100", "the NVL
# flavour of H100s" (the card's name with its variant after it, as "h100 pcie" reads).
VARIANT_OF_CARD = (r"\b(sxm\d?|pcie|nvl)[\s-]+(?:variant|version|flavou?r|edition|form[\s-]+factor|model|kind|type)"
                   r"\s+of\s+(?:the\s+|an?\s+)?(h100|h200|a100)s?\b")  # fmt: skip


# A default refused, then the value said in its place: "not the default step count, do 60", "not the usual lr — use
# 3e-4". The value is the setting's (a count before its noun, as "60 steps" reads).
_COUNT_NAME = r"(?P<count>steps?|trials?)(?:\s+(?:count|number))?|number\s+of\s+(?P<counted>steps|trials)"
NOT_DEFAULT = (rf"\bnot\s+(?:the\s+|our\s+|its\s+)?(?:default|usual|normal|standard|stock|configured)\s+"
               rf"(?:{_COUNT_NAME}|(?P<setting>{'|'.join(SETTING_NAMES.values())}))\s*[,;:\u2013\u2014-]*\s*"
               r"(?:(?:but|just|rather|instead|do|use|make\s+it|go\s+with|run|try|set\s+it\s+to|please|pls)\s+)*"
               r"(?P<value>\d+(?:\.\d+)?(?:e-?\d+)?k?)\b(?:\s+(?P=count)s?\b|\s+(?P=counted)\b)?"
               # a count of something else after it is no value of the setting ("not the default steps, 2 gpus")
               r"(?!\s*(?:x\b|gpus?|cards?|devices?|nodes?|machines?|process\w*|procs?|ranks?|workers?|trials?|"
               r"steps?|[ahl]\d+|gi?b\b))")  # fmt: skip


# GPUs called by a metaphor, known as the workers of a sharded layout by what follows: "four ovens working together,
# each one holding only its own slice of the dough", "two engines in parallel, each keeping its own share" (never
# "2 engineers working together" alone: each must hold its own part of something).
WORKERS_TOGETHER = (r"\b(\d+)\s+[a-z]+s\s+(?=(?:working|running|cooking|baking|together|in\s+parallel|side\s+by\s+side)"
                    r"\b[^.;!?]{0,30}?\beach(?:\s+one|\s+of\s+them)?\s+(?:holding|keeping|getting|taking|owning|"
                    r"with|has|holds|keeps|gets|takes|owns)\s+(?:only\s+)?(?:its|their)\s+own\b)")  # fmt: skip
# A race's start, said by its commentator ("and they're off!", "we're off!"): no setting turned off.
RACE_START = r"\b(?:and\s+)?(?:they'?re|we'?re|they\s+are|we\s+are)\s+off\b(?=\s*[!.,;]|\s*$)"
# "plan" as the noun of another trade ("60 steps on the flight plan", "the game plan"): no layout plan asked for.
NOUN_PLAN = r"\b(flight|game|meal|battle|lesson|business|travel|marketing|project)\s+plan\b"


# The warmup's length said with its own "steps" ("train 10 steps and warmup for 2 steps", "a 5 step warmup"): the
# warmup's, never the run's step count.
# ("without warmup for 10 steps" is 10 steps without warmup: the count after a negated warmup is the run's)
WARMUP_FOR = (r"(?<!without )(?<!no )(?<!skip )\bwarm-?up\s+(?:for|of|over|during)\s+(?:the\s+first\s+)?"
              r"(?P<count>\d+)\s+steps?\b|"
              r"\b(?:a\s+)?(?P<count2>\d+)[\s-]+steps?\s+(?:of\s+)?warm-?up\b")  # fmt: skip
# What a setting may be said to cause or meet, negated instead of it: "no clipping issues", "no weight decay problems
# so far", "no warmup surprises expected".
TROUBLE_NOUN = (r"(?:issues?|problems?|surprises?|concerns?|troubles?|worries|worry|drama|complaints?|errors?|"
                r"bugs?|spikes?|instabilit(?:y|ies)|glitch(?:es)?|questions?|regressions?|weirdness)\b")  # fmt: skip

# A setting whose 0 is the trainer's own "off" (trainer.config: warmup_steps, weight_decay, grad_clip), turned off by
# a negation right before it: "no warmup", "without weight decay", "skip gradient clipping" are that key at 0.
_ZERO_KEYS = {"warmup": r"warm-?up(?:\s+steps)?", "weight decay": r"weight[\s_-]+decay",
              "grad clip": r"grad(?:ient)?[\s_-]+clip(?:ping)?|clipping"}  # fmt: skip
# (also "leave out", "excluding", "w/o", "don't bother with", and radio talk's "negative on"; a count after it is the
# run's when a noun of its own follows: "no warmup 2 gpus", and "no warmup 25 steps", as a warmup taken back has no
# length (WARMUP_STEPS))
ZERO_NEGATOR = (r"(?:\bno|\bwithout|\bw/o|\bskip(?:ping)?|\bdisable|\bdisabling|\bturn\s+off|\bzero|"
                r"\b(?:leave|leaving|left)\s+out|\bexclud(?:e|ing)|\bomit(?:ting)?|\bnegative(?:\s+on)?|"
                r"\b(?:don'?t|do\s+not|no\s+need\s+to)\s+bother\s+(?:with|about)|"
                r"\b(?:drop(?:ping)?|forgo(?:ing)?|ditch(?:ing)?|scrap(?:ping)?|minus|sans)|"
                r"\b(?:don'?t|do\s+not|doesn'?t|won'?t|will\s+not)\s+(?:need|want)|"
                # told not to use it: "do not use any warmup steps at all", "don't use weight decay"
                r"\b(?:don'?t|do\s+not|never)\s+use|"
                # the run told not to open with it: "I'd prefer the run not begin with any warmup at all"
                r"\b(?:not|never|don'?t|do\s+not)\s+(?:begin|start)(?:s|ing)?\s+(?:off\s+)?with)")  # fmt: skip
# (the negation joined by a hyphen too: a command line's flag, "--no-warmup")
TURNED_OFF_BY_ZERO = (rf"{ZERO_NEGATOR}(?:\s+|-)(?:any\s+|the\s+)?"
                      rf"(?P<key>{'|'.join(_ZERO_KEYS.values())})\b(?>(?:\s+(?:stage|phase|period)\b)?)"
                      r"(?!\s*(?:change|changes|setting|settings|tweak|value|[=:]|at\b(?!\s+all\b)|of\b|to\b|from\b|by\b|"
                      r"down\b|back\b))"
                      rf"(?!\s*\d(?!\d*\s*(?:gpus?|nodes?|devices?|process(?:es)?|procs?|cards?|steps?(?!\s+(?:more|less|longer|shorter|fewer|extra|of)\b))\b))"
                      # a noun the setting only qualifies ("no clipping issues last time"): that noun negated
                      rf"(?!\s+{TROUBLE_NOUN})"
                      # a list the negation may govern ("no clipping and fsdp"): left to the rules that ask
                      # (not one that opens its own negation: "no warmup and don't compile")
                      r"(?!\s*(?:and|or|nor|&)\s+(?!no\b|without\b|w/o(?!\w)|\d|don'?t\b|do not\b))")  # fmt: skip


# Or its 0 said in words after it: "warmup steps zero", "weight decay: none", "warmup off".
# ("the warmup set to zero", "weight decay cut to nothing at all": set to nothing is set to 0; not "the warmup is
# nothing special")
ZERO_AFTER = (rf"\b(?P<key>{'|'.join(_ZERO_KEYS.values())})(?:\s*(?:[=:]|\bto\b|\bat\b|\bis\b)?\s*"
              r"(?:zero|none|off|disabled)\b|"
              r"\s+(?:(?:set|cut|turned|dialed|dialled|brought|reduced|put)\s+)?(?:(?:all\s+the\s+way\s+)?down\s+)?"
              r"to\s+(?:zero|nothing|none)\b(?:\s+at\s+all\b)?)")  # fmt: skip


# Or named in a list with a switch the same negation governs: "without packing or warmup", "no warmup or compile",
# "disable compile and warmup" turn both off (the negation kept for the switch, the warmup written as its 0).
_ZERO_SWITCH = (r"(?:the\s+|any\s+)?(?:(?:torch[. ]?)?compil(?:e|ation|ing)|(?:sequence\s+)?packing|"
                r"(?:activation|gradient)\s+checkpointing|ac)")  # fmt: skip
_ZERO_KEY = rf"(?:the\s+|any\s+)?(?P<key>{'|'.join(_ZERO_KEYS.values())})\b"
_LIST_END = r"(?=\s*(?:[,.;!?)]|$|\b(?:please|this time|but|then|either|and)\b))"
ZERO_AFTER_SWITCH = (rf"(?P<negator>{ZERO_NEGATOR})\s+(?P<switch>{_ZERO_SWITCH})\s*,?\s*(?:or|nor|and|&)\s+"
                     rf"{_ZERO_KEY}{_LIST_END}")  # fmt: skip
ZERO_BEFORE_SWITCH = (rf"(?P<negator>{ZERO_NEGATOR})\s+{_ZERO_KEY}\s*,?\s*(?:or|nor|and|&)\s+"
                      rf"(?P<switch>{_ZERO_SWITCH})\b")  # fmt: skip


def _zeroed(found: re.Match) -> str:
    said = found.group("key").lower()
    return next(f"{key} 0" for key, pattern in _ZERO_KEYS.items() if re.fullmatch(pattern, said))


# Why an earlier run failed, not what to do: "because compile without warmup broke", "since no warmup diverged".
ZERO_AS_A_CAUSE = r"\b(?:because|since|'?cause|cuz|given that|seeing as)\b[^.;!?,]*$"
# The zeroing asked and answered no ("minus the warmup? no, ..."), or the setting kept after it, in so many words
# ("negative on the warmup removal, keep warmup").
# The zeroing verb itself negated: "don't omit warmup", "never skip the warmup" (kept as it is, no setting changed).
ZERO_NEGATED = (rf"\b(?:don'?t|do not|never|won'?t|will not|shouldn'?t|should not)\s+(?=\w+\s)(?:{ZERO_NEGATOR})\s+"
                rf"(?:the\s+)?{_ZERO_KEY}")  # fmt: skip
ZERO_ANSWERED_NO = r"\s*\?\s*(?:no|nope|nah|negative)\b"
ZERO_KEPT_AFTER = r"\bkeep(?:ing)?\s+(?:the\s+)?{key}\b(?!\s*(?:[=:]|at|to|of|off|out|short|\d))"
# A removal of the setting, taken back by the word before it: "negative on the warmup removal".
ZERO_REMOVAL = r"\s+(?:removal|removing|being removed|drop|cut)\b"


def _zeroed_unless_taken_back(found: re.Match) -> str:
    """A setting zeroed, except where the sentence says that is no order: a cause, a proposal answered no, a negated
    removal, or the setting kept later on."""
    key = found.group("key")
    before, after = found.string[: found.start()], found.string[found.end() :]
    if (re.search(ZERO_AS_A_CAUSE, before, re.I) or re.match(ZERO_ANSWERED_NO, after, re.I)
            or re.match(ZERO_REMOVAL, after, re.I)
            or re.search(ZERO_KEPT_AFTER.format(key=re.escape(key)), after, re.I)):  # fmt: skip
        return found.group(0)
    return _zeroed(found)


def _zeroed_beside_a_switch(found: re.Match) -> str:
    return f"{_zeroed(found)} and {found.group('negator')} {found.group('switch')}"


# One of the nodes counted before, the noun left out: "we own 2 nodes, but plan llama-3.1-8b on just one".
ON_JUST_ONE = r"\bon\s+(?:just|only)\s+(?:one|1)(?:\s+of\s+(?:them|those))?(?=\s*(?:$|[,.;!?]))"


def _one_of_the_nodes(found: re.Match) -> str:
    counted = re.search(r"\b\d+\s+nodes\b", found.string[: found.start()], flags=re.I)
    return "on just 1 node" if counted else found.group(0)


# A card's variant refused and another named in its place: "8 h100s, but not the sxm kind, the pcie ones" is 8 h100
# pcie (the card's default variant never read from the refusal).
_VARIANT_NOUN = r"(?:\s+(?:kind|ones?|variants?|versions?|types?|models?|cards?|flavou?rs?))?"
VARIANT_REFUSED = (r"\b(h100|h200|a100)s?\s*[,;:]?\s*(?:but\s+)?(?:not|no)\s+(?:the\s+)?(sxm\d?|pcie|nvl)\b"
                   rf"{_VARIANT_NOUN}\s*[,;:]?\s*(?:but\s+|rather\s+|just\s+|only\s+|instead\s+)*(?:the\s+)?"
                   rf"(sxm\d?|pcie|nvl)\b{_VARIANT_NOUN}")  # fmt: skip


# Or refused before its card is named (or with the card left to the plan before), and another named after it: "NOT
# the sxm kind, stay on pcie but 8 of them", "not the sxm kind -- the pcie ones -- plan mistral-7b on 8 h100" (the
# other variant alone).
VARIANT_ALONE_REFUSED = (rf"\b(?:not|no)\s+(?:the\s+)?(sxm\d?|pcie|nvl)\b{_VARIANT_NOUN}\s*(?:[,;:]|\s-+|\u2014)?\s*"
                         r"(?:(?:but|rather|just|only|instead|stay|staying|on|use|with|go|for)\s+)*(?:the\s+)?"
                         rf"(sxm\d?|pcie|nvl)\b")  # fmt: skip


# A card named after the variant, without one of its own: "..., the pcie ones: plan llama-3.1-8b on 4 h100".
BARE_CARD_AFTER = r"\b(h100|h200|a100)s?\b(?![\s-]*(?:sxm|pcie|nvl))"


def _variant_alone_instead(text: str) -> str:
    """The variant wanted in place of the one refused, on the card named after it where one is."""
    found = re.search(VARIANT_ALONE_REFUSED, text, flags=re.I)
    if not found or found.group(1).lower() == found.group(2).lower():
        return text
    wanted, rest = found.group(2), text[found.end() :]
    if card := re.search(BARE_CARD_AFTER, rest, flags=re.I):
        rest = f"{rest[: card.end()]} {wanted}{rest[card.end() :]}"
    return f"{text[: found.start()]}{wanted}{rest}"


# A card's variant or memory corrected alone, after the card was named with another (or none): "8 h100-sxm. Sorry,
# correction: they're the PCIe variant", "on 4 h100s, actually make that nvl", "8 a100 40GB, sorry, the 80GB ones"
# (the card said before, of the variant said last; the variant it had is gone). Only where the correction says the
# variant and nothing after it.
_CORRECTING = r"(?:sorry|correction|actually|i\s+meant?|no\s+wait|scratch\s+that|my\s+bad|oops|rather)"
VARIANT_CORRECTED = (rf"\b{_CORRECTING}(?:\s*[,:;!.\u2014-]*\s*{_CORRECTING})*\s*[,:;!.\u2014-]*\s*"
                     r"(?:(?:they|those|these|it|that)(?:'re|'s|\s+are|\s+is|\s+were|\s+was|\s+should\s+be)\s+|"
                     r"make\s+(?:it|that|them|those)\s+)?(?:(?P<count>\d+)\s+(?:of\s+)?)?(?:the\s+)?"
                     r"(sxm\d?|pcie|nvl|\d+\s*gi?b)\b"
                     rf"{_VARIANT_NOUN}(?:\s+(?:instead|then))?\s*(?=[.;,!?)]|$)")  # fmt: skip
CARD_BEFORE = r"\b(h100|h200|a100)(?:[\s-]*(sxm\d?|pcie|nvl))?(?:[\s-]*\d+\s*gi?b)?s?\b"
# The memory each variant of a card has (a memory said of a card of that variant restates it: "8 h100 pcie. sorry,
# 80gb" stays the PCIe, never the SXM the memory alone would name).
VARIANT_MEMORY = {"sxm": (80,), "pcie": (80,), "nvl": (94, 96)}


def _variant_corrected(text: str) -> str:
    """The card named before a correction of its variant alone, of the variant the correction says (where one card
    of one variant is named before it: which of two the correction is of is asked, as before)."""
    found = re.search(VARIANT_CORRECTED, text, flags=re.I)
    before = text[: found.start()] if found else ""
    named = list(re.finditer(CARD_BEFORE, before, flags=re.I))
    cards = {card.group(1).lower() for card in named}
    variants = {re.sub(r"\d", "", card.group(2).lower()) for card in named if card.group(2)}
    if len(cards) != 1 or len(variants) > 1:  # "8 h100 sxm and 8 h100 pcie. sorry, nvl": which one, unsaid
        return text
    count = found.group("count")
    if count and not re.search(rf"(?<![\w.]){count}\s*(?:x\s*)?(?:h100|h200|a100)", before, flags=re.I):
        return text  # "8 h100. sorry, I meant 4 of the pcie variant": some of them, which is asked
    memory = re.match(r"(\d+)", found.group(2))
    if memory and variants and int(memory.group(1)) in VARIANT_MEMORY.get(variants.pop(), ()):
        return before + text[found.end() :]  # the variant's own memory, restated: the card as said
    corrected = re.sub(CARD_BEFORE, lambda card: f"{card.group(1)} {found.group(2)}", before, flags=re.I)
    return corrected + text[found.start() :]


def _variant_instead(found: re.Match) -> str:
    card, refused, wanted = found.group(1), found.group(2), found.group(3)
    return found.group(0) if refused.lower() == wanted.lower() else f"{card} {wanted}"


# A value said, taken back and replaced at once: "not at 256 tokens — use 2048", "not 40 steps, make it 60": the value
# said last, with the first's noun (only where nothing follows it that could be its own noun).
NOT_THAT_VALUE = (r"\bnot\s+(?P<at>at\s+)?\d+(?:\.\d+)?k?\s*(?P<noun>tokens?|steps?|trials?)\s*[,;:\u2013\u2014-]*\s*"
                  r"(?:(?:but|just|rather|instead|use|make\s+it|go\s+with|do|try|please|pls)\s+)+"
                  r"(?P<value>\d+(?:\.\d+)?k?)\b(?=\s*(?:[,.;!?)]|$|\band\b|\binstead\b))")  # fmt: skip


def _not_default(found: re.Match) -> str:
    value = found.group("value")
    if found.group("setting"):
        return f"{found.group('setting')} {value}"
    noun = (found.group("count") or found.group("counted")).lower()
    return f"{value} {noun if noun.endswith('s') else noun + 's'}"


# A number with its exponent said radio-style, digit by digit ("one-zero-e-minus-four" is 10e-4): read whole, never
# its digits apart ("three-zero-e-minus-five" is no lr of 3).
RADIO_EXPONENT = (rf"(?<![\w-])((?:zero|{_DIGIT})(?:-(?:zero|{_DIGIT}))*)-e-(minus-|plus-)?"
                  rf"((?:zero|{_DIGIT})(?:-(?:zero|{_DIGIT}))*)(?![\w-])")  # fmt: skip


def _radio_exponent(found: re.Match) -> str:
    def digits(words: str) -> str:
        return "".join("0" if w == "zero" else str(UNITS[w]) for w in words.lower().split("-"))

    sign = "-" if found.group(2) and found.group(2).lower().startswith("minus") else ""
    return f"{digits(found.group(1))}e{sign}{digits(found.group(3))}"


def _spoken_digits(found: re.Match) -> str:
    words = found.group(0).lower().replace("-", " ").split()
    return "".join("0" if w in ("oh", "zero") else str(UNITS[w]) for w in words)


def _dictated_decimal(found: re.Match) -> str:
    digits = {"zero": "0", "oh": "0", **{w: str(UNITS[w]) for w in _DIGIT.split("|")}}
    return "0." + "".join(digits[w] for w in found.group(1).lower().split())


def _dictated(text: str) -> str:
    """Paths and names said aloud: "configs slash long dot yaml" is configs/long.yaml, "the t p try run" is tp-try
    (letters spelled one by one are one word)."""
    text = re.sub(r"(?<=\w)\s+slash\s+(?=\w)", "/", text, flags=re.I)
    text = re.sub(r"(?<=\w)\s+dot\s+(ya?ml|json|jsonl|md|txt|toml|py|csv|log)\b", r".\1", text, flags=re.I)
    # a GPU's variant spelled letter by letter ("h100 p c i e", "s x m"), the "i" and "x" in it too
    text = re.sub(r"\b(?:p\s+c\s+i\s+e|s\s+x\s+m|n\s+v\s+l)\b", lambda m: m.group(0).replace(" ", ""), text,
                  flags=re.I)  # fmt: skip
    return re.sub(r"\b(?:[bcdefghjklmopqrstvyz]\s){1,3}[bcdefghjklmopqrstvyz]\b",
                  lambda m: m.group(0).replace(" ", ""), text, flags=re.I)  # fmt: skip


def _shorthand(found: re.Match) -> str:
    return SHORTHAND[found.group(1).lower()]


def _fraction(numerator: int, denominator: int) -> str:
    return f"{numerator / denominator:g}" if denominator else f"{numerator} parts in {denominator}"


# A learning rate criticised ("lr 1e-3 is too high", "1e-3 seems way too low for the lr"): the rate used so far, never
# the one asked for; a rate said bare after it ("run with 5e-4") is the new one (a rate's look: an exponent or "0.").
_CRITICISM = (r"(\s+(?:is|'s|was|seems|looks|feels|sounds)\s+(?:(?:way|much|far|a\s+bit|a\s+little|just|probably)\s+)?"
              r"too\s+(?:high|low|big|small|large|aggressive|hot)\b)")  # fmt: skip
RATE_CRITICISED = (rf"\b(?:learning\s+rate|lr)\s*(?:of|=|:|at)?\s*(\d+(?:\.\d+)?(?:e-?\d+)?){_CRITICISM}"
                   r"((?:[^\n]*?))$")  # fmt: skip
BARE_RATE = (r"\b((?:with|use|using|try|to|at|com)\s+)(\d+(?:\.\d+)?e-\d+|0\.\d+)\b"
             r"(?!\s*(?:lr|learning rate|warm|weight|seed|clip|[a-z]+\.))")  # fmt: skip


def _rate_criticised(found: re.Match) -> str:
    after = re.sub(BARE_RATE, r"\1lr \2", found.group(3), count=1, flags=re.I)
    return f"lr{found.group(2)} (instead of {found.group(1)}){after}"


def _fraction_words(found: re.Match) -> str:
    count = 1 if found.group(1).lower() in ("a", "one") else int(found.group(1))
    if count > 1 and not found.group(3):  # "3 tenth" is no fraction a person says
        return found.group(0)
    return _fraction(count, ORDINAL_PARTS[found.group(2).lower()])


# A count of giga-things that are data, not memory: "2 gigas of tokens" (giga is 1e9).
GIGA_DATA = r"\b(\d+(?:\.\d+)?)\s*(?:gigas?|gigs?|g)\s+(?:of\s+)?(?=(?:tokens?|text|data|samples?|words?)\b)"


def _gig(found: re.Match) -> str:
    return f"{found.group(1) or found.group(2)}GiB"


def _foreign(found: re.Match) -> str:
    return FOREIGN[found.group(1).lower()]


def _digits(found: re.Match) -> str:
    """A run of number words as digits; words that do not continue a number start the next one ("two three" is
    "2 3", "three point two" is 3.2: one digit after "point", as in a version; "and" joins only after a hundred)."""
    text = found.group(0)
    words = re.findall(r"[a-z]+", text.lower())
    one_counts = re.match(ONE_COUNTS, found.string[found.end() :], re.I)
    a_setting_value = re.search(ONE_AFTER_SETTING, found.string[: found.start()], re.I) and re.match(
        ONE_ENDS_ITEM, found.string[found.end() :], re.I
    )
    if words == ["one"] and not one_counts and not a_setting_value:
        return text
    out: list[str] = []
    total = current = 0
    last, joined, point = "", False, False
    for word in words:
        if word in ("a", "an"):
            continue
        if word in ("and", "point"):
            joined, point = word == "and", word == "point"
            continue
        if point and last and UNITS.get(word, 10) < 10:
            out.append(f"{total + current}.{UNITS[word]}")
            total = current = 0
            last, point = "", False
            continue
        continues = (word in SCALES and last not in SCALES) or (UNITS.get(word, 10) < 10 and last in TENS)
        continues = continues or (last in SCALES and word not in SCALES)
        if (last and not continues) or (joined and last not in SCALES):
            out.append(str(total + current) + (" and" if joined else ""))
            total = current = 0
        if word in SCALES:
            value = max(current, 1) * SCALES[word]
            total, current = (total + value, 0) if word == "thousand" else (total, value)
        else:
            current += UNITS.get(word, TENS.get(word, 0))
        last, joined = word, False
    if last:
        out.append(str(total + current))
    return " ".join(out) + (" point" if point else "")


def _one_edit(word: str, known: str) -> bool:
    """One letter changed, added or left out ("staus", "swep", "lama", "wich"); a common word that is more than one
    edit from a known one ("chance" and "cancel") is left alone, as difflib's ratio would not."""
    if abs(len(word) - len(known)) > 1 or word == known:
        return False
    if len(word) == len(known):
        return sum(a != b for a, b in zip(word, known, strict=True)) == 1
    short, long = sorted((word, known), key=len)
    return any(long[:i] + long[i + 1 :] == short for i in range(len(long)))


# How far a typo may be from the word it is read as, by that word's length: a short word has many everyday neighbours
# one letter away ("want" and "wait", "match" and "batch", "shop" and "stop"), so only two letters swapped ("wiat",
# "stpo", "bacth") reach a word of four letters, and a letter added or left out ("swep", "lama"), never one changed, a
# word of five.
SWAP_ONLY = 4
NO_CHANGE = 5


def _close(word: str, known: str) -> bool:
    """Whether `word` is a typo of `known` (see SWAP_ONLY)."""
    if _one_swap(word, known):
        return True
    if len(known) <= SWAP_ONLY or (len(known) <= NO_CHANGE and len(word) == len(known)):
        return False
    return _one_edit(word, known)


def _name_words(known: set[str]) -> list[str]:
    """The plain words of the repository's names ("long" of configs/long.yaml, "notes", "scan" of lr-scan): a typo of
    one is read as it ("the lnog config", "the lr scna sweep"), by two letters swapped only (names are not in the
    everyday words the typo fixer knows)."""
    words = {part for name in known for part in re.split(r"[-_.]", name)}
    return sorted(w for w in words if w.isalpha() and len(w) >= SWAP_ONLY)


# The words that open a question, fixed when two letters are swapped ("waht runs do we have"); not every English
# word, as a word the lists lack is often no typo ("three" is no swap of "there").
QUESTION_WORDS = ("what", "which", "where", "when", "have", "does", "show")


# Words written without their vowels, as in chat ("bnchmrk r1", "rslts", "chkpt"): the one word the rules read whose
# consonants they are, all of them or its first, last and some between in order. Four consonants at least ("llm",
# "gps", "stp" are words or could be several); an abbreviation of five at least.
UNVOWELLED = 4
ABBREVIATED = 5


def _consonants(word: str) -> str:
    return re.sub(r"[aeiou]", "", word)


def _unvowelled(word: str) -> str | None:
    if len(word) < UNVOWELLED or re.search(r"[aeiouy]", word):
        return None
    exact = [w for w in WORDS if _consonants(w) == word]
    if exact or len(word) < ABBREVIATED:
        return exact[0] if len(exact) == 1 else None
    shortened = [w for w in WORDS if _abbreviates(word, _consonants(w))]
    return shortened[0] if len(shortened) == 1 else None


def _abbreviates(short: str, consonants: str) -> bool:
    """Whether `short` is `consonants` with some left out, its first and last kept ("chkpt" of "chckpnt")."""
    if short[0] != consonants[0] or short[-1] != consonants[-1]:
        return False
    letters = iter(consonants)
    return all(letter in letters for letter in short)


# The English function words of three letters, whose two letters swapped are read as them ("adn" is "and"; "fro"
# is a word, KEEP).
SHORT_FUNCTION = sorted(w for w in ENGLISH_FUNCTION if len(w) == 3)


def _fix_typos(text: str, known: set[str]) -> str:
    """Words close to one the rules read replaced by it ("trian" -> "train", "machien" -> "machine"), and two letters
    swapped in a name of the repository ("lnog" -> "long")."""
    names = _name_words(known)

    def fix(found: re.Match) -> str:
        word = found.group(0)
        lowered = word.lower()
        if lowered in KEEP or lowered in known or lowered in WORDS or len(lowered) < 3:
            return word
        if full := _unvowelled(lowered):  # "bnchmrk", "rslts", "chkpt"
            return full
        if len(lowered) == 3:  # too short for a close match; two letters swapped still ("rnu" -> "run", "adn")
            swapped = [w for w in [*WORDS, *SHORT_FUNCTION] if _one_swap(lowered, w)]
            return swapped[0] if len(swapped) == 1 else word
        if any(lowered + end in WORDS for end in ("s", "d", "ed")) or lowered.removesuffix("s") in WORDS:
            # "step" is no typo of "steps", nor "measure" of "measured"
            return word
        if any(lowered == stem + ("d" if stem.endswith("e") else "ed") for stem in WORDS if lowered.startswith(stem)):
            return word  # "replicated" is the past of "replicate", no typo of it ("finishd" is one of "finished")
        if lowered.removesuffix("s") in KEEP or lowered.removesuffix("es") in KEEP:  # "states" is no "status"
            return word
        close = [w for w in WORDS if _one_swap(lowered, w)] or [w for w in WORDS if _close(lowered, w)]
        close = close or [n for n in names if _one_swap(lowered, n)]
        # two letters swapped in a question word ("waht" -> "what"): a question, though the rules do not read it
        close = close or [k for k in QUESTION_WORDS if _one_swap(lowered, k)]
        return close[0] if len(set(close)) == 1 or (close and _one_swap(lowered, close[0])) else word

    # a contraction's stem is no typo: "shouldn't" is not "should't", a negation kept; a word that ends its sentence
    # is one ("40 stpes."), a file's stem is not ("stpes.json")
    return re.sub(r"(?<![\w./=-])[A-Za-z]+(?![\w/=-]|\.\w|'t\b)", fix, text)
