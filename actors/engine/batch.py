"""The one write path of the route service: a batch of route commands, planned from
snapshots read in one round trip and applied as one pipeline.

A single call is a batch of one. A batch is cut into rounds so that a route appears at
most once per round, in the order its commands were given: round k holds the k-th
command of every route that has one. For each round the runner holds the locks of its
routes (taken in sorted order, so two batches never deadlock), reads their snapshots in
one pipeline, plans every command with one clock reading, and applies the planned
transitions as one RouteStore.apply_many pipeline. A skip that left a route `switching`
is completed the same way (one more pipeline for every such route). With circuits, the
round's circuits are read (one pipeline) and its probe leases taken between the read and
the plan, and the circuit side effects follow the durable transitions. With a profile store, the
stored profiles the round's routes follow (or its starts name) are read before the
circuits, in one pipeline, and planned with (actors/routes/stored_profiles.py); a round
with none reads nothing more.

Outcomes are per item: the applied (or, for a command with nothing to do, the current)
snapshot, or the exception that item raised — a typed rejection, an invalid command, a
Redis failure. One item's error never fails another. A timer's `FireDue` never yields a
rejection: when another writer won, the item is the route as it now is.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Final

from actors.engine.circuit_effects import CircuitEffects, Release
from actors.engine.classifier import RoundClassifier
from actors.engine.notice_lifecycle import Committed
from actors.engine.requests import Outcome, answer_replays, record_unchanged, request_record
from actors.engine.route_locks import RouteLocks
from actors.errors import (
    CorruptRouteError,
    InvalidRouteIdError,
    RecoveryError,
    StoreUnavailableError,
    TransitionRejectedError,
    error_text,
)
from actors.keys import valid_route_id
from actors.routes.circuit_board import CircuitBoard
from actors.routes.commands import (
    CompleteSwitch,
    FireDue,
    RouteCommand,
    RouteContext,
)
from actors.routes.models import RouteSnapshot, Transition
from actors.routes.plan import plan
from actors.routes.profile_board import ProfileBoard
from actors.routes.quarantine import quarantine_of, quarantine_transition, salvaged_of
from actors.routes.stored_profiles import followed_ids
from actors.store.profile_store import ProfileStore
from actors.store.route_store import RouteStore

# A release is written in slot order, this many routes a batch: the first slots are armed
# while the later ones are still being written (one batch of every route would arm none
# before all were written, and the first wave starts at the close). 100 is about a
# second of one host's slots at the default budget (a fifth of 1,000 parked a second).
RELEASE_BATCH: Final = 100

log = logging.getLogger(__name__)


def rounds(items: Sequence[tuple[str, RouteCommand]]) -> list[list[int]]:
    """Item indexes by round: each route at most once per round, in the given order."""
    seen: dict[str, int] = {}
    cut: list[list[int]] = []
    for index, (route_id, _command) in enumerate(items):
        number = seen.get(route_id, 0)
        seen[route_id] = number + 1
        if number == len(cut):
            cut.append([])
        cut[number].append(index)
    return cut


class BatchRunner:
    """Runs batches of commands against one store under one set of route locks;
    `on_applied` sees every snapshot a transition wrote (metrics). With `circuits`, each
    round also reads the circuits of its routes and takes the probe leases it needs
    before planning (one more pipeline), plans against them, and writes the circuit side
    effects once its transitions are durable (actors/engine/circuit_effects.py)."""

    def __init__(
        self,
        store: RouteStore,
        locks: RouteLocks,
        context: Callable[[], RouteContext],
        on_applied: Callable[[RouteSnapshot], None] | None = None,
        circuits: CircuitEffects | None = None,
        *,
        on_quarantined: Callable[[RouteSnapshot, str], None] | None = None,
        on_committed: Callable[[Sequence[Committed]], Awaitable[None]] | None = None,
        profiles: ProfileStore | None = None,
    ) -> None:
        """`on_committed` follows each round's applied transitions once the round's route
        locks are released (transcript notices: actors/engine/notice_lifecycle.py).
        `profiles`: where the stored profiles routes follow are read (None: such a route's
        commands fail with ProfileNotReadError, nothing written)."""
        self.store = store
        self.locks = locks
        self._context = context
        self._on_applied = on_applied
        self._on_quarantined = on_quarantined
        self._on_committed = on_committed
        self.profiles = profiles
        self.circuits = circuits
        if circuits is not None:  # a redelivered probe success releases through here too
            circuits.release_runner = self.release

    async def run(self, items: Sequence[tuple[str, RouteCommand]]) -> list[Outcome]:
        outcomes: list[Outcome | None] = [None] * len(items)
        valid: list[int] = []
        for index, (route_id, _command) in enumerate(items):
            try:
                valid_route_id(route_id)
            except InvalidRouteIdError as error:
                outcomes[index] = error
            else:
                valid.append(index)
        releases: list[Release] = []
        for round_indexes in rounds([items[i] for i in valid]):
            indexes = [valid[i] for i in round_indexes]
            results, released, committed = await self._run_round([items[i] for i in indexes])
            releases += released
            if committed and self._on_committed is not None:
                await self._on_committed(committed)
            for index, result in zip(indexes, results, strict=True):
                outcomes[index] = result
        await self.release(releases)
        return [outcome for outcome in outcomes if outcome is not None]

    async def release(self, releases: Sequence[Release]) -> list[RouteSnapshot]:
        """A probe success closed circuits: their parked routes get their wave slots, as
        commands of their own batch (their locks, their fences), once the round that closed
        them holds no lock any more. The routes given their slot; a release that cannot be
        planned is logged (its parked routes re-check their circuit at their deadlines)."""
        given: list[RouteSnapshot] = []
        for release in releases:
            try:
                given += await self.release_one(release)
            except RecoveryError as error:
                log.warning(
                    "release of circuit %s not planned: %s", release[0].label, error_text(error)
                )
        return given

    async def release_one(self, release: Release) -> list[RouteSnapshot]:
        """One release (see `release`), in slot order; raises the StoreUnavailableError of
        a route Redis could not read or write, so that its sender sends it again (a route
        given its slot already is left as it is)."""
        if self.circuits is None:
            return []
        given: list[RouteSnapshot] = []
        commands = self.circuits.release_commands(release)
        for start in range(0, len(commands), RELEASE_BATCH):
            chunk = commands[start : start + RELEASE_BATCH]
            outcomes = await self.run(chunk)
            unavailable = [o for o in outcomes if isinstance(o, StoreUnavailableError)]
            moved = [  # the routes given their slot (not those that had moved on)
                outcome
                for outcome, (_, command) in zip(outcomes, chunk, strict=True)
                if isinstance(outcome, RouteSnapshot) and outcome.deadline == command.at
            ]
            await self.circuits.released(release[0], moved, self._context().now)
            given += moved
            if unavailable:
                raise unavailable[0]
        return given

    async def _run_round(
        self, items: Sequence[tuple[str, RouteCommand]]
    ) -> tuple[list[Outcome], list[Release], list[Committed]]:
        route_ids = [route_id for route_id, _ in items]
        async with self.locks.hold_all(route_ids):
            context = replace(self._context(), classifier=RoundClassifier())
            try:
                read = await self.store.read_snapshots(route_ids)
            except RecoveryError as error:
                return [error] * len(items), [], []
            # A route whose stored data cannot be read is quarantined; the others go on.
            outcomes: list[Outcome] = list(read)
            await self._quarantine(outcomes, context)
            readable = [(i, r) for i, r in enumerate(read) if isinstance(r, RouteSnapshot)]
            readable_items = [items[i] for i, _ in readable]
            befores = [r for _, r in readable]
            done, releases = await self._run_readable(readable_items, befores, context)
            for (index, _), outcome in zip(readable, done, strict=True):
                outcomes[index] = outcome
        committed = [
            Committed(command, before, after)
            for (_, command), before, after in zip(readable_items, befores, done, strict=True)
            if isinstance(after, RouteSnapshot) and after is not before
        ]
        return outcomes, releases, committed

    async def _quarantine(self, outcomes: list[Outcome], context: RouteContext) -> None:
        """Quarantine every route read as corrupt (actors/routes/quarantine.py): its item's
        outcome is the route once stopped, or why the quarantine was not written."""
        planned: list[tuple[int, Transition]] = []
        for index, found in enumerate(outcomes):
            if isinstance(found, CorruptRouteError):
                log.warning("route %s is corrupt, quarantined: %s", found.route_id, found.reason)
                command = quarantine_of(found)
                transition = quarantine_transition(salvaged_of(found), command, context)
                if transition is not None:
                    planned.append((index, transition))
        await self._apply(planned, outcomes)

    async def _run_readable(
        self,
        items: Sequence[tuple[str, RouteCommand]],
        snapshots: list[RouteSnapshot],
        context: RouteContext,
    ) -> tuple[list[Outcome], list[Release]]:
        if not items:
            return [], []
        try:
            context = replace(context, profiles=await self._profiles(items, snapshots))
            board = await self._board(items, snapshots, context)
        except RecoveryError as error:
            return [error] * len(items), []
        context = replace(context, circuits=board)
        outcomes, planned = self._plan(items, snapshots, context)
        lost = await self._apply(planned, outcomes, items)
        await self._replan(lost, items, snapshots, outcomes, context)
        await answer_replays(self.store, items, outcomes)
        await record_unchanged(self.store, items, snapshots, outcomes)
        await self._complete_switches(outcomes)
        await self._settle_timers(items, outcomes)
        releases: list[Release] = []
        if self.circuits is not None and board is not None:
            releases = await self.circuits.settle(board, items, snapshots, outcomes, context)
        return outcomes, releases

    async def _board(
        self,
        items: Sequence[tuple[str, RouteCommand]],
        snapshots: Sequence[RouteSnapshot],
        context: RouteContext,
    ) -> CircuitBoard | None:
        if self.circuits is None:
            return None
        return await self.circuits.prepare(items, snapshots, context.now, context.profiles)

    async def _profiles(
        self, items: Sequence[tuple[str, RouteCommand]], snapshots: Sequence[RouteSnapshot]
    ) -> ProfileBoard | None:
        """The round's stored profiles at their current versions, read in one pipeline."""
        wanted: set[str] = set()
        for (_, command), snapshot in zip(items, snapshots, strict=True):
            wanted |= followed_ids(command, snapshot)
        if not wanted or self.profiles is None:
            return None
        return ProfileBoard(await self.profiles.revisions(wanted))

    def _plan(
        self,
        items: Sequence[tuple[str, RouteCommand]],
        snapshots: Sequence[RouteSnapshot],
        context: RouteContext,
    ) -> tuple[list[Outcome], list[tuple[int, Transition]]]:
        outcomes: list[Outcome] = []
        planned: list[tuple[int, Transition]] = []
        for index, ((_, command), snapshot) in enumerate(zip(items, snapshots, strict=True)):
            try:
                transition = plan(snapshot, command, context)
            except Exception as error:  # the item's own error, returned
                outcomes.append(error)
                continue
            outcomes.append(snapshot)
            if transition is not None:
                planned.append((index, transition))
        return outcomes, planned

    async def _apply(
        self,
        planned: Sequence[tuple[int, Transition]],
        outcomes: list[Outcome],
        items: Sequence[tuple[str, RouteCommand]] = (),
    ) -> list[int]:
        """Apply the planned transitions into `outcomes` (recording the request ids the
        commands at their indexes in `items` carry); the indexes whose write lost the fence
        (another writer moved the route between this round's read and write)."""
        if not planned:
            return []
        requests = [request_record(items, index) for index, _ in planned]
        try:
            applied: Sequence[Outcome] = await self.store.apply_many(
                [t for _, t in planned], requests
            )
        except StoreUnavailableError as error:
            applied = [error] * len(planned)
        lost: list[int] = []
        for (index, transition), result in zip(planned, applied, strict=True):
            outcomes[index] = result
            if isinstance(result, TransitionRejectedError):
                lost.append(index)
            elif isinstance(result, RouteSnapshot):
                self._observe(result, transition)
        return lost

    def _observe(self, snapshot: RouteSnapshot, transition: Transition) -> None:
        if self._on_applied is not None:
            self._on_applied(snapshot)
        if transition.unchanged is not None and self._on_quarantined is not None:
            self._on_quarantined(snapshot, transition.unchanged.field)

    async def _replan(
        self,
        lost: Sequence[int],
        items: Sequence[tuple[str, RouteCommand]],
        snapshots: list[RouteSnapshot],
        outcomes: list[Outcome],
        context: RouteContext,
    ) -> None:
        """The losers of the fence re-read their routes and are planned once more against
        what the winner wrote (the same command, round and board: the board counts a
        route's failure once however often it is planned). A second loss stands."""
        if not lost:
            return
        try:
            read = await self.store.read_snapshots([items[i][0] for i in lost])
        except StoreUnavailableError:
            return  # the rejection stands; nothing was written
        for index, found in zip(lost, read, strict=True):
            if not isinstance(found, RouteSnapshot):
                outcomes[index] = found  # the winner left it unreadable
        again_at = [(i, f) for i, f in zip(lost, read, strict=True) if isinstance(f, RouteSnapshot)]
        lost_items = [items[i] for i, _ in again_at]
        again, planned = self._plan(lost_items, [f for _, f in again_at], context)
        await self._apply(planned, again, lost_items)
        for (index, snapshot), outcome in zip(again_at, again, strict=True):
            snapshots[index] = snapshot
            outcomes[index] = outcome

    async def _complete_switches(self, outcomes: list[Outcome]) -> None:
        """The skips are durable; those routes now run on their next candidate."""
        context = self._context()
        planned: list[tuple[int, Transition]] = []
        for index, outcome in enumerate(outcomes):
            if isinstance(outcome, RouteSnapshot) and outcome.state == "switching":
                transition = plan(outcome, CompleteSwitch(outcome.generation), context)
                if transition is not None:
                    planned.append((index, transition))
        lost = await self._apply(planned, outcomes)
        by_index = dict(planned)
        await self._reread([(i, by_index[i].route_id) for i in lost], outcomes)

    async def _settle_timers(
        self, items: Sequence[tuple[str, RouteCommand]], outcomes: list[Outcome]
    ) -> None:
        """A timer that lost to another writer answers with the route as it is."""
        lost = [
            (index, route_id)
            for index, ((route_id, command), outcome) in enumerate(
                zip(items, outcomes, strict=True)
            )
            if isinstance(command, FireDue) and isinstance(outcome, TransitionRejectedError)
        ]
        await self._reread(lost, outcomes)

    async def _reread(self, lost: Sequence[tuple[int, str]], outcomes: list[Outcome]) -> None:
        """Replace the outcomes at `lost` (index, route id) by the routes' snapshots."""
        if not lost:
            return
        try:
            snapshots: Sequence[Outcome] = await self.store.snapshots([r for _, r in lost])
        except StoreUnavailableError as error:
            snapshots = [error] * len(lost)
        for (index, _), snapshot in zip(lost, snapshots, strict=True):
            outcomes[index] = snapshot
