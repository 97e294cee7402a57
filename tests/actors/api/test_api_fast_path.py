"""The fast path for the hot route commands (actors/api/fast_path.py): every answer is
the one FastAPI gives, byte for byte (status, headers, body), whether the fast path
served the request or handed it on; it serves a well-formed command without the app,
and hands anything else on with the body played back and nothing sent to a route."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import fakeredis
import pytest
from fastapi import FastAPI

from actors.api import Tokens, create_app
from actors.api.fast_path import FastPath, command_of
from actors.api.guard import MAX_BODY, Guard, Message
from actors.api.metrics import NoMetrics
from actors.clock import ManualClock
from actors.keys import KeySpace
from tests.actors.api.api_rigs import (
    OTHER_TOKEN,
    PRINCIPALS,
    TOKEN,
    RecordedMetrics,
    Touched,
    fake_backend,
    recording_backend,
)
from tests.actors.api.payloads import failure, overloaded, start
from tests.actors.conftest import unique_keys

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
Headers = list[tuple[bytes, bytes]]


@dataclass(frozen=True)
class Answer:
    """What an app sent back, as the ASGI messages carried it, and the exception it
    raised to the server after (the server logs it)."""

    status: int
    headers: Headers
    body: bytes
    raised: str | None = None


@dataclass
class Request:
    """One request as a client sends it: the body may come in several messages."""

    path: str
    body: bytes
    headers: Headers = field(default_factory=list)
    method: str = "POST"
    chunks: int = 1

    def messages(self) -> list[Message]:
        size = max(1, -(-len(self.body) // self.chunks))
        parts = [self.body[i : i + size] for i in range(0, len(self.body), size)] or [b""]
        return [
            {"type": "http.request", "body": part, "more_body": index < len(parts) - 1}
            for index, part in enumerate(parts)
        ]


def report(
    body: Any, *extra: tuple[bytes, bytes], path: str = "/routes/r-1/failure",
    token: str | None = TOKEN, media: bytes | None = b"application/json", length: bool = True,
) -> Request:  # fmt: skip
    """A POST bearing `token`, of the `media` type, with its Content-Length (each None or
    False: without that header) and `extra` headers."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = [(b"authorization", f"Bearer {token}".encode())] if token is not None else []
    headers += [(b"content-type", media)] if media is not None else []
    headers += [(b"content-length", str(len(data)).encode())] if length else []
    return Request(path, data, [*headers, *extra])


def observed_failure(generation: int) -> dict[str, Any]:
    """A 529 report whose evidence names its moment (so two runs classify alike)."""
    evidence = {**overloaded("20"), "observed_at": NOW.isoformat()}
    return failure(generation, evidence)


async def exchange(app: Any, request: Request) -> Answer:
    """The answer of `app` to `request`, straight on the ASGI channel."""
    pending = request.messages()
    sent: list[Message] = []

    async def receive() -> Message:
        return pending.pop(0) if pending else {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)

    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
        "method": request.method, "scheme": "http", "path": request.path,
        "raw_path": request.path.encode(), "query_string": b"", "root_path": "",
        "headers": [(b"host", b"testserver"), *request.headers],
        "server": ("testserver", 80), "client": ("127.0.0.1", 5000),
    }  # fmt: skip
    raised = None
    try:
        await app(scope, receive, send)
    except Exception as error:  # what a server would log after the answer
        raised = f"{type(error).__name__}: {error}"
    start_message, *bodies = sent or [{"status": 0, "headers": []}]
    body = b"".join(message.get("body", b"") for message in bodies)
    return Answer(start_message["status"], list(start_message["headers"]), body, raised)


def answers(app: Any, *requests: Request) -> list[Answer]:
    async def run() -> list[Answer]:
        return [await exchange(app, request) for request in requests]

    return asyncio.run(run())


def twin_apps(
    backend: Callable[[], Any], metrics: Callable[[], Any] = NoMetrics
) -> tuple[FastAPI, FastAPI]:
    """The app with its fast path and without, each on a backend of its own."""
    tokens = Tokens.of(PRINCIPALS)
    fast = create_app(backend(), tokens=tokens, metrics=metrics())
    reference = create_app(backend(), tokens=tokens, metrics=metrics(), fast_path=False)
    return fast, reference


