"""The profile parsers on garbage (issue 19): any JSON value, nested deep or holding huge
strings, is a profile or a refusal naming what is wrong — never another exception —
in bounded time."""

from __future__ import annotations

import json
import time
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from actors.errors import CorruptProfileError
from actors.routes.profiles import profile_from_json
from policy import DynamicProfile, PolicyError, parse_profile

HUGE = "x" * 1_000_000
CANDIDATE = {
    "id": "claude", "agent": "claude-acp", "provider": "anthropic",
    "transient": {"retry": {"enabled": False}, "wait_for_reset": {"enabled": False},
                  "on_exhausted": "stop"},
    "hard": {"retry": {"enabled": False}, "wait_for_reset": {"enabled": False},
             "on_exhausted": "stop"},
}  # fmt: skip

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=12), inner,
                                                               max_size=5),
    max_leaves=30,
)  # fmt: skip
near_profiles = st.fixed_dictionaries(
    {"candidates": st.lists(
        st.dictionaries(st.sampled_from(sorted(CANDIDATE)), json_values, max_size=7).map(
            lambda partial: {**CANDIDATE, **partial}), max_size=3)},
    optional={"version": json_values, "name": json_values},
)  # fmt: skip


def deep(depth: int) -> Any:
    value: Any = CANDIDATE
    for _ in range(depth):
        value = {"retry": value}
    return value


def refusals(value: Any) -> list[str]:
    """What each parser says of `value`: "" for a profile, else its refusal's text (any
    other exception propagates and fails the test)."""
    said = []
    try:
        assert isinstance(parse_profile(value), DynamicProfile)
        said.append("")
    except PolicyError as error:
        said.append(str(error) or "(empty)")
    try:
        profile_from_json("route-1", value)
        said.append("")
    except CorruptProfileError as error:
        said.append(error.detail or "(empty)")
    return said


def parse_both(value: Any) -> None:
    assert "(empty)" not in refusals(value)  # a refusal always says what is wrong


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.one_of(json_values, near_profiles))
def test_any_json_value_is_a_profile_or_a_refusal(value: Any) -> None:
    parse_both(value)


def test_deep_nesting_and_huge_strings_are_refused_in_bounded_time() -> None:
    nasty = [
        {"candidates": [deep(900)]},
        {"candidates": [{**CANDIDATE, "id": HUGE}]},
        {"candidates": [{**CANDIDATE, "agent": HUGE, "model": HUGE}]},
        {"candidates": [CANDIDATE] * 20_000},
        {"name": HUGE, "candidates": [CANDIDATE]},
        json.loads("[" * 500 + "]" * 500),
    ]
    for value in nasty:
        began = time.monotonic()
        parse_both(value)
        assert time.monotonic() - began < 5.0
