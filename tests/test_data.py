"""Data: the built-in corpus splits, rows as a pure function of (seed, index), batch plans and local sources."""

from __future__ import annotations

import json
import os
import stat
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from trainer.config import ConfigError, DataSpec
from trainer.data import corpus as corpus_module
from trainer.data.corpus import builtin_documents
from trainer.data.packing import IGNORE_INDEX
from trainer.data.rows import BatchPlan, RowSource, TokenizedCorpus, data_sources, plan_batches, read_documents
from trainer.results.contracts import write_json

EOS = 1

# --- built-in corpus ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def stdlib_named() -> list[tuple[str, str]]:
    """(doc_id, text) of every docstring: scanning the standard library takes seconds, so once per module."""
    return corpus_module._CORPORA["stdlib-docs"]()


@pytest.fixture(scope="module")
def stdlib_splits(stdlib_named) -> tuple[list[str], list[str]]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(corpus_module._CORPORA, "stdlib-docs", lambda: list(stdlib_named))
        return builtin_documents("stdlib-docs", "train"), builtin_documents("stdlib-docs", "heldout")


def test_builtin_splits_nonempty_and_sized(stdlib_splits):
    train, heldout = stdlib_splits
    assert len(train) > 1000
    assert len(heldout) > 10
    assert 0.01 <= len(heldout) / (len(train) + len(heldout)) <= 0.04
    assert all(isinstance(t, str) and len(t) >= 20 for t in train + heldout)


def test_builtin_splits_partition_the_unique_texts(stdlib_named, stdlib_splits):
    unique = list(dict.fromkeys(text for _, text in stdlib_named))
    assert len(unique) < len(stdlib_named)  # the standard library repeats some docstrings
    train, heldout = stdlib_splits
    assert sorted(train + heldout) == sorted(unique)
    assert [t for t in unique if corpus_module._is_heldout(t)] == heldout  # same order as the corpus
    assert [t for t in unique if not corpus_module._is_heldout(t)] == train


def test_builtin_heldout_texts_never_appear_in_train(stdlib_splits):
    train, heldout = stdlib_splits
    assert not set(train) & set(heldout)


def test_builtin_is_deterministic(stdlib_splits):
    # A second, unpatched scan of the standard library gives the same documents in the same order.
    assert builtin_documents("stdlib-docs", "heldout") == stdlib_splits[1]


def test_builtin_lengths_vary_strongly(stdlib_splits):
    lengths = np.array([len(t) for t in stdlib_splits[0]])
    assert lengths.max() / np.median(lengths) > 10
    assert lengths.min() < np.median(lengths) / 2


def test_builtin_unknown_name_and_split():
    with pytest.raises(ValueError, match=r"^unknown built-in corpus 'nope'; available: stdlib-docs$"):
        builtin_documents("nope")
    with pytest.raises(ValueError, match=r"^unknown split 'test'; built-in corpora have 'train' and 'heldout'$"):
        builtin_documents("stdlib-docs", "test")


# --- RowSource on a synthetic corpus --------------------------------------------------------------------------------

# Document lengths including the trailing EOS: short, long (several rows), exactly around seq_len, and tiny.
LENGTHS = [5, 40, 3, 100, 17, 2, 16, 17, 18, 9, 70, 33, 1, 12]
SEQ = 16


def make_corpus(lengths: list[int]) -> tuple[TokenizedCorpus, list[np.ndarray]]:
    """Every non-EOS token id is unique (>= 2), so any token identifies its document and position."""
    docs, next_id = [], 2
    for n in lengths:
        body = np.arange(next_id, next_id + n - 1, dtype=np.uint32)
        next_id += n - 1
        docs.append(np.concatenate([body, np.array([EOS], dtype=np.uint32)]))
    tokens = np.concatenate(docs).astype(np.uint32)
    offsets = np.concatenate([[0], np.cumsum([len(d) for d in docs])]).astype(np.int64)
    return TokenizedCorpus(tokens, offsets), docs


@pytest.fixture
def corpus() -> TokenizedCorpus:
    return make_corpus(LENGTHS)[0]


def epoch_rows(source: RowSource, epoch: int) -> list[dict[str, np.ndarray]]:
    r = source.rows_per_epoch
    return [source.row(i) for i in range(epoch * r, (epoch + 1) * r)]