def service_twins(keys: KeySpace) -> tuple[FastAPI, FastAPI]:
    """Twin apps on RouteService, each on a fakeredis of its own, on one stopped clock."""
    clock = ManualClock(NOW)
    return twin_apps(lambda: fake_backend(keys, clock, fakeredis.FakeServer()))


def started(app: FastAPI, *route_ids: str) -> None:
    for route_id in route_ids:
        done = answers(app, report(start(account="fast"), path=f"/routes/{route_id}/start"))
        assert done[0].status == 200, done[0].body


# Happy paths: the same bytes whichever path served them.


def test_a_route_driven_through_its_hot_commands_answers_as_fastapi_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fast, reference = service_twins(unique_keys())
    key = (b"idempotency-key", b"turn-1.report")
    requests = [
        report(observed_failure(1)),
        report({"generation": 1}, path="/routes/r-1/actions/retry-now"),
        report(observed_failure(1), key),
        report(observed_failure(1), key),  # the replay: the first outcome again
        report({"generation": 1}, path="/routes/r-1/actions/retry-now"),
        report({"generation": 1}, path="/routes/r-1/success"),
        report(observed_failure(1), path="/routes/r-2/failure"),
        report({"generation": 1}, path="/routes/r-2/actions/cancel"),
        report({"generation": 1}, path="/routes/r-2/actions/close"),
    ]
    for app in (fast, reference):
        started(app, "r-1", "r-2")
    guarded = _counting_guard(monkeypatch)
    mine = answers(fast, *requests)
    assert guarded == []  # the fast path served every one
    theirs = answers(reference, *requests)
    assert len(guarded) == len(requests)
    assert [answer.status for answer in mine] == [200] * len(requests)
    assert mine == theirs
    assert json.loads(mine[0].body)["next_step"] == "wait"


