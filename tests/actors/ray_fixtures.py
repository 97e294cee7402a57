"""The one Ray of the integration session, for the tests that need Ray (and only them:
a test module opts in with `pytestmark = pytest.mark.usefixtures("ray_session")`)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Final

import pytest
import ray

POLL_S: Final = 0.02


@pytest.fixture(scope="session")
def ray_session() -> Iterator[None]:
    """A local Ray for the whole session, shut down (raylet and all) at its end."""
    if not ray.is_initialized():
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


async def wait_for(condition: Callable[[], Awaitable[bool]], timeout: float) -> float:
    """Wait until `condition()` holds, polling it briefly; the seconds it took. A failed
    wait raises TimeoutError: the timeout only guards against a hang."""
    started = time.monotonic()
    while not await condition():
        if time.monotonic() - started > timeout:
            raise TimeoutError(f"condition not met within {timeout} s")
        await asyncio.sleep(POLL_S)
    return time.monotonic() - started
