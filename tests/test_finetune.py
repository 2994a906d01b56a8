"""Fine-tuning data: chat and instruction examples, loss on the response tokens only, packed and accumulated.

The tokenizer here is a word-level one built by the test, so that every token of a rendered example is known
in advance: the reference below builds each example's ids and response mask from the words themselves, not
through trainer.data.chat, and computes the loss one example at a time with a plain forward. The examples have
lengths that do not divide the row, so packing them whole leaves rows padded (and one row filled to its last,
look-ahead token); the reference, which sees each example whole, must agree with the trainer exactly.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from helpers.step_gradients import _setup, step_gradients
from support import write_experiment

from trainer.config import ConfigError, DataSpec, Experiment
from trainer.data.chat import SIMPLE_TEMPLATE, read_examples, render_example
from trainer.data.packing import IGNORE_INDEX
from trainer.launch.launcher import TrainRequest, prepare
from trainer.rank.step import forward_backward

SEQ_LEN = 64
GLOBAL_ROWS = 4
# Words added to each conversation's 32 tokens (4 marker tokens per turn plus 16 or 24 words): 32 to 52 tokens, so
# that rows of SEQ_LEN + 1 = 65 tokens take two examples (64 tokens, and 65: up to the look-ahead token) or one.
EXTRA_WORDS = [0, 0, 9, 3, 20, 1, 0, 14, 2, 0, 7, 18]
EOS = "<|endoftext|>"
WORDS = [f"w{i}" for i in range(60)]


def word_tokenizer(directory: Path) -> Path:
    """A word-level tokenizer: each word, role and marker piece ("<|", "|>") is one token."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {
        token: i for i, token in enumerate([EOS, "<|pad|>", "[UNK]", "<|", "|>", "system", "user", "assistant", *WORDS])
    }
    backend = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=backend, eos_token=EOS, pad_token="<|pad|>").save_pretrained(directory)
    return directory


def conversations() -> list[list[dict]]:
    """Single- and two-turn chats of 32 + EXTRA_WORDS tokens, with responses of very different lengths."""
    chats = []
    for i, extra in enumerate(EXTRA_WORDS):
        n = (16 if i % 2 else 24) + extra
        words = [WORDS[(7 * i + j) % len(WORDS)] for j in range(n)]
        if i % 2:  # user a, assistant b, user c, assistant d: a + b + c + d = n words
            a, b, c = 1 + i % 5, 1 + (3 * i) % 6, 2
            cut = [0, a, a + b, a + b + c, n]
            turns = [" ".join(words[cut[k] : cut[k + 1]]) for k in range(4)]
            chats.append([{"role": r, "content": t} for r, t in zip(["user", "assistant"] * 2, turns, strict=True)])
        else:  # user p, assistant n - p words
            p = 2 + (5 * i) % 20
            chats.append(
                [
                    {"role": "user", "content": " ".join(words[:p])},
                    {"role": "assistant", "content": " ".join(words[p:])},
                ]
            )
    return chats


def reference_example(tokenizer, messages: list[dict]) -> tuple[list[int], list[bool]]:
    """Ids and response mask of a conversation in the simple template, built from its words."""
    vocab = tokenizer.get_vocab()
    ids, counted = [], []
    for m in messages:
        markers = [vocab["<|"], vocab[m["role"]], vocab["|>"]]
        body = [vocab[w] for w in m["content"].split()] + [vocab[EOS]]
        ids += markers + body
        counted += [False] * 3 + [m["role"] == "assistant"] * len(body)
    return ids, counted


def chat_experiment(seq_len: int) -> dict:
    return {
        "tokenizer": "tokenizer",
        "data": {"train": ["chat.jsonl"], "format": "chat", "chat_template": "simple", "seq_len": seq_len},
        "train": {"global_batch_tokens": GLOBAL_ROWS * seq_len, "micro_batch": 1},
    }


@pytest.fixture(scope="module")
def chat_run(tmp_path_factory):
    directory = tmp_path_factory.mktemp("finetune")
    word_tokenizer(directory / "tokenizer")
    lines = [json.dumps({"messages": chat}) for chat in conversations()]
    (directory / "chat.jsonl").write_text("\n".join(lines) + "\n")
    prepared = prepare(TrainRequest(write_experiment(directory, chat_experiment(SEQ_LEN)), out=directory / "run"))
    return prepared.run.path


