"""The durable route store: Redis is the source of truth for every route transition.

Each transition is one run of `lua/transition.lua` (fence on generation and state, route
state, attempt history, schedule hash + sorted set, events stream — atomically), sent with
EVALSHA and loaded on NOSCRIPT. `apply_many` sends a batch's scripts as one pipeline,
which is where throughput comes from (docs/DESIGN.md §5a).

Failures: a rejected transition raises StaleGenerationError or InvalidStateError and
wrote nothing. Any Redis failure (refused, timed out, a script error) raises
StoreUnavailableError and nothing else happens here: nothing is armed or dispatched. A
timeout after the command was sent is ambiguous (the script may have run): the caller
re-reads the snapshot. A resend of a committed transition is rejected whenever it moved
the generation or left its allowed states; redis-py's own retries are off so that no
resend happens behind the caller's back.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Final, Self

from redis.asyncio import Redis
from redis.exceptions import RedisError

from actors.clock import Clock
from actors.errors import (
    CorruptRouteError,
    InvalidRouteIdError,
    StoreUnavailableError,
    TransitionRejectedError,
)
from actors.keys import KeySpace, valid_route_id
from actors.routes.models import AttemptRecord, RouteEvent, RouteSnapshot, ScheduleEntry, Transition
from actors.store.pool import OwnsItsClient, bounded_client
from actors.store.replies import reply_text, reply_texts
from actors.store.route_codec import (
    RequestRecord,
    decode_attempt,
    decode_event,
    decode_route,
    decode_schedule,
    outcome_record,
    replayed_snapshot,
    transition_request,
    transition_result,
)
from actors.store.scripts import LoadedScript, run_script, run_scripts, script

log = logging.getLogger(__name__)

DEFAULT_MAX_CONNECTIONS: Final = 16
DEFAULT_TIMEOUT_S: Final = 5.0
DEFAULT_EVENTS_MAXLEN: Final = 100_000

TransitionOutcome = RouteSnapshot | TransitionRejectedError | StoreUnavailableError
"""One item of `apply_many`: the applied snapshot, or why that item was not applied."""


def _reply(raw: Any) -> Any:
    return [_text(v) if isinstance(v, bytes) else v for v in raw] if isinstance(raw, list) else raw


# Replies are text with `decode_responses=True`; a client without it gives bytes.
_text, _texts = reply_text, reply_texts


def _unavailable(operation: str, error: BaseException) -> StoreUnavailableError:
    detail = str(error) or type(error).__name__
    return StoreUnavailableError(operation, f"{type(error).__name__}: {detail}")


class RouteStore(OwnsItsClient):
    """Async access to routes in one Redis, under one key prefix.

    The client should come from a bounded pool (`connect` makes one): redis.asyncio opens
    a connection per in-flight command otherwise.
    """

    def __init__(
        self,
        client: Redis,
        *,
        clock: Clock,
        keys: KeySpace | None = None,
        events_maxlen: int = DEFAULT_EVENTS_MAXLEN,
        owns_client: bool = False,
    ) -> None:
        if events_maxlen < 1:
            raise ValueError(f"events_maxlen must be >= 1, got {events_maxlen}")
        self.keys = keys or KeySpace()
        self.events_maxlen = events_maxlen
        self.client = self._client = client  # the profile store of its rounds shares it
        self._clock = clock
        self._owns_client = owns_client
        self._transition = LoadedScript.named("transition")
        self._record_request = client.register_script(script("record_request").source)
        self._script_loaded = False  # loaded once up front; NOSCRIPT reloads after a flush

    @classmethod
    def connect(
        cls,
        url: str,
        *,
        clock: Clock,
        keys: KeySpace | None = None,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        events_maxlen: int = DEFAULT_EVENTS_MAXLEN,
    ) -> Self:
        """A store with its own bounded, blocking pool: at most `max_connections`
        commands in flight, the rest wait up to `timeout_s` for a connection."""
        client = bounded_client(url, max_connections=max_connections, timeout_s=timeout_s)
        return cls(client, clock=clock, keys=keys, events_maxlen=events_maxlen, owns_client=True)

    def _own_client(self) -> Redis:
        return self._client

    # Reads

    async def snapshot(self, route_id: str) -> RouteSnapshot:
        """The route's snapshot; CorruptRouteError when its hash does not decode."""
        key = self.keys.route(route_id)
        try:
            raw = await self._client.hgetall(key)
        except RedisError as error:
            raise _unavailable("snapshot", error) from error
        return decode_route(route_id, _texts(raw), key)

    async def snapshots(self, route_ids: Sequence[str]) -> list[RouteSnapshot]:
        """The snapshots of several routes, read in one pipeline, in the given order."""
        keys = [self.keys.route(route_id) for route_id in route_ids]
        hashes = await self._hashes(keys, "snapshots")
        return [
            decode_route(route_id, _texts(raw), key)
            for route_id, key, raw in zip(route_ids, keys, hashes, strict=True)
        ]

    async def read_snapshots(
        self, route_ids: Sequence[str]
    ) -> list[RouteSnapshot | CorruptRouteError]:
        """`snapshots`, with a route whose stored data cannot be decoded as its
        CorruptRouteError in its place (one poisoned hash never fails the others).
        Raises StoreUnavailableError when Redis itself failed."""
        keys = [self.keys.route(route_id) for route_id in route_ids]
        hashes = await self._hashes(keys, "snapshots")
        found: list[RouteSnapshot | CorruptRouteError] = []
        for route_id, key, raw in zip(route_ids, keys, hashes, strict=True):
            try:
                found.append(decode_route(route_id, _texts(raw), key))
            except CorruptRouteError as error:
                found.append(error)
        return found

    async def history(self, route_id: str) -> list[AttemptRecord]:
        key = self.keys.attempts(route_id)
        try:
            records = await self._client.lrange(key, 0, -1)
        except RedisError as error:
            raise _unavailable("history", error) from error
        return [decode_attempt(_text(text)) for text in records]

    async def due_schedules(self, now: datetime, limit: int) -> list[ScheduleEntry]:
        """Pending schedules whose deadline is at or before `now`, earliest first (a
        corrupt one is left out: `due_and_corrupt` has them)."""
        return (await self.due_and_corrupt(now, limit))[0]

    async def due_and_corrupt(
        self, now: datetime, limit: int
    ) -> tuple[list[ScheduleEntry], list[CorruptRouteError]]:
        """`due_schedules`, and the schedules among them that cannot be decoded."""
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        if now.tzinfo is None:
            raise ValueError(f"now must be an aware datetime, got {now!r}")
        try:
            members = await self._client.zrangebyscore(
                self.keys.schedules, "-inf", repr(now.timestamp()), start=0, num=limit
            )
        except RedisError as error:
            raise _unavailable("due_schedules", error) from error
        entries, corrupt = await self._read_schedules([_text(m) for m in members])
        return [entry for entry in entries if entry.deadline <= now], corrupt

    async def schedules(self, limit: int | None = None) -> list[ScheduleEntry]:
        """Every pending schedule (or the first `limit`), earliest deadline first (a
        corrupt one is left out: `schedules_and_corrupt` has them)."""
        return (await self.schedules_and_corrupt(limit))[0]

    async def schedules_and_corrupt(
        self, limit: int | None = None
    ) -> tuple[list[ScheduleEntry], list[CorruptRouteError]]:
        """`schedules`, and the pending schedules that cannot be decoded."""
        stop = -1 if limit is None else limit - 1
        if stop < -1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        try:
            members = await self._client.zrange(self.keys.schedules, 0, stop)
        except RedisError as error:
            raise _unavailable("schedules", error) from error
        return await self._read_schedules([_text(m) for m in members])

    async def events(self, after: str | None = None, count: int = 100) -> list[RouteEvent]:
        """Up to `count` transition events, oldest first, after the event id `after`."""
        if count < 1:
            raise ValueError(f"count must be >= 1, got {count}")
        start = "-" if after is None else f"({after}"
        try:
            entries = await self._client.xrange(self.keys.events, start, "+", count=count)
        except RedisError as error:
            raise _unavailable("events", error) from error
        return [
            decode_event(_text(event_id), _texts(fields))
            for event_id, fields in entries or []
            if event_id is not None and fields is not None
        ]

    async def _read_schedules(
        self, members: Sequence[str]
    ) -> tuple[list[ScheduleEntry], list[CorruptRouteError]]:
        route_ids: list[str] = []
        for member in members:
            try:
                route_ids.append(valid_route_id(member))
            except InvalidRouteIdError:
                continue  # not written by this store; never turned into a key
        keys = [self.keys.schedule(route_id) for route_id in route_ids]
        hashes = await self._hashes(keys, "schedules")
        entries: list[ScheduleEntry] = []
        corrupt: list[CorruptRouteError] = []
        for route_id, key, raw in zip(route_ids, keys, hashes, strict=True):
            if not raw:  # cleared between the two reads: not pending any more
                continue
            try:
                entries.append(decode_schedule(_texts(raw), route_id, key))
            except CorruptRouteError as error:  # one bad hash never hides the others
                log.warning("corrupt schedule of route %s: %s", route_id, error.reason)
                corrupt.append(error)
        return entries, corrupt

    async def _hashes(self, keys: Sequence[str], operation: str) -> list[dict[Any, Any]]:
        """HGETALL of every key, in one pipeline, in order (one key: a plain command,
        which costs redis-py about half a pipeline's overhead)."""
        if not keys:
            return []
        try:
            if len(keys) == 1:
                return [await self._client.hgetall(keys[0])]
            async with self._client.pipeline(transaction=False) as pipe:
                for key in keys:
                    pipe.hgetall(key)
                hashes: list[dict[Any, Any]] = await pipe.execute()
        except RedisError as error:
            raise _unavailable(operation, error) from error
        return hashes

    # Transitions

    async def apply(
        self, transition: Transition, request: RequestRecord | None = None
    ) -> RouteSnapshot:
        """Apply one transition; the snapshot it wrote, or the typed rejection raised.
        With `request`, a request id the route applied before is not applied again: the
        answer is the snapshot its first outcome wrote."""
        at = self._clock.now().astimezone(UTC)
        keys = self._transition_keys(transition)
        argv = transition_request(transition, at, self.events_maxlen, request)
        try:
            await self._load_script_once()
            reply = await run_script(self._client, self._transition, keys, argv)
        except RedisError as error:
            raise _unavailable("apply", error) from error
        result = transition_result(transition, _reply(reply), at)
        if isinstance(result, RouteSnapshot):
            return result
        raise result

    async def apply_many(
        self,
        transitions: Sequence[Transition],
        requests: Sequence[RequestRecord | None] | None = None,
    ) -> list[TransitionOutcome]:
        """Apply a batch as one pipeline, in order (a later item for the same route sees
        the earlier one's effect). Per-item outcomes; a failure of the connection itself
        raises StoreUnavailableError for the whole batch, whose items may or may not
        have been applied (re-read the snapshots)."""
        if not transitions:
            return []
        recorded = list(requests) if requests is not None else [None] * len(transitions)
        if len(transitions) == 1:  # a plain EVALSHA: cheaper than a pipeline of one
            return [await self._apply_one(transitions[0], recorded[0])]
        at = self._clock.now().astimezone(UTC)
        calls = [
            (self._transition_keys(t), transition_request(t, at, self.events_maxlen, r))
            for t, r in zip(transitions, recorded, strict=True)
        ]
        try:
            await self._load_script_once()
            replies = await run_scripts(self._client, self._transition, calls)
        except RedisError as error:
            raise _unavailable("apply_many", error) from error
        return [self._outcome(t, reply, at) for t, reply in zip(transitions, replies, strict=True)]

    async def _apply_one(
        self, transition: Transition, request: RequestRecord | None
    ) -> TransitionOutcome:
        """`apply`, with a rejection returned rather than raised (an apply_many item)."""
        try:
            return await self.apply(transition, request)
        except TransitionRejectedError as rejected:
            return rejected

    def _outcome(self, transition: Transition, reply: Any, at: datetime) -> TransitionOutcome:
        if isinstance(reply, BaseException):
            return _unavailable("apply_many", reply)
        try:
            return transition_result(transition, _reply(reply), at)
        except StoreUnavailableError as error:
            return error

    async def record_unchanged(
        self, requests: Sequence[tuple[RequestRecord, RouteSnapshot]]
    ) -> list[RouteSnapshot]:
        """Record requests that changed nothing (no-ops) with the route as they found it,
        as one pipeline; for each, the outcome its id has now (an earlier one, if the
        request is a replay). Raises StoreUnavailableError."""
        if not requests:
            return []
        try:
            async with self._client.pipeline(transaction=False) as pipe:
                for request, snapshot in requests:
                    route_id = snapshot.route_id
                    await self._record_request(
                        keys=[self.keys.requests(route_id), self.keys.request_order(route_id)],
                        args=[request.request_id, outcome_record(snapshot), request.keep,
                              request.keep_for_s],
                        client=pipe,
                    )  # fmt: skip
                replies = await pipe.execute()
        except RedisError as error:
            raise _unavailable("record requests", error) from error
        return [
            replayed_snapshot(snapshot.route_id, _text(reply))
            for (_, snapshot), reply in zip(requests, replies, strict=True)
        ]

    async def first_outcome(self, route_id: str, request_id: str) -> RouteSnapshot | None:
        """The snapshot request `request_id` first wrote on the route, while the route
        keeps it; None for a request it never applied (or has forgotten)."""
        try:
            first = await self._client.hget(self.keys.requests(route_id), request_id)
        except RedisError as error:
            raise _unavailable("replay", error) from error
        return None if first is None else replayed_snapshot(route_id, _text(first))

    def _transition_keys(self, transition: Transition) -> list[str]:
        route_id = valid_route_id(transition.route_id)
        keys = [
            self.keys.route(route_id),
            self.keys.attempts(route_id),
            self.keys.schedule(route_id),
            self.keys.schedules,
            self.keys.events,
            self.keys.requests(route_id),
            self.keys.request_order(route_id),
        ]
        if transition.host_id is not None:
            keys.append(self.keys.host_routes(transition.host_id))
        return keys

    async def _load_script_once(self) -> None:
        if not self._script_loaded:
            await self._client.script_load(self._transition.source)
            self._script_loaded = True
