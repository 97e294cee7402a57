"""The retry notice and the manual-recovery message: what they say and carry, and what they
never carry (provider text)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.errors import InvalidCommandError
from actors.routes.notices import (
    CANCEL,
    RECOVERY_KIND,
    RESUME,
    RETRY_NOTICE_KIND,
    START_FRESH,
    RecoveryFacts,
    RetryFacts,
    recovery_message,
    retry_notice,
    safe_reason,
    utc_text,
)
from catalogue.codes import CODES
from tests.actors.route_builders import T0

FACTS = RetryFacts(
    code="provider_overloaded", provider="anthropic", retry_ordinal=2, retry_max=5,
    deadline=T0 + timedelta(seconds=5), generation=3, attempt_ordinal=7,
)  # fmt: skip


def test_the_notice_says_reason_provider_ordinal_deadline_and_cancel() -> None:
    notice = retry_notice(FACTS)
    assert notice.kind == RETRY_NOTICE_KIND == "status"
    assert notice.content == (
        "Provider error on anthropic: the provider is shedding load (provider_overloaded). "
        "Automatic retry 2 of 5 at 2026-03-01 12:00:05 UTC. Select Cancel to stop retrying."
    )


def test_the_notice_metadata_is_what_a_renderer_needs() -> None:
    assert retry_notice(FACTS).metadata == {
        "retrying": True, "code": "provider_overloaded", "provider": "anthropic",
        "retry_ordinal": 2, "retry_max": 5, "deadline": "2026-03-01T12:00:05Z",
        "generation": 3, "attempt_ordinal": 7, "actions": [CANCEL],
    }  # fmt: skip


def test_the_retrying_flag_is_the_boolean_true() -> None:
    retrying = retry_notice(FACTS).metadata["retrying"]
    assert retrying is True
    assert json.loads(json.dumps(retry_notice(FACTS).metadata))["retrying"] is True


def test_a_deadline_in_another_zone_is_shown_and_stored_in_utc() -> None:
    paris = timezone(timedelta(hours=1))
    notice = retry_notice(replace(FACTS, deadline=datetime(2026, 3, 1, 13, 0, 5, tzinfo=paris)))
    assert "at 2026-03-01 12:00:05 UTC" in notice.content
    assert notice.metadata["deadline"] == "2026-03-01T12:00:05Z"
    assert utc_text(datetime(2026, 3, 1, 13, 0, 5, 999, tzinfo=paris)) == "2026-03-01 12:00:05 UTC"


def test_the_attempt_after_a_reset_is_no_numbered_retry() -> None:
    notice = retry_notice(replace(FACTS, retry_ordinal=0, retry_max=0))
    assert "Automatic retry after the provider's reset at 2026-03-01 12:00:05 UTC" in notice.content
    assert (notice.metadata["retry_ordinal"], notice.metadata["retry_max"]) == (0, 0)


def test_an_unknown_or_missing_code_shows_a_generic_reason_and_no_code() -> None:
    for code in (None, "anthropic said: sk-ant-secret overloaded"):
        notice = retry_notice(replace(FACTS, code=code))
        assert "Provider error on anthropic: the provider failed. Automatic" in notice.content
        assert notice.metadata["code"] is None
        assert "secret" not in notice.content


@pytest.mark.parametrize("code", sorted(CODES))
def test_the_reason_is_the_catalogue_summary_of_every_code(code: str) -> None:
    assert safe_reason(code) == CODES[code].summary
    assert f": {CODES[code].summary} ({code})." in retry_notice(replace(FACTS, code=code)).content


def test_a_provider_name_is_sanitised_onto_one_bounded_line() -> None:
    key = "sk-ant-api03-" + "Q7vX2mN9pL4kR8sT1wY6zB3cD5fG0hJ"
    notice = retry_notice(replace(FACTS, provider=f"acme\n\u202e{key}"))
    provider = notice.metadata["provider"]
    assert isinstance(provider, str)
    assert key[14:] not in notice.content
    assert "\n" not in provider
    assert "\u202e" not in provider
    long = retry_notice(replace(FACTS, provider="p" * 500)).metadata["provider"]
    assert isinstance(long, str)
    assert len(long) == 64
    assert retry_notice(replace(FACTS, provider=None)).metadata["provider"] == "the provider"
    assert retry_notice(replace(FACTS, provider=" \t")).metadata["provider"] == "the provider"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("retry_ordinal", -1), ("retry_ordinal", True), ("retry_max", 1.0),
        ("retry_ordinal", 6), ("generation", 0), ("attempt_ordinal", -1),
        ("deadline", datetime(2026, 3, 1, 12)),
    ],
)  # fmt: skip
def test_facts_of_the_wrong_shape_are_refused_naming_the_field(field: str, value: Any) -> None:
    with pytest.raises(InvalidCommandError) as caught:
        retry_notice(replace(FACTS, **{field: value}))
    assert caught.value.field == field


def test_the_recovery_message_offers_resume_and_start_fresh_and_is_no_notice() -> None:
    message = recovery_message(RecoveryFacts("provider_overloaded", "anthropic", 3, 7))
    assert message.kind == RECOVERY_KIND == "recovery"
    assert "retrying" not in message.metadata
    assert message.metadata == {
        "recovery": True, "code": "provider_overloaded", "provider": "anthropic",
        "generation": 3, "attempt_ordinal": 7, "actions": [RESUME, START_FRESH],
    }  # fmt: skip
    assert "Resume" in message.content
    assert "Start fresh" in message.content
    assert "cancelled" in message.content


@settings(max_examples=200, deadline=None, derandomize=True)
@given(provider=st.text(max_size=300), code=st.one_of(st.none(), st.text(max_size=40)))
def test_no_provider_text_reaches_the_notice_unsanitised(provider: str, code: str | None) -> None:
    notice = retry_notice(replace(FACTS, provider=provider, code=code))
    shown = notice.metadata["provider"]
    assert isinstance(shown, str)
    assert 1 <= len(shown) <= 64
    assert "\n" not in shown
    assert notice.metadata["code"] in (*CODES, None)
    prefix = f"Provider error on {shown}: "
    assert notice.content.startswith(prefix)
    reasons = {info.summary for info in CODES.values()} | {"the provider failed"}
    assert any(notice.content[len(prefix) :].startswith(reason) for reason in reasons)
