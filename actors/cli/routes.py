"""`recovery schedules`, `recovery routes`, `recovery route ID` and `recovery events`:
read-only inspection of the route store, straight from Redis (`recovery route ID ACTION`,
an operator's action through the running installation, is actors/cli/route_actions.py).

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
import sys
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Final

from actors.cli.common import CliError, args_now, guarded
from actors.cli.corrupt_routes import print_corrupt
from actors.cli.format import cell, due_in_s, relative, table, when
from actors.cli.installation import installation_options, open_redis
from actors.cli.operator import EXIT_CODES_HELP, reported
from actors.cli.policy import aware_datetime
from actors.cli.route_actions import act_on_route, add_action_arguments
from actors.keys import valid_route_id
from actors.routes.models import (
    ROUTE_STATES,
    AttemptRecord,
    RouteEvent,
    RouteSnapshot,
    ScheduleEntry,
)
from actors.store.sync_reads import (
    follow_events,
    last_event_id,
    read_history,
    read_last_events,
    read_route,
    read_routes_and_corrupt,
    read_schedules,
)

DEFAULT_EVENT_COUNT: Final = 10
# Bulky documents a route list leaves out (`recovery route ID --json` has everything).
ROUTE_LIST_EXCLUDE: Final = frozenset({"profile", "policy_snapshot", "cycle"})


def register(commands: Any) -> None:
    common = argparse.ArgumentParser(add_help=False, parents=[installation_options()])
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
    schedules_cmd.set_defaults(run=guarded(run_schedules))

    routes_cmd = commands.add_parser(
        "routes", parents=[common], help="every route with its state and pending outcome"
    )
    routes_cmd.add_argument("--state", choices=ROUTE_STATES, help="only routes in this state")
    routes_cmd.add_argument(
        "--corrupt", action="store_true",
        help="only routes whose stored data was found corrupt (quarantined or not yet)",
    )  # fmt: skip
    routes_cmd.set_defaults(run=guarded(run_routes))

    route_cmd = commands.add_parser(
        "route", parents=[common],
        help="one route's snapshot (and its attempt history), or an operator's ACTION on it",
        epilog=EXIT_CODES_HELP, formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    route_cmd.add_argument("route_id", metavar="ID", help="the route (session) id")
    add_action_arguments(route_cmd)
    route_cmd.add_argument(
        "--history", action="store_true", help="also its append-only attempt records, in order"
    )
    route_cmd.set_defaults(run=guarded(run_route))

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
    events_cmd.set_defaults(run=guarded(run_events))


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


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
        when(event.at),
        event.event_id,
        event.route_id,
        f"gen {event.from_generation}->{event.generation}",
        f"{event.from_state}->{event.state}",
        step,
    ]
    if event.candidate_id is not None:
        parts.append(f"on {event.candidate_id}")
    if event.code is not None:
        parts.append(f"{event.code} ({cell(event.error_class)})")
    if event.retry_max:
        parts.append(f"retry {event.retry_ordinal}/{event.retry_max}")
    if event.deadline is not None:
        outcome = cell(event.pending_outcome)
        parts.append(f"{outcome} at {when(event.deadline)} ({relative(event.deadline, now)})")
    if event.reason is not None:
        parts.append(f"- {event.reason}")
    return "  ".join(parts)


def route_lines(route: RouteSnapshot, now: datetime) -> list[str]:
    """One route's snapshot as labelled lines, for `recovery route ID`."""
    candidate = cell(route.candidate_id)
    if route.candidate_index is not None:
        candidate += f" (#{route.candidate_index})"
    failure = "-"
    if route.code is not None:
        failure = f"{route.code} ({cell(route.error_class)})"
        if route.rule is not None:
            failure += f" by {route.rule}"
        if route.catalogue_version is not None:
            failure += f", {route.catalogue_version}"
    pending = "-"
    if route.deadline is not None:
        pending = (
            f"{cell(route.pending_outcome)} at {when(route.deadline)} "
            f"({relative(route.deadline, now)})"
        )
    elif route.pending_outcome is not None:
        pending = route.pending_outcome
    caller = cell(route.caller)
    if route.invocation_id is not None:
        caller += f" (invocation {route.invocation_id})"
    if route.utility:
        caller += ", utility"
    if route.redeliveries:
        pending += f", redelivery {route.redeliveries}"
    fields = [
        ("route", route.route_id),
        ("state", f"{route.state} (generation {route.generation})"),
        ("next step", cell(route.next_step)),
        ("candidate", candidate),
        ("failure", failure),
        ("retry", f"{route.retry_ordinal} of {route.retry_max} (attempt {route.attempt_ordinal})"),
        ("pending", pending),
        ("reason", cell(route.reason)),
        ("caller", caller),
        (
            "deadline",
            f"recovery by {when(route.recovery_deadline)}" if route.recovery_deadline else "-",
        ),
        ("updated", when(route.updated_at)),
    ]
    return [f"{name + ':':<11}{value}" for name, value in fields]


