"""The trusted reset signals of issue 16, each format in a table of real (cited) examples.

Sources, one per format:
- Anthropic unified headers: https://github.com/lidge-jun/opencodex/pull/3809 (epoch resets,
  a drained 5-hour window answers Retry-After 7999, latest reset wins),
  https://github.com/Kilo-Org/kilocode/pull/14220 (RFC 3339 resets), out_of_credits:
  https://github.com/tombii/better-ccflare/issues/261.
- Claude Code stream-json rate_limit_event: https://github.com/desplega-ai/agent-swarm/pull/508,
  https://github.com/framework/the-framework/issues/517,
  https://github.com/handarbeit/fabrik/issues/1815 (unifiedWindows).
- Codex resets_at / resets_in_seconds: https://github.com/router-for-me/CLIProxyAPI/issues/5728;
  Codex usage headers: https://github.com/icebear0828/codex-proxy/issues/65.
- "reset after": https://github.com/router-for-me/CLIProxyAPI/issues/1702 (Gemini CLI).
- Gemini RetryInfo as a Python dict repr: https://github.com/googleapis/python-genai/pull/2114.
- Clock times with an offset: https://github.com/google-gemini/gemini-cli/issues/17088 (GMT+2),
  https://github.com/google-gemini/gemini-cli/issues/15880 (PST); zone-less "try again at
  7:58 PM": https://github.com/openai/codex/issues/43892.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from catalogue import Evidence, EvidenceKind, classify
from catalogue.timing import headers_deny_reset, parse_header_timing, parse_timing

NOW = datetime(2026, 9, 6, 10, 0, tzinfo=UTC)  # epoch 1788688800
EPOCH = 1788688800
U = "anthropic-ratelimit-unified-"


def at(seconds: float) -> datetime:
    return NOW + timedelta(seconds=seconds)


# -- Anthropic unified headers ----------------------------------------------------------------

UNIFIED_CASES: list[tuple[str, dict[str, str], datetime | None]] = [
    (
        "a rejected 5-hour window reads its reset",
        {U + "status": "rejected", U + "5h-status": "rejected", U + "5h-reset": str(EPOCH + 7999),
         U + "7d-status": "allowed", U + "7d-reset": str(EPOCH + 500000)},
        at(7999),
    ),
    (
        "with both windows rejected the latest reset wins",
        {U + "status": "rejected", U + "5h-status": "rejected", U + "5h-reset": str(EPOCH + 7200),
         U + "7d-status": "rejected", U + "7d-reset": str(EPOCH + 259200)},
        at(259200),
    ),
    (
        "an RFC 3339 window reset is read as well",
        {U + "status": "rejected", U + "5h-status": "rejected",
         U + "5h-reset": "2026-09-06T12:13:32Z"},
        datetime(2026, 9, 6, 12, 13, 32, tzinfo=UTC),
    ),
    (
        "an overall rejection with no rejected window uses the overall reset",
        {U + "status": "rejected", U + "reset": str(EPOCH + 3600)},
        at(3600),
    ),
    (
        "allowed windows are no hint, however near their reset",
        {U + "status": "allowed", U + "5h-status": "allowed", U + "5h-reset": str(EPOCH + 600),
         U + "5h-utilization": "0.42"},
        None,
    ),
    (
        "a warning is no hint",
        {U + "status": "allowed_warning", U + "7d-status": "allowed_warning",
         U + "7d-reset": str(EPOCH + 600)},
        None,
    ),
    (
        "out_of_credits with no rejected window has no reset",
        {U + "status": "rejected", U + "overage-status": "rejected",
         U + "overage-disabled-reason": "out_of_credits", U + "reset": str(EPOCH + 3600)},
        None,
    ),
]  # fmt: skip


@pytest.mark.parametrize(
    ("headers", "expected"), [c[1:] for c in UNIFIED_CASES], ids=[c[0] for c in UNIFIED_CASES]
)
def test_anthropic_unified_headers(headers: dict[str, str], expected: datetime | None) -> None:
    hint = parse_header_timing(headers, NOW)
    if expected is None:
        assert hint is None
    else:
        assert hint is not None
        assert (hint.reset_at, hint.source) == (expected, "header")


def test_out_of_credits_denies_every_hint_even_retry_after_and_the_text() -> None:
    headers = {"retry-after": "60", U + "overage-disabled-reason": "out_of_credits"}
    assert headers_deny_reset(headers)
    evidence = Evidence(
        kind=EvidenceKind.HTTP, http_status=429, provider="anthropic", headers=headers,
        body='{"type":"error","error":{"type":"rate_limit_error","message":"Please try again '
        'in 30 seconds."}}',
    )  # fmt: skip
    result = classify(evidence, NOW)
    assert (result.code, result.rule) == (
        "quota_limited",
        "anthropic.header.overage_out_of_credits.v1",
    )
    assert (result.retry_after_s, result.reset_at) == (None, None)


def test_a_rejected_window_with_out_of_credits_still_reopens_at_its_reset() -> None:
    headers = {U + "overage-disabled-reason": "out_of_credits", U + "5h-status": "rejected",
               U + "5h-reset": str(EPOCH + 7200)}  # fmt: skip
    assert not headers_deny_reset(headers)
    hint = parse_header_timing(headers, NOW)
    assert hint is not None
    assert hint.reset_at == at(7200)


def test_unified_resets_are_not_read_as_remaining_count_buckets() -> None:
    # The generic *-reset reader would have taken the allowed 7-day reset (no -remaining
    # partner counts as exhausted): unified windows are read by status only.
    headers = {"retry-after": "20", U + "7d-reset": str(EPOCH + 500000)}
    hint = parse_header_timing(headers, NOW)
    assert hint is not None
    assert hint.retry_after_s == 20


def test_a_rejected_unified_window_classifies_a_429_as_a_quota_with_its_reset() -> None:
    evidence = Evidence(
        kind=EvidenceKind.HTTP, http_status=429, provider="anthropic",
        headers={U + "status": "rejected", U + "5h-status": "rejected",
                 U + "5h-reset": str(EPOCH + 7999)},
        body='{"type":"error","error":{"type":"rate_limit_error","message":"Rate limited"}}',
    )  # fmt: skip
    result = classify(evidence, NOW)
    assert (result.code, result.error_class) == ("quota_limited", "hard")
    assert (result.reset_at, result.hint_source) == (at(7999), "header")


def test_overloaded_error_under_429_is_overload() -> None:
    evidence = Evidence(
        kind=EvidenceKind.HTTP, http_status=429, provider="anthropic",
        body='{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}',
    )  # fmt: skip
    assert classify(evidence, NOW).code == "provider_overloaded"


# -- Claude Code stream-json rate_limit_event ----------------------------------------------------


def event(info: dict[str, Any]) -> str:
    import json

    return json.dumps({"type": "rate_limit_event", "rate_limit_info": info})


EVENT_CASES: list[tuple[str, str, datetime | None]] = [
    (
        "a rejected event reads resetsAt",
        event({"status": "rejected", "resetsAt": EPOCH + 18000, "rateLimitType": "five_hour",
               "overageStatus": "rejected", "overageDisabledReason": "org_level_disabled"}),
        at(18000),
    ),
    (
        "the latest rejected window of unifiedWindows wins",
        event({"status": "rejected", "resetsAt": EPOCH + 7200, "rateLimitType": "five_hour",
               "unifiedWindows": {"five_hour": {"utilization": 1, "resetsAt": EPOCH + 7200},
                                  "seven_day": {"utilization": 1.0, "resetsAt": EPOCH + 259200}}}),
        at(259200),
    ),
    (
        "a window below 1 does not count",
        event({"status": "rejected", "resetsAt": EPOCH + 7200, "rateLimitType": "five_hour",
               "unifiedWindows": {"seven_day": {"utilization": 0.84, "resetsAt": EPOCH + 259200}}}),
        at(7200),
    ),
    (
        "an allowed event is no hint",
        event({"status": "allowed", "resetsAt": EPOCH + 600, "rateLimitType": "five_hour"}),
        None,
    ),
    (
        "an allowed_warning event is no hint",
        event({"status": "allowed_warning", "resetsAt": EPOCH + 600, "rateLimitType": "seven_day"}),
        None,
    ),
    ("a truncated event is no hint",
     '{"type":"rate_limit_event","rate_limit_info":{"status":"rej', None),
]  # fmt: skip


@pytest.mark.parametrize(
    ("text", "expected"), [c[1:] for c in EVENT_CASES], ids=[c[0] for c in EVENT_CASES]
)
def test_claude_code_rate_limit_event(text: str, expected: datetime | None) -> None:
    hint = parse_timing(f"assistant text\n{text}\n", NOW)
    if expected is None:
        assert hint is None
    else:
        assert hint is not None
        assert (hint.reset_at, hint.source) == (expected, "structured")


# -- Codex ---------------------------------------------------------------------------------------

CODEX_BODY = (
    '{"error":{"type":"usage_limit_reached","message":"The usage limit has been reached",'
    '"plan_type":"plus","resets_at":%s,"resets_in_seconds":%s}}'
)


def test_codex_resets_at_is_the_reset() -> None:
    hint = parse_timing(CODEX_BODY % (EPOCH + 604800, 604800), NOW)
    assert hint is not None
    assert (hint.reset_at, hint.source) == (at(604800), "structured")


def test_codex_resets_in_seconds_stands_in_when_resets_at_is_past() -> None:
    hint = parse_timing(CODEX_BODY % (EPOCH - 10, 3600), NOW)
    assert hint is not None
    assert (hint.retry_after_s, hint.source) == (3600, "structured")


def test_codex_resets_at_reaches_the_classification() -> None:
    evidence = Evidence(
        kind=EvidenceKind.HTTP, http_status=429, agent="codex-acp",
        body=CODEX_BODY % (EPOCH + 604800, 604800),
    )  # fmt: skip
    result = classify(evidence, NOW)
    assert (result.code, result.reset_at, result.hint_source) == (
        "quota_limited", at(604800), "structured"
    )  # fmt: skip


CODEX_HEADER_CASES: list[tuple[str, dict[str, str], datetime | None]] = [
    (
        "the exhausted primary window's reset-at",
        {"x-codex-primary-used-percent": "100", "x-codex-secondary-used-percent": "0",
         "x-codex-primary-reset-after-seconds": "471285",
         "x-codex-primary-reset-at": str(EPOCH + 471285),
         "x-codex-secondary-reset-at": ""},
        at(471285),
    ),
    (
        "reset-after-seconds when there is no reset-at",
        {"x-codex-primary-used-percent": "100", "x-codex-primary-reset-after-seconds": "9000"},
        at(9000),
    ),
    (
        "the latest of two exhausted windows",
        {"x-codex-primary-used-percent": "100", "x-codex-primary-reset-at": str(EPOCH + 3600),
         "x-codex-secondary-used-percent": "100", "x-codex-secondary-reset-at": str(EPOCH + 86400)},
        at(86400),
    ),
    (
        "no window at 100 % is no hint",
        {"x-codex-primary-used-percent": "99", "x-codex-primary-reset-at": str(EPOCH + 3600)},
        None,
    ),
]  # fmt: skip


@pytest.mark.parametrize(
    ("headers", "expected"),
    [c[1:] for c in CODEX_HEADER_CASES],
    ids=[c[0] for c in CODEX_HEADER_CASES],
)
def test_codex_usage_headers(headers: dict[str, str], expected: datetime | None) -> None:
    hint = parse_header_timing(headers, NOW)
    if expected is None:
        assert hint is None
    else:
        assert hint is not None
        assert hint.reset_at == expected


# -- text and Gemini -----------------------------------------------------------------------------

DELAY_CASES = [
    ("You have exhausted your capacity on this model. Your quota will reset after 53s.", 53),
    ("Your quota will reset after 12h34m16s.", 12 * 3600 + 34 * 60 + 16),
    ("You've hit your usage limit. Upgrade to Pro or try again in 15 hours.", 15 * 3600),
    ("quota exceeded; resets in 2h39m52s.", 2 * 3600 + 39 * 60 + 52),
]


@pytest.mark.parametrize(("text", "seconds"), DELAY_CASES)
def test_reset_after_and_try_again_in_hours(text: str, seconds: float) -> None:
    hint = parse_timing(text, NOW)
    assert hint is not None
    assert (hint.retry_after_s, hint.source) == (seconds, "text")


GEMINI_DICT = (
    "429 RESOURCE_EXHAUSTED. {'error': {'code': 429, 'message': 'You exceeded your current "
    "quota, please check your plan and billing details. Please retry in 58.934310785s.', "
    "'status': 'RESOURCE_EXHAUSTED', 'details': [{'@type': "
    "'type.googleapis.com/google.rpc.QuotaFailure', 'violations': [{'quotaMetric': "
    "'generativelanguage.googleapis.com/generate_content_free_tier_requests', 'quotaId': "
    "'GenerateRequestsPerDayPerProjectPerModel-FreeTier'}]}, {'@type': "
    "'type.googleapis.com/google.rpc.RetryInfo', 'retryDelay': '58s'}]}}"
)


def test_gemini_retry_info_as_a_python_dict_repr_is_structured() -> None:
    hint = parse_timing(GEMINI_DICT, NOW)
    assert hint is not None
    assert (hint.retry_after_s, hint.source) == (58, "structured")


def test_gemini_retry_info_beats_quota_failure_for_the_wait() -> None:
    # A per-day QuotaFailure would suggest waiting for the day; RetryInfo says 58 s.
    result = classify(
        Evidence(kind=EvidenceKind.SDK_EXCEPTION, http_status=429, text=GEMINI_DICT), NOW
    )
    assert result.code in ("quota_limited", "rate_limited")
    assert (result.retry_after_s, result.hint_source) == (58, "structured")


# -- clock times and the agent machine's zone ------------------------------------------------------

JAN = datetime(2026, 1, 20, 12, 0, tzinfo=UTC)

CLOCK_CASES = [
    ("Access resets at 8:48 PM GMT+2.", datetime(2026, 1, 20, 18, 48, tzinfo=UTC)),
    ("Access resets at 2:55 PM PST.", datetime(2026, 1, 20, 22, 55, tzinfo=UTC)),
    ("Access resets at 10:57 PM GMT-3.", datetime(2026, 1, 21, 1, 57, tzinfo=UTC)),
    ("limit reached, resets at 5:30 pm UTC+5:30", datetime(2026, 1, 21, 12, 0, tzinfo=UTC)),
]


@pytest.mark.parametrize(("text", "expected"), CLOCK_CASES)
def test_clock_times_with_an_offset_are_read(text: str, expected: datetime) -> None:
    hint = parse_timing(text, JAN)
    assert hint is not None
    assert hint.reset_at == expected


CODEX_CLOCK = "ERROR: You've hit your usage limit. ... try again at 7:58 PM."


def test_a_zone_less_clock_time_is_dropped_without_the_agents_zone() -> None:
    result = classify(Evidence(kind=EvidenceKind.STDERR, agent="codex-acp", text=CODEX_CLOCK), JAN)
    assert result.code == "quota_limited"
    assert (result.retry_after_s, result.reset_at) == (None, None)


def test_a_zone_less_clock_time_is_read_in_the_agents_zone() -> None:
    evidence = Evidence(
        kind=EvidenceKind.STDERR, agent="codex-acp", text=CODEX_CLOCK, timezone="America/New_York"
    )
    result = classify(evidence, JAN)
    # 7:58 PM in New York (EST, UTC-5) on 2026-01-20 is 00:58 UTC the next day.
    assert (result.reset_at, result.hint_source) == (
        datetime(2026, 1, 21, 0, 58, tzinfo=UTC),
        "text",
    )


def test_a_zone_named_in_the_text_beats_the_agents_zone() -> None:
    evidence = Evidence(
        kind=EvidenceKind.STDERR, agent="claude-acp", timezone="America/New_York",
        text="You've hit your session limit · resets 7:30pm (Asia/Nicosia)",
    )  # fmt: skip
    result = classify(evidence, JAN)
    assert result.reset_at == datetime(2026, 1, 20, 17, 30, tzinfo=UTC)  # EET, UTC+2


def test_a_bare_hour_is_still_no_clock_time_in_the_agents_zone() -> None:
    assert parse_timing("retry at 9", JAN, zone=UTC) is None


@pytest.mark.parametrize("zone", ["Mars/Olympus_Mons", "not a zone", ""])
def test_evidence_refuses_a_timezone_that_is_not_an_iana_zone(zone: str) -> None:
    with pytest.raises(ValidationError):
        Evidence(kind=EvidenceKind.STDERR, text="x", timezone=zone)


def test_evidence_accepts_a_zone_in_any_case() -> None:
    evidence = Evidence(kind=EvidenceKind.STDERR, text="x", timezone="europe/paris")
    assert evidence.zone() is not None


# -- delays in other languages' UI text, with English units ------------------------------------

FOREIGN_DELAYS = [
    ("限流：请在 30s 后重试", 30),
    ("请求过于频繁，请 1m30s 后再试", 90),
    ("レート制限: 30s後に再試行してください", 30),
    ("요청이 너무 많습니다. 10s 후에 다시 시도하세요", 10),
    ("Limite atteinte. Réessayez dans 45s.", 45),
    ("Límite de velocidad: inténtalo de nuevo en 20s", 20),
    ("Aguarde 40s e tente novamente", 40),
    ("Zu viele Anfragen. Bitte in 2m erneut versuchen.", 120),
    ("Слишком много запросов, повторите попытку через 15s", 15),
    # A Chinese unit where the caller is asked to retry after it (dwgx/WindsurfAPI#66).
    ("gpt-5.1 所有账号均已达速率限制，请 117 秒后重试 (request id: 2026)", 117),
    ("请求过于频繁，请在2分钟后再试", 120),
    ("额度已用尽，请 1 小时后重试", 3600),
]


@pytest.mark.parametrize(("text", "seconds"), FOREIGN_DELAYS)
def test_a_delay_in_another_languages_retry_phrase_is_read(text: str, seconds: float) -> None:
    hint = parse_timing(text, NOW)
    assert hint is not None
    assert (hint.retry_after_s, hint.source) == (seconds, "text")


@pytest.mark.parametrize(
    "text",
    [
        "将在 30s 后自动重试 (3/10)",  # the client's own retry announcement
        "正在重试，30s 后重试",
        "冷却中：剩余 30 秒",  # a unit in another script, in no request to the caller
        # A proxy's log of its own fixed retry (lbjlaq/Antigravity-Manager#1015).
        "WARN proxy::rate_limit: 检测到模型容量不足，15秒后重试",
        "将在 15 秒后自动重试",
        "模型加载耗时 30s 后完成",  # a duration with no retry phrase
    ],
)
def test_a_foreign_client_countdown_or_a_non_english_unit_is_no_hint(text: str) -> None:
    assert parse_timing(text, NOW) is None


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("Reached message rate limit for this model. Resets in: 2m27s (trace ID: 767a)", 147),
        ("All accounts temporarily rate-limited. Wait ~30s before retrying.", 30),
        ("Too many requests, please wait about 2 minutes.", 120),
    ],
)
def test_a_colon_or_an_approximation_after_the_lead_still_reads_the_delay(
    text: str, seconds: float
) -> None:
    # WindsurfAPI relays (dwgx/WindsurfAPI#11, #189) print "Resets in: 30m0s" and "Wait ~30s".
    hint = parse_timing(text, NOW)
    assert hint is not None
    assert hint.retry_after_s == seconds
