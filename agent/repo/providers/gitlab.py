"""GitLab merge requests through python-gitlab; a draft is a title starting with "Draft: ".

Rate limits are reported, not slept through (obey_rate_limit=False), like the other providers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gitlab
import requests

from agent.repo.providers.base import PullRequest
from agent.repo.secrets import RepoError

_NO_WAIT = {"obey_rate_limit": False}


class GitLabProvider:
    name = "gitlab"

    def __init__(self, project: str, token: str, api_url: str = "https://gitlab.com"):
        self.project, self.api_url = project, api_url
        self._client = gitlab.Gitlab(api_url, private_token=token, retry_transient_errors=False)
        self._project = None

    def check(self) -> None:
        self._project = _call(lambda: self._client.projects.get(self.project, **_NO_WAIT), f"project {self.project}")

    def publish(self, request: PullRequest) -> dict:
        if self._project is None:
            self.check()
        manager = self._project.mergerequests
        found = _call(
            lambda: manager.list(
                state="opened", source_branch=request.branch, target_branch=request.base, get_all=False, **_NO_WAIT
            ),
            "listing merge requests",
        )
        title = f"Draft: {request.title}" if request.draft else request.title
        if found:
            merge_request, action = found[0], "updated"
            merge_request.title, merge_request.description = title, request.body
            _call(lambda: merge_request.save(**_NO_WAIT), f"updating merge request !{merge_request.iid}")
        else:
            action = "created"
            fields = {
                "source_branch": request.branch,
                "target_branch": request.base,
                "title": title,
                "description": request.body,
            }
            merge_request = _call(lambda: manager.create(fields, **_NO_WAIT), "opening the merge request")
        return {"provider": self.name, "url": merge_request.web_url, "number": merge_request.iid, "action": action}


def _call(action: Callable[[], Any], what: str) -> Any:
    try:
        return action()
    except gitlab.GitlabError as e:
        raise RepoError(f"gitlab: {what} failed: {_explain(e)}") from None
    except requests.RequestException as e:
        raise RepoError(f"gitlab: cannot reach the API while {what}: {type(e).__name__}") from None


def _explain(error: gitlab.GitlabError) -> str:
    status, message = error.response_code, error.error_message
    if isinstance(message, bytes):
        message = message.decode(errors="replace")
    if isinstance(message, list | tuple):
        message = "; ".join(map(str, message))
    explained = {
        401: "authentication failed (401): the token in GITLAB_TOKEN is invalid or expired",
        403: f"forbidden (403): the token lacks permission ({message})",
        404: "not found (404): no such project, or the token cannot see it",
        429: "rate limit exceeded (429); try again later",
    }
    if status in explained:
        return explained[status]
    if status in (409, 422):
        return f"conflict ({status}): {message}"
    return f"HTTP {status}: {message}"
