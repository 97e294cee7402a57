"""The probe leases a route round takes before it is planned (actors/engine/circuit_effects.py
reads the round's circuits, then calls this; docs/DESIGN.md §3, "always re-probed").

Once a circuit's open-until has passed (or its lease expired), the next route of a round
that could use the resource asks for its probe lease; the store's Lua guard makes it
exclusive across every host and runtime, and each round asks at most once per circuit:
- a due attempt (a timer, retry now) of a route parked on it: a grant makes that attempt
  the probe, a denial (another host holds it) parks the others until its `retry_at`;
- a start or a start fresh, for the first of its candidates that is not closed, whose
  probe is due and that comes before any closed candidate: a grant makes the start run on
  it as the probe (actors/routes/eligibility.py), so an expired circuit is never left
  without a prober because new routes avoid it.
Grants and denials go into the CircuitBoard the round plans with; planning stays pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from actors.engine.circuit_round import CircuitPort
from actors.routes.circuit_board import CircuitBoard, profile_candidate_key
from actors.routes.commands import RouteCommand, Start, StartFresh
from actors.routes.eligibility import ordered
from actors.routes.models import RouteSnapshot
from actors.routes.parking import would_dispatch_now
from actors.routes.profile_board import ProfileBoard
from actors.routes.stored_profiles import choosing_profile
from circuits import DenialReason, ProbeDenied, ProbeGrant, machine

Items = Sequence[tuple[str, RouteCommand]]


async def take_probes(  # noqa: PLR0917 - the round, spelled out
    circuits: CircuitPort,
    board: CircuitBoard,
    items: Items,
    snapshots: Sequence[RouteSnapshot],
    now: datetime,
    ttl_s: float,
    *,
    profiles: ProfileBoard | None = None,
) -> None:
    """Take the round's probe leases into `board` (module docstring) from the circuits'
    owner, each lease for `ttl_s`; a start chooses from the current versions of the
    stored profiles in `profiles`."""
    taker = _Taker(circuits, board, now, ttl_s)
    for (route_id, command), snapshot in zip(items, snapshots, strict=True):
        holder = f"{route_id}:{snapshot.generation}:{snapshot.attempt_ordinal}"
        if isinstance(command, Start | StartFresh):
            await taker.for_start(command, snapshot, holder, profiles)
            continue
        if not would_dispatch_now(command, snapshot, now):
            continue
        park = board.blocking(board.key_of(snapshot), now)
        if park is not None:
            await taker.ask(route_id, park.circuit, holder)


class _Taker:
    """One round's lease requests: at most one per circuit."""

    def __init__(
        self, circuits: CircuitPort, board: CircuitBoard, now: datetime, ttl_s: float
    ) -> None:
        self.circuits = circuits
        self.board = board
        self.now = now
        self.ttl_s = ttl_s
        self.asked: set[str] = set()

    async def for_start(
        self,
        command: Start | StartFresh,
        snapshot: RouteSnapshot,
        holder: str,
        profiles: ProfileBoard | None = None,
    ) -> None:
        """The lease of the first not-closed candidate circuit (before any closed one)
        whose probe is due, for this start: it probes instead of avoiding it forever."""
        profile = choosing_profile(command, snapshot, profiles)
        if profile is None:
            return  # the planner refuses such a start
        for candidate in ordered(profile, None):
            key = profile_candidate_key(profile, candidate.id, self.board.binding)
            park = self.board.blocking(key, self.now)
            if park is None:
                return  # a closed candidate comes first: no probe needed
            if await self.ask(snapshot.route_id, park.circuit, holder):
                return

    async def ask(self, route_id: str, circuit: str, holder: str) -> bool:
        """Ask for `circuit`'s probe lease for `route_id` when its probe is due and the
        round has not asked yet; True when granted."""
        board, now = self.board, self.now
        state = board.states.get(circuit)
        resource = board.resource(circuit)
        if circuit in self.asked or state is None or resource is None:
            return False
        if not machine.probe_due(state, now):
            return False
        self.asked.add(circuit)
        result = await self.circuits.acquire_probe(resource, holder, now, self.ttl_s)
        if isinstance(result, ProbeGrant):
            board.grants[route_id] = (circuit, result)
            board.denials[circuit] = ProbeDenied(
                reason=DenialReason.HELD, retry_at=result.expires_at, holder=holder
            )
            return True
        board.denials[circuit] = result
        return False
