"""Expert parallelism for transformers' own mixture-of-experts blocks (Mixtral, Qwen3-MoE, Qwen2-MoE, DeepSeek-V3,
gpt-oss and every other class decorated with `use_experts_implementation`, whose experts are 3-D tensors
`gate_up_proj` (E, 2I, H) and `down_proj` (E, H, I), or transposed with biases as gpt-oss keeps them).

Each rank of an expert-parallel group of size ep keeps E/ep consecutive experts: a slice of the 3-D tensors,
under the same parameter names, so state dicts keep the model's keys. The experts' forward becomes: the model's own
router (unchanged) has chosen top-k experts per token; the (token, expert) pairs are sorted by expert, each rank
tells the others how many rows it sends to each of their experts, `all_to_all_single` with uneven splits carries
the rows to their experts' ranks, the local experts run (a plain loop, or torch's grouped GEMM on CUDA), a second
all-to-all brings the rows back, and they are combined with the routing weights. Dropless: every pair is computed.
Both all-to-alls are an autograd.Function whose backward is the reverse all-to-all, so gradients reach the
experts' owners and return to the tokens' ranks.

Also here: per-step expert load (`expert_load`) and the router's auxiliary losses with the config's coefficients,
computed over the whole data-parallel batch (`router_losses`).
The trainer applies it through trainer.parallel.parallelize.apply_experts: there the ep group comes from a
DeviceMesh (trainer.layout.expert_mesh) and each rank's slice is a DTensor sharded on dim 0 over it, so FSDP2 can
shard it further, checkpoints reshard it and the initialisation draws each expert's own values.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from trainer.config import half_precision

if TYPE_CHECKING:
    from transformers import PretrainedConfig

EXPERT_KERNELS = ("loop", "grouped_mm")


class ExpertParallelError(ValueError):
    """A model or setting expert parallelism cannot handle, said in one line."""


@dataclass
class ExpertShard:
    """What one rank holds of one MoE layer's experts, and what it has routed since the load was last read."""

    group: dist.ProcessGroup | None  # None: ep=1, no collectives
    ep: int
    ep_rank: int
    num_experts: int
    kernel: str
    routed: torch.Tensor  # (num_experts,) pairs this rank's tokens sent to each expert, accumulated over forwards
    mesh: object | None = field(default=None, repr=False)  # the ep DeviceMesh: slices are DTensors over it
    # What the experts' gradients are multiplied by as they leave the forward: under FSDP2 over the ranks holding
    # the same experts, 1/ep (trainer.parallel.data_parallel.apply_fsdp says why).
    grad_scale: float = 1.0

    @property
    def local_experts(self) -> int:
        return self.num_experts // self.ep

    @property
    def first_expert(self) -> int:
        return self.ep_rank * self.local_experts


@dataclass(frozen=True)
class ExpertParallelPlan:
    """The expert layers `apply_expert_parallel` converted, by module name, and the kernel their experts run."""

    shards: dict[str, ExpertShard]
    kernel: str


def expert_modules(model: nn.Module) -> dict[str, nn.Module]:
    """The model's experts modules that hold their experts as 3-D tensors, by name; refuses other MoE layouts."""
    found = {}
    for name, module in model.named_modules():
        if not hasattr(module, "is_concatenated"):  # set by transformers' use_experts_implementation
            if isinstance(getattr(module, "experts", None), nn.ModuleList):
                raise ExpertParallelError(
                    f"{type(module).__name__} keeps its experts as a list of modules; expert parallelism here "
                    "shards transformers' 3-D expert tensors only"
                )
            continue
        if getattr(module, "gate_up_proj", None) is None or module.gate_up_proj.dim() != 3:
            raise ExpertParallelError(f"{type(module).__name__} has no 3-D gate_up_proj to shard")
        found[name] = module
    return found


def choose_expert_kernel(requested: str, device: torch.device, dtype: torch.dtype, dims: tuple[int, ...]) -> str:
    """The experts' kernel, chosen like the attention kernel: grouped GEMM where torch has one for this device,
    dtype and shape (CUDA, compute capability 8.0+, bf16/fp16, 16-byte-aligned rows); the plain loop otherwise.
    On CPU torch 2.13's _grouped_mm runs forward but its backward fails, so CPU always loops."""
    if requested not in ("auto", *EXPERT_KERNELS):
        raise ExpertParallelError(f"train.experts must be one of auto, {', '.join(EXPERT_KERNELS)}, not {requested!r}")
    grouped_ok = (
        device.type == "cuda"
        and _grouped_mm_function() is not None
        and torch.cuda.is_available()
        and torch.cuda.get_device_capability(device) >= (8, 0)
        and dtype in (torch.bfloat16, torch.float16)
        and all(d * dtype.itemsize % 16 == 0 for d in dims)
    )
    if requested == "grouped_mm" and not grouped_ok:
        raise ExpertParallelError(
            f"train.experts grouped_mm cannot run here: it needs CUDA (sm80+), bf16/fp16 and sizes whose rows are "
            f"16-byte aligned; got {device.type}, {str(dtype).removeprefix('torch.')}, sizes {dims}"
        )
    if requested == "auto":
        return "grouped_mm" if grouped_ok else "loop"
    return requested


