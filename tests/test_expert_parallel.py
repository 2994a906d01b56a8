"""Expert parallelism (trainer/parallel/expert_parallel.py) on transformers' own MoE classes, in real gloo processes:
tiny Qwen3-MoE, Mixtral and Qwen2-MoE (shared experts) trained for 3 AdamW steps on a global batch split over 2 or 4
ranks with ep=2 or ep=4 give one process's per-step losses (language model plus the router's load-balancing loss
with the config's coefficient) and first-step logits; so does a router biased so that one expert takes most tokens;
a dispatch that sends one token to the wrong rank does not.

This file is also the ranks' program: `python -m torch.distributed.run --nproc-per-node N
tests/test_expert_parallel.py OUT CASES` runs CASES (a JSON list) on every rank; rank 0 writes the results to OUT.
Every rank also computes the one-process reference on the whole batch (the models are tiny)."""

from __future__ import annotations

import copy
import json
import os
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F
from helpers import forked_ranks
from support import expert_groups
from transformers import AutoConfig, AutoModelForCausalLM

from trainer.model.moe import RouterLogits
from trainer.parallel.expert_parallel import (
    ExpertParallelError,
    apply_expert_parallel,
    choose_expert_kernel,
    expert_load,
    router_losses,
)
from trainer.rank.step import _router_loss, forward_backward, token_loss_sum

COMMON = {
    "vocab_size": 128,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 64,
    "initializer_range": 0.1,  # large enough that the experts' share of the logits is well above rounding
    "num_experts_per_tok": 2,
    "router_aux_loss_coef": 0.1,  # large enough that the auxiliary loss shows in the per-step losses
}
MODELS = {
    "qwen3_moe": {**COMMON, "model_type": "qwen3_moe", "head_dim": 8, "num_experts": 8, "moe_intermediate_size": 16},
    "mixtral": {**COMMON, "model_type": "mixtral", "num_local_experts": 8, "intermediate_size": 16},
    "qwen2_moe": {  # shared expert beside the routed ones
        **COMMON,
        "model_type": "qwen2_moe",
        "num_experts": 8,
        "moe_intermediate_size": 16,
        "shared_expert_intermediate_size": 32,
    },
    "deepseek_v3": {  # shared expert, sigmoid group-limited routing, no auxiliary loss (bias-balanced)
        **{key: value for key, value in COMMON.items() if key != "router_aux_loss_coef"},
        "model_type": "deepseek_v3",
        "num_key_value_heads": 4,  # multi-head latent attention: as many key-value heads as query heads
        "n_routed_experts": 8,
        "n_shared_experts": 1,
        "moe_intermediate_size": 16,
        "intermediate_size": 32,
        "first_k_dense_replace": 0,
        "n_group": 1,
        "topk_group": 1,
        "q_lora_rank": None,
        "kv_lora_rank": 16,
        "qk_rope_head_dim": 8,
        "qk_nope_head_dim": 8,
        "v_head_dim": 8,
    },
    "gpt_oss": {  # expert biases, transposed and interleaved gate/up weights, its own clamped gate
        **COMMON,
        "model_type": "gpt_oss",
        "num_local_experts": 8,
        "intermediate_size": 16,
        "head_dim": 8,
    },
}
REPO = Path(__file__).resolve().parents[1]
ROWS, SEQ, STEPS = 4, 16, 3
TOLERANCE = 1e-5


def token_batch(seed: int = 0) -> torch.Tensor:
    return torch.randint(0, COMMON["vocab_size"], (ROWS, SEQ + 1), generator=torch.Generator().manual_seed(seed))


def build(model: str) -> torch.nn.Module:
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(AutoConfig.for_model(**MODELS[model]), attn_implementation="eager")


def bias_router(model: torch.nn.Module, bias: dict[str, float]) -> None:
    """Add bias {expert: logit} to every router's logits (test hook): {0: 4} makes nearly every token take expert 0
    among its top 2; {0: 9, 1: 9} sends every token to experts 0 and 1, both on ep rank 0, leaving rank 1 idle."""

    def biased(router, args, output):
        logits = output[0].clone()
        for expert, logit in bias.items():
            logits[:, int(expert)] += logit
        top, chosen = torch.topk(torch.softmax(logits.float(), dim=-1), router.top_k, dim=-1)
        if getattr(router, "norm_topk_prob", True):
            top = top / top.sum(dim=-1, keepdim=True)
        return logits, top.to(output[1].dtype), chosen

    for module in model.modules():
        if type(module).__name__.endswith("TopKRouter"):
            module.register_forward_hook(biased)


