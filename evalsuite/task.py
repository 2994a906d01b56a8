"""Tasks are data: one YAML file per task, checked strictly, in the spirit of lm-evaluation-harness.

    name: addition                     # lower-case letters, digits, _ . -
    version: 1                         # bump when the task's meaning changes (the version hash changes anyway)
    description: Two-digit addition, answered by greedy generation.
    output_type: generate_until        # perplexity | loglikelihood | multiple_choice | generate_until
    data: {generator: addition}        # or {corpus: stdlib-docs} (its held-out split), or {files: {dev: dev.jsonl}}
    splits:
      dev: {size: 100}                 # public: may be shown, trained on, used for few-shot examples
      test: {size: 200, private: true} # private: generated from the store's secret seed, or sealed into the store
    prompt: "{a}+{b}="                 # the model's input; {field} inserts an item field
    target: "{answer}"                 # the expected continuation (multiple_choice: the gold choice's index)
    choices: choices                   # multiple_choice: the item field holding the options
    target_delimiter: ""               # between prompt and target or choice
    until: ["\\n"]                     # generate_until: the answer ends at the first of these
    max_new_tokens: 8                  # generate_until
    num_fewshot: 0                     # solved dev examples before each prompt
    fewshot_delimiter: "\\n"
    metrics: [exact_match]             # the first is the task's main score

A private split comes from the secret seed (generators) or from the store (`meshpilot bench seal`), never from a
file: a file beside the task is in the repository, and whatever is in the repository is public.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import string
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from evalsuite.errors import BenchError
from evalsuite.generators import GENERATORS, GENERATORS_VERSION, generate
from evalsuite.metrics import METRICS, OUTPUT_TYPES
from evalsuite.store import Store
from trainer.data.corpus import builtin_documents, builtin_fingerprint, builtin_names
from trainer.host.cache import cached_dir, fingerprint

BUILTIN_SUITE = "builtin"
BUILTIN_DIR = Path(__file__).parent / "tasks"
SPLITS = ("dev", "test")
PUBLIC_SEED = "public"  # dev items are meant to be seen: anyone can regenerate them
_WORD_GRAM = 8
_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")
_KEYS = {
    "name", "version", "description", "output_type", "data", "splits", "prompt", "target", "choices",
    "target_delimiter", "until", "max_new_tokens", "num_fewshot", "fewshot_delimiter", "metrics",
}  # fmt: skip
Item = dict[str, Any]


@dataclass(frozen=True)
class Split:
    name: str
    private: bool
    size: int | None


@dataclass(frozen=True)
class Task:
    name: str
    version: int
    description: str
    output_type: str
    data: dict[str, Any]
    splits: dict[str, Split]
    prompt: str
    target: str | None
    choices: str | None
    target_delimiter: str
    until: list[str]
    max_new_tokens: int
    num_fewshot: int
    fewshot_delimiter: str
    metrics: list[str]
    path: Path = field(compare=False)

    def definition(self) -> dict[str, Any]:
        """Everything that defines the task, for its version hash (not where its file happens to lie)."""
        d = asdict(self)
        d.pop("path")
        return d


@dataclass(frozen=True)
class Suite:
    name: str
    tasks: list[Task]


def load_suite(spec: str) -> Suite:
    """`builtin`, a directory of task files (every *.yaml in it), or one task file."""
    if spec == BUILTIN_SUITE:
        files, name = sorted(BUILTIN_DIR.glob("*.yaml")), BUILTIN_SUITE
    else:
        path = Path(spec).expanduser()
        if path.is_dir():
            files, name = sorted(path.glob("*.yaml")), path.resolve().name
        elif path.is_file():
            files, name = [path], path.stem
        else:
            raise BenchError(f"suite {spec!r}: not {BUILTIN_SUITE!r}, a directory of task files or a task file")
    if not files:
        raise BenchError(f"suite {spec!r}: no task files (*.yaml)")
    tasks = [load_task(f) for f in files]
    names = [t.name for t in tasks]
    duplicate = next((n for n in names if names.count(n) > 1), None)
    if duplicate:
        raise BenchError(f"suite {spec!r}: two tasks are named {duplicate!r}")
    return Suite(name, tasks)


def load_task(path: Path) -> Task:
    """Read and check one task file; every error names the file and the key."""
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise BenchError(f"{path}: not valid YAML: {str(e).splitlines()[0]}") from None
    if not isinstance(raw, dict):
        raise BenchError(f"{path}: a task file must be a mapping of keys")
    try:
        return _build(raw, path)
    except BenchError as e:
        raise BenchError(f"{path}: {e}") from None


def _build(raw: dict[str, Any], path: Path) -> Task:
    unknown = sorted(set(raw) - _KEYS, key=str)
    if unknown:
        raise BenchError(f"unknown key {unknown[0]!r} (known: {', '.join(sorted(_KEYS))})")
    for key in ("name", "output_type", "data", "splits", "prompt", "metrics"):
        if key not in raw:
            raise BenchError(f"missing key {key!r}")
    name = _typed(raw, "name", str)
    if not _NAME.match(name):
        raise BenchError(f"name {name!r}: use lower-case letters, digits, _ . -")
    output_type = _typed(raw, "output_type", str)
    if output_type not in OUTPUT_TYPES:
        raise BenchError(f"output_type {output_type!r} is not one of {', '.join(OUTPUT_TYPES)}")
    task = Task(
        name=name,
        version=_typed(raw, "version", int, 1),
        description=_typed(raw, "description", str, ""),
        output_type=output_type,
        data=_data(raw),
        splits=_splits(raw),
        prompt=_typed(raw, "prompt", str),
        target=_typed(raw, "target", str, None),
        choices=_typed(raw, "choices", str, None),
        target_delimiter=_typed(raw, "target_delimiter", str, ""),
        until=_string_list(raw, "until", []),
        max_new_tokens=_typed(raw, "max_new_tokens", int, 32),
        num_fewshot=_typed(raw, "num_fewshot", int, 0),
        fewshot_delimiter=_typed(raw, "fewshot_delimiter", str, "\n"),
        metrics=_string_list(raw, "metrics", None),
        path=path.resolve(),
    )
    _check_shape(task)
    _check_templates(task)
    return task


def _typed(raw: dict[str, Any], key: str, kind: type, default: Any = ...) -> Any:
    if key not in raw:
        return default
    value = raw[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise BenchError(f"{key}: expected {kind.__name__}, got {value!r}")
    return value


def _string_list(raw: dict[str, Any], key: str, default: list[str] | None) -> list[str]:
    value = raw.get(key, default)
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise BenchError(f"{key}: expected a list of non-empty strings, got {value!r}")
    return list(value)


def _data(raw: dict[str, Any]) -> dict[str, Any]:
    data = raw["data"]
    if not isinstance(data, dict) or len(data) != 1 or next(iter(data)) not in ("generator", "corpus", "files"):
        raise BenchError(f"data: expected exactly one of generator, corpus or files, got {data!r}")
    kind, value = next(iter(data.items()))
    if kind == "generator" and value not in GENERATORS:
        raise BenchError(f"data.generator: unknown generator {value!r} (known: {', '.join(GENERATORS)})")
    if kind == "corpus" and value not in builtin_names():
        raise BenchError(f"data.corpus: unknown corpus {value!r} (known: {', '.join(builtin_names())})")
    if kind == "files" and (
        not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())
    ):
        raise BenchError(f"data.files: expected a mapping of split to file, got {value!r}")
    return dict(data)


def _splits(raw: dict[str, Any]) -> dict[str, Split]:
    splits = raw["splits"]
    if not isinstance(splits, dict) or not splits:
        raise BenchError(f"splits: expected a mapping with dev and/or test, got {splits!r}")
    found = {}
    for name, spec in splits.items():
        if name not in SPLITS:
            raise BenchError(f"splits: unknown split {name!r} (use {' and '.join(SPLITS)})")
        spec = {} if spec is None else spec
        if not isinstance(spec, dict) or set(spec) - {"size", "private"}:
            raise BenchError(f"splits.{name}: expected keys size and private, got {spec!r}")
        size = _typed(spec, "size", int, None)
        if size is not None and size < 1:
            raise BenchError(f"splits.{name}.size must be at least 1, got {size}")
        found[name] = Split(name, _typed(spec, "private", bool, False), size)
    return found


def _check_shape(task: Task) -> None:
    """The keys each output type needs, and the metrics it can compute."""
    known = METRICS[task.output_type]
    if not task.metrics:
        raise BenchError(f"metrics: name at least one (for {task.output_type}: {', '.join(known)})")
    for metric in task.metrics:
        if metric not in known:
            raise BenchError(f"metrics: unknown metric {metric!r} for {task.output_type} (known: {', '.join(known)})")
    if (task.target is None) != (task.output_type == "perplexity"):
        need = "has no target" if task.output_type == "perplexity" else "needs a target template"
        raise BenchError(f"output_type {task.output_type} {need}")
    if (task.choices is None) != (task.output_type != "multiple_choice"):
        raise BenchError(f"choices: give it for multiple_choice tasks only (output_type is {task.output_type})")
    if task.output_type == "generate_until" and task.max_new_tokens < 1:
        raise BenchError(f"max_new_tokens must be at least 1, got {task.max_new_tokens}")
    if task.num_fewshot < 0 or (task.num_fewshot and "dev" not in task.splits):
        raise BenchError("num_fewshot: few-shot examples come from the dev split, which the task lacks")
    kind, value = next(iter(task.data.items()))
    for split in task.splits.values():
        if kind == "generator" and split.size is None:
            raise BenchError(f"splits.{split.name}.size: a generated split needs a size")
        if kind == "corpus" and split.private:
            raise BenchError(f"splits.{split.name}: the built-in corpus is public text, it cannot be private")
        if kind == "files" and split.private and split.name in value:
            raise BenchError(
                f"data.files.{split.name}: a private split must not be a file beside the task (it would be in the "
                "repository); seal it into the store with `meshpilot bench seal`"
            )
        if kind == "files" and not split.private and split.name not in value:
            raise BenchError(f"splits.{split.name}: public split without a file in data.files")
    if kind == "files":
        extra = set(value) - set(task.splits)
        if extra:
            raise BenchError(f"data.files: {sorted(extra)[0]!r} is not a split of the task")


def _check_templates(task: Task) -> None:
    """Templates must parse, and the prompt must not show a label: the model would be handed the answer."""
    prompt_fields = template_fields(task.prompt, "prompt")
    labels = template_fields(task.target, "target") if task.target else set()
    shown = sorted(prompt_fields & labels)
    if shown:
        private = [s.name for s in task.splits.values() if s.private]
        which = f"the label of the private {private[0]} split" if private else "a label"
        raise BenchError(f"prompt: refused: it shows {{{shown[0]}}}, {which}, to the model")
    kind, value = next(iter(task.data.items()))
    if kind == "generator":
        _check_fields(task, set(GENERATORS[value][0]), f"generator {value}")
    if kind == "corpus":
        _check_fields(task, {"text"}, f"corpus {value}")


def template_fields(template: str, where: str) -> set[str]:
    """The item fields a template inserts; only plain `{name}` fields are allowed."""
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as e:
        raise BenchError(f"{where}: bad template {template!r}: {e}") from None
    fields = set()
    for _, name, spec, conversion in parsed:
        if name is None:
            continue
        if not name.isidentifier() or spec or conversion:
            raise BenchError(f"{where}: template field {{{name}}} must be a plain item field name such as {{answer}}")
        fields.add(name)
    return fields


def _check_fields(task: Task, available: set[str], source: str) -> None:
    used = template_fields(task.prompt, "prompt") | (template_fields(task.target, "target") if task.target else set())
    used |= {task.choices} if task.choices else set()
    missing = sorted(used - available)
    if missing:
        known = ", ".join(sorted(available))
        raise BenchError(f"field {missing[0]!r} is not an item field of {source} (fields: {known})")


def render(template: str, item: Item) -> str:
    values = {k: ", ".join(map(str, v)) if isinstance(v, list) else str(v) for k, v in item.items()}
    return template.format_map(values)


def load_items(task: Task, split: str, store: Store) -> list[Item]:
    """The items of a split, checked against the templates. Only the scoring code may read a private split.

    Errors about a private split never quote an item: they name its position and the field only.
    """
    spec = task.splits.get(split)
    if spec is None:
        raise BenchError(f"task {task.name}: no split {split!r} (splits: {', '.join(task.splits)})")
    kind, value = next(iter(task.data.items()))
    if kind == "generator":
        dev = generate(value, f"{PUBLIC_SEED}:{task.name}:dev", task.splits["dev"].size) if "dev" in task.splits else []
        if split == "dev":
            return dev
        seed = store.secret() if spec.private else f"{PUBLIC_SEED}:{split}"
        return generate(value, f"{seed}:{task.name}:{split}", spec.size, exclude=dev)
    if kind == "corpus":
        items = [{"text": text} for text in _heldout_half(value, split)]
    elif split in value:
        items = read_jsonl(task.path.parent / value[split])
    else:
        items = store.sealed(task.name, split)
        if items is None:
            raise BenchError(
                f"task {task.name}: the private {split} split is not sealed in the store {store.root}; "
                f"seal it with `meshpilot bench seal {task.path} --split {split} FILE`"
            )
    items = items[: spec.size] if spec.size else items
    if not items:
        raise BenchError(f"task {task.name}: split {split} has no items")
    for index, item in enumerate(items):
        check_item(task, item, f"task {task.name}: split {split} item {index}")
    return items


def check_item(task: Task, item: Item, where: str) -> None:
    """An item must have every field the templates use; a multiple-choice item valid options and gold index."""
    if not isinstance(item, dict):
        raise BenchError(f"{where}: expected a JSON object")
    used = template_fields(task.prompt, "prompt") | (template_fields(task.target, "target") if task.target else set())
    missing = sorted(used - set(item))
    if missing:
        raise BenchError(f"{where}: no field {missing[0]!r}")
    if task.output_type == "perplexity" and not render(task.prompt, item).strip():
        raise BenchError(f"{where}: the text is empty")
    if task.output_type == "multiple_choice":
        options = item.get(task.choices)
        if not isinstance(options, list) or len(options) < 2 or not all(isinstance(o, str) for o in options):
            raise BenchError(f"{where}: field {task.choices!r} must be a list of two or more strings")
        gold = render(task.target, item)
        if not gold.isdigit() or int(gold) >= len(options):
            raise BenchError(f"{where}: the target must render to a choice index below {len(options)}")


def _heldout_half(corpus: str, split: str) -> list[str]:
    """The built-in corpus's held-out documents, decontaminated, halved into dev and test by a hash of their text."""
    half = 0 if split == "dev" else 1
    return [d for d in clean_heldout(corpus) if int(hashlib.sha256(d.encode()).hexdigest()[-8:], 16) % 2 == half]


