"""`meshpilot report`: write a sweep's report into the experiment repository, optionally as a pull request."""

from __future__ import annotations

import argparse
from pathlib import Path

from agent.repo.providers import PROVIDERS
from agent.repo.secrets import redact
from agent.report import write_report


def register(commands: argparse._SubParsersAction) -> None:
    report = commands.add_parser("report", help="write a sweep's report, docs and model card into the repository")
    report.add_argument("--sweep", type=Path, required=True, help="sweep directory (summary.json, trials/)")
    report.add_argument("--repo", type=Path, required=True, help="the experiment repository (its top folder)")
    report.add_argument("--pr", action="store_true", help="push the branch and open or update a pull request")
    report.add_argument("--provider", choices=PROVIDERS, default="local", help="pull-request provider (default local)")
    report.add_argument("--dry-run", action="store_true", help="print the diff; write and push nothing")
    report.add_argument(
        "--bench", dest="bench", action="append", type=Path, default=[], metavar="RESULT.json",
        help="benchmark result to include (repeatable)",
    )  # fmt: skip
    report.add_argument("--slug", help="short name: branch meshpilot/<slug>-<date> (default: the sweep folder's name)")
    report.add_argument("--date", help="YYYY-MM-DD in the report's folder and branch (default: today)")
    report.add_argument("--remote", help="git remote to push to (default: the experiment's report.pr.remote)")
    report.add_argument("--project", help="owner/name on the provider (default: from the remote's URL)")
    report.add_argument("--api-url", help="the provider's server (default: from the environment or the remote)")
    report.add_argument("--author", help="commit author, 'Name <email>' (default: $MESHPILOT_GIT_AUTHOR or meshpilot)")
    report.set_defaults(handler=_report)


def _report(args: argparse.Namespace) -> int:
    result = write_report(
        args.sweep, args.repo, bench_results=args.bench, slug=args.slug, date=args.date, pr=args.pr,
        provider=args.provider, dry_run=args.dry_run, remote=args.remote, project=args.project,
        api_url=args.api_url, author=args.author,
    )  # fmt: skip
    print(redact(describe(result)))
    return 0


def describe(result: dict) -> str:
    """What the user reads after `meshpilot report`."""
    if "diff" in result:
        changed = len(result["changed"])
        return f"{result['diff']}\ndry run: {changed} files would change on {result['branch']}; nothing written"
    lines = [f"report: {result['report_path']}"]
    if result["commit"] is None:
        lines.append(f"nothing to commit: the repository already holds this report ({result['branch']} unchanged)")
    elif not result["changed"]:
        lines.append(f"branch {result['branch']} at {result['commit'][:12]}: already up to date")
    else:
        lines.append(f"branch {result['branch']} at {result['commit'][:12]} ({len(result['changed'])} files changed)")
    pr = result.get("pr")
    if pr:
        where = pr.get("url") if pr.get("number") is None else f"#{pr['number']} {pr.get('url', '')}"
        lines.append(f"pull request {pr['action']} ({pr['provider']}): {where}")
        if pr.get("description"):
            lines.append(f"description: {pr['description']}")
        if pr.get("summary"):
            lines.append(pr["summary"].rstrip())
    return "\n".join(lines)
