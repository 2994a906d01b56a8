"""Bad input fails in `prepare`, in the launching process, with one clear line and no run directory left behind."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from support import TINY_MODEL

import trainer.launch as launch_module
from trainer.config import ConfigError
from trainer.launch import TrainRequest, prepare

# A real finished run's metrics.json (the TUI's recorded trial): what a finished run leaves.
TUI_TRIAL = Path(__file__).parent / "fixtures" / "tui-sweep" / "sweep" / "trials" / "t000"

REPO = Path(__file__).resolve().parents[1]

BASE = {
    "model": {"config": dict(TINY_MODEL)},
    "data": {"seq_len": 64},
    "train": {"steps": 2, "global_batch_tokens": 512, "micro_batch": 2},
    "hardware": {"device_type": "cpu"},
}


class Reached(Exception):
    """Raised when prepare gets as far as tokenizing the corpus: every check has passed by then."""


@pytest.fixture(autouse=True)
def no_data_preparation(monkeypatch):
    def reached(*args, **kwargs):
        raise Reached

    monkeypatch.setattr(launch_module, "prepare_corpus", reached)


def merge(base: dict, changes: dict) -> dict:
    out = copy.deepcopy(base)
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def experiment(tmp_path: Path, changes: dict | None = None, text: str | None = None) -> Path:
    path = tmp_path / "exp.yaml"
    path.write_text(text if text is not None else yaml.safe_dump(merge(BASE, changes or {})))
    return path


def refused(request: TrainRequest, message: str) -> str:
    """prepare(request) raises ConfigError with exactly `message` (one line) and leaves no run directory."""
    out = request.out
    existed = out.exists()
    with pytest.raises(ConfigError) as excinfo:
        prepare(request)
    text = str(excinfo.value)
    assert text == message
    assert "\n" not in text
    if not existed:
        assert not out.exists()
    return text


def request(tmp_path: Path, exp: Path, **kwargs) -> TrainRequest:
    kwargs.setdefault("out", tmp_path / "run")
    kwargs.setdefault("nproc", 1)
    return TrainRequest(experiment=exp, **kwargs)


def word_tokenizer(directory: Path, size: int) -> Path:
    """A local tokenizer directory with exactly `size` tokens, an EOS among them; no training needed."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<eos>": 0, "<unk>": 1, **{f"w{i}": i for i in range(2, size)}}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>", unk_token="<unk>").save_pretrained(str(directory))
    return directory


# --- the control: valid input gets through every check --------------------------------------------------------------


def test_valid_request_passes_every_check(tmp_path):
    exp = experiment(tmp_path, {"tokenizer": str(word_tokenizer(tmp_path / "tok", 100))})
    with pytest.raises(Reached):
        prepare(request(tmp_path, exp))
    assert not (tmp_path / "run").exists()


def test_valid_request_with_builtin_tokenizer_passes_every_check(tmp_path):
    exp = experiment(tmp_path)
    with pytest.raises(Reached):
        prepare(request(tmp_path, exp, nproc=2, layout="dp_replicate=2"))


# --- experiment file --------------------------------------------------------------------------------------------------


def test_unknown_config_key(tmp_path):
    exp = experiment(tmp_path, {"train": {"lrr": 0.001}})
    refused(request(tmp_path, exp), "unknown config key 'train.lrr' (did you mean 'lr'?)")


def test_unknown_key_from_set(tmp_path):
    exp = experiment(tmp_path)
    refused(
        request(tmp_path, exp, overrides=["data.seq_length=32"]),
        "unknown config key 'data.seq_length' (did you mean 'seq_len'?)",
    )


def test_mistyped_model_config_key(tmp_path):
    config = dict(BASE["model"]["config"])
    config["num_hiden_layers"] = config.pop("num_hidden_layers")
    exp = experiment(tmp_path, {"model": {"config": config}})
    refused(
        request(tmp_path, exp),
        "unknown config key 'model.config.num_hiden_layers' for llama (did you mean 'num_hidden_layers'?)",
    )


