"""Issue 15's provider fault scenarios through the real runtime (docs/CONTRACTS.md,
Benchmarks): a local Ray with two route hosts, an embedded Redis (or REDIS_URL), rq
workers running the demo dispatcher, a fake OpenAI-compatible provider over HTTP and an
orchestrator serving one route per request (tests/actors/faults). All scenarios run at
once, each on accounts of its own, with the production circuit settings. Prints one JSON
line: each scenario's figures and whether its must-show held, and `all_ok`.

`--only NAME[,NAME]` runs some of them. The same harness is the integration test
tests/actors/hosting/test_provider_faults.py; this prints the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import uuid
from pathlib import Path
from typing import Any

import ray
from bench_common import print_json_line, redis_url

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the checkout, for tests/

from actors.demo.dispatcher import DISPATCHER_PATH
from actors.hosting.runtime import RecoveryRuntime
from tests.actors.faults.run import run_scenarios
from tests.actors.faults.scenarios import scenarios


async def measure(names: set[str] | None) -> dict[str, Any]:
    chosen = [s for s in scenarios() if names is None or s.name in names]
    async with redis_url() as (url, _server):
        runtime = RecoveryRuntime(
            redis_url=url, key_prefix=f"bench-faults-{uuid.uuid4().hex[:8]}", host_count=2,
            dispatcher=DISPATCHER_PATH, installation_key="bench-provider-faults",
        ).start()  # fmt: skip
        try:
            figures = await run_scenarios(runtime, chosen)
        finally:
            runtime.shutdown()
    return {"all_ok": all(f["ok"] for f in figures.values()), "scenarios": figures}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="scenario names, comma separated")
    args = parser.parse_args(argv)
    names = {n for n in args.only.split(",") if n} or None
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        print_json_line(lambda: asyncio.run(measure(names)))
    finally:
        ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
