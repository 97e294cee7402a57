"""The operator commands' arguments, checked before anything runs: `--until` values,
generations, which circuit a RESOURCE names, and the refusals that come before any Ray
(no installation, no live owner). Fast: no Ray; the last ones read the session's Redis."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import cast

import pytest
import redis

from actors.cli.circuit_override import select_circuit, until_of, until_value
from actors.cli.common import CliError
from actors.cli.main import main
from actors.cli.route_actions import ROUTE_ACTIONS, generation_value
from actors.hosting.circuit_handle import NoCircuitHostsError, circuit_handle
from actors.hosting.names import Owners
from actors.hosting.runtime import RecoveryRuntime
from actors.keys import KeySpace
from actors.routes.circuit_models import CircuitView
from actors.store.circuit_store import CircuitStore
from actors.store.installation import InstallationRecord, write_installation
from circuits import ResourceKey
from tests.actors.cli.test_cli_up import write_waiting_route
from tests.actors.conftest import _delete_prefix, unique_keys
from tests.circuits.builders import failure

NOW = datetime(2025, 6, 1, 12, 0, 0, 250_000, tzinfo=UTC)


def test_the_route_actions_are_the_documented_seven() -> None:
    assert ROUTE_ACTIONS == (
        "retry-now", "skip", "cancel", "stop", "resume", "start-fresh", "close",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90s", 90),
        ("10m", 600),
        ("2h", 7200),
        ("1d", 86_400),
        ("1h30m", 5400),
        ("1d2h3m4s", 93_784),
    ],
)
def test_until_takes_a_duration(text: str, seconds: int) -> None:
    assert until_value(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2025-06-01T18:00:00Z", datetime(2025, 6, 1, 18, tzinfo=UTC)),
        ("2025-06-01T20:00:00+02:00", datetime(2025, 6, 1, 18, tzinfo=UTC)),
    ],
)
def test_until_takes_an_iso_time_with_a_zone_in_utc(text: str, expected: datetime) -> None:
    value = until_value(text)
    assert value == expected
    assert isinstance(value, datetime)
    assert value.tzinfo is UTC


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("0m", "a duration must be longer than 0, got '0m'"),
        ("3651d", "a duration must be at most 3650 days, got '3651d'"),
        ("2025-06-01T18:00:00", "needs a time zone (Z or +02:00, say), got '2025-06-01T18:00:00'"),
        ("tomorrow", "not an ISO-8601 time with a zone nor a duration like 10m: 'tomorrow'"),
        ("10 m", "not an ISO-8601 time with a zone nor a duration like 10m: '10 m'"),
        ("", "not an ISO-8601 time with a zone nor a duration like 10m: ''"),
        ("m", "not an ISO-8601 time with a zone nor a duration like 10m: 'm'"),
    ],
)
def test_a_bad_until_is_refused_naming_it(text: str, message: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError) as caught:
        until_value(text)
    assert str(caught.value) == message


def test_a_duration_counts_from_the_next_whole_second() -> None:
    assert until_of(timedelta(minutes=10), NOW) == datetime(2025, 6, 1, 12, 10, 1, tzinfo=UTC)
    whole = NOW.replace(microsecond=0)
    assert until_of(timedelta(seconds=5), whole) == whole + timedelta(seconds=5)


def test_an_until_in_the_past_is_refused_naming_it_and_now() -> None:
    with pytest.raises(CliError) as caught:
        until_of(datetime(2025, 6, 1, 11, tzinfo=UTC), NOW)
    assert str(caught.value) == (
        "--until 2025-06-01T11:00:00Z is not in the future (now 2025-06-01T12:00:00.250000Z)"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [("0", "must be >= 1, got 0"), ("-2", "must be >= 1, got -2"), ("x", "not an integer: 'x'")],
)
def test_a_generation_is_an_integer_from_1(text: str, message: str) -> None:
    assert generation_value("7") == 7
    with pytest.raises(argparse.ArgumentTypeError, match=message):
        generation_value(text)


def view(provider: str, fingerprint: str | None = None) -> CircuitView:
    return CircuitView(resource=ResourceKey(provider=provider, credential_fingerprint=fingerprint))


def test_a_resource_names_a_circuit_by_id_or_by_label() -> None:
    one, other = view("alpha", "a" * 64), view("alpha")
    circuits = [one, other]
    assert select_circuit(circuits, one.resource_id, "p") is one
    assert select_circuit(circuits, "alpha/*/aaaaaaaaaaaa", "p") is one
    assert select_circuit(circuits, "alpha/*/*", "p") is other


def test_a_label_two_circuits_share_is_refused_listing_their_ids() -> None:
    # two credentials whose fingerprints agree on the 12 characters a label shows
    one, other = view("alpha", "a" * 12 + "b" * 52), view("alpha", "a" * 12 + "c" * 52)
    assert one.resource.label == other.resource.label
    with pytest.raises(CliError) as caught:
        select_circuit([one, other], one.resource.label, "p")
    assert str(caught.value) == (
        f"label 'alpha/*/aaaaaaaaaaaa' names 2 circuits: {one.resource_id} (alpha), "
        f"{other.resource_id} (alpha); pass one resource id"
    )
    assert select_circuit([one, other], other.resource_id, "p") is other


def test_a_resource_nobody_has_is_refused_saying_where_to_look() -> None:
    with pytest.raises(CliError, match=r"^no circuit 'b' under prefix 'p': `recovery circuits`"):
        select_circuit([view("alpha")], "b", "p")
    with pytest.raises(CliError, match="no circuit"):
        select_circuit([view("alpha")], "0" * 32, "p")


def test_a_circuit_handle_goes_to_the_host_the_circuit_ring_picks() -> None:
    hosts = ["host-0", "host-1", "host-2"]
    runtime = cast(RecoveryRuntime, SimpleNamespace(circuit_host_handles=hosts, key_prefix="p"))
    for provider in ("alpha", "bravo", "charlie", "delta"):
        resource = ResourceKey(provider=provider)
        index = Owners(3, kind="circuit").index_of(resource.resource_id)
        assert circuit_handle(runtime, resource).host == hosts[index]
    without = cast(RecoveryRuntime, SimpleNamespace(circuit_host_handles=[], key_prefix="p"))
    with pytest.raises(NoCircuitHostsError, match=r"installation 'p' has no circuit hosts"):
        circuit_handle(without, ResourceKey(provider="alpha"))


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["route", "r-1", "--generation", "2"], "--generation goes with an ACTION"),
        (["route", "r-1", "stop", "--history"], "--history goes with showing a route"),
        (["route", "no spaces", "stop"], "invalid route id 'no spaces'"),
        (["circuit", "x", "open"], "open needs --until T"),
        (["circuit", "x", "close", "--until", "10m"], "--until goes with open, not with close"),
    ],
)
def test_a_misused_option_exits_2_before_anything_is_read(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*argv, "--redis-url", "redis://127.0.0.1:1/0"]) == 2
    err = capsys.readouterr().err
    assert message in err, err
    assert err.count("\n") == 1


def test_an_unknown_action_is_argparses_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["route", "r-1", "unstick"])
    assert caught.value.code == 2
    assert "argument ACTION: invalid choice: 'unstick'" in capsys.readouterr().err


@pytest.fixture
def keys(redis_url: str) -> Iterator[KeySpace]:
    chosen = unique_keys()
    yield chosen
    _delete_prefix(redis_url, chosen)


def record(keys: KeySpace) -> InstallationRecord:
    return InstallationRecord(
        host_names=("route-host:x:0",), virtual_nodes=64, ray_address="127.0.0.1:1",
        settings={"key_prefix": keys.prefix}, key_digest="d", owner="gone",
        started_at=NOW,
    )  # fmt: skip


@pytest.mark.integration
def test_an_action_without_a_running_installation_exits_5_before_any_ray(
    redis_url: str, keys: KeySpace, capsys: pytest.CaptureFixture[str]
) -> None:
    where = ["--redis-url", redis_url, "--prefix", keys.prefix]
    assert main(["route", "r-1", "stop", *where]) == 2  # not even the route
    assert "no route 'r-1' under prefix" in capsys.readouterr().err
    asyncio.run(write_waiting_route(redis_url, keys, "r-1", delay_s=3600))
    assert main(["route", "r-1", "stop", *where]) == 5
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "recovery route r-1 stop: at generation 1 (the route's current one)",
        f"recovery route r-1 stop: no installation is recorded under prefix {keys.prefix!r}: "
        "start one with `recovery up`",
    ]
    client = redis.Redis.from_url(redis_url)
    try:
        write_installation(client, keys, record(keys))  # its owner's lease long lapsed
    finally:
        client.close()
    assert main(["route", "r-1", "skip", "--generation", "1", *where]) == 5
    assert capsys.readouterr().err == (
        f"recovery route r-1 skip: the installation under prefix {keys.prefix!r} has no live "
        "owner: is `recovery up` running?\n"
    )

    async def known_circuit() -> str:
        async with CircuitStore.connect(redis_url, keys=keys) as store:
            written = await store.record_failure(
                ResourceKey(provider="alpha"), failure("quota_limited"), "r-1", NOW
            )
        return written.resource.label

    label = asyncio.run(known_circuit())
    assert main(["circuit", label, "close", *where]) == 5
    assert "has no live owner" in capsys.readouterr().err