def expert_kernel_for_run(requested: str, config: PretrainedConfig, device_type: str, precision: str) -> str:
    """train.experts resolved before launch for a run's device and precision (the launcher records it in the
    run's config.yaml, as it does train.attention): grouped_mm or loop."""
    hidden = config.hidden_size
    inner = getattr(config, "moe_intermediate_size", None) or config.intermediate_size
    dtype = torch.bfloat16 if half_precision(precision) else torch.float32
    return choose_expert_kernel(requested, torch.device(device_type), dtype, (2 * inner, hidden, hidden, inner))


def apply_expert_parallel(
    model: nn.Module, ep_group: dist.ProcessGroup | None, kernel: str = "auto", ep_mesh=None
) -> ExpertParallelPlan:
    """Keep this rank's E/ep experts of every MoE layer and route tokens to their experts' ranks by all-to-all.
    ep_group None means ep=1 (all experts local, same code path, no collectives). With `ep_mesh` (a 1-D
    DeviceMesh, whose group is then the ep group) each slice is a DTensor sharded over it; the model may be on
    the meta device. Returns the plan."""
    if ep_mesh is not None:
        ep_group = ep_mesh.get_group()
    ep = dist.get_world_size(ep_group) if ep_group is not None else 1
    ep_rank = dist.get_rank(ep_group) if ep_group is not None else 0
    modules = expert_modules(model)
    if not modules:
        raise ExpertParallelError(f"{type(model).__name__} has no mixture-of-experts layers")
    shards = {}
    chosen = None
    for name, experts in modules.items():
        num_experts = experts.gate_up_proj.shape[0]
        if num_experts % ep:
            raise ExpertParallelError(f"ep={ep} does not divide the {num_experts} experts of {name}")
        dims = (*experts.gate_up_proj.shape[1:], *experts.down_proj.shape[1:])
        on_meta = experts.gate_up_proj.is_meta  # a resolved kernel (the launcher's) is checked there, not here
        chosen = kernel if on_meta and kernel in EXPERT_KERNELS else None
        chosen = chosen or choose_expert_kernel(kernel, experts.gate_up_proj.device, experts.gate_up_proj.dtype, dims)
        routed = torch.zeros(num_experts, dtype=torch.int64, device=experts.gate_up_proj.device)
        shard = ExpertShard(ep_group, ep, ep_rank, num_experts, chosen, routed, mesh=ep_mesh)
        _keep_local_experts(experts, shard)
        experts.expert_shard = shard
        experts.forward = types.MethodType(_expert_parallel_forward, experts)
        shards[name] = shard
    return ExpertParallelPlan(shards, chosen)


def _keep_local_experts(experts: nn.Module, shard: ExpertShard) -> None:
    """Replace every per-expert parameter (leading dimension E) by this rank's slice, freeing the rest."""
    lo, hi = shard.first_expert, shard.first_expert + shard.local_experts
    for name, parameter in list(experts.named_parameters(recurse=False)):
        if parameter.shape[0] != shard.num_experts:
            raise ExpertParallelError(f"{type(experts).__name__}.{name} is not per-expert: cannot shard it over ep")
        local = parameter.detach()[lo:hi].clone()
        if shard.mesh is not None:
            # DTensor only for slices on an ep mesh
            from torch.distributed.tensor import DTensor, Shard

            local = DTensor.from_local(local, shard.mesh, [Shard(0)], run_check=False, shape=parameter.shape,
                                       stride=parameter.stride())  # fmt: skip
        setattr(experts, name, nn.Parameter(local, requires_grad=parameter.requires_grad))


def expert_shards(model: nn.Module) -> ExpertParallelPlan | None:
    """The plan `apply_expert_parallel` left on the model's experts modules (None for a model it did not touch)."""
    shards = {name: m.expert_shard for name, m in model.named_modules() if hasattr(m, "expert_shard")}
    return ExpertParallelPlan(shards, next(iter(shards.values())).kernel) if shards else None


