"""Dispatch through rq with the ledger: each attempt is dispatched at most once, stale
jobs do nothing, ambiguous failures end in action_required, reconciliation re-arms only what
provably never started (integration tier: real Redis, rq SimpleWorker in burst mode)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from rq.job import Job
from rq.serializers import JSONSerializer

from actors.jobs.dispatch import REASON_AMBIGUOUS
from actors.jobs.queue import JOB_FUNCTION, dispatch_job_id, enqueue_dispatch
from actors.jobs.reconcile import REASON_ABANDONED, reconcile
from actors.keys import AttemptFence
from tests.actors.conftest import Backend
from tests.actors.dispatch_rig import DELIVER, EXPLODE, REFUSE, R, Rig, retrying
from tests.actors.route_builders import T0

pytestmark = pytest.mark.integration


def test_a_due_retry_dispatches_exactly_once_even_when_enqueued_twice(
    real_backend: Backend, rig: Rig
) -> None:
    retrying(real_backend)
    first = rig.enqueue(DELIVER)
    second = rig.enqueue(DELIVER)
    assert first == second == dispatch_job_id(rig.keys, AttemptFence(R, 1, 1))
    assert rig.queue.count == 1  # the deterministic id deduplicates
    # a duplicate that slips past the id (another id, same attempt) is fenced by the ledger
    rig.queue.enqueue(JOB_FUNCTION, rig.keys.prefix, R, 1, 1, DELIVER, job_id="dup-" + first)
    rig.work()

    assert len(rig.calls()) == 1
    call = rig.calls()[0]
    assert (call["route_id"], call["generation"], call["ordinal"]) == (R, 1, 1)
    assert call["candidate"] == "claude"
    assert call["replay"]["route_id"] == R
    entry = rig.ledger().read(AttemptFence(R, 1, 1))
    assert (entry.state, entry.fields["outcome"]) == ("finished", "delivered")
    assert rig.route().state == "retrying"  # the orchestrator reports the turn's outcome
    duplicate = Job.fetch("dup-" + first, connection=rig.connection, serializer=JSONSerializer)
    assert duplicate.return_value() == "duplicate"
    assert rig.enqueue(DELIVER) is None  # a finished attempt is never enqueued again


def test_a_job_for_a_stale_generation_or_ordinal_does_nothing(
    real_backend: Backend, rig: Rig
) -> None:
    retrying(real_backend)
    stale_ordinal = enqueue_dispatch(
        rig.queue, rig.keys, AttemptFence(R, 1, 0), dispatcher=DELIVER, now=T0
    )
    stale_generation = enqueue_dispatch(
        rig.queue, rig.keys, AttemptFence(R, 2, 1), dispatcher=DELIVER, now=T0
    )
    rig.work()

    assert rig.calls() == []
    for job_id in (stale_ordinal, stale_generation):
        assert job_id is not None
        job = Job.fetch(job_id, connection=rig.connection, serializer=JSONSerializer)
        assert job.return_value() == "stale"
    assert (
        rig.ledger().read(AttemptFence(R, 1, 0)).state == "queued"
    )  # never started: provably undispatched
    assert rig.route().state == "retrying"


def test_not_dispatched_on_a_route_storing_no_failure_still_waits_to_redeliver(
    real_backend: Backend, rig: Rig
) -> None:
    """Back-pressure needs no failure to re-evaluate: the same attempt just waits
    (tests/actors/jobs/test_dispatch_not_dispatched.py has the rest)."""
    retrying(real_backend)
    rig.enqueue(REFUSE)
    rig.work()

    assert len(rig.calls()) == 1
    entry = rig.ledger().read(AttemptFence(R, 1, 1))
    assert (entry.state, entry.fields["outcome"]) == ("finished", "not_dispatched")
    route = rig.route()
    assert (route.state, route.attempt_ordinal, route.redeliveries) == ("retry_wait", 1, 1)
    assert route.generation == 1


def test_a_dispatcher_exception_is_ambiguous_and_never_dispatched_again(
    real_backend: Backend, rig: Rig
) -> None:
    retrying(real_backend)
    rig.enqueue(EXPLODE)
    rig.work()

    entry = rig.ledger().read(AttemptFence(R, 1, 1))
    assert (entry.state, entry.fields["outcome"]) == ("finished", "failed")
    route = rig.route()
    assert (route.state, route.reason) == ("action_required", REASON_AMBIGUOUS)
    # neither a repeated job nor reconciliation dispatches it again
    rig.queue.enqueue(JOB_FUNCTION, rig.keys.prefix, R, 1, 1, EXPLODE, job_id="again")
    report = reconcile(rig.queue, rig.keys, EXPLODE, now=T0)
    rig.work()
    assert report.requeued == []
    assert len(rig.calls()) == 1


def test_reconcile_requeues_a_queued_never_started_dispatch_once(
    real_backend: Backend, rig: Rig
) -> None:
    retrying(real_backend)
    job_id = dispatch_job_id(rig.keys, AttemptFence(R, 1, 1))
    rig.ledger().queue(
        AttemptFence(R, 1, 1), job_id, T0
    )  # the ledger was written; the job was lost

    first = reconcile(rig.queue, rig.keys, DELIVER, now=T0)
    second = reconcile(rig.queue, rig.keys, DELIVER, now=T0)
    assert first.requeued == second.requeued == [R]
    assert rig.queue.count == 1
    rig.work()
    third = reconcile(rig.queue, rig.keys, DELIVER, now=T0)
    rig.work()

    assert third.left == [R]
    assert len(rig.calls()) == 1
    assert rig.ledger().read(AttemptFence(R, 1, 1)).fields["outcome"] == "delivered"


def test_reconcile_turns_a_started_never_finished_dispatch_into_action_required(
    real_backend: Backend, rig: Rig
) -> None:
    retrying(real_backend)
    rig.ledger().start(AttemptFence(R, 1, 1), "worker-that-died", T0)

    report = reconcile(rig.queue, rig.keys, DELIVER, now=T0)
    assert report.ambiguous == [R]
    route = rig.route()
    assert (route.state, route.reason) == ("action_required", REASON_ABANDONED)
    # a late job for that attempt is stale, and nothing is ever dispatched
    rig.queue.enqueue(JOB_FUNCTION, rig.keys.prefix, R, 1, 1, DELIVER, job_id="late")
    again = reconcile(rig.queue, rig.keys, DELIVER, now=T0 + timedelta(hours=1))
    rig.work()
    assert again == type(again)()
    assert rig.calls() == []
    assert rig.ledger().read(AttemptFence(R, 1, 1)).state == "started"


def test_nothing_dispatches_twice_across_reconcile_runs(real_backend: Backend, rig: Rig) -> None:
    routes = [f"route-many-{index}" for index in range(5)]
    for route_id in routes:
        retrying(real_backend, route_id)
    for route_id in routes[:2]:
        rig.enqueue(DELIVER, route_id)  # enqueued normally; the rest were never enqueued
    for _ in range(3):
        reconcile(rig.queue, rig.keys, DELIVER, now=T0)
        rig.work()

    dispatched = sorted(call["route_id"] for call in rig.calls())
    assert dispatched == sorted(routes)


def test_reconcile_runs_again_a_job_its_dead_worker_started_before_the_ledger_said_so(
    real_backend: Backend, rig: Rig
) -> None:
    """A worker killed after rq marked the job started and before the job wrote the
    ledger `started`: reconciliation (run when a worker dies) must not take rq's
    `started` for a dispatch in progress; a live worker's job it leaves alone."""
    retrying(real_backend)
    job_id = rig.enqueue(DELIVER)
    assert job_id is not None
    job = Job.fetch(job_id, connection=rig.connection, serializer=JSONSerializer)
    rig.connection.lmove(rig.queue.key, rig.queue.intermediate_queue_key)
    with rig.connection.pipeline() as pipeline:  # what the worker wrote before it died
        job.prepare_for_execution("worker-killed", pipeline=pipeline)
        pipeline.execute()
    live = "rq:worker:worker-killed"
    rig.connection.hset(live, "birth", "now")  # registered: its job is left running
    try:
        assert reconcile(rig.queue, rig.keys, DELIVER, now=T0).requeued == [R]
        rig.work()
        assert rig.calls() == []
    finally:
        rig.connection.delete(live)
    report = reconcile(rig.queue, rig.keys, DELIVER, now=T0)  # the worker is gone now
    rig.work()
    assert report.requeued == [R]
    assert len(rig.calls()) == 1
    assert rig.ledger().read(AttemptFence(R, 1, 1)).fields["outcome"] == "delivered"
