"""`/profiles…`: the installation's stored dynamic profiles over HTTP (the profile store:
actors/store/profile_store.py), what the web console's editor saves to.

    GET    /profiles                 one page in id order (`?limit=&cursor=`)
    POST   /profiles                 {"id", "profile"}: a new profile, 201, as stored
    GET    /profiles/{id}            the profile at its current version
    PUT    /profiles/{id}            {"version", "profile"}: the next version, as stored
    DELETE /profiles/{id}            (`?version=`): 204

Every write answers the normalised document as stored (legacy candidate rules are
normalised once, on the way in). A document's problems are 422, each addressed by field
under `profile` (`profile.candidates[1].hard.retry.max_retries`); an edit that another
came before is 409 `stale_profile_version`; edits are authorised for the token's
principal (403 `not_authorised`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Final, TypeVar

from fastapi import APIRouter, Path, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from actors.api.backend import ApiBackend, ProfileApi
from actors.api.models import DynamicProfileJson
from actors.api.problems import (
    COMMON_ANSWERS,
    ApiProblem,
    Problem,
    from_policy,
    from_recovery,
    simple,
)
from actors.errors import RecoveryError, error_text
from actors.keys import PROFILE_ID_PATTERN
from actors.routes.profile_errors import (
    InvalidStoredProfileError,
    ProfileEditDeniedError,
    ProfileExistsError,
    ProfileNotFoundError,
    StaleProfileVersionError,
)
from actors.store.profile_codec import ProfilePage, StoredProfile
from actors.store.profile_store import DEFAULT_PAGE, MAX_PAGE
from policy.errors import PolicyError

T = TypeVar("T")
PROFILE_ID: Final = f"^{PROFILE_ID_PATTERN}$"
ProfileIdParam = Annotated[str, Path(pattern=PROFILE_ID, description="the profile's id")]
REFUSED: Final[tuple[tuple[type[RecoveryError], int, str], ...]] = (
    (ProfileNotFoundError, 404, "profile_not_found"),
    (InvalidStoredProfileError, 409, "invalid_stored_profile"),
    (ProfileExistsError, 409, "profile_exists"),
    (StaleProfileVersionError, 409, "stale_profile_version"),
    (ProfileEditDeniedError, 403, "not_authorised"),
)


class ProfileCreate(BaseModel):
    """`POST /profiles`: the new profile's id and its document."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: Annotated[str, Field(pattern=PROFILE_ID)]
    profile: DynamicProfileJson


class ProfileUpdate(BaseModel):
    """`PUT /profiles/{id}`: the version the edit was made on and the new document."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: Annotated[int, Field(ge=1, strict=True, description="the version read")]
    profile: DynamicProfileJson


def profile_router(backend: Callable[[Request], ApiBackend]) -> APIRouter:
    """The `/profiles` endpoints on the backend's profile store."""
    router = APIRouter(tags=["profiles"], responses={
        **COMMON_ANSWERS,
        403: {"model": Problem, "description": "the principal may not edit this profile"},
        404: {"model": Problem, "description": "no such profile is stored"},
    })  # fmt: skip

    @router.get("/profiles", response_model=ProfilePage)
    async def list_profiles(
        request: Request,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = DEFAULT_PAGE,
        cursor: Annotated[str | None, Query(pattern=PROFILE_ID, description="next_cursor")] = None,
    ) -> ProfilePage:
        """The stored profiles in id order, a page at a time; unreadable ones apart."""
        return await _answer(store_of(backend(request)).list(limit=limit, after=cursor))

    @router.post("/profiles", response_model=StoredProfile, status_code=201)
    async def create(request: Request, body: ProfileCreate) -> StoredProfile:
        """A new profile: its normalised document as stored, version 1 (or next after a
        delete). 409 `profile_exists` when it is stored already."""
        store = store_of(backend(request))
        return await _answer(store.create(body.id, body.profile, principal=_principal(request)))

    @router.get("/profiles/{profile_id}", response_model=StoredProfile)
    async def get(request: Request, profile_id: ProfileIdParam) -> StoredProfile:
        """The profile at its current version (404 when none is stored)."""
        return await _answer(store_of(backend(request)).get(profile_id))

    @router.put("/profiles/{profile_id}", response_model=StoredProfile)
    async def update(
        request: Request, profile_id: ProfileIdParam, body: ProfileUpdate
    ) -> StoredProfile:
        """The profile replaced at the version read: the next version, as stored. Routes
        that follow it decide with it from their next decision on."""
        store = store_of(backend(request))
        return await _answer(store.update(
            profile_id, body.profile, expected_version=body.version,
            principal=_principal(request),
        ))  # fmt: skip

    @router.delete("/profiles/{profile_id}", status_code=204)
    async def delete(
        request: Request,
        profile_id: ProfileIdParam,
        version: Annotated[int | None, Query(ge=1, description="the version read")] = None,
    ) -> Response:
        """Delete the profile (at `version` when given); routes that follow it stop at
        their next decision, naming it."""
        store = store_of(backend(request))
        await _answer(store.delete(
            profile_id, expected_version=version, principal=_principal(request)
        ))  # fmt: skip
        return Response(status_code=204)

    return router


def store_of(found: ApiBackend) -> ProfileApi:
    """The backend's profile store; 503 when this app serves none."""
    if found.profiles is None:
        raise simple(503, "profiles_unavailable", "this API serves no profile store")
    return found.profiles


def _principal(request: Request) -> str | None:
    principal: str | None = getattr(request.state, "principal", None)
    return principal


async def _answer(call: Awaitable[T]) -> T:
    try:
        return await call
    except PolicyError as error:
        raise from_policy(error, "profile") from None
    except RecoveryError as error:
        raise refusal(error) from None


def refusal(error: RecoveryError) -> ApiProblem:
    """A profile store's refusal in the API's shape."""
    for kind, status, code in REFUSED:
        if isinstance(error, kind):
            return ApiProblem(status, Problem(error=code, message=error_text(error)))
    return from_recovery(error)


__all__ = ["profile_router", "refusal", "store_of"]
