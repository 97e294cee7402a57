"""Where a released route's time goes, read back from the runtime's events stream.

Every route transition appends an event repeating the route's plain fields and its write
time (`updated_at`, the host's clock). For each route the close released, the bench reads
its `circuit_release` event (its `deadline` is the wave slot the runtime gave it) and its
next move to `retrying` (the host's timer fired and the circuit let it dispatch), then
the dispatcher's record of its send. So a send's delay after its slot splits into the
timer's lateness (fired - slot) and the enqueue plus the wait for a worker (started -
fired), and the planned slots give the wave profile the runtime asked for.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from redis.asyncio import Redis
from stampede_figures import Sent, spread_ms

from actors.keys import KeySpace

RELEASE_CAUSE: Final = "circuit_release"
READ_COUNT: Final = 5000


@dataclass(frozen=True, slots=True)
class Released:
    """One released route: its slot, when the release and the fire were written."""

    slot: float
    released_at: float
    fired_at: float | None = None


async def release_events(
    raw: Redis, keys: KeySpace, since: float, route_ids: frozenset[str]
) -> dict[str, Released]:
    """The release and the following fire of each of `route_ids`, from the events
    written since `since` (epoch seconds; the stream ids carry Redis's own time)."""
    found: dict[str, Released] = {}
    start = f"{int(since * 1000) - 1000}-0"  # a second early: clocks of one machine
    while True:
        batch: list[tuple[str, dict[str, str]]] = await raw.xrange(
            keys.events, min=start, max="+", count=READ_COUNT
        )  # type: ignore[assignment]  # a decode_responses client: text ids and fields
        for _, fields in batch:
            note(found, fields, route_ids)
        if len(batch) < READ_COUNT:
            return found
        start = "(" + batch[-1][0]


def note(found: dict[str, Released], fields: Mapping[str, str], route_ids: frozenset[str]) -> None:
    route_id = fields.get("route_id", "")
    if route_id not in route_ids:
        return
    at = epoch(fields.get("updated_at", ""))
    if fields.get("cause") == RELEASE_CAUSE and at is not None:
        slot = epoch(fields.get("deadline", ""))
        if slot is not None:
            found[route_id] = Released(slot, at)
        return
    known = found.get(route_id)
    if known is not None and known.fired_at is None and fields.get("state") == "retrying":
        found[route_id] = Released(known.slot, known.released_at, at)


def epoch(text: str) -> float | None:
    return datetime.fromisoformat(text).timestamp() if text else None


def timeline(
    released: Mapping[str, Released], sends: Sequence[Sent], close: float
) -> dict[str, Any]:
    """The planned slots per second after the close, and the delays of each send."""
    starts = {s.route_id: s.interval.started for s in sends}
    fired = [r for r in released.values() if r.fired_at is not None]
    lateness = [r.fired_at - r.slot for r in fired if r.fired_at is not None]
    after_fire = [
        starts[route_id] - r.fired_at
        for route_id, r in released.items()
        if r.fired_at is not None and route_id in starts
    ]
    slots = sorted(r.slot - close for r in released.values())
    per_s = [0] * (int(max(slots, default=0.0)) + 1)
    for offset in slots:
        per_s[max(0, int(offset))] += 1
    return {
        "released_by_plan": len(released),
        "release_written_within_ms": round(
            max((r.released_at - close for r in released.values()), default=0.0) * 1000, 3
        ),
        "planned_slots_per_s": per_s,
        **spread_ms([r.released_at - close for r in released.values()], "release_written"),
        **spread_ms(lateness, "release_fire"),  # issue 17 names the p50 `release_fire_p50_ms`
        **spread_ms(after_fire, "fire_to_send"),
        "release_fire_p50_ms_by_second": _lateness_by_second(fired, close),
    }


def _lateness_by_second(fired: Sequence[Released], close: float) -> list[float]:
    """The median timer lateness of the routes whose slot falls in each second after the
    close (the first wave's slots come before its release is written)."""
    by_second: dict[int, list[float]] = {}
    for r in fired:
        if r.fired_at is not None:
            by_second.setdefault(max(0, int(r.slot - close)), []).append(r.fired_at - r.slot)
    return [
        round(statistics.median(by_second.get(second, [0.0])) * 1000, 1)
        for second in range(max(by_second, default=-1) + 1)
    ]
