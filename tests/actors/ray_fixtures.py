"""The one Ray of the integration session, for the tests that need Ray (and only them:
a test module opts in with `pytestmark = pytest.mark.usefixtures("ray_session")`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

import pytest
import ray

# Ray exports metrics every 10 s by default and gives no notice of a change: the tests that
# read its Prometheus export (tests/actors/metrics_scrape.py) waited ~5 s each on average
# for the next export. 1 s is the shortest period Ray allows.
METRICS_REPORT_INTERVAL_MS: Final = 1000


@pytest.fixture(scope="session")
def ray_session() -> Iterator[None]:
    """A local Ray for the whole session, shut down (raylet and all) at its end."""
    if not ray.is_initialized():
        ray.init(
            address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
            _system_config={"metrics_report_interval_ms": METRICS_REPORT_INTERVAL_MS},
        )  # fmt: skip
    yield
    ray.shutdown()