def load_words(directory: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(directory), local_files_only=True)


def _tokenizer(run_dir: Path):
    return load_words(run_dir.parent / "tokenizer")


def _rows(run_dir: Path, seq_len: int, packing: bool):
    """The run's examples as rows of seq_len, in corpus order (not shuffled)."""
    from trainer.data.rows import RowSource, TokenizedCorpus
    from trainer.rank.loop import load_run
    from trainer.results.rundir import RunDir

    corpus = TokenizedCorpus.load(Path(load_run(RunDir(run_dir))[1]["data_dir"]))
    return RowSource(corpus, seq_len, packing=packing, seed=0, shuffle=False)


def row_examples(row: dict, examples: list[tuple[list[int], list[bool]]]) -> list[tuple[int, int, bool]]:
    """(example, how many of its tokens are inputs, whether it reaches the row's end) for each document segment of
    a row, in order, checking what every row must be: each segment is the start of one example, with its prompt
    (never a later piece), at positions 0, 1, 2, ...; its labels are the example's next tokens where they are
    response tokens, else IGNORE_INDEX (the prompt, and past the example's end)."""
    held = []
    for segment in dict.fromkeys(row["segment_ids"].tolist()):
        where = row["segment_ids"] == segment
        if segment < 0:  # padding, only after the examples
            assert where[where.argmax() :].all() and (row["labels"][where] == IGNORE_INDEX).all()
            continue
        ids = row["input_ids"][where].tolist()
        starts = [k for k, (reference, _) in enumerate(examples) if reference[: len(ids)] == ids]
        assert len(starts) == 1, f"a segment that is not the start of one example: {ids}"
        [k] = starts
        reference, counted = examples[k]
        expected = [reference[j] if j < len(reference) and counted[j] else IGNORE_INDEX for j in range(1, len(ids) + 1)]
        assert row["labels"][where].tolist() == expected
        assert row["position_ids"][where].tolist() == list(range(len(ids)))
        held.append((k, len(ids), bool(where[-1])))
    return held


def whole(n: int, example: list[int], at_end: bool) -> bool:
    """An example whose first n tokens are a row's inputs is whole there: all its tokens, or all but one when it
    reaches the row's end, whose look-ahead token (seq_len + 1) is only a label."""
    return n == len(example) or (at_end and n == len(example) - 1)


# (a) rendering


def test_instruction_masks_the_prompt(tmp_path):
    tokenizer = load_words(word_tokenizer(tmp_path / "tokenizer"))
    (tmp_path / "data.jsonl").write_text(json.dumps({"q": "w1 w2 w3", "a": "w4 w5"}) + "\n")
    spec = DataSpec(train="data.jsonl", format="instruction", prompt_field="q", response_field="a")
    [(where, messages)] = read_examples(spec, [str(tmp_path / "data.jsonl")])
    assert where == "data.jsonl line 1"
    ids, counted = render_example(tokenizer, SIMPLE_TEMPLATE, messages)
    tokens = tokenizer.convert_ids_to_tokens(ids)
    assert tokens == ["<|", "user", "|>", "w1", "w2", "w3", EOS, "<|", "assistant", "|>", "w4", "w5", EOS]
    assert [t for t, c in zip(tokens, counted, strict=True) if c] == ["w4", "w5", EOS]


def test_every_assistant_turn_counts_in_a_multi_turn_chat(tmp_path):
    tokenizer = load_words(word_tokenizer(tmp_path / "tokenizer"))
    chat = [
        {"role": "system", "content": "w9"},
        {"role": "user", "content": "w1"},
        {"role": "assistant", "content": "w2 w3"},
        {"role": "user", "content": "w4"},
        {"role": "assistant", "content": "w5"},
    ]
    ids, counted = render_example(tokenizer, SIMPLE_TEMPLATE, chat)
    tokens = tokenizer.convert_ids_to_tokens(ids)
    assert tokens[:7] == ["<|", "system", "|>", "w9", EOS, "<|", "user"]
    assert [t for t, c in zip(tokens, counted, strict=True) if c] == ["w2", "w3", EOS, "w5", EOS]


