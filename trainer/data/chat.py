"""Fine-tuning data: instruction and chat examples, rendered with a chat template.

Examples come from .jsonl files (one a line), parquet files or `datasets` directories (one a row; trainer.data.corpus
reads them in batches). `data.format: instruction` reads a prompt and a response field per example,
`data.format: chat` a list of {role, content} messages. Both become conversations rendered by one chat template:
the tokenizer's own, or `data.chat_template` (a named one below, or a Jinja file). Every rendered example comes
with a mask of the tokens the loss counts: those of the assistant turns (each one of a multi-turn chat), never the
system or user turns. The mask reaches the labels through trainer.data.packing.row_from_segments, so packing keeps
examples apart as it does documents; unlike documents, examples are packed whole, never split across rows
(trainer.data.rows.RowSource). trainer.rank.step divides by the number of counted tokens over micro-batches and ranks.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from jinja2 import TemplateError
from transformers import PreTrainedTokenizerBase

from trainer.config import ConfigError, DataSpec
from trainer.data.corpus import read_rows, source_kind, source_label

FORMATS = ("text", "instruction", "chat")
ROLES = ("system", "user", "assistant", "tool")

# A plain template for tokenizers without one (the built-in tokenizer). Each turn ends with end-of-sequence, so a
# model trained on it learns where its answer stops; the loss counts that token as part of the assistant turn.
SIMPLE_TEMPLATE = (
    r"{% for m in messages %}{{ '<|' + m['role'] + '|>\n' + m['content'] + eos_token + '\n' }}{% endfor %}"
    r"{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}"
)
NAMED_TEMPLATES = {"simple": SIMPLE_TEMPLATE}

Messages = list[dict[str, str]]
Example = tuple[str, Messages]  # where it was read ("FILE line N", "PATH row N"), and its conversation


def check_format(spec: DataSpec) -> None:
    """The data format is one of FORMATS."""
    if spec.format not in FORMATS:
        close = difflib.get_close_matches(spec.format, FORMATS, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ConfigError(f"data.format: {spec.format!r} is not one of {', '.join(FORMATS)}{hint}")


_EXAMPLE_SOURCES = ("json", "parquet", "dataset")


def check_example_sources(spec: DataSpec, sources: list[str]) -> None:
    """Fine-tuning formats read records: .jsonl files, parquet files or `datasets` directories (resolved sources)."""
    if spec.format == "text":
        return
    wrong = [s for s in sources if source_kind(s) not in _EXAMPLE_SOURCES or s.endswith(".json")]
    if wrong:
        raise ConfigError(
            f"data.format {spec.format} reads .jsonl files (one example a line), .parquet files or datasets "
            f"directories; got {wrong[0]!r}"
        )


def record_fields(spec: DataSpec) -> dict[str, str]:
    """The fields (columns) a fine-tuning format reads from each example, by their config key."""
    if spec.format == "instruction":
        return {"prompt_field": spec.prompt_field, "response_field": spec.response_field}
    return {"messages_field": spec.messages_field}


def named_template(spec: DataSpec, base_dir: Path) -> str | None:
    """The template `data.chat_template` names (a known name, or a Jinja file), or None when it names none."""
    name = spec.chat_template
    if name is None:
        return None
    if name in NAMED_TEMPLATES:
        return NAMED_TEMPLATES[name]
    path = Path(name).expanduser()
    path = path if path.is_absolute() else base_dir / path
    if path.is_file():
        return path.read_text()
    close = difflib.get_close_matches(name, NAMED_TEMPLATES, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise ConfigError(
        f"data.chat_template: {name!r} is neither a named template ({', '.join(NAMED_TEMPLATES)}) nor a file{hint}"
    )


def check_template_available(spec: DataSpec, tokenizer_spec: str, base_dir: Path) -> None:
    """Fail before the tokenizer is trained when no template can exist: the built-in tokenizer has none."""
    if spec.format != "text" and named_template(spec, base_dir) is None and tokenizer_spec == "builtin":
        raise ConfigError(_no_template(tokenizer_spec))


def chat_template(spec: DataSpec, tokenizer: PreTrainedTokenizerBase, tokenizer_spec: str, base_dir: Path) -> str:
    """The template examples are rendered with: the one named, else the tokenizer's own."""
    template = named_template(spec, base_dir) or tokenizer.chat_template
    if not template:
        raise ConfigError(_no_template(tokenizer_spec))
    return template


def _no_template(tokenizer_spec: str) -> str:
    names = ", ".join(NAMED_TEMPLATES)
    return f"data.chat_template: tokenizer {tokenizer_spec} has no chat template; name one ({names}) or a Jinja file"


