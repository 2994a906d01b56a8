"""Training data: documents from built-in corpora or local files, tokenized once and cached, served as rows.

Rows are a pure function of (seed, global row index): epoch e shuffles the documents with seed (seed, e), and
row i of the epoch is either the i-th window of seq_len + 1 tokens over the concatenated documents (packing)
or the i-th piece of at most seq_len + 1 tokens of one document, padded (no packing). So the data position of
a run is one integer, every rank can compute any row without coordination, and the rows of an optimizer step
are the same whatever the layout, micro-batch or accumulation.

Fine-tuning examples are never split, since a later piece would train a response without its prompt. Packed,
they fill rows whole, in corpus order (a row takes examples while the next one fits, then padding), and epoch e
shuffles those rows with seed (seed, e); unpacked, each example gets one row. An example longer than a row is cut
to its first seq_len + 1 tokens, its prompt first; RowSource counts and logs those.
"""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np
import torch

from trainer.config import ConfigError, DataSpec
from trainer.data.chat import check_example_sources, check_format, record_fields
from trainer.data.corpus import (
    BUILTIN_PREFIX,
    TEXT_UNITS,
    builtin_documents,
    builtin_fingerprint,
    builtin_names,
    loaded_columns,
    read_rows,
    resolve_entry,
    source_kind,
    source_label,
    table_columns,
)
from trainer.data.packing import row_from_segments, whole_example_rows
from trainer.host.cache import cached_dir, fingerprint

log = logging.getLogger("meshpilot.data")

TOKENIZED_VERSION = 1  # the token stream, not how it is written: a corpus cached by earlier versions stays valid
TOKENIZE_ROWS = 1024  # documents (or examples) tokenized and written at a time
TOKENIZE_CHARS = 1 << 24  # ... or fewer, once they hold this much text


def data_sources(spec: DataSpec, base_dir: Path) -> list[str]:
    """The builtin corpus name or the resolved local sources (trainer.data.corpus.resolve_entry), checked to exist, to
    have a known format and, for parquet files and `datasets` directories, to have the columns the format reads."""
    entries = [spec.train] if isinstance(spec.train, str) else list(spec.train)
    if not entries:
        raise ConfigError("data.train: no training data given")
    check_format(spec)
    builtins = [e for e in entries if e.startswith(BUILTIN_PREFIX)]
    if builtins:
        name = builtins[0][len(BUILTIN_PREFIX) :]
        if len(entries) > 1 or name not in builtin_names():
            raise ConfigError(
                f"data.train: {builtins[0]!r} must stand alone and be one of "
                f"{', '.join(BUILTIN_PREFIX + n for n in builtin_names())}"
            )
        sources = [builtins[0]]
    else:
        sources = [source for entry in entries for source in resolve_entry(entry, base_dir)]
        if spec.text_unit not in TEXT_UNITS:
            raise ConfigError(f"data.text_unit: {spec.text_unit!r} is not one of {', '.join(TEXT_UNITS)}")
    check_example_sources(spec, sources)
    for source in sources:
        _check_columns(spec, source, table_columns(source))
    return sources


def _check_columns(spec: DataSpec, source: str, columns: list[str] | None) -> None:
    """Every column the format reads is in the source (None: columns not known without reading; skipped)."""
    if columns is None:
        return
    wanted = {"text_field": spec.text_field} if spec.format == "text" else record_fields(spec)
    for key, column in wanted.items():
        if column not in columns:
            raise ConfigError(f"data.{key}: {source_label(source)} has no column {column!r} ({columns})")


def sources_fingerprint(spec: DataSpec, sources: list[str]) -> str:
    if sources[0].startswith(BUILTIN_PREFIX):
        return fingerprint(sources[0], builtin_fingerprint(sources[0][len(BUILTIN_PREFIX) :]))
    stats = [_stat(s) for s in sources]
    if spec.format != "text":
        return fingerprint(stats, spec.format, spec.prompt_field, spec.response_field, spec.messages_field)
    return fingerprint(stats, spec.text_field, spec.text_unit)


