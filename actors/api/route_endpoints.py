"""`/routes…`: the route API over HTTP, answered by the runtime's RouteHandles.

Every command answers the route's snapshot exactly as RouteHandle returns it (with
`next_step`). The `Idempotency-Key` header is the command's request id: the same key sent
again is not applied again and answers the first outcome's snapshot (docs/CONTRACTS.md,
Routes). A fence's refusal (a stale generation, a state the command cannot leave, an
earlier attempt) is 409 with the route's authoritative snapshot in the body.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Final, TypeVar

import ray
import redis
from fastapi import APIRouter, Header, Path, Query, Request, Response
from pydantic import ValidationError

from actors.api.backend import ApiBackend, RouteApi
from actors.api.models import (
    ActionRequest,
    FailureRequest,
    GenerationRequest,
    RouteAction,
    RoutePage,
    StartRequest,
)
from actors.api.problems import (
    COMMON_ANSWERS,
    ProblemField,
    from_policy,
    from_recovery,
    invalid,
    shown,
    simple,
)
from actors.errors import (
    NoEligibleCandidateError,
    RecoveryError,
    TransitionRejectedError,
    error_text,
)
from actors.keys import REQUEST_ID_PATTERN, ROUTE_ID_PATTERN
from actors.routes.models import AttemptRecord, RouteSnapshot, RouteState
from actors.routes.profiles import ConcreteProfile, RouteProfile
from actors.store.sync_reads import read_route_page
from policy.errors import PolicyError
from policy.profile import parse_profile

T = TypeVar("T")
DEFAULT_PAGE: Final = 100
MAX_PAGE: Final = 1000
ROUTE_ID: Final = f"^{ROUTE_ID_PATTERN}$"
FRESH_ONLY: Final = ("profile", "profile_id", "recovery_deadline")
"""The fields of an action body that only a start-fresh takes."""

RouteIdParam = Annotated[
    str, Path(pattern=ROUTE_ID, description="the route (the orchestrator's session id)")
]
IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        pattern=f"^{REQUEST_ID_PATTERN}$",
        description="the request id: the same key sent again is applied once and answers "
        "the first outcome's snapshot (absent: a new request every time)",
    ),
]


def route_router(backend: Callable[[Request], ApiBackend]) -> APIRouter:
    """The `/routes` endpoints on the backend `backend(request)` gives."""
    router = APIRouter(tags=["routes"], responses=COMMON_ANSWERS)

    @router.get("/routes", response_model=RoutePage)
    def list_routes(
        request: Request,
        *,
        state: Annotated[RouteState | None, Query(description="only routes in this state")] = None,
        code: Annotated[str | None, Query(max_length=256)] = None,
        candidate: Annotated[str | None, Query(max_length=256)] = None,
        caller: Annotated[str | None, Query(pattern=ROUTE_ID)] = None,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = DEFAULT_PAGE,
        cursor: Annotated[str | None, Query(pattern=ROUTE_ID, description="next_cursor")] = None,
    ) -> RoutePage:
        """Routes by id, a page at a time (an empty page when there are none)."""
        found = backend(request)

        def keep(route: RouteSnapshot) -> bool:
            return (
                (state is None or route.state == state)
                and (code is None or route.code == code)
                and (candidate is None or route.candidate_id == candidate)
                and (caller is None or route.caller == caller)
            )

        routes, after = _read(lambda: read_route_page(
            found.listing, found.keys, after=cursor, limit=limit, keep=keep))  # fmt: skip
        return RoutePage(routes=routes, next_cursor=after)

    @router.get("/routes/{route_id}", response_model=RouteSnapshot)
    async def get_route(request: Request, route_id: RouteIdParam) -> Response:
        """The route's snapshot (state `none`, generation 0, for a route never started)."""
        route = route_of(backend(request), route_id)
        return as_json(await answer(route, route.snapshot()))

    @router.get("/routes/{route_id}/history", response_model=list[AttemptRecord])
    async def get_history(request: Request, route_id: RouteIdParam) -> list[AttemptRecord]:
        """The route's append-only attempt records, oldest first."""
        route = route_of(backend(request), route_id)
        return await answer(route, route.history())

    @router.post("/routes/{route_id}/start", response_model=RouteSnapshot)
    async def start(
        request: Request, route_id: RouteIdParam, body: StartRequest, key: IdempotencyKey = None
    ) -> Response:
        """A new route on the first eligible candidate of `profile`, or of the stored
        profile `profile_id`, which the route then follows (its current version decides
        each step); generation 1."""
        route = route_of(backend(request), route_id)
        profile = _chosen_profile(body.profile, body.profile_id, required=True)
        return as_json(await answer(route, route.start(
            profile, caller=body.caller, invocation_id=body.invocation_id,
            provider_session_id=body.provider_session_id, request_id=key,
            task_id=body.task_id, utility=body.utility,
            recovery_deadline=body.recovery_deadline, profile_id=body.profile_id,
        )))  # fmt: skip

    @router.post("/routes/{route_id}/failure", response_model=RouteSnapshot)
    async def failure(
        request: Request, route_id: RouteIdParam, body: FailureRequest, key: IdempotencyKey = None
    ) -> Response:
        """A failed turn: classified, decided by the candidate's policy, durable before
        the answer (`next_step` says what to do: `wait` for the dispatch, `run` on the
        next candidate, `manual`)."""
        route = route_of(backend(request), route_id)
        return as_json(await answer(route, report_failure(route, body, key)))

    @router.post("/routes/{route_id}/success", response_model=RouteSnapshot)
    async def success(
        request: Request, route_id: RouteIdParam, body: GenerationRequest,
        key: IdempotencyKey = None,
    ) -> Response:  # fmt: skip
        """The turn succeeded: the recovery is over (`next_step` done)."""
        route = route_of(backend(request), route_id)
        return as_json(await answer(route, report_success(route, body, key)))

    @router.post("/routes/{route_id}/actions/{action}", response_model=RouteSnapshot)
    async def act(
        request: Request, route_id: RouteIdParam, action: RouteAction, body: ActionRequest,
        key: IdempotencyKey = None,
    ) -> Response:  # fmt: skip
        """A manual action at the expected generation (docs/CONTRACTS.md, Routes)."""
        route = route_of(backend(request), route_id)
        return as_json(await answer(route, act_on(route, action, body, key)))

    return router


