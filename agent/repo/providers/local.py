"""The `local` provider: any git remote (a bare repository on disk, a server without an API).

The branch is pushed like for every provider; the pull request is its description, kept in the repository's
git directory (one file per branch, rewritten on every run), and `git request-pull`'s summary, which is what a
maintainer of a plain git server is sent.
"""

from __future__ import annotations

from pathlib import Path

import git

from agent.repo.git_writer import check_remote
from agent.repo.providers.base import PullRequest
from agent.repo.secrets import RepoError, redact


class LocalProvider:
    name = "local"

    def __init__(self, repo: git.Repo, remote: str):
        self.repo, self.remote = repo, remote

    def check(self) -> None:
        check_remote(self.repo, self.remote)
        try:
            self.repo.git.ls_remote("--heads", self.remote)
        except git.GitCommandError as e:
            reason = (e.stderr or "").strip().splitlines()[-1:] or [str(e)]
            raise RepoError(f"cannot reach the remote {self.remote!r}: {reason[0]}") from None

    def publish(self, request: PullRequest) -> dict:
        path = self.description_path(request.branch)
        action = "updated" if path.is_file() else "created"
        path.parent.mkdir(parents=True, exist_ok=True)
        draft = "[draft] " if request.draft else ""
        path.write_text(f"{draft}{request.title}\n\n{request.body.rstrip()}\n")
        summary = self._request_pull(request)
        url = redact(self.repo.remotes[self.remote].url)
        return {"provider": self.name, "url": url, "description": str(path), "summary": summary, "action": action}

    def description_path(self, branch: str) -> Path:
        return Path(self.repo.git_dir) / "meshpilot" / "pull-requests" / f"{branch.replace('/', '__')}.md"

    def _request_pull(self, request: PullRequest) -> str:
        start = self.repo.merge_base(request.base, request.branch)[0].hexsha
        url = self.repo.remotes[self.remote].url
        ref = f"refs/heads/{request.branch}"
        try:
            return redact(self.repo.git.request_pull(start, url, f"{ref}:{ref}"))
        except git.GitCommandError as e:
            raise RepoError(f"git request-pull failed: {(e.stderr or str(e)).strip()}") from None
