"""meshpilot report: a real sweep of tiny trainings, a report whose every number is checked against its files.

The sweep directory is made the way `meshpilot sweep` makes one (contract in agent/report/inputs.py): real
trainings in trials/<id>/ (DDP and FSDP2 on two processes, and one process with an injected crash), summary.json
written from their metrics, and a trial the planner pruned before it ran.
"""

from __future__ import annotations

import json
import os
import re
from io import BytesIO
from pathlib import Path

import matplotlib.image
import pytest
import yaml
from filelock import FileLock
from support import TINY_MODEL, meshpilot, write_experiment

TRIALS = (  # id, layout, environment, expected status
    ("t0", "dp_replicate=2", {}, "ok"),
    ("t1", "dp_shard=2", {}, "ok"),
    ("t2", "one process", {"MESHPILOT_FAULT": "rank=0,step=2,kind=crash"}, "failed"),
)
PRUNED = {
    "id": "t3",
    "params": {
        "layout": {"dp_replicate": 1, "dp_shard": 1, "tp": 2, "cp": 1, "pp": 1},
        "micro_batch": 8,
        "grad_accum": 1,
        "activation_checkpointing": False,
        "packing": True,
    },
    "settings": ["train.micro_batch=8"],
    "status": "pruned",
    "cause": "predicted peak 2.0 GiB exceeds the 1 GiB device memory",
    "run_dir": None,
    "nproc": 2,
    "tokens_per_s": None,
    "mfu": None,
    "peak_mem_bytes": None,
    "predicted_peak_bytes": 2147483648,
    "predicted_tokens_per_s": None,
    "final_loss": None,
}


def build_sweep(directory: Path) -> Path:
    """A sweep directory from real trainings; built once per test session, shared by the test files."""
    sweep = directory / "sweep"
    if (sweep / "summary.json").is_file():
        return sweep
    directory.mkdir(parents=True, exist_ok=True)
    # The noise scale every step (the default measures every 10th): the report draws its figure.
    experiment = write_experiment(directory, {"train": {"steps": 3, "timing_warmup_steps": 1, "gns_every": 1}})
    records = []
    for trial_id, layout, env, status in TRIALS:
        out = sweep / "trials" / trial_id
        processes = ["--nproc", "2", "--layout", layout] if "=" in layout else ["--nproc", "1"]
        done = meshpilot("train", str(experiment), *processes, "--out", str(out), env=env)
        assert done.returncode == (0 if status == "ok" else 1), done.stderr[-2000:]
        records.append(_record(trial_id, out))
    records.append(PRUNED)
    finished = [r for r in records if r["status"] == "ok"]
    winner = max(finished, key=lambda r: r["tokens_per_s"])
    summary = {
        "experiment": str(experiment),
        "config_hash": "sweep-config-7",
        "objective": "tokens_per_s",
        "device_type": "cpu",
        "devices": 2,
        "sampler": "grid",
        "winner": winner["id"],
        "trials": records,
        "planner": {
            "top_pick": "t1",
            "top_pick_params": records[1]["params"],
            "measured_best": winner["id"],
            "quality_ratio": records[1]["tokens_per_s"] / winner["tokens_per_s"],
            "dropped": [],
        },
    }
    (sweep / "sweep.json").write_text(json.dumps(_inputs(experiment, records), indent=1))
    (sweep / "summary.json").write_text(json.dumps(summary, indent=1))
    return sweep


def _inputs(experiment: Path, records: list[dict]) -> dict:
    """sweep.json of these trials, as `meshpilot sweep` writes it (agent.sweep.SweepInputs)."""
    points = [
        {"id": r["id"], **{k: r["params"][k] for k in ("layout", "micro_batch", "grad_accum",
         "activation_checkpointing", "packing")}, "extra": {}, "predicted_peak_bytes": r["predicted_peak_bytes"],
         "predicted_tokens_per_s": r["predicted_tokens_per_s"]}
        for r in records
    ]  # fmt: skip
    return {
        "experiment": str(experiment), "config_hash": "sweep-config-7", "objective": "tokens_per_s",
        "direction": "maximize", "sampler": "grid", "prune": True, "executor": "local", "device_type": "cpu",
        "device_ids": [0, 1], "trials": len(records), "budget": len(records), "trial_steps": 3,
        "timing_warmup_steps": 1, "timeout_s": None, "hang_s": 600.0, "requested_space": {},
        "space": {"points": points, "ranges": {}, "dropped": []}, "trackers": None,
    }  # fmt: skip


