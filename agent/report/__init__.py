"""Reports of sweeps in the experiment repository: the report with its plots and raw results, the managed docs
section and the model card, committed on a branch of meshpilot's own and, on request, proposed as a pull request.

Order of work: every input and the repository, remote and provider are checked first (cheap, and nothing is
written yet); then the files are made in memory; then one commit, a push and the pull request. A failure after
the commit puts the branch back as it was (see agent.repo.git_writer.undo).
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agent.repo import git_writer
from agent.repo.providers import make_provider
from agent.repo.providers.base import PullRequest
from agent.repo.secrets import RepoError, install_log_redaction
from agent.report.build import build, finish, pull_request_body
from agent.report.docs import MODEL_CARD, TRAINING_GUIDE, docs_file
from agent.report.inputs import ReportError, Sweep, check_bench, find_longer_run, load_bench, load_sweep
from trainer.config import ReportSpec, experiment_from_dict

__all__ = ["ReportError", "write_report"]

_SLUG = re.compile(r"^[a-z0-9][a-z0-9-]{0,59}$")


def write_report(
    sweep: Path,
    repo: Path,
    *,
    bench_results: Sequence[Path | dict] = (),
    slug: str | None = None,
    date: str | None = None,
    pr: bool = False,
    provider: str = "local",
    dry_run: bool = False,
    prose: Any = None,
    remote: str | None = None,
    project: str | None = None,
    api_url: str | None = None,
    author: str | None = None,
    draft: bool | None = None,
) -> dict:
    """Write the report of `sweep` into `repo` on branch meshpilot/<slug>-<date>; with `pr`, push it and open
    (or update) the pull request.

    Returns {"branch", "report_path" (relative to repo), "commit", "pr", "files", "changed", "prose"} and, for a
    dry run, "diff" (nothing is written then). `prose` is a callable (slot, instructions, facts) -> str or a
    langchain chat model; see agent.report.prose for why it can never put a number into a document.
    `remote`, `draft` and the report folder default to the experiment's `report` section; `project` (owner/name)
    and `api_url` to what the remote's URL says; `author` ("Name <email>") to MESHPILOT_GIT_AUTHOR or meshpilot.
    """
    loaded = load_sweep(Path(sweep))
    benches = _benches(bench_results)
    settings = _settings(loaded)
    slug, date = _check_slug(slug or _slug_from(loaded.path)), _check_date(date)
    report_dir = f"{_check_dir(settings.dir)}/{date}-{slug}"
    git_writer.parse_author(author)
    repository = git_writer.open_repository(Path(repo))
    remote = remote or settings.pr.remote
    publisher = make_provider(provider, repository, remote, project=project, api_url=api_url) if pr else None
    if publisher is not None:
        install_log_redaction()
        publisher.check()
    target = git_writer.prepare_branch(repository, f"meshpilot/{slug}-{date}", remote if pr else None)
    docs = docs_file(git_writer.read_committed(target, "README.md") is not None)
    git_writer.ensure_clean(repository, [report_dir, docs, MODEL_CARD, TRAINING_GUIDE])

    files, ctx = build(
        loaded, benches, report_dir, slug=slug, date=date, experiment=_experiment_label(loaded, Path(repo)),
        docs_file=docs, committed=lambda path: git_writer.read_committed(target, path), prose=prose,
        longer_run=find_longer_run(benches, loaded.winner),
    )  # fmt: skip
    body = pull_request_body(ctx, files) if publisher is not None else ""
    finish(files, ctx)
    result = {
        "branch": target.branch,
        "report_path": f"{report_dir}/README.md",
        "commit": None,
        "pr": None,
        "files": sorted(files),
        "changed": git_writer.changed_files(target, files),
        "prose": ctx.prose_origins,
    }
    if dry_run:
        return {**result, "diff": git_writer.diff(target, files)}
    title = f"meshpilot: {ctx.sweep_name(quote='')} ({date})"  # the commit's subject and the pull request's title
    message = f"{title}\n\nReport, raw results, docs and model card."
    result["commit"] = git_writer.commit(target, files, message, author) or _existing_tip(target)
    if publisher is not None and result["commit"] is not None:
        request = PullRequest(target.branch, target.base, title, body, settings.pr.draft if draft is None else draft)
        result["pr"] = _publish(target, publisher, request)
    return result


def _publish(target: git_writer.Target, publisher: Any, request: PullRequest) -> dict:
    """Push and open or update the pull request; on failure, put the branch back (see git_writer.undo)."""
    pushed = False
    try:
        pushed = git_writer.push(target)
        return publisher.publish(request)
    except BaseException as error:
        try:
            git_writer.undo(target, pushed)
        except RepoError as undo_error:
            raise RepoError(f"{error}; then undoing the branch failed too: {undo_error}") from None
        raise


def _existing_tip(target: git_writer.Target) -> str | None:
    """With nothing new to commit: the branch's commit when it holds the report, None when there is no branch."""
    if target.parent == target.repo.head.commit:
        return None  # the report is already on the current branch (merged): nothing to propose
    return target.parent.hexsha


def _benches(bench_results: Sequence[Path | dict]) -> list[tuple[str, dict[str, Any]]]:
    """(file name under results/bench/, sanitized result) for each benchmark result, a path or a parsed dict."""
    named: list[tuple[str, dict[str, Any]]] = []
    for item in bench_results:
        data = check_bench(item, f"benchmark result {len(named)}") if isinstance(item, dict) else load_bench(Path(item))
        stem = re.sub(r"[^a-z0-9]+", "-", data["suite"].lower()).strip("-") or "bench"
        taken = {name for name, _ in named}
        name, n = f"{stem}.json", 2
        while name in taken:
            name, n = f"{stem}-{n}.json", n + 1
        named.append((name, data))
    return named


def _settings(sweep: Sweep) -> ReportSpec:
    """The experiment's `report` section, from a trial's resolved config (defaults when no trial ran)."""
    for trial in sweep.trials:
        config = trial.config()
        if config:
            try:
                return experiment_from_dict(config).report
            except ValueError:
                continue
    return ReportSpec()


def _slug_from(path: Path) -> str:
    return re.sub(r"[^a-z0-9]+", "-", path.resolve().name.lower()).strip("-")[:60] or "sweep"


def _check_slug(slug: str) -> str:
    if not _SLUG.match(slug):
        raise ReportError(f"slug {slug!r}: use lower-case letters, digits and dashes (at most 60)")
    return slug


def _check_date(date: str | None) -> str:
    if date is None:
        return datetime.date.today().isoformat()
    try:
        return datetime.date.fromisoformat(date).isoformat()
    except ValueError:
        raise ReportError(f"date {date!r}: expected YYYY-MM-DD") from None


def _check_dir(directory: str) -> str:
    path = Path(directory)
    if path.is_absolute() or ".." in path.parts or not directory.strip("/"):
        raise ReportError(f"report.dir {directory!r}: must be a folder inside the repository")
    return path.as_posix().strip("/")


def _experiment_label(sweep: Sweep, repo: Path) -> str:
    """The experiment file as the reproduce command names it: relative to the repository when inside it."""
    experiment = Path(str(sweep.summary.get("experiment") or "meshpilot.yaml"))
    try:
        return experiment.resolve().relative_to(repo.resolve()).as_posix()
    except ValueError:
        return experiment.as_posix()
