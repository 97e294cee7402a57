"""The code registry: every semantic code, its policy class and its default scope.

The class is the stable policy input; the code is diagnostic detail. A code missing from
this registry cannot be produced by a rule (rule loading fails), so every code a rule can
emit has exactly one class and one policy path.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import Final

from catalogue.errors import RecoveryError

# The catalogue's version line. A built catalogue's version is this plus a digest of its
# rules' content (`catalogue.rules.content_version`): "catalogue.v1+3f2a9c0d1e4b".
CATALOGUE_VERSION: Final = "catalogue.v1"


class ErrorClass(StrEnum):
    """Policy input. `none` and `unclassified` are never configurable classes."""

    TRANSIENT = "transient"
    HARD = "hard"
    NONE = "none"
    UNCLASSIFIED = "unclassified"


class Confidence(StrEnum):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


class Scope(StrEnum):
    """What a failure says is broken: the provider, the account, the model, the profile
    configuration, or only this request."""

    PROVIDER = "provider"
    ACCOUNT = "account"
    MODEL = "model"
    PROFILE = "profile"
    REQUEST = "request"


@dataclass(frozen=True, slots=True)
class CodeInfo:
    code: str
    error_class: ErrorClass
    scope: Scope
    is_provider_error: bool
    uses_timing: bool
    summary: str


UNCLASSIFIED: Final = "unclassified"


def _info(
    code: str,
    error_class: ErrorClass,
    scope: Scope,
    summary: str,
    *,
    provider_error: bool = True,
    uses_timing: bool = False,
) -> CodeInfo:
    return CodeInfo(code, error_class, scope, provider_error, uses_timing, summary)


_T, _H, _N = ErrorClass.TRANSIENT, ErrorClass.HARD, ErrorClass.NONE

_REGISTRY: Final = (
    # transient: the provider, network or transport is temporarily unable to serve.
    _info("network_unavailable", _T, Scope.PROVIDER, "the provider could not be reached"),
    _info(
        "provider_unavailable",
        _T,
        Scope.PROVIDER,
        "the provider returned a server error",
        uses_timing=True,
    ),
    _info(
        "provider_overloaded",
        _T,
        Scope.PROVIDER,
        "the provider is shedding load",
        uses_timing=True,
    ),
    _info(
        "model_capacity",
        _T,
        Scope.MODEL,
        "the selected model has no capacity right now",
        uses_timing=True,
    ),
    _info("rate_limited", _T, Scope.ACCOUNT, "a short rate limit was hit", uses_timing=True),
    _info(
        "agent_transport_lost",
        _T,
        Scope.REQUEST,
        "the agent's stream to the provider broke before a result",
    ),
    # hard: needs a longer reset or a user or configuration change.
    _info(
        "quota_limited",
        _H,
        Scope.ACCOUNT,
        "a quota, credit or usage limit is exhausted",
        uses_timing=True,
    ),
    _info("subscription_required", _H, Scope.ACCOUNT, "the plan does not include this"),
    _info("auth_required", _H, Scope.ACCOUNT, "credentials were rejected or expired"),
    _info("missing_credentials", _H, Scope.ACCOUNT, "no credentials could be found"),
    _info(
        "provider_not_configured",
        _H,
        Scope.PROFILE,
        "the provider is not set up correctly",
    ),
    _info("model_unavailable", _H, Scope.MODEL, "the model does not exist or is not allowed"),
    _info(
        "context_length_exceeded",
        _H,
        Scope.REQUEST,
        "the request exceeds the context window",
    ),
    _info("content_policy", _H, Scope.REQUEST, "the provider's safety system refused"),
    # a provider error that no automatic recovery can fix.
    _info("invalid_request", _N, Scope.REQUEST, "the provider rejected the request as invalid"),
    # not provider errors: they keep their own owner and never switch candidates.
    _info("task_error", _N, Scope.REQUEST, "the task or a tool failed", provider_error=False),
    _info("repo_error", _N, Scope.REQUEST, "a repository operation failed", provider_error=False),
    _info(
        "permission_denied",
        _N,
        Scope.REQUEST,
        "a local permission was denied",
        provider_error=False,
    ),
    _info(
        "local_runtime_error",
        _N,
        Scope.REQUEST,
        "the local runtime or filesystem failed",
        provider_error=False,
    ),
    _info("cancelled", _N, Scope.REQUEST, "the turn was cancelled", provider_error=False),
    _info(
        "resume_corrupted",
        _N,
        Scope.REQUEST,
        "the saved session cannot be resumed",
        provider_error=False,
    ),
)

CODES: Final = MappingProxyType({info.code: info for info in _REGISTRY})

TRANSIENT_CODES: Final = frozenset(c for c, i in CODES.items() if i.error_class is _T)
HARD_CODES: Final = frozenset(c for c, i in CODES.items() if i.error_class is _H)
NON_PROVIDER_CODES: Final = frozenset(c for c, i in CODES.items() if not i.is_provider_error)


class UnknownCodeError(RecoveryError, KeyError):
    """A code that is not in the registry; also a KeyError, as a failed registry lookup."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code

    def __str__(self) -> str:
        return f"unknown error code {self.code!r}"


def code_info(code: str) -> CodeInfo:
    """The registry entry for `code`; `UnknownCodeError` names a code that has none."""
    try:
        return CODES[code]
    except KeyError:
        raise UnknownCodeError(code) from None


def class_of(code: str) -> ErrorClass:
    """The policy class of a code; `unclassified` for the unclassified state."""
    if code == UNCLASSIFIED:
        return ErrorClass.UNCLASSIFIED
    return code_info(code).error_class
