"""The reference receiver written without Python (docs/webhook_receiver.mjs, Node's standard
library only) verifies what the webhook dispatcher signs: it takes a signed attempt once,
and refuses a tampered body, a wrong secret and a stale timestamp."""

from __future__ import annotations

import http.client
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from actors.jobs.dispatcher import ReplayIdentity
from actors.jobs.webhook import (
    KEY_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    CandidateRef,
    idempotency_key,
    payload,
    sign,
)
from actors.keys import AttemptFence

RECEIVER = Path(__file__).parents[3] / "docs" / "webhook_receiver.mjs"
SECRET = "node-receiver-secret-0123456789"
NODE = shutil.which("node")

pytestmark = pytest.mark.skipif(NODE is None, reason="needs node (apt-get install nodejs)")


@pytest.fixture(scope="module")
def receiver() -> Iterator[tuple[subprocess.Popen[str], int]]:
    assert NODE is not None
    env = {**os.environ, "WEBHOOK_SECRET": SECRET, "PORT": "0"}
    process = subprocess.Popen(
        [NODE, str(RECEIVER)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert process.stderr is not None
    line = process.stderr.readline()  # blocks until it listens (or exits)
    assert line.startswith("listening "), line
    try:
        yield process, int(line.split()[1])
    finally:
        process.terminate()
        process.wait(10)


def attempt(ordinal: int) -> tuple[bytes, str]:
    identity = ReplayIdentity.of(AttemptFence("route-n", 1, ordinal), "claude", prompt_ref="p")
    return payload(identity, CandidateRef("claude", "claude-acp", "anthropic"), "due"), (
        idempotency_key(identity)
    )


def post(port: int, body: bytes, key: str, *, timestamp: int, signature: str) -> tuple[int, str]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        headers = {
            "Content-Type": "application/json", KEY_HEADER: key,
            TIMESTAMP_HEADER: str(timestamp), SIGNATURE_HEADER: signature,
        }  # fmt: skip
        connection.request("POST", "/", body=body, headers=headers)
        response = connection.getresponse()
        return response.status, response.read().decode().strip()
    finally:
        connection.close()


def test_a_signed_attempt_is_taken_once(receiver: tuple[subprocess.Popen[str], int]) -> None:
    process, port = receiver
    body, key = attempt(1)
    now = int(time.time())
    assert post(port, body, key, timestamp=now, signature=sign(SECRET, now, body)) == (
        200, "taken",
    )  # fmt: skip
    assert process.stdout is not None
    taken = json.loads(process.stdout.readline())
    assert (taken["key"], taken["route"], taken["candidate"]["agent"]) == (
        "route-n:1:1", "route-n", "claude-acp",
    )  # fmt: skip
    again = int(time.time())
    assert post(port, body, key, timestamp=again, signature=sign(SECRET, again, body)) == (
        200, "already taken",
    )  # fmt: skip


@pytest.mark.parametrize(
    "fault", ["tampered body", "wrong secret", "stale timestamp", "forged signature"]
)
def test_a_request_that_does_not_verify_is_refused(
    receiver: tuple[subprocess.Popen[str], int], fault: str
) -> None:
    _, port = receiver
    body, key = attempt(2)
    now = int(time.time())
    signed_at, secret, sent = now, SECRET, body
    if fault == "tampered body":
        sent = body.replace(b'"due"', b'"rm -rf"')
    elif fault == "wrong secret":
        secret = "another-secret-0123456789"
    elif fault == "stale timestamp":
        signed_at = now - 3600
    signature = sign(secret, signed_at, body)
    if fault == "forged signature":
        signature = "v1=" + "0" * 64
    status, text = post(port, sent, key, timestamp=signed_at, signature=signature)
    assert (status, text) == (401, "bad signature or stale timestamp")
