"""Timing hints: every supported format, every reason to drop a hint, and robustness."""

from __future__ import annotations

import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from catalogue.timing import (
    _CLIENT_WILL,
    MAX_HINT_SECONDS,
    TimingHint,
    _client_will,
    parse_header_timing,
    parse_timing,
)

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)  # a Sunday; Paris is on CET (+1)
CLAUDE_NOW = datetime(2025, 5, 26, 12, 0, tzinfo=UTC)


def at(year: int, month: int, day: int, *clock: int) -> datetime:
    """A UTC instant: at(2026, 11, 29, 12, 30) is 2026-11-29T12:30Z."""
    hour, minute, second, micro = (*clock, 0, 0, 0, 0)[:4]
    return datetime(year, month, day, hour, minute, second, micro, tzinfo=UTC)


def assert_within_bounds(hint: TimingHint | None, now: datetime) -> None:
    if hint is None:
        return
    assert (hint.retry_after_s is None) != (hint.reset_at is None)
    if hint.retry_after_s is not None:
        assert 0 <= hint.retry_after_s <= MAX_HINT_SECONDS
    else:
        assert hint.reset_at is not None
        assert hint.reset_at.utcoffset() == timedelta(0)
        assert now < hint.reset_at <= now + timedelta(seconds=MAX_HINT_SECONDS)


# --- relative delays in text -------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        # Verbatim from the real-error corpus.
        ("Please retry after 20 seconds. For improved latency reliability", 20),
        ("Rate limit is exceeded. Try again in 2 seconds.\nStatus: 429", 2),
        ("S0 pricing tier. Please retry after 86400 seconds. Please go here:", 86400),
        ("Requested 5632. Please try again in 8m45.312s. Need more tokens?", 525.312),
        ("Requested 3619. Please try again in 9m38.016s. Need more tokens%3F", 578.016),
        ("Limit: 10000 / min. Please try again in 6ms. Contact us", 0.006),
        ("Used 29937, Requested 385. Please try again in 644ms.", 0.644),
        ("limit: 4000000\\nPlease retry in 47.434392449s.", 47.434392449),
        ("Requested 3082. Please try again in 9.816s. Visit", 9.816),
        ("Upgrade to Pro or try again in 2 days 17 hours 14 minutes.", 234840),
        ("■ Upgrade to Pro or try again in 5 days 22 hours 11\nminutes.", 511860),
        # Word and Go durations.
        ("try again in 1 hour", 3600),
        ("Please wait 3 mins", 180),
        ("retry in 45 secs", 45),
        ("try again in 6m0s", 360),
        ("try again in 1h2m3s", 3723),
        ("try again in 26s", 26),
        ("wait for 10 seconds", 10),
        ("usage resets in 3 hours", 10800),
        ("try again in 1 hour and 30 minutes", 5400),
        ("Please retry after 0 seconds", 0),
        # A client relaying its provider's delay (can1357/oh-my-pi), beside its own limit.
        ("Provider requested 1800000ms wait, exceeds retry.maxDelayMs (300000ms).", 1800),
        ("upstream requested 45s delay before the next attempt", 45),
        # Telegram's Bot API 429 (a bare count of seconds), as n8n relays it.
        ("Workflow could not be published: Too Many Requests: retry after 35", 35),
        # Case and hard wrapping.
        ("TRY AGAIN IN 20 SECONDS", 20),
        ("please   try\n   again   in  2 hours,\n     30 minutes", 9000),
    ],
)
def test_relative_delay_in_text_is_read_in_seconds(text: str, seconds: float) -> None:
    hint = parse_timing(text, NOW)
    assert hint is not None
    assert hint.retry_after_s == pytest.approx(seconds)
    assert (hint.reset_at, hint.source) == (None, "text")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        # Moonshot's 429 as kimi-cli prints it, the terminal wrap splitting "again"
        # (MoonshotAI/kimi-cli#1599).
        (
            "request reached organization max RPM: 20, please try a\ngain after 1 seconds', "
            "'type': 'rate_limit_reached_error'}}",
            1.0,
        ),
        # OpenAI's TPM message inside Codex's stream-disconnected line (openai/codex#2255).
        ("Requested 19304. Please try a\ngain in 28ms. Visit https://platform.openai.com", 0.028),
        # A wrap with the next line's indentation after it, inside "retry".
        ("You exceeded your current quota. Please re\n    try in 38.5s.", 38.5),
    ],
)
def test_a_lead_phrase_split_inside_a_word_by_a_wrap_is_still_read(
    text: str, seconds: float
) -> None:
    hint = parse_timing(text, NOW)
    assert hint is not None
    assert hint.retry_after_s == pytest.approx(seconds)


@pytest.mark.parametrize(
    "text",
    [
        # A break between two words is no wrap inside one: a client's own line stays apart.
        "AnthropicException - rate limited\nRetry in 0.7 seconds.",
        "litellm.RateLimitError: Too Many Requests\n   Retry after 2.5 seconds.",
    ],
)
def test_a_client_countdown_after_a_word_and_a_break_is_still_no_hint(text: str) -> None:
    assert parse_timing(text, NOW) is None


