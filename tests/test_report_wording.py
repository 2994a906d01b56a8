"""The report reads right (issue 14, item 7): a title that never says "sweep sweep", a split beside each benchmark
row, plot labels that tell trials apart, and one loss curve when the trials' curves agree.

The sweeps here are small result files written by hand in the shape `meshpilot sweep` writes them (contract in
agent/report/inputs.py): what is checked is how the report reads them, so no training runs.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
import yaml
from support import TINY_EXPERIMENT
from test_report import EXPECTED_TEXT, _remove_each, _table, make_repo, value_at

DATE, EXPERIMENT = "2025-03-01", "meshpilot.yaml"
LOSSES = [6.9412, 6.8976]  # two steps, as the demo's trials log them
# Packing changes which tokens share a row, so an unpacked trial's loss moves a little (the demo's: 5e-4 relative).
UNPACKED = [6.9374, 6.9013]


def layout(**degrees: int) -> dict[str, int]:
    return {"pp": 1, "dp_replicate": 1, "dp_shard": 1, "cp": 1, "tp": 1, **degrees}


def write_run(path: Path, degrees: dict, *, packing: bool, losses: list[float], tokens_per_s: float) -> None:
    """A finished run directory: metrics.json, memory.json, steps.jsonl and its resolved config.yaml."""
    path.mkdir(parents=True)
    world = math.prod(degrees.values())
    metrics = {
        "status": "ok", "error": None, "layout": degrees, "world_size": world, "device_type": "cpu",
        "micro_batch": 2, "grad_accum": 4, "seq_len": 64, "packing": packing, "precision": "fp32",
        "steps": len(losses), "tokens_per_s": tokens_per_s, "tokens_per_s_per_device": tokens_per_s / world,
        "mfu": None, "peak_mem_bytes": [2**28] * world, "final_loss": losses[-1],
        "config_hash": "abc", "git_commit": None, "git_dirty": None, "seed": 0, "versions": {},
    }  # fmt: skip
    rank = {"parameters": 2**20, "gradients": 2**20, "optimizer": 2**21, "activations_saved": 2**22, "peak": 2**28}
    predicted = {**rank, "weight_copies_saved": 0, "temporaries": 0}
    memory = {"units": "bytes", "measured": [{"rank": r, **rank} for r in range(world)], "predicted": [{"rank": r,
              **predicted} for r in range(world)], "peak_source": "process peak resident set size",
              "timeline": []}  # fmt: skip
    config = {**TINY_EXPERIMENT, "data": {**TINY_EXPERIMENT["data"], "packing": packing},
              "train": {**TINY_EXPERIMENT["train"], "steps": len(losses)}, "layout": degrees}  # fmt: skip
    (path / "metrics.json").write_text(json.dumps(metrics))
    (path / "memory.json").write_text(json.dumps(memory))
    (path / "config.yaml").write_text(yaml.safe_dump(config))
    (path / "steps.jsonl").write_text(steps_jsonl(losses))


def steps_jsonl(losses: list[float]) -> str:
    """steps.jsonl with these losses, one record a step (trainer.results.schemas.StepRecord)."""
    step = {"lr": 1e-3, "tokens": 512, "target_tokens": 500, "step_s": 0.1, "data_wait_s": 0.0, "grad_norm": 1.0}
    return "".join(
        json.dumps({"step": i + 1, "loss": loss, **step, "gns": None}) + "\n" for i, loss in enumerate(losses)
    )


# id, layout, packing, losses, tokens/s: two trials in each of two layouts, packed and unpacked
TRIALS = (
    ("t000", layout(dp_replicate=2), True, LOSSES, 11000.0),
    ("t001", layout(dp_replicate=2), False, UNPACKED, 4000.0),
    ("t002", layout(pp=2), True, LOSSES, 8000.0),
    ("t003", layout(pp=2), False, UNPACKED, 5000.0),
)


def write_sweep(directory: Path, trials=TRIALS, folder: str = "sweep") -> Path:
    """A finished sweep of `trials`, the fastest the winner, in directory/folder."""
    sweep = directory / folder
    records = []
    for trial_id, degrees, packing, losses, tokens_per_s in trials:
        write_run(sweep / "trials" / trial_id, degrees, packing=packing, losses=losses, tokens_per_s=tokens_per_s)
        records.append({
            "id": trial_id, "status": "ok", "cause": None, "run_dir": f"trials/{trial_id}",
            "params": {"layout": degrees, "micro_batch": 2, "grad_accum": 4 if degrees["dp_replicate"] > 1 else 8,
                       "activation_checkpointing": False, "packing": packing},
            "settings": ["train.micro_batch=2", "train.activation_checkpointing=false",
                         f"data.packing={json.dumps(packing)}"],
            "nproc": math.prod(degrees.values()), "predicted_tokens_per_s": None,
            "tokens_per_s": tokens_per_s, "mfu": None, "peak_mem_bytes": 2**28, "predicted_peak_bytes": 2**28,
            "final_loss": losses[-1],
        })  # fmt: skip
    winner = max(records, key=lambda r: r["tokens_per_s"])["id"]
    planner = {"top_pick": None, "top_pick_params": None, "measured_best": winner, "quality_ratio": None,
               "dropped": []}  # fmt: skip
    summary = {"experiment": EXPERIMENT, "objective": "tokens_per_s", "device_type": "cpu", "devices": 2,
               "sampler": "grid", "config_hash": "abc", "winner": winner, "trials": records,
               "planner": planner}  # fmt: skip
    (sweep / "summary.json").write_text(json.dumps(summary))
    return sweep


def write_longer_run(directory: Path, degrees: dict | None = None) -> Path:
    """The winner (t000) trained for four steps in its layout, as `meshpilot demo` does after the sweep."""
    path = directory / "final"
    losses = [*LOSSES, 6.7877, 6.6781]
    write_run(path, degrees or layout(dp_replicate=2), packing=True, losses=losses, tokens_per_s=12000.0)
    return path


def bench(model_path: str) -> dict:
    """evalsuite's result for the builtin suite's shape: a public task scored on dev and test, a private one."""
    return {
        "suite": "builtin", "suite_version": "abc", "model": {"path": model_path, "checkpoint_hash": "c0ffee"},
        "seed": 0, "eval_code_version": "v", "tasks": [
            {"task": "stdlib_heldout", "version": "a", "split": "dev", "private": False,
             "metrics": {"perplexity": 772.9}, "n_examples": 55, "contamination": {"overlap": 0.01, "flagged": False}},
            {"task": "stdlib_heldout", "version": "a", "split": "test", "private": False,
             "metrics": {"perplexity": 780.6}, "n_examples": 62, "contamination": {"overlap": 0.05, "flagged": False}},
            {"task": "addition", "version": "b", "split": "dev", "private": False,
             "metrics": {"exact_match": 0.25}, "n_examples": 100, "contamination": {"overlap": 0.0, "flagged": False}},
            {"task": "addition", "version": "b", "split": "test-sealed", "private": True,
             "metrics": {"exact_match": 0.125}, "contamination": {"flagged": False}},
        ],
    }  # fmt: skip


REPORT_DIR = f"docs/experiments/{DATE}-sweep"


def build_report(sweep: Path, benches: list[dict] = (), monkeypatch=None) -> tuple[dict[str, bytes], object, dict]:
    """The report's files in memory (figures.json included), its Context, and what each plot was asked to draw."""
    from agent.report import plots
    from agent.report.build import build, finish
    from agent.report.inputs import check_bench, find_longer_run, load_sweep

    drawn: dict[str, list] = {}
    if monkeypatch is not None:  # record what the plots are given; drawing them is another test's business
        monkeypatch.setattr(plots, "throughput", lambda trials, labels: drawn.setdefault("throughput", labels) and b"")
        monkeypatch.setattr(plots, "loss_curves", lambda runs, title: drawn.setdefault("loss", (runs, title)) and b"")
    loaded = load_sweep(sweep)
    named = [(f"{b['suite']}.json", check_bench(b, "bench")) for b in benches]
    files, ctx = build(
        loaded, named, REPORT_DIR, slug="sweep", date=DATE, experiment=EXPERIMENT, docs_file="README.md",
        committed=lambda path: None, longer_run=find_longer_run(named, loaded.winner),
    )  # fmt: skip
    finish(files, ctx)
    return files, ctx, drawn


