"""Run fault scenarios (scenarios.py) at once on a started runtime whose dispatcher is the
demo's (actors.demo.dispatcher:dispatch), against one fake provider; each scenario's
figures, with `ok` saying whether its must-show holds."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from typing import Any, Final

from actors.hosting.runtime import RecoveryRuntime
from tests.actors.faults.fake_openai import Behaviour, FakeOpenAI
from tests.actors.faults.orchestrator import FaultOrchestrator, Served
from tests.actors.faults.scenarios import Scenario, issue_profile

REQUEST_TIMEOUT_S: Final = 180.0  # only guards against a hang: the slowest takes ~70 s


async def run_scenarios(
    runtime: RecoveryRuntime, chosen: Sequence[Scenario]
) -> dict[str, dict[str, Any]]:
    """Every request of every scenario in `chosen`, concurrently; figures by scenario."""
    behaviours: dict[tuple[str, str], Behaviour] = {}
    for scenario in chosen:
        behaviours.update(scenario.behaviours)
    provider = FakeOpenAI(behaviours)
    url = await provider.start()
    run = uuid.uuid4().hex[:6]
    try:
        async with FaultOrchestrator(runtime, url, provider.began) as orchestrator:

            async def request(name: str, n: int, at: float, account: str, fallback: str) -> Served:
                # the request's arrival time is the scenario's input (one every 4 s):
                # nothing could say it has come but the clock
                await asyncio.sleep(max(0.0, at - orchestrator.now()))
                route_id = f"{name}-{run}-{n}"
                serving = orchestrator.serve(route_id, issue_profile(account, fallback))
                return await asyncio.wait_for(serving, REQUEST_TIMEOUT_S)

            results = await asyncio.gather(*(
                asyncio.gather(*(request(s.name, n, *spec) for n, spec in enumerate(s.requests)))
                for s in chosen
            ))  # fmt: skip
    finally:
        await provider.stop()
    return {
        scenario.name: scenario.check(scenario, provider.calls, served)
        for scenario, served in zip(chosen, results, strict=True)
    }
