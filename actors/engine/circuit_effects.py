"""The circuit side of a route round (actors/engine/batch.py): what is read before the
round is planned, and what is written after its route transitions are durable.

Before planning (`prepare`), one pipeline reads the circuits covering the candidates of
the round's routes that can meet one (a report, a due attempt, a route that is parked or
probing), and for a command that may choose a candidate (a failure report may skip, a
skip-now, a start, a start fresh) those of every candidate it may choose
(actors/routes/eligibility.py). Then, for each circuit whose probe is due (open past
its open-until, or a probe lease expired) and that a due attempt of the round waits on,
the first such attempt asks for the probe lease (the store's Lua guard makes it
exclusive across every host and runtime): a grant makes that attempt the probe, a denial
(another host holds it) parks the others until its `retry_at`. A start (or start fresh)
does the same for the first of its candidates that is not closed, whose probe is due and
that comes before any closed one: an expired circuit is probed by the next route that
could use it, not only by a route already parked on it. Both go into the CircuitBoard the
round plans with; planning stays pure.

After the round's transitions are applied (`settle`), they become ONE CircuitRound
(actors/engine/circuit_round.py) sent to the circuits' owner (`port`): a circuit host when
route hosts run under Ray (actors/hosting/circuit_client.py: one Ray call per circuit host
per round, sent after the round is answered, in order per circuit, and waited for by the
next `prepare` that reads its circuits: actors/engine/circuit_sends.py), else this
process (LocalCircuits, before the answer). The owner applies it in this order:
1. probe verdicts: a route that held a probe lease and whose transition ended it reports
   it (success closes the circuit and plans its release; failure reopens it with the next
   backoff; no verdict - a stop, close, skip, or a failure that says nothing about the
   resource - abandons it); a lease the round took for an attempt whose transition did
   not apply is abandoned;
2. the round's failures, per circuit, as ONE compare-and-set (`record_failures`),
   skipped here when the pure machine says they change nothing (an open circuit);
3. parking: the routes newly waiting on a circuit join its parked set (one script per
   circuit); routes that left their wait leave it (one pipeline);
4. release: a circuit host tells each parked route's own route host to give its routes
   their wave slots; a local owner hands the plan back to the batch runner, which gives
   each parked route its slot as its deadline with a ReleaseParked command of its own
   batch (their locks, their fences) once the round holds no lock; `on_released` then
   sees them (a route host arms their timers).
What the owner could not write comes back and is sent again in the background
(actors/engine/redelivery.py), never only logged; it is never an item's error: the route
transitions it follows are already durable.

Crash windows (the process dies between the route write and these effects): a failure
not counted leaves the circuit under-counted (the next reports count); a parked route
whose park entry is missing still re-checks the circuit at its deadline, and if the
circuit closed meanwhile it takes a hashed slot in the waves (actors/routes/circuit_board.py)
rather than dispatching with every other route; a stale park entry is harmless (its
release transition finds the route moved on and writes nothing); an unreported probe
lease expires after its TTL and exactly one caller takes the next one; a circuit host
that restarts releases again what its closed circuits still hold parked. Releases are
idempotent: they are fenced route transitions.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any

from actors.engine.circuit_probes import take_probes
from actors.engine.circuit_round import (
    CircuitObserver,
    CircuitPort,
    CircuitRound,
    Failures,
    LocalCircuits,
    Parking,
    Release,
    Verdict,
)
from actors.engine.circuit_sends import OrderedSends
from actors.engine.redelivery import Redelivery
from actors.routes.circuit_board import (
    REASON_RELEASED,
    CircuitBinding,
    CircuitBoard,
    candidate_key,
    covering,
    fold,
)
from actors.routes.commands import (
    FireDue,
    ProbeParked,
    ReleaseParked,
    ReportFailure,
    ReportSuccess,
    RetryNow,
    ReturnUnsent,
    RouteCommand,
    RouteContext,
    SettleDispatch,
    SkipNow,
)
from actors.routes.eligibility import candidate_resources
from actors.routes.models import WAITING_STATES, RouteSnapshot
from actors.routes.profile_board import ProfileBoard
from actors.routes.profiles import RouteProfile
from actors.routes.stored_profiles import choosing_profile
from actors.store.circuit_store import CircuitStore
from circuits import ResourceKey

__all__ = ["CircuitEffects", "CircuitObserver", "Release"]

Outcome = RouteSnapshot | Exception
Items = Sequence[tuple[str, RouteCommand]]
_Choosable = dict[tuple[int, frozenset[str]], tuple[RouteProfile, dict[str, ResourceKey]]]


class CircuitEffects:
    def __init__(
        self,
        circuits: CircuitStore,
        binding: CircuitBinding,
        *,
        port: CircuitPort | None = None,
        observer: CircuitObserver | None = None,
        on_released: Callable[[Sequence[RouteSnapshot]], None] | None = None,
    ) -> None:
        """Effects reading `circuits` and writing through `port`, the circuits' owner
        (None: this process, straight to `circuits`, with `observer` seeing the writes)."""
        self.circuits = circuits
        self.binding = binding
        self.observer = observer
        self.port: CircuitPort = port or LocalCircuits(circuits, observer)
        self.on_released = on_released
        self.release_runner: Callable[[Sequence[Release]], Awaitable[Any]] | None = None
        self._redelivery: Redelivery | None = None
        self._sends: OrderedSends | None = None

    @property
    def sends(self) -> OrderedSends:
        """This process's rounds on their way to a remote owner (made on first use)."""
        if self._sends is None:
            self._sends = OrderedSends(self.deliver, self.redelivery.add)
        return self._sends

    @property
    def redelivery(self) -> Redelivery:
        """The resender of this process's undelivered circuit writes (made on first use,
        on the running loop)."""
        if self._redelivery is None:
            self._redelivery = Redelivery(self.port, on_releases=self._run_releases)
        return self._redelivery

    async def _run_releases(self, releases: Sequence[Release]) -> None:
        if self.release_runner is not None:
            await self.release_runner(releases)

    # -- before planning --------------------------------------------------------------

    async def prepare(
        self,
        items: Items,
        snapshots: Sequence[RouteSnapshot],
        now: datetime,
        profiles: ProfileBoard | None = None,
    ) -> CircuitBoard:
        """The round's board: its circuits read in one pipeline, its probe leases taken.
        `profiles`: the stored profiles the round's routes follow (their current versions
        are what a start or a skip chooses from). A Redis error raises (the round's items
        fail with it: nothing was written)."""
        wanted: dict[str, ResourceKey] = {}
        choosing: _Choosable = {}
        for (_, command), snapshot in zip(items, snapshots, strict=True):
            if isinstance(command, ReleaseParked):
                continue  # a wave slot for a parked route: planned without the circuits
            meets = isinstance(
                command,
                ReportFailure | ReportSuccess | FireDue | ProbeParked | RetryNow | ReturnUnsent,
            )
            if meets or snapshot.circuit or snapshot.probe_token:
                key = candidate_key(snapshot, self.binding)
                if key is not None:
                    wanted.update(covering(key))
            wanted.update(self._choosable(command, snapshot, choosing, profiles))
        if self._sends is not None:  # this process's earlier reports counted first
            await self._sends.landed(wanted)
        views = await self.circuits.views(list(wanted.values())) if wanted else []
        board = CircuitBoard(self.binding, views)
        await take_probes(
            self.port, board, items, snapshots, now, self.binding.probe_ttl_s, profiles=profiles
        )
        return board

    def _choosable(
        self,
        command: RouteCommand,
        snapshot: RouteSnapshot,
        seen: _Choosable,
        profiles: ProfileBoard | None,
    ) -> dict[str, ResourceKey]:
        """The circuits of the candidates a command may choose among (a failure may skip,
        a skip-now does, a start picks one): read with the round's, so the choice sees
        them. `seen` keeps them per profile and exclusion set (a round's routes mostly
        share one parsed profile); it holds the profile, so its id stays its own."""
        profile = choosing_profile(command, snapshot, profiles)
        if profile is None:
            return {}  # it chooses nothing, or the planner refuses or stops it
        excluded: frozenset[str] = frozenset()
        if isinstance(command, ReportFailure | SkipNow):
            excluded = frozenset(snapshot.cycle.skipped)
        found = seen.get((id(profile), excluded))
        if found is None:
            found = seen[(id(profile), excluded)] = (
                profile, candidate_resources(self.binding, profile, excluded),
            )  # fmt: skip
        return found[1]

    async def abandon_unsent(self, snapshot: RouteSnapshot, now: datetime) -> None:
        """The route's attempt held its circuit's probe lease and was never sent: end the
        lease now, before the attempt is re-planned, so the next caller can probe (else it
        would wait out the TTL with no probe running). Sent again when undelivered."""
        if snapshot.probe_token is None or snapshot.circuit is None:
            return
        key = candidate_key(snapshot, self.binding)
        resources = dict(covering(key)) if key is not None else {}
        resource = resources.get(snapshot.circuit)
        if resource is None:
            return
        await self.send(CircuitRound(now, (Verdict(resource, snapshot.probe_token, None),)))

    # -- after the transitions are durable --------------------------------------------

    async def settle(
        self,
        board: CircuitBoard,
        items: Items,
        before: Sequence[RouteSnapshot],
        outcomes: Sequence[Outcome],
        context: RouteContext,
    ) -> list[Release]:
        """Write the round's circuit side effects (module docstring) as one CircuitRound
        to the circuits' owner; never raises. What could not be delivered is sent again
        in the background. The releases its probe successes planned when this process
        is the releaser, for the batch runner to apply once the round's route locks are
        free (a released route may be one of the round's)."""
        route_ids = [route_id for route_id, _ in items]
        after = {
            route_id: outcome
            for route_id, outcome, old in zip(route_ids, outcomes, before, strict=True)
            if isinstance(outcome, RouteSnapshot) and outcome is not old
        }
        kept = {
            route_id
            for route_id, command in items
            if isinstance(command, SettleDispatch) and command.keep_probe_lease
        }
        round_ = CircuitRound(
            context.now,
            verdicts=tuple(self._verdicts(board, before, after, kept)),
            failures=tuple(self._failures(board, after, context.now)),
            **self._parking(board, before, after),
        )
        return await self.send(round_)

    async def send(self, round_: CircuitRound) -> list[Release]:
        """`round_` to the circuits' owner: a remote one's after this round is answered,
        in order per circuit (actors/engine/circuit_sends.py); a local one's now, with
        the releases it planned."""
        if self.port.remote:
            await self.sends.post(round_)
            return []
        return await self.deliver(round_)

    async def deliver(self, round_: CircuitRound) -> list[Release]:
        """Send `round_` to the circuits' owner; its undelivered rest is sent again."""
        if not round_:
            return []
        applied = await self.port.apply_round(round_)
        if applied.undelivered is not None:
            self.redelivery.add(applied.undelivered)
        return list(applied.releases)

    def _verdicts(
        self,
        board: CircuitBoard,
        before: Sequence[RouteSnapshot],
        after: dict[str, RouteSnapshot],
        kept: set[str],
    ) -> list[Verdict]:
        """Each probe the round ended gives its verdict (or its lease up), but those in
        `kept`, whose lease runs to its TTL; and every lease the round took for an
        attempt whose transition did not keep it is given up."""
        verdicts: list[Verdict] = []
        for old in before:
            new = after.get(old.route_id)
            if old.probe_token is None or old.circuit is None or new is None:
                continue
            if old.route_id in kept or new.probe_token == old.probe_token:
                continue
            resource = board.resource(old.circuit)
            if resource is not None:
                verdict, reset = board.verdicts.get(old.route_id, (None, None))
                verdicts.append(Verdict(resource, old.probe_token, verdict, reset))
        for route_id, (circuit, grant) in board.grants.items():
            taken = after.get(route_id)
            resource = board.resource(circuit)
            if resource is not None and (taken is None or taken.probe_token != grant.owner_token):
                verdicts.append(Verdict(resource, grant.owner_token, None))
        return verdicts

    def _failures(
        self, board: CircuitBoard, after: dict[str, RouteSnapshot], now: datetime
    ) -> list[Failures]:
        found: list[Failures] = []
        for resource_id, noted in board.failures.items():
            counted = [entry for entry in noted if entry.route_id in after]
            view = board.read.get(resource_id)
            if view is None or not counted:
                continue
            # Folded once already, while the round was planned, unless some failure's
            # transition was not written or a probe verdict changed the circuit since.
            folded = board.failures_folded(resource_id, len(counted))
            if folded is None:
                folded = view.state
                for entry in counted:
                    folded = fold(folded, entry, now, self.binding.settings, resource_id)
            if folded == view.state:
                continue  # already open (or nothing counts): no write on a hot circuit
            found.append(
                Failures(
                    view.resource,
                    tuple((entry.failure, entry.route_id) for entry in counted),
                    tuple((entry.model, entry.min_models) for entry in counted),
                    view.status,
                )
            )
        return found

    def _parking(
        self,
        board: CircuitBoard,
        before: Sequence[RouteSnapshot],
        after: dict[str, RouteSnapshot],
    ) -> dict[str, Any]:
        """The routes that now wait on a circuit's release and were not in its parked set,
        and those in a parked set that no longer wait on that circuit's release. A
        released route (its wave slot set) is in no parked set: the circuit's next close
        must not release it again."""
        parking: dict[str, list[str]] = {}
        leaving: list[tuple[ResourceKey, str]] = []
        for old in before:
            new = after.get(old.route_id)
            if new is None:
                continue
            was_parked, parked = _parked_on(old), _parked_on(new)
            if parked is not None and parked != was_parked:
                parking.setdefault(parked, []).append(new.route_id)
            resource = None if was_parked is None else board.resource(was_parked)
            if resource is not None and parked != was_parked:
                leaving.append((resource, old.route_id))
        parks = [
            Parking(resource, tuple(route_ids))
            for circuit, route_ids in parking.items()
            if (resource := board.resource(circuit)) is not None
        ]
        return {"parks": tuple(parks), "unparks": tuple(leaving)}

    def release_commands(self, release: Release) -> list[tuple[str, ReleaseParked]]:
        """A release plan as route commands, in slot order: each route still parked on the
        circuit when its command is applied (the runner reads it under its lock) gets its
        wave slot as its deadline; one that moved on meanwhile is left alone."""
        resource, plan_ = release
        circuit = resource.resource_id
        return [(slot.route_id, ReleaseParked(circuit, slot.release_at)) for slot in plan_.slots]

    async def released(
        self, resource: ResourceKey, snapshots: Sequence[RouteSnapshot], now: datetime
    ) -> None:
        """The routes a release moved: counted, seen by `on_released` (a route host arms
        their timers), and no longer parked (their slot is set: the circuit's next close
        must not release them again; one that parks again joins the set again)."""
        if self.observer is not None:
            self.observer.released(len(snapshots))
        if self.on_released is not None and snapshots:
            self.on_released(snapshots)
        unparks = tuple((resource, snapshot.route_id) for snapshot in snapshots)
        await self.deliver(CircuitRound(now, unparks=unparks))


def _parked_on(snapshot: RouteSnapshot) -> str | None:
    """The circuit whose parked set holds the route: it waits on the circuit and has no
    wave slot yet."""
    if snapshot.state not in WAITING_STATES or snapshot.reason == REASON_RELEASED:
        return None
    return snapshot.circuit
