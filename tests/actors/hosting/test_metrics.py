"""The route hosts' metrics reach Ray's Prometheus export (scraped as Prometheus would).
Ray flushes metrics on its own period (1 s in the test session, tests/actors/ray_fixtures.py):
the test waits on the scrape, with a timeout."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import pytest

from actors.errors import StaleGenerationError
from actors.hosting.runtime import RecoveryRuntime
from actors.keys import KeySpace
from policy import Outcome
from tests.actors.conftest import _delete_prefix
from tests.actors.metrics_scrape import samples, scrape_until
from tests.actors.ray_fixtures import ray_session  # noqa: F401  # ray_session: fixture
from tests.actors.route_scenarios import (
    candidate,
    overloaded,
    profile,
    retries,
    safe_turn,
)

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("ray_session")]

SCRAPE_TIMEOUT_S = 60.0
EXPECTED = (
    "ray_recovery_route_transitions_total",
    "ray_recovery_route_decisions_total",
    "ray_recovery_route_batch_size",
    "ray_recovery_route_pending_timers",
    "ray_recovery_route_rejections_total",
    "ray_recovery_notices_total",
    "ray_recovery_notice_guards",
)


@pytest.fixture
def runtime(redis_url: str) -> Iterator[RecoveryRuntime]:
    prefix = f"recovery-metrics-{uuid.uuid4().hex[:12]}"
    started = RecoveryRuntime(redis_url=redis_url, key_prefix=prefix, host_count=1).start()
    yield started
    started.shutdown()
    _delete_prefix(redis_url, KeySpace(prefix))


def _guard_counted(text: str) -> bool:
    return any(line.endswith(" 1.0") for line in samples(text, "ray_recovery_notice_guards{"))


def test_route_metrics_are_exported_on_rays_prometheus_endpoint(
    runtime: RecoveryRuntime,
) -> None:
    route = runtime.route("metrics-1")
    policy = profile(candidate("claude", transient=retries(3, 60, Outcome.SKIP)))

    async def scenario() -> str:
        # a task chat: the failure writes the session's retry notice
        await route.start(policy, caller="kanban", invocation_id="inv-1", task_id="task-m")
        await route.report_failure(1, overloaded(), safe_turn(), caller="kanban",
                                   invocation_id="inv-1")  # fmt: skip
        with pytest.raises(StaleGenerationError):
            await route.report_success(7)
        # Ray exports on its period: an export taken before the guard was counted shows 0
        return await scrape_until(EXPECTED, SCRAPE_TIMEOUT_S, until=_guard_counted)

    text = asyncio.run(scenario())
    decisions = samples(text, "ray_recovery_route_decisions_total{")
    assert any(
        'code="provider_overloaded"' in line and 'decision="retry"' in line
        and 'error_class="transient"' in line
        for line in decisions
    ), decisions  # fmt: skip
    states = samples(text, "ray_recovery_route_transitions_total{")
    assert any('state="retry_wait"' in line for line in states), states
    rejected = samples(text, "ray_recovery_route_rejections_total{")
    assert any('reason="StaleGenerationError"' in line for line in rejected), rejected
    notices = samples(text, "ray_recovery_notices_total{")
    assert any('outcome="written"' in line for line in notices), notices
    guards = samples(text, "ray_recovery_notice_guards{")
    assert any(line.endswith(" 1.0") for line in guards), guards  # the session's guard
