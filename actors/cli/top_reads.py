"""The Redis reads behind one `recovery top` frame (actors/cli/top_frame.py says which figures
are exact and which are sampled).

A frame costs two pipelined round trips for the exact figures (TIME, ZCARD, ZCOUNT, XLEN,
the circuit index, the soonest schedules, the events of the window up to a cap, each
circuit's state) plus a bounded SCAN of the prefix — at most `scan_keys / SCAN_COUNT`
SCAN calls — and one pipelined HGET/HMGET per route or ledger key it met. Nothing reads
every route: on a large fleet the SCAN stops at its budget and the counts are a sample.
A live view passes the cursor it got back, so successive frames sample successive parts
of the keyspace; `--once` starts at cursor 0.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

import redis

from actors.cli.top_frame import RawReads
from actors.keys import RESOURCE_ID_PATTERN, ROUTE_ID_PATTERN, KeySpace
from actors.store.installation import InstallationRecord

SCAN_COUNT: Final = 1000
READ_BATCH: Final = 500
_RESOURCE_ID: Final = re.compile(RESOURCE_ID_PATTERN)


@dataclass(frozen=True, slots=True)
class TopLimits:
    """How much one frame may read."""

    window_s: float = 10.0  # transitions per second over this many seconds
    # At most this many events read per frame: redis-py parses ~0.14 ms per event here
    # (26 fields each), so 200 cost ~35 ms; above it the rate is estimated.
    event_cap: int = 200
    deadlines: int = 5  # the soonest schedules shown
    # Keys the SCAN may examine per frame: 5 SCAN calls, ~0.2 s on a 100k-route fleet.
    scan_keys: int = 5000


@dataclass(frozen=True, slots=True)
class ScanSample:
    route_states: list[str]
    ledgers: list[dict[str, str]]
    complete: bool
    scan_calls: int
    cursor: int  # where the next frame's scan continues (0: from the start)


def read_frame(
    client: redis.Redis, keys: KeySpace, limits: TopLimits, cursor: int = 0
) -> tuple[RawReads, int]:
    """One frame's raw reads and the SCAN cursor for the next frame."""
    with client.pipeline(transaction=False) as pipe:
        pipe.time()
        pipe.zcard(keys.schedules)
        pipe.xlen(keys.events)
        pipe.smembers(keys.circuits)
        pipe.zrange(keys.schedules, 0, limits.deadlines - 1)
        pipe.get(keys.installation)
        seconds_micros, total, stream_length, circuit_ids, soonest, record = pipe.execute()
    now = datetime.fromtimestamp(seconds_micros[0] + seconds_micros[1] / 1e6, UTC)
    route_ids = [_text(member) for member in soonest] if limits.deadlines else []
    resource_ids = sorted(r for r in map(_text, circuit_ids) if _RESOURCE_ID.fullmatch(r))
    window_start_ms = int((now.timestamp() - limits.window_s) * 1000)
    with client.pipeline(transaction=False) as pipe:
        pipe.zcount(keys.schedules, "-inf", now.timestamp())
        pipe.xrevrange(keys.events, "+", f"{window_start_ms}-0", count=limits.event_cap)
        for route_id in route_ids:
            pipe.hgetall(keys.schedule(route_id))
        for resource_id in resource_ids:
            pipe.hget(keys.circuit(resource_id), "state")
            pipe.zcard(keys.parked(resource_id))
        overdue, events, *rest = pipe.execute()
    schedules, circuit_reads = rest[: len(route_ids)], rest[len(route_ids) :]
    circuit_states, parked = circuit_reads[0::2], circuit_reads[1::2]
    sample = scan_sample(client, keys, limits.scan_keys, cursor)
    raw = RawReads(
        prefix=keys.prefix,
        now=now,
        schedules_total=int(total),
        schedules_overdue=int(overdue),
        next_schedules=[_texts(s) for s in schedules if s],  # gone since the ZRANGE
        window_s=limits.window_s,
        event_cap=limits.event_cap,
        events=[(_text(event_id), _texts(fields)) for event_id, fields in events or []],
        stream_length=int(stream_length),
        route_states=sample.route_states,
        ledgers=sample.ledgers,
        scan_complete=sample.complete,
        scan_calls=sample.scan_calls,
        circuit_states=[_text(state) for state in circuit_states if state],
        parked=sum(int(count) for count in parked),
        circuit_hosts=_circuit_hosts(record),
    )
    return raw, sample.cursor


def scan_sample(client: redis.Redis, keys: KeySpace, budget: int, cursor: int) -> ScanSample:
    """Route and ledger keys met by SCAN from `cursor` in at most ceil(budget / SCAN_COUNT)
    calls (COUNT is Redis's hint of how much one call examines), with each route's state
    and each ledger's state and outcome."""
    started_at_zero = cursor == 0
    route_keys: list[str] = []
    ledger_keys: list[str] = []
    calls = 0
    while True:
        cursor, found = client.scan(cursor, match=keys.pattern(), count=SCAN_COUNT, _type="hash")
        calls += 1
        for key in map(_text, found):
            kind = key_kind(keys, key)
            if kind == "route":
                route_keys.append(key)
            elif kind == "dispatch":
                ledger_keys.append(key)
        if cursor == 0 or calls * SCAN_COUNT >= budget:
            break
    states = _hget_many(client, route_keys, ("state",))
    ledgers = _hget_many(client, ledger_keys, ("state", "outcome"))
    return ScanSample(
        route_states=[s["state"] for s in states if s.get("state")],
        ledgers=[ledger for ledger in ledgers if ledger.get("state")],
        complete=started_at_zero and cursor == 0,
        scan_calls=calls,
        cursor=int(cursor),
    )


_ROUTE_KEY: Final = re.compile(rf"route:{ROUTE_ID_PATTERN}")
_DISPATCH_KEY: Final = re.compile(rf"dispatch:{ROUTE_ID_PATTERN}:[0-9]+:[0-9]+")


def key_kind(keys: KeySpace, key: str) -> str | None:
    """ "route" for `<p>:route:<id>`, "dispatch" for a ledger, else None (other keys, and
    keys of a longer prefix such as `<p>:route:x:...`, whose rest has a `:` too many)."""
    rest = key.removeprefix(keys.prefix + ":")
    if rest == key:
        return None
    if _ROUTE_KEY.fullmatch(rest):
        return "route"
    if _DISPATCH_KEY.fullmatch(rest):
        return "dispatch"
    return None


def _hget_many(
    client: redis.Redis, names: Sequence[str], fields: Sequence[str]
) -> list[dict[str, str]]:
    """The named fields of each hash, in order ({} for a hash gone since the SCAN)."""
    found: list[dict[str, str]] = []
    for start in range(0, len(names), READ_BATCH):
        with client.pipeline(transaction=False) as pipe:
            for name in names[start : start + READ_BATCH]:
                pipe.hmget(name, list(fields))
            for values in pipe.execute():
                pairs = zip(fields, values, strict=True)
                found.append({f: _text(v) for f, v in pairs if v is not None})
    return found


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _texts(raw: Mapping[Any, Any] | None) -> dict[str, str]:
    return {_text(name): _text(value) for name, value in (raw or {}).items()}


def _circuit_hosts(record: Any) -> int | None:
    """How many circuit hosts the installation record names (None: none readable)."""
    if record is None:
        return None
    try:
        return len(InstallationRecord.model_validate_json(record).circuit_host_names)
    except ValueError:  # an unreadable record: `recovery top` still shows the rest
        return None
