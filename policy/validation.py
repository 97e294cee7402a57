"""Validation of v1 policy documents from JSON: every error at once, addressed by field.

The checks return the normalised data (disabled sections zeroed, integral floats made
integers) so that the models built from it always validate.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from catalogue.codes import ErrorClass
from policy._checks import (
    Errors,
    boolean,
    check_keys,
    choice,
    describe,
    expect_object,
    whole_number,
)
from policy.document import (
    MAX_INITIAL_INTERVAL_SECONDS,
    MAX_RETRIES,
    MAX_WAIT_SECONDS,
    POLICY_CLASSES,
    POLICY_VERSION,
    Outcome,
    PolicyDocument,
)
from policy.errors import FieldError, PolicyError, join_path

CLASS_KEYS: Final = tuple(c.value for c in POLICY_CLASSES)
OUTCOMES: Final = tuple(o.value for o in Outcome)
MISSING_CLASS: Final = "missing class policy; a document needs both transient and hard"


def parse_document(data: object) -> PolicyDocument:
    """A v1 document from parsed JSON, or `PolicyError` listing every problem."""
    errors: Errors = []
    checked = check_document(data, None, errors)
    if errors or checked is None:
        raise PolicyError(errors or [FieldError(None, "not a policy document")])
    return PolicyDocument.model_validate(checked)


def check_document(data: object, path: str | None, errors: Errors) -> dict[str, Any] | None:
    obj = expect_object(data, path, errors)
    if obj is None:
        return None
    check_keys(
        obj,
        path,
        errors,
        allowed=("version", *CLASS_KEYS),
        required=("version",),
        unknown=_unknown_class,
        missing=f"missing; expected {POLICY_VERSION}",
    )
    if "version" in obj:
        check_version(obj["version"], join_path(path, "version"), errors)
    sections = check_class_sections(obj, path, errors)
    return None if sections is None else {"version": POLICY_VERSION, **sections}


def check_version(value: object, path: str | None, errors: Errors) -> None:
    if type(value) is not int or value != POLICY_VERSION:
        errors.append(
            FieldError(path, f"unsupported version {describe(value)}; expected {POLICY_VERSION}")
        )


def check_class_sections(
    obj: Mapping[str, Any], path: str | None, errors: Errors
) -> dict[str, Any] | None:
    """Both class policies of `obj` (a document or a candidate); None if any is bad."""
    sections: dict[str, Any] = {}
    for name in CLASS_KEYS:
        field = join_path(path, name)
        if name not in obj:
            errors.append(FieldError(field, MISSING_CLASS))
            continue
        section = check_class_policy(obj[name], field, errors)
        if section is not None:
            sections[name] = section
    return sections if len(sections) == len(CLASS_KEYS) else None


def check_class_policy(data: object, path: str | None, errors: Errors) -> dict[str, Any] | None:
    obj = expect_object(data, path, errors)
    if obj is None:
        return None
    keys = ("retry", "wait_for_reset", "on_exhausted")
    check_keys(obj, path, errors, allowed=keys, required=keys)
    retry = check_retry(obj["retry"], join_path(path, "retry"), errors) if "retry" in obj else None
    wait = (
        check_wait_for_reset(obj["wait_for_reset"], join_path(path, "wait_for_reset"), errors)
        if "wait_for_reset" in obj
        else None
    )
    outcome = (
        choice(obj["on_exhausted"], join_path(path, "on_exhausted"), errors, OUTCOMES, "outcome")
        if "on_exhausted" in obj
        else None
    )
    if retry is None or wait is None or outcome is None:
        return None
    return {"retry": retry, "wait_for_reset": wait, "on_exhausted": outcome}


def check_retry(data: object, path: str | None, errors: Errors) -> dict[str, Any] | None:
    return _check_section(
        data,
        path,
        errors,
        what="retry",
        bounds={
            "max_retries": MAX_RETRIES,
            "initial_interval_seconds": MAX_INITIAL_INTERVAL_SECONDS,
        },
    )


def check_wait_for_reset(data: object, path: str | None, errors: Errors) -> dict[str, Any] | None:
    return _check_section(
        data, path, errors, what="reset waiting", bounds={"max_wait_seconds": MAX_WAIT_SECONDS}
    )


def _check_section(
    data: object, path: str | None, errors: Errors, *, what: str, bounds: dict[str, int]
) -> dict[str, Any] | None:
    """An `enabled` flag and whole numbers: within 1..bound when enabled; when disabled any
    non-negative whole number, stored as zero."""
    obj = expect_object(data, path, errors)
    if obj is None:
        return None
    check_keys(obj, path, errors, allowed=("enabled", *bounds), required=("enabled",))
    before = len(errors)
    enabled = (
        boolean(obj["enabled"], join_path(path, "enabled"), errors) if "enabled" in obj else None
    )
    numbers: dict[str, int] = {}
    for name, high in bounds.items():
        field = join_path(path, name)
        if name not in obj:
            if enabled:
                errors.append(FieldError(field, f"missing; required when {what} is enabled"))
            continue
        number = whole_number(
            obj[name], field, errors, 1 if enabled else 0, high if enabled else None
        )
        if number is not None:
            numbers[name] = number
    if len(errors) > before or enabled is None:
        return None
    if not enabled:
        numbers = dict.fromkeys(bounds, 0)
    return {"enabled": enabled, **numbers}


def _unknown_class(key: str) -> str:
    if key in (ErrorClass.NONE.value, ErrorClass.UNCLASSIFIED.value):
        return f"class {key!r} cannot be configured; such failures always stop"
    return f"unknown class {key!r}; expected transient or hard"
