"""The demo report, computed from what happened (actors/demo/facts.py): the routes' histories,
the transition events, the schedules, the ledgers and circuits in Redis, and the demo
dispatcher's own log — never from what the simulated orchestrator meant to do.

Decisions are the policy decisions in the histories (retry, wait_for_reset, skip, stop),
counted by class and code. Timer lateness is, for every `deadline_reached` event, its
Redis write time (the stream entry id) minus the deadline of the schedule it fired.

Invariants (the run fails if one is violated):

- double dispatches: attempts (route, generation, attempt ordinal) the dispatcher was
  called for more than once. Must be 0.
- schedules lost. A schedule is written by every event that leaves its route in
  `retry_wait` or `waiting_for_reset` with a deadline; it is named by (route, generation,
  attempt ordinal). Its fate is decided by the route's next event in the stream: `fired`
  when that event is `deadline_reached` (or `circuit_probe_wake`: its circuit host woke it
  as the probe, before its own deadline; no lateness then) at the same generation and
  ordinal;
  `rescheduled` when that event writes a schedule for the same attempt again (a wait
  parked on an open circuit, a profile edit), whose own fate is then followed;
  `cancelled` when it is any other transition (a manual retry now, skip, cancel, stop or
  close, or a circuit's probe or release taking the attempt). With no next event the
  schedule must still be `pending`: Redis holds it (the schedule hash names the same
  generation and ordinal and the sorted set has the route) and its deadline is less than
  `PENDING_GRACE_S` behind Redis's clock when the facts were read (a timer due that
  instant may not have written yet). Any other schedule is lost, and so is a schedule
  Redis holds that no event wrote. Must be 0.
- unexplained dispatches: dispatcher calls for an attempt that never reached
  `retrying` (no `deadline_reached`, `retry_now` or `circuit_probe_wake` event at that
  generation and ordinal).
  Must be 0.
- notices leaked: transcript retry notices (`retrying: true`) still there for a route that
  no longer retries (a route still in its retry loop when the drain ended holds its
  notice: counted apart). Must be 0.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from actors.demo.facts import RedisFacts, StreamEvent

PENDING_GRACE_S: Final = 1.0
POLICY_DECISIONS: Final = ("retry", "wait_for_reset", "skip", "stop")
WAITING: Final = frozenset({"retry_wait", "waiting_for_reset"})
# What moves an attempt to retrying: its deadline, a retry now, or its circuit host
# waking it as the circuit's probe.
DUE_CAUSES: Final = frozenset({"deadline_reached", "retry_now", "circuit_probe_wake"})

Attempt = tuple[str, int, int]  # route, generation, attempt ordinal


@dataclass
class ScheduleFates:
    fired: int = 0
    rescheduled: int = 0
    cancelled: int = 0
    pending: int = 0
    lost: list[str] = field(default_factory=list)
    lateness_s: list[float] = field(default_factory=list)
    due_at: dict[Attempt, float] = field(default_factory=dict)  # the due event's write time


def percentile(values: Sequence[float], share: float) -> float | None:
    """The nearest-rank percentile (`share` in 0..1), or None without values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, min(len(ordered), math.ceil(share * len(ordered))))
    return ordered[rank - 1]


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 1)


def spread_ms(values: Sequence[float]) -> dict[str, Any]:
    return {
        "count": len(values), "p50": _ms(percentile(values, 0.50)),
        "p99": _ms(percentile(values, 0.99)), "max": _ms(max(values) if values else None),
    }  # fmt: skip


def _writes_schedule(item: StreamEvent) -> bool:
    return item.event.state in WAITING and item.event.deadline is not None


def _by_route(events: Iterable[StreamEvent]) -> dict[str, list[StreamEvent]]:
    routes: dict[str, list[StreamEvent]] = defaultdict(list)
    for item in events:
        routes[item.event.route_id].append(item)
    return routes


def schedule_fates(facts: RedisFacts) -> ScheduleFates:
    """Every schedule the events wrote, by fate (see the module docstring)."""
    fates = ScheduleFates()
    explained: set[str] = set()
    for route_id, items in _by_route(facts.events).items():
        for item in items:
            if item.event.cause in DUE_CAUSES:
                event = item.event
                fates.due_at[(route_id, event.generation, event.attempt_ordinal)] = item.written_at
        for position, item in enumerate(items):
            if not _writes_schedule(item):
                continue
            following = items[position + 1] if position + 1 < len(items) else None
            if following is not None:
                _settle(fates, item, following)
                continue
            explained.add(route_id)  # Redis should hold this one: the route's last event
            if _held(facts, item):
                fates.pending += 1
            else:
                fates.lost.append(_name(item))
    orphans = _orphans(facts, explained)
    fates.lost.extend(f"{route_id} (held by Redis, written by no event)" for route_id in orphans)
    return fates


