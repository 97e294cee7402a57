"""Legacy rules normalise once into v1, per-code overrides win whatever the key order."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from catalogue import HARD_CODES, NON_PROVIDER_CODES, TRANSIENT_CODES
from policy import (
    ClassPolicy,
    Outcome,
    PolicyDocument,
    PolicyError,
    RetryPolicy,
    WaitForResetPolicy,
    normalize_policy,
    parse_profile,
)

SKIP = ClassPolicy.immediately(Outcome.SKIP)
STOP = ClassPolicy.immediately(Outcome.STOP)
RETRY_ONCE_THEN_STOP = ClassPolicy(
    retry=RetryPolicy(enabled=True, max_retries=1, initial_interval_seconds=5),
    wait_for_reset=WaitForResetPolicy.disabled(),
    on_exhausted=Outcome.STOP,
)


def doc(transient: ClassPolicy, hard: ClassPolicy) -> PolicyDocument:
    return PolicyDocument(version=1, transient=transient, hard=hard)


@pytest.mark.parametrize(
    ("rules", "expected"),
    [
        ({"on_provider_error": "try_next"}, doc(SKIP, SKIP)),
        ({"on_provider_error": "stop"}, doc(STOP, STOP)),
        ({"on_provider_error": "retry_same"}, doc(RETRY_ONCE_THEN_STOP, RETRY_ONCE_THEN_STOP)),
        ("try_next", doc(SKIP, SKIP)),
        ("retry_same", doc(RETRY_ONCE_THEN_STOP, RETRY_ONCE_THEN_STOP)),
        ({}, doc(SKIP, SKIP)),
        ({"auth_required": "stop", "on_provider_error": "try_next"}, doc(SKIP, STOP)),
        ({"on_provider_error": "try_next", "auth_required": "stop"}, doc(SKIP, STOP)),
        (
            {"on_provider_error": "retry_same", "quota_limited": "try_next"},
            doc(RETRY_ONCE_THEN_STOP, SKIP),
        ),
        (
            {"rate_limited": "retry_same", "on_provider_error": "stop"},
            doc(RETRY_ONCE_THEN_STOP, STOP),
        ),
        ({"auth_required": "stop", "quota_limited": "stop"}, doc(SKIP, STOP)),
        ({"rate_limited": "stop", "auth_required": "try_next"}, doc(STOP, SKIP)),
    ],
)
def test_legacy_rules_map_to_the_seeds_class_policies(
    rules: object, expected: PolicyDocument
) -> None:
    assert normalize_policy(rules) == expected


@pytest.mark.parametrize(
    ("rules", "expected"),
    [
        (
            {"task_error": "stop"},
            "task_error: 'task_error' is not a provider error; it cannot have a recovery rule",
        ),
        (
            {"invalid_request": "try_next"},
            "invalid_request: 'invalid_request' is never recovered automatically; "
            "it cannot have a rule",
        ),
        (
            {"unclassified": "try_next"},
            "unclassified: unclassified failures always stop; they cannot have a rule",
        ),
        (
            {"made_up": "stop"},
            "made_up: unknown code 'made_up'; expected a provider error code or on_provider_error",
        ),
        (
            {"on_provider_error": "retry"},
            "on_provider_error: unknown action 'retry'; expected try_next, stop or retry_same",
        ),
        (
            {"auth_required": 1},
            "auth_required: unknown action 1; expected try_next, stop or retry_same",
        ),
        (["try_next"], "must be an object, got a list"),
        (
            "nonsense",
            "on_provider_error: unknown action 'nonsense'; expected try_next, stop or retry_same",
        ),
    ],
)
def test_invalid_legacy_rules_are_errors_naming_the_key(rules: object, expected: str) -> None:
    with pytest.raises(PolicyError) as caught:
        normalize_policy(rules)
    assert [str(e) for e in caught.value.errors] == [expected]


@pytest.mark.parametrize("code", sorted(NON_PROVIDER_CODES))
def test_no_non_provider_code_can_be_a_legacy_key(code: str) -> None:
    with pytest.raises(PolicyError, match="not a provider error"):
        normalize_policy({code: "try_next"})


@pytest.mark.parametrize(
    "rules",
    [
        {"auth_required": "stop", "quota_limited": "try_next"},
        {"quota_limited": "try_next", "auth_required": "stop"},
    ],
)
def test_conflicting_actions_in_one_class_are_an_error_whatever_the_key_order(
    rules: dict[str, str],
) -> None:
    with pytest.raises(PolicyError) as caught:
        normalize_policy(rules)
    (error,) = caught.value.errors
    assert error.field == "auth_required"
    assert error.message == (
        "conflicting rules for hard errors (auth_required → stop, quota_limited → try_next); "
        "one class takes one action"
    )


def test_all_errors_of_legacy_rules_are_reported_together() -> None:
    with pytest.raises(PolicyError) as caught:
        normalize_policy({"task_error": "stop", "auth_required": "nope", "made_up": "stop"})
    assert [e.field for e in caught.value.errors] == ["task_error", "auth_required", "made_up"]


def test_a_v1_document_normalises_to_itself() -> None:
    document = doc(RETRY_ONCE_THEN_STOP, STOP)
    assert normalize_policy(document.model_dump(mode="json")) == document


def test_an_invalid_v1_document_is_not_read_as_legacy_rules() -> None:
    with pytest.raises(PolicyError) as caught:
        normalize_policy({"version": 1, "transient": {}})
    assert "hard" in [e.field for e in caught.value.errors]


def test_a_profile_loads_legacy_candidates_normalised() -> None:
    profile = parse_profile(
        {"candidates": [{"id": "a", "agent": "codex-acp", "rules": {"auth_required": "stop"}}]}
    )
    assert profile.candidates[0].policy == doc(SKIP, STOP)
    assert "rules" not in profile.model_dump()["candidates"][0]


def test_invalid_persisted_legacy_rules_load_as_a_field_addressed_error() -> None:
    data = {
        "candidates": [
            {"id": "a", "agent": "x", "rules": {"on_provider_error": "try_next"}},
            {"id": "b", "agent": "y", "rules": {"repo_error": "stop"}},
        ]
    }
    with pytest.raises(PolicyError) as caught:
        parse_profile(data)
    assert [e.field for e in caught.value.errors] == ["candidates[1].rules.repo_error"]


def test_a_candidate_cannot_mix_legacy_rules_and_class_policies() -> None:
    data = {"candidates": [{"id": "a", "agent": "x", "rules": "stop", "transient": {}}]}
    with pytest.raises(PolicyError) as caught:
        parse_profile(data)
    assert caught.value.errors[0].field == "candidates[0].rules"


# -- properties ----------------------------------------------------------------------------

ACTIONS = st.sampled_from(["try_next", "stop", "retry_same"])
RULES = st.dictionaries(
    st.sampled_from([*sorted(TRANSIENT_CODES | HARD_CODES), "on_provider_error"]),
    ACTIONS,
    max_size=6,
)


@given(rules=RULES)
def test_normalisation_is_idempotent(rules: dict[str, str]) -> None:
    try:
        once = normalize_policy(rules)
    except PolicyError:
        return
    assert normalize_policy(once.model_dump(mode="json")) == once


@given(rules=RULES, data=st.data())
def test_normalisation_does_not_depend_on_key_order(rules: dict[str, str], data: Any) -> None:
    shuffled = dict(data.draw(st.permutations(list(rules.items()))))
    assert _outcome(rules) == _outcome(shuffled)


@given(rules=RULES)
def test_a_class_with_one_explicit_action_takes_it_over_the_default(rules: dict[str, str]) -> None:
    try:
        document = normalize_policy(rules)
    except PolicyError:
        return
    for codes, section in ((TRANSIENT_CODES, document.transient), (HARD_CODES, document.hard)):
        explicit = {action for code, action in rules.items() if code in codes}
        action = explicit.pop() if explicit else rules.get("on_provider_error", "try_next")
        expected = {"try_next": SKIP, "stop": STOP, "retry_same": RETRY_ONCE_THEN_STOP}[action]
        assert section == expected


def _outcome(rules: dict[str, str]) -> PolicyDocument | list[str]:
    try:
        return normalize_policy(rules)
    except PolicyError as exc:
        return [str(e) for e in exc.errors]
