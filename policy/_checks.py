"""Small checks over parsed JSON that record field-addressed errors instead of raising."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Collection, Mapping
from typing import Any

from policy.errors import FieldError, join_path

Errors = list[FieldError]


def describe(value: object) -> str:
    """A short, JSON-flavoured rendering of a bad value for an error message."""
    if isinstance(value, bool) or value is None:
        text = json.dumps(value)
    elif isinstance(value, float) and not math.isfinite(value):
        text = str(value)
    elif isinstance(value, int | float):
        text = repr(value)
    elif isinstance(value, str):
        text = repr(value if len(value) <= 60 else value[:57] + "...")
    elif isinstance(value, Mapping):
        text = "an object"
    else:
        text = "a list" if isinstance(value, list | tuple) else type(value).__name__
    return text


def expect_object(value: object, path: str | None, errors: Errors) -> Mapping[str, Any] | None:
    if isinstance(value, Mapping):
        return value
    errors.append(FieldError(path, f"must be an object, got {describe(value)}"))
    return None


def check_keys(
    obj: Mapping[str, Any],
    path: str | None,
    errors: Errors,
    *,
    allowed: Collection[str],
    required: Collection[str] = (),
    unknown: Callable[[str], str] = lambda key: f"unknown key {key!r}",
    missing: str = "missing",
) -> None:
    """Unknown keys in input order, then missing ones in the order `required` names them."""
    for key in obj:
        if key not in allowed:
            errors.append(FieldError(join_path(path, str(key)), unknown(str(key))))
    for key in required:
        if key not in obj:
            errors.append(FieldError(join_path(path, key), missing))


def whole_number(
    value: object, path: str | None, errors: Errors, low: int = 0, high: int | None = None
) -> int | None:
    """A finite, integral number within [low, high]; booleans are not numbers."""
    problem = _number_problem(value, low, high)
    if problem is None and isinstance(value, int | float):
        return int(value)
    errors.append(FieldError(path, f"{problem or 'must be a number'}, got {describe(value)}"))
    return None


def _number_problem(value: object, low: int, high: int | None) -> str | None:
    if isinstance(value, bool):
        return "must be a number, not a boolean"
    if isinstance(value, float) and not math.isfinite(value):
        return "must be a finite number"
    if not isinstance(value, int | float) or (isinstance(value, float) and not value.is_integer()):
        return "must be a whole number"
    if high is not None and not low <= value <= high:
        return f"must be between {low} and {high}"
    if value < low:
        return "must not be negative" if low == 0 else f"must be at least {low}"
    return None


def boolean(value: object, path: str | None, errors: Errors) -> bool | None:
    if isinstance(value, bool):
        return value
    errors.append(FieldError(path, f"must be true or false, got {describe(value)}"))
    return None


def choice(
    value: object, path: str | None, errors: Errors, choices: tuple[str, ...], noun: str
) -> str | None:
    if isinstance(value, str) and value in choices:
        return value
    errors.append(FieldError(path, f"unknown {noun} {describe(value)}; expected {either(choices)}"))
    return None


def either(choices: tuple[str, ...]) -> str:
    """`a`, `a or b`, `a, b or c`."""
    if len(choices) == 1:
        return choices[0]
    return ", ".join(choices[:-1]) + " or " + choices[-1]


def text(
    value: object, path: str | None, errors: Errors, *, optional: bool = False, max_chars: int = 0
) -> str | None:
    """A non-empty string (or None when `optional`)."""
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value:
        kind = "a non-empty string or null" if optional else "a non-empty string"
        errors.append(FieldError(path, f"must be {kind}, got {describe(value)}"))
        return None
    if max_chars and len(value) > max_chars:
        errors.append(FieldError(path, f"must be at most {max_chars} characters, got {len(value)}"))
        return None
    return value
