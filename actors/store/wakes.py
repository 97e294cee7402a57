"""The wake stream of a route host: waits written for its routes by someone else.

A job (a NotDispatched waiting for its redelivery, a backstop that parked a due attempt
again) writes through its worker's engine, not the owning host, so the host's precise
timer would not know the new deadline and only the durable backstop (a second or more
later) would fire it. The job announces each such wait on the host's stream; the host
follows it (XREAD BLOCK from the last entry it saw before rehydrating, so nothing written
meanwhile is missed) and arms its timer. An entry is only a hint: the timer's fire is
fenced on the attempt like any other.

A dispatch job also announces a *delivered* dispatch of a route with a task (its
dispatcher returned, and the ledger says `delivered`): the owning host's session guard
takes it as the session's accepted prompt (actors/engine/notice_lifecycle.py). That entry
(`kind` = `delivered`, no deadline) is a hint too: the host checks the route in Redis
before it accepts it, and a host that does not know the kind skips it (it has no deadline).

Every dispatcher call that observed something (the webhook's status and latency, or a
custom dispatcher's DispatchFacts) is announced as well (`kind` = `dispatched`: the
outcome, the status, the latency): the dispatch runs in an rq worker outside Ray, so the
owning host is where it becomes metrics (actors/hosting/metrics.py). Losing one loses a
sample of a metric, nothing else: the ledger keeps the same facts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from redis.asyncio import Redis
from redis.exceptions import RedisError

from actors.errors import StoreUnavailableError
from actors.keys import AttemptFence, KeySpace
from actors.routes.models import RouteSnapshot
from actors.store.cancels import raise_if_cancelled

DEFAULT_MAXLEN: Final = 10_000
FOLLOW_COUNT: Final = 500
DELIVERED: Final = "delivered"
DISPATCHED: Final = "dispatched"


@dataclass(frozen=True, slots=True)
class Wake:
    """One announced wait: the attempt and its deadline."""

    fence: AttemptFence
    deadline: datetime


@dataclass(frozen=True, slots=True)
class Delivered:
    """One announced delivered dispatch: the attempt the dispatcher was handed."""

    fence: AttemptFence


@dataclass(frozen=True, slots=True)
class Dispatched:
    """One announced dispatcher call: how it ended (`delivered`, `not_dispatched`,
    `failed`: the ledger's outcome) and what the dispatcher observed of it: the receiver's
    HTTP status (None: no answer) and the call's latency."""

    fence: AttemptFence
    outcome: str
    status: int | None
    latency_ms: float


async def announce_waits(
    client: Redis,
    keys: KeySpace,
    host_id: str,
    snapshots: Sequence[RouteSnapshot],
    *,
    maxlen: int = DEFAULT_MAXLEN,
) -> None:
    """Append the waits of `snapshots` (waiting routes with a deadline) to the host's
    stream, in one pipeline. A Redis error raises StoreUnavailableError."""
    stream = keys.host_wakes(host_id)
    try:
        async with client.pipeline(transaction=False) as pipe:
            for snapshot in snapshots:
                if snapshot.deadline is None:
                    continue
                fields = {
                    "route": snapshot.route_id, "generation": snapshot.generation,
                    "ordinal": snapshot.attempt_ordinal, "deadline": snapshot.deadline.isoformat(),
                }  # fmt: skip
                pipe.xadd(stream, fields, maxlen=maxlen, approximate=True)  # type: ignore[arg-type]  # redis-py's field types are narrower than what it takes
            await pipe.execute()
    except RedisError as error:
        raise StoreUnavailableError("announce waits", type(error).__name__) from error


async def announce_delivered(
    client: Redis,
    keys: KeySpace,
    host_id: str,
    attempts: Sequence[AttemptFence],
    *,
    maxlen: int = DEFAULT_MAXLEN,
) -> None:
    """Append the delivered dispatches of `attempts` to the host's stream, in one pipeline.
    A Redis error raises StoreUnavailableError."""
    stream = keys.host_wakes(host_id)
    try:
        async with client.pipeline(transaction=False) as pipe:
            for attempt in attempts:
                fields = {
                    "kind": DELIVERED, "route": attempt.route_id,
                    "generation": attempt.generation, "ordinal": attempt.ordinal,
                }  # fmt: skip
                pipe.xadd(stream, fields, maxlen=maxlen, approximate=True)  # type: ignore[arg-type]  # redis-py's field types are narrower than what it takes
            await pipe.execute()
    except RedisError as error:
        raise StoreUnavailableError("announce deliveries", type(error).__name__) from error


async def announce_dispatched(
    client: Redis,
    keys: KeySpace,
    host_id: str,
    calls: Sequence[Dispatched],
    *,
    maxlen: int = DEFAULT_MAXLEN,
) -> None:
    """Append the dispatcher calls `calls` to the host's stream, in one pipeline. A Redis
    error raises StoreUnavailableError."""
    stream = keys.host_wakes(host_id)
    try:
        async with client.pipeline(transaction=False) as pipe:
            for call in calls:
                fields = {
                    "kind": DISPATCHED, "route": call.fence.route_id,
                    "generation": call.fence.generation, "ordinal": call.fence.ordinal,
                    "outcome": call.outcome, "latency_ms": f"{call.latency_ms:g}",
                    "status": "" if call.status is None else str(call.status),
                }  # fmt: skip
                pipe.xadd(stream, fields, maxlen=maxlen, approximate=True)  # type: ignore[arg-type]  # redis-py's field types are narrower than what it takes
            await pipe.execute()
    except RedisError as error:
        raise StoreUnavailableError("announce dispatches", type(error).__name__) from error


async def last_wake_id(client: Redis, keys: KeySpace, host_id: str) -> str:
    """The newest entry's id of the host's stream ("0-0" when it has none)."""
    try:
        entries = await client.xrevrange(keys.host_wakes(host_id), count=1)
    except RedisError as error:
        raise StoreUnavailableError("wakes", type(error).__name__) from error
    return str(entries[0][0]) if entries else "0-0"


async def next_wakes(
    client: Redis, keys: KeySpace, host_id: str, after: str, *, block_ms: int
) -> tuple[str, list[Wake | Delivered | Dispatched]]:
    """The entries after id `after` (waiting up to `block_ms` for one), and the id to read
    after next. An entry that does not decode is skipped (it is only a hint)."""
    try:
        reply: Any = await client.xread(
            {keys.host_wakes(host_id): after}, count=FOLLOW_COUNT, block=block_ms
        )
    except RedisError as error:
        raise_if_cancelled()
        raise StoreUnavailableError("wakes", type(error).__name__) from error
    raise_if_cancelled()
    wakes: list[Wake | Delivered | Dispatched] = []
    for _stream, entries in reply or []:
        for entry_id, fields in entries:
            after = str(entry_id)
            wake = _decoded(fields)
            if wake is not None:
                wakes.append(wake)
    return after, wakes


def _decoded(fields: dict[str, str]) -> Wake | Delivered | Dispatched | None:
    try:
        fence = AttemptFence(fields["route"], int(fields["generation"]), int(fields["ordinal"]))
        if fields.get("kind") == DELIVERED:
            return Delivered(fence)
        if fields.get("kind") == DISPATCHED:
            status = int(fields["status"]) if fields.get("status") else None
            return Dispatched(fence, fields["outcome"], status, float(fields["latency_ms"]))
        deadline = datetime.fromisoformat(fields["deadline"])
    except (KeyError, ValueError):
        return None
    if deadline.utcoffset() is None:
        return None
    return Wake(fence, deadline)
