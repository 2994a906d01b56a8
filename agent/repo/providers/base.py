"""What every pull-request provider is and takes: the Provider protocol and the PullRequest it publishes (a leaf:
agent.repo.providers picks a provider, each provider module implements one)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class PullRequest:
    branch: str  # the head: meshpilot's branch
    base: str  # the branch it asks to merge into
    title: str
    body: str
    draft: bool = True


class Provider(Protocol):
    name: str

    def check(self) -> None:
        """Fail now, before any commit or push, when the token, the project or the remote is unusable."""

    def publish(self, request: PullRequest) -> dict:
        """Open the pull request, or update the open one for the same branch: {provider, url, number, action}."""
