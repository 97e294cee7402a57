"""HostBatcher: concurrent calls share one host call; answers and errors go to their own
caller. The host here is an in-process fake with the shape of a Ray actor handle."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from actors.errors import StaleGenerationError
from actors.hosting.batcher import BatcherPool, BatchItem, HostBatcher, ReadSnapshot
from actors.routes.commands import RetryNow


@dataclass
class FakeMethod:
    answer: Callable[[list[BatchItem]], list[Any]]
    batches: list[list[BatchItem]] = field(default_factory=list)
    gate: asyncio.Event | None = None
    sent: asyncio.Event | None = None
    answered: int = 0
    answered_before_send: list[int] = field(default_factory=list)

    def remote(self, items: list[BatchItem]) -> Any:
        self.batches.append(list(items))
        self.answered_before_send.append(self.answered)
        if self.sent is not None:
            self.sent.set()
        return self._answer(list(items))

    async def _answer(self, items: list[BatchItem]) -> list[Any]:
        if self.gate is not None:
            await self.gate.wait()
        self.answered += 1
        return self.answer(items)


@dataclass
class FakeHost:
    run_batch: FakeMethod


def echo(items: list[BatchItem]) -> list[Any]:
    return [route_id for route_id, _ in items]


def test_a_lone_call_is_sent_at_once_as_a_batch_of_one() -> None:
    host = FakeHost(FakeMethod(echo))

    async def main() -> None:
        assert await HostBatcher(host).call("r1", ReadSnapshot()) == "r1"

    asyncio.run(main())
    assert host.run_batch.batches == [[("r1", ReadSnapshot())]]


def test_a_thousand_concurrent_calls_travel_in_a_few_batches() -> None:
    host = FakeHost(FakeMethod(echo))

    async def main() -> list[Any]:
        batcher = HostBatcher(host, max_batch=400)
        return await asyncio.gather(*(batcher.call(f"r{i}", ReadSnapshot()) for i in range(1000)))

    answers = asyncio.run(main())
    assert answers == [f"r{i}" for i in range(1000)], "each caller gets its own answer"
    sizes = [len(batch) for batch in host.run_batch.batches]
    assert sum(sizes) == 1000
    assert len(sizes) <= 4, sizes
    assert max(sizes) <= 400


def test_calls_made_while_batches_are_in_flight_wait_for_the_next_batch() -> None:
    gate = asyncio.Event()
    host = FakeHost(FakeMethod(echo, gate=None))

    async def main() -> None:
        sent = asyncio.Event()
        host.run_batch.gate, host.run_batch.sent = gate, sent
        batcher = HostBatcher(host, max_in_flight=1)
        first = asyncio.ensure_future(batcher.call("a", ReadSnapshot()))
        await asyncio.wait_for(sent.wait(), timeout=5)  # the first batch has left
        later = [asyncio.ensure_future(batcher.call(f"b{i}", ReadSnapshot())) for i in range(5)]
        gate.set()  # the in-flight batch answers after the five calls have queued
        await asyncio.gather(first, *later)

    asyncio.run(main())
    assert [len(batch) for batch in host.run_batch.batches] == [1, 5]
    assert host.run_batch.answered_before_send == [0, 1], "sent only once the first answered"


def test_an_items_error_is_raised_to_its_caller_only() -> None:
    rejection = StaleGenerationError("r2", 1, 2, "active")

    def answer(items: list[BatchItem]) -> list[Any]:
        return [rejection if route_id == "r2" else route_id for route_id, _ in items]

    host = FakeHost(FakeMethod(answer))

    async def main() -> list[Any]:
        batcher = HostBatcher(host)
        calls = (batcher.call(f"r{i}", RetryNow(1)) for i in range(4))
        return await asyncio.gather(*calls, return_exceptions=True)

    assert asyncio.run(main()) == ["r0", "r1", rejection, "r3"]


def test_a_failed_host_call_is_raised_to_every_caller_of_that_batch() -> None:
    def unreachable(_items: list[BatchItem]) -> list[Any]:
        raise ConnectionError("the host is gone")

    host = FakeHost(FakeMethod(unreachable))

    async def main() -> list[Any]:
        batcher = HostBatcher(host)
        calls = (batcher.call(f"r{i}", ReadSnapshot()) for i in range(3))
        return await asyncio.gather(*calls, return_exceptions=True)

    answers = asyncio.run(main())
    assert all(isinstance(a, ConnectionError) for a in answers), answers


def test_batcher_settings_are_checked() -> None:
    host = FakeHost(FakeMethod(echo))
    with pytest.raises(ValueError, match="max_batch must be >= 1, got 0"):
        HostBatcher(host, max_batch=0)
    with pytest.raises(ValueError, match="max_in_flight must be >= 1, got 0"):
        HostBatcher(host, max_in_flight=0)


def test_a_pool_keeps_one_batcher_per_host_and_event_loop() -> None:
    pool = BatcherPool()
    one, two = FakeHost(FakeMethod(echo)), FakeHost(FakeMethod(echo))

    async def batchers() -> tuple[HostBatcher, HostBatcher, HostBatcher]:
        return pool.for_host(one), pool.for_host(one), pool.for_host(two)

    first, again, other = asyncio.run(batchers())
    assert first is again
    assert first is not other
    (next_loop, _, _) = asyncio.run(batchers())
    assert next_loop is not first, "a batcher's futures belong to its own loop"


def test_a_pool_tallies_the_sizes_of_the_batches_its_batchers_sent() -> None:
    pool = BatcherPool(max_batch=300)
    one, two = FakeHost(FakeMethod(echo)), FakeHost(FakeMethod(echo))

    async def main() -> None:
        await pool.for_host(one).call("lone", ReadSnapshot())
        await asyncio.gather(*(pool.for_host(two).call(f"r{i}", ReadSnapshot()) for i in range(5)))

    asyncio.run(main())
    sent = [len(batch) for host in (one, two) for batch in host.run_batch.batches]
    assert sorted(pool.batch_sizes().elements()) == sorted(sent)
    assert pool.batch_sizes()[1] >= 1, "the lone call went out as a batch of one"
