"""The guarantees bench/chaos.py checks once a run has drained, from Redis (the routes'
histories, the events stream, schedules, ledgers) and the recording dispatcher's own
log, never from what the orchestrator meant to do.

- double dispatches: (route, generation, attempt ordinal) in the log more than once;
- reports applied twice: a failure report's transition (`report_failure` events carry
  the report's unique invocation id) applied more than once, or a route's one success
  report applied more than once;
- schedules lost: the demo report's rule (actors/demo/report.py, `schedule_fates`: every
  schedule fired, rescheduled, cancelled or still pending), plus every attempt that came
  due and was never dispatched, unless its route went `action_required` with a reason
  afterwards; and any route still `retrying` on an attempt never dispatched;
- histories: each route's attempt list extends every copy read earlier (append-only),
  generations never go down, the last record is at the route's generation;
- lost writes: transitions acknowledged to the orchestrator missing from the events
  stream (each transition writes its event in the same script), dispatches logged whose
  ledger does not say started (the job wrote `started` before calling the dispatcher),
  and the witness's acknowledged numbers missing.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import redis
from chaos_orchestrator import Acked

from actors.demo.dispatcher import DispatchRecord
from actors.demo.facts import RedisFacts, read_facts
from actors.demo.report import schedule_fates
from actors.keys import AttemptFence, KeySpace
from actors.store.replies import reply_texts

Attempt = tuple[str, int, int]


def facts_of(client: redis.Redis, prefix: str, log: Sequence[DispatchRecord]) -> RedisFacts:
    """Everything in Redis the checks need, with the dispatcher's log as its dispatches."""
    return dataclasses.replace(read_facts(client, prefix), dispatches=tuple(log))


def double_dispatches(log: Iterable[DispatchRecord]) -> list[str]:
    seen = Counter((r.route_id, r.generation, r.ordinal) for r in log)
    return sorted(f"{r} g{g} o{o} x{n}" for (r, g, o), n in seen.items() if n > 1)


def reports_applied_twice(facts: RedisFacts) -> list[str]:
    failures: Counter[tuple[str, str | None]] = Counter()
    successes: Counter[str] = Counter()
    for item in facts.events:
        event = item.event
        if event.cause == "report_failure":
            failures[(event.route_id, event.invocation_id)] += 1
        elif event.cause == "report_success":
            successes[event.route_id] += 1
    twice = [f"{route} {invocation} x{n}" for (route, invocation), n in failures.items() if n > 1]
    twice += [f"{route} success x{n}" for route, n in successes.items() if n > 1]
    return sorted(twice)


def schedules_lost(facts: RedisFacts, states: Mapping[str, Mapping[str, str]]) -> list[str]:
    fates = schedule_fates(facts)
    lost = list(fates.lost)
    dispatched = {(r.route_id, r.generation, r.ordinal) for r in facts.dispatches}
    stopped_after = _stopped_after(facts)
    for attempt, due_at in fates.due_at.items():
        if attempt in dispatched:
            continue
        if any(at >= due_at for at in stopped_after.get(attempt[:2], [])):
            continue  # ambiguous, reconciled, timed out: action_required with a reason
        lost.append(f"{attempt[0]} g{attempt[1]} o{attempt[2]} due, never dispatched")
    for route_id, route in states.items():
        generation, ordinal = int(route["generation"] or 0), int(route["attempt_ordinal"] or 0)
        attempt = (route_id, generation, ordinal)
        if attempt in dispatched or attempt in fates.due_at:  # the due one is counted above
            continue
        if route["state"] == "retrying":
            lost.append(f"{route_id} g{generation} o{ordinal} retrying, never due nor dispatched")
    return sorted(set(lost))  # one entry per attempt


def _stopped_after(facts: RedisFacts) -> dict[tuple[str, int], list[float]]:
    """When each (route, generation) went `action_required` with a reason."""
    found: dict[tuple[str, int], list[float]] = {}
    for item in facts.events:
        event = item.event
        if event.state == "action_required" and event.reason:
            found.setdefault((event.route_id, event.generation), []).append(item.written_at)
    return found


