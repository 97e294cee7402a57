"""Validation of v1 documents and dynamic profiles: every error at once, by field."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from policy import (
    ClassPolicy,
    DynamicProfile,
    PolicyDocument,
    PolicyError,
    RetryPolicy,
    WaitForResetPolicy,
    parse_document,
    parse_profile,
)
from tests.policy.builders import document_json, section_json


def errors_of(data: object, *, profile: bool = False) -> list[str]:
    with pytest.raises(PolicyError) as caught:
        (parse_profile if profile else parse_document)(data)
    return [str(error) for error in caught.value.errors]


def with_value(section: str, field: str, value: object) -> dict[str, Any]:
    """A document whose transient `section.field` is `value` and the section enabled."""
    transient = section_json(retries=3, interval=5, wait=300)
    transient[section] = {**transient[section], "enabled": True, field: value}
    return document_json(transient=transient)


BOUNDARIES = [
    ("retry", "max_retries", 0, False),
    ("retry", "max_retries", 1, True),
    ("retry", "max_retries", 10, True),
    ("retry", "max_retries", 11, False),
    ("retry", "initial_interval_seconds", 0, False),
    ("retry", "initial_interval_seconds", 1, True),
    ("retry", "initial_interval_seconds", 3600, True),
    ("retry", "initial_interval_seconds", 3601, False),
    ("wait_for_reset", "max_wait_seconds", 0, False),
    ("wait_for_reset", "max_wait_seconds", 1, True),
    ("wait_for_reset", "max_wait_seconds", 604800, True),
    ("wait_for_reset", "max_wait_seconds", 604801, False),
]
HIGH = {"max_retries": 10, "initial_interval_seconds": 3600, "max_wait_seconds": 604800}


@pytest.mark.parametrize(("section", "field", "value", "accepted"), BOUNDARIES)
def test_enabled_sections_accept_exactly_their_documented_ranges(
    section: str, field: str, value: int, accepted: bool
) -> None:
    data = with_value(section, field, value)
    if accepted:
        parsed = parse_document(data)
        assert getattr(getattr(parsed.transient, section), field) == value
    else:
        assert errors_of(data) == [
            f"transient.{section}.{field}: must be between 1 and {HIGH[field]}, got {value}"
        ]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (1.5, "must be a whole number, got 1.5"),
        (0.1, "must be a whole number, got 0.1"),
        (math.inf, "must be a finite number, got inf"),
        (-math.inf, "must be a finite number, got -inf"),
        (math.nan, "must be a finite number, got nan"),
        (True, "must be a number, not a boolean, got true"),
        (False, "must be a number, not a boolean, got false"),
        ("5", "must be a whole number, got '5'"),
        (None, "must be a whole number, got null"),
        ([5], "must be a whole number, got a list"),
        (-1, "must be between 1 and 10, got -1"),
    ],
)
def test_numbers_must_be_finite_integral_and_not_booleans(value: object, message: str) -> None:
    assert errors_of(with_value("retry", "max_retries", value)) == [
        f"transient.retry.max_retries: {message}"
    ]


def test_an_integral_float_is_accepted_as_the_integer() -> None:
    parsed = parse_document(with_value("retry", "initial_interval_seconds", 60.0))
    assert parsed.transient.retry.initial_interval_seconds == 60


@pytest.mark.parametrize("value", [0, 11, 3601, 604801, 10**30, 7.0])
def test_a_disabled_section_accepts_any_whole_number_and_stores_zero(value: object) -> None:
    data = document_json(
        transient={
            "retry": {"enabled": False, "max_retries": value, "initial_interval_seconds": value},
            "wait_for_reset": {"enabled": False, "max_wait_seconds": value},
            "on_exhausted": "skip",
        }
    )
    parsed = parse_document(data)
    assert parsed.transient == ClassPolicy.immediately(parsed.transient.on_exhausted)
    assert parsed.transient.retry.max_retries == 0


@pytest.mark.parametrize(
    ("value", "message"),
    [(-1, "must not be negative, got -1"), (0.5, "must be a whole number, got 0.5")],
)
def test_a_disabled_section_still_rejects_negative_or_fractional_numbers(
    value: object, message: str
) -> None:
    data = document_json(
        hard={
            "retry": {"enabled": False, "max_retries": value},
            "wait_for_reset": {"enabled": False},
            "on_exhausted": "stop",
        }
    )
    assert errors_of(data) == [f"hard.retry.max_retries: {message}"]


def test_an_enabled_section_needs_its_numbers() -> None:
    data = document_json(
        transient={
            "retry": {"enabled": True},
            "wait_for_reset": {"enabled": True},
            "on_exhausted": "skip",
        }
    )
    assert errors_of(data) == [
        "transient.retry.max_retries: missing; required when retry is enabled",
        "transient.retry.initial_interval_seconds: missing; required when retry is enabled",
        "transient.wait_for_reset.max_wait_seconds: "
        "missing; required when reset waiting is enabled",
    ]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"version": 2}, "version: unsupported version 2; expected 1"),
        ({"version": "1"}, "version: unsupported version '1'; expected 1"),
        ({"version": True}, "version: unsupported version true; expected 1"),
        ({"medium": {}}, "medium: unknown class 'medium'; expected transient or hard"),
        (
            {"unclassified": {}},
            "unclassified: class 'unclassified' cannot be configured; such failures always stop",
        ),
        ({"none": {}}, "none: class 'none' cannot be configured; such failures always stop"),
    ],
)
def test_document_level_errors_name_the_field_and_value(
    change: dict[str, object], expected: str
) -> None:
    assert errors_of({**document_json(), **change}) == [expected]


def test_a_missing_class_or_version_is_an_error_addressed_to_it() -> None:
    assert errors_of({"transient": section_json()}) == [
        "version: missing; expected 1",
        "hard: missing class policy; a document needs both transient and hard",
    ]


def test_unknown_keys_and_outcomes_are_errors() -> None:
    transient = {**section_json(), "on_exhausted": "retry", "colour": "red"}
    transient["retry"] = {**transient["retry"], "jitter": True}
    assert errors_of(document_json(transient=transient)) == [
        "transient.colour: unknown key 'colour'",
        "transient.retry.jitter: unknown key 'jitter'",
        "transient.on_exhausted: unknown outcome 'retry'; expected skip or stop",
    ]


def test_every_error_of_a_document_is_reported_together() -> None:
    data = {
        "version": 3,
        "transient": {
            "retry": {"enabled": "yes", "max_retries": 11},
            "wait_for_reset": {"enabled": True, "max_wait_seconds": 604801},
            "on_exhausted": "skip",
        },
        "hard": {"retry": {"enabled": True, "max_retries": 0, "initial_interval_seconds": 3601}},
    }
    assert errors_of(data) == [
        "version: unsupported version 3; expected 1",
        "transient.retry.enabled: must be true or false, got 'yes'",
        "transient.wait_for_reset.max_wait_seconds: must be between 1 and 604800, got 604801",
        "hard.wait_for_reset: missing",
        "hard.on_exhausted: missing",
        "hard.retry.max_retries: must be between 1 and 10, got 0",
        "hard.retry.initial_interval_seconds: must be between 1 and 3600, got 3601",
    ]


@pytest.mark.parametrize("data", [None, [], "try_next", 3])
def test_a_document_must_be_an_object(data: object) -> None:
    (message,) = errors_of(data)
    assert message.startswith("must be an object, got ")


# -- profiles ------------------------------------------------------------------------------


def candidate(identifier: str, **fields: object) -> dict[str, object]:
    return {"id": identifier, "agent": "claude-acp", "transient": section_json(), **fields} | {
        "hard": fields.get("hard", section_json())
    }


def profile_of(*candidates: dict[str, object]) -> dict[str, object]:
    return {"version": 1, "candidates": list(candidates)}


def test_a_profile_error_is_addressed_to_its_candidate() -> None:
    bad_hard = section_json(retries=3, interval=5)
    bad_hard["retry"]["max_retries"] = 11
    data = profile_of(candidate("a"), candidate("b"), candidate("c", hard=bad_hard))
    assert errors_of(data, profile=True) == [
        "candidates[2].hard.retry.max_retries: must be between 1 and 10, got 11"
    ]


def test_profile_errors_across_candidates_are_reported_together() -> None:
    data = profile_of(
        candidate("a", agent=""),
        candidate("a", colour="red"),
        {"id": "c", "agent": "x", "transient": section_json()},
    )
    assert errors_of(data, profile=True) == [
        "candidates[0].agent: must be a non-empty string, got ''",
        "candidates[1].colour: unknown key 'colour'",
        "candidates[2].hard: missing class policy; a document needs both transient and hard",
        "candidates[1].id: duplicate candidate id 'a' (also candidates[0])",
    ]


def test_a_candidate_may_name_its_account_label_as_the_model_allows() -> None:
    parsed = parse_profile({"candidates": [{"id": "a", "agent": "codex-acp", "account": "team@x"}]})
    assert parsed.candidates[0].account == "team@x"
    again = parse_profile(parsed.model_dump(mode="json"))  # a dumped profile parses back
    assert again == parsed


def test_an_account_label_outside_its_pattern_is_refused_naming_the_field() -> None:
    data = {"candidates": [{"id": "a", "agent": "x", "account": "two words"}]}
    assert errors_of(data, profile=True) == [
        "candidates[0].account: must match ^[A-Za-z0-9._:@/+-]{1,128}$, got 'two words'"
    ]


def test_a_candidate_may_name_its_account_label_and_a_bad_one_is_refused_by_name() -> None:
    """Found by schemathesis against the HTTP API: the model (and so the documented
    schema) had `account`, the JSON parser refused it as an unknown key."""
    data = {"candidates": [{"id": "a", "agent": "claude-acp", "account": "team-a@anthropic"}]}
    assert parse_profile(data).candidates[0].account == "team-a@anthropic"
    data["candidates"][0]["account"] = "sk-ant with spaces"
    assert errors_of(data, profile=True) == [
        "candidates[0].account: must match ^[A-Za-z0-9._:@/+-]{1,128}$, got 'sk-ant with spaces'"
    ]


def test_a_candidate_without_policies_gets_the_default_immediate_skip() -> None:
    parsed = parse_profile({"candidates": [{"id": "a", "agent": "codex-acp"}]})
    assert parsed.candidates[0].policy == PolicyDocument.default()
    assert parsed.candidates[0].enabled


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({}, ["candidates: missing"]),
        ({"candidates": []}, ["candidates: must be a non-empty list of candidates"]),
        (
            {"candidates": [{"id": "a", "agent": "x"}], "version": 2},
            ["version: unsupported version 2; expected 1"],
        ),
        (
            {"candidates": [{"id": "x" * 129, "agent": "x"}]},
            ["candidates[0].id: must be at most 128 characters, got 129"],
        ),
    ],
)
def test_profile_level_errors(data: object, expected: list[str]) -> None:
    assert errors_of(data, profile=True) == expected


# -- the models agree with the validator -------------------------------------------------

NUMBERS = st.one_of(
    st.integers(min_value=-2, max_value=700_000),
    st.sampled_from([0, 1, 10, 11, 3600, 3601, 604800, 604801]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
)
SECTIONS = st.fixed_dictionaries(
    {
        "retry": st.fixed_dictionaries(
            {"enabled": st.booleans(), "max_retries": NUMBERS, "initial_interval_seconds": NUMBERS}
        ),
        "wait_for_reset": st.fixed_dictionaries(
            {"enabled": st.booleans(), "max_wait_seconds": NUMBERS}
        ),
        "on_exhausted": st.sampled_from(["skip", "stop", "retry"]),
    }
)


@given(transient=SECTIONS, hard=SECTIONS)
def test_the_validator_and_the_models_accept_exactly_the_same_integer_documents(
    transient: dict[str, Any], hard: dict[str, Any]
) -> None:
    data = {"version": 1, "transient": transient, "hard": hard}
    try:
        parsed: PolicyDocument | None = parse_document(data)
    except PolicyError:
        parsed = None
    if _all_numbers_are_ints(data):
        try:
            direct: PolicyDocument | None = PolicyDocument.model_validate(data)
        except ValidationError:
            direct = None
        assert parsed == direct
    if parsed is not None:
        assert parse_document(parsed.model_dump(mode="json")) == parsed


def _all_numbers_are_ints(data: Any) -> bool:
    if isinstance(data, dict):
        return all(_all_numbers_are_ints(v) for k, v in data.items() if k != "enabled")
    return not isinstance(data, float | bool)


def test_models_refuse_out_of_bounds_values_when_built_directly() -> None:
    with pytest.raises(ValidationError, match="max_retries must be between 1 and 10, got 11"):
        RetryPolicy(enabled=True, max_retries=11, initial_interval_seconds=5)
    with pytest.raises(ValidationError):
        WaitForResetPolicy(enabled=True, max_wait_seconds=0)
    with pytest.raises(ValidationError, match="used twice"):
        DynamicProfile.model_validate({"candidates": [candidate("a"), candidate("a")]})


@pytest.mark.parametrize("value", [-1, -0.5, 1.5, float("inf"), float("nan"), "3", True])
def test_a_disabled_section_with_a_number_the_validator_refuses_is_refused_by_the_model_too(
    value: Any,
) -> None:
    """Found by the property above: a disabled retry with initial_interval_seconds -1 was
    zeroed by the model and refused by parse_document."""
    section = {"enabled": False, "max_retries": 0, "initial_interval_seconds": value}
    with pytest.raises(ValidationError, match="initial_interval_seconds"):
        RetryPolicy.model_validate(section)
