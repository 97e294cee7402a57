"""`/schedules`, `/circuits` and `/sessions/{id}/…`: what `recovery schedules`,
`recovery circuits` and `recovery notices` read, over HTTP, and a session's cancel.

The reads go through actors/store's read helpers (sync_reads, transcript_reads and the
CircuitStore's reads), never a key of their own; the cancel goes through the session's
RouteHandle, authorised for the request's principal (its bearer token's).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Final, TypeVar

import redis
from fastapi import APIRouter, Path, Query, Request

from actors.api.backend import ApiBackend
from actors.api.circuit_views import CircuitReads
from actors.api.models import CancelAnswer, CancelRequest, CircuitList, NoticeList, ScheduleList
from actors.api.problems import COMMON_ANSWERS, Problem, from_recovery, simple
from actors.api.route_endpoints import ROUTE_ID, answer
from actors.errors import RecoveryError, error_text
from actors.store.sync_reads import read_schedules
from actors.store.transcript_reads import read_notices

T = TypeVar("T")
MAX_SCHEDULES: Final = 10_000
SessionId = Annotated[str, Path(pattern=ROUTE_ID, description="the session (its route's id)")]


def listing_router(
    backend: Callable[[Request], ApiBackend], circuits: Callable[[Request], CircuitReads]
) -> APIRouter:
    router = APIRouter(responses=COMMON_ANSWERS)

    @router.get("/schedules", response_model=ScheduleList, tags=["routes"])
    def schedules(
        request: Request, limit: Annotated[int, Query(ge=1, le=MAX_SCHEDULES)] = 1000
    ) -> ScheduleList:
        """The pending schedules, soonest deadline first."""
        found = backend(request)
        entries = read(lambda: read_schedules(found.listing, found.keys))
        return ScheduleList(schedules=entries[:limit])

    @router.get("/circuits", response_model=CircuitList, tags=["circuits"])
    async def list_circuits(request: Request) -> CircuitList:
        """Every circuit by label: state, open-until, probe holder, parked routes, the
        circuit host owning it, and its state changes of (at least) the last hour."""
        try:
            return CircuitList(circuits=await circuits(request).all())
        except RecoveryError as error:
            raise from_recovery(error) from None

    @router.get("/sessions/{session_id}/notices", response_model=NoticeList, tags=["sessions"])
    def notices(request: Request, session_id: SessionId) -> NoticeList:
        """The session's outstanding transcript retry notices (`retrying: true`)."""
        found = backend(request)
        return NoticeList(notices=read(lambda: read_notices(found.listing, found.keys, session_id)))

    @router.post(
        "/sessions/{session_id}/cancel-transient-retry", response_model=CancelAnswer,
        tags=["sessions"],
        responses={403: {"model": Problem, "description": "not found or not authorised"}},
    )  # fmt: skip
    async def cancel(request: Request, session_id: SessionId, body: CancelRequest) -> CancelAnswer:
        """Cancel the session's transient retry for the token's principal: its notices
        are retired, and a running retry loop stops (`active`). 403 alike for a pair the
        principal may not act on and one that does not exist."""
        route = backend(request).routes.route(session_id)
        principal = getattr(request.state, "principal", None)
        outcome = await answer(route, route.cancel_transient_retry(body.task_id, principal))
        return CancelAnswer(active=outcome.active, snapshot=outcome.snapshot)

    return router


def read(call: Callable[[], T]) -> T:
    """A read helper's answer; its failure in the API's shape (503 when Redis failed)."""
    try:
        return call()
    except RecoveryError as error:
        raise from_recovery(error) from None
    except redis.RedisError as error:
        raise simple(503, "store_unavailable", f"cannot read Redis: {error_text(error)}") from None
