"""A second orchestrator process, for tests/actors/hosting/test_installation.py.

    python -m tests.actors.hosting.attach_client URL PREFIX MODE

MODE `attach`: RecoveryRuntime.attach(); starts route `x-1`, reports a failure, stops it,
then prints one JSON line (the snapshots it saw and the host index of routes r-0..r-49)
and shuts its runtime down. MODE `start-3`: RecoveryRuntime(host_count=3).start() and
prints the refusal. MODE `start-equal`: start() with the installation's own settings,
which attaches; it reports on `x-2` and exits without calling shutdown().
"""

from __future__ import annotations

import asyncio
import json
import sys

from actors.hosting.installation import InstallationMismatchError
from actors.hosting.runtime import RecoveryRuntime
from policy import Outcome
from tests.actors.route_scenarios import candidate, overloaded, profile, retries, safe_turn

ROUTES = [f"r-{n}" for n in range(50)]


def quick() -> object:
    return profile(candidate("claude", transient=retries(3, 30, Outcome.STOP)))


async def drive(runtime: RecoveryRuntime, route_id: str) -> list[str]:
    route = runtime.route(route_id)
    started = await route.start(quick(), caller="office", invocation_id=f"inv-{route_id}")  # type: ignore[arg-type]
    failed = await route.report_failure(
        started.generation, overloaded(), safe_turn(), caller="office",
        invocation_id=f"inv-{route_id}",
    )  # fmt: skip
    return [started.state, failed.state]


def main(url: str, prefix: str, mode: str) -> None:
    if mode == "start-3":
        try:
            RecoveryRuntime(redis_url=url, key_prefix=prefix, host_count=3).start()
        except InstallationMismatchError as error:
            print(json.dumps({"refused": str(error), "setting": error.setting}))
            return
        print(json.dumps({"refused": None}))
        return
    if mode == "start-equal":
        runtime = RecoveryRuntime(redis_url=url, key_prefix=prefix).start()
        states = asyncio.run(drive(runtime, "x-2"))
        print(json.dumps({"owner": runtime.owner, "states": states}))
        return  # exits without shutdown(): the owner's hosts must keep serving
    runtime = RecoveryRuntime.attach(redis_url=url, key_prefix=prefix)
    states = asyncio.run(drive(runtime, "x-1"))

    async def stop() -> str:
        snapshot = await runtime.route("x-1").snapshot()
        stopped = await runtime.route("x-1").stop(snapshot.generation)
        return stopped.state

    states.append(asyncio.run(stop()))
    owners = {route_id: runtime.host_index(route_id) for route_id in ROUTES}
    print(json.dumps({"owner": runtime.owner, "states": states, "owners": owners}))
    runtime.shutdown()


if __name__ == "__main__":
    main(*sys.argv[1:4])
