"""Canary secrets through the whole runtime (`recovery up`: Ray hosts, rq workers) on a
Redis that requires a canary password: the lines `up` prints, its stderr, every process's
command line (Ray's, the hosts', the workers'), every Redis key and value and the Redis
files hold no 8-character fragment of any planted secret. A failure carrying the secret
shapes is reported, fired by the host's timer, dispatched by a worker whose dispatcher
raises NotDispatched quoting them, and re-evaluated (integration tier: it starts Ray).

The part without Ray is tests/actors/test_canary_secrets.py."""

from __future__ import annotations

import asyncio
import random
import signal
from pathlib import Path

import pytest
import redis

from actors.clock import SystemClock
from actors.engine.service import RouteService
from actors.hosting.hash_ring import HashRing
from actors.jobs.ledger import DispatchLedger
from actors.keys import AttemptFence, KeySpace
from actors.routes.commands import RouteSettings
from actors.store.route_store import RouteStore
from catalogue import Evidence
from policy import Outcome
from tests.actors.canary_dispatcher import MESSAGE_ENV
from tests.actors.canary_search import (
    everything_in_redis,
    files_under,
    process_table,
    protected_redis,
)
from tests.actors.cli.test_cli_up import (
    HOSTS,
    START_TIMEOUT_S,
    RunningUp,
    up_environment,
)
from tests.actors.conftest import unique_keys
from tests.actors.redis_waits import wait_until
from tests.actors.route_scenarios import candidate, profile, retries, safe_turn
from tests.actors.test_canary_secrets import Canaries, plant

pytestmark = pytest.mark.integration

ROUTE = "canary-up-1"
DISPATCH_TIMEOUT_S = 60.0


async def report_planted(url: str, keys: KeySpace, canaries: Canaries) -> None:
    """A route owned by the ring's host, failed with the planted texts, due in 1 s."""
    owner = HashRing(list(HOSTS)).node_for(ROUTE)
    clock = SystemClock()
    async with RouteStore.connect(url, clock=clock, keys=keys) as store:
        service = RouteService(store, clock, settings=RouteSettings(host_id=owner))
        chosen = profile(candidate("claude", transient=retries(3, 1, Outcome.SKIP)))
        await service.start(ROUTE, chosen, caller="kanban", invocation_id="inv-canary")
        body = "API Error: 529 overloaded\n" + "\n".join(canaries.texts)[:3000]
        evidence = Evidence(kind="http", http_status=529, body=body, provider="anthropic")
        waiting = await service.report_failure(
            ROUTE, 1, evidence, safe_turn(), caller="kanban", invocation_id="inv-canary"
        )
        assert waiting.state == "retry_wait"


async def wait_not_dispatched(url: str, keys: KeySpace) -> None:
    connection = redis.Redis.from_url(url)

    async def refused() -> bool:
        entry = DispatchLedger(connection, keys).read(AttemptFence(ROUTE, 1, 1))
        return entry.fields.get("outcome") == "not_dispatched"

    try:
        await wait_until(refused, DISPATCH_TIMEOUT_S, redis_url=url)
    finally:
        connection.close()


def test_up_prints_stores_and_passes_on_no_fragment_of_any_canary(tmp_path: Path) -> None:
    canaries = plant(random.Random(1818))
    keys = unique_keys()
    with protected_redis(tmp_path / "redis", canaries.password) as (url, _socket):
        asyncio.run(report_planted(url, keys, canaries))
        env = up_environment(url, keys, tmp_path / "data")
        env.update(
            RECOVERY_DISPATCHER="tests.actors.canary_dispatcher:refuse_from_env",
            RECOVERY_INSTALLATION_KEY=canaries.installation_key,
            **{MESSAGE_ENV: "no worker for the session: " + "\n".join(canaries.texts)[:3000]},
        )
        up = RunningUp(env, tmp_path / "up.stderr")
        try:
            up.wait_line("ready:", START_TIMEOUT_S)
            asyncio.run(wait_not_dispatched(url, keys))
            table = process_table()
            assert str(up.process.pid) in table
            code = up.stop(signal.SIGTERM)
        finally:
            if up.process.poll() is None:
                up.kill()
        assert code == 0, up.report()
        connection = redis.Redis.from_url(url)
        try:
            stored = everything_in_redis(connection)
        finally:
            connection.close()
        assert "[REDACTED]" in stored.text
        searched = {
            "stdout": "\n".join(up.lines),
            "stderr": (tmp_path / "up.stderr").read_text(errors="replace"),
            "process table": table,
            "redis": stored.text,
            "redis files": files_under(tmp_path / "redis"),
        }
        assert any(line.startswith("redis: unix://:***@") for line in up.lines), up.lines
        found = {where: canaries.leaks(text) for where, text in searched.items()}
        assert found == {where: [] for where in searched}, found
