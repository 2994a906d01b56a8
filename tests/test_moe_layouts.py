"""Mixture-of-experts models (transformers' own Qwen3-MoE, Mixtral and Qwen2-MoE classes) trained by the trainer
give one process's per-step losses, router auxiliary losses, gradient norms and expert loads under expert
parallelism (ep, borrowed from dp_shard x cp) alone and with FSDP2, HSDP, TP, PP and CP, and under the dense
layouts with ep=1; packed and unpacked. Each layout takes the step's rows in one micro-batch round (micro_batch =
rows / data-parallel degree) or in the one-process run's rounds: the load-balancing loss is the model's per forward
pass, over every rank's tokens of that round (trainer.rank.step). What the trainer cannot run is refused before
launch, in one line.

The negative control for the dispatch itself (one token sent to the wrong rank fails equality) is in
tests/test_expert_parallel.py."""

from __future__ import annotations

import pytest
import torch
from support import TINY_EXPERIMENT, meshpilot, train, write_experiment

from trainer.rank.loop import load_run

STEPS = 3
ROWS = TINY_EXPERIMENT["train"]["global_batch_tokens"] // TINY_EXPERIMENT["data"]["seq_len"]  # 8 rows a step
COMMON = {
    "vocab_size": 512,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 128,
    "num_experts_per_tok": 2,
    "initializer_range": 0.1,  # the experts' share of the output well above rounding
    "router_aux_loss_coef": 0.1,  # the auxiliary loss shows in the gradients
}
MODELS = {
    "qwen3_moe": {**COMMON, "model_type": "qwen3_moe", "num_experts": 4, "moe_intermediate_size": 16},
    "mixtral": {**COMMON, "model_type": "mixtral", "num_local_experts": 4, "intermediate_size": 16},
    "qwen2_moe": {  # a shared expert beside the routed ones
        **COMMON,
        "model_type": "qwen2_moe",
        "num_experts": 4,
        "moe_intermediate_size": 16,
        "shared_expert_intermediate_size": 32,
    },
}
# layout: (processes, data-parallel degree); Qwen3-MoE, packed rows.
LAYOUTS = {
    "dp_shard=2,ep=2": (2, 2),  # ep with FSDP2: each rank two experts
    "tp=2": (2, 1),  # ep=1, experts whole on both tensor-parallel ranks
    "dp_replicate=2": (2, 2),  # ep=1 under DDP
}
SLOW_LAYOUTS = {
    "dp_shard=4,ep=2": (4, 4),  # experts also FSDP-sharded over the two ranks holding the same ones
    "dp_replicate=2,dp_shard=2,ep=2": (4, 4),  # HSDP
    "dp_shard=2,tp=2,ep=2": (4, 2),
    "dp_shard=2,cp=2,ep=4": (4, 2),  # ep drawn from dp_shard x cp
    "cp=2": (2, 1),
}
# ep=1 under FSDP2 (experts sharded with their layer): tests/test_moe_checkpoint.py resumes onto dp_shard=2.


def experiment_for(tmp_path_factory, model: str, packing: bool = True):
    changes = {"model": {"config": MODELS[model]}, "data": {"packing": packing}, "train": {"steps": STEPS}}
    return write_experiment(tmp_path_factory.mktemp(f"moe-{model}-{packing}"), changes)


def run_layout(experiment, layout: str | None, nproc: int, dp: int, *more: str):
    name = (layout or "single").replace(",", "_").replace("=", "") + "".join(more).replace("=", "")[-12:]
    args = ["--nproc", str(nproc), "--set", f"train.micro_batch={ROWS // dp}", *more]
    return train(experiment, experiment.parent / name, *args, *(["--layout", layout] if layout else []))


def assert_same_steps(reference, run, label: str, rel: float = 1e-5, padding_routed_alike: bool = True) -> None:
    """`padding_routed_alike` False: padding tokens (routed and counted, never in a loss) may reach other experts,
    their hidden states being whatever the layout's attention made of them; the loss, auxiliary loss and gradient
    norm must still be equal, and every (token, expert) pair counted."""
    expected, got = reference.read_steps(), run.read_steps()
    assert len(got) == len(expected) == STEPS
    for a, b in zip(expected, got, strict=True):
        assert (b["tokens"], b["target_tokens"]) == (a["tokens"], a["target_tokens"]), label
        assert b["loss"] == pytest.approx(a["loss"], rel=rel), label
        assert b["aux_loss"] == pytest.approx(a["aux_loss"], rel=rel), label
        assert b["grad_norm"] == pytest.approx(a["grad_norm"], rel=10 * rel), label
        if not padding_routed_alike:
            assert sum(b["expert_tokens"]) == sum(a["expert_tokens"]), label
            continue
        assert b["expert_tokens"] == a["expert_tokens"], label
        assert b["expert_load_max_over_mean"] == a["expert_load_max_over_mean"], label


