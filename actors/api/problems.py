"""One error shape for every refusal the HTTP API makes (docs/CONTRACTS.md, HTTP API).

    {"error": "invalid_request", "message": "caller: string should match …",
     "errors": [{"field": "caller", "location": "body", "message": "…", "value": "bad name!"}],
     "snapshot": null}

`error` is a stable code, `message` a sentence for a person, `errors` one entry per bad
field (FastAPI's validation errors and the runtime's InvalidIdentifierError,
InvalidCommandError, InvalidClassificationError and PolicyError alike), `snapshot` the
route's authoritative snapshot when a fence refused the request (409). A value shown
back is sanitised and bounded (catalogue.sanitize): no secret a client sent comes back.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, Literal

from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, JsonValue

from actors.errors import (
    CorruptProfileError,
    CorruptRouteError,
    InvalidCommandError,
    InvalidIdentifierError,
    NoEligibleCandidateError,
    NotAuthorisedError,
    RecoveryError,
    StaleFieldError,
    StaleGenerationError,
    StaleOrdinalError,
    StoreUnavailableError,
    TransitionRejectedError,
    error_text,
)
from actors.routes.models import RouteSnapshot
from actors.routes.profile_errors import InvalidStoredProfileError, ProfileNotFoundError
from catalogue.boundary import InvalidClassificationError
from catalogue.sanitize import sanitize
from policy.errors import PolicyError

Location = Literal["body", "path", "query", "header"]
SHOWN_CHARS: Final = 200
# The runtime's identifier kinds, as the request field that carries them.
IDENTIFIER_FIELDS: Final[dict[str, tuple[str, Location]]] = {
    "route id": ("route_id", "path"),
    "caller": ("caller", "body"),
    "task id": ("task_id", "body"),
    "request id": ("Idempotency-Key", "header"),
}
REJECTION_CODES: Final[dict[type[Exception], str]] = {
    StaleGenerationError: "stale_generation",
    StaleOrdinalError: "stale_attempt",
    StaleFieldError: "stale_field",
}


class ProblemField(BaseModel):
    """One bad field: its name (a JSON path in the body such as `evidence.kind`, or a
    path, query or header parameter's name), where it was, why, and the value given."""

    field: str | None = None
    location: Location | None = None
    message: str
    value: JsonValue = None


class Problem(BaseModel):
    """Every error answer of the API."""

    error: str
    message: str
    errors: list[ProblemField] = []
    snapshot: RouteSnapshot | None = None


COMMON_ANSWERS: Final[dict[int | str, dict[str, Any]]] = {
    400: {"model": Problem, "description": "a body that is not JSON (or was cut off)"},
    401: {"model": Problem, "description": "no valid bearer token (nothing was read)"},
    409: {"model": Problem, "description": "refused by the route's fence; `snapshot`"},
    413: {"model": Problem, "description": "a body beyond the bound"},
    415: {"model": Problem, "description": "a body that is not sent as JSON"},
    422: {"model": Problem, "description": "a bad field, named with the value given"},
    503: {"model": Problem, "description": "Redis or a route host did not answer"},
}
"""The refusals any endpoint may answer, for the schema: every router is made with them."""


class ApiProblem(Exception):  # noqa: N818 - it is an answer, raised to leave the endpoint
    """An error answer: raised anywhere in an endpoint, answered by the app's handler."""

    def __init__(
        self, status: int, problem: Problem, headers: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(problem.message)
        self.status = status
        self.problem = problem
        self.headers = headers


def shown(value: object) -> JsonValue:
    """A value as an error may show it: scalars as they are (text sanitised and cut),
    containers not at all (the field names them)."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # NaN and Infinity parse from a body but are not JSON to answer
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, str):
        text = sanitize(value)
        return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 1] + "…"
    return None


def invalid(fields: Sequence[ProblemField]) -> ApiProblem:
    """422 for bad fields, the first one (and how many more) in the message."""
    first = fields[0]
    message = first.message if first.field is None else f"{first.field}: {first.message}"
    if first.value is not None:
        message += f", got {json.dumps(first.value, ensure_ascii=False)}"
    if len(fields) > 1:
        message += f" (and {len(fields) - 1} more)"
    return ApiProblem(422, Problem(error="invalid_request", message=message, errors=list(fields)))


def from_validation(error: RequestValidationError) -> ApiProblem:
    """FastAPI's validation errors in the API's shape."""
    return invalid([_validation_field(item) for item in error.errors()] or [_whole()])


def _validation_field(item: dict[str, Any]) -> ProblemField:
    loc = tuple(item.get("loc", ()))
    location: Location | None = loc[0] if loc and loc[0] in IDENTIFIER_LOCATIONS else None
    path = loc[1:] if location is not None else loc
    kind = item.get("type", "")
    if kind == "missing":
        message = "missing"
    elif kind == "extra_forbidden":
        message = "unknown field"
    else:
        text = str(item.get("msg", "invalid")).removeprefix("Value error, ")
        message = text[:1].lower() + text[1:]
    value = None if kind in {"missing", "extra_forbidden"} else shown(item.get("input"))
    return ProblemField(field=_json_path(path), location=location, message=message, value=value)


IDENTIFIER_LOCATIONS: Final = frozenset({"body", "path", "query", "header"})


def _whole() -> ProblemField:
    return ProblemField(field=None, location="body", message="not a valid request")


def _json_path(parts: Iterable[object]) -> str | None:
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or None


def from_policy(error: PolicyError, prefix: str | None = None) -> ApiProblem:
    """A policy document's problems (every one, field-addressed) as a 422."""
    fields = [
        ProblemField(field=_prefixed(prefix, item.field), location="body", message=item.message)
        for item in error.errors
    ]
    return invalid(fields)


def _prefixed(prefix: str | None, field: str | None) -> str | None:
    if not prefix:
        return field
    if not field:
        return prefix
    return f"{prefix}{field}" if field.startswith("[") else f"{prefix}.{field}"


def from_recovery(error: RecoveryError, snapshot: RouteSnapshot | None = None) -> ApiProblem:
    """The answer to a RecoveryError the runtime raised (`snapshot`: the route's after a
    fence refused the request)."""
    if isinstance(error, PolicyError):
        return from_policy(error)
    bad = bad_field(error)
    if bad is not None:
        return invalid([bad])
    for kinds, status, general in REFUSALS:
        if isinstance(error, kinds):
            code = REJECTION_CODES.get(type(error), general)
            fenced = isinstance(error, TransitionRejectedError | NoEligibleCandidateError)
            return _answer(status, code, error, snapshot if fenced else None)
    return _answer(500, "internal", error, None)


REFUSALS: Final[tuple[tuple[type[Exception] | tuple[type[Exception], ...], int, str], ...]] = (
    (TransitionRejectedError, 409, "invalid_state"),
    (NoEligibleCandidateError, 409, "no_eligible_candidate"),
    ((CorruptRouteError, CorruptProfileError), 409, "corrupt_route"),
    (NotAuthorisedError, 403, "not_authorised"),
    (StoreUnavailableError, 503, "store_unavailable"),
    # A route command on a stored profile that cannot decide it (deleted, or a legacy or
    # invalid document): refused without effect, the message saying what to do.
    (ProfileNotFoundError, 409, "profile_not_found"),
    (InvalidStoredProfileError, 409, "invalid_stored_profile"),
)


def bad_field(error: RecoveryError) -> ProblemField | None:
    """The field a runtime's refusal of input names (None: the refusal is of another
    kind)."""
    match error:
        case InvalidIdentifierError(kind=kind, value=value, pattern=pattern):
            field, location = IDENTIFIER_FIELDS.get(kind, (kind.replace(" ", "_"), "body"))
            return ProblemField(
                field=field, location=location, message=f"must match {pattern}", value=shown(value)
            )
        case InvalidCommandError(field=field, value=value, expected=expected):
            return ProblemField(
                field=field, location="body", message=f"must be {expected}", value=shown(value)
            )
        case InvalidClassificationError(field=field, value=value, reason=reason):
            return ProblemField(
                field=f"classification.{field}", location="body", message=reason, value=value
            )
    return None


def _answer(
    status: int, code: str, error: BaseException, snapshot: RouteSnapshot | None
) -> ApiProblem:
    return ApiProblem(status, Problem(error=code, message=error_text(error), snapshot=snapshot))


def simple(
    status: int, code: str, message: str, headers: Mapping[str, str] | None = None
) -> ApiProblem:
    """An answer with no field and no snapshot (401, 404, 405, 413, 503)."""
    return ApiProblem(status, Problem(error=code, message=message), headers)


def header_field(name: str, value: object, message: str) -> ApiProblem:
    return invalid([ProblemField(field=name, location="header", message=message,
                                 value=shown(value))])  # fmt: skip
