"""Device-mapped loading: a model split over CPU and disk computes exactly what the same model in memory does."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import AutoConfig, AutoModelForCausalLM, LlamaConfig

from trainer.config import ConfigError, parse_bytes
from trainer.export.device_map import device_map_summary, load_device_mapped

TINY_GQA_LLAMA = {
    "vocab_size": 512,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,  # grouped-query attention
    "max_position_embeddings": 128,
}
# Parameter bytes in fp32: embedding and lm_head 131072 each, each decoder layer 147968. accelerate keeps room on the
# CPU for the largest layer, so 500 kB holds the embedding and one layer; the rest must go to disk.
SMALL_CPU = "500kB"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(LlamaConfig(**TINY_GQA_LLAMA))
    directory = tmp_path_factory.mktemp("tiny-llama")
    model.save_pretrained(directory, safe_serialization=True)
    return directory


def _logits(model: torch.nn.Module) -> torch.Tensor:
    batch = torch.randint(0, TINY_GQA_LLAMA["vocab_size"], (2, 24), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        return model(input_ids=batch).logits


def _total_bytes(model: torch.nn.Module) -> int:
    return sum(p.numel() * p.element_size() for p in model.parameters())


def test_disk_offloaded_model_gives_the_in_memory_logits(model_dir, tmp_path):
    reference = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="sdpa")
    offload = tmp_path / "offload"
    mapped = load_device_mapped(model_dir, {"cpu": SMALL_CPU}, offload_dir=offload)

    devices = set(mapped.hf_device_map.values())
    assert devices == {"cpu", "disk"}
    assert any(name.startswith("model.layers.") for name, d in mapped.hf_device_map.items() if d == "disk")
    assert (offload / "index.json").is_file() and list(offload.glob("*.dat"))
    assert not mapped.training
    torch.testing.assert_close(_logits(mapped), _logits(reference.eval()), atol=1e-6, rtol=0)


def test_summary_counts_every_parameter_once_per_device(model_dir, tmp_path):
    mapped = load_device_mapped(model_dir, {"cpu": SMALL_CPU}, offload_dir=tmp_path)
    summary = device_map_summary(mapped)
    # The embedding and layer 0 fit on the CPU; three layers, the final norm and lm_head do not.
    assert summary == {"cpu": 131072 + 147968, "disk": 3 * 147968 + 256 + 131072}
    assert sum(summary.values()) == _total_bytes(mapped)


def test_a_model_that_fits_stays_whole_on_the_cpu(model_dir):
    mapped = load_device_mapped(model_dir, {"cpu": "1GiB"})
    assert mapped.hf_device_map == {"": "cpu"}
    assert device_map_summary(mapped) == {"cpu": _total_bytes(mapped)}


def test_tied_embeddings_load_from_the_single_stored_copy(tmp_path):
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(LlamaConfig(**TINY_GQA_LLAMA, tie_word_embeddings=True))
    model.save_pretrained(tmp_path / "tied", safe_serialization=True)
    mapped = load_device_mapped(tmp_path / "tied", {"cpu": SMALL_CPU}, offload_dir=tmp_path / "offload")
    assert "disk" in mapped.hf_device_map.values()
    assert mapped.lm_head.weight is mapped.model.embed_tokens.weight
    assert sum(device_map_summary(mapped).values()) == _total_bytes(mapped)
    torch.testing.assert_close(_logits(mapped), _logits(model.eval()), atol=1e-6, rtol=0)


def test_summary_needs_a_device_map():
    with pytest.raises(ValueError, match="hf_device_map"):
        device_map_summary(torch.nn.Linear(2, 2))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (4096, 4096),
        ("4096", 4096),
        ("80GiB", 80 * 2**30),
        ("80GB", 80 * 10**9),
        ("512MiB", 512 * 2**20),
        ("512 mb", 512 * 10**6),
        ("1.5TiB", 3 * 2**39),
        ("1.1TB", 1_100_000_000_000),
        ("0", 0),
    ],
)
def test_parse_bytes(text, expected):
    assert parse_bytes(text) == expected


@pytest.mark.parametrize("text", ["80 gigs", "", "GiB", "-1GB", "1e9", "1.2.3GB", -5, True, 1.5, None])
def test_parse_bytes_refuses(text):
    with pytest.raises(ConfigError, match="memory size"):
        parse_bytes(text)


def test_config_error_is_a_value_error():
    assert issubclass(ConfigError, ValueError)


def _weights_only_dir(model_dir: Path, directory: Path, drop: str | None = None) -> Path:
    """A copy of the model whose checkpoint lacks the weight `drop`."""
    directory.mkdir()
    (directory / "config.json").write_text((model_dir / "config.json").read_text())
    weights = {k: v for k, v in load_file(model_dir / "model.safetensors").items() if k != drop}
    save_file(weights, directory / "model.safetensors", metadata={"format": "pt"})
    return directory


@pytest.mark.parametrize(
    ("max_memory", "offload", "message"),
    [
        ({"cpu": SMALL_CPU}, False, "do not fit in max_memory; give offload_dir"),
        ({"cpu": "1GiB", "disk": "1GiB"}, False, 'has "disk" but no offload_dir'),
        ({"cpu": SMALL_CPU, "disk": "100kB"}, True, 'max_memory["disk"] allows 100000'),
        ({"cpu": "80 gigs"}, False, "max_memory['cpu']: memory size '80 gigs'"),
        ({"cuda:0": "1GiB"}, False, "unknown device 'cuda:0'"),
        ({torch.cuda.device_count(): "1GiB"}, False, f"GPU {torch.cuda.device_count()} does not exist"),
        ({}, False, "max_memory is empty"),
    ],
)
def test_bad_memory_limits_are_refused_in_one_line(model_dir, tmp_path, max_memory, offload, message):
    with pytest.raises(ConfigError, match=re.escape(message)) as error:
        load_device_mapped(model_dir, max_memory, offload_dir=tmp_path / "offload" if offload else None)
    assert "\n" not in str(error.value)
    assert not (tmp_path / "offload").exists()


def test_missing_model_directory(tmp_path):
    with pytest.raises(ConfigError, match="model directory not found"):
        load_device_mapped(tmp_path / "nowhere", {"cpu": "1GiB"})


def test_directory_without_weights(model_dir, tmp_path):
    (tmp_path / "config.json").write_text((model_dir / "config.json").read_text())
    with pytest.raises(ConfigError, match="no weights"):
        load_device_mapped(tmp_path, {"cpu": "1GiB"})


def test_directory_without_config(tmp_path):
    with pytest.raises(ConfigError, match=r"no config\.json"):
        load_device_mapped(tmp_path, {"cpu": "1GiB"})


def test_checkpoint_missing_a_weight_is_refused(model_dir, tmp_path):
    broken = _weights_only_dir(model_dir, tmp_path / "broken", drop="model.layers.2.mlp.up_proj.weight")
    with pytest.raises(ConfigError, match=r"lacks 1 weights .*model\.layers\.2\.mlp\.up_proj\.weight"):
        load_device_mapped(broken, {"cpu": SMALL_CPU}, offload_dir=tmp_path / "offload")


def test_complete_copy_loads(model_dir, tmp_path):
    # The control for the test above: the same copying without a dropped weight loads.
    copy = _weights_only_dir(model_dir, tmp_path / "copy")
    assert device_map_summary(load_device_mapped(copy, {"cpu": "1GiB"}))


# Mixtures of experts: tiny configs of the MoE architectures transformers 5 builds with fused 3-D expert tensors,
# on the decoder above (its intermediate_size is the dense MLPs' width: DeepSeek-V3's first layer).
TINY_MOE = {
    "mixtral": {"num_local_experts": 4, "num_experts_per_tok": 2},
    "qwen3_moe": {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 64, "head_dim": 16},
    # shared experts beside the routed ones
    "qwen2_moe": {
        "num_experts": 4,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 64,
        "shared_expert_intermediate_size": 64,
    },
    "deepseek_v3": {
        "n_routed_experts": 4,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 64,
        "n_shared_experts": 1,
        "first_k_dense_replace": 1,
        "n_group": 1,
        "topk_group": 1,
        "kv_lora_rank": 16,
        "q_lora_rank": 32,
        "qk_rope_head_dim": 8,
        "qk_nope_head_dim": 8,
        "v_head_dim": 16,
    },
}
# The tiny Mixtral in fp32: embedding and lm_head 131072 bytes each, each decoder layer 443904, of which its four
# experts are 393216 (top-2 routing uses half of them per token, but any token may pick any). accelerate keeps room
# on the CPU for the largest layer, so 1.1 MB holds the embedding and one whole layer, experts and all.
MIXTRAL_LAYER, MIXTRAL_EXPERTS = 443904, 393216
MIXTRAL_CPU = "1.1MB"


def _saved_moe(kind: str, directory: Path) -> torch.nn.Module:
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(kind, **TINY_GQA_LLAMA, **TINY_MOE[kind]))
    # save_pretrained writes transformers' original per-expert names, which the loader must fuse again.
    model.save_pretrained(directory, safe_serialization=True)
    return model.eval()


@pytest.fixture(scope="module")
def mixtral(tmp_path_factory) -> tuple[Path, torch.nn.Module]:
    directory = tmp_path_factory.mktemp("tiny-mixtral")
    return directory, _saved_moe("mixtral", directory)


def test_mixtral_larger_than_the_device_runs_over_cpu_and_disk_with_the_whole_models_logits(mixtral, tmp_path):
    directory, whole = mixtral
    offload = tmp_path / "offload"
    assert _total_bytes(whole) > parse_bytes(MIXTRAL_CPU)
    mapped = load_device_mapped(directory, {"cpu": MIXTRAL_CPU}, offload_dir=offload)

    layers = {name: device for name, device in mapped.hf_device_map.items() if name.startswith("model.layers")}
    # Each decoder layer is placed whole: its router and experts never land on a device apart from it.
    assert layers == {"model.layers.0": "cpu", **{f"model.layers.{i}": "disk" for i in (1, 2, 3)}}
    assert (offload / "model.layers.3.mlp.experts.gate_up_proj.safetensors").is_file()
    assert mapped.model.layers[0].mlp.experts.gate_up_proj.shape == (4, 256, 64)
    # Same CPU kernels on the same weights in the same order: moving tensors between layers changes no bit.
    assert torch.equal(_logits(mapped), _logits(whole))


def test_the_budget_counts_every_expert_not_the_active_ones(mixtral, tmp_path):
    directory, whole = mixtral
    summary = device_map_summary(load_device_mapped(directory, {"cpu": MIXTRAL_CPU}, offload_dir=tmp_path))
    assert summary == {"cpu": 131072 + MIXTRAL_LAYER, "disk": 3 * MIXTRAL_LAYER + 256 + 131072}
    assert sum(summary.values()) == _total_bytes(whole)
    # Counting only the two active experts of four, a second layer would have fitted beside the first.
    active_layer = MIXTRAL_LAYER - MIXTRAL_EXPERTS // 2
    assert 131072 + 2 * active_layer <= parse_bytes(MIXTRAL_CPU) - active_layer


@pytest.mark.parametrize("kind", ["qwen3_moe", "qwen2_moe", "deepseek_v3"])
def test_other_moe_architectures_device_map_with_the_whole_models_logits(kind, tmp_path):
    whole = _saved_moe(kind, tmp_path / kind)
    budget = _total_bytes(whole) // 2
    mapped = load_device_mapped(tmp_path / kind, {"cpu": budget}, offload_dir=tmp_path / "offload")
    assert set(mapped.hf_device_map.values()) == {"cpu", "disk"}
    assert sum(device_map_summary(mapped).values()) == _total_bytes(whole)
    assert torch.equal(_logits(mapped), _logits(whole))


def test_an_moe_checkpoint_missing_its_router_is_refused_before_loading(mixtral, tmp_path):
    directory, _ = mixtral
    broken = _weights_only_dir(directory, tmp_path / "broken", drop="model.layers.1.block_sparse_moe.gate.weight")
    with pytest.raises(ConfigError, match=r"lacks 1 weights .*model\.layers\.1\.mlp\.gate\.weight"):
        load_device_mapped(broken, {"cpu": MIXTRAL_CPU}, offload_dir=tmp_path / "offload")
    assert not (tmp_path / "offload").exists()


def test_an_moe_architecture_that_cannot_be_mapped_is_refused_in_one_line(tmp_path):
    # gpt-oss's attention (learned sinks) has no sdpa implementation, which device-mapped layers compute with.
    config = AutoConfig.for_model("gpt_oss", **TINY_GQA_LLAMA, num_local_experts=4, num_experts_per_tok=2, head_dim=16)
    config.save_pretrained(tmp_path)
    save_file({"lm_head.weight": torch.zeros(1)}, tmp_path / "model.safetensors")  # refused before it is read
    with pytest.raises(ConfigError, match="GptOssForCausalLM does not support an attention implementation") as error:
        load_device_mapped(tmp_path, {"cpu": "1MB"}, offload_dir=tmp_path / "offload")
    assert "\n" not in str(error.value)
    assert not (tmp_path / "offload").exists()


def test_an_moe_checkpoint_missing_one_experts_tensor_is_refused_before_loading(mixtral, tmp_path):
    # transformers would stack the three remaining experts' w1 into gate_up_proj without a word.
    directory, _ = mixtral
    dropped = "model.layers.1.block_sparse_moe.experts.2.w1.weight"
    broken = _weights_only_dir(directory, tmp_path / "broken", drop=dropped)
    with pytest.raises(ConfigError, match=r"lacks 1 weights .*model\.layers\.1\.mlp\.experts\.gate_up_proj"):
        load_device_mapped(broken, {"cpu": MIXTRAL_CPU}, offload_dir=tmp_path / "offload")
    assert not (tmp_path / "offload").exists()


def test_a_complete_moe_copy_loads(mixtral, tmp_path):
    # The control for the two tests above.
    copy = _weights_only_dir(mixtral[0], tmp_path / "copy")
    assert torch.equal(_logits(load_device_mapped(copy, {"cpu": "1GiB"})), _logits(mixtral[1]))


@pytest.mark.slow  # a real two-process expert-parallel run
def test_an_expert_parallel_runs_export_device_maps_with_its_logits(tmp_path):
    from support import train, write_experiment
    from test_tui_fixtures import TINY_MIXTRAL

    experiment = write_experiment(tmp_path, {"model": {"config": TINY_MIXTRAL}, "train": {"steps": 2, "save_hf": True}})
    exported = train(experiment, tmp_path / "run", "--nproc", "2", "--layout", "dp_shard=2,ep=2").path / "hf"
    whole = AutoModelForCausalLM.from_pretrained(exported, dtype=torch.float32, attn_implementation="sdpa").eval()
    mapped = load_device_mapped(exported, {"cpu": _total_bytes(whole) // 2}, offload_dir=tmp_path / "offload")
    assert "disk" in mapped.hf_device_map.values()
    assert torch.equal(_logits(mapped), _logits(whole))
    # The benchmark names a device-mapped model by the hash of its weights, offloaded fused experts included.
    from evalsuite.models import weights_hash

    assert weights_hash(mapped, exported) == weights_hash(whole)
