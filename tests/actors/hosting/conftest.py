"""Fixtures the hosting tests share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis


@pytest.fixture
def connection(redis_url: str) -> Iterator[redis.Redis]:
    """A plain synchronous client on the session's Redis (as redis-cli sees the data)."""
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()
