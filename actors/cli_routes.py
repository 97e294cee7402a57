"""`recovery schedules`, `recovery routes`, `recovery route ID` and `recovery events`:
read-only inspection of the route store, straight from Redis.

Nothing of the runtime needs to be running: each command opens a synchronous client on
the Redis URL (`--redis-url`, else `REDIS_URL`), reads the keys of one prefix (keys.py
documents the layout) and decodes them with route_codec, exactly as the store reads them.
Human output is aligned text; `--json` prints one JSON object per line. A problem (no URL,
Redis unreachable, a bad route id or prefix, unreadable data) is one line on stderr and
exit 2, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from actors.cli_policy import aware_datetime
from actors.errors import InvalidIdentifierError, StoreUnavailableError
from actors.keys import DEFAULT_PREFIX, KeySpace, valid_route_id
from actors.route_codec import decode_attempt, decode_event, decode_route, decode_schedule
from actors.route_models import (
    ROUTE_STATES,
    AttemptRecord,
    RouteEvent,
    RouteSnapshot,
    ScheduleEntry,
)

EXIT_ERROR: Final = 2
TIMEOUT_S: Final = 5.0
SCAN_COUNT: Final = 1000
READ_BATCH: Final = 500
FOLLOW_BLOCK_MS: Final = 1000
DEFAULT_EVENT_COUNT: Final = 10
ROUTE_KEY_PART: Final = ":route:"
# Bulky documents a route list leaves out (`recovery route ID --json` has everything).
ROUTE_LIST_EXCLUDE: Final = frozenset({"profile", "policy_snapshot", "cycle"})


class CliError(Exception):
    """A problem to report on one line of stderr (exit 2)."""


Emit = Callable[[RouteEvent], None]


def register(commands: Any) -> None:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--redis-url",
        metavar="URL",
        help="redis://host:port/db or unix:///path/redis.sock (default: $REDIS_URL)",
    )
    common.add_argument(
        "--prefix", default=DEFAULT_PREFIX, help=f"key prefix (default: {DEFAULT_PREFIX})"
    )
    common.add_argument("--json", action="store_true", help="one JSON object per line")
    common.add_argument(
        "--now",
        type=aware_datetime,
        metavar="TIME",
        help="reference time for 'in 4 s' / 'overdue 2 s' (default: the current time)",
    )

    schedules_cmd = commands.add_parser(
        "schedules", parents=[common], help="every pending schedule, soonest first"
    )
    schedules_cmd.set_defaults(run=_guarded(run_schedules))

    routes_cmd = commands.add_parser(
        "routes", parents=[common], help="every route with its state and pending outcome"
    )
    routes_cmd.add_argument("--state", choices=ROUTE_STATES, help="only routes in this state")
    routes_cmd.set_defaults(run=_guarded(run_routes))

    route_cmd = commands.add_parser(
        "route", parents=[common], help="one route's snapshot (and its attempt history)"
    )
    route_cmd.add_argument("route_id", metavar="ID", help="the route (session) id")
    route_cmd.add_argument(
        "--history", action="store_true", help="also its append-only attempt records, in order"
    )
    route_cmd.set_defaults(run=_guarded(run_route))

    events_cmd = commands.add_parser(
        "events", parents=[common], help="route transitions from the events stream"
    )
    events_cmd.add_argument(
        "--count",
        type=_non_negative,
        default=DEFAULT_EVENT_COUNT,
        metavar="N",
        help=f"print the last N events first (default: {DEFAULT_EVENT_COUNT})",
    )
    events_cmd.add_argument(
        "--follow", action="store_true", help="then print new events as they come, until Ctrl-C"
    )
    events_cmd.set_defaults(run=_guarded(run_events))


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def _guarded(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """`run` with every expected failure turned into one stderr line and exit 2."""

    def guarded(args: argparse.Namespace) -> int:
        try:
            return run(args)
        except (CliError, InvalidIdentifierError, StoreUnavailableError) as error:
            message = str(error)
        except redis.RedisError as error:
            url = _redacted(_redis_url(args))
            detail = str(error) or type(error).__name__
            message = f"cannot read Redis at {url}: {detail}"
        print(f"recovery {args.command}: {message}", file=sys.stderr)
        return EXIT_ERROR

    return guarded


# -- connection ---------------------------------------------------------------------------


def _redis_url(args: argparse.Namespace) -> str:
    url: str | None = args.redis_url or os.environ.get("REDIS_URL")
    if not url:
        raise CliError(
            "no Redis URL: pass --redis-url URL or set REDIS_URL "
            "(the embedded Redis is unix:///<data dir>/redis.sock, printed by `recovery up`)"
        )
    return url


def _redacted(url: str) -> str:
    """`url` without its password, for messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