def test_packed_rows_hold_whole_examples(chat_run):
    """Packed, each row holds whole examples, in order while the next one fits, then padding: a response is never
    trained without its prompt, and no label crosses into the next example or predicts a prompt."""
    tokenizer = _tokenizer(chat_run)
    examples = [reference_example(tokenizer, chat) for chat in conversations()]
    expected, used = [[]], 0  # next fit, by hand
    for k, (ids, _) in enumerate(examples):
        if used + len(ids) > SEQ_LEN + 1:
            expected, used = [*expected, []], 0
        expected[-1].append(k)
        used += len(ids)
    sizes = [sum(len(examples[k][0]) for k in row) for row in expected]
    assert SEQ_LEN + 1 in sizes and min(sizes) < SEQ_LEN and max(map(len, expected)) == 2, sizes
    rows = _rows(chat_run, SEQ_LEN, packing=True)
    held = [row_examples(rows.row(index), examples) for index in range(rows.rows_per_epoch)]
    assert [[k for k, *_ in row] for row in held] == expected
    assert all(whole(n, examples[k][0], at_end) for row in held for k, n, at_end in row)
    assert rows.cut_examples == 0
    # As the trainer reads them, each epoch shuffles these rows (not the examples): the data position is one index.
    shuffled = _setup(chat_run, 1, 1)[1]
    in_rows = [tuple(k for k, *_ in row_examples(shuffled.row(i), examples)) for i in range(shuffled.rows_per_epoch)]
    assert sorted(in_rows) == sorted(map(tuple, expected)) and in_rows != list(map(tuple, expected))


def test_unpacked_rows_hold_one_example_padded_with_ignore(chat_run):
    rows = _rows(chat_run, SEQ_LEN, packing=False)
    tokenizer = _tokenizer(chat_run)
    for index, chat in enumerate(conversations()):
        row, (ids, counted) = rows.row(index), reference_example(tokenizer, chat)
        expected = [t if c else IGNORE_INDEX for t, c in zip(ids[1:], counted[1:], strict=True)]
        assert row["input_ids"][: len(ids)].tolist() == ids
        assert row["labels"].tolist() == expected + [IGNORE_INDEX] * (SEQ_LEN - len(expected))


@pytest.mark.parametrize("packing", [True, False])
def test_an_example_longer_than_a_row_is_cut_not_split(chat_run, caplog, packing):
    """An example longer than a row (seq_len + 1 tokens) fills one alone with its first seq_len + 1 tokens, its
    prompt and as much of its response as fits; a second piece would be a response without its prompt. The cut
    examples are counted and logged; the others stay whole."""
    short = 40
    examples = [reference_example(_tokenizer(chat_run), chat) for chat in conversations()]
    cut = [k for k, (ids, _) in enumerate(examples) if len(ids) > short + 1]
    assert 0 < len(cut) < len(examples) and any(len(ids) == short + 1 for ids, _ in examples)
    with caplog.at_level(logging.WARNING, logger="meshpilot.data"):
        rows = _rows(chat_run, short, packing)
    assert rows.cut_examples == len(cut)
    assert f"{len(cut)} of {len(examples)} examples are longer than a row of seq_len + 1 = {short + 1}" in caplog.text
    held = [row_examples(rows.row(index), examples) for index in range(rows.rows_per_epoch)]
    assert [k for row in held for k, *_ in row] == list(range(len(examples)))  # each once, in order
    for row in held:
        for k, n, at_end in row:
            if k in cut:  # alone, its first seq_len + 1 tokens: the inputs and the look-ahead token
                assert len(row) == 1 and n == short
            else:
                assert whole(n, examples[k][0], at_end)


def test_a_row_too_short_for_any_response_is_refused_before_launch(chat_run):
    """With every example's prompt longer than a row, nothing would be trained: one line, before launch."""
    directory = chat_run.parent
    experiment = write_experiment(directory, chat_experiment(6), name="short.yaml")
    with pytest.raises(ConfigError) as excinfo:
        prepare(TrainRequest(experiment, out=directory / "short-run"))
    assert str(excinfo.value) == (
        "data.seq_len 6: every example's prompt fills a row of 7 tokens, leaving no response to train on "
        "(the shortest example has 32 tokens)"
    )


