"""What a route cycle has used, and evaluation within a cycle.

A cycle runs from a start or a success until the next success. Retry ordinals and the
one reset wait count per candidate and class within it; skipped candidates stay excluded.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from types import MappingProxyType

from catalogue.codes import ErrorClass
from policy.decisions import Decision, Retry, Skip, Stop, WaitForReset
from policy.document import PolicyDocument
from policy.evaluate import evaluate
from policy.failure import Failure
from policy.gate import EffectSafety
from policy.schedule import NamedPolicy

UsageKey = tuple[str, ErrorClass]


def _no_retries() -> Mapping[UsageKey, int]:
    return MappingProxyType({})


@dataclass(frozen=True, slots=True)
class CycleUsage:
    retries: Mapping[UsageKey, int] = field(default_factory=_no_retries)
    reset_waits: frozenset[UsageKey] = frozenset()
    skipped: frozenset[str] = frozenset()

    def retries_used(self, candidate_id: str, error_class: ErrorClass) -> int:
        return self.retries.get((candidate_id, error_class), 0)

    def reset_wait_used(self, candidate_id: str, error_class: ErrorClass) -> bool:
        return (candidate_id, error_class) in self.reset_waits

    def after(self, candidate_id: str, error_class: ErrorClass, decision: Decision) -> CycleUsage:
        """The usage once `decision` for this candidate and class is committed."""
        key = (candidate_id, error_class)
        match decision:
            case Retry(ordinal=ordinal):
                return replace(self, retries=MappingProxyType({**self.retries, key: ordinal}))
            case WaitForReset():
                return replace(self, reset_waits=self.reset_waits | {key})
            case Skip():
                return replace(self, skipped=self.skipped | {candidate_id})
            case Stop():
                return self


def evaluate_in_cycle(
    policy: PolicyDocument | NamedPolicy,
    candidate_id: str,
    failure: Failure,
    usage: CycleUsage,
    *,
    now: datetime,
    safety: EffectSafety,
) -> tuple[Decision, CycleUsage]:
    """`evaluate` with this cycle's usage for the candidate and class, and the new usage."""
    error_class = failure.error_class
    decision = evaluate(
        policy,
        failure,
        now=now,
        safety=safety,
        retry_ordinal=usage.retries_used(candidate_id, error_class),
        reset_wait_used=usage.reset_wait_used(candidate_id, error_class),
    )
    return decision, usage.after(candidate_id, error_class, decision)
