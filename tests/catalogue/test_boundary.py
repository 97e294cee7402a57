"""A caller-built Classification is held to what the catalogue would produce."""

from __future__ import annotations

import pickle
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from catalogue import Classification, ErrorClass, Evidence, classify
from catalogue.boundary import (
    InvalidClassificationError,
    known_rule_codes,
    revalidated,
)
from catalogue.timing import MAX_HINT_SECONDS

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
SECRET = "sk-ant-api03-" + "Zq8" * 20


def genuine(**changes: Any) -> Classification:
    evidence = Evidence(
        kind="http", http_status=429, body='{"error": {"type": "rate_limit_error"}}',
        headers={"retry-after": "30"}, provider="anthropic",
    )  # fmt: skip
    found = classify(evidence, NOW)
    assert found.rule in known_rule_codes()
    return Classification.model_validate({**found.model_dump(), **changes})


def test_what_the_catalogue_produced_passes_unchanged() -> None:
    original = genuine()
    assert original.retry_after_s == 30
    assert revalidated(original, NOW) == original


def refusal(field: str, **changes: Any) -> InvalidClassificationError:
    with pytest.raises(InvalidClassificationError) as caught:
        revalidated(genuine(**changes), NOW)
    assert caught.value.field == field
    assert str(caught.value).startswith(f"classification.{field}: ")
    return caught.value


def test_an_unknown_rule_is_refused_by_name_and_value() -> None:
    error = refusal("rule", rule="made.up.v1")
    assert str(error) == "classification.rule: not a rule id of the catalogue, got 'made.up.v1'"


def test_a_refused_value_is_shown_sanitised() -> None:
    error = refusal("rule", rule=SECRET)
    assert "Zq8Zq8Zq8" not in str(error)
    assert "sk-ant-api03-[REDACTED]" in str(error)


def test_a_code_the_rule_does_not_give_is_refused() -> None:
    error = refusal("code", code="quota_limited", error_class=ErrorClass.HARD)
    assert "quota_limited" in str(error)


def test_a_class_other_than_the_codes_is_refused() -> None:
    error = refusal("error_class", error_class=ErrorClass.HARD)
    assert "'hard'" in str(error)


def test_a_retry_after_beyond_thirty_days_is_refused() -> None:
    refusal("retry_after_s", retry_after_s=MAX_HINT_SECONDS + 1)
    assert revalidated(genuine(retry_after_s=MAX_HINT_SECONDS), NOW).retry_after_s == (
        MAX_HINT_SECONDS
    )


def test_a_reset_beyond_thirty_days_or_without_a_zone_is_refused() -> None:
    refusal("reset_at", reset_at=NOW + timedelta(days=31))
    refusal("reset_at", reset_at=datetime(2025, 3, 2, 12, 0))


def test_a_reset_already_past_is_dropped_like_the_catalogue_drops_it() -> None:
    checked = revalidated(genuine(retry_after_s=None, reset_at=NOW - timedelta(seconds=1)), NOW)
    assert checked.reset_at is None
    assert checked.hint_source is None
    kept = revalidated(genuine(reset_at=NOW + timedelta(hours=1)), NOW)
    assert kept.reset_at == NOW + timedelta(hours=1)


def test_free_text_is_sanitised_again() -> None:
    checked = revalidated(
        genuine(safe_excerpt=f"401 with {SECRET}", model=f"m {SECRET}", provider="x" * 999), NOW
    )
    assert "Zq8Zq8Zq8" not in checked.safe_excerpt + (checked.model or "")
    assert checked.safe_excerpt.startswith("401 with sk-ant-api03-")
    assert checked.provider is not None
    assert len(checked.provider) == 256


def test_the_error_pickles_with_its_fields() -> None:
    error = InvalidClassificationError.of("rule", "x.v1", "not a rule id of the catalogue")
    again = pickle.loads(pickle.dumps(error))
    assert (again.field, again.value, str(again)) == (error.field, error.value, str(error))
