"""Circuit rounds sent after the answer to a remote owner: in order per circuit, awaited
by the next read of those circuits, never lost (actors/engine/circuit_sends.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, Final

import pytest

from actors.engine.circuit_round import CircuitRound
from actors.engine.circuit_sends import OrderedSends
from circuits import ResourceKey
from tests.actors.circuit_fixtures import OTHER, RESOURCE
from tests.actors.engine.test_circuit_round import NOW, THIRD, capacity

WAIT_S: Final = 10.0  # a guard against a hang only


def on(*failing: tuple[ResourceKey, str]) -> CircuitRound:
    """A round of one capacity failure per (circuit, route)."""
    return CircuitRound(NOW, failures=tuple(capacity(route, key) for key, route in failing))


class GatedOwner:
    """An owner that takes each round only when the test opens that round's gate."""

    def __init__(self) -> None:
        self.started: list[CircuitRound] = []
        self.taken: list[CircuitRound] = []
        self.gates: dict[int, asyncio.Event] = {}
        self.arrived = asyncio.Event()

    def gate(self, round_: CircuitRound) -> asyncio.Event:
        return self.gates.setdefault(id(round_), asyncio.Event())

    async def deliver(self, round_: CircuitRound) -> None:
        self.started.append(round_)
        self.arrived.set()
        await self.gate(round_).wait()
        self.taken.append(round_)


def run(body: Coroutine[Any, Any, None]) -> None:
    asyncio.run(asyncio.wait_for(body, WAIT_S))


def test_a_round_is_sent_after_the_call_and_its_circuits_read_after_it_lands() -> None:
    async def body() -> None:
        owner = GatedOwner()
        sends = OrderedSends(owner.deliver, lambda _r: None)
        first = on((RESOURCE, "r1"))
        sends.send(first)
        assert owner.started == []  # nothing waited for in the call
        await owner.arrived.wait()
        await sends.landed([OTHER.resource_id])  # nothing of this process on its way there
        owner.gate(first).set()
        await sends.landed([RESOURCE.resource_id])
        assert owner.taken == [first]  # a read returns only once the round has landed
        assert len(sends) == 0

    run(body())


def test_rounds_on_one_circuit_land_in_order_and_others_do_not_wait() -> None:
    async def body() -> None:
        owner = GatedOwner()
        sends = OrderedSends(owner.deliver, lambda _r: None)
        first, second = on((RESOURCE, "r1"), (OTHER, "r1")), on((OTHER, "r2"))
        apart = on((THIRD, "r3"))
        for round_ in (first, second, apart):
            sends.send(round_)
        owner.gate(second).set()  # ready at once, yet not sent before the first lands
        owner.gate(apart).set()
        await sends.landed([THIRD.resource_id])
        assert (owner.started, owner.taken) == ([first, apart], [apart])
        owner.gate(first).set()
        await sends.drain()
        assert owner.taken == [apart, first, second]

    run(body())


def test_a_round_whose_delivery_raised_is_handed_to_the_redelivery(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def body() -> None:
        handed: list[CircuitRound] = []

        async def broken(_round: CircuitRound) -> None:
            raise RuntimeError("the owner exploded")

        sends = OrderedSends(broken, handed.append)
        lost = on((RESOURCE, "r1"))
        sends.send(lost)
        await sends.landed([RESOURCE.resource_id])
        assert handed == [lost]

    run(body())
    assert "circuit round not delivered" in caplog.text


def test_drain_waits_for_every_round_and_gives_up_at_its_bound() -> None:
    async def body() -> None:
        owner = GatedOwner()
        sends = OrderedSends(owner.deliver, lambda _r: None)
        stuck = on((RESOURCE, "r1"))
        sends.send(stuck)
        sends.send(CircuitRound(NOW))  # an empty round sends nothing
        await sends.drain(timeout_s=0.01)
        assert (len(sends), owner.taken) == (1, [])
        owner.gate(stuck).set()
        await sends.drain()
        assert (len(sends), owner.taken) == (0, [stuck])

    run(body())


def test_beyond_its_bound_a_sender_waits_for_its_own_round_to_land() -> None:
    async def body() -> None:
        owner = GatedOwner()
        sends = OrderedSends(owner.deliver, lambda _r: None, max_in_flight=2)
        first, second, third = on((RESOURCE, "r1")), on((OTHER, "r2")), on((THIRD, "r3"))
        sends.send(first)
        assert not sends.full
        sends.send(second)
        assert sends.full
        waiting = asyncio.create_task(sends.post(third))
        owner.gate(third).set()
        await waiting  # returns once its own round has landed, the others still held
        assert owner.taken == [third]
        owner.gate(first).set()
        owner.gate(second).set()
        await sends.drain()
        assert (owner.taken, sends.full) == ([third, first, second], False)

    run(body())