def _stat(source: str) -> tuple:
    """A file's size and time (as always: earlier runs' cache keys stay), a directory's for each of its files."""
    path = Path(source)
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.is_file())
        return (source, [(p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in files])
    return (source, path.stat().st_size, path.stat().st_mtime_ns)


def read_documents(spec: DataSpec, sources: list[str]) -> Documents:
    """All training documents, in a fixed order, read in batches whenever iterated (see Documents)."""
    return Documents(spec, sources)


class Documents:
    """The training documents of the sources as strings, in a fixed order: an iterable that reads them again, a batch
    of rows at a time (trainer.data.corpus.read_rows), each time it is iterated, so a corpus larger than memory can
    train a tokenizer and be tokenized. Blank and non-text values are left out.

    Made only once every source is known to be readable with its column and the sources hold some text, so those
    problems fail here, in the launcher, in one line.
    """

    def __init__(self, spec: DataSpec, sources: list[str]):
        self.spec, self.sources = spec, list(sources)
        if not self.builtin:
            for source in self.sources:
                if source.endswith(".jsonl"):
                    check_jsonl_text(Path(source), self._column(source))
                column, columns = self._column(source), loaded_columns(source, spec.text_unit)
                if column not in columns:
                    raise ConfigError(f"data.text_field: {source_label(source)} has no column {column!r} ({columns})")
        if next(iter(self), None) is None:
            raise ConfigError("data.train: the files hold no text")

    @property
    def builtin(self) -> bool:
        return self.sources[0].startswith(BUILTIN_PREFIX)

    def _column(self, source: str) -> str:
        """text_field, except in .txt/.md files: their loader puts each document in "text"."""
        return "text" if source_kind(source) == "text" else self.spec.text_field

    def __iter__(self) -> Iterator[str]:
        if self.builtin:
            yield from builtin_documents(self.sources[0][len(BUILTIN_PREFIX) :], split="train")
            return
        for source in self.sources:
            column = self._column(source)
            for rows in read_rows(source, [column], self.spec.text_unit):
                yield from (text for text in rows[column] if isinstance(text, str) and text.strip())

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Documents({[source_label(s) for s in self.sources]})"


def check_jsonl_text(path: Path, field: str) -> None:
    """Every line of a .jsonl file is a JSON object whose `field` is text, or ConfigError naming the file and the
    line (counted from 1) and what is wrong with it: a row without usable text is refused, never skipped in silence.
    Blank lines are no rows. An empty file is refused too. Read once, before the file is tokenized."""
    rows = 0
    with path.open(encoding="utf-8", errors="replace") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            where = f"data.train: cannot read {path.name}: line {number}"
            try:
                row = json.loads(line)
            except ValueError as e:
                raise ConfigError(f"{where}: not valid JSON ({e.msg}, column {e.colno})") from None
            if not isinstance(row, dict):
                raise ConfigError(f"{where}: not a JSON object")
            if field not in row:
                raise ConfigError(f"{where}: no {field!r} field (data.text_field; the row has {sorted(row)})")
            if not isinstance(row[field], str):
                raise ConfigError(f"{where}: {field!r} is {json.dumps(row[field])[:40]}, not text")
            rows += 1
    if rows == 0:
        raise ConfigError(f"data.train: {path.name} is empty: no JSON lines in it")


@dataclass
class TokenizedCorpus:
    """Every document's token ids followed by end-of-sequence, concatenated; offsets delimit documents.

    Fine-tuning corpora (trainer.data.chat) hold rendered examples instead, without end-of-sequence (the template
    ends each turn its own way), and `targets`: per token, whether the loss counts it (the responses).
    """

    tokens: np.ndarray
    offsets: np.ndarray
    targets: np.ndarray | None = None

    @classmethod
    def load(cls, directory: Path) -> TokenizedCorpus:
        targets = directory / "targets.npy"
        return cls(
            np.load(directory / "tokens.npy", mmap_mode="r"),
            np.load(directory / "offsets.npy"),
            np.load(targets, mmap_mode="r") if targets.is_file() else None,
        )

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)


def prepare_corpus(tokenizer, key: str, read: Callable[[], Iterable[str]]) -> Path:
    """Tokenize once into the cache; `read()` supplies the documents, only when they are not cached yet.

    The documents are taken TOKENIZE_ROWS at a time (fewer when they are long), tokenized, and their ids appended
    to the cache's files before the next are read: neither the text nor the ids are ever whole in memory.
    """

    def build(out: Path) -> None:
        eos = tokenizer.eos_token_id
        with CorpusWriter(out) as writer:
            for texts in _batches(read(), len):
                ids = tokenizer(texts, add_special_tokens=False)["input_ids"]
                lengths = np.fromiter((len(d) + 1 for d in ids), dtype=np.int64, count=len(ids))
                flat = itertools.chain.from_iterable(itertools.chain(d, (eos,)) for d in ids)
                writer.add(np.fromiter(flat, dtype=np.uint32, count=int(lengths.sum())), lengths)

    return cached_dir("tokenized", fingerprint(TOKENIZED_VERSION, key), build)