@functools.cache  # the corpus fingerprint stats every standard-library file: once per process is enough
def clean_heldout(corpus: str) -> tuple[str, ...]:
    """Held-out documents that share no run of 8 words with the training split (cached: building takes seconds).

    Training never reads the held-out split, but the standard library repeats itself: a held-out docstring may be a
    near-copy of a trained one ("Return self+value." and its siblings). Those would measure memory, not modelling.
    """

    def build(out: Path) -> None:
        train = builtin_documents(corpus, "train")
        seen = {gram for text in train for gram in _word_grams(text)}
        joined = "\0".join(train)

        def clean(text: str) -> bool:  # too short for one run of words: clean unless copied whole
            return seen.isdisjoint(_word_grams(text)) if len(text.split()) >= _WORD_GRAM else text not in joined

        documents = [d for d in builtin_documents(corpus, "heldout") if clean(d)]
        (out / "documents.json").write_text(json.dumps(documents))

    key = fingerprint("heldout-clean", _WORD_GRAM, corpus, builtin_fingerprint(corpus))
    return tuple(json.loads((cached_dir("eval-heldout", key, build) / "documents.json").read_text()))


def _word_grams(text: str) -> set[tuple[str, ...]]:
    words = text.split()
    return {tuple(words[i : i + _WORD_GRAM]) for i in range(len(words) - _WORD_GRAM + 1)}


def read_jsonl(path: Path) -> list[Item]:
    """Items, one JSON object a line; errors name the line, never its content (it may be private)."""
    if not path.is_file():
        raise BenchError(f"file not found: {path}")
    items = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            items.append(json.loads(line))
        except json.JSONDecodeError as e:
            raise BenchError(f"{path}:{number}: not valid JSON: {e.msg}") from None
    return items


def task_version(task: Task, items: dict[str, list[Item]]) -> str:
    """Hash of the definition, the generators' code version and every item: changes when any would score apart.

    A hash of private items reveals nothing about them, so it may be published with the results.
    """
    digest = hashlib.sha256(json.dumps(task.definition(), sort_keys=True).encode())
    digest.update(f"generators:{GENERATORS_VERSION}".encode())
    for split in sorted(items):
        digest.update(json.dumps([split, items[split]], sort_keys=True).encode())
    return digest.hexdigest()[:16]


def suite_version(suite: Suite, versions: dict[str, str]) -> str:
    blob = json.dumps([suite.name, sorted(versions.items())])
    return hashlib.sha256(blob.encode()).hexdigest()[:16]
