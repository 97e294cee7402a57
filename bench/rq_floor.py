"""What rq itself costs per job: the floor under every dispatch (docs/CONTRACTS.md, bench).

A dispatch is one rq job (actors/jobs/queue.py), so rq's own bookkeeping around a job
(dequeue, the started registry, heartbeats, the result, the finished registry) is paid
once per dispatched attempt before the job does anything. This bench enqueues `--jobs`
jobs of a function that returns at once, with the options the dispatch jobs use (JSON
serializer, unique ids, a result kept an hour), and runs them in rq's SimpleWorker (the
worker class the runtime's workers derive from) in this process, in burst mode. It
prints one JSON line: wall and CPU time per job of the worker, Redis's CPU and commands
per job, and the jobs a second one core could run at that CPU cost.

Usage: python bench/rq_floor.py [--jobs N] [--rounds R]
  The median of R rounds of N jobs each is reported (defaults 500 and 3).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

from bench_common import machine_context, print_json_line, redis_url
from redis import Redis
from rq import Queue
from rq.serializers import JSONSerializer
from rq.worker import SimpleWorker

from actors.jobs.queue import dispatch_job_timeout

JOB = "rq_floor.returns_at_once"  # by name: rq refuses a function of __main__


def returns_at_once(*_args: Any) -> str:
    """The job: a dispatcher that returns at once, and no fence or ledger around it."""
    return "delivered"


def _commands(client: Redis) -> int:
    stats: dict[str, dict[str, int]] = client.info("commandstats")
    return sum(entry["calls"] for entry in stats.values())


def _server_cpu_s(client: Redis) -> float:
    cpu: dict[str, float] = client.info("cpu")
    return float(cpu["used_cpu_sys"]) + float(cpu["used_cpu_user"])


def one_round(client: Redis, jobs: int, number: int) -> dict[str, float]:
    queue = Queue(f"rq-floor-{number}", connection=client, serializer=JSONSerializer)
    for index in range(jobs):
        queue.enqueue(
            JOB, "prefix", f"route-{index}", 1, 1, "dispatcher", None,
            job_id=f"floor-{number}-{index}", job_timeout=dispatch_job_timeout(30.0),
            result_ttl=3600, failure_ttl=3600, unique=True,
        )  # fmt: skip
    worker = SimpleWorker([queue], connection=client, serializer=JSONSerializer)
    commands, server_cpu = _commands(client), _server_cpu_s(client)
    cpu, wall = time.process_time(), time.perf_counter()
    worker.work(burst=True, logging_level="WARNING", with_scheduler=False)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    server_cpu = _server_cpu_s(client) - server_cpu
    # The reading's own calls counted in between: the first INFO commandstats and both
    # INFO cpu (an INFO is counted once it has answered, so the last one is not).
    commands = _commands(client) - commands - 3
    if len(queue.finished_job_registry) != jobs:
        raise RuntimeError(f"{jobs} jobs enqueued, {len(queue.finished_job_registry)} finished")
    return {
        "wall_ms_per_job": wall / jobs * 1e3,
        "worker_cpu_ms_per_job": cpu / jobs * 1e3,
        "redis_cpu_ms_per_job": server_cpu / jobs * 1e3,
        "redis_commands_per_job": commands / jobs,
    }


async def measure(jobs: int, rounds: int) -> dict[str, Any]:
    async with redis_url() as (url, where):
        client = Redis.from_url(url)
        try:
            measured = [one_round(client, jobs, number) for number in range(rounds)]
        finally:
            client.close()
    median = {key: round(statistics.median(r[key] for r in measured), 3) for key in measured[0]}
    return {
        "bench": "rq_floor", "jobs": jobs, "rounds": rounds, **median,
        "jobs_per_s_per_core": round(1e3 / median["worker_cpu_ms_per_job"], 1),
        "rounds_worker_cpu_ms_per_job": [round(r["worker_cpu_ms_per_job"], 3) for r in measured],
        "redis": where, **machine_context(),
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    if options.jobs < 1 or options.rounds < 1:
        parser.error(
            f"--jobs and --rounds must be at least 1, got {options.jobs}, {options.rounds}"
        )
    print_json_line(lambda: asyncio.run(measure(options.jobs, options.rounds)))


if __name__ == "__main__":
    main()
