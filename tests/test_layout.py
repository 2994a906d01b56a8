"""Layout parsing, resolution against the world size, and the degrees the trainer supports (no mesh is built)."""

from __future__ import annotations

import pytest

from trainer.layout import MESH_DIMS, Layout, LayoutError, check_layout_for_model, layout_family

NAMES = "pp, dp_replicate, dp_shard, cp, tp, ep"


# --- parse ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("dp_replicate=2", Layout(dp_replicate=2, dp_shard=1, tp=1, cp=1, pp=1)),
        ("tp=2", Layout(dp_replicate=1, tp=2)),
        ("dp_replicate=2,tp=2", Layout(dp_replicate=2, tp=2)),
        (" dp_shard=4 , cp=2 ,", Layout(dp_replicate=1, dp_shard=4, cp=2)),
        ("pp=3", Layout(dp_replicate=1, pp=3)),
        ("dp_replicate=-1,tp=2", Layout(dp_replicate=-1, tp=2)),
        ("", Layout(dp_replicate=-1)),
        ("dp_shard=4,ep=2", Layout(dp_replicate=1, dp_shard=4, ep=2)),
    ],
)
def test_parse(text, expected):
    assert Layout.parse(text) == expected


def test_parse_tp_alone_means_no_data_parallel():
    layout = Layout.parse("tp=2")
    assert layout.dp_replicate == 1
    assert layout.degrees() == {"pp": 1, "dp_replicate": 1, "dp_shard": 1, "cp": 1, "tp": 2}


@pytest.mark.parametrize("part", ["ep2=2", "dp=2", "tp", "TP=2"])
def test_parse_unknown_names(part):
    with pytest.raises(LayoutError) as excinfo:
        Layout.parse(f"dp_replicate=1,{part}")
    assert str(excinfo.value) == f"--layout expects name=degree with names {NAMES}; got {part!r}"


@pytest.mark.parametrize(
    ("text", "name", "value"), [("tp=two", "tp", "two"), ("dp_replicate=1.5", "dp_replicate", "1.5")]
)
def test_parse_non_integer(text, name, value):
    with pytest.raises(LayoutError) as excinfo:
        Layout.parse(text)
    assert str(excinfo.value) == f"--layout {name}: degree must be an integer, got {value!r}"


def test_layout_error_is_a_value_error():
    assert issubclass(LayoutError, ValueError)


# --- resolve --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("layout", "world", "dp_replicate"),
    [(Layout(), 1, 1), (Layout(), 4, 4), (Layout(tp=2), 8, 4), (Layout(pp=2, tp=2), 4, 1), (Layout(dp_shard=3), 6, 2)],
)
def test_resolve_fills_dp_replicate(layout, world, dp_replicate):
    resolved = layout.resolve(world)
    assert resolved.dp_replicate == dp_replicate
    assert resolved.world_size == world
    assert layout.dp_replicate == -1  # frozen: resolve returns a new layout
    assert {k: v for k, v in resolved.degrees().items() if k != "dp_replicate"} == {
        k: v for k, v in layout.degrees().items() if k != "dp_replicate"
    }


def test_resolve_keeps_explicit_degrees():
    layout = Layout(dp_replicate=2, tp=2)
    assert layout.resolve(4) == layout


@pytest.mark.parametrize(
    ("layout", "world", "message"),
    [
        (Layout(dp_replicate=3), 2, "layout dp_replicate=3 multiplies to 3, but 2 processes run"),
        (Layout(dp_replicate=2, tp=2), 8, "layout dp_replicate=2,tp=2 multiplies to 4, but 8 processes run"),
        (Layout(dp_replicate=1), 4, "layout dp_replicate=1 multiplies to 1, but 4 processes run"),
        (Layout(dp_replicate=1, pp=2, cp=2), 2, "layout pp=2,cp=2 multiplies to 4, but 2 processes run"),
    ],
)
def test_resolve_product_mismatch(layout, world, message):
    with pytest.raises(LayoutError) as excinfo:
        layout.resolve(world)
    assert str(excinfo.value) == message


@pytest.mark.parametrize(
    ("layout", "bad"),
    [
        (Layout(tp=0), "tp=0"),
        (Layout(dp_replicate=0), "dp_replicate=0"),
        (Layout(dp_replicate=-2), "dp_replicate=-2"),
        (Layout(pp=-1), "pp=-1"),
        (Layout(dp_shard=-3), "dp_shard=-3"),
        (Layout(cp=0, tp=0), "cp=0"),
    ],
)
def test_resolve_non_positive_degree(layout, bad):
    with pytest.raises(LayoutError) as excinfo:
        layout.resolve(4)
    assert str(excinfo.value) == f"layout {bad}: degrees must be positive integers"


@pytest.mark.parametrize(
    ("layout", "world", "others"), [(Layout(tp=3), 4, 3), (Layout(pp=2, tp=2), 6, 4), (Layout(dp_shard=5), 2, 5)]
)
def test_resolve_not_divisible(layout, world, others):
    with pytest.raises(LayoutError) as excinfo:
        layout.resolve(world)
    assert str(excinfo.value) == f"layout pp*dp_shard*cp*tp={others} does not divide the world size {world}"