def readme(files: dict[str, bytes]) -> str:
    return files[f"{REPORT_DIR}/README.md"].decode()


def check_ledger(files: dict[str, bytes], document: str) -> None:
    """As test_report's check: each figure equals its file's value, and the document shows no other number."""
    entries = json.loads(files[f"{REPORT_DIR}/figures.json"])["documents"][document]
    for entry in entries:
        data = files[entry["source"]]
        value = value_at(json.loads(data) if entry["source"].endswith(".json") else yaml.safe_load(data), entry["key"])
        value = max(value) if entry["reduce"] == "max" else value
        assert EXPECTED_TEXT[entry["unit"]](value) == entry["text"], entry
    text = files[document].decode().replace(DATE, "")
    remaining = _remove_each(text, [e["text"] for e in entries], document)
    remaining = re.sub(r"t00\d", "", remaining)  # trial ids: names, not figures
    stray = [remaining[max(0, m.start() - 30) : m.start() + 30] for m in re.finditer(r"\d", remaining)]
    assert not stray, f"numbers not in the ledger: {stray[:3]}"


# 1. The title -----------------------------------------------------------------------------------------------------


def _doubled(text: str) -> list[str]:
    """Places where a word follows itself, quotes and punctuation aside ("sweep `sweep`")."""
    return [m[0] for m in re.finditer(r"\b(\w+)\b[\s`'\"(]+\1\b", text, flags=re.IGNORECASE)]


