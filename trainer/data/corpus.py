"""Corpora: the built-in ones, and local sources (files, parquet shards, `datasets` directories) read in batches.

Built-in corpora are made from text every Python installation already has, so nothing is downloaded.
`stdlib-docs` is the standard library's docstrings (modules, classes, functions): real English prose about
code, from one-liners to multi-page essays, so lengths vary the way real pre-training documents do.
Identical docstrings (inherited or copied methods) are kept once. A fixed 2% of documents, chosen by a hash of
their text so that no held-out text also appears in training, form a held-out split the trainer never reads.

Local sources: each `data.train` entry names a file, a glob pattern (its matches, sorted), a directory written by
`Dataset.save_to_disk` (of a `DatasetDict`: its train split) or another directory (its .parquet files, sorted).
`read_rows` reads any of them READ_ROWS rows at a time, so no source is ever whole in memory: parquet through
pyarrow's batch reader, `datasets` directories as the memory-mapped Arrow files they are, .jsonl/.json/.txt through
the `datasets` loaders (converted once into its on-disk cache, then read memory-mapped).
"""

from __future__ import annotations

import ast
import functools
import glob
import hashlib
import json
import os
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

from trainer.config import ConfigError

BUILTIN_PREFIX = "builtin:"
HELDOUT_PERCENT = 2
_SKIPPED_PACKAGES = {"site-packages", "dist-packages", "test", "tests", "idlelib", "lib2to3", "turtledemo"}
_MIN_CHARS = 20


def builtin_names() -> list[str]:
    return sorted(_CORPORA)


def builtin_documents(name: str, split: str = "train") -> list[str]:
    """The documents of a built-in corpus split ("train" or "heldout"), in a fixed order."""
    if name not in _CORPORA:
        raise ValueError(f"unknown built-in corpus {name!r}; available: {', '.join(builtin_names())}")
    if split not in ("train", "heldout"):
        raise ValueError(f"unknown split {split!r}; built-in corpora have 'train' and 'heldout'")
    unique = dict.fromkeys(text for _, text in _CORPORA[name]())  # first occurrence keeps the order
    return [text for text in unique if _is_heldout(text) == (split == "heldout")]


def builtin_fingerprint(name: str) -> str:
    """Changes when the corpus would change: another Python, whose version and build name the standard library it
    reads (hashing the library's files instead cost about a second of every launch)."""
    return hashlib.sha256(f"{name}:{_stdlib_root()}:{sys.version}".encode()).hexdigest()[:16]


def _is_heldout(text: str) -> bool:
    return int(hashlib.sha256(text.encode()).hexdigest(), 16) % 100 < HELDOUT_PERCENT


def _stdlib_root() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def _wanted(relative: Path) -> bool:
    return not _SKIPPED_PACKAGES.intersection(relative.parts)


@functools.cache  # parsing the standard library takes seconds; tokenizer and tokenization both read it
def _stdlib_docstrings() -> list[tuple[str, str]]:
    root = _stdlib_root()
    documents = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root)
        if not _wanted(relative):
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        module = ".".join(relative.with_suffix("").parts)
        documents.extend(_docstrings(tree, module))
    return documents


def _docstrings(node: ast.AST, qualname: str) -> list[tuple[str, str]]:
    found = []
    text = ast.get_docstring(node, clean=True)
    if text and len(text) >= _MIN_CHARS:
        found.append((qualname, text))
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            found.extend(_docstrings(child, f"{qualname}.{child.name}"))
    return found


_CORPORA = {"stdlib-docs": _stdlib_docstrings}


# --- local sources --------------------------------------------------------------------------------------------------

FILE_FORMATS = {
    ".txt": "text",
    ".text": "text",
    ".md": "text",
    ".jsonl": "json",
    ".json": "json",
    ".parquet": "parquet",
}
TEXT_UNITS = {"paragraph": "paragraph", "line": "line", "file": "document"}  # text_unit: the text loader's sample_by
READ_ROWS = 1024  # rows read from a source at a time
DATASET_STATE = "state.json"  # what Dataset.save_to_disk writes beside its Arrow files
DATASET_DICT = "dataset_dict.json"  # what DatasetDict.save_to_disk writes above its splits' directories
_GLOB_CHARS = frozenset("*?[")


def resolve_entry(entry: str, base_dir: Path) -> list[str]:
    """The sources one `data.train` entry names, as absolute paths, each checked to exist and to be readable as
    a source: the file itself; a glob's matches, sorted; a saved `datasets` directory; a directory's .parquet files,
    sorted."""
    path = Path(entry).expanduser()
    literal = path if path.is_absolute() else base_dir / path
    if _GLOB_CHARS & set(entry) and not literal.exists():  # a file named "a[1].txt" is itself, not a pattern
        pattern = str(path) if path.is_absolute() else os.path.join(glob.escape(str(base_dir)), str(path))
        matches = sorted(glob.glob(pattern, recursive=True))
        if not matches:
            raise ConfigError(f"data.train: no files match {pattern}")
        return [source for match in matches for source in _resolve_path(Path(match))]
    return _resolve_path(literal)


def _resolve_path(path: Path) -> list[str]:
    if path.is_dir():
        return _directory_sources(path)
    if not path.is_file():
        raise ConfigError(f"data.train: file not found: {path}")
    if path.suffix not in FILE_FORMATS:
        raise ConfigError(f"data.train: {path.name}: unsupported format (use {', '.join(sorted(FILE_FORMATS))})")
    return [str(path.resolve())]


