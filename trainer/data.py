"""Training data: documents from built-in corpora or local files, tokenized once and cached, served as rows.

Rows are a pure function of (seed, global row index): epoch e shuffles the documents with seed (seed, e), and
row i of the epoch is either the i-th window of seq_len + 1 tokens over the concatenated documents (packing)
or the i-th piece of at most seq_len + 1 tokens of one document, padded (no packing). So the data position of
a run is one integer, every rank can compute any row without coordination, and the rows of an optimizer step
are the same whatever the layout, micro-batch or accumulation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from trainer.cache import cached_dir, fingerprint
from trainer.chat_data import check_format
from trainer.config import ConfigError, DataSpec
from trainer.corpus import BUILTIN_PREFIX, builtin_documents, builtin_fingerprint, builtin_names
from trainer.packing import row_from_segments

_LOADERS = {".txt": "text", ".text": "text", ".md": "text", ".jsonl": "json", ".json": "json", ".parquet": "parquet"}
_TEXT_UNITS = {"paragraph": "paragraph", "line": "line", "file": "document"}
TOKENIZED_VERSION = 1


def data_sources(spec: DataSpec, base_dir: Path) -> list[str]:
    """The builtin corpus name or the resolved local files, checked to exist and to have a known format."""
    entries = [spec.train] if isinstance(spec.train, str) else list(spec.train)
    if not entries:
        raise ConfigError("data.train: no training data given")
    check_format(spec, entries)
    builtins = [e for e in entries if e.startswith(BUILTIN_PREFIX)]
    if builtins:
        name = builtins[0][len(BUILTIN_PREFIX) :]
        if len(entries) > 1 or name not in builtin_names():
            raise ConfigError(
                f"data.train: {builtins[0]!r} must stand alone and be one of "
                f"{', '.join(BUILTIN_PREFIX + n for n in builtin_names())}"
            )
        return [builtins[0]]
    files = []
    for entry in entries:
        path = Path(entry).expanduser()
        path = path if path.is_absolute() else base_dir / path
        if not path.is_file():
            raise ConfigError(f"data.train: file not found: {path}")
        if path.suffix not in _LOADERS:
            raise ConfigError(f"data.train: {path.name}: unsupported format (use {', '.join(sorted(_LOADERS))})")
        files.append(str(path.resolve()))
    if spec.text_unit not in _TEXT_UNITS:
        raise ConfigError(f"data.text_unit: {spec.text_unit!r} is not one of {', '.join(_TEXT_UNITS)}")
    return files


def sources_fingerprint(spec: DataSpec, sources: list[str]) -> str:
    if sources[0].startswith(BUILTIN_PREFIX):
        return fingerprint(sources[0], builtin_fingerprint(sources[0][len(BUILTIN_PREFIX) :]))
    stats = [(s, Path(s).stat().st_size, Path(s).stat().st_mtime_ns) for s in sources]
    if spec.format != "text":
        return fingerprint(stats, spec.format, spec.prompt_field, spec.response_field, spec.messages_field)
    return fingerprint(stats, spec.text_field, spec.text_unit)


def read_documents(spec: DataSpec, sources: list[str]) -> list[str]:
    """All training documents as strings, in a fixed order."""
    if sources[0].startswith(BUILTIN_PREFIX):
        return builtin_documents(sources[0][len(BUILTIN_PREFIX) :], split="train")
    from datasets import load_dataset

    documents = []
    for source in sources:
        builder = _LOADERS[Path(source).suffix]
        kwargs = {"sample_by": _TEXT_UNITS[spec.text_unit]} if builder == "text" else {}
        try:
            dataset = load_dataset(builder, data_files=[source], split="train", **kwargs)
        except Exception as e:  # datasets raises its own error types for malformed files
            cause = e.__cause__ or e
            raise ConfigError(
                f"data.train: cannot read {Path(source).name}: {str(cause).strip().splitlines()[0]}"
            ) from None
        column = "text" if builder == "text" else spec.text_field
        if column not in dataset.column_names:
            raise ConfigError(f"data.text_field: {Path(source).name} has no column {column!r} ({dataset.column_names})")
        documents.extend(text for text in dataset[column] if isinstance(text, str) and text.strip())
    if not documents:
        raise ConfigError("data.train: the files hold no text")
    return documents


@dataclass
class TokenizedCorpus:
    """Every document's token ids followed by end-of-sequence, concatenated; offsets delimit documents.

    Fine-tuning corpora (trainer.chat_data) hold rendered examples instead, without end-of-sequence (the template
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


def prepare_corpus(tokenizer, key: str, read: Callable[[], list[str]]) -> Path:
    """Tokenize once into the cache; `read()` supplies the documents, only when they are not cached yet."""

    def build(out: Path) -> None:
        texts = read()
        chunks = []
        eos = np.array([tokenizer.eos_token_id], dtype=np.uint32)
        for start in range(0, len(texts), 1024):  # uint32 per batch: Python ints would cost ~10x the memory
            for ids in tokenizer(texts[start : start + 1024], add_special_tokens=False)["input_ids"]:
                chunks.append(np.concatenate([np.asarray(ids, dtype=np.uint32), eos]))
        _save_corpus(out, chunks)

    return cached_dir("tokenized", fingerprint(TOKENIZED_VERSION, key), build)


def prepare_example_corpus(key: str, read: Callable[[], Iterable[tuple[list[int], list[bool]]]]) -> Path:
    """Like prepare_corpus for examples already tokenized, each as (token ids, whether the loss counts each)."""

    def build(out: Path) -> None:
        examples = list(read())
        _save_corpus(
            out,
            [np.asarray(ids, dtype=np.uint32) for ids, _ in examples],
            [np.asarray(counted, dtype=bool) for _, counted in examples],
        )

    return cached_dir("tokenized", fingerprint(TOKENIZED_VERSION, "examples", key), build)


def _save_corpus(out: Path, documents: list[np.ndarray], targets: list[np.ndarray] | None = None) -> None:
    np.save(out / "tokens.npy", np.concatenate(documents))
    lengths = [len(d) for d in documents]
    np.save(out / "offsets.npy", np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)]))
    if targets is not None:
        np.save(out / "targets.npy", np.concatenate(targets))


