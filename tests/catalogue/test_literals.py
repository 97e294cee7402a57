"""The substring pre-check in front of each rule pattern must never hide a match."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from catalogue import default_catalogue
from catalogue.literals import complete_words, required_literals
from catalogue.text import make_views, tokens_of
from tests.catalogue.fixture_data import FIXTURES


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("credit balance is too low", ("credit balance is too low",)),
        (r"\b(?:cancell?ed|aborted)\b", ("cancel", "aborted")),
        ("foo.{0,40}barbaz|quux", ("barbaz", "quux")),
        ("(?:no|missing) api key", (" api key",)),
        (r"[a-z]+ x", None),
        ("ab|cdef", None),  # one alternative has no usable literal
        (r"\d{3} error", (" error",)),
    ],
)
def test_required_literals_are_derived_from_the_pattern(
    pattern: str, expected: tuple[str, ...] | None
) -> None:
    assert required_literals(re.compile(pattern)) == expected


def _views() -> list[str]:
    texts: list[str] = []
    for fixture in FIXTURES:
        evidence = fixture.raw["evidence"]
        text = "\n".join(str(evidence.get(k) or "") for k in ("text", "body"))
        texts.extend(make_views(text).views())
    return texts


def test_no_rule_pattern_matches_a_fixture_its_pre_checks_would_skip() -> None:
    views = [(view, tokens_of(view)) for view in _views()]
    hidden = []
    for rule in default_catalogue().rules:
        for probe in rule.match_probes + rule.require_probes + rule.unless_probes:
            for view, tokens in views:
                if probe.pattern.search(view) and not (
                    probe.found_in(view) and probe.possible(tokens)
                ):
                    hidden.append((rule.id, probe.pattern.pattern))
    assert hidden == []


@pytest.mark.parametrize(
    ("literal", "words"),
    [
        ("credit balance is too low", ["balance", "is", "too"]),
        ("you've hit", ["ve"]),
        (" api key", ["api"]),
        ("overloaded", []),
        ("x: ошибка y", []),
    ],
)
def test_only_words_bounded_inside_the_literal_count(literal: str, words: list[str]) -> None:
    assert complete_words(literal) == words


@given(st.text(alphabet="ab c.-_\n", max_size=60))
def test_pre_check_is_sound_on_arbitrary_text(text: str) -> None:
    for pattern in ("a b|b.a", r"\b(?:ab|ba)c\b", "a{2,}b", "(?:a|b) c", "ab.{0,5}ba"):
        compiled = re.compile(pattern)
        literals = required_literals(compiled)
        if compiled.search(text) and literals is not None:
            assert any(lit in text for lit in literals), (pattern, text)