def _counting_guard(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths of the requests that reach the Guard from now on."""
    reached: list[str] = []
    through = Guard.__call__

    async def counted(guard: Guard, scope: Any, receive: Any, send: Any) -> None:
        reached.append(scope["path"])
        await through(guard, scope, receive, send)

    monkeypatch.setattr(Guard, "__call__", counted)
    return reached


def test_refusals_of_a_command_sent_are_the_apps_own_answers() -> None:
    fast, reference = service_twins(unique_keys())
    requests = [
        report(observed_failure(7)),  # a stale generation: 409 with the snapshot
        report(observed_failure(1), path="/routes/never-started/failure"),
        report({"generation": 1}, path="/routes/r-1/actions/resume"),  # not action_required
    ]
    for app in (fast, reference):
        started(app, "r-1")
    mine, theirs = answers(fast, *requests), answers(reference, *requests)
    assert [answer.status for answer in mine] == [409, 409, 409]
    assert mine == theirs
    assert json.loads(mine[0].body)["snapshot"]["generation"] == 1


def test_the_fast_path_serves_a_good_command_without_the_app() -> None:
    backend, touched = recording_backend(unique_keys())

    async def no_app(_scope: Any, _receive: Any, _send: Any) -> None:
        raise AssertionError("the fast path handed a good command on")

    fast = FastPath(no_app, tokens=Tokens.of(PRINCIPALS), metrics=NoMetrics())
    key = (b"idempotency-key", b"key-1")
    answer = answers(_in_app(fast, backend), report(failure(1), key))[0]
    assert answer.status == 200
    assert json.loads(answer.body)["route_id"] == "r-1"
    assert touched.calls == ["report_failure"]


def test_metrics_record_what_the_guard_records() -> None:
    seen: list[RecordedMetrics] = []

    def metrics() -> RecordedMetrics:
        seen.append(RecordedMetrics())
        return seen[-1]

    keys = unique_keys()
    fast, reference = twin_apps(lambda: recording_backend(keys)[0], metrics)
    requests = [
        report(failure(1)),
        report({"generation": 1}, path="/routes/r-1/success"),
        report({"generation": 1}, path="/routes/r-1/actions/stop"),
        report(b"{not json"),
    ]
    assert answers(fast, *requests) == answers(reference, *requests)
    assert seen[0].seen == seen[1].seen
    assert seen[0].seen[0] == ("/routes/{route_id}/failure", "POST", 200)


# Anything else: handed on, so the app answers it, and no route was sent anything.

# A good report but for its size (JSON may end in any amount of white space).
TOO_LARGE = json.dumps(failure(1)).encode() + b" " * MAX_BODY
FALLBACKS: dict[str, Request] = {  # each answered by the app as it answers it
    "bad JSON": report(b'{"generation": 1,'),
    "not an object": report(b"[1, 2]"),
    "a missing field": report({k: v for k, v in failure(1).items() if k != "caller"}),
    "a bad field": report({**failure(1), "generation": "one"}),
    "evidence and a classification": report({**failure(1), "classification": {"code": "x"}}),
    "no evidence": report({k: v for k, v in failure(1).items() if k != "evidence"}),
    "no token": report(failure(1), token=None),
    "a wrong token": report(failure(1), token="not-a-token-at-all-0123"),
    "a cookie": report(failure(1), (b"cookie", f"recovery_console={TOKEN}".encode()), token=None),
    "two tokens": report(failure(1), (b"authorization", f"Bearer {OTHER_TOKEN}".encode())),
    "a form": report(failure(1), media=b"application/x-www-form-urlencoded"),
    "JSON sent as text": report(failure(1), media=b"text/plain"),
    "JSON with a charset": report(failure(1), media=b"application/json; charset=utf-8"),
    "no media type": report(failure(1), media=None),
    "no length (chunked)": report(failure(1), (b"transfer-encoding", b"chunked"), length=False),
    "a declared oversized body": report(TOO_LARGE),
    "an empty body": report(b""),
    "a bad route id": report(failure(1), path="/routes/bad id!/failure"),
    "an unknown action": report({"generation": 1}, path="/routes/r-1/actions/explode"),
    "a start-fresh's field on a stop": report(
        {"generation": 1, "profile_id": "p"}, path="/routes/r-1/actions/stop"
    ),
    "a bad Idempotency-Key": report(failure(1), (b"idempotency-key", b"no spaces")),
    "two Idempotency-Keys": report(
        failure(1), (b"idempotency-key", b"a"), (b"idempotency-key", b"b")
    ),
    "a GET of a command": Request("/routes/r-1/failure", b"", method="GET"),
}


# Requests the app accepts that the fast path leaves to it: headers given twice (the
# Guard reads the last token, FastAPI the first key), a JSON media type named otherwise,
# a body of no declared length.
APP_TAKES = frozenset({
    "two tokens", "two Idempotency-Keys", "JSON with a charset",
    "no length (chunked)",
})  # fmt: skip


@pytest.mark.parametrize("name", sorted(FALLBACKS))
def test_anything_but_a_good_command_is_answered_by_the_app(name: str) -> None:
    keys = unique_keys()
    made: list[Touched] = []

    def backend() -> Any:
        found, touched = recording_backend(keys)
        made.append(touched)
        return found

    fast, reference = twin_apps(backend)
    mine, theirs = answers(fast, FALLBACKS[name]), answers(reference, FALLBACKS[name])
    assert mine == theirs
    assert made[0].calls == made[1].calls
    if name in APP_TAKES:
        assert mine[0].status == 200
    else:
        assert mine[0].status >= 400, mine[0].body
        assert made[0].calls == []


REFUSED_UNREAD = ["no token", "a wrong token", "a cookie", "a declared oversized body", "a form"]


@pytest.mark.parametrize("name", REFUSED_UNREAD)
def test_a_request_the_guard_refuses_unread_reaches_it_unread(name: str) -> None:
    received: list[str] = []

    async def app(_scope: Any, _receive: Any, _send: Any) -> None:
        received.append(f"the app entered after {len(received)} reads")

    backend, _ = recording_backend(unique_keys())
    fast = FastPath(app, tokens=Tokens.of(PRINCIPALS), metrics=NoMetrics())
    request = FALLBACKS[name]
    pending = request.messages()

    async def receive() -> Message:
        received.append("read")
        return pending.pop(0)

    async def run() -> None:
        scope = {"type": "http", "method": "POST", "path": request.path, "root_path": "",
                 "headers": request.headers}  # fmt: skip
        await _in_app(fast, backend)(scope, receive, _ignored)

    asyncio.run(run())
    assert received == ["the app entered after 0 reads"]


async def _ignored(_message: Message) -> None:
    return None


def test_of_two_idempotency_keys_the_first_is_the_request_id_as_fastapi_reads_it() -> None:
    fast, reference = service_twins(unique_keys())
    twice = report(observed_failure(1), (b"idempotency-key", b"a"), (b"idempotency-key", b"b"))
    requests = [report(observed_failure(1), (b"idempotency-key", b"a")), twice]
    for app in (fast, reference):
        started(app, "r-1")
    mine = answers(fast, *requests)
    assert mine == answers(reference, *requests)
    assert [answer.status for answer in mine] == [200, 200]  # the replay of `a`


def test_a_missing_field_is_named_as_the_app_names_it() -> None:
    body = {k: v for k, v in failure(1).items() if k != "caller"}
    fast, _ = twin_apps(lambda: recording_backend(unique_keys())[0])
    answer = answers(fast, report(body))[0]
    assert answer.status == 422
    assert [error["field"] for error in json.loads(answer.body)["errors"]] == ["caller"]


def test_a_body_streamed_beyond_the_bound_is_cut_off_as_the_guard_cuts_it() -> None:
    request = report(TOO_LARGE)
    request.headers = [(n, v) for n, v in request.headers if n != b"content-length"]
    request.headers.append((b"content-length", b"10"))  # a lie the server did not catch
    request.chunks = 4
    fast, reference = twin_apps(lambda: recording_backend(unique_keys())[0])
    assert answers(fast, request) == answers(reference, request)


def test_a_handed_on_request_reaches_the_app_with_its_body_played_back() -> None:
    got: list[tuple[Any, list[Message]]] = []

    async def app(scope: Any, receive: Any, _send: Any) -> None:
        messages = [await receive()]
        while messages[-1].get("more_body"):
            messages.append(await receive())
        got.append((scope, messages))

    backend, touched = recording_backend(unique_keys())
    fast = FastPath(app, tokens=Tokens.of(PRINCIPALS), metrics=NoMetrics())
    request = report(b'{"generation": 1, "evidence": ', (b"idempotency-key", b"k"))
    request.chunks = 3

    assert answers(_in_app(fast, backend), request)[0].status == 0  # the app sent nothing
    [(scope, messages)] = got
    assert scope["path"] == "/routes/r-1/failure"
    assert messages == request.messages()
    assert touched.calls == []


def test_a_command_that_fails_unexpectedly_answers_the_apps_500() -> None:
    class Broken(SimpleNamespace):
        def route(self, _route_id: str) -> Any:
            return SimpleNamespace(report_failure=self.fail)

        async def fail(self, *_args: Any, **_options: Any) -> Any:
            raise RuntimeError("the host exploded")

    def backend() -> Any:
        found, _ = recording_backend(unique_keys())
        found.routes = Broken()
        return found

    fast, reference = twin_apps(backend)
    mine, theirs = answers(fast, report(failure(1))), answers(reference, report(failure(1)))
    assert mine == theirs
    assert (mine[0].status, mine[0].raised) == (500, "RuntimeError: the host exploded")


def _in_app(fast: FastPath, backend: Any) -> Any:
    """`fast` as the app's middleware sees the app: its backend and exception handlers
    in the scope's `app`."""
    probe = create_app(backend)

    async def app(scope: Any, receive: Any, send: Any) -> None:
        scope["app"] = SimpleNamespace(
            state=SimpleNamespace(backend=backend), exception_handlers=probe.exception_handlers
        )
        await fast(scope, receive, send)

    return app


def test_only_the_hot_commands_paths_are_the_fast_paths() -> None:
    assert command_of("/routes/r-1/failure") is not None
    assert command_of("/routes/r-1/actions/skip") is not None
    others = [
        "/routes/r-1/start", "/routes/r-1/actions/start-fresh", "/routes/r-1",
        "/routes/a/b/failure", "/routes//failure", "/profiles/p", "/routes/r-1/failure/",
    ]  # fmt: skip
    for path in others:
        assert command_of(path) is None, path
