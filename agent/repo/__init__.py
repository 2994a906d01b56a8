"""meshpilot's files in the experiment repository: a branch of its own, commits holding only its files, and a
pull request (or merge request) through a provider: local (any git remote), GitHub, GitLab, Gitea/Forgejo."""

from agent.repo.git_writer import Target, commit, diff, ensure_clean, open_repository, prepare_branch, push, undo
from agent.repo.providers import PROVIDERS, make_provider
from agent.repo.providers.base import PullRequest
from agent.repo.secrets import RepoError, redact

__all__ = [
    "PROVIDERS",
    "PullRequest",
    "RepoError",
    "Target",
    "commit",
    "diff",
    "ensure_clean",
    "make_provider",
    "open_repository",
    "prepare_branch",
    "push",
    "redact",
    "undo",
]