# (b), (d) the loss against a reference, one example at a time


def reference_loss(model, rows, plan, tokenizer, count_all: bool = False) -> float:
    """The step's response-token loss summed one example at a time, each whole, over the total count."""
    examples = [reference_example(tokenizer, c) for c in conversations()]
    loss_sum, count = 0.0, 0
    for indices in plan.micro_batches(0, 0):
        for index in indices:
            for k, *_ in row_examples(rows.row(index), examples):
                ids, counted = examples[k]
                counted = torch.tensor(counted[1:]) | count_all
                with torch.no_grad():
                    logits = model(input_ids=torch.tensor([ids])).logits[0, :-1]
                losses = F.cross_entropy(logits.float(), torch.tensor(ids[1:]), reduction="none")
                loss_sum += float(losses[counted].sum())
                count += int(counted.sum())
    return loss_sum / count


def test_step_loss_equals_one_example_at_a_time(chat_run):
    model, rows, plan = _setup(chat_run, 1, 1)
    assert plan.grad_accum == GLOBAL_ROWS  # several micro-batches, packed
    with torch.no_grad():  # sharper logits than at initialisation, so tokens' losses differ and (d) can fail
        model.get_output_embeddings().weight.mul_(30)
    tokenizer = _tokenizer(chat_run)
    batches = [rows.batch(indices) for indices in plan.micro_batches(0, 0)]
    counts = [int((b["labels"] != IGNORE_INDEX).sum()) for b in batches]
    assert max(counts) > min(counts), counts  # micro-batches weigh differently: a mean of means would be wrong
    trainer = forward_backward(model, batches, None, packed=True)
    reference = reference_loss(model, rows, plan, tokenizer)
    assert trainer.target_tokens == sum(counts)
    assert trainer.loss == pytest.approx(reference, rel=1e-5)
    # (d) negative control: counting the prompt tokens too gives another loss.
    assert abs(reference_loss(model, rows, plan, tokenizer, count_all=True) - reference) / reference > 1e-3


def test_the_tokenizer_template_is_the_default(tmp_path):
    from trainer.data.chat import chat_template

    tokenizer = load_words(word_tokenizer(tmp_path / "tokenizer"))
    with pytest.raises(ConfigError, match="tokenizer words has no chat template"):
        chat_template(DataSpec(format="chat"), tokenizer, "words", tmp_path)
    tokenizer.chat_template = SIMPLE_TEMPLATE
    assert chat_template(DataSpec(format="chat"), tokenizer, "words", tmp_path) == SIMPLE_TEMPLATE
    (tmp_path / "other.jinja").write_text("{{ messages }}")
    assert chat_template(DataSpec(chat_template="other.jinja"), tokenizer, "words", tmp_path) == "{{ messages }}"


def test_a_template_that_rewrites_earlier_turns_is_refused(tmp_path):
    """Spans come from incremental rendering, which needs each rendering to extend the previous one."""
    tokenizer = load_words(word_tokenizer(tmp_path / "tokenizer"))
    numbered = "{{ messages | length }}" + SIMPLE_TEMPLATE  # the count changes as turns are added
    chat = [{"role": "user", "content": "w1"}, {"role": "assistant", "content": "w2"}]
    with pytest.raises(ConfigError, match=r"renders a\.jsonl line 3 so that a turn changes once later turns follow"):
        render_example(tokenizer, numbered, chat, "a.jsonl line 3")


# (e) bad input and configuration


