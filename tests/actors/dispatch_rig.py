"""The dispatch rig: a synchronous connection as rq uses it, a test's dispatch queue, a
burst worker, the fake dispatcher's recorded calls, and a route whose retry 1 is due."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import redis
from rq import Queue
from rq.job import Job
from rq.serializers import JSONSerializer

from actors.jobs.ledger import DispatchLedger
from actors.jobs.queue import dispatch_queue, enqueue_dispatch
from actors.jobs.rq_worker import PromptTeardownWorker
from actors.keys import AttemptFence, KeySpace
from actors.routes.models import RouteSnapshot
from actors.store.sync_reads import read_route
from tests.actors.conftest import Backend
from tests.actors.fake_dispatcher import calls_key
from tests.actors.route_builders import T0, deadline_reached, in_seconds, retry_wait, start

R = "route-dispatch-1"
DELIVER = "tests.actors.fake_dispatcher:deliver"
REFUSE = "tests.actors.fake_dispatcher:refuse"
EXPLODE = "tests.actors.fake_dispatcher:explode"


@dataclass
class Rig:
    """A sync connection as rq uses it, the test's dispatch queue and key space."""

    connection: redis.Redis
    queue: Queue
    keys: KeySpace

    def work(self) -> None:
        worker = PromptTeardownWorker(
            [self.queue], connection=self.connection, serializer=JSONSerializer
        )
        worker.work(burst=True, with_scheduler=True)

    def calls(self) -> list[dict[str, Any]]:
        raw = self.connection.lrange(calls_key(self.keys.prefix), 0, -1)
        return [json.loads(item) for item in raw]

    def route(self, route_id: str = R) -> RouteSnapshot:
        return read_route(self.connection, self.keys, route_id)

    def ledger(self) -> DispatchLedger:
        return DispatchLedger(self.connection, self.keys)

    def enqueue(self, dispatcher: str, route_id: str = R, generation: int = 1) -> str | None:
        return enqueue_dispatch(
            self.queue,
            self.keys,
            AttemptFence(route_id, generation, 1),
            dispatcher=dispatcher,
            now=T0,
        )


@pytest.fixture
def rig(real_backend: Backend) -> Iterator[Rig]:
    assert real_backend.url is not None
    connection = redis.Redis.from_url(real_backend.url)
    queue = dispatch_queue(connection, f"{real_backend.keys.prefix}-dispatch")
    yield Rig(connection, queue, real_backend.keys)
    for job_id in queue.finished_job_registry.get_job_ids():
        Job.fetch(job_id, connection=connection, serializer=JSONSerializer).delete()
    queue.delete(delete_jobs=True)
    connection.close()


def retrying(backend: Backend, route_id: str = R) -> RouteSnapshot:
    """A route whose retry 1 is due: retrying at generation 1, attempt ordinal 1."""

    async def main() -> RouteSnapshot:
        async with backend.store() as store:
            await store.apply(start(route_id))
            await store.apply(retry_wait(route_id, 1, deadline=in_seconds(5)))
            return await store.apply(deadline_reached(route_id, 1))

    return asyncio.run(main())
