"""The HTTP API as a client in another language meets it: a real `recovery up` (one per
module, started as an operator would, with a bearer token on a free loopback port),
driven by a Node script with only the standard `http` module and by curl. Waits are on
`up`'s own lines and on the answers, never a fixed sleep."""

from __future__ import annotations

import asyncio
import http.client
import json
import shutil
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final

import pytest
import redis

from actors.jobs.workers import PROJECT_ROOT
from actors.keys import KeySpace
from actors.routes.models import RouteSnapshot
from actors.store.sync_reads import read_history, read_route
from tests.actors.api.payloads import dynamic, failure, start
from tests.actors.cli.test_cli_up import RunningUp, up_environment
from tests.actors.conftest import _delete_prefix, unique_keys
from tests.actors.metrics_scrape import export_until, samples
from tests.actors.redis_waits import wait_until

pytestmark = pytest.mark.integration

TOKEN: Final = "node-and-curl-token-0123456789"
DRIVER: Final = Path(__file__).with_name("drive_route.mjs")
CURL_TIMEOUT_S: Final = 30
START_TIMEOUT_S: Final = 180.0  # a local Ray and two hosts: ~10 s here, ~40 s when loaded
METRICS_TIMEOUT_S: Final = 60.0
NODE = shutil.which("node")
Event = tuple[str, str, Any]
"""One Server-Sent Event read: its id (the cursor), its name and its data."""
CURL = shutil.which("curl")


class LiveApi:
    def __init__(self, up: RunningUp, url: str, keys: KeySpace, redis_url: str) -> None:
        self.up = up
        self.url = url
        self.keys = keys
        self.redis_url = redis_url

    def curl(self, method: str, path: str, body: object = None, *, token: str | None = TOKEN,
             headers: dict[str, str] | None = None) -> tuple[int, Any]:  # fmt: skip
        """(status, parsed JSON body) of one request made by curl."""
        assert CURL is not None
        command = [CURL, "-sS", "-X", method, "-o", "-", "-w", "\n%{http_code}",
                   "--max-time", str(CURL_TIMEOUT_S)]  # fmt: skip
        for name, value in (headers or {}).items():
            command += ["-H", f"{name}: {value}"]
        if token is not None:
            command += ["-H", f"Authorization: Bearer {token}"]
        if body is not None:
            command += ["-H", "Content-Type: application/json", "--data-binary", json.dumps(body)]
        done = subprocess.run([*command, self.url + path], capture_output=True, text=True,
                              check=True, timeout=CURL_TIMEOUT_S + 5)  # fmt: skip
        text, _, status = done.stdout.rpartition("\n")
        return int(status), json.loads(text)

    def stored(self, route_id: str) -> tuple[RouteSnapshot, int]:
        """The route as the store reads it, and its history's length."""
        client = redis.Redis.from_url(self.redis_url, decode_responses=True)
        try:
            return read_route(client, self.keys, route_id), len(
                read_history(client, self.keys, route_id)
            )
        finally:
            client.close()


@pytest.fixture(scope="module")
def api(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveApi]:
    folder = tmp_path_factory.mktemp("api-up")
    keys = unique_keys()
    env = up_environment(redis_url, keys, folder / "data")
    env["RECOVERY_API_TOKEN"] = TOKEN
    up = RunningUp(env, folder / "up.stderr")
    try:
        line = up.wait_line("api: ", START_TIMEOUT_S)
        ready = up.wait_line("ready: ", START_TIMEOUT_S)
        assert up.lines[-2:] == [line, ready]  # the API line comes just before `ready`
        url = line.split()[1]
        assert url.startswith("http://127.0.0.1:")
        assert TOKEN not in "\n".join(up.lines)
        yield LiveApi(up, url, keys, redis_url)
        open_stream = stream(url, "0-0,0-0")  # `up` stops with an event stream open
        assert up.stop(signal.SIGTERM) == 0, up.report()
        assert open_stream.read() is not None  # it ended: `up` did not wait on it
        stderr = up.stderr_path.read_text(errors="replace")
        assert TOKEN not in stderr
        assert "Traceback" not in stderr, stderr
    finally:
        if up.process.poll() is None:
            up.kill()
        _delete_prefix(redis_url, keys)