def read_examples(spec: DataSpec, sources: list[str]) -> Iterator[Example]:
    """Every example of the sources as a conversation, read as it is iterated (one batch of rows at a time); a bad
    one fails naming its file and line (.jsonl) or row (parquet, `datasets` directories)."""
    found = False
    for source in sources:
        records = _jsonl_records(source) if source.endswith(".jsonl") else _table_records(spec, source)
        for where, record in records:
            found = True
            yield where, _conversation(spec, record, where)
    if not found:
        raise ConfigError("data.train: the files hold no examples")


def _jsonl_records(source: str) -> Iterator[tuple[str, Any]]:
    with open(source, encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if line.strip():
                where = f"{Path(source).name} line {number}"
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as e:
                    raise ConfigError(f"data.train: {where}: not valid JSON ({e.msg})") from None
                yield where, record


def _table_records(spec: DataSpec, source: str) -> Iterator[tuple[str, dict[str, Any]]]:
    columns = list(dict.fromkeys(record_fields(spec).values()))
    number = 0
    for rows in read_rows(source, columns):
        for values in zip(*(rows[c] for c in columns), strict=True):
            number += 1
            yield f"{source_label(source)} row {number}", dict(zip(columns, values, strict=True))


def _conversation(spec: DataSpec, record: Any, where: str) -> Messages:
    if not isinstance(record, dict):
        raise ConfigError(f"data.train: {where}: expected a JSON object")
    if spec.format == "instruction":
        prompt, response = (_text_field(record, key, where) for key in (spec.prompt_field, spec.response_field))
        return [{"role": "user", "content": prompt}, {"role": "assistant", "content": response}]
    messages = record.get(spec.messages_field)
    if not isinstance(messages, list) or not messages:
        raise ConfigError(f"data.train: {where}: no {spec.messages_field!r} field holding a list of messages")
    conversation = [_message(m, where) for m in messages]
    if not any(m["role"] == "assistant" for m in conversation):
        raise ConfigError(f"data.train: {where}: no assistant turn, so nothing to train on")
    return conversation


def _text_field(record: dict[str, Any], key: str, where: str) -> str:
    if not isinstance(record.get(key), str):
        raise ConfigError(f"data.train: {where}: no {key!r} field holding text")
    return record[key]


def _message(message: Any, where: str) -> dict[str, str]:
    if not isinstance(message, dict) or not isinstance(message.get("content"), str):
        raise ConfigError(f"data.train: {where}: a message without text 'content'")
    if message.get("role") not in ROLES:
        raise ConfigError(f"data.train: {where}: message role {message.get('role')!r} is not one of {', '.join(ROLES)}")
    return {"role": message["role"], "content": message["content"]}


def example_texts(examples: Iterable[Example]) -> Iterator[str]:
    """The text of every turn, which the built-in tokenizer is trained on."""
    return (m["content"] for _, messages in examples for m in messages)


def render_example(
    tokenizer: PreTrainedTokenizerBase, template: str, messages: Messages, where: str = "example"
) -> tuple[list[int], list[bool]]:
    """Token ids of one conversation and, for each, whether the loss counts it (the assistant turns' tokens).

    The spans are found by rendering incrementally: the conversation up to each assistant turn with the generation
    prompt, then with the turn. Not `return_assistant_tokens_mask`, which needs {% generation %} markers that few
    templates have (and that would tie the spans to one template's cooperation). Each piece of text between
    those renderings is tokenized by itself, so the mask is exact whatever merges the tokenizer would make across
    a boundary, and a prompt is tokenized as at inference, where generation starts right after the generation
    prompt. A template that renders an earlier turn differently once later turns follow fails here, by name.
    """
    ids: list[int] = []
    counted: list[bool] = []
    rendered = ""

    def extend(text: str, count: bool) -> None:
        nonlocal rendered
        if not text.startswith(rendered):
            raise ConfigError(f"data.chat_template: renders {where} so that a turn changes once later turns follow")
        piece = tokenizer(text[len(rendered) :], add_special_tokens=False)["input_ids"]
        ids.extend(piece)
        counted.extend([count] * len(piece))
        rendered = text

    for i, message in enumerate(messages):
        if message["role"] == "assistant":
            extend(_render(tokenizer, template, messages[:i], True, where), False)
            extend(_render(tokenizer, template, messages[: i + 1], False, where), True)
    extend(_render(tokenizer, template, messages, False, where), False)
    return ids, counted


def _render(
    tokenizer: PreTrainedTokenizerBase, template: str, messages: Messages, generation_prompt: bool, where: str
) -> str:
    try:
        return tokenizer.apply_chat_template(
            messages, chat_template=template, tokenize=False, add_generation_prompt=generation_prompt
        )
    except TemplateError as e:
        raise ConfigError(f"data.chat_template: cannot render {where}: {e}") from None


def rendered_examples(
    spec: DataSpec, sources: list[str], tokenizer: PreTrainedTokenizerBase, template: str
) -> Iterator[tuple[list[int], list[bool]]]:
    """Every example of the sources, rendered and masked, as it is read."""
    return (render_example(tokenizer, template, messages, where) for where, messages in read_examples(spec, sources))
