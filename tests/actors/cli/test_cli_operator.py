"""The operator commands as an operator runs them: each `recovery route ID ACTION` and
`recovery circuit RESOURCE ACTION` is a subprocess against one running `recovery up`
(module-scoped, on the session's Redis, its own local Ray), with the environment a shell
would give it (no Ray setting inherited). The routes are started by a second orchestrator
process that attaches (tests/actors/cli/operator_client.py). Each command acts through the
installation's actors and prints the snapshot (or circuit) it produced; a stale generation
exits 3 naming both generations, a refusal 4, a usage error 2. Waits are on Redis
(keyspace notifications), never a fixed sleep."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final, cast

import pytest
import redis

from actors.cli.main import main
from actors.jobs.workers import PROJECT_ROOT
from actors.keys import KeySpace
from actors.routes.circuit_board import REASON_PARKED
from actors.routes.circuit_models import CircuitView
from actors.store.circuit_store import CircuitStore
from tests.actors.cli.operator_client import CIRCUIT_PROVIDER
from tests.actors.cli.test_cli_up import (
    START_TIMEOUT_S,
    RunningUp,
    read_route,
    up_environment,
    wait_route_state,
)
from tests.actors.conftest import _delete_prefix, unique_keys

pytestmark = pytest.mark.integration

COMMAND_TIMEOUT_S: Final = 180.0  # a CLI start and a Ray attach take ~15 s on 2 busy cores
CURRENT: Final = "(the route's current one)"


@dataclass(frozen=True)
class Installation:
    """The running `up`, its environment and the routes the orchestrator started."""

    env: dict[str, str]
    keys: KeySpace
    redis_url: str
    routes: dict[str, list[Any]]


def run_module(env: dict[str, str], module: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", module, *args], cwd=PROJECT_ROOT, env=env, text=True,
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip


def finished(process: subprocess.Popen[str]) -> subprocess.CompletedProcess[str]:
    out, err = process.communicate(timeout=COMMAND_TIMEOUT_S)
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def recovery(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """`recovery ARGS...` run to its end."""
    return finished(run_module(env, "actors.cli", *args))


def recovery_together(
    env: dict[str, str], *commands: Sequence[str]
) -> list[subprocess.CompletedProcess[str]]:
    """Independent `recovery` commands run side by side (each on a route of its own)."""
    started = [run_module(env, "actors.cli", *command) for command in commands]
    return [finished(process) for process in started]


def orchestrator(env: dict[str, str], *args: str) -> dict[str, list[Any]]:
    done = finished(run_module(env, "tests.actors.cli.operator_client", *args))
    assert done.returncode == 0, done.stderr[-3000:]
    found: dict[str, list[Any]] = json.loads(done.stdout)
    return found


def fields(stdout: str) -> dict[str, str]:
    """`recovery route ID`'s labelled lines as {label: value}."""
    pairs = (line.split(":", 1) for line in stdout.splitlines() if ":" in line)
    return {name.strip(): value.strip() for name, value in pairs}


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-3000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def installation(
    redis_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Installation]:
    keys = unique_keys()
    folder = tmp_path_factory.mktemp("operator-up")
    env = up_environment(redis_url, keys, folder / "data")
    up = RunningUp(env, folder / "up.stderr")
    try:
        up.wait_line("ready:", START_TIMEOUT_S)
        yield Installation(env, keys, redis_url, orchestrator(env, "setup"))
        assert up.stop(signal.SIGTERM) == 0, up.report()
    finally:
        if up.process.poll() is None:
            up.kill()
        _delete_prefix(redis_url, keys)


def test_the_orchestrator_left_the_routes_where_the_operator_finds_them(
    installation: Installation,
) -> None:
    assert installation.routes == {
        "op-retry": ["retry_wait", 1], "op-skip": ["retry_wait", 1],
        "op-cancel": ["retry_wait", 1], "op-manual": ["active", 1], "op-seed": ["retry_wait", 1],
    }  # fmt: skip


def test_retry_now_skip_and_cancel_act_on_waiting_routes_and_print_their_snapshots(
    installation: Installation,
) -> None:
    env = installation.env
    retried, skipped, cancelled = recovery_together(
        env,
        ["route", "op-retry", "retry-now"],
        ["route", "op-skip", "skip", "--generation", "1", "--json"],
        ["route", "op-cancel", "cancel", "--json"],
    )
    shown = fields(ok(retried))
    assert shown["state"] == "retrying (generation 1)"
    assert shown["route"] == "op-retry"
    assert f"recovery route op-retry retry-now: at generation 1 {CURRENT}" in retried.stderr
    skip = json.loads(ok(skipped))
    assert (skip["route_id"], skip["state"], skip["generation"]) == ("op-skip", "active", 2)
    assert skip["candidate_id"] == "charlie"
    assert "at generation" not in skipped.stderr  # it was given
    cancel = json.loads(ok(cancelled))
    assert (cancel["state"], cancel["generation"]) == ("action_required", 1)
    assert f"recovery route op-cancel cancel: at generation 1 {CURRENT}" in cancelled.stderr
    # what each printed is what the route host wrote
    for route_id, state in (("op-retry", "retrying"), ("op-skip", "active")):
        stored = asyncio.run(read_route(installation.redis_url, installation.keys, route_id))
        assert stored.state == state


