"""Activation checkpointing: each decoder layer recomputed in backward, whole (full) or all but the outputs
torchtitan's per-op policy saves (selective), or, without it (none), only the element-wise norms and gated products
of eager layers (trainer.model.recompute); and what selective checkpointing's cache keeps reported to the memory
measurement that runs around it (trainer.rank.memory)."""

from __future__ import annotations

import collections
import functools
import types

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from trainer.config import checkpointing_mode
from trainer.model.recompute import recompute_elementwise

# Where memory kept for backward outside autograd's saved tensors (selective checkpointing's cache) is reported:
# trainer.rank.memory's countings push themselves here while they run, innermost last (only the innermost
# saved-tensor hooks run, so only the innermost counting hears of the cache too).
countings: list = []


def kept_counting():
    """The counting of trainer.rank.memory running now (the innermost), if any: what selective checkpointing's
    cache keeps is reported to it, as its saved-tensor hooks report what autograd saves."""
    return countings[-1] if countings else None


def enable_activation_checkpointing(model: torch.nn.Module, mode: bool | str = "full", compiled: bool = False) -> None:
    """Recompute each decoder layer in backward: all of it (full), or all but the outputs that
    `selective_checkpoint_context` saves (selective); none reruns only the norms and gated products in backward
    (trainer.model.recompute), and only where the model will not be `compiled` (inductor's partitioner chooses what
    compiled code keeps).

    Each layer's own forward is wrapped in torch.utils.checkpoint (`_checkpointed_forward`), set on the layer, so
    that compiling the layer afterwards (trainer.parallel.compile.compile_layers) compiles the checkpoint with it:
    dynamo traces the checkpoint and its selective policy into the layer's graph (and inductor fuses the
    recomputation) instead of running a compiled layer under the policy's dispatch modes, where dynamo skips the
    frame and the layer runs eagerly. (transformers' own gradient checkpointing wraps the layer's __call__ in some
    releases, its forward in others.) FSDP2's hooks stay outside: they are module hooks, not part of forward.
    Parameter names do not change."""
    mode = checkpointing_mode(mode)
    if mode == "none":
        if not compiled:
            recompute_elementwise(model)
        return
    context_fn = selective_checkpoint_context if mode == "selective" else None
    for layer in model.get_decoder().layers:
        layer._checkpoint_context_fn = context_fn
        # Bound to the layer (a deep copy rebinds it to the copy); the class's forward is looked up at each call.
        layer.forward = types.MethodType(_checkpointed_forward, layer)


def _checkpointed_forward(layer: torch.nn.Module, *args, **kwargs):
    """The layer's class forward under non-reentrant torch.utils.checkpoint (plain where nothing needs a
    backward: evaluation, no_grad)."""
    # torch's checkpointing (and flex) only for a checkpointed model
    from torch.utils.checkpoint import checkpoint

    forward = functools.partial(type(layer).forward, layer)
    if not (layer.training and torch.is_grad_enabled()):
        return forward(*args, **kwargs)
    if layer._checkpoint_context_fn is None:  # full: checkpoint's own default (dynamo takes no other for it)
        return checkpoint(forward, *args, use_reentrant=False, **kwargs)
    return checkpoint(forward, *args, use_reentrant=False, context_fn=layer._checkpoint_context_fn, **kwargs)


@functools.cache  # asked at every layer's forward
def _saved_ops() -> tuple[frozenset, frozenset]:
    """(matmuls, other ops) whose outputs selective checkpointing saves: every other matmul, and every attention
    kernel's outputs (its output and log-sum-exp), as torchtitan's per-op policy; the reduce-scatter of sequence
    parallelism is saved too, so that recomputation never communicates for it."""
    aten = torch.ops.aten
    # A linear layer's matmul (addmm with a bias); not bmm, which only SDPA's math fallback runs (its scores).
    matmuls = frozenset({aten.mm.default, aten.addmm.default})
    names = ("_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
             "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_flash_attention_for_cpu",
             "_scaled_dot_product_fused_attention_overrideable")  # fmt: skip
    others = {getattr(aten, name).default for name in names if hasattr(aten, name)}
    others.add(torch.ops._c10d_functional.reduce_scatter_tensor.default)
    others.add(flex_attention_op())  # train.attention: flex (its output and log-sum-exp), as torchtitan saves it
    return matmuls, frozenset(others)


def flex_attention_op():
    """The higher-order operator flex_attention runs as (what the selective policy is asked about)."""
    # torch's checkpointing (and flex) only for a checkpointed model
    from torch._higher_order_ops.flex_attention import flex_attention

    return flex_attention


