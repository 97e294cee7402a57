"""The one Ray of the integration session, for the tests that need Ray (and only them:
a test module opts in with `pytestmark = pytest.mark.usefixtures("ray_session")`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import ray


@pytest.fixture(scope="session")
def ray_session() -> Iterator[None]:
    """A local Ray for the whole session, shut down (raylet and all) at its end."""
    if not ray.is_initialized():
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()