def misroute_one_token(experts: torch.nn.Module, local_experts: int) -> None:
    """Negative control: the first (token, expert) pair bound for an expert of ep rank 0 goes to rank 1's first
    expert instead (its routing weight kept), on every forward."""

    def misrouted(module, args):
        hidden_states, top_k_index, top_k_weights = args
        top_k_index = top_k_index.clone()
        flat = top_k_index.view(-1)
        to_rank_0 = (flat < local_experts).nonzero()
        if len(to_rank_0):
            flat[to_rank_0[0, 0]] = local_experts
        return hidden_states, top_k_index, top_k_weights

    experts.register_forward_pre_hook(misrouted)


def average_gradients(model: torch.nn.Module, plan, replicate: dist.ProcessGroup) -> None:
    """Average the gradients over the data-parallel ranks, as DDP/FSDP do for a loss scaled by the data-parallel
    degree: dense parameters are summed over every rank, expert parameters over the ranks holding the same
    experts (their tokens' gradients already arrived through the all-to-all), both divided by the world size.
    The plain-data-parallel form of what the trainer does with FSDP2 (trainer.parallel.data_parallel.apply_fsdp)."""
    world = dist.get_world_size()
    expert_ids = {id(p) for name in plan.shards for p in model.get_submodule(name).parameters()}
    for parameter in model.parameters():
        if parameter.grad is None:
            continue
        dist.all_reduce(parameter.grad, group=replicate if id(parameter) in expert_ids else None)
        parameter.grad /= world


def train(model, tokens: torch.Tensor, plan=None, replicate=None, data_group=None) -> dict:
    """STEPS AdamW steps on `tokens` (this rank's rows): the language-model loss summed over tokens and scaled
    by world / all tokens as the trainer scales it, plus the router losses; per-step whole-batch losses and the
    first forward's logits."""
    world = dist.get_world_size(data_group) if data_group is not None else 1
    all_tokens = ROWS * SEQ
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses, auxes, first_logits = [], [], None
    for _ in range(STEPS):
        out = model(input_ids=tokens[:, :-1], output_router_logits=True)
        first_logits = out.logits.detach() if first_logits is None else first_logits
        token_loss = F.cross_entropy(out.logits.flatten(0, 1), tokens[:, 1:].flatten(), reduction="sum")
        router = router_losses(model.config, out.router_logits, group=data_group)
        (token_loss * world / all_tokens + router.total).backward()
        if plan is not None:
            average_gradients(model, plan, replicate)
        optimizer.step()
        optimizer.zero_grad()
        summed = token_loss.detach().clone()
        if data_group is not None:
            dist.all_reduce(summed, group=data_group)
        losses.append(float(summed / all_tokens + router.total.detach()))
        auxes.append(float(router.aux_loss.detach()))
    return {"losses": losses, "aux": auxes, "logits": first_logits}


def run_case(case: dict) -> dict:
    """One case on every rank; the comparison with the reference, as rank 0 reports it."""
    rank, world = dist.get_rank(), dist.get_world_size()
    tokens = token_batch()
    reference_model = build(case["model"])
    model = copy.deepcopy(reference_model)
    if "bias" in case:
        bias_router(reference_model, case["bias"])
        bias_router(model, case["bias"])
    reference = train(reference_model, tokens)
    ep_group, replicate = expert_groups(case["ep"])
    plan = apply_expert_parallel(model, ep_group)
    if case.get("misroute") and rank == 0:
        name, shard = next(iter(plan.shards.items()))
        misroute_one_token(model.get_submodule(name), shard.local_experts)
    rows = ROWS // world
    mine = slice(rank * rows, (rank + 1) * rows)
    got = train(model, tokens[mine], plan, replicate, dist.group.WORLD)
    logits_diff = ((got["logits"] - reference["logits"][mine]).abs().max() / reference["logits"].abs().max()).view(1)
    dist.all_reduce(logits_diff, op=dist.ReduceOp.MAX)
    load = expert_load(plan, dist.group.WORLD)
    return {
        "reference": reference["losses"],
        "losses": got["losses"],
        "reference_aux": reference["aux"],
        "aux": got["aux"],
        "logits_rel": float(logits_diff),
        "tokens_per_expert": load.tokens_per_expert,
        "max_over_mean": load.max_over_mean,
        "kernel": plan.kernel,
        "local_experts": {name: tuple(model.get_submodule(name).gate_up_proj.shape) for name in plan.shards},
    }


