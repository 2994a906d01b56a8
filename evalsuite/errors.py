"""The one error type of the benchmark suite: bad input, phrased for the user in one line."""

from __future__ import annotations

from trainer.config import ConfigError


class BenchError(ConfigError):
    """A bad task file, suite, model, store or submission; the CLI prints it as `meshpilot: error: ...`."""
