"""Issue 15's must-show through the real runtime: two Ray route hosts, real Redis, rq
workers running the demo dispatcher, and an orchestrator serving one route per request
against a fake OpenAI-compatible provider over HTTP (tests/actors/faults). Every scenario
runs at once, on accounts of its own, with the production circuit settings (60 s first
backoff); each test checks one scenario's figures, taken from the provider's own record of
the calls it answered and from how each request ended."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from actors.demo.dispatcher import DISPATCHER_PATH
from actors.hosting.runtime import RecoveryRuntime
from actors.keys import KeySpace
from tests.actors.conftest import _delete_prefix
from tests.actors.faults.run import run_scenarios
from tests.actors.faults.scenarios import scenarios
from tests.actors.ray_fixtures import ray_session  # noqa: F401  # ray_session: fixture

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("ray_session")]

SCENARIOS = {scenario.name: scenario for scenario in scenarios()}


@pytest.fixture(scope="module")
def figures(redis_url: str) -> Iterator[dict[str, dict[str, Any]]]:
    prefix = f"recovery-faults-{uuid.uuid4().hex[:10]}"
    runtime = RecoveryRuntime(
        redis_url=redis_url, key_prefix=prefix, host_count=2, dispatcher=DISPATCHER_PATH,
        installation_key="provider-faults-test",
    ).start()  # fmt: skip
    try:
        yield asyncio.run(run_scenarios(runtime, list(SCENARIOS.values())))
    finally:
        runtime.shutdown()
        _delete_prefix(redis_url, KeySpace(prefix))


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_the_scenario_holds(figures: dict[str, dict[str, Any]], name: str) -> None:
    assert figures[name]["ok"], figures[name]
