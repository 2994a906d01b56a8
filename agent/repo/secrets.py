"""Secrets: read from the environment only, and never printed, logged, committed, raised or stored.

`redact` is meshpilot's one redaction function: it replaces with `***` the value of every secret-named
variable of the environment (GITHUB_TOKEN, HF_TOKEN, OPENAI_API_KEY, any *_TOKEN, *_KEY, *_SECRET, ...), any
user:password in a URL, strings shaped like a known kind of key (ghp_..., github_pat_..., sk-..., hf_...,
glpat-..., AKIA..., xoxb-..., private key blocks) and a long random-looking value written after a key word
(`"secret": "9f0c..."`, `password=...`, `Authorization: Bearer ...`). Errors that leave this package are
RepoError, whose message is redacted when it is made, so a token in a remote URL or in an HTTP library's
exception text cannot reach the terminal; the agent redacts every message before it enters a conversation.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping

from trainer.config import ConfigError

# The variables each provider reads its token from, first found wins.
TOKEN_VARIABLES: dict[str, tuple[str, ...]] = {
    "github": ("GITHUB_TOKEN", "GH_TOKEN"),
    "gitlab": ("GITLAB_TOKEN",),
    "gitea": ("GITEA_TOKEN", "FORGEJO_TOKEN"),
}
_SHORTEST_SECRET = 8  # shorter values would redact ordinary words and digits; no real token is that short
# Environment variables whose value is a secret, by name: the providers' above, the LLM's key and their kin.
_SECRET_VARIABLE = re.compile(r"(?:^|_)(?:TOKEN|KEY|SECRET|PASSWORD|PASSWD|PAT|CREDENTIALS?|APIKEY)$", re.IGNORECASE)
_URL_CREDENTIALS = re.compile(r"(?<=://)[^/\s@]+@")
_KEY_SHAPED = re.compile(
    r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_\w{20,}|glpat-[\w-]{20,}|hf_[A-Za-z0-9]{20,}"
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}|xox[abposr]-[\w-]{10,}|pypi-[\w-]{20,}|npm_[A-Za-z0-9]{20,}"
    r"|sk-(?=[\w*-]{0,200}[0-9*])[\w*-]{8,})"  # OpenAI-style, also as servers echo them masked (sk-abc*****wxyz)
    r"|-----BEGIN[A-Z ]*PRIVATE KEY-----.*?(?:-----END[A-Z ]*PRIVATE KEY-----|\Z)",
    re.DOTALL,
)
# A value after a key word: `"secret": "..."`, `HF_TOKEN=...`, `password: ...`, `Authorization: Bearer ...`. The key
# word ends the key's name (HF_TOKEN, aws_secret_access_key; not tokenizer_hash); nothing before it is matched, so
# that a long unbroken word costs linear time.
_AFTER_KEY_WORD = re.compile(
    r"(?P<key>(?:secret|token|password|passwd|api[_-]?key|access[_-]?key|private[_-]?key|credential)s?"
    r"[\"']?\s*[:=]\s*[\"']?|\b(?:bearer|basic|token)\s+)(?P<value>[A-Za-z0-9+/_.=~-]{16,})",
    re.IGNORECASE,
)


def redact(text: str, env: Mapping[str, str] | None = None) -> str:
    """`text` with every secret of the environment (`env`, default os.environ), every URL credential, every
    key-shaped string and every random-looking value after a key word replaced by ***."""
    for value in sorted(_secret_values(os.environ if env is None else env), key=len, reverse=True):
        text = text.replace(value, "***")
    text = _URL_CREDENTIALS.sub("***@", text)
    text = _KEY_SHAPED.sub("***", text)
    return _AFTER_KEY_WORD.sub(_redacted_value, text)


def _secret_values(env: Mapping[str, str]) -> set[str]:
    """The values of the secret-named variables; not a path that exists (SSH_KEY=/home/me/.ssh/id is no secret)."""
    named = {name for names in TOKEN_VARIABLES.values() for name in names}
    values = {v.strip() for name, v in env.items() if name in named or _SECRET_VARIABLE.search(name)}
    return {v for v in values if len(v) >= _SHORTEST_SECRET and not (os.path.isabs(v) and os.path.exists(v))}


def _redacted_value(match: re.Match) -> str:
    """The key word kept and its value redacted, when the value looks random: letters and digits mixed."""
    value = match["value"]
    random_looking = re.search(r"[A-Za-z]", value) and re.search(r"[0-9]", value)
    return match["key"] + "***" if random_looking else match[0]


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
