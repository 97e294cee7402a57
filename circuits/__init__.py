"""Per-resource circuit state machine with an exclusive probe lease. Pure.

No clock, no randomness, no I/O: `now` and any randomness are arguments, states are
frozen values the shell stores (as JSON) and replaces.
"""

from circuits.machine import (
    ALLOWED_EDGES,
    CircuitState,
    CircuitStatus,
    DenialReason,
    ProbeDenied,
    ProbeGrant,
    ProbeLease,
    abandon_probe,
    acquire_probe,
    holds_probe,
    is_eligible,
    jittered_reset,
    next_change_at,
    record_failure,
    record_probe_result,
)
from circuits.marks import FailureMark
from circuits.overrides import OPERATOR_REASON, operator_close, operator_open
from circuits.pacing import (
    ReleasePace,
    absorbed_enough,
    first_pace,
    next_pace,
    next_start,
    plan_wave,
)
from circuits.qualify import (
    HARD_OPEN_CODES,
    QUALIFYING_CODES,
    TRANSIENT_COUNTED_CODES,
    FailureLike,
    Severity,
    severity,
    trusted_reset,
)
from circuits.release import ReleasePlan, ReleaseSlot, hashed_jitter, plan_release, wave_budget
from circuits.resource import (
    PROVIDER_WIDE_CODES,
    PROVIDER_WIDE_MIN_MODELS,
    SCOPE_GRANULARITY,
    Granularity,
    ResourceKey,
    account_binding,
    covering_keys,
    credential_fingerprint,
    failure_targets,
    granularity_for,
    resource_key_for,
)
from circuits.settings import CircuitSettings

__all__ = [
    "ALLOWED_EDGES",
    "HARD_OPEN_CODES",
    "OPERATOR_REASON",
    "PROVIDER_WIDE_CODES",
    "PROVIDER_WIDE_MIN_MODELS",
    "QUALIFYING_CODES",
    "SCOPE_GRANULARITY",
    "TRANSIENT_COUNTED_CODES",
    "CircuitSettings",
    "CircuitState",
    "CircuitStatus",
    "DenialReason",
    "FailureLike",
    "FailureMark",
    "Granularity",
    "ProbeDenied",
    "ProbeGrant",
    "ProbeLease",
    "ReleasePace",
    "ReleasePlan",
    "ReleaseSlot",
    "ResourceKey",
    "Severity",
    "abandon_probe",
    "absorbed_enough",
    "account_binding",
    "acquire_probe",
    "covering_keys",
    "credential_fingerprint",
    "failure_targets",
    "first_pace",
    "granularity_for",
    "hashed_jitter",
    "holds_probe",
    "is_eligible",
    "jittered_reset",
    "next_change_at",
    "next_pace",
    "next_start",
    "operator_close",
    "operator_open",
    "plan_release",
    "plan_wave",
    "record_failure",
    "record_probe_result",
    "resource_key_for",
    "severity",
    "trusted_reset",
    "wave_budget",
]