def _record(trial_id: str, out: Path) -> dict:
    metrics = json.loads((out / "metrics.json").read_text())
    memory = json.loads((out / "memory.json").read_text()) if (out / "memory.json").is_file() else None
    return {
        "id": trial_id,
        "params": {"layout": metrics["layout"], "micro_batch": metrics["micro_batch"],
                   "grad_accum": metrics["grad_accum"], "activation_checkpointing": False, "packing": True},
        "settings": [],  # trained with the experiment's own values
        "status": metrics["status"],
        "cause": metrics["error"],
        "run_dir": f"trials/{trial_id}",
        "nproc": metrics["world_size"],
        "tokens_per_s": metrics["tokens_per_s"],
        "mfu": metrics["mfu"],
        "peak_mem_bytes": max(metrics["peak_mem_bytes"]) if metrics.get("peak_mem_bytes") else None,
        "predicted_peak_bytes": max(p["peak"] for p in memory["predicted"]) if memory else None,
        "predicted_tokens_per_s": None,
        "final_loss": metrics["final_loss"],
    }  # fmt: skip


BENCH = {
    "suite": "builtin",
    "suite_version": "1.2",
    "model": {"path": "runs/t0/checkpoint", "checkpoint_hash": "c0ffee42"},
    "config_hash": "68c1",
    "git_commit": None,
    "seed": 0,
    "eval_code_version": "0.3.1",
    "batching": {"batch_size": 8},
    "tasks": [
        {"task": "stdlib-cloze", "version": 2, "split": "test", "private": False,
         "metrics": {"accuracy": 0.4375, "pass@1": 0.25}, "n_examples": 64,
         "contamination": {"n": 13, "overlap": 0.03125, "flagged": False}},
        {"task": "secret-qa", "version": 5, "split": "held-out-7f3a", "private": True,
         "metrics": {"exact_match": 0.125}, "n_examples": 987654,
         "contamination": {"n": 13, "overlap": 0.5, "flagged": True},
         "examples": [{"prompt": "PRIVATE-PROMPT-XYZ", "label": "PRIVATE-LABEL-XYZ"}]},
    ],
    "leaderboard_id": "lb-1",
}  # fmt: skip
USER_README = "# Experiments\n\nNotes from 2024: 3 runs on 8 GPUs.\n"
DATE, SLUG = "2025-03-01", "tiny"
REPORT_DIR = f"docs/experiments/{DATE}-{SLUG}"
BRANCH = f"meshpilot/{SLUG}-{DATE}"


def make_repo(path: Path, readme: str | None = USER_README):
    """A git repository with one commit on main, as a user would have it."""
    import git

    repo = git.Repo.init(path, initial_branch="main")
    with repo.config_writer() as config:
        config.set_value("user", "name", "Tester")
        config.set_value("user", "email", "tester@example.com")
    name, text = ("README.md", readme) if readme is not None else ("train.py", "print('hello')\n")
    (path / name).write_text(text)
    repo.index.add([name])
    repo.index.commit("init")
    return repo


@pytest.fixture(scope="session")
def sweep(tmp_path_factory) -> Path:
    return shared_sweep(tmp_path_factory)


def shared_sweep(tmp_path_factory) -> Path:
    """build_sweep's sweep, built once for the whole session: under pytest-xdist in the directory above the
    workers' own, the first worker to ask builds it while the others wait. The tests only read it."""
    root = tmp_path_factory.getbasetemp()
    shared = root.parent if os.environ.get("PYTEST_XDIST_WORKER") else root
    with FileLock(shared / "report-sweep.lock"):
        return build_sweep(shared / "report-sweep")


