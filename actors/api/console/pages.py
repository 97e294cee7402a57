"""The console's pages: each rendered on the server with its sections in the HTML, from
the same backend reads the JSON endpoints make (the store's read helpers, the route
handles, the circuit reads, the profile store), then enhanced by its script, which talks
to the JSON endpoints only. Nothing here writes.

    /                         -> /console/
    /console/                 the live routes (as /console/routes)
    /console/routes/{id}      a route: snapshot, attempt timeline, actions, retry notice
    /console/circuits         every circuit, with its last hour as a chart
    /console/profiles         the stored profiles
    /console/profiles/new     the editor on a new draft
    /console/profiles/{id}    the editor on a stored profile
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Annotated, Any, Final

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from actors.api.backend import ApiBackend
from actors.api.circuit_views import CircuitReads
from actors.api.console.charts import state_bands
from actors.api.console.templating import render, summaries
from actors.api.listings import read
from actors.api.profile_endpoints import store_of
from actors.api.route_endpoints import ROUTE_ID, answer
from actors.errors import RecoveryError, StoreUnavailableError
from actors.keys import PROFILE_ID_PATTERN
from actors.routes.models import ROUTE_STATES, RouteSnapshot, RouteState
from actors.routes.profile_errors import InvalidStoredProfileError, ProfileNotFoundError
from actors.store.event_reads import newest
from actors.store.sync_reads import read_route_page
from actors.store.transcript_reads import read_notices
from policy.document import PolicyDocument

PAGE: Final = 200
ACTION_LABELS: Final = {
    "retry-now": "Retry now", "skip": "Skip now", "cancel": "Cancel wait", "stop": "Stop",
    "resume": "Resume", "start-fresh": "Start fresh",
}  # fmt: skip
WAITING_ACTIONS: Final = ("retry-now", "skip", "cancel", "stop")
VALID_ACTIONS: Final[dict[str, tuple[str, ...]]] = {
    "retry_wait": WAITING_ACTIONS, "waiting_for_reset": WAITING_ACTIONS,
    "active": ("stop",), "retrying": ("stop",), "switching": ("stop",),
    "action_required": ("resume", "start-fresh"),
}  # fmt: skip
"""The manual actions each state accepts (actors/routes/plan.py): the page offers only
these; the route's fence stays the judge of the generation."""


