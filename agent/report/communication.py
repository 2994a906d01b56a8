"""Predicted communication per trial: the throughput model's bytes and collectives per mesh dimension and ep.

Runs do not measure their collectives, so the report's communication figures are predictions, made here once by
trainer.costs.throughput from each trial's resolved config and metrics and saved as a result file of their own
(results/predicted_communication.json) that the report's figures are then read from.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent.report.inputs import Trial
from trainer.config import checkpointing_mode, experiment_from_dict
from trainer.layout import LAYOUT_DIMS, Layout
from trainer.model.parameters import count_parameters
from trainer.results.schemas import LaunchInfo, Metrics

UNITS = "bytes each rank sends per optimizer step (fp32), and collectives per step; predicted, not measured"


def predict(trials: list[Trial]) -> dict[str, Any]:
    """{"units", "model", "trials": {id: {"dimensions": {dim: {bytes, collectives}}, "total_bytes", ...}}}."""
    predicted = {}
    for trial in trials:
        metrics, config = trial.metrics(), trial.config()
        if metrics and config:
            try:
                predicted[trial.id] = _predict_trial(metrics, config, trial.launch)
            except (OSError, ValueError):  # ConfigError is a ValueError
                continue  # a model this machine cannot describe (a local path gone): no prediction for it
    return {"units": UNITS, "model": "trainer.costs.throughput.communication_bytes", "trials": predicted}


def _predict_trial(metrics: Metrics, config: dict, launch: LaunchInfo | None) -> dict[str, Any]:
    # imported here: they load torch and transformers (seconds), which `meshpilot --help` must not wait for
    from trainer.costs.throughput import communication_bytes, ep_rank_bytes, parameter_figures
    from trainer.model.build import model_config

    experiment = experiment_from_dict(config)
    base_dir = Path(launch["base_dir"]) if launch else Path(".")
    model = model_config(experiment.model, base_dir)
    layout = Layout(**metrics["layout"])
    # As the step model prices it: an ep rank's dense parameters and its E/ep experts, which FSDP2 chunks apart.
    figures = parameter_figures(count_parameters(model))
    held, experts = ep_rank_bytes(layout, figures["parameter_bytes"], figures["expert_bytes"])
    sent = communication_bytes(
        model,
        layout,
        held,
        metrics["micro_batch"],
        metrics["seq_len"],
        metrics["grad_accum"],
        checkpointing=checkpointing_mode(experiment.train.activation_checkpointing),
        precision=metrics["precision"],
        fsdp_grad_sync=experiment.train.fsdp_grad_sync,
        expert_bytes=experts,
        zero_stage=experiment.train.zero_stage,
        fsdp_reduce_dtype=experiment.train.fsdp_reduce_dtype,
    )
    dimensions = {d: {"bytes": sent[d][0], "collectives": sent[d][1]} for d in LAYOUT_DIMS if sent[d][1]}
    return {
        "layout": metrics["layout"],
        "dimensions": dimensions,
        "total_bytes": sum(v["bytes"] for v in dimensions.values()),
        "total_collectives": sum(v["collectives"] for v in dimensions.values()),
    }
