"""One installation across processes, on the session's Ray and Redis: a second OS process
attaches and works on routes without owning them; a client asking for another host ring
is refused; only the owner stops the hosts; the owner recreates a host killed for good and
its routes dispatch exactly once; `recovery workers` on another process runs the
installation's dispatches; the hosts spread over the nodes of a two-node cluster."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import ray
import redis

from actors.hosting.installation import host_alive
from actors.hosting.names import NAMESPACE, host_name
from actors.hosting.runtime import RecoveryRuntime
from actors.keys import KeySpace
from actors.store.installation import read_installation
from policy import DynamicProfile, Outcome
from tests.actors.conftest import _delete_prefix
from tests.actors.dispatch_rig import DELIVER
from tests.actors.fake_dispatcher import calls_key
from tests.actors.ray_fixtures import ray_session  # noqa: F401  # ray_session: fixture
from tests.actors.redis_waits import wait_until
from tests.actors.route_scenarios import candidate, overloaded, profile, retries, safe_turn

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("ray_session")]

ROOT = Path(__file__).resolve().parents[3]
TIMEOUT_S = 60.0


def quick(interval_s: int = 1) -> DynamicProfile:
    return profile(candidate("claude", transient=retries(3, interval_s, Outcome.STOP)))


def child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RECOVERY_", "RAY_ADDRESS"))}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def client(url: str, prefix: str, mode: str) -> dict[str, Any]:
    """Run the second orchestrator process (tests/actors/hosting/attach_client.py)."""
    done = subprocess.run(
        [sys.executable, "-m", "tests.actors.hosting.attach_client", url, prefix, mode],
        cwd=ROOT, env=child_env(), capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def actor_ids(runtime: RecoveryRuntime) -> list[str]:
    return [
        ray.get_actor(host_name(runtime.key_prefix, i), namespace=NAMESPACE)._actor_id.hex()
        for i in range(runtime.host_count)
    ]


@pytest.fixture
def owner(redis_url: str, request: pytest.FixtureRequest) -> Iterator[RecoveryRuntime]:
    options: dict[str, Any] = getattr(request, "param", {})
    prefix = f"recovery-inst-{uuid.uuid4().hex[:12]}"
    started = RecoveryRuntime(redis_url=redis_url, key_prefix=prefix, **options).start()
    yield started
    started.shutdown()
    _delete_prefix(redis_url, KeySpace(prefix))


def test_a_second_process_attaches_works_on_routes_and_leaves_the_hosts_serving(
    owner: RecoveryRuntime, redis_url: str
) -> None:
    assert owner.owner
    record = read_installation(redis.Redis.from_url(redis_url), KeySpace(owner.key_prefix))
    assert record is not None
    assert record.host_count == 2
    assert "installation_key" not in json.dumps(record.settings)
    hosts_before = actor_ids(owner)

    attached = client(redis_url, owner.key_prefix, "attach")
    assert attached["owner"] is False
    assert attached["states"] == ["active", "retry_wait", "action_required"]
    assert attached["owners"] == {r: owner.host_index(r) for r in attached["owners"]}
    assert actor_ids(owner) == hosts_before, "its shutdown() left the owner's hosts"

    equal = client(redis_url, owner.key_prefix, "start-equal")
    assert equal == {"owner": False, "states": ["active", "retry_wait"]}
    assert actor_ids(owner) == hosts_before, "its exit left the owner's hosts"

    refused = client(redis_url, owner.key_prefix, "start-3")
    assert refused["setting"] == "hosts"
    assert "runs with hosts=2" in refused["refused"]
    assert "asks for hosts=3" in refused["refused"]

    async def still_serving() -> None:
        assert (await owner.route("x-1").snapshot()).state == "action_required"
        assert (await owner.route("x-2").snapshot()).state == "retry_wait"
        route = owner.route("after-clients")
        started = await route.start(quick(), caller="office", invocation_id="inv-a")
        assert started.state == "active"

    asyncio.run(still_serving())


@pytest.mark.parametrize("owner", [{"dispatcher": DELIVER, "worker_count": 1}], indirect=True)
def test_a_host_killed_for_good_is_recreated_by_the_owner_and_its_routes_dispatch_once(
    owner: RecoveryRuntime, redis_url: str
) -> None:
    # two routes: three transient failures would open their circuit and park them
    on_host_0 = [r for r in (f"k-{n}" for n in range(40)) if owner.host_index(r) == 0][:2]
    connection = redis.Redis.from_url(redis_url)
    calls = calls_key(owner.key_prefix)

    async def waiting() -> None:
        for route_id in on_host_0:
            route = owner.route(route_id)
            started = await route.start(quick(2), caller="office", invocation_id="inv-k")
            await route.report_failure(
                started.generation, overloaded(), safe_turn(), caller="office",
                invocation_id="inv-k",
            )  # fmt: skip

    asyncio.run(waiting())
    held = owner.route(on_host_0[0])  # a handle an orchestrator holds across the loss
    killed = actor_ids(owner)[0]
    ray.kill(owner.hosts[0], no_restart=True)
    keeper = owner._keeper
    assert keeper is not None
    rounds = keeper.rounds
    assert keeper.wait_rounds(rounds + 2, TIMEOUT_S)
    assert host_alive(owner.key_prefix, 0)
    assert actor_ids(owner)[0] != killed, "a new host, not the old one restarted"

    async def dispatched() -> bool:
        return int(connection.llen(calls)) >= len(on_host_0)

    asyncio.run(wait_until(dispatched, TIMEOUT_S, redis_url=redis_url))
    assert keeper.wait_rounds(keeper.rounds + 1, TIMEOUT_S)  # one more keeper round
    made = Counter(json.loads(c)["route_id"] for c in connection.lrange(calls, 0, -1))
    assert made == dict.fromkeys(on_host_0, 1)

    async def snapshot_through_new_host() -> str:
        return (await held.snapshot()).state

    assert asyncio.run(snapshot_through_new_host()) == "retrying"


@pytest.mark.parametrize("owner", [{"dispatcher": DELIVER, "worker_count": 0}], indirect=True)
def test_recovery_workers_on_another_process_run_the_installations_dispatches(
    owner: RecoveryRuntime, redis_url: str
) -> None:
    assert owner.workers is None, "worker_count 0: none beside the owner"
    workers = subprocess.Popen(
        [sys.executable, "-m", "actors.cli.main", "workers", "--redis-url", redis_url,
         "--prefix", owner.key_prefix, "--count", "1", "--worker-path", str(ROOT)],
        cwd=ROOT, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert workers.stdout is not None
        first = workers.stdout.readline()
        assert first.startswith("workers: "), first + workers.stderr.read()  # type: ignore[union-attr]
        connection = redis.Redis.from_url(redis_url)
        calls = calls_key(owner.key_prefix)

        async def fire_one() -> None:
            route = owner.route("w-1")
            started = await route.start(quick(1), caller="office", invocation_id="inv-w")
            await route.report_failure(
                started.generation, overloaded(), safe_turn(), caller="office",
                invocation_id="inv-w",
            )  # fmt: skip

            async def dispatched() -> bool:
                return int(connection.llen(calls)) >= 1

            await wait_until(dispatched, TIMEOUT_S, redis_url=redis_url)

        asyncio.run(fire_one())
        [call] = [json.loads(c) for c in connection.lrange(calls, 0, -1)]
        assert call["route_id"] == "w-1"
        assert call["worker"].startswith(f"{owner.key_prefix}-node-worker")
    finally:
        workers.send_signal(signal.SIGTERM)
        out, err = workers.communicate(timeout=60)
    assert workers.returncode == 0, err[-2000:]
    assert "stopped" in out


def test_the_hosts_spread_over_the_nodes_of_a_two_node_cluster(redis_url: str) -> None:
    """On a cluster of its own (a subprocess): Ray must not pack every host on the head."""
    prefix = f"recovery-place-{uuid.uuid4().hex[:12]}"
    done = subprocess.run(
        [sys.executable, "-m", "tests.actors.hosting.placement_probe", redis_url, prefix],
        cwd=ROOT, env=child_env(), capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    _delete_prefix(redis_url, KeySpace(prefix))
    assert done.returncode == 0, done.stderr[-3000:]
    placed = json.loads(done.stdout.strip().splitlines()[-1])
    assert placed["cluster_nodes"] == 2
    assert len(set(placed["host_nodes"])) == 2, placed
