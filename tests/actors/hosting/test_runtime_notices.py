"""Transcript notices through the real runtime: a route host writes a session's retry
notice in the Redis transcript once its failure transition committed, reuses it for the
next attempt, and a cancel through the handle retires it, stops the route and leaves a
Resume / Start fresh message; a foreign cancel is refused with nothing read. A dispatch a
supervised rq worker delivered is the session's accepted prompt in the owning host's
session guard (announced on the host's wake stream), until the attempt's outcome retires
it. The host's notice counts and guards are read from the host itself."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import ray
import redis

from actors.engine.session_guards import GuardView
from actors.errors import NotAuthorisedError
from actors.hosting.names import host_ids
from actors.hosting.runtime import RecoveryRuntime
from actors.jobs.ledger import DispatchLedger
from actors.keys import AttemptFence, KeySpace
from actors.routes.notices import RECOVERY_KIND
from actors.store.replies import reply_text, reply_texts
from actors.store.transcript_reads import read_notices, read_session_messages
from policy import Outcome
from tests.actors.conftest import _delete_prefix
from tests.actors.ray_fixtures import ray_session  # noqa: F401  # ray_session: fixture
from tests.actors.redis_waits import wait_until
from tests.actors.route_scenarios import candidate, overloaded, profile, retries, safe_turn

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("ray_session")]

TASK = "task-7"
DELIVER = "tests.actors.fake_dispatcher:deliver"
TIMEOUT_S = 30.0  # a catastrophe guard: the dispatch and its announcement take ~1 s


def started_runtime(redis_url: str, dispatcher: str | None = None) -> RecoveryRuntime:
    return RecoveryRuntime(
        redis_url=redis_url, key_prefix=f"recovery-nt-{uuid.uuid4().hex[:12]}", host_count=1,
        dispatcher=dispatcher,
    ).start()  # fmt: skip


@pytest.fixture
def runtime(redis_url: str) -> Iterator[RecoveryRuntime]:
    started = started_runtime(redis_url)
    yield started
    started.shutdown()
    _delete_prefix(redis_url, KeySpace(started.key_prefix))


@pytest.fixture
def delivering(redis_url: str) -> Iterator[RecoveryRuntime]:
    started = started_runtime(redis_url, DELIVER)
    yield started
    started.shutdown()
    _delete_prefix(redis_url, KeySpace(started.key_prefix))


def test_a_hosts_notice_is_written_reused_and_retired_by_an_authorised_cancel(
    runtime: RecoveryRuntime, connection: redis.Redis
) -> None:
    keys = KeySpace(runtime.key_prefix)
    patient = profile(candidate("claude", transient=retries(3, 600, Outcome.STOP)))
    route = runtime.route("session-1")

    async def scenario() -> None:
        started = await route.start(patient, caller="kanban", invocation_id="inv-1", task_id=TASK)
        assert started.task_id == TASK
        waiting = await route.report_failure(
            1, overloaded(), safe_turn(), caller="kanban", invocation_id="inv-1"
        )
        assert waiting.state == "retry_wait"
        [notice] = read_notices(connection, keys, "session-1")
        assert (notice.task_id, notice.metadata["retry_ordinal"]) == (TASK, 1)
        assert (await route.retry_now(1)).state == "retrying"  # no dispatcher: it stays so
        assert len(read_notices(connection, keys, "session-1")) == 1  # still retrying
        with pytest.raises(NotAuthorisedError):
            await route.cancel_transient_retry("someone-elses-task", "mallory")
        assert len(read_notices(connection, keys, "session-1")) == 1
        outcome = await route.cancel_transient_retry(TASK, "alice")
        assert outcome.active is True
        assert outcome.snapshot.state == "action_required"
        assert read_notices(connection, keys, "session-1") == []
        [message] = read_session_messages(connection, keys, TASK, "session-1")
        assert message.kind == RECOVERY_KIND
        again = await route.cancel_transient_retry(TASK, "alice")
        assert again.active is False

    asyncio.run(scenario())
    [host] = runtime.hosts
    counts = ray.get(host.notice_counts.remote())
    assert counts["written"] >= 1
    assert counts["retired"] >= 1
    assert counts["recovery_messages"] == 1


def test_a_delivered_dispatch_is_the_accepted_prompt_of_the_owning_hosts_session_guard(
    delivering: RecoveryRuntime, connection: redis.Redis
) -> None:
    runtime, keys = delivering, KeySpace(delivering.key_prefix)
    patient = profile(candidate("claude", transient=retries(3, 600, Outcome.STOP)))
    route = runtime.route("session-1")
    [host] = runtime.hosts
    [host_id] = host_ids(1)
    stream = keys.host_wakes(host_id)

    def delivery_entry() -> str | None:
        entries: list[Any] = connection.xrange(stream)  # type: ignore[assignment]  # a sync client's reply
        for entry_id, fields in entries:
            found = reply_texts(fields)
            if (found.get("kind"), found.get("route")) == ("delivered", "session-1"):
                return reply_text(entry_id)
        return None

    async def guard() -> GuardView:
        view: GuardView | None = await host.session_guard.remote("session-1")
        assert view is not None
        return view

    async def scenario() -> None:
        await route.start(patient, caller="kanban", invocation_id="inv-1", task_id=TASK)
        waiting = await route.report_failure(
            1, overloaded(), safe_turn(), caller="kanban", invocation_id="inv-1"
        )
        attempt = AttemptFence("session-1", 1, waiting.attempt_ordinal)
        before = await guard()
        assert (before.prompt, before.retry, before.retry_armed) == (None, attempt, True)
        assert (await route.retry_now(1)).state == "retrying"  # dispatched by a worker

        async def announced() -> bool:
            return delivery_entry() is not None

        await wait_until(announced, TIMEOUT_S, redis_url=runtime.url)
        entry_id = delivery_entry()
        assert entry_id is not None
        assert DispatchLedger(connection, keys).read(attempt).fields["outcome"] == "delivered"
        await asyncio.wait_for(host.wakes_followed.remote(entry_id), TIMEOUT_S)
        owned = await guard()
        assert (owned.prompt, owned.retry) == (attempt, attempt)  # the delivered prompt
        assert len(read_notices(connection, keys, "session-1")) == 1  # still retrying
        assert (await route.report_success(1)).state == "active"
        retired = await guard()
        assert (retired.prompt, retired.retry, retired.watermark) == (None, None, attempt)
        assert retired.fence_until is not None
        assert read_notices(connection, keys, "session-1") == []

    asyncio.run(scenario())
    counts = ray.get(host.notice_counts.remote())
    assert (counts["guards"], counts["guards_owned"], counts["guards_past_fence"]) == (1, 0, 0)
    assert counts["prompts"] == 2  # the start and the delivered dispatch