def test_corpus_helper():
    corpus, docs = make_corpus([3, 1])
    assert [d.tolist() for d in docs] == [[2, 3, EOS], [EOS]]
    assert corpus.tokens.tolist() == [2, 3, EOS, EOS]
    assert corpus.offsets.tolist() == [0, 3, 4]
    assert corpus.lengths.tolist() == [3, 1]


def test_packed_rows_are_full_windows(corpus):
    source = RowSource(corpus, SEQ, packing=True, seed=0)
    total = sum(LENGTHS)
    assert source.rows_per_epoch == (total - 1) // SEQ
    for row in epoch_rows(source, 0):
        assert set(row) == {"input_ids", "labels", "position_ids", "segment_ids"}
        assert all(v.shape == (SEQ,) and v.dtype == np.int64 for v in row.values())
        assert (row["segment_ids"] >= 0).all()
        assert (row["input_ids"] >= 1).all()  # no padding (token 0) anywhere


def test_packed_rows_continue_the_stream_and_labels_stop_at_documents(corpus):
    source = RowSource(corpus, SEQ, packing=True, seed=5)
    rows = epoch_rows(source, 0)
    stream = np.concatenate([r["input_ids"] for r in rows])
    for i, row in enumerate(rows):
        inputs, labels = row["input_ids"], row["labels"]
        # The next token belongs to another document exactly after an EOS.
        assert ((labels == IGNORE_INDEX) == (inputs == EOS)).all(), i
        following = stream[i * SEQ + 1 : (i + 1) * SEQ + 1]
        targets = labels != IGNORE_INDEX
        n = len(following)
        assert (labels[:n][targets[:n]] == following[targets[:n]]).all(), i
        if i + 1 < len(rows) and targets[-1]:
            assert labels[-1] == rows[i + 1]["input_ids"][0]


def test_packed_position_and_segment_ids_restart_per_document(corpus):
    source = RowSource(corpus, SEQ, packing=True, seed=1)
    for row in epoch_rows(source, 0):
        inputs, positions, segments = row["input_ids"], row["position_ids"], row["segment_ids"]
        assert positions[0] == 0
        for j in range(1, SEQ):
            if inputs[j - 1] == EOS:
                assert positions[j] == 0 and segments[j] != segments[j - 1]
            else:
                assert positions[j] == positions[j - 1] + 1 and segments[j] == segments[j - 1]


def check_epoch_covers_corpus(rows, docs, seq_len):
    """The epoch's inputs are whole documents back to back, each at most once, missing only the tail."""
    stream = np.concatenate([r["input_ids"] for r in rows])
    by_first = {int(d[0]): i for i, d in enumerate(docs) if len(d) > 1}
    seen, pos, eos_only = [], 0, 0
    while pos < len(stream):
        end = pos
        while end < len(stream) and stream[end] != EOS:
            end += 1
        piece = stream[pos : end + 1]
        if len(piece) == 1 and piece[0] == EOS:
            eos_only += 1  # a document of just EOS
        else:
            k = by_first[int(piece[0])]
            assert np.array_equal(piece, docs[k][: len(piece)])
            if end < len(stream):
                assert len(piece) == len(docs[k])  # only the last piece of the epoch may be cut
            seen.append(k)
        pos = end + 1
    assert len(seen) == len(set(seen))
    everything = Counter(np.concatenate(docs).tolist())
    used = Counter(stream.tolist())
    assert used <= everything  # no token twice (EOS at most once per document)
    tail = everything.total() - used.total()
    assert 1 <= tail <= seq_len  # only the end of the epoch's stream is dropped
    return seen, eos_only


def test_packed_epoch_uses_every_token_once(corpus):
    docs = make_corpus(LENGTHS)[1]
    source = RowSource(corpus, SEQ, packing=True, seed=3)
    seen, _ = check_epoch_covers_corpus(epoch_rows(source, 0), docs, SEQ)
    assert len(seen) >= 8
    counts = Counter(np.concatenate([r["input_ids"] for r in epoch_rows(source, 0)]).tolist())
    assert max(c for t, c in counts.items() if t != EOS) == 1


def test_rows_are_a_pure_function_of_seed_and_index(corpus):
    a = RowSource(corpus, SEQ, packing=True, seed=7)
    b = RowSource(corpus, SEQ, packing=True, seed=7)
    r = a.rows_per_epoch
    indices = [3, 0, r + 2, 1, 2 * r + 5, 3, r + 2]
    first = {i: a.row(i) for i in indices}
    for i in reversed(indices):  # another instance, another access order, epochs interleaved
        row = b.row(i)
        for key in row:
            assert np.array_equal(row[key], first[i][key]), (i, key)
    other = RowSource(corpus, SEQ, packing=True, seed=8)
    assert any(not np.array_equal(other.row(i)["input_ids"], a.row(i)["input_ids"]) for i in range(r))