def test_stop_resume_and_a_refusal_by_the_routes_state(installation: Installation) -> None:
    env = installation.env
    stopped = json.loads(ok(recovery(env, "route", "op-manual", "stop", "--json")))
    assert (stopped["state"], stopped["generation"]) == ("action_required", 1)
    resumed = fields(ok(recovery(env, "route", "op-manual", "resume", "--generation", "1")))
    assert resumed["state"] == "active (generation 1)"
    refused = recovery(env, "route", "op-manual", "resume")
    assert refused.returncode == 4, refused.stderr
    assert refused.stdout == ""
    assert refused.stderr.splitlines()[-1] == (
        "recovery route op-manual resume: refused: route 'op-manual' is 'active' "
        "(generation 1); this transition needs one of action_required; nothing was changed"
    )


def test_start_fresh_then_a_stale_generation_exits_3_naming_both_then_close(
    installation: Installation, capsys: pytest.CaptureFixture[str]
) -> None:
    env = installation.env
    fresh = json.loads(ok(recovery(env, "route", "op-cancel", "start-fresh", "--json")))
    assert (fresh["state"], fresh["generation"]) == ("active", 2)
    stale = recovery(env, "route", "op-cancel", "stop", "--generation", "1")
    assert stale.returncode == 3, stale.stderr
    assert stale.stdout == ""
    assert stale.stderr.splitlines()[-1] == (
        "recovery route op-cancel stop: stale generation: expected 1, but the route is at "
        "generation 2 (active); nothing was changed (`recovery route op-cancel` shows it; "
        "without --generation an action takes the current one)"
    )
    stored = asyncio.run(read_route(installation.redis_url, installation.keys, "op-cancel"))
    assert (stored.state, stored.generation) == ("active", 2)  # the stale stop did nothing
    # a usage error is another code: argparse's 2, before anything is read
    with pytest.raises(SystemExit) as usage:
        main(["route", "op-cancel", "stop", "--generation", "one"])
    assert usage.value.code == 2
    assert "argument --generation: not an integer: 'one'" in capsys.readouterr().err
    closed = fields(ok(recovery(env, "route", "op-cancel", "close", "--generation", "2")))
    assert closed["state"] == "closed (generation 2)"


async def circuits_of(url: str, keys: KeySpace, provider: str) -> list[CircuitView]:
    async with CircuitStore.connect(url, keys=keys, max_connections=2) as store:
        return [view for view in await store.all_circuits() if view.resource.provider == provider]


def circuit_events(url: str, keys: KeySpace, resource_id: str) -> list[dict[str, str]]:
    client = redis.Redis.from_url(url, decode_responses=True)
    try:
        raw = client.xrange(keys.circuit_events)
        entries = cast(list[tuple[str, dict[str, str]]], raw)  # decode_responses: text
    finally:
        client.close()
    events = [{"id": entry_id, **found} for entry_id, found in entries]
    return [event for event in events if event["resource_id"] == resource_id]


def test_an_open_override_parks_a_new_start_and_a_close_releases_it(
    installation: Installation,
) -> None:
    url, keys, env = installation.redis_url, installation.keys, installation.env
    views = asyncio.run(circuits_of(url, keys, CIRCUIT_PROVIDER))
    # the seed route's failure was counted on its account's circuit (and the provider's)
    [account] = [v for v in views if v.resource.credential_fingerprint is not None]
    label, resource_id = account.resource.label, account.resource_id
    before = datetime.now(UTC)
    opened = json.loads(ok(recovery(env, "circuit", label, "open", "--until", "10m", "--json")))
    assert (opened["resource_id"], opened["state"]) == (resource_id, "open")
    assert opened["reason"] == "operator"
    until = datetime.fromisoformat(opened["open_until"])
    latest = datetime.now(UTC) + timedelta(minutes=10, seconds=1)
    assert before + timedelta(minutes=10) <= until <= latest
    assert until.microsecond == 0  # a duration counts from the next whole second
    override = opened["override"]
    assert (override["action"], override["changed"], override["released"]) == ("open", True, 0)
    assert override["event_id"] == circuit_events(url, keys, resource_id)[0]["id"]
    assert opened["host"] == f"circuit-host:{keys.prefix}:0"

    started = orchestrator(env, "start", "op-parked")
    assert started == {"op-parked": ["retry_wait", 1]}
    parked = asyncio.run(read_route(url, keys, "op-parked"))
    assert (parked.reason, parked.circuit) == (REASON_PARKED, resource_id)

    closed = ok(recovery(env, "circuit", resource_id, "close"))
    assert closed.splitlines()[1].split()[:2] == [label, "closed"]
    assert closed.splitlines()[-1].startswith(
        "override: closed, 1 parked route(s) released in waves (event "
    )
    asyncio.run(wait_route_state(url, keys, "op-parked", "retrying"))
    events = circuit_events(url, keys, resource_id)
    assert [(e["cause"], e["from_state"], e["state"], e["version"]) for e in events] == [
        ("operator_open", "closed", "open", "2"), ("operator_close", "open", "closed", "3"),
    ]  # fmt: skip
    assert events[0]["open_until"] == opened["open_until"]


def test_without_an_action_route_still_shows_and_a_circuit_nobody_has_exits_2(
    installation: Installation, capsys: pytest.CaptureFixture[str]
) -> None:
    where = ["--redis-url", installation.redis_url, "--prefix", installation.keys.prefix]
    assert main(["route", "op-seed", *where]) == 0
    assert fields(capsys.readouterr().out)["state"] == "retry_wait (generation 1)"
    assert main(["circuit", "nobody/*/*", "close", *where]) == 2
    assert capsys.readouterr().err.startswith(
        f"recovery circuit nobody/*/* close: no circuit 'nobody/*/*' under prefix "
        f"{installation.keys.prefix!r}"
    )
