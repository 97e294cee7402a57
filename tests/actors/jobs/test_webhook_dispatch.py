"""The webhook dispatcher against real receivers on loopback, through the real dispatch job
(rq SimpleWorker, real Redis): delivered; not now with a hint (redelivered once after it,
same key, budget unchanged); refused; a timeout and a reset after the request was written;
another status. Each outcome's ledger entry and route (integration tier)."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import random
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from actors.engine.settings import SETTINGS_ENV, EngineSettings
from actors.jobs.ledger import DispatchLedger
from actors.jobs.webhook import KEY_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER, WEBHOOK
from actors.keys import AttemptFence
from actors.store.wakes import Dispatched, next_wakes
from tests.actors.jobs.test_dispatch_not_dispatched import Rig, fire, retrying_after
from tests.actors.jobs.test_dispatch_not_dispatched import rig as rig  # noqa: PLC0414 - the fixture, by name
from tests.actors.route_scenarios import seed_profile
from tests.actors.webhook_receivers import closed_port_url, receiving
from tests.secret_shapes import SHAPE_BY_NAME

pytestmark = pytest.mark.integration

SECRET = "webhook-test-secret-0123456789"
HOST = "host-0"
Point = Callable[..., None]


@pytest.fixture
def webhook_to(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> Point:
    """Point this test's dispatch jobs (the worker engine of its key prefix, created on
    first use from the environment) at a URL."""

    def point(url: str, timeout_s: float = 2.0) -> None:
        settings = EngineSettings(
            key_prefix=rig.backend.keys.prefix, dispatcher=WEBHOOK, webhook_url=url,
            webhook_secret=SECRET, webhook_timeout_s=timeout_s,
        )  # fmt: skip
        monkeypatch.setenv(SETTINGS_ENV, settings.to_environment()[SETTINGS_ENV])

    return point


def entry(rig: Rig, ordinal: int = 1) -> dict[str, str]:
    fields = DispatchLedger(rig.connection, rig.backend.keys).read(
        AttemptFence("route-nd-1", 1, ordinal)
    )
    return dict(fields.fields)


def test_a_2xx_is_delivered_signed_with_the_attempts_key(rig: Rig, webhook_to: Point) -> None:
    retrying_after(rig, seed_profile())
    with receiving("ok") as receiver:
        webhook_to(receiver.url)
        rig.dispatch(WEBHOOK)
    [request] = receiver.received
    headers = {k.lower(): v for k, v in request.headers.items()}
    assert headers[KEY_HEADER.lower()] == "route-nd-1:1:1"
    timestamp = headers[TIMESTAMP_HEADER.lower()]
    assert abs(int(timestamp) - datetime.now(UTC).timestamp()) < 60
    message = timestamp.encode() + b"." + request.body
    expected = "v1=" + hmac.new(SECRET.encode(), message, hashlib.sha256).hexdigest()
    assert headers[SIGNATURE_HEADER.lower()] == expected
    body = json.loads(request.body)
    assert (body["route_id"], body["generation"], body["ordinal"]) == ("route-nd-1", 1, 1)
    assert body["candidate"] == {
        "id": "claude", "agent": "claude-acp", "provider": "claude", "model": None,
    }  # fmt: skip
    assert (body["next_step"], body["idempotency_key"]) == ("run", "route-nd-1:1:1")
    assert body["replay"]["prompt_ref"] == "inv-route-nd-1"
    found = entry(rig)
    assert (found["outcome"], found["status"]) == ("delivered", "200")
    assert float(found["latency_ms"]) > 0
    assert rig.route().state == "retrying"


def test_not_now_with_a_hint_is_redelivered_once_after_it_with_the_same_key(
    rig: Rig, webhook_to: Point
) -> None:
    fired = retrying_after(rig, seed_profile())
    with receiving("not_now", "ok", retry_after="7") as receiver:
        webhook_to(receiver.url)
        before = datetime.now(UTC)
        rig.dispatch(WEBHOOK)
        waiting = rig.route()
        assert (waiting.state, waiting.redeliveries, waiting.retry_ordinal) == ("retry_wait", 1, 1)
        assert waiting.deadline is not None
        assert before + timedelta(seconds=7) <= waiting.deadline <= before + timedelta(seconds=9)
        assert entry(rig)["status"] == "503"
        fire(rig)
        rig.dispatch(WEBHOOK)
    keys = [r.headers[KEY_HEADER] for r in receiver.received]
    assert keys == ["route-nd-1:1:1", "route-nd-1:1:1"]
    after = rig.route()
    assert (after.state, after.cycle) == ("retrying", fired.cycle), "the budget is untouched"
    assert (entry(rig)["outcome"], entry(rig)["status"]) == ("delivered", "200")


def test_each_calls_outcome_status_and_latency_are_announced_to_the_owning_host(
    rig: Rig, webhook_to: Point
) -> None:
    """The dispatch runs outside Ray: the owning host learns each webhook call's outcome,
    status and latency from its wake stream, and exports them as metrics."""
    retrying_after(rig, seed_profile())
    with receiving("not_now", "server_error", retry_after="1") as receiver:
        webhook_to(receiver.url)
        rig.dispatch(WEBHOOK, host_id=HOST)
        fire(rig)
        rig.dispatch(WEBHOOK, host_id=HOST)
    calls = announced(rig, HOST)
    assert [(c.fence, c.outcome, c.status) for c in calls] == [
        (AttemptFence("route-nd-1", 1, 1), "not_dispatched", 503),
        (AttemptFence("route-nd-1", 1, 1), "failed", 500),
    ]
    assert all(call.latency_ms > 0 for call in calls)
    assert announced(rig, "host-without-routes") == []


def announced(rig: Rig, host_id: str) -> list[Dispatched]:
    """The dispatcher calls announced on the host's wake stream."""

    async def read() -> list[Dispatched]:
        client = rig.backend.raw()
        try:
            _after, wakes = await next_wakes(client, rig.backend.keys, host_id, "0-0", block_ms=1)
        finally:
            await client.aclose()
        return [wake for wake in wakes if isinstance(wake, Dispatched)]

    return asyncio.run(read())


