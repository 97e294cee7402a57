"""Classification: the catalogue's verdict on one piece of evidence."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from catalogue.codes import CATALOGUE_VERSION, Confidence, ErrorClass, Scope
from catalogue.timing import HintSource


class Classification(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    code: str
    error_class: ErrorClass
    confidence: Confidence
    scope: Scope
    rule: str
    catalogue_version: str = CATALOGUE_VERSION
    provider: str | None = None
    model: str | None = None
    phase: str | None = None
    occurred_at: datetime | None = None
    retry_after_s: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    reset_at: datetime | None = None
    hint_source: HintSource | None = None
    safe_excerpt: str = ""

    @property
    def is_actionable(self) -> bool:
        """True when policy may act on it: a class it configures and enough confidence."""
        return (
            self.error_class in (ErrorClass.TRANSIENT, ErrorClass.HARD)
            and self.confidence is not Confidence.LOW
        )


_FIELDS = tuple(Classification.model_fields)
_set_attribute = object.__setattr__


def trusted_classification(values: dict[str, Any]) -> Classification:
    """A Classification of values the catalogue produced and validated itself (codes and
    enums of its registry, timing hints checked by catalogue.timing, a sanitised excerpt):
    built without a second validation pass, which costs more than the rest of a
    classification's bookkeeping. It is the object `Classification(**values)` builds (a
    test ties the two); every field must be given. Anything built from outside input goes
    through `Classification(...)` or `model_validate`."""
    if len(values) != len(_FIELDS):
        raise TypeError(f"trusted_classification needs every field: {sorted(values)}")
    built = Classification.__new__(Classification)
    _set_attribute(built, "__dict__", {name: values[name] for name in _FIELDS})
    _set_attribute(built, "__pydantic_fields_set__", set(_FIELDS))
    _set_attribute(built, "__pydantic_extra__", None)
    _set_attribute(built, "__pydantic_private__", None)
    return built
