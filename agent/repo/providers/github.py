"""GitHub pull requests through PyGithub (REST), draft by default.

PyGithub's own retries and pauses are off: a rate limit or an outage is reported at once with its reset time,
rather than sleeping for minutes inside an agent's tool call.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

import requests
from github import Auth, Github, GithubException, RateLimitExceededException

from agent.repo.providers.base import PullRequest
from agent.repo.secrets import RepoError


class GitHubProvider:
    name = "github"

    def __init__(self, project: str, token: str, api_url: str = "https://api.github.com"):
        self.project, self.api_url = project, api_url
        self._client = Github(
            auth=Auth.Token(token),
            base_url=api_url,
            retry=None,
            seconds_between_requests=None,
            seconds_between_writes=None,
        )
        self._repo = None

    def check(self) -> None:
        self._repo = _call(lambda: self._client.get_repo(self.project), f"repository {self.project}")

    def publish(self, request: PullRequest) -> dict:
        if self._repo is None:
            self.check()
        owner = self.project.split("/")[0]
        pulls = _call(
            lambda: list(self._repo.get_pulls(state="open", head=f"{owner}:{request.branch}", base=request.base)),
            "listing pull requests",
        )
        if pulls:
            pull, action = pulls[0], "updated"
            _call(lambda: pull.edit(title=request.title, body=request.body), f"updating pull request #{pull.number}")
        else:
            action = "created"
            pull = _call(
                lambda: self._repo.create_pull(
                    base=request.base, head=request.branch, title=request.title, body=request.body, draft=request.draft
                ),
                "opening the pull request",
            )
        return {"provider": self.name, "url": pull.html_url, "number": pull.number, "action": action}


def _call(action: Callable[[], Any], what: str) -> Any:
    try:
        return action()
    except RateLimitExceededException as e:
        raise RepoError(f"github: rate limit exceeded while {what}; {_reset_time(e.headers)}") from None
    except GithubException as e:
        raise RepoError(f"github: {what} failed: {_explain(e)}") from None
    except requests.RequestException as e:
        raise RepoError(f"github: cannot reach the API while {what}: {type(e).__name__}") from None


def _explain(error: GithubException) -> str:
    data = error.data if isinstance(error.data, dict) else {}
    message = data.get("message") or error.message or ""
    details = "; ".join(str(e.get("message", e)) if isinstance(e, dict) else str(e) for e in data.get("errors", []))
    if error.status == 401:
        return "authentication failed (401): the token in GITHUB_TOKEN is invalid or expired"
    if error.status == 403:
        return f"forbidden (403): the token lacks permission ({message})"
    if error.status == 404:
        return "not found (404): no such repository, or the token cannot see it"
    if error.status in (409, 422):
        return f"conflict ({error.status}): {message}" + (f": {details}" if details else "")
    return f"HTTP {error.status}: {message}"


def _reset_time(headers: dict | None) -> str:
    reset = (headers or {}).get("x-ratelimit-reset") or (headers or {}).get("X-RateLimit-Reset")
    if reset and str(reset).isdigit():
        when = datetime.datetime.fromtimestamp(int(reset), tz=datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        return f"it resets at {when}"
    retry = (headers or {}).get("retry-after") or (headers or {}).get("Retry-After")
    return f"retry after {retry} s" if retry else "try again later"
