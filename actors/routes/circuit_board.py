"""Circuits as an input of route planning: which resource a candidate dispatches into,
and what a due attempt or a failure decision does when that resource's circuit is not
closed. Pure: no clock, no I/O. The shell (actors/engine/circuit_effects.py) reads the
circuits of a round's routes and takes probe leases BEFORE planning, hands them in as a
CircuitBoard (RouteContext.circuits), and writes the circuit side effects AFTER the
route transitions are durable.

Which resource: a candidate's provider, model and credential binding
(circuits.ResourceKey). The credential binding is the account (or key) label the
candidate names (`account`, chosen by the orchestrator, never the secret itself), else
the agent adapter it runs under, as `<provider>\\0<agent>` (each adapter holds its own
login on an installation), reduced to an HMAC fingerprint under the installation key
(CircuitBinding.installation_key, from RECOVERY_INSTALLATION_KEY in the shell, with a
default). A candidate without a provider has no circuit. A failure counts against the
narrowest circuit its classification scope supports (circuits.failure_targets; a
request-scope failure none), never finer than the candidate's own key.

What the planner decides against a board:
- a Retry or WaitForReset on a candidate whose covering circuits are not all closed
  parks: same decision and budget, deadline max(policy deadline, when the circuit can
  next be probed), reason `circuit_open`, `circuit` = the blocking circuit;
- a due attempt (FireDue, RetryNow) meets a `gate`: all closed -> dispatch; the round
  took the probe lease for this route -> dispatch as THE probe (the owner token goes
  with the attempt); else re-park (same attempt ordinal, no budget, a new deadline);
- a route parked on a circuit that closed but that was never released in a wave (the
  release was lost in a crash) is spread over the waves by a hashed jitter, never
  dispatched with all the others at once.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Final

from actors.errors import CorruptProfileError
from actors.routes.circuit_models import CircuitView
from actors.routes.models import RouteSnapshot
from actors.routes.profiles import ConcreteProfile, RouteProfile, profile_from_json
from catalogue import Classification
from catalogue.codes import Scope
from circuits import (
    CircuitSettings,
    CircuitState,
    CircuitStatus,
    DenialReason,
    ProbeDenied,
    ProbeGrant,
    ResourceKey,
    Severity,
    account_binding,
    covering_keys,
    credential_fingerprint,
    failure_targets,
    hashed_jitter,
    machine,
    severity,
    trusted_reset,
    wave_budget,
)

DEFAULT_INSTALLATION_KEY: Final = b"provider-recovery-default-installation"
DEFAULT_PROBE_TTL_S: Final = 300.0
MIN_PARK_S: Final = 1.0
REASON_PARKED: Final = "circuit_open"
REASON_RELEASED: Final = "circuit_released"
REASON_PROBE: Final = "circuit_probe"


@dataclass(frozen=True, slots=True)
class CircuitBinding:
    """How routes meet circuits. `probe_ttl_s`: how long a probe's lease lasts (a probe
    is a whole dispatched turn; its route's next report ends it sooner). `min_park_s`:
    the shortest re-park (never a hot loop of re-checks). `owner_wake_margin_s`: how
    long after a circuit's probe time its parked routes wake by themselves when the
    circuit has an owner that wakes one of them at that time (circuit hosts); 0 when
    every parked route wakes at the probe time (no circuit hosts)."""

    installation_key: bytes = DEFAULT_INSTALLATION_KEY
    settings: CircuitSettings = field(default_factory=CircuitSettings)
    probe_ttl_s: float = DEFAULT_PROBE_TTL_S
    min_park_s: float = MIN_PARK_S
    wave_fraction: float = 0.2
    wave_interval_s: float = 1.0
    owner_wake_margin_s: float = 0.0


@lru_cache(maxsize=4096)
def _candidate_key(
    provider: str, model: str | None, agent: str, account: str | None, installation_key: bytes
) -> ResourceKey:
    binding = account_binding(account) if account else f"{provider}\x00{agent}"
    fingerprint = credential_fingerprint(binding, installation_key)
    if model:
        return ResourceKey.for_candidate(provider, model, fingerprint)
    return ResourceKey(provider=provider, credential_fingerprint=fingerprint)


@lru_cache(maxsize=4096)
def covering(key: ResourceKey) -> tuple[tuple[str, ResourceKey], ...]:
    """(resource id, key) of every circuit a dispatch to `key` must find closed."""
    return tuple((k.resource_id, k) for k in covering_keys(key))


def candidate_key(snapshot: RouteSnapshot, binding: CircuitBinding) -> ResourceKey | None:
    """The resource the route's current candidate dispatches into (None: no circuit)."""
    if snapshot.candidate_id is None or not isinstance(snapshot.profile, dict):
        return None
    try:
        profile = profile_from_json(snapshot.route_id, snapshot.profile)
    except CorruptProfileError:
        return None  # the planner stops such a route; no circuit to consult
    return profile_candidate_key(profile, snapshot.candidate_id, binding)