def test_a_sweep_in_a_folder_named_sweep_is_never_called_sweep_sweep(tmp_path):
    """The default slug is the sweep folder's name; the demo's is "sweep". Title, commit, pull request and docs."""
    import git

    from agent.report import write_report

    sweep = write_sweep(tmp_path)
    repo = make_repo(tmp_path / "repo")
    git.Repo.init(tmp_path / "origin.git", bare=True, initial_branch="main")
    repo.create_remote("origin", str(tmp_path / "origin.git")).push("main:main")
    result = write_report(sweep, tmp_path / "repo", date=DATE, pr=True, provider="local")
    commit = repo.commit(result["commit"])
    title = commit.message.splitlines()[0]
    report = repo.git.show(f"{result['branch']}:{result['report_path']}")
    section = repo.git.show(f"{result['branch']}:README.md")
    card = repo.git.show(f"{result['branch']}:docs/MODEL_CARD.md")
    [description] = (tmp_path / "repo" / ".git" / "meshpilot" / "pull-requests").iterdir()
    assert title == f"meshpilot: layout sweep of {EXPERIMENT} ({DATE})"
    assert report.startswith(f"# Layout sweep of `{EXPERIMENT}`, {DATE}\n")
    assert description.read_text().startswith(f"[draft] {title}\n\nmeshpilot's report of the layout sweep of ")
    for text in (commit.message, report, section, card, description.read_text()):
        assert not _doubled(text), _doubled(text)


@pytest.mark.parametrize(
    ("slug", "name"),
    [
        ("tiny", "layout sweep `tiny`"),
        ("sweep", f"layout sweep of `{EXPERIMENT}`"),
        ("sweep-2", f"layout sweep of `{EXPERIMENT}`"),
        ("h100-sweeps", f"layout sweep of `{EXPERIMENT}`"),
    ],
)
def test_the_sweep_is_named_by_its_slug_unless_the_slug_says_sweep(slug, name):
    from agent.report.context import Context

    ctx = Context(None, [], REPORT_DIR, slug, DATE, EXPERIMENT, None)
    assert ctx.sweep_name() == name
    assert ctx.sweep_name(quote="") == name.replace("`", "")


# 2. The benchmark split -------------------------------------------------------------------------------------------


def test_each_benchmark_row_names_its_split_read_from_the_result(tmp_path):
    files, _, _ = build_report(write_sweep(tmp_path), [bench("elsewhere")])
    rows = _table(readme(files), "## Benchmarks")
    keys = [(r["task"], r["metric"], r["split"]) for r in rows]
    assert keys == [
        ("stdlib_heldout", "`perplexity`", "dev"),
        ("stdlib_heldout", "`perplexity`", "test"),
        ("addition", "`exact_match`", "dev"),
        ("addition", "`exact_match`", "withheld"),  # a private split's name stays in the scorer
    ]
    ledger = json.loads(files[f"{REPORT_DIR}/figures.json"])["documents"][f"{REPORT_DIR}/README.md"]
    splits = [e for e in ledger if e["key"][-1:] == ["split"]]
    assert [(e["key"], e["text"]) for e in splits] == [(["tasks", 0, "split"], "dev"), (["tasks", 1, "split"], "test"),
                                                       (["tasks", 2, "split"], "dev")]  # fmt: skip
    card = _table(files["docs/MODEL_CARD.md"].decode(), "## Evaluation")
    assert [r["split"] for r in card] == ["dev", "test", "dev", "withheld"]
    assert b"test-sealed" not in b"".join(files.values())


