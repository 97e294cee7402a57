"""Shared values for the circuit store tests: resources, failures and store factories on
the route tests' backends (fakeredis[lua] or the session's real Redis, own prefix each)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from typing import Any

from fakeredis.aioredis import FakeRedis

from actors.store.circuit_store import CircuitStore
from circuits import ProbeDenied, ProbeGrant, ResourceKey, credential_fingerprint
from tests.actors.conftest import Backend
from tests.circuits.builders import failure

__all__ = ["OTHER", "RESOURCE", "failure", "grant_of", "hard", "later", "open_store", "stored_hash"]

INSTALLATION_KEY = b"test-installation-key"
RESOURCE = ResourceKey.for_candidate(
    "anthropic", "claude-opus", credential_fingerprint("account-1", INSTALLATION_KEY)
)
OTHER = ResourceKey(provider="openai")
TTL_S = 30.0


def later(backend: Backend, seconds: float) -> datetime:
    """The backend's clock moved on by `seconds` (and that time)."""
    return backend.clock.advance(timedelta(seconds=seconds))


def hard(reset_in_s: float | None = None, code: str = "quota_limited") -> Any:
    return failure(code, retry_after_s=reset_in_s)


def grant_of(result: ProbeGrant | ProbeDenied) -> ProbeGrant:
    assert isinstance(result, ProbeGrant), result
    return result


async def stored_hash(backend: Backend, resource: ResourceKey) -> dict[str, str]:
    """The circuit's hash as redis-cli shows it."""
    raw = await backend.raw().hgetall(backend.keys.circuit(resource.resource_id))
    return {str(name): str(value) for name, value in raw.items()}


@asynccontextmanager
async def open_store(backend: Backend, **options: Any) -> AsyncIterator[CircuitStore]:
    """A circuit store on the backend: its own bounded pool on real Redis."""
    if backend.url is not None:
        store = CircuitStore.connect(backend.url, keys=backend.keys, **options)
    else:
        client = FakeRedis(server=backend.fake_server, decode_responses=True)
        store = CircuitStore(client, keys=backend.keys, owns_client=True, **options)
    async with store:
        yield store
