"""Memory through one training step (memory.json "timeline", trainer.rank.memory.MemoryTimeline), the report's chart of
it and the terminal UI's.

The two-process runs are test_report's sweep (DDP and FSDP2 on two ranks, built once per session and shared): no
training of its own but one process's step, run here in this process through the trainer's own step function.
"""

from __future__ import annotations

import json
from io import BytesIO

import matplotlib.image
import pytest
import torch
from support import TINY_MODEL
from test_model_options import tiny_batch
from test_report import shared_sweep
from test_report_wording import REPORT_DIR, build_report, readme

from trainer.rank.memory import MemoryTimeline, state_bytes
from trainer.rank.step import forward_backward
from trainer.results.schemas import MEMORY, TIMELINE_CATEGORIES
from tui.runs import step_memory
from tui.widgets.runs import phase_label, tick_labels

MICRO_BATCHES = 3


@pytest.fixture(scope="session")
def sweep(tmp_path_factory):
    return shared_sweep(tmp_path_factory)


def expected_phases(micro_batches: int) -> list[str]:
    per_micro_batch = [f"{kind} mb{i}" for i in range(1, micro_batches + 1) for kind in ("forward", "backward")]
    return ["start", *per_micro_batch, "optimizer", "zero_grad"]


def test_one_process_step_is_followed_phase_by_phase():
    """Activations rise with each forward to what saved_for_backward measured and fall to nothing with its
    backward; gradients come with the first backward, optimizer state with the optimizer step, and zero_grad
    frees the gradients. A CPU point has no temporaries."""
    from transformers import AutoConfig, AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(**TINY_MODEL))
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    timeline = MemoryTimeline(model, optimizer, torch.device("cpu"), {"": model})
    with timeline.recording():
        result = forward_backward(model, [tiny_batch(seed) for seed in range(MICRO_BATCHES)], None, None, True)
    optimizer.step()
    timeline.mark("optimizer")
    state = state_bytes(model, optimizer)
    optimizer.zero_grad(set_to_none=True)
    timeline.mark("zero_grad")

    points = {p["phase"]: p for p in timeline.points}
    assert [p["phase"] for p in timeline.points] == expected_phases(MICRO_BATCHES)
    saved = result.saved_bytes["activations_saved"] + result.saved_bytes["weight_copies_saved"]
    for i in range(1, MICRO_BATCHES + 1):
        assert points[f"forward mb{i}"]["activations"] == saved  # the same shapes: what the first one saved
        assert points[f"backward mb{i}"]["activations"] == 0
        assert points[f"backward mb{i}"]["gradients"] == state["gradients"]
    assert points["start"]["activations"] == points["forward mb1"]["gradients"] == 0
    assert all(p["parameters"] == state["parameters"] for p in timeline.points)
    assert [p["optimizer"] for p in timeline.points] == [0] * (2 * MICRO_BATCHES + 1) + [state["optimizer"]] * 2
    assert points["zero_grad"]["gradients"] == 0
    assert not any("temporaries" in p for p in timeline.points)
    MEMORY.check({"units": "bytes", "predicted": [], "measured": [], "peak_source": "-",
                  "timeline": [{"rank": 0, "step": 1, "points": timeline.points}]})  # fmt: skip


@pytest.mark.parametrize("trial", ["t0", "t1"], ids=["ddp", "fsdp2"])
def test_every_rank_of_a_two_process_run_records_its_first_step(sweep, trial):
    """Each rank's points, in phase order, agree with the categories memory.json measured for that rank."""
    run = sweep / "trials" / trial
    memory = MEMORY.read(run / "memory.json")
    grad_accum = json.loads((run / "metrics.json").read_text())["grad_accum"]
    assert [t["rank"] for t in memory["timeline"]] == [0, 1]
    for timeline, measured in zip(memory["timeline"], memory["measured"], strict=True):
        points = {p["phase"]: p for p in timeline["points"]}
        assert timeline["step"] == 1
        assert [p["phase"] for p in timeline["points"]] == expected_phases(grad_accum)
        assert all(p["parameters"] == measured["parameters"] for p in timeline["points"])
        assert points["forward mb1"]["activations"] == measured["activations_saved"] + measured["weight_copies_saved"]
        assert all(points[f"forward mb{i}"]["activations"] > 0 for i in range(1, grad_accum + 1))
        assert all(points[f"backward mb{i}"]["activations"] == 0 for i in range(1, grad_accum + 1))
        assert points["start"]["gradients"] == points["forward mb1"]["gradients"] == 0
        assert points[f"backward mb{grad_accum}"]["gradients"] == measured["gradients"]
        assert points["backward mb1"]["optimizer"] == 0 and points["optimizer"]["optimizer"] == measured["optimizer"]
        assert points["zero_grad"]["gradients"] == 0


def test_the_report_draws_the_winners_step(sweep):
    files, _, _ = build_report(sweep)
    png = files[f"{REPORT_DIR}/plots/memory_timeline.png"]
    height, width, _ = matplotlib.image.imread(BytesIO(png)).shape
    assert height > 300 and width > 500
    assert "](plots/memory_timeline.png)" in readme(files)


def test_the_terminal_ui_reads_the_first_ranks_step_beside_its_prediction(sweep):
    memory = MEMORY.read(sweep / "trials" / "t1" / "memory.json")
    shown = step_memory(memory)
    points, predicted = memory["timeline"][0]["points"], memory["predicted"][0]
    assert shown.phases == tuple(p["phase"] for p in points)
    assert shown.measured[3] == tuple(p["activations"] for p in points)
    assert shown.predicted[3] == predicted["activations_saved"] + predicted["weight_copies_saved"]
    assert shown.predicted == tuple(sum(predicted[k] for k in keys) for keys in TIMELINE_CATEGORIES.values())
    labels = ["start", "forward mb1", "backward stage 2 mb10", "optimizer", "zero_grad"]
    assert [phase_label(p) for p in labels] == ["s", "F1", "B2.10", "o", "z"]


def test_memory_chart_labels_are_thinned_so_none_is_dropped_at_random():
    names = ["s", "F1", "B1", "F2", "B2", "F3", "B3", "F4", "B4", "o", "z", "P"]
    assert tick_labels(names) == ([1, 3, 5, 7, 9, 11, 12], ["s", "B1", "B2", "B3", "B4", "z", "P"])
    assert tick_labels(names[:8]) == (list(range(1, 9)), names[:8])  # few enough: every bar named
