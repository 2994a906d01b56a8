"""GaLore AdamW (train.optimizer: galore_adamw): parameter groups, exact optimizer-state size, training, config."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
from support import meshpilot, train, write_experiment
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.nn.parallel import DistributedDataParallel
from transformers import AutoConfig, AutoModelForCausalLM

from trainer.config import GALORE_PROJ_TYPES, ConfigError, GaLoreSpec, TrainSpec, experiment_from_dict, load_experiment
from trainer.costs.optimizer_state import galore_state_elements, optimizer_state_bytes
from trainer.rank import checkpoint
from trainer.rank.faults import ENV as FAULT
from trainer.rank.memory import state_bytes, tensor_bytes
from trainer.rank.optim import build_optimizer, build_scheduler, optimizer_state_tensors

TINY_LLAMA = {
    "model_type": "llama",
    "vocab_size": 512,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,  # k_proj and v_proj are 32 x 64: both "std" sides occur
}
# bitsandbytes (imported by galore_torch) sets up torch.compile, whose imports warn about torch.jit: not ours.
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")
# Per layer: q, k, v, o projections and gate, up, down: the 2-D weights named *attn* or *mlp*.
PROJECTED_PER_LAYER = 7


def tiny_model() -> torch.nn.Module:
    torch.manual_seed(0)
    config = AutoConfig.for_model(**TINY_LLAMA)
    return AutoModelForCausalLM.from_config(config, attn_implementation="sdpa", dtype=torch.float32)


def galore_spec(rank: int, proj_type: str = "std", **train) -> TrainSpec:
    return TrainSpec(optimizer="galore_adamw", galore=GaLoreSpec(rank=rank, proj_type=proj_type), **train)


def fixed_batch() -> torch.Tensor:
    return torch.randint(0, TINY_LLAMA["vocab_size"], (2, 32), generator=torch.Generator().manual_seed(1))


def one_step(model: torch.nn.Module, spec: TrainSpec) -> torch.optim.Optimizer:
    optimizer = build_optimizer(model, spec, "cpu")
    ids = fixed_batch()
    model(input_ids=ids, labels=ids).loss.backward()
    optimizer.step()
    return optimizer


def measured(optimizer: torch.optim.Optimizer) -> int:
    """Optimizer-state bytes counted the way trainer.rank.memory counts tensors, GaLore's projections included."""
    return tensor_bytes(optimizer_state_tensors(optimizer))


def resident(optimizer: torch.optim.Optimizer) -> int:
    """Bytes of the storages behind those tensors: a view that pins a larger storage shows up here."""
    storages = {
        t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in optimizer_state_tensors(optimizer)
    }
    return sum(storages.values())


def predicted(model: torch.nn.Module, spec: TrainSpec) -> int:
    return optimizer_state_bytes([(name, tuple(p.shape)) for name, p in model.named_parameters()], spec)


# --- parameter groups ---------------------------------------------------------------------------------------------


def test_galore_group_holds_exactly_the_attention_and_mlp_matrices():
    model = tiny_model()
    optimizer = build_optimizer(model, galore_spec(rank=8, weight_decay=0.1), "cpu")
    names = {id(p): name for name, p in model.named_parameters()}
    galore, decay, no_decay = optimizer.param_groups
    assert (galore["rank"], galore["update_proj_gap"], galore["scale"], galore["proj_type"]) == (8, 200, 0.25, "std")
    assert galore["weight_decay"] == decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    projected = [names[id(p)] for p in galore["params"]]
    assert len(projected) == PROJECTED_PER_LAYER * TINY_LLAMA["num_hidden_layers"]
    assert all(("self_attn." in n or ".mlp." in n) and n.endswith(".weight") for n in projected)
    assert sorted(names[id(p)] for p in decay["params"]) == ["lm_head.weight", "model.embed_tokens.weight"]
    assert all(p.ndim == 1 for p in no_decay["params"])
    assert "rank" not in decay and "rank" not in no_decay  # galore_torch projects any group with a rank


# --- optimizer-state bytes ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "spec", [TrainSpec(optimizer="adamw"), galore_spec(rank=16), galore_spec(rank=4)], ids=["adamw", "r16", "r4"]
)
def test_state_bytes_after_one_step_equal_the_prediction(spec):
    model = tiny_model()
    optimizer = one_step(model, spec)
    assert measured(optimizer) == predicted(model, spec)
    # No view pins more memory than it shows (galore_torch's projections would pin the whole SVD factor).
    assert resident(optimizer) == predicted(model, spec)