def prepare_example_corpus(key: str, read: Callable[[], Iterable[tuple[list[int], list[bool]]]]) -> Path:
    """Like prepare_corpus for examples already tokenized, each as (token ids, whether the loss counts each)."""

    def build(out: Path) -> None:
        with CorpusWriter(out, targets=True) as writer:
            for examples in _batches(read(), lambda example: len(example[0])):
                lengths = np.fromiter((len(ids) for ids, _ in examples), dtype=np.int64, count=len(examples))
                count = int(lengths.sum())
                tokens = itertools.chain.from_iterable(ids for ids, _ in examples)
                counted = itertools.chain.from_iterable(c for _, c in examples)
                writer.add(
                    np.fromiter(tokens, dtype=np.uint32, count=count),
                    lengths,
                    np.fromiter(counted, dtype=bool, count=count),
                )

    return cached_dir("tokenized", fingerprint(TOKENIZED_VERSION, "examples", key), build)


def _batches(items: Iterable, size: Callable[[object], int]) -> Iterator[list]:
    """Consecutive lists of TOKENIZE_ROWS items, cut earlier once their sizes add up to TOKENIZE_CHARS; each list
    is handed on before the next item is taken from `items`."""
    batch, total = [], 0
    for item in items:
        batch.append(item)
        total += size(item)
        if len(batch) >= TOKENIZE_ROWS or total >= TOKENIZE_CHARS:
            yield batch
            batch, total = [], 0
    if batch:
        yield batch


class CorpusWriter:
    """A TokenizedCorpus written into a directory piece by piece: tokens.npy, offsets.npy and (for examples)
    targets.npy grow with each `add`, so what is held in memory is one batch, whatever the corpus's size."""

    def __init__(self, out: Path, targets: bool = False):
        self.tokens = _NpyAppender(out / "tokens.npy", np.uint32)
        self.offsets = _NpyAppender(out / "offsets.npy", np.int64)
        self.targets = _NpyAppender(out / "targets.npy", np.bool_) if targets else None
        self.offsets.append(np.zeros(1, dtype=np.int64))
        self.end = 0  # tokens written

    def add(self, tokens: np.ndarray, lengths: np.ndarray, targets: np.ndarray | None = None) -> None:
        """Documents, concatenated in `tokens`, of `lengths` tokens each (and, for examples, their targets)."""
        self.tokens.append(tokens)
        self.offsets.append(self.end + np.cumsum(lengths, dtype=np.int64))
        self.end += len(tokens)
        if self.targets is not None:
            self.targets.append(targets)

    def __enter__(self) -> CorpusWriter:
        return self

    def __exit__(self, *exc) -> None:
        for appender in (self.tokens, self.offsets, self.targets):
            if appender is not None:
                appender.close()


class _NpyAppender:
    """A one-dimensional .npy file written in pieces, each flushed to the file as it comes. numpy pads the header
    so that the length can grow to 21 digits in place; it is rewritten with the final length at close."""

    def __init__(self, path: Path, dtype: type):
        self.dtype, self.length = np.dtype(dtype), 0
        self.file: IO[bytes] = open(path, "wb")  # noqa: SIM115 - closed by close(), after the last piece
        self._header()

    def _header(self) -> None:
        descr = {"descr": np.lib.format.dtype_to_descr(self.dtype), "fortran_order": False, "shape": (self.length,)}
        np.lib.format.write_array_header_1_0(self.file, descr)
        self.file.flush()

    def append(self, values: np.ndarray) -> None:
        self.file.write(np.ascontiguousarray(values, dtype=self.dtype).tobytes())
        self.file.flush()
        self.length += len(values)

    def close(self) -> None:
        if self.file.closed:
            return
        data_start = self.file.tell() - self.length * self.dtype.itemsize
        self.file.seek(0)
        self._header()
        if self.file.tell() != data_start:  # cannot happen with numpy's padding, but would corrupt the file
            raise RuntimeError(f"{self.file.name}: the .npy header changed size")
        self.file.close()


