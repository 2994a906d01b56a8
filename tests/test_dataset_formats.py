"""Datasets as people keep them: `datasets` directories (save_to_disk, DatasetDict), parquet shards and globs.

Every source feeds the same path (trainer.data.corpus.read_rows -> Documents / read_examples -> the tokenizer -> the
cache), so each one must give exactly the token stream of the same texts written as a .jsonl file. Reading and
tokenizing stream: a batch of rows at a time, written to the cache as it goes. Bad input fails in one line.
"""

from __future__ import annotations

import json
import random
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from support import write_experiment

from trainer.config import ConfigError, DataSpec
from trainer.data import corpus as corpus_module
from trainer.data import rows as data_module
from trainer.data.chat import SIMPLE_TEMPLATE, read_examples, rendered_examples
from trainer.data.rows import (
    TokenizedCorpus,
    data_sources,
    prepare_corpus,
    prepare_example_corpus,
    read_documents,
    sources_fingerprint,
)
from trainer.data.tokenizer import load_tokenizer
from trainer.host.cache import fingerprint
from trainer.launch.launcher import TrainRequest, prepare

# Blank and missing texts are left out by every reader; the rest are kept exactly (newlines, unicode, spaces).
TEXTS = [
    "The first document.\nIt has two lines.",
    "Zweites Dokument: Größe, Maß und Übermaß.",
    "   ",
    None,
    "A longer one. " * 40,
    "tabs\tand  double  spaces  stay",
    "",
    "日本語のテキストも同じトークンになる。",
    "Paragraph one.\n\nParagraph two, in the same document.",
    "short",
    "last document, after an empty one",
]
KEPT = [t for t in TEXTS if isinstance(t, str) and t.strip()]


@pytest.fixture(autouse=True)
def hf_cache(tmp_path, monkeypatch):
    """Keep the datasets library's cache inside the test's directory, and its progress bars quiet."""
    import datasets
    import datasets.config

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-datasets")
    shown = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    yield
    if shown:
        datasets.enable_progress_bars()


def records(texts: list[str | None] = TEXTS) -> list[dict]:
    return [{"text": t, "id": i} for i, t in enumerate(texts)]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    return path


def write_parquet(path: Path, rows: list[dict], row_group_size: int = 3) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=row_group_size)
    return path


def save_dataset(path: Path, rows: list[dict], num_shards: int = 1) -> Path:
    import datasets

    datasets.Dataset.from_list(rows).save_to_disk(str(path), num_shards=num_shards)
    return path