def test_repeated_units_end_a_duration() -> None:
    hint = parse_timing("try again in " + "1 day " * 5, NOW)
    assert hint is not None
    assert hint.retry_after_s == 86400


# --- structured RetryInfo ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ('{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "26s"}', 26),
        ('{\\"@type\\": \\"RetryInfo\\",\\n \\"retryDelay\\": \\"26s\\"\\n}', 26),
        ('{"retryDelay":"0.5s"}', 0.5),
        ("retry_delay {\n  seconds: 26\n}", 26),
        # A rich-rendered traceback box puts the value on the next line
        # (llmsresearch/paperbanana#10).
        ("'RetryInfo', 'retryDelay':          │ │\n│ │               '59s'}]}})>", 59),
        ("retry_delay {\n  seconds: 26\n  nanos: 500000000\n}", 26.5),
        # As Go prints the decoded map (charmbracelet/crush).
        ("map[@type:type.googleapis.com/google.rpc.RetryInfo retryDelay:12s]]", 12),
    ],
)
def test_gemini_retry_info_is_a_structured_hint(text: str, seconds: float) -> None:
    hint = parse_timing(text, NOW)
    assert hint == TimingHint(retry_after_s=seconds, reset_at=None, source="structured")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        # Hugging Face's serverless API loading a model (huggingface/transformers#11904).
        ('{"error":"Model m/x is currently loading","estimated_time":44.49033436}', 44.49033436),
        # The same answer as LiteLLM prints it, a Python repr (BerriAI/litellm#1242).
        ("[{'error': 'Model m/x is currently loading', 'estimated_time': 20.0}]", 20.0),
        # A fraction longer than twelve digits, on a line of its own
        # (huggingface/api-inference-community#137).
        ("{'error': 'Model m/x is currently loading',\n 'estimated_time': 1809.1820068359375}",
         1809.1820068359375),
    ],
)  # fmt: skip
def test_a_model_loads_estimated_time_is_a_structured_hint(text: str, seconds: float) -> None:
    hint = parse_timing(text, NOW)
    assert hint == TimingHint(retry_after_s=seconds, reset_at=None, source="structured")


@pytest.mark.parametrize(
    "text",
    [
        '{"estimated_time": "soon"}',  # no number
        '{"estimated_time": 99999999999}',  # beyond 30 days
        '{"estimated_time_ms": 2000}',  # another field
        "the estimated_time field is 20 seconds in the docs",  # prose, no JSON member
    ],
)
def test_an_estimated_time_that_is_no_delay_is_no_hint(text: str) -> None:
    assert parse_timing(text, NOW) is None


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        # CLIProxyAPI's pool cooldown, hard-wrapped (router-for-me/CLIProxyAPI#2018).
        ('{"error":{"code":"model_cooldown","message":"All credentials for model coder-model '
         'are \n     cooling down","model":"coder-model","reset_seconds":25803,'
         '"reset_time":"7h10m2s"}}', 25803),
        ("{'code': 'model_cooldown', 'reset_seconds': 30}", 30),
    ],
)  # fmt: skip
def test_a_relays_reset_seconds_is_a_structured_hint(text: str, seconds: float) -> None:
    hint = parse_timing(text, NOW)
    assert hint == TimingHint(retry_after_s=seconds, reset_at=None, source="structured")


@pytest.mark.parametrize(
    "text", ['{"reset_seconds": "soon"}', '{"reset_seconds": 1.5}', "reset_seconds=30"]
)
def test_a_reset_seconds_that_is_no_json_count_of_seconds_is_no_hint(text: str) -> None:
    assert parse_timing(text, NOW) is None


def test_structured_hint_beats_an_earlier_text_hint() -> None:
    hint = parse_timing('Please retry in 47s. {"retryDelay": "26s"}', NOW)
    assert hint == TimingHint(retry_after_s=26, reset_at=None, source="structured")


def test_absurd_structured_hint_falls_back_to_text() -> None:
    hint = parse_timing('Please retry in 47s. {"retryDelay": "99999999s"}', NOW)
    assert hint == TimingHint(retry_after_s=47, reset_at=None, source="text")


def test_total_retry_delay_of_an_sdk_is_not_retry_info() -> None:
    assert parse_timing('$metadata: {"attempts":3,"totalRetryDelay":274}', NOW) is None


# --- absolute instants in text -----------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "epoch_now", "expected"),
    [
        ("Claude AI usage limit reached|1748268000", CLAUDE_NOW, at(2025, 5, 26, 14)),
        ("Claude AI usage limit reached|1748268000000", CLAUDE_NOW, at(2025, 5, 26, 14)),
        ("5-hour limit reached | 1748268000", CLAUDE_NOW, at(2025, 5, 26, 14)),
    ],
)
def test_claude_code_epoch_after_pipe_is_a_reset_instant(
    text: str, epoch_now: datetime, expected: datetime
) -> None:
    hint = parse_timing(text, epoch_now)
    assert hint == TimingHint(retry_after_s=None, reset_at=expected, source="text")


