"""Tensor parallelism with sequence parallelism: the decoder's layers split over the tp ranks as the model's own
`base_model_tp_plan` from transformers says (which layers split by columns, which by rows), so every architecture
that declares one works; between the split modules, the residual stream is split by sequence (Korthikanti et al.
2022, "Reducing Activation Recomputation in Large Transformer Models"; torchtitan's apply_tp does the same).

Sequence parallelism is always on with tp > 1, as in torchtitan and Megatron: it computes the same numbers, moves the
same bytes in forward (a row-parallel output's all-reduce becomes a reduce-scatter, the next split module's input an
all-gather) and fewer in backward (the gradients of a module's column-parallel inputs are summed before one
reduce-scatter rather than all-reduced one by one), and every rank keeps only its 1/tp of the sequence for
everything outside the split modules: the norms' inputs and outputs, the residual stream, what a pipeline stage
sends. Its one constraint is a sequence (per context-parallel rank) divisible by tp (`check_sequence_parallel`).

Per decoder layer:
- each direct child of the layer that is a norm (input_layernorm, post_attention_layernorm, gemma2's extra ones):
  torch's SequenceParallel, its input and output [batch, seq/tp, hidden]; its weight is a replicated DTensor whose
  gradient is a partial sum on each rank (DTensor's Partial): FSDP2 sums it over tp before its reduce-scatter, and
  without FSDP2 the step sums all of them at its end in one all-reduce (`reduce_partial_gradients`, as Megatron
  does once per step), so that the gradient norm and the optimizer see whole gradients;
- each direct child holding split modules (self_attn, mlp): its input all-gathered to the whole sequence
  (Shard(1) -> Replicate, as torchtitan's PrepareModuleInput), handed on as a DTensor, so that the column-parallel
  projections' input gradients stay partial sums, added up before one reduce-scatter in backward; the row-parallel
  projections reduce-scatter their partial sums back to the sequence split (RowwiseParallel with Shard(1) outputs,
  as local tensors: the residual additions stay plain tensors); where nothing recomputes the layer
  (`saves_split_inputs`), the column-parallel projections keep the rank's split input for their weight gradients,
  not the gathered one, and backward all-gathers it again, once per child (as Megatron-LM does, Korthikanti et al.
  2022 section 4.2.2): `_SplitSaved`;
- modules inside attention that the plan keeps whole although they see only a rank's heads (Qwen3's q_norm and
  k_norm, GRAD_ALLREDUCE) get their gradients summed over tp after the step's last backward
  (`sum_partial_gradients`);
- any other child with parameters runs on the whole sequence (gathered in, split out), so no plain parameter ever
  sees only part of the sequence (its gradient would then differ between tp ranks).
Around the layers, the embedding and the output head are split by vocabulary (Megatron's and torchtitan's
vocab-parallel embedding and head): each tp rank holds 1/tp of their rows (a tied head shares the embedding's one
split weight). The embedding looks up the ids its rows hold, zeros elsewhere, and an all-reduce sums the ranks'
parts into the whole sequence's hidden states (`_VocabParallelEmbedding`); decoder layer 0 splits them
(a local slice), so transformers builds the mask and rotary embedding from the whole sequence as before. The final
norm is sequence parallel; the output head gathers its input to the whole sequence and computes its rows' logits,
[tokens x vocab/tp]: trainer.model.loss's chunked loss takes them a chunk at a time with a log-sum-exp over the tp
ranks (`chunked_cross_entropy_sum` on a split weight), train.loss whole takes the head's split logits through torch's
loss_parallel (trainer.rank.step). Under a pipeline, stage 0 holds layer 0 and the embedding, the last stage the
norm and head, whose split logits it hands the schedule's loss as plain tensors (`local_logits`), which takes them
with the same log-sum-exp over the tp ranks (trainer.model.loss.vocab_parallel_cross_entropy_sum); the stages
between take and send the sequence split as it is.
"""

from __future__ import annotations

import fnmatch
import functools
import types
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    ParallelStyle,
    RowwiseParallel,
    SequenceParallel,
    parallelize_module,
)
from torch.distributed.tensor.placement_types import Placement

from trainer.config import checkpointing_mode
from trainer.layout import LayoutError, tensor_parallel_plan
from trainer.model.moe import is_router
from trainer.model.parameters import describe_parameters

if TYPE_CHECKING:
    from transformers import PretrainedConfig