@pytest.mark.parametrize(
    ("data_format", "line", "message"),
    [
        ("instruction", {"prompt": "w1"}, "data.train: bad.jsonl line 2: no 'response' field holding text"),
        (
            "chat",
            {"messages": [{"role": "user", "content": "w1"}]},
            "data.train: bad.jsonl line 2: no assistant turn, so nothing to train on",
        ),
    ],
)
def test_bad_line_fails_before_launch_naming_file_and_line(tmp_path, data_format, line, message):
    good = {"prompt": "w1", "response": "w2"} if data_format == "instruction" else conversations()[0]
    good = good if data_format == "instruction" else {"messages": good}
    (tmp_path / "bad.jsonl").write_text(json.dumps(good) + "\n" + json.dumps(line) + "\n")
    word_tokenizer(tmp_path / "tokenizer")
    changes = {"tokenizer": "tokenizer", "data": {"train": ["bad.jsonl"], "format": data_format}}
    changes["data"]["chat_template"] = "simple"
    with pytest.raises(ConfigError) as excinfo:
        prepare(TrainRequest(write_experiment(tmp_path, changes), out=tmp_path / "run"))
    assert str(excinfo.value) == message


def test_builtin_tokenizer_needs_a_named_template(tmp_path):
    (tmp_path / "data.jsonl").write_text(json.dumps({"prompt": "w1", "response": "w2"}) + "\n")
    changes = {"data": {"train": ["data.jsonl"], "format": "instruction"}}
    with pytest.raises(ConfigError) as excinfo:
        prepare(TrainRequest(write_experiment(tmp_path, changes), out=tmp_path / "run"))
    assert str(excinfo.value) == (
        "data.chat_template: tokenizer builtin has no chat template; name one (simple) or a Jinja file"
    )


def test_format_and_template_names_are_checked(tmp_path):
    from trainer.data.rows import data_sources

    (tmp_path / "data.jsonl").write_text("{}\n")
    with pytest.raises(ConfigError, match=r"data.format: 'chatt' is not one of text, instruction, chat \(did you"):
        data_sources(DataSpec(train="data.jsonl", format="chatt"), tmp_path)
    with pytest.raises(ConfigError, match=r"reads .jsonl files"):
        data_sources(DataSpec(format="chat"), tmp_path)  # the built-in corpus is text
    from trainer.data.chat import named_template

    with pytest.raises(ConfigError, match=r"'simpel' is neither .* nor a file \(did you mean 'simple'\?\)"):
        named_template(DataSpec(chat_template="simpel"), tmp_path)


def test_text_runs_keep_their_config_files_and_hashes():
    """The fine-tuning keys are left out while at their defaults: earlier runs' config.yaml and hash stay."""
    plain = Experiment()
    assert "format" not in plain.to_dict()["data"]
    chat = Experiment(data=DataSpec(format="chat", chat_template="simple"))
    assert chat.to_dict()["data"]["format"] == "chat" and chat.config_hash() != plain.config_hash()


def test_two_rank_run_gives_the_single_process_loss(tmp_path):
    """(c) A real 1-step `meshpilot train`, 2 processes (DDP) on instruction data with the built-in tokenizer and
    the simple template: its first loss is the single-process step's on the same rows and initial weights. The
    ranks' rows hold different numbers of response tokens, so this holds only if the count is summed over ranks
    before dividing. One run covers the cross-rank path; test_step_loss_equals_one_example_at_a_time ties the
    single-process step to the per-example reference."""
    from support import train

    numbers = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
    lines = [
        {"prompt": f"Spell the digits of {i} for me, please.", "response": " ".join(numbers[int(d)] for d in str(i))}
        for i in range(300)
    ]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    changes = {"data": {"train": ["train.jsonl"], "format": "instruction", "chat_template": "simple"}}
    run = train(write_experiment(tmp_path, changes), tmp_path / "run", "--steps", "1", "--nproc", "2")
    [step] = run.read_steps()
    assert step["target_tokens"] < step["tokens"] / 2  # the prompts are longer than the responses
    _, rows, plan = _setup(run.path, 2, 2)
    counted = [[int((rows.batch(i)["labels"] != IGNORE_INDEX).sum()) for i in plan.micro_batches(0, r)] for r in (0, 1)]
    per_rank = [sum(c) for c in counted]
    assert per_rank[0] != per_rank[1] and sum(per_rank) == step["target_tokens"], per_rank
    loss, _ = step_gradients(run.path, micro_batch=2)
    assert step["loss"] == pytest.approx(loss, rel=1e-5)
