"""The failure a policy is asked about: a classification's policy-relevant part."""

from __future__ import annotations

from typing import Any, Final, Self

from pydantic import AliasChoices, AwareDatetime, BaseModel, ConfigDict, Field, model_validator

from catalogue.classification import Classification
from catalogue.codes import Confidence, ErrorClass, Scope

# Fields a printed Classification carries that policy does not read; accepted and dropped
# so that `recovery classify` output can be fed straight in.
_IGNORED_CLASSIFICATION_FIELDS: Final = frozenset(Classification.model_fields) - {
    "code",
    "error_class",
    "confidence",
    "scope",
    "retry_after_s",
    "reset_at",
}


class Failure(BaseModel):
    """`class` is accepted as an alias of `error_class`. `stale` marks evidence from an
    earlier invocation or prompt generation."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    code: str = Field(min_length=1)
    error_class: ErrorClass = Field(validation_alias=AliasChoices("error_class", "class"))
    confidence: Confidence = Confidence.HIGH
    scope: Scope | None = None
    retry_after_s: float | None = Field(default=None, ge=0, allow_inf_nan=False, strict=True)
    reset_at: AwareDatetime | None = None
    stale: bool = Field(default=False, strict=True)

    @model_validator(mode="before")
    @classmethod
    def _accept_classification_output(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        kept = {k: v for k, v in data.items() if k not in _IGNORED_CLASSIFICATION_FIELDS}
        if "class" in kept and "error_class" in kept:
            if kept["class"] != kept["error_class"]:
                raise ValueError(
                    f"class {kept['class']!r} and error_class {kept['error_class']!r} disagree"
                )
            del kept["class"]
        return kept

    @classmethod
    def from_classification(cls, classification: Classification, *, stale: bool = False) -> Self:
        return cls(
            code=classification.code,
            error_class=classification.error_class,
            confidence=classification.confidence,
            scope=classification.scope,
            retry_after_s=classification.retry_after_s,
            reset_at=classification.reset_at,
            stale=stale,
        )
