from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.redis_servers import redis_for_tests


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One real Redis for the integration session (see tests/redis_servers.py)."""
    with redis_for_tests(tmp_path_factory.mktemp("redis")) as url:
        yield url
