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
_ALL_FIELDS = set(_FIELDS)
# BaseModel defines no __new__: `object.__new__` is what `Classification.__new__` finds,
# without looking it up through the model's metaclass on every call.
_new_instance = object.__new__
# The setters of the four slots BaseModel declares (its `__dict__` and three of its own),
# called directly: `object.__setattr__` would look each descriptor up by name first.
_slots = vars(BaseModel)
_set_dict = _slots["__dict__"].__set__
_set_fields_set = _slots["__pydantic_fields_set__"].__set__
_set_extra = _slots["__pydantic_extra__"].__set__
_set_private = _slots["__pydantic_private__"].__set__


def trusted_classification(values: dict[str, Any]) -> Classification:
    """A Classification of values the catalogue produced and validated itself (codes and
    enums of its registry, timing hints checked by catalogue.timing, a sanitised excerpt):
    built without a second validation pass, which costs more than the rest of a
    classification's bookkeeping. It is the object `Classification(**values)` builds (a
    test ties the two); every field must be given. Anything built from outside input goes
    through `Classification(...)` or `model_validate`."""
    if len(values) != len(_FIELDS):
        raise TypeError(f"trusted_classification needs every field: {sorted(values)}")
    return adopt_fields({name: values[name] for name in _FIELDS})


def field_template(**values: Any) -> dict[str, Any]:
    """Every field of a Classification, in field order: those given, the others at their
    defaults. A copy of it, filled in, is what `adopt_fields` takes."""
    unknown = set(values) - _ALL_FIELDS
    if unknown:
        raise TypeError(f"not fields of a classification: {sorted(unknown)}")
    template = {}
    for name, info in Classification.model_fields.items():
        if name not in values and info.is_required():
            raise TypeError(f"field_template needs the required field {name!r}")
        template[name] = values.get(name, info.default)
    return template


def adopt_fields(fields: dict[str, Any]) -> Classification:
    """The trusted Classification (see `trusted_classification`) whose fields are `fields`
    itself, taken without a copy: a dict holding every field in field order (a filled copy
    of `field_template`) that nothing else keeps."""
    built = _new_instance(Classification)
    _set_dict(built, fields)
    _set_fields_set(built, _ALL_FIELDS.copy())
    _set_extra(built, None)
    _set_private(built, None)
    return built