# The commands as the endpoints send them, one function each, so that the fast path
# (actors/api/fast_path.py) sends exactly what the endpoint would. Each raises its
# ApiProblem before anything is sent, and returns the call not yet awaited.


def report_failure(
    route: RouteApi, body: FailureRequest, key: str | None
) -> Awaitable[RouteSnapshot]:
    """`POST /routes/{id}/failure`'s call (422 first when the evidence is missing or
    given twice)."""
    evidence = _one_evidence(body)
    return route.report_failure(
        body.generation, evidence, body.turn, caller=body.caller,
        invocation_id=body.invocation_id, provider_session_id=body.provider_session_id,
        attempt=body.attempt, request_id=key, utility=body.utility,
    )  # fmt: skip


def report_success(
    route: RouteApi, body: GenerationRequest, key: str | None
) -> Awaitable[RouteSnapshot]:
    """`POST /routes/{id}/success`'s call."""
    return route.report_success(body.generation, request_id=key)


def act_on(
    route: RouteApi, action: str, body: ActionRequest, key: str | None
) -> Awaitable[RouteSnapshot]:
    """`POST /routes/{id}/actions/{action}`'s call (422 first for a start-fresh's field
    given to another action)."""
    if action != "start-fresh":
        given = [name for name in FRESH_ONLY if getattr(body, name) is not None]
        if given:
            raise invalid([ProblemField(field=given[0], location="body",
                                        message="only a start-fresh takes it")])  # fmt: skip
    if action == "start-fresh":
        profile = _chosen_profile(body.profile, body.profile_id, required=False)
        return route.start_fresh(
            body.generation, profile, request_id=key, recovery_deadline=body.recovery_deadline,
            profile_id=body.profile_id,
        )  # fmt: skip
    command: Callable[..., Awaitable[RouteSnapshot]] = {
        "retry-now": route.retry_now, "skip": route.skip_now, "cancel": route.cancel_wait,
        "stop": route.stop, "resume": route.resume, "close": route.close,
    }[action]  # fmt: skip
    return command(body.generation, request_id=key)