def test_epoch_wrap_reshuffles(corpus):
    docs = make_corpus(LENGTHS)[1]
    source = RowSource(corpus, SEQ, packing=True, seed=0)
    e0, e1 = epoch_rows(source, 0), epoch_rows(source, 1)
    order0, _ = check_epoch_covers_corpus(e0, docs, SEQ)
    order1, _ = check_epoch_covers_corpus(e1, docs, SEQ)
    assert order0 != order1
    assert not np.array_equal(e0[0]["input_ids"], e1[0]["input_ids"])


def test_no_shuffle_keeps_document_order_every_epoch(corpus):
    docs = make_corpus(LENGTHS)[1]
    source = RowSource(corpus, SEQ, packing=True, seed=0, shuffle=False)
    assert source.row(0)["input_ids"].tolist() == corpus.tokens[:SEQ].tolist()
    order, _ = check_epoch_covers_corpus(epoch_rows(source, 0), docs, SEQ)
    assert order == sorted(order)
    r = source.rows_per_epoch
    assert np.array_equal(source.row(r + 4)["input_ids"], source.row(4)["input_ids"])


def test_batch_stacks_rows(corpus):
    source = RowSource(corpus, SEQ, packing=True, seed=0)
    batch = source.batch([2, 0, 5])
    assert set(batch) == {"input_ids", "labels", "position_ids", "segment_ids"}
    assert tuple(batch["input_ids"].shape) == (3, SEQ)
    assert batch["labels"][1].tolist() == source.row(0)["labels"].tolist()
    assert batch["input_ids"][2].tolist() == source.row(5)["input_ids"].tolist()


def test_corpus_too_small_for_a_row():
    corpus, _ = make_corpus([8, 8])
    with pytest.raises(ConfigError, match=r"^data: the corpus is too small for one row of seq_len 16$"):
        RowSource(corpus, 16, packing=True, seed=0)
    assert RowSource(corpus, 15, packing=True, seed=0).rows_per_epoch == 1


