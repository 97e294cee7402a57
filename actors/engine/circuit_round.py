"""A route round's circuit writes as one value, and how the circuit's owner applies it.

CircuitEffects (actors/engine/circuit_effects.py) turns what a round's durable transitions
mean for circuits into one CircuitRound: the probe verdicts (or abandoned leases), the
failures per circuit, the routes that parked and those that left. The owner of those
circuits applies it: a circuit host (actors/hosting/circuit_host.py) for route hosts, or
the writing process itself (LocalCircuits) for rq jobs and tests.

Applying is safe to repeat, so a round whose delivery failed is simply sent again: a
verdict is fenced by its lease token (a second report is not the owner's any more), a
failure mark the circuit already holds counts once (circuits.machine), parking is a
sorted set. Each part that cannot be written (Redis away, a lost compare-and-set race) is
handed back as the round's `undelivered` rest, never dropped here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Protocol

from actors.errors import RecoveryError, error_text
from actors.store.circuit_store import CircuitStore
from circuits import CircuitStatus, FailureLike, ProbeDenied, ProbeGrant, ReleasePlan, ResourceKey

log = logging.getLogger(__name__)

Release = tuple[ResourceKey, ReleasePlan]
"""A closed circuit's resource and the release plan of its parked routes."""


class CircuitObserver(Protocol):
    """What metrics see (actors/hosting/metrics.py CircuitMetrics)."""

    def probe(self, outcome: str) -> None: ...
    def state_change(self, status: str, label: str) -> None: ...
    def parked(self, label: str, count: int) -> None: ...
    def released(self, count: int) -> None: ...


@dataclass(frozen=True, slots=True)
class Verdict:
    """A probe ended: `success` True closes, False reopens, None gives the lease up."""

    resource: ResourceKey
    token: str
    success: bool | None
    reset_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class Failures:
    """The failures a round's routes saw on one circuit, in order, with each one's
    (model, distinct models needed to open); `seen` is the status the round read."""

    resource: ResourceKey
    failures: tuple[tuple[FailureLike, str], ...]
    models: tuple[tuple[str | None, int], ...]
    seen: CircuitStatus


@dataclass(frozen=True, slots=True)
class Parking:
    """Routes that now wait on the circuit."""

    resource: ResourceKey
    route_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class CircuitRound:
    """Everything one route round writes to circuits, applied in this order."""

    now: datetime
    verdicts: tuple[Verdict, ...] = ()
    failures: tuple[Failures, ...] = ()
    parks: tuple[Parking, ...] = ()
    unparks: tuple[tuple[ResourceKey, str], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.verdicts or self.failures or self.parks or self.unparks)

    def resources(self) -> set[str]:
        """The resource ids the round writes."""
        found = {v.resource.resource_id for v in self.verdicts}
        found |= {f.resource.resource_id for f in self.failures}
        found |= {p.resource.resource_id for p in self.parks}
        return found | {resource.resource_id for resource, _ in self.unparks}

    def split(self, owner: Callable[[str], int]) -> dict[int, CircuitRound]:
        """The round cut by owner (`owner(resource id)`), each part in the same order."""
        parts: dict[int, CircuitRound] = {}

        def part(resource: ResourceKey) -> tuple[int, CircuitRound]:
            index = owner(resource.resource_id)
            return index, parts.get(index, CircuitRound(self.now))

        for verdict in self.verdicts:
            index, found = part(verdict.resource)
            parts[index] = replace(found, verdicts=(*found.verdicts, verdict))
        for failures in self.failures:
            index, found = part(failures.resource)
            parts[index] = replace(found, failures=(*found.failures, failures))
        for parking in self.parks:
            index, found = part(parking.resource)
            parts[index] = replace(found, parks=(*found.parks, parking))
        for unpark in self.unparks:
            index, found = part(unpark[0])
            parts[index] = replace(found, unparks=(*found.unparks, unpark))
        return parts


@dataclass(frozen=True, slots=True)
class Applied:
    """What applying a round did: the releases its probe successes planned (for the
    caller to carry out, when it is the releaser) and the parts not written."""

    releases: tuple[Release, ...] = ()
    undelivered: CircuitRound | None = None


class CircuitPort(Protocol):
    """The circuit writes a route round needs, to whoever owns the circuits. `remote`:
    the owner is another process (a circuit host), which carries out the releases
    itself; a round is then sent after the route round is answered
    (actors/engine/circuit_sends.py)."""

    remote: bool

    async def acquire_probe(
        self, resource: ResourceKey, holder: str, now: datetime, ttl_s: float
    ) -> ProbeGrant | ProbeDenied: ...

    async def apply_round(self, round_: CircuitRound) -> Applied: ...


