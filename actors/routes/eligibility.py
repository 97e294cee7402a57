"""Circuits as an eligibility input of route decisions (docs/DESIGN.md §3; issue 5): which
candidate a skip or a start runs on, and how long a failure decision may park on an open
circuit. Pure, like actors/routes/circuit_board.py: the circuits are the round's CircuitBoard.

Choosing a candidate (a skip: the policy's on_exhausted, a skip-now; a start, a start
fresh). Candidates are taken in the order a skip takes them without circuits (profile
order after the current one, wrapping; a start from the first), enabled and not skipped
in this cycle:
- the first whose covering circuits are all closed is chosen, and runs now;
- when every one of them is blocked (open or half-open), a skip parks on the first of
  them whose wait fits its policy: it switches to that candidate (a new generation) but
  waits in `retry_wait` with reason `circuit_open` until its circuit can next be probed,
  and its first attempt there meets the circuit gate like any parked attempt (it is the
  probe, dispatches, or parks again). A wait fits when it ends within the candidate's
  hold horizon for the failure's class: the longest its policy would hold such a failure
  (its reset wait's max_wait_seconds if enabled, plus every retry delay if retrying is
  enabled). When none fits (a policy that never waits, as the default one) the skip
  stops: `action_required`, naming the open circuits;
- a start or a start fresh is the orchestrator's own turn, not a dispatch of the
  runtime's: it takes the first candidate whose circuits are closed, or whose blocking
  circuit's probe lease the round took for this very route (its probe is due: open-until
  has passed; actors/engine/circuit_effects.py), so an expired circuit is always probed
  by the next start that could use it rather than avoided forever; the route then
  carries the lease (`circuit`, `probe_token`) and its next report is the verdict. When
  all are blocked it is parked on the first one (`retry_wait`, reason `circuit_open`,
  its first attempt dispatched when the circuit can next be probed) if that wake fits
  the longest its policy holds any failure; else it starts on it as before (its
  failure, if any, is reported and decides).

Capping a park (a Retry or a WaitForReset on a blocked candidate): parking is allowed
while the circuit's wake (when its probe can next be had) is within the decision's own
horizon for this class: for a reset wait, now + the class policy's max_wait_seconds; for a
retry, now + the delays of this retry and of every retry the budget still allows (the
time the policy would spend retrying before it gives up). Beyond it the decision is the
policy's `on_exhausted` (as once this class's waits and retries are spent): a skip,
circuit-aware as above, or a stop.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from actors.routes.circuit_board import (
    CircuitBinding,
    CircuitBoard,
    Park,
    Probe,
    covering,
    profile_candidate_key,
)
from actors.routes.profiles import RouteCandidate, RouteProfile, candidates_of
from catalogue.codes import ErrorClass
from circuits import ResourceKey
from policy import (
    POLICY_CLASSES,
    Decision,
    Limits,
    NamedPolicy,
    Outcome,
    PolicyDocument,
    Retry,
    WaitForReset,
    retry_delays,
)


@dataclass(frozen=True, slots=True)
class Choice:
    """The candidate to run on; `park` when it must first wait on its circuit."""

    candidate: RouteCandidate
    park: Park | None = None


@dataclass(frozen=True, slots=True)
class AllBlocked:
    """Every remaining candidate is blocked beyond what its policy would wait."""

    circuits: tuple[str, ...]


def ordered(
    profile: RouteProfile, after: str | None, excluded: Iterable[str] = ()
) -> list[RouteCandidate]:
    """The enabled, not excluded candidates in the order a skip tries them (as
    route_profiles.next_eligible: after `after`, wrapping, never `after` itself)."""
    candidates = candidates_of(profile)
    out = frozenset(excluded) | ({after} if after is not None else set())
    start = next((c.index + 1 for c in candidates if c.id == after), 0)
    return [c for c in candidates[start:] + candidates[:start] if c.enabled and c.id not in out]


def candidate_resources(
    binding: CircuitBinding, profile: RouteProfile, excluded: Iterable[str] = ()
) -> dict[str, ResourceKey]:
    """(resource id -> key) of every circuit covering a candidate a skip or start could
    choose: what a round reads so that choice sees the circuits."""
    wanted: dict[str, ResourceKey] = {}
    for candidate in ordered(profile, None, excluded):
        key = profile_candidate_key(profile, candidate.id, binding)
        if key is not None:
            wanted.update(covering(key))
    return wanted


def blocked(
    board: CircuitBoard, profile: RouteProfile, candidate: RouteCandidate, now: datetime
) -> Park | None:
    return board.blocking(profile_candidate_key(profile, candidate.id, board.binding), now)


def choose_skip(
    board: CircuitBoard | None,
    profile: RouteProfile,
    *,
    current: str | None,
    excluded: Iterable[str],
    error_class: ErrorClass | None,
    now: datetime,
) -> Choice | AllBlocked | None:
    """Where a skip goes (module docstring); None when no candidate is left."""
    candidates = ordered(profile, current, excluded)
    if not candidates:
        return None
    if board is None:
        return Choice(candidates[0])
    parks: list[tuple[RouteCandidate, Park]] = []
    for candidate in candidates:
        park = blocked(board, profile, candidate, now)
        if park is None:
            return Choice(candidate)
        parks.append((candidate, park))
    for candidate, park in parks:
        horizon = now + timedelta(seconds=hold_seconds(candidate, error_class))
        if park.until <= horizon:
            return Choice(candidate, park)
    return AllBlocked(tuple(dict.fromkeys(park.circuit for _, park in parks)))


def choose_start(
    board: CircuitBoard | None,
    profile: RouteProfile,
    now: datetime,
    route_id: str | None = None,
) -> RouteCandidate | None:
    """The candidate a start or start fresh of `route_id` runs on (module docstring)."""
    candidates = ordered(profile, None)
    if board is not None:
        for candidate in candidates:
            park = blocked(board, profile, candidate, now)
            if park is None or probing(board, park, route_id) is not None:
                return candidate
    return candidates[0] if candidates else None


def probing(board: CircuitBoard | None, park: Park | None, route_id: str | None) -> Probe | None:
    """The probe `route_id` holds on the circuit `park` waits on (the round took its
    lease for this route), else None."""
    if board is None or park is None or route_id is None:
        return None
    granted = board.grants.get(route_id)
    if granted is None or granted[0] != park.circuit:
        return None
    return Probe(park.circuit, granted[1].owner_token)


def start_park(
    board: CircuitBoard | None,
    profile: RouteProfile,
    candidate: RouteCandidate,
    route_id: str,
    now: datetime,
) -> Park | None:
    """Where a start on `candidate` (every candidate blocked, no probe of its own) waits:
    its circuit's wake, when that fits the longest the candidate's policy holds any class
    of failure (a quota the account waits out is not sent again meanwhile); else None,
    and the start runs on it as before (its failure, if any, is reported and decides)."""
    if board is None:
        return None
    park = blocked(board, profile, candidate, now)
    if park is None or probing(board, park, route_id) is not None:
        return None
    horizon = max(hold_seconds(candidate, error_class) for error_class in POLICY_CLASSES)
    return park if park.until <= now + timedelta(seconds=horizon) else None


def start_probe_changes(
    board: CircuitBoard | None,
    profile: RouteProfile,
    candidate: RouteCandidate,
    route_id: str,
    now: datetime,
) -> dict[str, str]:
    """The route fields a start on `candidate` sets when it is its circuit's probe."""
    if board is None:
        return {}
    probe = probing(board, blocked(board, profile, candidate, now), route_id)
    return {} if probe is None else {"circuit": probe.circuit, "probe_token": probe.token}


