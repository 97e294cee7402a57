"""Provider-error catalogue: evidence in, deterministic classification out.

Pure: no I/O, no clocks, no randomness. `now` is always passed in.
"""

from catalogue.classification import Classification
from catalogue.classifier import Catalogue, Explanation, classify, default_catalogue, explain
from catalogue.codes import (
    CATALOGUE_VERSION,
    CODES,
    HARD_CODES,
    NON_PROVIDER_CODES,
    TRANSIENT_CODES,
    UNCLASSIFIED,
    CodeInfo,
    Confidence,
    ErrorClass,
    Scope,
    class_of,
    code_info,
)
from catalogue.errors import RecoveryError
from catalogue.evidence import Evidence, EvidenceKind
from catalogue.rules import Rule, RuleError, Tier
from catalogue.sanitize import MAX_EXCERPT_BYTES, sanitize
from catalogue.timing import HintSource, TimingHint, parse_header_timing, parse_timing

__all__ = [
    "CATALOGUE_VERSION",
    "CODES",
    "HARD_CODES",
    "MAX_EXCERPT_BYTES",
    "NON_PROVIDER_CODES",
    "TRANSIENT_CODES",
    "UNCLASSIFIED",
    "Catalogue",
    "Classification",
    "CodeInfo",
    "Confidence",
    "ErrorClass",
    "Evidence",
    "EvidenceKind",
    "Explanation",
    "HintSource",
    "RecoveryError",
    "Rule",
    "RuleError",
    "Scope",
    "Tier",
    "TimingHint",
    "class_of",
    "classify",
    "code_info",
    "default_catalogue",
    "explain",
    "parse_header_timing",
    "parse_timing",
    "sanitize",
]