@pytest.mark.parametrize(
    ("text", "now", "expected"),
    [
        (
            "You've hit your session limit · resets 2:50am (Asia/Muscat)",
            NOW,
            at(2026, 11, 29, 22, 50),
        ),
        ("session limit · resets 5:20am (America/Denver)\n  /usage", NOW, at(2026, 11, 29, 12, 20)),
        ("resets 3pm (Europe/Paris)", NOW, at(2026, 11, 29, 14)),
        ("resets 11am (Europe/Paris)", NOW, at(2026, 11, 30, 10)),
        ("resets 15:00 (UTC)", NOW, at(2026, 11, 29, 15)),
        ("resets 15:00 (GMT)", NOW, at(2026, 11, 29, 15)),
        ("resets 12am (UTC)", NOW, at(2026, 11, 30, 0)),
        ("resets 12pm (UTC)", NOW, at(2026, 11, 30, 12)),  # now itself is not after now
        ("reset at 3pm (Europe/Paris)", NOW, at(2026, 11, 29, 14)),
        ("resets at 3pm (europe/paris)", NOW, at(2026, 11, 29, 14)),
        ("try again at 3:52 PM (UTC)", NOW, at(2026, 11, 29, 15, 52)),
        ("resets Dec 3, 3pm (Europe/Paris)", NOW, at(2026, 12, 3, 14)),
        ("resets Dec 3 at 3pm (Europe/Paris)", NOW, at(2026, 12, 3, 14)),
        ("resets December 25, 9:00 (America/New_York)", NOW, at(2026, 12, 25, 14)),
        ("resets Dec 1, 2026, 3pm (Europe/Paris)", NOW, at(2026, 12, 1, 14)),
        ("resets Oct 24, 3pm (Europe/Paris)", at(2026, 10, 20, 12), at(2026, 10, 24, 13)),
        ("resets Oct 24 at 3pm (Europe/Paris)", at(2026, 10, 20, 12), at(2026, 10, 24, 13)),
        ("resets Jan 2, 9am (UTC)", at(2026, 12, 20), at(2027, 1, 2, 9)),  # next year
    ],
)
def test_clock_time_with_a_zone_is_its_next_occurrence(
    text: str, now: datetime, expected: datetime
) -> None:
    hint = parse_timing(text, now)
    assert hint == TimingHint(retry_after_s=None, reset_at=expected, source="text")


@pytest.mark.parametrize(
    ("now", "expected"),
    [
        (at(2026, 3, 28, 8), at(2026, 3, 28, 14)),  # Saturday, still CET (+1)
        (at(2026, 3, 28, 20), at(2026, 3, 29, 13)),  # next 3pm is Sunday, CEST (+2)
        (at(2026, 10, 24, 20), at(2026, 10, 25, 14)),  # back to CET overnight
    ],
)
def test_clock_time_follows_daylight_saving_changes(now: datetime, expected: datetime) -> None:
    hint = parse_timing("resets 3pm (Europe/Paris)", now)
    assert hint is not None
    assert hint.reset_at == expected


def test_clock_time_in_a_daylight_saving_gap_still_gives_a_valid_hint() -> None:
    now = at(2026, 3, 28, 23)
    hint = parse_timing("resets 2:30am (Europe/Paris)", now)  # 2:30 does not exist that day
    assert hint is not None
    assert hint.reset_at is not None
    assert now < hint.reset_at < now + timedelta(hours=3)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("rate limit resets at 2026-11-29T13:00:00Z", at(2026, 11, 29, 13)),
        ("Try again at 2026-11-30T13:00:00+02:00.", at(2026, 11, 30, 11)),
        ("retry at 2026-11-29 18:30:00.250 UTC", at(2026, 11, 29, 18, 30, 0, 250000)),
        ("available at 2026-12-01T00:00:00-05:00", at(2026, 12, 1, 5)),
        ("reset at 2026-11-29T12:00:01.123456789Z", at(2026, 11, 29, 12, 0, 1, 123456)),
        # Go's time.Time as printed (sourcegraph/jetbrains#1824), after "retry after".
        (
            "rate limit of 2000 requests. Retry after 2026-11-30 03:57:26 +0000 UTC",
            at(2026, 11, 30, 3, 57, 26),
        ),
        (
            "retry after 2026-11-30 03:57:26.5 +0200 CEST m=+3600.1",
            at(2026, 11, 30, 1, 57, 26, 500000),
        ),
    ],
)
def test_iso_instant_with_an_offset_is_a_reset_instant(text: str, expected: datetime) -> None:
    hint = parse_timing(text, NOW)
    assert hint == TimingHint(retry_after_s=None, reset_at=expected, source="text")


