"""Fenced circuit changes: read, plan with the pure machine, compare-and-set in Lua.

The base of CircuitStore (actors/store/circuit_store.py documents the whole store). Every
change runs the same loop: read the circuit and its version, let the pure machine plan the
next state, and send it to `circuit_apply.lua` with the version read. A plan equal to the
stored state writes nothing. A refused compare-and-set (someone changed the circuit in
between, or a lease guard said no) writes nothing either; the loop reads again and plans
again, so the loser of a probe race sees the winner's lease and is denied. A change
that moves the circuit to another state (and every operator override) appends its event
to the circuit events stream in that same script: the stream is the circuits' state
history, never out of step with the hashes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, TypeVar

from redis.asyncio import Redis
from redis.exceptions import RedisError

from actors.errors import (
    CircuitConflictError,
    CircuitStoreUnavailableError,
)
from actors.keys import KeySpace, valid_route_id
from actors.routes.circuit_models import (
    CircuitView,
    ProbeOutcome,
    ReleaseSettings,
    aware,
    valid_failure,
    valid_holder,
    valid_resource,
    valid_token,
    valid_ttl,
)
from actors.store.circuit_codec import apply_request, decode_view, event_fields
from actors.store.route_store import DEFAULT_EVENTS_MAXLEN
from actors.store.scripts import LoadedScript, run_script
from circuits import (
    CircuitSettings,
    CircuitState,
    FailureLike,
    ProbeDenied,
    ProbeGrant,
    ReleasePlan,
    ResourceKey,
    machine,
    plan_release,
)

DEFAULT_MAX_ATTEMPTS: Final = 32
T = TypeVar("T")


def text(value: Any) -> str:
    """Replies are text with `decode_responses=True`; a client without it gives bytes."""
    return value.decode() if isinstance(value, bytes) else str(value)


def unavailable(operation: str, error: BaseException) -> CircuitStoreUnavailableError:
    detail = str(error) or type(error).__name__
    return CircuitStoreUnavailableError(operation, f"{type(error).__name__}: {detail}")


@dataclass(frozen=True, slots=True)
class Written:
    view: CircuitView
    parked: tuple[str, ...]
    event_id: str | None = None  # the change's event on the circuit events stream


@dataclass(frozen=True, slots=True)
class Change:
    """One circuit's change in a batch (`_change_many`): the next state from the one
    read, named `operation` in its event."""

    resource: ResourceKey
    operation: str
    plan: Callable[[CircuitState], CircuitState]


def written_view(
    before: CircuitView, after: CircuitState, reply: Any, now: datetime, *, with_parked: bool
) -> Written:
    """What an applied `circuit_apply.lua` wrote: the view planned from `before`."""
    parked = tuple(text(member) for member in reply[2])
    view = before.model_copy(
        update={
            "state": after,
            "version": int(reply[1]),
            "updated_at": now,
            "parked": len(parked) if with_parked else before.parked,
        }
    )
    return Written(view, parked, text(reply[3]) or None)


class CircuitChanges:
    def __init__(
        self,
        client: Redis,
        keys: KeySpace,
        settings: CircuitSettings,
        *,
        release: ReleaseSettings | None = None,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        events_maxlen: int = DEFAULT_EVENTS_MAXLEN,
    ) -> None:
        if max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {max_attempts}")
        if events_maxlen < 1:
            raise ValueError(f"events_maxlen must be >= 1, got {events_maxlen}")
        self.client = client
        self.keys = keys
        self.settings = settings
        self.release = release or ReleaseSettings()
        self.max_attempts = max_attempts
        self.events_maxlen = events_maxlen
        self.apply_script = LoadedScript.named("circuit_apply")
        self.park_script = LoadedScript.named("circuit_park")

    # -- reads the changes need -----------------------------------------------------------

    async def view(self, resource: ResourceKey) -> CircuitView:
        """One circuit as stored (closed at version 0 when never written)."""
        (found,) = await self.views([resource])
        return found

    async def views(self, resources: Sequence[ResourceKey]) -> list[CircuitView]:
        """Many circuits in one round trip (one pipeline), in the order asked."""
        checked = [valid_resource(r) for r in resources]
        raws = await self._read([r.resource_id for r in checked], "views")
        return [decode_view(r, raw, n) for r, (raw, n) in zip(checked, raws, strict=True)]

    async def _read(
        self, resource_ids: Sequence[str], operation: str
    ) -> list[tuple[dict[str, str], int]]:
        found: list[tuple[dict[str, str], int]] = []
        for read in await self._read_apart(resource_ids, operation):
            if isinstance(read, CircuitStoreUnavailableError):
                raise read
            found.append(read)
        return found

    async def _read_apart(
        self, resource_ids: Sequence[str], operation: str
    ) -> list[tuple[dict[str, str], int] | CircuitStoreUnavailableError]:
        """Each circuit's hash and parked count, in one pipeline; a circuit whose keys
        could not be read (a wrong type) has its error in its place. A failure of Redis
        itself raises."""
        if not resource_ids:
            return []
        try:
            async with self.client.pipeline(transaction=False) as pipe:
                for resource_id in resource_ids:
                    pipe.hgetall(self.keys.circuit(resource_id))
                    pipe.zcard(self.keys.parked(resource_id))
                replies: list[Any] = await pipe.execute(raise_on_error=False)
        except RedisError as error:
            raise unavailable(operation, error) from error
        found: list[tuple[dict[str, str], int] | CircuitStoreUnavailableError] = []
        for raw, parked in zip(replies[0::2], replies[1::2], strict=True):
            failed = next((r for r in (raw, parked) if isinstance(r, Exception)), None)
            if failed is not None:
                found.append(unavailable(operation, failed))
            else:
                found.append(({text(k): text(v) for k, v in raw.items()}, int(parked)))
        return found

    # -- changes --------------------------------------------------------------------------

    async def record_failure(
        self, resource: ResourceKey, failure: FailureLike, route_id: str, now: datetime
    ) -> CircuitView:
        """Count a failure `route_id` saw on `resource` (circuits.qualify decides whether
        and how it counts: hard-scope codes open at once, transient ones at the threshold).
        Returns the circuit after it; unchanged when the failure does not qualify."""
        valid_resource(resource)
        valid_route_id(route_id)
        valid_failure(failure)
        now = aware("now", now)

        def plan(state: CircuitState) -> tuple[CircuitState, None]:
            after = machine.record_failure(
                state, failure, route_id, now, self.settings, seed=resource.resource_id
            )
            return after, None

        written, _, before = await self._change(resource, "record_failure", now, plan)
        return before if written is None else written.view

    async def acquire_probe(
        self, resource: ResourceKey, holder: str, now: datetime, ttl_s: float
    ) -> ProbeGrant | ProbeDenied:
        """Take the probe lease when the circuit's open-until has passed and no unexpired
        lease exists: exactly one of any number of concurrent callers gets a grant (its
        owner token fences its report); the others are denied with the holder and when to
        ask again. The holder asking again gets its own lease back."""
        valid_resource(resource)
        holder = valid_holder(holder)
        ttl = valid_ttl(ttl_s)
        now = aware("now", now)

        def plan(state: CircuitState) -> tuple[CircuitState, ProbeGrant | ProbeDenied]:
            return machine.acquire_probe(state, holder, now, ttl)

        _, result, _ = await self._change(resource, "acquire_probe", now, plan, guard="acquire")
        return result

    async def report_probe(
        self,
        resource: ResourceKey,
        owner_token: str,
        success: bool,
        now: datetime,
        *,
        reset_at: datetime | None = None,
        jitter_seed: int | str | None = None,
    ) -> ProbeOutcome:
        """The probe's result, from the lease's owner. Success closes the circuit and
        returns the release plan of the routes parked at that moment (waves of at most
        max(1, 20 %) of them; the jitter seed defaults to one every host derives alike).
        Failure reopens it with the next backoff (or until `reset_at` if later). A report
        from anyone but the live lease's owner is ignored (`accepted` False)."""
        valid_resource(resource)
        owner_token = valid_token(owner_token)
        now = aware("now", now)
        reset = None if reset_at is None else aware("reset_at", reset_at)

        def plan(state: CircuitState) -> tuple[CircuitState, None]:
            after = machine.record_probe_result(
                state, owner_token, success, now, self.settings, reset_at=reset,
                seed=resource.resource_id,
            )  # fmt: skip
            return after, None

        written, _, before = await self._change(
            resource, "report_probe", now, plan, guard="owner", token=owner_token, parked=success
        )
        if written is None:
            return ProbeOutcome(accepted=False, view=before)
        if not success:
            return ProbeOutcome(accepted=True, view=written.view)
        release = self.release_of(written.parked, now, before, jitter_seed=jitter_seed)
        return ProbeOutcome(accepted=True, view=written.view, release=release)

    def release_of(
        self,
        parked: Sequence[str],
        now: datetime,
        view: CircuitView,
        *,
        jitter_seed: int | str | None = None,
    ) -> ReleasePlan:
        """The release plan of a closed circuit's `parked` routes (parked order) from
        `now`, in this store's waves; the jitter seed defaults to one every host derives
        alike from `view` (the circuit as the close found it)."""
        seed = jitter_seed if jitter_seed is not None else self.release_seed(view)
        return plan_release(
            parked, now, seed=seed, wave_fraction=self.release.wave_fraction,
            wave_interval=self.release.wave_interval,
            jitter_fraction=self.release.jitter_fraction, headroom=self.release.headroom,
        )  # fmt: skip

    async def abandon_probe(
        self, resource: ResourceKey, owner_token: str, now: datetime
    ) -> CircuitView:
        """The holder will not probe after all: the lease ends now and the next caller may
        take it. Ignored (the circuit comes back unchanged) from anyone but the owner."""
        valid_resource(resource)
        owner_token = valid_token(owner_token)
        now = aware("now", now)

        def plan(state: CircuitState) -> tuple[CircuitState, None]:
            return machine.abandon_probe(state, owner_token, now), None

        written, _, before = await self._change(
            resource, "abandon_probe", now, plan, guard="owner", token=owner_token
        )
        return before if written is None else written.view

    # -- the compare-and-set loop ---------------------------------------------------------

    async def _change(
        self,
        resource: ResourceKey,
        operation: str,
        now: datetime,
        plan: Callable[[CircuitState], tuple[CircuitState, T]],
        *,
        guard: str = "",
        token: str = "",
        parked: bool = False,
        always_event: bool = False,
    ) -> tuple[Written | None, T, CircuitView]:
        """(what was written or None, the plan's result, the view it was planned from).
        A change of state, or any change with `always_event`, appends its event (cause:
        `operation`) in the same script."""
        for _ in range(self.max_attempts):
            before = await self.view(resource)
            after, result = plan(before.state)
            if after == before.state:
                return None, result, before
            request = self._request(
                resource, operation, before, after, now, guard=guard, token=token,
                parked=parked, always_event=always_event,
            )  # fmt: skip
            written = await self._apply(
                before, after, request, now=now, operation=operation, with_parked=parked
            )
            if written is not None:
                return written, result, before
        raise CircuitConflictError(resource.resource_id, operation, self.max_attempts)

    def _request(
        self,
        resource: ResourceKey,
        operation: str,
        before: CircuitView,
        after: CircuitState,
        now: datetime,
        *,
        guard: str = "",
        token: str = "",
        parked: bool = False,
        always_event: bool = False,
    ) -> str:
        """The compare-and-set from `before` to `after`, with its event (cause:
        `operation`) when the status moves, or always with `always_event`."""
        event = None
        if always_event or after.status is not before.status:
            event = event_fields(resource, before.state, after, operation, now)
        return apply_request(
            resource, before.version, after, now, guard=guard, token=token, parked=parked,
            event=event, maxlen=self.events_maxlen,
        )  # fmt: skip

    def _apply_keys(self, resource_id: str) -> list[str]:
        return [
            self.keys.circuit(resource_id),
            self.keys.circuits,
            self.keys.parked(resource_id),
            self.keys.circuit_events,
        ]

    async def _apply(
        self,
        before: CircuitView,
        after: CircuitState,
        request: str,
        *,
        now: datetime,
        operation: str,
        with_parked: bool,
    ) -> Written | None:
        keys = self._apply_keys(before.resource_id)
        try:
            reply = await self.run_script(self.apply_script, keys, [request])
        except RedisError as error:
            raise unavailable(operation, error) from error
        if int(reply[0]) != 1:
            return None  # stale version or a lease guard: nothing was written
        return written_view(before, after, reply, now, with_parked=with_parked)

    async def run_script(self, loaded: LoadedScript, keys: list[str], argv: list[str]) -> Any:
        return await run_script(self.client, loaded, keys, argv)

    @staticmethod
    def release_seed(before: CircuitView) -> str:
        """One seed per close, the same on every host: resource and lease number."""
        return f"{before.resource_id}:{before.state.lease_epoch}"
