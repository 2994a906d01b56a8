"""The parallelism layout: how many ways each mesh dimension splits the world, and the DeviceMesh it builds."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from transformers import PretrainedConfig

# Outermost first: pipeline stages talk least often, tensor parallel ranks most often, so tp is innermost
# (neighbouring ranks, the fastest links).
MESH_DIMS = ("pp", "dp_replicate", "dp_shard", "cp", "tp")

# Expert parallelism borrows its ranks instead of adding a mesh dimension (torchtitan's design): ep ranks are drawn
# from dp_shard x cp, the ranks that hold the same parameters and see different tokens. Each of those ranks keeps
# 1/ep of every MoE layer's experts and sends its tokens to the experts' ranks by all-to-all; everything else (and,
# inside each ep group, nothing of the experts) is sharded by FSDP2 over dp_shard x cp as before. So ep multiplies
# nothing: `dp_shard=4,ep=2` runs on 4 processes, as 2 expert groups of 2 ranks each. ep must divide dp_shard x cp
# and the model's expert count; within dp_shard x cp, ep is innermost (neighbouring ranks, the fastest links).
BORROWED_DIMS = ("ep",)

# Every degree a layout names, in the order it is written: the mesh dimensions, then the borrowed ones.
LAYOUT_DIMS = MESH_DIMS + BORROWED_DIMS

# Degrees the trainer can run today (every one, since context parallelism landed); kept so that a dimension added
# later can be validated before the trainer runs it.
SUPPORTED_DIMS = LAYOUT_DIMS

# The names of layouts, wherever one is shown (tables, replies, reports, the TUI): the degrees that split something
# (`dp_shard=2,tp=2`), or this for a run on one process.
ONE_PROCESS = "one process"


class LayoutError(ValueError):
    """An invalid layout, naming the degree and the constraint it breaks."""


@dataclass(frozen=True)
class Layout:
    """Degrees of each mesh dimension. dp_replicate = -1 means: whatever the other degrees leave of the world.

    ep (expert parallelism) is no mesh dimension: it splits the dp_shard x cp ranks (BORROWED_DIMS above).
    """

    dp_replicate: int = -1
    dp_shard: int = 1
    tp: int = 1
    cp: int = 1
    pp: int = 1
    ep: int = 1

    @classmethod
    def parse(cls, text: str) -> Layout:
        """Read `dp_replicate=2,tp=2` (the command line's --layout)."""
        values = {}
        for part in filter(None, (p.strip() for p in text.split(","))):
            name, sep, value = part.partition("=")
            if not sep or name not in LAYOUT_DIMS:
                raise LayoutError(f"--layout expects name=degree with names {', '.join(LAYOUT_DIMS)}; got {part!r}")
            try:
                values[name] = int(value)
            except ValueError:
                raise LayoutError(f"--layout {name}: degree must be an integer, got {value!r}") from None
        values.setdefault("dp_replicate", 1 if values else -1)
        return cls(**values)

    def resolve(self, world_size: int) -> Layout:
        """Fill dp_replicate = -1 and check that the degrees multiply to the world size (ep borrows from them)."""
        for name in LAYOUT_DIMS:
            degree = getattr(self, name)
            if degree < 1 and not (name == "dp_replicate" and degree == -1):
                raise LayoutError(f"layout {name}={degree}: degrees must be positive integers")
        others = self.pp * self.dp_shard * self.cp * self.tp
        layout = self
        if self.dp_replicate == -1:
            if world_size % others:
                raise LayoutError(f"layout pp*dp_shard*cp*tp={others} does not divide the world size {world_size}")
            layout = dataclasses.replace(self, dp_replicate=world_size // others)
        if layout.world_size != world_size:
            raise LayoutError(
                f"layout {layout.argument()} multiplies to {layout.world_size}, but {world_size} processes run"
            )
        layout.check_expert_degree()
        return layout

    def check_expert_degree(self) -> None:
        """ep must divide the dp_shard x cp ranks it is drawn from (the expert count is checked against the model)."""
        if self.ep < 1:
            raise LayoutError(f"layout ep={self.ep}: degrees must be positive integers")
        if (self.dp_shard * self.cp) % self.ep:
            raise LayoutError(
                f"layout ep={self.ep} must divide dp_shard*cp={self.dp_shard * self.cp}, the ranks expert parallelism "
                "is drawn from (ep multiplies no processes: e.g. dp_shard=4,ep=2 runs on 4)"
            )

    @property
    def world_size(self) -> int:
        return self.pp * self.dp_replicate * self.dp_shard * self.cp * self.tp

    @property
    def named_world_size(self) -> int:
        """The processes the degrees given need, before `resolve`: an unnamed dp_replicate (-1) counts as one."""
        return self.pp * max(1, self.dp_replicate) * self.dp_shard * self.cp * self.tp

    @property
    def dp_degree(self) -> int:
        """Ranks that see different data: the ranks over which the loss's token count is summed."""
        return self.dp_replicate * self.dp_shard

    @property
    def fsdp(self) -> bool:
        """Whether FSDP2 reduces the gradients (rather than DDP, or nothing): whenever parameters are sharded, and
        whenever tensor-parallel (DTensor) or pipeline-stage parameters need a reduction, which DDP cannot do.
        Context parallelism always shards over dp_shard x cp, as torchtitan does: the cp ranks hold the same
        parameters, and long sequences are exactly where their memory is needed for activations."""
        reduced = self.dp_degree > 1
        return self.dp_shard > 1 or self.cp > 1 or (reduced and (self.tp > 1 or self.pp > 1))

    @property
    def shard_degree(self) -> int:
        """How many ways FSDP2 cuts each parameter: over dp_shard x cp (torchtitan's dp_shard_cp), the ranks that
        hold the same parameters and see different tokens; 1 without FSDP2."""
        return self.dp_shard * self.cp if self.fsdp else 1

    @property
    def expert_shard_degree(self) -> int:
        """How many ways FSDP2 cuts each expert parameter: the dp_shard x cp ranks left once ep has taken its share
        (torchtitan's dp_shard_mod_ep x cp); 1 without FSDP2."""
        return self.shard_degree // self.ep if self.fsdp else 1

    def degrees(self) -> dict[str, int]:
        """Each mesh dimension's degree, plus ep where experts are sharded (ep > 1): a dense layout's degrees, and
        so every record written before ep existed, stay as they were."""
        degrees = {name: getattr(self, name) for name in MESH_DIMS}
        return degrees | ({"ep": self.ep} if self.ep > 1 else {})

    def describe(self) -> str:
        return layout_name(self.degrees())

    def argument(self) -> str:
        """The --layout text that `parse` reads back to these degrees."""
        return _degrees_text(self.degrees()) or "dp_replicate=1"

    def check_supported(self) -> None:
        for name, degree in self.degrees().items():
            if degree > 1 and name not in SUPPORTED_DIMS:
                raise LayoutError(f"layout {name}={degree}: this trainer runs {', '.join(SUPPORTED_DIMS)} so far")

    def build_mesh(self, device_type: str):
        """A DeviceMesh with every dimension named (size-1 ones too), so code can always ask for mesh[name]."""
        # torch: the planner and the CLI read layouts without it
        from torch.distributed.device_mesh import init_device_mesh

        return init_device_mesh(device_type, tuple(getattr(self, n) for n in MESH_DIMS), mesh_dim_names=MESH_DIMS)


# The splits of a model's declared tensor-parallel plan (transformers' base_model_tp_plan) this trainer applies.
TP_STYLES = ("colwise", "rowwise")


def tensor_parallel_plan(config: PretrainedConfig) -> dict[str, str]:
    """The model's declared plan, restricted to the column/row splits this trainer applies."""
    plan = getattr(config, "base_model_tp_plan", None) or {}
    return {pattern: style for pattern, style in plan.items() if style in TP_STYLES}


def expert_count(config: PretrainedConfig) -> int | None:
    """The routed experts per MoE layer a transformers config declares (None for a dense model)."""
    for name in ("num_experts", "num_local_experts", "n_routed_experts"):
        if getattr(config, name, None):
            return int(getattr(config, name))
    return None


def check_layout_for_model(layout: Layout, config: PretrainedConfig) -> None:
    """Refuse a tensor-parallel or expert-parallel degree the model cannot be split by, naming the constraint."""
    if layout.ep > 1:
        experts = expert_count(config)
        if experts is None:
            raise LayoutError(f"layout ep={layout.ep}: {config.model_type} has no experts to shard (a dense model)")
        if experts % layout.ep:
            raise LayoutError(f"layout ep={layout.ep} must divide the model's expert count ({experts})")
    if layout.tp == 1:
        return
    if not tensor_parallel_plan(config):
        raise LayoutError(f"layout tp={layout.tp}: {config.model_type} declares no tensor-parallel plan")
    sizes = {
        "num_attention_heads": config.num_attention_heads,
        "num_key_value_heads": getattr(config, "num_key_value_heads", None) or config.num_attention_heads,
        "intermediate_size": getattr(config, "intermediate_size", None) if _has_dense_mlp(config) else None,
    }
    for name, size in sizes.items():
        if size is not None and size % layout.tp:
            raise LayoutError(f"layout tp={layout.tp} must divide the model's {name} ({size})")


def _has_dense_mlp(config: PretrainedConfig) -> bool:
    """Whether a decoder layer has a dense MLP, the only MLP tp splits (by intermediate_size): every layer of a dense
    model; an MoE model's layers without experts (Qwen2/3-MoE's mlp_only_layers and decoder_sparse_step,
    DeepSeek-V3's first_k_dense_replace). An MoE layer's experts and shared expert run whole on every tp rank."""
    if expert_count(config) is None:
        return True
    sparse_step = getattr(config, "decoder_sparse_step", None) or 1
    dense_first = getattr(config, "first_k_dense_replace", None) or 0
    return bool(getattr(config, "mlp_only_layers", None)) or sparse_step > 1 or dense_first > 0


def data_parallel_group(layout: Layout, mesh) -> tuple[object | None, int]:
    """The process group of the ranks that read different data (None when there is one) and this rank's index in it.

    Ranks that differ only in tp (or cp, pp) coordinates read the same rows.
    """
    rank = mesh.get_local_rank("dp_replicate") * layout.dp_shard + mesh.get_local_rank("dp_shard")
    if layout.dp_degree == 1:
        return None, 0
    if layout.dp_shard == 1:
        return mesh["dp_replicate"].get_group(), rank
    if layout.dp_replicate == 1:
        return mesh["dp_shard"].get_group(), rank
    return mesh["dp_replicate", "dp_shard"]._flatten("dp").get_group(), rank


def fsdp_mesh(layout: Layout, mesh):
    """The mesh FSDP2 works over: its shard dimension is dp_shard x cp, with dp_replicate outside it (HSDP) when
    there is data-parallel replication or a pipeline (whose stages always use FSDP2)."""
    shard = "dp_shard"
    if layout.cp > 1:
        shard = "dp_shard_cp"
        mesh["dp_shard", "cp"]._flatten(shard)
    return mesh["dp_replicate", shard] if layout.dp_replicate > 1 else mesh[shard]


# The expert mesh's dimensions: the world mesh with dp_shard x cp cut into the ranks that hold the same experts
# (dp_shard_mod_ep, torchtitan's name) and ep, innermost. Same ranks in the same order: dp_shard x cp flattened
# row-major is dp_shard_mod_ep x ep.
EXPERT_MESH_DIMS = ("pp", "dp_replicate", "dp_shard_mod_ep", "ep", "tp")


def expert_mesh(layout: Layout, device_type: str):
    """The DeviceMesh the experts live on (EXPERT_MESH_DIMS): experts sharded over "ep", and FSDP2 over
    `expert_fsdp_dims`. A mesh of its own beside the world mesh (DTensors and FSDP2 each need their dimensions
    in one mesh)."""
    # torch: the planner and the CLI read layouts without it
    from torch.distributed.device_mesh import init_device_mesh

    sizes = (layout.pp, layout.dp_replicate, layout.dp_shard * layout.cp // layout.ep, layout.ep, layout.tp)
    return init_device_mesh(device_type, sizes, mesh_dim_names=EXPERT_MESH_DIMS)


def expert_fsdp_dims(layout: Layout) -> tuple[str, ...]:
    """The expert mesh's dimensions FSDP2 shards (and replicates, under HSDP) the experts over."""
    return ("dp_replicate", "dp_shard_mod_ep") if layout.dp_replicate > 1 else ("dp_shard_mod_ep",)


def loss_group(layout: Layout, mesh) -> object | None:
    """The process group of the ranks whose tokens together make one step's batch: data parallel x context
    parallel (None when there is one rank). Token counts and losses are summed over it, and the gradient
    reductions (DDP's all-reduce, FSDP2's reduce-scatter) average over exactly these ranks."""
    if layout.cp == 1:
        return data_parallel_group(layout, mesh)[0]
    names = tuple(n for n in ("dp_replicate", "dp_shard", "cp") if getattr(layout, n) > 1)
    return mesh["cp"].get_group() if names == ("cp",) else mesh[names]._flatten("_".join(names)).get_group()


def layout_name(degrees: dict[str, int]) -> str:
    """`dp_shard=2,tp=2` (the degrees other than 1, in mesh order as given), or "one process"."""
    return _degrees_text(degrees) or ONE_PROCESS


# The usual name of the technique behind each mesh dimension (both data-parallel ones together: HSDP).
FAMILY_OF_DIM = {"dp_replicate": "DDP", "dp_shard": "FSDP", "tp": "TP", "pp": "PP", "cp": "CP", "ep": "EP"}


def layout_family(degrees: dict[str, int]) -> str:
    """The usual name of a layout: DDP, FSDP, HSDP, with +TP, +PP, +CP, +EP for the model-parallel dimensions."""
    used = {name for name, degree in degrees.items() if degree > 1}
    data = ("dp_replicate", "dp_shard")
    names = ["HSDP"] if set(data) <= used else [FAMILY_OF_DIM[d] for d in data if d in used]
    names += [FAMILY_OF_DIM[d] for d in ("tp", "pp", "cp", "ep") if d in used]
    return "+".join(names) or ONE_PROCESS


def _degrees_text(degrees: dict[str, int]) -> str:
    return ",".join(f"{name}={degree}" for name, degree in degrees.items() if degree != 1)