def refused_ep() -> str:
    """ep=2 on a model of 3 experts: the one-line refusal."""
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(**{**MODELS["qwen3_moe"], "num_experts": 3}))
    try:
        apply_expert_parallel(model, expert_groups(2)[0])
    except ExpertParallelError as error:
        return str(error)
    return "not refused"


def main(out: str, cases: str) -> None:
    dist.init_process_group("gloo")
    torch.use_deterministic_algorithms(True)
    results = {case["name"]: run_case(case) for case in json.loads(cases)}
    results["refused"] = refused_ep() if dist.get_world_size() == 2 else ""
    if dist.get_rank() == 0:
        Path(out).write_text(json.dumps(results))
    dist.destroy_process_group()


# ---- the tests (pytest) ----

TWO_RANKS = [
    {"name": "qwen3_moe", "model": "qwen3_moe", "ep": 2},
    {"name": "mixtral", "model": "mixtral", "ep": 2},
    {"name": "qwen2_moe", "model": "qwen2_moe", "ep": 2},
    {"name": "deepseek_v3", "model": "deepseek_v3", "ep": 2},
    {"name": "gpt_oss", "model": "gpt_oss", "ep": 2},
    {"name": "uneven", "model": "qwen3_moe", "ep": 2, "bias": {"0": 4.0}},
    {"name": "idle_rank", "model": "mixtral", "ep": 2, "bias": {"0": 9.0, "1": 9.0}},
    {"name": "misrouted", "model": "qwen3_moe", "ep": 2, "misroute": True},
]
FOUR_RANKS = [
    {"name": "ep2_replicated", "model": "qwen3_moe", "ep": 2},  # two copies of each expert, each on 2 ranks' data
    {"name": "ep4", "model": "mixtral", "ep": 4},
]


def launch(tmp_path: Path, processes: int, cases: list[dict]) -> dict:
    out = tmp_path / f"ep_{processes}.json"
    # As `torchrun --standalone --nproc-per-node PROCESSES this file ...` runs it, the ranks forked from one
    # interpreter that has imported what they need (tests/helpers/forked_ranks.py).
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    forked_ranks.run_script(Path(__file__), processes, str(out), json.dumps(cases), env=env)
    return json.loads(out.read_text())


def assert_equal_to_one_process(result: dict, name: str) -> None:
    assert len(result["losses"]) == STEPS, name
    for got, expected in zip(result["losses"], result["reference"], strict=True):
        assert got == pytest.approx(expected, rel=TOLERANCE), name
    for got, expected in zip(result["aux"], result["reference_aux"], strict=True):
        assert got == pytest.approx(expected, rel=TOLERANCE), name
    assert result["logits_rel"] < TOLERANCE, name


def assert_load_counted(result: dict) -> None:
    """Every (token, expert) pair of every step was counted once, in each MoE layer."""
    for counts in result["tokens_per_expert"].values():
        assert sum(counts) == STEPS * ROWS * SEQ * COMMON["num_experts_per_tok"]


@pytest.mark.slow
def test_two_ranks_equal_one_process_and_misrouting_does_not(tmp_path):
    results = launch(tmp_path, 2, TWO_RANKS)
    for name in ("qwen3_moe", "mixtral", "qwen2_moe", "deepseek_v3", "gpt_oss", "uneven", "idle_rank"):
        assert_equal_to_one_process(results[name], name)
        assert_load_counted(results[name])
        assert results[name]["kernel"] == "loop"  # CPU
        assert all(shape[0] == 4 for shape in results[name]["local_experts"].values())  # 8 experts over ep=2
    # The biased router really loads one expert: nearly every token takes expert 0 as one of its two.
    assert results["uneven"]["max_over_mean"] > 3 > results["qwen3_moe"]["max_over_mean"]
    for counts in results["idle_rank"]["tokens_per_expert"].values():
        assert counts[4:] == [0, 0, 0, 0]  # ep rank 1's experts computed nothing, and still equal
    misrouted = results["misrouted"]
    assert misrouted["logits_rel"] > 100 * TOLERANCE
    assert misrouted["losses"][0] != pytest.approx(misrouted["reference"][0], rel=TOLERANCE)
    assert results["refused"] == "ep=2 does not divide the 3 experts of model.layers.0.mlp.experts"


