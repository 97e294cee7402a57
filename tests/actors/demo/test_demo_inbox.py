"""The demo orchestrator's dispatch inbox stops when the fleet's teardown cancels it, even
when the Redis call it was in swallowed the cancel (redis-py did, now and then: the
demo's teardown then hung, awaiting an inbox that went on popping)."""

from __future__ import annotations

import asyncio
from typing import Any, Final

from redis.asyncio import Redis

from actors.demo.demo_keys import DemoKeys
from actors.demo.dispatcher import DispatchRecord
from actors.demo.orchestrator import DispatchInbox, FleetControl

WAIT_S: Final = 10.0  # a guard against a hang only: the inbox stops within one pop


class _SwallowingClient:
    """A real client until `hold()`; then a BLPOP waits for nothing and, cancelled, returns
    None as if its timeout passed, leaving the cancel unhonoured (what redis-py was seen
    doing), once."""

    def __init__(self, client: Redis) -> None:
        self._client = client
        self.popping = asyncio.Event()
        self.held = False
        self.swallowed = 0

    def hold(self) -> None:
        self.held = True
        self.popping.clear()

    async def blpop(self, keys: list[str], timeout: float) -> Any:
        if not self.held or self.swallowed:
            return await self._client.blpop(keys, timeout=timeout)
        self.popping.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.swallowed += 1
        return None


def test_a_cancel_the_redis_call_swallowed_still_stops_the_inbox(redis_url: str) -> None:
    async def scenario() -> tuple[int, bool, int]:
        client = Redis.from_url(redis_url)
        keys = DemoKeys("inbox-test")
        swallowing = _SwallowingClient(client)
        inbox = DispatchInbox(swallowing, keys, FleetControl(duration_s=60))  # type: ignore[arg-type]
        queue = inbox.queue("route-1")
        listening = asyncio.create_task(inbox.run())
        record = DispatchRecord(
            route_id="route-1",
            generation=1,
            ordinal=2,
            candidate="a",
            reason="rate_limited",
            provider_session_id=None,
            prompt_ref=None,
            worker="w",
            at=1.0,
        )
        await client.rpush(keys.turns, record.model_dump_json())
        handed = await asyncio.wait_for(queue.get(), WAIT_S)  # the inbox works before
        swallowing.hold()
        await asyncio.wait_for(swallowing.popping.wait(), WAIT_S)  # inside its next pop
        listening.cancel()
        await asyncio.wait({listening}, timeout=WAIT_S)
        stopped = listening.done()
        if not stopped:  # end it for the next test; the assertion below says what broke
            listening.cancel()
            await asyncio.wait({listening}, timeout=WAIT_S)
        await client.aclose()
        return handed.ordinal, stopped and listening.cancelled(), swallowing.swallowed

    assert asyncio.run(scenario()) == (2, True, 1)
