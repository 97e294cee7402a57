"""`recovery routes --corrupt`: the routes whose stored data was found corrupt.

Quarantined ones (state `action_required`, reason `corrupt: <key> <field>: ...`, see
actors/routes/quarantine.py) and those not quarantined yet (a route or schedule hash that
does not decode: the next command, timer, backstop or host start on it quarantines it).
Read-only, like every `recovery routes` view; reasons are sanitised and bounded.
"""

from __future__ import annotations

import json
from typing import Any

import redis

from actors.cli.format import table, when
from actors.errors import CORRUPT_PREFIX, CorruptRouteError
from actors.keys import KeySpace
from actors.store.sync_reads import read_routes_and_corrupt, read_schedules_and_corrupt


def corrupt_rows(client: redis.Redis, keys: KeySpace) -> list[dict[str, Any]]:
    """One row per corrupt route, by route id: quarantined, or still unreadable."""
    routes, unreadable = read_routes_and_corrupt(client, keys)
    _, schedules = read_schedules_and_corrupt(client, keys)
    rows = [
        {
            "route_id": route.route_id,
            "quarantined": True,
            "state": route.state,
            "generation": route.generation,
            "reason": route.reason,
            "updated_at": when(route.updated_at),
        }
        for route in routes
        if route.state == "action_required" and (route.reason or "").startswith(CORRUPT_PREFIX)
    ]
    rows += [_unreadable(error) for error in [*unreadable, *schedules]]
    return sorted(rows, key=lambda row: (row["route_id"], not row["quarantined"]))


def _unreadable(error: CorruptRouteError) -> dict[str, Any]:
    return {
        "route_id": error.route_id, "quarantined": False, "state": None,
        "generation": None, "reason": error.reason, "updated_at": None,
    }  # fmt: skip


def print_corrupt(client: redis.Redis, keys: KeySpace, *, as_json: bool) -> int:
    rows = corrupt_rows(client, keys)
    if as_json:
        for row in rows:
            print(json.dumps(row, ensure_ascii=False), flush=True)
        return 0
    if not rows:
        print(f"no corrupt routes under prefix {keys.prefix!r}")
        return 0
    headers = ("ROUTE", "QUARANTINED", "GEN", "UPDATED", "REASON")
    cells = [
        (row["route_id"], "yes" if row["quarantined"] else "not yet", row["generation"],
         row["updated_at"], row["reason"])
        for row in rows
    ]  # fmt: skip
    for line in table(headers, cells):
        print(line)
    return 0