class _AllToAll(torch.autograd.Function):
    """all_to_all_single with uneven splits; its backward sends the gradients back the way the rows came."""

    @staticmethod
    def forward(ctx, rows, output_splits: list[int], input_splits: list[int], group):
        ctx.splits, ctx.group = (output_splits, input_splits), group
        return _all_to_all(rows, output_splits, input_splits, group)

    @staticmethod
    def backward(ctx, grad):
        output_splits, input_splits = ctx.splits
        return _all_to_all(grad, input_splits, output_splits, ctx.group), None, None, None


def _all_to_all(rows: torch.Tensor, output_splits: list[int], input_splits: list[int], group) -> torch.Tensor:
    out = rows.new_empty((sum(output_splits), *rows.shape[1:]))
    dist.all_to_all_single(out, rows.contiguous(), output_splits, input_splits, group=group)
    return out


def _expert_parallel_forward(
    self: nn.Module, hidden_states: torch.Tensor, top_k_index: torch.Tensor, top_k_weights: torch.Tensor
) -> torch.Tensor:
    """The experts' forward under expert parallelism (same signature as transformers' experts forward)."""
    shard: ExpertShard = self.expert_shard
    top_k = top_k_index.shape[-1]
    expert_ids = top_k_index.reshape(-1)
    order = torch.argsort(expert_ids, stable=True)  # pairs grouped by expert, hence by the expert's rank
    token_of_pair = order // top_k
    counts = torch.bincount(expert_ids, minlength=shard.num_experts)
    if torch._C._current_graph_task_id() == -1:  # not activation checkpointing's recomputation inside backward
        if shard.routed.device != counts.device:  # made with a meta-device model, before it had memory
            shard.routed = torch.zeros_like(counts)
        shard.routed += counts.detach()
    send = counts.view(shard.ep, shard.local_experts)
    rows = hidden_states[token_of_pair]
    if shard.ep > 1:
        receive = torch.empty_like(send)
        dist.all_to_all_single(receive, send, group=shard.group)  # (source rank, local expert) counts
        send_splits, receive_splits = send.sum(1).tolist(), receive.sum(1).tolist()
        rows = _AllToAll.apply(rows, receive_splits, send_splits, shard.group)
        by_expert = _local_expert_order(receive)
        out = _run_local_experts(self, shard, rows[by_expert], receive.sum(0))
        out = out[torch.argsort(by_expert)]
        out = _AllToAll.apply(out, send_splits, receive_splits, shard.group)
    else:
        out = _run_local_experts(self, shard, rows, counts)
    weights = top_k_weights.reshape(-1)[order]
    weighted = (out * weights[:, None]).to(hidden_states.dtype)
    # Back in (token, slot) order and summed over the slots: neither saves the weighted rows for backward, where
    # index_add_ (transformers' combine) would keep a copy of them (top_k x hidden per token).
    return weighted[torch.argsort(order)].view(*hidden_states.shape[:-1], top_k, -1).sum(-2)


def _local_expert_order(receive: torch.Tensor) -> torch.Tensor:
    """Rows arrive grouped by source rank, then local expert; the permutation that groups them by local expert
    (stable, so each expert's rows stay in source-rank order)."""
    ep, local = receive.shape
    expert_of_block = torch.arange(local, device=receive.device).repeat(ep)
    return torch.argsort(torch.repeat_interleave(expert_of_block, receive.reshape(-1)), stable=True)


def _run_local_experts(
    experts: nn.Module, shard: ExpertShard, rows: torch.Tensor, counts: torch.Tensor
) -> torch.Tensor:
    tensors = _local_tensors(experts, shard)
    if shard.kernel == "grouped_mm":
        return _grouped_experts(experts, tensors, rows, counts)
    # Every local expert runs, on zero rows if none came: its gradient is then zero rather than None (the
    # optimizer updates it as it would the unsharded tensor's rows) and the graph, hence the backward's
    # collectives, is the same on every rank.
    outputs, start = [], 0
    for expert, count in enumerate(counts.tolist()):
        outputs.append(_one_expert(experts, tensors, expert, rows[start : start + count]))
        start += count
    return torch.cat(outputs)


