"""Bad input fails in `prepare`, in the launching process, with one clear line and no run directory left behind."""

from __future__ import annotations

import copy
import errno
import json
import os
import pickle
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from support import LLAMA_8B, TINY_MODEL
from torch.distributed.checkpoint.metadata import Metadata

import trainer.data.prepare as prepare_module
import trainer.launch.launcher as launch_module
from trainer.config import ConfigError
from trainer.launch.launcher import TrainRequest, prepare

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

    monkeypatch.setattr(prepare_module, "prepare_corpus", reached)


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
        (["train.precision=fp16"], "train.precision: 'fp16' is not one of auto, fp32, bf16, fp8"),
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
        (["train.profile_steps=-1"], "train.profile_steps must not be negative, got -1"),
        (
            ["train.profile_steps=2"],
            "train.profile_steps (2) must be fewer than train.timing_warmup_steps (2): the profiled steps are the "
            "warm-up's last, never timed",
        ),
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
    from trainer.rank.checkpoint import write_manifest

    (run / "checkpoint" / f"step_{step:08d}").mkdir(parents=True)
    # An empty but well-formed DCP index: a checkpoint's .metadata is read (as data only) when it is verified.
    index = Metadata(state_dict_metadata={}, storage_data={})
    (run / "checkpoint" / f"step_{step:08d}" / ".metadata").write_bytes(pickle.dumps(index))
    write_manifest(run / "checkpoint" / f"step_{step:08d}")  # as a finished save ends


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


# --- issue 35: run directories, node ranks, memory, --set tags, data rows ---------------------------------------------


def test_node_rank_outside_the_node_count(tmp_path):
    exp = experiment(tmp_path)
    refused(request(tmp_path, exp, node_rank=1), "--node-rank 1 is not a node of this 1-node run (0 to 0)")
    refused(request(tmp_path, exp, node_rank=5, nnodes=1), "--node-rank 5 is not a node of this 1-node run (0 to 0)")
    two = "--node-rank 2 is not a node of this 2-node run (0 to 1)"
    refused(request(tmp_path, exp, node_rank=2, nnodes=2, rdzv_endpoint="127.0.0.1:29500"), two)
    # Checked before anything else: even before the experiment file is read.
    missing = request(tmp_path, tmp_path / "missing.yaml", node_rank=-1, nnodes=1)
    refused(missing, "--node-rank -1 is not a node of this 1-node run (0 to 0)")


def test_a_single_node_run_holds_its_directory_against_every_node_rank(tmp_path):
    from trainer.results.rundir import RunDir, RunInUse, RunLock

    run = RunDir(tmp_path / "run")
    held = RunLock(run, 0, whole_run=True)  # as the launcher of a one-node run takes it
    try:
        for node_rank in (0, 1):  # another launcher claiming to be any node of a multi-node run
            with pytest.raises(RunInUse):
                RunLock(run, node_rank)
    finally:
        held.release()
    first, second = RunLock(run, 0), RunLock(run, 1)  # the nodes of one multi-node run share it
    with pytest.raises(RunInUse):
        RunLock(run, 0, whole_run=True)
    first.release()
    second.release()


@pytest.mark.parametrize("case", ["existing file", "under a file", "read-only", "too long"])
def test_out_that_cannot_be_a_run_directory(tmp_path, case):
    exp = experiment(tmp_path)
    (tmp_path / "file").write_text("not a directory\n")
    read_only = tmp_path / "ro"
    read_only.mkdir(mode=0o555)
    if os.access(read_only, os.W_OK):  # root writes anywhere: take a file system the kernel keeps read-only
        read_only = Path("/sys")
    out = {
        "existing file": tmp_path / "file",
        "under a file": tmp_path / "file" / "run",
        "read-only": read_only / "run",
        "too long": tmp_path / ("r" * 300),
    }[case]
    with pytest.raises(ConfigError, match=rf"^--out {re.escape(str(out))}: cannot make the run directory there: "):
        prepare(request(tmp_path, exp, out=out))
    assert (tmp_path / "file").read_text() == "not a directory\n"


def test_set_value_with_a_yaml_tag_is_refused_in_one_line(tmp_path):
    marker = tmp_path / "ran"
    exp = experiment(tmp_path)
    value = f'!!python/object/apply:os.mkdir ["{marker}"]'
    with pytest.raises(ConfigError, match=r"^--set train\.lr: .* is not a plain YAML value: ") as excinfo:
        prepare(request(tmp_path, exp, overrides=[f"train.lr={value}"]))
    assert "\n" not in str(excinfo.value)
    assert not marker.exists()