# --- what is not a hint --------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "Retrying in 4 seconds… attempt 4/10",
        "[✻ 529 Overloaded · Retrying in 0s · attempt 5/10]",
        "⎿  API Error (Request timed out.) · Retrying in 8 seconds… (attempt 5/10)",
        '429 {"error":{"code":"429"}}\n     Retrying in 26 seconds… (attempt 5/10)',
        "ResourceExhausted: 429 Resource has been exhausted (e.g. check quota).. "
        "Retrying in 3 seconds... (Attempt 1/3)",
        "Attempt 2 failed with status 429. Retrying with backoff...",
        "will retry in 5s (attempt 2/5)",
        # aider's (backoff-era) line under the error it retries (Aider-AI/aider #861).
        'AnthropicException - {"type":"error","error":{"type":"rate_limit_error"}}\n'
        "Retry in 0.7 seconds.",
        "litellm.RateLimitError: ...\n   Retry after 2.5 seconds.",
        # What the client itself asked for or capped, not what a provider asked.
        "Client requested 30s timeout for the stream",
        "exceeds retry.maxDelayMs (300000ms)",
        # A bare number after "retry after" is read only in a 429's own words.
        "the job will retry after 3 failures",
    ],
)
def test_client_countdown_is_not_a_server_hint(text: str) -> None:
    assert parse_timing(text, NOW) is None


@pytest.mark.parametrize(
    "text",
    [
        # OmniRoute's log of its own account pool (diegosouzapw/OmniRoute#1649).
        "claude | all 1 active accounts rate limited (reset after 5s) | lastErrorCode=429.0",
        "codex | all 3 active accounts rate limited (reset after 2m) | lastErrorCode=429",
    ],
)
def test_a_relay_pool_cooldown_is_not_a_server_hint(text: str) -> None:
    """A relay pooling accounts describes its own pool's cooldown, not the provider's reset."""
    assert parse_timing(text, NOW) is None


def test_a_relay_asking_its_caller_to_wait_and_a_reset_naming_no_pool_are_read() -> None:
    # Antigravity-Manager answering its client (lbjlaq/Antigravity-Manager#766).
    asked = parse_timing("Token error: All accounts are currently limited. Please wait 8s.", NOW)
    assert asked == TimingHint(retry_after_s=8.0, reset_at=None, source="text")
    hint = parse_timing("You have used all of your requests; your quota will reset after 53s.", NOW)
    assert hint == TimingHint(retry_after_s=53.0, reset_at=None, source="text")
    line = parse_timing("all 2 accounts rate limited\nyour limit resets in 38s", NOW)
    assert line == TimingHint(retry_after_s=38.0, reset_at=None, source="text")


# SDK retry logs: the client names its own function or request, then its own backoff.
SDK_RETRY_LOGS = [
    # tenacity, as LangChain's *_with_retry wrappers log it (assafelovic/gpt-researcher#518).
    "Retrying langchain_google_genai.chat_models._achat_with_retry.<locals>._achat_with_retry "
    "in 2.0 seconds as it raised ResourceExhausted: 429 Resource has been exhausted "
    "(e.g. check quota)..",
    "Retrying langchain.chat_models.openai.ChatOpenAI.completion_with_retry.<locals>."
    "_completion_with_retry in 4.0 seconds as it raised RateLimitError: Rate limit reached "
    "for default-gpt-3.5-turbo in organization org-XXXX on requests per min. Limit: 3 / min.",
    "WARNING:tenacity:Retrying __main__.call_with_retry in 8.0 seconds as it raised "
    "RateLimitError: Error code: 429.",
    "Finished call to 'app.llm.ask_with_retry' after 12.503(s), this was the 3rd time calling it.",
    # openai-python's and anthropic-sdk-python's shared base client.
    "INFO:openai._base_client:Retrying request to /chat/completions in 0.942000 seconds",
    "INFO:anthropic._base_client:Retrying request to /v1/messages in 0.812345 seconds",
    # the backoff library's on_backoff log.
    "Backing off call_api(...) for 1.2s (openai.error.RateLimitError: Rate limit reached)",
    "Backing off _request(...) for 0.8s (requests.exceptions.HTTPError: 429 Client Error)",
    # a client announcing its own retry.
    "Request failed with 429; will retry in 10s",
    "rate limited, going to retry in 30 seconds",
]


@pytest.mark.parametrize("text", SDK_RETRY_LOGS)
def test_sdk_retry_log_is_not_a_server_hint(text: str) -> None:
    assert parse_timing(text, NOW) is None


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        # The server's own delay inside the exception tenacity or backoff reports.
        (SDK_RETRY_LOGS[1] + " Please try again in 20s.", 20.0),
        (
            SDK_RETRY_LOGS[4] + "\nopenai.RateLimitError: Error code: 429 - {'error': {'message': "
            "'Rate limit reached for gpt-4o on tokens per min (TPM): Limit 30000, Used 29000, "
            "Requested 2000. Please try again in 2s.'}}",
            2.0,
        ),
        ("Backing off call_api(...) for 1.2s (RateLimitError: Please try again in 7.2s.)", 7.2),
        ("429 Too Many Requests: retry after 30 seconds", 30.0),
        ("You exceeded your current quota. Please retry in 38.5s.", 38.5),
    ],
)
def test_server_hint_inside_an_sdk_retry_log_still_counts(text: str, seconds: float) -> None:
    hint = parse_timing(text, NOW)
    assert hint is not None
    assert hint.retry_after_s == seconds