def hold_seconds(candidate: RouteCandidate, error_class: ErrorClass | None) -> float:
    """The longest the candidate's policy holds a failure of `error_class`: its reset
    wait (if enabled) plus every retry delay (if enabled); 0 for a class no policy covers."""
    if error_class is None or error_class not in POLICY_CLASSES:
        return 0.0
    document, limits = _unpacked(candidate.policy)
    section = document.for_class(error_class)
    wait = section.wait_for_reset.max_wait_seconds if section.wait_for_reset.enabled else 0
    return float(wait + sum(retry_delays(section.retry, cap_seconds=limits.delay_cap_seconds)))


def retries_left_s(candidate: RouteCandidate, error_class: ErrorClass, retry_ordinal: int) -> float:
    """The delays of the retries the candidate's policy still allows for `error_class`
    after retry `retry_ordinal` (what a due retry may still spend waiting)."""
    if error_class not in POLICY_CLASSES:
        return 0.0
    document, limits = _unpacked(candidate.policy)
    section = document.for_class(error_class)
    if not section.retry.enabled:
        return 0.0
    return float(
        sum(retry_delays(section.retry, cap_seconds=limits.delay_cap_seconds)[retry_ordinal:])
    )


def on_exhausted(candidate: RouteCandidate, error_class: ErrorClass) -> Outcome:
    """What the candidate's policy does once `error_class`'s waits and retries are spent."""
    document, _ = _unpacked(candidate.policy)
    return document.for_class(error_class).on_exhausted


def decision_horizon(
    candidate: RouteCandidate, error_class: ErrorClass, decision: Decision, now: datetime
) -> datetime | None:
    """The latest a Retry or WaitForReset may park (module docstring); None for others."""
    document, limits = _unpacked(candidate.policy)
    section = document.for_class(error_class)
    match decision:
        case WaitForReset():
            seconds = float(section.wait_for_reset.max_wait_seconds)
        case Retry(ordinal=ordinal):
            delays = retry_delays(section.retry, cap_seconds=limits.delay_cap_seconds)
            seconds = float(sum(delays[max(ordinal - 1, 0) :]))
        case _:
            return None
    return now + timedelta(seconds=seconds)


def _unpacked(policy: PolicyDocument | NamedPolicy) -> tuple[PolicyDocument, Limits]:
    if isinstance(policy, NamedPolicy):
        return policy.document, policy.limits
    return policy, Limits()
