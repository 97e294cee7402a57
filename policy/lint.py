"""Warnings about profiles that are valid but probably not what their author meant."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from catalogue.codes import ErrorClass
from policy.document import POLICY_CLASSES, Candidate, ClassPolicy, DynamicProfile, Outcome
from policy.durations import format_duration
from policy.errors import FieldError
from policy.schedule import MAX_RETRY_DELAY_SECONDS, retry_delays

DAY_SECONDS: Final = 24 * 3600


@dataclass(frozen=True, slots=True)
class LintWarning(FieldError):  # noqa: N818  # a warning, not an exception: it reuses the shape
    """A field-addressed warning: the profile is valid but probably not what was meant."""


def lint_profile(profile: DynamicProfile) -> list[LintWarning]:
    """Every warning for `profile`, in a stable order."""
    enabled = [(i, c) for i, c in enumerate(profile.candidates) if c.enabled]
    if not enabled:
        return [LintWarning("candidates", "every candidate is disabled; the profile cannot run")]
    warnings = _duplicates(profile)
    for index, candidate in enabled:
        warnings.extend(_short_waits(index, candidate))
    warnings.extend(_stops_at_once(enabled))
    for error_class in POLICY_CLASSES:
        warnings.extend(_unreachable(enabled, error_class))
        warnings.extend(_long_budget(enabled, error_class))
    return warnings


def worst_case_seconds(policy: ClassPolicy) -> int:
    """The longest one candidate can hold a class of failure: its one reset wait plus
    every retry delay (attempt time not counted)."""
    wait = policy.wait_for_reset.max_wait_seconds if policy.wait_for_reset.enabled else 0
    return wait + sum(retry_delays(policy.retry, cap_seconds=MAX_RETRY_DELAY_SECONDS))


def _duplicates(profile: DynamicProfile) -> list[LintWarning]:
    first: dict[tuple[str, str | None, str | None], int] = {}
    warnings = []
    for index, candidate in enumerate(profile.candidates):
        target = (candidate.agent, candidate.provider, candidate.model)
        earlier = first.setdefault(target, index)
        if earlier != index:
            warnings.append(
                LintWarning(
                    f"candidates[{index}]",
                    f"same agent, provider and model as candidates[{earlier}]; falling back "
                    "to it reaches the same target again",
                )
            )
    return warnings


def _short_waits(index: int, candidate: Candidate) -> list[LintWarning]:
    warnings = []
    for error_class in POLICY_CLASSES:
        policy = candidate.policy.for_class(error_class)
        wait, retry = policy.wait_for_reset, policy.retry
        if (
            wait.enabled
            and retry.enabled
            and wait.max_wait_seconds < retry.initial_interval_seconds
        ):
            warnings.append(
                LintWarning(
                    f"candidates[{index}].{error_class.value}.wait_for_reset.max_wait_seconds",
                    f"{format_duration(wait.max_wait_seconds)} is shorter than the first retry "
                    f"delay ({format_duration(retry.initial_interval_seconds)}): a reset due "
                    "between the two is ignored and the retry waits longer",
                )
            )
    return warnings


def _stops_at_once(enabled: list[tuple[int, Candidate]]) -> list[LintWarning]:
    for _, candidate in enabled:
        for error_class in POLICY_CLASSES:
            policy = candidate.policy.for_class(error_class)
            if not policy.is_immediate or policy.on_exhausted is not Outcome.STOP:
                return []
    return [
        LintWarning(
            "candidates",
            "every candidate stops at once for both classes: no failure is ever retried, "
            "waited for or passed to another candidate",
        )
    ]


def _unreachable(
    enabled: list[tuple[int, Candidate]], error_class: ErrorClass
) -> list[LintWarning]:
    for position, (index, candidate) in enumerate(enabled[:-1]):
        if candidate.policy.for_class(error_class).on_exhausted is Outcome.STOP:
            later = ", ".join(f"candidates[{i}]" for i, _ in enabled[position + 1 :])
            return [
                LintWarning(
                    f"candidates[{index}].{error_class.value}.on_exhausted",
                    f"stop ends recovery here, so {later} never run after a "
                    f"{error_class.value} failure",
                )
            ]
    return []


def _long_budget(
    enabled: list[tuple[int, Candidate]], error_class: ErrorClass
) -> list[LintWarning]:
    total = 0
    for _, candidate in enabled:
        policy = candidate.policy.for_class(error_class)
        total += worst_case_seconds(policy)
        if policy.on_exhausted is Outcome.STOP:
            break
    if total <= DAY_SECONDS:
        return []
    return [
        LintWarning(
            error_class.value,
            f"{error_class.value} failures can hold a route for up to {format_duration(total)} "
            "across candidates, more than a day, before it succeeds or stops",
        )
    ]
