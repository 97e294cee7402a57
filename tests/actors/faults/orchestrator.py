"""An orchestrator that serves requests through the real runtime against a fake provider.

One route per request, driven through the runtime's public route handles: start it on
its profile, run each attempt on the candidate the route names by calling the fake
OpenAI-compatible provider (fake_openai.py) over HTTP, report the answer (a success, or
the HTTP error / the client exception as evidence) and follow the decision: run again
at once when the route is active on a candidate, wait for the runtime's dispatch (the
demo dispatcher's message, actors/demo/dispatcher.py) when it waits, give up when it needs
manual recovery. What the provider saw is its own record; this module records how each
request ended.
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass, field
from typing import Final

import aiohttp
from redis.asyncio import Redis

from actors.demo.demo_keys import DemoKeys
from actors.demo.orchestrator import DispatchInbox, FleetControl
from actors.hosting.handle import RouteHandle
from actors.hosting.runtime import RecoveryRuntime
from actors.routes.models import RouteSnapshot
from catalogue import Evidence, EvidenceKind
from policy import Candidate, DynamicProfile, TurnEvidence
from tests.actors.route_scenarios import safe_turn

CALL_TIMEOUT_S: Final = 10.0
RECHECK_S: Final = 5.0  # a waiting request re-reads its route this often
WAITING: Final = frozenset({"retry_wait", "waiting_for_reset"})
RUNNING: Final = frozenset({"active", "switching", "retrying"})


@dataclass
class Served:
    """How one request ended: served by a candidate (seconds from the run's start), or
    not (the route's last state)."""

    route_id: str
    began_at: float
    served_by: str | None = None
    served_at: float | None = None
    final_state: str = ""
    attempts: int = 0
    unexpected: list[str] = field(default_factory=list)


class FaultOrchestrator:
    """Serves requests on a started runtime whose dispatcher is the demo's."""

    def __init__(self, runtime: RecoveryRuntime, base_url: str, began: float) -> None:
        self._runtime = runtime
        self._url = f"{base_url}/v1/chat/completions"
        self._began = began
        self._control = FleetControl(math.inf)
        self._client = Redis.from_url(runtime.url)
        self._inbox = DispatchInbox(self._client, DemoKeys(runtime.key_prefix), self._control)
        self._http: aiohttp.ClientSession | None = None
        self._inbox_task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> FaultOrchestrator:
        self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=CALL_TIMEOUT_S))
        self._inbox_task = asyncio.create_task(self._inbox.run())
        return self

    async def __aexit__(self, *_exc: object) -> None:
        if self._inbox_task is not None:
            self._inbox_task.cancel()
        if self._http is not None:
            await self._http.close()
        await self._client.aclose()

    def now(self) -> float:
        return time.monotonic() - self._began

    async def serve(self, route_id: str, profile: DynamicProfile) -> Served:
        """One request, from its route's start until it is served or gives up."""
        route = self._runtime.route(route_id)
        self._inbox.queue(route_id)
        served = Served(route_id, self.now())
        snap = await route.start(profile, caller="utility", invocation_id=f"inv-{route_id}")
        while True:
            if snap.state in WAITING:
                snap = await self._wait_dispatch(route, snap)
                continue
            if snap.state not in RUNNING:
                served.final_state = snap.state
                return served
            candidate = _candidate(profile, snap.candidate_id)
            served.attempts += 1
            evidence = await self._attempt(candidate)
            if evidence is None:
                done = await route.report_success(snap.generation)
                served.served_by, served.served_at = candidate.id, self.now()
                served.final_state = done.state
                await route.close(done.generation)
                return served
            snap = await route.report_failure(
                snap.generation,
                evidence,
                _turn(route_id, served.attempts),
                caller="utility",
                invocation_id=f"inv-{route_id}",
                attempt=snap.attempt_ordinal,
            )

    async def _attempt(self, candidate: Candidate) -> Evidence | None:
        """Call the provider as `candidate`; None on success, else the failure's evidence."""
        assert self._http is not None
        body = {"model": candidate.model, "messages": [{"role": "user", "content": "hi"}]}
        headers = {"Authorization": f"Bearer {candidate.account or 'default'}"}
        try:
            async with self._http.post(self._url, json=body, headers=headers) as response:
                text = await response.text()
                if response.status == 200:
                    return None
                return Evidence(
                    kind=EvidenceKind.HTTP,
                    http_status=response.status,
                    headers=dict(response.headers),
                    body=text,
                    provider=candidate.provider,
                    model=candidate.model,
                )
        except (aiohttp.ClientError, TimeoutError) as exc:
            name = f"{type(exc).__module__}.{type(exc).__name__}"
            return Evidence(
                kind=EvidenceKind.SDK_EXCEPTION,
                text=f"{name}: {exc}",
                provider=candidate.provider,
                model=candidate.model,
            )

    async def _wait_dispatch(self, route: RouteHandle, snap: RouteSnapshot) -> RouteSnapshot:
        """Until the runtime dispatches this attempt (or the route leaves the wait)."""
        queue = self._inbox.queue(route.route_id)
        while True:
            try:
                record = await asyncio.wait_for(queue.get(), RECHECK_S)
            except TimeoutError:
                current = await route.snapshot()
                if current.state not in WAITING or current.generation != snap.generation:
                    return current
                continue
            if (record.generation, record.ordinal) == (snap.generation, snap.attempt_ordinal):
                return await route.snapshot()


def _candidate(profile: DynamicProfile, candidate_id: str | None) -> Candidate:
    return next(c for c in profile.candidates if c.id == candidate_id)


def _turn(route_id: str, attempt: int) -> TurnEvidence:
    """A raw API call that failed: nothing streamed, no tool ran."""
    return safe_turn(execution_id=f"exec-{route_id}-{attempt}")
