"""The route hosts' metrics, exported on Ray's Prometheus endpoint (`ray.util.metrics`).

Ray prefixes every name with `ray_` on export. Created once per process, on first use,
so importing this module costs nothing and a process outside Ray records into nothing.

    recovery_route_transitions_total{state}                  route writes, by the state left
    recovery_route_decisions_total{decision,error_class,code} failure decisions
    recovery_route_rejections_total{reason}                  fenced calls refused, by type
    recovery_route_quarantined_total{field}                  corrupt routes quarantined, by
                                                              the field found corrupt
    recovery_route_batch_size                                 requests per host call
    recovery_route_pending_timers{host}                       armed in-process timers
    recovery_timer_lateness_seconds                           fire time - deadline
    recovery_dispatch_enqueued_total                          dispatch jobs handed to rq
    recovery_dispatch_enqueue_seconds                         retrying write -> job enqueued
    recovery_dispatch_outcomes_total{outcome,status}          dispatcher calls that observed
                                                              their receiver (the webhook's):
                                                              delivered, not_dispatched, failed,
                                                              by HTTP status ("none": no answer)
    recovery_dispatch_latency_seconds{outcome}                those calls' latency
                                                              (the dispatcher call runs in an rq
                                                              worker, outside Ray: the job
                                                              announces it on the owning host's
                                                              wake stream, which records it; the
                                                              ledger keeps the same facts)
    recovery_circuit_state_changes_total{state}               circuit changes, by new state
    recovery_circuit_state{circuit}                           each circuit's state now:
                                                              0 closed, 1 half-open, 2 open
    recovery_circuit_probes_total{outcome}                    granted, denied, succeeded,
                                                              failed, abandoned
    recovery_circuit_parked{circuit}                          routes parked on a circuit now
                                                              (down as routes leave)
    recovery_circuit_released_total                           parked routes given a wave slot
                                                              (its rate: released per second)
    recovery_notices_total{outcome}                           transcript retry notices: written,
                                                              refused (a retired attempt's),
                                                              retired, duplicates_repaired,
                                                              write_failures, cleanup_failures,
                                                              recovery_messages, withdrawn (a
                                                              notice created for an attempt the
                                                              route had left, deleted again)
    recovery_notice_guards{host}                              live session guard entries
The circuit metrics are recorded where circuits are written: in the circuit hosts
(actors/hosting/circuit_host.py), the released count in the route hosts that arm them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Final

from ray.util.metrics import Counter, Gauge, Histogram

from actors.routes.models import RouteSnapshot
from actors.store.wakes import Dispatched

CIRCUIT_STATE_VALUES: Final = {"closed": 0, "half_open": 1, "open": 2}
BATCH_BOUNDARIES: Final = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0]
LATENESS_BOUNDARIES: Final = [
    0.001,
    0.002,
    0.005,
    0.01,
    0.015,
    0.025,
    0.05,
    0.1,
    0.5,
    1.0,
    2.5,
    5.0,
]
DISPATCH_LATENCY_BOUNDARIES: Final = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
]  # fmt: skip
# What a failure report decided, read off the state it left the route in.
DECISION_OF_STATE: Final = {
    "retry_wait": "retry",
    "waiting_for_reset": "wait_for_reset",
    "switching": "skip",
    "active": "skip",  # a skip completes the switch in the same call
    "action_required": "stop",
}


@dataclass(frozen=True, slots=True)
class RouteMetrics:
    transitions: Counter
    decisions: Counter
    rejections: Counter
    batch_size: Histogram
    pending_timers: Gauge
    timer_lateness: Histogram
    dispatches: Counter
    dispatch_enqueue: Histogram
    quarantined: Counter
    dispatch_outcomes: Counter
    dispatch_latency: Histogram

    def transition(self, snapshot: RouteSnapshot) -> None:
        self.transitions.inc(1, tags={"state": snapshot.state})

    def decision(self, snapshot: RouteSnapshot) -> None:
        """Record what a failure report decided (the snapshot it answered with)."""
        tags = {
            "decision": DECISION_OF_STATE.get(snapshot.state, snapshot.state),
            "error_class": snapshot.error_class or "none",
            "code": snapshot.code or "none",
        }
        self.decisions.inc(1, tags=tags)

    def rejection(self, error: Exception) -> None:
        self.rejections.inc(1, tags={"reason": type(error).__name__})

    def quarantine(self, snapshot: RouteSnapshot, field: str) -> None:
        """A corrupt route was quarantined (actors/routes/quarantine.py)."""
        self.quarantined.inc(1, tags={"field": field})

    def dispatched(self, call: Dispatched) -> None:
        """A dispatch job's dispatcher call, as the job announced it (actors/store/wakes.py)."""
        status = "none" if call.status is None else str(call.status)
        self.dispatch_outcomes.inc(1, tags={"outcome": call.outcome, "status": status})
        self.dispatch_latency.observe(call.latency_ms / 1000, tags={"outcome": call.outcome})


