"""The HTTP API's metrics: requests by route template and status, and their latency.

The API runs in `recovery up`'s process, a Ray driver, so it records through
`ray.util.metrics` like the hosts (actors/hosting/metrics.py) and its figures are on the
same Prometheus export (`ray_` prefixed):

    recovery_api_requests_total{route,method,status}   answered requests
    recovery_api_request_seconds{route,method}         from the request's first byte
                                                       read to its answer's last byte
                                                       written (an event stream: its
                                                       whole life)

`route` is the matched path template (`/routes/{route_id}/failure`), never the path
itself, so a route id never becomes a label; a request that matched no route (or was
refused before routing: 401) is `unmatched`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Final, Protocol

from ray.util.metrics import Counter, Histogram

UNMATCHED: Final = "unmatched"
LATENCY_BOUNDARIES: Final = [
    0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0,
]  # fmt: skip


class RequestMetrics(Protocol):
    def observe(self, route: str, method: str, status: int, seconds: float) -> None:
        """One answered request."""
        ...


@dataclass(frozen=True, slots=True)
class RayRequestMetrics:
    requests: Counter
    latency: Histogram

    def observe(self, route: str, method: str, status: int, seconds: float) -> None:
        self.requests.inc(1, tags={"route": route, "method": method, "status": str(status)})
        self.latency.observe(seconds, tags={"route": route, "method": method})


@cache
def ray_request_metrics() -> RayRequestMetrics:
    """The process's one set (Ray refuses a second metric of the same name)."""
    return RayRequestMetrics(
        requests=Counter(
            "recovery_api_requests_total",
            description="HTTP API requests answered, by route template, method and status.",
            tag_keys=("route", "method", "status"),
        ),
        latency=Histogram(
            "recovery_api_request_seconds",
            description="HTTP API request latency, by route template and method.",
            boundaries=LATENCY_BOUNDARIES,
            tag_keys=("route", "method"),
        ),
    )


class NoMetrics:
    """Records nothing (an app built for a test, or outside Ray)."""

    def observe(self, route: str, method: str, status: int, seconds: float) -> None:
        return None