@pytest.fixture(scope="module")
def bench_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("bench") / "builtin.json"
    path.write_text(json.dumps(BENCH))
    return path


@pytest.fixture(scope="module")
def written(sweep, bench_file, tmp_path_factory):
    """One report committed into a fresh repository: (repo, write_report's result)."""
    from agent.report import write_report

    repo = make_repo(tmp_path_factory.mktemp("repo"))
    result = write_report(sweep, Path(repo.working_tree_dir), bench_results=[bench_file], slug=SLUG, date=DATE)
    return repo, result


def committed(repo, path: str) -> bytes:
    return repo.commit(BRANCH).tree[path].data_stream.read()


def committed_json(repo, path: str):
    data = committed(repo, path)
    return json.loads(data) if path.endswith(".json") else yaml.safe_load(data)


def managed(text: str, name: str) -> str:
    begin, end = f"<!-- meshpilot:begin {name} -->", f"<!-- meshpilot:end {name} -->"
    assert text.count(begin) == 1 and text.count(end) == 1
    return text[text.index(begin) : text.index(end) + len(end)]


# How each unit must read, written out again here rather than imported: the test checks the report's own rules.
EXPECTED_TEXT = {
    "count": lambda v: f"{v:,}" if isinstance(v, int) else pytest.fail(f"count {v!r} is not an integer"),
    "rounded": lambda v: f"{v:,.0f}",
    "mib": lambda v: f"{v / 2**20:,.1f}",
    "percent": lambda v: f"{100 * v:.1f}",
    "loss": lambda v: f"{v:.4f}",
    "score": lambda v: f"{v:.4f}",
    "ratio": lambda v: f"{v:.2f}",
    "text": lambda v: " ".join(str(v).split()).replace("|", "\\|"),
}


def value_at(data, key: list):
    for i, part in enumerate(key):
        if part == "*":
            return [value_at(item, key[i + 1 :]) for item in data]
        data = data[part]
    return data


def test_every_number_in_the_documents_is_read_from_a_result_file(written, sweep):
    """Each ledger entry equals its value in the committed file, and the ledger accounts for every number shown."""
    repo, _ = written
    ledger = committed_json(repo, f"{REPORT_DIR}/figures.json")["documents"]
    documents = {
        f"{REPORT_DIR}/README.md": committed(repo, f"{REPORT_DIR}/README.md").decode(),
        "README.md": managed(committed(repo, "README.md").decode(), "training"),
        "docs/MODEL_CARD.md": managed(committed(repo, "docs/MODEL_CARD.md").decode(), "model-card"),
    }
    summary = json.loads((sweep / "summary.json").read_text())
    # Names that hold digits but are not figures: removed before the figures (a metric's name would look like one)
    # and after them (trial ids also occur inside figures' text, e.g. a checkpoint path).
    names_first = [summary["experiment"], DATE, "`pass@1`"]
    names_after = [SLUG, *(t["id"] for t in summary["trials"])]
    for name, text in documents.items():
        entries = ledger[name]
        assert len(entries) > 5, name
        for entry in entries:
            value = value_at(committed_json(repo, entry["source"]), entry["key"])
            if entry["reduce"] == "max":
                value = max(value)
            assert EXPECTED_TEXT[entry["unit"]](value) == entry["text"], entry
        for label in names_first:
            text = text.replace(label, "")
        remaining = _remove_each(text, [e["text"] for e in entries], name)
        for label in names_after:
            remaining = remaining.replace(label, "")
        stray = [m.start() for m in re.finditer(r"\d", remaining)]
        assert not stray, f"{name}: numbers not in the ledger: {[remaining[i - 30 : i + 30] for i in stray[:3]]}"


