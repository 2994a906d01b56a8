"""Mixture-of-experts models in the trainer: which ones it trains, under which layouts, and their routers' logits.

The experts themselves are sharded and dispatched by trainer.parallel.expert_parallel; this module holds what the
launcher checks before a run starts (`check_moe`: one line each, exit code 2) and what a step reads from the
model's routers (`RouterLogits`) for the auxiliary loss and the expert load.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainer.layout import Layout, LayoutError, expert_count

if TYPE_CHECKING:
    import torch
    from transformers import PretrainedConfig

    from trainer.config import TrainSpec

# The MoE architectures whose experts, router and auxiliary loss the trainer handles, each tested against one
# process (tests/test_moe_layouts.py): softmax top-k routers returning (logits, weights, experts) and
# transformers' 3-D expert tensors. Qwen2-MoE adds a shared expert beside them (an ordinary MLP).
TRAINED_MOE = ("mixtral", "qwen2_moe", "qwen3_moe")

# Why the others cannot be trained yet, where the reason is known; the rest get the general one.
_NOT_TRAINED_WHY = {
    "deepseek_v3": "its sigmoid, group-limited router balances load by a bias updated outside the gradient, which "
    "the trainer does not update",
    "gpt_oss": "its router and clamped gated experts are not checked against one process in the trainer yet",
}


def is_moe(config: PretrainedConfig) -> bool:
    return expert_count(config) is not None


def check_moe(config: PretrainedConfig, layout: Layout, spec: TrainSpec) -> None:
    """Refuse, in one line, an MoE model or combination the trainer cannot run (dense models pass)."""
    if not is_moe(config):
        return
    kind = config.model_type
    if kind not in TRAINED_MOE:
        why = _NOT_TRAINED_WHY.get(kind, "its experts and router are not among those the trainer shards")
        raise LayoutError(
            f"{kind} is a mixture-of-experts model meshpilot cannot train yet: {why} (it trains "
            f"{', '.join(TRAINED_MOE)})"
        )
    if spec.compile and layout.ep > 1:
        raise LayoutError(f"train.compile with ep={layout.ep}: not supported yet (the compiled expert dispatch fails "
                          "to trace its uneven all-to-all; ep=1 compiles, or set train.compile: false)")  # fmt: skip


class RouterLogits:
    """Collects the router logits of every MoE layer during a forward (forward hooks on the routers): the
    model's own `output_router_logits` records them too, but only into the output of a whole-model forward,
    which the trainer's loss-computing head and wrappers do not hand back."""

    def __init__(self, model: torch.nn.Module):
        self.logits: list[torch.Tensor] = []
        self.routers = [m for m in model.modules() if is_router(m)]
        self.handles = [router.register_forward_hook(self._record) for router in self.routers]

    def _record(self, module: torch.nn.Module, args: tuple, output: tuple) -> None:
        import torch  # check_moe is imported by the planner, which runs without torch

        # Activation checkpointing runs the layer again inside the backward: those logits are the same ones.
        if torch._C._current_graph_task_id() == -1:
            self.logits.append(output[0])

    def take(self) -> tuple[torch.Tensor, ...]:
        """The logits recorded since the last take, in layer order, and forget them: one forward's, one tensor per
        router (a forward outside the step between two takes would otherwise count in the next step's loss)."""
        taken, self.logits = tuple(self.logits), []
        if len(taken) != len(self.routers):
            raise RuntimeError(
                f"{len(taken)} router logits recorded since the last step's take, not one per router "
                f"({len(self.routers)}): a forward ran outside the step, or a router did not run"
            )
        return taken


def routed_token_mask(real: torch.Tensor, logits: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """`real` (the micro-batch's non-padding tokens), checked to be the tokens the routers saw: without the mask
    padding would silently count in the auxiliary loss, so a layout that routes other tokens than the batch's (a
    sequence split the batch does not share) must say so."""
    if real.numel() != len(logits[0]):
        raise RuntimeError(
            f"the routers saw {len(logits[0])} tokens but the micro-batch holds {real.numel()}: the auxiliary "
            "loss cannot leave padding out"
        )
    return real


def is_router(module: torch.nn.Module) -> bool:
    return type(module).__name__.endswith("TopKRouter")
