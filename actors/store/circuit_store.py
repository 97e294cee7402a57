"""The durable circuit store: shared circuits per provider resource, in Redis.

Plan in Python, fence in Lua. Each change reads the circuit hash (and its version), plans
the next state with the pure machine (circuits.machine), and applies it with
`lua/circuit_apply.lua` only if the version is still the one read; a lost race re-reads
and plans again (bounded). Taking the probe lease is additionally guarded in the script
(open-until passed, no unexpired lease), and a probe report by the live lease's owner
token only, so the lease is exclusive across every host and runtime on the same Redis and
a stale prober's late result changes nothing.

Time: every operation takes `now` from the caller's injected clock and the script compares
against that value, never Redis TIME. The pure machine and the Lua guards then judge the
same instant (a plan is never refused for a clock the planner did not see), and tests
drive expiry with a ManualClock. The price is that hosts sharing a Redis need synchronised
clocks (NTP): a host running s seconds ahead sees a lease expire s seconds early.

Redis failures raise CircuitStoreUnavailableError (a StoreUnavailableError); a lost race
repeated `max_attempts` times raises CircuitConflictError; neither wrote anything of the
call. redis-py's own retries are off (as in RouteStore) so nothing is resent silently.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final, Protocol, Self

from redis.asyncio import Redis
from redis.exceptions import RedisError

from actors.errors import InvalidCircuitInputError, InvalidIdentifierError, RecoveryError
from actors.keys import AttemptFence, KeySpace, valid_resource_id, valid_route_id
from actors.routes.circuit_models import (
    CircuitOverride,
    CircuitView,
    CloseCircuit,
    OverrideOutcome,
    ParkOutcome,
    aware,
    valid_failure,
    valid_resource,
)
from actors.store.circuit_batches import CircuitBatches
from actors.store.circuit_changes import Change, text, unavailable
from actors.store.circuit_codec import decode_resource, decode_view
from actors.store.pool import OwnsItsClient, bounded_client
from circuits import (
    CircuitSettings,
    CircuitState,
    CircuitStatus,
    FailureLike,
    ResourceKey,
    machine,
    operator_close,
    operator_open,
)
from policy.decisions import utc_iso

DEFAULT_MAX_CONNECTIONS: Final = 16
DEFAULT_TIMEOUT_S: Final = 5.0
READ_BATCH: Final = 500


class FailureBatch(Protocol):
    """Failures (failure, route id) to count on one circuit, in order; `models`: each
    one's (model, distinct models needed to open), as `record_failures` takes them (a
    route round's Failures is one: actors/engine/circuit_round.py)."""

    @property
    def resource(self) -> ResourceKey: ...

    @property
    def failures(self) -> Sequence[tuple[FailureLike, str]]: ...

    @property
    def models(self) -> Sequence[tuple[str | None, int]] | None: ...


@dataclass(frozen=True, slots=True)
class _Batch:
    resource: ResourceKey
    failures: Sequence[tuple[FailureLike, str]]
    models: Sequence[tuple[str | None, int]] | None


