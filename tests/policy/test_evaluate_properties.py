"""Invariants of evaluation over arbitrary documents, failures and cycles."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from catalogue import CODES, HARD_CODES, TRANSIENT_CODES, Confidence, ErrorClass
from policy import (
    ClassPolicy,
    CycleUsage,
    EffectSafety,
    Failure,
    Outcome,
    PolicyDocument,
    Retry,
    RetryPolicy,
    Skip,
    Stop,
    WaitForReset,
    WaitForResetPolicy,
    evaluate,
    evaluate_in_cycle,
)
from tests.policy.builders import NOW

RETRIES = st.one_of(
    st.just(RetryPolicy.disabled()),
    st.builds(
        RetryPolicy,
        enabled=st.just(True),
        max_retries=st.integers(1, 10),
        initial_interval_seconds=st.integers(1, 3600),
    ),
)
WAITS = st.one_of(
    st.just(WaitForResetPolicy.disabled()),
    st.builds(WaitForResetPolicy, enabled=st.just(True), max_wait_seconds=st.integers(1, 604800)),
)
SECTIONS = st.builds(
    ClassPolicy, retry=RETRIES, wait_for_reset=WAITS, on_exhausted=st.sampled_from(list(Outcome))
)
DOCUMENTS = st.builds(PolicyDocument, version=st.just(1), transient=SECTIONS, hard=SECTIONS)
OFFSETS = st.none() | st.floats(min_value=-86400, max_value=10 * 86400, allow_nan=False)
HINT_SECONDS = st.none() | st.floats(min_value=0, max_value=10 * 86400, allow_nan=False)


@st.composite
def failures(draw: st.DrawFn, codes: list[str], classes: list[ErrorClass]) -> Failure:
    offset = draw(OFFSETS)
    return Failure(
        code=draw(st.sampled_from(codes)),
        error_class=draw(st.sampled_from(classes)),
        confidence=draw(st.sampled_from(list(Confidence))),
        retry_after_s=draw(HINT_SECONDS),
        reset_at=None if offset is None else NOW + timedelta(seconds=offset),
        stale=draw(st.booleans()),
    )


ANY_CODE = [*sorted(CODES), "unclassified", "made_up"]
ANY_FAILURE = failures(ANY_CODE, list(ErrorClass))
UNSAFE = st.builds(
    EffectSafety,
    same_candidate=st.just(False),
    other_candidate=st.just(False),
    reason=st.just("not effect-safe: a tool call started"),
)


@settings(max_examples=300)
@given(
    policy=DOCUMENTS,
    fail=ANY_FAILURE,
    safety=UNSAFE,
    ordinal=st.integers(0, 20),
    used=st.booleans(),
)
def test_an_unsafe_failure_never_yields_retry_wait_or_skip(
    policy: PolicyDocument, fail: Failure, safety: EffectSafety, ordinal: int, used: bool
) -> None:
    decision = evaluate(
        policy, fail, now=NOW, safety=safety, retry_ordinal=ordinal, reset_wait_used=used
    )
    assert isinstance(decision, Stop)


@settings(max_examples=300)
@given(
    policy=DOCUMENTS,
    fail=failures(ANY_CODE, [ErrorClass.UNCLASSIFIED])
    | failures(["unclassified"], list(ErrorClass)),
    ordinal=st.integers(0, 20),
    used=st.booleans(),
)
def test_an_unclassified_failure_never_yields_retry_wait_or_skip(
    policy: PolicyDocument, fail: Failure, ordinal: int, used: bool
) -> None:
    decision = evaluate(
        policy,
        fail,
        now=NOW,
        safety=EffectSafety.safe(),
        retry_ordinal=ordinal,
        reset_wait_used=used,
    )
    assert isinstance(decision, Stop)


@settings(max_examples=300)
@given(policy=DOCUMENTS, fail=ANY_FAILURE, ordinal=st.integers(0, 10**6), used=st.booleans())
def test_every_decision_is_bounded_and_in_the_future_or_now(
    policy: PolicyDocument, fail: Failure, ordinal: int, used: bool
) -> None:
    decision = evaluate(
        policy,
        fail,
        now=NOW,
        safety=EffectSafety.safe(),
        retry_ordinal=ordinal,
        reset_wait_used=used,
    )
    if isinstance(decision, Retry):
        assert timedelta(seconds=1) <= decision.deadline - NOW <= timedelta(days=1)
        assert decision.ordinal == ordinal + 1
    if isinstance(decision, WaitForReset):
        assert not used
        assert timedelta(0) < decision.deadline - NOW <= timedelta(days=7)
    if isinstance(decision, Skip):
        assert fail.code != "agent_transport_lost"


@st.composite
def recoverable_failures(draw: st.DrawFn) -> Failure:
    code = draw(st.sampled_from(sorted(TRANSIENT_CODES | HARD_CODES)))
    offset = draw(OFFSETS)
    return Failure(
        code=code,
        error_class=CODES[code].error_class,
        retry_after_s=draw(HINT_SECONDS),
        reset_at=None if offset is None else NOW + timedelta(seconds=offset),
    )


@settings(max_examples=200)
@given(
    policies=st.lists(DOCUMENTS, min_size=1, max_size=3),
    stream=st.lists(recoverable_failures(), min_size=1, max_size=60),
)
def test_a_reset_wait_is_used_at_most_once_per_candidate_and_class_in_a_cycle(
    policies: list[PolicyDocument], stream: list[Failure]
) -> None:
    """Simulate one cycle: every attempt fails with the next failure of the stream; a skip
    moves to the next candidate; a stop or running out of candidates ends the cycle."""
    usage = CycleUsage()
    waits: Counter[tuple[str, ErrorClass]] = Counter()
    retries: Counter[tuple[str, ErrorClass]] = Counter()
    candidate = 0
    for fail in stream:
        name = f"c{candidate}"
        decision, usage = evaluate_in_cycle(
            policies[candidate], name, fail, usage, now=NOW, safety=EffectSafety.safe()
        )
        key = (name, fail.error_class)
        if isinstance(decision, WaitForReset):
            waits[key] += 1
        elif isinstance(decision, Retry):
            retries[key] += 1
        elif isinstance(decision, Skip):
            candidate += 1
            if candidate == len(policies):
                break
        else:
            break
    assert all(count == 1 for count in waits.values())
    for (name, error_class), count in retries.items():
        policy = policies[int(name[1:])].for_class(error_class)
        assert count <= policy.retry.max_retries


def test_a_reset_hint_shorter_than_a_microsecond_is_not_a_wait_in_the_future() -> None:
    """Found by the property above: 2.2e-311 s rounds to a deadline equal to now."""
    policy = PolicyDocument.model_validate(
        {
            "version": 1,
            "transient": {
                "retry": {"enabled": False},
                "wait_for_reset": {"enabled": True, "max_wait_seconds": 1},
                "on_exhausted": "skip",
            },
            "hard": {
                "retry": {"enabled": False},
                "wait_for_reset": {"enabled": False},
                "on_exhausted": "skip",
            },
        }
    )
    tiny = Failure(
        code="agent_transport_lost", error_class=ErrorClass.TRANSIENT,
        confidence=Confidence.HIGH, retry_after_s=2.225073858507e-311,
    )  # fmt: skip
    decision = evaluate(policy, tiny, now=NOW, safety=EffectSafety.safe())
    assert not isinstance(decision, WaitForReset), decision
