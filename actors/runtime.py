"""Compatibility: `actors.runtime` moved to `actors.hosting.runtime`; this path keeps working.

Kept for code written against the flat layout.
"""

from actors.hosting.installation import HOST_STOP_POLL_S, HOST_STOP_TIMEOUT_S
from actors.hosting.runtime import (
    NAMESPACE,
    REDIS_TIMEOUT_S,
    RecoveryRuntime,
    RemoteRouteHost,
    host_name,
)

__all__ = [
    "HOST_STOP_POLL_S",
    "HOST_STOP_TIMEOUT_S",
    "NAMESPACE",
    "REDIS_TIMEOUT_S",
    "RecoveryRuntime",
    "RemoteRouteHost",
    "host_name",
]
