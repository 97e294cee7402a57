"""A profile's schedule in words and offsets, as the policy editor shows it."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import accumulate
from typing import Any

from catalogue.codes import ErrorClass
from policy.document import POLICY_CLASSES, Candidate, ClassPolicy, DynamicProfile, Outcome
from policy.durations import format_duration
from policy.evaluate import MANUAL_RECOVERY_CODES, REQUEST_SCOPE_CODES
from policy.schedule import retry_delays


@dataclass(frozen=True, slots=True)
class ClassPreview:
    """One candidate's schedule for one class. Offsets count from the failure, attempt time
    not included."""

    index: int
    candidate_id: str
    error_class: ErrorClass
    retry_delays_s: tuple[int, ...]
    max_wait_s: int | None
    on_exhausted: Outcome
    next_candidate: str | None
    summary: str

    @property
    def retry_offsets_s(self) -> tuple[int, ...]:
        return tuple(accumulate(self.retry_delays_s))

    def as_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "candidate": self.candidate_id,
            "class": self.error_class.value,
            "retry_delays_s": list(self.retry_delays_s),
            "retry_offsets_s": list(self.retry_offsets_s),
            "max_wait_s": self.max_wait_s,
            "on_exhausted": self.on_exhausted.value,
            "next_candidate": self.next_candidate,
            "summary": self.summary,
        }


def preview_profile(profile: DynamicProfile) -> list[ClassPreview]:
    """Both classes of every enabled candidate, in candidate order."""
    candidates = profile.candidates
    previews = []
    for index, candidate in enumerate(candidates):
        if not candidate.enabled:
            continue
        successor = _next_enabled(candidates, index)
        for error_class in POLICY_CLASSES:
            policy = candidate.policy.for_class(error_class)
            delays = tuple(retry_delays(policy.retry))
            wait = policy.wait_for_reset
            previews.append(
                ClassPreview(
                    index=index,
                    candidate_id=candidate.id,
                    error_class=error_class,
                    retry_delays_s=delays,
                    max_wait_s=wait.max_wait_seconds if wait.enabled else None,
                    on_exhausted=policy.on_exhausted,
                    next_candidate=None if successor is None else successor[1].id,
                    summary=describe_class_policy(policy, error_class, successor),
                )
            )
    return previews


def describe_class_policy(
    policy: ClassPolicy, error_class: ErrorClass, successor: tuple[int, Candidate] | None
) -> str:
    """E.g. `if a trusted reset ≤ 5 min away is reported, wait for it once; retry 3x after
    5 s, 10 s, 20 s (at +5 s, +15 s, +35 s); then skip to candidate 2 (sonnet)`."""
    steps = []
    if policy.wait_for_reset.enabled:
        limit = format_duration(policy.wait_for_reset.max_wait_seconds)
        steps.append(f"if a trusted reset ≤ {limit} away is reported, wait for it once")
    delays = retry_delays(policy.retry)
    if delays:
        times = ", ".join(format_duration(d) for d in delays)
        offsets = ", ".join(f"+{format_duration(o)}" for o in accumulate(delays))
        steps.append(f"retry {len(delays)}× after {times} (at {offsets})")
    outcome = _outcome_words(policy.on_exhausted, successor)
    if not steps:
        return f"no retry and no wait: {outcome}"
    text = "; ".join(steps) + f"; then {outcome}"
    if error_class is ErrorClass.HARD:
        codes = " and ".join(sorted(REQUEST_SCOPE_CODES - MANUAL_RECOVERY_CODES))
        manual = " and ".join(sorted(MANUAL_RECOVERY_CODES))
        verb = "goes" if len(REQUEST_SCOPE_CODES - MANUAL_RECOVERY_CODES) == 1 else "go"
        text += f"; {codes} {verb} straight to that outcome"
        text += f"; {manual} always stops for manual recovery"
    return text


def preview_lines(profile: DynamicProfile) -> list[str]:
    """The preview as text: one heading per candidate, one line per class."""
    lines = [f"profile {profile.name or '(unnamed)'}: {len(profile.candidates)} candidates"]
    by_index: dict[int, list[ClassPreview]] = {}
    for preview in preview_profile(profile):
        by_index.setdefault(preview.index, []).append(preview)
    for index, candidate in enumerate(profile.candidates):
        heading = f"candidate {index + 1} {candidate.label}"
        if not candidate.enabled:
            lines.append(f"{heading}: disabled, never tried")
            continue
        lines.append(heading)
        lines.extend(f"  {p.error_class.value}: {p.summary}" for p in by_index[index])
    return lines


def _outcome_words(outcome: Outcome, successor: tuple[int, Candidate] | None) -> str:
    if outcome is Outcome.STOP:
        return "stop for manual recovery"
    if successor is None:
        return "skip; no candidate is left, so the route stops for manual recovery"
    index, candidate = successor
    return f"skip to candidate {index + 1} ({candidate.id})"


def _next_enabled(candidates: tuple[Candidate, ...], index: int) -> tuple[int, Candidate] | None:
    for later in range(index + 1, len(candidates)):
        if candidates[later].enabled:
            return later, candidates[later]
    return None