def selective_checkpoint_context():
    """torch.utils.checkpoint's context_fn for selective (per-op) checkpointing of one layer's forward: save the
    outputs of the attention kernel and of the 1st, 3rd, 5th... matmul (in a Llama layer q, v, gate and down; k, o
    and up are recomputed, as torchtitan's `selective_ac_option = "op"`), recompute everything else (the norms,
    rotary, activation functions, residual adds, which are cheap in FLOPs). Counting restarts for every layer
    call; torch 2.13 asks the policy in the forward only and replays its answers, earlier releases ask again in
    the recomputation, so that one counts on its own and picks the same matmuls."""
    # torch's checkpointing (and flex) only for a checkpointed model
    from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

    matmuls, others = _saved_ops()
    counts = {False: 0, True: 0}  # matmuls seen in the forward (False) and in the recomputation (True)

    def policy(ctx, func, *args, **kwargs) -> CheckpointPolicy:
        if func in matmuls:
            counts[ctx.is_recompute] += 1
            saved = counts[ctx.is_recompute] % 2 == 1
        else:
            saved = func in others
        return CheckpointPolicy.MUST_SAVE if saved else CheckpointPolicy.PREFER_RECOMPUTE

    counting = kept_counting()  # trainer.rank.memory measuring what is kept for backward: tell it what the cache keeps
    if counting is None:
        return create_selective_checkpoint_contexts(policy)
    return _counted_selective_contexts(policy, counting)


def _counted_selective_contexts(policy, counting) -> tuple[TorchDispatchMode, TorchDispatchMode]:
    """create_selective_checkpoint_contexts(policy), each of its two modes run under one of ours that tells
    trainer.rank.memory's `counting` what selective checkpointing's cache holds for backward (the saved-tensor hooks
    never see it): after a forward op whose outputs the policy saved, it adds their storages; after the
    recomputation's matching call of that op (the n-th call of the op in either pass, as torch pairs them), which
    the cache answered and emptied, it releases them; what no recomputed call asked for, as the recomputation ends."""
    # torch's checkpointing (and flex) only for a checkpointed model
    from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

    answers = []  # the policy's answer for the forward op running now (torch asks once per op, ignored ops never)
    calls = {False: collections.Counter(), True: collections.Counter()}  # per op: calls in forward, recompute
    kept: dict[tuple, list[int]] = {}  # (op, n-th call) -> its cached storages, as counted

    def asked(ctx, func, *args, **kwargs) -> CheckpointPolicy:
        answer = policy(ctx, func, *args, **kwargs)
        if not ctx.is_recompute:  # torch before 2.13 asks the recomputation too: not a forward answer
            answers.append(answer)
        return answer

    def forward_output(func, out) -> None:
        if not answers:  # an op selective checkpointing passes through (detach): not counted by it either
            return
        call = (func, calls[False][func])
        calls[False][func] += 1
        if answers.pop() in (CheckpointPolicy.MUST_SAVE, CheckpointPolicy.PREFER_SAVE):
            tensors = [t for t in (out if isinstance(out, tuple | list) else (out,)) if isinstance(t, torch.Tensor)]
            kept[call] = [ptr for t in tensors if (ptr := counting.add(t)) is not None]

    def recomputed_output(func, out) -> None:
        call = (func, calls[True][func])
        calls[True][func] += 1
        for ptr in kept.pop(call, ()):
            counting.release(ptr)

    def recomputation_ended() -> None:
        # It stops once it has rebuilt what backward needs (checkpoint's early stop): an output cached after that
        # (a layer's last matmul) is never asked for. The cache goes with the layer's part of the graph, which
        # the backward frees next: counted until then, as if the recomputation had used it.
        for ptrs in kept.values():
            for ptr in ptrs:
                counting.release(ptr)
        kept.clear()

    caching, cached = create_selective_checkpoint_contexts(asked)
    return _Reporting(caching, forward_output), _Reporting(cached, recomputed_output, recomputation_ended)


class _Reporting(TorchDispatchMode):
    """Enters `below` (a dispatch mode), then itself above it: each op runs through `below` and its output is
    handed to `report(op, output)`; `ended()`, if given, is called on the way out."""

    def __init__(self, below: TorchDispatchMode, report, ended=None) -> None:
        super().__init__()
        self.below, self.report, self.ended = below, report, ended

    # torch.compile tags each checkpointed region's operations with the id it sets on the forward context: that
    # is `below`, which does the tagging.
    @property
    def ac_graph_id(self):
        return self.below.ac_graph_id

    @ac_graph_id.setter
    def ac_graph_id(self, value) -> None:
        self.below.ac_graph_id = value

    def __enter__(self):
        self.below.__enter__()
        return super().__enter__()

    def __exit__(self, *exc) -> None:
        try:
            super().__exit__(*exc)
        finally:
            self.below.__exit__(*exc)
            if self.ended is not None:
                self.ended()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.report(func, out)
        return out