def _remove_each(text: str, shown: list[str], document: str) -> str:
    """Remove one occurrence of each shown text (longest first), standing on its own as a token."""
    for item in sorted(shown, key=len, reverse=True):
        pattern = re.compile(r"(?<![\w.])" + re.escape(item) + r"(?![\w]|[.,]\d)")
        text, found = pattern.subn("", text, count=1)
        assert found, f"{document}: {item!r} is in the ledger but not in the document"
    return text


def _table(markdown: str, heading: str) -> list[dict[str, str]]:
    """The first table after `heading`, one dict per row keyed by the header."""
    lines = markdown.split(heading, 1)[1].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    cells = [
        [c.strip() for c in line.strip().removeprefix("| ").removesuffix(" |").split(" | ")]
        for line in lines[start:end]
    ]
    return [dict(zip(cells[0], row, strict=True)) for row in cells[2:]]


def _mib(value: int) -> str:
    return f"{value / 2**20:,.1f}"


def test_trials_table_agrees_with_each_trials_own_files(written, sweep):
    """Status, cause, layout, tokens/s, MFU and both peaks, checked against metrics.json and memory.json."""
    repo, _ = written
    rows = {r["trial"].strip("`"): r for r in _table(committed(repo, f"{REPORT_DIR}/README.md").decode(), "## Every")}
    assert list(rows) == ["t0", "t1", "t2", "t3"]
    for trial_id, layout, _, status in TRIALS:
        row, run = rows[trial_id], sweep / "trials" / trial_id
        metrics = json.loads((run / "metrics.json").read_text())
        assert (row["status"], row["layout"]) == (status, layout)
        assert row["MFU (%)"] == "—"  # null on CPU
        if status == "ok":
            predicted = json.loads((run / "memory.json").read_text())["predicted"]
            assert row["tokens/s"] == f"{metrics['tokens_per_s']:,.0f}"
            assert row["measured peak, MiB"] == _mib(max(metrics["peak_mem_bytes"]))
            assert row["predicted peak, MiB"] == _mib(max(p["peak"] for p in predicted))
            assert row["cause"] == "—"
        else:
            assert row["cause"] == metrics["error"] and "injected fault on rank 0" in row["cause"]
            assert row["tokens/s"] == row["measured peak, MiB"] == "—"
    pruned = rows["t3"]
    assert (pruned["status"], pruned["layout"], pruned["cause"]) == ("pruned", "tp=2", PRUNED["cause"])
    assert pruned["predicted peak, MiB"] == "2,048.0" and pruned["tokens/s"] == "—"


def test_winner_is_the_fastest_and_its_figures_sit_beside_the_runner_up(written, sweep):
    from transformers import AutoConfig, AutoModelForCausalLM

    from trainer.costs.throughput import communication_bytes
    from trainer.layout import Layout

    repo, _ = written
    report = committed(repo, f"{REPORT_DIR}/README.md").decode()
    metrics = {t: json.loads((sweep / "trials" / t / "metrics.json").read_text()) for t in ("t0", "t1")}
    memory = {t: json.loads((sweep / "trials" / t / "memory.json").read_text()) for t in ("t0", "t1")}
    winner, runner = sorted(metrics, key=lambda t: -metrics[t]["tokens_per_s"])
    assert f"## Winner: `{winner}`" in report
    rows = {r[""]: r for r in _table(report, "## Winner")}
    config = AutoConfig.for_model(**TINY_MODEL)
    model = AutoModelForCausalLM.from_config(config)
    parameter_bytes = sum(p.numel() for p in model.parameters()) * 4
    for column, trial in enumerate((winner, runner), 1):
        cells = {name: list(row.values())[column] for name, row in rows.items()}
        m, measured = metrics[trial], memory[trial]["measured"]
        assert cells["tokens/s"] == f"{m['tokens_per_s']:,.0f}"
        assert cells["final loss"] == f"{m['final_loss']:.4f}"
        assert cells["measured peak"] == _mib(max(r["peak"] for r in measured))
        assert cells["optimizer state, measured"] == _mib(max(r["optimizer"] for r in measured))
        sent = communication_bytes(config, Layout(**m["layout"]), parameter_bytes, m["micro_batch"], m["seq_len"],
                                   m["grad_accum"])  # fmt: skip
        assert cells["sent, MiB"] == _mib(sum(b for b, _ in sent.values()))
        assert cells["collectives"] == f"{sum(n for _, n in sent.values()):,}"
    assert "MFU (%)" not in rows  # no trial has one on CPU: the row is left out