@pytest.mark.parametrize("model_type", ["t5", "clip"])
def test_model_type_not_causal_lm(tmp_path, model_type):
    exp = experiment(tmp_path, {"model": {"config": {"model_type": model_type}}})
    refused(request(tmp_path, exp), f"model.config.model_type: {model_type!r} is not a causal language model type")


def test_model_type_missing(tmp_path):
    config = {k: v for k, v in BASE["model"]["config"].items() if k != "model_type"}
    exp = experiment(tmp_path, text=yaml.safe_dump({**BASE, "model": {"config": config}}))
    refused(request(tmp_path, exp), "model.config: missing model_type (for example llama, qwen2, mistral, gpt2)")


def test_model_path_not_found(tmp_path):
    exp = experiment(tmp_path, text=yaml.safe_dump({**BASE, "model": {"path": "no-such-model"}}))
    refused(request(tmp_path, exp), f"model.path: not found: {tmp_path.resolve() / 'no-such-model'}")


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["train.steps=0"], "train.steps must be positive, got 0"),
        (["train.lr=-1e-3"], "train.lr must be positive, got -0.001"),
        (["train.optimizer=sgdd"], "train.optimizer: 'sgdd' is not one of adamw, galore_adamw"),
        (["train.precision=fp16"], "train.precision: 'fp16' is not one of auto, fp32, bf16"),
        (["train.betas=[0.9]"], "train.betas: expected two numbers in [0, 1), got [0.9]"),
        (["train.betas=[0.9, 1.5]"], "train.betas: expected two numbers in [0, 1), got [0.9, 1.5]"),
        (["train.eps=0"], "train.eps must be positive, got 0.0"),
        (["train.keep_checkpoints=0"], "train.keep_checkpoints must be positive, got 0"),
        (["train.collective_timeout_s=0"], "train.collective_timeout_s must be positive, got 0"),
        (["train.first_steps_timeout_s=-5"], "train.first_steps_timeout_s must be positive, got -5"),
        (["train.checkpoint_every=-2"], "train.checkpoint_every must not be negative, got -2"),
        (["train.warmup_steps=-1"], "train.warmup_steps must not be negative, got -1"),
        (["train.grad_clip=-1"], "train.grad_clip must not be negative, got -1.0"),
        (["train.min_lr_ratio=2"], "train.min_lr_ratio must lie in [0, 1], got 2.0"),
        (["train.lr=.nan"], "train.lr: expected a finite number, got nan"),
        (["train.lr=inf"], "train.lr: expected a finite number, got 'inf'"),
        (["train.global_batch_tokens=500"], "train.global_batch_tokens 500 is not a multiple of data.seq_len 64"),
        (
            ["train.micro_batch=3"],
            "train.global_batch_tokens 512 = 8 rows of 64 tokens does not divide into micro_batch 3 x 1 "
            "data-parallel ranks",
        ),
        (["hardware.device_type=tpu"], "hardware.device_type: 'tpu' is not one of auto, cpu, cuda"),
        (["train.steps=ten"], "train.steps: expected int, got 'ten'"),
        (["data.train=builtin:nope"], "data.train: 'builtin:nope' must stand alone and be one of builtin:stdlib-docs"),
    ],
)
def test_bad_values(tmp_path, overrides, message):
    refused(request(tmp_path, experiment(tmp_path), overrides=overrides), message)


def test_steps_flag_zero(tmp_path):
    refused(request(tmp_path, experiment(tmp_path), steps=0), "train.steps must be positive, got 0")


def test_missing_experiment_file(tmp_path):
    exp = tmp_path / "missing.yaml"
    refused(request(tmp_path, exp), f"experiment file not found: {exp}")


# --- layout and processes ---------------------------------------------------------------------------------------------


def test_layout_product_differs_from_process_count(tmp_path):
    exp = experiment(tmp_path)
    refused(
        request(tmp_path, exp, nproc=2, layout="dp_replicate=3"),
        "layout dp_replicate=3 multiplies to 3, but 2 processes run",
    )


