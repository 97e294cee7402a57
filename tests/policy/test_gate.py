"""The effect-safety gate: only a known, current, no-output, no-tool turn is safe."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from policy import EffectSafety, ResumableRetry, TurnEvidence, assess_turn

EXECUTION = "exec-1"
GENERATION = 4
CLEAN: dict[str, Any] = {
    "execution_id": EXECUTION,
    "prompt_generation": GENERATION,
    "provider_session_id": "sess-9",
    "output_observed": False,
    "thoughts_observed": False,
    "tool_call_started": False,
    "tool_call_completed": False,
    "partial_utility_result": False,
    "ambiguous_delivery": False,
}
GUARANTEE = ResumableRetry(provider_session_id="sess-9", prompt_generation=GENERATION)


def assess(thoughts_block_replay: bool = True, **changes: Any) -> EffectSafety:
    evidence = TurnEvidence.model_validate({**CLEAN, **changes})
    return assess_turn(
        evidence,
        execution_id=EXECUTION,
        prompt_generation=GENERATION,
        thoughts_block_replay=thoughts_block_replay,
    )


def test_a_known_current_turn_without_output_or_tools_is_safe() -> None:
    assert assess() == EffectSafety.safe()


def test_a_turn_that_failed_before_any_output_is_the_clean_turn() -> None:
    turn = TurnEvidence.before_any_output(
        execution_id=EXECUTION, prompt_generation=GENERATION, provider_session_id="sess-9"
    )
    assert turn == TurnEvidence.model_validate(CLEAN)
    verdict = assess_turn(turn, execution_id=EXECUTION, prompt_generation=GENERATION)
    assert verdict == EffectSafety.safe()


def test_missing_evidence_is_unsafe() -> None:
    verdict = assess_turn(None, execution_id=EXECUTION, prompt_generation=GENERATION)
    assert verdict == EffectSafety.unsafe("not effect-safe: no turn evidence was recorded")


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"output_observed": True}, "assistant output was observed"),
        ({"thoughts_observed": True}, "assistant thoughts were observed"),
        ({"tool_call_started": True}, "a tool call started"),
        ({"tool_call_completed": True}, "a tool call completed"),
        ({"partial_utility_result": True}, "a partial utility result was produced"),
        ({"ambiguous_delivery": True}, "prompt delivery is ambiguous"),
        (
            {"execution_id": "exec-0"},
            "turn evidence is for execution 'exec-0', not the current 'exec-1'",
        ),
        ({"prompt_generation": 3}, "turn evidence is for prompt generation 3, not the current 4"),
        ({"execution_id": None}, "turn evidence has no execution id"),
        ({"prompt_generation": None}, "turn evidence has no prompt generation"),
        (
            {"output_observed": None},
            "turn evidence does not record whether assistant output appeared",
        ),
        ({"thoughts_observed": None}, "turn evidence does not record whether thoughts appeared"),
        ({"tool_call_started": None}, "turn evidence does not record whether a tool call started"),
        (
            {"partial_utility_result": None},
            "turn evidence does not record whether a partial utility result was produced",
        ),
        (
            {"ambiguous_delivery": None},
            "turn evidence does not record whether prompt delivery is ambiguous",
        ),
    ],
)
def test_each_unsafe_or_unknown_observation_fails_closed(
    changes: dict[str, Any], reason: str
) -> None:
    assert assess(**changes) == EffectSafety.unsafe(f"not effect-safe: {reason}")


def test_the_cursor_incident_with_thoughts_and_a_tool_call_in_flight_is_unsafe() -> None:
    verdict = assess(thoughts_observed=True, tool_call_started=True)
    assert not verdict.same_candidate
    assert not verdict.other_candidate


def test_thoughts_are_ignored_only_when_the_replay_does_not_resend_the_prompt() -> None:
    assert assess(thoughts_block_replay=False, thoughts_observed=True) == EffectSafety.safe()
    assert assess(thoughts_block_replay=False, thoughts_observed=None) == EffectSafety.safe()


def test_a_matched_acp_diagnostic_is_not_assistant_output() -> None:
    assert assess(output_observed=True, matched_acp_diagnostic=True) == EffectSafety.safe()


def test_a_matched_diagnostic_does_not_excuse_tool_activity_or_unknown_output() -> None:
    assert not assess(matched_acp_diagnostic=True, tool_call_started=True).same_candidate
    assert not assess(matched_acp_diagnostic=True, output_observed=None).same_candidate


@pytest.mark.parametrize(
    "changes",
    [{"output_observed": True}, {"thoughts_observed": True}, {"ambiguous_delivery": True}],
)
def test_a_resumable_retry_guarantee_allows_the_same_candidate_only(
    changes: dict[str, Any],
) -> None:
    verdict = assess(resumable_retry=GUARANTEE, **changes)
    assert verdict.same_candidate
    assert not verdict.other_candidate
    assert "resumable retry of session 'sess-9' generation 4" in verdict.reason


@pytest.mark.parametrize(
    "guarantee",
    [
        ResumableRetry(provider_session_id="other", prompt_generation=GENERATION),
        ResumableRetry(provider_session_id="sess-9", prompt_generation=GENERATION - 1),
    ],
)
def test_a_guarantee_for_another_session_or_generation_does_not_count(
    guarantee: ResumableRetry,
) -> None:
    assert not assess(output_observed=True, resumable_retry=guarantee).same_candidate


def test_a_guarantee_never_excuses_tool_activity_or_partial_results() -> None:
    assert not assess(resumable_retry=GUARANTEE, tool_call_completed=True).same_candidate
    assert not assess(resumable_retry=GUARANTEE, partial_utility_result=True).same_candidate


def test_a_guarantee_needs_the_turn_to_name_its_provider_session() -> None:
    verdict = assess(resumable_retry=GUARANTEE, provider_session_id=None, output_observed=True)
    assert not verdict.same_candidate


def test_turn_evidence_is_a_frozen_snapshot() -> None:
    evidence = TurnEvidence.model_validate(CLEAN)
    with pytest.raises(ValueError, match="frozen"):
        evidence.output_observed = True


OBSERVATION = st.sampled_from([True, False, None])


@given(observed=st.tuples(*[OBSERVATION] * 6))
def test_the_gate_is_safe_exactly_when_every_observation_is_a_known_no(
    observed: tuple[bool | None, ...],
) -> None:
    names = (
        "output_observed",
        "thoughts_observed",
        "tool_call_started",
        "tool_call_completed",
        "partial_utility_result",
        "ambiguous_delivery",
    )
    evidence = TurnEvidence.model_validate({**CLEAN, **dict(zip(names, observed, strict=True))})
    verdict = assess_turn(evidence, execution_id=EXECUTION, prompt_generation=GENERATION)
    assert verdict.same_candidate == verdict.other_candidate == all(o is False for o in observed)
