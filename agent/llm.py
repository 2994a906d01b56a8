"""Which chat model the agent talks to: the offline planner (the default), or an OpenAI-compatible endpoint
(vLLM, llama.cpp server, Ollama, OpenAI) through langchain-openai.

Configuration: MESHPILOT_LLM_BASE_URL and MESHPILOT_LLM_MODEL (the command line's --llm-base-url and --llm-model
override them); the API key comes from MESHPILOT_LLM_API_KEY or OPENAI_API_KEY and from nowhere else. The key is
handed straight to the client, which keeps it as a SecretStr: it is no field of LLMSettings, never part of the
graph's state (so never in the checkpointer), and errors are redacted before anyone sees them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from langchain_core.language_models import BaseChatModel

from agent.offline import OfflinePlanner
from agent.repo.secrets import redact as redact_secrets
from trainer.config import ConfigError

KEY_VARIABLES = ("MESHPILOT_LLM_API_KEY", "OPENAI_API_KEY")
# Local servers (vLLM, llama.cpp, Ollama) accept any key, but the OpenAI client insists on one.
NO_KEY = "unused"
REQUEST_TIMEOUT_S = 120.0


class LLMError(ConfigError):
    """The language model could not be reached or refused the request; the message holds no secret."""


@dataclass(frozen=True)
class LLMSettings:
    base_url: str | None = None  # None with no model: the offline planner; with a model: OpenAI's own API
    model: str | None = None

    @property
    def offline(self) -> bool:
        return self.base_url is None and self.model is None

    def describe(self) -> str:
        if self.offline:
            return "the offline planner"
        return f"{self.model} at {self.base_url or 'the OpenAI API'}"


def llm_settings(
    base_url: str | None = None, model: str | None = None, env: Mapping[str, str] | None = None
) -> LLMSettings:
    """Flags first, then MESHPILOT_LLM_BASE_URL / MESHPILOT_LLM_MODEL; checks them without any network."""
    env = os.environ if env is None else env
    base_url = base_url or env.get("MESHPILOT_LLM_BASE_URL") or None
    model = model or env.get("MESHPILOT_LLM_MODEL") or None
    if base_url is not None and not re.match(r"https?://[^/\s]+", base_url):
        raise ConfigError(f"LLM base URL {base_url!r} must start with http:// or https:// and name a host")
    if base_url is not None and model is None:
        raise ConfigError(f"an LLM base URL ({base_url}) needs a model name: --llm-model or MESHPILOT_LLM_MODEL")
    return LLMSettings(base_url, model)


def make_llm(settings: LLMSettings, env: Mapping[str, str] | None = None) -> BaseChatModel:
    """The chat model these settings name."""
    if settings.offline:
        return OfflinePlanner()
    # the OpenAI client only for an online model
    from langchain_openai import ChatOpenAI

    env = os.environ if env is None else env
    key = next((env[name] for name in KEY_VARIABLES if env.get(name)), None)
    if key is None and settings.base_url is None:
        raise ConfigError("the OpenAI API needs a key: set MESHPILOT_LLM_API_KEY or OPENAI_API_KEY")
    return ChatOpenAI(
        model=settings.model,
        base_url=settings.base_url,
        api_key=key or NO_KEY,
        timeout=REQUEST_TIMEOUT_S,
        max_retries=1,
    )


def redact(text: str, env: Mapping[str, str] | None = None) -> str:
    """`text` as agent.repo.secrets.redact leaves it, and with anything else shaped like a key removed as well.

    Servers echo keys back in errors (OpenAI shows a masked one), so error text is redacted before it is
    printed or stored, whatever its origin; an error line holds no figure, so it can lose every long word too.
    """
    return re.sub(r"\b(?:sk|key|api)[-_][\w*.-]{6,}|[\w*-]{32,}", "***", redact_secrets(text, env), flags=re.IGNORECASE)


def llm_failure(error: Exception) -> LLMError | None:
    """The one-line, redacted LLMError for a failure of the model's client, or None for any other error.

    Raised in place of the client's own exception inside the graph: LangGraph saves a failed node's exception
    in the checkpointer, and a server's error message may quote the key.
    """
    # the OpenAI client only for an online model
    import openai

    if not isinstance(error, openai.OpenAIError):
        return None
    first_line = str(error).splitlines()[0] if str(error) else type(error).__name__
    return LLMError(f"the language model failed: {redact(first_line)}")
