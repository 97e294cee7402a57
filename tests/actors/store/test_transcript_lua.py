"""The transcript scripts driven directly (fakeredis[lua]): the guards the store never
reaches through its own calls."""

from __future__ import annotations

import asyncio
from typing import Any

from fakeredis.aioredis import FakeRedis

from actors.keys import KeySpace
from actors.store.scripts import LoadedScript, run_script, script

KEYS = KeySpace("recovery-lua")
MESSAGE_ID = "0" * 31 + "1"


def _create_keys() -> list[str]:
    return [
        KEYS.message(MESSAGE_ID),
        KEYS.session_messages("task-1", "route-1"),
        KEYS.transcript_sessions,
        KEYS.transcript,
    ]


def _create_argv(content: str) -> list[Any]:
    fields = ["id", MESSAGE_ID, "task_id", "task-1", "session_id", "route-1",
              "content", content]  # fmt: skip
    return [MESSAGE_ID, "1.5", "task-1:route-1", 100, *fields]


def test_every_transcript_script_has_its_header_and_names_no_key() -> None:
    for name in ("transcript_create", "transcript_update", "transcript_delete"):
        assert script(name).source.startswith("-- ")  # `script` refuses one without


def test_a_create_over_an_existing_id_writes_nothing() -> None:
    async def scenario() -> None:
        client = FakeRedis(decode_responses=True)
        create = LoadedScript.named("transcript_create")
        assert await run_script(client, create, _create_keys(), _create_argv("first")) == 1
        assert await run_script(client, create, _create_keys(), _create_argv("second")) == 0
        assert await client.hget(KEYS.message(MESSAGE_ID), "content") == "first"
        assert await client.xlen(KEYS.transcript) == 1
        await client.aclose()

    asyncio.run(scenario())


def test_a_delete_for_another_session_writes_nothing() -> None:
    async def scenario() -> None:
        client = FakeRedis(decode_responses=True)
        create = LoadedScript.named("transcript_create")
        delete = LoadedScript.named("transcript_delete")
        await run_script(client, create, _create_keys(), _create_argv("notice"))
        foreign = [MESSAGE_ID, "task-2", "route-1", "task-2:route-1", 100]
        assert await run_script(client, delete, _create_keys(), foreign) == 0
        assert await client.exists(KEYS.message(MESSAGE_ID)) == 1
        assert await client.zcard(KEYS.session_messages("task-1", "route-1")) == 1
        mine = [MESSAGE_ID, "task-1", "route-1", "task-1:route-1", 100]
        assert await run_script(client, delete, _create_keys(), mine) == 1
        assert await client.smembers(KEYS.transcript_sessions) == set()
        assert await client.xlen(KEYS.transcript) == 2
        await client.aclose()

    asyncio.run(scenario())


def test_an_update_of_a_missing_message_returns_nothing_and_publishes_nothing() -> None:
    async def scenario() -> None:
        client = FakeRedis(decode_responses=True)
        update = LoadedScript.named("transcript_update")
        keys = [KEYS.message(MESSAGE_ID), KEYS.transcript]
        assert await run_script(client, update, keys, ["c", "{}", 100]) == []
        assert await client.exists(KEYS.message(MESSAGE_ID), KEYS.transcript) == 0
        await client.aclose()

    asyncio.run(scenario())


def test_a_script_missing_from_the_server_is_loaded_and_sent_again() -> None:
    async def scenario() -> None:
        client = FakeRedis(decode_responses=True)
        update = LoadedScript.named("transcript_update")
        await client.script_flush()
        keys = [KEYS.message(MESSAGE_ID), KEYS.transcript]
        assert await run_script(client, update, keys, ["c", "{}", 100]) == []
        assert await client.script_exists(update.sha) == [True]
        await client.aclose()

    asyncio.run(scenario())