@pytest.mark.parametrize(
    "text",
    [
        'Please retry in 47.4s." ... Retrying in 3 seconds (attempt 1/3)',
        "Retrying in 3 seconds (attempt 1/3): 429 Please retry in 47.4s.",
        "429 RESOURCE_EXHAUSTED\nPlease retry in 47.4s.",
    ],
)
def test_server_hint_beside_a_client_countdown_still_counts(text: str) -> None:
    hint = parse_timing(text, NOW)
    assert hint == TimingHint(retry_after_s=47.4, reset_at=None, source="text")


@pytest.mark.parametrize(
    "text",
    [
        "5-hour limit reached ∙ resets 3pm",
        "Opus weekly limit reached ∙ resets Oct 24",
        "Upgrade your plan to continue, or try again at 10 de jul. de 2026, 11:52.",
        "try again at 3:52 PM",
        "resets Oct 24 (Europe/Paris)",
        "resets 3 (UTC)",
    ],
)
def test_clock_time_without_a_zone_or_a_time_is_no_hint(text: str) -> None:
    assert parse_timing(text, NOW) is None


@pytest.mark.parametrize(
    "text",
    [
        "resets 3pm (Mars/Olympus)",
        "resets 3pm (Europe/Pariss)",
        "resets 3pm (../../etc/passwd)",
        "resets 3pm (localtime)",
    ],
)
def test_unknown_zone_is_no_hint(text: str) -> None:
    assert parse_timing(text, NOW) is None


@pytest.mark.parametrize(
    "text",
    [
        "resets Feb 30, 3pm (UTC)",
        "resets 25:00 (UTC)",
        "resets 13pm (UTC)",
        "resets 0am (UTC)",
        "resets 3:75 (UTC)",
        "resets Dec 1, 2025, 3pm (UTC)",  # past
        "resets Dec 31, 9999, 11pm (America/Denver)",  # beyond datetime's range in UTC
        "resets at 2026-02-30T13:00:00Z",
        "resets at 2026-11-29T25:00:00Z",
        "resets at 2026-11-29T13:00:00+99:00",
        "resets at 2026-11-29T13:00:00",  # no zone: not an instant
        "Claude AI usage limit reached|123",
        "Claude AI usage limit reached|99999999999999999",
        "usage limit reached|1748268000.5",
    ],
)
def test_invalid_date_or_time_is_no_hint(text: str) -> None:
    assert parse_timing(text, NOW) is None


@pytest.mark.parametrize(
    "text",
    [
        "",
        "try again later",
        "The model is overloaded. Please try \n  again later.",
        "Please wait a moment before trying again.",
        "try again in a few minutes",
        "await 5 seconds",
        "wait 2 more minutes",
        "retry after 5 attempts",
        "Please modify your prompt and retry.",
        "upstream connect error or disconnect/reset before headers. reset reason: overflow",
        "Failed to connect to api.anthropic.com: ECONNRESET",
        "If you recently fixed this issue, try again after 5 minutes.",
        "x-ratelimit-remaining-tokens: 29996\nx-ratelimit-reset-tokens: 8ms",
    ],
)
def test_text_without_a_timing_hint_gives_none(text: str) -> None:
    assert parse_timing(text, NOW) is None


@pytest.mark.parametrize(
    "text",
    [
        "try again in 31 days",
        "try again in 30 days 1 second",
        "try again in 999999999999 days",
        "resets at 2026-11-29T11:00:00Z",  # past
        "resets at 2026-11-29T12:00:00Z",  # now is not after now
        "resets at 2026-12-29T12:00:01Z",  # 30 days and a second
        "Claude AI usage limit reached|1748268000",  # 2025, before NOW
        "resets Jan 2, 9am (UTC)",  # 34 days away
    ],
)
def test_past_or_absurdly_far_hint_is_dropped(text: str) -> None:
    assert parse_timing(text, NOW) is None


def test_thirty_days_exactly_is_still_a_hint() -> None:
    relative = parse_timing("try again in 30 days", NOW)
    absolute = parse_timing("resets at 2026-12-29T12:00:00Z", NOW)
    assert relative == TimingHint(retry_after_s=MAX_HINT_SECONDS, reset_at=None, source="text")
    assert absolute == TimingHint(retry_after_s=None, reset_at=at(2026, 12, 29, 12), source="text")


# --- several hints -------------------------------------------------------------------------