@dataclass
class LocalCircuits:
    """This process owns the circuits it writes (an rq job, a test, or a circuit host's
    own store): the fenced changes go straight to the store; releases are returned."""

    store: CircuitStore
    observer: CircuitObserver | None = None
    remote: bool = False  # this process owns the circuits: releases come back here

    async def acquire_probe(
        self, resource: ResourceKey, holder: str, now: datetime, ttl_s: float
    ) -> ProbeGrant | ProbeDenied:
        result = await self.store.acquire_probe(resource, holder, now, ttl_s)
        self._probe("granted" if isinstance(result, ProbeGrant) else "denied")
        return result

    async def apply_round(self, round_: CircuitRound) -> Applied:
        rest = _Rest(round_.now)
        releases = [r for v in round_.verdicts if (r := await self._verdict(v, round_, rest))]
        await self._failures(round_.failures, round_.now, rest)
        for parking in round_.parks:
            await self._park(parking, round_.now, rest)
        await self._unpark(round_.unparks, rest)
        return Applied(tuple(releases), rest.round())

    async def _verdict(self, verdict: Verdict, round_: CircuitRound, rest: _Rest) -> Release | None:
        resource, now = verdict.resource, round_.now
        try:
            if verdict.success is None:
                await self.store.abandon_probe(resource, verdict.token, now)
                self._probe("abandoned")
                return None
            outcome = await self.store.report_probe(
                resource, verdict.token, verdict.success, now, reset_at=verdict.reset_at
            )
        except RecoveryError as error:
            rest.failed("probe verdict", resource, error).verdicts.append(verdict)
            return None
        self._probe("succeeded" if verdict.success else "failed")
        if outcome.accepted and self.observer is not None:
            self.observer.state_change(outcome.view.status.value, resource.label)
        return None if outcome.release is None else (resource, outcome.release)

    async def _failures(self, batches: Sequence[Failures], now: datetime, rest: _Rest) -> None:
        """Every circuit's failures, each its own compare-and-set, in two round trips."""
        if not batches:
            return
        try:
            written = await self.store.record_failures_many(batches, now)
        except RecoveryError as error:
            for failures in batches:
                rest.failed("failures", failures.resource, error).failures.append(failures)
            return
        for failures, found in zip(batches, written, strict=True):
            if isinstance(found, RecoveryError):
                rest.failed("failures", failures.resource, found).failures.append(failures)
            elif found.status is not failures.seen and self.observer is not None:
                self.observer.state_change(found.status.value, failures.resource.label)

    async def _park(self, parking: Parking, now: datetime, rest: _Rest) -> None:
        try:
            parked = await self.store.park_many(parking.resource, list(parking.route_ids), now)
        except RecoveryError as error:
            rest.failed("parking", parking.resource, error).parks.append(parking)
            return
        if self.observer is not None:
            self.observer.parked(parking.resource.label, parked.parked_count)

    async def _unpark(self, unparks: tuple[tuple[ResourceKey, str], ...], rest: _Rest) -> None:
        if not unparks:
            return
        try:
            counts = await self.store.unpark_many(unparks)
        except RecoveryError as error:
            rest.failed("unparking", unparks[0][0], error).unparks.extend(unparks)
            return
        if self.observer is not None:
            for resource, count in counts:
                self.observer.parked(resource.label, count)

    def _probe(self, outcome: str) -> None:
        if self.observer is not None:
            self.observer.probe(outcome)


class _Rest:
    """The parts of a round not written, gathered while it is applied."""

    def __init__(self, now: datetime) -> None:
        self.now = now
        self.verdicts: list[Verdict] = []
        self.failures: list[Failures] = []
        self.parks: list[Parking] = []
        self.unparks: list[tuple[ResourceKey, str]] = []

    def failed(self, what: str, resource: ResourceKey, error: RecoveryError) -> _Rest:
        log.warning(
            "circuit %s of %s not written (sent again): %s", what, resource.label,
            error_text(error),
        )  # fmt: skip
        return self

    def round(self) -> CircuitRound | None:
        found = CircuitRound(
            self.now, tuple(self.verdicts), tuple(self.failures), tuple(self.parks),
            tuple(self.unparks),
        )  # fmt: skip
        return found if found else None
