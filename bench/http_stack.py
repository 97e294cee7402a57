"""What the HTTP stack itself costs a failure report: the API's CPU with no runtime behind it.

bench/http_api.py measures a report end to end, where the route host's ~20 ms and the
machine's load dwarf the API's share. Here the API (served as `up` serves it: token,
metrics recorder, uvicorn in a thread, actors/api/server.py) answers from routes that
return a fixed snapshot at once (no Ray, no Redis), so what is measured is the HTTP stack
alone: the client's http.client call and the serving process's CPU per report.

Two apps are served side by side, the API as shipped and the same app without its fast
path (`fastapi`: every request through FastAPI's machinery), and one client process (a
keep-alive http.client connection to each, no Ray driver) sends `--requests` reports to
one, then the other, in order then in reverse, for `--rounds` rounds (the first not
counted). Figures are medians over rounds: CPU µs per report of the client and of the
serving process, and the wall time per report. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any, Final

import redis
from http_api import TOKEN, http_client
from redis.asyncio import Redis as AsyncRedis

from actors.api import ApiBackend, Tokens, create_app
from actors.api.metrics import NoMetrics
from actors.api.server import ApiServer, bind
from actors.engine.config_values import ApiAddress
from actors.keys import KeySpace
from actors.routes.models import RouteSnapshot

VARIANTS: Final = ("api", "fastapi")
UNUSED_REDIS: Final = "redis://127.0.0.1:1"  # clients made, never connected


class FixedRoute:
    """A route whose every command answers its snapshot at once."""

    def __init__(self, route_id: str) -> None:
        self.snapshot_now = RouteSnapshot.absent(route_id)

    async def report_failure(self, *_args: Any, **_options: Any) -> RouteSnapshot:
        return self.snapshot_now


class FixedRoutes:
    def route(self, route_id: str) -> Any:
        return FixedRoute(route_id)


def serve(*, fast_path: bool) -> ApiServer:
    backend = ApiBackend(
        routes=FixedRoutes(), keys=KeySpace("bench-stack"),
        listing=redis.Redis.from_url(UNUSED_REDIS),
        connect=lambda _size, _timeout: AsyncRedis.from_url(UNUSED_REDIS),
    )  # fmt: skip
    app = create_app(
        backend, tokens=Tokens.of({TOKEN: "bench"}), metrics=NoMetrics(), fast_path=fast_path
    )
    address = ApiAddress("127.0.0.1", 0)
    return ApiServer(app, bind(address), address).start()


def client() -> None:
    """The client process: `<port> <n>` in, the CPU seconds of n reports out (a new
    connection each round: uvicorn closes one idle for 5 s while the other app's round
    runs)."""
    for line in sys.stdin:
        port, count = line.split()
        report = http_client(int(port))
        report("r-1")  # connected, not counted
        started = time.process_time()
        for _ in range(int(count)):
            report("r-1")
        print(time.process_time() - started, flush=True)


def run(requests: int, rounds: int) -> dict[str, Any]:
    servers = {"api": serve(fast_path=True), "fastapi": serve(fast_path=False)}
    command = [sys.executable, __file__, "--client"]
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert process.stdin is not None
    assert process.stdout is not None
    samples: dict[str, list[tuple[float, float, float]]] = {name: [] for name in VARIANTS}
    try:
        for index in range(rounds):
            for name in VARIANTS if index % 2 == 0 else VARIANTS[::-1]:
                own, wall = time.process_time(), time.perf_counter()
                process.stdin.write(f"{servers[name].port} {requests}\n")
                process.stdin.flush()
                theirs = float(process.stdout.readline())
                own, wall = time.process_time() - own, time.perf_counter() - wall
                if index > 0:  # the first round warms both up
                    samples[name].append((theirs / requests, own / requests, wall / requests))
    finally:
        process.stdin.close()
        process.wait(30)
        for server in servers.values():
            server.stop()
    return summary(samples)


def summary(samples: dict[str, list[tuple[float, float, float]]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, rows in samples.items():
        for index, figure in enumerate(("client_cpu_us", "server_cpu_us", "wall_us")):
            out[f"{name}_{figure}"] = round(statistics.median(row[index] for row in rows) * 1e6, 1)
        out[f"{name}_cpu_us"] = round(
            out[f"{name}_client_cpu_us"] + out[f"{name}_server_cpu_us"], 1
        )
    out["fast_path_saves_cpu_us"] = round(out["fastapi_cpu_us"] - out["api_cpu_us"], 1)
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=1000, help="reports per round and app")
    parser.add_argument("--rounds", type=int, default=7, help="rounds (the first not counted)")
    parser.add_argument("--client", action="store_true", help=argparse.SUPPRESS)  # the client
    args = parser.parse_args(argv)
    if args.client:
        client()
        return 0
    load = os.getloadavg()[0]
    figures = run(args.requests, args.rounds)
    loads = [round(load, 2), round(os.getloadavg()[0], 2)]
    print(
        json.dumps({"requests": args.requests, "rounds": args.rounds, **figures, "load_1m": loads})
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