class CircuitStore(OwnsItsClient, CircuitBatches):
    """Async access to circuits in one Redis, under one key prefix. Reads and operator
    overrides live here; the fenced changes (record_failure, acquire_probe, report_probe,
    abandon_probe) come from CircuitChanges."""

    def __init__(
        self,
        client: Redis,
        *,
        keys: KeySpace | None = None,
        settings: CircuitSettings | None = None,
        owns_client: bool = False,
        **options: Any,
    ) -> None:
        super().__init__(client, keys or KeySpace(), settings or CircuitSettings(), **options)
        self._owns_client = owns_client

    @classmethod
    def connect(
        cls,
        url: str,
        *,
        keys: KeySpace | None = None,
        settings: CircuitSettings | None = None,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        **options: Any,
    ) -> Self:
        """A store with its own bounded, blocking pool (at most `max_connections` commands
        in flight; redis.asyncio opens one connection per in-flight command otherwise)."""
        client = bounded_client(url, max_connections=max_connections, timeout_s=timeout_s)
        return cls(client, keys=keys, settings=settings, owns_client=True, **options)

    def _own_client(self) -> Redis:
        return self.client

    # -- reads ----------------------------------------------------------------------------

    async def first_not_closed(self, resources: Sequence[ResourceKey]) -> CircuitView | None:
        """The first of `resources` whose circuit is open or half-open (None: all closed,
        dispatch may go ahead). Pass circuits.covering_keys(candidate), coarsest first."""
        for found in await self.views(resources):
            if found.status is not CircuitStatus.CLOSED:
                return found
        return None

    async def all_circuits(self) -> list[CircuitView]:
        """Every circuit ever written under the prefix, by label."""
        try:
            members = await self.client.smembers(self.keys.circuits)
        except RedisError as error:
            raise unavailable("all_circuits", error) from error
        ids = sorted(m for m in map(text, members) if _is_resource_id(m))
        found: list[CircuitView] = []
        for start in range(0, len(ids), READ_BATCH):
            batch = ids[start : start + READ_BATCH]
            raws = await self._read(batch, "all_circuits")
            for resource_id, (raw, parked) in zip(batch, raws, strict=True):
                if raw:  # an index member whose hash was deleted by hand is skipped
                    found.append(decode_view(decode_resource(resource_id, raw), raw, parked))
        return sorted(found, key=lambda v: (v.resource.label, v.resource_id))

    async def parked(self, resource: ResourceKey) -> list[str]:
        """The route ids parked on the circuit, first parked first."""
        key = self.keys.parked(valid_resource(resource).resource_id)
        try:
            members = await self.client.zrange(key, 0, -1)
        except RedisError as error:
            raise unavailable("parked", error) from error
        return [text(m) for m in members]

    async def dispatched(self, fences: Sequence[AttemptFence]) -> int:
        """How many of these attempts have a dispatch ledger: handed to the dispatcher
        (queued) or further. A paced release waits on it (actors/engine/paced_release.py)."""
        if not fences:
            return 0
        try:
            return int(await self.client.exists(*(self.keys.dispatch(f) for f in fences)))
        except RedisError as error:
            raise unavailable("dispatched", error) from error

    # -- parking --------------------------------------------------------------------------

    async def park(self, resource: ResourceKey, route_id: str, now: datetime) -> ParkOutcome:
        """Park `route_id` on an open or half-open circuit (release order = park order).
        A closed circuit refuses (`parked` False): the route may dispatch instead."""
        resource_id = valid_resource(resource).resource_id
        route_id = valid_route_id(route_id)
        score = repr(aware("now", now).timestamp())
        keys = [self.keys.circuit(resource_id), self.keys.parked(resource_id)]
        try:
            reply = await self.run_script(self.park_script, keys, [score, route_id])
        except RedisError as error:
            raise unavailable("park", error) from error
        done, status, version, count = reply
        return ParkOutcome(bool(done), CircuitStatus(text(status)), int(version), int(count))

    async def unpark(self, resource: ResourceKey, route_id: str) -> bool:
        """Forget a parked route (released, or it left its wait); True if it was parked."""
        key = self.keys.parked(valid_resource(resource).resource_id)
        try:
            removed = await self.client.zrem(key, valid_route_id(route_id))
        except RedisError as error:
            raise unavailable("unpark", error) from error
        return bool(removed)

    # -- batches (one route host round: actors/engine/circuit_effects.py) ------------------

    async def record_failures(
        self,
        resource: ResourceKey,
        failures: Sequence[tuple[FailureLike, str]],
        now: datetime,
        *,
        models: Sequence[tuple[str | None, int]] | None = None,
    ) -> CircuitView:
        """Count several (failure, route id) seen on `resource`, in order, as ONE change:
        the pure machine folds them all onto the state read and one compare-and-set
        writes the result (a burst of one outage's reports is one write, not one
        compare-and-set loop per report). Unchanged (nothing written) when none counts.
        `models` gives each failure's (model, distinct models needed to open), for a
        provider-wide circuit fed by its models' failures (circuits.failure_targets)."""
        now = aware("now", now)
        change = self._failures_change(_Batch(resource, failures, models), now)
        written, _, before = await self._change(
            resource, change.operation, now, lambda state: (change.plan(state), None)
        )
        return before if written is None else written.view

    async def record_failures_many(
        self, batches: Sequence[FailureBatch], now: datetime
    ) -> list[CircuitView | RecoveryError]:
        """`record_failures` for several circuits (a route round's): each its own
        compare-and-set, all of them read in one pipeline and written in another. Per
        batch: the circuit as written (or as read, when nothing counted), or why it was
        not written (CircuitConflictError, or its own script's error); a failure of Redis
        itself raises CircuitStoreUnavailableError."""
        now = aware("now", now)
        changes = [self._failures_change(batch, now) for batch in batches]
        return [
            found if isinstance(found, RecoveryError)
            else found[1] if found[0] is None else found[0].view
            for found in await self._change_many(changes, now)
        ]  # fmt: skip

    def _failures_change(self, batch: FailureBatch, now: datetime) -> Change:
        resource = valid_resource(batch.resource)
        checked = [(valid_failure(f), valid_route_id(route_id)) for f, route_id in batch.failures]
        models = batch.models
        how = list(models) if models is not None else [(None, 1)] * len(checked)
        if len(how) != len(checked):
            raise InvalidCircuitInputError("models", len(how), f"must give {len(checked)}")
        seed = resource.resource_id

        def plan(state: CircuitState) -> CircuitState:
            for (failure, route_id), (model, min_models) in zip(checked, how, strict=True):
                state = machine.record_failure(
                    state, failure, route_id, now, self.settings, seed=seed, model=model,
                    min_models=min_models,
                )  # fmt: skip
            return state

        return Change(resource, "record_failures", plan)

    async def park_many(
        self, resource: ResourceKey, route_ids: Sequence[str], now: datetime
    ) -> ParkOutcome:
        """Park several routes on an open or half-open circuit in one script (as `park`);
        a closed circuit refuses them all (`parked` False)."""
        resource_id = valid_resource(resource).resource_id
        members = [valid_route_id(route_id) for route_id in route_ids]
        score = repr(aware("now", now).timestamp())
        keys = [self.keys.circuit(resource_id), self.keys.parked(resource_id)]
        try:
            reply = await self.run_script(self.park_script, keys, [score, *members])
        except RedisError as error:
            raise unavailable("park_many", error) from error
        done, status, version, count = reply
        return ParkOutcome(bool(done), CircuitStatus(text(status)), int(version), int(count))

    async def unpark_many(
        self, parked: Sequence[tuple[ResourceKey, str]]
    ) -> list[tuple[ResourceKey, int]]:
        """Forget several parked (resource, route id) in one pipeline; each resource's
        parked count after it (what the parked gauge shows)."""
        by_resource: dict[str, tuple[ResourceKey, list[str]]] = {}
        for resource, route_id in parked:
            key = self.keys.parked(valid_resource(resource).resource_id)
            by_resource.setdefault(key, (resource, []))[1].append(valid_route_id(route_id))
        if not by_resource:
            return []
        try:
            async with self.client.pipeline(transaction=False) as pipe:
                for key, (_, members) in by_resource.items():
                    pipe.zrem(key, *members)
                    pipe.zcard(key)
                replies: list[Any] = await pipe.execute()
        except RedisError as error:
            raise unavailable("unpark_many", error) from error
        resources = [resource for resource, _ in by_resource.values()]
        return [(r, int(n)) for r, n in zip(resources, replies[1::2], strict=True)]

    # -- operator overrides (the circuit's owner applies them: actors/hosting/circuit_host.py)

    async def override(
        self, resource: ResourceKey, override: CircuitOverride, now: datetime
    ) -> OverrideOutcome:
        """Apply an operator's override (circuits/overrides.py) as one fenced change that
        records its event: open until `override.until` (InvalidCircuitInputError naming
        `until` when it is not after `now` or beyond max_open_s from it), or close, with
        the release plan of the routes parked at that moment, as a probe success has. An
        override that finds the circuit already so writes nothing (`changed` False)."""
        valid_resource(resource)
        now = aware("now", now)
        closing = isinstance(override, CloseCircuit)
        plan = self._override_plan(override, now)
        operation = "operator_close" if closing else "operator_open"
        written, _, before = await self._change(
            resource, operation, now, plan, parked=closing, always_event=True
        )
        if written is None:
            return OverrideOutcome(before, changed=False)
        release = self.release_of(written.parked, now, before) if closing else None
        return OverrideOutcome(written.view, True, written.event_id, release)

    def _override_plan(
        self, override: CircuitOverride, now: datetime
    ) -> Callable[[CircuitState], tuple[CircuitState, None]]:
        if isinstance(override, CloseCircuit):
            return lambda state: (operator_close(state), None)
        until = aware("until", override.until)
        longest = now + timedelta(seconds=self.settings.max_open_s)
        if until <= now:
            raise InvalidCircuitInputError(
                "until", utc_iso(until), f"must be after now ({utc_iso(now)})"
            )
        if until > longest:
            raise InvalidCircuitInputError(
                "until", utc_iso(until),
                f"must be within max_open_s ({self.settings.max_open_s:g} s) of now: "
                f"at most {utc_iso(longest)}",
            )  # fmt: skip
        return lambda state: (operator_open(state, until, now, self.settings), None)


def _is_resource_id(text: str) -> bool:
    try:
        valid_resource_id(text)
    except InvalidIdentifierError:
        return False  # not a member this store wrote; never turned into a key
    return True