class RowSource:
    """Rows of seq_len positions, indexed globally across epochs (see the module docstring)."""

    def __init__(self, corpus: TokenizedCorpus, seq_len: int, packing: bool, seed: int, shuffle: bool = True):
        self.corpus, self.seq_len, self.packing, self.seed, self.shuffle = corpus, seq_len, packing, seed, shuffle
        lengths = corpus.lengths
        if packing:
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
        if epoch == self._epoch:
            return
        n = len(self.corpus.lengths)
        order = np.random.default_rng([self.seed, epoch]).permutation(n) if self.shuffle else np.arange(n)
        lengths = self.corpus.lengths[order]
        units = lengths if self.packing else self._pieces(lengths)
        self._order, self._starts = order, np.concatenate([[0], np.cumsum(units)])
        self._epoch = epoch

    def row(self, index: int) -> dict[str, np.ndarray]:
        epoch, index = divmod(index, self.rows_per_epoch)
        self._enter_epoch(epoch)
        width = self.seq_len + 1
        row = _Row(np.zeros(width, dtype=np.int64), np.full(width, -1, dtype=np.int64), np.ones(width, dtype=bool))
        if self.packing:
            start = index * self.seq_len
            self._fill_stream(start, row)
        else:
            k = int(np.searchsorted(self._starts, index, side="right") - 1)
            self._copy(k, (index - self._starts[k]) * self.seq_len, row, 0)
        counted = row.counted if self.corpus.targets is not None else None
        return row_from_segments(row.tokens, row.segments, counted)

    def _copy(self, k: int, skip: int, row: _Row, at: int) -> int:
        """Copy the epoch's document k, from its token `skip`, into the row from position `at`: how many fit."""
        d = self._order[k]
        begin, end = self.corpus.offsets[d] + skip, self.corpus.offsets[d + 1]
        take = int(min(end - begin, len(row.tokens) - at))
        source, target = slice(begin, begin + take), slice(at, at + take)
        row.tokens[target], row.segments[target] = self.corpus.tokens[source], k
        if self.corpus.targets is not None:
            row.counted[target] = self.corpus.targets[source]
        return take

    def _fill_stream(self, start: int, row: _Row) -> None:
        """Copy stream positions [start, start + len(row.tokens)) of the epoch's concatenation."""
        k = int(np.searchsorted(self._starts, start, side="right") - 1)
        filled = 0
        while filled < len(row.tokens) and k < len(self._order):
            filled += self._copy(k, start + filled - self._starts[k], row, filled)
            k += 1

    def batch(self, indices: list[int]) -> dict[str, torch.Tensor]:
        rows = [self.row(i) for i in indices]
        return {key: torch.from_numpy(np.stack([r[key] for r in rows])) for key in rows[0]}


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
