"""train.precision fp8: bf16 mixed precision plus float8 matmuls in the decoder layers' linear layers, through
torchao.float8 (its Float8Linear: dynamic scaling, tensorwise or rowwise, train.float8_recipe), as torchtitan's float8
converter applies it.

What is converted is what torchtitan converts (trainer.model.parameters.float8_eligible, the rule the cost models
count by too): every nn.Linear inside the decoder layers whose two dimensions are multiples of 16 (the float8
tensor cores' `_scaled_mm` needs them), except MoE routers, whose logits pick the experts and are kept exact; the
output head (lm_head) and the embedding stay bf16, and a mixture-of-experts model's experts (3-D tensors in
transformers 5, no nn.Linear) run as before. The conversion swaps module classes on the meta-device model before
anything wraps it (tensor parallel, compile, FSDP2's fully_shard), so parameter names, checkpoints,
initialisation and exports are unchanged.

torchao is imported only here, only in an fp8 run (`import_float8`): `meshpilot --help` and every other run never
load it.
"""

from __future__ import annotations

import importlib.util
import os

import torch

from trainer.layout import Layout
from trainer.model.moe import is_router
from trainer.model.parameters import float8_eligible

# Float8 tensor cores start with compute capability 8.9 (Ada: L4, L40S, RTX 4090; Hopper 9.0; Blackwell 10.0):
# torch._scaled_mm refuses older GPUs (an A100 is 8.0), as torchtitan's converter does.
FLOAT8_MIN_CAPABILITY = (8, 9)
# Float8 matmuls on the CPU (torchao emulates _scaled_mm there, far slower than fp32): for the tests, which run the
# trainer's real fp8 path on CPU processes; a user asking for fp8 on a CPU is refused.
FLOAT8_ON_CPU_ENV = "MESHPILOT_FP8_ON_CPU"


def float8_refusal(
    device_type: str, capability: tuple[int, int] | None, device_name: str, layout: Layout
) -> str | None:
    """Why train.precision fp8 cannot run on these devices with this layout, in one line, or None where it can.

    `capability` is the smallest compute capability among the run's GPUs (torch.cuda.get_device_capability), None
    on the CPU; `device_name` names the GPU in the message. A pure function: the launcher calls it with the real
    devices, the tests with the GPU table's."""
    if device_type != "cuda" and os.environ.get(FLOAT8_ON_CPU_ENV) != "1":
        return (
            "train.precision fp8 needs a CUDA GPU with float8 tensor cores (compute capability 8.9+: L4, L40S, "
            "RTX 4090, H100, H200, B200); on the CPU use bf16 or fp32"
        )
    if device_type == "cuda" and (capability is None or tuple(capability) < FLOAT8_MIN_CAPABILITY):
        major, minor = capability or (0, 0)
        return (
            f"train.precision fp8 needs float8 tensor cores (compute capability 8.9+), which the {device_name} "
            f"(sm{major}{minor}) has not; use bf16"
        )
    if importlib.util.find_spec("torchao") is None:
        return "train.precision fp8 needs torchao: pip install 'meshpilot[fp8]' (or torchao>=0.18)"
    if layout.tp > 1:
        return (
            f"train.precision fp8 with tensor parallelism (tp={layout.tp}) is not supported yet: its float8 "
            "layer styles are not applied; use data parallel, FSDP2 or HSDP layouts, or bf16"
        )
    return None


def float8_linear_names(model: torch.nn.Module) -> list[str]:
    """The names of the modules `convert_to_float8` converts: the nn.Linear layers that
    trainer.model.parameters.float8_eligible picks (inside the decoder layers, no router or gate, dimensions
    multiples of 16)."""
    return [
        name
        for name, module in model.named_modules()
        if isinstance(module, torch.nn.Linear)
        and not is_router(module)
        and float8_eligible(name, tuple(module.weight.shape))
    ]


def convert_to_float8(model: torch.nn.Module, recipe: str, compiled: bool) -> list[str]:
    """Swap the decoder layers' eligible nn.Linear modules (`float8_linear_names`) for torchao's Float8Linear with
    `recipe`'s scaling, in place, on a meta-device or materialised model; returns the converted names.

    Call before tensor parallel, compile and FSDP2 wrap the model. Under `compiled` with the rowwise recipe,
    inductor emulates the float8 casts' rounding exactly (torchtitan's workaround for pytorch#150859)."""
    float8 = import_float8()
    config = float8.Float8LinearConfig.from_recipe_name(recipe)
    names = set(float8_linear_names(model))
    float8.convert_to_float8_training(model, config=config, module_filter_fn=lambda _, fqn: fqn in names)
    if compiled and recipe == "rowwise":
        # inductor's config only in a compiled fp8 run (importing it loads the compiler)
        import torch._inductor.config

        torch._inductor.config.emulate_precision_casts = True
    return sorted(names)


def import_float8():
    """torchao.float8, imported only in an fp8 run (trainer/__init__ already quiets torchao's import-time warnings
    about C++ kernels it cannot load here, which concern no part of float8 training)."""
    # torchao only in an fp8 run: a heavy import that other runs and the CLI never need
    import torchao.float8

    return torchao.float8