def _settle(fates: ScheduleFates, item: StreamEvent, following: StreamEvent) -> None:
    written, after = item.event, following.event
    same = after.generation == written.generation
    same = same and after.attempt_ordinal == written.attempt_ordinal
    if after.cause == "circuit_probe_wake" and same:
        fates.fired += 1  # fired early by its circuit host, as the circuit's probe
    elif after.cause == "deadline_reached" and same:
        fates.fired += 1
        assert written.deadline is not None  # a schedule-writing event has one
        fates.lateness_s.append(following.written_at - written.deadline.timestamp())
    elif _writes_schedule(following) and same:
        fates.rescheduled += 1  # the same attempt's schedule written again (e.g. parked)
    else:
        fates.cancelled += 1


def _held(facts: RedisFacts, item: StreamEvent) -> bool:
    event = item.event
    entry = facts.schedules.get(event.route_id)
    if entry is None or event.route_id not in facts.schedule_scores or event.deadline is None:
        return False
    if (entry.generation, entry.ordinal) != (event.generation, event.attempt_ordinal):
        return False
    return event.deadline.timestamp() > facts.now - PENDING_GRACE_S


def _orphans(facts: RedisFacts, explained: set[str]) -> list[str]:
    held = set(facts.schedules) | set(facts.schedule_scores)
    return sorted(held - explained)


def _name(item: StreamEvent) -> str:
    event = item.event
    return f"{event.route_id} generation {event.generation} ordinal {event.attempt_ordinal}"


def _attempt(record: Any) -> Attempt:
    return (record.route_id, record.generation, record.ordinal)


def dispatch_figures(facts: RedisFacts, fates: ScheduleFates) -> dict[str, Any]:
    per_attempt = Counter(_attempt(record) for record in facts.dispatches)
    doubled = sorted(f"{r} g{g} o{o}" for (r, g, o), n in per_attempt.items() if n > 1)
    unexplained = [a for a in per_attempt if a not in fates.due_at]
    latency = [
        record.at - fates.due_at[_attempt(record)]
        for record in facts.dispatches
        if _attempt(record) in fates.due_at
    ]
    undispatched = [a for a in fates.due_at if a not in per_attempt]
    return {
        "dispatches": len(facts.dispatches), "attempts_dispatched": len(per_attempt),
        "double_dispatches": len(doubled), "doubled": doubled[:20],
        "unexplained_dispatches": len(unexplained), "due_without_dispatch": len(undispatched),
        "latency_ms": spread_ms(latency), "ledger": dict(sorted(facts.ledger_outcomes.items())),
    }  # fmt: skip


def decision_figures(facts: RedisFacts) -> dict[str, Any]:
    records = [record for history in facts.histories.values() for record in history]
    kinds = Counter(record.decision for record in records)
    by_class_code = Counter(
        (record.decision, record.error_class.value if record.error_class else None, record.code)
        for record in records
        if record.decision in POLICY_DECISIONS
    )
    rows = [
        {"decision": d, "class": c, "code": code, "count": n}
        for (d, c, code), n in sorted(by_class_code.items(), key=lambda kv: (-kv[1], str(kv[0])))
    ]
    return {"history_records": dict(sorted(kinds.items())), "by_class_and_code": rows}


def circuit_figures(facts: RedisFacts) -> dict[str, Any]:
    states = Counter(circuit.get("state", "?") for circuit in facts.circuits)
    probes = sum(int(circuit.get("lease_epoch") or 0) for circuit in facts.circuits)
    return {"circuits": len(facts.circuits), "by_state": dict(sorted(states.items())),
            "probes": probes}  # fmt: skip


def build_report(facts: RedisFacts, run: dict[str, Any]) -> dict[str, Any]:
    """The whole report; `run` holds the run's own settings and counters."""
    fates = schedule_fates(facts)
    decisions = decision_figures(facts)
    dispatch = dispatch_figures(facts, fates)
    kinds = decisions["history_records"]
    into_action = sum(1 for item in facts.events if item.event.state == "action_required")
    invariants = {
        "double_dispatches": dispatch["double_dispatches"],
        "schedules_lost": len(fates.lost),
        "unexplained_dispatches": dispatch["unexplained_dispatches"],
        "notices_leaked": facts.notices.left,
    }
    return {
        "run": run,
        "routes": {"total": len(facts.route_states),
                   "by_state": dict(sorted(Counter(facts.route_states.values()).items()))},
        "decisions": decisions,
        "retries": kinds.get("retry", 0), "reset_waits": kinds.get("wait_for_reset", 0),
        "skips": kinds.get("skip", 0) + kinds.get("skip_now", 0), "stops": kinds.get("stop", 0),
        "action_required": into_action,
        "circuits": circuit_figures(facts),
        "dispatch": dispatch,
        "schedules": {"written": fates.fired + fates.rescheduled + fates.cancelled
                      + fates.pending + len(fates.lost),
                      "fired": fates.fired, "rescheduled": fates.rescheduled,
                      "cancelled": fates.cancelled,
                      "pending": fates.pending, "lost": fates.lost[:20]},
        "timer_lateness_ms": spread_ms(fates.lateness_s),
        "events": facts.events_len,
        "notices": {"written": facts.notices.written, "retired": facts.notices.retired,
                    "leaked": facts.notices.left, "held_by_live_retries": facts.notices.held},
        "invariants": invariants,
        "ok": not any(invariants.values()),
    }  # fmt: skip
