"""The policy questions the edges ask: one evaluate request, a candidate's policy out of a
document, pydantic's errors as field-addressed ones.

`recovery policy evaluate`, `recovery explain --policy` (actors/cli/policy.py) and the HTTP
API's `POST /policy/evaluate` and `POST /explain` (actors/api/) answer the same questions
the same way; this is what they share. Pure: `now` comes from the caller.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Final

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError, field_validator

from catalogue import Classification, ErrorClass
from policy.decisions import decision_json
from policy.document import PolicyDocument
from policy.errors import FieldError, PolicyError
from policy.evaluate import evaluate
from policy.failure import Failure
from policy.gate import EffectSafety
from policy.legacy import normalize_policy
from policy.profile import parse_profile
from policy.schedule import BUILTIN_POLICIES, NamedPolicy
from policy.validation import parse_document

__all__ = [
    "UNSAFE_BY_CALLER",
    "EvaluateLine",
    "candidate_policy",
    "decide",
    "decision_under",
    "field_errors",
    "line_policy",
]

CLASS_NAMES: Final = frozenset({ErrorClass.TRANSIENT.value, ErrorClass.HARD.value})
UNSAFE_BY_CALLER: Final = EffectSafety.unsafe(
    "not effect-safe: the caller did not report the turn as effect-safe"
)


class EvaluateLine(BaseModel):
    """One evaluate request (docs/CONTRACTS.md, `recovery policy evaluate`). `document` is
    checked by `parse_document`; `builtin` names a built-in policy instead (e.g.
    `interactive`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    document: Any = None
    builtin: Any = None
    failure: Failure
    effect_safe: bool = Field(default=False, strict=True)
    retry_ordinal: int = Field(default=0, ge=0, strict=True)
    reset_wait_used: bool | frozenset[str] = False
    now: AwareDatetime | None = None

    @field_validator("reset_wait_used", mode="before")
    @classmethod
    def _flag_or_classes(cls, value: Any) -> bool | frozenset[str]:
        if isinstance(value, bool):
            return value
        if isinstance(value, list) and all(
            isinstance(item, str) and item in CLASS_NAMES for item in value
        ):
            return frozenset(value)
        raise ValueError(
            "must be true, false or a list of classes (transient, hard), "
            f"got {json.dumps(value, default=str)}"
        )

    def reset_wait_used_for(self, error_class: ErrorClass) -> bool:
        used = self.reset_wait_used
        return used if isinstance(used, bool) else error_class.value in used


def decide(data: object, default_now: datetime) -> dict[str, Any]:
    """The decision line for one evaluate request (`data`, parsed JSON), or PolicyError
    with every problem found (the request's fields and its document's together)."""
    errors: list[FieldError] = []
    request: EvaluateLine | None = None
    try:
        request = EvaluateLine.model_validate(data)
    except ValidationError as exc:
        errors = field_errors(exc)
    given = data if isinstance(data, dict) else {}
    try:
        policy = line_policy(given.get("document"), given.get("builtin"))
    except PolicyError as exc:
        errors.extend(exc.errors)
    if errors or request is None:
        raise PolicyError(errors or [FieldError(None, "must be a JSON object")])
    decision = evaluate(
        policy,
        request.failure,
        now=request.now or default_now,
        safety=EffectSafety.safe() if request.effect_safe else UNSAFE_BY_CALLER,
        retry_ordinal=request.retry_ordinal,
        reset_wait_used=request.reset_wait_used_for(request.failure.error_class),
    )
    return decision_json(decision, request.retry_ordinal)


def line_policy(document: object, builtin: object) -> PolicyDocument | NamedPolicy:
    """The request's v1 `document`, or the built-in policy `builtin` names."""
    if builtin is not None:
        if document is not None:
            raise PolicyError.single("builtin", "give either document or builtin, not both")
        if not isinstance(builtin, str) or builtin not in BUILTIN_POLICIES:
            known = ", ".join(sorted(BUILTIN_POLICIES))
            raise PolicyError.single(
                "builtin", f"unknown built-in policy {json.dumps(builtin)}; expected {known}"
            )
        return BUILTIN_POLICIES[builtin]
    if document is None:
        raise PolicyError.single("document", "missing; give a v1 document or a builtin name")
    try:
        return parse_document(document)
    except PolicyError as exc:
        raise exc.prefixed("document") from None


def candidate_policy(data: object, candidate_id: str | None) -> PolicyDocument:
    """One candidate's document out of `data`: a dynamic profile (the candidate named, else
    the first enabled one), a v1 document, or legacy rules. PolicyError otherwise."""
    if isinstance(data, dict) and "candidates" in data:
        profile = parse_profile(data)
        for candidate in profile.candidates:
            if candidate.id == candidate_id or (candidate_id is None and candidate.enabled):
                return candidate.policy
        wanted = "no enabled candidate" if candidate_id is None else f"no {candidate_id!r}"
        raise PolicyError.single("candidates", f"the profile has {wanted}")
    return normalize_policy(data)


def decision_under(
    classification: Classification,
    document: PolicyDocument,
    at: datetime,
    *,
    retry_ordinal: int = 0,
    assumed: str = "assumed effect-safe",
) -> dict[str, Any]:
    """The decision line an error gets under a candidate's document at `at`, the turn
    assumed effect-safe (`assumed` says by whom) and the cycle's reset wait unused."""
    decision = evaluate(
        document,
        Failure.from_classification(classification),
        now=at,
        safety=EffectSafety.safe(assumed),
        retry_ordinal=retry_ordinal,
    )
    return decision_json(decision, retry_ordinal)


def field_errors(exc: ValidationError) -> list[FieldError]:
    """Pydantic's errors as field-addressed, lowercase messages naming the bad value."""
    found = []
    for error in exc.errors():
        field = _path(error["loc"])
        field_is_class = error["loc"][-1:] == ("error_class",)
        if error["type"] == "extra_forbidden":
            message = f"unknown field {str(error['loc'][-1])!r}"
        elif error["type"] == "missing":
            message = "missing; give class or error_class" if field_is_class else "missing"
        elif error["type"] == "value_error":
            message = error["msg"].removeprefix("Value error, ")
        else:
            message = error["msg"][0].lower() + error["msg"][1:]
            if "input" in error and not isinstance(error["input"], dict | list):
                message += f", got {json.dumps(error['input'], default=str)}"
        found.append(FieldError(field, message))
    return found


def _path(loc: tuple[int | str, ...]) -> str | None:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text or None
