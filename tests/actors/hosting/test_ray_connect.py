"""Which Ray addresses are loopback ones (joined in Ray's single-host mode, as a local
`recovery up` started its Ray; tests/actors/cli/test_cli_operator.py joins one for real)."""

from __future__ import annotations

import pytest

from actors.hosting.ray_connect import LOOPBACK_NAMES, _host_of


@pytest.mark.parametrize(
    ("address", "host"),
    [
        ("127.0.0.1:6379", "127.0.0.1"),
        ("localhost:44845", "localhost"),
        ("ray://127.0.0.1:10001", "127.0.0.1"),
        ("[::1]:6379", "::1"),
        ("10.0.0.7:6379", "10.0.0.7"),
        ("head.internal:6379", "head.internal"),
        ("auto", "auto"),
    ],
)
def test_the_host_of_a_ray_address(address: str, host: str) -> None:
    assert _host_of(address) == host


def test_only_loopback_hosts_take_the_single_host_mode() -> None:
    assert {_host_of(a) in LOOPBACK_NAMES for a in ("127.0.0.1:1", "[::1]:1")} == {True}
    assert _host_of("10.0.0.7:1") not in LOOPBACK_NAMES
