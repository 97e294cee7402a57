"""Cancelling a task that waits on Redis.

redis-py's asyncio client (8.2 here) can swallow a cancel: a cancel that lands while it
opens or settles its connection leaves the command to finish as if nothing happened
(a loop of one-second BLPOPs, cancelled at a random moment, went on looping in 1 to 3 of
300 runs). A loop that only a cancel ends would then never end, and whoever awaits it
after cancelling (a host closing, a fleet tearing down) hangs. Every such loop calls
`raise_if_cancelled` after each Redis call.
"""

from __future__ import annotations

import asyncio

__all__ = ["raise_if_cancelled"]


def raise_if_cancelled() -> None:
    """Raise CancelledError if the current task was asked to stop and the call it was in
    did not honour it."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError
