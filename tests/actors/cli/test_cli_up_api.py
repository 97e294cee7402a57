"""`recovery up`'s HTTP API settings, checked before anything starts: a bad address, an
address beyond loopback without a token, a bad token file, a port in use — each one line
on stderr and exit 2, never the token. (tests/actors/api/test_api_up.py runs the API.)"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from actors.cli.main import main
from actors.engine.config import ConfigError, load_config
from actors.engine.config_values import ApiAddress

TOKEN = "a-long-enough-secret-token-123"


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("REDIS_URL", "RECOVERY_API_ADDRESS", "RECOVERY_API_TOKEN",
                 "RECOVERY_API_TOKEN_FILE", "RECOVERY_CONFIG"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RECOVERY_DATA_DIR", str(tmp_path / "data"))


def test_an_address_beyond_loopback_without_a_token_is_refused_before_anything_starts(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["up", "--api-address", "0.0.0.0:0"]) == 2
    captured = capsys.readouterr()
    assert captured.err == (
        "recovery up: api_address 0.0.0.0:0 is beyond loopback: set RECOVERY_API_TOKEN or "
        "RECOVERY_API_TOKEN_FILE (or serve on 127.0.0.1)\n"
    )
    assert captured.out == ""


def test_a_bad_address_names_its_setting(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("RECOVERY_API_ADDRESS", "localhost")
    assert main(["up"]) == 2
    assert capsys.readouterr().err == (
        "recovery up: RECOVERY_API_ADDRESS: must be HOST:PORT (or 'off'), got 'localhost'\n"
    )
    assert main(["up", "--api-address", "127.0.0.1:70000"]) == 2
    assert "--api-address: the port must be from 0 to 65535" in capsys.readouterr().err


def test_a_bad_token_file_is_refused_naming_its_line_and_never_the_token(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"alice {TOKEN}\nbob short\n", encoding="utf-8")
    monkeypatch.setenv("RECOVERY_API_TOKEN_FILE", str(tokens))
    assert main(["up"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"recovery up: {tokens}: line 2: a token must be at least 16")
    assert TOKEN not in err
    assert "short" not in err


def test_a_port_in_use_is_refused_before_the_runtime_starts(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        assert main(["up", "--api-address", f"127.0.0.1:{port}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"recovery up: api_address 127.0.0.1:{port}: cannot listen: ")
    assert err.count("\n") == 1


def test_the_api_settings_load_from_toml_and_a_bad_token_is_withheld(tmp_path: Path) -> None:
    toml = tmp_path / "recovery.toml"
    toml.write_text(
        f'api_address = "[::1]:9000"\napi_token = "{TOKEN}"\napi_token_file = "/etc/tokens"\n',
        encoding="utf-8",
    )
    config = load_config(toml, {})
    assert config.api() == ApiAddress("::1", 9000)
    assert config.api_token == TOKEN
    assert config.api_token_file == Path("/etc/tokens")
    assert TOKEN not in repr(config)
    assert load_config(None, {"RECOVERY_API_ADDRESS": "off"}).api() is None
    empty = tmp_path / "empty.toml"
    empty.write_text('api_token = ""\n', encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config(empty, {})
    assert (caught.value.field, caught.value.value) == ("api_token", "<withheld>")


def test_loopback_is_127_8_ipv6_one_and_localhost_only() -> None:
    for host in ("127.0.0.1", "127.3.2.1", "::1", "localhost", "LOCALHOST"):
        assert ApiAddress(host, 1).loopback, host
    for host in ("0.0.0.0", "::", "10.0.0.1", "api.example.com", "192.168.1.2"):
        assert not ApiAddress(host, 1).loopback, host
    assert ApiAddress.parse("[::1]:8484").url() == "http://[::1]:8484"