def test_unpacked_rows_hold_one_document_piece(corpus):
    docs = make_corpus(LENGTHS)[1]
    source = RowSource(corpus, SEQ, packing=False, seed=2)
    assert source.rows_per_epoch == sum(max(1, -(-(n - 1) // SEQ)) for n in LENGTHS)
    doc_of = {int(t): k for k, d in enumerate(docs) for t in d[:-1]}
    pairs = Counter()
    for row in epoch_rows(source, 0):
        inputs, labels, segments = row["input_ids"], row["labels"], row["segment_ids"]
        real = segments >= 0
        n = int(real.sum())
        assert n >= 1 and real[:n].all() and not real[n:].any()  # content first, then padding
        assert len(set(segments[real].tolist())) == 1
        assert (labels[~real] == IGNORE_INDEX).all()
        assert (inputs[~real] == 0).all()
        assert row["position_ids"][0] == 0
        assert row["position_ids"][:n].tolist() == list(range(n))
        owners = {doc_of[int(t)] for t in inputs[real] if t != EOS}
        assert len(owners) <= 1
        for x, y in zip(inputs, labels, strict=True):
            if y != IGNORE_INDEX:
                pairs[(int(x), int(y))] += 1
    expected = Counter((int(d[j]), int(d[j + 1])) for d in docs for j in range(len(d) - 1))
    assert pairs == expected  # every target exactly once, none lost at piece borders


def test_unpacked_long_document_split_without_losing_targets():
    corpus, docs = make_corpus([100, 5, 33])
    source = RowSource(corpus, SEQ, packing=False, seed=0, shuffle=False)
    assert source.rows_per_epoch == 7 + 1 + 2
    long_rows = [source.row(i) for i in range(7)]
    assert sum(int((r["labels"] != IGNORE_INDEX).sum()) for r in long_rows) == 100 - 1
    # piece p starts where piece p-1's last label pointed
    for p in range(1, 7):
        assert long_rows[p]["input_ids"][0] == long_rows[p - 1]["labels"][-1] == docs[0][p * SEQ]
    last = long_rows[-1]
    n = 100 - 6 * SEQ  # tokens left for the last piece
    assert last["input_ids"][:n].tolist() == docs[0][6 * SEQ :].tolist()
    assert (last["segment_ids"][n:] == -1).all() and (last["labels"][n - 1 :] == IGNORE_INDEX).all()
    short = source.row(7)
    assert short["input_ids"].tolist() == [*docs[1].tolist(), *[0] * (SEQ - 5)]
    assert short["labels"].tolist() == [*docs[1][1:].tolist(), *[IGNORE_INDEX] * (SEQ - 4)]


# --- batch plans ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("micro_batch", "dp"), [(1, 1), (2, 2), (1, 4), (4, 2), (8, 1), (2, 1), (1, 8)])
def test_plan_covers_each_step_exactly(micro_batch, dp):
    seq, rows = 64, 8
    plan = plan_batches(rows * seq, seq, micro_batch, dp)
    assert plan == BatchPlan(micro_batch, rows // (micro_batch * dp), dp)
    assert plan.rows_per_step == rows
    for step in range(4):
        seen = []
        for rank in range(dp):
            micro = list(plan.micro_batches(step * rows, rank))
            assert len(micro) == plan.grad_accum
            assert all(len(m) == micro_batch for m in micro)
            seen.extend(i for m in micro for i in m)
        assert sorted(seen) == list(range(step * rows, (step + 1) * rows))


def test_plan_rows_do_not_depend_on_layout():
    seq = 32
    a = plan_batches(16 * seq, seq, 2, 2)
    b = plan_batches(16 * seq, seq, 4, 1)
    rows_a = sorted(i for rank in range(2) for m in a.micro_batches(48, rank) for i in m)
    rows_b = sorted(i for m in b.micro_batches(48, 0) for i in m)
    assert rows_a == rows_b == list(range(48, 64))


def test_plan_errors():
    with pytest.raises(ConfigError) as excinfo:
        plan_batches(1000, 64, 1, 1)
    assert str(excinfo.value) == "train.global_batch_tokens 1000 is not a multiple of data.seq_len 64"
    with pytest.raises(ConfigError) as excinfo:
        plan_batches(512, 64, 3, 1)
    assert str(excinfo.value) == (
        "train.global_batch_tokens 512 = 8 rows of 64 tokens does not divide into micro_batch 3 x 1 data-parallel ranks"
    )
    with pytest.raises(ConfigError, match=r"does not divide into micro_batch 2 x 3 data-parallel ranks$"):
        plan_batches(512, 64, 2, 3)
    with pytest.raises(ConfigError, match=r"does not divide into micro_batch 0 x 1 data-parallel ranks$"):
        plan_batches(512, 64, 0, 1)


# --- sources and local files ----------------------------------------------------------------------------------------


@pytest.fixture
def hf_cache(tmp_path, monkeypatch):
    """Keep the datasets library's cache inside the test's directory."""
    import datasets.config

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-datasets")


def test_sources_builtin():
    assert data_sources(DataSpec(), Path("/nonexistent")) == ["builtin:stdlib-docs"]


def test_sources_missing_file(tmp_path):
    with pytest.raises(ConfigError) as excinfo:
        data_sources(DataSpec(train="corpus/missing.txt"), tmp_path)
    assert str(excinfo.value) == f"data.train: file not found: {tmp_path / 'corpus' / 'missing.txt'}"


def test_sources_resolve_relative_and_check_each(tmp_path):
    (tmp_path / "a.txt").write_text("hello\n")
    (tmp_path / "b.jsonl").write_text('{"text": "x"}\n')
    assert data_sources(DataSpec(train=["a.txt", str(tmp_path / "b.jsonl")]), tmp_path) == [
        str((tmp_path / "a.txt").resolve()),
        str((tmp_path / "b.jsonl").resolve()),
    ]
    with pytest.raises(ConfigError, match=r"^data\.train: file not found: .*c\.txt$"):
        data_sources(DataSpec(train=["a.txt", "c.txt"]), tmp_path)


def test_sources_unsupported_extension(tmp_path):
    (tmp_path / "data.csv").write_text("text\nhello\n")
    with pytest.raises(ConfigError) as excinfo:
        data_sources(DataSpec(train="data.csv"), tmp_path)
    assert (
        str(excinfo.value) == "data.train: data.csv: unsupported format (use .json, .jsonl, .md, .parquet, .text, .txt)"
    )


@pytest.mark.parametrize("train", ["builtin:nope", ["builtin:stdlib-docs", "a.txt"]])
def test_sources_bad_builtin(tmp_path, train):
    with pytest.raises(ConfigError) as excinfo:
        data_sources(DataSpec(train=train), tmp_path)
    name = train if isinstance(train, str) else train[0]
    assert str(excinfo.value) == f"data.train: {name!r} must stand alone and be one of builtin:stdlib-docs"


def test_sources_empty_and_bad_text_unit(tmp_path):
    with pytest.raises(ConfigError, match=r"^data\.train: no training data given$"):
        data_sources(DataSpec(train=[]), tmp_path)
    (tmp_path / "a.txt").write_text("hello\n")
    with pytest.raises(ConfigError) as excinfo:
        data_sources(DataSpec(train="a.txt", text_unit="sentence"), tmp_path)
    assert str(excinfo.value) == "data.text_unit: 'sentence' is not one of paragraph, line, file"


TEXT = "First paragraph, line one.\nline two.\n\nSecond paragraph.\n\n\n\nThird.\n"


@pytest.mark.parametrize(
    ("unit", "expected"),
    [
        ("paragraph", ["First paragraph, line one.\nline two.", "Second paragraph.", "Third."]),
        ("line", ["First paragraph, line one.", "line two.", "Second paragraph.", "Third."]),
        ("file", [TEXT.strip()]),
    ],
)
def test_read_txt(tmp_path, hf_cache, unit, expected):
    (tmp_path / "a.txt").write_text(TEXT)
    spec = DataSpec(train="a.txt", text_unit=unit)
    documents = read_documents(spec, data_sources(spec, tmp_path))
    assert [d.strip() for d in documents] == expected


def test_read_txt_default_is_paragraphs(tmp_path, hf_cache):
    (tmp_path / "a.txt").write_text("one\ntwo\n\nthree\n")
    spec = DataSpec(train="a.txt")
    assert spec.text_unit == "paragraph"
    assert [d.strip() for d in read_documents(spec, data_sources(spec, tmp_path))] == ["one\ntwo", "three"]


def write_jsonl(path: Path, records: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def test_read_jsonl_text_field_and_order(tmp_path, hf_cache):
    write_jsonl(tmp_path / "a.jsonl", [{"text": "doc one", "body": "b1"}, {"text": "  ", "body": "b2"}])
    write_jsonl(tmp_path / "b.jsonl", [{"text": "doc three", "body": "b3"}])
    spec = DataSpec(train=["a.jsonl", "b.jsonl"])
    sources = data_sources(spec, tmp_path)
    assert list(read_documents(spec, sources)) == ["doc one", "doc three"]  # blank text dropped, file order kept
    spec = DataSpec(train=["a.jsonl", "b.jsonl"], text_field="body")
    assert list(read_documents(spec, sources)) == ["b1", "b2", "b3"]


def test_read_parquet(tmp_path, hf_cache):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"content": ["alpha text", "beta text", None], "id": [1, 2, 3]}), tmp_path / "d.parquet")
    spec = DataSpec(train="d.parquet", text_field="content")
    assert list(read_documents(spec, data_sources(spec, tmp_path))) == ["alpha text", "beta text"]


def test_read_missing_column(tmp_path, hf_cache):
    write_jsonl(tmp_path / "a.jsonl", [{"body": "x", "id": 1}])
    spec = DataSpec(train="a.jsonl")
    with pytest.raises(ConfigError) as excinfo:
        read_documents(spec, data_sources(spec, tmp_path))
    assert str(excinfo.value) == (
        "data.train: cannot read a.jsonl: line 1: no 'text' field (data.text_field; the row has ['body', 'id'])"
    )


def test_read_files_without_text(tmp_path, hf_cache):
    write_jsonl(tmp_path / "a.jsonl", [{"text": "   "}, {"text": "\n"}])
    spec = DataSpec(train="a.jsonl")
    with pytest.raises(ConfigError, match=r"^data\.train: the files hold no text$"):
        read_documents(spec, data_sources(spec, tmp_path))


def test_result_files_are_written_whole_with_the_user_s_usual_permissions(tmp_path):
    """Atomic writes go through a temporary file (mkstemp makes it 0600): the result still gets the mode any new
    file of this user's gets, so a group that shares run directories can read them."""
    mask = os.umask(0o022)
    os.umask(mask)
    path = tmp_path / "run" / "metrics.json"
    write_json(path, {"status": "ok"})
    assert json.loads(path.read_text()) == {"status": "ok"}
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~mask
    assert [p.name for p in path.parent.iterdir()] == ["metrics.json"]  # no temporary file left behind
