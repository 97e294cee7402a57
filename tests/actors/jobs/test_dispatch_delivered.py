"""A delivered dispatch is announced to the route's owning host (actors/jobs/dispatch.py,
actors/jobs/worker_engine.py): the job writes a `delivered` entry on the host's wake
stream once its ledger says delivered, so the host's session guard takes it as the
session's accepted prompt. Only for a route with a task, with a known host, whose
dispatcher returned (integration tier: real Redis, rq SimpleWorker in burst mode)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from actors.engine.service import RouteService
from actors.jobs.queue import enqueue_dispatch
from actors.keys import AttemptFence
from actors.routes.models import RouteSnapshot
from actors.store.replies import reply_texts
from tests.actors.conftest import Backend
from tests.actors.dispatch_rig import DELIVER, REFUSE, Rig
from tests.actors.route_builders import T0
from tests.actors.route_scenarios import overloaded, safe_turn, seed_profile

pytestmark = pytest.mark.integration

HOST = "host-0"


def retrying(backend: Backend, route_id: str, task: str | None) -> RouteSnapshot:
    """A route started (with `task`) that failed and whose retry is dispatched now."""

    async def main() -> RouteSnapshot:
        async with backend.store() as store:
            service = RouteService(store, backend.clock)
            await service.start(
                route_id, seed_profile(), caller="kanban", invocation_id=f"inv-{route_id}",
                task_id=task,
            )  # fmt: skip
            await service.report_failure(
                route_id, 1, overloaded(), safe_turn(), caller="kanban",
                invocation_id=f"inv-{route_id}",
            )  # fmt: skip
            return await service.retry_now(route_id, 1)

    return asyncio.run(main())


def test_a_delivered_dispatch_of_a_task_route_is_announced_on_its_hosts_wake_stream(
    real_backend: Backend, rig: Rig
) -> None:
    sent = {
        "delivered": ("task-1", DELIVER, HOST),
        "no-task": (None, DELIVER, HOST),
        "not-sent": ("task-1", REFUSE, HOST),
        "no-host": ("task-1", DELIVER, None),  # as reconciliation enqueues it
    }
    for route_id, (task, dispatcher, host) in sent.items():
        snapshot = retrying(real_backend, route_id, task)
        assert snapshot.state == "retrying", snapshot
        enqueue_dispatch(
            rig.queue, rig.keys, snapshot.attempt, dispatcher=dispatcher, now=T0, host_id=host
        )
    rig.work()

    assert {call["route_id"] for call in rig.calls()} == set(sent)  # all four were called
    entries: list[Any] = rig.connection.xrange(rig.keys.host_wakes(HOST))  # type: ignore[assignment]  # a sync client's reply
    announced = [reply_texts(fields) for _, fields in entries]
    delivered = [entry for entry in announced if entry.get("kind") == "delivered"]
    fence = AttemptFence("delivered", 1, 1)
    assert delivered == [{
        "kind": "delivered", "route": fence.route_id, "generation": str(fence.generation),
        "ordinal": str(fence.ordinal),
    }]  # fmt: skip
