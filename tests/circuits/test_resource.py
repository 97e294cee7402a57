"""Resource keys: HMAC fingerprints, scope granularity, covering keys."""

from __future__ import annotations

import hashlib
import hmac

import pytest
from pydantic import ValidationError

from catalogue import Scope
from circuits import (
    Granularity,
    ResourceKey,
    account_binding,
    covering_keys,
    credential_fingerprint,
    failure_targets,
    granularity_for,
    resource_key_for,
)

KEY = b"installation-secret"
FP = credential_fingerprint("acct-42", KEY)
CANDIDATE = ResourceKey.for_candidate("anthropic", "claude-sonnet", FP)


def test_fingerprint_is_the_hmac_sha256_of_the_binding_under_the_installation_key() -> None:
    expected = hmac.new(KEY, b"acct-42", hashlib.sha256).hexdigest()
    assert expected == FP
    assert "acct-42" not in FP


def test_fingerprints_differ_between_installations_and_between_bindings() -> None:
    assert credential_fingerprint("acct-42", b"other-install") != FP
    assert credential_fingerprint("acct-43", KEY) != FP


@pytest.mark.parametrize(("binding", "key"), [("", KEY), ("acct", b"")])
def test_fingerprint_refuses_an_empty_binding_or_key(binding: str, key: bytes) -> None:
    with pytest.raises(ValueError, match="must not be empty"):
        credential_fingerprint(binding, key)


@pytest.mark.parametrize(
    ("scope", "granularity"),
    [
        (Scope.PROVIDER, Granularity.MODEL),
        (Scope.ACCOUNT, Granularity.ACCOUNT),
        (Scope.PROFILE, Granularity.ACCOUNT),
        (Scope.MODEL, Granularity.MODEL),
        (Scope.REQUEST, None),
    ],
)
def test_each_scope_maps_to_one_granularity(scope: Scope, granularity: Granularity | None) -> None:
    assert granularity_for(scope) is granularity


@pytest.mark.parametrize(
    ("scope", "expected"),
    [
        (Scope.PROVIDER, CANDIDATE),
        (Scope.ACCOUNT, ResourceKey(provider="anthropic", credential_fingerprint=FP)),
        (Scope.PROFILE, ResourceKey(provider="anthropic", credential_fingerprint=FP)),
        (Scope.MODEL, CANDIDATE),
        (Scope.REQUEST, None),
    ],
)
def test_a_scope_narrows_the_candidate_key(scope: Scope, expected: ResourceKey | None) -> None:
    assert resource_key_for(CANDIDATE, scope) == expected


ACCOUNT_KEY = ResourceKey(provider="anthropic", credential_fingerprint=FP)
PROVIDER_KEY = ResourceKey(provider="anthropic")


@pytest.mark.parametrize(
    ("scope", "code", "expected"),
    [
        (Scope.REQUEST, "context_length_exceeded", ()),
        (Scope.MODEL, "model_capacity", ((CANDIDATE, 1),)),
        (Scope.ACCOUNT, "quota_limited", ((ACCOUNT_KEY, 1),)),
        (Scope.PROFILE, "provider_not_configured", ((ACCOUNT_KEY, 1),)),
        (Scope.PROVIDER, "provider_unavailable", ((CANDIDATE, 1), (PROVIDER_KEY, 2))),
        (Scope.PROVIDER, "network_unavailable", ((PROVIDER_KEY, 1),)),
    ],
)
def test_a_failure_touches_the_narrowest_circuit_its_evidence_supports(
    scope: Scope, code: str, expected: tuple[tuple[ResourceKey, int], ...]
) -> None:
    assert failure_targets(CANDIDATE, scope, code) == expected


def test_a_candidate_without_a_model_is_never_refined() -> None:
    assert failure_targets(ACCOUNT_KEY, Scope.MODEL, "model_capacity") == ((ACCOUNT_KEY, 1),)
    assert resource_key_for(ACCOUNT_KEY, Scope.PROVIDER) == ACCOUNT_KEY


def test_an_account_label_has_its_own_fingerprint_never_an_adapter_one() -> None:
    adapter = credential_fingerprint("openai\x00codex-acp", KEY)
    first = credential_fingerprint(account_binding("team-a"), KEY)
    second = credential_fingerprint(account_binding("team-b"), KEY)
    assert len({adapter, first, second}) == 3
    assert "team-a" not in first
    with pytest.raises(ValueError, match="account"):
        account_binding("")


def test_a_candidate_is_covered_by_its_provider_account_and_model_circuits() -> None:
    keys = covering_keys(CANDIDATE)
    assert [key.granularity for key in keys] == list(Granularity)
    assert keys[-1] == CANDIDATE
    assert covering_keys(ResourceKey(provider="openai")) == (ResourceKey(provider="openai"),)


def test_a_model_key_needs_a_credential_fingerprint() -> None:
    with pytest.raises(ValidationError, match="needs a credential fingerprint"):
        ResourceKey(provider="openai", model="gpt-5")


@pytest.mark.parametrize("fingerprint", ["acct-42", "ABC", FP.upper(), FP[:-1]])
def test_a_raw_account_id_is_not_a_fingerprint(fingerprint: str) -> None:
    with pytest.raises(ValidationError):
        ResourceKey(provider="openai", credential_fingerprint=fingerprint)


def test_a_key_cannot_be_refined_beyond_what_it_binds() -> None:
    with pytest.raises(ValueError, match="cannot be refined"):
        ResourceKey(provider="openai").narrowed_to(Granularity.MODEL)


def test_resource_ids_are_stable_distinct_and_storage_safe() -> None:
    ids = {key.resource_id for key in covering_keys(CANDIDATE)}
    assert len(ids) == 3
    assert all(len(i) == 32 and set(i) <= set("0123456789abcdef") for i in ids)
    same = ResourceKey.model_validate_json(CANDIDATE.model_dump_json())
    assert same.resource_id == CANDIDATE.resource_id
    assert ResourceKey(provider="a:b").resource_id != ResourceKey(provider="a").resource_id


def test_the_label_shows_a_fingerprint_prefix_only() -> None:
    assert CANDIDATE.label == f"anthropic/claude-sonnet/{FP[:12]}"
    assert ResourceKey(provider="openai").label == "openai/*/*"


def test_resource_keys_are_frozen_and_reject_extra_fields() -> None:
    with pytest.raises(ValidationError):
        ResourceKey.model_validate({"provider": "openai", "account": "acct-42"})
    with pytest.raises(ValidationError):
        CANDIDATE.provider = "openai"  # type: ignore[misc]