EPOCH = datetime.fromtimestamp(1796000000, UTC)  # 2026-11-30T00:53:20Z


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("try again in 5 seconds, or wait 10 seconds", TimingHint(10, None, "text")),
        ("try again in 10 seconds, or wait 5 seconds", TimingHint(10, None, "text")),
        (
            "resets 3pm (UTC); try again in 5 seconds",
            TimingHint(None, at(2026, 11, 29, 15), "text"),
        ),
        (
            "try again in 5 seconds; resets 3pm (UTC)",
            TimingHint(None, at(2026, 11, 29, 15), "text"),
        ),
        ("resets 3pm (UTC) or limit reached|1796000000", TimingHint(None, EPOCH, "text")),
        ("limit reached|1796000000 or resets 3pm (UTC)", TimingHint(None, EPOCH, "text")),
        # An equal instant: the first stated stands, in its own form.
        ("try again in 3 hours, or resets 3pm (UTC)", TimingHint(10800, None, "text")),
        (
            "resets 3pm (UTC), or try again in 3 hours",
            TimingHint(None, at(2026, 11, 29, 15), "text"),
        ),
    ],
)
def test_the_latest_trusted_text_reset_wins(text: str, expected: TimingHint) -> None:
    assert parse_timing(text, NOW) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # More than 30 days away: dropped, so the nearer statement stands.
        ("try again in 40 days, or retry in 5 seconds", TimingHint(5, None, "text")),
        # A client countdown is the agent's own backoff, never a reset.
        (
            "try again in 20 seconds. Retrying in 10 minutes (attempt 2/5)",
            TimingHint(20, None, "text"),
        ),
        # A clock time without a zone names no instant.
        ("try again in 20 seconds; resets 11pm", TimingHint(20, None, "text")),
        # An instant already past is no reset.
        (
            "resets 2026-11-29T11:00:00Z; try again in 20 seconds",
            TimingHint(20, None, "text"),
        ),
    ],
)
def test_an_untrusted_later_statement_takes_no_part(text: str, expected: TimingHint) -> None:
    assert parse_timing(text, NOW) == expected


# --- headers -------------------------------------------------------------------------------