class RowSource:
    """Rows of seq_len positions, indexed globally across epochs (see the module docstring)."""

    def __init__(self, corpus: TokenizedCorpus, seq_len: int, packing: bool, seed: int, shuffle: bool = True):
        self.corpus, self.seq_len, self.packing, self.seed, self.shuffle = corpus, seq_len, packing, seed, shuffle
        lengths = corpus.lengths
        examples = corpus.targets is not None  # fine-tuning examples, not documents
        self.cut_examples = _cut_examples(corpus, seq_len) if examples else 0
        # Examples are packed whole (a piece of one would be a response without its prompt): row r holds examples
        # [_example_rows[r], _example_rows[r + 1]), fixed by their lengths whatever the epoch.
        self._example_rows = whole_example_rows(lengths, seq_len + 1) if packing and examples else None
        if self._example_rows is not None:
            self.rows_per_epoch = len(self._example_rows) - 1
        elif packing:
            self.rows_per_epoch = int((lengths.sum() - 1) // seq_len)
        else:
            self.rows_per_epoch = int(self._pieces(lengths).sum())
        if self.rows_per_epoch < 1:
            raise ConfigError(f"data: the corpus is too small for one row of seq_len {seq_len}")
        self._epoch = -1

    def _pieces(self, lengths: np.ndarray) -> np.ndarray:
        """Rows each document needs unpacked: a document of n tokens has n - 1 targets. A fine-tuning example
        (a corpus with targets) gets one row, cut at its end: a later piece would lose its prompt."""
        if self.corpus.targets is not None:
            return np.ones_like(lengths)
        return np.maximum(1, -(-(lengths - 1) // self.seq_len))

    def _enter_epoch(self, epoch: int) -> None:
        """The epoch's order: of the documents, or of the rows when these pack whole examples."""
        if epoch == self._epoch:
            return
        n = self.rows_per_epoch if self._example_rows is not None else len(self.corpus.lengths)
        self._order = np.random.default_rng([self.seed, epoch]).permutation(n) if self.shuffle else np.arange(n)
        if self._example_rows is None:
            lengths = self.corpus.lengths[self._order]
            units = lengths if self.packing else self._pieces(lengths)
            self._starts = np.concatenate([[0], np.cumsum(units)])
        self._epoch = epoch

    def row(self, index: int) -> dict[str, np.ndarray]:
        epoch, index = divmod(index, self.rows_per_epoch)
        self._enter_epoch(epoch)
        width = self.seq_len + 1
        row = _Row(np.zeros(width, dtype=np.int64), np.full(width, -1, dtype=np.int64), np.ones(width, dtype=bool))
        if self._example_rows is not None:
            self._fill_examples(int(self._order[index]), row)
        elif self.packing:
            start = index * self.seq_len
            self._fill_stream(start, row)
        else:
            k = int(np.searchsorted(self._starts, index, side="right") - 1)
            self._copy(self._order[k], (index - self._starts[k]) * self.seq_len, row, 0, k)
        counted = row.counted if self.corpus.targets is not None else None
        return row_from_segments(row.tokens, row.segments, counted)

    def _copy(self, d: int, skip: int, row: _Row, at: int, segment: int) -> int:
        """Copy document d, from its token `skip`, into the row from position `at` as `segment`: how many fit."""
        begin, end = self.corpus.offsets[d] + skip, self.corpus.offsets[d + 1]
        take = int(min(end - begin, len(row.tokens) - at))
        source, target = slice(begin, begin + take), slice(at, at + take)
        row.tokens[target], row.segments[target] = self.corpus.tokens[source], segment
        if self.corpus.targets is not None:
            row.counted[target] = self.corpus.targets[source]
        return take

    def _fill_stream(self, start: int, row: _Row) -> None:
        """Copy stream positions [start, start + len(row.tokens)) of the epoch's concatenation."""
        k = int(np.searchsorted(self._starts, start, side="right") - 1)
        filled = 0
        while filled < len(row.tokens) and k < len(self._order):
            filled += self._copy(self._order[k], start + filled - self._starts[k], row, filled, k)
            k += 1

    def _fill_examples(self, r: int, row: _Row) -> None:
        """Copy the examples of packed row r, each whole (one longer than the row alone, cut to it); padding after."""
        filled = 0
        for d in range(self._example_rows[r], self._example_rows[r + 1]):
            filled += self._copy(d, 0, row, filled, d)

    def batch(self, indices: list[int]) -> dict[str, torch.Tensor]:
        rows = [self.row(i) for i in indices]
        return {key: torch.from_numpy(np.stack([r[key] for r in rows])) for key in rows[0]}


def _cut_examples(corpus: TokenizedCorpus, seq_len: int) -> int:
    """How many examples are longer than a row (seq_len + 1 tokens), logged: each trains on its first seq_len + 1
    tokens, its prompt and as much of its response as fits. Refused when that leaves every example no response."""
    width = seq_len + 1
    lengths = corpus.lengths
    cut = lengths > width
    if cut.all() and not any(corpus.targets[begin + 1 : begin + width].any() for begin in corpus.offsets[:-1]):
        raise ConfigError(
            f"data.seq_len {seq_len}: every example's prompt fills a row of {width} tokens, leaving no response to "
            f"train on (the shortest example has {int(lengths.min())} tokens)"
        )
    if cut.any():
        log.warning(
            "data: %d of %d examples are longer than a row of seq_len + 1 = %d tokens; each is cut to its prompt "
            "and as much of its response as fits",
            int(cut.sum()),
            len(lengths),
            width,
        )
    return int(cut.sum())


@dataclass
class _Row:
    """A row being filled: seq_len + 1 tokens, their segment ids, and whether the loss may count each token."""

    tokens: np.ndarray
    segments: np.ndarray
    counted: np.ndarray


@dataclass(frozen=True)
class BatchPlan:
    """Which global rows each data-parallel rank reads in each micro-batch of an optimizer step."""

    micro_batch: int
    grad_accum: int
    dp_degree: int

    @property
    def rows_per_step(self) -> int:
        return self.micro_batch * self.grad_accum * self.dp_degree

    def micro_batches(self, first_row: int, dp_rank: int) -> Iterator[list[int]]:
        start = first_row + dp_rank * self.micro_batch * self.grad_accum
        for j in range(self.grad_accum):
            begin = start + j * self.micro_batch
            yield list(range(begin, begin + self.micro_batch))


class BatchPrefetcher:
    """Reads the next optimizer step's micro-batches in a background thread while the current step computes, into
    pinned (page-locked) host memory when they go to a GPU: only from pinned memory does a non-blocking copy to the
    device run asynchronously.

    One thread does all the reading: a RowSource keeps per-epoch state and must not be shared between threads.
    Rows are a pure function of their index, so prefetched batches are exactly those read on demand.
    """

    def __init__(self, rows: RowSource, plan: BatchPlan, dp_rank: int, pin: bool):
        self.rows, self.plan, self.dp_rank, self.pin = rows, plan, dp_rank, pin
        self._reader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="meshpilot-prefetch")
        self._next: tuple[int, Future] | None = None  # (first row, its batches being read)

    def step_batches(self, first_row: int, prefetch_next: bool = True) -> list[dict[str, torch.Tensor]]:
        """The micro-batches of the step that starts at global row `first_row`; then starts reading the next
        step's (unless `prefetch_next` is false: the last step)."""
        if self._next is not None and self._next[0] == first_row:
            batches = self._next[1].result()
        else:  # nothing read ahead for this row (the first step, after a resume)
            batches = self._reader.submit(self._read, first_row).result()
        self._next = None
        if prefetch_next:
            following = first_row + self.plan.rows_per_step
            self._next = (following, self._reader.submit(self._read, following))
        return batches

    def close(self) -> None:
        self._reader.shutdown(wait=True, cancel_futures=True)

    def _read(self, first_row: int) -> list[dict[str, torch.Tensor]]:
        batches = [self.rows.batch(indices) for indices in self.plan.micro_batches(first_row, self.dp_rank)]
        if self.pin:
            batches = [{key: tensor.pin_memory() for key, tensor in batch.items()} for batch in batches]
        return batches


def plan_batches(global_batch_tokens: int, seq_len: int, micro_batch: int, dp_degree: int) -> BatchPlan:
    """Derive gradient accumulation from the global batch, or say exactly which numbers do not divide."""
    if global_batch_tokens % seq_len:
        raise ConfigError(
            f"train.global_batch_tokens {global_batch_tokens} is not a multiple of data.seq_len {seq_len}"
        )
    rows = global_batch_tokens // seq_len
    per_pass = micro_batch * dp_degree
    if micro_batch < 1 or rows % per_pass:
        raise ConfigError(
            f"train.global_batch_tokens {global_batch_tokens} = {rows} rows of {seq_len} tokens does not divide into "
            f"micro_batch {micro_batch} x {dp_degree} data-parallel ranks"
        )
    return BatchPlan(micro_batch, rows // per_pass, dp_degree)