@pytest.fixture(scope="module")
def qwen3(tmp_path_factory):
    experiment = experiment_for(tmp_path_factory, "qwen3_moe")
    return experiment, run_layout(experiment, None, 1, 1)


def test_reference_records_the_router(qwen3):
    """The one-process reference itself: an auxiliary loss near its balanced value (1.0 x top-k for softmax
    routing over uniform experts... here 2 chosen of 4) and every (token, expert) pair counted once."""
    steps = qwen3[1].read_steps()
    for step in steps:
        pairs = step["tokens"] * MODELS["qwen3_moe"]["num_experts_per_tok"] * MODELS["qwen3_moe"]["num_hidden_layers"]
        assert sum(step["expert_tokens"]) == pairs
        assert len(step["expert_tokens"]) == MODELS["qwen3_moe"]["num_experts"]
        assert step["expert_load_max_over_mean"] >= 1.0
        assert 1.0 < step["aux_loss"] < 4.0
    assert load_run(qwen3[1])[0].train.experts == "loop"  # chosen before launch and recorded, as the attention


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_grouped_gemm_experts_on_cuda(tmp_path_factory):
    """bf16 on CUDA picks torch's grouped GEMM for the experts, records it, and trains near the loop's losses (the
    sizes here are 16-byte aligned in bf16)."""
    experiment = experiment_for(tmp_path_factory, "qwen3_moe")
    cuda = ["--set", "hardware.device_type=cuda", "--set", "train.precision=bf16"]
    grouped = train(experiment, experiment.parent / "grouped", "--nproc", "1", *cuda)
    looped = train(experiment, experiment.parent / "looped", "--nproc", "1", *cuda, "--set", "train.experts=loop")
    assert load_run(grouped)[0].train.experts == "grouped_mm"
    for a, b in zip(looped.read_steps(), grouped.read_steps(), strict=True):
        # What each step ran, in the message: a failure cut short on a GPU machine must say which figure parted.
        seen = f"step {b['step']}: loss {b['loss']} / {a['loss']}, experts {b['expert_tokens']} / {a['expert_tokens']}"
        assert b["loss"] == pytest.approx(a["loss"], rel=2e-2), seen
        assert b["expert_tokens"] == a["expert_tokens"] or b["step"] > 1, seen  # bf16 may route later steps otherwise


@pytest.mark.slow
@pytest.mark.parametrize("layout", LAYOUTS)
def test_moe_layout_matches_single_process(qwen3, layout):
    experiment, reference = qwen3
    run = run_layout(experiment, layout, *LAYOUTS[layout])
    assert_same_steps(reference, run, layout)
    degrees = {k: v for k, v in run.read_metrics()["layout"].items() if v != 1}
    assert degrees == {name: int(d) for name, d in (part.split("=") for part in layout.split(","))}


@pytest.mark.slow
def test_fewer_experts_than_their_fsdp_ranks_match_single_process(tmp_path_factory):
    """Two experts, ep=2 over dp_shard=4: each ep rank's one expert is split by FSDP2 on its next dimension over the
    two ranks that hold it (trainer.parallel.data_parallel.expert_shard_dim), not left whole on one of them."""
    changes = {"model": {"config": {**MODELS["qwen3_moe"], "num_experts": 2}}, "train": {"steps": STEPS}}
    experiment = write_experiment(tmp_path_factory.mktemp("moe-two-experts"), changes)
    reference = run_layout(experiment, None, 1, 1)
    assert_same_steps(reference, run_layout(experiment, "dp_shard=4,ep=2", 4, 4), "experts split on dim 1")


@pytest.mark.slow
@pytest.mark.parametrize("layout", SLOW_LAYOUTS)
def test_more_moe_layouts_match_single_process(qwen3, layout):
    experiment, reference = qwen3
    assert_same_steps(reference, run_layout(experiment, layout, *SLOW_LAYOUTS[layout]), layout)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["full"])
def test_activation_checkpointing_under_expert_parallel(qwen3, mode):
    """The recomputed forward inside the backward routes again: its logits and counts must not count twice."""
    experiment, reference = qwen3
    more = ("--set", f"train.activation_checkpointing={mode}")
    assert_same_steps(reference, run_layout(experiment, "dp_shard=2,ep=2", 2, 2, *more), mode)


@pytest.mark.slow
def test_compiled_layers_with_experts_whole(qwen3):
    """train.compile under FSDP2 with ep=1: each decoder layer compiled, the experts' dispatch inside it."""
    experiment, reference = qwen3
    run = run_layout(experiment, "dp_shard=2", 2, 2, "--set", "train.compile=true")
    assert_same_steps(reference, run, "compiled")


