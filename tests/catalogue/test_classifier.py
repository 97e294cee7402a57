"""Behaviour of the classifier users rely on: tier order, collisions, chunks, hints."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from catalogue import Confidence, ErrorClass, Evidence, classify, explain
from catalogue.classifier import NO_MATCH_RULE, PROSE_RULE, Catalogue
from catalogue.rules import RuleError, load_rule_file

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def stderr(text: str, **extra: object) -> Evidence:
    return Evidence.model_validate({"kind": "stderr", "text": text, **extra})


def test_message_beats_a_misleading_status() -> None:
    body = (
        '{"type":"error","error":{"type":"invalid_request_error","message":"Your credit '
        'balance is too low to access the Anthropic API."}}'
    )
    result = classify(Evidence(kind="http", http_status=400, body=body))
    assert (result.code, result.error_class) == ("quota_limited", ErrorClass.HARD)


def test_overloaded_error_inside_an_http_200_stream_is_overloaded() -> None:
    body = 'event: error\ndata: {"type":"error","error":{"type":"overloaded_error"}}'
    result = classify(Evidence(kind="http", http_status=200, body=body))
    assert result.code == "provider_overloaded"
    assert result.rule == "anthropic.body.overloaded_error.v1"


def test_transport_loss_wrapper_takes_the_inner_cause() -> None:
    text = (
        "stream disconnected before completion: Your input exceeds the context window of "
        "this model. Please adjust your input and try again."
    )
    result = explain(stderr(text))
    assert result.classification.code == "context_length_exceeded"
    assert "codex.stream_disconnected.v1" in {r.id for r in result.matched}


def test_transport_loss_wrapper_alone_is_transport_lost() -> None:
    result = classify(stderr("stream disconnected before completion: something odd"))
    assert result.code == "agent_transport_lost"


def test_status_alone_never_beats_a_wrapper() -> None:
    # A bare status cannot tell what broke inside the wrapped stream.
    result = classify(
        Evidence(
            kind="sdk_exception", http_status=500, text="Claude Code process exited with code 1"
        )
    )
    assert result.code == "agent_transport_lost"


def test_disk_quota_is_not_a_provider_quota() -> None:
    assert classify(stderr("Error: EDQUOT: disk quota exceeded, write")).code == (
        "local_runtime_error"
    )


def test_assistant_prose_mentioning_a_rate_limit_is_not_evidence() -> None:
    chunk = Evidence(
        kind="message_chunk",
        text="I hit a rate limit earlier, so I will retry. The Error: handling looks fine.",
    )
    result = classify(chunk)
    assert (result.code, result.rule) == ("unclassified", PROSE_RULE)


def test_a_chunk_that_is_itself_an_error_report_is_classified() -> None:
    chunk = Evidence(kind="message_chunk", text="API Error: 529 Overloaded. Try again later.")
    assert classify(chunk).code == "provider_overloaded"


def test_unknown_text_is_unclassified_and_keeps_a_safe_excerpt() -> None:
    result = classify(stderr("the flux capacitor misaligned (sk-ant-api03-" + "A" * 40 + ")"))
    assert result.code == "unclassified"
    assert result.rule == NO_MATCH_RULE
    assert result.error_class is ErrorClass.UNCLASSIFIED
    assert "flux capacitor" in result.safe_excerpt
    assert "A" * 20 not in result.safe_excerpt


def test_low_confidence_rules_yield_unclassified_with_their_rule_id() -> None:
    result = classify(Evidence(kind="http", http_status=404, body="not here"))
    assert result.code == "unclassified"
    assert result.confidence is Confidence.LOW
    assert result.rule == "http.status.404.v1"


def test_status_stated_in_text_is_used_when_no_field_gives_one() -> None:
    assert classify(stderr("API Error: 529 {}")).code == "provider_overloaded"
    assert classify(stderr("401 status code (no body)")).code == "auth_required"


def test_retry_after_header_becomes_the_hint() -> None:
    result = classify(
        Evidence(kind="http", http_status=429, headers={"Retry-After": "17"}, observed_at=NOW)
    )
    assert (result.code, result.retry_after_s, result.hint_source) == ("rate_limited", 17, "header")


def test_usage_limit_epoch_becomes_a_reset_time() -> None:
    result = classify(stderr("Claude AI usage limit reached|1796083200", observed_at=NOW))
    assert result.code == "quota_limited"
    assert result.reset_at == datetime(2026, 12, 1, tzinfo=UTC)


def test_hint_needs_a_reference_time() -> None:
    evidence = stderr("Rate limit reached for gpt-4o in organization org-x. Try again in 20s.")
    assert classify(evidence).retry_after_s is None
    assert classify(evidence, NOW).retry_after_s == 20


def test_codes_without_timing_carry_no_hint() -> None:
    text = (
        "Your AWS Marketplace subscription for this model cannot be completed "
        "(aws-marketplace:Subscribe). If you recently fixed this issue, try again after 5 minutes."
    )
    result = classify(stderr(text, observed_at=NOW))
    assert result.code == "subscription_required"
    assert result.retry_after_s is None


def test_provider_identity_travels_with_the_classification() -> None:
    result = classify(stderr("overloaded_error", provider="Anthropic", model="claude-x", phase="p"))
    assert (result.provider, result.model, result.phase) == ("anthropic", "claude-x", "p")


def test_unknown_provider_falls_through_to_neutral_rules() -> None:
    result = classify(stderr("429 Too Many Requests", provider="brand-new-llm-co"))
    assert result.code == "rate_limited"


def test_provider_restricted_rule_applies_only_to_its_provider() -> None:
    rules = load_rule_file(
        "t.toml",
        """
