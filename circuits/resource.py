"""Which provider resource a failure breaks: the key a circuit is shared under.

A candidate is bound to a provider, a model and a credential. The credential is never
stored as such: its binding (an account id, a profile name, a key id) is reduced to an
HMAC-SHA256 fingerprint under the installation's secret key, so two installations never
share fingerprints and a fingerprint never reveals the account it stands for.

A failure's classification scope says how much of that binding is broken, and the
circuit it touches is the narrowest the evidence supports (README, "Circuit scope"):

- `request` scope breaks no shared resource (no circuit);
- `model` scope: the circuit of that model under that credential;
- `account` and `profile` scope: the circuit of that credential (every model);
- `provider` scope: still the circuit of that model under that credential (a server error
  of one model says nothing about the others), unless the evidence itself says the whole
  provider is down (PROVIDER_WIDE_CODES: the provider could not be reached at all), or
  failures of at least two of the provider's models arrive within the window: then the
  provider-wide circuit (every account, every model) opens too.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
from enum import StrEnum
from typing import Final, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from catalogue.codes import Scope

_FINGERPRINT_PATTERN: Final = r"^[0-9a-f]{64}$"


class Granularity(StrEnum):
    """How much of a candidate's binding a circuit covers, coarsest first."""

    PROVIDER = "provider"
    ACCOUNT = "account"
    MODEL = "model"


SCOPE_GRANULARITY: Final[dict[Scope, Granularity | None]] = {
    Scope.PROVIDER: Granularity.MODEL,
    Scope.ACCOUNT: Granularity.ACCOUNT,
    Scope.PROFILE: Granularity.ACCOUNT,
    Scope.MODEL: Granularity.MODEL,
    Scope.REQUEST: None,
}


PROVIDER_WIDE_CODES: Final = frozenset({"network_unavailable"})
"""Provider-scope codes whose evidence says the whole provider is down: it could not be
reached at all (no model answered), so every model and account behind it is broken."""
PROVIDER_WIDE_MIN_MODELS: Final = 2
"""Failures of this many distinct models of one provider within the window open the
provider-wide circuit."""


def granularity_for(scope: Scope) -> Granularity | None:
    """The circuit granularity a classification scope breaks; None for request scope."""
    return SCOPE_GRANULARITY[scope]


def account_binding(account: str) -> str:
    """The credential binding of a candidate that names its account (or key) label: the
    label itself, in a namespace no adapter binding (`<provider>\\0<agent>`) can reach."""
    if not account:
        raise ValueError("account label must not be empty")
    return f"account\x00{account}"


def credential_fingerprint(binding: str, installation_key: bytes) -> str:
    """HMAC-SHA256 (hex) of a credential binding under the installation key."""
    if not installation_key:
        raise ValueError("installation key must not be empty")
    if not binding:
        raise ValueError("credential binding must not be empty")
    return hmac.new(installation_key, binding.encode("utf-8"), hashlib.sha256).hexdigest()


# A route round asks for the same few resources' ids many times (a report: up to 16), and
# each is a JSON encode and a SHA-256; the ids of the resources seen lately are kept.
_RESOURCE_IDS_KEPT: Final = 4096


@functools.lru_cache(maxsize=_RESOURCE_IDS_KEPT)
def _resource_id(provider: str, model: str | None, fingerprint: str | None) -> str:
    canonical = json.dumps([provider, model, fingerprint], separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:32]


class ResourceKey(BaseModel):
    """One shared circuit's identity. `provider` alone is the provider-wide circuit; with a
    fingerprint it is one credential's; with a model too it is that model under that
    credential. A model without a credential is not a key (it would let one account's
    disallowed model block every other account)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    provider: str = Field(min_length=1)
    model: str | None = Field(default=None, min_length=1)
    credential_fingerprint: str | None = Field(default=None, pattern=_FINGERPRINT_PATTERN)

    @model_validator(mode="after")
    def _model_needs_a_credential(self) -> Self:
        if self.model is not None and self.credential_fingerprint is None:
            raise ValueError(f"model {self.model!r} needs a credential fingerprint")
        return self

    @classmethod
    def for_candidate(cls, provider: str, model: str, credential_fingerprint: str) -> Self:
        """A candidate's full binding (model granularity)."""
        return cls(provider=provider, model=model, credential_fingerprint=credential_fingerprint)

    @property
    def granularity(self) -> Granularity:
        if self.credential_fingerprint is None:
            return Granularity.PROVIDER
        if self.model is None:
            return Granularity.ACCOUNT
        return Granularity.MODEL

    @property
    def resource_id(self) -> str:
        """A stable id made of `[0-9a-f]` only, fit for storage keys and job ids."""
        return _resource_id(self.provider, self.model, self.credential_fingerprint)

    @property
    def label(self) -> str:
        """A short human-readable name: `provider/model/fingerprint-prefix`."""
        fingerprint = (self.credential_fingerprint or "*")[:12]
        return f"{self.provider}/{self.model or '*'}/{fingerprint}"

    def narrowed_to(self, granularity: Granularity) -> ResourceKey:
        """This key at a coarser (or the same) granularity."""
        order = list(Granularity)
        if order.index(granularity) > order.index(self.granularity):
            raise ValueError(f"a {self.granularity} key cannot be refined to {granularity}")
        if granularity is Granularity.PROVIDER:
            return ResourceKey(provider=self.provider)
        if granularity is Granularity.ACCOUNT:
            return ResourceKey(
                provider=self.provider, credential_fingerprint=self.credential_fingerprint
            )
        return self


def resource_key_for(candidate: ResourceKey, scope: Scope) -> ResourceKey | None:
    """The circuit a failure of `scope` on `candidate` opens; None when it opens none."""
    targets = failure_targets(candidate, scope, "")
    return targets[0][0] if targets else None


# Every failure a route round folds asks for its targets: the keys of the few candidates
# seen lately are kept (each would otherwise be built again, validated, per report).
@functools.lru_cache(maxsize=_RESOURCE_IDS_KEPT)
def failure_targets(
    candidate: ResourceKey, scope: Scope, code: str
) -> tuple[tuple[ResourceKey, int], ...]:
    """The circuits a failure of `scope` and `code` on `candidate` counts against, each
    with the distinct models its opening needs (1: the usual rule; more: the provider-wide
    circuit fed by its models' failures). Never finer than the candidate's own key."""
    granularity = granularity_for(scope)
    if granularity is None:
        return ()
    order = list(Granularity)
    if scope is Scope.PROVIDER and code in PROVIDER_WIDE_CODES:
        return ((candidate.narrowed_to(Granularity.PROVIDER), 1),)
    if order.index(granularity) > order.index(candidate.granularity):
        own = candidate
    else:
        own = candidate.narrowed_to(granularity)
    if scope is not Scope.PROVIDER:
        return ((own, 1),)
    return ((own, 1), (candidate.narrowed_to(Granularity.PROVIDER), PROVIDER_WIDE_MIN_MODELS))


def covering_keys(candidate: ResourceKey) -> tuple[ResourceKey, ...]:
    """Every circuit a dispatch to `candidate` must find closed, coarsest first."""
    order = list(Granularity)
    depth = order.index(candidate.granularity)
    return tuple(candidate.narrowed_to(granularity) for granularity in order[: depth + 1])
