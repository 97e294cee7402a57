"""Compact batch replies (actors/hosting/wire.py): every answer comes back as it was sent,
and a batch of 256 snapshots stays under Ray's 100 KB limit for inline replies."""

from __future__ import annotations

import pickle
from datetime import timedelta
from typing import Any, Final

from actors.errors import StaleGenerationError
from actors.hosting.wire import WireBatch, pack, unpack
from actors.routes.models import CycleRecord, RetryUsage, RouteSnapshot
from actors.routes.profiles import profile_from_json, profile_json
from tests.actors.route_builders import T0
from tests.actors.route_scenarios import seed_profile

RAY_INLINE_LIMIT: Final = 100 * 1024  # Ray's max_direct_call_object_size default


def waiting(n: int) -> RouteSnapshot:
    """A route parked after a failure, decoded as the store decodes one: documents of its
    own (equal to every other route's), the profile parsed once by the planner."""
    snapshot = RouteSnapshot.model_validate({
        "route_id": f"route-{n}", "generation": 1, "state": "retry_wait",
        "candidate_id": "claude", "candidate_index": 0, "code": "provider_overloaded",
        "error_class": "transient", "rule": "anthropic.http.529.v1", "retry_ordinal": 1,
        "retry_max": 5, "attempt_ordinal": 1, "deadline": T0 + timedelta(seconds=30 + n),
        "pending_outcome": "retry", "reason": "circuit_open", "caller": "kanban",
        "invocation_id": f"inv-{n}", "circuit": "0123456789abcdef0123456789abcdef",
        "policy_snapshot": {"retry": {"enabled": True, "max_retries": 5}},
        "cycle": CycleRecord(retries=(RetryUsage(candidate_id="claude",
                                                 error_class="transient", used=1),)),
        "profile": profile_json(seed_profile()), "updated_at": T0,
    })  # fmt: skip
    profile_from_json(snapshot.route_id, snapshot.profile)
    return snapshot


def travelled(answers: list[Any]) -> list[Any]:
    reply: WireBatch = pickle.loads(pickle.dumps(pack(answers)))
    return unpack(reply)


def test_every_answer_comes_back_equal_with_the_same_fields_set() -> None:
    rejected = StaleGenerationError("route-2", 1, 2, "active")
    answers: list[Any] = [waiting(0), RouteSnapshot.absent("route-1"), rejected, [], waiting(3)]
    back = travelled(answers)
    unchanged = [0, 1, 3, 4]  # an exception is equal only to itself, even pickled whole
    assert [back[i] for i in unchanged] == [answers[i] for i in unchanged]
    for before, after in zip(answers, back, strict=True):
        assert type(after) is type(before)
        if isinstance(before, RouteSnapshot):
            assert after.model_fields_set == before.model_fields_set
            assert after.model_dump(mode="json") == before.model_dump(mode="json")
    assert isinstance(back[2], StaleGenerationError)
    assert (back[2].route_id, back[2].actual_generation) == ("route-2", 2)


def test_a_batchs_equal_documents_travel_once() -> None:
    reply = pack([waiting(n) for n in range(64)])
    assert len(reply.documents) == 3, "one profile, one policy snapshot, one cycle"


def test_a_batch_of_256_snapshots_stays_under_rays_inline_limit() -> None:
    snapshots = [waiting(n) for n in range(256)]
    assert len(pickle.dumps(snapshots)) > RAY_INLINE_LIMIT, "what a plain reply would be"
    assert len(pickle.dumps(pack(snapshots))) < RAY_INLINE_LIMIT
