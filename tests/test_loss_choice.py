"""train.loss auto: the whole loss where it runs inside a compiled graph on a GPU and its memory fits, else the
chunked loss (trainer.parallel.compile.resolve_loss), resolved alike by the launcher and the planner, whose
candidates are priced with the loss they will run. Planned for Llama-3.2-1B on one H100 (the preset, stated figures,
no calibration records)."""

from __future__ import annotations

import pytest

from trainer.config import TrainSpec
from trainer.costs.plan_request import PlanRequest, plan_request
from trainer.layout import Layout
from trainer.parallel.compile import resolve_loss

GiB = 1024**3
ONE = Layout(dp_replicate=1)


@pytest.fixture(autouse=True)
def no_calibration(tmp_path, monkeypatch):
    monkeypatch.setenv("MESHPILOT_CACHE", str(tmp_path / "cache"))


def fits_always(train: TrainSpec) -> bool:
    assert train.loss == "whole"  # only the whole loss is asked about
    return True


@pytest.mark.parametrize(
    ("train", "layout", "device_type", "fits", "expected"),
    [
        (TrainSpec(compile=True), ONE, "cuda", True, "whole"),
        (TrainSpec(compile=True), Layout(dp_replicate=2), "cuda", True, "whole"),  # DDP: one graph too
        (TrainSpec(compile=True), ONE, "cuda", False, "chunked"),  # the whole logits do not fit
        (TrainSpec(compile=True), Layout(dp_shard=2), "cuda", True, "chunked"),  # FSDP2: layers compiled alone
        (TrainSpec(compile=True), Layout(tp=2), "cuda", True, "chunked"),
        (TrainSpec(compile=False), ONE, "cuda", True, "chunked"),  # eager: the whole loss only costs memory
        (TrainSpec(compile=True), ONE, "cpu", True, "chunked"),
        (TrainSpec(compile=False, loss="whole"), ONE, "cpu", False, "whole"),  # set: kept as given
        (TrainSpec(compile=True, loss="chunked"), ONE, "cuda", True, "chunked"),
    ],
)
def test_auto_takes_the_whole_loss_only_inside_a_compiled_graph_on_a_gpu_where_it_fits(
    train, layout, device_type, fits, expected
):
    assert resolve_loss(train, layout, device_type, lambda spec: fits and fits_always(spec)) == expected


def one_h100(*overrides: str, device_mem: str | None = None):
    request = PlanRequest(1, model="llama-3.2-1b", gpu="h100", overrides=overrides, device_mem=device_mem, probe=False)
    fitting = [c for c in plan_request(request).candidates if c.dropped is None]
    return {(c.micro_batch, c.activation_checkpointing): c for c in fitting}


def test_the_plan_prices_each_candidate_with_the_loss_it_will_run():
    """Compiled on one H100, every candidate that fits with the whole loss is planned with it (its memory and
    estimate those of the same plan with train.loss=whole set), one that fits only with the chunked loss with that,
    and the table says so; eager, none is whole."""
    auto = one_h100("train.compile=true")
    whole = one_h100("train.compile=true", "train.loss=whole")
    chunked = one_h100("train.compile=true", "train.loss=chunked")
    assert auto and any(c.loss == "whole" for c in auto.values())
    for key, candidate in auto.items():
        if key not in whole:  # fits only with the chunked loss: kept, planned with it
            assert candidate.loss == "chunked" and candidate.memory == chunked[key].memory
            continue
        assert candidate.loss == "whole"
        assert candidate.memory == whole[key].memory
        assert candidate.estimate.step_s == whole[key].estimate.step_s < chunked[key].estimate.step_s
        assert candidate.memory["peak"] > chunked[key].memory["peak"]
    assert all(c.loss == "chunked" for c in one_h100().values())


def test_where_the_whole_logits_do_not_fit_the_plan_keeps_the_chunked_loss():
    """A device between the chunked and the whole loss's peaks: the candidate stays, planned chunked."""
    chunked = one_h100("train.compile=true", "train.loss=chunked")
    whole = one_h100("train.compile=true", "train.loss=whole")
    key = max((k for k in chunked if k in whole), key=lambda k: whole[k].memory["peak"] - chunked[k].memory["peak"])
    between = (chunked[key].memory["peak"] + whole[key].memory["peak"]) / 2 / GiB
    tight = one_h100("train.compile=true", device_mem=f"{between:.3f}GiB")
    assert tight[key].loss == "chunked" and tight[key].memory == chunked[key].memory
