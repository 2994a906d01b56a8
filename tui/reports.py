"""The reports the preview screen offers: those on meshpilot's report branches and those in the work tree.

agent.report commits a report on a branch of its own, meshpilot/<slug>-<date>, without touching the work tree,
so a fresh report is read from git (the branch's tip), not from disk. Reports already merged are read from the
work tree. Either way the report is <report.dir>/<date>-<slug>/README.md, report.dir being the experiment's
(docs/experiments by default).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

from trainer.config import ConfigError, ReportSpec, load_experiment

BRANCH_PREFIX = "meshpilot/"
EXPERIMENT = "meshpilot.yaml"


@dataclass(frozen=True)
class Report:
    name: str  # the report's folder: <date>-<slug>
    path: str  # README.md, relative to the repository
    branch: str | None  # None: read from the work tree


def report_dir(repo: Path) -> str:
    """The experiment's report.dir (docs/experiments unless it says otherwise)."""
    experiment = repo / EXPERIMENT
    if experiment.is_file():
        with contextlib.suppress(ConfigError):  # a broken experiment file still has reports worth reading
            return load_experiment(experiment).report.dir.strip("/")
    return ReportSpec().dir.strip("/")


def find_reports(repo: Path) -> list[Report]:
    """Every report, newest first (folder names start with the date); a branch's copy wins over the work tree's."""
    folder = report_dir(repo)
    found: dict[str, Report] = {}
    for path in sorted((repo / folder).glob("*/README.md")):
        relative = path.relative_to(repo).as_posix()
        found[relative] = Report(path.parent.name, relative, None)
    for branch, tree in _report_branches(repo):
        try:
            reports = tree / folder
        except KeyError:
            continue
        for entry in reports.trees:
            if "README.md" in [blob.name for blob in entry.blobs]:
                relative = f"{folder}/{entry.name}/README.md"
                found[relative] = Report(entry.name, relative, branch)
    return sorted(found.values(), key=lambda r: (r.name, r.branch or ""), reverse=True)


def read_report(repo: Path, report: Report) -> str:
    if report.branch is None:
        return (repo / report.path).read_text(errors="replace")
    # GitPython (a slow import) only for reports on a branch
    import git

    blob = git.Repo(repo).heads[report.branch].commit.tree / report.path
    return blob.data_stream.read().decode(errors="replace")


def _report_branches(repo: Path):
    """(branch name, tip tree) of meshpilot's report branches; none when the repository is no git repository."""
    # GitPython (a slow import) only for reports on a branch
    import git

    try:
        repository = git.Repo(repo)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return []
    return [(h.name, h.commit.tree) for h in repository.heads if h.name.startswith(BRANCH_PREFIX)]
