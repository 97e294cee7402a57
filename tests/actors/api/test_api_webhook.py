"""The webhook dispatcher and the HTTP API together, as an orchestrator with no Python meets
them: a real `recovery up` (RECOVERY_DISPATCHER=webhook, an rq worker, a bearer token) and
one Node process (tests/actors/api/orchestrate_webhook.mjs, standard library only) that
both drives a route over the API and receives its retry by webhook. Its first delivery is
answered 503 with Retry-After: 1, so the retry arrives twice with the same idempotency key
and is taken the second time; the turn's success is then reported with the generation the
webhook named. Both calls' outcomes reach `up`'s Prometheus export. Waits are on `up`'s
lines and on the Node process (the metrics scrape repeats, as Ray gives no notice)."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import pytest
import redis

from actors.jobs.ledger import DispatchLedger
from actors.keys import AttemptFence
from actors.store.sync_reads import read_route
from tests.actors.cli.test_cli_up import RunningUp, up_environment
from tests.actors.conftest import _delete_prefix, unique_keys
from tests.actors.metrics_scrape import export_until, samples

pytestmark = pytest.mark.integration

TOKEN: Final = "webhook-node-token-0123456789"
SECRET: Final = "webhook-node-secret-0123456789"
ROUTE: Final = "node-webhook-1"
ORCHESTRATOR: Final = Path(__file__).with_name("orchestrate_webhook.mjs")
START_TIMEOUT_S: Final = 180.0  # a local Ray, two hosts and a worker: ~40 s when loaded
DRIVE_TIMEOUT_S: Final = 150.0
METRICS_TIMEOUT_S: Final = 60.0
NODE = shutil.which("node")


@pytest.fixture
def orchestrator() -> Iterator[tuple[subprocess.Popen[str], int]]:
    """The Node orchestrator, listening for webhooks: (its process, its port)."""
    assert NODE is not None
    env = {"WEBHOOK_SECRET": SECRET, "ROUTE": ROUTE, "PATH": "/usr/bin:/bin"}
    process = subprocess.Popen(
        [NODE, str(ORCHESTRATOR)], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert process.stderr is not None
    line = process.stderr.readline()  # blocks until it listens (or exits)
    try:
        assert line.startswith("listening "), line
        yield process, int(line.split()[1])
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(10)


@pytest.mark.skipif(NODE is None, reason="needs node")
def test_a_node_orchestrator_drives_a_route_whose_retry_arrives_by_webhook(
    redis_url: str, tmp_path: Path, orchestrator: tuple[subprocess.Popen[str], int]
) -> None:
    process, port = orchestrator
    keys = unique_keys()
    env = up_environment(redis_url, keys, tmp_path / "data")
    env.update(
        RECOVERY_API_TOKEN=TOKEN, RECOVERY_DISPATCHER="webhook", RECOVERY_WORKERS="1",
        RECOVERY_WEBHOOK_URL=f"http://127.0.0.1:{port}/recovery", RECOVERY_WEBHOOK_SECRET=SECRET,
    )  # fmt: skip
    up = RunningUp(env, tmp_path / "up.stderr")
    try:
        api_url = up.wait_line("api: ", START_TIMEOUT_S).split()[1]
        up.wait_line("ready: ", START_TIMEOUT_S)
        seen = drive(process, api_url)
        exported = dispatch_metrics(up)
        connection = redis.Redis.from_url(redis_url, decode_responses=True)
        raw = redis.Redis.from_url(redis_url)
        try:
            final = read_route(connection, keys, ROUTE)
            ledger = DispatchLedger(raw, keys).read(AttemptFence(ROUTE, 1, 1))
        finally:
            connection.close()
            raw.close()
        assert up.stop(signal.SIGTERM) == 0, up.report()
    finally:
        if up.process.poll() is None:
            up.kill()
        _delete_prefix(redis_url, keys)
    refused, taken = seen["hooks"]
    key = f"{ROUTE}:1:1"
    assert (refused["key"], taken["key"]) == (key, key), "the same attempt, the same key"
    assert (refused["status"], taken["status"]) == (503, 200)
    attempt = taken["body"]
    assert (attempt["route_id"], attempt["generation"], attempt["ordinal"]) == (ROUTE, 1, 1)
    assert attempt["next_step"] == "run"
    assert attempt["candidate"] == {
        "id": "claude", "agent": "claude-acp", "provider": "anthropic", "model": "claude-sonnet",
    }  # fmt: skip
    assert taken["at"] - refused["at"] >= 900, "redelivered after the 1 s Retry-After"
    assert seen["failure"]["retry_ordinal"] == seen["retrying"]["retry_ordinal"] == 1, (
        "the 503 spent none of the provider's budget"
    )
    assert seen["retrying"]["redeliveries"] == 1
    assert (seen["success"]["state"], seen["success"]["next_step"]) == ("active", "done")
    decisions = [record["decision"] for record in seen["history"]]
    assert decisions == [
        "start", "retry", "deadline_reached", "not_dispatched", "deadline_reached", "success",
    ]  # fmt: skip
    assert (final.state, final.next_step, final.generation) == ("active", "done", 1)
    fields = ledger.fields
    facts = (fields.get("outcome"), fields.get("status"), fields.get("returns"))
    assert facts == ("delivered", "200", "1")
    assert float(fields["latency_ms"]) >= 0
    counted = samples(exported, "ray_recovery_dispatch_outcomes_total{")
    for outcome, status in (("not_dispatched", "503"), ("delivered", "200")):
        tags = (f'outcome="{outcome}"', f'status="{status}"')
        assert any(all(tag in sample for tag in tags) for sample in counted), counted
    assert samples(exported, "ray_recovery_dispatch_latency_seconds_bucket{")


def dispatch_metrics(up: RunningUp) -> str:
    """`up`'s Prometheus export once both webhook calls are in it (Ray exports on its own
    period, with no notice of a change: the scrape is repeated, metrics_scrape.py)."""
    [line] = [line for line in up.lines if line.startswith("metrics: ")]
    url = line.removeprefix("metrics: curl -s ").split(",")[0]
    return export_until(
        url,
        lambda text: len(samples(text, "ray_recovery_dispatch_outcomes_total{")) >= 2,  # 503, 200
        METRICS_TIMEOUT_S,
    )


def drive(process: subprocess.Popen[str], api_url: str) -> dict[str, Any]:
    """Hand the orchestrator the API and wait for what it saw (it exits when done)."""
    assert process.stdin is not None
    process.stdin.write(json.dumps({"api_url": api_url, "token": TOKEN}) + "\n")
    process.stdin.flush()
    out, err = process.communicate(timeout=DRIVE_TIMEOUT_S)
    assert process.returncode == 0, err
    seen: dict[str, Any] = json.loads(out)
    return seen