def test_commit_holds_only_meshpilots_files_on_its_own_branch(written):
    repo, result = written
    head = repo.head.commit
    assert repo.active_branch.name == "main" and head.message == "init"  # the user's checkout did not move
    assert not repo.is_dirty(untracked_files=True)
    assert (Path(repo.working_tree_dir) / "README.md").read_text() == USER_README
    commit = repo.commit(result["commit"])
    assert result["branch"] == BRANCH and repo.heads[BRANCH].commit == commit
    assert commit.parents == (head,)
    changed = sorted(repo.git.diff("--name-only", head, commit).splitlines())
    assert changed == result["files"] == sorted(result["changed"])
    assert commit.trailers_dict["Generated-by"] == ["meshpilot"]
    assert commit.author.name == "meshpilot"
    for name in ("throughput.png", "memory.png", "loss.png", "gns.png"):
        png = committed(repo, f"{REPORT_DIR}/plots/{name}")
        assert png.startswith(b"\x89PNG\r\n\x1a\n")
        height, width, _ = matplotlib.image.imread(BytesIO(png)).shape
        assert height > 200 and width > 400


def test_docs_section_and_model_card(written):
    repo, _ = written
    readme = committed(repo, "README.md").decode()
    assert readme.startswith(USER_README + "\n<!-- meshpilot:begin training -->")  # the user's text, untouched
    section = managed(readme, "training")
    assert "meshpilot train " in section and f"({REPORT_DIR}/README.md)" in section
    card = committed(repo, "docs/MODEL_CARD.md").decode()
    assert card.startswith("---\nlibrary_name: transformers\n")
    for heading in ("## Model details", "## Training set-up and data", "## Evaluation", "## Limitations"):
        assert heading in managed(card, "model-card")
    evaluation = {(r["task"], r["metric"]): r for r in _table(card, "## Evaluation")}
    assert evaluation[("secret-qa", "`exact_match`")]["value"] == "0.1250"
    assert evaluation[("secret-qa", "`exact_match`")]["contamination"] == "**flagged**"
    assert "Possible contamination" in card and "`secret-qa`" in card.split("## Limitations")[1]


def test_private_tasks_leave_only_aggregates_and_the_flag(written):
    repo, result = written
    copied = committed_json(repo, f"{REPORT_DIR}/results/bench/builtin.json")
    private = next(t for t in copied["tasks"] if t["private"])
    assert private == {"task": "secret-qa", "private": True, "metrics": {"exact_match": 0.125},
                       "contamination": {"flagged": True}}  # fmt: skip
    public = next(t for t in copied["tasks"] if not t["private"])
    assert public["n_examples"] == 64 and public["contamination"]["overlap"] == 0.03125
    everything = b"".join(committed(repo, path) for path in result["files"])
    for secret in (b"PRIVATE-PROMPT-XYZ", b"PRIVATE-LABEL-XYZ", b"held-out-7f3a"):
        assert secret not in everything
    documents = [f"{REPORT_DIR}/README.md", "docs/MODEL_CARD.md", f"{REPORT_DIR}/results/bench/builtin.json"]
    assert not any(count in committed(repo, d) for d in documents for count in (b"987654", b"987,654"))
    rows = _table(committed(repo, f"{REPORT_DIR}/README.md").decode(), "## Benchmarks")
    secret_row = next(r for r in rows if r["task"] == "secret-qa")
    assert (secret_row["examples"], secret_row["overlap"], secret_row["contamination"]) == ("—", "—", "**flagged**")


