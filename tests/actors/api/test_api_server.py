"""The API's server as `recovery up` runs it (actors/api/server.py): `start()` returns only
once the app has started and serves, which is when `up` prints its `api:` line and then
`ready`; an app that cannot start makes `start()` fail instead of returning. Waits are on
events the app sets, never a fixed sleep."""

from __future__ import annotations

import asyncio
import http.client
import threading
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Final

import pytest
from fastapi import FastAPI

from actors.api.server import ApiServer, bind
from actors.engine.config_values import ApiAddress

GUARD_S: Final = 30.0  # against a hang only: every wait below ends on a condition


def held_app(entered: threading.Event, release: threading.Event) -> FastAPI:
    """An app whose startup says it began, then waits for `release`."""

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        entered.set()
        await asyncio.to_thread(release.wait, GUARD_S)
        yield

    app = FastAPI(lifespan=lifespan)

    @app.get("/ping")
    def ping() -> dict[str, str]:
        return {"answer": "pong"}

    return app


def test_start_returns_only_once_the_app_has_started_and_answers_at_once() -> None:
    entered, release = threading.Event(), threading.Event()
    address = ApiAddress("127.0.0.1", 0)
    server = ApiServer(held_app(entered, release), bind(address), address)
    with ThreadPoolExecutor(1) as pool:
        starting = pool.submit(server.start)
        try:
            assert entered.wait(GUARD_S)
            assert not starting.done()  # the app is still starting: `up` says nothing yet
        finally:
            release.set()
        assert starting.result(GUARD_S) is server
    try:
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=GUARD_S)
        connection.request("GET", "/ping")
        answer = connection.getresponse()
        assert (answer.status, answer.read()) == (200, b'{"answer":"pong"}')
        connection.close()
    finally:
        server.stop()


def test_an_app_that_cannot_start_fails_start_and_frees_the_port() -> None:
    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        raise RuntimeError("redis is not there")
        yield  # an async generator, as a lifespan must be

    address = ApiAddress("127.0.0.1", 0)
    listening = bind(address)
    server = ApiServer(FastAPI(lifespan=lifespan), listening, address)
    with pytest.raises(RuntimeError, match="the HTTP API did not start"):
        server.start(GUARD_S)
    assert listening.fileno() == -1  # closed: `up` exits 2 without holding the port
