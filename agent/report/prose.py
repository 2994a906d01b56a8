"""Prose around figures: from a language model when one is given, from templates otherwise.

A language model never writes a number. It is shown the facts (names, and the figures' values so it can compare
them) and asked for sentences that write `{name}` wherever a figure goes; the figures are filled in afterwards
from the result files. A reply with a digit or a number word outside the placeholders, an unknown placeholder
or Markdown structure is refused, and the template is used instead: stripping numbers out would leave sentences
that say something else, while refusing keeps every number traceable and the report still complete.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agent.report.figures import Figure, Page

PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")
_NUMBER_WORDS = re.compile(
    r"\b(zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|forty|fifty|hundred|"
    r"thousand|million|billion|dozen|half|twice|thrice|double|triple|quadruple|percent|fold)\b",
    re.IGNORECASE,
)
_STRUCTURE = re.compile(r"^\s*(#|\||[-*+] |\d+\.)|<|```", re.MULTILINE)  # headings, tables, lists, HTML, code
_LONGEST = 2000

INSTRUCTIONS = (
    "Write one or two short paragraphs of plain prose for the '{slot}' part of a training report. "
    "Wherever a figure belongs, write its placeholder in braces, e.g. {{tokens_per_s}}; never write a digit or a "
    "number in words, the placeholders are filled from the result files afterwards. No headings, lists, tables "
    "or code. Placeholders you may use: {names}."
)

# A value in a slot is a figure, a label (an id, a name) or a sequence of both (a layout: "dp_shard=" and 2).
Part = Figure | str | None
Value = Part | list[Part]


@dataclass
class Slot:
    name: str
    template: str  # the default text, with {placeholders}
    values: dict[str, Value]


def compose(slot: Slot, page: Page, prose: Any = None) -> tuple[str, str]:
    """The slot's text with figures filled in, and where its words came from: "model", "template" or a refusal."""
    text, origin = slot.template, "template"
    if prose is not None:
        try:
            reply = _ask(prose, slot)
        except Exception as error:  # a model that is down or over quota must not cost the user the report
            reply, problem = None, f"the model failed: {type(error).__name__}"
        else:
            problem = check_reply(reply, slot)
        if problem is None:
            text, origin = reply.strip(), "model"
        else:
            origin = f"template ({problem})"
    return fill(text, slot.values, page), origin


def check_reply(reply: Any, slot: Slot) -> str | None:
    """Why a generated paragraph cannot be used, or None when it can."""
    if not isinstance(reply, str) or not reply.strip():
        return "the reply was empty"
    if len(reply) > _LONGEST:
        return "the reply was too long"
    unknown = sorted(set(PLACEHOLDER.findall(reply)) - set(slot.values))
    if unknown:
        return f"the reply used an unknown placeholder {unknown[0]}"
    words = PLACEHOLDER.sub("", reply)
    if re.search(r"\d", words) or _NUMBER_WORDS.search(words):
        return "the reply wrote a number itself"
    if "{" in words or "}" in words:
        return "the reply had stray braces"
    if _STRUCTURE.search(words):
        return "the reply wrote Markdown structure"
    return None


def fill(text: str, values: dict[str, Value], page: Page) -> str:
    """Replace each {name} by its value; each figure shown is entered in the page's ledger."""
    return PLACEHOLDER.sub(lambda m: render(values[m[1]], page), text)


def render(value: Value, page: Page) -> str:
    parts = value if isinstance(value, list) else [value]
    return "".join(page.show(p) if isinstance(p, Figure) or p is None else p for p in parts)


def _ask(prose: Any, slot: Slot) -> Any:
    facts = {name: _preview(value) for name, value in slot.values.items()}
    instructions = INSTRUCTIONS.format(slot=slot.name, names=", ".join(slot.values))
    example = f"Example of the expected form: {slot.template}"
    if hasattr(prose, "invoke"):  # a langchain chat model
        listing = "\n".join(f"{{{name}}} = {text}" for name, text in facts.items())
        reply = prose.invoke([("system", f"{instructions}\n{example}"), ("human", f"Facts:\n{listing}")])
        return getattr(reply, "content", reply)
    if isinstance(prose, Callable):
        return prose(slot.name, f"{instructions}\n{example}", facts)
    raise TypeError("prose must be a callable (slot, instructions, facts) -> str or a langchain chat model")


def _preview(value: Value) -> str:
    parts = value if isinstance(value, list) else [value]
    return "".join(p.text if isinstance(p, Figure) else (p or "none") for p in parts)
