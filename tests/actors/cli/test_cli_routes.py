"""`recovery schedules|routes|route|events`: read-only inspection straight from Redis.

Routes are written through the RouteStore under a unique prefix on the session's real Redis
(integration tier); the commands then read them back with `actors.cli.main.main`. The error paths
(no URL, unreachable Redis, a bad route id) need no Redis at all."""

from __future__ import annotations

import asyncio
import json
import queue
import threading
from datetime import timedelta
from pathlib import Path
from typing import Any

import fakeredis
import pytest
import redis

from actors.cli import installation
from actors.cli.common import connect
from actors.cli.format import relative, table
from actors.cli.main import main
from actors.keys import KeySpace
from actors.routes.models import RouteEvent, Transition
from actors.store.sync_reads import follow_events, last_event_id
from tests.actors.conftest import Backend
from tests.actors.route_builders import (
    T0,
    cancel_wait,
    in_seconds,
    retry_wait,
    skip_now,
    start,
)

integration = pytest.mark.integration
WAIT_S = 10.0  # upper bound for a thread's answer; the tests never sleep


def apply(backend: Backend, *transitions: Transition) -> None:
    async def scenario() -> None:
        async with backend.store() as store:
            for transition in transitions:
                await store.apply(transition)

    asyncio.run(scenario())


def run(backend: Backend, *argv: str, now_s: float | None = None) -> int:
    args = [*argv, "--redis-url", str(backend.url), "--prefix", backend.keys.prefix]
    if now_s is not None:
        args += ["--now", in_seconds(now_s).isoformat()]
    return main(args)


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines()]


def stream_order(event_id: str) -> tuple[int, int]:
    milliseconds, sequence = event_id.split("-")
    return int(milliseconds), int(sequence)


def seed_fleet(backend: Backend) -> None:
    """r-soon waits 5 s, r-late 20 s, r-idle is active, r-skipped switched candidates."""
    apply(
        backend,
        start("r-soon"),
        retry_wait("r-soon", 1, deadline=in_seconds(5), reason="overloaded, try again"),
        start("r-late"),
        retry_wait("r-late", 1, deadline=in_seconds(20), ordinal=2, reason="rate limited"),
        start("r-idle"),
        start("r-skipped"),
        skip_now("r-skipped", 1),
    )


# -- schedules ----------------------------------------------------------------------------


