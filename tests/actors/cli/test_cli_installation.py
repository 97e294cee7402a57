"""The commands read the installation from the same settings value its hosts write with
(actors/cli/installation.py): RECOVERY_KEY_PREFIX, REDIS_URL and the TOML file apply to
`recovery routes` as to `recovery up`; a flag wins; a refused setting is one line that
names it, never echoing a URL's password."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import fakeredis
import pytest

from actors.cli import installation
from actors.cli.main import main
from actors.keys import KeySpace


@pytest.fixture
def redis_under(monkeypatch: pytest.MonkeyPatch) -> dict[str, fakeredis.FakeRedis]:
    """Every command's connection goes to one fakeredis; answers the URLs it was asked."""
    client = fakeredis.FakeRedis(decode_responses=True)
    asked: dict[str, fakeredis.FakeRedis] = {}

    def connect(url: str) -> fakeredis.FakeRedis:
        asked[url] = client
        return client

    monkeypatch.setattr(installation, "connect", connect)
    for variable in ("RECOVERY_KEY_PREFIX", "REDIS_URL", "RECOVERY_CONFIG"):
        monkeypatch.delenv(variable, raising=False)
    client.hset(KeySpace("tenant-a").route("r-a"), mapping={"state": "active", "generation": "1"})
    client.hset(KeySpace("tenant-b").route("r-b"), mapping={"state": "active", "generation": "1"})
    return asked


def listed(capsys: pytest.CaptureFixture[str]) -> list[str]:
    out = capsys.readouterr().out
    return [json.loads(line)["route_id"] for line in out.splitlines()]


def test_the_prefix_and_url_come_from_the_environment_as_for_the_hosts(
    redis_under: dict[str, fakeredis.FakeRedis],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("RECOVERY_KEY_PREFIX", "tenant-b")
    monkeypatch.setenv("REDIS_URL", "redis://env-host:6379/0")
    assert main(["routes", "--json"]) == 0
    assert listed(capsys) == ["r-b"]
    assert list(redis_under) == ["redis://env-host:6379/0"]


def test_the_config_file_applies_and_a_flag_wins_over_it(
    redis_under: dict[str, fakeredis.FakeRedis],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = tmp_path / "recovery.toml"
    config.write_text('key_prefix = "tenant-a"\nredis_url = "redis://file-host:6379/0"\n')
    assert main(["routes", "--json", "--config", str(config)]) == 0
    assert listed(capsys) == ["r-a"]
    assert main(["routes", "--json", "--config", str(config), "--prefix", "tenant-b"]) == 0
    assert listed(capsys) == ["r-b"]
    assert list(redis_under) == ["redis://file-host:6379/0"]


def test_a_refused_setting_is_one_line_naming_it(
    redis_under: dict[str, fakeredis.FakeRedis],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("RECOVERY_EVENTS_MAXLEN", "lots")
    assert main(["routes", "--redis-url", "redis://x:6379/0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("recovery routes: RECOVERY_EVENTS_MAXLEN: must be an integer")
    assert err.count("\n") == 1
    assert redis_under == {}, "nothing connected"


def test_a_refused_url_never_shows_its_password(
    redis_under: dict[str, fakeredis.FakeRedis], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["circuits", "--redis-url", "http://user:s3cr3t-pw@db:6379"]) == 2
    err = capsys.readouterr().err
    assert "--redis-url: must be a redis://" in err
    assert "s3cr3t-pw" not in err


def test_the_installation_is_the_one_settings_value_of_the_hosts(tmp_path: Path) -> None:
    config = tmp_path / "recovery.toml"
    config.write_text('key_prefix = "tenant-a"\nclosed_ttl_s = 77\nevents_maxlen = 9\n')
    args = argparse.Namespace(redis_url="redis://h:1/0", prefix=None, config=config)
    found = installation.installation(args)
    assert found.settings == found.config.engine_settings()
    assert (found.settings.key_prefix, found.settings.closed_ttl_s) == ("tenant-a", 77)
    assert found.settings.events_maxlen == 9
    assert found.url == "redis://h:1/0"
