"""A route round's circuit writes as one value (actors/engine/circuit_round.py): cut by
owner and put together again without losing or reordering anything, applied by the local
owner with what Redis refused handed back (never dropped), sent again by the redelivery
until it is written, and safe to send twice (a failure delivered again counts once)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Final

import pytest

from actors.engine.circuit_round import (
    Applied,
    CircuitRound,
    Failures,
    LocalCircuits,
    Parking,
    Verdict,
)
from actors.engine.redelivery import Redelivery
from actors.hosting.circuit_client import joined
from actors.store.circuit_store import CircuitStore
from circuits import CircuitStatus, ProbeDenied, ProbeGrant, ResourceKey
from tests.actors.circuit_fixtures import OTHER, RESOURCE, open_store
from tests.actors.conftest import Backend
from tests.circuits.builders import failure

NOW: Final = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
THIRD = ResourceKey(provider="google")
WAIT_S: Final = 10.0  # a guard against a hang only


def capacity(route_id: str, resource: ResourceKey = RESOURCE) -> Failures:
    return Failures(
        resource, ((failure("model_capacity"), route_id),), ((None, 1),), CircuitStatus.CLOSED
    )


def a_round() -> CircuitRound:
    return CircuitRound(
        NOW,
        verdicts=(Verdict(RESOURCE, "token-1", True), Verdict(OTHER, "token-2", None)),
        failures=(capacity("r1"), capacity("r2", OTHER), capacity("r3", THIRD)),
        parks=(Parking(RESOURCE, ("r4", "r5")), Parking(THIRD, ("r6",))),
        unparks=((OTHER, "r7"), (RESOURCE, "r8")),
    )


def test_a_round_cut_by_owner_keeps_each_part_in_order_and_joins_back_whole() -> None:
    round_ = a_round()
    owners = {RESOURCE.resource_id: 0, OTHER.resource_id: 1, THIRD.resource_id: 0}
    parts = round_.split(owners.__getitem__)
    assert sorted(parts) == [0, 1]
    assert parts[0].resources() == {RESOURCE.resource_id, THIRD.resource_id}
    assert parts[1].resources() == {OTHER.resource_id}
    assert [f.failures[0][1] for f in parts[0].failures] == ["r1", "r3"]
    assert parts[1].unparks == ((OTHER, "r7"),)
    whole = joined([parts[0], parts[1]], NOW)
    assert whole is not None
    assert sorted(whole.verdicts, key=str) == sorted(round_.verdicts, key=str)
    assert len(whole.failures) == 3
    assert len(whole.parks) == 2
    assert len(whole.unparks) == 2
    assert joined([], NOW) is None
    assert not CircuitRound(NOW)


@pytest.mark.parametrize("backend", ["fake"], indirect=True)
def test_a_failure_delivered_twice_counts_once(backend: Backend) -> None:
    async def scenario() -> None:
        async with open_store(backend) as store:
            circuits = LocalCircuits(store)
            round_ = CircuitRound(NOW, failures=(capacity("r1"), capacity("r2")))
            first = await circuits.apply_round(round_)
            again = await circuits.apply_round(round_)
            assert first == again == Applied()
            view = await store.view(RESOURCE)
            assert [m.route_id for m in view.state.recent_failures] == ["r1", "r2"]
            assert view.status is CircuitStatus.CLOSED  # a third distinct failure opens

    asyncio.run(scenario())


def test_what_redis_refuses_comes_back_undelivered_never_dropped() -> None:
    async def scenario() -> None:
        # nothing listens on port 1: every command is refused, with no retries
        async with CircuitStore.connect("redis://127.0.0.1:1", timeout_s=0.2) as store:
            applied = await LocalCircuits(store).apply_round(a_round())
        assert applied.releases == ()
        assert applied.undelivered == a_round()

    asyncio.run(scenario())


class _FlakyPort:
    """Refuses the first `failures` deliveries, then takes everything."""

    remote = False

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.taken: list[CircuitRound] = []

    async def acquire_probe(
        self, resource: ResourceKey, holder: str, now: datetime, ttl_s: float
    ) -> ProbeGrant | ProbeDenied:
        raise AssertionError("not used")

    async def apply_round(self, round_: CircuitRound) -> Applied:
        if self.failures > 0:
            self.failures -= 1
            return Applied(undelivered=round_)
        self.taken.append(round_)
        return Applied()


def test_an_undelivered_round_is_sent_again_until_it_is_taken() -> None:
    async def scenario() -> None:
        port = _FlakyPort(failures=3)
        redelivery = Redelivery(port)
        redelivery.add(a_round())
        await asyncio.wait_for(redelivery.wait_idle(), WAIT_S)
        assert port.taken == [a_round()]
        assert (redelivery.delivered, redelivery.given_up, len(redelivery)) == (1, 0, 0)

    asyncio.run(scenario())


def test_redelivery_keeps_each_round_at_its_own_time_and_bounds_what_waits() -> None:
    async def scenario() -> None:
        port = _FlakyPort(failures=1)
        redelivery = Redelivery(port, max_pending=2)
        rounds = [
            CircuitRound(NOW + timedelta(seconds=i), failures=(capacity(f"r{i}"),))
            for i in range(3)
        ]
        for round_ in rounds:
            redelivery.add(round_)
        await asyncio.wait_for(redelivery.wait_idle(), WAIT_S)
        assert port.taken == rounds[1:]  # the oldest was pushed out, the others kept apart
        assert redelivery.given_up == 1

    asyncio.run(scenario())


def test_a_round_too_old_to_matter_is_given_up() -> None:
    async def scenario() -> None:
        port = _FlakyPort(failures=0)
        redelivery = Redelivery(port, max_age_s=60)
        redelivery.add(a_round(), since=-1e9)  # first failed long ago
        await asyncio.wait_for(redelivery.wait_idle(), WAIT_S)
        assert port.taken == []
        assert redelivery.given_up == 1

    asyncio.run(scenario())


class _SwallowingPort(_FlakyPort):
    """Never takes a round; a delivery cancelled while it waits is reported undelivered
    with the cancel left unhonoured, once (what redis-py was seen doing to a cancel)."""

    def __init__(self) -> None:
        super().__init__(failures=0)
        self.sending = asyncio.Event()
        self.swallowed = 0

    async def apply_round(self, round_: CircuitRound) -> Applied:
        if self.swallowed:
            return Applied(undelivered=round_)
        self.sending.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.swallowed += 1
        return Applied(undelivered=round_)


def test_closing_the_redelivery_stops_it_even_when_its_write_swallowed_the_cancel() -> None:
    async def scenario() -> tuple[bool, int, int]:
        port = _SwallowingPort()
        redelivery = Redelivery(port)
        redelivery.add(a_round())
        await asyncio.wait_for(port.sending.wait(), WAIT_S)
        closing = asyncio.ensure_future(redelivery.aclose())
        await asyncio.wait({closing}, timeout=WAIT_S)
        return closing.done(), port.swallowed, len(redelivery)

    assert asyncio.run(scenario()) == (True, 1, 1)  # stopped; the round is still held