def console_router(
    backend: Callable[[Request], ApiBackend], circuits: Callable[[Request], CircuitReads]
) -> APIRouter:
    router = APIRouter(include_in_schema=False)

    @router.get("/")
    def root() -> Response:
        return RedirectResponse("/console/", status_code=307)

    @router.get("/console")
    def console_root() -> Response:
        return RedirectResponse("/console/", status_code=307)

    @router.get("/console/", response_class=HTMLResponse)
    @router.get("/console/routes", response_class=HTMLResponse)
    async def routes_page(
        request: Request,
        state: Annotated[RouteState | None, Query()] = None,
        caller: Annotated[str | None, Query(max_length=128)] = None,
        candidate: Annotated[str | None, Query(max_length=256)] = None,
    ) -> Response:
        found = backend(request)
        since = await events_cursor(request)

        def keep(route: RouteSnapshot) -> bool:
            return (
                (state is None or route.state == state)
                and (not caller or route.caller == caller)
                and (not candidate or route.candidate_id == candidate)
            )

        routes, more = await run_in_threadpool(read, lambda: read_route_page(
            found.listing, found.keys, after=None, limit=PAGE, keep=keep))  # fmt: skip
        return render(
            request, "routes.html", title="Live routes", nav="routes", routes=routes,
            more=more is not None, states=ROUTE_STATES,
            filters={"state": state or "", "caller": caller or "", "candidate": candidate or ""},
            summaries=summaries(), events_since=since,
        )  # fmt: skip

    @router.get("/console/routes/{route_id}", response_class=HTMLResponse)
    async def route_page(
        request: Request, route_id: Annotated[str, Path(pattern=ROUTE_ID)]
    ) -> Response:
        found = backend(request)
        since = await events_cursor(request)
        try:
            route = found.routes.route(route_id)
        except RecoveryError:
            return render(request, "missing.html", 404, title="No such route", nav="routes")
        snapshot = await answer(route, route.snapshot())
        history = await answer(route, route.history())
        notices = await run_in_threadpool(
            read, lambda: read_notices(found.listing, found.keys, route_id)
        )
        data = {
            "snapshot": snapshot.model_dump(mode="json"),
            "history": [record.model_dump(mode="json") for record in history],
            "valid_actions": VALID_ACTIONS, "labels": ACTION_LABELS,
            "summaries": summaries(),
        }  # fmt: skip
        return render(
            request, "route.html", title=f"Route {route_id}", nav="routes", route=snapshot,
            actions=[(a, ACTION_LABELS[a]) for a in VALID_ACTIONS.get(snapshot.state, ())],
            notices=notices, data=data, events_since=since,
        )  # fmt: skip

    @router.get("/console/circuits", response_class=HTMLResponse)
    async def circuits_page(request: Request) -> Response:
        listed = await circuits(request).all()
        now = datetime.now(UTC)
        charts = {c.resource_id: state_bands(c.history, c.state, now) for c in listed}
        return render(
            request, "circuits.html", title="Circuits", nav="circuits", circuits=listed,
            charts=charts, now=now,
        )  # fmt: skip

    @router.get("/console/profiles", response_class=HTMLResponse)
    async def profiles_page(request: Request) -> Response:
        page = await store_of(backend(request)).list(limit=1000)
        return render(request, "profiles.html", title="Profiles", nav="profiles", page=page)

    @router.get("/console/profiles/new", response_class=HTMLResponse)
    async def new_profile(request: Request) -> Response:
        return _editor(request, None, 0, [blank_candidate("candidate-1")])

    @router.get("/console/profiles/{profile_id}", response_class=HTMLResponse)
    async def edit_profile(
        request: Request, profile_id: Annotated[str, Path(pattern=f"^{PROFILE_ID_PATTERN}$")]
    ) -> Response:
        try:
            stored = await store_of(backend(request)).get(profile_id)
        except ProfileNotFoundError:
            return render(request, "missing.html", 404, title="No such profile", nav="profiles")
        except InvalidStoredProfileError as error:  # never decided from: say what to do
            return render(request, "missing.html", 409, title="This profile cannot be used",
                          nav="profiles", detail=error.detail)  # fmt: skip
        document = stored.document.model_dump(mode="json")
        return _editor(request, stored.profile_id, stored.version, document["candidates"],
                       name=document.get("name"))  # fmt: skip

    return router


async def events_cursor(request: Request) -> str:
    """The event streams' cursor before the page's reads: the page's script follows the
    events from there, so nothing written between this read and its connection is missed
    (a change seen twice is drawn twice, the same). Empty when it cannot be read."""
    streams = request.app.state.streams
    try:
        return str(await newest(streams.client, streams.keys))
    except StoreUnavailableError:
        return ""


def _editor(
    request: Request,
    profile_id: str | None,
    version: int,
    candidates: list[dict[str, Any]],
    name: str | None = None,
) -> Response:
    title = "New profile" if profile_id is None else f"Profile {profile_id}"
    return render(
        request, "editor.html", title=title, nav="profiles", profile_id=profile_id,
        version=version, name=name or "", candidates=candidates,
        blank=blank_candidate(""),
    )  # fmt: skip


def blank_candidate(candidate_id: str) -> dict[str, Any]:
    """A new candidate as the editor starts it: the documented defaults (retry and reset
    waiting off, skip, for both classes)."""
    defaults = PolicyDocument.default()
    return {"id": candidate_id, "agent": "", "provider": None, "model": None, "account": None,
            "enabled": True, "transient": defaults.transient.model_dump(mode="json"),
            "hard": defaults.hard.model_dump(mode="json")}  # fmt: skip


__all__ = ["ACTION_LABELS", "VALID_ACTIONS", "blank_candidate", "console_router"]
