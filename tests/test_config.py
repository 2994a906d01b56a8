"""The experiment file: strict keys with suggestions, type checks, shorthands, --set overrides and the hash."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from trainer.config import (
    ConfigError,
    Experiment,
    HardwareSpec,
    apply_override,
    experiment_from_dict,
    load_experiment,
)
from trainer.layout import Layout

TOP_LEVEL = "model, tokenizer, data, train, layout, hardware, search, bench, report"


def write_yaml(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


# --- unknown keys -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"trian": {}}, "unknown config key 'trian' (did you mean 'train'?)"),
        ({"train": {"lrr": 1e-3}}, "unknown config key 'train.lrr' (did you mean 'lr'?)"),
        ({"data": {"seq_length": 64}}, "unknown config key 'data.seq_length' (did you mean 'seq_len'?)"),
        ({"hardware": {"device": "cpu"}}, "unknown config key 'hardware.device' (did you mean 'devices'?)"),
        ({"report": {"pr": {"bse": "dev"}}}, "unknown config key 'report.pr.bse' (did you mean 'base'?)"),
        ({"layout": {"tpp": 2}}, "unknown config key 'layout.tpp' (did you mean 'tp'?)"),
    ],
)
def test_unknown_key_names_full_dotted_key_and_suggests(raw, message):
    with pytest.raises(ConfigError) as excinfo:
        experiment_from_dict(raw)
    assert str(excinfo.value) == message


def test_unknown_key_without_close_match_lists_valid_keys():
    with pytest.raises(ConfigError) as excinfo:
        experiment_from_dict({"zzzz": 1})
    assert str(excinfo.value) == f"unknown config key 'zzzz' (valid: {TOP_LEVEL})"


def test_internal_base_dir_is_not_a_file_key():
    with pytest.raises(ConfigError, match=r"^unknown config key 'base_dir' \(valid: model, tokenizer, "):
        experiment_from_dict({"base_dir": "/elsewhere"})


def test_unknown_nested_key_from_file_fails_in_load(tmp_path):
    path = write_yaml(tmp_path / "exp.yaml", "train:\n  steps: 3\n  lrr: 0.001\n")
    with pytest.raises(ConfigError, match=re.escape("unknown config key 'train.lrr' (did you mean 'lr'?)")):
        load_experiment(path)


# --- types ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"train": {"steps": "ten"}}, "train.steps: expected int, got 'ten'"),
        ({"train": {"steps": 2.5}}, "train.steps: expected int, got 2.5"),
        ({"train": {"steps": True}}, "train.steps: expected int, got True"),
        ({"data": {"packing": [True]}}, "data.packing: expected bool, got [True]"),
        ({"data": {"packing": "yes please"}}, "data.packing: expected bool, got 'yes please'"),
        ({"train": {"lr": "fast"}}, "train.lr: expected float, got 'fast'"),
        ({"train": {"lr": False}}, "train.lr: expected float, got False"),
        ({"train": {"betas": 0.9}}, "train.betas: expected a list, got 0.9"),
        ({"train": {"betas": [0.9, "x"]}}, "train.betas[1]: expected float, got 'x'"),
        ({"hardware": {"devices": "2"}}, "hardware.devices: expected int, got '2'"),
        ({"data": {"train": ["a.txt", 3]}}, "data.train[1]: expected str, got 3"),
        ({"model": {"config": [1]}}, "model.config: expected a mapping, got [1]"),
        ({"train": 5}, "train: expected a mapping, got int"),
        ({"report": {"pr": "github"}}, "report.pr: expected a mapping, got str"),
        ({"hardware": "fast"}, "hardware: expected a mapping, got str"),
        ({"layout": "dp_replicate=2"}, "layout: expected a mapping, got str"),
    ],
)
def test_wrong_types_are_refused_with_the_key(raw, message):
    with pytest.raises(ConfigError) as excinfo:
        experiment_from_dict(raw)
    assert str(excinfo.value) == message


def test_yaml_exponent_strings_become_floats(tmp_path):
    # PyYAML reads 3e-4 (no dot) as the string "3e-4"; float fields accept it.
    assert yaml.safe_load("lr: 3e-4")["lr"] == "3e-4"
    path = write_yaml(tmp_path / "exp.yaml", "train:\n  lr: 3e-4\n  eps: 1e-8\n  betas: [0.9, 95e-2]\n")
    train = load_experiment(path).train
    assert train.lr == pytest.approx(3e-4) and type(train.lr) is float
    assert train.eps == pytest.approx(1e-8) and type(train.eps) is float
    assert train.betas == [0.9, pytest.approx(0.95)]
    assert all(type(b) is float for b in train.betas)


def test_ints_are_accepted_for_float_fields_but_not_for_str():
    experiment = experiment_from_dict({"train": {"lr": 1, "grad_clip": 0}})
    assert experiment.train.lr == 1.0 and type(experiment.train.lr) is float
    assert experiment.train.grad_clip == 0.0 and type(experiment.train.grad_clip) is float
    with pytest.raises(ConfigError, match=r"^tokenizer: expected str, got 3$"):
        experiment_from_dict({"tokenizer": 3})


def test_optional_and_union_fields():
    experiment = experiment_from_dict(
        {"hardware": {"devices": None}, "data": {"train": ["a.txt", "b.jsonl"]}, "model": {"config": {"x": 1}}}
    )
    assert experiment.hardware.devices is None
    assert experiment.data.train == ["a.txt", "b.jsonl"]
    assert experiment.model.config == {"x": 1}
    assert experiment_from_dict({"data": {"train": "c.txt"}}).data.train == "c.txt"


# --- shorthands -----------------------------------------------------------------------------------------------------


def test_auto_shorthands(tmp_path):
    path = write_yaml(tmp_path / "exp.yaml", "hardware: auto\nlayout: auto\n")
    experiment = load_experiment(path)
    assert experiment.hardware == HardwareSpec()
    assert experiment.hardware.device_type == "auto"
    assert experiment.layout == Layout()
    assert experiment.layout.dp_replicate == -1


def test_layout_section_in_file():
    experiment = experiment_from_dict({"layout": {"dp_replicate": 2, "tp": 1}})
    assert experiment.layout == Layout(dp_replicate=2, dp_shard=1, tp=1, cp=1, pp=1)


def test_defaults_and_base_dir(tmp_path):
    path = write_yaml(tmp_path / "exp.yaml", "")
    experiment = load_experiment(path)
    assert experiment.to_dict() == Experiment().to_dict()
    assert experiment.base_dir == str(tmp_path.resolve())
    assert experiment.resolve_path("data/a.txt") == tmp_path.resolve() / "data" / "a.txt"
    assert experiment.resolve_path("/abs/a.txt") == Path("/abs/a.txt")
    assert "base_dir" not in experiment.to_dict()


# --- --set overrides --------------------------------------------------------------------------------------------------


def test_override_nested_creates_sections():
    raw: dict = {}
    apply_override(raw, "report.pr.base=dev")
    apply_override(raw, "train.steps=7")
    assert raw == {"report": {"pr": {"base": "dev"}}, "train": {"steps": 7}}


def test_override_keeps_sibling_keys_and_replaces_value():
    raw = {"train": {"steps": 5, "lr": 0.1}}
    apply_override(raw, "train.lr=0.5")
    assert raw == {"train": {"steps": 5, "lr": 0.5}}


@pytest.mark.parametrize(
    ("override", "key", "value"),
    [
        ("data.packing=false", "packing", False),
        ("data.seq_len=128", "seq_len", 128),
        ("data.train=[a.txt, b.txt]", "train", ["a.txt", "b.txt"]),
        ("data.train=x=y.txt", "train", "x=y.txt"),
        ("data.text_field= body", "text_field", "body"),
    ],
)
def test_override_values_are_read_as_yaml(override, key, value):
    raw: dict = {}
    apply_override(raw, override)
    assert raw["data"][key] == value
    assert type(raw["data"][key]) is type(value)


def test_override_float_and_list_reach_the_experiment():
    raw: dict = {}
    for override in ("train.lr=1e-3", "train.betas=[0.8, 0.99]", "report.pr.draft=no", "tokenizer=my_tok"):
        apply_override(raw, override)
    experiment = experiment_from_dict(raw)
    assert experiment.train.lr == pytest.approx(1e-3) and type(experiment.train.lr) is float
    assert experiment.train.betas == [0.8, 0.99]
    assert experiment.report.pr.draft is False
    assert experiment.tokenizer == "my_tok"


def test_override_into_shorthand_section():
    raw = {"hardware": "auto", "layout": "auto"}
    apply_override(raw, "hardware.devices=2")
    apply_override(raw, "layout.dp_replicate=2")
    assert raw == {"hardware": {"devices": 2}, "layout": {"dp_replicate": 2}}
    experiment = experiment_from_dict(raw)
    assert experiment.hardware.devices == 2
    assert experiment.layout.dp_replicate == 2


def test_override_does_not_hide_an_invalid_shorthand():
    raw = {"hardware": "fast"}
    with pytest.raises(ConfigError, match="hardware"):
        apply_override(raw, "hardware.devices=2")
        experiment_from_dict(raw)


@pytest.mark.parametrize("override", ["train.lr", "=3", "", "train.lr 3"])
def test_override_bad_syntax(override):
    with pytest.raises(ConfigError) as excinfo:
        apply_override({}, override)
    assert str(excinfo.value) == f"--set expects key=value, got {override!r}"


def test_override_through_a_value_that_is_not_a_section():
    raw = {"tokenizer": "builtin"}
    with pytest.raises(ConfigError) as excinfo:
        apply_override(raw, "tokenizer.path=x")
    assert str(excinfo.value) == "--set tokenizer.path: tokenizer is not a section"


def test_load_applies_overrides_and_checks_them(tmp_path):
    path = write_yaml(tmp_path / "exp.yaml", "train:\n  steps: 3\nhardware: auto\n")
    experiment = load_experiment(path, ["train.steps=9", "hardware.device_type=cpu", "data.seq_len=32"])
    assert experiment.train.steps == 9
    assert experiment.hardware.device_type == "cpu"
    assert experiment.data.seq_len == 32
    with pytest.raises(ConfigError, match=re.escape("unknown config key 'data.seq_length' (did you mean 'seq_len'?)")):
        load_experiment(path, ["data.seq_length=32"])
    with pytest.raises(ConfigError, match=r"^train\.steps: expected int, got 'many'$"):
        load_experiment(path, ["train.steps=many"])


# --- hash -----------------------------------------------------------------------------------------------------------


def test_config_hash_stable_and_sensitive(tmp_path):
    a = write_yaml(tmp_path / "a.yaml", "train:\n  steps: 3\n  lr: 0.001\ndata:\n  seq_len: 64\n")
    other_dir = tmp_path / "other"
    other_dir.mkdir()
    # Same content in another order and directory: base_dir and key order do not count.
    b = write_yaml(other_dir / "b.yaml", "data:\n  seq_len: 64\ntrain:\n  lr: 1e-3\n  steps: 3\n")
    h = load_experiment(a).config_hash()
    assert re.fullmatch(r"[0-9a-f]{16}", h)
    assert load_experiment(a).config_hash() == h
    assert load_experiment(b).config_hash() == h
    assert load_experiment(a, ["train.steps=4"]).config_hash() != h
    assert load_experiment(a, ["train.lr=0.002"]).config_hash() != h
    assert load_experiment(a, ["model.config={model_type: llama}"]).config_hash() != h
    assert experiment_from_dict({}).config_hash() == Experiment().config_hash()


def test_keys_added_later_leave_earlier_hashes_and_files_as_they_were():
    """The defaults' hash and config.yaml as every version since the hash was introduced wrote them: a key added
    since (train.zero_stage, float8_recipe, profile_steps, experts, loss, layout.ep...) is written only when it is not
    its default, so sweeps and runs of earlier versions resume; profiling changes no number, so it never counts."""
    assert Experiment().config_hash() == "0f11ef3b0b1f0b7c"
    written = Experiment().to_dict()["train"]
    assert not {"zero_stage", "float8_recipe", "profile_steps", "experts", "loss"} & set(written)
    assert experiment_from_dict({"train": {"loss": "whole"}}).to_dict()["train"]["loss"] == "whole"
    # train.loss auto runs chunked wherever the whole loss is not chosen: a run recorded chunked hashes as before.
    chunked = experiment_from_dict({"train": {"loss": "chunked"}})
    assert "loss" not in chunked.to_dict()["train"] and chunked.config_hash() == Experiment().config_hash()
    with pytest.raises(ConfigError, match=r"^train.loss: 'fused' is not one of auto, chunked, whole$"):
        experiment_from_dict({"train": {"loss": "fused"}})
    profiled = experiment_from_dict({"train": {"profile_steps": 1, "timing_warmup_steps": 3}})
    assert profiled.to_dict()["train"]["profile_steps"] == 1
    assert profiled.config_hash() == experiment_from_dict({"train": {"timing_warmup_steps": 3}}).config_hash()


# --- the file itself ------------------------------------------------------------------------------------------------


def test_missing_file(tmp_path):
    path = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError) as excinfo:
        load_experiment(path)
    assert str(excinfo.value) == f"experiment file not found: {path}"


def test_directory_is_not_a_file(tmp_path):
    with pytest.raises(ConfigError, match=r"^experiment file not found: "):
        load_experiment(tmp_path)


@pytest.mark.parametrize("text", ["- train\n- data\n", "just a string\n", "42\n"])
def test_file_that_is_not_a_mapping(tmp_path, text):
    path = write_yaml(tmp_path / "exp.yaml", text)
    with pytest.raises(ConfigError) as excinfo:
        load_experiment(path)
    assert str(excinfo.value) == f"{path}: the experiment file must be a mapping of sections"


def test_invalid_yaml(tmp_path):
    path = write_yaml(tmp_path / "exp.yaml", "train:\n  steps: [1, 2\n  lr: 3\n")
    with pytest.raises(ConfigError) as excinfo:
        load_experiment(path)
    message = str(excinfo.value)
    assert message.startswith(f"{path}: not valid YAML: ")
    assert "\n" not in message