def connect(url: str) -> redis.Redis:
    """A synchronous client that fails fast (no retries) and has answered a PING."""
    try:
        client = redis.Redis.from_url(
            url,
            decode_responses=True,
            socket_timeout=TIMEOUT_S,
            socket_connect_timeout=TIMEOUT_S,
            retry=Retry(NoBackoff(), 0),
        )
    except ValueError as error:
        raise CliError(f"invalid Redis URL {_redacted(url)!r}: {error}") from None
    try:
        client.ping()
    except redis.RedisError as error:
        client.close()
        detail = str(error) or type(error).__name__
        raise CliError(f"cannot reach Redis at {_redacted(url)}: {detail}") from None
    return client


def _open(args: argparse.Namespace) -> tuple[redis.Redis, KeySpace]:
    keys = KeySpace(args.prefix)  # an invalid prefix fails before connecting
    return connect(_redis_url(args)), keys


def _now(args: argparse.Namespace) -> datetime:
    now: datetime = args.now.astimezone(UTC) if args.now else datetime.now(UTC)
    return now


# -- reads --------------------------------------------------------------------------------


def read_schedules(client: redis.Redis, keys: KeySpace) -> list[ScheduleEntry]:
    """Every pending schedule, soonest deadline first (the sorted set's order). A member
    whose hash is gone (cleared between the two reads) is not pending."""
    members = [_text(m) for m in client.zrange(keys.schedules, 0, -1)]
    route_ids = [m for m in members if _is_route_id(m)]
    hashes = _hgetall_many(client, [keys.schedule(r) for r in route_ids])
    return [decode_schedule(raw) for raw in hashes if raw]


def read_routes(
    client: redis.Redis, keys: KeySpace, state: str | None = None
) -> list[RouteSnapshot]:
    """Every route under the prefix (SCAN, never KEYS), by route id."""
    route_ids = sorted(_scan_route_ids(client, keys))
    hashes = _hgetall_many(client, [keys.route(r) for r in route_ids])
    routes = [
        decode_route(route_id, raw) for route_id, raw in zip(route_ids, hashes, strict=True) if raw
    ]
    return [r for r in routes if state is None or r.state == state]


def read_route(client: redis.Redis, keys: KeySpace, route_id: str) -> RouteSnapshot:
    return decode_route(route_id, _texts(client.hgetall(keys.route(route_id))))


def read_history(client: redis.Redis, keys: KeySpace, route_id: str) -> list[AttemptRecord]:
    records = client.lrange(keys.attempts(route_id), 0, -1)
    return [decode_attempt(_text(text)) for text in records]


def read_last_events(client: redis.Redis, keys: KeySpace, count: int) -> list[RouteEvent]:
    """The last `count` events, oldest first."""
    if count == 0:
        return []
    entries = client.xrevrange(keys.events, count=count) or []
    return [_event(event_id, fields) for event_id, fields in reversed(entries)]


def last_event_id(client: redis.Redis, keys: KeySpace) -> str:
    """The newest event's id, or "0-0" when the stream is empty or absent."""
    entries = client.xrevrange(keys.events, count=1)
    return _text(entries[0][0]) if entries else "0-0"


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


def _text(value: object) -> str:
    """A reply value as text (the client decodes; bytes only from a raw client)."""
    return value.decode() if isinstance(value, bytes) else str(value)


def _texts(raw: Mapping[Any, Any] | None) -> dict[str, str]:
    return {_text(name): _text(value) for name, value in (raw or {}).items()}


def _event(event_id: object, fields: Mapping[Any, Any] | None) -> RouteEvent:
    return decode_event(_text(event_id), _texts(fields))


def _is_route_id(text: str) -> bool:
    try:
        valid_route_id(text)
    except InvalidIdentifierError:
        return False
    return True


def _scan_route_ids(client: redis.Redis, keys: KeySpace) -> Iterator[str]:
    head = keys.prefix + ROUTE_KEY_PART
    for key in client.scan_iter(match=f"{head}*", count=SCAN_COUNT, _type="hash"):
        route_id = _text(key)[len(head) :]
        if _is_route_id(route_id):  # e.g. not another prefix's `<p>:route:route:<id>`
            yield route_id


