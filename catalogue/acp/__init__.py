"""ACP evidence adapters: a per-session turn observer over Agent Client Protocol traffic and
the projections that turn agent-specific signals into provider errors (Cursor's retriable
marker, Codex's capacity status, paired diagnostics).

Pure: no I/O and no clock; every time is passed in. Messages are parsed with the official
ACP SDK's schema models (`acp.schema`).
"""

from catalogue.acp.observer import (
    AcpTurnObserver,
    ChunkSuppressed,
    ObserverEvent,
    ProviderError,
    TurnCompleted,
    TurnFailed,
    TurnSnapshot,
    authorise,
)
from catalogue.acp.projections import (
    CODEX_ADAPTER,
    CODEX_CAPACITY_DIAGNOSTIC,
    CURSOR_ADAPTER,
    CURSOR_DIAGNOSTIC,
    CURSOR_SOURCE,
    MAX_CURSOR_SUFFIX_BYTES,
    codex_system_error,
    cursor_retriable_suffix,
    diagnostic_pairs,
    is_capacity_chunk,
)
from catalogue.acp.replay import AcpReplay, event_json

__all__ = [
    "CODEX_ADAPTER",
    "CODEX_CAPACITY_DIAGNOSTIC",
    "CURSOR_ADAPTER",
    "CURSOR_DIAGNOSTIC",
    "CURSOR_SOURCE",
    "MAX_CURSOR_SUFFIX_BYTES",
    "AcpReplay",
    "AcpTurnObserver",
    "ChunkSuppressed",
    "ObserverEvent",
    "ProviderError",
    "TurnCompleted",
    "TurnFailed",
    "TurnSnapshot",
    "authorise",
    "codex_system_error",
    "cursor_retriable_suffix",
    "diagnostic_pairs",
    "event_json",
    "is_capacity_chunk",
]
