"""Synchronous reads of the route store, for the CLI and for jobs: the keys of one prefix
decoded with route_codec exactly as the store reads them (keys.py documents the layout)."""

import bisect
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Final

import redis

from actors.errors import CorruptRouteError, InvalidIdentifierError
from actors.keys import KeySpace, valid_route_id
from actors.routes.models import (
    AttemptRecord,
    RouteEvent,
    RouteSnapshot,
    ScheduleEntry,
)
from actors.store.replies import reply_text, reply_texts
from actors.store.route_codec import decode_attempt, decode_event, decode_route, decode_schedule

SCAN_COUNT: Final = 1000
READ_BATCH: Final = 500
FOLLOW_BLOCK_MS: Final = 1000
ROUTE_KEY_PART: Final = ":route:"


Emit = Callable[[RouteEvent], None]


def read_schedules(client: redis.Redis, keys: KeySpace) -> list[ScheduleEntry]:
    """Every pending schedule, soonest deadline first (the sorted set's order). A member
    whose hash is gone (cleared between the two reads) is not pending; one that cannot
    be decoded is left out (`read_schedules_and_corrupt` has them)."""
    return read_schedules_and_corrupt(client, keys)[0]


def read_schedules_and_corrupt(
    client: redis.Redis, keys: KeySpace
) -> tuple[list[ScheduleEntry], list[CorruptRouteError]]:
    members = [reply_text(m) for m in client.zrange(keys.schedules, 0, -1)]
    route_ids = [m for m in members if _is_route_id(m)]
    names = [keys.schedule(r) for r in route_ids]
    entries: list[ScheduleEntry] = []
    corrupt: list[CorruptRouteError] = []
    for route_id, name, raw in zip(route_ids, names, _hgetall_many(client, names), strict=True):
        if not raw:
            continue
        try:
            entries.append(decode_schedule(raw, route_id, name))
        except CorruptRouteError as error:
            corrupt.append(error)
    return entries, corrupt


def read_routes(
    client: redis.Redis, keys: KeySpace, state: str | None = None
) -> list[RouteSnapshot]:
    """Every route under the prefix (SCAN, never KEYS), by route id; a route that cannot
    be decoded is left out (`read_routes_and_corrupt` has them)."""
    return read_routes_and_corrupt(client, keys, state)[0]


def read_routes_and_corrupt(
    client: redis.Redis, keys: KeySpace, state: str | None = None
) -> tuple[list[RouteSnapshot], list[CorruptRouteError]]:
    """`read_routes`, and every route whose hash cannot be decoded (in any state)."""
    route_ids = sorted(_scan_route_ids(client, keys))
    names = [keys.route(r) for r in route_ids]
    routes: list[RouteSnapshot] = []
    corrupt: list[CorruptRouteError] = []
    for route_id, name, raw in zip(route_ids, names, _hgetall_many(client, names), strict=True):
        if not raw:
            continue
        try:
            route = decode_route(route_id, raw, name)
        except CorruptRouteError as error:
            corrupt.append(error)
            continue
        if state is None or route.state == state:
            routes.append(route)
    return routes, corrupt


def read_route_page(
    client: redis.Redis,
    keys: KeySpace,
    *,
    after: str | None,
    limit: int,
    keep: Callable[[RouteSnapshot], bool] = lambda _route: True,
) -> tuple[list[RouteSnapshot], str | None]:
    """Up to `limit` routes `keep` accepts, by route id, after the id `after` (None: from
    the first); and the id to continue after (None: no route is left). The ids come from
    one SCAN; hashes are read a batch at a time and only until the page is full. A route
    that cannot be decoded is left out, as in `read_routes`."""
    route_ids = sorted(_scan_route_ids(client, keys))
    rest = route_ids[bisect.bisect_right(route_ids, after) :] if after is not None else route_ids
    page: list[RouteSnapshot] = []
    for start in range(0, len(rest), READ_BATCH):
        batch = rest[start : start + READ_BATCH]
        names = [keys.route(r) for r in batch]
        for route_id, name, raw in zip(batch, names, _hgetall_many(client, names), strict=True):
            if not raw:
                continue
            try:
                route = decode_route(route_id, raw, name)
            except CorruptRouteError:
                continue
            if not keep(route):
                continue
            if len(page) == limit:  # one more than the page: there is a next one
                return page, page[-1].route_id
            page.append(route)
    return page, None


def read_route(client: redis.Redis, keys: KeySpace, route_id: str) -> RouteSnapshot:
    """The route's snapshot; CorruptRouteError when its hash does not decode."""
    name = keys.route(route_id)
    return decode_route(route_id, reply_texts(client.hgetall(name)), name)


def read_history(client: redis.Redis, keys: KeySpace, route_id: str) -> list[AttemptRecord]:
    records = client.lrange(keys.attempts(route_id), 0, -1)
    return [decode_attempt(reply_text(text)) for text in records]


def read_last_events(client: redis.Redis, keys: KeySpace, count: int) -> list[RouteEvent]:
    """The last `count` events, oldest first."""
    if count == 0:
        return []
    entries = client.xrevrange(keys.events, count=count) or []
    return [_event(event_id, fields) for event_id, fields in reversed(entries)]


def last_event_id(client: redis.Redis, keys: KeySpace) -> str:
    """The newest event's id, or "0-0" when the stream is empty or absent."""
    entries = client.xrevrange(keys.events, count=1)
    return reply_text(entries[0][0]) if entries else "0-0"


def follow_events(
    client: redis.Redis,
    keys: KeySpace,
    after: str,
    emit: Emit,
    *,
    stop: threading.Event | None = None,
    block_ms: int = FOLLOW_BLOCK_MS,
) -> str:
    """Emit every event after the id `after` as it arrives (XREAD BLOCK), until `stop`
    is set (checked every `block_ms` at the latest) or the caller interrupts; returns the
    last id emitted. Reading from an explicit id, never `$`, loses nothing between calls."""
    while stop is None or not stop.is_set():
        reply: Any = client.xread({keys.events: after}, count=100, block=block_ms)
        for _stream, entries in reply or []:
            for event_id, fields in entries:
                event = _event(event_id, fields)
                after = event.event_id
                emit(event)
    return after


def _event(event_id: object, fields: Mapping[Any, Any] | None) -> RouteEvent:
    return decode_event(reply_text(event_id), reply_texts(fields))


def _is_route_id(text: str) -> bool:
    try:
        valid_route_id(text)
    except InvalidIdentifierError:
        return False
    return True


def _scan_route_ids(client: redis.Redis, keys: KeySpace) -> Iterator[str]:
    head = keys.prefix + ROUTE_KEY_PART
    for key in client.scan_iter(match=f"{head}*", count=SCAN_COUNT, _type="hash"):
        route_id = reply_text(key)[len(head) :]
        if _is_route_id(route_id):  # e.g. not another prefix's `<p>:route:route:<id>`
            yield route_id


def _hgetall_many(client: redis.Redis, names: Sequence[str]) -> list[dict[str, str]]:
    hashes: list[dict[str, str]] = []
    for start in range(0, len(names), READ_BATCH):
        with client.pipeline(transaction=False) as pipe:
            for name in names[start : start + READ_BATCH]:
                pipe.hgetall(name)
            hashes.extend(reply_texts(raw) for raw in pipe.execute())
    return hashes