@pytest.fixture(scope="module")
def qwen3_two_rounds(tmp_path_factory):
    """One process taking each step's rows in two micro-batches of 4 (two rounds, two auxiliary losses)."""
    experiment = experiment_for(tmp_path_factory, "qwen3_moe")
    return experiment, run_layout(experiment, None, 1, 2)


@pytest.mark.slow
def test_accumulated_micro_batches_under_expert_parallel(qwen3_two_rounds):
    """Two micro-batch rounds a step, each with its own auxiliary loss, averaged: cp=2,ep=2 splits sequences, not
    rows, so its rounds hold the one-process run's rows and must give its losses."""
    experiment, reference = qwen3_two_rounds
    assert_same_steps(reference, run_layout(experiment, "cp=2,ep=2", 2, 2), "accumulated")


@pytest.mark.slow
@pytest.mark.parametrize(("layout", "nproc"), [("pp=2", 2), ("pp=2,cp=2,ep=2", 4), ("pp=2,tp=2", 4)])
def test_pipeline_matches_single_process(qwen3_two_rounds, layout, nproc):
    """pp=2 under 1F1B, two micro-batches in flight: each stage sees one of the two MoE layers, yet the
    load-balancing loss is the whole model's (the stages pass their router sums on to the last,
    trainer.parallel.pipeline), with one process's losses, gradient norms and expert loads; with cp, each stage
    sums its share of the rows' tokens (ep drawn from cp) and the last adds the cp ranks' sums."""
    experiment, reference = qwen3_two_rounds
    assert_same_steps(reference, run_layout(experiment, layout, nproc, 2), layout)


@pytest.mark.slow
def test_interleaved_pipeline_matches_single_process(tmp_path_factory):
    """Interleaved 1F1B, two stages on each of two ranks (4 layers): router sums also pass between a rank's own
    stages."""
    model = {**MODELS["qwen3_moe"], "num_hidden_layers": 4}
    changes = {"model": {"config": model}, "train": {"steps": STEPS}}
    experiment = write_experiment(tmp_path_factory.mktemp("moe-interleaved"), changes)
    reference = run_layout(experiment, None, 1, 2)  # two rounds of 4 rows, as the pipeline's micro-batches
    schedule = ("--set", "train.pp_schedule=interleaved_1f1b", "--set", "train.pp_stages_per_rank=2")
    assert_same_steps(reference, run_layout(experiment, "pp=2", 2, 2, *schedule), "interleaved")


@pytest.mark.slow
def test_pipeline_with_expert_parallel_matches_single_process(qwen3):
    """pp=2 with FSDP2 and ep=2 inside each stage (GPipe, one micro-batch per data-parallel rank, so that its
    round holds the one-process run's rows): the router sums cross stages and data-parallel ranks."""
    experiment, reference = qwen3
    run = run_layout(experiment, "pp=2,dp_shard=2,ep=2", 4, 2, "--set", "train.pp_schedule=gpipe")
    assert_same_steps(reference, run, "pp=2,dp_shard=2,ep=2")


@pytest.fixture(scope="module")
def other_models(tmp_path_factory):
    """model -> (experiment, one-process reference), each trained once."""
    made = {}

    def made_for(model: str):
        if model not in made:
            experiment = experiment_for(tmp_path_factory, model)
            made[model] = experiment, run_layout(experiment, None, 1, 1)
        return made[model]

    return made_for


@pytest.mark.slow
@pytest.mark.parametrize(
    ("model", "layout"),
    [("mixtral", ("dp_shard=2,ep=2", 2, 2)), ("qwen2_moe", ("dp_shard=2,ep=2", 2, 2)), ("qwen2_moe", ("tp=2", 2, 1))],
    ids=["mixtral-ep", "qwen2_moe-ep", "qwen2_moe-tp"],
)
def test_other_moe_models(other_models, model, layout):
    """Mixtral; Qwen2-MoE, whose shared expert (an MLP the model's tp plan names no pattern for:
    layers.*.mlp.gate_proj does not match layers.*.mlp.shared_expert.gate_proj) runs whole on every tp rank with
    the rest of the sparse block, on the gathered sequence."""
    experiment, reference = other_models(model)
    assert_same_steps(reference, run_layout(experiment, *layout), f"{model} {layout[0]}")


