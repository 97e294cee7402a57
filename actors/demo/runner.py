"""`recovery demo`: the fleet through the real runtime, start to clean shutdown.

It starts a local Ray (2 CPUs, no dashboard; or joins `RAY_ADDRESS`), a RecoveryRuntime on
an embedded Redis in a temporary data folder (or `REDIS_URL`) with 2 route hosts and rq
workers running the demo dispatcher, drives the fleet (actors/demo/orchestrator.py) for
the duration, drains — until every session has finished its turn and no schedule is
pending, or the drain times out — reads the report from Redis (actors/demo/report.py),
and stops everything it started: workers, hosts, Redis, Ray, and the temporary folder.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import tempfile
import threading
import time
import uuid
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from importlib.resources.abc import Traversable
from pathlib import Path
from types import FrameType
from typing import Any, Final

import ray
import redis
from redis.asyncio import Redis
from rich.console import Console

from actors.demo.corpus_pool import CorpusPool
from actors.demo.demo_keys import DemoKeys
from actors.demo.dispatcher import DISPATCHER_PATH
from actors.demo.facts import read_facts
from actors.demo.options import DemoOptions
from actors.demo.orchestrator import DispatchInbox, FleetControl, Session
from actors.demo.progress import ProgressDisplay, read_view
from actors.demo.report import build_report
from actors.demo.turns import SessionScript
from actors.hosting.runtime import NAMESPACE, RecoveryRuntime
from circuits import CircuitSettings

REFRESH_S: Final = 0.5
# Circuits open for seconds, not minutes, so the fleet finishes (production: 60 s
# doubling to 1 h, a 300 s probe lease).
DEMO_CIRCUITS: Final = CircuitSettings(initial_backoff_s=1.0, max_backoff_s=4.0)
DEMO_PROBE_TTL_S: Final = 5.0
NOTES: Final = (
    "timing hints of corpus evidence rewritten to a few seconds ahead (rate limits 1-4 s, "
    "quota resets 2-5 s) so the fleet finishes",
    "circuits open for 1 s doubling to 4 s and a probe lease lasts 5 s (production: 60 s "
    "doubling to 1 h, 300 s)",
    "ACP turns: recorded captures of tests/acp_agent.py replayed in-process through "
    "catalogue.acp.AcpReplay (the recovery acp-replay path), not live agent subprocesses",
)


def route_id(index: int) -> str:
    return f"sess-{index:04d}"


def run_demo(options: DemoOptions, console: Console | None) -> dict[str, Any]:
    """Run the demo; its report (the run's settings and timings under `run`)."""
    began = time.monotonic()
    pool = CorpusPool.load(options.corpus, datetime.now(UTC))
    data_dir = Path(tempfile.mkdtemp(prefix="recovery-demo-"))
    started_ray = _start_ray()
    _stop_on_sigterm()
    runtime = RecoveryRuntime(
        data_dir=data_dir, host_count=options.hosts, key_prefix=f"demo-{uuid.uuid4().hex[:8]}",
        dispatcher=DISPATCHER_PATH, worker_count=options.workers,
        circuit_settings=DEMO_CIRCUITS, probe_ttl_s=DEMO_PROBE_TTL_S,
    )  # fmt: skip
    try:
        runtime.start()
        startup_s = time.monotonic() - began
        report = asyncio.run(run_fleet(runtime, pool, options, console))
    finally:
        runtime.shutdown()
        if started_ray:
            ray.shutdown()
        shutil.rmtree(data_dir, ignore_errors=True)
    run = report["run"]
    run.update(startup_s=round(startup_s, 1), wall_s=round(time.monotonic() - began, 1))
    return report


def _raise_interrupt(number: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt(signal.Signals(number).name)


def _stop_on_sigterm() -> None:
    """SIGTERM ends the demo as Ctrl-C does, through the cleanup (Ray installs its own
    handler in ray.init: ours goes back on top). Only the main thread can install one."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _raise_interrupt)


def _start_ray() -> bool:
    """A local Ray for the demo unless one is running or RAY_ADDRESS names one."""
    if ray.is_initialized():
        return False
    address = os.environ.get("RAY_ADDRESS")
    if address and address != "local":
        ray.init(address=address, namespace=NAMESPACE, log_to_driver=False)
    else:
        ray.init(
            address="local", namespace=NAMESPACE, num_cpus=2, include_dashboard=False,
            log_to_driver=False,
        )  # fmt: skip
    return True


@dataclass
class _Fleet:
    """The running fleet as the watcher sees it."""

    client: Redis
    prefix: str
    sessions: list[Session]
    tasks: list[asyncio.Task[None]]
    control: FleetControl


async def run_fleet(
    runtime: RecoveryRuntime, pool: CorpusPool, options: DemoOptions, console: Console | None
) -> dict[str, Any]:
    """Drive the fleet on a started runtime whose dispatcher is the demo's, drain, and
    read the report from its Redis (left as it is, for whoever wants to look further)."""
    client, inbox_client = Redis.from_url(runtime.url), Redis.from_url(runtime.url)
    control = FleetControl(options.duration_s)
    inbox = DispatchInbox(inbox_client, DemoKeys(runtime.key_prefix), control)
    sessions = [
        Session(index, runtime.route(route_id(index)), SessionScript(options.seed, index, pool),
                inbox, control)
        for index in range(options.sessions)
    ]  # fmt: skip
    for session in sessions:
        inbox.queue(session.route_id)
    listening = asyncio.create_task(inbox.run())
    tasks = [asyncio.create_task(session.run()) for session in sessions]
    fleet = _Fleet(client, runtime.key_prefix, sessions, tasks, control)
    try:
        with ProgressDisplay(console) as display:
            driving_s, drain_s = await _watch(fleet, options, display)
        unfinished = [s.route_id for s, t in zip(sessions, tasks, strict=True) if not t.done()]
    finally:
        for task in [*tasks, listening]:
            task.cancel()
        await asyncio.gather(*tasks, listening, return_exceptions=True)
        await client.aclose()
        await inbox_client.aclose()
    run = _run_figures(options, control, tasks, (driving_s, drain_s, unfinished))
    connection = redis.Redis.from_url(runtime.url)
    try:
        return build_report(read_facts(connection, runtime.key_prefix), run)
    finally:
        connection.close()


async def _watch(
    fleet: _Fleet, options: DemoOptions, display: ProgressDisplay
) -> tuple[float, float]:
    """Refresh the display until the fleet is done and drained, or the drain times out;
    the seconds spent driving and draining."""
    ids = [session.route_id for session in fleet.sessions]
    give_up = options.duration_s + options.drain_timeout_s
    drain_began: float | None = None
    while True:
        elapsed = time.monotonic() - fleet.control.started
        done = all(task.done() for task in fleet.tasks)
        phase = "driving" if fleet.control.driving and not done else "draining"
        if phase == "draining" and drain_began is None:
            drain_began = elapsed
        view = await read_view(fleet.client, fleet.prefix, ids, elapsed, phase)
        finished = done and view.pending == 0
        if finished or elapsed >= give_up:
            display.show(view, final=True)
            driving = drain_began if drain_began is not None else elapsed
            return driving, elapsed - driving
        display.show(view)
        await asyncio.sleep(REFRESH_S)


def _run_figures(
    options: DemoOptions, control: FleetControl, tasks: list[asyncio.Task[None]],
    timing: tuple[float, float, list[str]],
) -> dict[str, Any]:  # fmt: skip
    driving_s, drain_s, unfinished = timing
    failed = [t for t in tasks if t.done() and not t.cancelled() and t.exception() is not None]
    errors = sorted({f"{type(t.exception()).__name__}: {t.exception()}" for t in failed})
    settings = {
        k: (str(v) if isinstance(v, Traversable) else v) for k, v in asdict(options).items()
    }
    return {
        **settings, "driving_s": round(driving_s, 1), "drain_s": round(drain_s, 1),
        "sessions_unfinished": len(unfinished), "unfinished_routes": unfinished[:20],
        "session_errors": len(failed), "errors": errors[:5],
        "orchestrator": dict(sorted(control.counters.items())), "notes": list(NOTES),
    }  # fmt: skip
