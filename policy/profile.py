"""Dynamic profiles from JSON: ordered candidates, each with its class policies or, for
migration only, legacy rules that are normalised on load."""

from __future__ import annotations

import re
from typing import Any, Final

from catalogue.sanitize import sanitize
from policy._checks import Errors, boolean, check_keys, describe, expect_object, text
from policy.document import (
    ACCOUNT_LABEL_PATTERN,
    MAX_CANDIDATE_ID_CHARS,
    POLICY_VERSION,
    DynamicProfile,
    PolicyDocument,
)
from policy.errors import FieldError, PolicyError, join_path
from policy.legacy import check_rules
from policy.validation import CLASS_KEYS, check_class_sections, check_version

CANDIDATE_KEYS: Final = (
    "id", "agent", "provider", "model", "account", "enabled", *CLASS_KEYS, "rules",
)  # fmt: skip
_ACCOUNT: Final = re.compile(ACCOUNT_LABEL_PATTERN)


def parse_profile(data: object) -> DynamicProfile:
    """A dynamic profile from parsed JSON, legacy rules normalised, or `PolicyError` with
    every problem. Invalid legacy data is an error like any other: it never loads."""
    errors: Errors = []
    checked = check_profile(data, errors)
    if errors or checked is None:
        raise PolicyError(errors or [FieldError(None, "not a dynamic profile")])
    return DynamicProfile.model_validate(checked)


def check_profile(data: object, errors: Errors) -> dict[str, Any] | None:
    obj = expect_object(data, None, errors)
    if obj is None:
        return None
    check_keys(
        obj, None, errors, allowed=("version", "name", "candidates"), required=("candidates",)
    )
    if "version" in obj:
        check_version(obj["version"], "version", errors)
    name = text(obj.get("name"), "name", errors, optional=True)
    raw = obj.get("candidates")
    if "candidates" in obj and (not isinstance(raw, list) or not raw):
        errors.append(FieldError("candidates", "must be a non-empty list of candidates"))
        return None
    candidates = [
        check_candidate(item, f"candidates[{i}]", errors) for i, item in enumerate(raw or [])
    ]
    _check_unique_ids(raw or [], errors)
    if any(c is None for c in candidates):
        return None
    return {"version": POLICY_VERSION, "name": name, "candidates": candidates}


def check_candidate(data: object, path: str, errors: Errors) -> dict[str, Any] | None:
    obj = expect_object(data, path, errors)
    if obj is None:
        return None
    before = len(errors)
    check_keys(obj, path, errors, allowed=CANDIDATE_KEYS, required=("id", "agent"))
    fields: dict[str, Any] = {
        "id": text(obj.get("id"), f"{path}.id", errors, max_chars=MAX_CANDIDATE_ID_CHARS)
        if "id" in obj
        else None,
        "agent": text(obj.get("agent"), f"{path}.agent", errors) if "agent" in obj else None,
        "provider": text(obj.get("provider"), f"{path}.provider", errors, optional=True),
        "model": text(obj.get("model"), f"{path}.model", errors, optional=True),
        "account": _account(obj.get("account"), f"{path}.account", errors),
        "enabled": boolean(obj["enabled"], f"{path}.enabled", errors) if "enabled" in obj else True,
    }
    sections = _candidate_sections(obj, path, errors)
    if len(errors) > before or sections is None:
        return None
    return {**fields, **sections}


def _account(value: object, path: str, errors: Errors) -> str | None:
    """A credential binding label (never the secret itself), or None."""
    label = text(value, path, errors, optional=True)
    if label is not None and not _ACCOUNT.match(label):
        shown = describe(sanitize(label))  # a label by contract, but a pasted key is redacted
        errors.append(FieldError(path, f"must match {ACCOUNT_LABEL_PATTERN}, got {shown}"))
        return None
    return label


def _candidate_sections(obj: Any, path: str, errors: Errors) -> dict[str, Any] | None:
    has_classes = any(name in obj for name in CLASS_KEYS)
    if "rules" in obj:
        if has_classes:
            errors.append(
                FieldError(
                    join_path(path, "rules"),
                    "legacy rules and class policies cannot both be given; keep transient and hard",
                )
            )
            return None
        return check_rules(obj["rules"], join_path(path, "rules"), errors)
    if not has_classes:
        default = PolicyDocument.default()
        return {"transient": default.transient, "hard": default.hard}
    return check_class_sections(obj, path, errors)


def _check_unique_ids(raw: list[Any], errors: Errors) -> None:
    first_index: dict[str, int] = {}
    for index, candidate in enumerate(raw):
        identifier = candidate.get("id") if isinstance(candidate, dict) else None
        if not isinstance(identifier, str):
            continue
        earlier = first_index.setdefault(identifier, index)
        if earlier != index:
            errors.append(
                FieldError(
                    f"candidates[{index}].id",
                    f"duplicate candidate id {identifier!r} (also candidates[{earlier}])",
                )
            )
