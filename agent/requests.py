"""Kept for imports that predate agent.understanding: the offline parser now lives there."""

from agent.understanding import Intent, parse_request

__all__ = ["Intent", "parse_request"]
