"""A preset's light config (trainer.model.presets.PresetConfig), which `meshpilot plan --model` plans from, says what
transformers' own config and meta-device model say: the same numbers, parameters, checks and plans."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import REPO, write_experiment

from trainer.config import ModelSpec, load_experiment
from trainer.layout import Layout, LayoutError, tensor_parallel_plan
from trainer.model.presets import (
    MODELS,
    MOE_PRESETS,
    PresetConfig,
    model_override,
    model_preset,
    preset_config,
    preset_experiment,
)

# The presets with a light config: the mixtures of experts are planned from transformers' meta model instead
# (tests/test_moe_costs.py).
PRESETS = sorted(name for name in MODELS if name not in MOE_PRESETS)


def transformers_config(name: str):
    from trainer.model.build import model_config

    return model_config(ModelSpec(config=model_preset(name)), Path("."))


@pytest.mark.parametrize("name", PRESETS)
def test_a_presets_parameters_are_its_meta_models(name):
    """Every parameter's name and shape, in the model's order, and the counts: exactly the meta-device model's."""
    from trainer.model.parameters import describe_parameters

    light = preset_config(ModelSpec(config=model_preset(name)))
    assert light.describe_parameters() == describe_parameters(transformers_config(name))


@pytest.mark.parametrize("name", PRESETS)
def test_a_presets_light_config_reads_as_its_transformers_config(name):
    """Each attribute the planner reads has the transformers config's value (head_dim as the planner reads it: the
    config's, else hidden / heads), the tensor-parallel plan is transformers', and so is the answer to whether
    context parallelism can plug into the model's attention."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING

    light, config = preset_config(ModelSpec(config=model_preset(name))), transformers_config(name)
    for field in ("model_type", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                  "num_key_value_heads", "vocab_size", "max_position_embeddings", "tie_word_embeddings"):  # fmt: skip
        assert getattr(light, field) == getattr(config, field), field
    assert light.head_dim == (getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads)
    assert tensor_parallel_plan(light) == tensor_parallel_plan(config) != {}
    assert light.attention_interface == MODEL_FOR_CAUSAL_LM_MAPPING[type(config)]._supports_attention_backend
    with pytest.raises(AttributeError):  # what it does not hold is missing, not made up
        light.sliding_window  # noqa: B018


@pytest.mark.parametrize("name", ["llama-3.1-8b", "qwen2.5-7b", "gemma-2-9b"])
def test_context_parallel_is_checked_alike_for_a_preset_and_its_transformers_config(name):
    """The light config says itself whether its attention takes context parallelism; transformers' config is
    answered by its model class: the refusals must be the same, word for word."""
    from trainer.parallel.context_parallel import check_context_parallel

    light, config = preset_config(ModelSpec(config=model_preset(name))), transformers_config(name)

    def refusal(model, layout, seq_len) -> str | None:
        try:
            check_context_parallel(layout, model, seq_len)
        except LayoutError as error:
            return str(error)
        return None

    for cp in (1, 2, 3, 4, 8, 16, 64):
        for seq_len in (96, 1000, 4096, 4098, 8192):
            layout = Layout(dp_replicate=1, cp=cp)
            assert refusal(light, layout, seq_len) == refusal(config, layout, seq_len), (cp, seq_len)


@pytest.mark.parametrize("name", PRESETS)
def test_a_presets_plan_is_the_one_its_transformers_config_gives(tmp_path, monkeypatch, name):
    """Every candidate, figure and reason to drop, in the same order, for 16 H100s (tensor, pipeline and context
    parallel layouts among them) and for the rows of 8192 tokens that context parallelism is for."""
    from trainer.costs.planner import plan
    from trainer.hardware import planned_hardware

    monkeypatch.setenv("MESHPILOT_CACHE", str(tmp_path))
    hardware, memory = planned_hardware("cuda", 8, 2, "h100")
    for seq_len in (4096, 8192):
        experiment = preset_experiment(name, 16, seq_len)
        light = preset_config(experiment.model)
        assert isinstance(light, PresetConfig)
        planned = [c.as_dict() for c in plan(experiment, light, hardware, memory, seq_len)]
        expected = [c.as_dict() for c in plan(experiment, transformers_config(name), hardware, memory, seq_len)]
        assert json.dumps(planned) == json.dumps(expected)
        assert any(c["layout"]["cp"] > 1 for c in planned)  # context parallel layouts were checked and planned


def test_only_a_presets_own_config_is_planned_light(tmp_path):
    """A preset put in an experiment file (`plan EXPERIMENT --model PRESET`) is; a preset changed by an override,
    another model and a local config.json go through transformers, which checks them."""
    path = write_experiment(tmp_path)
    for name in PRESETS:
        assert preset_config(load_experiment(path, model_override(name)).model) is not None
    changed = preset_experiment("llama-3.1-8b", 8, overrides=["model.config.num_hidden_layers=40"])
    assert preset_config(changed.model) is None
    assert preset_config(load_experiment(path).model) is None
    assert all(preset_config(load_experiment(path, model_override(name)).model) is None for name in MOE_PRESETS)
    (tmp_path / "config.json").write_text(json.dumps(model_preset("llama-3.1-8b")))
    assert preset_config(ModelSpec(path=str(tmp_path / "config.json"))) is None


def test_meshpilot_plan_for_a_preset_builds_no_transformers_config_or_model(tmp_path):
    """The point of the light config: `meshpilot plan --model` imports neither a config class of transformers'
    (with it torch._dynamo) nor its modeling code, in a fresh interpreter as a user runs it."""
    code = (
        "import sys; from agent.cli import main; code = main(['plan', '--model', 'llama-3.1-70b', '--devices', "
        "'64', '--gpu', 'h100', '--top', '1']); "
        "print([m for m in ('transformers.models.llama.configuration_llama', "
        "'transformers.models.llama.modeling_llama', 'torch._dynamo') if m in sys.modules]); sys.exit(code)"
    )
    env = {**os.environ, "MESHPILOT_CACHE": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "[]"
    assert "dp_shard" in done.stdout
