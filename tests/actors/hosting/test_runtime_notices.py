"""Transcript notices through the real runtime: a route host writes a session's retry
notice in the Redis transcript once its failure transition committed, reuses it for the
next attempt, and a cancel through the handle retires it, stops the route and leaves a
Resume / Start fresh message; a foreign cancel is refused with nothing read. The host's
notice counts and guards are read from the host itself."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import pytest
import ray
import redis

from actors.errors import NotAuthorisedError
from actors.hosting.runtime import RecoveryRuntime
from actors.keys import KeySpace
from actors.routes.notices import RECOVERY_KIND
from actors.store.transcript_reads import read_notices, read_session_messages
from policy import Outcome
from tests.actors.conftest import _delete_prefix
from tests.actors.ray_fixtures import ray_session  # noqa: F401  # ray_session: fixture
from tests.actors.route_scenarios import candidate, overloaded, profile, retries, safe_turn

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("ray_session")]

TASK = "task-7"


@pytest.fixture
def runtime(redis_url: str) -> Iterator[RecoveryRuntime]:
    started = RecoveryRuntime(
        redis_url=redis_url, key_prefix=f"recovery-nt-{uuid.uuid4().hex[:12]}", host_count=1
    ).start()
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
