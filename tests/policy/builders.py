"""Small builders for policy tests: documents, failures and a fixed clock."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from catalogue import class_of
from policy import ClassPolicy, Failure, Outcome, PolicyDocument, RetryPolicy, WaitForResetPolicy

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def class_policy(
    *, retries: int = 0, interval: int = 0, wait: int = 0, outcome: str = "skip"
) -> ClassPolicy:
    """Retry `retries` times from `interval` s and wait up to `wait` s; 0 disables."""
    return ClassPolicy(
        retry=RetryPolicy(enabled=True, max_retries=retries, initial_interval_seconds=interval)
        if retries
        else RetryPolicy.disabled(),
        wait_for_reset=WaitForResetPolicy(enabled=True, max_wait_seconds=wait)
        if wait
        else WaitForResetPolicy.disabled(),
        on_exhausted=Outcome(outcome),
    )


def document(
    transient: ClassPolicy | None = None, hard: ClassPolicy | None = None
) -> PolicyDocument:
    default = ClassPolicy.immediately(Outcome.SKIP)
    return PolicyDocument(version=1, transient=transient or default, hard=hard or default)


def failure(code: str, error_class: str | None = None, /, **fields: Any) -> Failure:
    """A failure of `code`, its class taken from the registry unless given."""
    return Failure.model_validate(
        {"code": code, "class": error_class or class_of(code).value, **fields}
    )


def section_json(
    *, retries: int = 0, interval: int = 0, wait: int = 0, outcome: str = "skip"
) -> dict[str, Any]:
    """A class policy as JSON, as a user writes it."""
    return class_policy(retries=retries, interval=interval, wait=wait, outcome=outcome).model_dump(
        mode="json"
    )


def document_json(**sections: dict[str, Any]) -> dict[str, Any]:
    skip = section_json()
    return {
        "version": 1,
        "transient": sections.get("transient", skip),
        "hard": sections.get("hard", skip),
    }
