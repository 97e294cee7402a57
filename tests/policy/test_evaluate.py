"""Evaluation order, the seed's policy scenarios and the reset-wait rules."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from catalogue import CODES, NON_PROVIDER_CODES, Evidence, EvidenceKind, classify
from policy import (
    MANUAL_RECOVERY_CODES,
    REQUEST_SCOPE_CODES,
    CycleUsage,
    Decision,
    EffectSafety,
    Failure,
    PolicyError,
    Retry,
    Skip,
    Stop,
    TurnEvidence,
    WaitForReset,
    assess_turn,
    decision_json,
    evaluate,
    evaluate_in_cycle,
    stop_for_invalid_policy,
)
from tests.policy.builders import NOW, class_policy, document, failure

SAFE = EffectSafety.safe()
RETRY_3_FROM_5 = class_policy(retries=3, interval=5, outcome="skip")


def decide(
    transient: object = None,
    hard: object = None,
    *,
    fail: Failure,
    ordinal: int = 0,
    used: bool = False,
    safety: EffectSafety = SAFE,
    now: datetime = NOW,
) -> Decision:
    return evaluate(
        document(transient, hard),  # type: ignore[arg-type]  # builders accept None
        fail,
        now=now,
        safety=safety,
        retry_ordinal=ordinal,
        reset_wait_used=used,
    )


def seconds_until(decision: Decision) -> float:
    assert isinstance(decision, Retry | WaitForReset), decision
    return (decision.deadline - NOW).total_seconds()


# -- the seed's scenarios --------------------------------------------------------------------


@pytest.mark.parametrize(("outcome", "final"), [("skip", Skip), ("stop", Stop)])
def test_capacity_error_waits_5_10_and_20_seconds_then_applies_the_exhausted_outcome(
    outcome: str, final: type[Decision]
) -> None:
    transient = class_policy(retries=3, interval=5, outcome=outcome)
    usage = CycleUsage()
    waits = []
    decision: Decision = Stop(reason="not yet evaluated")
    for _ in range(4):
        decision, usage = evaluate_in_cycle(
            document(transient), "opus", failure("model_capacity"), usage, now=NOW, safety=SAFE
        )
        if isinstance(decision, Retry):
            waits.append(seconds_until(decision))
    assert waits == [5, 10, 20]
    assert isinstance(decision, final)
    assert "all 3 retries used" in decision.reason


def test_quota_reset_one_minute_away_is_waited_for_once_within_a_five_minute_maximum() -> None:
    hard = class_policy(wait=300, outcome="stop")
    quota = failure("quota_limited", reset_at=(NOW + timedelta(minutes=1)).isoformat())
    usage = CycleUsage()
    first, usage = evaluate_in_cycle(
        document(hard=hard), "opus", quota, usage, now=NOW, safety=SAFE
    )
    assert isinstance(first, WaitForReset)
    assert first.deadline == NOW + timedelta(minutes=1)
    # The one attempt after the wait fails again with a revised hint: no second wait.
    later = NOW + timedelta(minutes=1, seconds=5)
    revised = failure("quota_limited", reset_at=(later + timedelta(minutes=1)).isoformat())
    second, _ = evaluate_in_cycle(
        document(hard=hard), "opus", revised, usage, now=later, safety=SAFE
    )
    assert isinstance(second, Stop)
    assert "already used" in second.reason


@pytest.mark.parametrize(
    ("hard", "expected"),
    [
        (class_policy(wait=300, outcome="stop"), Stop),
        (class_policy(wait=300, outcome="skip"), Skip),
        (class_policy(wait=300, retries=2, interval=60, outcome="stop"), Retry),
    ],
)
def test_a_reset_six_hours_away_is_not_shortened_to_a_five_minute_maximum(
    hard: object, expected: type[Decision]
) -> None:
    quota = failure("quota_limited", reset_at=(NOW + timedelta(hours=6)).isoformat())
    decision = decide(hard=hard, fail=quota)
    assert isinstance(decision, expected)
    assert "the reset in 6 h is beyond the 5 min maximum wait" in decision.reason
    if isinstance(decision, Retry):
        assert seconds_until(decision) == 60  # the retry delay, not a shortened reset


def test_an_exhausted_transient_budget_with_skip_moves_to_the_next_candidate() -> None:
    usage = CycleUsage()
    policy = document(class_policy(retries=1, interval=5, outcome="skip"))
    decisions = []
    for _ in range(2):
        decision, usage = evaluate_in_cycle(
            policy, "opus", failure("provider_overloaded"), usage, now=NOW, safety=SAFE
        )
        decisions.append(decision)
    assert [type(d) for d in decisions] == [Retry, Skip]
    assert usage.skipped == {"opus"}
    # The next candidate starts with its own budget in the same cycle.
    nxt, _ = evaluate_in_cycle(
        policy, "sonnet", failure("provider_overloaded"), usage, now=NOW, safety=SAFE
    )
    assert isinstance(nxt, Retry)
    assert nxt.ordinal == 1


def test_exhausted_credits_under_a_hard_stop_policy_stop_without_another_provider() -> None:
    credits = classify(
        Evidence(kind=EvidenceKind.STDERR, text="API Error: 400 Your credit balance is too low"),
        NOW,
    )
    assert credits.code == "quota_limited"
    decision = decide(hard=class_policy(outcome="stop"), fail=Failure.from_classification(credits))
    assert decision == Stop(
        reason="quota_limited (hard): retrying is disabled; stop for manual recovery"
    )


def test_an_unknown_error_string_stops_automatic_recovery() -> None:
    unknown = classify(
        Evidence(kind=EvidenceKind.STDERR, text="the flux capacitor hummed oddly"), NOW
    )
    assert unknown.code == "unclassified"
    decision = decide(RETRY_3_FROM_5, RETRY_3_FROM_5, fail=Failure.from_classification(unknown))
    assert isinstance(decision, Stop)
    assert decision.reason.startswith("unclassified failure")


@pytest.mark.parametrize(
    "transient",
    [class_policy(retries=3, interval=5), class_policy(outcome="skip"), class_policy(wait=60)],
)
def test_tool_activity_overrides_a_policy_that_says_retry_or_skip(transient: object) -> None:
    turn = TurnEvidence(
        execution_id="e",
        prompt_generation=1,
        output_observed=False,
        thoughts_observed=False,
        tool_call_started=True,
        tool_call_completed=False,
        partial_utility_result=False,
        ambiguous_delivery=False,
    )
    safety = assess_turn(turn, execution_id="e", prompt_generation=1)
    fail = failure("provider_overloaded", retry_after_s=30)
    decision = decide(transient, fail=fail, safety=safety)
    assert decision == Stop(reason="not effect-safe: a tool call started")


def test_a_matched_diagnostic_then_a_structured_error_before_output_may_proceed() -> None:
    turn = TurnEvidence(
        execution_id="e",
        prompt_generation=2,
        output_observed=True,
        matched_acp_diagnostic=True,
        thoughts_observed=False,
        tool_call_started=False,
        tool_call_completed=False,
        partial_utility_result=False,
        ambiguous_delivery=False,
    )
    safety = assess_turn(turn, execution_id="e", prompt_generation=2)
    assert isinstance(
        decide(RETRY_3_FROM_5, fail=failure("provider_overloaded"), safety=safety), Retry
    )
    progressed = turn.model_copy(update={"matched_acp_diagnostic": False})
    safety = assess_turn(progressed, execution_id="e", prompt_generation=2)
    assert isinstance(
        decide(RETRY_3_FROM_5, fail=failure("provider_overloaded"), safety=safety), Stop
    )


# -- refusals come first, in order ------------------------------------------------------------


@pytest.mark.parametrize(
    ("fail", "reason_start"),
    [
        (failure("rate_limited", stale=True), "stale failure"),
        (failure("unclassified", "unclassified"), "unclassified failure"),
        (failure("rate_limited", "unclassified"), "unclassified failure"),
        (failure("rate_limited", confidence="low"), "rate_limited: low-confidence evidence"),
        (failure("made_up", "transient"), "unknown code 'made_up'"),
        (
            failure("rate_limited", "hard"),
            "conflicting evidence: rate_limited is transient, not hard",
        ),
        (
            failure("invalid_request"),
            "invalid_request: the provider rejected the request as invalid",
        ),
    ],
)
def test_failures_no_policy_may_act_on_stop_with_the_reason(
    fail: Failure, reason_start: str
) -> None:
    decision = decide(RETRY_3_FROM_5, RETRY_3_FROM_5, fail=fail)
    assert isinstance(decision, Stop)
    assert decision.reason.startswith(reason_start)


@pytest.mark.parametrize("code", sorted(NON_PROVIDER_CODES))
def test_non_provider_errors_never_retry_or_switch(code: str) -> None:
    decision = decide(RETRY_3_FROM_5, RETRY_3_FROM_5, fail=failure(code))
    assert decision == Stop(
        reason=f"{code} is not a provider error: it never retries or switches candidates"
    )


def test_a_stale_failure_stops_before_anything_else_is_considered() -> None:
    fail = failure("made_up", "unclassified", stale=True, confidence="low")
    assert decide(fail=fail, safety=EffectSafety.unsafe("x")).reason.startswith("stale")


def test_medium_confidence_is_enough_to_act() -> None:
    assert isinstance(
        decide(RETRY_3_FROM_5, fail=failure("rate_limited", confidence="medium")), Retry
    )


# -- reset waiting -----------------------------------------------------------------------------

WAIT_5_MIN = class_policy(wait=300, retries=2, interval=7, outcome="stop")


@pytest.mark.parametrize(
    ("hint", "waits_s"),
    [
        ({"retry_after_s": 0}, None),  # due now: ignored by v1 documents
        ({"retry_after_s": 0.5}, 0.5),
        ({"retry_after_s": 1}, 1),
        ({"retry_after_s": 300}, 300),
        ({"retry_after_s": 300.001}, None),
        ({"retry_after_s": 301}, None),
        ({"reset_at": NOW.isoformat()}, None),  # at now: ignored
        ({"reset_at": (NOW - timedelta(seconds=1)).isoformat()}, None),  # in the past
        ({"reset_at": (NOW + timedelta(seconds=300)).isoformat()}, 300),
        ({"reset_at": (NOW + timedelta(seconds=301)).isoformat()}, None),
        # With both hints, the later one counts.
        ({"reset_at": (NOW + timedelta(seconds=60)).isoformat(), "retry_after_s": 120}, 120),
        ({"reset_at": (NOW + timedelta(seconds=120)).isoformat(), "retry_after_s": 60}, 120),
        ({"reset_at": (NOW - timedelta(hours=1)).isoformat(), "retry_after_s": 30}, 30),
        ({"reset_at": (NOW + timedelta(seconds=60)).isoformat(), "retry_after_s": 400}, None),
        ({}, None),
    ],
)
def test_a_reset_is_waited_for_only_when_in_the_future_and_within_the_maximum(
    hint: dict[str, object], waits_s: float | None
) -> None:
    decision = decide(WAIT_5_MIN, fail=failure("rate_limited", **hint))
    if waits_s is None:
        assert isinstance(decision, Retry)
        assert seconds_until(decision) == 7
    else:
        assert isinstance(decision, WaitForReset)
        assert seconds_until(decision) == waits_s


@pytest.mark.parametrize("max_wait", [1, 604800])
def test_the_maximum_wait_bounds_are_inclusive(max_wait: int) -> None:
    policy = class_policy(wait=max_wait)
    assert isinstance(
        decide(policy, fail=failure("rate_limited", retry_after_s=max_wait)), WaitForReset
    )
    assert isinstance(
        decide(policy, fail=failure("rate_limited", retry_after_s=max_wait + 1)), Skip
    )


def test_a_used_reset_wait_falls_through_to_retry_with_the_budget_untouched() -> None:
    decision = decide(WAIT_5_MIN, fail=failure("rate_limited", retry_after_s=30), used=True)
    assert isinstance(decision, Retry)
    assert decision.ordinal == 1
    assert "already used" in decision.reason


def test_waiting_does_not_consume_the_retry_budget() -> None:
    usage = CycleUsage()
    fail = failure("rate_limited", retry_after_s=30)
    kinds = []
    for _ in range(4):
        decision, usage = evaluate_in_cycle(
            document(WAIT_5_MIN), "a", fail, usage, now=NOW, safety=SAFE
        )
        kinds.append(type(decision))
    assert kinds == [WaitForReset, Retry, Retry, Stop]


def test_a_reset_wait_is_per_class() -> None:
    policy = document(WAIT_5_MIN, WAIT_5_MIN)
    usage = CycleUsage()
    first, usage = evaluate_in_cycle(
        policy, "a", failure("rate_limited", retry_after_s=30), usage, now=NOW, safety=SAFE
    )
    second, usage = evaluate_in_cycle(
        policy, "a", failure("quota_limited", retry_after_s=30), usage, now=NOW, safety=SAFE
    )
    assert isinstance(first, WaitForReset)
    assert isinstance(second, WaitForReset)


def test_a_far_retry_after_never_overflows_the_clock() -> None:
    decision = decide(WAIT_5_MIN, fail=failure("rate_limited", retry_after_s=1e300))
    assert isinstance(decision, Retry)


def test_deadlines_are_utc_whatever_the_zone_of_now() -> None:
    paris = NOW.astimezone(timezone(timedelta(hours=1)))
    decision = decide(RETRY_3_FROM_5, fail=failure("rate_limited"), now=paris)
    assert isinstance(decision, Retry)
    assert decision.deadline.utcoffset() == timedelta(0)
    assert decision.deadline == NOW + timedelta(seconds=5)


# -- request-scope codes and agent_transport_lost -----------------------------------------------


@pytest.mark.parametrize("code", sorted(REQUEST_SCOPE_CODES - MANUAL_RECOVERY_CODES))
@pytest.mark.parametrize(("outcome", "final"), [("skip", Skip), ("stop", Stop)])
def test_request_scope_codes_go_straight_to_the_exhausted_outcome(
    code: str, outcome: str, final: type[Decision]
) -> None:
    hard = class_policy(retries=5, interval=1, wait=3600, outcome=outcome)
    decision = decide(hard=hard, fail=failure(code, retry_after_s=10))
    assert isinstance(decision, final)
    assert "repeating the same request cannot help" in decision.reason


def test_request_scope_codes_are_exactly_context_length_and_content_policy() -> None:
    assert {"context_length_exceeded", "content_policy"} == REQUEST_SCOPE_CODES


def test_agent_transport_lost_may_retry_the_same_candidate() -> None:
    decision = decide(RETRY_3_FROM_5, fail=failure("agent_transport_lost"))
    assert isinstance(decision, Retry)


def test_agent_transport_lost_never_skips_to_another_candidate() -> None:
    decision = decide(class_policy(outcome="skip"), fail=failure("agent_transport_lost"))
    assert decision == Stop(
        reason="agent_transport_lost (transient): retrying is disabled; agent_transport_lost "
        "never authorises switching candidates, so stop"
    )


def test_a_same_candidate_only_verdict_retries_but_never_skips() -> None:
    resumable = EffectSafety(same_candidate=True, other_candidate=False, reason="resumable")
    assert isinstance(decide(RETRY_3_FROM_5, fail=failure("rate_limited"), safety=resumable), Retry)
    exhausted = decide(RETRY_3_FROM_5, fail=failure("rate_limited"), safety=resumable, ordinal=3)
    assert isinstance(exhausted, Stop)


def test_an_other_candidate_only_verdict_skips_without_retrying() -> None:
    switch_only = EffectSafety(same_candidate=False, other_candidate=True, reason="replay unsafe")
    decision = decide(
        RETRY_3_FROM_5, fail=failure("rate_limited", retry_after_s=1), safety=switch_only
    )
    assert isinstance(decision, Skip)


# -- ordinals, inputs and output ------------------------------------------------------------------


@pytest.mark.parametrize("ordinal", [*range(11), 64, 10**6, 10**18])
def test_any_ordinal_past_the_budget_goes_to_the_exhausted_outcome(ordinal: int) -> None:
    policy = class_policy(retries=10, interval=3600)
    decision = decide(policy, fail=failure("rate_limited"), ordinal=ordinal)
    if ordinal < 10:
        assert isinstance(decision, Retry)
        assert decision.ordinal == ordinal + 1
        assert seconds_until(decision) == min(3600 * 2**ordinal, 86400)
    else:
        assert isinstance(decision, Skip)


def test_a_naive_now_or_negative_ordinal_is_an_error() -> None:
    with pytest.raises(PolicyError, match="now: must be timezone-aware"):
        decide(fail=failure("rate_limited"), now=NOW.replace(tzinfo=None))
    with pytest.raises(PolicyError, match="retry_ordinal: must not be negative, got -1"):
        decide(fail=failure("rate_limited"), ordinal=-1)


def test_decision_json_reports_the_ordinal_after_the_decision() -> None:
    retry = decide(RETRY_3_FROM_5, fail=failure("rate_limited"), ordinal=1)
    assert decision_json(retry, 1) == {
        "decision": "retry",
        "deadline": "2026-11-29T12:00:10Z",
        "retry_ordinal": 2,
        "reason": "rate_limited (transient): retry 2 of 3 after 10 s",
    }
    stop = Stop(reason="x")
    assert decision_json(stop, 4) == {
        "decision": "stop",
        "deadline": None,
        "retry_ordinal": 4,
        "reason": "x",
    }


def test_invalid_stored_policy_turns_into_a_stop_naming_the_error() -> None:
    error = PolicyError.single(
        "candidates[0].rules.task_error", "'task_error' is not a provider error"
    )
    assert stop_for_invalid_policy(error).reason == (
        "policy configuration error, fix the profile: "
        "candidates[0].rules.task_error: 'task_error' is not a provider error"
    )


def test_every_provider_code_has_a_policy_path() -> None:
    for code, info in CODES.items():
        decision = decide(RETRY_3_FROM_5, RETRY_3_FROM_5, fail=failure(code))
        assert isinstance(decision, Retry | Skip | Stop), code
        if info.error_class.value == "none":
            assert isinstance(decision, Stop)