[[rule]]
id = "x.only.v1"
code = "rate_limited"
tier = "exact"
providers = ["acme"]
keys = ["zork"]
match = ['zork']
why = "test"
""",
    )
    catalogue = Catalogue(rules)
    assert catalogue.classify(stderr("zork", provider="acme")).code == "rate_limited"
    assert catalogue.classify(stderr("zork", provider="other")).code == "unclassified"


def test_exact_signature_outranks_a_neutral_one_that_also_matches() -> None:
    rules = load_rule_file(
        "t.toml",
        """
[[rule]]
id = "x.neutral.v1"
code = "rate_limited"
tier = "neutral"
keys = ["zork"]
match = ['zork']
why = "test"

[[rule]]
id = "x.exact.v1"
code = "quota_limited"
tier = "exact"
keys = ["zork"]
match = ['zork daily']
why = "test"
""",
    )
    catalogue = Catalogue(rules)
    assert catalogue.classify(stderr("zork daily")).rule == "x.exact.v1"
    assert catalogue.classify(stderr("zork")).rule == "x.neutral.v1"


@pytest.mark.parametrize(
    ("field", "value"),
    [("kind", "telepathy"), ("http_status", "abc"), ("http_status", 99), ("colour", "red")],
)
def test_bad_evidence_is_rejected_naming_the_field(field: str, value: object) -> None:
    data: dict[str, object] = {"kind": "stderr", "text": "x", field: value}
    with pytest.raises(ValueError, match=field):
        Evidence.model_validate(data)


def test_observed_at_without_a_zone_is_rejected() -> None:
    with pytest.raises(ValueError, match="time zone"):
        Evidence.model_validate({"kind": "stderr", "observed_at": "2026-11-29T12:00:00"})


def test_headers_are_case_insensitive_and_object_bodies_become_json() -> None:
    evidence = Evidence.model_validate(
        {"kind": "http", "headers": {"Retry-After": "3"}, "body": {"a": 1}}
    )
    assert evidence.header("retry-after") == "3"
    assert evidence.body == '{"a": 1}'


def test_a_chunk_error_report_keeps_its_json_body() -> None:
    chunk = Evidence(
        kind="message_chunk",
        text=(
            'Internal error: {\n  "details": "Claude Code process terminated by signal SIGKILL"\n}'
        ),
    )
    result = explain(chunk)
    assert result.classification.code == "agent_transport_lost"
    assert "sigkill" in result.subject.text


def test_prose_after_an_error_report_is_not_part_of_it() -> None:
    chunk = Evidence(
        kind="message_chunk",
        text="Error: {\n}\nI think the rate limit is fine, overloaded_error was yesterday.",
    )
    assert "rate limit" not in explain(chunk).subject.text


def test_bounded_bytes_limits_the_named_group_in_utf8_bytes() -> None:
    rules = load_rule_file(
        "t.toml",
        """
[[rule]]
id = "x.bounded.v1"
code = "rate_limited"
tier = "exact"
keys = ["zork"]
match = ['^zork: (?P<bounded>.{1,8})$']
bounded_bytes = 8
why = "test"
""",
    )
    catalogue = Catalogue(rules)
    assert catalogue.classify(stderr("zork: abcdefgh")).code == "rate_limited"
    assert catalogue.classify(stderr("zork: ééééé")).code == "unclassified"  # 10 bytes


def test_bounded_bytes_needs_the_named_group() -> None:
    with pytest.raises(RuleError, match="bounded"):
        load_rule_file(
            "t.toml",
            """
[[rule]]
id = "x.bounded.v1"
code = "rate_limited"
tier = "exact"
keys = ["zork"]
match = ['^zork: .{1,8}$']
bounded_bytes = 8
why = "test"
""",
        )