NOW_S = int(NOW.timestamp())


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "30"}, TimingHint(30, None, "header")),
        ({"Retry-After": " 1.5 "}, TimingHint(1.5, None, "header")),
        (
            {"retry-after": "Wed, 02 Dec 2026 07:28:00 GMT"},
            TimingHint(None, at(2026, 12, 2, 7, 28), "header"),
        ),
        ({"retry-after-ms": "1500"}, TimingHint(1.5, None, "header")),
        ({"retry-after-ms": "250", "retry-after": "1"}, TimingHint(0.25, None, "header")),
        ({"retry-after-ms": "junk", "retry-after": "7"}, TimingHint(7, None, "header")),
        ({"retry-after": "7", "x-ratelimit-reset-tokens": "1m"}, TimingHint(7, None, "header")),
        ({"x-ratelimit-reset-requests": "6m0s"}, TimingHint(360, None, "header")),
        ({"x-ratelimit-reset-tokens": "120ms"}, TimingHint(0.12, None, "header")),
        ({"x-ratelimit-reset-tokens": "1s"}, TimingHint(1, None, "header")),
        ({"x-ratelimit-reset-tokens": "7.66s"}, TimingHint(7.66, None, "header")),
        ({"X-RateLimit-Reset-Tokens": "2s"}, TimingHint(2, None, "header")),
        ({"x-rate-limit-reset-tokens": "55"}, TimingHint(55, None, "header")),
        ({"x-rate-limit-reset-requests": "55"}, TimingHint(55, None, "header")),
        ({"x-ratelimit-reset": "55"}, TimingHint(55, None, "header")),
        (
            {"x-ratelimit-reset": str(NOW_S + 60)},
            TimingHint(None, at(2026, 11, 29, 12, 1), "header"),
        ),
        (
            {"x-ratelimit-reset": str(NOW_S * 1000 + 5000)},
            TimingHint(None, at(2026, 11, 29, 12, 0, 5), "header"),
        ),
        (
            {"anthropic-ratelimit-tokens-reset": "2026-11-29T12:00:30Z"},
            TimingHint(None, at(2026, 11, 29, 12, 0, 30), "header"),
        ),
        (
            {"anthropic-ratelimit-output-tokens-reset": "2026-11-29T13:00:30+01:00"},
            TimingHint(None, at(2026, 11, 29, 12, 0, 30), "header"),
        ),
    ],
)
def test_header_timing_is_read(headers: dict[str, str], expected: TimingHint) -> None:
    assert parse_header_timing(headers, NOW) == expected


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        # No remaining counts: every bucket counts and the latest reset wins.
        (
            {"x-ratelimit-reset-requests": "6m0s", "x-ratelimit-reset-tokens": "7.66s"},
            TimingHint(360, None, "header"),
        ),
        # Only exhausted buckets count.
        (
            {
                "x-ratelimit-remaining-requests": "10",
                "x-ratelimit-reset-requests": "6m0s",
                "x-ratelimit-remaining-tokens": "0",
                "x-ratelimit-reset-tokens": "7.66s",
            },
            TimingHint(7.66, None, "header"),
        ),
        (
            {
                "anthropic-ratelimit-requests-remaining": "0",
                "anthropic-ratelimit-requests-reset": "2026-11-29T12:00:30Z",
                "anthropic-ratelimit-tokens-remaining": "5000",
                "anthropic-ratelimit-tokens-reset": "2026-11-29T12:05:00Z",
                "anthropic-ratelimit-input-tokens-remaining": "0",
                "anthropic-ratelimit-input-tokens-reset": "2026-11-29T12:01:00Z",
            },
            TimingHint(None, at(2026, 11, 29, 12, 1), "header"),
        ),
        # Mixed forms compare as instants; the winner keeps its own form.
        (
            {
                "x-ratelimit-reset-requests": "6m0s",
                "anthropic-ratelimit-tokens-reset": "2026-11-29T12:10:00Z",
            },
            TimingHint(None, at(2026, 11, 29, 12, 10), "header"),
        ),
        (
            {
                "x-ratelimit-reset-requests": "20m",
                "anthropic-ratelimit-tokens-reset": "2026-11-29T12:10:00Z",
            },
            TimingHint(1200, None, "header"),
        ),
        # A past or garbage bucket is skipped, not fatal.
        (
            {"x-ratelimit-reset": "1000000000", "x-ratelimit-reset-tokens": "3s"},
            TimingHint(3, None, "header"),
        ),
    ],
)
def test_latest_reset_of_exhausted_buckets_wins(
    headers: dict[str, str], expected: TimingHint
) -> None:
    assert parse_header_timing(headers, NOW) == expected


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"content-type": "application/json"},
        {"retry-after": "soon"},
        {"retry-after": "-5"},
        {"retry-after": "1e9"},
        {"retry-after": "nan"},
        {"retry-after": "inf"},
        {"retry-after": "3000000"},  # more than 30 days
        {"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"},  # past
        {"retry-after": "Mon, 30 Feb 2026 07:28:00 GMT"},
        {"retry-after-ms": "-1"},
        {"x-ratelimit-reset": "1000000000"},  # an epoch in 2001
        {"x-ratelimit-reset-tokens": "soon"},
        {"anthropic-ratelimit-tokens-reset": "not a date"},
        {"anthropic-ratelimit-tokens-reset": "2026-11-29T13:00:00"},  # no zone
        {"x-ratelimit-reset-tokens": "0"},  # a zero reset names no reset
        {"x-ratelimit-reset-requests": "0s"},
        # Azure OpenAI's placeholders on a 429 without retry-after (openai-dotnet issue 838).
        {
            "x-ratelimit-limit-tokens": "-1",
            "x-ratelimit-remaining-tokens": "-1",
            "x-ratelimit-reset-tokens": "0",
        },
        # Open WebUI sample: buckets with requests left are not limiting.
        {
            "x-ratelimit-remaining-requests": "499",
            "x-ratelimit-remaining-tokens": "29996",
            "x-ratelimit-reset-requests": "120ms",
            "x-ratelimit-reset-tokens": "8ms",
        },
    ],
)
def test_headers_without_a_usable_hint_give_none(headers: dict[str, str]) -> None:
    assert parse_header_timing(headers, NOW) is None


# --- robustness ----------------------------------------------------------------------------

_SOUP = st.lists(
    st.sampled_from(
        [
            "try again in ",
            "retry after ",
            "Retrying in ",
            "wait ",
            "resets ",
            "reset at ",
            "try again at ",
            "available at ",
            "limit reached|",
            "1748268000",
            "1796000000000",
            "5",
            "22",
            "3:52",
            "47.434",
            ".",
            ",",
            " and ",
            "days ",
            "hours",
            "h",
            "m",
            "s",
            "ms",
            "min",
            "pm",
            "am",
            " (Europe/Paris)",
            " (UTC)",
            "(",
            ")",
            "Oct 24",
            "Feb 30",
            "2026-11-29T13:00:00Z",
            "+02:00",
            "\n",
            "  ",
            "attempt 1/3",
            '"retryDelay": "',
            '\\"',
            "26s",
            "retry_delay { seconds: ",
            "}",
            "|",
            "9" * 20,
            "é",
            "İ",
        ]
    ),
    max_size=30,
).map("".join)
_NOWS = st.datetimes(
    min_value=datetime(1971, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)
)


@given(text=st.text(), now=_NOWS)
def test_parse_timing_never_raises_on_arbitrary_text(text: str, now: datetime) -> None:
    assert_within_bounds(parse_timing(text, now), now)


@settings(max_examples=500)
@given(text=_SOUP, now=_NOWS)
def test_any_hint_from_hint_like_text_is_within_bounds(text: str, now: datetime) -> None:
    assert_within_bounds(parse_timing(text, now), now)


