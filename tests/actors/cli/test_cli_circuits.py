"""`recovery circuits`: every circuit's state, open-until, probe holder and parked count,
read straight from Redis. Circuits are written through the CircuitStore under a unique
prefix on the session's real Redis; the error paths need no Redis at all."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis

from actors.cli.main import main
from actors.engine.settings import EngineSettings
from actors.hosting.names import Owners, circuit_host_name
from actors.store.installation import InstallationRecord, write_installation
from circuits import CircuitSettings, ResourceKey
from policy.decisions import utc_iso
from tests.actors.circuit_fixtures import OTHER, RESOURCE, TTL_S, failure, hard, open_store
from tests.actors.conftest import Backend

integration = pytest.mark.integration
IDLE = ResourceKey(provider="google")


def seed(backend: Backend) -> None:
    """RESOURCE: half-open, probed by prober-1, 2 routes parked. OTHER: open until a reset
    in 15 minutes. IDLE: closed, one transient failure counted."""

    async def scenario() -> None:
        now = backend.clock.now()
        # no reset jitter: the CLI's times are compared exactly (tests/circuits check it)
        async with open_store(backend, settings=CircuitSettings(reset_jitter_s=0)) as store:
            opened = await store.record_failure(RESOURCE, hard(), "route-a", now)
            await store.park(RESOURCE, "route-a", now)
            await store.park(RESOURCE, "route-b", now)
            assert opened.open_until is not None
            await store.acquire_probe(RESOURCE, "prober-1", opened.open_until, TTL_S)
            await store.record_failure(OTHER, hard(reset_in_s=900), "route-c", now)
            await store.record_failure(IDLE, failure("provider_overloaded"), "route-d", now)

    asyncio.run(scenario())


def run(backend: Backend, *argv: str) -> int:
    now = (backend.clock.now() + timedelta(seconds=60)).isoformat()
    return main(["circuits", *argv, "--redis-url", str(backend.url), "--prefix",
                 backend.keys.prefix, "--now", now])  # fmt: skip


def iso(backend: Backend, seconds: float) -> str:
    """The seeding time plus `seconds`, as the CLI prints times."""
    return utc_iso(backend.clock.now() + timedelta(seconds=seconds))


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines()]


@integration
def test_circuits_json_shows_state_open_until_probe_holder_and_parked_count(
    real_backend: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    seed(real_backend)
    assert run(real_backend, "--json") == 0
    rows = {row["label"]: row for row in json_lines(capsys.readouterr().out)}
    assert list(rows) == sorted([RESOURCE.label, OTHER.label, IDLE.label])
    probed, other, idle = rows[RESOURCE.label], rows[OTHER.label], rows[IDLE.label]
    assert (probed["state"], probed["probe_holder"], probed["parked"]) == (
        "half_open",
        "prober-1",
        2,
    )
    assert probed["open_until"] == iso(real_backend, 60)
    assert probed["lease_expires_at"] == iso(real_backend, 90)
    assert probed["resource_id"] == RESOURCE.resource_id
    assert (other["state"], other["open_until"], other["open_in_s"]) == (
        "open", iso(real_backend, 900), 840.0,
    )  # fmt: skip
    assert (other["probe_holder"], other["parked"], other["reason"]) == (None, 0, "quota_limited")
    assert (idle["state"], idle["open_until"], idle["failures"]) == ("closed", None, 1)


@integration
def test_circuits_prints_an_aligned_table(
    real_backend: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    seed(real_backend)
    assert run(real_backend) == 0
    header, *lines = capsys.readouterr().out.splitlines()
    assert header.split() == [
        "RESOURCE", "STATE", "OPEN", "UNTIL", "DUE", "PROBE", "HOLDER", "PARKED", "HOST",
        "REASON",
    ]  # fmt: skip
    by_label = {line.split()[0]: line for line in lines}
    expiry = iso(real_backend, 90)
    assert f"prober-1 (until {expiry})" in by_label[RESOURCE.label]
    assert "in 14 min" in by_label[OTHER.label]
    assert by_label[IDLE.label].split()[1] == "closed"


def record_installation(backend: Backend, circuit_hosts: int) -> tuple[str, ...]:
    """An installation record under the backend's prefix with `circuit_hosts` hosts."""
    settings = EngineSettings(key_prefix=backend.keys.prefix, circuit_hosts=circuit_hosts)
    names = tuple(circuit_host_name(backend.keys.prefix, i) for i in range(circuit_hosts))
    write_installation(
        redis.Redis.from_url(str(backend.url)), backend.keys,
        InstallationRecord(
            host_names=("route-host:x:0",), circuit_host_names=names, virtual_nodes=64,
            settings=settings.public(), key_digest=settings.key_digest(), owner="test",
            started_at=datetime.now(UTC),
        ),
    )  # fmt: skip
    return names


@integration
def test_each_circuit_names_the_circuit_host_that_owns_it_by_the_installations_ring(
    real_backend: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    seed(real_backend)
    assert run(real_backend, "--json") == 0  # no installation recorded: no owner known
    assert {row["host"] for row in json_lines(capsys.readouterr().out)} == {None}
    names = record_installation(real_backend, 3)
    assert run(real_backend, "--json") == 0
    rows = json_lines(capsys.readouterr().out)
    owners = Owners(3, kind="circuit")
    assert {row["resource_id"]: row["host"] for row in rows} == {
        row["resource_id"]: names[owners.index_of(row["resource_id"])] for row in rows
    }
    assert run(real_backend) == 0
    table = capsys.readouterr().out
    assert all(line.split()[-2] in names for line in table.splitlines()[1:] if "closed" in line)


@integration
def test_circuits_under_an_empty_prefix_says_so(
    real_backend: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(real_backend) == 0
    assert capsys.readouterr().out.strip() == (
        f"no circuits under prefix {real_backend.keys.prefix!r}"
    )
    assert run(real_backend, "--json") == 0
    assert capsys.readouterr().out == ""


def test_circuits_without_a_redis_url_is_one_line_on_stderr(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("REDIS_URL", raising=False)
    assert main(["circuits"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("recovery circuits: no Redis URL")
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--prefix", "bad prefix"],
            "--key-prefix: must match [A-Za-z0-9._:-]{1,64} and not end with ':', got 'bad prefix'",
        ),
        (["--redis-url", "redis://127.0.0.1:1/0"], "circuit store unavailable during"),
        (
            ["--redis-url", "nota://url"],
            "--redis-url: must be a redis://, rediss:// or unix:// URL",
        ),
    ],
)
def test_circuits_problems_are_one_line_and_exit_two(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["circuits", "--redis-url", "redis://127.0.0.1:1/0", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert len(err.splitlines()) == 1
