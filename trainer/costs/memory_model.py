"""Predicted memory per rank, by category, from a model config and a layout: no weights, no devices.

Parameters, gradients and optimizer state are exact: each parameter's local shape follows from the tensor-parallel
plan (columns or rows split over tp; the embedding and output head by vocabulary rows:
trainer.parallel.tensor_parallel) and FSDP2's dim-0 chunking over dp_shard, exactly as torch splits them.

Activations follow Korthikanti et al. (2022, "Reducing Activation Recomputation in Large Transformer Models"): a
per-layer count of what autograd keeps per token, with the attention and MLP terms divided by the tensor-parallel
degree, the sequence divided by the context-parallel degree, and only each layer's input kept under full activation
checkpointing. The counts are those of transformers' Llama-family decoder layer with SDPA's fused attention
(no s x s scores are stored), measured tensor by tensor:

    per layer and token: 6h (two RMSNorms: input, normalised, scaled) + 5q/tp (q, k and v after rotary and
    GQA repeat, attention output and its projection input) + 4i/tp (SwiGLU: gate, up, activation, product)
    + heads/tp (log-sum-exp) + 2 (the norms' rsqrt), all in the compute dtype (Qwen3's per-head query and key
    norms add their own input, normalised value and rsqrt: (2q + 2kv + heads + kv heads)/tp); with packed rows on
    the dense kernel, SDPA takes k and v repeated (5q), and every layer saves the same block-causal bias, made once per
    micro-batch (s entries per token, once); unpacked rows need no mask, and neither flex's BlockMask: SDPA or
    flex then take k and v unrepeated (3q + 2kv);
    per token once: the final norm (3h + 1), the chunked loss's log-sum-exp (fp32; trainer.model.loss: the logits
    are recomputed in backward, not kept; a pipeline's last stage still keeps the log-softmax over the vocabulary,
    in fp32, its tp rank's columns under tp), input ids (int64), and rotary cos/sin (per position only, for
    unpacked rows).
Under tensor parallelism (always sequence parallel) all of the 6h + 2 is split by tp too: the scaled norm outputs,
which the projections save, kept as each rank's split and gathered again in backward (`layer_bytes_per_token`).
Selective checkpointing (trainer.parallel.activation_checkpointing.selective_checkpoint_context) keeps, per layer and
token, the layer's input (h), the outputs of the q, v, gate and down projections (q/tp, kv/tp, i/tp, and h: down is
row-parallel, so each tensor-parallel rank holds a whole partial sum) and the attention kernel's output and log-sum-exp
(q/tp, and heads/tp in fp32); no mask bias and no gathered keys and values (both are rebuilt in the recomputation).
Under bf16 without FSDP2, autocast also saves a bf16 copy of every matmul weight (`weight_copies_saved`).
Under fp8 a float8 layer (torchao's Float8Linear) saves what a bf16 one saves, its bf16 input and its weight (under
autocast the fp32 weight itself, no copy), and casts them to float8 again in backward (`float8_temporary_bytes`).

Context parallelism divides every token count by cp except the gathered keys and values: each layer keeps the
whole sequence's k and v (2q/tp per token of the sequence, i.e. 2q cp/tp per local token; 2kv cp/tp where no
dense mask makes SDPA repeat them), and on CPU each local query's mask row still spans all s keys; on CUDA the mask
is a function of global positions and document ids (trainer.parallel.context_parallel), with no dense rows.

Mixture-of-experts layers (trainer.parallel.expert_parallel's forward, which the trainer runs for ep = 1 too) keep, per
token and MoE layer, in place of the dense MLP's 4i: for each of its top_k (token, expert) pairs the row sent to the
expert and the expert's output (2h; the weighted outputs are summed per token, not kept), the expert's gate-up output,
activation and product (4I, I the expert's intermediate width), in the compute dtype; the router's fp32 probabilities
over the E experts, its top-k values and their sum, a weight per pair (fp32), and three int64 indices per pair (top-k,
the pairs' order and its inverse); shared experts as a dense MLP (4 I_shared). Counted storage by storage on
transformers' Mixtral (tests/test_moe_costs.py checks it against what autograd saves). Selective checkpointing keeps
every other matmul's output (trainer.parallel.activation_checkpointing), so what an MoE layer keeps follows the order of
its matmuls: the router's logits (E) and each pair's down projection (h), or where the shared expert runs first
(Qwen2-MoE) its gate and down and each pair's gate-up output (2I). Expert parameters are split over ep on the expert
dimension (each rank keeps E/ep consecutive experts), then FSDP2 chunks them over the dp_shard x cp ranks left
(expert_shard_degree, on the expert dimension, or on the next where fewer experts than those ranks are left, as
trainer.parallel.data_parallel shards them); every other parameter is chunked over all of dp_shard x cp, as in a dense
model. The load is taken as even: the rows a rank's experts receive are top_k x its own tokens (uneven routing costs
time: trainer.costs.throughput).

Temporaries are the peaks that live only briefly: one chunk's logits and their gradient (`loss_temporary_bytes`;
a pipeline's whole micro-batch's; under tp over the rank's vocabulary columns, `logit_columns`), the output head's
weight gradient (its tp rank's rows) before it is accumulated, a recomputed
layer under activation checkpointing (a whole layer under full, what selective does not keep under selective), and
FSDP's two gathered layers (the current one and the prefetched next; the largest layer, which in an MoE model is
an MoE layer with this ep rank's experts), gathered in bf16 under mixed precision; under expert parallelism the
dispatch buffers of one MoE layer (the rows sent and the rows received, top_k x tokens x hidden each, the
autograd Function that carries them saves neither). Below ZeRO stage 3 (train.zero_stage) FSDP2 keeps every unit's
gathered parameters at once instead of two layers' (`gathered_parameter_bytes`; so does a pipeline at stage 3; at
stage 3 without one the root unit's, which FSDP2 keeps from forward to backward), and stage 1 the whole unsharded
gradient between micro-batches (`unreduced_gradient_bytes`).

On CUDA a process holds more than its tensors (`cuda_runtime`): the CUDA context, NCCL's buffers for each
communicator, cuBLAS workspaces and what the caching allocator reserves beyond what it hands out. None of it can be
measured without a GPU, so these are defaults (CUDA_RUNTIME below, with their sources: the context was measured on
an H100, the rest is stated); trainer.rank.memory measures the same on a GPU (the reserved peak and the memory outside
the allocator), to check them against.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import functools
import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from trainer.config import (
    Checkpointing,
    TrainSpec,
    checkpointing_mode,
    half_precision,
    reduces_once_per_step,
    resolve_zero_stage,
)
from trainer.costs.optimizer_state import optimizer_state_bytes
from trainer.layout import MESH_DIMS, Layout, tensor_parallel_plan
from trainer.model.attention import takes_dense_mask
from trainer.model.loss import chunk_tokens
from trainer.model.parameters import (
    MoeDims,
    describe_parameters,
    float8_eligible,
    head_dim,
    is_routed_expert,
    moe_dims,
)
from trainer.parallel.data_parallel import expert_shard_dim
from trainer.parallel.pipeline import in_flight_micro_batches, local_stages, stage_of_layer
from trainer.parallel.tensor_parallel import saves_split_inputs

if TYPE_CHECKING:
    from transformers import PretrainedConfig

FP32 = 4
MiB = 1024**2


@dataclass(frozen=True)
class CudaRuntime:
    """What a CUDA training process holds besides its tensors: the context measured on one GPU, the rest stated."""

    # The CUDA context with the kernels a training step loads (CUDA_MODULE_LOADING=LAZY, torch's default), which
    # torch's allocator statistics never see: measured as the device memory outside the allocator of a one-GPU bf16
    # run (1B Llama, SDPA, fused AdamW) on an H100 80GB HBM3, torch 2.11+cu130, driver 580: 1,944,518,656 bytes,
    # the same in all four runs (bench/results/gpu_h100_validation.json, memory section).
    context: int = 1854 * MiB
    # NCCL's buffers per communicator: NCCL_BUFFSIZE (4 MiB, NCCL's documented default) per channel and peer for
    # the Simple protocol, about as much again for LL128, over the 16 to 32 channels NCCL opens on NVLink.
    nccl_per_communicator: int = 256 * MiB
    # cuBLAS and cuBLASLt workspaces, per stream (torch allocates them from its caching allocator and keeps them):
    # torch's defaults on Hopper are 32 MiB for cuBLAS (CUBLAS_WORKSPACE_CONFIG ":4096:8") and as much for cuBLASLt.
    workspaces: int = 64 * MiB
    # Reserved but unallocated: the caching allocator rounds blocks up and keeps freed segments; 5% of the tensor
    # peak is a stated margin (measured runs record both peaks, allocated and reserved, in memory.json).
    allocator_slack: float = 0.05

    def bytes(self, layout: Layout, tensor_peak: int) -> int:
        return (
            self.context
            + self.nccl_per_communicator * nccl_communicators(layout)
            + self.workspaces
            + int(self.allocator_slack * tensor_peak)
        )


CUDA_RUNTIME = CudaRuntime()


@functools.lru_cache(maxsize=4096)  # a plan asks once per candidate, for a few hundred layouts
def nccl_communicators(layout: Layout) -> int:
    """Communicators a rank opens: the whole world's (loss, gradient norm, barriers) and one per mesh dimension
    that has more than one rank (FSDP's dp_shard x cp flattened counts as its own). None for one process."""
    if layout.world_size == 1:
        return 0
    split = sum(getattr(layout, name) > 1 for name in MESH_DIMS)
    flattened = 1 if layout.shard_degree > 1 and layout.cp > 1 else 0
    # Expert parallelism: the ep group's all-to-all, and FSDP2's over the ranks that hold the same experts.
    experts = (1 + (layout.expert_shard_degree > 1)) if layout.ep > 1 else 0
    return 1 + split + flattened + experts


@dataclass(frozen=True)
class MemoryPlan:
    """What the prediction depends on besides the model config and the layout."""

    micro_batch: int
    seq_len: int
    precision: str  # fp32 | bf16 (autocast over fp32 master weights) | fp8 (bf16 with float8 layers)
    checkpointing: Checkpointing  # given as train.activation_checkpointing stores it (False, True, "selective") too
    train: TrainSpec
    grad_accum: int = 1  # bounds the micro-batches a pipeline stage holds at once
    packing: bool = True  # packed rows need a dense block-causal mask; unpacked rows none (trainer.data.packing)
    device_type: str = "cpu"  # cuda adds the CUDA runtime's memory (CUDA_RUNTIME) to the peak
    recomputing: bool = False  # a layer as checkpointing's recomputation runs it (its gathered inputs kept whole)

    def __post_init__(self) -> None:  # the door: a stored value becomes its mode once, for every model below
        object.__setattr__(self, "checkpointing", checkpointing_mode(self.checkpointing))


class ConfigSnapshot:
    """A transformers config whose attributes are each read from it once, then kept: what a plan passes to the
    memory and throughput models. Reading an attribute of a transformers 5 config goes through two
    `__getattribute__` overrides (attribute_map aliases, per-layer attributes of heterogeneous configs), some
    microseconds each, and a plan for 512 devices reads them over half a million times. The values are the
    config's own (aliases resolved by the config), so every figure is the same; one it lacks raises AttributeError,
    as the config does, remembered too (the MoE reads ask a dense config for fields it lacks, on every candidate).
    Not for code that needs the config's class."""

    def __init__(self, config: PretrainedConfig):
        object.__setattr__(self, "_config", config)
        object.__setattr__(self, "_lacks", set())

    def __getattr__(self, name: str):
        if name in ("_config", "_lacks") or name.startswith("__"):  # copy and pickle ask of an instance not set up
            raise AttributeError(name)
        if name in self._lacks:
            raise AttributeError(name)
        try:
            value = getattr(self._config, name)
        except AttributeError:
            self._lacks.add(name)
            raise
        object.__setattr__(self, name, value)
        return value

    def __setattr__(self, name: str, value) -> None:
        raise AttributeError(f"a ConfigSnapshot is read-only: set {name} on the config it was taken of")


def parameter_shapes(config: PretrainedConfig) -> list[tuple[str, tuple[int, ...]]]:
    """Names and shapes of the model's parameters (tied ones once), from a meta-device model."""

    return describe_parameters(config)[0]


def rank_coordinates(rank: int, layout: Layout) -> dict[str, int]:
    """A global rank's index along each mesh dimension (row-major over MESH_DIMS, as init_device_mesh does)."""
    coordinates = {}
    for name in reversed(MESH_DIMS):
        rank, coordinates[name] = divmod(rank, getattr(layout, name))
    return coordinates


@dataclass(frozen=True)
class ParameterGroup:
    """Parameters alike in all but their decoder layer: one module path (layer index as N), one shape. Every rank
    splits them alike, so a plan works out a group's shard once rather than once per layer."""

    module: str  # e.g. model.layers.N.self_attn.q_proj
    shape: tuple[int, ...]
    names: tuple[str, ...]
    layers: tuple[int | None, ...]  # each parameter's decoder layer (None outside the layers)


def parameter_groups(shapes: list[tuple[str, tuple[int, ...]]]) -> list[ParameterGroup]:
    groups: dict[tuple[str, tuple[int, ...]], tuple[list[str], list[int | None]]] = {}
    for name, shape in shapes:
        match = _LAYER_INDEX.search(name)
        module = _LAYER_INDEX.sub(".layers.N.", name.rsplit(".", 1)[0])
        names, layers = groups.setdefault((module, shape), ([], []))
        names.append(name)
        layers.append(int(match.group(1)) if match else None)
    return [ParameterGroup(m, s, tuple(n), tuple(layers)) for (m, s), (n, layers) in groups.items()]


def local_groups(
    config: PretrainedConfig,
    layout: Layout,
    rank: int,
    groups: list[ParameterGroup],
    stages_per_rank: int = 1,
    sharded: bool = True,
) -> list[tuple[ParameterGroup, tuple[int, ...], list[int]]]:
    """Each group's shard shape on `rank` (split by the tensor-parallel plan, then chunked on dim 0 by FSDP2
    unless not `sharded`: what FSDP2 gathers) and which of its parameters the rank holds (positions in `names`:
    a pipeline stage holds some layers only)."""
    plan = tensor_parallel_plan(config) if layout.tp > 1 else {}
    styles = tuple(plan.items())  # hashable, for _tp_style's cache
    at = rank_coordinates(rank, layout)
    stages, layers = layout.pp * stages_per_rank, config.num_hidden_layers
    # Pipeline stages take equal runs of layers; the first adds the embedding, the last the norm and head
    # (trainer.parallel.pipeline's split).
    on_rank = _pipeline_layers(layers, stages, layout.pp, at["pp"]) if layout.pp > 1 else None
    first, last = at["pp"] == 0, at["pp"] == (stages - 1) % layout.pp
    result = []
    for group in groups:
        if on_rank is None:
            held = list(range(len(group.names)))
        else:
            held = list(_held(group.layers, on_rank, first if "embed" in group.module else last))
        if held:
            result.append((group, _shard_shape(group, styles, layout, at, sharded), held))
    return result


@functools.lru_cache(maxsize=1024)  # a plan asks for the same few pipeline splits for hundreds of layouts
def _pipeline_layers(layers: int, stages: int, pp: int, pp_rank: int) -> frozenset[int]:
    """The decoder layers pipeline rank `pp_rank` holds: those of its stages."""
    return frozenset(layer for layer in range(layers) if stage_of_layer(layer, layers, stages) % pp == pp_rank)


@functools.lru_cache(maxsize=4096)
def _held(group_layers: tuple[int | None, ...], on_rank: frozenset[int], outside: bool) -> tuple[int, ...]:
    """Positions of a group's parameters on a pipeline rank: those of its layers, and those outside the layers
    (None) where the rank holds the embedding or the head (`outside`)."""
    return tuple(i for i, layer in enumerate(group_layers) if (outside if layer is None else layer in on_rank))


def local_shapes(
    config: PretrainedConfig,
    layout: Layout,
    rank: int,
    shapes: list[tuple[str, tuple[int, ...]]] | None = None,
    stages_per_rank: int = 1,
) -> list[tuple[str, tuple[int, ...]]]:
    """Each parameter's shape on `rank`: split by the tensor-parallel plan, then chunked on dim 0 by FSDP2."""
    groups = parameter_groups(shapes or parameter_shapes(config))
    local = local_groups(config, layout, rank, groups, stages_per_rank)
    return [(group.names[i], shape) for group, shape, held in local for i in held]


def _shard_shape(
    group: ParameterGroup,
    styles: tuple[tuple[str, str], ...],
    layout: Layout,
    at: dict[str, int],
    sharded: bool = True,
) -> tuple[int, ...]:
    local = list(group.shape)
    split_dim = {"colwise": 0, "rowwise": 1 if len(local) == 2 else None}.get(_tp_style(group.module, styles))
    if layout.tp > 1 and _vocabulary_rows(group):  # the embedding and head, split by vocabulary
        split_dim = 0
    if split_dim is not None:
        local[split_dim] = _chunk_size(local[split_dim], layout.tp, at["tp"])
    shards, chunk = layout.shard_degree, at["dp_shard"] * layout.cp + at["cp"]
    if layout.ep > 1 and is_routed_expert(group.module):  # E/ep experts, then FSDP2 over the rest
        return _expert_shard_shape(local, layout, chunk, sharded)
    if sharded and shards > 1 and local:  # FSDP2 over the flattened dp_shard x cp mesh, cp innermost
        local[0] = _chunk_size(local[0], shards, chunk)
    return tuple(local)


def _vocabulary_rows(group: ParameterGroup) -> bool:
    """Whether a group is the input embedding or the output head, which tensor parallelism splits by vocabulary
    rows (trainer.parallel.tensor_parallel): the 2-D weights outside the decoder layers."""
    return group.layers[0] is None and len(group.shape) == 2


def logit_columns(config: PretrainedConfig, layout: Layout) -> int:
    """The vocabulary columns of the logits a rank computes its loss over: its rows of the head under tensor
    parallelism (a ceil piece, as torch.chunk splits), in a pipeline's last stage too."""
    return -(-config.vocab_size // layout.tp)


def _expert_shard_shape(local: list[int], layout: Layout, chunk: int, sharded: bool) -> tuple[int, ...]:
    """A routed-expert parameter (leading dimension E) on the rank at `chunk` of dp_shard x cp: ep is innermost
    there (trainer.layout), so its ep rank is chunk % ep and its expert-FSDP rank chunk // ep. FSDP2 chunks the
    rank's E/ep experts on the dimension trainer.parallel.data_parallel shards them on (`expert_shard_dim`: the
    expert dimension, or the next where fewer experts than ranks are left)."""
    local[0] = _chunk_size(local[0], layout.ep, chunk % layout.ep)
    shards = layout.expert_shard_degree
    if sharded and shards > 1:
        dim = expert_shard_dim(local[0], shards)
        local[dim] = _chunk_size(local[dim], shards, chunk // layout.ep)
    return tuple(local)


@dataclass(frozen=True)
class ShapeSums:
    """What the prediction needs of the parameter shapes, summed once per rank: a plan prices every micro-batch
    and checkpointing mode of a layout against the same shards (thousands of candidates for a large model)."""

    parameter_elements: int  # this rank's shards
    matmul_weight_elements: int  # this rank's 2-D weights but the embedding: what autocast copies to bf16
    optimizer_bytes: int  # this rank's optimizer state (trainer.costs.optimizer_state holds the exact rule)
    layer_elements: (
        int  # the largest decoder layer, unsharded: what FSDP gathers at a time (before tp; its E/ep experts)
    )
    unsharded_elements: int  # this rank's tensor-parallel and pipeline share before FSDP2 chunks it
    layer_expert_elements: int = 0  # the routed experts' part of layer_elements: whole on every tp rank
    # Under fp8: this rank's shards of the float8 weights (trainer.model.parameters.float8_eligible), and the
    # distinct (out, in) shapes of the float8 layers it computes, after tensor parallelism (unsharded by FSDP2).
    float8_weight_elements: int = 0
    float8_shapes: tuple[tuple[int, int], ...] = ()
    # This rank's parameters outside the decoder layers (embedding, final norm, head) before FSDP2 chunks them: FSDP2's
    # root unit (a pipeline stage's own, on the ranks that hold them)
    root_elements: int = 0

    @classmethod
    def of(
        cls,
        local: list[tuple[ParameterGroup, tuple[int, ...], list[int]]],
        train: TrainSpec,
        unsharded: list[tuple[ParameterGroup, tuple[int, ...], list[int]]] | None = None,
    ) -> ShapeSums:
        """`local`: a rank's `local_groups`; `unsharded`: the same without FSDP2's chunking (default: `local`)."""

        whole = sum(math.prod(shape) * len(held) for _, shape, held in (local if unsharded is None else unsharded))
        parameters = matmul = optimizer = 0
        by_layer: dict[int | None, tuple[int, int]] = {}  # layer -> (elements, of which routed experts)
        for group, shape, _ in unsharded or local:  # the rank's experts (E/ep) of each layer, whole otherwise
            expert = is_routed_expert(group.module)
            gathered = math.prod(shape) if expert else math.prod(group.shape)
            for index in group.layers:
                size, experts = by_layer.get(index, (0, 0))
                by_layer[index] = (size + gathered, experts + gathered * expert)
        layer, layer_experts = max((v for index, v in by_layer.items() if index is not None), default=(0, 0))
        float8 = 0
        for group, shape, held in local:
            count = len(held)
            parameters += math.prod(shape) * count
            if len(shape) == 2 and "embed" not in group.module:
                matmul += math.prod(shape) * count
            float8 += math.prod(shape) * count if _float8(group) else 0
            optimizer += optimizer_state_bytes([(group.names[0], shape)], train, FP32) * count
        float8_shapes = {tuple(shape) for group, shape, _ in unsharded or local if _float8(group)}
        root = sum(math.prod(shape) * len(held) for group, shape, held in unsharded or local if group.layers[0] is None)
        shapes = tuple(sorted(float8_shapes))
        return cls(parameters, matmul, optimizer, layer, whole, layer_experts, float8, shapes, root_elements=root)

    @classmethod
    def of_rank(
        cls,
        config: PretrainedConfig,
        layout: Layout,
        rank: int,
        groups: list[ParameterGroup],
        train: TrainSpec,
    ) -> ShapeSums:
        """The sums of `rank`'s shards under `layout` (`groups`: parameter_groups of the model)."""
        local = local_groups(config, layout, rank, groups, train.pp_stages_per_rank)
        unsharded = local_groups(config, layout, rank, groups, train.pp_stages_per_rank, sharded=False)
        return cls.of(local, train, unsharded if layout.shard_degree > 1 else None)


def _float8(group: ParameterGroup) -> bool:
    """Whether a group's parameters are float8 weights under fp8 (by a parameter's own name: the group's module
    path writes its layer as N)."""
    return float8_eligible(group.names[0].rsplit(".", 1)[0], group.shape)


def predict_rank(
    config: PretrainedConfig,
    layout: Layout,
    plan: MemoryPlan,
    rank: int,
    shapes: list[tuple[str, tuple[int, ...]]] | None = None,
    sums: ShapeSums | None = None,
    memo: dict | None = None,
) -> dict[str, int]:
    """Predicted bytes by category for one rank (`sums`: of its shards, when already known; `memo`: see
    activation_bytes)."""
    if sums is None:
        groups = parameter_groups(shapes or parameter_shapes(config))
        sums = ShapeSums.of_rank(config, layout, rank, groups, plan.train)
    parameter_bytes = sums.parameter_elements * FP32
    prediction = {
        "parameters": parameter_bytes,
        "gradients": parameter_bytes,  # fp32 gradients of fp32 master weights, sharded like them
        "unreduced_gradients": unreduced_gradient_bytes(layout, plan, sums),
        "gathered_parameters": gathered_parameter_bytes(layout, plan, sums),
        "optimizer": sums.optimizer_bytes,
        "activations_saved": activation_bytes(config, layout, plan, rank, memo),
        "weight_copies_saved": weight_copy_bytes(sums, layout, plan),
        "temporaries": temporary_bytes(config, layout, plan, sums, memo),
    }
    tensor_peak = sum(prediction.values())
    if plan.device_type == "cuda":
        prediction["cuda_runtime"] = CUDA_RUNTIME.bytes(layout, tensor_peak)
    prediction["peak"] = sum(prediction.values())
    return prediction


def predict_memory(config: PretrainedConfig, layout: Layout, plan: MemoryPlan) -> list[dict[str, int]]:
    groups = parameter_groups(parameter_shapes(config))
    sums = (ShapeSums.of_rank(config, layout, r, groups, plan.train) for r in range(layout.world_size))
    return [{"rank": r, **predict_rank(config, layout, plan, r, sums=s)} for r, s in enumerate(sums)]


def accumulates_unsharded(layout: Layout, plan: MemoryPlan) -> bool:
    """Whether FSDP2 holds an unsharded gradient between the micro-batches of a step: under
    train.fsdp_grad_sync: step, and inside any pipeline schedule (torch's stages skip FSDP2's gradient sync on
    every micro-batch's backward and reduce once at the end)."""
    per_step = reduces_once_per_step(plan.train.fsdp_grad_sync, plan.train.zero_stage) or layout.pp > 1
    return layout.shard_degree > 1 and plan.grad_accum > 1 and per_step


def unreduced_gradient_bytes(layout: Layout, plan: MemoryPlan, sums: ShapeSums) -> int:
    """Gradient bytes a rank holds at the peak of an accumulation beyond its sharded fp32 gradients: where FSDP2
    accumulates without reduce-scattering (`accumulates_unsharded`), a gradient of the rank's whole share before
    FSDP2's chunking, in the reduce dtype (FSDP2 converts the bf16 gradient of its mixed precision to it after each
    backward), held instead of the shard until the last micro-batch reduce-scatters it; beside the shard where
    the step measures the gradient noise scale (train.gns_every; not in a pipeline), which reduces its first
    micro-batch whole. Nothing where FSDP2 reduce-scatters every micro-batch."""
    if not accumulates_unsharded(layout, plan):
        return 0
    bf16_reduce = half_precision(plan.precision) and plan.train.fsdp_reduce_dtype == "bf16"
    unsharded = sums.unsharded_elements * (2 if bf16_reduce else FP32)
    shard_held = plan.train.gns_every > 0 and layout.pp == 1
    return unsharded - (0 if shard_held else sums.parameter_elements * FP32)


def holds_every_unit_gathered(layout: Layout, train: TrainSpec) -> bool:
    """Whether FSDP2 holds every unit's gathered parameters at once at some point of a step: below ZeRO stage 3
    (train.zero_stage), and inside a pipeline at any stage: torch's pipeline stages run every backward without
    resharding (set_reshard_after_backward(False)), so a stage's layers stay gathered from one micro-batch's backward
    to the next forward (measured under 1F1B: tests/test_zero_stages.py; interleaved schedules taken alike, which
    may overstate them where one stage's forward reshards before another's backward gathers)."""
    return resolve_zero_stage(train.zero_stage) != 3 or layout.pp > 1


def gathered_parameter_bytes(layout: Layout, plan: MemoryPlan, sums: ShapeSums) -> int:
    """Where FSDP2 keeps what it gathered (`holds_every_unit_gathered`): every unit's parameters at once (stage 2,
    from a forward until each unit's backward; stage 1, until the step's last backward; a pipeline, from a backward
    to the next forward), the rank's whole share before FSDP2's chunking, whole (FSDP2's all-gather output, beside
    the sharded parameters), in the gathered dtype (bf16 under mixed precision). They replace the two gathered
    layers of `temporary_bytes`. Otherwise (stage 3) the root unit's only (embedding, final norm, head): FSDP2 does
    not reshard the root after its forward, whose backward would gather it again at once, so it stays gathered
    through each micro-batch's backward."""
    if layout.shard_degree == 1:
        return 0
    width = 2 if half_precision(plan.precision) else FP32
    every_unit = holds_every_unit_gathered(layout, plan.train)
    return (sums.unsharded_elements if every_unit else sums.root_elements) * width


def weight_copy_bytes(sums: ShapeSums, layout: Layout, plan: MemoryPlan) -> int:
    """Autocast's bf16 copies of the matmul weights (every 2-D weight but the embedding, this rank's shard),
    saved for backward. FSDP2's mixed precision makes none: it computes with the bf16 weights it gathers; nor do
    fp8's float8 layers, which save their fp32 weight itself (torchao's Float8Linear keeps the high-precision
    weight for backward and casts it to float8 again there, and bypasses autocast's cast)."""
    if not half_precision(plan.precision) or layout.fsdp:
        return 0
    return (sums.matmul_weight_elements - (sums.float8_weight_elements if plan.precision == "fp8" else 0)) * 2


def float8_temporary_bytes(sums: ShapeSums, plan: MemoryPlan, tokens: int) -> int:
    """Under fp8, the float8 copies one layer's backward holds at once (torchao's Float8Linear saves the bf16
    input and weight, not their float8 copies): of its output's gradient in two layouts (for the input's gradient
    and the weight's), of its input and of its weight, one byte per element, for the largest float8 layer of
    `tokens` local tokens; the forward's copies (input and weight) are fewer. Their scales are a few bytes."""
    if plan.precision != "fp8":
        return 0
    return max((2 * tokens * out + tokens * into + out * into for out, into in sums.float8_shapes), default=0)


def activation_bytes(
    config: PretrainedConfig, layout: Layout, plan: MemoryPlan, rank: int = 0, memo: dict | None = None
) -> int:
    """Bytes saved for backward on `rank` at the peak: one micro-batch, or under a pipeline schedule the
    micro-batches its stages hold in flight (see the module docstring).

    `memo`: a dict kept by a caller that asks for one config many times (a plan: every layout that splits the
    data-parallel ranks differently saves the same activations), keyed by everything else this reads."""
    if memo is None:
        return _activation_bytes(config, layout, plan, rank)
    pp_rank = rank_coordinates(rank, layout)["pp"] if layout.pp > 1 else 0
    train = plan.train
    key = ("activations", layout.tp, layout.cp, layout.pp, pp_rank, plan.micro_batch, plan.seq_len, plan.precision,
           plan.checkpointing, plan.grad_accum, plan.packing, plan.device_type, train.attention,
           train.pp_schedule, train.pp_stages_per_rank, plan.recomputing, layout.fsdp, train.loss,
           train.compile)  # fmt: skip
    found = memo.get(key)
    if found is None:
        found = memo[key] = _activation_bytes(config, layout, plan, rank)
    return found


def layer_bytes_per_token(config: PretrainedConfig, layout: Layout, plan: MemoryPlan) -> int:
    """Bytes one decoder layer keeps for backward per local token on a rank, under the plan's checkpointing mode
    (see the module docstring)."""
    h, i, heads, _, _ = _dims(config)
    q = heads * head_dim(config)
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    kv = kv_heads * head_dim(config)
    tp, width = layout.tp, 2 if half_precision(plan.precision) else FP32
    mode = plan.checkpointing
    if mode == "full":  # only the layer's input stays (split by sequence under tp); the rest is recomputed
        return h // tp * width
    moe = moe_dims(config)
    if mode == "selective":  # the input, the q, v, gate and down outputs, attention's output and log-sum-exp
        # and, under tp, the reduce-scatters' outputs (the saved-ops policy keeps them: no communication in the
        # recomputation): split by sequence like the input; down's output is a whole partial sum on every tp rank.
        if moe is not None:  # an MoE block runs on the whole sequence (trainer.parallel.tensor_parallel): no scatter
            mlp = _mean_over_layers(moe, config, i // tp * width, moe_bytes_per_token(moe, h, width, mode))
            split = 2 * h if tp > 1 else h
            return ((split + 2 * q + kv) // tp + h) * width + heads // tp * FP32 + mlp
        split = 3 * h if tp > 1 else h
        return ((split + 2 * q + kv + i) // tp + h) * width + heads // tp * FP32
    # A dense mask (packed rows through SDPA, or context parallelism's local queries against gathered keys) makes
    # SDPA take keys and values repeated to every query head, gathered from every cp rank (the mask itself is
    # one bias per micro-batch that every layer shares: `mask_bytes_per_token`); without one, and under flex's
    # BlockMask (a few bytes per 128 x 128 block, left out), they go unrepeated (enable_gqa), still gathered. One
    # key-value head per tp rank is repeated as a view: nothing more is saved.
    masked = takes_dense_mask(plan.train.attention, plan.device_type, layout, head_dim(config), plan.packing)
    repeated = masked and (layout.cp > 1 or kv_heads // tp > 1)
    attention = 2 * q + 2 * (q if repeated else kv) * layout.cp
    # Sequence parallelism splits what the norms keep over tp; the all-gathered norm output that the column-parallel
    # projections (or an MoE block) save stays whole (h each), except where attention and a dense MLP keep it split
    # and gather it again in backward (saves_split_inputs; not in checkpointing's recomputation, which runs without,
    # nor under autocast, whose projections save bf16 copies of it instead: no bf16 parameters without FSDP2).
    # Autocast casts the fp32 norm output once per projection (it caches casts of weights, not of activations): q, k
    # and v each save a copy, as gate and up do. Attention's log-sum-exp is fp32 whatever the compute dtype.
    # An eager layer outside checkpointing's recomputation recomputes its norms and its MLP's activation product
    # (trainer.model.recompute): the MLP keeps gate, up and the product (3i), not the activation too (4i). A
    # compiled layer keeps what inductor's partitioner chooses: priced as the plain layer, which keeps more
    # (tests/test_compile.py, tests/test_sp_saves_split.py measure compiled layers under it).
    autocast = half_precision(plan.precision) and not layout.fsdp
    recomputed = recomputes_elementwise(plan)
    norms = 2 * rms_norm_elements(h, plan.precision, recomputed, fp32_input=autocast)
    norms += qk_norm_elements(config, q, kv, plan.precision, recomputed)
    split = saves_split_inputs(mode) and not (plan.recomputing or autocast)
    gated = (3 if recomputed else 4) * i
    lse = heads * FP32 // width
    attention_inputs = 3 if autocast else 1  # copies of the gathered norm output that attention's projections keep
    if moe is not None:
        sparse = moe_bytes_per_token(moe, h, width, mode, recomputed)
        mlp = _mean_over_layers(moe, config, gated // tp * width, sparse)
        return ((norms + attention + lse + h * split) // tp + h * (attention_inputs + 1 - split)) * width + mlp
    gated_inputs = 2 if autocast else 1
    whole_inputs = (attention_inputs + gated_inputs) * h * (1 - split)
    return ((norms + attention + gated + lse + 2 * h * split) // tp + whole_inputs) * width


def recomputes_elementwise(plan: MemoryPlan) -> bool:
    """Whether the model's norms and gated products keep only their inputs (trainer.model.recompute), as
    trainer.parallel.activation_checkpointing sets them up: without checkpointing and without compile; not in
    checkpointing's recomputation of a plain layer."""
    return plan.checkpointing == "none" and not plan.recomputing and not plan.train.compile


def rms_norm_elements(h: int, precision: str, recomputed: bool, fp32_input: bool = False, rsqrts: int = 1) -> int:
    """What one RMSNorm of width `h` keeps for backward per token, in units of the compute dtype. transformers'
    norm upcasts its input to fp32 and keeps that (a new fp32 tensor from bf16 inputs), its rsqrt (fp32; `rsqrts`
    per token: one per head for per-head norms), and the normalised value the weight multiplies (in the input's
    dtype); recomputed (trainer.model.recompute), only its input. `fp32_input`: under autocast the layer norms'
    inputs are fp32 (the residual stream adds bf16 outputs to the fp32 embedding), two units each."""
    fp32 = 2 if half_precision(precision) else 1  # units of the compute dtype per fp32 value
    in_input_dtype = h * (fp32 if fp32_input else 1)
    if recomputed:
        return in_input_dtype
    return h * fp32 + in_input_dtype + rsqrts * fp32  # the upcast input, the normalised value, the rsqrt


# Models whose attention normalises each head's query and key (RMSNorm over head_dim) before rotary: transformers'
# Qwen3 and Qwen3-MoE (q_norm, k_norm).
QK_NORM_MODEL_TYPES = frozenset({"qwen3", "qwen3_moe"})


def qk_norm_elements(config: PretrainedConfig, q: int, kv: int, precision: str, recomputed: bool = False) -> int:
    """Per token and layer, in units of the compute dtype, what per-head query and key norms keep for backward (as
    the layer's RMSNorms keep theirs, rms_norm_elements, with one rsqrt per head; their inputs, the projections'
    outputs, are in the compute dtype); 0 for models without them."""
    if getattr(config, "model_type", None) not in QK_NORM_MODEL_TYPES:
        return 0
    heads, kv_heads = q // head_dim(config), kv // head_dim(config)
    return rms_norm_elements(q, precision, recomputed, rsqrts=heads) + rms_norm_elements(
        kv, precision, recomputed, rsqrts=kv_heads
    )


def moe_bytes_per_token(moe: MoeDims, hidden: int, width: int, mode: str, recomputed: bool = False) -> int:
    """What one MoE layer keeps for backward per local token in place of a dense MLP (see the module docstring):
    `width` the compute dtype's bytes; the router's probabilities, top-k values and pair weights are fp32, indices
    int64. Under selective checkpointing each pair keeps its expert's two matmul outputs. `recomputed`: a shared
    expert, a gated MLP, recomputes its activation product (trainer.model.recompute) and keeps 3 I, not 4 I."""
    k, expert = moe.top_k, moe.expert_intermediate
    if mode == "selective":  # every other matmul's output, counted on from attention's four (q and v kept)
        if moe.shared_first:  # shared gate (kept), up, down (kept), router, then each expert's gate-up (kept), down
            return (moe.shared_intermediate + 2 * k * expert + 1) * width
        # router (kept), each expert's gate-up and down (kept), then a shared expert's gate, up (kept) and down; the
        # dense layer's terms already hold one down output (h)
        return ((k - 1) * hidden + moe.experts + moe.shared_intermediate) * width
    pairs = k * (2 * hidden + 4 * expert) * width
    router = (moe.experts + 2 * k + 1) * FP32 + 3 * k * 8
    return pairs + router + (3 if recomputed else 4) * moe.shared_intermediate * width


def _mean_over_layers(moe: MoeDims, config: PretrainedConfig, dense: int, sparse: int) -> int:
    """Per layer, averaged over the model's layers: MoE layers keep `sparse`, the others (DeepSeek-V3's first
    three) their dense MLP's `dense`."""
    layers = config.num_hidden_layers
    return (moe.moe_layers * sparse + (layers - moe.moe_layers) * dense) // layers


def dispatch_buffer_bytes(config: PretrainedConfig, layout: Layout, tokens: int, precision: str) -> int:
    """Expert parallelism's buffers of one MoE layer at once: the rows a rank sends and those it receives, top_k
    per local token each, in the compute dtype (autograd saves neither: the all-to-all's Function keeps nothing);
    nothing without ep."""
    moe = moe_dims(config) if layout.ep > 1 else None
    if moe is None:
        return 0
    return 2 * moe.top_k * tokens * config.hidden_size * (2 if half_precision(precision) else FP32)


def mask_bytes_per_token(config: PretrainedConfig, layout: Layout, plan: MemoryPlan, saved: bool = True) -> int:
    """The dense mask's bias per local token, once per micro-batch (trainer.data.packing.mask_bias: every layer saves
    the same one): a row spanning every key of the sequence, in the compute dtype; nothing without a dense mask.
    Autograd saves it without activation checkpointing (`saved`); with it, the checkpoints hold it as an input of
    every layer for the recomputation: a temporary of the whole step (not `saved`)."""
    if saved != (plan.checkpointing == "none"):
        return 0
    masked = takes_dense_mask(plan.train.attention, plan.device_type, layout, head_dim(config), plan.packing)
    return plan.seq_len * (2 if half_precision(plan.precision) else FP32) if masked else 0


def _activation_bytes(config: PretrainedConfig, layout: Layout, plan: MemoryPlan, rank: int) -> int:
    h, _, _, layers, _ = _dims(config)
    tokens = plan.micro_batch * plan.seq_len // layout.cp
    width = 2 if half_precision(plan.precision) else FP32
    per_layer = layer_bytes_per_token(config, layout, plan)
    # Rotary cos and sin: per token from explicit position ids (packed rows, cp), shared by a batch's rows otherwise;
    # under activation checkpointing they are the checkpointed layers' inputs, not saved by any of them.
    mask_and_rotary = 2 * head_dim(config) * width // (1 if plan.packing or layout.cp > 1 else plan.micro_batch)
    mask_and_rotary *= plan.checkpointing == "none"
    # The final norm (what it keeps split by sequence under tp, rms_norm_elements; its output gathered whole for
    # the head) and the chunked loss's log-sum-exp; the whole loss (a pipeline's last stage, train.loss whole) keeps
    # the fp32 log-softmax over the vocabulary.
    columns = logit_columns(config, layout)  # split by vocabulary under tp
    autocast = half_precision(plan.precision) and not layout.fsdp
    recomputed = recomputes_elementwise(plan)
    final_norm = rms_norm_elements(h, plan.precision, recomputed, fp32_input=autocast)
    head = (final_norm // layout.tp + h) * width + (columns * FP32 if whole_logits(layout, plan.train) else FP32)
    if layout.pp == 1:
        mask_and_rotary += mask_bytes_per_token(config, layout, plan)
        return tokens * (layers * per_layer + head + 8 + mask_and_rotary) + FP32
    stages_per_rank = plan.train.pp_stages_per_rank
    pp_rank = rank_coordinates(rank, layout)["pp"]
    stage_ids = local_stages(pp_rank, layout.pp, stages_per_rank)
    num_stages = layout.pp * stages_per_rank
    layers_here = _layers_in_stages(layers, num_stages, tuple(stage_ids))
    # Each stage rebuilds the mask and rotary embedding; its first layer's input (split by sequence under tp)
    # arrives from the previous stage.
    once = len(stage_ids) * (mask_and_rotary + mask_bytes_per_token(config, layout, plan) - h // layout.tp * width)
    once += 8 if 0 in stage_ids else 0  # token ids for the embedding's backward
    once += head if num_stages - 1 in stage_ids else 0
    in_flight = in_flight_micro_batches(plan.train.pp_schedule, layout.pp, stages_per_rank, plan.grad_accum, pp_rank)
    return int(in_flight * tokens * (layers_here * per_layer + once))


def temporary_bytes(
    config: PretrainedConfig, layout: Layout, plan: MemoryPlan, sums: ShapeSums, memo: dict | None = None
) -> int:
    """The logits and their gradient, a recomputed layer under activation checkpointing (under selective, only
    what it did not keep; `memo`: see activation_bytes) and FSDP's gathered layers."""
    layers = config.num_hidden_layers
    tokens = plan.micro_batch * plan.seq_len // layout.cp
    logits = loss_temporary_bytes(config, layout, tokens, plan.precision, whole_logits(layout, plan.train))
    recompute = 0
    if plan.checkpointing != "none":
        # One whole layer's activations of this micro-batch, as a single rank of this tp and cp saves them.
        key = ("recompute", layout.tp, layout.cp, plan.micro_batch, plan.seq_len, plan.precision, plan.packing,
               plan.device_type, plan.train.attention)  # fmt: skip
        recompute = memo.get(key) if memo is not None else None
        if recompute is None:
            # One layer's share of a whole model's activations: the loss's own (the whole loss's log-softmax) is no
            # layer's, so the share is taken of the chunked loss's, whatever the run's loss.
            chunked = dataclasses.replace(plan.train, loss="chunked")
            full = dataclasses.replace(plan, checkpointing="none", grad_accum=1, recomputing=True, train=chunked)
            one_rank = Layout(dp_replicate=1, tp=layout.tp, cp=layout.cp)
            recompute = _activation_bytes(config, one_rank, full, 0) // layers
            if memo is not None:
                memo[key] = recompute
        if plan.checkpointing == "selective":  # what it kept needs no recomputing
            recompute = max(0, recompute - tokens * layer_bytes_per_token(config, layout, plan))
    # FSDP's two gathered layers: tp splits their dense part; their experts stay whole on every tp rank, chunked over
    # the ranks ep leaves (expert_shard_degree).
    shards, expert_shards = layout.shard_degree, layout.expert_shard_degree
    per_element = 2 * (2 if half_precision(plan.precision) else FP32)  # FSDP2's MixedPrecisionPolicy gathers bf16
    dense = (sums.layer_elements - sums.layer_expert_elements) // layout.tp
    gathered = dense * per_element * (shards - 1) // shards
    gathered += sums.layer_expert_elements * per_element * (expert_shards - 1) // expert_shards
    if holds_every_unit_gathered(layout, plan.train):  # all of them held already (gathered_parameters)
        gathered = 0
    held_mask = tokens * mask_bytes_per_token(config, layout, plan, saved=False)
    # The output head's weight gradient (its tp rank's rows), made whole by its backward before it is added into the
    # accumulated one (or reduce-scattered): the largest single gradient (as large as the embedding's), in the
    # compute dtype under FSDP2's mixed precision, else fp32.
    gradient_width = 2 if half_precision(plan.precision) and layout.fsdp else FP32
    head_gradient = logit_columns(config, layout) * config.hidden_size * gradient_width
    dispatch = dispatch_buffer_bytes(config, layout, tokens, plan.precision)
    float8 = float8_temporary_bytes(sums, plan, tokens)
    return logits + recompute + gathered + held_mask + head_gradient + dispatch + float8


def loss_temporary_bytes(
    config: PretrainedConfig, layout: Layout, tokens: int, precision: str = "fp32", whole: bool = False
) -> int:
    """The loss's peak beyond what it saves, for `tokens` local tokens: the chunked loss (trainer.model.loss) holds one
    chunk's fp32 logits and log-sum-exp's exponentials of them at once (its backward works on the logits in place),
    and under bf16 the matmul's bf16 logits before the upcast; the whole loss (`whole`: whole_logits) the plain loss's
    whole fp32 logits and their gradient. Under tensor parallelism, of the rank's vocabulary columns
    (`logit_columns`)."""
    vocab = logit_columns(config, layout)
    if whole:
        return 2 * tokens * vocab * FP32
    return min(tokens, chunk_tokens(vocab)) * vocab * (2 * FP32 + (2 if half_precision(precision) else 0))


def whole_logits(layout: Layout, train: TrainSpec) -> bool:
    """Whether the loss runs over a micro-batch's whole logits at once: a pipeline's last stage always
    (trainer.parallel.pipeline.StepLoss), elsewhere under train.loss whole; otherwise chunk by chunk."""
    return layout.pp > 1 or train.loss == "whole"


@functools.cache  # a plan asks for the same few stage sets thousands of times
def _layers_in_stages(layers: int, num_stages: int, stage_ids: tuple[int, ...]) -> int:
    return sum(1 for layer in range(layers) if stage_of_layer(layer, layers, num_stages) in stage_ids)


def _dims(config: PretrainedConfig) -> tuple[int, int, int, int, int]:
    intermediate = getattr(config, "intermediate_size", None) or 4 * config.hidden_size
    return config.hidden_size, intermediate, config.num_attention_heads, config.num_hidden_layers, config.vocab_size


_LAYER_INDEX = re.compile(r"\.layers\.(\d+)\.")


@functools.lru_cache(maxsize=1024)  # a plan asks for each module's style once per layout and rank
def _tp_style(module: str, styles: tuple[tuple[str, str], ...]) -> str | None:
    """The tensor-parallel style of `module` in the plan `styles` ((pattern, style) pairs, in the plan's order)."""
    for pattern, style in styles:
        if fnmatch.fnmatchcase(module, f"*{pattern}"):
            return style
    return None


def _chunk_size(size: int, parts: int, index: int) -> int:
    """torch.chunk's split: ceil-sized pieces, the last ones shorter or empty."""
    piece = -(-size // parts)
    return max(0, min(piece, size - piece * index))
