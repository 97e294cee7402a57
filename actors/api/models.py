"""The HTTP API's request and answer bodies (docs/CONTRACTS.md, HTTP API).

The route answers are the project's own edge models (RouteSnapshot, AttemptRecord,
ScheduleEntry, TranscriptMessage: actors/routes/models.py, actors/store/transcript.py),
so a client in any language reads exactly what a Python RouteHandle returns. The request
bodies here mirror RouteHandle's arguments, with the same identifier shapes, so that a
bad field is refused by the API's validation (422 naming it) before the runtime sees it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Final, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, PlainValidator

from actors.keys import PROFILE_ID_PATTERN, REQUEST_ID_PATTERN, ROUTE_ID_PATTERN
from actors.routes.models import RouteSnapshot, ScheduleEntry
from actors.routes.profiles import ConcreteProfile
from actors.store.transcript import TranscriptMessage
from catalogue import Classification, Evidence
from policy import DynamicProfile, TurnEvidence
from policy.requests import EvaluateLine

_REQUEST: Final = ConfigDict(frozen=True, extra="forbid")

RouteIdText = Annotated[str, Field(pattern=f"^{ROUTE_ID_PATTERN}$")]
"""A route (session), task or caller id: `[A-Za-z0-9._-]{1,128}`."""
RequestIdText = Annotated[str, Field(pattern=f"^{REQUEST_ID_PATTERN}$")]
LabelText = Annotated[str, Field(min_length=1, max_length=256)]
Generation = Annotated[int, Field(ge=0, strict=True, description="the generation last seen")]

RouteAction = Literal["retry-now", "skip", "cancel", "stop", "resume", "start-fresh", "close"]
"""The manual actions (docs/CONTRACTS.md, Routes): retry-now runs the pending attempt now,
skip switches to the next candidate, cancel ends a pending wait (action_required), stop
ends automatic recovery, resume and start-fresh leave action_required, close ends the
route for good."""

PROFILE_DESCRIPTION: Final = (
    "A dynamic profile (its JSON Schema: GET /policy/schema; legacy rule maps are "
    'normalised), or a concrete one: {"kind": "concrete", "id", "agent", "provider", '
    '"model", "account", "policy": "interactive"}.'
)


def _json_object(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError(f"must be a JSON object, got {type(value).__name__}")
    return value


def documented_as(model: Any) -> PlainValidator:
    """A JSON object taken as it is, documented in the schema as `model`: the endpoint
    validates it with the project's own parser (every problem at once, field-addressed,
    legacy forms normalised), which accepts everything the documented schema does."""
    return PlainValidator(_json_object, json_schema_input_type=model)


ProfileJson = Annotated[dict[str, Any], documented_as(DynamicProfile | ConcreteProfile)]
"""A route profile: a dynamic profile (legacy rule maps normalised) or a concrete one."""
DynamicProfileJson = Annotated[dict[str, Any], documented_as(DynamicProfile)]
EvaluateJson = Annotated[dict[str, Any], documented_as(EvaluateLine)]
JsonObject = Annotated[dict[str, Any], documented_as(dict[str, Any])]
"""Any JSON object, read by the project's own parser (legacy rules, a policy to check)."""


PROFILE_ID_DESCRIPTION: Final = (
    "A stored profile's id (POST /profiles), instead of `profile`: the route follows that "
    "profile, deciding with its current version at each decision."
)
ProfileIdText = Annotated[str, Field(pattern=f"^{PROFILE_ID_PATTERN}$")]


class StartRequest(BaseModel):
    """`POST /routes/{id}/start`: RouteHandle.start's arguments (exactly one of `profile`
    and `profile_id`)."""

    model_config = _REQUEST

    profile: ProfileJson | None = Field(default=None, description=PROFILE_DESCRIPTION)
    profile_id: ProfileIdText | None = Field(default=None, description=PROFILE_ID_DESCRIPTION)
    caller: RouteIdText
    invocation_id: LabelText
    provider_session_id: LabelText | None = None
    task_id: RouteIdText | None = None
    utility: bool = False
    recovery_deadline: AwareDatetime | None = None


class FailureRequest(BaseModel):
    """`POST /routes/{id}/failure`: a failed turn, as evidence to classify (or a
    Classification already made), with what was observed of the turn (`turn`; absent:
    nothing was recorded, which is unsafe to repeat). `attempt`: the attempt ordinal the
    report is about (a dispatched attempt's `attempt_ordinal`)."""

    model_config = _REQUEST

    generation: Generation
    evidence: Evidence | None = None
    classification: Classification | None = None
    turn: TurnEvidence | None = None
    caller: RouteIdText
    invocation_id: LabelText
    provider_session_id: LabelText | None = None
    attempt: Annotated[int, Field(ge=0, strict=True)] | None = None
    utility: bool = False