def _directory_sources(path: Path) -> list[str]:
    if (path / DATASET_STATE).is_file():
        return [str(path.resolve())]
    if (path / DATASET_DICT).is_file():
        try:
            splits = list(json.loads((path / DATASET_DICT).read_text())["splits"])
        except (OSError, ValueError, KeyError, TypeError):
            raise ConfigError(f"data.train: {path / DATASET_DICT}: not a DatasetDict's list of splits") from None
        if "train" not in splits:
            raise ConfigError(
                f"data.train: {path} is a DatasetDict without a 'train' split (its splits: {', '.join(splits)}); "
                f"name the split's directory instead, e.g. {path / splits[0] if splits else path}"
            )
        if not (path / "train" / DATASET_STATE).is_file():
            raise ConfigError(f"data.train: {path / 'train'}: the train split has no {DATASET_STATE}")
        return [str((path / "train").resolve())]
    shards = sorted(p for p in path.iterdir() if p.suffix == ".parquet" and p.is_file())
    if not shards:
        raise ConfigError(
            f"data.train: {path} holds no .parquet files and is not a datasets directory (Dataset.save_to_disk); "
            "for other files give a glob pattern such as DIR/*.jsonl"
        )
    return [str(p.resolve()) for p in shards]


def source_kind(source: str) -> str:
    """builtin | dataset (a save_to_disk directory) | parquet | json | text."""
    if source.startswith(BUILTIN_PREFIX):
        return "builtin"
    if Path(source).is_dir():
        return "dataset"
    return FILE_FORMATS[Path(source).suffix]


def source_label(source: str) -> str:
    """How messages name a source: parquet files and `datasets` directories by their path (a shard's name may repeat
    in other directories), the files the `datasets` loaders read by their name, as they always have been."""
    return source if source_kind(source) in ("parquet", "dataset") else Path(source).name


def table_columns(source: str) -> list[str] | None:
    """The columns of a parquet file or `datasets` directory, from its schema alone (nothing read); None for other
    sources, whose columns are only known once the `datasets` loaders have read them (`loaded_columns`)."""
    kind = source_kind(source)
    if kind not in ("parquet", "dataset"):
        return None
    # pyarrow only for Parquet corpora
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        if kind == "parquet":
            return list(pq.read_schema(source).names)
        files = _arrow_files(source)
        if not files:  # no Arrow file at all: the features it was saved with
            return list(json.loads((Path(source) / "dataset_info.json").read_text()).get("features", {}))
        with pa.memory_map(str(files[0])) as stream:
            return list(pa.ipc.open_stream(stream).schema.names)
    except (OSError, ValueError, KeyError, TypeError, pa.ArrowException) as e:
        raise ConfigError(f"data.train: cannot read {source}: {_first_line(e)}") from None


def loaded_columns(source: str, text_unit: str) -> list[str]:
    """The columns of any local source; a .jsonl/.json/.txt file is converted into the `datasets` cache to know."""
    columns = table_columns(source)
    return columns if columns is not None else _load(source, text_unit).column_names


def read_rows(source: str, columns: list[str], text_unit: str = "paragraph") -> Iterator[dict[str, list]]:
    """The values of `columns` in a local source, READ_ROWS rows at a time, in the source's order.

    At most one batch of rows is held as Python objects: parquet through pyarrow's batch reader (one row group's
    column chunks at a time), `datasets` directories as memory-mapped Arrow streams, other files memory-mapped from
    the `datasets` cache they are converted into once.
    """
    kind = source_kind(source)
    if kind == "parquet":
        # pyarrow only for Parquet corpora
        import pyarrow.parquet as pq

        with pq.ParquetFile(source) as shards:
            for batch in shards.iter_batches(batch_size=READ_ROWS, columns=columns):
                yield batch.to_pydict()
    elif kind == "dataset":
        # pyarrow only for Parquet corpora
        import pyarrow as pa

        for path in _arrow_files(source):
            with pa.memory_map(str(path)) as stream:
                for batch in pa.ipc.open_stream(stream):
                    batch = batch.select(columns)
                    for start in range(0, batch.num_rows, READ_ROWS):
                        yield batch.slice(start, READ_ROWS).to_pydict()
    else:
        yield from _load(source, text_unit).select_columns(columns).iter(batch_size=READ_ROWS)


def _arrow_files(source: str) -> list[Path]:
    """A save_to_disk directory's Arrow files, in its state.json's order (the order `load_from_disk` reads)."""
    state = json.loads((Path(source) / DATASET_STATE).read_text())
    return [Path(source) / f["filename"] for f in state.get("_data_files", [])]


def _load(source: str, text_unit: str):
    """A .jsonl/.json/.txt file as a `datasets` Dataset: written once into the `datasets` cache, memory-mapped."""
    # datasets (seconds to import) only for a Hub corpus
    from datasets import load_dataset

    builder = FILE_FORMATS[Path(source).suffix]
    kwargs = {"sample_by": TEXT_UNITS[text_unit]} if builder == "text" else {}
    try:
        return load_dataset(builder, data_files=[source], split="train", **kwargs)
    except Exception as e:  # datasets raises its own error types for malformed files
        raise ConfigError(f"data.train: cannot read {Path(source).name}: {_first_line(e.__cause__ or e)}") from None


def _first_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__
