"""Waiting on Redis instead of polling it: a condition over what the runtime wrote is
checked again each time a key changes.

Every write of the runtime (a route transition, a ledger step, a recorded dispatcher call,
rq's own queue and registry keys) raises a keyspace notification; `wait_until` subscribes
to them before it first checks the condition, so no change between the check and the wait
is lost, and it checks once per burst of notifications. The test servers are ours, so the
waiter turns the notifications on itself.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Final

from redis.asyncio import Redis
from redis.asyncio.client import PubSub

EVERY_KEY: Final = "__keyspace@*__:*"
# K: keyspace channel, A: every command class, e: evictions (not in A), so any change wakes.
NOTIFY_ALL: Final = "KAe"

Condition = Callable[[], Awaitable[bool]]


async def wait_until(condition: Condition, timeout: float, *, redis_url: str) -> float:
    """Wait until `condition()` holds, re-checking it whenever a key changes in the Redis
    at `redis_url`; the seconds it took. A failed wait raises TimeoutError: the timeout
    only guards against a hang."""
    started = time.monotonic()
    client = Redis.from_url(redis_url)
    pubsub = client.pubsub(ignore_subscribe_messages=True)
    try:
        await client.config_set("notify-keyspace-events", NOTIFY_ALL)
        await pubsub.psubscribe(EVERY_KEY)
        async with asyncio.timeout(timeout):
            while not await condition():
                await _next_change(pubsub)
    except TimeoutError:
        raise TimeoutError(f"condition not met within {timeout} s") from None
    finally:
        await pubsub.aclose()  # type: ignore[no-untyped-call, unused-ignore]  # untyped before redis-py 8
        await client.aclose()
    return time.monotonic() - started


async def _next_change(pubsub: PubSub) -> None:
    """Block until a key changes, then take every notification already waiting: a burst
    of writes costs one check of the condition."""
    while await pubsub.get_message(timeout=None) is None:  # a subscribe confirmation
        pass
    while await pubsub.get_message(timeout=0) is not None:
        pass