# 3. Labels that tell trials apart ---------------------------------------------------------------------------------


def test_plot_labels_name_what_differs_between_trials_of_one_layout(tmp_path, monkeypatch):
    files, _, drawn = build_report(write_sweep(tmp_path), monkeypatch=monkeypatch)
    assert drawn["throughput"] == {
        "t000": "t000 dp_replicate=2, packed",
        "t001": "t001 dp_replicate=2, unpacked",
        "t002": "t002 pp=2, packed",
        "t003": "t003 pp=2, unpacked",
    }  # the accumulation steps differ too, but follow from the layout: not named
    winner = readme(files).split("## Winner: ", 1)[1].splitlines()[0]
    assert winner == "`t000` (dp_replicate=2, packed)"
    rows = {r["trial"]: r["packing"] for r in _table(readme(files), "## Every layout tried")}
    assert rows == {"`t000`": "yes", "`t001`": "no", "`t002`": "yes", "`t003`": "no"}


def test_labels_stay_short_when_the_layout_tells_trials_apart(tmp_path, monkeypatch):
    """Packing differs too, but never within a layout: the layout alone tells these trials apart."""
    _, _, drawn = build_report(write_sweep(tmp_path, [TRIALS[0], TRIALS[3]]), monkeypatch=monkeypatch)
    assert drawn["throughput"] == {"t000": "t000 dp_replicate=2", "t003": "t003 pp=2"}


def test_a_numeric_setting_that_differs_is_a_ledgered_figure(tmp_path):
    sweep = write_sweep(tmp_path, [TRIALS[0], ("t002", layout(dp_replicate=2), True, LOSSES, 8000.0)])
    summary = json.loads((sweep / "summary.json").read_text())
    summary["trials"][1]["params"]["micro_batch"] = 4
    (sweep / "summary.json").write_text(json.dumps(summary))
    files, ctx, _ = build_report(sweep)
    labels = [ctx.plain_label(t) for t in ctx.sweep.trials]
    assert labels == ["t000 dp_replicate=2, micro-batch 2", "t002 dp_replicate=2, micro-batch 4"]
    assert "`t002` (dp_replicate=2, micro-batch 4)" in readme(files)
    check_ledger(files, f"{REPORT_DIR}/README.md")


# 4. The loss curves -----------------------------------------------------------------------------------------------


def _trial(trial_id: str, losses: list[float]):
    from agent.report.inputs import Trial

    return Trial(0, trial_id, {"status": "ok"}, None, {"steps.jsonl": steps_jsonl(losses).encode()})


@pytest.mark.parametrize(
    ("curves", "agree"),
    [
        ([LOSSES, LOSSES], True),
        ([LOSSES, UNPACKED], True),  # within a tenth of a percent at every step
        ([LOSSES, [6.9412, 6.85]], False),  # the second step differs by 0.7%
        ([LOSSES, [6.9412]], True),  # compared where both logged
        ([LOSSES], False),  # one curve agrees with nothing
        ([LOSSES, [6.9412, math.nan]], False),
        ([[], LOSSES], False),  # a trial that logged nothing is no curve
    ],
)
def test_loss_curves_agree_within_the_tolerance_at_every_shared_step(curves, agree):
    from agent.report.loss import TOLERANCE, agreement

    trials = [_trial(f"t{i}", losses) for i, losses in enumerate(curves)]
    result = agreement(trials, trials[0])
    assert result["agree"] is agree
    assert result["tolerance"] == TOLERANCE
    json.dumps(result, allow_nan=False)  # a result file: no NaN or Infinity in it


