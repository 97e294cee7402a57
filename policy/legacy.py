"""Legacy candidate rules, normalised once into a v1 document.

A legacy rules map sends codes (or the default key `on_provider_error`) to one of three
actions. `try_next` → no wait, no retry, skip; `stop` → no wait, no retry, stop;
`retry_same` → one retry after 5 s, then stop. An explicit per-code rule sets the action of
its code's whole class, whatever the key order; two different actions in one class are a
conflict. Non-provider codes, `invalid_request` and `unclassified` cannot have rules.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Final

from catalogue.codes import CODES, UNCLASSIFIED, ErrorClass
from policy._checks import Errors, choice, describe, expect_object
from policy.document import (
    POLICY_CLASSES,
    ClassPolicy,
    Outcome,
    PolicyDocument,
    RetryPolicy,
    WaitForResetPolicy,
)
from policy.errors import FieldError, PolicyError, join_path
from policy.validation import CLASS_KEYS, parse_document

DEFAULT_KEY: Final = "on_provider_error"
RETRY_SAME_INTERVAL_SECONDS: Final = 5


class LegacyAction(StrEnum):
    TRY_NEXT = "try_next"
    STOP = "stop"
    RETRY_SAME = "retry_same"


ACTIONS: Final = tuple(a.value for a in LegacyAction)
# The legacy runtime's behaviour for a candidate without rules: try the next one.
DEFAULT_ACTION: Final = LegacyAction.TRY_NEXT


def class_policy_for(action: LegacyAction) -> ClassPolicy:
    """The v1 class policy one legacy action stands for."""
    match action:
        case LegacyAction.TRY_NEXT:
            return ClassPolicy.immediately(Outcome.SKIP)
        case LegacyAction.STOP:
            return ClassPolicy.immediately(Outcome.STOP)
        case LegacyAction.RETRY_SAME:
            return ClassPolicy(
                retry=RetryPolicy(
                    enabled=True,
                    max_retries=1,
                    initial_interval_seconds=RETRY_SAME_INTERVAL_SECONDS,
                ),
                wait_for_reset=WaitForResetPolicy.disabled(),
                on_exhausted=Outcome.STOP,
            )


def is_document(data: object) -> bool:
    """A v1 document (possibly invalid) rather than legacy rules."""
    return isinstance(data, Mapping) and any(k in data for k in ("version", *CLASS_KEYS))


def normalize_policy(data: object) -> PolicyDocument:
    """One candidate's policy as a v1 document, from legacy rules (a map or a bare action)
    or from a v1 document (returned unchanged, so normalising twice changes nothing).
    Raises `PolicyError` with every problem; invalid data never yields a document."""
    if is_document(data):
        return parse_document(data)
    errors: Errors = []
    sections = check_rules(data, None, errors)
    if errors or sections is None:
        raise PolicyError(errors or [FieldError(None, "not a legacy rules map")])
    return PolicyDocument.model_validate({"version": 1, **sections})


def check_rules(data: object, path: str | None, errors: Errors) -> dict[str, ClassPolicy] | None:
    """The two class policies legacy rules stand for, recording errors under `path`."""
    if isinstance(data, str):
        data = {DEFAULT_KEY: data}
    rules = expect_object(data, path, errors)
    if rules is None:
        return None
    before = len(errors)
    default = DEFAULT_ACTION
    per_class: dict[ErrorClass, dict[str, LegacyAction]] = {c: {} for c in POLICY_CLASSES}
    for key, raw in rules.items():
        field = join_path(path, str(key))
        action = choice(raw, field, errors, ACTIONS, "action")
        if key == DEFAULT_KEY:
            if action is not None:
                default = LegacyAction(action)
            continue
        error_class = _rule_class(str(key), field, errors)
        if error_class is not None and action is not None:
            per_class[error_class][str(key)] = LegacyAction(action)
    chosen = {c: _class_action(c, per_class[c], default, path, errors) for c in POLICY_CLASSES}
    if len(errors) > before:
        return None
    return {c.value: class_policy_for(action) for c, action in chosen.items() if action}


def _rule_class(code: str, field: str | None, errors: Errors) -> ErrorClass | None:
    info = CODES.get(code)
    if code == UNCLASSIFIED:
        message = "unclassified failures always stop; they cannot have a rule"
    elif info is None:
        message = f"unknown code {describe(code)}; expected a provider error code or {DEFAULT_KEY}"
    elif not info.is_provider_error:
        message = f"{code!r} is not a provider error; it cannot have a recovery rule"
    elif info.error_class not in POLICY_CLASSES:
        message = f"{code!r} is never recovered automatically; it cannot have a rule"
    else:
        return info.error_class
    errors.append(FieldError(field, message))
    return None


def _class_action(
    error_class: ErrorClass,
    rules: dict[str, LegacyAction],
    default: LegacyAction,
    path: str | None,
    errors: Errors,
) -> LegacyAction | None:
    actions = set(rules.values())
    if len(actions) > 1:
        listed = ", ".join(f"{code} → {rules[code].value}" for code in sorted(rules))
        errors.append(
            FieldError(
                join_path(path, min(rules)),
                f"conflicting rules for {error_class.value} errors ({listed}); "
                "one class takes one action",
            )
        )
        return None
    return actions.pop() if actions else default
