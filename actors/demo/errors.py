"""The demo's own error: a fleet it cannot build or a run it cannot finish."""

from __future__ import annotations

from actors.errors import RecoveryError


class DemoError(RecoveryError):
    """The demo cannot go on; the message names what is wrong."""