def test_layout_from_file_differs_from_process_count(tmp_path):
    exp = experiment(tmp_path, {"layout": {"dp_replicate": 3}})
    refused(request(tmp_path, exp, nproc=2), "layout dp_replicate=3 multiplies to 3, but 2 processes run")


def test_layout_flag_syntax(tmp_path):
    exp = experiment(tmp_path)
    refused(request(tmp_path, exp, layout="tp=two"), "--layout tp: degree must be an integer, got 'two'")


def test_layout_times_nodes(tmp_path):
    exp = experiment(tmp_path)
    refused(
        request(tmp_path, exp, nproc=2, nnodes=2, layout="dp_replicate=2", rdzv_endpoint="127.0.0.1:29400"),
        "layout dp_replicate=2 multiplies to 2, but 4 processes run",
    )


def test_negative_nproc(tmp_path):
    refused(
        request(tmp_path, experiment(tmp_path), nproc=-1),
        "the process count and node count must be at least 1 (got -1 and 1)",
    )


@pytest.mark.parametrize(("nproc", "changes"), [(0, {}), (None, {"hardware": {"devices": 0}})])
def test_zero_processes(tmp_path, nproc, changes):
    refused(
        request(tmp_path, experiment(tmp_path, changes), nproc=nproc),
        "the process count and node count must be at least 1 (got 0 and 1)",
    )


