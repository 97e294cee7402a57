"""Policy documents, validation, legacy normalisation, evaluation and the effect-safety gate.

Pure: no I/O, no clocks, no randomness. `now` is always passed in (an aware datetime).
"""

from policy.cycle import CycleUsage, evaluate_in_cycle
from policy.decisions import Decision, Retry, Skip, Stop, WaitForReset, decision_json, utc_iso
from policy.document import (
    MAX_INITIAL_INTERVAL_SECONDS,
    MAX_RETRIES,
    MAX_WAIT_SECONDS,
    POLICY_CLASSES,
    POLICY_VERSION,
    Candidate,
    ClassPolicy,
    DynamicProfile,
    Outcome,
    PolicyDocument,
    RetryPolicy,
    WaitForResetPolicy,
)
from policy.durations import format_duration
from policy.errors import FieldError, PolicyError
from policy.evaluate import (
    MANUAL_RECOVERY_CODES,
    REQUEST_SCOPE_CODES,
    SAME_CANDIDATE_ONLY_CODES,
    evaluate,
    refusal_reason,
    reset_offset,
    stop_for_invalid_policy,
)
from policy.failure import Failure
from policy.gate import (
    LAUNCH_PHASE,
    LAUNCH_SAFE_CODES,
    EffectSafety,
    ResumableRetry,
    TurnEvidence,
    assess_turn,
    launch_safety,
)
from policy.legacy import LegacyAction, class_policy_for, normalize_policy
from policy.lint import LintWarning, lint_profile, worst_case_seconds
from policy.preview import ClassPreview, describe_class_policy, preview_lines, preview_profile
from policy.profile import parse_profile
from policy.schedule import (
    BUILTIN_POLICIES,
    DOCUMENT_LIMITS,
    INTERACTIVE_POLICY,
    MAX_RETRY_DELAY_SECONDS,
    Limits,
    NamedPolicy,
    next_retry_delay,
    retry_delays,
)
from policy.schema import policy_json_schema
from policy.validation import parse_document

__all__ = [
    "BUILTIN_POLICIES",
    "DOCUMENT_LIMITS",
    "INTERACTIVE_POLICY",
    "LAUNCH_PHASE",
    "LAUNCH_SAFE_CODES",
    "MANUAL_RECOVERY_CODES",
    "MAX_INITIAL_INTERVAL_SECONDS",
    "MAX_RETRIES",
    "MAX_RETRY_DELAY_SECONDS",
    "MAX_WAIT_SECONDS",
    "POLICY_CLASSES",
    "POLICY_VERSION",
    "REQUEST_SCOPE_CODES",
    "SAME_CANDIDATE_ONLY_CODES",
    "Candidate",
    "ClassPolicy",
    "ClassPreview",
    "CycleUsage",
    "Decision",
    "DynamicProfile",
    "EffectSafety",
    "Failure",
    "FieldError",
    "LegacyAction",
    "Limits",
    "LintWarning",
    "NamedPolicy",
    "Outcome",
    "PolicyDocument",
    "PolicyError",
    "ResumableRetry",
    "Retry",
    "RetryPolicy",
    "Skip",
    "Stop",
    "TurnEvidence",
    "WaitForReset",
    "WaitForResetPolicy",
    "assess_turn",
    "class_policy_for",
    "decision_json",
    "describe_class_policy",
    "evaluate",
    "evaluate_in_cycle",
    "format_duration",
    "launch_safety",
    "lint_profile",
    "next_retry_delay",
    "normalize_policy",
    "parse_document",
    "parse_profile",
    "policy_json_schema",
    "preview_lines",
    "preview_profile",
    "refusal_reason",
    "reset_offset",
    "retry_delays",
    "stop_for_invalid_policy",
    "utc_iso",
    "worst_case_seconds",
]
