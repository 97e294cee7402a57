"""The notices of a host or a worker engine, built from the installation's settings: the
transcript port (`transcript`: the orchestrator's `module:factory`, else the Redis one on
its own bounded pool), the authoriser (`authoriser`, else the task each route recorded at
its start) and the process's session guards, whose fences run on the running loop (or on
the scheduler given: a test's ManualScheduler)."""

from __future__ import annotations

from typing import Final

from redis.asyncio import Redis

from actors.clock import Clock
from actors.engine.notice_lifecycle import RouteNotices
from actors.engine.plugins import load_authoriser, load_transcript
from actors.engine.schedulers import LoopScheduler, Scheduler
from actors.engine.session_guards import SessionGuards
from actors.engine.session_notices import SessionNotices
from actors.engine.settings import EngineSettings
from actors.store.pool import bounded_client
from actors.store.route_store import RouteStore

TRANSCRIPT_CONNECTIONS: Final = 8
TRANSCRIPT_TIMEOUT_S: Final = 5.0


def route_notices(
    url: str,
    settings: EngineSettings,
    store: RouteStore,
    clock: Clock,
    *,
    scheduler: Scheduler | None = None,
    owns_sessions: bool = True,
) -> tuple[RouteNotices, Redis]:
    """The notices of a process writing with `settings`, and the Redis client they use
    (the caller closes it). `owns_sessions`: a route host (True) or an rq worker's engine
    (SessionNotices). Raises PluginLoadError naming a `transcript` or `authoriser` that
    cannot be loaded."""
    client = bounded_client(
        url, max_connections=TRANSCRIPT_CONNECTIONS, timeout_s=TRANSCRIPT_TIMEOUT_S
    )

    async def recorded_task(session_id: str) -> str | None:
        return (await store.snapshot(session_id)).task_id

    transcript = load_transcript(
        settings.transcript, client=client, clock=clock, keys=settings.keys,
        maxlen=settings.transcript_maxlen,
    )  # fmt: skip
    authoriser = load_authoriser(settings.authoriser, recorded_task=recorded_task)
    guards = SessionGuards(clock, scheduler or LoopScheduler())
    session_notices = SessionNotices(transcript, guards, owns_sessions=owns_sessions)
    notices = RouteNotices(session_notices, authoriser, read=store.snapshot)
    return notices, client
