"""The docs tool: "update the docs" proposes docs/training.md and README's section as a pull request, behind the
same approval as any pull request, every number of the guide traced to a result file committed beside it.

The repository is the fixture of tests/data/agent_repo (two real-format runs, a sweep of them) made a git
repository with a bare remote, as a user would have it; the graph and the tools run for real.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import git
import pytest
import yaml

from agent.approvals import Policy
from agent.session import Agent, Approval, Reply, ToolCall, ToolResult
from tests.test_agent_requests import DATA

SWEEP = "sweeps/layouts-3f2a"
TRIAL_RUNS = {"t000": "ddp-2", "t001": "fsdp-2"}


def docs_repo(root: Path) -> git.Repo:
    """The fixture repository, its sweep's trials filled from the fixture runs, committed with a remote."""
    shutil.copytree(DATA / "agent_repo", root)
    for trial, run in TRIAL_RUNS.items():
        shutil.copytree(root / "run-files" / run, root / SWEEP / "trials" / trial)
    shutil.rmtree(root / "run-files")
    (root / "README.md").write_text("# My model\n\nHow we train it.\n")
    repo = git.Repo.init(root, initial_branch="main")
    with repo.config_writer() as config:
        config.set_value("user", "name", "Tester")
        config.set_value("user", "email", "tester@example.com")
    repo.index.add(["README.md", "meshpilot.yaml"])
    repo.index.commit("init")
    git.Repo.init(root.parent / "remote.git", bare=True)
    repo.create_remote("origin", str(root.parent / "remote.git")).push("main")
    return repo


@pytest.fixture(scope="module")
def updated(tmp_path_factory):
    """ "update the docs", approved: (repo, the events of the approval, the events after it)."""
    repo = docs_repo(tmp_path_factory.mktemp("docs") / "repo")
    agent = Agent(repo.working_tree_dir, policy=Policy(approve_below=1e9))
    asked = list(agent.send("t", "update the docs"))
    after = list(agent.resume("t", {"action": "approve"}))
    return repo, asked, after


def test_update_docs_waits_for_approval_like_a_pull_request(updated):
    _, asked, _ = updated
    call = next(e for e in asked if isinstance(e, ToolCall))
    assert call.name == "update_docs" and call.args == {}
    approval = asked[-1]
    assert isinstance(approval, Approval) and approval.request["kind"] == "pull_request"
    assert approval.request["tool"] == "update_docs"


def test_a_rejected_docs_update_writes_nothing(tmp_path):
    repo = docs_repo(tmp_path / "repo")
    agent = Agent(repo.working_tree_dir, policy=Policy(approve_below=1e9))
    list(agent.send("t", "please update the documentation"))
    events = list(agent.resume("t", {"action": "reject", "reason": "not now"}))
    assert "not now" in events[-1].text
    assert [h.name for h in repo.heads] == ["main"]


def test_the_guide_and_readme_are_committed_on_a_branch_with_a_pull_request(updated):
    repo, _, after = updated
    result = next(e for e in after if isinstance(e, ToolResult)).result
    assert result["sweep"] == SWEEP and result["docs"] == ["README.md", "docs/training.md"]
    branch = repo.heads[result["branch"]]
    assert branch.commit.hexsha == result["commit"] and repo.active_branch.name == "main"
    assert result["pr"]["provider"] == "local" and Path(result["pr"]["description"]).is_file()
    reply = after[-1]
    assert isinstance(reply, Reply) and f"Docs updated from {SWEEP}: README.md, docs/training.md" in reply.text
    readme = _committed(repo, result["branch"], "README.md")
    assert readme.startswith("# My model\n\nHow we train it.\n") and "<!-- meshpilot:begin training -->" in readme


