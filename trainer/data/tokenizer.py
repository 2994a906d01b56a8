"""Tokenizers: a local tokenizer directory, or `builtin`, a byte-level BPE trained on the training data."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from pathlib import Path

from transformers import AutoTokenizer, PreTrainedTokenizerBase, PreTrainedTokenizerFast

from trainer.config import ConfigError
from trainer.host.cache import cached_dir, fingerprint

EOS_TOKEN = "<|endoftext|>"
PAD_TOKEN = "<|pad|>"
BUILTIN_VERSION = 1  # bump when the recipe below changes, so cached tokenizers are rebuilt


def load_tokenizer(
    spec: str, vocab_size: int, texts: Callable[[], Iterable[str]], data_fingerprint: str, base_dir: Path
) -> PreTrainedTokenizerBase:
    """`spec` is "builtin" or a local directory. `texts` is only called when a builtin tokenizer is trained."""
    if spec == "builtin":
        key = fingerprint("bpe", BUILTIN_VERSION, vocab_size, data_fingerprint)
        directory = cached_dir("tokenizers", key, lambda out: _train_bpe(texts(), vocab_size, out))
    else:
        directory = Path(spec).expanduser()
        directory = directory if directory.is_absolute() else base_dir / directory
        if not directory.is_dir():
            raise ConfigError(f"tokenizer: directory not found: {directory}")
    tokenizer = AutoTokenizer.from_pretrained(str(directory), local_files_only=True)
    if tokenizer.eos_token_id is None:
        raise ConfigError(f"tokenizer {spec}: no end-of-sequence token, which documents need between them")
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token  # pads are masked out of loss and attention anyway
    return tokenizer


def tokenizer_fingerprint(tokenizer: PreTrainedTokenizerBase) -> str:
    """Identifies the token ids a tokenizer produces, for caching tokenized data."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    text = backend.to_str() if backend is not None else repr(sorted(tokenizer.get_vocab().items()))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _train_bpe(texts: Iterable[str], vocab_size: int, out: Path) -> None:
    # tokenizers only where a tokenizer is trained
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOS_TOKEN, PAD_TOKEN],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        min_frequency=2,
        show_progress=False,
    )
    bpe.train_from_iterator(texts, trainer)
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=bpe, eos_token=EOS_TOKEN, bos_token=EOS_TOKEN, pad_token=PAD_TOKEN
    )
    wrapped.save_pretrained(str(out))
