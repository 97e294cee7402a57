"""Everything the demo report is computed from, read from Redis after the run.

Route histories (`<p>:attempts:*`), the transition events stream (`<p>:events`, whose entry
ids are Redis's own write times), route states, the pending schedules (hash and sorted
set), the dispatch ledgers (`<p>:dispatch:*`), the circuit hashes if any, and the demo
dispatcher's own log. Nothing here comes from the simulated orchestrator's intentions.
Keys are found with SCAN; reads are pipelined.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, cast

import redis

from actors.demo.demo_keys import DemoKeys
from actors.demo.dispatcher import DispatchRecord, read_records
from actors.keys import KeySpace
from actors.routes.models import AttemptRecord, RouteEvent, ScheduleEntry
from actors.store.redis_transcript import decode_event as decode_transcript_event
from actors.store.route_codec import decode_attempt, decode_event, decode_schedule
from actors.store.transcript_reads import read_notices

PAGE: Final = 1000


@dataclass(frozen=True, slots=True)
class StreamEvent:
    """A transition event and its Redis write time (epoch seconds, from the entry id)."""

    event: RouteEvent
    written_at: float


@dataclass(frozen=True, slots=True)
class RedisFacts:
    now: float  # Redis's clock when the facts were read (epoch seconds)
    events: tuple[StreamEvent, ...]
    events_len: int
    histories: Mapping[str, tuple[AttemptRecord, ...]]
    route_states: Mapping[str, str]
    schedules: Mapping[str, ScheduleEntry]
    schedule_scores: Mapping[str, float]
    ledger_outcomes: Counter[str]
    circuits: tuple[Mapping[str, str], ...]
    dispatches: tuple[DispatchRecord, ...]
    notices: NoticeFacts


@dataclass(frozen=True, slots=True)
class NoticeFacts:
    """The transcript's retry notices: `written` creates and updates of a `retrying: true`
    message (its stream's session.message.updated events), `retired` deletions (its
    session.message.deleted events), `left` retry notices still in the transcript whose
    route no longer retries (leaked), `held` those of routes still in their retry loop."""

    written: int
    retired: int
    left: int
    held: int = 0


RETRYING_STATES: Final = frozenset({"retry_wait", "waiting_for_reset", "retrying"})


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _texts(raw: Mapping[Any, Any]) -> dict[str, str]:
    return {_text(name): _text(value) for name, value in raw.items()}


def _scan(client: redis.Redis, prefix: str) -> list[str]:
    return sorted(_text(key) for key in client.scan_iter(match=f"{prefix}*", count=PAGE))


def _suffixes(client: redis.Redis, prefix: str) -> list[str]:
    return [key.removeprefix(prefix) for key in _scan(client, prefix)]


def _stream_time(entry_id: str) -> float:
    return int(entry_id.split("-", 1)[0]) / 1000.0


def read_events(client: redis.Redis, keys: KeySpace) -> Iterator[StreamEvent]:
    start = "-"
    while True:
        # redis-py types a sync client's replies as sync-or-async unions: cast to the reply.
        page = cast("list[tuple[Any, Any]]", client.xrange(keys.events, start, "+", count=PAGE))
        for raw_id, fields in page:
            entry_id = _text(raw_id)
            yield StreamEvent(decode_event(entry_id, _texts(fields)), _stream_time(entry_id))
        if len(page) < PAGE:
            return
        start = "(" + _text(page[-1][0])


def _histories(client: redis.Redis, keys: KeySpace) -> dict[str, tuple[AttemptRecord, ...]]:
    routes = _suffixes(client, keys.attempts("x")[:-1])
    with client.pipeline(transaction=False) as pipeline:
        for route_id in routes:
            pipeline.lrange(keys.attempts(route_id), 0, -1)
        lists = pipeline.execute()
    return {
        route_id: tuple(decode_attempt(_text(item)) for item in items)
        for route_id, items in zip(routes, lists, strict=True)
    }


def _route_states(client: redis.Redis, keys: KeySpace) -> dict[str, str]:
    routes = _suffixes(client, keys.route("x")[:-1])
    with client.pipeline(transaction=False) as pipeline:
        for route_id in routes:
            pipeline.hget(keys.route(route_id), "state")
        states = pipeline.execute()
    return {r: _text(s) for r, s in zip(routes, states, strict=True) if s is not None}


def _schedules(client: redis.Redis, keys: KeySpace) -> dict[str, ScheduleEntry]:
    routes = _suffixes(client, keys.schedule("x")[:-1])
    with client.pipeline(transaction=False) as pipeline:
        for route_id in routes:
            pipeline.hgetall(keys.schedule(route_id))
        hashes = pipeline.execute()
    return {
        r: decode_schedule(_texts(h), r, keys.schedule(r))
        for r, h in zip(routes, hashes, strict=True)
        if h
    }


def _ledger_outcomes(client: redis.Redis, keys: KeySpace) -> Counter[str]:
    ledgers = _scan(client, f"{keys.prefix}:dispatch:")
    with client.pipeline(transaction=False) as pipeline:
        for key in ledgers:
            pipeline.hmget(key, ["state", "outcome"])
        rows = pipeline.execute()
    return Counter(
        _text(outcome) if outcome else _text(state or b"none") for state, outcome in rows
    )


def _circuits(client: redis.Redis, keys: KeySpace) -> tuple[dict[str, str], ...]:
    members = sorted(_text(m) for m in client.smembers(keys.circuits))
    with client.pipeline(transaction=False) as pipeline:
        for resource in members:
            pipeline.hgetall(keys.circuit(resource))
        hashes = pipeline.execute()
    return tuple(_texts(h) for h in hashes if h)


def read_facts(client: redis.Redis, prefix: str) -> RedisFacts:
    keys, demo = KeySpace(prefix), DemoKeys(prefix)
    seconds, micros = client.time()  # Redis's clock, the one its stream ids are on
    scores = cast("list[tuple[Any, float]]", client.zrange(keys.schedules, 0, -1, withscores=True))
    return RedisFacts(
        now=int(seconds) + int(micros) / 1e6,
        events=tuple(read_events(client, keys)),
        events_len=int(client.xlen(keys.events)),
        histories=_histories(client, keys),
        route_states=_route_states(client, keys),
        schedules=_schedules(client, keys),
        schedule_scores={_text(member): float(score) for member, score in scores},
        ledger_outcomes=_ledger_outcomes(client, keys),
        circuits=_circuits(client, keys),
        dispatches=tuple(read_records(client.lrange(demo.dispatches, 0, -1))),
        notices=_notices(client, keys, _route_states(client, keys)),
    )


def _notices(client: redis.Redis, keys: KeySpace, states: Mapping[str, str]) -> NoticeFacts:
    written = retired = 0
    start = "-"
    while True:
        entries = cast("list[tuple[Any, dict[Any, Any]]]",
                       client.xrange(keys.transcript, start, "+", count=PAGE))  # fmt: skip
        for entry_id, fields in entries:
            event = decode_transcript_event(_text(entry_id), _texts(fields))
            if event.message is not None and event.message.metadata.get("retrying") is True:
                written += 1
            elif event.event == "session.message.deleted":
                retired += 1
        if len(entries) < PAGE:
            break
        start = "(" + _text(entries[-1][0])
    sessions = [notice.session_id for notice in read_notices(client, keys)]
    held = sum(1 for session in sessions if states.get(session) in RETRYING_STATES)
    return NoticeFacts(written, retired, len(sessions) - held, held)