def test_a_refused_connection_sent_nothing(rig: Rig, webhook_to: Point) -> None:
    retrying_after(rig, seed_profile())
    webhook_to(closed_port_url())
    rig.dispatch(WEBHOOK)
    found = entry(rig)
    assert found["outcome"] == "not_dispatched"
    assert "status" not in found
    assert "webhook not reached" in found["detail"]
    route = rig.route()
    assert (route.state, route.redeliveries) == ("retry_wait", 1)


def test_a_timeout_after_the_request_was_written_is_ambiguous(rig: Rig, webhook_to: Point) -> None:
    retrying_after(rig, seed_profile())
    with receiving("hang") as receiver:
        webhook_to(receiver.url, 0.5)
        rig.dispatch(WEBHOOK)
        assert len(receiver.received) == 1, "the request was written and read"
    found = entry(rig)
    assert found["outcome"] == "failed"
    route = rig.route()
    assert (route.state, route.next_step) == ("action_required", "manual")
    assert route.reason == "webhook request written, then no answer within 0.5 s"


def test_a_reset_after_the_request_was_written_is_ambiguous(rig: Rig, webhook_to: Point) -> None:
    retrying_after(rig, seed_profile())
    with receiving("reset") as receiver:
        webhook_to(receiver.url)
        rig.dispatch(WEBHOOK)
    assert len(receiver.received) == 1
    route = rig.route()
    assert route.state == "action_required"
    assert (route.reason or "").startswith("webhook request written, then ")
    assert entry(rig)["outcome"] == "failed"


def test_another_status_is_ambiguous_with_the_status_and_no_unsanitised_body(
    rig: Rig, webhook_to: Point
) -> None:
    retrying_after(rig, seed_profile())
    text, canary = SHAPE_BY_NAME["github_pat_classic"].planted(random.Random(7))
    with receiving("server_error", answer_body=f"boom: key {text}".encode()) as receiver:
        webhook_to(receiver.url)
        rig.dispatch(WEBHOOK)
    route = rig.route()
    assert route.state == "action_required"
    assert route.reason == "webhook answered 500: outcome ambiguous"
    found = entry(rig)
    assert (found["outcome"], found["status"]) == ("failed", "500")
    assert "boom" in found["answer"]
    stored = json.dumps(found) + json.dumps(route.model_dump(mode="json"))
    assert canary not in stored, "the answer is kept sanitised only"
    assert receiver.received


def test_without_its_secret_the_webhook_cannot_be_loaded(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    retrying_after(rig, seed_profile())
    settings = EngineSettings(
        key_prefix=rig.backend.keys.prefix, dispatcher=WEBHOOK, webhook_url="http://127.0.0.1:9/"
    )
    monkeypatch.setenv(SETTINGS_ENV, settings.to_environment()[SETTINGS_ENV])
    rig.dispatch(WEBHOOK)
    route = rig.route()
    assert (route.state, route.reason) == ("action_required", "dispatcher cannot be loaded")
