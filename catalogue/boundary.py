"""A Classification a caller built, checked again where it enters the runtime.

A route report may carry a Classification instead of evidence. The runtime stores its
rule, code and class in the route hash, the attempt history and the events stream, and acts
on its timing hint, so it is held to what the catalogue itself would produce:

- `rule` is a rule id of the shipped catalogue (or one of its two unclassified rules), and
  `code` is that rule's code or `unclassified` (a low-confidence match), in its class;
- `retry_after_s` is at most MAX_HINT_SECONDS and `reset_at` has a time zone and is at most
  that far after `now`; a reset already past is dropped, as the catalogue drops it;
- `safe_excerpt`, `provider`, `model`, `phase` and `catalogue_version` are sanitised again
  (the excerpt is bounded by the sanitiser, the others to MAX_LABEL characters).

What cannot be accepted raises InvalidClassificationError naming the field and the value
(sanitised: the value may be the very secret that must not be echoed).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any, Final

from catalogue.classification import Classification
from catalogue.classifier import NO_MATCH_RULE, PROSE_RULE, default_catalogue
from catalogue.codes import UNCLASSIFIED, UnknownCodeError, class_of
from catalogue.errors import RecoveryError
from catalogue.sanitize import sanitize
from catalogue.timing import MAX_HINT_SECONDS

__all__ = ["MAX_LABEL", "InvalidClassificationError", "known_rule_codes", "revalidated"]

MAX_LABEL: Final = 256
_SHOWN: Final = 80  # characters of a refused value shown in the message


class InvalidClassificationError(RecoveryError, ValueError):
    """A caller-built classification the runtime refuses: `field` holds `value` (shown
    sanitised and bounded: build it with `of`)."""

    def __init__(self, field: str, value: str, reason: str) -> None:
        self.field = field
        self.value = value
        self.reason = reason
        super().__init__(field, value, reason)

    @classmethod
    def of(cls, field: str, value: object, reason: str) -> InvalidClassificationError:
        return cls(field, _shown(value), reason)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.field, self.value, self.reason))

    def __str__(self) -> str:
        return f"classification.{self.field}: {self.reason}, got {self.value}"


def _shown(value: object) -> str:
    text = sanitize(repr(value))
    return text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…"


@cache
def known_rule_codes() -> dict[str, str]:
    """Every rule id the shipped catalogue can put in a classification, with its code."""
    codes = {rule.id: rule.code for rule in default_catalogue().rules}
    codes.update({NO_MATCH_RULE: UNCLASSIFIED, PROSE_RULE: UNCLASSIFIED})
    return codes


def revalidated(classification: Classification, now: datetime) -> Classification:
    """`classification` as the runtime may store and act on it (module docstring), or
    InvalidClassificationError."""
    c = classification
    rule_code = known_rule_codes().get(c.rule)
    if rule_code is None:
        raise InvalidClassificationError.of("rule", c.rule, "not a rule id of the catalogue")
    if c.code not in (rule_code, UNCLASSIFIED):
        reason = f"rule {c.rule} gives code {rule_code!r} (or {UNCLASSIFIED!r})"
        raise InvalidClassificationError.of("code", c.code, reason)
    try:
        expected_class = class_of(c.code)
    except UnknownCodeError:  # a rule file naming a code the registry lacks
        raise InvalidClassificationError.of("code", c.code, "not a code of the registry") from None
    if c.error_class is not expected_class:
        reason = f"code {c.code} is of class {expected_class.value!r}"
        raise InvalidClassificationError.of("error_class", c.error_class.value, reason)
    if c.retry_after_s is not None and c.retry_after_s > MAX_HINT_SECONDS:
        reason = f"must be at most {MAX_HINT_SECONDS} s (30 days)"
        raise InvalidClassificationError.of("retry_after_s", c.retry_after_s, reason)
    reset_at = _reset_at(c.reset_at, now)
    hint_source = c.hint_source
    if reset_at is None and c.retry_after_s is None:
        hint_source = None
    return Classification.model_validate(
        {
            **c.model_dump(),
            "reset_at": reset_at,
            "hint_source": hint_source,
            "safe_excerpt": sanitize(c.safe_excerpt),
            "provider": _label(c.provider),
            "model": _label(c.model),
            "phase": _label(c.phase),
            "catalogue_version": _label(c.catalogue_version) or "",
        }
    )


def _reset_at(reset_at: datetime | None, now: datetime) -> datetime | None:
    if reset_at is None:
        return None
    if reset_at.tzinfo is None:
        raise InvalidClassificationError.of("reset_at", reset_at, "must carry a time zone")
    now = now if now.tzinfo is not None else now.replace(tzinfo=UTC)
    if reset_at - now > timedelta(seconds=MAX_HINT_SECONDS):
        reason = f"must be at most {MAX_HINT_SECONDS} s (30 days) after now ({now.isoformat()})"
        raise InvalidClassificationError.of("reset_at", reset_at.isoformat(), reason)
    return reset_at.astimezone(UTC) if reset_at > now else None


def _label(value: str | None) -> str | None:
    if value is None:
        return None
    text = sanitize(value)
    return text if len(text) <= MAX_LABEL else text[: MAX_LABEL - 1] + "…"
