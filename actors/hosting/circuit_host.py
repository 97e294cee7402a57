"""`CircuitHost`: an async Ray actor hosting the logical circuit actors hashed to it.

One logical circuit actor per provider resource (provider, model, credential binding) is
the single owner of that circuit's transitions; circuits are hashed onto a small pool of
circuit hosts by resource id (actors/hosting/names.py), as routes are onto route hosts.
A host:
- folds the failures route hosts report, takes probe verdicts and parks or unparks
  routes: each route round is ONE `apply_round` call per circuit host
  (actors/hosting/circuit_client.py), applied with the store's fenced Lua;
- grants the one probe lease of a circuit (`acquire_probe`); the Lua lease stays the
  fence across host restarts and every process of the installation;
- wakes one parked route of each open circuit at its probe time (`RouteHost.wake_probe`,
  actors/engine/probe_waker.py), so the other parked routes sleep through the probe;
- owns the release: when a probe success closes a circuit, it releases the parked
  routes one wave at a time (actors/engine/paced_release.py): each wave is planned once
  the previous one's routes were handed to the dispatcher, at the pace observed and never
  faster than the budget; it cuts each wave by the route host that owns each route and
  tells each route host which of its routes to arm and when (`RouteHost.arm_release`); a
  delivery that fails is sent again with capped exponential delays until it is taken or
  its slots are long past.
- takes an operator's overrides (`override`: open until a time, or close; reached by
  actors/hosting/circuit_handle.py): the same fenced write, recorded on the circuit events
  stream, and a close releases the parked routes exactly as a probe success does.

Redis stays the truth: the host keeps nothing a restart would lose. On every start
(including restarts by Ray, `max_restarts=-1`) it reads the circuits it owns, publishes
their states, watches those not closed for their probe time, and releases the routes
its closed circuits still hold parked (a release cut short by a crash goes on with the
routes not yet given a slot; releases are fenced route transitions, so one already given
changes nothing). Its metrics are the circuit metrics
of actors/hosting/metrics.py.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, Final

import ray

from actors.clock import Clock, SystemClock
from actors.engine.circuit_round import CircuitRound, LocalCircuits, Release
from actors.engine.paced_release import PacedRelease
from actors.engine.probe_waker import ProbeWaker
from actors.engine.settings import EngineSettings
from actors.errors import RecoveryError, error_text
from actors.hosting.metrics import circuit_metrics
from actors.hosting.names import NAMESPACE, Owners, host_name
from actors.keys import AttemptFence
from actors.routes.circuit_models import CircuitOverride, CircuitView, OverrideOutcome
from actors.store.circuit_store import CircuitStore
from circuits import CircuitStatus, ProbeDenied, ProbeGrant, ReleasePlan, ResourceKey

DELIVERY_FIRST_DELAY_S: Final = 0.05
DELIVERY_MAX_DELAY_S: Final = 5.0
# A release is sent until it is taken or this long after its last slot: a route still
# parked then re-checks the circuit at its own deadline.
DELIVERY_GRACE_S: Final = 300.0
REHYDRATE_RETRY_S: Final = 1.0
STORE_CONNECTIONS: Final = 8

log = logging.getLogger(__name__)


class CircuitHost:
    def __init__(
        self,
        index: int,
        redis_url: str,
        settings: EngineSettings,
        *,
        route_hosts: int,
        virtual_nodes: int,
        clock: Clock | None = None,
    ) -> None:
        """Circuit host `index` of the installation of `settings`, whose routes are hashed
        onto `route_hosts` route hosts with `virtual_nodes` points each."""
        self.index = index
        self.settings = settings
        self._clock = clock or SystemClock()
        self._prefix = settings.key_prefix
        binding = settings.circuit_binding()
        self._store = CircuitStore.connect(
            redis_url, keys=settings.keys, settings=binding.settings,
            max_connections=STORE_CONNECTIONS, events_maxlen=settings.events_maxlen,
        )  # fmt: skip
        self._metrics = circuit_metrics()
        self._circuits = LocalCircuits(self._store, self._metrics)
        self._route_owners = Owners(route_hosts, kind="route", virtual_nodes=virtual_nodes)
        self._owners = Owners(settings.circuit_hosts, kind="circuit")
        self._route_hosts: dict[int, Any] = {}
        self.delivered = 0  # route-host deliveries taken (tests wait on it)
        self._waker = ProbeWaker(self._store, self._clock, self._wake_probe)
        self._releases = PacedRelease(self._store, self._clock, self._deliver_wave)
        self._ready = asyncio.get_running_loop().create_task(self._rehydrate())

    # -- lifecycle and introspection -----------------------------------------------------

    async def ready(self) -> int:
        """Wait for rehydration; the number of circuits this host owns."""
        return await self._ready

    async def process_id(self) -> int:
        return os.getpid()

    async def settings_digest(self) -> tuple[dict[str, Any], str]:
        """The settings this host writes with, without the key, and the key's digest."""
        return self.settings.public(), self.settings.key_digest()

    async def deliveries(self) -> tuple[int, int]:
        """(release deliveries taken by route hosts, releases still running)."""
        return self.delivered, len(self._releases)

    async def release_waves(self) -> tuple[int, int]:
        """(release waves delivered, releases running)."""
        return self._releases.waves, len(self._releases)

    async def probe_wakes(self) -> tuple[int, int]:
        """(parked routes woken for a probe, circuits watched for their probe time)."""
        return self._waker.woken, len(self._waker)

    async def aclose(self) -> None:
        self._waker.close()
        self._releases.close()
        await self._store.aclose()

    # -- the circuits' transitions -------------------------------------------------------

    async def acquire_probe(
        self, resource: ResourceKey, holder: str, now: datetime, ttl_s: float
    ) -> ProbeGrant | ProbeDenied:
        """The probe lease of `resource` for `holder` (exclusive: the Lua lease fences it)."""
        await self._ready
        return await self._circuits.acquire_probe(resource, holder, now, ttl_s)

    async def apply_round(self, round_: CircuitRound) -> CircuitRound | None:
        """Apply a route round's circuit writes; the part not written (the route host
        sends it again). The releases its probe successes planned are delivered from
        here, in the background (a route host may be waiting on this call)."""
        await self._ready
        applied = await self._circuits.apply_round(round_)
        for resource, _ in applied.releases:  # closed: its release is paced from here
            self._releases.start(resource)
        for verdict in round_.verdicts:
            self._waker.watch(verdict.resource)
        for failures in round_.failures:
            self._waker.watch(failures.resource)
        for parking in round_.parks:
            self._waker.watch(parking.resource, if_new=True)
        return applied.undelivered

    async def override(
        self, resource: ResourceKey, override: CircuitOverride
    ) -> OverrideOutcome | RecoveryError:
        """An operator's override of `resource`'s circuit (open until a time, or close),
        applied now by this host's clock with the store's fenced write, which records
        its event. A close releases the routes parked then, as a probe success does (the
        delivery goes on in the background). A refusal is the answer, as a value (the
        circuit handle raises it): InvalidCircuitInputError for an `until` not after now
        or beyond max_open_s, StoreUnavailableError when Redis failed (nothing written)."""
        await self._ready
        try:
            outcome = await self._store.override(resource, override, self._clock.now())
        except RecoveryError as error:
            return error
        if outcome.changed:
            self._metrics.state_change(outcome.view.status.value, resource.label)
            log.info(
                "circuit %s overridden by an operator: %s (event %s)",
                resource.label, outcome.view.status.value, outcome.event_id,
            )  # fmt: skip
        if outcome.release is not None and outcome.release.slots:
            self._releases.start(resource)
        self._waker.watch(resource)  # a new probe time, or closed: no longer watched
        return outcome

    # -- probe wakes -----------------------------------------------------------------------

    async def _wake_probe(self, resource: ResourceKey, route_id: str) -> bool:
        """Ask the route's own host to wake it for the circuit's probe; False when it did
        not take the lease or could not be asked (the waker tries the next route)."""
        index = self._route_owners.index_of(route_id)
        self._metrics.probe("woken")
        try:
            took: bool = await self._route_host(index).wake_probe.remote(
                resource.resource_id, route_id
            )
        except Exception as error:  # Ray's or the route host's: another route is woken
            self._route_hosts.pop(index, None)
            log.warning(
                "probe wake of %s on route host %s not taken: %s",
                route_id, index, type(error).__name__,
            )  # fmt: skip
            return False
        return took

    # -- releases --------------------------------------------------------------------------

    async def _deliver_wave(self, resource: ResourceKey, plan: ReleasePlan) -> list[AttemptFence]:
        """Tell each route's own route host which of its routes to arm, and when; the
        attempts of the routes moved (a host's part given up on counts none)."""
        by_host: dict[int, list[Any]] = defaultdict(list)
        for slot in plan.slots:
            by_host[self._route_owners.index_of(slot.route_id)].append(slot)
        last = max((slot.release_at for slot in plan.slots), default=self._clock.now())
        give_up = last + timedelta(seconds=DELIVERY_GRACE_S)
        parts = [
            (host, (resource, ReleasePlan(budget=plan.budget, waves=(tuple(slots),))))
            for host, slots in by_host.items()
        ]
        sent = await asyncio.gather(*(self._send(host, part, give_up) for host, part in parts))
        return [fence for fences in sent for fence in fences]

    async def _send(self, host: int, release: Release, give_up: datetime) -> Sequence[AttemptFence]:
        delay = DELIVERY_FIRST_DELAY_S
        while True:
            try:
                moved: Sequence[AttemptFence] = await self._route_host(host).arm_release.remote(
                    release
                )
            except Exception as error:  # Ray's or the route host's: send it again
                self._route_hosts.pop(host, None)  # the keeper may have recreated it
                if self._clock.now() >= give_up:
                    log.error(
                        "release of circuit %s to route host %s given up: %s",
                        release[0].label, host, error_text(error),
                    )  # fmt: skip
                    return ()
                log.warning(
                    "release of circuit %s to route host %s not taken (sent again): %s",
                    release[0].label, host, type(error).__name__,
                )  # fmt: skip
                await asyncio.sleep(delay)
                delay = min(DELIVERY_MAX_DELAY_S, delay * 2)
                continue
            self.delivered += 1
            return moved

    def _route_host(self, index: int) -> Any:
        found = self._route_hosts.get(index)
        if found is None:
            name = host_name(self._prefix, index)
            found = self._route_hosts[index] = ray.get_actor(name, namespace=NAMESPACE)
        return found

    # -- rehydration -----------------------------------------------------------------------

    async def _rehydrate(self) -> int:
        while True:
            try:
                views = await self._store.all_circuits()
                break
            except RecoveryError as error:  # Redis not reachable yet
                log.warning(
                    "circuit host %s cannot rehydrate yet: %s", self.index, error_text(error)
                )
                await asyncio.sleep(REHYDRATE_RETRY_S)
        owned = [v for v in views if self._owners.index_of(v.resource_id) == self.index]
        for view in owned:
            self._metrics.state(view.status.value, view.resource.label)
            self._metrics.parked(view.resource.label, view.parked)
            if view.status is not CircuitStatus.CLOSED:
                self._waker.watch(view.resource)
        for view in owned:
            if view.status is CircuitStatus.CLOSED and view.parked:
                await self._release_again(view)
        log.info("circuit host %s rehydrated %d circuits", self.index, len(owned))
        return len(owned)

    async def _release_again(self, view: CircuitView) -> None:
        """A closed circuit still holding parked routes: their release may have been cut
        short with the previous host; it goes on from now (fenced: a route released
        already or moved on is left alone)."""
        self._releases.start(view.resource)