def _hgetall_many(client: redis.Redis, names: Sequence[str]) -> list[dict[str, str]]:
    hashes: list[dict[str, str]] = []
    for start in range(0, len(names), READ_BATCH):
        with client.pipeline(transaction=False) as pipe:
            for name in names[start : start + READ_BATCH]:
                pipe.hgetall(name)
            hashes.extend(_texts(raw) for raw in pipe.execute())
    return hashes


# -- formatting ---------------------------------------------------------------------------


def relative(deadline: datetime, now: datetime) -> str:
    """ "in 4 s", "overdue 2 s" or "due now", in whole seconds (minutes, hours beyond)."""
    seconds = round((deadline - now).total_seconds())
    if seconds == 0:
        return "due now"
    span = _span(abs(seconds))
    return f"in {span}" if seconds > 0 else f"overdue {span}"


def _span(seconds: int) -> str:
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        minutes, rest = divmod(seconds, 60)
        return f"{minutes} min {rest} s" if rest else f"{minutes} min"
    hours, rest = divmod(seconds, 3600)
    minutes = rest // 60
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"


def due_in_s(deadline: datetime | None, now: datetime) -> float | None:
    """Seconds until `deadline` (negative when overdue), for JSON output."""
    return None if deadline is None else round((deadline - now).total_seconds(), 3)


def _when(moment: datetime | None) -> str:
    return "-" if moment is None else moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _cell(value: object) -> str:
    return "-" if value is None or value == "" else str(value)


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    """Left-aligned columns two spaces apart; the last column is not padded."""
    cells = [list(headers), *([_cell(v) for v in row] for row in rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers) - 1)]
    lines = []
    for row in cells:
        padded = [text.ljust(width) for text, width in zip(row, widths, strict=False)]
        lines.append("  ".join([*padded, row[-1]]).rstrip())
    return lines


def _print_json(payload: dict[str, Any]) -> None:
    print(json.dumps(payload, ensure_ascii=False), flush=True)


def _print_lines(lines: Sequence[str]) -> None:
    for line in lines:
        print(line)


def schedule_json(entry: ScheduleEntry, now: datetime) -> dict[str, Any]:
    return {**entry.model_dump(mode="json"), "due_in_s": due_in_s(entry.deadline, now)}


def route_json(route: RouteSnapshot, now: datetime, *, full: bool) -> dict[str, Any]:
    payload = route.model_dump(mode="json", exclude=None if full else set(ROUTE_LIST_EXCLUDE))
    payload["due_in_s"] = due_in_s(route.deadline, now)
    return payload


def event_json(event: RouteEvent) -> dict[str, Any]:
    return event.model_dump(mode="json")


def event_line(event: RouteEvent, now: datetime) -> str:
    """One event on one line, for `recovery events`."""
    step = event.cause if event.decision is None else f"{event.cause}/{event.decision}"
    parts = [
        _when(event.at),
        event.event_id,
        event.route_id,
        f"gen {event.from_generation}->{event.generation}",
        f"{event.from_state}->{event.state}",
        step,
    ]
    if event.candidate_id is not None:
        parts.append(f"on {event.candidate_id}")
    if event.code is not None:
        parts.append(f"{event.code} ({_cell(event.error_class)})")
    if event.retry_max:
        parts.append(f"retry {event.retry_ordinal}/{event.retry_max}")
    if event.deadline is not None:
        outcome = _cell(event.pending_outcome)
        parts.append(f"{outcome} at {_when(event.deadline)} ({relative(event.deadline, now)})")
    if event.reason is not None:
        parts.append(f"- {event.reason}")
    return "  ".join(parts)


def route_lines(route: RouteSnapshot, now: datetime) -> list[str]:
    """One route's snapshot as labelled lines, for `recovery route ID`."""
    candidate = _cell(route.candidate_id)
    if route.candidate_index is not None:
        candidate += f" (#{route.candidate_index})"
    failure = "-"
    if route.code is not None:
        failure = f"{route.code} ({_cell(route.error_class)})"
        if route.rule is not None:
            failure += f" by {route.rule}"
        if route.catalogue_version is not None:
            failure += f", {route.catalogue_version}"
    pending = "-"
    if route.deadline is not None:
        pending = (
            f"{_cell(route.pending_outcome)} at {_when(route.deadline)} "
            f"({relative(route.deadline, now)})"
        )
    elif route.pending_outcome is not None:
        pending = route.pending_outcome
    caller = _cell(route.caller)
    if route.invocation_id is not None:
        caller += f" (invocation {route.invocation_id})"
    fields = [
        ("route", route.route_id),
        ("state", f"{route.state} (generation {route.generation})"),
        ("candidate", candidate),
        ("failure", failure),
        ("retry", f"{route.retry_ordinal} of {route.retry_max} (attempt {route.attempt_ordinal})"),
        ("pending", pending),
        ("reason", _cell(route.reason)),
        ("caller", caller),
        ("updated", _when(route.updated_at)),
    ]
    return [f"{name + ':':<11}{value}" for name, value in fields]


