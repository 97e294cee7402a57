"""Redis replies as text: a client made without `decode_responses` answers bytes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def reply_text(value: Any) -> str:
    """One reply value as text (bytes decoded as UTF-8; bytes that are not UTF-8 kept as
    surrogates, which the route codec reads as corrupt)."""
    return value.decode(errors="surrogateescape") if isinstance(value, bytes) else str(value)


def reply_texts(raw: Mapping[Any, Any] | None) -> dict[str, str]:
    """A hash reply (HGETALL) as text names and values; None (no reply) is empty."""
    if not raw:
        return {}
    if (
        isinstance(raw, dict)
        and all(type(name) is str for name in raw)
        and all(type(value) is str for value in raw.values())
    ):
        return raw  # a decoding client's reply is text already (the hot path's clients)
    return {reply_text(name): reply_text(value) for name, value in raw.items()}
