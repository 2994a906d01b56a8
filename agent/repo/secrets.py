"""Provider tokens: read from the environment only, and never printed, logged, committed or raised.

`redact` replaces the value of every token variable (and any user:password in a URL) with `***`. Errors that
leave this package are RepoError, whose message is redacted when it is made, so a token in a remote URL or in
an HTTP library's exception text cannot reach the terminal.
"""

from __future__ import annotations

import logging
import os
import re

from trainer.config import ConfigError

# The variables each provider reads its token from, first found wins.
TOKEN_VARIABLES: dict[str, tuple[str, ...]] = {
    "github": ("GITHUB_TOKEN", "GH_TOKEN"),
    "gitlab": ("GITLAB_TOKEN",),
    "gitea": ("GITEA_TOKEN", "FORGEJO_TOKEN"),
}
_SHORTEST_SECRET = 4  # shorter values would redact ordinary words and digits
_URL_CREDENTIALS = re.compile(r"(?<=://)[^/\s@]+@")


def redact(text: str) -> str:
    """`text` with every token from the environment and every URL credential replaced by ***."""
    for names in TOKEN_VARIABLES.values():
        for name in names:
            value = os.environ.get(name, "").strip()
            if len(value) >= _SHORTEST_SECRET:
                text = text.replace(value, "***")
    return _URL_CREDENTIALS.sub("***@", text)


class RepoError(ConfigError):
    """A problem with the repository, its remote or the pull-request provider: one line, tokens redacted."""

    def __init__(self, message: str):
        super().__init__(redact(" ".join(str(message).split())))


def token_from_env(provider: str) -> str:
    for name in TOKEN_VARIABLES[provider]:
        value = os.environ.get(name, "").strip()
        if value:
            return value
    names = " or ".join(TOKEN_VARIABLES[provider])
    raise RepoError(f"{provider}: no token in the environment; set {names} (tokens are read from nowhere else)")


class RedactingFilter(logging.Filter):
    """Redacts a record's final message, so libraries that log requests cannot leak a token."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = redact(record.getMessage()), None
        return True


def install_log_redaction() -> None:
    """Put a RedactingFilter on every handler that prints records (filters on loggers miss their children)."""
    for handler in [*logging.getLogger().handlers, logging.lastResort]:
        if handler is not None and not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