@pytest.mark.slow
def test_four_ranks_ep2_with_replicated_experts_and_ep4_equal_one_process(tmp_path):
    results = launch(tmp_path, 4, FOUR_RANKS)
    assert_equal_to_one_process(results["ep2_replicated"], "ep2_replicated")
    assert all(shape[0] == 4 for shape in results["ep2_replicated"]["local_experts"].values())
    assert_equal_to_one_process(results["ep4"], "ep4")
    assert all(shape[0] == 2 for shape in results["ep4"]["local_experts"].values())
    assert_load_counted(results["ep4"])


@pytest.mark.parametrize("model_name", list(MODELS))
def test_one_rank_keeps_the_model_its_logits_and_aux_loss(model_name):
    """ep=1 (no group): the same code path without collectives gives the unsharded model's logits, and
    router_losses gives the model's own aux_loss (transformers' load_balancing_loss_func)."""
    reference = build(model_name)
    model = copy.deepcopy(reference)
    apply_expert_parallel(model, None)
    ids = token_batch()[:, :-1]
    expected, got = reference(input_ids=ids, output_router_logits=True), model(input_ids=ids, output_router_logits=True)
    torch.testing.assert_close(got.logits, expected.logits, rtol=TOLERANCE, atol=1e-6)
    router = router_losses(model.config, got.router_logits)
    if expected.aux_loss is None:  # DeepSeek-V3 defines none: nothing is added to the loss
        assert router.aux_coef == 0 and float(router.total.detach()) == 0
    else:
        assert router.aux_coef == COMMON["router_aux_loss_coef"]
        assert router.aux_loss.item() == pytest.approx(expected.aux_loss.item(), rel=TOLERANCE)


def test_load_counts_each_forward_once_under_activation_checkpointing():
    """The layers recomputed in backward route their tokens again; the load counts the step's routing once."""
    model = build("qwen3_moe")
    model.activation_checkpointing_enable()
    model.train()
    plan = apply_expert_parallel(model, None)
    model(input_ids=token_batch()[:, :-1]).logits.sum().backward()
    load = expert_load(plan)
    assert len(load.tokens_per_expert) == COMMON["num_hidden_layers"]
    for counts in load.tokens_per_expert.values():
        assert sum(counts) == ROWS * SEQ * COMMON["num_experts_per_tok"]
    assert all(sum(counts) == 0 for counts in expert_load(plan).tokens_per_expert.values())  # read resets


def test_bad_settings_are_refused_in_one_line():
    with pytest.raises(ExpertParallelError, match="no mixture-of-experts layers"):
        apply_expert_parallel(torch.nn.Linear(2, 2), None)
    with pytest.raises(ExpertParallelError, match=r"train\.experts grouped_mm cannot run here: it needs CUDA"):
        choose_expert_kernel("grouped_mm", torch.device("cpu"), torch.bfloat16, (64, 32))
    with pytest.raises(ExpertParallelError, match=r"^train\.experts must be one of auto, loop, grouped_mm, not 'x'$"):
        choose_expert_kernel("x", torch.device("cpu"), torch.bfloat16, (64, 32))
    assert choose_expert_kernel("auto", torch.device("cpu"), torch.bfloat16, (64, 32)) == "loop"


def test_published_moe_presets_build_on_the_meta_device_with_their_published_sizes():
    """bench.published_moe's configs: transformers builds them without memory, and the expert layers this module
    shards hold what the model cards say (Mixtral-8x7B 46.7B total, 12.9B active; DeepSeek-V3 671B, 37B active,
    58 MoE layers of 256 experts after 3 dense ones)."""
    from bench.published_moe import PRESETS, meta_build

    mixtral, deepseek = meta_build(PRESETS["mixtral-8x7b"][1]), meta_build(PRESETS["deepseek-v3"][1])
    assert round(mixtral["total_params"] / 1e9, 1) == 46.7 and round(mixtral["active_params"] / 1e9, 1) == 12.9
    assert (mixtral["moe_layers"], mixtral["experts_per_layer"], mixtral["ep_divisors"]) == (32, 8, [1, 2, 4, 8])
    assert round(deepseek["total_params"] / 1e9) == 671 and round(deepseek["active_params"] / 1e9) in (37, 38)
    assert (deepseek["moe_layers"], deepseek["experts_per_layer"]) == (58, 256)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_grouped_gemm_experts_equal_the_loop_on_cuda():
    """bf16 on one GPU: the grouped-GEMM experts (chosen by auto) against the plain loop, forward and gradients."""
    config = {**MODELS["qwen3_moe"], "hidden_size": 64, "moe_intermediate_size": 32}
    torch.manual_seed(0)
    grouped = AutoModelForCausalLM.from_config(AutoConfig.for_model(**config)).to("cuda", torch.bfloat16)
    loop = copy.deepcopy(grouped)
    assert apply_expert_parallel(grouped, None).kernel == "grouped_mm"
    apply_expert_parallel(loop, None, kernel="loop")
    ids = token_batch()[:, :-1].cuda()
    outputs = [model(input_ids=ids).logits.float() for model in (grouped, loop)]
    torch.testing.assert_close(outputs[0], outputs[1], rtol=2e-2, atol=2e-2)
    for output in outputs:
        output.square().mean().backward()
    for a, b in zip(grouped.parameters(), loop.parameters(), strict=True):
        torch.testing.assert_close(a.grad.float(), b.grad.float(), rtol=5e-2, atol=5e-3)


