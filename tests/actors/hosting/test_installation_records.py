"""The installation record and the owner lease (actors/store/installation.py) on fakeredis
with Lua, and how a process's settings are compared with the installation's."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime

import fakeredis
import pytest

from actors.engine.settings import EngineSettings
from actors.errors import StoreUnavailableError
from actors.hosting import runtime as runtime_module
from actors.hosting.installation import (
    InstallationMismatchError,
    first_mismatch,
    live_record,
    refuse_ring_change,
)
from actors.hosting.runtime import RecoveryRuntime
from actors.keys import KeySpace
from actors.store.installation import (
    CorruptInstallationError,
    InstallationRecord,
    OwnerLease,
    read_installation,
    write_installation,
)
from circuits import CircuitSettings

KEYS = KeySpace("inst-test")


def lease(connection: fakeredis.FakeRedis, token: str) -> OwnerLease:
    return OwnerLease(connection, KEYS, token, ttl_s=10)


def record_of(settings: EngineSettings, hosts: int = 2) -> InstallationRecord:
    return InstallationRecord(
        host_names=tuple(f"route-host:{settings.key_prefix}:{i}" for i in range(hosts)),
        virtual_nodes=64, settings=settings.public(), key_digest=settings.key_digest(),
        owner="owner-token", started_at=datetime(2026, 12, 1, tzinfo=UTC),
    )  # fmt: skip


def test_one_token_owns_the_lease_until_it_gives_it_up() -> None:
    connection = fakeredis.FakeRedis()
    first, second = lease(connection, "a"), lease(connection, "b")
    assert first.claim()
    assert not second.claim()
    assert first.claim(), "the holder's claim renews"
    assert first.renew()
    assert not second.renew()
    assert not second.release()
    assert first.holder() == "a"
    assert 0 < connection.pttl(KEYS.installation_owner) <= 10_000
    assert first.release()
    assert first.holder() is None
    assert second.claim()


def test_a_lapsed_lease_goes_to_the_next_claimant() -> None:
    connection = fakeredis.FakeRedis()
    first = lease(connection, "a")
    assert first.claim()
    connection.delete(KEYS.installation_owner)  # what its TTL does when the owner died
    assert not first.renew()
    assert lease(connection, "b").claim()


def test_the_record_round_trips_and_holds_no_installation_key() -> None:
    connection = fakeredis.FakeRedis()
    settings = EngineSettings(key_prefix="inst-test", installation_key="s3cret-key-value")
    assert read_installation(connection, KEYS) is None
    write_installation(connection, KEYS, record_of(settings))
    found = read_installation(connection, KEYS)
    assert found == record_of(settings)
    stored = connection.get(KEYS.installation)
    assert isinstance(stored, bytes)
    assert b"s3cret-key-value" not in stored


@pytest.mark.parametrize("stored", ["not json", '{"host_names": []}', "[]"])
def test_an_unreadable_record_raises_its_own_error(stored: str) -> None:
    connection = fakeredis.FakeRedis()
    connection.set(KEYS.installation, stored)
    with pytest.raises(CorruptInstallationError) as raised:
        read_installation(connection, KEYS)
    assert raised.value.key == KEYS.installation


def test_equal_settings_match_and_the_first_difference_is_named() -> None:
    ours = EngineSettings(key_prefix="inst-test", closed_ttl_s=50)
    record = record_of(ours)
    assert first_mismatch(record, 2, 64, ours) is None
    assert first_mismatch(record, 3, 64, ours) == ("hosts", 3, 2)
    assert first_mismatch(record, 2, 32, ours) == ("virtual_nodes", 32, 64)
    other_ttl = EngineSettings(key_prefix="inst-test", closed_ttl_s=60)
    assert first_mismatch(record, 2, 64, other_ttl) == ("closed_ttl_s", 60, 50)
    circuits = EngineSettings(
        key_prefix="inst-test", closed_ttl_s=50,
        circuit_settings=CircuitSettings(transient_threshold=9),
    )  # fmt: skip
    assert first_mismatch(record, 2, 64, circuits) == ("circuit_transient_threshold", 9, 3)
    keyed = EngineSettings(key_prefix="inst-test", closed_ttl_s=50, installation_key="other")
    assert first_mismatch(record, 2, 64, keyed) == ("installation_key", "<withheld>", "<withheld>")


def test_a_new_owner_may_change_settings_but_not_the_ring() -> None:
    record = record_of(EngineSettings(key_prefix="inst-test"))
    refuse_ring_change(record, 2, 64)
    with pytest.raises(InstallationMismatchError) as raised:
        refuse_ring_change(record, 4, 64)
    assert (raised.value.setting, raised.value.wanted, raised.value.recorded) == ("hosts", 4, 2)
    assert "runs with hosts=2, this process asks for hosts=4" in str(raised.value)


def test_a_runtime_on_an_unreachable_redis_fails_fast_before_ray_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started: list[object] = []
    monkeypatch.setattr(runtime_module, "start_ray", lambda *a, **k: started.append(a))
    began = time.monotonic()
    with pytest.raises(StoreUnavailableError):
        RecoveryRuntime(redis_url="redis://127.0.0.1:1/0", key_prefix="inst-test").start()
    assert time.monotonic() - began < 10
    assert started == [], "Ray was started before Redis answered"


def test_a_process_never_joins_an_owner_that_stopped_renewing_its_lease() -> None:
    """Chaos bug C: the lease of an owner killed a moment ago outlives it by up to its TTL;
    a process starting then joined the record and attached to a Ray that had died. It now
    waits for the lease to lapse and takes it."""
    connection = fakeredis.FakeRedis()
    settings = EngineSettings(key_prefix="inst-test")
    dead = OwnerLease(connection, KEYS, "owner-token", ttl_s=0.3)
    assert dead.claim()
    write_installation(connection, KEYS, record_of(settings))
    joiner = lease(connection, "joiner")
    assert live_record(connection, KEYS, joiner) is None
    assert joiner.holder() == "joiner"


def test_a_process_joins_an_owner_seen_renewing_its_lease() -> None:
    connection = fakeredis.FakeRedis()
    settings = EngineSettings(key_prefix="inst-test")
    owner = lease(connection, "owner-token")
    assert owner.claim()
    write_installation(connection, KEYS, record_of(settings))
    stop = threading.Event()

    def keep() -> None:  # the owner's keeper, renewing faster than the real one
        while not stop.wait(0.02):
            owner.renew()

    keeper = threading.Thread(target=keep)
    keeper.start()
    try:
        assert live_record(connection, KEYS, lease(connection, "joiner")) == record_of(settings)
    finally:
        stop.set()
        keeper.join()
    assert owner.holder() == "owner-token"