def profile_candidate_key(
    profile: RouteProfile, candidate_id: str, binding: CircuitBinding
) -> ResourceKey | None:
    """The resource candidate `candidate_id` of `profile` dispatches into (None: no such
    candidate, or it names no provider)."""
    found = (
        profile
        if isinstance(profile, ConcreteProfile)
        else next((c for c in profile.candidates if c.id == candidate_id), None)
    )
    if found is None or found.id != candidate_id or not found.provider:
        return None
    return _candidate_key(
        found.provider, found.model, found.agent, found.account, binding.installation_key
    )


@dataclass(frozen=True, slots=True)
class Counted:
    """One failure the round counts on a circuit: who saw it, on which model, and how
    many distinct models must fail before that circuit opens (circuits.failure_targets)."""

    failure: Classification
    route_id: str
    model: str | None = None
    min_models: int = 1


@dataclass(frozen=True, slots=True)
class Dispatch:
    """Every covering circuit is closed: the attempt dispatches."""


@dataclass(frozen=True, slots=True)
class Probe:
    """The round holds the circuit's probe lease for this attempt: it dispatches alone."""

    circuit: str
    token: str


@dataclass(frozen=True, slots=True)
class Park:
    """Wait on `circuit` until `until`, when its probe can next be asked for (released:
    its wave slot after a close). The route's own deadline is `margin_s` later when the
    circuit's owner wakes one parked route at `until` (CircuitBinding.owner_wake_margin_s):
    the others then sleep through the probe instead of all waking to park again."""

    circuit: str
    until: datetime
    released: bool = False
    margin_s: float = 0.0

    @property
    def deadline(self) -> datetime:
        """The parked route's own deadline: the safety net if no owner wakes it."""
        return self.until + timedelta(seconds=self.margin_s)


Gate = Dispatch | Probe | Park
ProbeVerdict = bool | None
"""True: the probe reached a working resource; False: it failed; None: no verdict."""