def as_json(snapshot: RouteSnapshot) -> Response:
    """The snapshot's own JSON: the route's model wrote it, so it is not validated again
    on its way out (the schema still names RouteSnapshot: `response_model`)."""
    return Response(snapshot.model_dump_json(), media_type="application/json")


def route_of(found: ApiBackend, route_id: str) -> RouteApi:
    """The route's handle (its id's refusal as an ApiProblem)."""
    try:
        return found.routes.route(route_id)
    except RecoveryError as error:
        raise from_recovery(error) from None


def profile_of(data: dict[str, Any], field: str) -> RouteProfile:
    """A route profile from its JSON: `kind: concrete` is a ConcreteProfile, anything else
    a dynamic profile (legacy rules normalised). 422 with every problem otherwise."""
    if data.get("kind") == "concrete":
        try:
            return ConcreteProfile.model_validate(data)
        except ValidationError as error:
            raise invalid([
                ProblemField(field=_joined(field, item["loc"]), location="body",
                             message=str(item["msg"])[:1].lower() + str(item["msg"])[1:],
                             value=shown(item.get("input")))
                for item in error.errors()
            ]) from None  # fmt: skip
    try:
        return parse_profile(data)
    except PolicyError as error:
        raise from_policy(error, field) from None


def _chosen_profile(
    data: dict[str, Any] | None, profile_id: str | None, *, required: bool
) -> RouteProfile | None:
    """The inline profile of a start (or a start fresh), parsed; None when the stored
    profile `profile_id` is named instead. 422 when both are given, or (`required`)
    neither."""
    if data is not None and profile_id is not None:
        both = "give profile or profile_id, not both"
        raise invalid([ProblemField(field="profile_id", location="body", message=both,
                                    value=profile_id)])  # fmt: skip
    if data is None:
        if required and profile_id is None:
            neither = "missing: give profile or profile_id"
            raise invalid([ProblemField(field="profile", location="body", message=neither)])
        return None
    return profile_of(data, "profile")


def _joined(field: str, loc: tuple[int | str, ...]) -> str:
    return field + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc)


def _one_evidence(body: FailureRequest) -> Any:
    if (body.evidence is None) == (body.classification is None):
        message = "give evidence or classification, not both" if body.evidence else (
            "missing: give evidence (or a classification)")  # fmt: skip
        raise invalid([ProblemField(field="evidence", location="body", message=message)])
    return body.evidence if body.evidence is not None else body.classification


async def answer(route: RouteApi, call: Awaitable[T]) -> T:
    """The call's answer, or its refusal in the API's shape (a fence's with the route's
    snapshot as it is now)."""
    try:
        return await call
    except (TransitionRejectedError, NoEligibleCandidateError) as error:
        raise from_recovery(error, await _snapshot_now(route)) from None
    except RecoveryError as error:
        raise from_recovery(error) from None
    except ray.exceptions.RayError as error:  # a host unreachable: nothing was answered
        raise simple(
            503, "runtime_unavailable", f"the route host did not answer: {type(error).__name__}"
        ) from None


async def _snapshot_now(route: RouteApi) -> RouteSnapshot | None:
    try:
        return await route.snapshot()
    except (RecoveryError, ray.exceptions.RayError):
        return None  # the refusal stands; only its snapshot is missing


def _read(read: Callable[[], T]) -> T:
    try:
        return read()
    except RecoveryError as error:
        raise from_recovery(error) from None
    except redis.RedisError as error:
        raise simple(503, "store_unavailable", f"cannot read Redis: {error_text(error)}") from None


__all__ = [
    "act_on",
    "answer",
    "as_json",
    "profile_of",
    "report_failure",
    "report_success",
    "route_of",
    "route_router",
]
