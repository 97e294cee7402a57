"""The orchestrator of bench/chaos.py: drives every route over `recovery up`'s HTTP API
and runs the turns its recording dispatcher was called for, as a client that knows
nothing of Ray would, while the harness kills things under it.

Each route: a start, then turns. A turn fails (a seeded number of times, one kind of
failure per route: chaos_payloads.py) or succeeds; a failure's answer says `run` (a skip
to the next candidate: the turn runs at once) or `wait` (the dispatch comes through the
dispatcher's log, which `Inbox` tails); `manual` and `done` end the route. Every request
carries an Idempotency-Key (its request id) and a failure a unique `invocation_id`, so
the events stream shows which report each transition applied. A request that gets no
answer (connection refused while `up` restarts, a 5xx while a host or Redis is away) is
sent again with the same key until it is answered.

Two faults are injected here, at the boundaries the runtime must fence:
- late replays: before running a dispatched turn, the report that scheduled it is sent
  again with its key (a client retrying a request it believes lost); it must answer the
  first outcome and change nothing (request ids);
- duplicate dispatch jobs: a copy of the attempt's rq dispatch job is enqueued while the
  route is still `retrying` at that attempt (rq delivers at least once: a re-enqueued id
  runs twice); the turn is reported once the copy has run, which must not call the
  dispatcher again (the ledger fence).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

import httpx
import redis
from chaos_dispatcher import DISPATCHER, read_log
from chaos_payloads import KINDS, WEIGHTS, failure, profile
from rq import Queue
from rq.job import Job, JobStatus
from rq.serializers import JSONSerializer

from actors.demo.dispatcher import DispatchRecord
from actors.jobs.queue import JOB_FUNCTION

RETRY_PAUSE_S: Final = 0.25  # doubling up to MAX_RETRY_PAUSE_S while nothing answers
MAX_RETRY_PAUSE_S: Final = 2.0
REQUEST_TIMEOUT_S: Final = 30.0
INBOX_POLL_S: Final = 0.1
STATE_POLL_S: Final = 10.0
COPY_TIMEOUT_S: Final = 30.0
GROUPS: Final = 8  # overload routes share one of this many accounts
IN_FLIGHT: Final = 24


@dataclass(frozen=True, slots=True)
class Acked:
    """A transition the runtime acknowledged (an answer's route and write time)."""

    route_id: str
    updated_at: str
    state: str


@dataclass
class Tally:
    """What the orchestrator saw (the invariants are checked from Redis and the log)."""

    acked: list[Acked] = field(default_factory=list)
    requests: int = 0
    resent: int = 0  # requests sent again after no answer
    replays: int = 0
    replays_answered_differently: list[str] = field(default_factory=list)
    copies: Counter[str] = field(default_factory=Counter)  # copy job results
    ends: Counter[str] = field(default_factory=Counter)  # how each route ended
    conflicts: int = 0


class Inbox:
    """The dispatcher's log, tailed: each route's dispatches, in the order logged."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._offset = 0
        self._seen: dict[str, list[DispatchRecord]] = defaultdict(list)
        self._arrived = asyncio.Condition()

    async def follow(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            records, self._offset = read_log(self.path, self._offset)
            if records:
                async with self._arrived:
                    for record in records:
                        self._seen[record.route_id].append(record)
                    self._arrived.notify_all()
            await asyncio.sleep(INBOX_POLL_S)

    async def next(self, route_id: str, taken: int, timeout_s: float) -> DispatchRecord | None:
        """The route's dispatch number `taken` (0-based), or None after `timeout_s`."""
        async with self._arrived:
            try:
                await asyncio.wait_for(
                    self._arrived.wait_for(lambda: len(self._seen[route_id]) > taken), timeout_s
                )
            except TimeoutError:
                return None
        return self._seen[route_id][taken]


@dataclass
class Orchestrator:
    api_url: Callable[[], str]  # `up`'s API, which moves when `up` restarts
    inbox: Inbox
    admin: Callable[[], redis.Redis]  # binary replies, for rq (the copy jobs are the harness's)
    prefix: str
    queue: str
    seed: int
    canaries: list[str]
    replay_share: float = 0.2
    copy_share: float = 0.15
    canary_share: float = 0.1
    tally: Tally = field(default_factory=Tally)
    _client: httpx.AsyncClient = field(init=False)
    _gate: asyncio.Semaphore = field(init=False)

    async def run(self, route_ids: list[str], spread_s: float, stop: asyncio.Event) -> None:
        """Start the routes evenly over `spread_s` and drive each to its end (or `stop`)."""
        self._gate = asyncio.Semaphore(IN_FLIGHT)
        limits = httpx.Limits(max_connections=IN_FLIGHT, max_keepalive_connections=IN_FLIGHT)
        async with httpx.AsyncClient(timeout=REQUEST_TIMEOUT_S, limits=limits) as self._client:
            began = time.monotonic()
            tasks = []
            for index, route_id in enumerate(route_ids):
                at = began + spread_s * index / max(1, len(route_ids))
                tasks.append(asyncio.create_task(self._route_at(route_id, index, at, stop)))
            await asyncio.gather(*tasks)

    async def _route_at(self, route_id: str, index: int, at: float, stop: asyncio.Event) -> None:
        await asyncio.sleep(max(0.0, at - time.monotonic()))
        try:
            end = await Route(
                self, route_id, index, random.Random(f"{self.seed}:{route_id}")
            ).drive(stop)
        except _StoppedError:
            end = "stopped"
        self.tally.ends[end] += 1

    async def send(self, method: str, path: str, body: Any, key: str | None,
                   stop: asyncio.Event) -> dict[str, Any]:  # fmt: skip
        """The answer's JSON (a snapshot, or a 409's problem with its snapshot), sending
        again with the same key until some answer comes."""
        headers = {} if key is None else {"Idempotency-Key": key}
        pause = 0.0
        while True:
            if stop.is_set():
                raise _StoppedError
            try:
                async with self._gate:
                    self.tally.requests += 1
                    answer = await self._client.request(
                        method, self.api_url() + path, json=body, headers=headers
                    )
                if answer.status_code < 500:
                    found: dict[str, Any] = answer.json()
                    if answer.status_code == 200 and method == "POST":
                        self._acked(found)
                    return found
            except (httpx.TransportError, ValueError):
                pass  # no answer (or half of one): `up` or a host is away
            await asyncio.sleep(pause)  # at once the first time: a host restarts in ~1 s
            pause = min(MAX_RETRY_PAUSE_S, max(RETRY_PAUSE_S, 2 * pause))
            self.tally.resent += 1

    def _acked(self, snapshot: dict[str, Any]) -> None:
        self.tally.acked.append(
            Acked(snapshot["route_id"], snapshot.get("updated_at") or "", snapshot["state"])
        )

    async def copy_job(self, record: DispatchRecord) -> str:
        """Enqueue a copy of the attempt's dispatch job and wait for it to run; what it
        returned (`duplicate` when the ledger refused it)."""

        def enqueue() -> str:
            connection = self.admin()
            queue = Queue(self.queue, connection=connection, serializer=JSONSerializer)
            job_id = f"chaos-copy-{record.route_id}-{record.generation}-{record.ordinal}"
            job_id = job_id.replace(".", "_")
            queue.enqueue(
                JOB_FUNCTION, self.prefix, record.route_id, record.generation, record.ordinal,
                DISPATCHER, None, job_id=job_id, result_ttl=3600,
            )  # fmt: skip
            return job_id

        job_id = await asyncio.to_thread(enqueue)
        deadline = time.monotonic() + COPY_TIMEOUT_S
        while time.monotonic() < deadline:
            found = await asyncio.to_thread(self._job_result, job_id)
            if found is not None:
                return found
            await asyncio.sleep(INBOX_POLL_S)
        return "not run in time"

    def _job_result(self, job_id: str) -> str | None:
        try:
            job = Job.fetch(job_id, connection=self.admin(), serializer=JSONSerializer)
            status = job.get_status()
        except Exception:
            return None
        if status == JobStatus.FINISHED:
            return str(job.return_value())
        if status in (JobStatus.FAILED, JobStatus.STOPPED, JobStatus.CANCELED):
            return f"job {status}"
        return None


class _StoppedError(Exception):
    """The harness stopped driving the routes."""


@dataclass
class Route:
    """One route's life, from its start to `done`, `manual` or the harness's stop."""

    boss: Orchestrator
    route_id: str
    index: int
    rng: random.Random
    failures_left: int = 0
    reports: int = 0
    taken: int = 0  # dispatches run so far
    # the last failure report: its body, its key, and its first answer if it was applied
    last_failure: tuple[dict[str, Any], str, dict[str, Any] | None] | None = None

    async def drive(self, stop: asyncio.Event) -> str:
        kind = self.rng.choices(KINDS, WEIGHTS)[0]
        account = f"group-{self.index % GROUPS}" if kind == "overload" else f"acct-{self.route_id}"
        self.failures_left = self.rng.randint(1, 4)
        path = f"/routes/{self.route_id}"
        body = {
            "profile": profile(account),
            "caller": "chaos",
            "invocation_id": f"{self.route_id}.i0",
        }
        snapshot = await self.boss.send(
            "POST", f"{path}/start", body, f"{self.route_id}.start", stop
        )
        snapshot = _snapshot(snapshot)
        while True:
            step = snapshot.get("next_step")
            if step == "wait":
                found = await self._dispatched(stop)
                if isinstance(found, dict):  # no dispatch: the route moved on by itself
                    snapshot = found
                    continue
                await self._faults(found, stop)
                snapshot["generation"] = found.generation
                snapshot["candidate_id"] = found.candidate
            elif step != "run":
                return str(step)
            snapshot = await self._turn(snapshot, kind, stop)

    async def _dispatched(self, stop: asyncio.Event) -> DispatchRecord | dict[str, Any]:
        """The next dispatch of the route, or its snapshot once it no longer waits (asked
        every STATE_POLL_S): `manual`, `done`, or `run` (a wait that ended in a skip to
        a candidate that runs now, with no dispatch)."""
        while True:
            record = await self.boss.inbox.next(self.route_id, self.taken, STATE_POLL_S)
            if record is not None:
                self.taken += 1
                return record
            now = _snapshot(
                await self.boss.send("GET", f"/routes/{self.route_id}", None, None, stop)
            )
            if now.get("next_step") != "wait":
                return now

    async def _faults(self, record: DispatchRecord, stop: asyncio.Event) -> None:
        if self.last_failure is not None and self.rng.random() < self.boss.replay_share:
            body, key, first = self.last_failure
            self.boss.tally.replays += 1
            again = _snapshot(await self.boss.send("POST", f"/routes/{self.route_id}/failure",
                                                   body, key, stop))  # fmt: skip
            if first is not None and _essence(again) != _essence(first):
                self.boss.tally.replays_answered_differently.append(key)
        if self.rng.random() < self.boss.copy_share:
            self.boss.tally.copies[await self.boss.copy_job(record)] += 1

    async def _turn(
        self, snapshot: dict[str, Any], kind: str, stop: asyncio.Event
    ) -> dict[str, Any]:
        path = f"/routes/{self.route_id}"
        generation = int(snapshot["generation"])
        if self.failures_left <= 0:
            key = f"{self.route_id}.success"
            answer = await self.boss.send(
                "POST", f"{path}/success", {"generation": generation}, key, stop
            )
            return _ended(answer, self.boss.tally)
        self.failures_left -= 1
        self.reports += 1
        canaries = self.boss.canaries
        canary = None
        if canaries and self.rng.random() < self.boss.canary_share:
            canary = self.rng.choice(canaries)
        key, invocation = f"{self.route_id}.f{self.reports}", f"{self.route_id}.i{self.reports}"
        body = failure(generation, kind, snapshot.get("candidate_id"), invocation, canary)
        answer = await self.boss.send("POST", f"{path}/failure", body, key, stop)
        found = _snapshot(answer)
        if "error" in answer:
            self.boss.tally.conflicts += 1
        # a refused report (409) is not recorded under its key: sent again, it is judged
        # again, so only an applied report's replay must answer the same
        self.last_failure = (body, key, None if "error" in answer else found)
        return found


def _snapshot(answer: dict[str, Any]) -> dict[str, Any]:
    """A 200's snapshot, or the one a 409 carries (the route as it is)."""
    inner = answer.get("snapshot")
    return inner if isinstance(inner, dict) else answer


def _ended(answer: dict[str, Any], tally: Tally) -> dict[str, Any]:
    if "error" in answer:
        tally.conflicts += 1
    found = _snapshot(answer)
    return {**found, "next_step": found.get("next_step") or "done"}


def _essence(snapshot: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(snapshot.get(name) for name in ("state", "generation", "attempt_ordinal",
                                                 "updated_at"))  # fmt: skip