@cache
def route_metrics() -> RouteMetrics:
    return RouteMetrics(
        transitions=Counter(
            "recovery_route_transitions_total",
            description="Route transitions written, by the state they left the route in.",
            tag_keys=("state",),
        ),
        decisions=Counter(
            "recovery_route_decisions_total",
            description="Decisions on reported failures, by outcome, class and code.",
            tag_keys=("decision", "error_class", "code"),
        ),
        rejections=Counter(
            "recovery_route_rejections_total",
            description="Route calls refused with no effect (stale generation, state, ...).",
            tag_keys=("reason",),
        ),
        batch_size=Histogram(
            "recovery_route_batch_size",
            description="Route requests carried by one call to a route host.",
            boundaries=BATCH_BOUNDARIES,
        ),
        pending_timers=Gauge(
            "recovery_route_pending_timers",
            description="In-process retry timers armed on a route host.",
            tag_keys=("host",),
        ),
        timer_lateness=Histogram(
            "recovery_timer_lateness_seconds",
            description="Fire time of a route timer minus its deadline.",
            boundaries=LATENESS_BOUNDARIES,
        ),
        dispatches=Counter(
            "recovery_dispatch_enqueued_total",
            description="Dispatch jobs handed to rq for routes that became retrying.",
        ),
        dispatch_enqueue=Histogram(
            "recovery_dispatch_enqueue_seconds",
            description="From a route's retrying write to its dispatch job on the rq queue.",
            boundaries=LATENESS_BOUNDARIES,
        ),
        quarantined=Counter(
            "recovery_route_quarantined_total",
            description="Corrupt routes quarantined (action_required, corrupt: ...), by field.",
            tag_keys=("field",),
        ),
        dispatch_outcomes=Counter(
            "recovery_dispatch_outcomes_total",
            description=(
                "Dispatcher calls that observed their receiver (the webhook's), by outcome "
                "(delivered, not_dispatched, failed) and HTTP status (none: no answer)."
            ),
            tag_keys=("outcome", "status"),
        ),
        dispatch_latency=Histogram(
            "recovery_dispatch_latency_seconds",
            description="Latency of those dispatcher calls (the webhook's request), by outcome.",
            boundaries=DISPATCH_LATENCY_BOUNDARIES,
            tag_keys=("outcome",),
        ),
    )


@dataclass(frozen=True, slots=True)
class CircuitMetrics:
    """What circuit writes record (actors/engine/circuit_round.py), and the routes a
    route host gave their release slots."""

    changes: Counter
    states: Gauge
    probes: Counter
    parked_routes: Gauge
    released_routes: Counter

    def probe(self, outcome: str) -> None:
        self.probes.inc(1, tags={"outcome": outcome})

    def state_change(self, status: str, label: str) -> None:
        self.changes.inc(1, tags={"state": status})
        self.state(status, label)

    def state(self, status: str, label: str) -> None:
        self.states.set(CIRCUIT_STATE_VALUES.get(status, -1), tags={"circuit": label})

    def parked(self, label: str, count: int) -> None:
        self.parked_routes.set(count, tags={"circuit": label})

    def released(self, count: int) -> None:
        if count:
            self.released_routes.inc(count)


@cache
def circuit_metrics() -> CircuitMetrics:
    return CircuitMetrics(
        changes=Counter(
            "recovery_circuit_state_changes_total",
            description="Circuit changes written, by the state they left the circuit in.",
            tag_keys=("state",),
        ),
        states=Gauge(
            "recovery_circuit_state",
            description="Each circuit's state now: 0 closed, 1 half-open, 2 open.",
            tag_keys=("circuit",),
        ),
        probes=Counter(
            "recovery_circuit_probes_total",
            description=(
                "Probe leases granted or denied, parked routes woken to probe, and how the "
                "probes ended."
            ),
            tag_keys=("outcome",),
        ),
        parked_routes=Gauge(
            "recovery_circuit_parked",
            description="Routes parked on a circuit now (it goes down as routes leave).",
            tag_keys=("circuit",),
        ),
        released_routes=Counter(
            "recovery_circuit_released_total",
            description="Parked routes given a release wave slot after a circuit closed.",
        ),
    )


NOTICE_OUTCOMES: Final = (
    "written", "refused", "retired", "duplicates_repaired", "write_failures",
    "cleanup_failures", "recovery_messages", "recovery_failures", "withdrawn",
)  # fmt: skip


@dataclass(slots=True)
class NoticeMetrics:
    """A route host's notice counts, exported as the growth of its NoticeTally."""

    notices: Counter
    guards: Gauge
    seen: dict[str, int] = field(default_factory=dict)

    def observe(self, tally: Mapping[str, int], live_guards: int, host: str) -> None:
        for outcome in NOTICE_OUTCOMES:
            now = tally.get(outcome, 0)
            grown = now - self.seen.get(outcome, 0)
            if grown > 0:  # Ray's Counter.inc refuses 0
                self.notices.inc(grown, tags={"outcome": outcome})
            self.seen[outcome] = now
        self.guards.set(live_guards, tags={"host": host})


@cache
def notice_metrics() -> NoticeMetrics:
    return NoticeMetrics(
        notices=Counter(
            "recovery_notices_total",
            description="Transcript retry notices written, refused, retired and failed.",
            tag_keys=("outcome",),
        ),
        guards=Gauge(
            "recovery_notice_guards",
            description="Live session guard entries on a route host.",
            tag_keys=("host",),
        ),
    )