_HEADER_NAMES = st.sampled_from(
    [
        "retry-after",
        "Retry-After-Ms",
        "x-ratelimit-reset",
        "x-ratelimit-reset-tokens",
        "x-ratelimit-remaining-tokens",
        "x-rate-limit-reset-requests",
        "anthropic-ratelimit-tokens-reset",
        "anthropic-ratelimit-tokens-remaining",
    ]
)
_HEADER_VALUES = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["0", "1", "6m0s", "120ms", "1.5", "2026-11-29T12:00:30Z", "1796000000"]),
    st.integers(min_value=0, max_value=10**20).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(str),
)


@given(
    headers=st.dictionaries(st.one_of(_HEADER_NAMES, st.text(max_size=30)), _HEADER_VALUES),
    now=_NOWS,
)
def test_parse_header_timing_never_raises_and_stays_in_bounds(
    headers: dict[str, str], now: datetime
) -> None:
    assert_within_bounds(parse_header_timing(headers, now), now)


_ADVERSARIAL_TEXTS = [
    "try again in " + "1 day " * 10000,
    "9" * 100000,
    "resets " * 50000,
    "wait " * 50000,
    "tryretry" * 30000,
    "re" * 50000 + "try",
    "try again in " + " " * 100000 + "x",
    "try again in " + "1," * 50000,
    "retry in 1 and " * 30000,
    "resets Oct 24" + " " * 100000 + "x",
    "resets 3" + " " * 100000 + "pm",
    "resets 3pm " + " " * 100000 + "(",
    "resets 3pm (" + "a" * 100000 + ")",
    "try again at " + "a/" * 50000,
    "resets (" * 30000,
    "(" * 100000 + ":",
    "limit reached|" + "9" * 100000,
    "limit reached" + " " * 100000 + "|",
    '"retryDelay": "' + "9" * 100000,
    "retry_delay {" + " " * 100000,
    "resets at 2026-11-29T13:00:00." + "0" * 100000,
    "try again in 1" + "." * 100000,
]


@pytest.mark.parametrize("text", _ADVERSARIAL_TEXTS, ids=lambda text: repr(text[:24]))
def test_adversarial_text_is_parsed_in_linear_time(text: str) -> None:
    started = time.perf_counter()
    hint = parse_timing(text, NOW)
    assert time.perf_counter() - started < 2  # guards against catastrophic backtracking
    assert_within_bounds(hint, NOW)


@pytest.mark.parametrize(
    "headers",
    [
        {"retry-after": "9" * 100000},
        {"retry-after": "Wed, " * 20000},
        {"x-ratelimit-reset": "1" * 100000},
        {"x-ratelimit-reset-tokens": "1h" * 50000},
        {"x-ratelimit-reset" + "-a" * 50000: "1s"},
        {"anthropic-ratelimit-" + "a-" * 50000 + "reset": "1s"},
    ],
    ids=lambda headers: repr(next(iter(headers.items())))[:40],
)
def test_adversarial_headers_are_parsed_in_linear_time(headers: dict[str, str]) -> None:
    started = time.perf_counter()
    hint = parse_header_timing(headers, NOW)
    assert time.perf_counter() - started < 2
    assert_within_bounds(hint, NOW)


def test_timing_module_stays_pure() -> None:
    code = (
        "import sys, catalogue.timing\n"
        "loaded = {'ray', 'redis', 'rq'} & set(sys.modules)\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    package = Path(__file__).parents[2] / "catalogue"
    for name in ("timing.py", "_durations.py"):
        source = (package / name).read_text(encoding="utf-8")
        for forbidden in ("import time", "import random", ".now(", "utcnow", "time.time"):
            assert forbidden not in source, (name, forbidden)


# Words a client's "will" is made of and others around them, in any order.
_WILL_WORDS = ["will", "'ll", "we'll", "going to", "shall", "ll", "automatically", "x", "\n"]


@given(st.lists(st.sampled_from(_WILL_WORDS), max_size=8), st.integers(0, 6))
def test_a_clients_will_is_found_as_its_pattern_finds_it(words: list[str], back: int) -> None:
    # The substring pre-check never hides a match of the pattern in the window: at the
    # lead ("retry") and a few characters before it.
    prefix = "".join(f"{word} " for word in words)
    t = prefix + "retry in 5s"
    start = max(0, len(prefix) - back)
    expected = _CLIENT_WILL.search(t, max(0, start - 24), start) is not None
    assert _client_will(t, start) == expected


def test_a_will_cut_from_a_longer_word_by_the_window_is_no_clients_will() -> None:
    # The window starts inside "awill": its "will" opens with no word boundary in the text.
    t = "awill" + " " * 20 + "retry in 5s"
    assert not _client_will(t, t.index("retry"))
    said = "we will" + " " * 10 + "retry in 5s"
    assert _client_will(said, said.index("retry"))
