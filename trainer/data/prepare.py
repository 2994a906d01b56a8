"""A run's data made ready once, in the launching process: the tokenizer (trained on first use) and the tokenized
corpus (cached), for text or for instruction and chat examples. Evaluation and benchmarks call it again to read a
run's data as it did."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from transformers import PretrainedConfig, PreTrainedTokenizerBase

from trainer.config import ConfigError, Experiment
from trainer.data.chat import chat_template, check_template_available, example_texts, read_examples, rendered_examples
from trainer.data.rows import data_sources, prepare_corpus, prepare_example_corpus, read_documents, sources_fingerprint
from trainer.data.tokenizer import load_tokenizer, tokenizer_fingerprint
from trainer.host.cache import fingerprint
from trainer.model.build import check_vocabulary


@dataclass
class TrainingData:
    tokenizer: PreTrainedTokenizerBase
    data_key: str  # names the training documents (trainer.data.rows.sources_fingerprint)
    data_dir: Path  # the tokenized corpus


def prepare_data(experiment: Experiment, config: PretrainedConfig) -> TrainingData:
    """The tokenizer (trained on first use) and the tokenized corpus (cached) a run trains on: the expensive part
    of preparing a run, and what evaluation and benchmarks rebuild to read a run's data as it did."""
    base_dir = Path(experiment.base_dir)
    spec = experiment.data
    sources = data_sources(spec, base_dir)
    data_key = sources_fingerprint(spec, sources)
    if spec.format != "text":
        return _prepare_examples(experiment, config, sources, data_key)
    documents = lambda: read_documents(spec, sources)  # noqa: E731 - read only when not cached
    tokenizer = _load_tokenizer(experiment, config.vocab_size, documents, data_key)
    check_vocabulary(config, len(tokenizer))  # before the corpus is tokenized with it
    data_dir = prepare_corpus(tokenizer, f"{data_key}:{tokenizer_fingerprint(tokenizer)}", documents)
    return TrainingData(tokenizer, data_key, data_dir)


def _prepare_examples(
    experiment: Experiment, config: PretrainedConfig, sources: list[str], data_key: str
) -> TrainingData:
    """prepare_data for instruction and chat data (trainer.data.chat): rendered with a chat template, masked."""
    spec, base_dir = experiment.data, Path(experiment.base_dir)
    check_template_available(spec, experiment.tokenizer, base_dir)  # before a tokenizer is trained
    texts = lambda: example_texts(read_examples(spec, sources))  # noqa: E731 - read only when not cached
    tokenizer = _load_tokenizer(experiment, config.vocab_size, texts, data_key)
    template = chat_template(spec, tokenizer, experiment.tokenizer, base_dir)
    check_vocabulary(config, len(tokenizer))
    key = f"{data_key}:{tokenizer_fingerprint(tokenizer)}:{fingerprint(template)}"
    data_dir = prepare_example_corpus(key, lambda: rendered_examples(spec, sources, tokenizer, template))
    return TrainingData(tokenizer, data_key, data_dir)


def _load_tokenizer(experiment: Experiment, vocab_size: int, documents, data_key: str):
    try:
        return load_tokenizer(experiment.tokenizer, vocab_size, documents, data_key, Path(experiment.base_dir))
    except (OSError, ValueError) as e:
        if isinstance(e, ConfigError):
            raise
        raise ConfigError(f"tokenizer {experiment.tokenizer}: {str(e).strip().splitlines()[0]}") from None
