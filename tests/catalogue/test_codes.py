from __future__ import annotations

import pytest

from catalogue import (
    CODES,
    HARD_CODES,
    NON_PROVIDER_CODES,
    TRANSIENT_CODES,
    ErrorClass,
    class_of,
    code_info,
    default_catalogue,
)
from catalogue.codes import UnknownCodeError

DESIGNED_TRANSIENT = {
    "network_unavailable", "provider_unavailable", "provider_overloaded", "model_capacity",
    "rate_limited", "agent_transport_lost",
}  # fmt: skip
DESIGNED_HARD = {
    "quota_limited", "subscription_required", "auth_required", "missing_credentials",
    "provider_not_configured", "model_unavailable", "context_length_exceeded", "content_policy",
}  # fmt: skip
DESIGNED_NON_PROVIDER = {
    "task_error", "repo_error", "permission_denied", "local_runtime_error", "cancelled",
    "resume_corrupted",
}  # fmt: skip


def test_registry_holds_exactly_the_designed_codes_and_classes() -> None:
    assert TRANSIENT_CODES == DESIGNED_TRANSIENT
    assert HARD_CODES == DESIGNED_HARD
    assert NON_PROVIDER_CODES == DESIGNED_NON_PROVIDER
    assert set(CODES) == DESIGNED_TRANSIENT | DESIGNED_HARD | DESIGNED_NON_PROVIDER | {
        "invalid_request"
    }


@pytest.mark.parametrize("code", sorted(CODES))
def test_every_code_has_one_class_and_a_policy_path(code: str) -> None:
    info = code_info(code)
    assert info.error_class in (ErrorClass.TRANSIENT, ErrorClass.HARD, ErrorClass.NONE)
    # Non-provider codes and invalid_request never reach a configurable class.
    if not info.is_provider_error or code == "invalid_request":
        assert info.error_class is ErrorClass.NONE
    assert info.summary


def test_unclassified_is_a_state_not_a_class_policy_configures() -> None:
    assert class_of("unclassified") is ErrorClass.UNCLASSIFIED


def test_unknown_code_is_an_error_naming_it() -> None:
    with pytest.raises(UnknownCodeError, match="'made_up'"):
        code_info("made_up")


def test_every_rule_emits_a_registered_code() -> None:
    assert {rule.code for rule in default_catalogue().rules} <= set(CODES)


def test_every_provider_code_is_reachable_by_some_rule() -> None:
    emitted = {rule.code for rule in default_catalogue().rules}
    assert set(CODES) - emitted == set()