def _local_tensors(experts: nn.Module, shard: ExpertShard) -> dict[str, torch.Tensor]:
    """This rank's experts' tensors by name (a DTensor over the ep mesh keeps them as its local part), their
    gradients scaled by `shard.grad_scale`."""
    tensors = {}
    for name, parameter in experts.named_parameters(recurse=False):
        local = parameter.to_local() if hasattr(parameter, "to_local") else parameter
        tensors[name] = _ScaleGradient.apply(local, shard.grad_scale) if shard.grad_scale != 1 else local
    return tensors


class _ScaleGradient(torch.autograd.Function):
    """The identity, whose backward multiplies the gradient by a constant."""

    @staticmethod
    def forward(ctx, tensor, scale: float):
        ctx.scale = scale
        return tensor.view_as(tensor)

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.scale, None


def _linear(experts: nn.Module, tensors: dict, x: torch.Tensor, name: str, expert: int) -> torch.Tensor:
    weight = tensors[name][expert]
    out = x @ weight if experts.is_transposed else F.linear(x, weight)
    if experts.has_bias:
        out = out + tensors[f"{name}_bias"][expert]
    return out


def _one_expert(experts: nn.Module, tensors: dict, expert: int, x: torch.Tensor) -> torch.Tensor:
    """One expert as transformers' eager experts forward computes it (its own gate function included)."""
    gated = experts._apply_gate(_linear(experts, tensors, x, "gate_up_proj", expert))
    return _linear(experts, tensors, gated, "down_proj", expert)


def _grouped_mm_function() -> Callable | None:
    return getattr(F, "grouped_mm", None) or getattr(torch, "_grouped_mm", None)