def history_lines(records: Sequence[AttemptRecord]) -> list[str]:
    headers = ("AT", "GEN", "ORD", "DECISION", "CANDIDATE", "CODE", "CLASS", "DEADLINE", "REASON")
    rows = [
        (
            _when(r.at), r.generation, r.ordinal, r.decision, r.candidate_id, r.code,
            r.error_class, _when(r.deadline) if r.deadline else None, r.reason,
        )
        for r in records
    ]  # fmt: skip
    return table(headers, rows)


# -- commands -----------------------------------------------------------------------------


def run_schedules(args: argparse.Namespace) -> int:
    client, keys = _open(args)
    with client:
        entries = read_schedules(client, keys)
    now = _now(args)
    if args.json:
        for entry in entries:
            _print_json(schedule_json(entry, now))
        return 0
    if not entries:
        print(f"no pending schedules under prefix {keys.prefix!r}")
        return 0
    headers = (
        "ROUTE", "STATE", "GEN", "CANDIDATE", "CODE", "CLASS", "ORD", "OUTCOME", "DEADLINE",
        "DUE", "REASON",
    )  # fmt: skip
    rows = [
        (
            e.route_id, e.state, e.generation, e.candidate_id, e.code, e.error_class, e.ordinal,
            e.pending_outcome, _when(e.deadline), relative(e.deadline, now), e.reason,
        )
        for e in entries
    ]  # fmt: skip
    _print_lines(table(headers, rows))
    return 0


def run_routes(args: argparse.Namespace) -> int:
    client, keys = _open(args)
    with client:
        routes = read_routes(client, keys, args.state)
    now = _now(args)
    if args.json:
        for route in routes:
            _print_json(route_json(route, now, full=False))
        return 0
    if not routes:
        which = f"in state {args.state!r} " if args.state else ""
        print(f"no routes {which}under prefix {keys.prefix!r}")
        return 0
    headers = (
        "ROUTE", "STATE", "GEN", "CANDIDATE", "CODE", "CLASS", "RETRY", "DEADLINE", "DUE",
        "OUTCOME", "UPDATED",
    )  # fmt: skip
    rows = [
        (
            r.route_id, r.state, r.generation, r.candidate_id, r.code, r.error_class,
            f"{r.retry_ordinal}/{r.retry_max}", _when(r.deadline),
            relative(r.deadline, now) if r.deadline else None, r.pending_outcome,
            _when(r.updated_at),
        )
        for r in routes
    ]  # fmt: skip
    _print_lines(table(headers, rows))
    return 0


def run_route(args: argparse.Namespace) -> int:
    route_id = valid_route_id(args.route_id)  # a bad id fails before connecting
    client, keys = _open(args)
    with client:
        route = read_route(client, keys, route_id)
        records = read_history(client, keys, route_id) if args.history else []
    if route.state == "none":
        raise CliError(
            f"no route {route_id!r} under prefix {keys.prefix!r} (never written, or expired)"
        )
    now = _now(args)
    if args.json:
        payload = route_json(route, now, full=True)
        if args.history:
            payload["history"] = [r.model_dump(mode="json") for r in records]
        _print_json(payload)
        return 0
    _print_lines(route_lines(route, now))
    if args.history:
        print()
        _print_lines(history_lines(records))
    return 0


def run_events(args: argparse.Namespace) -> int:
    client, keys = _open(args)

    def emit(event: RouteEvent) -> None:
        if args.json:
            _print_json(event_json(event))
        else:
            print(event_line(event, _now(args)), flush=True)

    with client:
        try:
            shown = read_last_events(client, keys, args.count)
            for event in shown:
                emit(event)
            if args.follow:
                after = shown[-1].event_id if shown else last_event_id(client, keys)
                follow_events(client, keys, after, emit)
        except KeyboardInterrupt:
            pass  # Ctrl-C is how --follow ends
    return 0