class CircuitBoard:
    """The circuits one planning round sees: the views the shell read for the round,
    the probe leases it took (route id -> resource id and grant) or was denied (by
    resource id; a lease the round took is a denial for every other route), and the
    failures and probe verdicts the round's plans fold in, in plan order, with the pure
    machine, so a later route in the round sees a circuit an earlier failure opened.
    Round-local and single-threaded (one per round, as RoundClassifier)."""

    def __init__(
        self,
        binding: CircuitBinding,
        views: Iterable[CircuitView] = (),
        *,
        grants: Mapping[str, tuple[str, ProbeGrant]] | None = None,
        denials: Mapping[str, ProbeDenied] | None = None,
    ) -> None:
        self.binding = binding
        self.read: dict[str, CircuitView] = {v.resource_id: v for v in views}
        self.states: dict[str, CircuitState] = {r: v.state for r, v in self.read.items()}
        self.grants: dict[str, tuple[str, ProbeGrant]] = dict(grants or {})
        self.denials: dict[str, ProbeDenied] = dict(denials or {})
        self.failures: dict[str, list[Counted]] = {}
        self.verdicts: dict[str, tuple[ProbeVerdict, datetime | None]] = {}
        self.probed: set[str] = set()  # the circuits a probe verdict of the round changed
        self._noted: set[str] = set()  # routes whose report is folded in (once each)

    def key_of(self, snapshot: RouteSnapshot) -> ResourceKey | None:
        return candidate_key(snapshot, self.binding)

    def failures_folded(self, resource_id: str, counted: int) -> CircuitState | None:
        """The circuit's state read with the round's failures on it folded in, in order,
        as the board holds it, when that is all it holds: each of the `counted` noted
        failures is still counted and no probe verdict of the round changed the circuit
        (else None: the caller folds what it counts onto the state read itself)."""
        noted = self.failures.get(resource_id, ())
        if resource_id not in self.read or resource_id in self.probed or len(noted) != counted:
            return None
        return self.states[resource_id]

    def resource(self, resource_id: str) -> ResourceKey | None:
        view = self.read.get(resource_id)
        return None if view is None else view.resource

    # -- folding the round's plans in ----------------------------------------------------

    def note_failure(self, snapshot: RouteSnapshot, failure: Classification, now: datetime) -> None:
        """A failure on the route's current candidate: the probe's verdict when the route
        was the probe, else counted against the circuit its scope names. A route planned
        twice in a round (it lost the fence and was re-planned) is folded in once."""
        if not self._first_note(snapshot.route_id):
            return
        if snapshot.probe_token is not None and snapshot.circuit is not None:
            verdict = _probe_verdict(failure, now)
            reset = trusted_reset(failure, now)
            self._verdict(snapshot.route_id, snapshot.circuit, snapshot.probe_token, verdict,
                          reset, now)  # fmt: skip
            return
        key = self.key_of(snapshot)
        if key is None:
            return  # no circuit
        # request scope gives no target: no shared resource is broken
        for target, min_models in failure_targets(key, failure.scope, failure.code):
            counted = Counted(failure, snapshot.route_id, key.model, min_models)
            resource_id = target.resource_id
            state = self.states.get(resource_id, CircuitState())
            self.states[resource_id] = fold(state, counted, now, self.binding.settings, resource_id)
            self.failures.setdefault(resource_id, []).append(counted)

    def note_success(self, snapshot: RouteSnapshot, now: datetime) -> None:
        if not self._first_note(snapshot.route_id):
            return
        if snapshot.probe_token is not None and snapshot.circuit is not None:
            self._verdict(snapshot.route_id, snapshot.circuit, snapshot.probe_token, True,
                          None, now)  # fmt: skip

    def _first_note(self, route_id: str) -> bool:
        if route_id in self._noted:
            return False
        self._noted.add(route_id)
        return True

    def _verdict(  # noqa: PLR0917 - one probe report, spelled out
        self,
        route_id: str,
        circuit: str,
        token: str,
        verdict: ProbeVerdict,
        reset: datetime | None,
        now: datetime,
    ) -> None:
        self.verdicts[route_id] = (verdict, reset)
        state = self.states.get(circuit)
        if state is None:
            return
        self.probed.add(circuit)
        if verdict is None:
            self.states[circuit] = machine.abandon_probe(state, token, now)
        else:
            self.states[circuit] = machine.record_probe_result(
                state, token, verdict, now, self.binding.settings, reset_at=reset, seed=circuit
            )

    # -- what the planner asks --------------------------------------------------------

    def blocking(self, key: ResourceKey | None, now: datetime) -> Park | None:
        """Where a decision on candidate `key` must wait, or None when it may dispatch."""
        if key is None:
            return None
        for resource_id, _ in covering(key):
            state = self.states.get(resource_id)
            if state is not None and state.status is not CircuitStatus.CLOSED:
                wake, margin = self._wake(resource_id, state, now)
                return Park(resource_id, wake, margin_s=margin)
        return None

    def gate(self, snapshot: RouteSnapshot, now: datetime) -> Gate:
        """What a due attempt of the route does now (module docstring)."""
        key = self.key_of(snapshot)
        park = self.blocking(key, now)
        if park is not None:
            granted = self.grants.get(snapshot.route_id)
            if granted is not None and granted[0] == park.circuit:
                return Probe(park.circuit, granted[1].owner_token)
            return park
        return self._unreleased(snapshot, now) or Dispatch()

    def _wake(self, resource_id: str, state: CircuitState, now: datetime) -> tuple[datetime, float]:
        """When asking for the circuit's probe can next succeed (at least min_park_s on),
        and how much later a parked route wakes by itself: the owner's margin, but after
        a cooling-down denial (the owner unreachable, or the circuit not yet due), when
        the route must ask again itself."""
        denial = self.denials.get(resource_id)
        lease = state.lease
        margin = self.binding.owner_wake_margin_s
        if denial is not None and denial.retry_at is not None:
            wake = denial.retry_at
            if denial.reason is DenialReason.COOLING_DOWN:
                margin = 0.0
        elif lease is not None:
            wake = lease.expires_at
        else:
            wake = state.open_until or now
        return max(wake, now + timedelta(seconds=self.binding.min_park_s)), margin

    def _unreleased(self, snapshot: RouteSnapshot, now: datetime) -> Park | None:
        """A route parked on a circuit that has closed since, yet never released in a
        wave: its slot in the waves the circuit's parked count would make, by hashed
        jitter (the same on every host); None when it may go now."""
        circuit = snapshot.circuit
        view = None if circuit is None else self.read.get(circuit)
        if view is None or snapshot.reason != REASON_PARKED or snapshot.probe_token:
            return None
        parked = view.parked
        if parked <= 1:
            return None
        waves = math.ceil(parked / wave_budget(parked, self.binding.wave_fraction))
        draw = hashed_jitter(f"{circuit}:{view.state.lease_epoch}", snapshot.route_id)
        offset = timedelta(seconds=draw * waves * self.binding.wave_interval_s)
        return Park(view.resource_id, now + offset, released=True)


def fold(
    state: CircuitState,
    counted: Counted,
    now: datetime,
    settings: CircuitSettings,
    resource_id: str,
) -> CircuitState:
    """`state` with one counted failure folded in (the reset jitter seeded by the circuit)."""
    return machine.record_failure(
        state, counted.failure, counted.route_id, now, settings, seed=resource_id,
        model=counted.model, min_models=counted.min_models,
    )  # fmt: skip


def _probe_verdict(failure: Classification, now: datetime) -> ProbeVerdict:
    """A qualifying failure fails the probe; a request-scope one (context length, content
    policy, invalid request) shows the resource answering; anything else (unclassified,
    transport loss, not a provider error) says nothing about the resource."""
    if severity(failure, now) is not Severity.IGNORED:
        return False
    if failure.scope is Scope.REQUEST:
        return True
    return None