def test_rerun_updates_the_same_branch(written, sweep, bench_file, tmp_path):
    """Unchanged results add no commit; new results add one commit on top of the last, never a second branch."""
    from agent.report import write_report

    repo, first = written
    root = Path(repo.working_tree_dir)
    again = write_report(sweep, root, bench_results=[bench_file], slug=SLUG, date=DATE)
    assert again["commit"] == first["commit"] and again["changed"] == []
    changed_bench = json.loads(bench_file.read_text())
    changed_bench["tasks"][0]["metrics"]["accuracy"] = 0.5
    (tmp_path / "builtin.json").write_text(json.dumps(changed_bench))
    third = write_report(sweep, root, bench_results=[tmp_path / "builtin.json"], slug=SLUG, date=DATE)
    commit = repo.commit(third["commit"])
    assert commit.parents == (repo.commit(first["commit"]),)
    assert third["changed"] == sorted(
        ["docs/MODEL_CARD.md", f"{REPORT_DIR}/README.md", f"{REPORT_DIR}/figures.json",
         f"{REPORT_DIR}/results/bench/builtin.json"]
    )  # fmt: skip
    assert "| stdlib-cloze | no | `accuracy` | 0.5000 |" in committed(repo, f"{REPORT_DIR}/README.md").decode()
    assert [h.name for h in repo.heads if h.name.startswith("meshpilot/")] == [BRANCH]


def test_language_model_prose_is_used_only_without_numbers(sweep, tmp_path):
    """A chat model writes around placeholders; its reply with a number of its own is refused for the template."""
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    from agent.report import write_report

    replies = [
        "We looked for the layout with the best {objective} across {devices} {device_type} devices.",
        "{winner} came out ahead at {tokens_per_s} tokens/s, well ahead of {runner_up}.",
        "A small llama trained for 3 steps.",  # a number of its own: refused
    ]
    repo = make_repo(tmp_path / "repo", readme=None)  # no README: the docs section goes to docs/training.md
    result = write_report(sweep, tmp_path / "repo", slug=SLUG, date=DATE, dry_run=True,
                          prose=FakeListChatModel(responses=replies))  # fmt: skip
    assert "docs/training.md" in result["files"] and "README.md" not in result["files"]
    assert result["prose"]["goal"] == result["prose"]["winner"] == "model"
    assert result["prose"]["model"] == "template (the reply wrote a number itself)"
    metrics = json.loads((sweep / "trials" / "t0" / "metrics.json").read_text())
    other = json.loads((sweep / "trials" / "t1" / "metrics.json").read_text())
    winner, runner = ("t0", "t1") if metrics["tokens_per_s"] > other["tokens_per_s"] else ("t1", "t0")
    fastest = max(metrics["tokens_per_s"], other["tokens_per_s"])
    layouts = {"t0": "dp_replicate=2", "t1": "dp_shard=2"}
    expected = f"`{winner}` ({layouts[winner]}) came out ahead at {fastest:,.0f} tokens/s, well ahead of `{runner}`"
    assert expected in result["diff"]
    assert "We looked for the layout with the best tokens_per_s across 2 cpu devices." in result["diff"]
    assert "trained for 3 steps" not in result["diff"] and "A causal language model trained with" in result["diff"]
    assert repo.heads[0].name == "main" and len(repo.heads) == 1 and result["commit"] is None  # nothing written


@pytest.mark.parametrize(
    ("reply", "problem"),
    [
        ("{winner} is {tokens_per_s} tokens/s, twice the other.", "the reply wrote a number itself"),
        ("{winner} reached 5,078 tokens/s.", "the reply wrote a number itself"),
        ("{winner} used {secret_figure}.", "the reply used an unknown placeholder secret_figure"),
        ("## {winner}\nwon.", "the reply wrote Markdown structure"),
        ("   ", "the reply was empty"),
        ("{winner} won {clearly.", "the reply had stray braces"),
    ],
)
def test_prose_replies_that_could_carry_numbers_are_refused(reply, problem):
    from agent.report.prose import Slot, check_reply

    slot = Slot("winner", "{winner} won at {tokens_per_s} tokens/s.", {"winner": "`t0`", "tokens_per_s": None})
    assert check_reply(reply, slot) == problem
    assert check_reply("{winner} won, at {tokens_per_s} tokens/s.", slot) is None


