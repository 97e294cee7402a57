"""Agent-specific projections of ACP traffic onto provider errors (pure predicates).

- Cursor: cursor-agent reports an upstream transport failure as an ordinary assistant
  chunk, `Error: RetriableError: <cause>`. `cursor_retriable_suffix` is the chunk check the
  observer applies; the catalogue rule `cursor.retriable_stream_reset.v1` applies the same
  prefix, trim, vetoes and (never looser) byte bound to complete diagnostics.
- Codex: a `systemError` thread status in a session info update plus a "model is at
  capacity" chunk in the same generation is one `model_capacity` failure.
- Diagnostic pairing: a diagnostic chunk matches the prompt's terminal JSON-RPC error when
  the error's message contains the diagnostic's text and both classify to the same code.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

CURSOR_ADAPTER = "cursor-acp"
CURSOR_SOURCE = "cursor_acp"
CURSOR_PREFIX = "error: retriableerror:"
MAX_CURSOR_SUFFIX_BYTES = 256
# The bounded constant the adapter reports instead of raw assistant text.
CURSOR_DIAGNOSTIC = "Error: RetriableError: HTTP/2 stream closed with error code CANCEL (0x8)."
_CURSOR_VETO = re.compile(
    r"context canceled|context deadline exceeded|cancel escalated|retry escalat"
)

CODEX_ADAPTER = "codex-acp"
# Codex's own display string for the condition (matched by codex.model_at_capacity.v1).
CODEX_CAPACITY_DIAGNOSTIC = "Selected model is at capacity. Please try a different model."
_CAPACITY = re.compile(r"\bmodel is (?:currently )?at capacity\b")

_TRAILING_PUNCTUATION = ".!;:,…"


def cursor_retriable_suffix(text: str) -> str | None:
    """The cause of a complete Cursor retriable marker, or None when `text` is not one.

    The text, trimmed of Unicode whitespace, starts with the case-insensitive prefix
    `Error: RetriableError:`; the rest, trimmed, is non-empty, at most 256 UTF-8 bytes and
    names no context cancellation, deadline, or retry or cancel escalation.
    """
    trimmed = text.strip()
    head = trimmed[: len(CURSOR_PREFIX)]
    if head.lower() != CURSOR_PREFIX:
        return None
    suffix = trimmed[len(CURSOR_PREFIX) :].strip()
    if not suffix or len(suffix.encode("utf-8", "surrogatepass")) > MAX_CURSOR_SUFFIX_BYTES:
        return None
    if _CURSOR_VETO.search(suffix.lower()):
        return None
    return suffix


def is_capacity_chunk(text: str) -> bool:
    """A chunk that reports the selected model to be at capacity."""
    return _CAPACITY.search(" ".join(text.lower().split())) is not None


def codex_system_error(meta: Mapping[str, Any] | None) -> bool:
    """Codex's `threadStatus.type == "systemError"`, at the top of `_meta` or under `codex`."""
    if not meta:
        return False
    for scope in (meta, meta.get("codex")):
        if isinstance(scope, Mapping):
            status = scope.get("threadStatus")
            if isinstance(status, Mapping) and status.get("type") == "systemError":
                return True
    return False


def _comparable(text: str) -> str:
    return " ".join(text.lower().split()).rstrip(_TRAILING_PUNCTUATION + " ")


def diagnostic_pairs(
    diagnostic: str, diagnostic_code: str, error_message: str, error_code: str
) -> bool:
    """Whether a diagnostic chunk reports the same failure as the terminal error: the error's
    message contains the diagnostic (trailing punctuation trimmed) and both share a code."""
    needle = _comparable(diagnostic)
    return bool(needle) and diagnostic_code == error_code and needle in _comparable(error_message)