def test_noise_scales_small_batch_gradient_is_the_whole_objectives_on_its_round():
    """The first micro-batch's gradient, as the noise scale measures it, is the gradient of the step's objective (mean
    cross-entropy and the router losses at their coefficient) on that micro-batch alone: the same objective the step's
    gradient (the big batch) is of, so the two-batch estimator compares like with like. Leaving the router losses
    out would compare an LM-only gradient with one that has them: checked to differ here."""
    micro_batches = []
    for seed in (0, 1):  # no padding: each micro-batch holds half the step's target tokens
        ids = token_batch(seed)
        position_ids = torch.arange(SEQ).expand(ROWS, SEQ)
        segment_ids = torch.zeros(ROWS, SEQ, dtype=torch.long)
        micro_batches.append({"input_ids": ids[:, :-1], "labels": ids[:, 1:], "position_ids": position_ids,
                              "segment_ids": segment_ids})  # fmt: skip
    model = build("mixtral")
    apply_expert_parallel(model, None)
    measured = forward_backward(model, micro_batches, None, measure_small_batch=True, router=RouterLogits(model))
    small_sq, small_tokens = measured.small_batch
    assert small_tokens == ROWS * SEQ

    def round_gradient_sq(with_router: bool) -> float:
        model = build("mixtral")
        apply_expert_parallel(model, None)
        router = RouterLogits(model)
        loss = token_loss_sum(model, micro_batches[0]) / small_tokens
        router_loss = _router_loss(router, model, micro_batches[0], None, {})
        (loss + router_loss if with_router else loss).backward()
        return float(sum(p.grad.double().square().sum() for p in model.parameters() if p.grad is not None))

    assert small_sq == pytest.approx(round_gradient_sq(with_router=True), rel=1e-5)
    assert small_sq != pytest.approx(round_gradient_sq(with_router=False), rel=1e-3)


if __name__ == "__main__":
    main(*sys.argv[1:])


def test_router_logits_refuse_a_forward_outside_the_step():
    """One forward between two takes gives one tensor per router; a second (an evaluation between steps) is
    refused rather than folded into the next step's auxiliary loss."""
    model = build("qwen3_moe")
    router = RouterLogits(model)
    ids = token_batch()[:, :-1]
    model(input_ids=ids)
    assert len(router.take()) == COMMON["num_hidden_layers"]
    model(input_ids=ids)
    model(input_ids=ids)
    with pytest.raises(RuntimeError, match=r"^4 router logits recorded since the last step's take, not one per router"):
        router.take()


def test_router_loss_refuses_a_padding_mask_of_other_tokens():
    """The auxiliary loss leaves padding out by the micro-batch's segment ids: routers that saw other tokens are
    refused, not silently given no mask."""
    model = build("qwen3_moe")
    router = RouterLogits(model)
    ids = token_batch()[:, :-1]
    model(input_ids=ids)
    batch = {"segment_ids": torch.zeros(ROWS, SEQ // 2, dtype=torch.long)}  # half of each row
    with pytest.raises(RuntimeError, match=r"^the routers saw 64 tokens but the micro-batch holds 32"):
        _router_loss(router, model, batch, None, {})
    model(input_ids=ids)
    sums = {}
    _router_loss(router, model, {"segment_ids": torch.zeros(ROWS, SEQ, dtype=torch.long)}, None, sums)
    assert sums["aux_loss"] > 0