def _grouped_experts(experts: nn.Module, tensors: dict, rows: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """All local experts in two grouped GEMMs over rows sorted by expert (CUDA)."""
    grouped_mm = _grouped_mm_function()
    offsets = torch.cumsum(counts, dim=0, dtype=torch.int32)
    expert_of_row = torch.repeat_interleave(torch.arange(len(counts), device=rows.device), counts)

    def linear(x: torch.Tensor, name: str) -> torch.Tensor:
        weight = tensors[name]
        out = grouped_mm(
            x.to(weight.dtype), weight if experts.is_transposed else weight.transpose(-2, -1), offs=offsets
        )
        return out + tensors[f"{name}_bias"][expert_of_row] if experts.has_bias else out

    return linear(experts._apply_gate(linear(rows, "gate_up_proj")), "down_proj")


@dataclass(frozen=True)
class ExpertLoad:
    """Routed (token, expert) pairs per expert of each MoE layer since the last read, over the group's ranks."""

    tokens_per_expert: dict[str, list[int]]
    max_over_mean: float  # the most loaded expert against the mean, worst layer: 1.0 is perfectly even


def expert_load(plan: ExpertParallelPlan, group: dist.ProcessGroup | None = None, reset: bool = True) -> ExpertLoad:
    """Tokens per expert summed over `group`'s ranks (the data-parallel ranks: all of a step's tokens; None: this
    rank's alone), then reset."""
    names = list(plan.shards)
    stacked = torch.stack([plan.shards[name].routed for name in names])
    if _distributed(group):
        stacked = stacked.clone()
        dist.all_reduce(stacked, group=group)
    if reset:
        for shard in plan.shards.values():
            shard.routed.zero_()
    ratios = [float(row.max() / row.float().mean()) if row.sum() else 1.0 for row in stacked]
    return ExpertLoad({name: row.tolist() for name, row in zip(names, stacked, strict=True)}, max(ratios))


@dataclass(frozen=True)
class RouterLosses:
    """The model's router losses over the whole data-parallel batch, with its config's coefficients."""

    aux_loss: torch.Tensor  # load balancing (Switch Transformer), as the model's load_balancing_loss_func defines it
    aux_coef: float  # config.router_aux_loss_coef; 0 where the config has none
    z_loss: torch.Tensor | None  # router z-loss, where the config has router_z_loss_coef
    z_coef: float

    @property
    def total(self) -> torch.Tensor:
        """What a training loop adds to the language-model loss on every rank (each rank holds the same value;
        averaging the gradients over the data-parallel ranks then gives the whole batch's gradient)."""
        total = self.aux_coef * self.aux_loss
        return total + self.z_coef * self.z_loss if self.z_loss is not None else total


def router_losses(
    config: PretrainedConfig,
    router_logits: tuple[torch.Tensor, ...],
    token_mask: torch.Tensor | None = None,
    group: dist.ProcessGroup | None = None,
) -> RouterLosses:
    """The load-balancing loss of transformers' load_balancing_loss_func (Mixtral, Qwen2/3-MoE), over the tokens
    of every rank in `group` (the data-parallel ranks; None: this rank's tokens alone), not this rank's only: its
    expert fractions and mean router probabilities are sums over tokens, so they are summed over ranks before the
    product, which makes it equal to one process's loss on the whole batch. `router_logits` is the model output's
    (output_router_logits=True), one (tokens, experts) tensor per MoE layer; token_mask (batch, seq) leaves
    padding out, as the model's attention_mask does."""
    return losses_from_sums(config, router_sums(router_logits, config.num_experts_per_tok, token_mask), group)


@dataclass(frozen=True)
class RouterSums:
    """What the router losses are made of, as sums over tokens and layers, so that layers seen apart (pipeline
    stages) add up to the whole model's: counts [token rows x layers, layers, times each expert was chosen]
    (int64, exact) and sums [router probability per expert, logsumexp(logits)^2] (fp32, differentiable)."""

    counts: torch.Tensor
    sums: torch.Tensor

    def __add__(self, other: RouterSums) -> RouterSums:
        return RouterSums(self.counts + other.counts, self.sums + other.sums)


def router_sums(
    router_logits: tuple[torch.Tensor, ...], top_k: int, token_mask: torch.Tensor | None = None
) -> RouterSums:
    """The sums of `router_losses` over these layers' logits (tensor operations only: a pipeline's shape
    inference runs them on empty tensors)."""
    num_experts = router_logits[0].shape[-1]
    device = router_logits[0].device
    mask = None if token_mask is None else token_mask.reshape(-1).to(device=device)
    counts = torch.zeros(num_experts + 2, dtype=torch.int64, device=device)
    sums = torch.zeros(num_experts + 1, dtype=torch.float32, device=device)
    for logits in router_logits:
        probs = torch.softmax(logits, dim=-1)
        _, selected = torch.topk(probs, top_k, dim=-1)
        real = torch.ones(len(logits), dtype=torch.int64, device=device) if mask is None else mask.long()
        chosen = torch.zeros(num_experts, dtype=torch.int64, device=device)
        chosen = chosen.scatter_add(0, selected.reshape(-1), real.repeat_interleave(top_k))
        counts = counts + torch.cat([real.sum()[None], torch.ones(1, dtype=torch.int64, device=device), chosen])
        weight = real.float()
        probability = (probs.float() * weight[:, None]).sum(0)
        z_sum = (torch.logsumexp(logits.float(), dim=-1) ** 2 * weight).sum()
        sums = sums + torch.cat([probability, z_sum[None]])
    return RouterSums(counts, sums)


def losses_from_sums(config: PretrainedConfig, summed: RouterSums, group: dist.ProcessGroup | None) -> RouterLosses:
    """The router losses of every layer's sums, over the tokens of every rank in `group` (see router_losses)."""
    counts, sums = summed.counts.detach(), summed.sums
    if _distributed(group):
        counts = counts.clone()
        dist.all_reduce(counts, group=group)
        # Autograd-aware: each rank's gradient is then the sum over ranks, and averaging over them gives the
        # whole batch's gradient of this one shared loss.
        sums = _AllReduceSum.apply(sums, group)
    rows, layers, chosen = counts[0].float(), counts[1].float(), counts[2:].float()
    probability, z_sum = sums[:-1], sums[-1]
    aux = torch.sum((chosen / rows) * (probability / rows)) * len(chosen)
    z_coef = getattr(config, "router_z_loss_coef", None)
    # z-loss: the mean over tokens of logsumexp(logits)^2, summed over layers (ST-MoE).
    z_loss = z_sum / (rows / layers) if z_coef is not None else None
    # A model without router_aux_loss_coef (DeepSeek-V3: bias-based balancing) adds no auxiliary loss.
    aux_coef = float(getattr(config, "router_aux_loss_coef", None) or 0.0)
    return RouterLosses(aux, aux_coef, z_loss, float(z_coef or 0.0))


class _AllReduceSum(torch.autograd.Function):
    """Sum over the group; the backward sums the gradients too (every rank's loss used the sum)."""

    @staticmethod
    def forward(ctx, tensor, group):
        ctx.group = group
        summed = tensor.clone()
        dist.all_reduce(summed, group=group)
        return summed

    @staticmethod
    def backward(ctx, grad):
        summed = grad.clone()
        dist.all_reduce(summed, group=ctx.group)
        return summed, None


def _distributed(group: dist.ProcessGroup | None) -> bool:
    """None: this rank alone (a one-process run, or a reference computed inside a distributed one)."""
    return group is not None and dist.get_world_size(group) > 1