def shards(rows: list[dict], n: int) -> list[list[dict]]:
    size = -(-len(rows) // n)
    return [rows[i : i + size] for i in range(0, len(rows), size)]


def write_source(kind: str, directory: Path, rows: list[dict]) -> str:
    """`rows` in the form `kind`; returns the data.train entry naming it (relative to `directory`)."""
    import datasets

    if kind == "jsonl":  # a jsonl row's text must be text (trainer.data.rows.check_jsonl_text): null is refused
        rows = [{k: "" if v is None else v for k, v in row.items()} for row in rows]
        return write_jsonl(directory / "data.jsonl", rows).name
    if kind == "parquet":
        return write_parquet(directory / "data.parquet", rows).name
    if kind in ("parquet-dir", "parquet-glob"):
        # Shard names sort in data order; written last-first, so neither creation nor listing order can pass.
        for k, part in reversed(list(enumerate(shards(rows, 3)))):
            write_parquet(directory / "shards" / f"train-{k:05d}-of-00003.parquet", part)
        (directory / "shards" / "README.md").write_text("not data: a glob and a directory take only .parquet\n")
        return "shards" if kind == "parquet-dir" else "shards/*.parquet"
    if kind == "dataset":
        return save_dataset(directory / "saved", rows, num_shards=min(3, len(rows))).name
    if kind == "dataset-dict":
        other = [{"text": "held-out text that training must not see", "id": -1}]
        splits = {"test": datasets.Dataset.from_list(other), "train": datasets.Dataset.from_list(rows)}
        datasets.DatasetDict(splits).save_to_disk(str(directory / "dict"))
        return "dict"
    raise AssertionError(kind)


FORMATS = ["parquet", "parquet-dir", "parquet-glob", "dataset", "dataset-dict"]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    """The built-in byte-level BPE, trained once on the texts (every source is tokenized with this one)."""
    directory = tmp_path_factory.mktemp("tokenizer")
    return load_tokenizer("builtin", 320, lambda: iter(KEPT), fingerprint("formats", KEPT), directory)


def tokenized(tokenizer, spec: DataSpec, base_dir: Path) -> TokenizedCorpus:
    sources = data_sources(spec, base_dir)
    key = sources_fingerprint(spec, sources)
    return TokenizedCorpus.load(prepare_corpus(tokenizer, key, lambda: read_documents(spec, sources)))


# --- the same token stream from every source --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", FORMATS)
def test_every_source_gives_the_jsonl_token_stream(tmp_path, tokenizer, kind):
    reference_dir, other_dir = tmp_path / "jsonl", tmp_path / kind
    reference_dir.mkdir()
    other_dir.mkdir()
    reference = tokenized(tokenizer, DataSpec(train=write_source("jsonl", reference_dir, records())), reference_dir)
    spec = DataSpec(train=write_source(kind, other_dir, records()))
    assert list(read_documents(spec, data_sources(spec, other_dir))) == KEPT
    corpus = tokenized(tokenizer, spec, other_dir)
    assert np.array_equal(corpus.tokens, reference.tokens)
    assert np.array_equal(corpus.offsets, reference.offsets)
    # ... and that stream is the texts' own ids, each followed by end-of-sequence, in order.
    eos = tokenizer.eos_token_id
    expected = [i for text in KEPT for i in [*tokenizer(text, add_special_tokens=False)["input_ids"], eos]]
    assert corpus.tokens.dtype == np.uint32 and corpus.tokens.tolist() == expected
    assert corpus.offsets.dtype == np.int64 and len(corpus.lengths) == len(KEPT)


def test_a_dataset_dict_split_can_be_named_by_its_directory(tmp_path, tokenizer):
    write_source("dataset-dict", tmp_path, records())
    spec = DataSpec(train="dict/test")
    assert data_sources(spec, tmp_path) == [str((tmp_path / "dict" / "test").resolve())]
    assert list(read_documents(spec, data_sources(spec, tmp_path))) == ["held-out text that training must not see"]


def test_entries_mix_and_keep_their_order(tmp_path):
    """Entries are read in the order given; within a glob or directory, shards in sorted name order."""
    first, second = records(TEXTS[:5]), records(TEXTS[5:])
    write_parquet(tmp_path / "b" / "x-1.parquet", second[len(second) // 2 :])
    write_parquet(tmp_path / "b" / "x-0.parquet", second[: len(second) // 2])
    save_dataset(tmp_path / "a", first)
    spec = DataSpec(train=["a", "b/x-*.parquet"])
    assert [Path(s).name for s in data_sources(spec, tmp_path)] == ["a", "x-0.parquet", "x-1.parquet"]
    assert list(read_documents(spec, data_sources(spec, tmp_path))) == KEPT
    deep = DataSpec(train="**/x-*.parquet")  # ** reaches any depth
    assert data_sources(deep, tmp_path) == data_sources(spec, tmp_path)[1:]
    (tmp_path / "plain[1].jsonl").write_text('{"text": "a file whose name looks like a pattern"}\n')
    assert data_sources(DataSpec(train="plain[1].jsonl"), tmp_path) == [str((tmp_path / "plain[1].jsonl").resolve())]


def test_text_field_names_the_column_in_every_source(tmp_path):
    rows = [{"body": t, "text": "not this one"} for t in TEXTS]
    for kind in ["jsonl", *FORMATS]:
        (tmp_path / kind).mkdir()
        spec = DataSpec(train=write_source(kind, tmp_path / kind, rows), text_field="body")
        assert list(read_documents(spec, data_sources(spec, tmp_path / kind))) == KEPT, kind
    (tmp_path / "notes.txt").write_text("A text file's documents.\n\nAre its paragraphs, whatever text_field says.")
    spec = DataSpec(train=["notes.txt", "parquet/data.parquet"], text_field="body")
    documents = list(read_documents(spec, data_sources(spec, tmp_path)))
    assert documents == ["A text file's documents.", "Are its paragraphs, whatever text_field says.", *KEPT]


# --- fine-tuning formats read the same examples from every source -----------------------------------------------------

INSTRUCTIONS = [
    {"prompt": "Name a prime number.", "response": "Seven.", "id": 0},
    {"prompt": "Spell 12 in words.", "response": "one two", "id": 1},
    {"prompt": "Größe?", "response": "Groß.\nSehr groß.", "id": 2},
]
CHATS = [
    {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}]},
    {
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Two plus two?"},
            {"role": "assistant", "content": "Four."},
            {"role": "user", "content": "And three more?"},
            {"role": "assistant", "content": "Seven."},
        ]
    },
    {"messages": [{"role": "user", "content": "Last"}, {"role": "assistant", "content": "one."}]},
]


@pytest.mark.parametrize(("data_format", "rows"), [("instruction", INSTRUCTIONS), ("chat", CHATS)])
@pytest.mark.parametrize("kind", ["parquet", "parquet-glob", "dataset", "dataset-dict"])
def test_fine_tuning_formats_read_every_source(tmp_path, tokenizer, data_format, rows, kind):
    def corpus(kind: str) -> tuple[TokenizedCorpus, list]:
        directory = tmp_path / kind
        directory.mkdir()
        spec = DataSpec(train=write_source(kind, directory, rows), format=data_format, chat_template="simple")
        sources = data_sources(spec, directory)
        conversations = [messages for _, messages in read_examples(spec, sources)]
        key = f"{sources_fingerprint(spec, sources)}:{data_format}"
        read = lambda: rendered_examples(spec, sources, tokenizer, SIMPLE_TEMPLATE)  # noqa: E731
        return TokenizedCorpus.load(prepare_example_corpus(key, read)), conversations

    reference, reference_conversations = corpus("jsonl")
    other, conversations = corpus(kind)
    assert conversations == reference_conversations and len(conversations) == len(rows)
    for name in ("tokens", "offsets", "targets"):
        assert np.array_equal(getattr(other, name), getattr(reference, name)), name
    assert other.targets.dtype == bool and 0 < other.targets.sum() < len(other.targets)


def test_a_bad_row_is_named_by_source_and_row(tmp_path):
    rows = [CHATS[0], {"messages": [{"role": "user", "content": "no answer"}]}]
    spec = DataSpec(train="saved", format="chat")
    save_dataset(tmp_path / "saved", rows)
    with pytest.raises(ConfigError) as excinfo:
        list(read_examples(spec, data_sources(spec, tmp_path)))
    saved = (tmp_path / "saved").resolve()
    assert str(excinfo.value) == f"data.train: {saved} row 2: no assistant turn, so nothing to train on"


# --- streaming: a batch of rows at a time, written as it goes ---------------------------------------------------------


class CountingTokenizer:
    """Ids from characters; checks at each call how far the documents were read and what the cache already holds."""

    eos_token_id = 0

    def __init__(self, produced: list[int], cache: Path):
        self.produced, self.cache = produced, cache
        self.batches: list[list[str]] = []
        self.read_by_then: list[int] = []  # documents the generator had handed out at each call
        self.on_disk: list[int] = []  # token ids in the cache's file at each call
        self.tokens_before = 0

    def __call__(self, texts: list[str], add_special_tokens: bool = False) -> dict:
        [staged] = self.cache.glob("tokenized/.*/tokens.npy")  # the entry being built, renamed when complete
        self.on_disk.append((staged.stat().st_size - 128) // 4)  # after numpy's 128-byte header, uint32 ids
        self.batches.append(list(texts))
        self.read_by_then.append(self.produced[0])
        ids = [[ord(c) for c in text] for text in texts]
        self.tokens_before += sum(len(d) + 1 for d in ids)
        return {"input_ids": ids}


@pytest.mark.parametrize(("rows", "chars"), [(100, 1 << 24), (1000, 2000)])
def test_tokenizing_takes_a_batch_at_a_time_and_writes_it_before_reading_on(tmp_path, monkeypatch, rows, chars):
    """The documents come from a generator that counts what it handed out. At every call of the tokenizer, the
    documents read so far are exactly those of the batches tokenized before plus this one (nothing read ahead,
    so nothing held beyond one batch), and the cache file on disk already holds every earlier batch's ids. A batch
    is TOKENIZE_ROWS documents, or fewer once they reach TOKENIZE_CHARS characters."""
    monkeypatch.setenv("MESHPILOT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(data_module, "TOKENIZE_ROWS", rows)
    monkeypatch.setattr(data_module, "TOKENIZE_CHARS", chars)
    documents = [f"document {i}: " + "x" * (i % 500) for i in range(1234)]
    produced = [0]

    def read():
        for text in documents:
            produced[0] += 1
            yield text

    tokenizer = CountingTokenizer(produced, tmp_path / "cache")
    corpus = TokenizedCorpus.load(prepare_corpus(tokenizer, "counting", read))
    batches = tokenizer.batches
    assert [t for batch in batches for t in batch] == documents
    assert len(batches) >= len(documents) // rows
    for batch in batches[:-1]:  # each cut exactly at the first limit reached
        full = len(batch) == rows or sum(map(len, batch)) >= chars
        assert full and len(batch) <= rows and sum(map(len, batch[:-1])) < chars
    sizes = [len(batch) for batch in batches]
    assert tokenizer.read_by_then == np.cumsum(sizes).tolist()  # never a document ahead of the tokenizer
    written_before = np.cumsum([0] + [sum(len(t) + 1 for t in batch) for batch in batches[:-1]])
    assert tokenizer.on_disk == written_before.tolist()  # every earlier batch already in the file
    expected = [i for text in documents for i in [*map(ord, text), 0]]
    assert corpus.tokens.tolist() == expected
    assert corpus.lengths.tolist() == [len(text) + 1 for text in documents]


def test_examples_are_written_a_batch_at_a_time(tmp_path, monkeypatch):
    """The same for rendered examples: when example k is handed out, the cache holds exactly the examples of the
    batches before k's, so at most one batch is ever in memory."""
    monkeypatch.setenv("MESHPILOT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(data_module, "TOKENIZE_ROWS", 16)
    examples = [(list(range(1, 2 + k % 7)), [j % 2 == 0 for j in range(1 + k % 7)]) for k in range(100)]
    written = np.cumsum([0] + [len(ids) for ids, _ in examples])
    seen = []

    def read():
        for k, example in enumerate(examples):
            staged = list((tmp_path / "cache").glob("tokenized/.*/tokens.npy"))
            seen.append((staged[0].stat().st_size - 128) // 4)
            assert seen[-1] == written[k - k % 16], k
            yield example

    corpus = TokenizedCorpus.load(prepare_example_corpus("counting", read))
    assert len(seen) == len(examples)
    assert corpus.tokens.tolist() == [t for ids, _ in examples for t in ids]
    assert corpus.targets.tolist() == [c for _, c in examples for c in c]
    assert corpus.offsets.tolist() == written.tolist()


def peak_bytes(fn) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("kind", ["parquet", "dataset", "jsonl"])
def test_reading_holds_one_batch_of_rows(tmp_path, monkeypatch, kind):
    """Python's allocations (tracemalloc's peak) while all 5 MB of documents are read stay those of a batch of 128
    rows (1/47 of them, about 0.25 MB here), under 1/8 of the corpus. The same read into a list peaks above the
    corpus's size, so the measure sees a whole read. (For a .jsonl file the `datasets` loader's one-off conversion
    into its cache is left out: it reads 10 MB blocks, whatever the file's size.)"""
    monkeypatch.setattr(corpus_module, "READ_ROWS", 128)
    rng = random.Random(0)
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]
    texts = [" ".join(rng.choices(words, k=150)) for _ in range(6000)]
    total = sum(len(t) for t in texts)
    spec = DataSpec(train=write_source(kind, tmp_path, [{"text": t} for t in texts]))
    sources = data_sources(spec, tmp_path)
    del texts
    if kind == "jsonl":
        read_documents(spec, sources)  # converts the file into the datasets cache once

    def stream():
        count, chars = 0, 0
        for text in read_documents(spec, sources):
            count, chars = count + 1, chars + len(text)
        assert (count, chars) == (6000, total)

    streamed = peak_bytes(stream)
    whole = peak_bytes(lambda: list(read_documents(spec, sources)))
    assert whole > total
    assert streamed < total / 8, (streamed, total)


# --- bad input: one line, before any process starts -------------------------------------------------------------------


def refused(spec: DataSpec, base_dir: Path) -> str:
    with pytest.raises(ConfigError) as excinfo:
        read_documents(spec, data_sources(spec, base_dir))
    assert "\n" not in str(excinfo.value)
    return str(excinfo.value)


def test_a_dataset_dict_without_a_train_split(tmp_path):
    import datasets

    rows = datasets.Dataset.from_list(records())
    datasets.DatasetDict({"validation": rows, "test": rows}).save_to_disk(str(tmp_path / "dict"))
    assert refused(DataSpec(train="dict"), tmp_path) == (
        f"data.train: {tmp_path / 'dict'} is a DatasetDict without a 'train' split (its splits: validation, test); "
        f"name the split's directory instead, e.g. {tmp_path / 'dict' / 'validation'}"
    )


@pytest.mark.parametrize("kind", ["parquet", "parquet-dir", "dataset", "dataset-dict"])
def test_a_missing_column_names_the_source_and_its_columns(tmp_path, kind):
    entry = write_source(kind, tmp_path, [{"body": "x", "id": 1}, {"body": "y", "id": 2}])
    source = data_sources(DataSpec(train=entry, text_field="body"), tmp_path)[0]
    message = f"data.text_field: {source} has no column 'text' (['body', 'id'])"
    assert refused(DataSpec(train=entry), tmp_path) == message


def test_a_missing_field_of_a_fine_tuning_format(tmp_path):
    write_parquet(tmp_path / "sft.parquet", [{"prompt": "p", "answer": "a"}])
    spec = DataSpec(train="sft.parquet", format="instruction")
    assert refused(spec, tmp_path) == (
        f"data.response_field: {tmp_path / 'sft.parquet'} has no column 'response' (['prompt', 'answer'])"
    )


def test_an_empty_directory_and_a_glob_matching_nothing(tmp_path):
    (tmp_path / "empty").mkdir()
    assert refused(DataSpec(train="empty"), tmp_path) == (
        f"data.train: {tmp_path / 'empty'} holds no .parquet files and is not a datasets directory "
        "(Dataset.save_to_disk); for other files give a glob pattern such as DIR/*.jsonl"
    )
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.jsonl").write_text('{"text": "x"}\n')
    for pattern in ("data/*.parquet", "data/*.csv", "nowhere/**/*.parquet"):
        assert refused(DataSpec(train=pattern), tmp_path) == f"data.train: no files match {tmp_path}/{pattern}"
    (tmp_path / "data" / "b.csv").write_text("text\nx\n")
    assert refused(DataSpec(train="data/*"), tmp_path) == (
        "data.train: b.csv: unsupported format (use .json, .jsonl, .md, .parquet, .text, .txt)"
    )


def test_a_source_without_text(tmp_path):
    save_dataset(tmp_path / "saved", records(["  ", None, ""]))
    assert refused(DataSpec(train="saved"), tmp_path) == "data.train: the files hold no text"


def test_fine_tuning_formats_read_records_only(tmp_path):
    (tmp_path / "a.txt").write_text("plain text\n")
    assert refused(DataSpec(train="a.txt", format="chat"), tmp_path) == (
        "data.format chat reads .jsonl files (one example a line), .parquet files or datasets directories; "
        f"got {str((tmp_path / 'a.txt').resolve())!r}"
    )


def test_bad_sources_stop_prepare_before_any_process_or_run_directory(tmp_path):
    """Through `meshpilot train`'s own preparation: the error comes before the tokenizer, the corpus or the run."""
    (tmp_path / "empty").mkdir()
    for train in ("empty", "missing/*.parquet"):
        experiment = write_experiment(tmp_path, {"data": {"train": train}})
        with pytest.raises(ConfigError, match=r"^data\.train: ") as excinfo:
            prepare(TrainRequest(experiment, out=tmp_path / "run", nproc=1))
        assert "\n" not in str(excinfo.value)
        assert not (tmp_path / "run").exists()


# --- a real run from a save_to_disk directory -------------------------------------------------------------------------


def prose(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    words = ["the", "model", "reads", "every", "row", "of", "data", "once", "per", "epoch", "and", "learns", "what"]
    return [" ".join(rng.choices(words, k=rng.randint(10, 60))) + "." for _ in range(n)]


@pytest.mark.slow
def test_a_run_from_a_saved_dataset_matches_the_same_data_as_jsonl(tmp_path):
    """`meshpilot train` on a save_to_disk directory (3 Arrow shards) and on the same texts as .jsonl: the same
    built-in tokenizer, corpus and per-step losses, bit for bit; the checkpoint's data position stays one integer."""
    import torch
    from support import train

    from trainer.rank.checkpoint import latest

    rows = [{"text": t} for t in prose(300)]
    runs = {}
    for kind in ("jsonl", "dataset"):
        directory = tmp_path / kind
        directory.mkdir()
        entry = write_source(kind, directory, rows)
        runs[kind] = train(write_experiment(directory, {"data": {"train": entry}}), directory / "run", "--nproc", "1")
    losses = {kind: [s["loss"] for s in run.read_steps()] for kind, run in runs.items()}
    assert len(losses["jsonl"]) == 3 and losses["dataset"] == losses["jsonl"]
    corpora = {kind: TokenizedCorpus.load(Path(run.read_launch()["data_dir"])) for kind, run in runs.items()}
    assert corpora["dataset"].tokens.tolist() == corpora["jsonl"].tokens.tolist()
    state = torch.load(latest(runs["dataset"].checkpoints) / "trainer_state.pt", weights_only=False)
    assert type(state["trainer"]["next_row"]) is int and state["trainer"]["next_row"] == 3 * 8
