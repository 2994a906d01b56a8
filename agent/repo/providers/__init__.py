"""Pull-request providers: each checks access before anything is written, then opens or updates one request.

Every provider finds an open request for the same branch first and updates it, so a re-run never opens a
second one. Tokens come from the environment (agent.repo.secrets); HTTP errors become one-line RepoErrors.
"""

from __future__ import annotations

import os
import re

import git

from agent.repo.git_writer import check_remote
from agent.repo.providers.base import Provider
from agent.repo.providers.local import LocalProvider
from agent.repo.secrets import RepoError, token_from_env

PROVIDERS = ("local", "github", "gitlab", "gitea")
# Where each provider's API is when neither the caller nor the environment says.
_API_VARIABLES = {"github": "GITHUB_API_URL", "gitlab": "GITLAB_URL", "gitea": "GITEA_URL"}


def make_provider(
    name: str, repo: git.Repo, remote: str, *, project: str | None = None, api_url: str | None = None
) -> Provider:
    """The provider `name` for `repo`; the project (owner/name) and API default from the remote's URL."""
    if name not in PROVIDERS:
        raise RepoError(f"unknown provider {name!r}; choose one of {', '.join(PROVIDERS)}")
    url = check_remote(repo, remote)
    if name == "local":
        return LocalProvider(repo, remote)
    token = token_from_env(name)
    host, path = parse_remote_url(url)
    project = project or path
    if not project or project.count("/") < 1:
        raise RepoError(f"{name}: cannot tell the project from the remote URL; pass it as owner/name")
    api_url = api_url or os.environ.get(_API_VARIABLES[name]) or _default_api(name, host)
    if name == "github":
        # imported here: each provider's client (PyGithub, python-gitlab, requests) loads only once it is chosen,
        # and `meshpilot --help` imports this package
        from agent.repo.providers.github import GitHubProvider

        return GitHubProvider(project, token, api_url)
    if name == "gitlab":
        from agent.repo.providers.gitlab import GitLabProvider  # imported here: as GitHub's, above

        return GitLabProvider(project, token, api_url)
    from agent.repo.providers.gitea import GiteaProvider  # imported here: as GitHub's, above

    return GiteaProvider(project, token, api_url)


_SCHEME_URL = re.compile(r"^[a-z][a-z0-9+.-]*://(?:[^@/]+@)?(?P<host>[^/:]+)(?::\d+)?/(?P<path>.+?)(?:\.git)?/?$")
_SCP_URL = re.compile(r"^(?:[^@/]+@)?(?P<host>[^/:]+):(?P<path>[^/].*?)(?:\.git)?/?$")


def parse_remote_url(url: str) -> tuple[str | None, str | None]:
    """(host, owner/name) of https://host/owner/name.git, ssh://git@host/owner/name, git@host:owner/name.git."""
    match = _SCHEME_URL.match(url) or _SCP_URL.match(url)
    if not match or url.startswith("file://"):
        return None, None
    return match["host"], match["path"]


def _default_api(name: str, host: str | None) -> str:
    if name == "github":
        return "https://api.github.com" if host in (None, "github.com") else f"https://{host}/api/v3"
    if host is None:
        raise RepoError(f"{name}: cannot tell the server from the remote URL; set {_API_VARIABLES[name]}")
    return f"https://{host}"
