"""`recovery top`: live counts from Redis for a person at a terminal.

Routes are written through the RouteStore under a unique prefix on the session's real Redis
(as the CLI inspection tests do), ledgers through the DispatchLedger and circuits through
the CircuitStore; `recovery top --once` then reads them back with `actors.cli.main.main`. The
option errors need no Redis at all."""

from __future__ import annotations

import asyncio
import json
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import redis

from actors.cli.main import main
from actors.cli.top import run_live
from actors.cli.top_frame import RawReads, TopFrame, compute_frame
from actors.cli.top_reads import TopLimits, key_kind
from actors.jobs.ledger import DispatchLedger
from actors.keys import AttemptFence, KeySpace
from actors.routes.models import Transition
from tests.actors.circuit_fixtures import OTHER, RESOURCE, failure, hard, open_store
from tests.actors.conftest import Backend
from tests.actors.route_builders import (
    T0,
    cancel_wait,
    close,
    in_seconds,
    retry_wait,
    skip_now,
    start,
)

integration = pytest.mark.integration
WINDOW = "3600"  # seconds: every event a test writes is inside the window
TRANSITIONS = 10  # what seed_fleet applies


def apply(backend: Backend, *transitions: Transition) -> None:
    async def scenario() -> None:
        async with backend.store() as store:
            for transition in transitions:
                await store.apply(transition)

    asyncio.run(scenario())


def seed_fleet(backend: Backend) -> None:
    """Two waits (5 s and 20 s), two active, one switching, one closed: ten transitions."""
    apply(
        backend,
        start("r-soon"),
        retry_wait("r-soon", 1, deadline=in_seconds(5)),
        start("r-late"),
        retry_wait("r-late", 1, deadline=in_seconds(20), ordinal=2),
        start("r-idle"),
        start("r-skipped"),
        skip_now("r-skipped", 1),
        start("r-closed"),
        close("r-closed", 1),
        start("r-needs-you"),
    )


def top(backend: Backend, *argv: str) -> int:
    return main(["top", *argv, "--redis-url", str(backend.url), "--prefix", backend.keys.prefix])


