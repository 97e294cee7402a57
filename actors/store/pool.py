"""The bounded asyncio Redis client every store in a route host uses.

redis.asyncio opens one connection per in-flight command unless its pool is bounded: a
blocking pool of `max_connections` makes the rest wait up to `timeout_s`. redis-py's own
retries are off, so no command is ever resent behind its caller's back (a resent
transition could be applied after the caller gave up on it).
"""

from __future__ import annotations

from types import TracebackType
from typing import Any, Self
from urllib.parse import quote, urlencode

import redis
from redis import Redis as SyncRedis
from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff


def bounded_client(url: str, *, max_connections: int, timeout_s: float) -> Redis:
    """A text-decoding client on its own bounded, blocking pool, without retries. Bytes
    that are not UTF-8 decode to surrogates (never an exception that fails a whole
    pipeline): the route codec reads such a field as corrupt."""
    pool = BlockingConnectionPool.from_url(
        url,
        max_connections=max_connections,
        timeout=timeout_s,
        socket_timeout=timeout_s,
        socket_connect_timeout=timeout_s,
        retry=Retry(NoBackoff(), 0),
        decode_responses=True,
        encoding_errors="surrogateescape",
    )
    return Redis.from_pool(pool)


class OwnsItsClient:
    """`aclose` and `async with` for a store that may own its client: an owned client
    (one `connect` built) is closed with the store; a client handed in is the caller's."""

    _owns_client: bool

    def _own_client(self) -> Redis:
        raise NotImplementedError

    async def aclose(self) -> None:
        if self._owns_client:
            await self._own_client().aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()


def connection_url(connection: SyncRedis) -> str:
    """The URL of the Redis a redis-py client talks to (rq hands the job a client; the
    route store opens its own bounded pool from a URL)."""
    pool = connection.connection_pool
    settings = pool.connection_kwargs
    query: dict[str, Any] = {"db": settings.get("db", 0)}
    for name in ("username", "password"):
        if settings.get(name):
            query[name] = settings[name]
    if settings.get("path"):
        return f"unix://{quote(str(settings['path']))}?{urlencode(query)}"
    scheme = "rediss" if issubclass(pool.connection_class, redis.SSLConnection) else "redis"
    host, port = str(settings.get("host", "localhost")), settings.get("port", 6379)
    host = f"[{host}]" if ":" in host else host  # an IPv6 address
    return f"{scheme}://{host}:{port}?{urlencode(query)}"