def test_the_guide_says_which_layout_why_how_and_links_every_report(updated):
    repo, _, after = updated
    result = next(e for e in after if isinstance(e, ToolResult)).result
    guide = _committed(repo, result["branch"], "docs/training.md")
    report = result["report_path"]
    summary = json.loads((Path(repo.working_tree_dir) / SWEEP / "summary.json").read_text())
    winner = next(t for t in summary["trials"] if t["id"] == summary["winner"])
    assert f"`{winner['id']}` (dp_replicate=2) had the best tokens_per_s" in guide
    assert f"{winner['tokens_per_s']:,.0f} tokens/s measured" in guide and "The runner-up, `t001`" in guide
    assert "meshpilot train meshpilot.yaml --nproc 2 --layout dp_replicate=2" in guide
    rows = [line for line in guide.splitlines() if line.startswith("| `t0")]
    for trial, row in zip(summary["trials"], rows, strict=True):
        cells = [c.strip() for c in row.strip("|").split("|")]
        tokens = [f"{trial['tokens_per_s']:,.0f}", f"{trial['predicted_tokens_per_s']:,.0f}"]
        peaks = [f"{trial[key] / 2**20:,.1f}" for key in ("peak_mem_bytes", "predicted_peak_bytes")]
        assert cells[3:] == tokens + peaks
    assert f"- [{report.split('/')[-2][:10]} {report.split('/')[-2][11:]}]({report.removeprefix('docs/')})" in guide


def test_every_number_of_the_guide_is_in_the_ledger_and_its_file(updated):
    """Each figure the guide shows is recorded with the committed file and key it was read from, and equals it;
    no other number is left in the guide."""
    repo, _, after = updated
    result = next(e for e in after if isinstance(e, ToolResult)).result
    branch = result["branch"]
    report_dir = result["report_path"].rsplit("/", 1)[0]
    entries = json.loads(_committed(repo, branch, f"{report_dir}/figures.json"))["documents"]["docs/training.md"]
    assert len(entries) > 10
    for entry in entries:
        value = _value_at(yaml.safe_load(_committed(repo, branch, entry["source"])), entry["key"])
        value = max(value) if entry["reduce"] == "max" else value
        assert SHOWN[entry["unit"]](value) == entry["text"], entry
    guide = _committed(repo, branch, "docs/training.md")
    text = guide[guide.index("<!-- meshpilot:begin training-guide -->") :]
    # Not figures: links, trial ids, markers, and the report's date and slug (names holding digits).
    text = re.sub(r"\]\([^)]*\)|\[[^\]]*\]|`t00\d`|<!--[^>]*-->|\d{4}-\d\d-\d\d|layouts-3f2a", "", text)
    for shown in sorted((e["text"] for e in entries), key=len, reverse=True):
        text = text.replace(shown, "", 1)
    assert not re.findall(r"\d", text), text


# How the guide prints each unit, written out here rather than imported (tests/test_report.py does the same).
SHOWN = {"count": lambda v: f"{v:,}", "rounded": lambda v: f"{v:,.0f}", "mib": lambda v: f"{v / 2**20:,.1f}",
         "text": lambda v: str(v), "loss": lambda v: f"{v:.4f}"}  # fmt: skip


def test_a_second_update_keeps_the_earlier_reports_linked(updated, tmp_path):
    repo, _, after = updated
    result = next(e for e in after if isinstance(e, ToolResult)).result
    from agent.report.docs import _report_links

    guide = _committed(repo, result["branch"], "docs/training.md")
    earlier = "<!-- meshpilot:begin training-guide -->\n### Reports\n- [2024-01-01 old](experiments/old/README.md)\n"
    assert _report_links(earlier + "<!-- meshpilot:end training-guide -->") == [
        ("2024-01-01 old", "experiments/old/README.md")
    ]
    assert len(_report_links(guide)) == 1


def _committed(repo: git.Repo, branch: str, path: str) -> str:
    return repo.commit(branch).tree[path].data_stream.read().decode()


def _value_at(data, key: list):
    for i, part in enumerate(key):
        if part == "*":
            return [_value_at(item, key[i + 1 :]) for item in data]
        data = data[part]
    return data


def test_where_the_report_and_pull_request_are_is_read_from_the_repository(updated):
    """A new conversation finds what an earlier one proposed: the report on its branch, the pull request."""
    repo, _, after = updated
    result = next(e for e in after if isinstance(e, ToolResult)).result
    events = list(Agent(repo.working_tree_dir).send("fresh", "where is the report and the pull request?"))
    assert [e.name for e in events if isinstance(e, ToolCall)] == ["list_results"]
    assert f"Report {result['report_path']} on branch {result['branch']}." in events[-1].text
    assert f"Pull request for branch {result['branch']}: {result['pr']['description']}." in events[-1].text
