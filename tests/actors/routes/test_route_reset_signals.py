"""Issue 16 at the route level, through the pure route planner (no Redis, no Ray): each new
trusted reset format reaches the route's deadline; a reset that does not exist (out of
credits) is never waited for; a safety refusal stops; context length skips; a transport loss
during launch retries; attempts keep the catalogue version of their moment.

The evidence is the cited real formats of tests/catalogue/test_reset_signals.py, observed
at T0 (2026-03-01T12:00Z, epoch 1772366400).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from actors.clock import ManualClock
from actors.routes.commands import ReportFailure, Start
from catalogue import Evidence, EvidenceKind
from catalogue.classifier import Catalogue
from catalogue.rules import load_builtin_rules
from policy import Outcome
from tests.actors.route_builders import T0, in_seconds
from tests.actors.route_drivers import R, fail, fire
from tests.actors.route_scenarios import (
    MemoryRoutes,
    candidate,
    profile,
    reset_wait,
    retries,
    safe_turn,
    seed_profile,
)

EPOCH = int(T0.timestamp())
WEEK = 7 * 86400
U = "anthropic-ratelimit-unified-"
RL_BODY = '{"type":"error","error":{"type":"rate_limit_error","message":"Rate limited"}}'


def waiting_profile() -> object:
    """Both classes wait for a trusted reset of up to a week, then stop; a second
    candidate to skip to."""
    return profile(
        candidate(
            "claude",
            transient=reset_wait(WEEK, Outcome.STOP),
            hard=reset_wait(WEEK, Outcome.SKIP),
        ),
        candidate("codex"),
    )


@pytest.fixture
def routes() -> MemoryRoutes:
    routes = MemoryRoutes(ManualClock(T0))
    routes.run(R, Start(waiting_profile(), "kanban", f"inv-{R}"))  # type: ignore[arg-type]
    return routes


def http(status: int, body: str, headers: dict[str, str], **extra: str) -> Evidence:
    return Evidence(
        kind=EvidenceKind.HTTP, http_status=status, body=body, headers=headers,
        observed_at=T0, **extra,
    )  # fmt: skip


def stderr(text: str, **extra: str) -> Evidence:
    return Evidence(kind=EvidenceKind.STDERR, text=text, observed_at=T0, **extra)


RESET_SIGNALS: list[tuple[str, Evidence, datetime]] = [
    (
        "anthropic unified headers, latest rejected window",
        http(429, RL_BODY, {U + "status": "rejected", U + "5h-status": "rejected",
                            U + "5h-reset": str(EPOCH + 7200), U + "7d-status": "rejected",
                            U + "7d-reset": str(EPOCH + 259200)}, provider="anthropic"),
        in_seconds(259200),
    ),
    (
        "claude code rate_limit_event",
        stderr(json.dumps({"type": "rate_limit_event", "rate_limit_info": {
            "status": "rejected", "resetsAt": EPOCH + 18000, "rateLimitType": "five_hour"}}),
            agent="claude-acp"),
        in_seconds(18000),
    ),
    (
        "codex structured resets_at",
        http(429, '{"error":{"type":"usage_limit_reached","message":"The usage limit has been '
                  f'reached","plan_type":"plus","resets_at":{EPOCH + 86400},'
                  '"resets_in_seconds":86400}}', {}, agent="codex-acp"),
        in_seconds(86400),
    ),
    (
        "codex usage headers",
        http(429, "", {"x-codex-primary-used-percent": "100",
                       "x-codex-primary-reset-at": str(EPOCH + 471285)}, agent="codex-acp"),
        in_seconds(471285),
    ),
    (
        "reset after 12h34m16s",
        stderr("You have exhausted your capacity on this model. Your quota will reset after "
               "12h34m16s.", agent="gemini-acp", provider="google"),
        in_seconds(45256),
    ),
    (
        "try again in 15 hours",
        stderr("You've hit your usage limit. Upgrade to Pro "
               "(https://openai.com/chatgpt/pricing) or try again in 15 hours.",
               agent="codex-acp"),
        in_seconds(54000),
    ),
    (
        "gemini RetryInfo as a python dict",
        Evidence(kind=EvidenceKind.SDK_EXCEPTION, http_status=429, observed_at=T0, text=(
            "429 RESOURCE_EXHAUSTED. {'error': {'code': 429, 'message': 'You exceeded your "
            "current quota. Please retry in 58.934310785s.', 'status': 'RESOURCE_EXHAUSTED', "
            "'details': [{'@type': 'type.googleapis.com/google.rpc.QuotaFailure', "
            "'violations': [{'quotaId': 'GenerateRequestsPerDayPerProjectPerModel-FreeTier'}]}, "
            "{'@type': 'type.googleapis.com/google.rpc.RetryInfo', 'retryDelay': '58s'}]}}")),
        in_seconds(58),
    ),
    (
        "a clock time with a GMT offset",
        stderr("Usage limit reached for gemini-2.5-flash-lite. Access resets at 8:48 PM GMT+2.",
               agent="gemini-acp", provider="google"),
        datetime(2026, 3, 1, 18, 48, tzinfo=UTC),
    ),
    (
        "a zone-less clock time in the agent machine's zone",
        stderr("ERROR: You've hit your usage limit. ... try again at 9:15 AM.",
               agent="codex-acp", timezone="Asia/Tokyo"),
        datetime(2026, 3, 2, 0, 15, tzinfo=UTC),
    ),
    (
        "gemini RetryInfo as go prints a map",
        stderr("Error 429, Message: Resource has been exhausted (e.g. check quota).\nStatus: "
               "RESOURCE_EXHAUSTED,\nDetails: [map[@type:type.googleapis.com/google.rpc."
               "RetryInfo retryDelay:12s]]", provider="google"),
        in_seconds(12),
    ),
    (
        "a provider's delay relayed by its client",
        stderr("Error: Retry failed after 1 attempts: Provider requested 1800000ms wait, "
               "exceeds retry.maxDelayMs (300000ms). Original error: Cloud Code Assist API "
               'error (429): {"error":{"code":429,"message":"Resource has been exhausted '
               '(e.g. check quota).","status":"RESOURCE_EXHAUSTED"}}', provider="google"),
        in_seconds(1800),
    ),
    (
        "telegram's bare seconds after a 429",
        stderr("Workflow could not be published: Too Many Requests: retry after 35"),
        in_seconds(35),
    ),
    (
        "a model hugging face is loading, its estimated_time",
        http(503, '{"error":"Model m/x is currently loading","estimated_time":20.0}', {},
             provider="huggingface"),
        in_seconds(20),
    ),
    (
        "go's time.Time after 'retry after'",
        stderr("RateLimitError: you have exceeded the rate limit of 2000 requests. Retry after "
               "2026-03-02 03:57:26 +0000 UTC"),
        datetime(2026, 3, 2, 3, 57, 26, tzinfo=UTC),
    ),
    (
        "a chinese relay's 'please retry after n seconds'",
        http(429, '{"error":{"message":"gpt-5.1 所有账号均已达速率限制，请 117 秒后重试 '
             '(request id: 2026)","type":"upstream_error","code":"upstream_error"}}', {}),
        in_seconds(117),
    ),
    (
        "a relay's reset_seconds for its cooling credentials",
        http(429, '{"error":{"code":"model_cooldown","message":"All credentials for model '
             'coder-model are cooling down","model":"coder-model","reset_seconds":25803,'
             '"reset_time":"7h10m2s"}}', {}),
        in_seconds(25803),
    ),
]  # fmt: skip


@pytest.mark.parametrize(
    ("evidence", "deadline"),
    [c[1:] for c in RESET_SIGNALS],
    ids=[c[0] for c in RESET_SIGNALS],
)
def test_a_trusted_reset_reaches_the_routes_deadline(
    routes: MemoryRoutes, evidence: Evidence, deadline: datetime
) -> None:
    waiting = fail(routes, evidence)
    assert (waiting.state, waiting.pending_outcome) == ("waiting_for_reset", "retry_after_reset")
    assert waiting.deadline == deadline


def test_a_zone_less_clock_time_without_the_agents_zone_is_not_waited_for(
    routes: MemoryRoutes,
) -> None:
    evidence = stderr("ERROR: You've hit your usage limit. ... try again at 9:15 AM.",
                      agent="codex-acp")  # fmt: skip
    after = fail(routes, evidence)
    assert after.code == "quota_limited"
    assert (after.candidate_id, after.state) == ("codex", "active"), "hard: no reset, so skip"


def test_out_of_credits_is_never_waited_for_even_with_a_retry_after(
    routes: MemoryRoutes,
) -> None:
    evidence = http(429, RL_BODY, {"retry-after": "60", U + "overage-disabled-reason":
                                   "out_of_credits"}, provider="anthropic")  # fmt: skip
    after = fail(routes, evidence)
    assert after.code == "quota_limited"
    assert (after.candidate_id, after.state) == ("codex", "active")


def test_a_safety_refusal_stops_and_keeps_the_providers_reason(routes: MemoryRoutes) -> None:
    body = (
        '{"type":"error","error":{"type":"invalid_request_error","message":"Output blocked by '
        'content filtering policy"}}'
    )
    stopped = fail(routes, http(400, body, {}, provider="anthropic"))
    assert (stopped.state, stopped.candidate_id, stopped.code) == (
        "action_required", "claude", "content_policy"
    )  # fmt: skip
    assert stopped.reason is not None
    assert "never retried or routed to another candidate" in stopped.reason
    (record,) = [r for r in routes.histories[R] if r.code == "content_policy"]
    assert record.safe_excerpt is not None
    assert "Output blocked by content filtering policy" in record.safe_excerpt


def test_context_length_still_skips_to_the_next_candidate(routes: MemoryRoutes) -> None:
    body = (
        '{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too '
        'long: 207791 tokens > 200000 maximum"}}'
    )
    after = fail(routes, http(400, body, {}, provider="anthropic"))
    assert (after.candidate_id, after.state) == ("codex", "active")


def test_a_transport_loss_during_launch_retries_where_one_during_a_turn_stops() -> None:
    lost = "SDK query error: Error: Claude Code process exited with code 1"
    for phase, expected in (("launch", "retry_wait"), ("prompt", "action_required")):
        routes = MemoryRoutes(ManualClock(T0))
        routes.run(R, Start(seed_profile(), "kanban", f"inv-{R}"))
        evidence = Evidence(kind=EvidenceKind.SDK_EXCEPTION, text=lost, phase=phase)
        generation = routes.snapshot(R).generation
        after = routes.run(R, ReportFailure(generation, evidence, None, "kanban", f"inv-{R}"))
        assert after.code == "agent_transport_lost"
        assert after.state == expected, (phase, after.reason)


def test_attempts_keep_the_catalogue_version_of_their_moment() -> None:
    routes = MemoryRoutes(ManualClock(T0))
    chosen = profile(candidate("claude", transient=retries(5, 5, Outcome.STOP)))
    routes.run(R, Start(chosen, "kanban", f"inv-{R}"))
    overloaded = Evidence(
        kind=EvidenceKind.HTTP, http_status=529, provider="anthropic",
        body='{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}',
    )  # fmt: skip
    before, after = Catalogue(load_builtin_rules()), Catalogue(load_builtin_rules()[:-1])
    assert before.version != after.version
    for catalogue in (before, after):
        if routes.snapshot(R).state == "retry_wait":
            assert fire(routes).state == "retrying"
        report = ReportFailure(
            routes.snapshot(R).generation, catalogue.classify(overloaded, routes.clock.now()),
            safe_turn(), "kanban", f"inv-{R}",
        )  # fmt: skip
        assert routes.run(R, report).state == "retry_wait"
    decided = [r for r in routes.histories[R] if r.decision == "retry"]
    assert [r.catalogue_version for r in decided] == [before.version, after.version]