@integration
def test_schedules_lists_pending_schedules_soonest_first_with_relative_deadlines(
    real_backend: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    seed_fleet(real_backend)

    assert run(real_backend, "schedules", now_s=7) == 0

    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3
    header, soon, late = lines
    assert header.split() == [
        "ROUTE", "STATE", "GEN", "CANDIDATE", "CODE", "CLASS", "ORD", "OUTCOME", "DEADLINE",
        "DUE", "REASON",
    ]  # fmt: skip
    assert soon.startswith("r-soon ")
    assert late.startswith("r-late ")
    for column in ("STATE", "DEADLINE", "DUE", "REASON"):  # aligned under the header
        at = header.index(column)
        assert soon[at - 1] == late[at - 1] == " "
        assert soon[at] != " "
        assert late[at] != " "
    assert "retry_wait" in soon
    assert "provider_overloaded" in soon
    assert "transient" in soon
    assert "2026-03-01T12:00:05Z" in soon
    assert "overdue 2 s" in soon
    assert soon.endswith("overloaded, try again")
    assert "2026-03-01T12:00:20Z" in late
    assert "in 13 s" in late
    assert late.endswith("rate limited")


@integration
def test_schedules_json_prints_one_object_per_schedule(
    real_backend: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    seed_fleet(real_backend)

    assert run(real_backend, "schedules", "--json", now_s=7) == 0

    soon, late = json_lines(capsys.readouterr().out)
    assert soon == {
        "route_id": "r-soon",
        "generation": 1,
        "state": "retry_wait",
        "deadline": "2026-03-01T12:00:05Z",
        "candidate_id": "claude",
        "code": "provider_overloaded",
        "error_class": "transient",
        "ordinal": 1,
        "pending_outcome": "retry",
        "reason": "overloaded, try again",
        "due_in_s": -2.0,
    }
    assert (late["route_id"], late["ordinal"], late["due_in_s"]) == ("r-late", 2, 13.0)


@integration
def test_schedules_says_so_when_nothing_is_pending(
    real_backend: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    apply(real_backend, start("r-idle"))

    assert run(real_backend, "schedules") == 0
    assert capsys.readouterr().out == (
        f"no pending schedules under prefix {real_backend.keys.prefix!r}\n"
    )
    assert run(real_backend, "schedules", "--json") == 0
    assert capsys.readouterr().out == ""


@integration
def test_a_cleared_schedule_is_no_longer_listed(
    real_backend: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    seed_fleet(real_backend)
    apply(real_backend, cancel_wait("r-soon", 1))

    assert run(real_backend, "schedules", "--json") == 0
    assert [s["route_id"] for s in json_lines(capsys.readouterr().out)] == ["r-late"]


# -- routes -------------------------------------------------------------------------------


@integration
def test_routes_lists_every_route_with_its_state(
    real_backend: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    seed_fleet(real_backend)

    assert run(real_backend, "routes", now_s=7) == 0

    header, *rows = capsys.readouterr().out.splitlines()
    assert header.split() == [
        "ROUTE", "STATE", "GEN", "CANDIDATE", "CODE", "CLASS", "RETRY", "DEADLINE", "DUE",
        "OUTCOME", "UPDATED",
    ]  # fmt: skip
    by_route = {row.split()[0]: row.split() for row in rows}
    assert sorted(by_route) == ["r-idle", "r-late", "r-skipped", "r-soon"]
    assert by_route["r-idle"][1:4] == ["active", "1", "claude"]
    assert by_route["r-skipped"][1:4] == ["switching", "2", "codex"]
    assert by_route["r-soon"][1:] == [
        "retry_wait", "1", "claude", "provider_overloaded", "transient", "1/3",
        "2026-03-01T12:00:05Z", "overdue", "2", "s", "retry", "2026-03-01T12:00:00Z",
    ]  # fmt: skip


@integration
def test_routes_state_filter_and_json(
    real_backend: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    seed_fleet(real_backend)

    assert run(real_backend, "routes", "--state", "retry_wait", "--json", now_s=7) == 0

    routes = json_lines(capsys.readouterr().out)
    assert [r["route_id"] for r in routes] == ["r-late", "r-soon"]
    late = routes[0]
    assert late["state"] == "retry_wait"
    assert (late["generation"], late["candidate_id"], late["code"]) == (
        1,
        "claude",
        "provider_overloaded",
    )
    assert (late["retry_ordinal"], late["retry_max"], late["pending_outcome"]) == (2, 3, "retry")
    assert late["deadline"] == "2026-03-01T12:00:20Z"
    assert late["updated_at"] == "2026-03-01T12:00:00Z"
    assert late["due_in_s"] == 13.0
    assert "profile" not in late
    assert "policy_snapshot" not in late

    assert run(real_backend, "routes", "--state", "closed") == 0
    assert capsys.readouterr().out.startswith("no routes in state 'closed' under prefix")


@integration
def test_routes_ignores_keys_that_are_not_routes_of_this_prefix(
    real_backend: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    apply(real_backend, start("r-1"))
    prefix = real_backend.keys.prefix
    client = redis.Redis.from_url(str(real_backend.url))
    try:
        client.hset(f"{prefix}:route:nested:id", "state", "active")  # not a route id
        client.set(f"{prefix}:route:r-string", "not a hash")
    finally:
        client.close()

    assert run(real_backend, "routes", "--json") == 0
    assert [r["route_id"] for r in json_lines(capsys.readouterr().out)] == ["r-1"]


# -- route ID -----------------------------------------------------------------------------


@integration
def test_route_prints_one_snapshot(
    real_backend: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    seed_fleet(real_backend)

    assert run(real_backend, "route", "r-soon", now_s=1) == 0

    out = capsys.readouterr().out
    assert "state:     retry_wait (generation 1)" in out
    assert "next step: wait" in out
    assert "candidate: claude (#0)" in out
    assert "failure:   provider_overloaded (transient) by anthropic.http.529.v1" in out
    assert "retry:     1 of 3 (attempt 1)" in out
    assert "pending:   retry at 2026-03-01T12:00:05Z (in 4 s)" in out
    assert "reason:    overloaded, try again" in out
    assert "AT " not in out  # no history without --history


@integration
def test_route_history_lists_attempt_records_in_order(
    real_backend: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    seed_fleet(real_backend)
    apply(real_backend, cancel_wait("r-soon", 1))

    assert run(real_backend, "route", "r-soon", "--history") == 0

    out = capsys.readouterr().out
    snapshot, history = out.split("\n\n")
    assert "state:     action_required (generation 1)" in snapshot
    assert "next step: manual" in snapshot
    header, *rows = history.splitlines()
    assert header.split()[:4] == ["AT", "GEN", "ORD", "DECISION"]
    assert [row.split()[3] for row in rows] == ["start", "retry", "cancel_wait"]
    assert "2026-03-01T12:00:05Z" in rows[1]


@integration
def test_route_json_has_the_full_snapshot_and_history(
    real_backend: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    seed_fleet(real_backend)

    assert run(real_backend, "route", "r-skipped", "--history", "--json") == 0

    (payload,) = json_lines(capsys.readouterr().out)
    assert (payload["route_id"], payload["state"], payload["generation"]) == (
        "r-skipped", "switching", 2,
    )  # fmt: skip
    assert "cycle" in payload
    assert "profile" in payload
    assert [(r["decision"], r["generation"]) for r in payload["history"]] == [
        ("start", 1),
        ("skip_now", 2),
    ]

    assert run(real_backend, "route", "r-skipped", "--json") == 0
    assert "history" not in json_lines(capsys.readouterr().out)[0]


@integration
def test_a_route_that_does_not_exist_is_an_error(
    real_backend: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(real_backend, "route", "r-missing") == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        f"recovery route: no route 'r-missing' under prefix {real_backend.keys.prefix!r} "
        "(never written, or expired)\n"
    )


def test_a_bad_route_id_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"unix://{tmp_path / 'absent.sock'}"  # never reached: the id is checked first

    assert main(["route", "bad id*", "--redis-url", url]) == 2

    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    assert captured.err.startswith("recovery route: invalid route id 'bad id*': must match")


# -- events -------------------------------------------------------------------------------


@integration
def test_events_count_prints_the_last_events_oldest_first(
    real_backend: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    apply(
        real_backend,
        start("r-1"),
        retry_wait("r-1", 1, deadline=in_seconds(5)),
        cancel_wait("r-1", 1),
    )

    assert run(real_backend, "events", "--count", "2", "--json") == 0
    waited, cancelled = json_lines(capsys.readouterr().out)
    assert (waited["from_state"], waited["state"], waited["decision"]) == (
        "active", "retry_wait", "retry",
    )  # fmt: skip
    assert waited["deadline"] == "2026-03-01T12:00:05Z"
    assert (cancelled["state"], cancelled["cause"], cancelled["decision"]) == (
        "action_required", "manual", "cancel_wait",
    )  # fmt: skip
    assert stream_order(waited["event_id"]) < stream_order(cancelled["event_id"])

    assert run(real_backend, "events", now_s=1) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3
    assert "r-1  gen 0->1  none->active  start/start  on claude" in lines[0]
    assert "active->retry_wait  report_failure/retry" in lines[1]
    assert "retry 1/3  retry at 2026-03-01T12:00:05Z (in 4 s)" in lines[1]
    assert lines[2].endswith("- wait cancelled")


@integration
def test_follow_events_emits_new_events_until_stopped(real_backend: Backend) -> None:
    assert real_backend.url is not None
    apply(real_backend, start("r-1"))
    client = connect(real_backend.url)
    after = last_event_id(client, real_backend.keys)
    seen: queue.Queue[RouteEvent] = queue.Queue()
    stop = threading.Event()
    follower = threading.Thread(
        target=follow_events,
        args=(client, real_backend.keys, after, seen.put),
        kwargs={"stop": stop, "block_ms": 50},
    )
    follower.start()
    try:
        apply(real_backend, retry_wait("r-1", 1, deadline=in_seconds(5)), cancel_wait("r-1", 1))
        first = seen.get(timeout=WAIT_S)
        second = seen.get(timeout=WAIT_S)
    finally:
        stop.set()
        follower.join(timeout=WAIT_S)
        client.close()
    assert not follower.is_alive()
    assert [first.state, second.state] == ["retry_wait", "action_required"]
    assert seen.empty()  # the start before `after` was not repeated


@integration
def test_events_follow_prints_the_tail_then_new_events_and_ctrl_c_exits_0(
    real_backend: Backend, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    apply(real_backend, start("r-1"))
    real_xread = redis.Redis.xread
    calls = 0

    def xread(self: redis.Redis, *args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 1:  # a writer acts while the follower waits
            apply(real_backend, retry_wait("r-1", 1, deadline=in_seconds(5)))
            return real_xread(self, *args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(redis.Redis, "xread", xread)

    assert run(real_backend, "events", "--follow", "--count", "1", "--json") == 0

    captured = capsys.readouterr()
    assert [e["state"] for e in json_lines(captured.out)] == ["active", "retry_wait"]
    assert captured.err == ""
    assert calls == 2


# -- connection errors --------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv", [["schedules"], ["routes", "--json"], ["route", "r-1"], ["events", "--follow"]]
)
def test_an_unreachable_redis_is_one_line_and_exit_2(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"unix://{tmp_path / 'absent.sock'}"

    assert main([*argv, "--redis-url", url]) == 2

    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    assert captured.err.startswith(f"recovery {argv[0]}: cannot reach Redis at {url}: ")
    assert "Traceback" not in captured.err


def test_no_redis_url_tells_the_user_to_pass_one(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("REDIS_URL", raising=False)

    assert main(["schedules"]) == 2

    err = capsys.readouterr().err
    assert err.startswith("recovery schedules: no Redis URL: pass --redis-url URL or set REDIS_URL")
    assert err.count("\n") == 1


def test_redis_url_comes_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"unix://{tmp_path / 'from-env.sock'}"
    monkeypatch.setenv("REDIS_URL", url)

    assert main(["routes"]) == 2
    assert f"cannot reach Redis at {url}" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--redis-url", "http://localhost"],
            "--redis-url: must be a redis://, rediss:// or unix:// URL, got 'http://localhost'",
        ),
        (
            ["--redis-url", "redis://localhost", "--prefix", "a*b"],
            "--key-prefix: must match [A-Za-z0-9._:-]{1,64} and not end with ':', got 'a*b'",
        ),
    ],
)
def test_a_bad_url_or_prefix_is_one_line_and_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["schedules", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"recovery schedules: {message}")
    assert err.count("\n") == 1


def corrupt_profile_client(monkeypatch: pytest.MonkeyPatch) -> fakeredis.FakeRedis:
    client = fakeredis.FakeRedis(decode_responses=True)
    keys = KeySpace()
    client.hset(keys.route("r-1"), mapping={"state": "active", "generation": "1"})
    client.hset(keys.route("r-1"), "profile", "not json")
    monkeypatch.setattr(installation, "connect", lambda url: client)
    return client


def test_a_route_whose_profile_is_not_json_is_one_line_naming_key_and_field_and_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    corrupt_profile_client(monkeypatch)

    assert main(["route", "r-1", "--redis-url", "redis://localhost"]) == 2

    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    assert captured.err.startswith(
        "recovery route: route 'r-1': corrupt: recovery:route:r-1 profile: not JSON: "
    )


def test_routes_lists_the_others_past_a_route_that_cannot_be_read(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    client = corrupt_profile_client(monkeypatch)
    client.hset(KeySpace().route("r-2"), mapping={"state": "active", "generation": "1"})

    assert main(["routes", "--redis-url", "redis://localhost"]) == 0

    captured = capsys.readouterr()
    assert [line.split()[0] for line in captured.out.splitlines()[1:]] == ["r-2"]
    assert "1 route(s) could not be read (not shown): see `recovery routes --corrupt`" in (
        captured.err
    )


def test_a_password_in_the_url_is_never_printed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = "redis://user:s3cret@127.0.0.1:1/0"

    assert main(["schedules", "--redis-url", url]) == 2

    err = capsys.readouterr().err
    assert "s3cret" not in err
    assert "redis://user:***@127.0.0.1:1/0" in err


# -- formatting ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("offset_s", "text"),
    [
        (4, "in 4 s"),
        (-2, "overdue 2 s"),
        (0.2, "due now"),
        (60, "in 1 min"),
        (125, "in 2 min 5 s"),
        (-3 * 3600 - 120, "overdue 3 h 2 min"),
        (7200, "in 2 h"),
    ],
)
def test_relative_deadlines(offset_s: float, text: str) -> None:
    assert relative(T0 + timedelta(seconds=offset_s), T0) == text


def test_table_aligns_columns_and_marks_unset_cells() -> None:
    lines = table(("A", "BB", "C"), [("x", None, "last"), ("long", "y", "")])
    assert lines == ["A     BB  C", "x     -   last", "long  y   -"]
