"""A dispatch job stranded between rq's dequeue and its start (chaos bug B): rq 3 moves a
dequeued id to `rq:queue:<name>:intermediate` and the job stays `queued` there when its
worker dies or Redis restarts first. Reconciliation enqueues it again; a job still
waiting in its queue is never enqueued a second time (integration tier: real Redis)."""

from __future__ import annotations

import pytest
from rq.job import Job
from rq.serializers import JSONSerializer

from actors.jobs.queue import dispatch_job_id
from actors.jobs.reconcile import reconcile
from actors.keys import AttemptFence
from tests.actors.conftest import Backend
from tests.actors.dispatch_rig import DELIVER, R, Rig, retrying
from tests.actors.route_builders import T0

pytestmark = pytest.mark.integration


def _job(rig: Rig, job_id: str) -> Job:
    return Job.fetch(job_id, connection=rig.connection, serializer=JSONSerializer)


def test_reconcile_requeues_a_job_stranded_in_the_intermediate_list_and_it_runs_once(
    real_backend: Backend, rig: Rig
) -> None:
    retrying(real_backend)
    job_id = rig.enqueue(DELIVER)
    assert job_id is not None
    # what a worker's dequeue does, the worker then gone before it started the job
    rig.connection.lmove(rig.queue.key, rig.queue.intermediate_queue_key)
    assert _job(rig, job_id).get_status() == "queued"
    assert rig.queue.count == 0

    first = reconcile(rig.queue, rig.keys, DELIVER, now=T0)
    second = reconcile(rig.queue, rig.keys, DELIVER, now=T0)  # now in its queue: left there
    assert first.requeued == second.requeued == [R]
    assert rig.queue.get_job_ids() == [job_id]
    assert rig.queue.intermediate_queue.get_job_ids() == []
    rig.work()

    assert len(rig.calls()) == 1
    entry = rig.ledger().read(AttemptFence(R, 1, 1))
    assert (entry.state, entry.fields["outcome"]) == ("finished", "delivered")


def test_a_job_waiting_in_its_queue_is_never_enqueued_again(
    real_backend: Backend, rig: Rig
) -> None:
    retrying(real_backend)
    job_id = rig.enqueue(DELIVER)
    assert job_id == dispatch_job_id(rig.keys, AttemptFence(R, 1, 1))
    enqueued_at = _job(rig, job_id).enqueued_at

    assert rig.enqueue(DELIVER) == job_id
    reconcile(rig.queue, rig.keys, DELIVER, now=T0)

    assert rig.queue.get_job_ids() == [job_id]
    assert _job(rig, job_id).enqueued_at == enqueued_at  # the same job, not a new one
    rig.work()
    assert len(rig.calls()) == 1
