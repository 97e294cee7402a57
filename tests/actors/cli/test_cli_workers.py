"""`recovery workers` refusals, on the session's real Redis (integration tier): nothing is
started unless an installation with a dispatcher is recorded and this process holds its
installation key. (Its dispatching is in tests/actors/hosting/test_installation.py.)"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
import redis

from actors.cli.main import main
from actors.engine.settings import EngineSettings
from actors.keys import KeySpace
from actors.store.installation import InstallationRecord, write_installation
from tests.actors.conftest import _delete_prefix

pytestmark = pytest.mark.integration


@pytest.fixture
def prefix(redis_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    for variable in ("RECOVERY_INSTALLATION_KEY", "RECOVERY_KEY_PREFIX", "RECOVERY_CONFIG"):
        monkeypatch.delenv(variable, raising=False)
    chosen = f"recovery-workers-{uuid.uuid4().hex[:12]}"
    yield chosen
    _delete_prefix(redis_url, KeySpace(chosen))


def record(redis_url: str, settings: EngineSettings) -> None:
    write_installation(
        redis.Redis.from_url(redis_url), settings.keys,
        InstallationRecord(
            host_names=("route-host:x:0",), virtual_nodes=64, settings=settings.public(),
            key_digest=settings.key_digest(), owner="test", started_at=datetime.now(UTC),
        ),
    )  # fmt: skip


def workers(redis_url: str, prefix: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["workers", "--redis-url", redis_url, "--prefix", prefix, "--wait", "0"])
    return code, capsys.readouterr().err


def test_without_a_recorded_installation_it_exits_2_saying_so(
    redis_url: str, prefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = workers(redis_url, prefix, capsys)
    assert code == 2
    assert err == f"recovery workers: no installation is recorded under prefix {prefix!r}\n"


def test_an_installation_without_a_dispatcher_has_nothing_to_run(
    redis_url: str, prefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    record(redis_url, EngineSettings(key_prefix=prefix))
    code, err = workers(redis_url, prefix, capsys)
    assert code == 2
    assert "has no dispatcher to run" in err


def test_another_installation_key_is_refused_without_showing_either(
    redis_url: str,
    prefix: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    theirs = EngineSettings(
        key_prefix=prefix, dispatcher="tests.actors.fake_dispatcher:deliver",
        installation_key="the-installations-key-1234",
    )  # fmt: skip
    record(redis_url, theirs)
    monkeypatch.setenv("RECOVERY_INSTALLATION_KEY", "another-key-5678")
    code, err = workers(redis_url, prefix, capsys)
    assert code == 2
    assert "installation key" in err
    assert "the-installations-key-1234" not in err
    assert "another-key-5678" not in err


def test_a_count_below_one_is_refused(
    redis_url: str, prefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["workers", "--redis-url", redis_url, "--prefix", prefix, "--count", "0"])
    assert code == 2
    assert capsys.readouterr().err == "recovery workers: --count must be >= 1, got 0\n"