def test_agreeing_curves_are_drawn_once_as_the_winners_longer_run(tmp_path, monkeypatch):
    longer = write_longer_run(tmp_path)
    files, _, drawn = build_report(write_sweep(tmp_path), [bench(str(longer))], monkeypatch=monkeypatch)
    runs, title = drawn["loss"]
    assert [(label, run.path) for label, run in runs] == [("t000 dp_replicate=2, packed, trained longer", longer)]
    assert title == "Training loss of the winner's longer run (the trials' curves agree)"
    agreement = json.loads(files[f"{REPORT_DIR}/results/loss_agreement.json"])
    assert agreement["agree"] and agreement["compared"] == 4 and agreement["reference"] == "t000"
    largest = max(abs(a - b) for a, b in zip(LOSSES, UNPACKED, strict=True))
    assert agreement["largest_difference"] == pytest.approx(largest)
    assert files[f"{REPORT_DIR}/results/longer-run/steps.jsonl"] == (longer / "steps.jsonl").read_bytes()
    text = readme(files)
    assert f"![{title}](plots/loss.png)" in text
    assert "The training losses of the 4 trials that logged one agree: at every step each is within 0.1% of " in text
    assert "The plot draws the winner's longer run instead" in text and "4 steps in the winner's layout" in text
    assert "to a final loss of 6.6781." in text
    check_ledger(files, f"{REPORT_DIR}/README.md")


def test_agreeing_curves_without_a_longer_run_are_drawn_once(tmp_path, monkeypatch):
    files, _, drawn = build_report(write_sweep(tmp_path), [bench("runs/t0/checkpoint")], monkeypatch=monkeypatch)
    runs, _ = drawn["loss"]
    assert [run.id for _, run in runs] == ["t000"]
    assert "The plot draws `t000`'s alone." in readme(files)
    assert not any("longer-run" in name for name in files)


def test_curves_that_differ_are_all_drawn_and_the_report_says_why(tmp_path, monkeypatch):
    diverging = [*TRIALS[:3], ("t003", layout(pp=2), False, [6.9374, 6.5], 5000.0)]
    longer = write_longer_run(tmp_path)
    files, _, drawn = build_report(write_sweep(tmp_path, diverging), [bench(str(longer))], monkeypatch=monkeypatch)
    runs, title = drawn["loss"]
    assert [run.id for _, run in runs] == ["t000", "t001", "t002", "t003"] and title == "Training loss per trial"
    text = readme(files)
    assert "The trials' training losses do not agree: at some step one differs from `t000`'s by 0.3976" in text
    assert "![Training loss per trial](plots/loss.png)" in text
    check_ledger(files, f"{REPORT_DIR}/README.md")


@pytest.mark.parametrize(
    "change",
    [
        lambda run: _edit_json(run / "metrics.json", layout=layout(dp_shard=2)),  # another layout
        lambda run: _edit_json(run / "metrics.json", packing=False),  # another batch split
        lambda run: _edit_json(run / "metrics.json", steps=2),  # not longer
        lambda run: _edit_json(run / "metrics.json", status="failed"),
        lambda run: (run / "config.yaml").write_text(yaml.safe_dump({**TINY_EXPERIMENT, "tokenizer": "other"})),
    ],
)
def test_only_the_winners_own_longer_run_counts_as_it(tmp_path, change):
    from agent.report.inputs import check_bench, find_longer_run, load_sweep

    loaded = load_sweep(write_sweep(tmp_path))
    longer = write_longer_run(tmp_path)
    named = [("b.json", check_bench(bench(str(longer / "checkpoint" / "step_00000004")), "b"))]
    assert find_longer_run(named, loaded.winner).path == longer  # found from a checkpoint inside the run
    change(longer)
    assert find_longer_run(named, loaded.winner) is None


# 5. Why the winner won: the chat's words --------------------------------------------------------------------------


def test_the_report_says_why_the_runner_up_is_behind_in_the_chats_words(tmp_path):
    """One explanation (agent.replies.reasons_behind) for the report's guide and the chat's (and so the TUI's)
    answer to "why did it win?", over the same summary.json."""
    from agent.replies import explain_sweep, reasons_behind, trial_candidate

    sweep = write_sweep(tmp_path)
    files, _, _ = build_report(sweep)
    summary = json.loads((sweep / "summary.json").read_text())
    trials = {t["id"]: trial_candidate(t) for t in summary["trials"]}
    reasons = reasons_behind(trials["t002"], trials["t000"])  # the runner-up, pipelined, against the DDP winner
    assert len(reasons) == 2  # the bubble, and more micro-batches per step
    guide = files["docs/training.md"].decode()
    assert "The runner-up, `t002` (pp=2, packed)" in guide
    asked = explain_sweep({**summary, "sweep": "sweep", "source": "summary.json"}, "PP")
    for reason in reasons:
        assert reason in guide and reason in asked
    check_ledger(files, "docs/training.md")  # the words add no untraced number


def _edit_json(path: Path, **changes) -> None:
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))