@pytest.mark.skipif(NODE is None, reason="needs node")
def test_a_node_client_drives_a_route_end_to_end_and_a_replay_changes_nothing(
    api: LiveApi,
) -> None:
    assert NODE is not None
    env = {"API_URL": api.url, "API_TOKEN": TOKEN, "ROUTE": "node-1", "PATH": "/usr/bin:/bin"}
    done = subprocess.run([NODE, str(DRIVER)], env=env, capture_output=True, text=True,
                          timeout=120, cwd=PROJECT_ROOT, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["failure"]["code"] == "provider_overloaded"
    assert seen["failure"]["next_step"] == "wait"
    assert seen["failure"]["state"] in {"retry_wait", "waiting_for_reset"}
    assert seen["retry_now"]["state"] == "retrying"
    assert (seen["success"]["state"], seen["success"]["next_step"]) == ("active", "done")
    assert seen["replay"] == seen["failure"]
    decisions = [record["decision"] for record in seen["history_after_replay"]]
    assert decisions[0] == "start"
    assert decisions[-1] == "success"
    assert decisions.count("wait_for_reset") + decisions.count("retry") == 1
    # What the API answered is the snapshot the store holds, field for field.
    snapshot, history = api.stored("node-1")
    assert RouteSnapshot.model_validate(seen["after_replay"]) == snapshot
    assert history == len(seen["history_after_replay"])


@pytest.mark.skipif(CURL is None, reason="needs curl")
def test_a_stale_generation_is_409_with_the_snapshot(api: LiveApi) -> None:
    status, started = api.curl("POST", "/routes/curl-409/start", start(account="curl-409"))
    assert status == 200, started
    api.curl("POST", "/routes/curl-409/failure", failure(1))
    before = api.stored("curl-409")
    status, problem = api.curl("POST", "/routes/curl-409/actions/skip", {"generation": 5})
    assert status == 409
    assert problem["error"] == "stale_generation"
    assert RouteSnapshot.model_validate(problem["snapshot"]) == before[0]
    assert api.stored("curl-409") == before


@pytest.mark.skipif(CURL is None, reason="needs curl")
def test_a_route_started_by_a_stored_profiles_id_follows_it_through_the_hosts(
    api: LiveApi,
) -> None:
    by_id = {**start(), "profile": None, "profile_id": "up-followed"}
    status, problem = api.curl("POST", "/routes/curl-by-id/start", by_id)
    assert (status, problem["error"]) == (409, "profile_not_found"), problem
    assert api.stored("curl-by-id") == (RouteSnapshot.absent("curl-by-id"), 0)
    profile = dynamic("claude-by-id")
    status, _ = api.curl("POST", "/profiles", {"id": "up-followed", "profile": profile})
    assert status == 201
    status, started = api.curl("POST", "/routes/curl-by-id/start", by_id)
    assert status == 200, started
    assert (started["profile_id"], started["profile_version"]) == ("up-followed", 1)
    assert started["candidate_id"] == "claude-by-id"


@pytest.mark.skipif(CURL is None, reason="needs curl")
def test_a_bad_field_is_422_naming_the_field_and_the_value(api: LiveApi) -> None:
    status, problem = api.curl("POST", "/routes/curl-422/start", {**start(), "caller": "a b"})
    assert status == 422
    assert problem["errors"][0] == {
        "field": "caller", "location": "body", "value": "a b",
        "message": problem["errors"][0]["message"],
    }  # fmt: skip
    assert problem["message"].startswith("caller: ")
    assert api.stored("curl-422") == (RouteSnapshot.absent("curl-422"), 0)


@pytest.mark.skipif(CURL is None, reason="needs curl")
@pytest.mark.parametrize("token", [None, "a-wrong-token-of-some-length"])
def test_without_or_with_a_wrong_token_it_is_401_and_nothing_happens(
    api: LiveApi, token: str | None
) -> None:
    status, problem = api.curl("POST", "/routes/curl-401/start", start(), token=token)
    assert (status, problem["error"]) == (401, "unauthorised")
    assert set(problem) == {"error", "message", "errors", "snapshot"}
    status, listing = api.curl("GET", "/routes", token=token)
    assert (status, listing["error"]) == (401, "unauthorised")
    assert api.stored("curl-401") == (RouteSnapshot.absent("curl-401"), 0)
    assert api.curl("GET", "/openapi.json", token=token)[0] == 200


@pytest.mark.skipif(CURL is None, reason="needs curl")
def test_a_session_cancel_is_authorised_for_its_task_and_retires_its_notice(
    api: LiveApi,
) -> None:
    api.curl("POST", "/routes/cancel-1/start", {**start(account="cancel-1"), "task_id": "task-1"})
    status, waiting = api.curl("POST", "/routes/cancel-1/failure", failure(1))
    assert (status, waiting["next_step"]) == (200, "wait")
    [notice] = wait_notices(api, "cancel-1", 1)
    assert notice["metadata"]["retrying"] is True
    status, problem = api.curl(
        "POST", "/sessions/cancel-1/cancel-transient-retry", {"task_id": "task-2"}
    )
    assert (status, problem["error"]) == (403, "not_authorised")
    assert api.stored("cancel-1")[0].state == waiting["state"]
    status, outcome = api.curl(
        "POST", "/sessions/cancel-1/cancel-transient-retry", {"task_id": "task-1"}
    )
    assert status == 200, outcome
    assert outcome["active"] is True
    assert (outcome["snapshot"]["state"], outcome["snapshot"]["next_step"]) == (
        "action_required", "manual",
    )  # fmt: skip
    assert api.curl("GET", "/sessions/cancel-1/notices")[1] == {"notices": []}


def wait_notices(api: LiveApi, session: str, count: int) -> list[Any]:
    """The session's notices once there are `count`: the host writes a notice after its
    transition is durable, so it may follow the answer (each check waits on Redis)."""
    found: list[Any] = []

    async def written() -> bool:
        found[:] = api.curl("GET", f"/sessions/{session}/notices")[1]["notices"]
        return len(found) == count

    asyncio.run(wait_until(written, CURL_TIMEOUT_S, redis_url=api.redis_url))
    return found


def test_events_stream_and_resume_after_the_last_event_id(api: LiveApi) -> None:
    api.curl("POST", "/routes/sse-1/start", start(account="sse-1"))
    api.curl("POST", "/routes/sse-1/failure", failure(1))
    first = read_events(api, "0-0,0-0", 2, "sse-1")
    assert [event["cause"] for _, event in first] == ["start", "report_failure"]
    api.curl("POST", "/routes/sse-1/actions/stop", {"generation": 1})
    resumed = read_events(api, first[0][0], 2, "sse-1")
    assert [event["cause"] for _, event in resumed] == ["report_failure", "stop"]
    assert resumed[0][1] == first[1][1]


def test_events_carry_the_transcript_too_and_resume_after_a_notice_id(api: LiveApi) -> None:
    """A notice's change is an event of its own on the same stream, and its id resumes
    the stream on both streams at once: the notice written is not read again, its deletion
    and the route's next transition are."""
    api.curl("POST", "/routes/sse-2/start", {**start(account="sse-2"), "task_id": "task-2"})
    api.curl("POST", "/routes/sse-2/failure", failure(1))
    first = read_session_events(api, "0-0,0-0", "sse-2", lambda seen: any(
        name == "session.message.updated" for _, name, _ in seen))  # fmt: skip
    assert [name for _, name, _ in first] == [
        "route.transition", "route.transition", "session.message.updated",
    ]  # fmt: skip
    notice_id, _, notice = first[-1]
    assert (notice["message"]["metadata"]["retrying"], notice["task_id"]) == (True, "task-2")
    api.curl("POST", "/routes/sse-2/actions/stop", {"generation": 1})
    resumed = read_session_events(api, notice_id, "sse-2", lambda seen: len(seen) == 2)
    assert sorted(name for _, name, _ in resumed) == [
        "route.transition", "session.message.deleted",
    ]  # fmt: skip
    [deleted] = [data for _, name, data in resumed if name == "session.message.deleted"]
    assert deleted["message_id"] == notice["message_id"]
    [stopped] = [data for _, name, data in resumed if name == "route.transition"]
    assert stopped["cause"] == "stop"


def read_session_events(
    api: LiveApi, last_id: str, session: str, enough: Callable[[list[Event]], bool]
) -> list[Event]:
    """The session's route and transcript events after `last_id` (id, name, data), read
    until `enough` of them are seen."""
    answer = stream(api.url, last_id)
    found: list[Event] = []
    try:
        event_id, name = "", ""
        while not enough(found):
            raw = answer.readline()
            assert raw, f"the stream ended after {found}"
            line = raw.decode().rstrip("\n")
            assert not line.startswith("event: error"), answer.readline()
            if line.startswith("id: "):
                event_id = line[4:]
            elif line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data = json.loads(line[6:])
                if session in (data.get("route_id"), data.get("session_id")):
                    found.append((event_id, name, data))
    finally:
        answer.close()
    return found


def stream(url: str, last_id: str) -> http.client.HTTPResponse:
    """An open event stream after `last_id` (its first line read: it is served)."""
    connection = http.client.HTTPConnection(url.removeprefix("http://"), timeout=CURL_TIMEOUT_S)
    connection.request("GET", "/events", headers={
        "Authorization": f"Bearer {TOKEN}", "Last-Event-ID": last_id})  # fmt: skip
    answer = connection.getresponse()
    assert answer.status == 200
    assert answer.getheader("content-type", "").startswith("text/event-stream")
    assert answer.readline() == b"retry: 1000\n"
    return answer


def read_events(api: LiveApi, last_id: str, count: int, route_id: str) -> list[tuple[str, Any]]:
    """The first `count` route events of `route_id` after `last_id` (id, data)."""
    answer = stream(api.url, last_id)
    found: list[tuple[str, Any]] = []
    try:
        event_id, name = "", ""
        while len(found) < count:
            raw = answer.readline()
            assert raw, f"the stream ended after {found}"
            line = raw.decode().rstrip("\n")
            assert not line.startswith("event: error"), answer.readline()
            if line.startswith("id: "):
                event_id = line[4:]
            elif line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: ") and name == "route.transition":
                data = json.loads(line[6:])
                if data["route_id"] == route_id:
                    found.append((event_id, data))
    finally:
        answer.close()
    return found


def test_request_metrics_reach_rays_prometheus_export(api: LiveApi) -> None:
    api.curl("GET", "/routes/metrics-1")
    [line] = [line for line in api.up.lines if line.startswith("metrics: ")]
    url = line.removeprefix("metrics: curl -s ").split(",")[0]
    wanted = 'route="/routes/{route_id}"'

    def counted_and_timed(text: str) -> bool:
        counted = samples(text, "ray_recovery_api_requests_total{")
        timed = samples(text, "ray_recovery_api_request_seconds_bucket{")
        return any(wanted in s and 'status="200"' in s for s in counted) and bool(timed)

    text = export_until(url, counted_and_timed, METRICS_TIMEOUT_S)
    counted = samples(text, "ray_recovery_api_requests_total{")
    assert not any("metrics-1" in sample for sample in counted)  # templates, never ids


def test_the_console_is_served_behind_the_token_and_saves_through_the_profile_store(
    api: LiveApi,
) -> None:
    host = api.url.removeprefix("http://")

    def get(path: str, token: str | None) -> http.client.HTTPResponse:
        connection = http.client.HTTPConnection(host, timeout=CURL_TIMEOUT_S)
        headers = {} if token is None else {"Authorization": f"Bearer {token}"}
        connection.request("GET", path, headers=headers)
        return connection.getresponse()

    refused = get("/console/routes", None)
    assert refused.status == 303
    assert refused.getheader("location") == "/console/login?next=%2Fconsole%2Froutes"
    assert get("/console/login", None).status == 200
    profile = {"version": 1, "candidates": [{"id": "claude", "agent": "claude-acp"}]}
    status, stored = api.curl("POST", "/profiles", {"id": "up-fleet", "profile": profile})
    assert (status, stored["version"]) == (201, 1), stored
    page = get("/console/profiles/up-fleet", TOKEN)
    html = page.read().decode()
    assert page.status == 200
    assert "Transient errors" in html
    assert TOKEN not in html