def frame_json(backend: Backend, capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    assert top(backend, "--once", "--json", "--window", WINDOW, *argv) == 0
    (line,) = capsys.readouterr().out.splitlines()
    return json.loads(line)


@integration
def test_once_json_counts_routes_schedules_and_transitions(
    real_backend: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    seed_fleet(real_backend)
    apply(
        real_backend,
        retry_wait("r-needs-you", 1, deadline=in_seconds(60)),
        cancel_wait("r-needs-you", 1),
    )

    frame = frame_json(real_backend, capsys)

    assert frame["prefix"] == real_backend.keys.prefix
    assert frame["routes"]["exact"] is True
    assert frame["routes"]["by_state"] == {
        "active": 1, "retry_wait": 2, "waiting_for_reset": 0, "retrying": 0,
        "switching": 1, "action_required": 1, "closed": 1,
    }  # fmt: skip
    assert frame["routes"]["seen"] == 6
    schedules = frame["schedules"]
    assert (schedules["pending"], schedules["overdue"]) == (2, 2)  # T0 is in the past
    assert [e["route_id"] for e in schedules["next"]] == ["r-soon", "r-late"]
    soon = schedules["next"][0]
    assert soon["deadline"] == "2026-03-01T12:00:05Z"
    assert (soon["state"], soon["pending_outcome"], soon["code"]) == (
        "retry_wait", "retry", "provider_overloaded",
    )  # fmt: skip
    transitions = frame["transitions"]
    assert transitions["count"] == TRANSITIONS + 2
    assert transitions["exact"] is True
    assert transitions["per_s"] == pytest.approx((TRANSITIONS + 2) / float(WINDOW), abs=1e-3)
    assert transitions["by_state"] == {
        "active": 6, "retry_wait": 3, "switching": 1, "closed": 1, "action_required": 1,
    }  # fmt: skip
    assert transitions["stream_length"] == TRANSITIONS + 2
    assert frame["circuits"] == {"closed": 0, "open": 0, "half_open": 0}
    assert frame["dispatches"]["by_state"] == {
        "queued": 0, "started": 0, "delivered": 0, "not_dispatched": 0, "failed": 0,
    }  # fmt: skip


@integration
def test_once_json_counts_dispatch_outcomes_and_circuits(
    real_backend: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    assert real_backend.url is not None
    connection = redis.Redis.from_url(real_backend.url)
    ledger = DispatchLedger(connection, real_backend.keys)
    ledger.queue(AttemptFence("r-a", 1, 1), "job-a", T0)
    for route_id in ("r-b", "r-c", "r-d"):
        ledger.start(AttemptFence(route_id, 1, 1), "worker-1", T0)
    ledger.finish(AttemptFence("r-c", 1, 1), "delivered", T0)
    ledger.finish(AttemptFence("r-d", 1, 1), "not_dispatched", T0)
    connection.close()

    async def open_two_circuits() -> None:
        async with open_store(real_backend) as store:
            await store.record_failure(RESOURCE, hard(), "route-a", T0)
            await store.record_failure(OTHER, failure("provider_overloaded"), "route-b", T0)

        async with open_store(real_backend) as store:
            await store.park(RESOURCE, "route-a", T0)
            await store.park(RESOURCE, "route-e", T0)

    asyncio.run(open_two_circuits())

    frame = frame_json(real_backend, capsys, "--deadlines", "0")

    assert frame["dispatches"]["by_state"] == {
        "queued": 1, "started": 1, "delivered": 1, "not_dispatched": 1, "failed": 0,
    }  # fmt: skip
    assert frame["dispatches"]["exact"] is True
    assert frame["circuits"] == {"closed": 1, "open": 1, "half_open": 0}
    assert (frame["parked"], frame["circuit_hosts"]) == (2, None)  # no installation recorded
    assert frame["schedules"] == {"pending": 0, "overdue": 0, "next": []}
    assert frame["transitions"]["count"] == 0


@integration
def test_once_prints_a_readable_frame(
    real_backend: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    seed_fleet(real_backend)

    assert top(real_backend, "--once", "--window", WINDOW) == 0

    out = capsys.readouterr().out
    assert f"recovery top  prefix {real_backend.keys.prefix}" in out
    assert "routes: 6 (exact: a full SCAN)" in out
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines() if line.strip()}
    assert rows["retry_wait"] == ["2"]
    assert rows["switching"] == ["1"]
    assert "schedules: 2 pending, 2 overdue (exact)" in out
    assert rows["r-soon"][:2] == ["retry_wait", "retry"]
    assert "overdue" in " ".join(rows["r-soon"])
    assert f"transitions: {round(TRANSITIONS / float(WINDOW), 3):g}/s" in out
    assert "circuits: none" in out


@integration
def test_a_scan_budget_smaller_than_the_fleet_gives_a_sample_not_totals(
    real_backend: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet = 3000

    async def start_fleet() -> None:
        async with real_backend.store() as store:
            await store.apply_many([start(f"r-{index}") for index in range(fleet)])

    asyncio.run(start_fleet())

    sampled = frame_json(real_backend, capsys, "--scan-keys", "1000")["routes"]
    full = frame_json(real_backend, capsys, "--scan-keys", "1000000")["routes"]

    assert sampled["exact"] is False
    assert 0 < sampled["seen"] < fleet
    assert sampled["by_state"]["active"] == sampled["seen"]
    assert full["exact"] is True
    assert full["by_state"]["active"] == full["seen"] == fleet


@integration
def test_the_live_view_redraws_fresh_counts_until_stopped(real_backend: Backend) -> None:
    assert real_backend.url is not None
    apply(real_backend, start("r-1"))
    frames: list[TopFrame] = []
    stop = threading.Event()

    def shown(frame: TopFrame) -> None:
        frames.append(frame)
        if len(frames) == 1:
            apply(real_backend, start("r-2"))  # the next frame must see it
        else:
            stop.set()

    client = redis.Redis.from_url(real_backend.url, decode_responses=True)
    with client:
        run_live(client, real_backend.keys, TopLimits(), 0.01, stop=stop, shown=shown)

    assert [f.routes.by_state["active"] for f in frames] == [1, 2]


@integration
def test_without_a_url_top_reads_the_embedded_redis_socket(
    real_backend: Backend,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    assert real_backend.url is not None
    if not real_backend.url.startswith("unix://"):
        pytest.skip("the session Redis listens on TCP; the embedded default is a socket")
    (tmp_path / "redis.sock").symlink_to(real_backend.url.removeprefix("unix://"))
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.setenv("RECOVERY_DATA_DIR", str(tmp_path))
    apply(real_backend, start("r-1"))

    assert main(["top", "--once", "--json", "--prefix", real_backend.keys.prefix]) == 0
    assert json.loads(capsys.readouterr().out)["routes"]["by_state"]["active"] == 1


def test_without_a_url_or_embedded_socket_top_says_where_it_looked(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.setenv("RECOVERY_DATA_DIR", str(tmp_path))

    assert main(["top", "--once"]) == 2

    err = capsys.readouterr().err
    assert err.startswith("recovery top: no Redis URL: pass --redis-url URL or set REDIS_URL")
    assert str(tmp_path / "redis.sock") in err
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize(
    ("argv", "complaint"),
    [
        (["--interval", "0"], "argument --interval: must be a number of seconds > 0, got '0'"),
        (["--interval", "soon"], "argument --interval: not a number of seconds: 'soon'"),
        (["--interval", "nan"], "argument --interval: must be a number of seconds > 0"),
        (["--window", "-5"], "argument --window: must be a number of seconds > 0, got '-5'"),
        (["--deadlines", "101"], "argument --deadlines: must be an integer from 0 to 100"),
        (["--scan-keys", "0"], "argument --scan-keys: must be an integer >= 1, got '0'"),
        (["--scan-keys", "many"], "argument --scan-keys: not an integer: 'many'"),
    ],
)
def test_a_bad_option_value_is_a_usage_error_naming_option_and_value(
    argv: list[str], complaint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["top", "--once", *argv])

    assert exited.value.code == 2
    assert complaint in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "complaint"),
    [
        (["--json"], "recovery top: --json needs --once (the live view is for a terminal)"),
        (
            ["--once", "--prefix", "bad prefix"],
            "recovery top: --key-prefix: must match [A-Za-z0-9._:-]{1,64} and not end with "
            "':', got 'bad prefix'",
        ),
        (
            ["--once", "--redis-url", "redis://127.0.0.1:1/0"],
            "recovery top: cannot reach Redis at redis://127.0.0.1:1/0",
        ),
    ],
)
def test_problems_are_one_line_on_stderr_and_exit_two(
    argv: list[str], complaint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["top", "--redis-url", "redis://127.0.0.1:1/0", *argv]) == 2

    err = capsys.readouterr().err
    assert err.startswith(complaint)
    assert len(err.splitlines()) == 1


def test_key_kind_keeps_to_its_own_prefix() -> None:
    keys = KeySpace("recovery")

    assert key_kind(keys, "recovery:route:r-1") == "route"
    assert key_kind(keys, "recovery:dispatch:r-1:2:3") == "dispatch"
    assert key_kind(keys, "recovery:route:x:route:r-1") is None  # prefix recovery:route:x
    assert key_kind(keys, "recovery:schedule:r-1") is None
    assert key_kind(keys, "other:route:r-1") is None


def raw_reads(**changes: Any) -> RawReads:
    fields: dict[str, Any] = {
        "prefix": "recovery", "now": datetime(2026, 3, 1, 12, 0, 10, tzinfo=UTC),
        "schedules_total": 0, "schedules_overdue": 0, "next_schedules": [], "window_s": 10.0,
        "event_cap": 5000, "events": [], "stream_length": 0, "route_states": [],
        "ledgers": [], "scan_complete": True, "scan_calls": 1, "circuit_states": [],
    }  # fmt: skip
    return RawReads(**{**fields, **changes})


def test_a_capped_events_window_estimates_the_rate_from_the_entries_read() -> None:
    now_ms = int(datetime(2026, 3, 1, 12, 0, 10, tzinfo=UTC).timestamp() * 1000)
    # 4 entries read (the cap), the oldest 2 s ago: 2 per second, not 4 per 10 s.
    events = [(f"{now_ms - 500 * i}-0", {"state": "active"}) for i in range(1, 5)]

    rate = compute_frame(raw_reads(events=events, event_cap=4)).transitions

    assert rate.exact is False
    assert rate.per_s == pytest.approx(2.0)
    assert rate.by_state == {"active": 4}


def test_a_window_below_the_cap_is_an_exact_count_over_the_window() -> None:
    events = [("1772366409000-0", {"state": "retry_wait"}), ("1772366408000-0", {})]

    rate = compute_frame(raw_reads(events=events)).transitions

    assert (rate.exact, rate.count, rate.per_s) == (True, 2, 0.2)
    assert rate.by_state == {"retry_wait": 1}


def test_frame_counts_keep_unknown_values_and_map_finished_ledgers_to_outcomes() -> None:
    frame = compute_frame(
        raw_reads(
            route_states=["active", "from_a_newer_runtime"],
            ledgers=[{"state": "finished", "outcome": "failed"}, {"state": "queued"}],
            scan_complete=False,
            circuit_states=["open", "open"],
        )
    )

    assert frame.routes.by_state["from_a_newer_runtime"] == 1
    assert (frame.routes.seen, frame.routes.exact) == (2, False)
    assert frame.dispatches.by_state == {
        "queued": 1, "started": 0, "delivered": 0, "not_dispatched": 0, "failed": 1,
    }  # fmt: skip
    assert frame.circuits == {"closed": 0, "open": 2, "half_open": 0}