SEQUENCE_DIM = 1  # [batch, seq, hidden]
# Modules the plan keeps whole on every rank although they see only that rank's heads (Qwen3's q_norm and k_norm):
# each rank's gradient is then its heads' share, and the shares must be summed over the tensor-parallel ranks.
GRAD_ALLREDUCE = "replicated_with_grad_allreduce"


def saves_split_inputs(checkpointing: bool | str) -> bool:
    """Whether the split children keep their split input for backward and all-gather it again there rather than
    keep the gathered one: where nothing recomputes the layer (under full and selective checkpointing the
    recomputation gathers again already). Eager through saved-tensor hooks (`_SplitSaved`), compiled through a
    checkpoint around the gather that the partitioner honours (`_recomputed_in_backward`). Under autocast (bf16
    without FSDP2) the projections save bf16 copies of the gathered input, not it: nothing changes there."""
    return checkpointing_mode(checkpointing) == "none"


def apply_tensor_parallel(
    model: torch.nn.Module, tp_mesh: DeviceMesh, save_split_inputs: bool = False, local_logits: bool = False
) -> None:
    """Split the decoder's layers over `tp_mesh` as the model's own tensor-parallel plan says, with the residual
    stream split by sequence between them, and the embedding and head by vocabulary (see the module docstring).
    `save_split_inputs`: see `saves_split_inputs`, which says where the trainer asks for it; `local_logits`: the
    head's logits (split by vocabulary) as this rank's plain tensor (a pipeline's last stage), else a DTensor."""
    plan = tensor_parallel_plan(model.config)
    base = model.get_decoder() if hasattr(model, "get_decoder") else model.model
    split = {}
    for name, _ in base.named_modules():
        style = next((s for pattern, s in plan.items() if fnmatch.fnmatchcase(name, pattern)), None)
        if style is not None:
            split[name] = ColwiseParallel() if style == "colwise" else RowwiseParallel(output_layouts=Shard(1))
    if not split:
        raise ValueError(f"{model.config.model_type} declares no tensor-parallel plan")
    layers = base.layers.items() if isinstance(base.layers, torch.nn.ModuleDict) else enumerate(base.layers)
    for index, layer in layers:
        parallelize_module(layer, tp_mesh, _sequence_plan(layer, f"layers.{index}.", split, save_split_inputs))
        if str(index) == "0":  # the first layer of the model (a pipeline's stage 0): split the whole sequence
            parallelize_module(layer, tp_mesh, _Resequence(Replicate(), Shard(SEQUENCE_DIM), local_output=True))
    parallelize_module(base, tp_mesh, split)
    summed = [
        p for p, style in (getattr(model.config, "base_model_tp_plan", None) or {}).items() if style == GRAD_ALLREDUCE
    ]
    for name, module in base.named_modules():
        if any(fnmatch.fnmatchcase(name, pattern) for pattern in summed):
            module.tp_grad_sum_group = tp_mesh.get_group()
    if getattr(base, "norm", None) is not None:
        parallelize_module(base.norm, tp_mesh, SequenceParallel(sequence_dim=SEQUENCE_DIM, use_local_output=True))
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else model.lm_head
    _split_vocabulary(getattr(base, "embed_tokens", None), head, tp_mesh, local_logits)


def _split_vocabulary(
    embedding: torch.nn.Module | None, head: torch.nn.Module | None, tp_mesh: DeviceMesh, local_logits: bool
) -> None:
    """The embedding and the output head (either may be absent: a pipeline stage's) split by vocabulary rows; a
    tied pair keeps one weight, split once (both styles split the rows, dim 0, alike)."""
    tied = embedding is not None and head is not None and head.weight is embedding.weight
    if embedding is not None:
        parallelize_module(embedding, tp_mesh, _VocabParallelEmbedding())
    if head is None:
        return
    if getattr(head, "bias", None) is not None:  # the chunked loss takes the weight's rows alone
        raise ValueError("an output head with a bias cannot be split by vocabulary")
    parallelize_module(head, tp_mesh, _VocabParallelHead(local_logits))
    if tied:
        head.weight = embedding.weight


