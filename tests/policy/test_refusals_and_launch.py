"""Safety refusals stop for manual recovery; transport losses during launch are launch-safe."""

from __future__ import annotations

import pytest

from catalogue import Evidence, EvidenceKind, classify
from policy import (
    LAUNCH_PHASE,
    LAUNCH_SAFE_CODES,
    MANUAL_RECOVERY_CODES,
    EffectSafety,
    Failure,
    Retry,
    Skip,
    Stop,
    WaitForReset,
    evaluate,
    launch_safety,
)
from tests.policy.builders import NOW, class_policy, document, failure

GENEROUS = class_policy(retries=5, interval=1, wait=3600, outcome="skip")
AUP_REFUSAL = (
    '{"type":"error","error":{"type":"invalid_request_error","message":"Output blocked by '
    'content filtering policy"}}'
)


@pytest.mark.parametrize("outcome", ["skip", "stop"])
def test_content_policy_stops_for_manual_recovery_whatever_the_policy(outcome: str) -> None:
    hard = class_policy(retries=5, interval=1, wait=3600, outcome=outcome)
    decision = evaluate(
        document(GENEROUS, hard),
        failure("content_policy", retry_after_s=10),
        now=NOW,
        safety=EffectSafety.safe(),
    )
    assert isinstance(decision, Stop)
    assert decision.reason == (
        "content_policy (hard): the provider's safety system refused this request; a refusal "
        "is never retried or routed to another candidate, so stop for manual recovery"
    )


def test_content_policy_is_the_only_code_that_always_stops() -> None:
    assert frozenset({"content_policy"}) == MANUAL_RECOVERY_CODES


def test_context_length_still_skips_to_a_candidate_with_a_larger_window() -> None:
    decision = evaluate(
        document(GENEROUS, GENEROUS),
        failure("context_length_exceeded"),
        now=NOW,
        safety=EffectSafety.safe(),
    )
    assert isinstance(decision, Skip)
    assert "repeating the same request cannot help" in decision.reason


def test_a_refusal_keeps_the_providers_reason_in_the_safe_excerpt() -> None:
    evidence = Evidence(
        kind=EvidenceKind.HTTP, http_status=400, provider="anthropic", body=AUP_REFUSAL
    )
    result = classify(evidence, NOW)
    assert result.code == "content_policy"
    assert "Output blocked by content filtering policy" in result.safe_excerpt
    decision = evaluate(
        document(GENEROUS, GENEROUS),
        Failure.from_classification(result),
        now=NOW,
        safety=EffectSafety.safe(),
    )
    assert isinstance(decision, Stop)


@pytest.mark.parametrize("code", sorted(LAUNCH_SAFE_CODES))
@pytest.mark.parametrize("phase", [LAUNCH_PHASE, "Launch", " launch "])
def test_a_transport_loss_during_launch_is_launch_safe(code: str, phase: str) -> None:
    verdict = launch_safety(phase, code)
    assert verdict is not None
    assert (verdict.same_candidate, verdict.other_candidate) == (True, True)
    assert verdict.reason == f"{code} during launch, before the prompt was delivered: launch-safe"


@pytest.mark.parametrize("phase", [None, "prompt", "turn", "launching-tools"])
def test_outside_launch_the_turn_evidence_decides(phase: str | None) -> None:
    assert launch_safety(phase, "agent_transport_lost") is None


@pytest.mark.parametrize("code", ["provider_unavailable", "rate_limited", "auth_required"])
def test_only_transport_losses_are_launch_safe(code: str) -> None:
    assert launch_safety(LAUNCH_PHASE, code) is None


def test_a_launch_transport_loss_retries_where_an_unknown_turn_would_stop() -> None:
    unknown_turn = EffectSafety.unsafe("not effect-safe: no turn evidence was recorded")
    lost = failure("agent_transport_lost")
    policy = document(class_policy(retries=2, interval=5, outcome="skip"))
    during_turn = evaluate(policy, lost, now=NOW, safety=unknown_turn)
    assert isinstance(during_turn, Stop)
    verdict = launch_safety(LAUNCH_PHASE, "agent_transport_lost")
    assert verdict is not None
    at_launch = evaluate(policy, lost, now=NOW, safety=verdict)
    assert isinstance(at_launch, Retry)
    assert not isinstance(at_launch, WaitForReset)


def test_a_launch_network_failure_may_skip_to_the_next_candidate() -> None:
    verdict = launch_safety(LAUNCH_PHASE, "network_unavailable")
    assert verdict is not None
    decision = evaluate(
        document(class_policy(outcome="skip")),
        failure("network_unavailable"),
        now=NOW,
        safety=verdict,
    )
    assert isinstance(decision, Skip)