@pytest.mark.slow
def test_unpacked_expert_parallel_matches_single_process(tmp_path_factory):
    """Padded rows: padding is routed and computed by the experts (counted in expert_tokens) but left out of the
    auxiliary loss, as the model's attention_mask leaves it out."""
    experiment = experiment_for(tmp_path_factory, "qwen3_moe", packing=False)
    reference = run_layout(experiment, None, 1, 1)
    assert all(step["tokens"] < TINY_EXPERIMENT["train"]["global_batch_tokens"] for step in reference.read_steps())
    assert_same_steps(reference, run_layout(experiment, "dp_shard=2,ep=2", 2, 2), "unpacked")


@pytest.fixture(scope="module")
def unpacked_two_rounds(tmp_path_factory):
    experiment = experiment_for(tmp_path_factory, "qwen3_moe", packing=False)
    return experiment, run_layout(experiment, None, 1, 2)


@pytest.mark.slow
@pytest.mark.parametrize(("layout", "nproc"), [("pp=2", 2), ("pp=2,cp=2", 4)])
def test_unpacked_pipeline_matches_single_process(unpacked_two_rounds, layout, nproc):
    """Padded rows through pipelines: each stage leaves padding out of its router sums (over its cp share under
    cp). The padding itself is routed by hidden states no loss reads, which differ from one process's: the stages
    number the padding's positions from where it starts (from the segment ids), one process continues the row's,
    and cp masks it its own way (cp=2 alone routes padding differently too), so only the total of the expert
    counts is compared."""
    experiment, reference = unpacked_two_rounds
    run = run_layout(experiment, layout, nproc, 2)
    assert_same_steps(reference, run, f"unpacked {layout}", padding_routed_alike=False)


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_expert_parallel_over_nccl(qwen3):
    """The all-to-all dispatch over NCCL (fp32): the CPU reference's losses and expert loads."""
    experiment, reference = qwen3
    cuda = ("--set", "hardware.device_type=cuda")
    assert_same_steps(reference, run_layout(experiment, "dp_shard=2,ep=2", 2, 2, *cuda), "nccl", rel=1e-4)


def test_planner_runs_moe_pipelines_as_the_launcher_does():
    """The planner asks the launcher's own check (trainer.model.moe.check_moe): Mixtral-8x7B's pipelines, ep inside
    them too, are layouts the built-in trainer runs."""
    from transformers import AutoConfig

    from trainer.costs.planner import plan
    from trainer.hardware import Hardware
    from trainer.model.presets import MODELS, preset_experiment

    config = AutoConfig.for_model(**MODELS["mixtral-8x7b"][1])
    hardware = Hardware("cuda", "NVIDIA H100 80GB HBM3", devices_per_node=8, nodes=2)
    candidates = plan(preset_experiment("mixtral-8x7b", 16), config, hardware, 79 * 1024**3, 4096)
    piped = [c for c in candidates if c.layout.pp > 1 and c.layout.ep > 1]
    assert piped and all(c.runnable and not any("built-in trainer" in n for n in c.notes) for c in piped)


@pytest.mark.parametrize(
    ("changes", "args", "message"),
    [
        ({}, ["--nproc", "2", "--layout", "dp_shard=2,ep=3"], "layout ep=3 must divide dp_shard*cp=2"),
        ({}, ["--nproc", "4", "--layout", "dp_shard=4,ep=4", "--set", "model.config.num_experts=6"],
         "layout ep=4 must divide the model's expert count (6)"),
        ({"train": {"compile": True}}, ["--nproc", "2", "--layout", "dp_shard=2,ep=2"], "train.compile with ep=2"),
        ({"train": {"experts": "grouped_mm"}}, ["--nproc", "1"], "train.experts grouped_mm cannot run here"),
        ({"model": {"config": {"model_type": "olmoe", "num_experts": 4, "intermediate_size": 16}}}, ["--nproc", "1"],
         "olmoe is a mixture-of-experts model meshpilot cannot train yet"),
    ],
)  # fmt: skip
def test_refused_before_launch_in_one_line(tmp_path, changes, args, message):
    model = dict(MODELS["qwen3_moe"])
    if "model" in changes:
        model = {k: v for k, v in model.items() if k not in ("num_experts", "moe_intermediate_size")}
        model.update(changes["model"]["config"])
    experiment = write_experiment(tmp_path, {"model": {"config": model}, **{k: v for k, v in changes.items()
                                                                           if k != "model"}})  # fmt: skip
    done = meshpilot("train", str(experiment), "--out", str(tmp_path / "run"), *args)
    assert done.returncode == 2, done.stderr
    # transformers may warn about a tiny config's defaults (a token id beyond the vocabulary) on lines of its own
    [error] = [line for line in done.stderr.splitlines() if not line.startswith("[transformers]")]
    assert error.startswith("meshpilot: error: ") and message in error
    assert not (tmp_path / "run").exists()