def test_cuda_requested_without_cuda(tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    exp = experiment(tmp_path, {"hardware": {"device_type": "cuda"}})
    refused(request(tmp_path, exp), "hardware.device_type is cuda, but no CUDA device is available")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the real (CPU-only) machine")
def test_cuda_requested_on_this_cpu_machine(tmp_path):
    exp = experiment(tmp_path)
    refused(
        request(tmp_path, exp, overrides=["hardware.device_type=cuda"]),
        "hardware.device_type is cuda, but no CUDA device is available",
    )


def test_more_processes_than_cuda_devices(tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    exp = experiment(tmp_path, {"hardware": {"device_type": "cuda"}})
    refused(request(tmp_path, exp, nproc=2), "--nproc 2 asks for more processes than the 1 CUDA devices")


# --- data, tokenizer, model compatibility -----------------------------------------------------------------------------


def test_missing_data_file(tmp_path):
    exp = experiment(tmp_path, {"data": {"train": "corpus/train.jsonl"}})
    refused(request(tmp_path, exp), f"data.train: file not found: {tmp_path.resolve() / 'corpus' / 'train.jsonl'}")


def test_unsupported_data_format(tmp_path):
    (tmp_path / "train.csv").write_text("text\nhello\n")
    exp = experiment(tmp_path, {"data": {"train": "train.csv"}})
    refused(
        request(tmp_path, exp),
        "data.train: train.csv: unsupported format (use .json, .jsonl, .md, .parquet, .text, .txt)",
    )


def test_vocabulary_mismatch(tmp_path):
    tok = word_tokenizer(tmp_path / "tok", 600)
    exp = experiment(tmp_path, {"tokenizer": "tok"})  # relative to the experiment file
    refused(request(tmp_path, exp), "vocabulary mismatch: the tokenizer has 600 tokens but model vocab_size is 512")
    assert tok.is_dir()


def test_seq_len_beyond_positions(tmp_path):
    tok = word_tokenizer(tmp_path / "tok", 100)
    exp = experiment(tmp_path, {"tokenizer": str(tok), "data": {"seq_len": 256}})
    refused(request(tmp_path, exp), "data.seq_len 256 exceeds the model's 128 positions (max_position_embeddings)")


def test_missing_tokenizer_directory(tmp_path):
    exp = experiment(tmp_path, {"tokenizer": "no-such-tokenizer"})
    refused(request(tmp_path, exp), f"tokenizer: directory not found: {tmp_path.resolve() / 'no-such-tokenizer'}")


# --- run directory ----------------------------------------------------------------------------------------------------


def test_run_directory_with_results_without_resume(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "metrics.json").write_text("{}")
    exp = experiment(tmp_path)
    refused(
        request(tmp_path, exp, out=out),
        f"run directory {out} holds results (metrics.json); pass --resume to continue it or choose another --out",
    )
    assert sorted(p.name for p in out.iterdir()) == ["metrics.json"]


def test_empty_run_directory_is_fine(tmp_path):
    (tmp_path / "run").mkdir()
    with pytest.raises(Reached):
        prepare(request(tmp_path, experiment(tmp_path)))


def test_resume_without_any_checkpoint(tmp_path):
    out = tmp_path / "run"
    refused(
        request(tmp_path, experiment(tmp_path), resume=True),
        f"--resume: no complete checkpoint in {out / 'checkpoint'}",
    )


def test_resume_with_only_a_partial_checkpoint(tmp_path):
    out = tmp_path / "run"
    partial = out / "checkpoint" / "step_00000004.partial"
    partial.mkdir(parents=True)
    (partial / ".metadata").write_text("")
    incomplete = out / "checkpoint" / "step_00000002"  # renamed but without DCP metadata
    incomplete.mkdir()
    refused(
        request(tmp_path, experiment(tmp_path), resume=True),
        f"--resume: no complete checkpoint in {out / 'checkpoint'}",
    )
    assert partial.is_dir() and incomplete.is_dir()


# --- the command line -------------------------------------------------------------------------------------------------


def test_cli_bad_key_exit_code_and_one_line(tmp_path):
    exp = experiment(tmp_path, {"train": {"lrr": 0.001}})
    out = tmp_path / "run"
    script = Path(sys.executable).with_name("meshpilot")
    command = [str(script)] if script.is_file() else [sys.executable, "-m", "agent.cli"]
    result = subprocess.run(
        [*command, "train", str(exp), "--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert lines == ["meshpilot: error: unknown config key 'train.lrr' (did you mean 'lr'?)"]
    assert re.match(r"^meshpilot: error: ", result.stderr)
    assert not out.exists()


# --- resume, multi-node, model and data files ------------------------------------------------------------------


def fake_finished_checkpoint(run: Path, step: int) -> None:
    (run / "checkpoint" / f"step_{step:08d}").mkdir(parents=True)
    (run / "checkpoint" / f"step_{step:08d}" / ".metadata").write_text("")


def resolved_config(tmp_path: Path, exp: Path) -> str:
    """config.yaml as the launcher writes it for `exp` on one process."""
    with pytest.raises(Reached):
        prepare(request(tmp_path, exp, out=tmp_path / "probe"))
    import yaml as _yaml

    from trainer.config import load_experiment

    loaded = load_experiment(exp)
    loaded.train.precision, loaded.hardware.device_type, loaded.hardware.devices = "fp32", "cpu", 1
    loaded.train.attention = "dense"
    loaded.layout = loaded.layout.resolve(1)
    return _yaml.safe_dump(loaded.to_dict(), sort_keys=False)


def test_resume_refuses_a_changed_experiment(tmp_path):
    exp = experiment(tmp_path)
    run = tmp_path / "run"
    fake_finished_checkpoint(run, 1)
    (run / "config.yaml").write_text(resolved_config(tmp_path, exp))
    refused(
        request(tmp_path, exp, resume=True, overrides=["train.lr=0.5"]),
        "--resume continues the same experiment (only the layout and process count may change), but it changed: "
        "train.lr 0.0003 -> 0.5",
    )
    with pytest.raises(Reached):  # another process count is no other experiment: the checkpoint is resharded
        prepare(request(tmp_path, exp, resume=True, nproc=2))


def test_resume_refuses_a_finished_run(tmp_path):
    exp = experiment(tmp_path)
    run = tmp_path / "run"
    fake_finished_checkpoint(run, 2)
    (run / "config.yaml").write_text(resolved_config(tmp_path, exp))
    final = f"--resume: the latest checkpoint of {run} (step_00000002) is its final step; nothing is left to train"
    refused(request(tmp_path, exp, resume=True), final)  # killed before it wrote metrics.json
    finished = {**json.loads((TUI_TRIAL / "metrics.json").read_text()), "steps": 2}
    (run / "metrics.json").write_text(json.dumps(finished))
    refused(request(tmp_path, exp, resume=True), f"--resume: {run} already finished its 2 steps")


def test_multi_node_needs_a_rendezvous_endpoint(tmp_path):
    refused(
        request(tmp_path, experiment(tmp_path), nnodes=2),
        "--nnodes 2 needs --rdzv-endpoint HOST:PORT, the same on every node",
    )


def test_invalid_model_config_value(tmp_path):
    with pytest.raises(ConfigError, match=r"^model\.config: ") as excinfo:
        prepare(request(tmp_path, experiment(tmp_path, {"model": {"config": {"hidden_size": "big"}}})))
    assert "\n" not in str(excinfo.value)


def test_model_path_with_broken_config_json(tmp_path):
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "config.json").write_text("{not json")
    with pytest.raises(ConfigError, match=r"^model\.path: .*broken: ") as excinfo:
        prepare(request(tmp_path, experiment(tmp_path, {"model": {"config": None, "path": "broken"}})))
    assert "\n" not in str(excinfo.value)


def test_malformed_jsonl(tmp_path, monkeypatch):
    monkeypatch.undo()  # reading the data is the point here
    (tmp_path / "bad.jsonl").write_text('{"text": "fine"}\n{"text": broken\n')
    exp = experiment(tmp_path, {"data": {"train": ["bad.jsonl"]}})
    with pytest.raises(ConfigError, match=r"^data\.train: cannot read bad\.jsonl: ") as excinfo:
        prepare(request(tmp_path, exp))
    assert "\n" not in str(excinfo.value)
    assert not (tmp_path / "run").exists()


def test_corpus_too_small_for_one_row(tmp_path, monkeypatch):
    monkeypatch.undo()
    (tmp_path / "tiny.jsonl").write_text('{"text": "w2 w3"}\n')
    tok = word_tokenizer(tmp_path / "tok", 100)
    exp = experiment(tmp_path, {"data": {"train": ["tiny.jsonl"]}, "tokenizer": str(tok)})
    refused(request(tmp_path, exp), "data: the corpus is too small for one row of seq_len 64")


@pytest.mark.parametrize(
    ("overrides", "layout", "nproc", "message"),
    [
        (["train.galore.rank=0"], None, 1, "train.galore.rank must be positive, got 0"),
        (["train.galore.proj_type=diagonal"], None, 1, "train.galore.proj_type: 'diagonal' is not one of "),
        (["train.galore.target_modules=[]"], None, 1, "train.galore.target_modules: give one or more"),
        (
            [],
            "dp_shard=2",
            2,
            "train.optimizer galore_adamw runs with data-parallel replicate layouts only, not dp_shard=2",
        ),
    ],
)
def test_bad_galore_settings(tmp_path, overrides, layout, nproc, message):
    req = request(tmp_path, experiment(tmp_path), nproc=nproc, layout=layout)
    req.overrides = ["train.optimizer=galore_adamw", *overrides]
    with pytest.raises(ConfigError, match="^" + re.escape(message)):
        prepare(req)
    assert not (tmp_path / "run").exists()


def test_context_parallel_needs_seq_len_divisible_by_twice_cp(tmp_path):
    refused(
        request(
            tmp_path,
            experiment(tmp_path, {"data": {"seq_len": 36}, "train": {"global_batch_tokens": 144}}),
            nproc=4,
            layout="cp=4",
        ),
        "layout cp=4: data.seq_len 36 must be divisible by 2 x cp = 8 (each sequence is cut into 2 x cp chunks)",
    )


def test_context_parallel_needs_the_attention_interface(tmp_path):
    bloom = {"model_type": "bloom", "vocab_size": 512, "hidden_size": 32, "n_layer": 2, "n_head": 4}
    refused(
        request(
            tmp_path,
            experiment(tmp_path, text=yaml.safe_dump({**BASE, "model": {"config": bloom}})),
            nproc=2,
            layout="cp=2",
        ),
        "layout cp=2: bloom's attention does not go through transformers' attention interface, "
        "which context parallelism plugs into",
    )
