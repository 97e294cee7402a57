"""An orchestrator process for tests/actors/cli/test_cli_operator.py: it attaches to the
running `recovery up` (REDIS_URL, RECOVERY_KEY_PREFIX from its environment) and drives
routes as an orchestrator would, so the operator commands find them where a real fleet
leaves them.

    python -m tests.actors.cli.operator_client setup
    python -m tests.actors.cli.operator_client start ROUTE

`setup` starts every route of ROUTES and reports one failure on those that wait (each
route on a provider of its own, so no circuit opens); `start ROUTE` starts ROUTE on the
circuit test's candidate. Each prints one JSON object: route id -> [state, generation].
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Final

from actors.hosting.runtime import RecoveryRuntime
from policy import DynamicProfile, Outcome
from tests.actors.route_scenarios import candidate, overloaded, profile, retries, safe_turn

HOUR: Final = 3600
CIRCUIT_PROVIDER: Final = "gamma"


def waits(*providers: str) -> DynamicProfile:
    """A transient failure waits an hour before its retry (the operator acts first)."""
    return profile(*(candidate(p, transient=retries(3, HOUR, Outcome.STOP)) for p in providers))


# route id -> (its profile, whether a failure is reported after the start)
ROUTES: Final = {
    "op-retry": (waits("alpha"), True),
    "op-skip": (waits("bravo", "charlie"), True),
    "op-cancel": (waits("delta"), True),
    "op-manual": (waits("echo"), False),
    "op-seed": (waits(CIRCUIT_PROVIDER), True),  # its failure makes the circuit known
}


async def drive(
    runtime: RecoveryRuntime, route_id: str, chosen: DynamicProfile, fail: bool
) -> list[object]:
    route = runtime.route(route_id)
    invocation = f"inv-{route_id}"
    snapshot = await route.start(chosen, caller="office", invocation_id=invocation)
    if fail:
        snapshot = await route.report_failure(
            snapshot.generation, overloaded(), safe_turn(), caller="office",
            invocation_id=invocation,
        )  # fmt: skip
    return [snapshot.state, snapshot.generation]


async def drive_all(
    runtime: RecoveryRuntime, mode: str, args: list[str]
) -> dict[str, list[object]]:
    if mode == "setup":
        return {r: await drive(runtime, r, chosen, fail) for r, (chosen, fail) in ROUTES.items()}
    if mode == "start":
        (route_id,) = args
        return {route_id: await drive(runtime, route_id, waits(CIRCUIT_PROVIDER), False)}
    raise SystemExit(f"unknown mode {mode!r}")


def main(mode: str, *args: str) -> None:
    runtime = RecoveryRuntime.attach(
        redis_url=os.environ["REDIS_URL"], key_prefix=os.environ["RECOVERY_KEY_PREFIX"]
    )
    try:
        print(json.dumps(asyncio.run(drive_all(runtime, mode, list(args)))), flush=True)
    finally:
        runtime.shutdown()


if __name__ == "__main__":
    main(*sys.argv[1:])
