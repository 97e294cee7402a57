"""Lint warnings, the schedule preview in words and offsets, and the JSON Schema."""

from __future__ import annotations

from typing import Any

import pytest

from policy import (
    ClassPolicy,
    DynamicProfile,
    format_duration,
    lint_profile,
    parse_profile,
    policy_json_schema,
    preview_lines,
    preview_profile,
)
from tests.policy.builders import class_policy


def profile(*candidates: dict[str, Any]) -> DynamicProfile:
    return parse_profile({"name": "fleet", "candidates": list(candidates)})


def candidate(
    identifier: str,
    transient: ClassPolicy | None = None,
    hard: ClassPolicy | None = None,
    **fields: Any,
) -> dict[str, Any]:
    skip = class_policy()
    return {
        "id": identifier,
        "agent": fields.pop("agent", f"{identifier}-acp"),
        "transient": (transient or skip).model_dump(mode="json"),
        "hard": (hard or skip).model_dump(mode="json"),
        **fields,
    }


def warnings_of(value: DynamicProfile) -> list[str]:
    return [str(w) for w in lint_profile(value)]


def test_a_sensible_profile_has_no_warnings() -> None:
    value = profile(
        candidate("opus", class_policy(retries=3, interval=5, wait=300)),
        candidate("codex", class_policy(retries=1, interval=5, outcome="stop")),
    )
    assert warnings_of(value) == []


def test_a_profile_whose_every_candidate_stops_at_once_is_flagged() -> None:
    stop = class_policy(outcome="stop")
    value = profile(candidate("a", stop, stop))
    assert warnings_of(value) == [
        "candidates: every candidate stops at once for both classes: no failure is ever "
        "retried, waited for or passed to another candidate"
    ]


def test_a_stopping_candidate_before_others_makes_them_unreachable_for_that_class() -> None:
    value = profile(
        candidate("a", hard=class_policy(outcome="stop")), candidate("b"), candidate("c")
    )
    assert warnings_of(value) == [
        "candidates[0].hard.on_exhausted: stop ends recovery here, so candidates[1], "
        "candidates[2] never run after a hard failure"
    ]


def test_a_max_wait_shorter_than_the_first_retry_delay_is_flagged() -> None:
    value = profile(candidate("a", class_policy(retries=2, interval=600, wait=60)))
    assert warnings_of(value) == [
        "candidates[0].transient.wait_for_reset.max_wait_seconds: 1 min is shorter than the "
        "first retry delay (10 min): a reset due between the two is ignored and the retry "
        "waits longer"
    ]


def test_duplicate_and_disabled_only_candidates_are_flagged() -> None:
    twins = profile(
        candidate("a", agent="claude-acp", provider="anthropic", model="opus"),
        candidate("b", agent="claude-acp", provider="anthropic", model="opus"),
    )
    assert warnings_of(twins) == [
        "candidates[1]: same agent, provider and model as candidates[0]; falling back to it "
        "reaches the same target again"
    ]
    off = profile(candidate("a", enabled=False), candidate("b", enabled=False))
    assert warnings_of(off) == ["candidates: every candidate is disabled; the profile cannot run"]


@pytest.mark.parametrize(
    ("transient", "warned"),
    [
        (class_policy(retries=10, interval=3600), True),  # 1+2+4+8+16 h, then 24 h x5
        (class_policy(wait=86400), False),  # exactly a day
        (class_policy(wait=86401), True),
        (class_policy(retries=4, interval=3600), False),  # 15 h
    ],
)
def test_budgets_over_a_day_in_total_are_flagged(transient: ClassPolicy, warned: bool) -> None:
    messages = warnings_of(profile(candidate("a", transient)))
    assert any("more than a day" in m for m in messages) == warned


def test_budgets_add_up_across_candidates_until_one_stops() -> None:
    half_day = class_policy(wait=13 * 3600)
    value = profile(candidate("a", half_day), candidate("b", half_day))
    assert warnings_of(value) == [
        "transient: transient failures can hold a route for up to 1 d 2 h across candidates, "
        "more than a day, before it succeeds or stops"
    ]


def test_preview_gives_the_schedule_in_words_and_offsets() -> None:
    value = profile(
        candidate("opus", class_policy(retries=3, interval=5, wait=300), agent="claude-acp"),
        candidate("spare", enabled=False),
        candidate("codex", hard=class_policy(outcome="stop"), agent="codex-acp"),
    )
    assert preview_lines(value) == [
        "profile fleet: 3 candidates",
        "candidate 1 opus (claude-acp)",
        "  transient: if a trusted reset ≤ 5 min away is reported, wait for it once; retry 3× "
        "after 5 s, 10 s, 20 s (at +5 s, +15 s, +35 s); then skip to candidate 3 (codex)",
        "  hard: no retry and no wait: skip to candidate 3 (codex)",
        "candidate 2 spare (spare-acp): disabled, never tried",
        "candidate 3 codex (codex-acp)",
        "  transient: no retry and no wait: skip; no candidate is left, so the route stops for "
        "manual recovery",
        "  hard: no retry and no wait: stop for manual recovery",
    ]


def test_preview_of_a_hard_policy_names_the_codes_that_skip_its_steps() -> None:
    value = profile(candidate("a", hard=class_policy(retries=1, interval=5, outcome="stop")))
    (_, hard) = preview_profile(value)
    assert hard.summary == (
        "retry 1× after 5 s (at +5 s); then stop for manual recovery; context_length_exceeded "
        "goes straight to that outcome; content_policy always stops for manual recovery"
    )


def test_preview_json_lists_delays_offsets_and_the_next_candidate() -> None:
    value = profile(candidate("a", class_policy(retries=10, interval=3600)), candidate("b"))
    transient = preview_profile(value)[0].as_json()
    assert transient["retry_delays_s"] == [3600 * 2**n for n in range(5)] + [86400] * 5
    assert transient["retry_offsets_s"][-1] == 31 * 3600 + 5 * 86400
    assert transient["next_candidate"] == "b"
    assert transient["max_wait_s"] is None


@pytest.mark.parametrize(
    ("seconds", "words"),
    [
        (0, "0 s"),
        (1, "1 s"),
        (0.25, "0.25 s"),
        (59, "59 s"),
        (60, "1 min"),
        (90, "1 min 30 s"),
        (3600, "1 h"),
        (86400, "1 d"),
        (604800, "7 d"),
        (93784, "1 d 2 h 3 min 4 s"),
    ],
)
def test_durations_read_as_words(seconds: float, words: str) -> None:
    assert format_duration(seconds) == words


def test_the_profile_schema_describes_candidates_and_bounds() -> None:
    schema = policy_json_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["required"] == ["candidates"]
    retry = schema["$defs"]["RetryPolicy"]
    assert retry["then"]["properties"]["max_retries"] == {"minimum": 1, "maximum": 10}
    assert retry["then"]["properties"]["initial_interval_seconds"] == {
        "minimum": 1,
        "maximum": 3600,
    }
    wait = schema["$defs"]["WaitForResetPolicy"]
    assert wait["then"]["properties"]["max_wait_seconds"] == {"minimum": 1, "maximum": 604800}
    assert schema["$defs"]["Outcome"]["enum"] == ["skip", "stop"]


def test_the_document_schema_requires_both_classes_and_the_version() -> None:
    schema = policy_json_schema("document")
    assert schema["required"] == ["version", "transient", "hard"]
    assert schema["properties"]["version"]["const"] == 1
    assert schema["additionalProperties"] is False