class _VocabParallelEmbedding(ParallelStyle):
    """The input embedding's rows split by vocabulary (Shard(0), as torch's RowwiseParallel splits an embedding),
    looked up as Megatron's VocabParallelEmbedding does: each rank the ids its rows hold, zeros for the others, and
    one all-reduce sums the ranks' parts into the whole sequence's hidden states. Not DTensor's own embedding op:
    its backward gives every rank a gradient of the whole vocabulary (replicated), not of its rows."""

    def _apply(self, module: torch.nn.Module, device_mesh: DeviceMesh) -> torch.nn.Module:
        plain = type(module).forward is torch.nn.Embedding.forward or hasattr(module, "embed_scale")  # gemma's scaled
        if not isinstance(module, torch.nn.Embedding) or not plain or module.max_norm is not None:
            raise ValueError(f"{type(module).__name__}: only a plain (or scaled) embedding is split by vocabulary")
        weight = module.weight
        module.weight = torch.nn.Parameter(distribute_tensor(weight, device_mesh, [Shard(0)]), weight.requires_grad)
        module.forward = types.MethodType(_vocab_parallel_lookup, module)
        return module


def _vocab_parallel_lookup(module: torch.nn.Embedding, ids: torch.Tensor) -> torch.Tensor:
    """The embedding of `ids` (whole, the same on every tp rank) from the rank's rows, summed over the ranks; a
    scaled embedding's scale applied after, as its own forward does."""
    weight = module.weight
    mesh, rows = weight.device_mesh, weight.to_local()
    first = -(-weight.shape[0] // mesh.size()) * mesh.get_local_rank()  # torch.chunk's pieces, in rank order
    local = ids - first
    elsewhere = (local < 0) | (local >= rows.shape[0])
    padding = module.padding_idx - first if module.padding_idx is not None else None
    padding = padding if padding is not None and 0 <= padding < rows.shape[0] else None
    part = F.embedding(local.masked_fill(elsewhere, 0), rows, padding)
    part = part.masked_fill(elsewhere.unsqueeze(-1), 0)
    whole = DTensor.from_local(part, mesh, (Partial(),), run_check=False).redistribute(mesh, (Replicate(),))
    hidden = whole.to_local()
    scale = getattr(module, "embed_scale", None)
    return hidden if scale is None else hidden * scale.to(hidden.dtype)


class _VocabParallelHead(ColwiseParallel):
    """ColwiseParallel for the output head: its input gathered from the sequence split, its weight's rows split,
    its logits [..., vocab/tp] a DTensor split on the last dimension (with `local_logits`, its local tensor). Where
    trainer.model.loss runs the head as the chunked loss, its output is the loss sum, a plain tensor: passed on."""

    def __init__(self, local_logits: bool) -> None:
        super().__init__(input_layouts=Shard(SEQUENCE_DIM), output_layouts=Shard(-1), use_local_output=local_logits)

    @staticmethod
    def _prepare_output_fn(output_layouts, use_local_output, mod, outputs, device_mesh):
        if not isinstance(outputs, DTensor):
            return outputs
        return ColwiseParallel._prepare_output_fn(output_layouts, use_local_output, mod, outputs, device_mesh)


def _sequence_plan(layer: torch.nn.Module, prefix: str, split: dict, save_split_inputs: bool) -> dict:
    """The sequence-parallel styles of one decoder layer's direct children (see the module docstring)."""
    styles = {}
    for name, child in layer.named_children():
        if "norm" in name.lower() or "norm" in type(child).__name__.lower():
            styles[name] = SequenceParallel(sequence_dim=SEQUENCE_DIM, use_local_output=True)
        elif any(path.startswith(f"{prefix}{name}.") for path in split):
            # Not an MoE block (whose router and expert dispatch save copies of their own): attention, a dense MLP.
            save_split = save_split_inputs and not any(is_router(module) for module in child.modules())
            styles[name] = _Resequence(Shard(SEQUENCE_DIM), Replicate(), False, save_split=save_split)
        elif any(True for _ in child.parameters()):
            styles[name] = _Resequence(Shard(SEQUENCE_DIM), Replicate(), local_output=True, split_output=True)
    return styles


class _Resequence(ParallelStyle):
    """Redistribute a module's hidden states (its first positional argument, or the `hidden_states` keyword, as
    transformers' attention takes them) from one placement over the sequence to another, before it runs; with
    `split_output`, its whole-sequence output back to the sequence split after; with `save_split`, what the module
    saves of its gathered input is saved as the split input while it runs (`_SplitSaved`)."""

    def __init__(
        self, given: Placement, wanted: Placement, local_output: bool, split_output: bool = False, save_split=False
    ):
        super().__init__()
        self.given, self.wanted, self.local_output, self.split_output = given, wanted, local_output, split_output
        self.save_split = save_split

    def _apply(self, module: torch.nn.Module, device_mesh: DeviceMesh) -> torch.nn.Module:
        running: list[torch.autograd.graph.saved_tensors_hooks] = []  # the hooks of the call running now

        def before(_, args: tuple, kwargs: dict):
            given = args[0] if args else kwargs.get("hidden_states")
            redistribute = self._redistribute
            if self.save_split and torch.is_grad_enabled() and torch.compiler.is_compiling():
                redistribute = _recomputed_in_backward(self._redistribute)
            if args:
                args = (redistribute(args[0], device_mesh), *args[1:])
            elif "hidden_states" in kwargs:
                kwargs = {**kwargs, "hidden_states": redistribute(kwargs["hidden_states"], device_mesh)}
            gathered = args[0] if args else kwargs.get("hidden_states")
            # Not under autocast: its projections save bf16 copies of the gathered input, not the input itself.
            saving = self.save_split and torch.is_grad_enabled() and isinstance(gathered, DTensor)
            if saving and not torch.compiler.is_compiling() and not torch.is_autocast_enabled(gathered.device.type):
                running.append(_SplitSaved(given, gathered).hooks())
                running[-1].__enter__()
            return args, kwargs

        def done(*_) -> None:
            if running:
                running.pop().__exit__(None, None, None)

        def after(_, args: tuple, output: torch.Tensor) -> torch.Tensor:
            whole = DTensor.from_local(output, device_mesh, (Replicate(),), run_check=False)
            return whole.redistribute(device_mesh, (Shard(SEQUENCE_DIM),)).to_local()

        module.register_forward_pre_hook(before, with_kwargs=True)
        if self.save_split:
            module.register_forward_hook(done, always_call=True)
        if self.split_output:
            module.register_forward_hook(after)
        return module

    def _redistribute(self, tensor: torch.Tensor, device_mesh: DeviceMesh) -> torch.Tensor:
        if not isinstance(tensor, DTensor):
            tensor = DTensor.from_local(tensor, device_mesh, (self.given,), run_check=False)
        tensor = tensor.redistribute(device_mesh, (self.wanted,))
        return tensor.to_local() if self.local_output else tensor


def _recomputed_in_backward(gather):
    """`gather` under a checkpoint whose policy recomputes every operation in it: in a compiled graph the
    partitioner then saves its split input and reruns the all-gather in backward for whatever needs the gathered
    tensor, instead of saving it (as SimpleFSDP, torchtitan's compiler-driven FSDP, does for parameters). Eager it
    changes nothing (its operations save nothing that backward needs): `_SplitSaved` is the eager path."""
    # torch's checkpointing only where a compiled layer asks for it
    from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

    def recompute_all(ctx, func, *args, **kwargs) -> CheckpointPolicy:
        return CheckpointPolicy.MUST_RECOMPUTE

    def gathered(tensor: torch.Tensor, mesh: DeviceMesh) -> torch.Tensor:
        context = functools.partial(create_selective_checkpoint_contexts, recompute_all)
        return checkpoint(gather, tensor, mesh, use_reentrant=False, context_fn=context)

    return gathered


class _SplitSaved:
    """Saved-tensor hooks for one call of a split child (self_attn, mlp): a tensor saved for backward that is the
    gathered input or a view of it (what the column-parallel projections save for their weight gradients) is saved
    as the rank's split input instead, 1/tp of it, and all-gathered again when backward first unpacks it, once for
    all the projections that saved it, freed after the last. Everything else goes to the hooks that were active
    around the call (trainer.rank.memory's counting), or is kept as it is; the split input goes to them too, so
    the bytes they count are what this saves."""

    def __init__(self, split: torch.Tensor, gathered: DTensor) -> None:
        self.split = split.to_local() if isinstance(split, DTensor) else split
        self.mesh = gathered.device_mesh
        self.storage = gathered._local_tensor.untyped_storage().data_ptr()
        # The hooks active around the call (trainer.rank.memory's counting), which these hand everything on to:
        # torch runs only the innermost saved-tensor hooks.
        outer = torch._C._autograd._top_saved_tensors_default_hooks(False)
        self.outer_pack, self.outer_unpack = outer if outer is not None else (lambda t: t, lambda t: t)
        self.unpacked = 0  # views of the gathered input that backward has not unpacked yet
        self.whole: torch.Tensor | None = None  # the gathered input again, while backward still needs it

    def hooks(self) -> torch.autograd.graph.saved_tensors_hooks:
        return torch.autograd.graph.saved_tensors_hooks(self.pack, self.unpack)

    def pack(self, tensor: torch.Tensor) -> tuple:
        local = tensor._local_tensor if isinstance(tensor, DTensor) else tensor
        try:
            foreign = local.untyped_storage().data_ptr() != self.storage
        except (RuntimeError, NotImplementedError):  # a storage freed (FSDP2's resharded weights) or none
            foreign = True
        if foreign:
            return False, self.outer_pack(tensor)
        self.unpacked += 1
        view = (local.size(), local.stride(), local.storage_offset())
        dtensor = (tensor.placements, tensor.shape, tensor.stride()) if isinstance(tensor, DTensor) else None
        return True, (self.outer_pack(self.split), view, dtensor)

    def unpack(self, packed: tuple) -> torch.Tensor:
        is_view, saved = packed
        if not is_view:
            return self.outer_unpack(saved)
        split, (size, stride, offset), dtensor = saved
        split = self.outer_unpack(split)
        if self.whole is None:
            sequence = DTensor.from_local(split, self.mesh, (Shard(SEQUENCE_DIM),), run_check=False)
            self.whole = sequence.redistribute(self.mesh, (Replicate(),)).to_local()
        local = self.whole.as_strided(size, stride, offset)
        self.unpacked -= 1
        if not self.unpacked:
            self.whole = None
        if dtensor is None:
            return local
        placements, shape, dstride = dtensor
        return DTensor.from_local(local, self.mesh, placements, run_check=False, shape=shape, stride=dstride)


def check_sequence_parallel(tp: int, cp: int, seq_len: int) -> None:
    """Refuse a sequence that tp ranks cannot split evenly (per context-parallel rank), in one line."""
    if tp > 1 and (seq_len // cp) % tp:
        raise LayoutError(
            f"layout tp={tp}: data.seq_len {seq_len}{f' / cp={cp}' if cp > 1 else ''} must be divisible by tp "
            "(sequence parallelism splits each sequence over the tp ranks)"
        )


def check_vocabulary_split(tp: int, config: PretrainedConfig) -> None:
    """Refuse, in one line, a model whose output head has a bias under tp > 1: the head is split by vocabulary and
    the losses take its weight's rows alone (Phi's lm_head has one)."""
    if tp == 1:
        return
    shapes, _ = describe_parameters(config)  # the model's parameters, from a meta-device build
    vocab = config.vocab_size
    if any(shape == (vocab,) and ".layers." not in name for name, shape in shapes):
        raise LayoutError(
            f"layout tp={tp}: {config.model_type}'s output head has a bias, which the vocabulary-split head "
            "(tensor parallelism) does not take"
        )


def reduce_partial_gradients(parameters: list[torch.nn.Parameter]) -> None:
    """Sum the gradients left as partial sums over the tensor-parallel ranks (the norms' weights under sequence
    parallelism without FSDP2) in one all-reduce per mesh, and make them replicated: what a step does once its
    micro-batches' backward passes are done. Nothing where no gradient is partial."""
    by_mesh: dict = {}
    for p in parameters:
        grad = p.grad
        if isinstance(grad, DTensor) and any(placement.is_partial() for placement in grad.placements):
            by_mesh.setdefault(grad.device_mesh, []).append(p)
    for mesh, params in by_mesh.items():
        if mesh.ndim != 1:
            raise ValueError(f"partial gradients on a {mesh.ndim}-D mesh: only a tensor-parallel mesh leaves them")
        locals_ = [p.grad.to_local() for p in params]
        flat = torch.cat([g.reshape(-1) for g in locals_])
        dist.all_reduce(flat, group=mesh.get_group())
        for p, piece in zip(params, flat.split([g.numel() for g in locals_]), strict=True):
            p.grad = DTensor.from_local(piece.view_as(p.grad.to_local()), mesh, (Replicate(),), run_check=False)


def sum_partial_gradients(model: torch.nn.Module) -> None:
    """Sum over the tensor-parallel ranks the gradients of the modules the plan marks GRAD_ALLREDUCE (after the
    step's last backward, before they are read; FSDP2's shards of them sit at the same offsets on every
    tensor-parallel rank, so their local parts add up)."""
    for module in model.modules():
        group = getattr(module, "tp_grad_sum_group", None)
        for parameter in module.parameters(recurse=False) if group is not None else ():
            if parameter.grad is not None:
                grad = parameter.grad
                torch.distributed.all_reduce(grad.to_local() if hasattr(grad, "to_local") else grad, group=group)
