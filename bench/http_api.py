"""What the HTTP API adds to a failure report (docs/CONTRACTS.md, Benchmarks).

One run, one local runtime (`--hosts` route hosts on a local Ray, Redis embedded in a
temporary folder unless REDIS_URL is set). This process plays `recovery up`: it owns the
runtime and serves the HTTP API on it as `up` does (actors/api/: a bearer token, request
metrics, uvicorn in a thread on a free loopback port), its main thread idle while a report
is measured. The orchestrators are two processes of their own, as they would be:

- `http`: a Python process that is no Ray driver, with one keep-alive http.client
  connection: `POST /routes/{id}/failure`, the body encoded to JSON and the answer parsed
  in the timed call;
- `handle`: a Python process attached to the runtime (`RecoveryRuntime.attach`, its own
  Ray driver) calling RouteHandle.report_failure, the Evidence made from the same data
  and the handle taken in the timed call;
- `http_node` (when `node` is on PATH, unless `--no-node`): an orchestrator that is not
  Python, the same body sent to the same API with Node's standard `http` module and one
  keep-alive connection (bench/http_node_client.mjs), timed in that client alike;
- `http_fastapi` (unless `--no-reference`): the `http` client's twin on a second API
  served beside the first, the same app without its fast path (every request through
  FastAPI's machinery, as before actors/api/fast_path.py): what the fast path saves, in
  the same run.

Every measured route is started first through this process's runtime (not timed); then
each round alternates the paths, in order then in reverse, one report at a time: this
process tells one client which route to report on and waits for its answer before the
next. Each report
is Anthropic's 529 with a `Retry-After` header, on a route of its own whose candidate names
an account of its own (so no circuit ever opens and every report is the same decision: a
retry). Latency: timed in the client, the call to the parsed answer. CPU per report: the
client's own CPU time in the call plus this process's (the API, its Ray driver, and the
pipe to the client, which both paths pay alike) while it waited for the answer; the route
host's share is the same on both paths and is not counted. `http_added_*`: the HTTP
path less the handle's, as the difference of their medians and as the median (and
quartiles) of the per-round differences. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import http.client
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Final

from bench_common import ms, percentile, print_json_line

from actors.api import ApiBackend, Tokens, create_app
from actors.api.metrics import ray_request_metrics
from actors.api.server import ApiServer, bind
from actors.engine.config_values import ApiAddress
from actors.hosting.runtime import RecoveryRuntime
from actors.routes.profiles import ConcreteProfile
from catalogue import Evidence
from policy import TurnEvidence

TOKEN: Final = "bench-http-token-0123456789"
TARGET_ADDED_P50_MS: Final = 1.0
EVIDENCE: Final = {
    "kind": "http", "http_status": 529, "provider": "anthropic", "agent": "claude-acp",
    "headers": {"Retry-After": "120"},
    "body": json.dumps({"type": "error", "error": {"type": "overloaded_error",
                                                   "message": "Overloaded"}}),
}  # fmt: skip
WAITING: Final = frozenset({"retry_wait", "waiting_for_reset"})


def turn_evidence() -> TurnEvidence:
    return TurnEvidence.before_any_output(execution_id="exec-1", prompt_generation=1)


Report = Callable[[str], str]
"""One client's report on a route: the answer's state."""


# The clients: each a process of its own, reading route ids on stdin and answering each
# with one line `wall_s cpu_s state` (its own clock and CPU time around the call).


def failure_body() -> dict[str, Any]:
    """The body of every report over HTTP (the handle's arguments, as JSON)."""
    turn = turn_evidence().model_dump(mode="json")
    return {"generation": 1, "evidence": EVIDENCE, "turn": turn,
            "caller": "bench", "invocation_id": "turn-1"}  # fmt: skip


def http_client(port: int) -> Report:
    """One keep-alive connection to the API, as an orchestrator's HTTP client keeps."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}

    def report(route_id: str) -> str:
        body = failure_body()
        connection.request("POST", f"/routes/{route_id}/failure", json.dumps(body), headers)
        answer = connection.getresponse()
        data: dict[str, Any] = json.loads(answer.read())
        if answer.status != 200:
            raise RuntimeError(f"{route_id}: {answer.status} {data}")
        return str(data["state"])

    return report


def handle_client(url: str, key_prefix: str) -> Report:
    """A Python orchestrator: attached to the runtime, reporting through its handles."""
    runtime = RecoveryRuntime.attach(redis_url=url, key_prefix=key_prefix)
    loop = asyncio.new_event_loop()

    def report(route_id: str) -> str:
        evidence = Evidence.model_validate(EVIDENCE)
        turn = turn_evidence()
        call = runtime.route(route_id).report_failure(
            1, evidence, turn, caller="bench", invocation_id="turn-1"
        )
        return loop.run_until_complete(call).state

    return report


def serve_client(report: Report) -> None:
    """The client's side of the pipe: a route id in, `wall cpu state` out."""
    gc.collect()
    gc.freeze()
    print("ready", flush=True)
    for line in sys.stdin:
        route_id = line.strip()
        wall, cpu = time.perf_counter(), time.process_time()
        state = report(route_id)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        print(f"{wall!r} {cpu!r} {state}", flush=True)


# This process: the runtime and the API as `up` runs them, and the alternation.


@dataclass
class Client:
    """A client process, driven one report at a time."""

    name: str
    process: subprocess.Popen[str]

    @classmethod
    def spawn(cls, name: str, kind: str, *arguments: str) -> Client:
        """A Python client process of `kind` (http or handle), called `name` in the
        figures."""
        return cls.of_command(name, [sys.executable, __file__, "--client", kind, *arguments])

    @classmethod
    def of_command(cls, name: str, command: list[str]) -> Client:
        """A client process running `command` (it speaks the line protocol above)."""
        process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        client = cls(name, process)
        if client._line() != "ready":
            raise RuntimeError(f"the {name} client did not start")
        return client

    def _line(self) -> str:
        out: IO[str] | None = self.process.stdout
        assert out is not None
        line = out.readline()
        if not line:
            raise RuntimeError(f"the {self.name} client ended (exit {self.process.wait()})")
        return line.strip()

    def report(self, route_id: str) -> tuple[float, float, float]:
        """(wall s, client CPU s, this process's CPU s) of one report."""
        stdin = self.process.stdin
        assert stdin is not None
        own = time.process_time()
        stdin.write(route_id + "\n")
        stdin.flush()
        wall, cpu, state = self._line().split()
        own = time.process_time() - own
        if state not in WAITING:
            raise RuntimeError(f"{self.name} report on {route_id} answered {state}")
        return float(wall), float(cpu), own

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()


def measure(
    clients: dict[str, Client], routes: dict[str, list[str]], warmup: int
) -> dict[str, Any]:
    figures: dict[str, list[tuple[float, float, float]]] = {name: [] for name in clients}
    names = list(clients)
    for index in range(len(routes[names[0]])):
        for name in names if index % 2 == 0 else names[::-1]:
            sample = clients[name].report(routes[name][index])
            if index >= warmup:
                figures[name].append(sample)
    return summary(figures)


def summary(figures: dict[str, list[tuple[float, float, float]]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, samples in figures.items():
        walls = [wall for wall, _, _ in samples]
        out[f"{name}_p50_ms"] = ms(percentile(walls, 0.50))
        out[f"{name}_p99_ms"] = ms(percentile(walls, 0.99))
        out[f"{name}_mean_ms"] = ms(statistics.fmean(walls))
        client = statistics.fmean(cpu for _, cpu, _ in samples) * 1e6
        server = statistics.fmean(own for _, _, own in samples) * 1e6
        out[f"{name}_cpu_us_per_op"] = round(client + server, 1)
        out[f"{name}_client_cpu_us_per_op"] = round(client, 1)
        out[f"{name}_server_cpu_us_per_op"] = round(server, 1)
    for name in figures:
        if name != "handle":
            out.update(added(out, figures, name))
    out["target_added_p50_ms"] = TARGET_ADDED_P50_MS
    out["target_met"] = out["http_added_p50_ms"] <= TARGET_ADDED_P50_MS
    return out


def added(
    out: dict[str, Any], figures: dict[str, list[tuple[float, float, float]]], name: str
) -> dict[str, Any]:
    """What the path `name` adds to the handle's: medians' and percentiles' differences,
    the per-round differences' median and quartiles, and the CPU."""
    paired = [a[0] - b[0] for a, b in zip(figures[name], figures["handle"], strict=True)]
    quartiles = statistics.quantiles(paired, n=4)
    return {
        f"{name}_added_p50_ms": round(out[f"{name}_p50_ms"] - out["handle_p50_ms"], 3),
        f"{name}_added_p99_ms": round(out[f"{name}_p99_ms"] - out["handle_p99_ms"], 3),
        f"{name}_added_paired_median_ms": ms(statistics.median(paired)),
        f"{name}_added_paired_quartiles_ms": [ms(quartiles[0]), ms(quartiles[2])],
        f"{name}_added_cpu_us_per_op": round(
            out[f"{name}_cpu_us_per_op"] - out["handle_cpu_us_per_op"], 1
        ),
    }


NODE_CLIENT: Final = Path(__file__).with_name("http_node_client.mjs")


def run(pairs: int, warmup: int, hosts: int, reference: bool, node: str | None) -> dict[str, Any]:
    total = pairs + warmup
    names = ("http", *(["http_node"] if node else []),
             *(["http_fastapi"] if reference else []), "handle")  # fmt: skip
    routes = {name: [f"{name}-{i}" for i in range(total)] for name in names}
    prefix = f"bench-http-{os.getpid()}"
    with tempfile.TemporaryDirectory(prefix="bench-http-") as folder:
        runtime = RecoveryRuntime(
            redis_url=os.environ.get("REDIS_URL"), data_dir=Path(folder),
            host_count=hosts, key_prefix=prefix, ray_dashboard=False,
        ).start()  # fmt: skip
        servers = {"http": serve(runtime, fast_path=True)}
        if reference:
            servers["http_fastapi"] = serve(runtime, fast_path=False)
        clients: dict[str, Client] = {}
        try:

            async def start_all() -> None:
                for index, route_id in enumerate(itertools.chain(*routes.values())):
                    profile = ConcreteProfile(
                        id="claude", agent="claude-acp", provider="anthropic",
                        account=f"bench-{index}",
                    )  # fmt: skip
                    await runtime.route(route_id).start(
                        profile, caller="bench", invocation_id="turn-1"
                    )

            asyncio.run(start_all())
            for name, server in servers.items():
                clients[name] = Client.spawn(name, "http", str(server.port))
            if node:
                command = [node, str(NODE_CLIENT), str(servers["http"].port), TOKEN,
                           json.dumps(failure_body())]  # fmt: skip
                clients["http_node"] = Client.of_command("http_node", command)
            clients["handle"] = Client.spawn("handle", "handle", runtime.url, prefix)
            gc.collect()
            gc.freeze()  # the timed reports see no full collection of the setup's garbage
            load = os.getloadavg()[0]
            figures = measure(clients, routes, warmup)
            figures["load_1m"] = [round(load, 2), round(os.getloadavg()[0], 2)]
        finally:
            for client in clients.values():
                client.close()
            for server in servers.values():
                server.stop()
            runtime.shutdown()
    return figures


def serve(runtime: RecoveryRuntime, *, fast_path: bool) -> ApiServer:
    """The API on `runtime` as `up` serves it (token, metrics, a free loopback port);
    without its fast path for the reference."""
    address = ApiAddress("127.0.0.1", 0)
    app = create_app(
        ApiBackend.of_runtime(runtime), tokens=Tokens.of({TOKEN: "bench"}),
        metrics=ray_request_metrics(), fast_path=fast_path,
    )  # fmt: skip
    return ApiServer(app, bind(address), address).start()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=500, help="measured report pairs")
    parser.add_argument("--warmup", type=int, default=50, help="pairs not measured")
    parser.add_argument("--hosts", type=int, default=1, help="route hosts")
    parser.add_argument(
        "--no-reference", action="store_true", help="no http_fastapi path (the app without "
        "its fast path)",
    )  # fmt: skip
    parser.add_argument(
        "--no-node", action="store_true", help="no http_node path (Node's http client)"
    )
    parser.add_argument("--client", nargs="+", help=argparse.SUPPRESS)  # a client process
    args = parser.parse_args(argv)
    node = None if args.no_node else shutil.which("node")
    if args.client:
        kind, *where = args.client
        serve_client(http_client(int(where[0])) if kind == "http" else handle_client(*where))
        return 0
    head = {"pairs": args.pairs, "hosts": args.hosts, "cpus": os.cpu_count()}
    print_json_line(
        lambda: {
            **head,
            **run(args.pairs, args.warmup, args.hosts, not args.no_reference, node),
        }
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
