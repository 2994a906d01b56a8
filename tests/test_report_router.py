"""The report of a mixture-of-experts sweep shows its routers (aux loss, expert load) beside the winner's other
figures, read from results/router.json, which is computed from the trials' steps.jsonl; a dense sweep's report is
as it was. Both reports are written from recorded sweeps (tests/fixtures, see test_tui_fixtures): no training."""

from __future__ import annotations

import json
import math

import git
import pytest
from test_tui_fixtures import FIXTURE, MOE_FIXTURE, TINY_MIXTRAL, copy_sweep, git_repo
from transformers import AutoConfig

from agent.report import write_report
from agent.report.document import ROUTER_ROWS
from trainer.results.rundir import RunDir

DATE = "2025-01-01"
REPORT_DIR = f"docs/experiments/{DATE}-tiny"


def _report(tmp_path, fixture) -> tuple:
    """A reader of the report's committed files (by name under its directory; None when absent), and the sweep."""
    repo = git_repo(tmp_path / "repo")
    sweep = copy_sweep(repo, fixture=fixture)
    write_report(sweep, repo, slug="tiny", date=DATE)
    tree = git.Repo(repo).commit(f"meshpilot/tiny-{DATE}").tree / REPORT_DIR

    def read(name: str) -> str | None:
        try:
            return (tree / name).data_stream.read().decode()
        except KeyError:
            return None

    return read, sweep


def _winner_table(readme: str) -> dict[str, list[str]]:
    """The winner's side-by-side table: row name -> cells."""
    section = readme.split("## Winner", 1)[1]
    rows = [line.strip("| ").split(" | ") for line in section.splitlines() if line.startswith("|")]
    return {cells[0]: cells[1:] for cells in rows[2:]}


def test_an_moe_sweeps_report_shows_its_routers_read_from_the_steps(tmp_path):
    report, sweep = _report(tmp_path, MOE_FIXTURE)
    trial = next((sweep / "trials").iterdir())
    steps = RunDir(trial).read_steps()
    aux = [s["aux_loss"] for s in steps]
    load = [s["expert_load_max_over_mean"] for s in steps]

    routers = json.loads(report("results/router.json"))["trials"][trial.name]
    assert routers == {
        "steps": len(steps),
        "last_step": steps[-1]["step"],
        "aux_loss_last": aux[-1],
        "aux_loss_mean": pytest.approx(math.fsum(aux) / len(aux)),
        "expert_load_max_over_mean_last": load[-1],
        "expert_load_max_over_mean_worst": max(load),
    }
    table = _winner_table(report("README.md"))
    assert "**router (mixture of experts)**" in table
    assert table["aux loss, last step"] == [f"{aux[-1]:.4f}"]
    assert table["expert load max/mean, worst step"] == [f"{max(load):.2f}"]
    assert "router z-loss, last step" not in table  # Mixtral's config has no z-loss: the row says nothing
    shown = {name for name, _, _ in ROUTER_ROWS} & set(table)
    assert len(shown) == 4
    # Every router figure shown is in the ledger, traced to router.json.
    ledger = json.loads(report("figures.json"))["documents"][f"{REPORT_DIR}/README.md"]
    traced = [e for e in ledger if e["source"] == f"{REPORT_DIR}/results/router.json"]
    assert sorted(e["text"] for e in traced) == sorted(cells[0] for name, cells in table.items() if name in shown)


def test_a_dense_sweeps_report_has_no_router(tmp_path):
    report, _ = _report(tmp_path, FIXTURE)
    assert report("results/router.json") is None
    assert report("results/loss_agreement.json") is not None  # the control: results are read
    readme = report("README.md")
    assert "router" not in readme and "aux loss" not in readme


def test_an_moe_runs_predicted_fsdp_bytes_leave_out_the_experts_ep_keeps_apart(tmp_path):
    """The recorded Mixtral run, its layout edited to dp_shard=2 with ep=2 (as such a run records it): each rank
    holds 2 of the 4 experts whole (dp_shard x cp / ep = 1 FSDP rank for them), so FSDP moves only the dense
    parameters, half of them per rank each time: per micro-batch the layers' fp32 gathers in forward and backward
    and a reduce-scatter, the root unit's (embedding, final norm, head) one gather, held from forward to backward,
    and a reduce-scatter: ((2 + 1) x layers + (1 + 1) x root) x 4 micro-batches / 2."""
    from agent.report import communication
    from agent.report.inputs import load_sweep
    from trainer.model.parameters import count_parameters

    sweep = copy_sweep(git_repo(tmp_path / "repo"), fixture=MOE_FIXTURE)
    trial = next((sweep / "trials").iterdir())
    metrics = json.loads((trial / "metrics.json").read_text())
    assert (metrics["precision"], metrics["grad_accum"]) == ("fp32", 4)
    metrics["layout"] |= {"dp_shard": 2, "ep": 2}
    (trial / "metrics.json").write_text(json.dumps(metrics))

    predicted = communication.predict(load_sweep(sweep).trials)["trials"][trial.name]["dimensions"]
    counts = count_parameters(AutoConfig.for_model(**TINY_MIXTRAL))
    config = AutoConfig.for_model(**TINY_MIXTRAL)
    root = config.vocab_size * config.hidden_size * (1 if config.tie_word_embeddings else 2) + config.hidden_size
    layers = counts["total"] - counts["routed_experts"] - root
    assert predicted["dp_shard"]["bytes"] == pytest.approx(4 * (3 * layers + 2 * root) * 4 / 2)