class GenerationRequest(BaseModel):
    """`POST /routes/{id}/success` and the manual actions: the expected generation."""

    model_config = _REQUEST

    generation: Generation


class ActionRequest(GenerationRequest):
    """A manual action: the expected generation; a Start fresh may give a new `profile`
    or a stored one's `profile_id` (neither: the route's own) and a new
    `recovery_deadline` (absent: the route's)."""

    profile: ProfileJson | None = Field(default=None, description=PROFILE_DESCRIPTION)
    profile_id: ProfileIdText | None = Field(default=None, description=PROFILE_ID_DESCRIPTION)
    recovery_deadline: AwareDatetime | None = None


class RoutePage(BaseModel):
    """`GET /routes`: one page of routes by id; `next_cursor` (null on the last page)
    gives the next one as `?cursor=`."""

    routes: list[RouteSnapshot]
    next_cursor: str | None = None


class ScheduleList(BaseModel):
    schedules: list[ScheduleEntry]


class CircuitChange(BaseModel):
    """One change of a circuit's state, from the circuit events stream."""

    event_id: str
    cause: str
    from_state: str
    state: str
    open_until: datetime | None = None
    reason: str | None = None
    at: datetime


class CircuitOut(BaseModel):
    """One circuit as `recovery circuits --json` shows it, with its recent state changes
    (`history`, oldest first: at least the last hour's)."""

    resource_id: str
    label: str
    provider: str | None = None
    model: str | None = None
    credential_fingerprint: str | None = None
    state: Literal["closed", "open", "half_open"]
    open_until: datetime | None = None
    reason: str | None = None
    failures: int
    backoff_step: int
    probe_holder: str | None = None
    lease_expires_at: datetime | None = None
    parked: int
    host: str | None = None
    version: int
    updated_at: datetime | None = None
    history: list[CircuitChange]


class CircuitList(BaseModel):
    circuits: list[CircuitOut]


class NoticeList(BaseModel):
    """`GET /sessions/{id}/notices`: the session's outstanding retry notices."""

    notices: list[TranscriptMessage]


class CancelRequest(BaseModel):
    """`POST /sessions/{id}/cancel-transient-retry`: the orchestrator's task of the
    session (authorised for the token's principal before anything is read)."""

    model_config = _REQUEST

    task_id: RouteIdText


class CancelAnswer(BaseModel):
    """What a cancel did: `active` whether a retry loop was running (it is stopped now);
    `snapshot` the route after the cancel."""

    active: bool
    snapshot: RouteSnapshot


class ExplainRequest(BaseModel):
    """`POST /explain`: the evidence, and optionally the policy to decide under
    (`policy`: a dynamic profile, a v1 document or legacy rules; `candidate`: which of a
    profile's candidates, default the first enabled; `at`: the decision time, default
    now; `retry_ordinal`: retries already used). The turn is assumed effect-safe."""

    model_config = _REQUEST

    evidence: Evidence
    policy: JsonObject | None = None
    candidate: LabelText | None = None
    at: AwareDatetime | None = None
    retry_ordinal: Annotated[int, Field(ge=0, le=1000, strict=True)] = 0


class Decision(BaseModel):
    """A policy decision as `recovery policy evaluate` prints it."""

    decision: Literal["retry", "wait_for_reset", "skip", "stop"]
    deadline: datetime | None = None
    retry_ordinal: int
    reason: str


class ExplainAnswer(BaseModel):
    """The verdict for a person: the classification, the rules that matched (winner
    first), why the winner exists, and the decision under `policy` when one was given."""

    classification: Classification
    matched: list[str]
    why: str | None = None
    decision: Decision | None = None


class PolicyProblem(BaseModel):
    field: str | None = None
    message: str


class ValidateAnswer(BaseModel):
    """`POST /policy/validate`: `valid`; when valid the profile normalised and its lint
    `warnings`, else every problem (`errors`, field-addressed)."""

    valid: bool
    profile: dict[str, Any] | None = None
    warnings: list[PolicyProblem] = []
    errors: list[PolicyProblem] = []


class ClassPreview(BaseModel):
    """One candidate's schedule for one class: the retry delays and their offsets from
    the failure, the longest reset wait, what happens once exhausted, in words."""

    index: int
    candidate: str
    error_class: str = Field(alias="class")
    retry_delays_s: list[int]
    retry_offsets_s: list[int]
    max_wait_s: int | None = None
    on_exhausted: str
    next_candidate: str | None = None
    summary: str


class PreviewAnswer(BaseModel):
    """`POST /policy/preview`: the schedule a profile implies, per candidate and class
    (`classes`), in words (`lines`), and its lint `warnings`."""

    classes: list[ClassPreview]
    lines: list[str]
    warnings: list[PolicyProblem]


def action_names() -> tuple[str, ...]:
    """The manual actions' path names, in the documented order."""
    return RouteAction.__args__  # type: ignore[attr-defined,no-any-return]  # a Literal's members