def test_a_failing_model_costs_only_its_prose():
    from agent.report.figures import Figure, Ledger
    from agent.report.prose import Slot, compose

    def offline(slot, instructions, facts):
        raise ConnectionError("the model's server is down")

    figure = Figure("results/metrics.json", ("tokens_per_s",), "rounded", 5078.4)
    slot = Slot("winner", "{winner} won at {tokens_per_s} tokens/s.", {"winner": "`t0`", "tokens_per_s": figure})
    ledger = Ledger()
    text, origin = compose(slot, ledger.page("report.md"), offline)
    assert (text, origin) == ("`t0` won at 5,078 tokens/s.", "template (the model failed: ConnectionError)")
    assert [e["text"] for e in ledger.documents["report.md"]] == ["5,078"]


def test_managed_section_keeps_everything_outside_its_markers():
    from agent.report.inputs import ReportError
    from agent.report.sections import replace_section

    before, after = "# Title\n\nUser text 1.\n\n", "\n\nMore user text, with 2 numbers.\n"
    first = replace_section(before.rstrip("\n"), "training", "old body", "README.md")
    assert first == before + "<!-- meshpilot:begin training -->\nold body\n<!-- meshpilot:end training -->\n"
    text = first.rstrip("\n") + after
    updated = replace_section(text, "training", "new body", "README.md")
    assert updated == before + "<!-- meshpilot:begin training -->\nnew body\n<!-- meshpilot:end training -->" + after
    assert replace_section(None, "training", "body", "x") == replace_section("", "training", "body", "x")
    for broken in (text.replace("<!-- meshpilot:end training -->", ""), text + text, "<!-- meshpilot:end training -->"
                   "\n<!-- meshpilot:begin training -->"):  # fmt: skip
        with pytest.raises(ReportError, match="do not pair up"):
            replace_section(broken, "training", "body", "README.md")


def _edited_sweep(sweep: Path, tmp_path: Path, edit) -> Path:
    copy = tmp_path / "sweep"
    copy.mkdir()
    (copy / "trials").symlink_to(sweep / "trials")
    summary = json.loads((sweep / "summary.json").read_text())
    edit(summary)
    (copy / "summary.json").write_text(json.dumps(summary))
    return copy


