"""The core's errors share one root, RecoveryError (catalogue/errors.py), and keep the
builtin bases their callers know them by."""

from __future__ import annotations

import pickle

import pytest
from pydantic import BaseModel, ValidationError, field_validator

from catalogue import RecoveryError, RuleError, code_info
from catalogue.acp.replay import ReplayError
from catalogue.codes import UnknownCodeError
from policy import FieldError, PolicyError
from tests.error_tree import exception_classes

CORE_EXCEPTIONS = exception_classes("catalogue", "policy", "circuits")


def test_the_walk_finds_the_core_errors_it_must_cover() -> None:
    found = set(CORE_EXCEPTIONS.values())
    assert {RecoveryError, RuleError, ReplayError, UnknownCodeError, PolicyError} <= found


@pytest.mark.parametrize("name", sorted(CORE_EXCEPTIONS))
def test_every_exception_class_the_core_defines_is_a_recovery_error(name: str) -> None:
    assert issubclass(CORE_EXCEPTIONS[name], RecoveryError), name


@pytest.mark.parametrize(
    ("error_type", "builtin"),
    [(PolicyError, ValueError), (RuleError, ValueError), (ReplayError, ValueError),
     (UnknownCodeError, KeyError)],
)  # fmt: skip
def test_a_core_error_keeps_the_builtin_base_its_callers_catch(
    error_type: type[RecoveryError], builtin: type[Exception]
) -> None:
    assert issubclass(error_type, builtin)
    assert issubclass(error_type, RecoveryError)


def test_an_unknown_code_is_caught_as_a_recovery_error_and_as_a_key_error() -> None:
    with pytest.raises(RecoveryError) as caught:
        code_info("no_such_code")
    assert isinstance(caught.value, KeyError)
    assert str(caught.value) == "unknown error code 'no_such_code'"


class _Limited(BaseModel):
    retries: int

    @field_validator("retries")
    @classmethod
    def _small(cls, value: int) -> int:
        if value > 10:
            raise PolicyError.single("retries", f"must be at most 10, got {value}")
        return value


def test_a_policy_error_raised_in_a_validator_still_becomes_a_validation_error() -> None:
    with pytest.raises(ValidationError, match="retries: must be at most 10, got 11"):
        _Limited(retries=11)


@pytest.mark.parametrize(
    "error",
    [
        PolicyError([FieldError("candidates[2].hard.retry.max_retries", "too many"),
                     FieldError(None, "not a policy document")]),
        RuleError("rules/x.toml[a.b.v1].code: not in the code registry, got 'nope'"),
        ReplayError("message must be a JSON object", "message"),
        UnknownCodeError("no_such_code"),
    ],
    ids=lambda error: type(error).__name__,
)  # fmt: skip
def test_a_core_error_keeps_its_identifiers_and_message_through_pickling(
    error: RecoveryError,
) -> None:
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is type(error)
    assert vars(again) == vars(error)
    assert again.args == error.args
    assert str(again) == str(error)