def route_hashes(
    client: redis.Redis, keys: KeySpace, routes: Iterable[str]
) -> dict[str, dict[str, str]]:
    ids = list(routes)
    with client.pipeline(transaction=False) as pipeline:
        for route_id in ids:
            pipeline.hmget(
                keys.route(route_id), ["state", "generation", "attempt_ordinal", "reason"]
            )
        rows = pipeline.execute()
    names = ("state", "generation", "attempt_ordinal", "reason")
    return {
        route_id: {name: value or "" for name, value in zip(names, row, strict=True)}
        for route_id, row in zip(ids, rows, strict=True)
        if row[0] is not None
    }


def raw_histories(
    client: redis.Redis, keys: KeySpace, routes: Iterable[str]
) -> dict[str, list[str]]:
    """Each route's attempt list as stored (JSON texts)."""
    ids = list(routes)
    with client.pipeline(transaction=False) as pipeline:
        for route_id in ids:
            pipeline.lrange(keys.attempts(route_id), 0, -1)
        lists = pipeline.execute()
    return {route_id: list(items) for route_id, items in zip(ids, lists, strict=True)}


def history_breaks(
    copies: Sequence[Mapping[str, list[str]]],
    final: Mapping[str, list[str]],
    facts: RedisFacts,
    states: Mapping[str, Mapping[str, str]],
) -> list[str]:
    broken: list[str] = []
    for copy in copies:
        for route_id, earlier in copy.items():
            later = final.get(route_id, [])
            if later[: len(earlier)] != earlier:
                broken.append(f"{route_id}: history rewritten (was {len(earlier)} records)")
    for route_id, records in facts.histories.items():
        generations = [record.generation for record in records]
        if generations != sorted(generations):
            broken.append(f"{route_id}: generations go down in its history")
        route = states.get(route_id)
        if route is not None and records and str(records[-1].generation) != route["generation"]:
            last, now = records[-1].generation, route["generation"]
            broken.append(f"{route_id}: last record at g{last}, route at g{now}")
    return sorted(set(broken))


def lost_writes(client: redis.Redis, keys: KeySpace, facts: RedisFacts,
                acked: Sequence[Acked]) -> dict[str, Any]:  # fmt: skip
    """Acknowledged writes Redis no longer holds (the witness is counted by the caller)."""
    written = {(item.event.route_id, item.event.at) for item in facts.events}
    missing = sorted(
        f"{a.route_id} {a.updated_at} {a.state}"
        for a in set(acked)
        if a.updated_at and (a.route_id, _moment(a.updated_at)) not in written
    )
    with client.pipeline(transaction=False) as pipeline:
        for record in facts.dispatches:
            fence = AttemptFence(record.route_id, record.generation, record.ordinal)
            pipeline.hget(keys.dispatch(fence), "state")
        states = pipeline.execute()
    unstarted = sorted(
        f"{r.route_id} g{r.generation} o{r.ordinal} ledger {state}"
        for r, state in zip(facts.dispatches, states, strict=True)
        if state not in ("started", "finished")
    )
    return {"transitions": missing, "ledger_starts": unstarted}


def _moment(text: str) -> datetime:
    return datetime.fromisoformat(text)


def lost_attempt_states(
    client: redis.Redis, keys: KeySpace, lost: Sequence[str]
) -> dict[str, dict[str, str]]:
    """For each lost attempt (as `schedules_lost` names it: "ROUTE gG oO ..."), what its
    ledger and its rq job say: the facts a fix needs (the run's Redis is gone after it)."""
    found: dict[str, dict[str, str]] = {}
    for entry in lost:
        route_id, generation, ordinal = entry.split()[:3]
        fence = AttemptFence(route_id, int(generation[1:]), int(ordinal[1:]))
        wanted = ("state", "job_id", "worker", "queued_at", "started_at")
        stored = reply_texts(client.hgetall(keys.dispatch(fence)))
        ledger = {name: value for name, value in stored.items() if name in wanted}
        job_id = ledger.get("job_id", "")
        fields = ["status", "worker_name", "origin"]
        job = client.hmget(f"rq:job:{job_id}", fields) if job_id else []
        found[entry] = {**ledger, "job": " ".join(str(part) for part in job)}
    return found