def test_a_sweep_without_a_winner_is_reported_but_recommends_nothing(sweep, tmp_path):
    from agent.report import write_report

    def no_winner(summary):
        summary["winner"] = None
        for trial in summary["trials"][:2]:
            trial["status"], trial["cause"], trial["tokens_per_s"] = "timeout", "trial ran out of time", None

    make_repo(tmp_path / "repo")
    result = write_report(_edited_sweep(sweep, tmp_path, no_winner), tmp_path / "repo", slug=SLUG, date=DATE,
                          dry_run=True)  # fmt: skip
    assert "README.md" not in result["files"] and "docs/MODEL_CARD.md" not in result["files"]
    assert "No trial finished, so there is no recommendation" in result["diff"]
    assert f"{REPORT_DIR}/plots/memory.png" not in result["files"]


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda s: s.update(winner="t2"), "the winner 't2' did not finish"),
        (lambda s: s.update(winner="t9"), "the winner 't9' is not among the trials"),
        (lambda s: s["trials"][1].update(status="running"), r"trial 1 \(t1\) is running: report when the sweep"),
        (lambda s: s["trials"][1].update(status="great"), "needs an id and a status"),
        (lambda s: s["trials"][1].update(id="../t1"), "cannot name a folder"),
        (lambda s: s["trials"][1].update(run_dir="../../elsewhere"), "outside the sweep directory"),
        (lambda s: s["trials"][0].update(run_dir="trials/missing"), r"t0\): status ok, but its run directory"),
        (lambda s: s.update(objective="vibes"), "unknown objective 'vibes'"),
    ],
)
def test_bad_sweeps_are_refused_in_one_line_before_anything_is_written(sweep, tmp_path, edit, message):
    from agent.report import write_report
    from trainer.config import ConfigError

    repo = make_repo(tmp_path / "repo")
    with pytest.raises(ConfigError, match=message) as error:
        write_report(_edited_sweep(sweep, tmp_path, edit), tmp_path / "repo", slug=SLUG, date=DATE)
    assert "\n" not in str(error.value)
    assert [h.name for h in repo.heads] == ["main"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"slug": "Not A Slug"}, "slug 'Not A Slug'"),
        ({"date": "1 March"}, "expected YYYY-MM-DD"),
        ({"bench_results": ["missing.json"]}, "the benchmark result not found"),
        ({"bench_results": [{"suite": "x", "tasks": [{"task": "a", "metrics": {"m": 1.0}}]}]}, "whether it is private"),
        ({"bench_results": [{"suite": "x", "tasks": [{"task": "a", "private": True, "metrics": {"m": "high"}}]}]},
         "needs metrics, each a number"),
        ({"author": "no email"}, "expected 'Name <email>'"),
        ({"pr": True, "provider": "bitbucket"}, "unknown provider 'bitbucket'"),
    ],
)  # fmt: skip
def test_bad_arguments_are_refused_before_anything_is_written(sweep, tmp_path, kwargs, message):
    from agent.report import write_report
    from trainer.config import ConfigError

    repo = make_repo(tmp_path / "repo")
    kwargs = {"slug": SLUG, "date": DATE, **kwargs}
    with pytest.raises(ConfigError, match=message):
        write_report(sweep, tmp_path / "repo", **kwargs)
    assert [h.name for h in repo.heads] == ["main"]


def test_cli_dry_run_prints_the_diff_and_bad_input_exits_2(sweep, tmp_path, capsys):
    from agent.cli import main

    repo = make_repo(tmp_path / "repo")
    code = main(["report", "--sweep", str(sweep), "--repo", str(tmp_path / "repo"), "--dry-run", "--slug", SLUG,
                 "--date", DATE])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    assert f"+++ b/{REPORT_DIR}/README.md" in out and "Binary files /dev/null and b/" in out
    assert out.rstrip().endswith("nothing written")
    assert [h.name for h in repo.heads] == ["main"] and not repo.is_dirty(untracked_files=True)
    assert main(["report", "--sweep", str(tmp_path / "nowhere"), "--repo", str(tmp_path / "repo")]) == 2
    error = capsys.readouterr().err
    assert error.splitlines() == [f"meshpilot: error: sweep directory not found: {tmp_path / 'nowhere'}"]


def test_the_guide_sets_the_process_peak_beside_a_predicted_process_peak(written, sweep):
    """On CPU the measured peak is the process's resident set: docs/training.md predicts that, like for like (the
    resident set measured before set-up plus the predicted tensors), not the tensors alone beside it."""
    repo, _ = written
    guide = committed(repo, "docs/training.md").decode()
    winner = json.loads((sweep / "summary.json").read_text())["winner"]
    memory = json.loads((sweep / "trials" / winner / "memory.json").read_text())
    rank = max(range(len(memory["measured"])), key=lambda r: memory["measured"][r]["peak"])
    measured, predicted = memory["measured"][rank], memory["predicted"][rank]
    assert predicted["process_peak"] == measured["setup_start"] + predicted["peak"]
    mib = EXPECTED_TEXT["mib"]
    assert (
        f"a measured peak of {mib(measured['peak'])} MiB per rank, the process's resident set (predicted "
        f"{mib(predicted['process_peak'])} MiB: the {mib(measured['setup_start'])} MiB it held before set-up plus "
        f"{mib(predicted['peak'])} MiB of tensors the memory model predicts)"
    ) in guide
    assert predicted["process_peak"] == pytest.approx(measured["peak"], rel=0.25)  # the tensors alone: a few %
    assert predicted["peak"] < 0.25 * measured["peak"]
