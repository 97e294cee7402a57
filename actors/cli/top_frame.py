"""One frame of `recovery top`, computed from raw Redis reads (actors/cli/top_reads.py does the
reading; this module does no I/O, so a frame is a pure function of what was read).

What is exact and what is sampled (the frame says which, per section):
- pending schedules, overdue schedules and the next deadlines: exact (the schedules
  sorted set: ZCARD, ZCOUNT, the first members and their hashes);
- circuits by state: exact (every circuit in the `<p>:circuits` index; circuits are per
  provider resource, so there are few);
- transitions per second: the events stream entries whose ids (Redis's clock) fall in the
  last `window_s` seconds, read newest first up to a cap. Below the cap the count is
  exact; at the cap the rate is estimated as cap / (now - oldest entry read);
- routes by state and dispatch-ledger outcomes: no index holds them (a route's state lives
  only in its hash, and the transition script is not ours to extend), so they come from a
  SCAN of the prefix bounded per frame. When the SCAN finishes within its budget the
  counts are exact for that pass; otherwise they are a sample (`exact` false, `seen` the
  number read) whose proportions estimate the fleet's, never totals.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from pydantic import BaseModel, ConfigDict

from actors.errors import CorruptRouteError
from actors.routes.models import ROUTE_STATES
from actors.store.route_codec import decode_schedule
from circuits import CircuitStatus

FROZEN: Final = ConfigDict(frozen=True, extra="forbid")
SHOWN_ROUTE_STATES: Final = tuple(state for state in ROUTE_STATES if state != "none")
LEDGER_OUTCOMES: Final = ("queued", "started", "delivered", "not_dispatched", "failed")
CIRCUIT_STATES: Final = tuple(status.value for status in CircuitStatus)


@dataclass(frozen=True, slots=True)
class RawReads:
    """What one frame read from Redis, as text, before any interpretation."""

    prefix: str
    now: datetime  # Redis TIME: the clock the events stream ids come from
    schedules_total: int
    schedules_overdue: int
    next_schedules: Sequence[Mapping[str, str]]  # the soonest schedules' hashes, in order
    window_s: float
    event_cap: int
    events: Sequence[tuple[str, Mapping[str, str]]]  # (id, fields), newest first
    stream_length: int
    route_states: Sequence[str]  # the `state` of each route hash the scan met
    ledgers: Sequence[Mapping[str, str]]  # `state` and `outcome` of each ledger met
    scan_complete: bool  # the scan went from cursor 0 back to 0 within its budget
    scan_calls: int
    circuit_states: Sequence[str]  # the `state` of every circuit in the index
    parked: int = 0  # routes in every circuit's parked set
    circuit_hosts: int | None = None  # from the installation record (None: none recorded)


class NextDeadline(BaseModel):
    model_config = FROZEN

    route_id: str
    state: str
    deadline: datetime
    due_in_s: float
    pending_outcome: str | None
    candidate_id: str | None
    code: str | None


class ScheduleSummary(BaseModel):
    model_config = FROZEN

    pending: int
    overdue: int
    next: list[NextDeadline]


class TransitionRate(BaseModel):
    model_config = FROZEN

    window_s: float
    count: int  # events read in the window (all of them when exact)
    per_s: float
    exact: bool
    by_state: dict[str, int]  # the state each transition led to
    stream_length: int


class SampledCounts(BaseModel):
    """Counts from the bounded SCAN: exact for a complete pass, else a sample."""

    model_config = FROZEN

    by_state: dict[str, int]
    seen: int
    exact: bool
    scan_calls: int


class TopFrame(BaseModel):
    model_config = FROZEN

    prefix: str
    at: datetime
    routes: SampledCounts
    schedules: ScheduleSummary
    transitions: TransitionRate
    dispatches: SampledCounts
    circuits: dict[str, int]
    parked: int = 0
    circuit_hosts: int | None = None


def compute_frame(raw: RawReads) -> TopFrame:
    return TopFrame(
        prefix=raw.prefix,
        at=raw.now,
        routes=_sampled(raw, _counts(raw.route_states, SHOWN_ROUTE_STATES)),
        schedules=ScheduleSummary(
            pending=raw.schedules_total,
            overdue=raw.schedules_overdue,
            next=[
                found
                for entry in raw.next_schedules
                if (found := _next_deadline(entry, raw.now)) is not None
            ],
        ),
        transitions=transition_rate(raw),
        dispatches=_sampled(raw, _counts(map(ledger_outcome, raw.ledgers), LEDGER_OUTCOMES)),
        circuits=_counts(raw.circuit_states, CIRCUIT_STATES),
        parked=raw.parked,
        circuit_hosts=raw.circuit_hosts,
    )


def transition_rate(raw: RawReads) -> TransitionRate:
    count = len(raw.events)
    exact = count < raw.event_cap
    span_s = raw.window_s
    if not exact:
        # The cap cut the window short: the entries read cover [oldest read, now].
        oldest_ms = event_time_ms(raw.events[-1][0])
        span_s = max(raw.now.timestamp() - oldest_ms / 1000, 0.001)
    states = (fields.get("state", "") for _id, fields in raw.events)
    return TransitionRate(
        window_s=raw.window_s,
        count=count,
        per_s=round(count / span_s, 3),
        exact=exact,
        by_state=dict(Counter(state for state in states if state)),
        stream_length=raw.stream_length,
    )


def ledger_outcome(ledger: Mapping[str, str]) -> str:
    """`queued` or `started` while in flight; the finished ledger's outcome after."""
    state = ledger.get("state", "")
    if state == "finished":
        return ledger.get("outcome", "") or "finished"
    return state


def event_time_ms(event_id: str) -> int:
    """The milliseconds part of a stream id `<ms>-<seq>`."""
    return int(event_id.partition("-")[0])


def _sampled(raw: RawReads, by_state: dict[str, int]) -> SampledCounts:
    return SampledCounts(
        by_state=by_state,
        seen=sum(by_state.values()),
        exact=raw.scan_complete,
        scan_calls=raw.scan_calls,
    )


def _counts(values: Iterable[str], known: Sequence[str]) -> dict[str, int]:
    """A count per known value (zeros included, in order), then any unknown ones seen."""
    seen = Counter(value for value in values if value)
    return {**dict.fromkeys(known, 0), **seen}


def _next_deadline(raw: Mapping[str, str], now: datetime) -> NextDeadline | None:
    """The schedule as shown; None for one that cannot be decoded (the host that owns it
    quarantines it; `recovery routes --corrupt` lists it)."""
    route_id = raw.get("route", "?")
    try:
        entry = decode_schedule(raw, route_id, f"schedule of {route_id}")
    except CorruptRouteError:
        return None
    deadline = entry.deadline.astimezone(UTC)
    return NextDeadline(
        route_id=entry.route_id,
        state=entry.state,
        deadline=deadline,
        due_in_s=round((deadline - now).total_seconds(), 3),
        pending_outcome=entry.pending_outcome,
        candidate_id=entry.candidate_id,
        code=entry.code,
    )