def history_lines(records: Sequence[AttemptRecord]) -> list[str]:
    headers = ("AT", "GEN", "ORD", "DECISION", "CANDIDATE", "CODE", "CLASS", "DEADLINE", "REASON")
    rows = [
        (
            when(r.at), r.generation, r.ordinal, r.decision, r.candidate_id, r.code,
            r.error_class, when(r.deadline) if r.deadline else None, r.reason,
        )
        for r in records
    ]  # fmt: skip
    return table(headers, rows)


# -- commands -----------------------------------------------------------------------------


def run_schedules(args: argparse.Namespace) -> int:
    client, keys = open_redis(args)
    with client:
        entries = read_schedules(client, keys)
    now = args_now(args)
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
            e.pending_outcome, when(e.deadline), relative(e.deadline, now), e.reason,
        )
        for e in entries
    ]  # fmt: skip
    _print_lines(table(headers, rows))
    return 0


def run_routes(args: argparse.Namespace) -> int:
    client, keys = open_redis(args)
    with client:
        if args.corrupt:
            return print_corrupt(client, keys, as_json=args.json)
        routes, unreadable = read_routes_and_corrupt(client, keys, args.state)
    if unreadable:
        print(
            f"recovery routes: {len(unreadable)} route(s) could not be read (not shown): "
            "see `recovery routes --corrupt`", file=sys.stderr,
        )  # fmt: skip
    now = args_now(args)
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
            f"{r.retry_ordinal}/{r.retry_max}", when(r.deadline),
            relative(r.deadline, now) if r.deadline else None, r.pending_outcome,
            when(r.updated_at),
        )
        for r in routes
    ]  # fmt: skip
    _print_lines(table(headers, rows))
    return 0


def run_route(args: argparse.Namespace) -> int:
    if args.action is not None:  # an operator's action (actors/cli/route_actions.py)
        return reported(f"route {args.route_id} {args.action}", lambda: print_acted(args))
    if args.generation is not None:
        raise CliError("--generation goes with an ACTION (retry-now, skip, ...)")
    route_id = valid_route_id(args.route_id)  # a bad id fails before connecting
    client, keys = open_redis(args)
    with client:
        route = read_route(client, keys, route_id)
        records = read_history(client, keys, route_id) if args.history else []
    if route.state == "none":
        raise CliError(
            f"no route {route_id!r} under prefix {keys.prefix!r} (never written, or expired)"
        )
    now = args_now(args)
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


def print_acted(args: argparse.Namespace) -> int:
    """Act on the route, then print the snapshot it produced as `recovery route ID` does."""
    route = act_on_route(args)
    now = args_now(args)
    if args.json:
        _print_json(route_json(route, now, full=True))
    else:
        _print_lines(route_lines(route, now))
    return 0


def run_events(args: argparse.Namespace) -> int:
    client, keys = open_redis(args)

    def emit(event: RouteEvent) -> None:
        if args.json:
            _print_json(event_json(event))
        else:
            print(event_line(event, args_now(args)), flush=True)

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
