"""`recovery notices`: the outstanding retry notices read straight from Redis. Messages are
written through the Redis transcript under a unique prefix on the session's real Redis;
the error paths need no Redis at all."""

from __future__ import annotations

import asyncio
import json

import pytest
from pydantic import JsonValue

from actors.cli.main import main
from actors.store.redis_transcript import RedisTranscript
from tests.actors.conftest import Backend

integration = pytest.mark.integration


def seed(backend: Backend) -> None:
    """s1: one retry notice and one recovery message; s2: one retry notice; s3: none."""

    async def scenario() -> None:
        port = RedisTranscript(backend.raw(), clock=backend.clock, keys=backend.keys,
                               owns_client=True)  # fmt: skip
        notice: dict[str, JsonValue] = {"retrying": True, "retry_ordinal": 2, "retry_max": 5,
                  "deadline": "2026-03-01T12:00:05Z"}  # fmt: skip
        await port.create_message("task-1", "s1", kind="status", content="retry 2 of 5",
                                  metadata=notice)  # fmt: skip
        await port.create_message("task-1", "s1", kind="recovery", content="resume?",
                                  metadata={"actions": ["resume"]})  # fmt: skip
        first: dict[str, JsonValue] = {**notice, "retry_ordinal": 1, "retry_max": 3}
        await port.create_message("task-2", "s2", kind="status", content="retry 1 of 3",
                                  metadata=first)  # fmt: skip
        await port.create_message("task-2", "s3", kind="status", content="settled",
                                  metadata={"retrying": "true"})  # fmt: skip  # not boolean

    asyncio.run(scenario())


def run(backend: Backend, *argv: str) -> int:
    return main(["notices", *argv, "--redis-url", str(backend.url), "--prefix",
                 backend.keys.prefix])  # fmt: skip


@integration
def test_notices_json_lists_only_boolean_retrying_messages_by_session(
    real_backend: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    seed(real_backend)
    assert run(real_backend, "--json") == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["session_id"], r["task_id"], r["metadata"]["retry_ordinal"]) for r in rows] == [
        ("s1", "task-1", 2), ("s2", "task-2", 1),
    ]  # fmt: skip
    assert run(real_backend, "--json", "--session", "s2") == 0
    [only] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert only["session_id"] == "s2"


@integration
def test_notices_text_is_a_table_and_says_when_there_are_none(
    real_backend: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    seed(real_backend)
    assert run(real_backend) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["SESSION", "TASK", "CREATED"]
    assert [line.split()[0] for line in lines[1:]] == ["s1", "s2"]
    assert "2 of 5" in lines[1]
    assert run(real_backend, "--session", "s3") == 0
    assert capsys.readouterr().out.strip() == "no retry notices for session 's3'"


def test_a_bad_session_id_or_an_unreachable_redis_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    assert main(["notices", "--redis-url", url, "--session", "bad id!"]) == 2
    assert main(["notices", "--redis-url", url]) == 2
    errors = capsys.readouterr().err.splitlines()
    assert len(errors) == 2
    assert all(line.startswith("recovery notices: ") for line in errors)