def test_a_run_predicted_not_to_fit_is_refused_unless_overridden(tmp_path, monkeypatch):
    import psutil

    huge = {"model": {"config": {"intermediate_size": 2**34}}}  # about 1.5 TiB of fp32 MLP weights alone
    exp = experiment(tmp_path, huge)
    with pytest.raises(ConfigError) as excinfo:
        prepare(request(tmp_path, exp, nproc=2, layout="dp_replicate=2"))
    available = psutil.virtual_memory().available // 2 / 2**30
    message = str(excinfo.value)
    assert re.fullmatch(
        r"the memory model predicts a peak of [\d.]+ GiB per process, more than the [\d.]+ GiB of available host "
        r"memory per process \(2 sharing this machine\); lower train\.micro_batch, use more processes or another "
        r"layout, or pass --ignore-memory-check",
        message,
    ), message
    assert float(re.search(r"more than the ([\d.]+) GiB", message).group(1)) == pytest.approx(available, rel=0.2)
    assert not (tmp_path / "run").exists()
    with pytest.raises(Reached):  # the override: every other check passes, data preparation starts
        prepare(request(tmp_path, exp, ignore_memory_check=True))
    monkeypatch.setenv(launch_module.IGNORE_MEMORY_ENV, "1")
    with pytest.raises(Reached):
        prepare(request(tmp_path, exp, out=tmp_path / "run2"))


@pytest.mark.parametrize(
    "content, message",
    [
        ("", "data.train: rows.jsonl is empty: no JSON lines in it"),
        ('{"text": "fine"}\n{"text": null}\n', "data.train: cannot read rows.jsonl: line 2: 'text' is null, not text"),
        ('{"text": "fine"}\n\n{"text": 5}\n', "data.train: cannot read rows.jsonl: line 3: 'text' is 5, not text"),
        ('{"text": "fine"}\n{"body": "x"}\n', "data.train: cannot read rows.jsonl: line 2: no 'text' field"),
        ('{"text": "a"}\n{"text": b\n', "data.train: cannot read rows.jsonl: line 2: not valid JSON"),
    ],
    ids=["empty", "null", "number", "missing", "parse-error"],
)
def test_jsonl_rows_without_text_are_refused_with_their_line(tmp_path, monkeypatch, content, message):
    monkeypatch.undo()  # reading the data is the point here
    (tmp_path / "rows.jsonl").write_text(content)
    exp = experiment(tmp_path, {"data": {"train": ["rows.jsonl"]}})
    with pytest.raises(ConfigError) as excinfo:
        prepare(request(tmp_path, exp))
    assert str(excinfo.value).startswith(message), str(excinfo.value)
    assert "\n" not in str(excinfo.value)
    assert not (tmp_path / "run").exists()


def test_a_failed_write_leaves_no_temporary_file(tmp_path):
    """A result file that cannot be written whole (here the file-size limit, as a full disk would) raises, and the
    temporary file it was being written to is gone."""
    script = (
        "import resource, signal, sys\n"
        "from pathlib import Path\n"
        "from trainer.results.contracts import write_json\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))\n"
        "try:\n"
        "    write_json(Path(sys.argv[1]) / 'metrics.json', {'x': 'y' * 100000})\n"
        "except OSError as e:\n"
        "    print(e.errno)\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], cwd=REPO, capture_output=True, text=True)
    assert done.stdout.strip() == str(errno.EFBIG), done.stderr
    assert list(tmp_path.iterdir()) == []


def priced_on_h100s(tmp_path: Path, layout: str, nproc: int) -> tuple[int, str | None]:
    """The launcher's memory decision for Llama 3.1 8B on `nproc` H100s (trainer.hardware.GPUS), without a GPU: the
    experiment resolved as the launcher resolves it for CUDA, priced, and held against the H100's memory."""
    from trainer.config import load_experiment, resolve_precision
    from trainer.data.rows import plan_batches
    from trainer.hardware import GPUS
    from trainer.launch.launcher import memory_per_process, memory_refusal, predicted_peak
    from trainer.layout import Layout
    from trainer.model.build import model_config

    changes = {"model": {"config": LLAMA_8B}, "data": {"seq_len": 2048}, "hardware": {"device_type": "cuda"}}
    changes["train"] = {"micro_batch": 1, "global_batch_tokens": 2048 * nproc}
    loaded = load_experiment(experiment(tmp_path, changes))
    loaded.train.precision = resolve_precision(loaded.train.precision, "cuda")
    loaded.layout = Layout.parse(layout).resolve(nproc)
    grad_accum = plan_batches(loaded.train.global_batch_tokens, 2048, 1, loaded.layout.dp_degree).grad_accum
    peak = predicted_peak(loaded, model_config(loaded.model, Path(loaded.base_dir)), grad_accum)
    h100 = GPUS["h100-sxm"].memory_bytes
    return peak, memory_refusal(peak, *memory_per_process("cuda", nproc, device_memory=[h100] * nproc))


def test_the_memory_check_on_cuda_is_decided_without_a_gpu(tmp_path):
    """On CUDA a process has its device's memory: 8B parameters with fp32 master weights, gradients and Adam states
    (16 bytes each, 119 GiB) do not fit one H100's 79.18 GiB; sharded over 8 (FSDP) they do."""
    peak, refusal = priced_on_h100s(tmp_path, "dp_replicate=1", 1)
    assert peak > 8e9 * 16
    assert refusal == (
        f"the memory model predicts a peak of {peak / 2**30:.2f} GiB per process, more than the 79.18 GiB of device "
        "memory per process; lower train.micro_batch, use more processes or another layout, or pass "
        "--ignore-memory-check"
    )
    peak, refusal = priced_on_h100s(tmp_path, "dp_shard=8", 8)
    assert refusal is None and 8e9 * 16 / 8 < peak < 79.18 * 2**30
