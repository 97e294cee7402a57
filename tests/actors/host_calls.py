"""One request to a route host through its one entry point, `run_batch`, answered as a
plain call would be: the answer, or its exception raised."""

from __future__ import annotations

from typing import Any

from actors.hosting.batcher import HostRequest
from actors.hosting.route_host import RouteHost


def _unwrapped(answers: list[Any]) -> Any:
    [answer] = answers
    if isinstance(answer, BaseException):
        raise answer
    return answer


async def one_call(host: RouteHost, route_id: str, request: HostRequest) -> Any:
    """`request` as a batch of one to an in-process host."""
    return _unwrapped(await host.run_batch([(route_id, request)]))


async def one_remote_call(host: Any, route_id: str, request: HostRequest) -> Any:
    """`request` as a batch of one to a host behind a Ray actor handle."""
    return _unwrapped(await host.run_batch.remote([(route_id, request)]))