def test_adamw_prediction_matches_trainer_memory_state_bytes():
    model = tiny_model()
    optimizer = one_step(model, TrainSpec(optimizer="adamw"))
    assert all(state["step"].dtype == torch.float32 for state in optimizer.state.values())
    assert state_bytes(model, optimizer)["optimizer"] == predicted(model, TrainSpec(optimizer="adamw"))


@pytest.mark.parametrize("proj_type", GALORE_PROJ_TYPES)
def test_prediction_is_exact_for_every_projection_type(proj_type):
    model = tiny_model()
    spec = galore_spec(rank=8, proj_type=proj_type)
    optimizer = one_step(model, spec)
    assert measured(optimizer) == resident(optimizer) == predicted(model, spec)


def test_galore_state_formula_by_hand():
    g = GaLoreSpec(rank=8)
    assert galore_state_elements((128, 64), g) == 8 * 64 + 2 * 128 * 8  # tall: (r, n) projection, (m, r) moments
    assert galore_state_elements((64, 128), g) == 64 * 8 + 2 * 8 * 128  # wide: (m, r) projection, (r, n) moments
    assert galore_state_elements((32, 64), GaLoreSpec(rank=128)) == 32 * 32 + 2 * 32 * 64  # rank capped at 32
    assert galore_state_elements((128, 64), GaLoreSpec(rank=8, proj_type="full")) == 128 * 8 + 8 * 64 + 2 * 8 * 8


def test_galore_saves_the_predicted_bytes_and_less_rank_keeps_less():
    sizes = {}
    for name, spec in [("adamw", TrainSpec()), ("r16", galore_spec(rank=16)), ("r4", galore_spec(rank=4))]:
        model = tiny_model()
        sizes[name] = measured(one_step(model, spec))
    assert sizes["adamw"] > sizes["r16"] > sizes["r4"]

    def saving(rank: int) -> int:
        """AdamW minus GaLore, written out: projected matrices trade 2mn moments for r*min + 2r*max elements,
        and every parameter drops AdamW's 4-byte step tensor (GaLore counts steps in a Python int)."""
        total = 0
        for name, p in tiny_model().named_parameters():
            total += 4
            if p.ndim == 2 and ("attn" in name or "mlp" in name):
                m, n = p.shape
                r = min(rank, m, n)
                total += 4 * (2 * m * n - r * min(m, n) - 2 * r * max(m, n))
        return total

    assert sizes["adamw"] - sizes["r16"] == saving(16)
    assert sizes["adamw"] - sizes["r4"] == saving(4)


# --- training -----------------------------------------------------------------------------------------------------


def test_galore_steps_decrease_the_loss_through_projected_weights_alone():
    model = tiny_model()
    for name, p in model.named_parameters():  # only GaLore's updates can lower the loss
        p.requires_grad_(p.ndim == 2 and ("attn" in name or "mlp" in name))
    spec = TrainSpec(optimizer="galore_adamw", lr=1e-2, galore=GaLoreSpec(rank=8, update_proj_gap=3, scale=1.0))
    optimizer = build_optimizer(model, spec, "cpu")
    assert len(optimizer.param_groups) == 1 and "rank" in optimizer.param_groups[0]
    ids = fixed_batch()
    losses = []
    for _ in range(8):  # crosses two projection refreshes (steps 0, 3, 6)
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
    assert losses[-1] < losses[0] - 0.5, losses


# --- layouts ------------------------------------------------------------------------------------------------------


@pytest.fixture
def process_group():
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_galore_runs_under_ddp(process_group):
    model = DistributedDataParallel(tiny_model())
    # "module" would match every name DDP prefixes with "module."; targets see the bare model's names.
    spec = TrainSpec(optimizer="galore_adamw", galore=GaLoreSpec(rank=8, target_modules=["attn", "mlp", "module"]))
    optimizer = one_step(model, spec)
    assert len(optimizer.param_groups[0]["params"]) == PROJECTED_PER_LAYER * TINY_LLAMA["num_hidden_layers"]
    assert measured(optimizer) == predicted(model.module, spec)  # the memory model predicts from bare names


def test_galore_refuses_sharded_parameters(process_group):
    model = tiny_model()
    fully_shard(model, mesh=init_device_mesh("cpu", (1,)))  # parameters become DTensors
    with pytest.raises(ValueError, match="galore_adamw runs with data-parallel replicate layouts only"):
        build_optimizer(model, galore_spec(rank=8), "cpu")
    build_optimizer(model, TrainSpec(optimizer="adamw"), "cpu")  # AdamW takes DTensors as before


def test_unknown_projection_type_is_refused():
    with pytest.raises(ValueError, match="proj_type 'sideways'"):
        build_optimizer(tiny_model(), galore_spec(rank=8, proj_type="sideways"), "cpu")


