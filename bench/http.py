"""What the HTTP API adds to a failure report (docs/CONTRACTS.md, Benchmarks).

One run, one local runtime (`--hosts` route hosts on a local Ray, Redis embedded in a
temporary folder unless REDIS_URL is set), and the HTTP API served on it exactly as
`recovery up` serves it (actors/api/: a bearer token, request metrics, uvicorn in a thread
of this process on a free loopback port). Every measured route is started first through
a route handle (not timed); then each pair of reports alternates the two paths, A/B then
B/A, one report at a time:

- `http`: `POST /routes/{id}/failure` with the evidence as JSON, from a keep-alive
  http.client connection in this process's main thread, answer parsed;
- `handle`: the same report through RouteHandle.report_failure (the Python path).

Each report is Anthropic's 529 with a `Retry-After` header, on a route of its own whose
candidate names an account of its own (so no circuit ever opens and every report is the
same decision: a retry). Latency: the call to the parsed answer. CPU: this process's CPU
time during the call (the client, the API's thread and the Ray driver: the route host's
share is the same on both paths and is not counted). Prints one JSON line.
"""

from __future__ import annotations

import sys
from pathlib import Path

# This file is named `http`: run as `python bench/http.py`, its folder comes first on the
# import path and would hide the standard library's `http` from everything (uvicorn too).
# The folder goes to the end, where `bench_common` is still found.
BENCH = str(Path(__file__).resolve().parent)
sys.path[:] = [p for p in sys.path if str(Path(p or ".").resolve()) != BENCH] + [BENCH]

import argparse  # noqa: E402 - after the path is set (above)
import asyncio  # noqa: E402
import gc  # noqa: E402
import http.client  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from typing import Any, Final  # noqa: E402

from bench_common import ms, percentile  # noqa: E402

from actors.api import ApiBackend, Tokens, create_app  # noqa: E402
from actors.api.metrics import ray_request_metrics  # noqa: E402
from actors.api.server import ApiServer, bind  # noqa: E402
from actors.engine.config_values import ApiAddress  # noqa: E402
from actors.hosting.runtime import RecoveryRuntime  # noqa: E402
from actors.routes.profiles import ConcreteProfile  # noqa: E402
from catalogue import Evidence  # noqa: E402
from policy import TurnEvidence  # noqa: E402

TOKEN: Final = "bench-http-token-0123456789"
TARGET_ADDED_P50_MS: Final = 1.0
EVIDENCE: Final = {
    "kind": "http", "http_status": 529, "provider": "anthropic", "agent": "claude-acp",
    "headers": {"Retry-After": "120"},
    "body": json.dumps({"type": "error", "error": {"type": "overloaded_error",
                                                   "message": "Overloaded"}}),
}  # fmt: skip
TURN: Final = TurnEvidence.before_any_output(execution_id="exec-1", prompt_generation=1)


def profile(index: int) -> ConcreteProfile:
    return ConcreteProfile(
        id="claude", agent="claude-acp", provider="anthropic", account=f"bench-{index}"
    )


class HttpClient:
    """One keep-alive connection to the API, as an orchestrator's HTTP client keeps."""

    def __init__(self, port: int) -> None:
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.connection.request("POST", path, json.dumps(body), self.headers)
        answer = self.connection.getresponse()
        data: dict[str, Any] = json.loads(answer.read())
        if answer.status != 200:
            raise RuntimeError(f"{path}: {answer.status} {data}")
        return data


def measure(
    runtime: RecoveryRuntime, client: HttpClient, pairs: int, warmup: int
) -> dict[str, Any]:
    loop = asyncio.new_event_loop()
    total = pairs + warmup
    http_ids = [f"http-{i}" for i in range(total)]
    handle_ids = [f"handle-{i}" for i in range(total)]

    async def start_all() -> None:
        for index, route_id in enumerate([*http_ids, *handle_ids]):
            await runtime.route(route_id).start(
                profile(index), caller="bench", invocation_id="turn-1"
            )

    loop.run_until_complete(start_all())
    evidence = Evidence.model_validate(EVIDENCE)
    body = {"generation": 1, "evidence": EVIDENCE, "turn": TURN.model_dump(mode="json"),
            "caller": "bench", "invocation_id": "turn-1"}  # fmt: skip
    figures: dict[str, list[tuple[float, float]]] = {"http": [], "handle": []}

    def over_http(index: int) -> tuple[float, float, str]:
        wall, cpu = time.perf_counter(), time.process_time()
        answer = client.post(f"/routes/{http_ids[index]}/failure", body)
        return time.perf_counter() - wall, time.process_time() - cpu, answer["state"]

    def over_handle(index: int) -> tuple[float, float, str]:
        route = runtime.route(handle_ids[index])
        wall, cpu = time.perf_counter(), time.process_time()
        answer = loop.run_until_complete(route.report_failure(
            1, evidence, TURN, caller="bench", invocation_id="turn-1"))  # fmt: skip
        return time.perf_counter() - wall, time.process_time() - cpu, answer.state

    gc.collect()
    gc.freeze()  # the timed reports see no full collection of the setup's garbage
    for index in range(total):
        order = [("http", over_http), ("handle", over_handle)]
        for name, call in order if index % 2 == 0 else order[::-1]:
            wall, cpu, state = call(index)
            if state not in {"retry_wait", "waiting_for_reset"}:
                raise RuntimeError(f"{name} report {index} answered {state}")
            if index >= warmup:
                figures[name].append((wall, cpu))
    loop.close()
    return summary(figures)


def summary(figures: dict[str, list[tuple[float, float]]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, samples in figures.items():
        walls = [wall for wall, _ in samples]
        out[f"{name}_p50_ms"] = ms(percentile(walls, 0.50))
        out[f"{name}_p99_ms"] = ms(percentile(walls, 0.99))
        out[f"{name}_mean_ms"] = ms(statistics.fmean(walls))
        out[f"{name}_cpu_us_per_op"] = round(statistics.fmean(c for _, c in samples) * 1e6, 1)
    out["http_added_p50_ms"] = round(out["http_p50_ms"] - out["handle_p50_ms"], 3)
    out["http_added_p99_ms"] = round(out["http_p99_ms"] - out["handle_p99_ms"], 3)
    out["http_added_cpu_us_per_op"] = round(
        out["http_cpu_us_per_op"] - out["handle_cpu_us_per_op"], 1
    )
    out["target_added_p50_ms"] = TARGET_ADDED_P50_MS
    out["target_met"] = out["http_added_p50_ms"] <= TARGET_ADDED_P50_MS
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=500, help="measured report pairs")
    parser.add_argument("--warmup", type=int, default=50, help="pairs not measured")
    parser.add_argument("--hosts", type=int, default=1, help="route hosts")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-http-") as folder:
        runtime = RecoveryRuntime(
            redis_url=os.environ.get("REDIS_URL"), data_dir=Path(folder),
            host_count=args.hosts, key_prefix=f"bench-http-{os.getpid()}", ray_dashboard=False,
        ).start()  # fmt: skip
        address = ApiAddress("127.0.0.1", 0)
        app = create_app(
            ApiBackend.of_runtime(runtime), tokens=Tokens.of({TOKEN: "bench"}),
            metrics=ray_request_metrics(),
        )  # fmt: skip
        server = ApiServer(app, bind(address), address).start()
        try:
            figures = measure(runtime, HttpClient(server.port), args.pairs, args.warmup)
        finally:
            server.stop()
            runtime.shutdown()
    figures = {"pairs": args.pairs, "hosts": args.hosts, **figures}
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