# --- degrees, describe, support ---------------------------------------------------------------------------------------


def test_degrees_order_and_values():
    layout = Layout(dp_replicate=2, dp_shard=3, tp=4, cp=5, pp=6)
    assert list(layout.degrees()) == list(MESH_DIMS) == ["pp", "dp_replicate", "dp_shard", "cp", "tp"]
    assert layout.degrees() == {"pp": 6, "dp_replicate": 2, "dp_shard": 3, "cp": 5, "tp": 4}
    assert layout.world_size == 720
    assert layout.dp_degree == 6


@pytest.mark.parametrize(
    ("layout", "text"),
    [
        (Layout(dp_replicate=1), "one process"),
        (Layout(dp_replicate=4), "dp_replicate=4"),
        (Layout(dp_replicate=2, tp=2, pp=2), "pp=2,dp_replicate=2,tp=2"),
        (Layout(), "dp_replicate=-1"),
    ],
)
def test_describe(layout, text):
    assert layout.describe() == text


def test_check_supported_accepts_data_parallel_sharding_and_tensor_parallel():
    Layout(dp_replicate=8).check_supported()
    Layout(dp_replicate=1).check_supported()
    Layout.parse("dp_replicate=2,dp_shard=2,tp=2").resolve(8).check_supported()


def test_check_supported_accepts_context_parallel():
    Layout(dp_replicate=1, cp=2).check_supported()
    Layout.parse("pp=2,dp_shard=2,cp=2,tp=2").resolve(16).check_supported()


# --- expert parallelism: borrowed from dp_shard x cp -----------------------------------------------------------------


def test_ep_borrows_ranks_instead_of_multiplying_the_world():
    layout = Layout.parse("dp_shard=4,ep=2").resolve(4)
    assert layout.world_size == 4
    assert layout.argument() == layout.describe() == "dp_shard=4,ep=2"
    assert Layout.parse(layout.argument()) == layout
    assert layout.degrees() == {"pp": 1, "dp_replicate": 1, "dp_shard": 4, "cp": 1, "tp": 1, "ep": 2}
    assert (layout.shard_degree, layout.expert_shard_degree) == (4, 2)
    assert layout_family(layout.degrees()) == "FSDP+EP"
    assert Layout.parse("dp_shard=2,cp=2,ep=4").resolve(4).expert_shard_degree == 1


def test_dense_degrees_name_no_ep():
    """Records written before ep existed (metrics.json's layout) read back to the same degrees."""
    assert "ep" not in Layout.parse("dp_shard=2").resolve(2).degrees()


@pytest.mark.parametrize(
    ("text", "world", "message"),
    [
        ("dp_shard=4,ep=3", 4, "layout ep=3 must divide dp_shard*cp=4"),
        ("dp_replicate=2,ep=2", 2, "layout ep=2 must divide dp_shard*cp=1"),
        ("dp_shard=2,ep=0", 2, "layout ep=0: degrees must be positive integers"),
    ],
)
def test_ep_that_does_not_divide_its_ranks_is_refused(text, world, message):
    with pytest.raises(LayoutError) as excinfo:
        Layout.parse(text).resolve(world)
    assert str(excinfo.value).startswith(message)
    assert "\n" not in str(excinfo.value)


def test_ep_against_the_model():
    from transformers import LlamaConfig, Qwen3MoeConfig

    moe = Qwen3MoeConfig(num_experts=6)
    check_layout_for_model(Layout.parse("dp_shard=3,ep=3").resolve(3), moe)
    with pytest.raises(LayoutError, match=r"^layout ep=4 must divide the model's expert count \(6\)$"):
        check_layout_for_model(Layout.parse("dp_shard=4,ep=4").resolve(4), moe)
    with pytest.raises(LayoutError, match=r"^layout ep=2: llama has no experts to shard \(a dense model\)$"):
        check_layout_for_model(Layout.parse("dp_shard=2,ep=2").resolve(2), LlamaConfig())


def test_tp_checks_only_the_sizes_it_splits():
    """tp splits the attention heads and dense MLPs: an MoE layer's experts and shared expert stay whole, so their
    sizes need not divide; an MoE model's dense layers (mlp_only_layers) are split by intermediate_size."""
    from transformers import MixtralConfig, Qwen2MoeConfig, Qwen3MoeConfig

    tp2 = Layout.parse("tp=2").resolve(2)
    heads = {"num_attention_heads": 4, "num_key_value_heads": 2}
    check_layout_for_model(tp2, Qwen3MoeConfig(**heads, intermediate_size=15, moe_intermediate_size=15))
    check_layout_for_model(tp2, MixtralConfig(**heads, intermediate_size=15))
    check_layout_for_model(tp2, Qwen2MoeConfig(**heads, intermediate_size=15, shared_expert_intermediate_size=15))
    with pytest.raises(LayoutError, match=r"^layout tp=2 must divide the model's intermediate_size \(15\)$"):
        check_layout_for_model(tp2, Qwen3MoeConfig(**heads, intermediate_size=15, mlp_only_layers=[0]))
