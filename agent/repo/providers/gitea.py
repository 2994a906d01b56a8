"""Gitea and Forgejo pull requests through their REST API (/api/v1), with requests.

Neither has a draft flag in the API: a title starting with "WIP: " is their draft marker.
"""

from __future__ import annotations

from typing import Any

import requests

from agent.repo.providers.base import PullRequest
from agent.repo.secrets import RepoError

_PAGE = 50
_TIMEOUT_S = 30


class GiteaProvider:
    name = "gitea"

    def __init__(self, project: str, token: str, api_url: str):
        self.project = project
        self.api = f"{api_url.rstrip('/')}/api/v1/repos/{project}"
        self._session = requests.Session()
        self._session.headers.update({"Authorization": f"token {token}", "Accept": "application/json"})

    def check(self) -> None:
        self._request("GET", "", f"repository {self.project}")

    def publish(self, request: PullRequest) -> dict:
        title = f"WIP: {request.title}" if request.draft else request.title
        found = self._find_open(request)
        if found:
            number = found["number"]
            fields = {"title": title, "body": request.body}
            pull = self._request("PATCH", f"/pulls/{number}", f"updating pull request #{number}", json=fields)
            action = "updated"
        else:
            fields = {"head": request.branch, "base": request.base, "title": title, "body": request.body}
            pull = self._request("POST", "/pulls", "opening the pull request", json=fields)
            action = "created"
        return {"provider": self.name, "url": pull["html_url"], "number": pull["number"], "action": action}

    def _find_open(self, request: PullRequest) -> dict | None:
        page = 1
        while True:
            params = {"state": "open", "page": page, "limit": _PAGE}
            pulls = self._request("GET", "/pulls", "listing pull requests", params=params)
            for pull in pulls:
                if pull["head"]["ref"] == request.branch and pull["base"]["ref"] == request.base:
                    return pull
            if len(pulls) < _PAGE:
                return None
            page += 1

    def _request(self, method: str, path: str, what: str, **kwargs: Any) -> Any:
        try:
            response = self._session.request(method, self.api + path, timeout=_TIMEOUT_S, **kwargs)
        except requests.RequestException as e:
            raise RepoError(f"gitea: cannot reach the API while {what}: {type(e).__name__}") from None
        if response.ok:
            return response.json()
        raise RepoError(f"gitea: {what} failed: {_explain(response)}")


def _explain(response: requests.Response) -> str:
    status = response.status_code
    try:
        message = response.json().get("message", "")
    except ValueError:
        message = response.text[:200]
    if status == 401:
        return "authentication failed (401): the token in GITEA_TOKEN is invalid or expired"
    if status == 403:
        return f"forbidden (403): the token lacks permission ({message})"
    if status == 404:
        return "not found (404): no such repository, or the token cannot see it"
    if status == 429:
        retry = response.headers.get("Retry-After")
        return "rate limit exceeded (429); " + (f"retry after {retry} s" if retry else "try again later")
    if status in (409, 422):
        return f"conflict ({status}): {message}"
    return f"HTTP {status}: {message}"