# --- checkpoints --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("proj_type", ["std", "full"])  # full keeps two matrices per projector
def test_a_galore_checkpoint_resumes_as_the_uninterrupted_run(process_group, tmp_path, proj_type):
    """Saved through trainer.rank.checkpoint (DCP, whose flattened optimizer state holds tensors and numbers only),
    a projector comes back as one with the same matrices, and the resumed steps, across a projection refresh, are
    the uninterrupted run's."""
    spec = TrainSpec(
        optimizer="galore_adamw", lr=1e-2, galore=GaLoreSpec(rank=8, update_proj_gap=2, proj_type=proj_type)
    )

    def start() -> tuple[torch.nn.Module, torch.optim.Optimizer, torch.optim.lr_scheduler.LRScheduler]:
        model = tiny_model()
        optimizer = build_optimizer(model, spec, "cpu")
        return model, optimizer, build_scheduler(optimizer, spec)

    def steps(model, optimizer, scheduler, n: int) -> list[float]:
        losses = []
        for _ in range(n):
            loss = model(input_ids=fixed_batch(), labels=fixed_batch()).loss
            loss.backward()
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            losses.append(loss.item())
        return losses

    model, optimizer, scheduler = start()
    steps(model, optimizer, scheduler, 3)
    path = checkpoint.save(tmp_path, checkpoint.TrainerState(3, 0), model, optimizer, scheduler, 1, {"dp_replicate": 1})
    saved = projections(optimizer)
    uninterrupted = steps(model, optimizer, scheduler, 3)

    resumed = start()
    assert checkpoint.load(path, *resumed, {"dp_replicate": 1}).step == 3
    assert len(saved) == PROJECTED_PER_LAYER * TINY_LLAMA["num_hidden_layers"] * (2 if proj_type == "full" else 1)
    assert all(torch.equal(a, b) for a, b in zip(projections(resumed[1]), saved, strict=True))
    assert steps(*resumed, 3) == uninterrupted


@pytest.mark.slow  # real two-process runs
def test_a_galore_run_crashed_after_its_checkpoint_resumes_as_the_uninterrupted_run(tmp_path):
    changes = {"optimizer": "galore_adamw", "galore": {"rank": 8, "update_proj_gap": 2}, "steps": 4,
               "checkpoint_every": 2}  # fmt: skip
    experiment = write_experiment(tmp_path, {"train": changes})
    ddp = ("--nproc", "2", "--layout", "dp_replicate=2")
    uninterrupted = train(experiment, tmp_path / "uninterrupted", *ddp).read_steps()
    crashed = meshpilot("train", str(experiment), "--out", str(tmp_path / "run"), *ddp, env={FAULT: "step=3"})
    assert crashed.returncode != 0 and "injected fault on rank 0 at step 3" in crashed.stderr + crashed.stdout
    resumed = train(experiment, tmp_path / "run", *ddp, "--resume")
    assert "resumed from step_00000002" in resumed.log.read_text()
    figures = [
        [(s["step"], s["loss"], s["grad_norm"]) for s in steps] for steps in (uninterrupted, resumed.read_steps())
    ]
    assert figures[1] == figures[0] and len(figures[0]) == 4


def projections(optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
    """Every projector's matrices, in parameter order (copies: the run goes on)."""
    found = []
    for group in optimizer.param_groups:
        for p in group["params"]:
            projector = optimizer.state[p].get("projector")
            if projector is not None:
                matrix = projector.ortho_matrix
                found += [m.clone() for m in (matrix if isinstance(matrix, list) else [matrix])]
    return found


# --- config -------------------------------------------------------------------------------------------------------


def test_config_reads_train_galore(tmp_path):
    path = tmp_path / "exp.yaml"
    path.write_text("train:\n  optimizer: galore_adamw\n  galore:\n    rank: 16\n    target_modules: [attn]\n")
    train = load_experiment(path, ["train.galore.update_proj_gap=50"]).train
    assert train.optimizer == "galore_adamw"
    assert train.galore == GaLoreSpec(rank=16, update_proj_gap=50, target_modules=["attn"])
    assert experiment_from_dict({}).train.galore == GaLoreSpec(128, 200, 0.25, "std", ["attn", "mlp"])


@pytest.mark.parametrize(
    ("galore", "message"),
    [
        ({"rnak": 16}, r"^unknown config key 'train\.galore\.rnak' \(did you mean 'rank'\?\)$"),
        ({"rank": "big"}, r"^train\.galore\.rank: expected int, got 'big'$"),
        ({"target_modules": "attn"}, r"^train\.galore\.target_modules: expected a list"),
    ],
)
def test_config_rejects_bad_train_galore(galore, message):
    with pytest.raises(ConfigError, match=message):
        experiment_from_dict({"train": {"galore": galore}})
